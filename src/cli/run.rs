//! `tpu-rewrite run`: its arguments, and running the lowered module on
//! the simulator, on PJRT or on several processes, with the outputs
//! printed as text or JSON.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use super::diagnostics::AnyDiagnostic;
use super::error::CliError;
use super::feeds::{per_host_feeds, read_feeds, split_global_feeds};
use super::io::{write_output, InputPath};
use super::pipeline::{rewrite_and_lower, Target};
use super::{finish, report, InputFormat, LowerArgs, RewriteArgs};
use crate::exec::{self, driver, Tensor};
use crate::passes;
use crate::session::outputs::{computation_outputs, display_names, grouped_outputs, shard_fetches, Output};

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
    /// Replicated steps to run (at least 1).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub steps: u32,
    /// A JSON file mapping tensor names (`x0:0`) to nested arrays.
    #[arg(long)]
    pub feeds: Option<PathBuf>,
    /// A feed from a `.npy` file: `NAME=FILE.npy` (repeatable).
    #[arg(long = "feed", value_name = "NAME=FILE.npy", value_parser = feed_arg)]
    pub feed: Vec<String>,
    /// Feeds named after a replicated input (`input0:0`) are global batches:
    /// split along dimension 0 into one slice per replica.
    #[arg(long)]
    pub split_batch: bool,
    /// One JSON feed file per input host, in host order (repeatable), or
    /// one pattern with `{process_id}` for the host index: each maps
    /// replicated inputs (`input0:0`) to that host's batch, split along
    /// dimension 0 among the host's own replicas. On one host of a
    /// multi-host run, only that host's file is read.
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
    /// Write the variables after the last step as a TensorFlow checkpoint
    /// `DIR/ckpt` (for a SavedModel, with its checkpoint's keys, so
    /// `tf.train.Checkpoint(...).restore` reads it; docs/tf2.md).
    #[arg(long, value_name = "DIR")]
    pub save_checkpoint: Option<PathBuf>,
    /// Print scalar fetches every N steps (default: about ten lines per run).
    #[arg(long)]
    pub log_every: Option<u64>,
    /// The largest tensor any op may make, in bytes (default: half the
    /// available memory). A bigger one fails at its op, before allocating.
    #[arg(long, value_name = "BYTES")]
    pub max_tensor_bytes: Option<u64>,
    /// The most memory the run may hold at once, in bytes, or with a
    /// K/M/G/T suffix (powers of 1024). Default: three quarters of what the
    /// machine, the cgroup (`memory.max`) and `ulimit -v` leave. An op that
    /// would pass it fails before it allocates.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub max_memory: Option<u64>,
    /// The longest any device may wait for another, in seconds.
    #[arg(long, default_value_t = 30)]
    pub timeout: u64,
    /// Stop a step that runs longer than this many seconds, with an error
    /// (default: no limit; the simulator only). A loop that never ends
    /// waits for no device, so `--timeout` alone does not stop it.
    #[arg(long, value_name = "SECS")]
    pub deadline: Option<u64>,
    /// What runs the device programs: the simulator, or XLA through a PJRT plugin.
    #[arg(long, value_enum, default_value_t = Backend::Sim)]
    pub backend: Backend,
    /// The PJRT plugin (default: $TPU_REWRITE_PJRT_PLUGIN, then the cached CPU plugin).
    #[arg(long, value_name = "PATH")]
    pub pjrt_plugin: Option<PathBuf>,
    /// `--backend pjrt`: leave out the device checks (gather indices,
    /// TensorList capacity, empty Optionals) and get XLA's unchecked
    /// results: clamped indices, zeros (docs/robustness.md).
    #[arg(long)]
    pub no_device_checks: bool,
    /// A plain graph: do not run its variable initialisers (assignments
    /// from constants, TensorFlow's `init`) once before the first step;
    /// variables then start as zeros.
    #[arg(long)]
    pub no_initializers: bool,
    /// Processes of `--backend jax-distributed` (default 2; docs/distributed.md).
    /// Each process must get a whole share of the replicas. The launcher
    /// and its pinned requirements are built into the binary and written
    /// into the cache directory; `$TPU_REWRITE_PYTHON_DIR` names another
    /// directory holding them.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub processes: Option<u32>,
    /// Keep compiled executables in DIR and reuse them in later runs of
    /// the same program on the same plugin (`--backend pjrt`; default:
    /// `compile/` under the cache directory, docs/xla.md).
    #[arg(long, value_name = "DIR")]
    pub compile_cache: Option<PathBuf>,
    /// Compile every program afresh: no compile cache is read or written.
    #[arg(long, conflicts_with = "compile_cache")]
    pub no_compile_cache: bool,
    /// The most disk the compile cache may take, in bytes or with a
    /// K/M/G/T suffix; the least recently used entries go first.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes, default_value = "1G")]
    pub compile_cache_size: u64,
    /// One host of a multi-host `--backend jax-distributed` run: the
    /// coordinator's `HOST:PORT` (process 0's host). Run the same command
    /// on every host (docs/distributed.md). Absent with `--num-processes`:
    /// JAX finds it (Slurm, Cloud TPU).
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "processes")]
    pub coordinator: Option<String>,
    /// Processes of a multi-host run, one per host (default: $SLURM_NTASKS).
    #[arg(long, value_name = "N", conflicts_with = "processes", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub num_processes: Option<u32>,
    /// This host's process index in a multi-host run, 0..N (default:
    /// $SLURM_PROCID, else JAX's own detection).
    #[arg(long, value_name = "I", conflicts_with = "processes")]
    pub process_id: Option<u32>,
}

/// Checks a `--feed` value's form, `NAME=FILE.npy`, while the arguments are
/// parsed (a usage error, exit 2).
fn feed_arg(text: &str) -> Result<String, String> {
    match text.split_once('=') {
        Some((name, file)) if !name.is_empty() && !file.is_empty() => Ok(text.to_string()),
        _ => Err(format!("expected NAME=FILE.npy (the tensor to feed, e.g. `x:0={text}`)")),
    }
}

/// The executor of `run`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    /// The thread simulator (the reference interpreter).
    Sim,
    /// XLA through a PJRT plugin (docs/xla.md).
    Pjrt,
    /// JAX's multi-process runtime, `--processes N` on this host (docs/distributed.md;
    /// `$TPU_REWRITE_PYTHON_DIR` overrides the built-in launcher).
    JaxDistributed,
}

fn summary(t: &Tensor) -> String {
    // 200 characters need at most 100 elements: a huge tensor is never converted whole.
    let json = exec::tensor_to_json(&t.head(100));
    let text = json.to_string();
    if text.len() <= 200 {
        text
    } else {
        format!(
            "{}… ({} {:?})",
            &text[..text.char_indices().nth(200).map_or(text.len(), |c| c.0)],
            t.dtype(),
            t.shape()
        )
    }
}

/// The variables after the run as JSON: name, dtype, shape and `value`,
/// or `per_replica` values where the mirrored copies differ.
fn variables_json(outcome: &driver::RunOutcome) -> Vec<serde_json::Value> {
    let mut all: Vec<(&String, Vec<&Tensor>)> = outcome.mirrors.iter().map(|(k, v)| (k, v.iter().collect())).collect();
    for (name, t) in &outcome.variables {
        if !outcome.mirrors.contains_key(name) {
            all.push((name, vec![t]));
        }
    }
    all.sort_by(|a, b| a.0.cmp(b.0));
    all.into_iter()
        .filter_map(|(name, copies)| {
            let first = *copies.first()?;
            let mut entry = serde_json::json!({
                "name": name,
                "dtype": first.dtype().to_string(),
                "shape": first.shape(),
            });
            if copies.iter().all(|c| c.bit_eq(first)) {
                entry["value"] = exec::tensor_to_json(first);
            } else {
                entry["per_replica"] = copies.iter().map(|t| exec::tensor_to_json(t)).collect();
            }
            Some(entry)
        })
        .collect()
}

/// A file name for tensor `name` (`/` and `:` become `_`).
fn npy_name(name: &str) -> String {
    format!("{}.npy", name.replace(['/', ':', ' '], "_").replace(['(', ')'], ""))
}

/// Writes every fetched tensor (by the name the user knows) and every
/// variable (under `variables/`, one file per replica where the mirrored
/// copies differ) as `.npy` into `dir`.
fn write_npy_dir(
    dir: &std::path::Path,
    fetched: &[(String, Tensor)],
    outcome: &driver::RunOutcome,
) -> Result<(), AnyDiagnostic> {
    let write = |path: std::path::PathBuf, t: &Tensor| -> Result<(), AnyDiagnostic> {
        let bytes = exec::write_npy(t).map_err(|e| Box::new(e) as AnyDiagnostic)?;
        super::io::write_file(&path, &bytes).map_err(|e| Box::new(e) as AnyDiagnostic)
    };
    let mkdir = |d: &std::path::Path| {
        std::fs::create_dir_all(d).map_err(|e| {
            Box::new(CliError::Write { path: d.display().to_string(), reason: e.to_string() }) as AnyDiagnostic
        })
    };
    mkdir(dir)?;
    for (name, t) in fetched {
        write(dir.join(npy_name(name)), t)?;
    }
    let vars = dir.join("variables");
    let mut made = false;
    for (name, t) in &outcome.variables {
        if !made {
            mkdir(&vars)?;
            made = true;
        }
        match outcome.mirrors.get(name).filter(|copies| !copies.iter().all(|c| c.bit_eq(t))) {
            Some(copies) => {
                for (r, copy) in copies.iter().enumerate() {
                    write(vars.join(npy_name(&format!("{name}/replica_{r}"))), copy)?;
                }
            }
            None => write(vars.join(npy_name(name)), t)?,
        }
    }
    Ok(())
}

/// One grouped output as JSON: its tensor name, dtype and shape, then
/// `"per_replica": [...]` or `"reduce_op": "SUM", "value": ...`.
fn output_json(name: String, (reduce, value): &(Option<exec::ReduceOp>, exec::OutputValue)) -> serde_json::Value {
    let first = match value {
        exec::OutputValue::PerReplica(values) => values.first(),
        exec::OutputValue::Reduced(t) => Some(t),
    };
    let dtype = first.map(|t| t.dtype().to_string());
    let shape = first.map(|t| t.shape().to_vec());
    match value {
        exec::OutputValue::PerReplica(values) => serde_json::json!({
            "name": name,
            "dtype": dtype,
            "shape": shape,
            "per_replica": values.iter().map(exec::tensor_to_json).collect::<Vec<_>>(),
        }),
        exec::OutputValue::Reduced(t) => serde_json::json!({
            "name": name,
            "dtype": dtype,
            "shape": shape,
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

/// Processes of `--backend jax-distributed` without `--processes`.
const DEFAULT_PROCESSES: u32 = 2;

/// The most scalar fetches one step-log line shows; the rest are counted.
const STEP_LOG_SCALARS: usize = 8;

/// `tpu-rewrite run`.
pub fn run_command(args: RunArgs) -> ExitCode {
    if let Some(bytes) = args.max_tensor_bytes {
        exec::limits::set_max_tensor_bytes(bytes);
    }
    if let Some(bytes) = args.max_memory {
        exec::memory::set_budget(bytes);
    }
    exec::memory::start_counting();
    crate::keep_freed_memory();
    if args.deadline.is_some() && args.backend != Backend::Sim {
        // XLA cannot stop a running execution: a deadline would not hold.
        return super::fail_with(CliError::usage("--deadline applies to the simulator (--backend sim) only"), 2);
    }
    if args.processes.is_some() && args.backend != Backend::JaxDistributed {
        return super::fail_with(CliError::usage("--processes applies to --backend jax-distributed only"), 2);
    }
    let multi_host = match super::backends::multi_host(&args) {
        Ok(m) => m,
        Err(message) => return super::fail_with(CliError::usage(message), 2),
    };
    if (args.compile_cache.is_some() || args.no_compile_cache) && args.backend != Backend::Pjrt {
        return super::fail_with(
            CliError::usage("--compile-cache and --no-compile-cache apply to --backend pjrt only"),
            2,
        );
    }
    let input = InputPath::parse(&args.file);
    // Sample feeds beside the graph (`X.feeds.json` for `X.opg`) when none are given.
    let mut args = args;
    if args.feeds.is_none() && args.feed.is_empty() && args.feed_per_host.is_empty() {
        if let InputPath::File(path) = &input {
            let sample = path.with_extension("feeds.json");
            if sample.is_file() {
                errln!("feeds: {} (found beside the graph; --feeds or --feed gives others)", sample.display());
                args.feeds = Some(sample);
            }
        }
    }
    let unlowered = match args.backend {
        Backend::Sim => passes::single_replica::Unlowered::InCluster,
        _ => passes::single_replica::Unlowered::Refuse,
    };
    let target = match args.backend {
        Backend::Sim => Target::Graph,
        Backend::Pjrt | Backend::JaxDistributed => Target::Xla,
    };
    let plain = super::plain::PlainRun {
        fetches: &args.fetch,
        unlowered,
        feeds_file: args.feeds.as_deref(),
        feed: &args.feed,
        skip_initializers: args.no_initializers,
        data_parallel: args.lower.data_parallel,
    };
    let (loaded, lowering, single) =
        match rewrite_and_lower(&input, args.input_format, &args.rewrite, &args.lower, Some(&plain), target) {
            Ok(done) => done,
            Err(code) => return code,
        };
    if let Some(single) = &single {
        errln!("{}", crate::session::plain::describe(single));
    }
    // Feeds of placeholders the run does not need, and of variables (their
    // values were loaded above), are not feeds of the program.
    let mut pruned = single.as_ref().map(|s| s.pruned_feeds.clone()).unwrap_or_default();
    if single.is_some() {
        pruned.extend(loaded.module.graphs.first().map(super::feeds::variable_handles).unwrap_or_default().into_keys());
    }
    let feeds = match read_feeds(&args, &lowering.module, &loaded.module, &pruned) {
        Ok(f) => f,
        Err(e) => {
            report(vec![Box::new(e)], &loaded.source);
            return ExitCode::from(1);
        }
    };
    let mut feeds = if args.split_batch || args.lower.data_parallel.is_some() {
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
        let only_host = multi_host.as_ref().map(|(_, m)| m.process_id);
        if only_host == Some(None) {
            return super::fail_with(
                CliError::usage("--feed-per-host on one host of several needs --process-id (or $SLURM_PROCID)"),
                2,
            );
        }
        match per_host_feeds(&args, &loaded, &lowering, only_host.flatten()) {
            Ok(f) => feeds.extend(f),
            Err(e) => {
                report(vec![e], &loaded.source);
                return ExitCode::from(1);
            }
        }
    }
    let assignment = lowering.assignment.clone();
    let lowered = lowering.module;
    let outputs = computation_outputs(&loaded.module, &lowered, single.as_ref());
    let fetches = match (&single, loaded.module.graphs.first()) {
        // A plain graph's fetches are carried by the cluster's outputs.
        (Some(single), Some(tagged)) if !args.fetch.is_empty() => {
            crate::session::plain::fetches(single, tagged, &args.fetch)
        }
        _ if args.fetch.is_empty() => shard_fetches(&outputs),
        _ => args.fetch.clone(),
    };
    if let Some(tagged) = loaded.module.graphs.first() {
        if let Err(e) = super::validate::check_fetch_names(tagged, &lowered, &args.fetch) {
            return super::fail(e);
        }
    }
    // A fetch of a variable handle (`w1:0`) gives the variable's value after
    // the run, not the handle: the backends do not fetch it.
    let variable_of = |fetch: &str| -> Option<String> {
        let graph = loaded.module.graphs.first()?;
        let node = graph.node(graph.find(fetch.split(':').next()?)?);
        matches!(&*node.op, "VarHandleOp" | "MirroredVarHandleOp").then(|| node.name.to_string())
    };
    let variable_fetches: Vec<(String, String)> = args
        .fetch
        .iter()
        .filter(|f| !f.starts_with('^'))
        .filter_map(|f| variable_of(f).map(|v| (f.clone(), v)))
        .collect();
    let mut fetches = fetches;
    fetches.retain(|f| !variable_fetches.iter().any(|(asked, _)| asked == f));
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
        let style = indicatif::ProgressStyle::with_template(
            "{msg:>16} [{bar:40}] {human_pos}/{human_len} iterations, {per_sec}, {eta} left",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> ");
        indicatif::ProgressBar::new(total).with_style(style).with_message("run")
    });
    // Off a terminal, a long run still says how far it is (Ctrl-C ends it).
    let mut heartbeat = Heartbeat::new(total, progress.is_none() && total > 1);
    // The values of a step are the tensor fetches; targets (`^x`) give none.
    let fetch_names: Vec<String> = fetches.iter().filter(|f| !f.starts_with('^')).cloned().collect();
    let fetch_names = display_names(&outputs, single.as_ref(), &fetch_names);
    let mut on_step = |i: u64, values: &[Tensor]| {
        if let Some(p) = &progress {
            p.inc(1);
        }
        heartbeat.tick(i + 1);
        let last = i + 1 == total;
        if !args.json && total > 1 && ((i + 1).is_multiple_of(log_every) || last) {
            let mut scalars: Vec<String> = fetch_names
                .iter()
                .zip(values)
                .filter(|(_, t)| t.len() == 1)
                .map(|(n, t)| format!("{n} = {}", summary(t)))
                .collect();
            if scalars.len() > STEP_LOG_SCALARS {
                let more = scalars.len() - STEP_LOG_SCALARS;
                scalars.truncate(STEP_LOG_SCALARS);
                scalars.push(format!("… and {more} more"));
            }
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
    let config = driver::RunConfig {
        steps: args.steps.max(1),
        timeout: Duration::from_secs(args.timeout.max(1)),
        deadline: args.deadline.map(|s| Duration::from_secs(s.max(1))),
    };
    let outcome = match args.backend {
        Backend::Sim => driver::run(&lowered, &feeds, &fetches, &config, &mut on_step),
        Backend::JaxDistributed => {
            if !args.fetch.is_empty() {
                eprintln!("error: --backend jax-distributed fetches the computation outputs and variables; --fetch is for the simulator");
                return ExitCode::from(1);
            }
            let Some(graph) = loaded.module.graphs.first() else { return ExitCode::from(1) };
            let processes = match &multi_host {
                Some((n, _)) => *n,
                None => args.processes.unwrap_or(DEFAULT_PROCESSES),
            };
            if let Err(message) = super::validate::check_processes(processes, &assignment) {
                return super::fail_with(CliError::usage(message), 2);
            }
            let config = crate::xla::distributed::Config {
                processes: processes as usize,
                multi_host: multi_host.as_ref().map(|(_, m)| m.clone()),
                steps: args.steps.max(1),
                steps_per_run: args.lower.steps_per_run.max(1),
                feeds: &feeds,
                deadline: Duration::from_secs(300 + args.timeout),
                library: Some(&loaded.module),
            };
            let result = crate::xla::distributed::run(graph, &assignment, &config);
            if let Ok(o) = &result {
                super::backends::report_held(&o.held);
            }
            match result {
                Ok(o) if o.process_index != 0 => {
                    errln!("process {} of {processes}: done; process 0 prints the results", o.process_index);
                    return ExitCode::SUCCESS;
                }
                Ok(o) => Ok(crate::xla::distributed::in_fetch_order(o.run, &fetches)),
                Err(e) => {
                    let e = match e {
                        crate::xla::distributed::DistributedError::Xla(x) => {
                            crate::xla::distributed::DistributedError::Xla(super::pipeline::in_binary_input(
                                x,
                                loaded.format,
                            ))
                        }
                        other => other,
                    };
                    report(vec![Box::new(e)], &loaded.source);
                    return ExitCode::from(1);
                }
            }
        }
        Backend::Pjrt => {
            let Some(graph) = loaded.module.graphs.first() else { return ExitCode::from(1) };
            let cache = (!args.no_compile_cache).then(|| crate::xla::cache::CompileCache {
                dir: args.compile_cache.clone().unwrap_or_else(crate::xla::cache::CompileCache::default_dir),
                max_bytes: args.compile_cache_size,
            });
            let config = crate::xla::backend::RunConfig {
                plugin: args.pjrt_plugin.as_deref(),
                steps: args.steps.max(1),
                steps_per_run: args.lower.steps_per_run.max(1),
                feeds: &feeds,
                host_transfer: args.lower.host_transfer,
                fetch: &fetches,
                library: Some(&loaded.module),
                no_device_checks: args.no_device_checks,
                compile_cache: cache.as_ref(),
                unpacked_sums: args.rewrite.all_reduce_fusion == super::FusionArg::Off,
            };
            let filter = crate::xla::stderr::Filter::install();
            let result = crate::xla::backend::run(graph, &assignment, &config);
            drop(filter);
            if let Ok(o) = &result {
                super::backends::report_cache_use(&o.timings);
                if args.lower.time_passes {
                    o.timings.lines().iter().for_each(|line| errln!("{line}"));
                }
            }
            match result {
                // The simulator's default fetches, in its order, so both backends print alike.
                Ok(mut o) => {
                    let mut by_name: std::collections::HashMap<String, Tensor> = o.run.fetched.drain(..).collect();
                    // --fetch names the device program's results; anything else
                    // (a host op after the step, a target) is not computed here.
                    // A plain graph's targets ran in the device program or on the host after it.
                    let ran = |n: &String| single.is_some() && n.starts_with('^');
                    if let Some(name) = fetches.iter().find(|n| !by_name.contains_key(*n) && !ran(n)) {
                        let mut available: Vec<&String> = by_name.keys().collect();
                        available.sort();
                        let available = available.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ");
                        let e = crate::xla::XlaError::NotFetchable { name: name.clone(), available };
                        report(vec![Box::new(e)], &loaded.source);
                        return ExitCode::from(1);
                    }
                    o.run.fetched = fetches.iter().filter_map(|n| by_name.remove_entry(n)).collect();
                    Ok(o.run)
                }
                Err(e) => {
                    report(vec![Box::new(super::pipeline::in_binary_input(e, loaded.format))], &loaded.source);
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
    let mut outcome = outcome;
    if let Some(single) = &single {
        crate::session::plain::rename_fetched(single, &mut outcome.fetched);
    }
    if !variable_fetches.is_empty() {
        let mut by_name: std::collections::HashMap<String, Tensor> = outcome.fetched.drain(..).collect();
        for asked in args.fetch.iter().filter(|f| !f.starts_with('^')) {
            if let Some((_, var)) = variable_fetches.iter().find(|(a, _)| a == asked) {
                let Some(value) = outcome.variables.get(var) else {
                    let available = outcome.variables.keys().cloned().collect::<Vec<_>>().join(", ");
                    let available = if available.is_empty() { "none".to_string() } else { available };
                    let e = CliError::VariableFetch { name: asked.clone(), variable: var.clone(), available };
                    report(vec![Box::new(e)], &loaded.source);
                    return ExitCode::from(1);
                };
                outcome.fetched.push((asked.clone(), value.clone()));
            } else if let Some(t) = by_name.remove(asked) {
                outcome.fetched.push((asked.clone(), t));
            }
        }
    }
    if let Some(dir) = &args.save_checkpoint {
        match super::checkpoint::save(dir, loaded.saved_model.as_ref(), &outcome.variables) {
            Ok(prefix) => errln!("checkpoint written: {}", prefix.display()),
            Err(e) => return super::fail(e),
        }
    }
    // Without --fetch, the fetches are the computation outputs: named as the user knows them.
    let fetched_names: Vec<String> = outcome.fetched.iter().map(|(n, _)| n.clone()).collect();
    let shown = if args.fetch.is_empty() {
        // A plain graph's fetched names were given back already; find their carriers again.
        let carriers: Vec<String> = outputs.iter().flat_map(|o| o.shards.iter().cloned()).collect();
        if carriers.len() == fetched_names.len() {
            display_names(&outputs, single.as_ref(), &carriers)
        } else {
            fetched_names
        }
    } else {
        fetched_names
    };
    if let Some(dir) = &args.npy_dir {
        let named: Vec<(String, Tensor)> =
            shown.iter().cloned().zip(outcome.fetched.iter().map(|(_, t)| t.clone())).collect();
        if let Err(e) = write_npy_dir(dir, &named, &outcome) {
            report(vec![e], &loaded.source);
            return ExitCode::from(1);
        }
    }
    // Without --fetch, the fetches are the computation outputs: group them.
    let grouped = args.fetch.is_empty().then(|| grouped_outputs(&outputs, &outcome.fetched));
    if args.json {
        let value = match &grouped {
            Some(grouped) => serde_json::json!({
                "outputs": grouped
                    .iter()
                    .zip(&outputs)
                    .map(|(o, out)| output_json(out.name.clone(), o))
                    .collect::<Vec<_>>(),
                "variables": variables_json(&outcome),
            }),
            // `--fetch`: each tensor asked for, named the same way.
            None => serde_json::json!({
                "outputs": outcome
                    .fetched
                    .iter()
                    .map(|(name, t)| serde_json::json!({
                        "name": name,
                        "dtype": t.dtype().to_string(),
                        "shape": t.shape(),
                        "value": exec::tensor_to_json(t),
                    }))
                    .collect::<Vec<_>>(),
                "variables": variables_json(&outcome),
            }),
        };
        let mut text = serde_json::to_string_pretty(&value).unwrap_or_default();
        text.push('\n');
        return finish(write_output(None, text.as_bytes()));
    }
    let mut text = String::new();
    match &grouped {
        Some(grouped) => {
            for (output, Output { name, .. }) in grouped.iter().zip(&outputs) {
                match output {
                    (Some(op), exec::OutputValue::Reduced(t)) => {
                        text.push_str(&format!("output {name} ({}) = {}\n", op.name(), summary(t)))
                    }
                    (_, exec::OutputValue::Reduced(t)) => text.push_str(&format!("output {name} = {}\n", summary(t))),
                    (_, exec::OutputValue::PerReplica(values)) if values.len() == 1 => {
                        text.push_str(&format!("output {name} = {}\n", summary(&values[0])));
                    }
                    (_, exec::OutputValue::PerReplica(values)) => {
                        for (r, t) in values.iter().enumerate() {
                            text.push_str(&format!("output {name} replica {r} = {}\n", summary(t)));
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
    if text.contains("… (") && args.npy_dir.is_none() {
        errln!("note: long values are shortened here; --json or --npy-dir DIR gives every output and variable whole");
    }
    finish(write_output(None, text.as_bytes()))
}

/// A byte count: digits with an optional K, M, G or T suffix (powers of
/// 1024, `KiB` spellings too).
fn parse_bytes(text: &str) -> Result<u64, String> {
    let upper = text.trim().to_ascii_uppercase();
    let digits = upper.trim_end_matches("IB").trim_end_matches('B');
    let (number, shift) = match digits.char_indices().last() {
        Some((i, 'K')) => (&digits[..i], 10),
        Some((i, 'M')) => (&digits[..i], 20),
        Some((i, 'G')) => (&digits[..i], 30),
        Some((i, 'T')) => (&digits[..i], 40),
        _ => (digits, 0),
    };
    let value: u64 = number.trim().parse().map_err(|_| format!("`{text}` is not a byte count (like 4096 or 2G)"))?;
    value.checked_mul(1u64 << shift).ok_or_else(|| format!("`{text}` is more than 2^64 bytes"))
}

#[cfg(test)]
mod tests {
    use super::parse_bytes;

    #[test]
    fn byte_counts_take_binary_suffixes() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("2G"), Ok(2 << 30));
        assert_eq!(parse_bytes("512MiB"), Ok(512 << 20));
        assert_eq!(parse_bytes("3k"), Ok(3 << 10));
        assert!(parse_bytes("lots").is_err());
        assert!(parse_bytes("99999999999T").is_err());
    }
}
