//! Running a lowered module on the simulator or on PJRT: `run_lowered`.
//!
//! Without fetches, the run fetches every computation output (each
//! replica's `output_<i>_shard_<r>`) and groups them by output: an output
//! with a reduce op gives one value, any other one value per replica.
//! Each output is named by the tensor the computation returns, by the
//! library's naming (`tpu_rewrite::session::outputs`) that `tpu-rewrite run
//! --json` uses; a plain graph's fetches are carried by its cluster's
//! outputs and keep the names they were asked by. The simulator checks for signals after every device
//! iteration, so Ctrl-C stops a long run with `KeyboardInterrupt`; a PJRT
//! run checks before it starts (XLA cannot stop an execution).

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use tpu_rewrite::exec::driver::RunOutcome;
use tpu_rewrite::exec::{self, driver, preflight, OutputValue, Tensor};
use tpu_rewrite::session::{self, outputs};
use tpu_rewrite::xla::cache::CompileCache;

use crate::convert::{tensor_from_py, tensor_to_py};
use crate::error::{boxed, Failure, PyLayerError};
use crate::lowered::{host_transfer, Lowered};
use crate::without_gil;

/// What a run gives back before it crosses to Python.
enum Values {
    /// Grouped computation outputs: name, reduce op, value.
    Outputs(Vec<(String, Option<exec::ReduceOp>, OutputValue)>),
    /// The tensors asked for, in order.
    Fetched(Vec<(String, Tensor)>),
}

/// The backend's run, with the GIL released.
struct Request<'a> {
    lowered: &'a Lowered,
    feeds: Vec<(String, Tensor)>,
    fetches: Option<Vec<String>>,
    steps: u32,
    backend: &'a str,
    timeout: Duration,
    deadline: Option<Duration>,
    plugin: Option<PathBuf>,
    host_transfer: Option<String>,
    /// Where PJRT keeps compiled executables between runs; `None` compiles every run.
    compile_cache: Option<CompileCache>,
    /// Whether the PJRT program checks indices, list capacities and optionals on the device.
    device_checks: bool,
}

fn run_sim(request: &Request, fetches: &[String]) -> Result<RunOutcome, Failure> {
    let lowered = request.lowered;
    let config =
        driver::RunConfig { steps: request.steps.max(1), timeout: request.timeout, deadline: request.deadline };
    let mut interrupted = None;
    let result =
        driver::run_until(&lowered.programs, &request.feeds, fetches, &config, &mut |_, _| match Python::attach(|py| {
            py.check_signals()
        }) {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => {
                interrupted = Some(e);
                ControlFlow::Break(())
            }
        });
    match (result, interrupted) {
        (_, Some(e)) => Err(Failure::Python(e)),
        (Ok(outcome), None) => Ok(outcome),
        (Err(e), None) => Err(Failure::at(vec![Box::new(e)], &lowered.source)),
    }
}

fn run_pjrt(request: &Request, fetches: &[String]) -> Result<RunOutcome, Failure> {
    let lowered = request.lowered;
    Python::attach(|py| py.check_signals()).map_err(Failure::Python)?;
    let module = lowered.for_xla()?;
    let graph = Lowered::graph_of(&module)?;
    let config = tpu_rewrite::xla::backend::RunConfig {
        plugin: request.plugin.as_deref(),
        steps: request.steps.max(1),
        steps_per_run: lowered.steps_per_run,
        feeds: &request.feeds,
        host_transfer: host_transfer(request.host_transfer.as_deref())?,
        fetch: fetches,
        library: Some(&module),
        no_device_checks: !request.device_checks,
        compile_cache: request.compile_cache.as_ref(),
        // As `tpu-rewrite run --backend pjrt` by default: independent sums share all-reduces.
        unpacked_sums: false,
    };
    let mut outcome = tpu_rewrite::xla::backend::run(graph, &lowered.assignment, &config)
        .map_err(|e| Failure::at(vec![Box::new(e)], &lowered.source))?
        .run;
    let mut by_name: HashMap<String, Tensor> = outcome.fetched.drain(..).collect();
    if let Some(name) = fetches.iter().find(|n| !n.starts_with('^') && !by_name.contains_key(*n)) {
        let mut available: Vec<&String> = by_name.keys().collect();
        available.sort();
        let available = available.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ");
        let e = tpu_rewrite::xla::XlaError::NotFetchable { name: name.clone(), available };
        return Err(Failure::at(vec![Box::new(e)], &lowered.source));
    }
    outcome.fetched = fetches.iter().filter_map(|n| by_name.remove_entry(n)).collect();
    Ok(outcome)
}

fn execute(request: Request) -> Result<(Values, RunOutcome), Failure> {
    let lowered = request.lowered;
    let tagged_module = &lowered.tagged;
    let tagged = Lowered::graph_of(tagged_module)?;
    let single = lowered.single.as_ref();
    let defaults = outputs::computation_outputs(tagged_module, &lowered.programs, single);
    let fetches: Vec<String> = match (&request.fetches, single) {
        (Some(f), Some(single)) => session::plain::fetches(single, tagged, f),
        (Some(f), None) => f.clone(),
        (None, _) => outputs::shard_fetches(&defaults),
    };
    let feed_names: Vec<String> = request.feeds.iter().map(|f| f.0.clone()).collect();
    driver::check_feeds_and_fetches(tagged, &feed_names, &fetches)
        .map_err(|e| Failure::at(vec![Box::new(e)], &lowered.source))?;
    // Every op without a kernel, then every feed against its placeholder, before anything runs.
    if request.backend == "sim" {
        for errors in
            [preflight::check_kernels(&lowered.programs), preflight::check_feeds(&lowered.programs, &request.feeds)]
        {
            if !errors.is_empty() {
                return Err(Failure::at(boxed(errors), &lowered.source));
            }
        }
    }
    let mut outcome = match request.backend {
        "sim" => run_sim(&request, &fetches)?,
        "pjrt" => run_pjrt(&request, &fetches)?,
        other => {
            return Err(Failure::of(PyLayerError::Argument {
                message: format!("backend must be \"sim\" or \"pjrt\", not {other:?}"),
            }))
        }
    };
    let mut fetched = std::mem::take(&mut outcome.fetched);
    if request.fetches.is_some() {
        if let Some(single) = single {
            session::plain::rename_fetched(single, &mut fetched);
        }
        return Ok((Values::Fetched(fetched), outcome));
    }
    let grouped = outputs::grouped_outputs(&defaults, &fetched);
    let named = defaults.into_iter().zip(grouped).map(|(o, (reduce, value))| (o.name, reduce, value)).collect();
    Ok((Values::Outputs(named), outcome))
}

/// Runs `lowered`; returns `(values, variables)`: without fetches,
/// `values` is a list of `(name, reduce_op or None, array or [array per
/// replica])`, with fetches a list of `(name, array)`; `variables` maps
/// each mirrored variable to its replica-0 value. `compile_cache` is the
/// PJRT compile cache's directory (`None`: the default one) unless
/// `use_compile_cache` is false.
#[pyfunction]
#[pyo3(signature = (lowered, feeds, fetches=None, steps=1, backend="sim".to_string(), timeout=30.0, deadline=None, pjrt_plugin=None, host_transfer=None, use_compile_cache=true, compile_cache=None, compile_cache_size=1<<30, device_checks=true))]
#[allow(clippy::too_many_arguments)]
pub fn run_lowered<'py>(
    py: Python<'py>,
    lowered: &Lowered,
    feeds: &Bound<'py, PyDict>,
    fetches: Option<Vec<String>>,
    steps: u32,
    backend: String,
    timeout: f64,
    deadline: Option<f64>,
    pjrt_plugin: Option<PathBuf>,
    host_transfer: Option<String>,
    use_compile_cache: bool,
    compile_cache: Option<PathBuf>,
    compile_cache_size: u64,
    device_checks: bool,
) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyDict>)> {
    let seconds = |s: f64| Duration::try_from_secs_f64(s.max(0.001)).unwrap_or(Duration::MAX);
    let mut converted = Vec::with_capacity(feeds.len());
    for (name, value) in feeds.iter() {
        let name: String = name.extract()?;
        converted.push((name.clone(), tensor_from_py(&name, &value).map_err(|f| f.into_py(py))?));
    }
    let request = Request {
        lowered,
        feeds: converted,
        fetches,
        steps,
        backend: &backend,
        timeout: seconds(timeout),
        deadline: deadline.map(seconds),
        plugin: pjrt_plugin,
        host_transfer,
        compile_cache: use_compile_cache.then(|| CompileCache {
            dir: compile_cache.unwrap_or_else(CompileCache::default_dir),
            max_bytes: compile_cache_size,
        }),
        device_checks,
    };
    let (values, outcome) = without_gil(py, || execute(request))?;
    let list = PyList::empty(py);
    match values {
        Values::Fetched(fetched) => {
            for (name, t) in fetched {
                list.append((name, tensor_to_py(py, t)?))?;
            }
        }
        Values::Outputs(outputs) => {
            for (name, reduce, value) in outputs {
                let reduce = reduce.map(exec::ReduceOp::name);
                match value {
                    OutputValue::Reduced(t) => list.append((name, reduce, tensor_to_py(py, t)?))?,
                    OutputValue::PerReplica(values) => {
                        let arrays = PyList::empty(py);
                        for t in values {
                            arrays.append(tensor_to_py(py, t)?)?;
                        }
                        list.append((name, reduce, arrays))?;
                    }
                }
            }
        }
    }
    let variables = PyDict::new(py);
    for (name, t) in outcome.variables {
        variables.set_item(name, tensor_to_py(py, t)?)?;
    }
    Ok((list, variables))
}
