//! Lowering: `lower` and the `Lowered` class (the per-device programs, the
//! device assignment, StableHLO).
//!
//! A `Lowered` keeps the rewritten (tagged) module beside its lowering:
//! the simulator runs the lowered programs, while StableHLO and PJRT are
//! made from the tagged graph and the device assignment, as the CLI makes
//! them. For those, TF1 control flow is rewritten into functional ops on a
//! copy first (StableHLO has no frames), which keeps the clusters and so
//! the assignment. A plain graph (no replicate cluster) is lowered as the
//! CLI lowers it: one single-replica cluster carrying the graph's results
//! (`tpu_rewrite::session::plain`), its initialisers run first.

use std::sync::Arc;

use numpy::{PyArray, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use tpu_rewrite::diagnostics::WindowedSource;
use tpu_rewrite::ir::functions::is_function;
use tpu_rewrite::lower::{self as lowering, DeviceAssignment, LowerConfig, LowerFailure, Topology};
use tpu_rewrite::passes;
use tpu_rewrite::passes::single_replica::{SingleReplica, Unlowered};
use tpu_rewrite::session::{self, plain::PlainConfig};
use tpu_rewrite::xla::host::MissingFeed;
use tpu_rewrite::xla::stablehlo::{self, HostTransfer};

use crate::convert::tensor_to_py;
use crate::error::{boxed, Failure, PyLayerError};
use crate::graph::{rewrite_module, Module, RewriteOptions};
use crate::without_gil;

/// A lowered module.
#[pyclass(frozen, module = "tpu_rewrite")]
pub struct Lowered {
    /// The rewritten module the programs were lowered from.
    pub(crate) tagged: Arc<tpu_rewrite::Module>,
    /// The host, init and device programs.
    pub(crate) programs: tpu_rewrite::Module,
    pub(crate) assignment: DeviceAssignment,
    pub(crate) steps_per_run: u32,
    pub(crate) source: Arc<WindowedSource>,
    /// For a plain graph: its single-replica cluster (results, host ops).
    pub(crate) single: Option<SingleReplica>,
}

/// The options of `lower`, as Python passes them.
pub struct LowerOptions {
    pub topology: String,
    pub num_replicas: Option<u32>,
    pub cores_per_replica: Option<u32>,
    pub device_assignment: Option<String>,
    pub steps_per_run: u32,
    /// For a plain graph: start from the feeds and the variables as they are, without running the initialisers.
    pub skip_initializers: bool,
}

fn lower_config(options: &LowerOptions) -> Result<LowerConfig, tpu_rewrite::LowerError> {
    let topology = Topology::parse(&options.topology)?;
    let device_assignment = match &options.device_assignment {
        Some(table) => Some(DeviceAssignment::parse_table(&topology, table)?),
        None => None,
    };
    Ok(LowerConfig {
        topology,
        num_replicas: options.num_replicas,
        cores_per_replica: options.cores_per_replica,
        device_assignment,
        steps_per_run: options.steps_per_run.max(1),
    })
}

/// Rewrites `module` with the default passes when it is not rewritten yet,
/// then lowers it (without the GIL).
pub fn lower_module(module: &Module, options: &LowerOptions) -> Result<Lowered, Failure> {
    let rewritten;
    let module = if module.rewritten {
        module
    } else {
        rewritten = rewrite_module(module, &RewriteOptions::default())?;
        &rewritten
    };
    let config = lower_config(options).map_err(|e| Failure::at(vec![Box::new(e)], &module.source))?;
    let (mut clusters, errors) = passes::form_clusters(module.main_graph()?);
    if errors.iter().any(|e| !e.is_warning()) {
        return Err(Failure::at(boxed(errors), &module.source));
    }
    // A plain graph becomes one single-replica cluster, as `tpu-rewrite run` makes it.
    let mut tagged = module.module.clone();
    let mut single = None;
    if clusters.is_empty() {
        let mut plain = (*module.module).clone();
        let config = PlainConfig {
            fetches: &[],
            unlowered: Unlowered::InCluster,
            variables: &module.variables,
            skip_initializers: options.skip_initializers,
            data_parallel: None,
        };
        match session::plain::cluster(&mut plain, &config) {
            Ok(Some((made, formed))) => {
                single = Some(made);
                clusters = formed;
                tagged = Arc::new(plain);
            }
            Ok(None) => return Err(Failure::of(PyLayerError::NoGraph)),
            Err(errors) => return Err(Failure::at(errors, &module.source)),
        }
    }
    let graph = Lowered::graph_of(&tagged)?;
    let mut lowered = match lowering::lower_clusters(graph, clusters, &config) {
        Ok(lowered) => lowered,
        Err(LowerFailure::Lower(errors)) => return Err(Failure::at(boxed(errors), &module.source)),
        Err(LowerFailure::Clusters(errors)) => return Err(Failure::at(boxed(errors), &module.source)),
    };
    // The bodies of While / If / calls travel with the programs that call them.
    tpu_rewrite::ir::functions::carry_functions(&tagged, &mut lowered.module);
    Ok(Lowered {
        tagged,
        programs: lowered.module,
        assignment: lowered.assignment,
        steps_per_run: config.steps_per_run,
        source: module.source.clone(),
        single,
    })
}

/// Lowers a module to one program per device (rewriting it first with the
/// default passes if `rewrite` did not).
#[pyfunction]
#[pyo3(signature = (module, topology="1x8".to_string(), num_replicas=None, cores_per_replica=None, device_assignment=None, steps_per_run=1, skip_initializers=false))]
#[allow(clippy::too_many_arguments)]
pub fn lower(
    py: Python<'_>,
    module: &Module,
    topology: String,
    num_replicas: Option<u32>,
    cores_per_replica: Option<u32>,
    device_assignment: Option<String>,
    steps_per_run: u32,
    skip_initializers: bool,
) -> PyResult<Lowered> {
    let options =
        LowerOptions { topology, num_replicas, cores_per_replica, device_assignment, steps_per_run, skip_initializers };
    without_gil(py, || lower_module(module, &options))
}

/// Parses `host_transfer`.
pub fn host_transfer(name: Option<&str>) -> Result<Option<HostTransfer>, Failure> {
    match name {
        None => Ok(None),
        Some("callback") => Ok(Some(HostTransfer::Callback)),
        Some("send-recv") => Ok(Some(HostTransfer::SendRecv)),
        Some("stages") => Ok(Some(HostTransfer::Stages)),
        Some(other) => Err(Failure::of(PyLayerError::Argument {
            message: format!("host_transfer must be \"callback\", \"send-recv\" or \"stages\", not {other:?}"),
        })),
    }
}

impl Lowered {
    /// The tagged module as XLA takes it: TF1 control flow made functional.
    pub(crate) fn for_xla(&self) -> Result<Arc<tpu_rewrite::Module>, Failure> {
        if !passes::functionalize::module_has_tf1_control_flow(&self.tagged) {
            return Ok(self.tagged.clone());
        }
        let mut module = (*self.tagged).clone();
        let mut errors = boxed(passes::functionalize::functionalize(&mut module));
        if errors.is_empty() {
            errors.extend(boxed(tpu_rewrite::ir::verify::verify(&module)));
        }
        if !errors.is_empty() {
            return Err(Failure::at(errors, &self.source));
        }
        Ok(Arc::new(module))
    }

    /// The first graph of `module`.
    pub(crate) fn graph_of(module: &tpu_rewrite::Module) -> Result<&tpu_rewrite::Graph, Failure> {
        module.graphs.iter().find(|g| !is_function(g)).ok_or_else(|| Failure::of(PyLayerError::NoGraph))
    }
}

#[pymethods]
impl Lowered {
    /// Replicas of the assignment.
    #[getter]
    fn num_replicas(&self) -> u32 {
        self.assignment.num_replicas
    }

    /// Logical cores per replica.
    #[getter]
    fn cores_per_replica(&self) -> u32 {
        self.assignment.cores_per_replica
    }

    /// Device iterations per run.
    #[getter]
    fn steps_per_run(&self) -> u32 {
        self.steps_per_run
    }

    /// For a plain graph, what its single-replica cluster is (the ops on
    /// the host, the results chosen, the variables its initialisers set),
    /// as `tpu-rewrite run` says it on stderr; `None` for a replicated graph.
    #[getter]
    fn plain(&self) -> Option<String> {
        self.single.as_ref().map(session::plain::describe)
    }

    /// `[replica, logical core]` → device id (`task * cores_per_host +
    /// core`, the ids the StableHLO modules and PJRT use), as int64.
    #[getter]
    fn device_assignment<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let per_host = i64::from(self.assignment.topology.cores_per_host);
        let ids: Vec<i64> =
            self.assignment.cores.iter().flatten().map(|c| i64::from(c.task) * per_host + i64::from(c.core)).collect();
        let shape = [self.assignment.num_replicas as usize, self.assignment.cores_per_replica as usize];
        Ok(PyArray::from_vec(py, ids).reshape(shape)?.into_any())
    }

    /// The lowered programs (host, init, one per cluster and core) as `.opg` text.
    fn to_opg(&self, py: Python<'_>) -> PyResult<String> {
        without_gil(py, || tpu_rewrite::emit::text::print_module_checked(&self.programs).map_err(Failure::of))
    }

    /// Every cluster's device program as StableHLO text, the modules
    /// separated by `// -----` lines, as `tpu-rewrite lower --format
    /// stablehlo` prints them. Unfed placeholders are ones.
    #[pyo3(signature = (host_transfer=None))]
    fn stablehlo(&self, py: Python<'_>, host_transfer: Option<String>) -> PyResult<String> {
        without_gil(py, || {
            let transfer = crate::lowered::host_transfer(host_transfer.as_deref())?.unwrap_or_default();
            let module = self.for_xla()?;
            let graph = Self::graph_of(&module)?;
            stablehlo::emit_all(graph, &self.assignment, self.steps_per_run, transfer, Some(&module))
                .map_err(|e| Failure::at(vec![Box::new(e)], &self.source))
        })
    }

    /// Each StableHLO module with what its signature means, as dicts:
    /// `module` (text), `arguments` (names), `argument_values` (one array
    /// per argument, replicas along axis 0: what a run passes), `outputs`
    /// (computation output names), `variables` (the variables returned
    /// last, in argument order), `num_replicas`, `num_partitions` and
    /// `device_ids` (`[replica][partition]`).
    #[pyo3(signature = (host_transfer=None))]
    fn programs<'py>(&self, py: Python<'py>, host_transfer: Option<String>) -> PyResult<Bound<'py, PyList>> {
        let (graph_module, stages) = without_gil(py, || {
            let transfer = crate::lowered::host_transfer(host_transfer.as_deref())?.unwrap_or_default();
            let module = self.for_xla()?;
            let graph = Self::graph_of(&module)?;
            let (clusters, _) = passes::form_clusters(graph);
            let config = stablehlo::Config {
                steps_per_run: self.steps_per_run,
                feeds: &[],
                missing_feed: MissingFeed::Ones,
                host_transfer: transfer,
                run: 0,
                library: Some(&module),
                host_effects: false,
                // As `tpu-rewrite lower --format stablehlo` by default: independent sums share all-reduces.
                pack_sums: true,
            };
            let mut stages = Vec::new();
            for cluster in &clusters {
                let staged = stablehlo::emit_module(graph, cluster, &self.assignment, &config)
                    .map_err(|e| Failure::at(vec![Box::new(e)], &self.source))?;
                stages.extend(staged.stages);
            }
            Ok((module.clone(), stages))
        })?;
        let graph = Self::graph_of(&graph_module).map_err(|f| f.into_py(py))?;
        let numpy = py.import("numpy")?;
        let list = PyList::empty(py);
        for stage in stages {
            let dict = PyDict::new(py);
            dict.set_item("module", &stage.module)?;
            let names: Vec<String> = stage.args.iter().map(|a| stablehlo::arg_name(graph, a)).collect();
            dict.set_item("arguments", names)?;
            let values = PyList::empty(py);
            for per_replica in stage.arg_values {
                let arrays = PyList::empty(py);
                for t in per_replica {
                    arrays.append(tensor_to_py(py, t)?)?;
                }
                values.append(numpy.call_method1("stack", (arrays,))?)?;
            }
            dict.set_item("argument_values", values)?;
            let output_names: Vec<String> = stage.outputs.iter().map(|o| graph.node(o.node).name.to_string()).collect();
            dict.set_item("outputs", output_names)?;
            let variables: Vec<String> = stage.variables.iter().map(|&v| graph.node(v).name.to_string()).collect();
            dict.set_item("variables", variables)?;
            dict.set_item("num_replicas", stage.num_replicas)?;
            dict.set_item("num_partitions", stage.num_partitions)?;
            dict.set_item("device_ids", stage.device_ids)?;
            list.append(dict)?;
        }
        Ok(list)
    }

    fn __repr__(&self) -> String {
        format!(
            "<tpu_rewrite.Lowered {:?}: {} program(s), {} replica(s) x {} core(s)>",
            self.source.name(),
            self.programs.graphs.iter().filter(|g| !is_function(g)).count(),
            self.assignment.num_replicas,
            self.assignment.cores_per_replica
        )
    }
}
