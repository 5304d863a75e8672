//! Rewrite passes over the IR and the pass manager that runs them.
//!
//! The authoring passes turn `replicate` / `outside_compilation` regions
//! into flat ops tagged as TensorFlow's `tpu.replicate` tags them; the last
//! pass, [`form_clusters`](form_clusters::form_clusters), reads the clusters
//! back from the tags (for rewritten and imported graphs alike) and is what
//! lowering consumes. [`PIPELINE`] lists the passes in order; every pass
//! but the optional all-reduce fusion leaves graphs without regions
//! unchanged, so running the default pipeline on its own output changes
//! nothing. Fusion ([`fuse_all_reduce()`]) runs only when
//! [`PipelineConfig::all_reduce_fusion`] asks or the selection names it.
//! [`single_replica`] is not in the pipeline: `run` applies it to a graph
//! in which the pipeline found no cluster (a plain TensorFlow graph), to
//! compile it as one single-replica cluster.

pub mod cluster_cycles;
pub mod common;
pub mod data_parallel;
pub mod error;
pub mod fan_in;
pub mod fan_out;
pub mod feed_fetch;
pub mod flatten;
pub mod form_clusters;
pub mod functionalize;
pub mod fuse_all_reduce;
pub mod gradients;
pub mod host_compute_core;
pub mod metadata;
pub mod outside_compilation;
pub mod replica_groups;
pub mod replicate_clustering;
pub mod single_replica;
pub mod unsupported_ops;
pub mod xla_call_module;
mod xla_call_module_ops;
mod xla_call_module_regions;
pub mod xla_ext;

use std::time::{Duration, Instant};

pub use error::PassError;
pub use form_clusters::{form_clusters, ReplicateCluster};
pub use fuse_all_reduce::{fuse_all_reduce, FusionConfig};
pub use gradients::GradientsConfig;

use crate::ir::{Graph, IrError, Module};

/// A pass of the pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pass {
    /// `replicate-clustering`.
    ReplicateClustering,
    /// `outside-compilation`.
    OutsideCompilation,
    /// `gradients`.
    Gradients,
    /// `fan-in`.
    FanIn,
    /// `metadata`.
    Metadata,
    /// `fan-out`.
    FanOut,
    /// `host-compute-core`.
    HostComputeCore,
    /// `unsupported-ops`.
    UnsupportedOps,
    /// Optional: runs only when [`PipelineConfig::all_reduce_fusion`] is on
    /// or the selection names it.
    FuseAllReduce,
    /// `form-clusters`.
    FormClusters,
}

/// The pipeline, in order.
pub const PIPELINE: &[Pass] = &[
    Pass::ReplicateClustering,
    Pass::OutsideCompilation,
    Pass::Gradients,
    Pass::FanIn,
    Pass::Metadata,
    Pass::HostComputeCore,
    Pass::FanOut,
    Pass::UnsupportedOps,
    Pass::FuseAllReduce,
    Pass::FormClusters,
];

const NAMES: &[&str] = &[
    "replicate-clustering",
    "outside-compilation",
    "gradients",
    "fan-in",
    "metadata",
    "host-compute-core",
    "fan-out",
    "unsupported-ops",
    "fuse-all-reduce",
    "form-clusters",
];

/// What each pass does, in one line, in pipeline order.
const SUMMARIES: &[&str] = &[
    "each `replicate` region becomes a TPU cluster (`_tpu_replicate` tags)",
    "each `outside_compilation` block becomes an outside-compilation cluster",
    "expands `gradients(ys, xs)` calls into backward graphs",
    "replicated inputs become `TPUReplicatedInput` ops",
    "adds each cluster's `TPUReplicateMetadata`, pivot and compilation result",
    "records which TPU core each outside-compilation cluster talks to",
    "computation outputs become `TPUReplicatedOutput` ops",
    "reports host-only ops placed in a TPU cluster",
    "(optional) fuses independent `CrossReplicaSum`s into one `AllReduce`",
    "reads the TPU clusters back from the tags, for lowering",
];

/// The names of the passes in pipeline order, as `--passes` takes them.
pub fn pass_names() -> &'static [&'static str] {
    NAMES
}

/// Every pass with its name and one-line meaning, in pipeline order, as
/// `tpu-rewrite passes` prints it.
pub fn pass_list() -> String {
    let width = NAMES.iter().map(|n| n.len()).max().unwrap_or(0);
    NAMES.iter().zip(SUMMARIES).map(|(name, summary)| format!("{name:<width$}  {summary}\n")).collect()
}

impl Pass {
    /// The pass's name on the command line.
    pub fn name(self) -> &'static str {
        let i = PIPELINE.iter().position(|p| *p == self).unwrap_or(0);
        NAMES[i]
    }

    /// What the pass does, in one line.
    pub fn summary(self) -> &'static str {
        let i = PIPELINE.iter().position(|p| *p == self).unwrap_or(0);
        SUMMARIES[i]
    }

    /// The pass called `name`.
    pub fn from_name(name: &str) -> Option<Pass> {
        NAMES.iter().position(|n| *n == name).map(|i| PIPELINE[i])
    }

    /// Runs the pass on one graph.
    fn run(self, graph: &mut Graph, config: &PipelineConfig, clusters: &mut Vec<ReplicateCluster>) -> Vec<PassError> {
        match self {
            Pass::ReplicateClustering => replicate_clustering::replicate_clustering(graph),
            Pass::OutsideCompilation => outside_compilation::outside_compilation(graph),
            Pass::Gradients => gradients::expand_gradients(graph, &config.gradients),
            Pass::FanIn => fan_in::fan_in(graph),
            Pass::Metadata => metadata::metadata(graph),
            Pass::FanOut => fan_out::fan_out(graph),
            Pass::HostComputeCore => host_compute_core::host_compute_core(graph),
            Pass::UnsupportedOps => unsupported_ops::unsupported_ops(graph),
            Pass::FuseAllReduce => {
                let fusion = match config.all_reduce_fusion {
                    AllReduceFusion::On(c) => c,
                    AllReduceFusion::Off => FusionConfig::default(),
                };
                fuse_all_reduce::fuse_all_reduce(graph, &fusion)
            }
            Pass::FormClusters => {
                let (formed, errors) = form_clusters(graph);
                *clusters = formed;
                errors
            }
        }
    }
}

/// Which passes run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum PassSelection {
    /// The whole pipeline.
    #[default]
    All,
    /// These passes, in pipeline order ([`PassSelection::parse`] refuses
    /// any other order, since the pipeline runs them in its own).
    Only(Vec<Pass>),
}

impl PassSelection {
    /// Parses `a,b,c`. Refuses an unknown pass (naming the known ones), a
    /// pass given twice and passes out of pipeline order.
    pub fn parse(list: &str) -> Result<PassSelection, SelectionError> {
        let mut passes: Vec<Pass> = Vec::new();
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let Some(pass) = Pass::from_name(name) else {
                return Err(SelectionError::UnknownPass { name: name.to_string(), known: NAMES.join(", ") });
            };
            let position = |p: Pass| PIPELINE.iter().position(|q| *q == p);
            if let Some(&last) = passes.last() {
                if last == pass || passes.contains(&pass) {
                    return Err(SelectionError::Repeated { name: name.to_string() });
                }
                if position(pass) < position(last) {
                    return Err(SelectionError::OutOfOrder {
                        name: name.to_string(),
                        after: last.name(),
                        order: NAMES.join(","),
                    });
                }
            }
            passes.push(pass);
        }
        Ok(PassSelection::Only(passes))
    }

    fn includes(&self, pass: Pass) -> bool {
        match self {
            PassSelection::All => true,
            PassSelection::Only(list) => list.contains(&pass),
        }
    }

    /// True when the selection names `pass` explicitly.
    fn names(&self, pass: Pass) -> bool {
        matches!(self, PassSelection::Only(list) if list.contains(&pass))
    }
}

/// A `--passes` list the pipeline cannot run as written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
pub enum SelectionError {
    /// A name that is no pass.
    #[error("unknown pass `{name}`")]
    #[diagnostic(
        code(tpu_rewrite::passes::unknown_pass),
        help("passes are: {known} (`tpu-rewrite passes` lists them)")
    )]
    UnknownPass {
        /// The name given.
        name: String,
        /// The pass names, comma-separated.
        known: String,
    },
    /// A pass named twice.
    #[error("pass `{name}` is given twice")]
    #[diagnostic(code(tpu_rewrite::passes::repeated_pass), help("each pass runs at most once"))]
    Repeated {
        /// The pass.
        name: String,
    },
    /// A pass given after one that the pipeline runs later.
    #[error("pass `{name}` is given after `{after}`, but the pipeline runs it before")]
    #[diagnostic(
        code(tpu_rewrite::passes::out_of_order),
        help("passes run in pipeline order; list them in that order: {order}")
    )]
    OutOfOrder {
        /// The pass out of order.
        name: String,
        /// The pass it was given after.
        after: &'static str,
        /// The pipeline order.
        order: String,
    },
}

/// Whether to run the IR verifier after each pass.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum VerifyMode {
    /// Never (for callers that verify themselves).
    Never,
    /// Once, after the last pass that runs (or the pass that failed): the
    /// default, as the CLI does.
    #[default]
    AtEnd,
    /// After every pass: slower, but names the pass that broke the IR.
    AfterEachPass,
}

/// When to print the module while the passes run (as `mlir-opt`'s
/// `--print-after-all`, `--print-before`, `--print-after`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum PrintMode {
    /// Never.
    #[default]
    Never,
    /// After every pass that runs.
    AfterEachPass,
    /// Before the passes in `before` and after those in `after` (when they run).
    Around {
        /// Print before these passes.
        before: Vec<Pass>,
        /// Print after these passes.
        after: Vec<Pass>,
    },
}

impl PrintMode {
    fn before(&self, pass: Pass) -> bool {
        matches!(self, PrintMode::Around { before, .. } if before.contains(&pass))
    }

    fn after(&self, pass: Pass) -> bool {
        match self {
            PrintMode::Never => false,
            PrintMode::AfterEachPass => true,
            PrintMode::Around { after, .. } => after.contains(&pass),
        }
    }
}

/// Whether a printed module was taken before or after its pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrintPoint {
    /// Before the pass ran.
    Before,
    /// After the pass ran.
    After,
}

/// The module as text at one point of the pipeline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Printed {
    /// The pass.
    pub pass: Pass,
    /// Before or after it.
    pub point: PrintPoint,
    /// The module in `.opg` text.
    pub text: String,
}

/// Whether the optional all-reduce fusion pass runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AllReduceFusion {
    /// Not in the pipeline unless the pass selection names `fuse-all-reduce`
    /// (which then uses [`FusionConfig::default`]).
    #[default]
    Off,
    /// In the pipeline, with these settings.
    On(FusionConfig),
}

/// Settings of [`run_pipeline`].
#[derive(Clone, Debug, Default)]
pub struct PipelineConfig {
    /// Which passes run (default: all).
    pub passes: PassSelection,
    /// When the IR verifier runs (default: after the last pass).
    pub verify: VerifyMode,
    /// When the module is printed (default: never).
    pub print: PrintMode,
    /// Settings of the gradients pass.
    pub gradients: GradientsConfig,
    /// Whether the optional all-reduce fusion runs (default: off).
    pub all_reduce_fusion: AllReduceFusion,
}

impl PipelineConfig {
    /// True when `pass` runs under this configuration.
    pub fn runs(&self, pass: Pass) -> bool {
        match pass {
            Pass::FuseAllReduce => {
                self.passes.names(pass)
                    || (self.passes.includes(pass) && matches!(self.all_reduce_fusion, AllReduceFusion::On(_)))
            }
            _ => self.passes.includes(pass),
        }
    }
}

/// Where a diagnostic came from.
#[derive(Clone, Debug, PartialEq)]
pub enum DiagnosticSource {
    /// Raised by the pass itself.
    Pass(PassError),
    /// Found by the verifier after the pass.
    Verify(IrError),
}

/// A diagnostic with the pass and graph it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct PassDiagnostic {
    /// The pass that was running.
    pub pass: Pass,
    /// The graph it was running on.
    pub graph: String,
    /// The diagnostic.
    pub source: DiagnosticSource,
}

impl PassDiagnostic {
    /// The diagnostic, for rendering with miette.
    pub fn diagnostic(&self) -> &(dyn miette::Diagnostic + Send + Sync + 'static) {
        match &self.source {
            DiagnosticSource::Pass(e) => e,
            DiagnosticSource::Verify(e) => e,
        }
    }

    /// True unless the diagnostic is a warning.
    pub fn is_error(&self) -> bool {
        match &self.source {
            DiagnosticSource::Pass(e) => !e.is_warning(),
            DiagnosticSource::Verify(e) => {
                !matches!(miette::Diagnostic::severity(e), Some(miette::Severity::Warning | miette::Severity::Advice))
            }
        }
    }
}

/// The time one pass took over all graphs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PassTiming {
    /// The pass.
    pub pass: Pass,
    /// Its wall time over all graphs.
    pub elapsed: Duration,
}

/// What [`run_pipeline`] did.
#[derive(Clone, Debug, Default)]
pub struct PipelineReport {
    /// Errors and warnings in the order they were found.
    pub diagnostics: Vec<PassDiagnostic>,
    /// One entry per pass that ran, in order.
    pub timings: Vec<PassTiming>,
    /// The module printed around passes, in order, when asked for.
    pub printed: Vec<Printed>,
    /// The clusters of each graph (by graph name), from `form-clusters`.
    pub clusters: Vec<(String, Vec<ReplicateCluster>)>,
    /// The pass after which the pipeline stopped on errors, if it did.
    pub stopped_after: Option<Pass>,
}

impl PipelineReport {
    /// True when some diagnostic is an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(PassDiagnostic::is_error)
    }

    /// A per-pass timing table, as `--time-passes` prints it.
    pub fn timing_table(&self) -> String {
        let total: Duration = self.timings.iter().map(|t| t.elapsed).sum();
        let mut out = format!("{:<24} {:>12} {:>7}\n", "pass", "time (ms)", "%");
        for t in &self.timings {
            let share = if total.is_zero() { 0.0 } else { 100.0 * t.elapsed.as_secs_f64() / total.as_secs_f64() };
            out.push_str(&format!("{:<24} {:>12.3} {:>6.1}%\n", t.pass.name(), t.elapsed.as_secs_f64() * 1e3, share));
        }
        out.push_str(&format!("{:<24} {:>12.3}\n", "total", total.as_secs_f64() * 1e3));
        out
    }
}

/// Adds the time from its creation to its drop to the report's timings.
struct TimingGuard<'r> {
    pass: Pass,
    start: Instant,
    timings: &'r mut Vec<PassTiming>,
}

impl<'r> TimingGuard<'r> {
    fn start(pass: Pass, timings: &'r mut Vec<PassTiming>) -> TimingGuard<'r> {
        TimingGuard { pass, start: Instant::now(), timings }
    }
}

impl Drop for TimingGuard<'_> {
    fn drop(&mut self) {
        self.timings.push(PassTiming { pass: self.pass, elapsed: self.start.elapsed() });
    }
}

/// Runs the selected passes over every graph of `module`, pass by pass.
///
/// After each pass the verifier runs when `config.verify` asks, and the
/// module is printed when `config.print` asks. The pipeline stops after a
/// pass that reported an error; warnings do not stop it.
pub fn run_pipeline(module: &mut Module, config: &PipelineConfig) -> PipelineReport {
    let mut report = PipelineReport::default();
    let mut clusters: Vec<Vec<ReplicateCluster>> = vec![Vec::new(); module.graphs.len()];
    let last = PIPELINE.iter().copied().rfind(|p| config.runs(*p));
    for &pass in PIPELINE.iter().filter(|p| config.runs(**p)) {
        let mut found = Vec::new();
        if config.print.before(pass) {
            report.printed.push(Printed { pass, point: PrintPoint::Before, text: crate::emit::print_module(module) });
        }
        {
            let _timer = TimingGuard::start(pass, &mut report.timings);
            if pass == Pass::Gradients {
                // Gradients through call ops read the module's functions and add new ones.
                for (graph, error) in gradients::expand_module(module, &config.gradients) {
                    found.push(PassDiagnostic { pass, graph, source: DiagnosticSource::Pass(error) });
                }
                clusters.resize(module.graphs.len(), Vec::new());
            } else {
                for (graph, formed) in module.graphs.iter_mut().zip(clusters.iter_mut()) {
                    for error in pass.run(graph, config, formed) {
                        found.push(PassDiagnostic {
                            pass,
                            graph: graph.name.clone(),
                            source: DiagnosticSource::Pass(error),
                        });
                    }
                }
            }
        }
        let pass_failed = found.iter().any(PassDiagnostic::is_error);
        verify_if(config.verify, pass, pass_failed || Some(pass) == last, module, &mut found);
        if config.print.after(pass) {
            report.printed.push(Printed { pass, point: PrintPoint::After, text: crate::emit::print_module(module) });
        }
        let failed = found.iter().any(PassDiagnostic::is_error);
        report.diagnostics.extend(found);
        if failed {
            report.stopped_after = Some(pass);
            break;
        }
    }
    report.clusters = module.graphs.iter().map(|g| g.name.clone()).zip(clusters).collect();
    report
}

/// Runs the verifier on every graph when `mode` asks for it.
fn verify_if(mode: VerifyMode, pass: Pass, is_last: bool, module: &Module, found: &mut Vec<PassDiagnostic>) {
    let wanted = match mode {
        VerifyMode::Never => false,
        VerifyMode::AtEnd => is_last,
        VerifyMode::AfterEachPass => true,
    };
    if !wanted {
        return;
    }
    for graph in &module.graphs {
        let mut errors = Vec::new();
        crate::ir::verify::verify_graph(graph, &mut errors);
        found.extend(errors.into_iter().map(|e| PassDiagnostic {
            pass,
            graph: graph.name.clone(),
            source: DiagnosticSource::Verify(e),
        }));
    }
}
