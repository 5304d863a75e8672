//! `run --backend jax-distributed`: the device program on N processes of
//! JAX's multi-process runtime (coordination service, gloo collectives on
//! CPU), driven by `python/tpu_rewrite_launch.py`.
//!
//! Order of a run, per cluster: emit the StableHLO module
//! ([`super::stablehlo::emit_module`]), write it with `job.json` (replica
//! count, the device of every replica, argument kinds, steps) and every
//! argument's per-replica value as `.npy` into a temporary job directory;
//! start N launcher processes in one new process group, with a coordinator
//! on a free 127.0.0.1 port; wait; read back process 0's gathered results
//! (`out_<result>_<replica>.npy`). The result has the simulator driver's
//! shape ([`RunOutcome`]).
//!
//! Invariants: tpu-rewrite's device `d` (`task * cores_per_host + core`)
//! is process `d / K`'s local device `d % K`, with K the devices per
//! process; every process owns at least one replica. Faults: the first
//! process to exit non-zero, or the run outliving its deadline, ends the
//! whole group (SIGKILL to the process group) and the error names the
//! process and quotes its last log lines; the launcher also dies with its
//! parent (`PR_SET_PDEATHSIG`), so no process outlives tpu-rewrite.
//! Cost: one emission and one `.npy` per argument and replica; the run
//! itself is the processes' start (~seconds) plus `steps` executions.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use miette::Diagnostic;
use thiserror::Error;

use super::host::MissingFeed;
use super::stablehlo::{self, ArgSource, Staged};
use super::XlaError;
use crate::exec::driver::RunOutcome;
use crate::exec::Tensor;
use crate::ir::{Graph, NodeId};
use crate::lower::DeviceAssignment;
use crate::passes::form_clusters;

mod exchange;

/// An error of the distributed backend.
#[derive(Debug, Error, Diagnostic)]
pub enum DistributedError {
    /// Emission or host evaluation failed (the PJRT backend's errors).
    #[error(transparent)]
    #[diagnostic(transparent)]
    Xla(#[from] XlaError),

    /// The replicas cannot be spread over the processes.
    #[error("{replicas} replicas on devices 0..{devices} cannot give each of {processes} processes a replica")]
    #[diagnostic(
        code(tpu_rewrite::distributed::placement),
        help("use --processes N with N no larger than the replica count (and dividing the devices the topology uses)")
    )]
    Placement {
        /// The replica count.
        replicas: usize,
        /// How many devices the topology uses.
        devices: usize,
        /// How many processes were asked for.
        processes: usize,
    },

    /// The Python environment could not be made or found.
    #[error("no Python environment for JAX: {message}")]
    #[diagnostic(
        code(tpu_rewrite::distributed::environment),
        help("run python/setup-venv (needs python3 with venv and pip, and PyPI), or set $TPU_REWRITE_JAX_PYTHON to a python with jax==0.10.2")
    )]
    Environment {
        /// What failed while making or finding it.
        message: String,
    },

    /// Writing the job directory or reading results failed.
    #[error("job directory {path}: {message}")]
    #[diagnostic(code(tpu_rewrite::distributed::job))]
    Job {
        /// The job directory.
        path: String,
        /// What failed.
        message: String,
    },

    /// A process exited with an error (or was killed); the others this
    /// `tpu-rewrite` started were ended.
    #[error("process {process} of {processes} {status}; {others}\n{log}")]
    #[diagnostic(
        code(tpu_rewrite::distributed::process_failed),
        help("the lines above are the end of that process's log")
    )]
    ProcessFailed {
        /// The failed process's index.
        process: usize,
        /// How many processes ran.
        processes: usize,
        /// How it ended (exit status or signal), as printed.
        status: String,
        /// What became of the other processes, as printed.
        others: &'static str,
        /// The end of its log.
        log: String,
    },

    /// Another process lowered a different module (the launcher's hash check).
    #[error("process {process} refused the run: {message}")]
    #[diagnostic(
        code(tpu_rewrite::distributed::module_mismatch),
        help("run the same tpu-rewrite version on every host with the same graph file, flags and feeds' shapes; each process lowers the graph itself and the modules must be identical")
    )]
    ModuleMismatch {
        /// This host's process index.
        process: usize,
        /// The launcher's explanation (which processes differ).
        message: String,
    },

    /// The run outlived its deadline; every process was ended.
    #[error("the {processes} processes did not finish within {seconds} s; they were ended")]
    #[diagnostic(
        code(tpu_rewrite::distributed::timeout),
        help("raise --timeout (the deadline is 300 s plus --timeout), or look for a process that waits for a peer")
    )]
    Timeout {
        /// How many processes ran.
        processes: usize,
        /// The deadline in seconds.
        seconds: u64,
    },
}

/// One process of a run started on every host by its own `tpu-rewrite`
/// (`--coordinator`, `--num-processes`, `--process-id`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MultiHost {
    /// The coordinator, `HOST:PORT`; `None`: JAX's own detection (Slurm,
    /// Cloud TPU, GKE, MPI).
    pub coordinator: Option<String>,
    /// This process's index; `None`: JAX's own detection.
    pub process_id: Option<usize>,
    /// The platform's own devices instead of `K` CPU devices (TPU, GPU).
    pub platform_devices: bool,
}

/// Settings of a distributed run.
#[derive(Clone, Debug)]
pub struct Config<'a> {
    /// Processes: all started on this host, or (with `multi_host`) one per
    /// host, each started by that host's `tpu-rewrite`.
    pub processes: usize,
    /// This host's part of a multi-host run (`None`: every process here).
    pub multi_host: Option<MultiHost>,
    /// Replicated steps.
    pub steps: u32,
    /// Device iterations per step, looped on the device.
    pub steps_per_run: u32,
    /// Feeds: tensor name → value.
    pub feeds: &'a [(String, Tensor)],
    /// The deadline of the whole run (start, compile, steps).
    pub deadline: Duration,
    /// The module whose functions the graph's control-flow and call ops
    /// name (`None`: the graph calls no function).
    pub library: Option<&'a crate::ir::Module>,
}

/// A distributed run's results and process 0's timings.
pub struct Outcome {
    /// The fetched values, as the simulator reports them (empty on a
    /// multi-host run's processes other than 0).
    pub run: RunOutcome,
    /// The process this `tpu-rewrite` ran (0 when it started them all).
    pub process_index: usize,
    /// Seconds of each step (one `execute_sharded`), per cluster, from process 0.
    pub step_seconds: Vec<Vec<f64>>,
    /// What each process this `tpu-rewrite` started loaded of the feeds and
    /// host values, per cluster: only its own replicas'.
    pub held: Vec<Held>,
}

/// The feed and host values one launcher process loaded onto its devices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    /// The process index.
    pub process: usize,
    /// The replicas whose values it loaded (its own).
    pub replicas: Vec<usize>,
    /// Their bytes, summed over the arguments of every stage.
    pub bytes: u64,
}

/// The launcher, its pinned requirements and the script that makes their
/// venv, compiled into the binary so that an installed `tpu-rewrite` needs
/// no source tree: `(file name, contents)`.
const EMBEDDED_PYTHON: [(&str, &str); 3] = [
    ("tpu_rewrite_launch.py", include_str!("../../../python/tpu_rewrite_launch.py")),
    ("requirements.txt", include_str!("../../../python/requirements.txt")),
    ("setup-venv", include_str!("../../../python/setup-venv")),
];

/// The directory of `tpu_rewrite_launch.py`, `requirements.txt` and
/// `setup-venv`: `$TPU_REWRITE_PYTHON_DIR` when set, else the embedded
/// copies written (once per content) into `python-<hash>` under the cache
/// directory ([`crate::xla::plugin::cache_dir`]).
pub fn python_dir() -> Result<PathBuf, DistributedError> {
    if let Some(dir) = std::env::var_os("TPU_REWRITE_PYTHON_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    embedded_python_dir(&crate::xla::plugin::cache_dir())
}

/// Writes the embedded Python files into `cache/python-<hash>` unless a
/// complete copy is there, and returns that directory. The files are
/// written into a temporary directory beside it, then renamed into place,
/// so a concurrent or interrupted caller never sees half a copy.
pub fn embedded_python_dir(cache: &Path) -> Result<PathBuf, DistributedError> {
    use std::hash::Hasher as _;
    // A content key, not a security check: a changed file gets a new directory.
    let mut hasher = rustc_hash::FxHasher::default();
    for (name, text) in EMBEDDED_PYTHON {
        hasher.write(name.as_bytes());
        hasher.write_u8(0);
        hasher.write(text.as_bytes());
        hasher.write_u8(0);
    }
    let hash = format!("{}-{:016x}", env!("CARGO_PKG_VERSION"), hasher.finish());
    let dir = cache.join(format!("python-{hash}"));
    if EMBEDDED_PYTHON.iter().all(|(name, _)| dir.join(name).is_file()) {
        return Ok(dir);
    }
    let fail = |what: &Path, e: std::io::Error| DistributedError::Environment {
        message: format!("cannot write the embedded launcher into {}: {e}", what.display()),
    };
    std::fs::create_dir_all(cache).map_err(|e| fail(cache, e))?;
    let staging = tempfile::Builder::new().prefix(".python-").tempdir_in(cache).map_err(|e| fail(cache, e))?;
    for (name, text) in EMBEDDED_PYTHON {
        let path = staging.path().join(name);
        std::fs::write(&path, text).map_err(|e| fail(&path, e))?;
    }
    match std::fs::rename(staging.path(), &dir) {
        Ok(()) => {
            // The directory now lives under its final name.
            let _ = staging.keep();
            Ok(dir)
        }
        // Another process put a complete copy there first.
        Err(_) if EMBEDDED_PYTHON.iter().all(|(name, _)| dir.join(name).is_file()) => Ok(dir),
        Err(e) => Err(fail(&dir, e)),
    }
}

/// The python to run the launcher with: `$TPU_REWRITE_JAX_PYTHON`, else
/// the venv `python/setup-venv` makes (once) from the pinned requirements.
pub fn python() -> Result<PathBuf, DistributedError> {
    if let Some(p) = std::env::var_os("TPU_REWRITE_JAX_PYTHON") {
        return Ok(PathBuf::from(p));
    }
    let script = python_dir()?.join("setup-venv");
    let out = Command::new("bash")
        .arg(&script)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| DistributedError::Environment { message: format!("{}: {e}", script.display()) })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(8).collect();
        return Err(DistributedError::Environment {
            message: format!(
                "{} failed ({}):\n{}",
                script.display(),
                out.status,
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            ),
        });
    }
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Ok(PathBuf::from(path))
}

/// Runs every cluster of the tagged `graph` on `config.processes` JAX processes.
pub fn run(graph: &Graph, assignment: &DeviceAssignment, config: &Config) -> Result<Outcome, DistributedError> {
    let (clusters, errors) = form_clusters(graph);
    if let Some(e) = errors.first() {
        return Err(XlaError::UnsupportedGraph { message: e.to_string() }.into());
    }
    if clusters.is_empty() {
        return Err(XlaError::UnsupportedGraph {
            message: "the graph has no replicate cluster: nothing runs on a device".into(),
        }
        .into());
    }
    let emit_config = stablehlo::Config {
        steps_per_run: config.steps_per_run.max(1),
        feeds: config.feeds,
        missing_feed: MissingFeed::Error,
        host_effects: true,
        host_transfer: stablehlo::HostTransfer::Stages,
        run: 0,
        library: config.library,
        pack_sums: true,
    };
    // Emit everything first: a graph this backend refuses starts no process.
    let mut emitted = Vec::with_capacity(clusters.len());
    for cluster in &clusters {
        emitted.push(stablehlo::emit_module(graph, cluster, assignment, &emit_config)?);
    }
    let python = python()?;
    let launcher = python_dir()?.join("tpu_rewrite_launch.py");
    let mut outcome = RunOutcome {
        fetched: Vec::new(),
        variables: Default::default(),
        mirrors: Default::default(),
        iterations: u64::from(config.steps.max(1)) * u64::from(config.steps_per_run.max(1)),
    };
    let mut step_seconds = Vec::new();
    let mut held = Vec::new();
    let mut process_index = 0;
    for staged in &emitted {
        let job = tempfile::Builder::new().prefix("tpu-rewrite-jax-").tempdir().map_err(|err| {
            DistributedError::Job { path: std::env::temp_dir().display().to_string(), message: err.to_string() }
        })?;
        let results = run_job(graph, staged, job.path(), &python, &launcher, config)?;
        held.extend(read_held(job.path(), config.processes.max(1)));
        process_index = if config.multi_host.is_some() { read_process_index(job.path()) } else { 0 };
        if process_index != 0 {
            // Process 0 gathers and prints; this host's part is done.
            continue;
        }
        step_seconds.push(read_timing(job.path()));
        for (e, outputs) in staged.stages.iter().zip(&results.outputs) {
            for (out, values) in e.outputs.iter().zip(outputs) {
                for (r, t) in values.iter().enumerate() {
                    outcome.fetched.push((super::backend::output_name(graph, out.node, r), t.clone()));
                }
            }
        }
        for (h, copies) in results.variables {
            let name = graph.node(h).name.to_string();
            if let Some(t) = copies.first() {
                outcome.variables.insert(name.clone(), t.clone());
            }
            outcome.mirrors.insert(name, copies);
        }
    }
    Ok(Outcome { run: outcome, process_index, step_seconds, held })
}

/// Process 0's results of one job: `outputs[stage][output][replica]` and
/// every variable's copies after the last step.
struct JobResults {
    outputs: Vec<Vec<Vec<Tensor>>>,
    variables: Vec<(NodeId, Vec<Tensor>)>,
}

/// Writes one cluster's job (every stage's module and arguments), runs its
/// processes and reads back process 0's gathered results.
fn run_job(
    graph: &Graph,
    staged: &Staged,
    dir: &Path,
    python: &Path,
    launcher: &Path,
    config: &Config,
) -> Result<JobResults, DistributedError> {
    let job_err = |m: String| DistributedError::Job { path: dir.display().to_string(), message: m };
    let first = &staged.stages[0];
    let replicas = first.num_replicas;
    let device_ids: Vec<i64> = first.device_ids.iter().map(|d| d.first().copied().unwrap_or(0)).collect();
    let processes = config.processes.max(1);
    let devices = (device_ids.iter().copied().max().unwrap_or(0) as usize + 1).max(replicas);
    let per_process = devices.div_ceil(processes);
    let mut owned = vec![0usize; processes];
    for &d in &device_ids {
        if let Some(n) = owned.get_mut(d as usize / per_process) {
            *n += 1;
        }
    }
    if owned.contains(&0) {
        return Err(DistributedError::Placement { replicas, devices, processes });
    }
    // On one host of several, only that host's replicas' values are written.
    let own_process = config.multi_host.as_ref().and_then(|m| m.process_id);
    let owned_replica = |r: usize| own_process.is_none_or(|p| device_ids[r] as usize / per_process == p);
    let write = |file: &str, t: &Tensor| -> Result<serde_json::Value, DistributedError> {
        crate::exec::write_npy_file(&dir.join(file), t).map_err(|err| job_err(err.to_string()))?;
        Ok(file.into())
    };
    // Variables, in the order the stages first name them, with their initial values.
    let mut variables: Vec<NodeId> = Vec::new();
    let mut variable_files = Vec::new();
    for e in &staged.stages {
        for (arg, values) in e.args.iter().zip(&e.arg_values) {
            let ArgSource::Variable(h) = *arg else { continue };
            if variables.contains(&h) {
                continue;
            }
            let v = variables.len();
            variables.push(h);
            let mut files = Vec::with_capacity(replicas);
            for (r, t) in values.iter().enumerate() {
                files.push(if owned_replica(r) {
                    write(&format!("var_{v}_{r}.npy"), t)?
                } else {
                    serde_json::Value::Null
                });
            }
            variable_files.push(serde_json::json!({ "name": graph.node(h).name.to_string(), "files": files }));
        }
    }
    let var_index = |h: &NodeId| variables.iter().position(|v| v == h).unwrap_or(0);
    let mut stages = Vec::with_capacity(staged.stages.len());
    for (k, e) in staged.stages.iter().enumerate() {
        // Padded outputs (their true sizes are extra results) run in one process only.
        if let Some(size) = e.signature.results.iter().find(|r| r.size_of.is_some()) {
            return Err(job_err(format!(
                "`{}` is the size of an output whose size depends on values: run such a program without \
                 --processes (docs/xla.md, \"Ops whose output size depends on values\")",
                size.name
            )));
        }
        let module = format!("module_{k}.mlir");
        std::fs::write(dir.join(&module), &e.module).map_err(|err| job_err(err.to_string()))?;
        let mut args = Vec::with_capacity(e.args.len());
        for (a, (arg, values)) in e.args.iter().zip(&e.arg_values).enumerate() {
            let name = stablehlo::arg_name(graph, arg);
            let (kind, files) = match arg {
                ArgSource::Variable(h) => {
                    args.push(serde_json::json!({ "kind": "variable", "name": name, "variable": var_index(h) }));
                    continue;
                }
                // Computed on the host between stages (see `exchange`).
                ArgSource::Carried(..) => {
                    args.push(serde_json::json!({ "kind": "carried", "name": name }));
                    continue;
                }
                ArgSource::Replicated(_) => ("replicated", values),
                ArgSource::Host(..) => ("host", values),
            };
            let mut row = Vec::with_capacity(replicas);
            for (r, t) in files.iter().enumerate() {
                row.push(if owned_replica(r) {
                    write(&format!("arg_{k}_{a}_{r}.npy"), t)?
                } else {
                    serde_json::Value::Null
                });
            }
            args.push(serde_json::json!({ "kind": kind, "name": name, "files": row }));
        }
        stages.push(serde_json::json!({
            "module": module,
            "args": args,
            "outputs": e.outputs.len(),
            "carried": e.carried.len(),
            "variables": e.variables.iter().map(var_index).collect::<Vec<_>>(),
            "exchange": exchange::exchanges(staged, k),
        }));
    }
    // With host ops between stages, the launcher runs the device loop.
    let steps =
        if staged.stages.len() > 1 { config.steps.max(1) * config.steps_per_run.max(1) } else { config.steps.max(1) };
    let job = serde_json::json!({
        "device_ids": device_ids,
        "steps": steps,
        "stages": stages,
        "variables": variable_files,
    });
    std::fs::write(dir.join("job.json"), job.to_string()).map_err(|err| job_err(err.to_string()))?;
    let host = HostSide { graph, staged, feeds: config.feeds };
    launch(dir, python, launcher, processes, per_process, config, &host)?;
    // On one host of several, only process 0 has the gathered results.
    if config.multi_host.is_some() && read_process_index(dir) != 0 {
        return Ok(JobResults { outputs: Vec::new(), variables: Vec::new() });
    }
    let read = |file: String| crate::exec::read_npy_file(&dir.join(file)).map_err(|err| job_err(err.to_string()));
    let mut outputs = Vec::with_capacity(staged.stages.len());
    for (k, e) in staged.stages.iter().enumerate() {
        let mut stage = Vec::with_capacity(e.outputs.len());
        for i in 0..e.outputs.len() {
            stage.push((0..replicas).map(|r| read(format!("out_{k}_{i}_{r}.npy"))).collect::<Result<Vec<_>, _>>()?);
        }
        outputs.push(stage);
    }
    let mut last = Vec::with_capacity(variables.len());
    for (v, &h) in variables.iter().enumerate() {
        last.push((h, (0..replicas).map(|r| read(format!("var_out_{v}_{r}.npy"))).collect::<Result<Vec<_>, _>>()?));
    }
    Ok(JobResults { outputs, variables: last })
}

/// What the host side of a job needs to answer its launchers' host steps.
#[derive(Clone, Copy)]
struct HostSide<'a> {
    graph: &'a Graph,
    staged: &'a Staged,
    feeds: &'a [(String, Tensor)],
}

/// A free TCP port on 127.0.0.1 for the coordinator.
fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Starts the processes in one process group and waits for all of them,
/// ending the group at the first failure or at the deadline. On one host
/// of a multi-host run, that is this host's one process.
fn launch(
    dir: &Path,
    python: &Path,
    launcher: &Path,
    processes: usize,
    per_process: usize,
    config: &Config,
    host: &HostSide,
) -> Result<(), DistributedError> {
    std::thread::scope(|scope| launch_in(scope, dir, python, launcher, processes, per_process, config, host))
}

/// [`launch`] within `scope`, whose threads answer each launcher's host steps.
#[allow(clippy::too_many_arguments)]
fn launch_in<'s>(
    scope: &'s std::thread::Scope<'s, '_>,
    dir: &'s Path,
    python: &Path,
    launcher: &Path,
    processes: usize,
    per_process: usize,
    config: &Config,
    host: &'s HostSide<'s>,
) -> Result<(), DistributedError> {
    use std::os::unix::process::CommandExt;
    let deadline = config.deadline;
    let job_err = |m: String| DistributedError::Job { path: dir.display().to_string(), message: m };
    // (process id to pass, coordinator to pass) per process started here.
    let starts: Vec<(Option<usize>, Option<String>)> = match &config.multi_host {
        Some(m) => vec![(m.process_id, m.coordinator.clone())],
        None => {
            let port = free_port().map_err(|err| job_err(format!("no free port: {err}")))?;
            (0..processes).map(|p| (Some(p), Some(format!("127.0.0.1:{port}")))).collect()
        }
    };
    let cpu_devices = match &config.multi_host {
        Some(m) if m.platform_devices => 0,
        _ => per_process,
    };
    let mut group = Group { children: Vec::with_capacity(starts.len()), pgid: 0 };
    let mut servers = Vec::with_capacity(starts.len());
    for (p, (id, coordinator)) in starts.iter().enumerate() {
        let log =
            std::fs::File::create(dir.join(format!("process_{p}.log"))).map_err(|err| job_err(err.to_string()))?;
        let mut cmd = Command::new(python);
        cmd.arg(launcher).arg(dir);
        if let Some(id) = id {
            cmd.args(["--process-id", &id.to_string()]);
        }
        cmd.args(["--num-processes", &processes.to_string()]);
        if let Some(c) = coordinator {
            cmd.args(["--coordinator", c]);
        }
        if config.multi_host.is_some() {
            // Hosts started by hand join within the deadline, not JAX's 60 s.
            cmd.args(["--init-timeout", &deadline.as_secs().to_string()]);
        }
        cmd.args(["--cpu-devices", &cpu_devices.to_string()])
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .process_group(group.pgid);
        let mut child = cmd.spawn().map_err(|err| DistributedError::Environment {
            message: format!("cannot start {}: {err}", python.display()),
        })?;
        if p == 0 {
            group.pgid = child.id() as i32;
        }
        // The launcher's host steps: its stdout asks, its stdin answers.
        if let (Some(requests), Some(replies)) = (child.stdout.take(), child.stdin.take()) {
            let HostSide { graph, staged, feeds } = *host;
            servers.push(scope.spawn(move || exchange::serve(graph, staged, feeds, dir, requests, replies)));
        }
        group.children.push(Some(child));
    }
    let processes_here = starts.len();
    let own_index = |p: usize| config.multi_host.as_ref().map_or(p, |m| m.process_id.unwrap_or(p));
    let start = Instant::now();
    loop {
        let mut running = 0;
        let mut failed: Vec<(usize, std::process::ExitStatus)> = Vec::new();
        for p in 0..processes_here {
            let Some(child) = group.children[p].as_mut() else { continue };
            match child.try_wait() {
                Ok(Some(status)) if status.success() => group.children[p] = None,
                Ok(Some(status)) => {
                    group.children[p] = None;
                    failed.push((p, status));
                }
                Ok(None) => running += 1,
                Err(err) => return Err(job_err(format!("waiting for process {p}: {err}"))),
            }
        }
        // A process that dies takes the others down with it (they lose their
        // peer): name one killed by a signal first, it is the cause.
        failed.sort_by_key(|(p, status)| (std::os::unix::process::ExitStatusExt::signal(status).is_none(), *p));
        if let Some(&(p, status)) = failed.first() {
            group.end();
            // A host op that failed is the cause: its launcher stopped on it.
            for server in servers.drain(..) {
                if let Ok(Err(e)) = server.join() {
                    return Err(e.into());
                }
            }
            let log = log_tail(&dir.join(format!("process_{p}.log")));
            // The launcher found another module (exit 4, or ended by a peer after saying so).
            let said = std::fs::read_to_string(dir.join(format!("process_{p}.log")))
                .unwrap_or_default()
                .lines()
                .find_map(|l| l.split_once("ModuleMismatch: ").map(|(_, m)| m.to_string()));
            if status.code() == Some(MISMATCH_EXIT) || said.is_some() {
                let message = said.unwrap_or(log);
                return Err(DistributedError::ModuleMismatch { process: own_index(p), message });
            }
            return Err(DistributedError::ProcessFailed {
                process: own_index(p),
                processes,
                status: describe(status),
                others: if config.multi_host.is_some() {
                    "the other hosts' processes stop when they lose it (JAX's heartbeat)"
                } else {
                    "the other processes were ended"
                },
                log,
            });
        }
        if running == 0 {
            return Ok(());
        }
        if start.elapsed() > deadline {
            group.end();
            return Err(DistributedError::Timeout { processes, seconds: deadline.as_secs() });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The launched processes; dropping it ends any still running.
struct Group {
    children: Vec<Option<Child>>,
    pgid: i32,
}

impl Group {
    /// SIGKILL to the whole group, then reap every child.
    fn end(&mut self) {
        if self.pgid > 0 {
            // SAFETY: kill(2) with a negative pid signals the group this run created.
            unsafe {
                libc::kill(-self.pgid, libc::SIGKILL);
            }
        }
        for child in self.children.iter_mut().filter_map(Option::as_mut) {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.children.clear();
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if self.children.iter().any(Option::is_some) {
            self.end();
        }
    }
}

/// "exited with code N" or "was killed by signal S".
fn describe(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exited with code {c}"),
        (None, Some(s)) => format!("was killed by signal {s}"),
        _ => format!("ended ({status})"),
    }
}

/// The last lines of a process's log.
fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(6)..].join("\n")
}

/// The launcher's exit code when the processes' modules differ.
const MISMATCH_EXIT: i32 = 4;

/// The index the one launcher of a multi-host job in `dir` ran as (its
/// `process.json`; 0 when absent). On one host, every process writes the
/// file, so it is not read there.
fn read_process_index(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("process.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v.get("process_index").and_then(serde_json::Value::as_u64))
        .unwrap_or(0) as usize
}

/// What the processes started here say they loaded (`held_<p>.json`).
fn read_held(dir: &Path, processes: usize) -> Vec<Held> {
    let mut out = Vec::new();
    for p in 0..processes {
        let Ok(text) = std::fs::read_to_string(dir.join(format!("held_{p}.json"))) else { continue };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else { continue };
        let replicas = v
            .get("replicas")
            .and_then(serde_json::Value::as_array)
            .map_or_else(Vec::new, |a| a.iter().filter_map(serde_json::Value::as_u64).map(|r| r as usize).collect());
        let bytes = v.get("bytes").and_then(serde_json::Value::as_u64).unwrap_or(0);
        out.push(Held { process: p, replicas, bytes });
    }
    out
}

/// Process 0's per-step seconds, if it wrote them.
fn read_timing(dir: &Path) -> Vec<f64> {
    std::fs::read_to_string(dir.join("timing.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v.get("step_s").and_then(|s| s.as_array()).map(|a| a.iter().filter_map(|x| x.as_f64()).collect()))
        .unwrap_or_default()
}

/// `run`'s fetched tensors in the order of `fetches` (the simulator's
/// default fetches), so every backend prints alike.
pub fn in_fetch_order(mut run: RunOutcome, fetches: &[String]) -> RunOutcome {
    let mut by_name: std::collections::HashMap<String, Tensor> = run.fetched.drain(..).collect();
    run.fetched = fetches.iter().filter_map(|n| by_name.remove_entry(n)).collect();
    run
}
