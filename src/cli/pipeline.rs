//! The commands that run the pipeline: `rewrite`, `lower`, `run`, and
//! input loading for every format.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use super::diagnostics::AnyDiagnostic;
use super::error::CliError;
use super::io::{write_output, InputPath};
use super::progress::DelayedBar;
use super::source::WindowedSource;
use super::{finish, load, report, EmitFormat, GradientPolicyArg, InputFormat, Loaded, LowerArgs, RewriteArgs};
use crate::exec::{self, driver, Tensor};
use crate::ir::Module;
use crate::lower::{self, LowerConfig, LowerFailure, Topology};
use crate::passes::form_clusters::ReplicateCluster;
use crate::passes::gradients::{GradientClusterPolicy, GradientsConfig};
use crate::passes::{self, DiagnosticSource, PassSelection, PipelineConfig, PrintMode, VerifyMode};
use crate::progress::Progress;
use crate::tf::{self, GraphDefFormat};

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

/// Loads `.opg` or a GraphDef, by `--input-format` or by extension.
pub fn load_any(input: &InputPath, format: Option<InputFormat>, progress: &dyn Progress) -> Option<Loaded> {
    let format = format.or_else(|| match input {
        InputPath::File(p) => match tf::format_for_path(p) {
            Some(GraphDefFormat::Text) => Some(InputFormat::Pbtxt),
            Some(GraphDefFormat::Binary) => Some(InputFormat::Pb),
            None => None,
        },
        InputPath::Stdin => None,
    });
    let graphdef = match format {
        Some(InputFormat::Pbtxt) => GraphDefFormat::Text,
        Some(InputFormat::Pb) => GraphDefFormat::Binary,
        Some(InputFormat::Opg) | None => return load(input),
    };
    let name = input.display_name();
    let bytes = super::read_input(input)?;
    let imported = tf::import_graphdef_observed(&bytes, graphdef, progress);
    // Binary input has no text to point into; show spans against nothing.
    let source_bytes = if graphdef == GraphDefFormat::Text { bytes } else { Vec::new() };
    let source = Arc::new(WindowedSource::from_vec(name, source_bytes));
    match imported {
        Ok((module, errors)) => {
            let diags: Vec<AnyDiagnostic> = errors.into_iter().map(|e| Box::new(e) as AnyDiagnostic).collect();
            if report(diags, &source) {
                return None;
            }
            Some(Loaded { module, source })
        }
        Err(e) => {
            report(vec![Box::new(e)], &source);
            None
        }
    }
}

/// Renders a module in an output format; GraphDef output needs one flat graph.
pub fn emit_bytes(module: &Module, format: EmitFormat) -> Result<Vec<u8>, CliError> {
    Ok(match format {
        EmitFormat::Text => crate::emit::text::print_module_checked(module)?.into_bytes(),
        EmitFormat::Json => crate::emit::json::to_json_string(module).into_bytes(),
        EmitFormat::Dot => crate::emit::dot::to_dot(module).into_bytes(),
        EmitFormat::Stablehlo => {
            return Err(CliError::usage(
                "--format stablehlo is an output of `lower` (the device programs), not of a module",
            ))
        }
        EmitFormat::Pbtxt | EmitFormat::Pb => {
            let [graph] = module.graphs.as_slice() else {
                // Labelled at the second graph, the first that does not fit.
                let span = module.graphs.get(1).map(|g| g.span).filter(|s| *s != crate::syntax::Span::DETACHED);
                return Err(CliError::GraphDefGraphs { graphs: module.graphs.len(), span });
            };
            if format == EmitFormat::Pbtxt {
                crate::tf::export::to_pbtxt(graph).into_bytes()
            } else {
                crate::tf::export::to_pb(graph)
            }
        }
    })
}

fn pipeline_config(args: &RewriteArgs, print_after_all: bool) -> Result<PipelineConfig, String> {
    let passes = match &args.passes {
        Some(list) => PassSelection::parse(list)?,
        None => PassSelection::default(),
    };
    let policy = match args.gradient_cluster_policy {
        GradientPolicyArg::Nested => GradientClusterPolicy::Nested,
        GradientPolicyArg::Flat => GradientClusterPolicy::Flat,
    };
    Ok(PipelineConfig {
        passes,
        verify: if args.verify_each_pass { VerifyMode::AfterEachPass } else { VerifyMode::AtEnd },
        print: if print_after_all { PrintMode::AfterEachPass } else { PrintMode::Never },
        gradients: GradientsConfig { policy },
        ..PipelineConfig::default()
    })
}

/// Runs the rewrite passes on a loaded module, printing diagnostics.
/// Returns false when a pass reported an error.
fn rewrite(loaded: &mut Loaded, args: &RewriteArgs, print_after_all: bool, time_passes: bool) -> bool {
    rewrite_forming_clusters(loaded, args, print_after_all, time_passes).is_some()
}

/// Like [`rewrite`], returning the clusters the pipeline formed for the
/// first graph (empty when cluster formation did not run), or `None` on error.
fn rewrite_forming_clusters(
    loaded: &mut Loaded,
    args: &RewriteArgs,
    print_after_all: bool,
    time_passes: bool,
) -> Option<Vec<ReplicateCluster>> {
    let config = match pipeline_config(args, print_after_all) {
        Ok(c) => c,
        Err(e) => {
            super::fail(CliError::usage(e));
            return None;
        }
    };
    let mut report_ = passes::run_pipeline(&mut loaded.module, &config);
    for (pass, text) in &report_.printed {
        errln!("// ----- after {} -----\n{text}", pass.name());
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
            DiagnosticSource::Verify(e) => Box::new(e) as AnyDiagnostic,
        })
        .collect();
    report(diags, &loaded.source);
    if failed {
        return None;
    }
    Some(clusters.into_iter().next().map(|(_, c)| c).unwrap_or_default())
}

/// `tpu-rewrite rewrite`.
pub fn rewrite_command(
    file: &str,
    format: Option<InputFormat>,
    args: &RewriteArgs,
    print_after_all: bool,
    time_passes: bool,
    output: Option<PathBuf>,
) -> ExitCode {
    let input = InputPath::parse(file);
    let Some(mut loaded) = load_any(&input, format, &DelayedBar::new()) else { return ExitCode::from(1) };
    if !rewrite(&mut loaded, args, print_after_all, time_passes) {
        return ExitCode::from(1);
    }
    let text = crate::emit::print_module(&loaded.module);
    let code = finish(write_output(output.as_deref(), text.as_bytes()));
    // The process exits next: leave the module and its text to the OS.
    std::mem::forget((loaded, text));
    code
}

fn lower_config(args: &LowerArgs) -> Result<LowerConfig, lower::LowerError> {
    Ok(LowerConfig {
        topology: Topology::parse(&args.topology)?,
        num_replicas: args.num_replicas,
        cores_per_replica: args.cores_per_replica,
        device_assignment: args.device_assignment.clone(),
        steps_per_run: args.steps_per_run.max(1),
    })
}

/// Rewrites and lowers; prints diagnostics; returns the tagged graph and the lowering.
fn rewrite_and_lower(
    input: &InputPath,
    format: Option<InputFormat>,
    rewrite_args: &RewriteArgs,
    lower_args: &LowerArgs,
) -> Option<(Loaded, lower::Lowered)> {
    let timer = PhaseTimer::start(lower_args.time_passes);
    let bar = DelayedBar::new();
    let mut loaded = load_any(input, format, &bar)?;
    timer.lap("load");
    let clusters = rewrite_forming_clusters(&mut loaded, rewrite_args, false, lower_args.time_passes)?;
    timer.lap("rewrite");
    let config = match lower_config(lower_args) {
        Ok(c) => c,
        Err(e) => {
            report(vec![Box::new(e)], &loaded.source);
            return None;
        }
    };
    let Some(graph) = loaded.module.graphs.first() else {
        super::fail(CliError::NoGraph);
        return None;
    };
    let lowered = if clusters.is_empty() {
        lower::lower(graph, &config)
    } else {
        lower::lower_clusters_observed(graph, clusters, &config, &bar)
    };
    drop(bar);
    timer.lap("lower");
    match lowered {
        Ok((lowered, _)) => {
            if lower_args.time_passes {
                for phase in &lowered.phases {
                    errln!("  {:<22} {:>12.3} ms wall", phase.name, phase.wall.as_secs_f64() * 1e3);
                }
            }
            Some((loaded, lowered))
        }
        Err(LowerFailure::Lower(errors)) => {
            report(errors.into_iter().map(|e| Box::new(e) as AnyDiagnostic).collect(), &loaded.source);
            None
        }
        Err(LowerFailure::Clusters(errors)) => {
            report(errors.into_iter().map(|e| Box::new(e) as AnyDiagnostic).collect(), &loaded.source);
            None
        }
    }
}

/// `tpu-rewrite lower`.
/// Which form of a lowered module `lower` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoweredView {
    /// One program per cluster and logical core (what runs).
    Spmd,
    /// One program per replica and logical core, the replica bound.
    Expanded,
}

pub fn lower_command(
    file: &str,
    format: Option<InputFormat>,
    rewrite_args: &RewriteArgs,
    lower_args: &LowerArgs,
    (emit, view): (EmitFormat, LoweredView),
    describe: Option<Option<u64>>,
    output: Option<PathBuf>,
) -> ExitCode {
    let input = InputPath::parse(file);
    let Some((loaded, lowered)) = rewrite_and_lower(&input, format, rewrite_args, lower_args) else {
        return ExitCode::from(1);
    };
    if emit == EmitFormat::Stablehlo {
        let Some(graph) = loaded.module.graphs.first() else { return ExitCode::from(1) };
        return match crate::xla::stablehlo::emit_all(graph, &lowered.assignment, lower_args.steps_per_run) {
            Ok(text) => finish(write_output(output.as_deref(), text.as_bytes())),
            Err(e) => {
                report(vec![Box::new(e)], &loaded.source);
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
    let code = match emit_bytes(&lowered, emit) {
        Ok(bytes) => finish(write_output(output.as_deref(), &bytes)),
        Err(e) => {
            report(vec![Box::new(e)], &loaded.source);
            ExitCode::from(1)
        }
    };
    // The process exits next: freeing millions of nodes one by one would
    // only add time (a tenth of a large `lower`), so leave it to the OS.
    std::mem::forget((loaded, lowered));
    code
}

/// The arguments of `run`.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// The file (`-` for standard input).
    pub file: String,
    /// Input format (default: by extension).
    #[arg(long, value_enum)]
    pub input_format: Option<InputFormat>,
    #[command(flatten)]
    pub rewrite: RewriteArgs,
    #[command(flatten)]
    pub lower: LowerArgs,
    /// Replicated steps to run.
    #[arg(long, default_value_t = 1)]
    pub steps: u32,
    /// A JSON file mapping tensor names (`x0:0`) to nested arrays.
    #[arg(long)]
    pub feeds: Option<PathBuf>,
    /// A feed from a `.npy` file: `NAME=FILE.npy` (repeatable).
    #[arg(long = "feed")]
    pub feed: Vec<String>,
    /// Feeds named after a replicated input (`input0:0`) are global batches:
    /// split along dimension 0 into one slice per replica.
    #[arg(long)]
    pub split_batch: bool,
    /// One JSON feed file per input host, in host order (repeatable): each
    /// maps replicated inputs (`input0:0`) to that host's batch, split along
    /// dimension 0 among the host's own replicas.
    #[arg(long = "feed-per-host", value_name = "F.json")]
    pub feed_per_host: Vec<PathBuf>,
    /// Tensors to fetch (default: every replicated output).
    #[arg(long = "fetch")]
    pub fetch: Vec<String>,
    /// Print the fetched tensors as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Write each fetched tensor as `.npy` into this directory.
    #[arg(long)]
    pub npy_dir: Option<PathBuf>,
    /// Print scalar fetches every N steps (default: about ten lines per run).
    #[arg(long)]
    pub log_every: Option<u64>,
    /// The largest tensor any op may make, in bytes (default: half the
    /// available memory). A bigger one fails at its op, before allocating.
    #[arg(long, value_name = "BYTES")]
    pub max_tensor_bytes: Option<u64>,
    /// The longest any device may wait for another, in seconds.
    #[arg(long, default_value_t = 30)]
    pub timeout: u64,
    /// What runs the device programs: the simulator, or XLA through a PJRT plugin.
    #[arg(long, value_enum, default_value_t = Backend::Sim)]
    pub backend: Backend,
    /// The PJRT plugin (default: $TPU_REWRITE_PJRT_PLUGIN, then the cached CPU plugin).
    #[arg(long, value_name = "PATH")]
    pub pjrt_plugin: Option<PathBuf>,
}

/// The executor of `run`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    /// The thread simulator (the reference interpreter).
    Sim,
    /// XLA through a PJRT plugin (docs/xla.md).
    Pjrt,
}

/// The dtype of a fed tensor: the host placeholder's `dtype`, else the
/// tagged graph node's `T` or `dtype` (a `TPUReplicatedInput`), else f32.
fn feed_dtype(lowered: &Module, tagged: &Module, tensor: &str) -> crate::ir::DType {
    let name = tensor.split(':').next().unwrap_or(tensor);
    let attr = |g: &crate::ir::Graph, keys: &[&str]| {
        let node = g.node(g.find(name)?);
        keys.iter().find_map(|k| node.attrs.get(k).and_then(|v| v.as_type()))
    };
    lowered
        .graph(driver::HOST)
        .and_then(|g| attr(g, &["dtype"]))
        .or_else(|| tagged.graphs.first().and_then(|g| attr(g, &["T", "dtype"])))
        .unwrap_or(crate::ir::DType::F32)
}

/// Reads a JSON feed file: an object mapping tensor names to nested arrays
/// (optionally under a `"feeds"` key).
fn read_json_feeds(
    path: &std::path::Path,
    lowered: &Module,
    tagged: &Module,
) -> Result<Vec<(String, Tensor)>, CliError> {
    let text =
        std::fs::read(path).map_err(|e| CliError::Read { path: path.display().to_string(), reason: e.to_string() })?;
    let value: serde_json::Value =
        serde_json::from_slice(&text).map_err(|e| CliError::feed(format!("{}: not JSON: {e}", path.display())))?;
    let object = value.get("feeds").unwrap_or(&value);
    let serde_json::Value::Object(map) = object else {
        return Err(CliError::feed(format!("{}: expected an object mapping tensor names to arrays", path.display())));
    };
    map.iter()
        .map(|(name, v)| {
            let tensor = exec::tensor_from_json(v, feed_dtype(lowered, tagged, name)).map_err(|e| {
                let node = name.split(':').next().unwrap_or(name);
                let span = tagged.graphs.first().and_then(|g| g.find(node).map(|id| g.node(id).span));
                CliError::FeedValue {
                    file: path.display().to_string(),
                    tensor: name.clone(),
                    message: e.to_string(),
                    span,
                }
            })?;
            Ok((name.clone(), tensor))
        })
        .collect()
}

fn read_feeds(args: &RunArgs, lowered: &Module, tagged: &Module) -> Result<Vec<(String, Tensor)>, CliError> {
    let mut feeds = Vec::new();
    if let Some(path) = &args.feeds {
        feeds = read_json_feeds(path, lowered, tagged)?;
    }
    for item in &args.feed {
        let (name, file) =
            item.split_once('=').ok_or_else(|| CliError::usage(format!("--feed takes NAME=FILE.npy, got `{item}`")))?;
        let tensor =
            exec::read_npy_file(std::path::Path::new(file)).map_err(|e| CliError::feed(format!("{file}: {e}")))?;
        feeds.push((name.to_string(), tensor));
    }
    Ok(feeds)
}

/// Every `output_<i>_shard_<r>` of the host program, ordered by output then replica.
fn default_fetches(lowered: &Module) -> Vec<String> {
    let Some(host) = lowered.graph(driver::HOST) else { return Vec::new() };
    let mut outs: Vec<(u64, u64, String)> = host
        .node_ids()
        .filter_map(|id| {
            let name = &host.node(id).name;
            let rest = name.strip_prefix("output_")?;
            let (i, r) = rest.split_once("_shard_")?;
            Some((i.parse().ok()?, r.parse().ok()?, format!("{name}:0")))
        })
        .filter(|(_, _, n)| host.find(n.trim_end_matches(":0")).is_some_and(|id| &*host.node(id).op == "Identity"))
        .collect();
    outs.sort();
    outs.into_iter().map(|o| o.2).collect()
}

fn summary(t: &Tensor) -> String {
    let json = exec::tensor_to_json(t);
    let text = json.to_string();
    if text.len() <= 200 {
        text
    } else {
        format!(
            "{}… ({:?} {:?})",
            &text[..text.char_indices().nth(200).map_or(text.len(), |c| c.0)],
            t.dtype(),
            t.shape()
        )
    }
}

/// The operands (one per replica, in replica order) of the
/// `TPUReplicatedInput` that `tensor` names, as tensor names.
fn replica_operands(tagged: &Module, tensor: &str) -> Option<Vec<String>> {
    let graph = tagged.graphs.first()?;
    let id = graph.find(tensor.split(':').next().unwrap_or(tensor))?;
    if &*graph.node(id).op != "TPUReplicatedInput" {
        return None;
    }
    let operands = graph.data_inputs(id);
    Some(operands.iter().map(|o| format!("{}:{}", graph.node(o.src).name, o.output.unwrap_or(0))).collect())
}

/// Splits feeds named after a `TPUReplicatedInput` into one slice per
/// operand (replica), in replica order; other feeds pass through.
fn split_global_feeds(
    tagged: &Module,
    feeds: Vec<(String, Tensor)>,
) -> Result<Vec<(String, Tensor)>, Box<exec::ExecError>> {
    let mut out = Vec::new();
    for (name, value) in feeds {
        match replica_operands(tagged, &name) {
            Some(operands) => {
                let slices = exec::input::split_batch(&value, operands.len()).map_err(Box::new)?;
                out.extend(operands.into_iter().zip(slices));
            }
            None => out.push((name, value)),
        }
    }
    Ok(out)
}

/// Reads one feed file per input host and splits each host's batches among
/// that host's replicas; returns the per-replica feeds.
fn per_host_feeds(
    args: &RunArgs,
    loaded: &Loaded,
    lowered: &lower::Lowered,
) -> Result<Vec<(String, Tensor)>, AnyDiagnostic> {
    let message = |text: String| -> AnyDiagnostic { Box::new(CliError::feed(text)) };
    let workers = lower::input_workers(&lowered.assignment);
    let host_replicas: Vec<Vec<u32>> = workers.into_iter().map(|w| w.replicas).collect();
    let mut host_feeds = Vec::with_capacity(args.feed_per_host.len());
    for path in &args.feed_per_host {
        let feeds = read_json_feeds(path, &lowered.module, &loaded.module).map_err(|e| Box::new(e) as AnyDiagnostic)?;
        if let Some((input, _)) = feeds.iter().find(|(name, _)| replica_operands(&loaded.module, name).is_none()) {
            return Err(message(format!(
                "{}: per-host feeds name replicated inputs (`input0:0`); `{input}` is not a `TPUReplicatedInput`",
                path.display()
            )));
        }
        host_feeds.push(feeds);
    }
    let per_input = exec::split_per_host(&host_feeds, &host_replicas).map_err(|e| Box::new(e) as AnyDiagnostic)?;
    let mut out = Vec::new();
    for (input, slices) in per_input {
        let operands = replica_operands(&loaded.module, &input)
            .ok_or_else(|| message(format!("`{input}` is not a `TPUReplicatedInput`")))?;
        if operands.len() != slices.len() {
            return Err(message(format!(
                "`{input}` has {} replicas, but the input hosts feed {} replicas",
                operands.len(),
                slices.len()
            )));
        }
        out.extend(operands.into_iter().zip(slices));
    }
    Ok(out)
}

/// Groups the default fetches (`output_<i>_shard_<r>:0`, ordered by output
/// then replica) by output; an output marked with a reduce op gives its
/// first replica's copy.
fn grouped_outputs(tagged: &Module, fetched: &[(String, Tensor)]) -> Vec<(Option<exec::ReduceOp>, exec::OutputValue)> {
    let reduce = tagged.graphs.first().map(exec::output_reduce_ops).unwrap_or_default();
    let replica_of = |name: &str| {
        name.trim_end_matches(":0").rsplit_once("_shard_").and_then(|(_, r)| r.parse::<u64>().ok()).unwrap_or(0)
    };
    // Replica numbers come from names: rank them instead of indexing by them,
    // so `output_0_shard_99999999999` costs one slot, not 10^11.
    let mut replicas: Vec<u64> = fetched.iter().map(|(name, _)| replica_of(name)).collect();
    replicas.sort_unstable();
    replicas.dedup();
    let mut per_replica: Vec<Vec<Tensor>> = vec![Vec::new(); replicas.len()];
    for (name, t) in fetched {
        let rank = replicas.binary_search(&replica_of(name)).unwrap_or(0);
        per_replica[rank].push(t.clone());
    }
    let grouped = exec::group_outputs(per_replica, &reduce);
    grouped.into_iter().enumerate().map(|(i, v)| (reduce.get(i).copied().flatten(), v)).collect()
}

/// One grouped output as JSON: `{"per_replica": [...]}` or
/// `{"reduce_op": "SUM", "value": ...}`.
fn output_json((reduce, value): &(Option<exec::ReduceOp>, exec::OutputValue)) -> serde_json::Value {
    match value {
        exec::OutputValue::PerReplica(values) => {
            serde_json::json!({ "per_replica": values.iter().map(exec::tensor_to_json).collect::<Vec<_>>() })
        }
        exec::OutputValue::Reduced(t) => serde_json::json!({
            "reduce_op": reduce.map_or("NONE", exec::ReduceOp::name),
            "value": exec::tensor_to_json(t),
        }),
    }
}

/// Progress lines for a long run when stderr is no terminal: the first
/// after [`Heartbeat::FIRST`], then one every [`Heartbeat::EVERY`].
struct Heartbeat {
    total: u64,
    enabled: bool,
    start: std::time::Instant,
    next: Duration,
}

impl Heartbeat {
    const FIRST: Duration = Duration::from_secs(2);
    const EVERY: Duration = Duration::from_secs(30);

    fn new(total: u64, enabled: bool) -> Heartbeat {
        Heartbeat { total, enabled, start: std::time::Instant::now(), next: Self::FIRST }
    }

    /// Called after `done` iterations.
    fn tick(&mut self, done: u64) {
        if !self.enabled || done >= self.total {
            return;
        }
        let elapsed = self.start.elapsed();
        if elapsed < self.next {
            return;
        }
        self.next = elapsed + Self::EVERY;
        let rate = done as f64 / elapsed.as_secs_f64().max(1e-9);
        let left = Duration::from_secs_f64(((self.total - done) as f64 / rate.max(1e-9)).min(1e12));
        errln!(
            "iteration {done}/{} ({rate:.0}/s, about {} left; Ctrl-C stops)",
            self.total,
            indicatif::HumanDuration(left)
        );
    }
}

/// `tpu-rewrite run`.
pub fn run_command(args: RunArgs) -> ExitCode {
    if let Some(bytes) = args.max_tensor_bytes {
        exec::limits::set_max_tensor_bytes(bytes);
    }
    let input = InputPath::parse(&args.file);
    let Some((loaded, lowering)) = rewrite_and_lower(&input, args.input_format, &args.rewrite, &args.lower) else {
        return ExitCode::from(1);
    };
    let feeds = match read_feeds(&args, &lowering.module, &loaded.module) {
        Ok(f) => f,
        Err(e) => {
            report(vec![Box::new(e)], &loaded.source);
            return ExitCode::from(1);
        }
    };
    let mut feeds = if args.split_batch {
        match split_global_feeds(&loaded.module, feeds) {
            Ok(f) => f,
            Err(e) => {
                report(vec![e], &loaded.source);
                return ExitCode::from(1);
            }
        }
    } else {
        feeds
    };
    if !args.feed_per_host.is_empty() {
        match per_host_feeds(&args, &loaded, &lowering) {
            Ok(f) => feeds.extend(f),
            Err(e) => {
                report(vec![e], &loaded.source);
                return ExitCode::from(1);
            }
        }
    }
    let assignment = lowering.assignment.clone();
    let lowered = lowering.module;
    let fetches = if args.fetch.is_empty() { default_fetches(&lowered) } else { args.fetch.clone() };
    let feed_names: Vec<String> = feeds.iter().map(|f| f.0.clone()).collect();
    if let Some(tagged) = loaded.module.graphs.first() {
        if let Err(e) = driver::check_feeds_and_fetches(tagged, &feed_names, &fetches) {
            report(vec![Box::new(e)], &loaded.source);
            return ExitCode::from(1);
        }
    }
    let steps_per_run = u64::from(args.lower.steps_per_run.max(1));
    let total = u64::from(args.steps.max(1)) * steps_per_run;
    let log_every = args.log_every.unwrap_or((total / 10).max(1));
    let on_terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let progress = (total > 1 && !args.json && on_terminal).then(|| {
        let bar = indicatif::ProgressBar::new(total);
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{bar:40} {human_pos}/{human_len} iterations, {per_sec}, {eta} left",
        ) {
            bar.set_style(style);
        }
        bar
    });
    // Off a terminal, a long run still says how far it is (Ctrl-C ends it).
    let mut heartbeat = Heartbeat::new(total, progress.is_none() && total > 1);
    // The values of a step are the tensor fetches; targets (`^x`) give none.
    let fetch_names: Vec<String> = fetches.iter().filter(|f| !f.starts_with('^')).cloned().collect();
    let mut on_step = |i: u64, values: &[Tensor]| {
        if let Some(p) = &progress {
            p.inc(1);
        }
        heartbeat.tick(i + 1);
        let last = i + 1 == total;
        if !args.json && total > 1 && ((i + 1).is_multiple_of(log_every) || last) {
            let scalars: Vec<String> = fetch_names
                .iter()
                .zip(values)
                .filter(|(_, t)| t.len() == 1)
                .take(4)
                .map(|(n, t)| format!("{n} = {}", summary(t)))
                .collect();
            if !scalars.is_empty() {
                let line = format!("step {:>6}: {}", i + 1, scalars.join(", "));
                match &progress {
                    Some(p) => p.println(line),
                    None => errln!("{line}"),
                }
            }
        }
    };
    // Every op without a kernel, then every feed against its placeholder
    // and every unfed placeholder, at once and located, before anything runs.
    for errors in [exec::preflight::check_kernels(&lowered), exec::preflight::check_feeds(&lowered, &feeds)] {
        if !errors.is_empty() {
            report(errors.into_iter().map(|e| Box::new(e) as AnyDiagnostic).collect(), &loaded.source);
            return ExitCode::from(1);
        }
    }
    let config = driver::RunConfig { steps: args.steps.max(1), timeout: Duration::from_secs(args.timeout.max(1)) };
    let outcome = match args.backend {
        Backend::Sim => driver::run(&lowered, &feeds, &fetches, &config, &mut on_step),
        Backend::Pjrt => {
            if !args.fetch.is_empty() {
                eprintln!(
                    "error: --backend pjrt fetches the computation outputs and variables; --fetch is for the simulator"
                );
                return ExitCode::from(1);
            }
            let Some(graph) = loaded.module.graphs.first() else { return ExitCode::from(1) };
            let config = crate::xla::backend::RunConfig {
                plugin: args.pjrt_plugin.as_deref(),
                steps: args.steps.max(1),
                steps_per_run: args.lower.steps_per_run.max(1),
                feeds: &feeds,
            };
            let filter = crate::xla::stderr::Filter::install();
            let result = crate::xla::backend::run(graph, &assignment, &config);
            drop(filter);
            match result {
                // The simulator's default fetches, in its order, so both backends print alike.
                Ok(mut o) => {
                    let mut by_name: std::collections::HashMap<String, Tensor> = o.run.fetched.drain(..).collect();
                    o.run.fetched = fetches.iter().filter_map(|n| by_name.remove_entry(n)).collect();
                    Ok(o.run)
                }
                Err(e) => {
                    report(vec![Box::new(e)], &loaded.source);
                    return ExitCode::from(1);
                }
            }
        }
    };
    if let Some(p) = &progress {
        p.finish_and_clear();
    }
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            report(vec![Box::new(e)], &loaded.source);
            return ExitCode::from(1);
        }
    };
    if let Some(dir) = &args.npy_dir {
        if let Err(e) = std::fs::create_dir_all(dir) {
            return super::fail(CliError::Write { path: dir.display().to_string(), reason: e.to_string() });
        }
        for (name, t) in &outcome.fetched {
            let path = dir.join(format!("{}.npy", name.replace(['/', ':'], "_")));
            let bytes = match exec::write_npy(t) {
                Ok(b) => b,
                Err(e) => {
                    report(vec![Box::new(e)], &loaded.source);
                    return ExitCode::from(1);
                }
            };
            if let Err(e) = super::io::write_file(&path, &bytes) {
                return super::fail(e);
            }
        }
    }
    // Without --fetch, the fetches are the computation outputs: group them.
    let grouped = args.fetch.is_empty().then(|| grouped_outputs(&loaded.module, &outcome.fetched));
    if args.json {
        let value = match &grouped {
            Some(outputs) => serde_json::json!({ "outputs": outputs.iter().map(output_json).collect::<Vec<_>>() }),
            None => serde_json::Value::Object(
                outcome.fetched.iter().map(|(n, t)| (n.clone(), exec::tensor_to_json(t))).collect(),
            ),
        };
        let mut text = serde_json::to_string_pretty(&value).unwrap_or_default();
        text.push('\n');
        return finish(write_output(None, text.as_bytes()));
    }
    let mut text = String::new();
    match &grouped {
        Some(outputs) => {
            for (i, output) in outputs.iter().enumerate() {
                match output {
                    (Some(op), exec::OutputValue::Reduced(t)) => {
                        text.push_str(&format!("output {i} ({}) = {}\n", op.name(), summary(t)))
                    }
                    (_, exec::OutputValue::Reduced(t)) => text.push_str(&format!("output {i} = {}\n", summary(t))),
                    (_, exec::OutputValue::PerReplica(values)) => {
                        for (r, t) in values.iter().enumerate() {
                            text.push_str(&format!("output {i} replica {r} = {}\n", summary(t)));
                        }
                    }
                }
            }
        }
        None => {
            for (name, t) in &outcome.fetched {
                text.push_str(&format!("{name} = {}\n", summary(t)));
            }
        }
    }
    for (name, t) in &outcome.variables {
        text.push_str(&format!("variable {name} = {}\n", summary(t)));
    }
    finish(write_output(None, text.as_bytes()))
}
