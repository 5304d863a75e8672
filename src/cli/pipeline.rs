//! The commands that run the pipeline: `rewrite` and `lower`, and the
//! rewrite-then-lower step `run` shares with them (`run` itself is in
//! `run`; the input and output formats are in `formats`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use super::diagnostics::AnyDiagnostic;
use super::error::CliError;
use super::formats::{emit_bytes, load_function, write_programs};
use super::io::{write_output, InputPath};
use super::progress::DelayedBar;
use super::source::WindowedSource;
use super::{finish, report, EmitFormat, FusionArg, GradientPolicyArg, InputFormat, Loaded, LowerArgs, RewriteArgs};
use crate::lower::{self, LowerConfig, LowerFailure, Topology};
use crate::passes::form_clusters::ReplicateCluster;
use crate::passes::gradients::{GradientClusterPolicy, GradientsConfig};
use crate::passes::{
    self, AllReduceFusion, DiagnosticSource, FusionConfig, PassSelection, PipelineConfig, PrintMode, VerifyMode,
};
use crate::progress::Progress;

/// Prints the wall and CPU time since the previous lap, when enabled.
/// CPU time (all threads) tells more than wall time on a busy machine.
struct PhaseTimer {
    enabled: bool,
    last: std::cell::Cell<(std::time::Instant, Option<Duration>)>,
}

impl PhaseTimer {
    fn start(enabled: bool) -> PhaseTimer {
        let cpu = if enabled { crate::progress::process_cpu_time() } else { None };
        PhaseTimer { enabled, last: std::cell::Cell::new((std::time::Instant::now(), cpu)) }
    }

    fn lap(&self, phase: &str) {
        if !self.enabled {
            return;
        }
        let (now, cpu) = (std::time::Instant::now(), crate::progress::process_cpu_time());
        let (then, cpu_then) = self.last.get();
        let wall = (now - then).as_secs_f64() * 1e3;
        match (cpu, cpu_then) {
            (Some(b), Some(a)) => {
                errln!("{phase:<24} {wall:>12.3} ms wall {:>10.3} ms cpu", b.saturating_sub(a).as_secs_f64() * 1e3)
            }
            _ => errln!("{phase:<24} {wall:>12.3} ms wall"),
        }
        self.last.set((std::time::Instant::now(), crate::progress::process_cpu_time()));
    }
}

/// The pipeline configuration the flags ask for. `Err` carries the exit
/// code after the message is printed: 0 for `--passes help` (the list is
/// printed), 2 for a usage error (an unknown pass or an order the pipeline
/// will not honour).
fn pipeline_config(args: &RewriteArgs, target: Target) -> Result<PipelineConfig, ExitCode> {
    let usage = |e: passes::SelectionError| {
        report(vec![Box::new(e)], &Arc::new(WindowedSource::new("<arguments>", b"")));
        ExitCode::from(2)
    };
    let passes = match args.passes.as_deref().map(str::trim) {
        Some("help") => {
            eprint!("{}", passes::pass_list());
            return Err(ExitCode::SUCCESS);
        }
        Some(list) => PassSelection::parse(list).map_err(usage)?,
        None => PassSelection::default(),
    };
    let named = |names: &[String]| -> Result<Vec<passes::Pass>, ExitCode> {
        names
            .iter()
            .map(|n| PassSelection::parse(n).map_err(usage))
            .map(|sel| match sel? {
                PassSelection::Only(list) => Ok(list),
                PassSelection::All => Ok(Vec::new()),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|lists| lists.concat())
    };
    let after = if args.print_after_all { passes::PIPELINE.to_vec() } else { named(&args.print_after)? };
    let before = named(&args.print_before)?;
    let print =
        if before.is_empty() && after.is_empty() { PrintMode::Never } else { PrintMode::Around { before, after } };
    let policy = match args.gradient_cluster_policy {
        GradientPolicyArg::Nested => GradientClusterPolicy::Nested,
        GradientPolicyArg::Flat => GradientClusterPolicy::Flat,
    };
    Ok(PipelineConfig {
        passes,
        verify: if args.verify_each_pass { VerifyMode::AfterEachPass } else { VerifyMode::AtEnd },
        print,
        gradients: GradientsConfig { policy },
        all_reduce_fusion: match (args.all_reduce_fusion, target) {
            (FusionArg::On, _) | (FusionArg::Auto, Target::Xla) => AllReduceFusion::On(FusionConfig::default()),
            (FusionArg::Off, _) | (FusionArg::Auto, Target::Graph) => AllReduceFusion::Off,
        },
    })
}

/// Runs the rewrite passes on a loaded module, printing diagnostics and
/// the modules `--print-*` asked for. Returns the clusters the pipeline
/// formed for the first graph (empty when cluster formation did not run),
/// or `None` on error.
fn rewrite_forming_clusters(
    loaded: &mut Loaded,
    config: &PipelineConfig,
    time_passes: bool,
    progress: &dyn Progress,
) -> Option<Vec<ReplicateCluster>> {
    progress.phase("passes", 1);
    let mut report_ = passes::run_pipeline(&mut loaded.module, config);
    progress.advance(1);
    for printed in &report_.printed {
        let when = match printed.point {
            passes::PrintPoint::Before => "before",
            passes::PrintPoint::After => "after",
        };
        errln!("// ----- {when} {} -----\n{}", printed.pass.name(), printed.text);
    }
    if time_passes {
        errprint!("{}", report_.timing_table());
    }
    let failed = report_.has_errors();
    let clusters = std::mem::take(&mut report_.clusters);
    let diags: Vec<AnyDiagnostic> = report_
        .diagnostics
        .into_iter()
        .map(|d| match d.source {
            DiagnosticSource::Pass(e) => Box::new(e) as AnyDiagnostic,
            DiagnosticSource::Verify(e) if loaded.format == InputFormat::Pbtxt => {
                Box::new(super::formats::narrow_attr_span(e, loaded.source.text())) as AnyDiagnostic
            }
            DiagnosticSource::Verify(e) => Box::new(e) as AnyDiagnostic,
        })
        .collect();
    report(diags, &loaded.source);
    if failed {
        return None;
    }
    Some(clusters.into_iter().next().map(|(_, c)| c).unwrap_or_default())
}

/// A lowering error about a node of a binary GraphDef, which has no text
/// to point into: its label goes at the file's start, so the report names
/// the file beside the node.
pub(super) fn in_binary_input(e: crate::xla::XlaError, format: InputFormat) -> crate::xla::XlaError {
    use crate::xla::XlaError;
    match e {
        XlaError::Lowering { node, op, message, span: None } if format == InputFormat::Pb => {
            XlaError::Lowering { node, op, message, span: Some(crate::syntax::Span::DETACHED) }
        }
        XlaError::UnsupportedOp { node, op, reason, span: None } if format == InputFormat::Pb => {
            XlaError::UnsupportedOp { node, op, reason, span: Some(crate::syntax::Span::DETACHED) }
        }
        other => other,
    }
}

/// `tpu-rewrite rewrite`.
pub fn rewrite_command(
    file: &str,
    format: Option<InputFormat>,
    args: &RewriteArgs,
    time_passes: bool,
    emit: EmitFormat,
    output: Option<PathBuf>,
) -> ExitCode {
    let config = match pipeline_config(args, Target::Graph) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let input = InputPath::parse(file);
    let bar = DelayedBar::new();
    let Some(mut loaded) = load_function(&input, format, args.function.as_deref(), &bar, false) else {
        return ExitCode::from(1);
    };
    if rewrite_forming_clusters(&mut loaded, &config, time_passes, &bar).is_none() {
        return ExitCode::from(1);
    }
    if args.functionalize && functionalize(&mut loaded).is_none() {
        return ExitCode::from(1);
    }
    drop(bar);
    super::formats::emit_and_exit(loaded, emit, output.as_deref())
}

fn lower_config(args: &LowerArgs) -> Result<LowerConfig, lower::LowerError> {
    let topology = Topology::parse(&args.topology)?;
    let device_assignment = match &args.device_assignment {
        Some(table) => Some(lower::DeviceAssignment::parse_table(&topology, table)?),
        None => None,
    };
    Ok(LowerConfig {
        topology,
        num_replicas: args.num_replicas,
        cores_per_replica: args.cores_per_replica,
        device_assignment,
        steps_per_run: args.steps_per_run.max(1),
    })
}

/// What the lowered program is for; it decides the TF1 control-flow form
/// and the default of `--all-reduce-fusion`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Target {
    /// Graph outputs and the simulator: TF1 control flow as written (the
    /// simulator runs TF1 frames), all-reduces as written.
    Graph,
    /// StableHLO and PJRT: functional `While`/`If` (StableHLO has no frames
    /// or dead tensors), and independent all-reduces fused (XLA:CPU meets
    /// once per all-reduce; TPU compilers combine them the same way).
    Xla,
}

/// Rewrites the TF1 control flow of a rewritten module into functional
/// ops when it has any, printing the diagnostics; `None` on error.
fn functionalize(loaded: &mut Loaded) -> Option<()> {
    if !passes::functionalize::module_has_tf1_control_flow(&loaded.module) {
        return Some(());
    }
    let mut errors: Vec<AnyDiagnostic> = passes::functionalize::functionalize(&mut loaded.module)
        .into_iter()
        .map(|e| Box::new(e) as AnyDiagnostic)
        .collect();
    if errors.is_empty() {
        errors.extend(crate::ir::verify::verify(&loaded.module).into_iter().map(|e| Box::new(e) as AnyDiagnostic));
    }
    let failed = !errors.is_empty();
    report(errors, &loaded.source);
    (!failed).then_some(())
}

/// Rewrites and lowers; prints diagnostics; returns the tagged graph and
/// the lowering, or the exit code.
/// What [`rewrite_and_lower`] made: the loaded (tagged) module, its
/// lowering, and what single-replica clustering did to a plain graph.
type Prepared = (Loaded, lower::Lowered, Option<passes::single_replica::SingleReplica>);

pub(super) fn rewrite_and_lower(
    input: &InputPath,
    format: Option<InputFormat>,
    rewrite_args: &RewriteArgs,
    lower_args: &LowerArgs,
    plain: Option<&super::plain::PlainRun>,
    target: Target,
) -> Result<Prepared, ExitCode> {
    let pipeline = pipeline_config(rewrite_args, target)?;
    let failed = || ExitCode::from(1);
    let timer = PhaseTimer::start(lower_args.time_passes);
    let bar = DelayedBar::new();
    let mut loaded = load_function(input, format, rewrite_args.function.as_deref(), &bar, false).ok_or_else(failed)?;
    timer.lap("load");
    let mut clusters =
        rewrite_forming_clusters(&mut loaded, &pipeline, lower_args.time_passes, &bar).ok_or_else(failed)?;
    timer.lap("rewrite");
    // `SymbolicGradient`s name their gradient functions; `XlaRecv`s read their `XlaSend`s.
    let prepared: Vec<AnyDiagnostic> =
        passes::xla_ext::prepare(&mut loaded.module).into_iter().map(|(_, e)| Box::new(e) as AnyDiagnostic).collect();
    if !prepared.is_empty() {
        report(prepared, &loaded.source);
        return Err(failed());
    }
    if (target == Target::Xla || rewrite_args.functionalize)
        && passes::functionalize::module_has_tf1_control_flow(&loaded.module)
    {
        functionalize(&mut loaded).ok_or_else(failed)?;
        // The clusters are read again from the rewritten graph's tags.
        if !clusters.is_empty() {
            if let Some(graph) = loaded.module.graphs.first() {
                clusters = passes::form_clusters(graph).0;
            }
        }
        timer.lap("functionalize");
    }
    // A graph the pipeline found no cluster in (gradients expanded) runs as one single-replica cluster.
    let mut single = None;
    if let (Some(plain), true) = (plain, clusters.is_empty()) {
        match super::plain::cluster(&mut loaded, plain) {
            Ok(Some((done, formed))) => {
                single = Some(done);
                clusters = formed;
            }
            Ok(None) => {}
            Err(errors) => {
                report(errors, &loaded.source);
                return Err(failed());
            }
        }
    }
    let config = match lower_config(lower_args) {
        Ok(c) => c,
        Err(e) => {
            report(vec![Box::new(e)], &loaded.source);
            return Err(failed());
        }
    };
    let Some(graph) = loaded.module.graphs.first() else {
        super::fail(CliError::NoGraph);
        return Err(failed());
    };
    let lowered = if clusters.is_empty() {
        lower::lower(graph, &config)
    } else {
        lower::lower_clusters_observed(graph, clusters, &config, &bar)
    };
    drop(bar);
    timer.lap("lower");
    match lowered {
        Ok(mut lowered) => {
            // The bodies of While / If / calls travel with the programs that call them.
            crate::ir::functions::carry_functions(&loaded.module, &mut lowered.module);
            // A topology or assignment the user chose that leaves cores idle
            // names them (a plain graph's single replica says what it is).
            let chosen = lower_args.topology != "1x8" || lower_args.device_assignment.is_some();
            if let (Some(idle), None, true) = (lowered.assignment.idle_summary(), &single, chosen) {
                errln!(
                    "note: {} replica(s) of {} core(s) leave {idle}",
                    lowered.assignment.num_replicas,
                    lowered.assignment.cores_per_replica
                );
            }
            if lower_args.time_passes {
                for phase in &lowered.phases {
                    errln!("  {:<22} {:>12.3} ms wall", phase.name, phase.wall.as_secs_f64() * 1e3);
                }
            }
            Ok((loaded, lowered, single))
        }
        Err(LowerFailure::Lower(errors)) => {
            report(errors.into_iter().map(|e| Box::new(e) as AnyDiagnostic).collect(), &loaded.source);
            Err(failed())
        }
        Err(LowerFailure::Clusters(errors)) => {
            report(errors.into_iter().map(|e| Box::new(e) as AnyDiagnostic).collect(), &loaded.source);
            Err(failed())
        }
    }
}

/// Writes StableHLO modules; with `-o FILE`, also their signatures as
/// `FILE.json` (a sidecar for tools that call the modules): one object
/// per module with its arguments and results.
fn write_stablehlo(
    output: Option<&std::path::Path>,
    text: &str,
    signatures: &[crate::xla::stablehlo::signature::Signature],
) -> Result<(), CliError> {
    write_output(output, text.as_bytes())?;
    let Some(path) = output.filter(|p| *p != std::path::Path::new("-")) else { return Ok(()) };
    let mut sidecar = path.as_os_str().to_owned();
    sidecar.push(".json");
    let mut json = serde_json::to_string_pretty(&serde_json::json!({ "modules": signatures })).map_err(|e| {
        CliError::Write { path: format!("{}", std::path::Path::new(&sidecar).display()), reason: e.to_string() }
    })?;
    json.push('\n');
    super::io::write_file(std::path::Path::new(&sidecar), json.as_bytes())
}

/// What `lower` reads: the file, its format, and the fetches that prune a
/// plain graph's step (as `run --fetch` does).
pub struct LowerInput<'a> {
    /// The file (`-` for standard input).
    pub file: &'a str,
    /// Input format (default: by extension).
    pub format: Option<InputFormat>,
    /// `--fetch`: for a plain graph, the tensors (and `^targets`) the step
    /// computes; empty for every sink.
    pub fetch: &'a [String],
}

/// Which form of a lowered module `lower` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoweredView {
    /// One program per cluster and logical core (what runs).
    Spmd,
    /// One program per replica and logical core, the replica bound.
    Expanded,
}

/// `tpu-rewrite lower`.
pub fn lower_command(
    what: &LowerInput,
    rewrite_args: &RewriteArgs,
    lower_args: &LowerArgs,
    (emit, view): (EmitFormat, LoweredView),
    describe: Option<Option<u64>>,
    output: Option<PathBuf>,
) -> ExitCode {
    let input = InputPath::parse(what.file);
    let target = if emit == EmitFormat::Stablehlo { Target::Xla } else { Target::Graph };
    // A plain graph (no replicate cluster) becomes one single-replica
    // cluster, as `run` makes it: for StableHLO what `--backend pjrt` runs,
    // otherwise what the simulator runs.
    let unlowered = match target {
        Target::Xla => passes::single_replica::Unlowered::Refuse,
        Target::Graph => passes::single_replica::Unlowered::InCluster,
    };
    let plain = super::plain::PlainRun {
        fetches: what.fetch,
        unlowered,
        feeds_file: None,
        feed: &[],
        skip_initializers: false,
        data_parallel: lower_args.data_parallel,
    };
    let plain = Some(&plain);
    let (loaded, lowered, single) =
        match rewrite_and_lower(&input, what.format, rewrite_args, lower_args, plain, target) {
            Ok(done) => done,
            Err(code) => return code,
        };
    if !what.fetch.is_empty() {
        let Some(tagged) = loaded.module.graphs.first() else { return ExitCode::from(1) };
        if single.is_none() {
            return super::fail_with(
                CliError::usage(
                    "--fetch prunes a plain graph's step (one without a replicate cluster); this graph has its \
                     clusters, whose outputs are what it lowers",
                ),
                2,
            );
        }
        if let Err(e) = super::validate::check_fetch_names(tagged, &lowered.module, what.fetch) {
            return super::fail(e);
        }
    }
    if let Some(single) = &single {
        errln!("{}", crate::session::plain::describe(single));
    }
    if emit == EmitFormat::Stablehlo {
        let Some(graph) = loaded.module.graphs.first() else { return ExitCode::from(1) };
        let transfer = lower_args.host_transfer.unwrap_or_default();
        return match crate::xla::stablehlo::emit_all_with_signatures(
            graph,
            &lowered.assignment,
            lower_args.steps_per_run,
            transfer,
            Some(&loaded.module),
            rewrite_args.all_reduce_fusion != FusionArg::Off,
        ) {
            Ok((text, signatures)) => finish(write_stablehlo(output.as_deref(), &text, &signatures)),
            Err(e) => {
                report(vec![Box::new(in_binary_input(e, loaded.format))], &loaded.source);
                ExitCode::from(1)
            }
        };
    }
    let lowered = lowered.module;
    if let Some(global_batch_size) = describe {
        let config = match lower_config(lower_args) {
            Ok(c) => c,
            Err(e) => {
                report(vec![Box::new(e)], &loaded.source);
                return ExitCode::from(1);
            }
        };
        let (clusters, _) = passes::form_clusters(&loaded.module.graphs[0]);
        let facts =
            lower::assignment_for(&clusters, &config).and_then(|a| lower::describe::describe(&a, global_batch_size));
        return match facts {
            Ok(facts) => finish(write_output(output.as_deref(), facts.to_string().as_bytes())),
            Err(e) => {
                report(vec![Box::new(e)], &loaded.source);
                ExitCode::from(1)
            }
        };
    }
    let lowered = match view {
        LoweredView::Spmd => lowered,
        LoweredView::Expanded => match lower::spmd::expand(&lowered) {
            Ok(expanded) => expanded,
            Err(e) => {
                report(vec![Box::new(e)], &loaded.source);
                return ExitCode::from(1);
            }
        },
    };
    let code = if matches!(emit, EmitFormat::Pbtxt | EmitFormat::Pb) && lowered.graphs.len() > 1 {
        write_programs(&lowered, emit == EmitFormat::Pbtxt, output.as_deref(), &loaded.source)
    } else {
        match emit_bytes(&lowered, emit) {
            Ok(bytes) => finish(write_output(output.as_deref(), &bytes)),
            Err(errors) => {
                report(errors, &loaded.source);
                ExitCode::from(1)
            }
        }
    };
    // The process exits next: freeing millions of nodes one by one would
    // only add time (a tenth of a large `lower`), so leave it to the OS.
    std::mem::forget((loaded, lowered));
    code
}
