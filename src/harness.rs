//! The pipeline from bytes to the end, as fuzz targets and property tests
//! drive it: import (`.opg`, `.pbtxt` or `.pb`) → rewrite → lower, and for
//! small graphs one run on the mesh.
//!
//! Bad input is expected and fine: every stage returns its diagnostics.
//! What is not fine is a panic, which surfaces as a panic here, including
//! one the executor caught and turned into an error (that is still a bug).
//! The run is bounded: graphs up to [`MAX_RUN_NODES`] nodes and
//! [`MAX_RUN_REPLICAS`] replicas, tensors up to [`RUN_TENSOR_BYTES`], waits
//! up to [`RUN_TIMEOUT`]. Cost: that of the pipeline on the input.

use std::time::Duration;

use crate::exec::{self, driver, ExecError};
use crate::ir::Module;
use crate::lower::{self, LowerConfig, Topology};
use crate::passes::{self, PipelineConfig};
use crate::tf::{self, GraphDefFormat};

/// How to read the bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `.opg` text.
    Opg,
    /// A TensorFlow GraphDef in protobuf text format.
    Pbtxt,
    /// A TensorFlow GraphDef in binary protobuf.
    Pb,
}

/// Whether to run a lowered graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Execute {
    /// Stop after lowering.
    No,
    /// Run one step when the graph is small enough.
    IfSmall,
}

/// How far an input got.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reached {
    /// Refused by the importer or the verifier.
    Import,
    /// Refused by a rewrite pass.
    Rewrite,
    /// Refused by the lowering.
    Lower,
    /// Lowered, and not run.
    Lowered,
    /// Refused before or during the run.
    Run,
    /// Ran one step.
    Ran,
}

/// The largest graph the harness runs.
pub const MAX_RUN_NODES: usize = 256;
/// The most replicas the harness runs.
pub const MAX_RUN_REPLICAS: u32 = 8;
/// The tensor-size limit while running.
pub const RUN_TENSOR_BYTES: u64 = 16 << 20;
/// The longest wait in a run.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(2);

/// Imports `bytes`; `None` when the importer or verifier found an error.
pub fn import(bytes: &[u8], format: Format) -> Option<Module> {
    let graphdef = match format {
        Format::Opg => {
            let (module, errors) = crate::ir::parse_module(bytes).ok()?;
            return errors.iter().all(is_warning).then_some(module);
        }
        Format::Pbtxt => GraphDefFormat::Text,
        Format::Pb => GraphDefFormat::Binary,
    };
    let (module, errors) = tf::import_graphdef(bytes, graphdef).ok()?;
    errors.iter().all(is_warning).then_some(module)
}

fn is_warning(d: &impl miette::Diagnostic) -> bool {
    d.severity() == Some(miette::Severity::Warning)
}

/// Runs the pipeline on `bytes`; panics only on a bug.
pub fn check(bytes: &[u8], format: Format, execute: Execute) -> Reached {
    let Some(mut module) = import(bytes, format) else { return Reached::Import };
    let report = passes::run_pipeline(&mut module, &PipelineConfig::default());
    if report.has_errors() {
        return Reached::Rewrite;
    }
    let Some(graph) = module.graphs.first() else { return Reached::Rewrite };
    let config = LowerConfig {
        topology: Topology::parse("1x8").unwrap_or_default(),
        steps_per_run: 1,
        ..LowerConfig::default()
    };
    let Ok(lowered) = lower::lower(graph, &config) else { return Reached::Lower };
    if execute == Execute::No
        || module.node_count() > MAX_RUN_NODES
        || lowered.clusters.iter().any(|c| c.num_replicas > MAX_RUN_REPLICAS)
    {
        return Reached::Lowered;
    }
    exec::limits::set_max_tensor_bytes(RUN_TENSOR_BYTES);
    let lowered = lowered.module;
    if !exec::preflight::check_kernels(&lowered).is_empty() || !exec::preflight::check_feeds(&lowered, &[]).is_empty() {
        return Reached::Run;
    }
    let config = driver::RunConfig { steps: 1, timeout: RUN_TIMEOUT, deadline: None };
    match driver::run(&lowered, &[], &[], &config, &mut |_, _| {}) {
        Ok(_) => Reached::Ran,
        Err(e) => {
            assert_no_panic(&e);
            Reached::Run
        }
    }
}

/// Panics when `error` reports a panic the executor caught.
fn assert_no_panic(error: &ExecError) {
    let caught = match error {
        ExecError::Panic { .. } => true,
        ExecError::Kernel { source, .. } => matches!(source, exec::KernelError::Panic { .. }),
        _ => false,
    };
    assert!(!caught, "the executor caught a panic: {error}");
}
