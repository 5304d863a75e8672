//! Loading graphs and rewriting them: `load_bytes`, `load_path`,
//! `rewrite`, and the `Module` class they return.
//!
//! A `Module` is immutable: `rewrite` works on a copy and returns a new
//! one. It keeps the text it was read from, so diagnostics of later steps
//! (rewriting, lowering, running) point into the user's input.

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use tpu_rewrite::diagnostics::{AnyDiagnostic, WindowedSource};
use tpu_rewrite::ir::functions::is_function;
use tpu_rewrite::passes::gradients::{GradientClusterPolicy, GradientsConfig};
use tpu_rewrite::passes::{self, AllReduceFusion, DiagnosticSource, FusionConfig, PassSelection, PipelineConfig};
use tpu_rewrite::passes::{ReplicateCluster, VerifyMode};
use tpu_rewrite::tf::{self, GraphDefFormat};

use crate::error::{boxed, distinct, is_error, DiagnosticInfo, Failure, PyLayerError};
use crate::without_gil;

/// How the bytes of an input are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Opg,
    Pbtxt,
    Pb,
}

impl Format {
    fn parse(name: &str) -> Result<Format, Failure> {
        match name {
            "opg" => Ok(Format::Opg),
            "pbtxt" => Ok(Format::Pbtxt),
            "pb" => Ok(Format::Pb),
            other => Err(Failure::of(PyLayerError::Argument {
                message: format!("format must be \"opg\", \"pbtxt\" or \"pb\", not {other:?}"),
            })),
        }
    }

    /// The format the extension of `path` names.
    fn of_path(path: &std::path::Path) -> Option<Format> {
        match tf::format_for_path(path) {
            Some(GraphDefFormat::Text) => Some(Format::Pbtxt),
            Some(GraphDefFormat::Binary) => Some(Format::Pb),
            None => path.extension().is_some_and(|e| e == "opg").then_some(Format::Opg),
        }
    }

    /// The format the bytes look like: `.opg` when they start as one, else
    /// what the GraphDef sniffer says, else `.opg` (whose parser then names
    /// what is wrong).
    fn sniff(bytes: &[u8]) -> Format {
        let start = bytes.trim_ascii_start();
        if start.starts_with(b"graph") || start.starts_with(b"//") {
            return Format::Opg;
        }
        match tf::sniff_format(bytes) {
            Some(GraphDefFormat::Text) => Format::Pbtxt,
            Some(GraphDefFormat::Binary) if !bytes.is_empty() => Format::Pb,
            _ => Format::Opg,
        }
    }
}

/// A cluster as Python sees it: names, not node ids.
#[derive(Clone)]
pub struct ClusterInfo {
    name: String,
    num_replicas: u32,
    num_cores_per_replica: u32,
    members: Vec<String>,
    inputs: Vec<String>,
    outputs: Vec<String>,
}

impl ClusterInfo {
    fn of(graph: &tpu_rewrite::Graph, cluster: &ReplicateCluster) -> ClusterInfo {
        let names = |ids: &[tpu_rewrite::NodeId]| ids.iter().map(|&id| graph.node(id).name.to_string()).collect();
        ClusterInfo {
            name: cluster.name.clone(),
            num_replicas: cluster.num_replicas,
            num_cores_per_replica: cluster.num_cores_per_replica,
            members: names(&cluster.members),
            inputs: names(&cluster.inputs),
            outputs: names(&cluster.outputs),
        }
    }
}

/// A graph module: loaded, or loaded and rewritten.
#[pyclass(frozen, module = "tpu_rewrite")]
pub struct Module {
    pub(crate) module: Arc<tpu_rewrite::Module>,
    pub(crate) source: Arc<WindowedSource>,
    /// Whether the rewrite passes ran on it.
    pub(crate) rewritten: bool,
    /// A SavedModel function's captured variables with their checkpoint
    /// values (by `VarHandleOp` name); empty for any other input.
    pub(crate) variables: Arc<Vec<(String, tpu_rewrite::ir::TensorLit)>>,
    clusters: Vec<ClusterInfo>,
    warnings: Vec<DiagnosticInfo>,
}

impl Module {
    /// The first graph (a GraphDef imports as one graph `@main`).
    pub(crate) fn main_graph(&self) -> Result<&tpu_rewrite::Graph, Failure> {
        self.module.graphs.iter().find(|g| !is_function(g)).ok_or_else(|| Failure::of(PyLayerError::NoGraph))
    }
}

/// Keeps the errors of `diagnostics` as a failure, the rest as warnings.
fn split_warnings(
    diagnostics: Vec<AnyDiagnostic>,
    source: &Arc<WindowedSource>,
) -> Result<Vec<DiagnosticInfo>, Failure> {
    let diagnostics = distinct(diagnostics);
    if diagnostics.iter().any(is_error) {
        return Err(Failure::at(diagnostics, source));
    }
    Ok(diagnostics.iter().map(|d| DiagnosticInfo::of(d.as_ref(), source)).collect())
}

/// Parses (and for a GraphDef imports and verifies) `bytes`.
fn load(bytes: Vec<u8>, name: String, format: Format) -> Result<Module, Failure> {
    let limit = tpu_rewrite::syntax::MAX_SOURCE_BYTES;
    if bytes.len() > limit {
        let reason = format!("it is {} bytes; inputs of at most {limit} bytes are read", bytes.len());
        return Err(Failure::of(PyLayerError::Read { path: name, reason }));
    }
    let (module, diagnostics, source) = match format {
        Format::Opg => {
            let parsed = tpu_rewrite::parse_module(&bytes);
            let source = Arc::new(WindowedSource::from_vec(name, bytes));
            match parsed {
                Ok((module, errors)) => (module, boxed(errors), source),
                Err(e) => return Err(Failure::at(vec![Box::new(e)], &source)),
            }
        }
        Format::Pbtxt | Format::Pb => {
            let graphdef = if format == Format::Pbtxt { GraphDefFormat::Text } else { GraphDefFormat::Binary };
            let imported = tf::import_graphdef(&bytes, graphdef);
            // A binary GraphDef has no text to point into.
            let text = if format == Format::Pbtxt { bytes } else { Vec::new() };
            let source = Arc::new(WindowedSource::from_vec(name, text));
            match imported {
                Ok((module, errors)) => {
                    let mut diagnostics = boxed(errors);
                    if !diagnostics.iter().any(is_error) {
                        diagnostics.extend(boxed(tpu_rewrite::ir::verify::verify(&module)));
                    }
                    (module, diagnostics, source)
                }
                Err(e) => return Err(Failure::at(vec![Box::new(e)], &source)),
            }
        }
    };
    let warnings = split_warnings(diagnostics, &source)?;
    Ok(Module {
        module: Arc::new(module),
        source,
        rewritten: false,
        variables: Arc::default(),
        clusters: Vec::new(),
        warnings,
    })
}

/// Loads function `function` (default: the serving signature) of the
/// SavedModel in `dir`, its variables with their checkpoint values.
fn load_saved_model(dir: &std::path::Path, name: String, function: Option<&str>) -> Result<Module, Failure> {
    let source = Arc::new(WindowedSource::from_vec(name, Vec::new()));
    let imported = tf::saved_model::load(dir, function).map_err(|e| Failure::at(vec![Box::new(e)], &source))?;
    let warnings = split_warnings(boxed(imported.warnings), &source)?;
    let variables = imported.captured.variables.into_iter().map(|v| (v.name, v.value)).collect();
    Ok(Module {
        module: Arc::new(imported.module),
        source,
        rewritten: false,
        variables: Arc::new(variables),
        clusters: Vec::new(),
        warnings,
    })
}

/// Reads a graph from bytes (`format`: "opg", "pbtxt", "pb" or None to
/// decide by the bytes); `name` is the file name diagnostics show.
#[pyfunction]
#[pyo3(signature = (data, name, format=None))]
pub fn load_bytes(py: Python<'_>, data: &[u8], name: String, format: Option<String>) -> PyResult<Module> {
    let bytes = data.to_vec();
    without_gil(py, move || {
        let format = match format.as_deref() {
            Some(f) => Format::parse(f)?,
            None => Format::sniff(&bytes),
        };
        load(bytes, name, format)
    })
}

/// Reads a graph from a file (`format`: as for `load_bytes`; None decides
/// by the extension, then by the bytes), or function `function` (default:
/// the serving signature) of a SavedModel (a directory, or its
/// `saved_model.pb`).
#[pyfunction]
#[pyo3(signature = (path, format=None, function=None))]
pub fn load_path(py: Python<'_>, path: PathBuf, format: Option<String>, function: Option<String>) -> PyResult<Module> {
    without_gil(py, move || {
        let name = path.display().to_string();
        if format.is_none() {
            if let Some(dir) = tf::saved_model::saved_model_dir(&path) {
                return load_saved_model(&dir, name, function.as_deref());
            }
        }
        if function.is_some() {
            return Err(Failure::of(PyLayerError::Argument {
                message: format!(
                    "function picks a function of a SavedModel (a directory, or its saved_model.pb); {name} is not one"
                ),
            }));
        }
        let limit = tpu_rewrite::syntax::MAX_SOURCE_BYTES as u64;
        if let Ok(meta) = std::fs::metadata(&path) {
            if meta.len() > limit {
                let reason = format!("it is {} bytes; inputs of at most {limit} bytes are read", meta.len());
                return Err(Failure::of(PyLayerError::Read { path: name, reason }));
            }
        }
        let bytes = std::fs::read(&path)
            .map_err(|e| Failure::of(PyLayerError::Read { path: name.clone(), reason: e.to_string() }))?;
        let format = match format.as_deref() {
            Some(f) => Format::parse(f)?,
            None => Format::of_path(&path).unwrap_or_else(|| Format::sniff(&bytes)),
        };
        load(bytes, name, format)
    })
}

/// The options of `rewrite`, as Python passes them.
pub struct RewriteOptions {
    pub passes: Option<Vec<String>>,
    pub gradient_cluster_policy: String,
    pub functionalize: bool,
    pub all_reduce_fusion: bool,
    pub verify_each_pass: bool,
}

impl Default for RewriteOptions {
    fn default() -> Self {
        RewriteOptions {
            passes: None,
            gradient_cluster_policy: "nested".into(),
            functionalize: false,
            all_reduce_fusion: false,
            verify_each_pass: false,
        }
    }
}

fn pipeline_config(options: &RewriteOptions) -> Result<PipelineConfig, Failure> {
    let passes = match &options.passes {
        None => PassSelection::default(),
        Some(list) => PassSelection::parse(&list.join(",")).map_err(Failure::of)?,
    };
    let policy = match options.gradient_cluster_policy.as_str() {
        "nested" => GradientClusterPolicy::Nested,
        "flat" => GradientClusterPolicy::Flat,
        other => {
            return Err(Failure::of(PyLayerError::Argument {
                message: format!("gradient_cluster_policy must be \"nested\" or \"flat\", not {other:?}"),
            }))
        }
    };
    Ok(PipelineConfig {
        passes,
        verify: if options.verify_each_pass { VerifyMode::AfterEachPass } else { VerifyMode::AtEnd },
        gradients: GradientsConfig { policy },
        all_reduce_fusion: if options.all_reduce_fusion {
            AllReduceFusion::On(FusionConfig::default())
        } else {
            AllReduceFusion::Off
        },
        ..PipelineConfig::default()
    })
}

/// Runs the pipeline on a copy of `input` (without the GIL).
pub fn rewrite_module(input: &Module, options: &RewriteOptions) -> Result<Module, Failure> {
    let config = pipeline_config(options)?;
    let mut module = (*input.module).clone();
    let source = input.source.clone();
    let report = passes::run_pipeline(&mut module, &config);
    let mut diagnostics: Vec<AnyDiagnostic> = report
        .diagnostics
        .into_iter()
        .map(|d| match d.source {
            DiagnosticSource::Pass(e) => Box::new(e) as AnyDiagnostic,
            DiagnosticSource::Verify(e) => Box::new(e) as AnyDiagnostic,
        })
        .collect();
    if !diagnostics.iter().any(is_error)
        && options.functionalize
        && passes::functionalize::module_has_tf1_control_flow(&module)
    {
        diagnostics.extend(boxed(passes::functionalize::functionalize(&mut module)));
        if !diagnostics.iter().any(is_error) {
            diagnostics.extend(boxed(tpu_rewrite::ir::verify::verify(&module)));
        }
    }
    let warnings = split_warnings(diagnostics, &source)?;
    // The clusters of the first graph, read from its tags.
    let clusters = match module.graphs.iter().find(|g| !is_function(g)) {
        Some(graph) => passes::form_clusters(graph).0.iter().map(|c| ClusterInfo::of(graph, c)).collect(),
        None => Vec::new(),
    };
    Ok(Module {
        module: Arc::new(module),
        source,
        rewritten: true,
        variables: input.variables.clone(),
        clusters,
        warnings,
    })
}

/// Runs the rewrite passes; returns the rewritten module.
#[pyfunction]
#[pyo3(signature = (module, passes=None, gradient_cluster_policy="nested".to_string(), functionalize=false, all_reduce_fusion=false, verify_each_pass=false))]
pub fn rewrite(
    py: Python<'_>,
    module: &Module,
    passes: Option<Vec<String>>,
    gradient_cluster_policy: String,
    functionalize: bool,
    all_reduce_fusion: bool,
    verify_each_pass: bool,
) -> PyResult<Module> {
    let options =
        RewriteOptions { passes, gradient_cluster_policy, functionalize, all_reduce_fusion, verify_each_pass };
    without_gil(py, || rewrite_module(module, &options))
}

#[pymethods]
impl Module {
    /// Whether the rewrite passes ran on this module.
    #[getter]
    fn rewritten(&self) -> bool {
        self.rewritten
    }

    /// The file name diagnostics show.
    #[getter]
    fn name(&self) -> &str {
        self.source.name()
    }

    /// The graphs' names, functions included.
    #[getter]
    fn graphs(&self) -> Vec<String> {
        self.module.graphs.iter().map(|g| g.name.to_string()).collect()
    }

    /// The replicate clusters of the first graph (after `rewrite`; empty
    /// before): dicts of name, num_replicas, num_cores_per_replica and the
    /// node names of its members, inputs and outputs.
    #[getter]
    fn clusters<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for c in &self.clusters {
            let dict = PyDict::new(py);
            dict.set_item("name", &c.name)?;
            dict.set_item("num_replicas", c.num_replicas)?;
            dict.set_item("num_cores_per_replica", c.num_cores_per_replica)?;
            dict.set_item("members", &c.members)?;
            dict.set_item("inputs", &c.inputs)?;
            dict.set_item("outputs", &c.outputs)?;
            list.append(dict)?;
        }
        Ok(list)
    }

    /// The warnings of loading and rewriting, as dicts (see `Error.diagnostics`).
    #[getter]
    fn diagnostics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for w in &self.warnings {
            list.append(w.to_dict(py)?)?;
        }
        Ok(list)
    }

    /// The module as canonical `.opg` text.
    fn to_opg(&self, py: Python<'_>) -> PyResult<String> {
        without_gil(py, || tpu_rewrite::emit::text::print_module_checked(&self.module).map_err(Failure::of))
    }

    /// The module as Graphviz DOT.
    fn to_dot(&self, py: Python<'_>) -> String {
        py.detach(|| tpu_rewrite::emit::dot::to_dot(&self.module))
    }

    /// The module as JSON text (the schema of `tpu-rewrite emit --format json`).
    fn to_json(&self, py: Python<'_>) -> String {
        py.detach(|| tpu_rewrite::emit::json::to_json_string(&self.module))
    }

    /// The first graph as a binary TensorFlow GraphDef, its functions in
    /// the library: bytes `tf.compat.v1.GraphDef.FromString` reads.
    fn to_graph_def<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = without_gil(py, || Ok(prost::Message::encode_to_vec(&self.graph_def()?)))?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// The first graph as a GraphDef in protobuf text format.
    fn to_pbtxt(&self, py: Python<'_>) -> PyResult<String> {
        without_gil(py, || Ok(tf::pbtxt_print::print_graphdef(&self.graph_def()?)))
    }

    fn __repr__(&self) -> String {
        let state = if self.rewritten { "rewritten" } else { "loaded" };
        format!(
            "<tpu_rewrite.Module {:?}: {} graph(s), {} node(s), {} cluster(s), {state}>",
            self.source.name(),
            self.module.graphs.len(),
            self.module.node_count(),
            self.clusters.len()
        )
    }
}

impl Module {
    fn graph_def(&self) -> Result<tf::proto::GraphDef, Failure> {
        let graph = self.main_graph()?;
        let functions: Vec<&tpu_rewrite::Graph> = self.module.graphs.iter().filter(|g| is_function(g)).collect();
        tf::to_graphdef_with_functions(graph, &functions).map_err(|e| Failure::at(boxed(e), &self.source))
    }
}
