//! `run --backend pjrt`: a rewritten (tagged) graph run on a PJRT plugin.
//!
//! Order of a run: find and load the plugin (refusing a TPU plugin at once
//! on a machine without TPU devices, and keeping libtpu off the cloud
//! metadata server with `TPU_SKIP_MDS_QUERY`); create a client (a CPU
//! plugin is asked for as many devices as the device assignment uses);
//! then, per cluster in text order: emit its StableHLO module
//! ([`super::stablehlo::emit_module`]), compile it with the replica count
//! and device assignment (or load it from the compile cache,
//! [`super::cache`]), once for all steps, copy its arguments to every replica's device,
//! and execute it `steps` times. Variables stay on the devices between
//! steps (their results replace their argument buffers, which the program
//! aliases) and are fetched after the last step with the outputs.
//!
//! Host ops the device program reads (feeds, defaults, constants) and
//! variable initialisers run once on the host with the simulator's
//! kernels; so do pure host ops after the step that `fetch` names, once,
//! on the last step's outputs. The result has the simulator driver's shape
//! ([`crate::exec::driver::RunOutcome`]), with outputs named as the
//! tagged graph's `output_<i>_shard_<r>` fetch identities.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::cache::{CacheUse, CompileCache};
use super::client::{Client, ClientConfig, DeviceBuffer};
use super::error::XlaError;
use super::host::{Host, MissingFeed};
use super::stablehlo::{self, ArgSource, HostTransfer};
use super::{callback, device_check, ffi, plugin};
use crate::exec::driver::RunOutcome;
use crate::exec::Tensor;
use crate::ir::Graph;
use crate::lower::DeviceAssignment;
use crate::passes::form_clusters;

/// Settings of a PJRT run.
#[derive(Clone, Debug, Default)]
pub struct RunConfig<'a> {
    /// `--pjrt-plugin`.
    pub plugin: Option<&'a Path>,
    /// Replicated steps (each `steps_per_run` device iterations).
    pub steps: u32,
    /// Device iterations per step, looped on the device.
    pub steps_per_run: u32,
    /// Feeds: tensor name → value.
    pub feeds: &'a [(String, Tensor)],
    /// How outside-compilation ops are reached; `None`: a host callback
    /// on a CPU plugin, stages on any other.
    pub host_transfer: Option<HostTransfer>,
    /// Extra tensors to fetch that the device programs do not return:
    /// host ops after the step, evaluated once after the last step on its
    /// outputs with the simulator's kernels (pure ops only).
    pub fetch: &'a [String],
    /// The module whose functions the graph's control-flow and call ops
    /// name (`None`: the graph calls no function).
    pub library: Option<&'a crate::ir::Module>,
    /// `--no-device-checks`: leave out the device checks
    /// ([`super::device_check`]) that a host-callback run (a CPU plugin)
    /// otherwise has, and get XLA's clamped gathers and unchecked lists.
    pub no_device_checks: bool,
    /// The on-disk cache of compiled executables (`None`: compile every
    /// program).
    pub compile_cache: Option<&'a CompileCache>,
    /// `--all-reduce-fusion off`: every `CrossReplicaSum` its own
    /// all-reduce (by default independent sums share one).
    pub unpacked_sums: bool,
}

/// Refuses a program whose compiled footprint on all its devices, beside
/// what the process holds, passes the run's memory budget
/// ([`crate::exec::memory`]): checked after compiling, before anything is
/// copied to the devices or run. A plugin without memory stats passes.
fn within_budget(exe: &super::client::Executable) -> Result<(), XlaError> {
    let Some(stats) = exe.memory_stats()? else { return Ok(()) };
    let per_device = stats.per_device();
    let bytes = per_device.saturating_mul(exe.devices as u64);
    let live = crate::exec::memory::live_bytes().unwrap_or(0);
    let budget = crate::exec::memory::budget();
    if live.saturating_add(bytes) > budget {
        return Err(XlaError::MemoryBudget {
            program: exe.name.clone(),
            bytes,
            per_device,
            devices: exe.devices,
            live,
            budget,
        });
    }
    Ok(())
}

/// Where a run spent its time.
#[derive(Clone, Debug, Default)]
pub struct Timings {
    /// Loading the plugin.
    pub load: Duration,
    /// Creating the client.
    pub client: Duration,
    /// Emitting the StableHLO modules.
    pub emit: Duration,
    /// Compiling them.
    pub compile: Duration,
    /// The process CPU time (all threads) while compiling them: XLA's
    /// compile runs LLVM on several threads.
    pub compile_cpu: Duration,
    /// Moving arguments to the devices and results back.
    pub transfer: Duration,
    /// Every `execute` call, summed.
    pub execute: Duration,
    /// The process CPU time (all threads, user + system) during the
    /// `execute` calls, summed: on a shared machine, the work they did.
    pub execute_cpu: Duration,
    /// How many `execute` calls were made.
    pub executions: u32,
    /// How many programs XLA compiled (not loaded from the cache).
    pub compiles: u32,
    /// Each program's use of the compile cache, by program name.
    pub cache: Vec<(String, CacheUse)>,
}

impl Timings {
    /// One line per phase of the run, as `run --time-passes` prints them:
    /// plugin load, client, emit (typing, the variables' initial values on
    /// the host, the module text), compile (or cache load), transfers, and
    /// the `execute` calls (wall, CPU of all threads, and per call).
    pub fn lines(&self) -> Vec<String> {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let mut lines = vec![
            format!("{:<24} {:>12.3} ms wall", "pjrt plugin load", ms(self.load)),
            format!("{:<24} {:>12.3} ms wall", "pjrt client", ms(self.client)),
            format!("{:<24} {:>12.3} ms wall", "stablehlo emit", ms(self.emit)),
            format!(
                "{:<24} {:>12.3} ms wall {:>10.3} ms cpu ({} program(s), {} compiled by XLA)",
                "xla compile",
                ms(self.compile),
                ms(self.compile_cpu),
                self.cache.len().max(usize::from(self.compiles > 0)),
                self.compiles
            ),
            format!("{:<24} {:>12.3} ms wall", "transfers", ms(self.transfer)),
            format!("{:<24} {:>12.3} ms wall {:>10.3} ms cpu", "execute", ms(self.execute), ms(self.execute_cpu)),
        ];
        if self.executions > 0 {
            let n = f64::from(self.executions);
            lines.push(format!(
                "{:<24} {:>12.3} ms wall {:>10.3} ms cpu ({} calls)",
                "execute per call",
                ms(self.execute) / n,
                ms(self.execute_cpu) / n,
                self.executions
            ));
        }
        lines
    }
}

/// A PJRT run's results and timings.
pub struct Outcome {
    /// The fetched values and the final variables, as the simulator reports them.
    pub run: RunOutcome,
    /// Where the run spent its time.
    pub timings: Timings,
}

/// Loads the plugin found by `flag`, `$TPU_REWRITE_PJRT_PLUGIN` or the
/// cache. A TPU plugin (`libtpu`) is loaded and checked, then refused at
/// once when the machine has no TPU devices, before a client could wait
/// for them.
pub fn load_plugin(flag: Option<&Path>) -> Result<Arc<ffi::Plugin>, XlaError> {
    let path = plugin::locate(flag)?;
    let name = path.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default();
    let tpu = name.contains("tpu");
    if tpu && std::env::var_os("TPU_SKIP_MDS_QUERY").is_none() {
        // Single-threaded at this point of the CLI; keeps libtpu off the cloud metadata server.
        std::env::set_var("TPU_SKIP_MDS_QUERY", "1");
    }
    let plugin = ffi::load(&path)?;
    // A TPU client would wait for chips that are not there: check first.
    if tpu {
        let has_tpu = Path::new("/dev/accel0").exists()
            || std::fs::read_dir("/dev/vfio").is_ok_and(|d| d.filter_map(Result::ok).any(|e| e.file_name() != "vfio"));
        if !has_tpu {
            return Err(XlaError::NoDevices {
                path: format!("{} (PJRT C API {}.{})", path.display(), plugin.version.0, plugin.version.1),
                kind: "TPU".into(),
                looked: "/dev/accel*, /dev/vfio/*".into(),
            });
        }
    }
    Ok(Arc::new(plugin))
}

/// Whether the plugin takes `cpu_device_count` (XLA's CPU plugins).
fn is_cpu_plugin(plugin: &ffi::Plugin) -> bool {
    plugin.path.file_name().is_some_and(|n| n.to_string_lossy().to_lowercase().contains("cpu"))
}

/// Runs every cluster of the tagged `graph` on the plugin.
pub fn run(graph: &Graph, assignment: &DeviceAssignment, config: &RunConfig) -> Result<Outcome, XlaError> {
    super::host::check_feed_names(graph, config.feeds)?;
    let mut timings = Timings::default();
    let t = Instant::now();
    let plugin = load_plugin(config.plugin)?;
    timings.load = t.elapsed();
    let (clusters, errors) = form_clusters(graph);
    if let Some(e) = errors.first() {
        return Err(XlaError::UnsupportedGraph { message: e.to_string() });
    }
    if clusters.is_empty() {
        return Err(XlaError::UnsupportedGraph {
            message: "the graph has no replicate cluster: nothing runs on a device".into(),
        });
    }
    let devices = assignment
        .cores
        .iter()
        .flatten()
        .map(|c| (c.task * assignment.topology.cores_per_host + c.core) as usize + 1)
        .max()
        .unwrap_or(1)
        .max(clusters.iter().map(|c| (c.num_replicas * c.num_cores_per_replica.max(1)) as usize).max().unwrap_or(1));
    let t = Instant::now();
    let client_config = ClientConfig { cpu_device_count: is_cpu_plugin(&plugin).then_some(devices) };
    let client = Client::new(plugin, &client_config)?;
    if client.device_count() == 0 {
        return Err(XlaError::Devices {
            program: "the run".into(),
            needed: 1,
            available: 0,
            platform: client.platform.clone(),
        });
    }
    timings.client = t.elapsed();

    let mut fetched = Vec::new();
    // Every cluster output's last values, per replica, for host ops after the step.
    let mut device_outputs: Vec<(crate::ir::NodeId, Vec<Tensor>)> = Vec::new();
    let mut mirrors: BTreeMap<String, Vec<Tensor>> = BTreeMap::new();
    let host_transfer = config.host_transfer.unwrap_or(if is_cpu_plugin(client.plugin()) {
        HostTransfer::Callback
    } else {
        HostTransfer::Stages
    });
    let mut installed = false;
    let mut checks_installed = false;
    for cluster in &clusters {
        // A cluster of metadata alone (a plain graph whose ops all run on the host) computes nothing.
        if cluster.members.iter().all(|&m| &*graph.node(m).op == "TPUReplicateMetadata") {
            continue;
        }
        let t = Instant::now();
        let emit_config = stablehlo::Config {
            steps_per_run: config.steps_per_run.max(1),
            feeds: config.feeds,
            missing_feed: MissingFeed::Error,
            host_effects: true,
            host_transfer,
            run: callback::next_id(),
            library: config.library,
            pack_sums: !config.unpacked_sums,
        };
        let staged = {
            let _checks = device_check::Scope::new(host_transfer == HostTransfer::Callback && !config.no_device_checks);
            stablehlo::emit_module(graph, cluster, assignment, &emit_config)?
        };
        timings.emit += t.elapsed();
        if !checks_installed && staged.stages.iter().any(|s| s.module.contains(device_check::TARGET)) {
            device_check::install(client.plugin(), callback::CPU_PLATFORM)?;
            checks_installed = true;
        }
        // Host calls inside the module: the handler, and this run's host programs.
        let _registration = if staged.calls.is_empty() {
            None
        } else if host_transfer == HostTransfer::SendRecv {
            return Err(XlaError::SendRecvRun { cluster: cluster.name.clone() });
        } else {
            if !installed {
                callback::install(client.plugin(), callback::CPU_PLATFORM)?;
                installed = true;
            }
            let mut host = Host::new(graph, config.feeds, MissingFeed::Error);
            let programs = callback::HostPrograms::new(graph, &staged, &mut host)?;
            Some(callback::Registration::new(emit_config.run, programs))
        };
        let replicas = cluster.num_replicas as usize;
        // Every logical core of every replica is a device: d = replica * partitions + core.
        let partitions = cluster.num_cores_per_replica.max(1) as usize;
        let devices = replicas * partitions;
        let mut stages = Vec::with_capacity(staged.stages.len());
        for (k, emitted) in staged.stages.iter().enumerate() {
            let program = if staged.stages.len() > 1 {
                format!("cluster `{}` stage {k}", cluster.name)
            } else {
                format!("cluster `{}`", cluster.name)
            };
            let (t, cpu) = (Instant::now(), process_cpu_time());
            let (exe, used) = client.compile_cached(
                &program,
                &emitted.module,
                emitted.num_replicas,
                emitted.num_partitions,
                config.compile_cache,
            )?;
            timings.compile += t.elapsed();
            timings.compile_cpu += process_cpu_time().saturating_sub(cpu);
            within_budget(&exe)?;
            if !matches!(used, CacheUse::Hit { .. }) {
                timings.compiles += 1;
            }
            timings.cache.push((program.clone(), used));
            // Inputs and host tensors go to the devices once.
            let t = Instant::now();
            let mut fixed: Vec<Vec<Option<DeviceBuffer>>> = Vec::with_capacity(devices);
            for d in 0..devices {
                let mut row = Vec::with_capacity(emitted.args.len());
                for (arg, values) in emitted.args.iter().zip(&emitted.arg_values) {
                    row.push(match arg {
                        ArgSource::Replicated(_) | ArgSource::Host(..) => {
                            Some(client.to_device(&values[d / partitions], d, &stablehlo::arg_name(graph, arg))?)
                        }
                        _ => None,
                    });
                }
                fixed.push(row);
            }
            timings.transfer += t.elapsed();
            stages.push((exe, fixed));
        }
        // Variables: one buffer per replica, carried from stage to stage and step to step.
        let first = &staged.stages[0];
        let mut vars: BTreeMap<crate::ir::NodeId, Vec<DeviceBuffer>> = BTreeMap::new();
        for (arg, values) in first.args.iter().zip(&first.arg_values) {
            if let ArgSource::Variable(h) = arg {
                let name = graph.node(*h).name.to_string();
                let mut copies = Vec::with_capacity(devices);
                for d in 0..devices {
                    copies.push(client.to_device(&values[d / partitions], d, &name)?);
                }
                vars.insert(*h, copies);
            }
        }
        // With host ops between stages, the host runs the loop.
        let rounds = if staged.stages.len() > 1 {
            config.steps.max(1) * config.steps_per_run.max(1)
        } else {
            config.steps.max(1)
        };
        let mut last: Vec<Option<Vec<Vec<DeviceBuffer>>>> = (0..staged.stages.len()).map(|_| None).collect();
        let mut host_values: std::collections::HashMap<(crate::ir::NodeId, u32), Vec<Tensor>> = Default::default();
        let mut host = Host::new(graph, config.feeds, MissingFeed::Error);
        for _ in 0..rounds {
            for (k, ((exe, fixed), emitted)) in stages.iter().zip(&staged.stages).enumerate() {
                // Carried values computed on the host this round go to the devices.
                let t = Instant::now();
                let mut carried: Vec<Vec<DeviceBuffer>> = (0..devices).map(|_| Vec::new()).collect();
                for arg in &emitted.args {
                    if let ArgSource::Carried(id, o) = *arg {
                        let values = host_values.get(&(id, o)).ok_or_else(|| XlaError::UnsupportedGraph {
                            message: format!(
                                "stage {k} reads `{}`, which no earlier stage computed",
                                graph.node(id).name
                            ),
                        })?;
                        for (d, row) in carried.iter_mut().enumerate() {
                            row.push(client.to_device(&values[d / partitions], d, &stablehlo::arg_name(graph, arg))?);
                        }
                    }
                }
                timings.transfer += t.elapsed();
                let args: Vec<Vec<&DeviceBuffer>> = (0..devices)
                    .map(|d| {
                        let mut next_carried = carried[d].iter();
                        emitted
                            .args
                            .iter()
                            .zip(&fixed[d])
                            .filter_map(|(arg, buffer)| match arg {
                                ArgSource::Variable(h) => vars.get(h).map(|v| &v[d]),
                                ArgSource::Carried(..) => next_carried.next(),
                                _ => buffer.as_ref(),
                            })
                            .collect()
                    })
                    .collect();
                let (t, cpu) = (Instant::now(), process_cpu_time());
                let mut outputs = exe.execute(&args)?;
                timings.execute += t.elapsed();
                timings.execute_cpu += process_cpu_time().saturating_sub(cpu);
                timings.executions += 1;
                // Results: outputs, carried values, variables (which replace their donated arguments).
                let sizes = padded_sizes(emitted);
                let head = emitted.outputs.len() + sizes + emitted.carried.len();
                for (r, row) in outputs.iter_mut().enumerate() {
                    let new_vars = row.split_off(head);
                    for (h, buffer) in emitted.variables.iter().zip(new_vars) {
                        if let Some(copies) = vars.get_mut(h) {
                            copies[r] = buffer;
                        }
                    }
                }
                let t = Instant::now();
                for (c, &key) in emitted.carried.iter().enumerate() {
                    let name = format!("{}:{}", graph.node(key.0).name, key.1);
                    let mut values = Vec::with_capacity(replicas);
                    for row in outputs.iter().step_by(partitions) {
                        values.push(row[emitted.outputs.len() + sizes + c].to_host(&name)?);
                    }
                    host_values.insert(key, values);
                }
                run_host_ops(graph, &staged, k, replicas, &mut host_values, &mut host)?;
                timings.transfer += t.elapsed();
                last[k] = Some(outputs);
            }
        }
        for (emitted, outputs) in staged.stages.iter().zip(&last) {
            let Some(outputs) = outputs else { continue };
            for (i, out) in emitted.outputs.iter().enumerate() {
                let mut values = Vec::with_capacity(replicas);
                for (r, row) in outputs.iter().step_by(partitions).enumerate() {
                    let name = output_name(graph, out.node, r);
                    let mut t = row[i].to_host(&name)?;
                    for (j, size) in emitted.signature.results.iter().skip(emitted.outputs.len()).enumerate() {
                        match size.size_of {
                            Some(of) if of.result == i => {
                                let n = row[emitted.outputs.len() + j].to_host(&size.name)?;
                                t = trim(&name, &t, of.axis, &n)?;
                            }
                            _ => {}
                        }
                    }
                    values.push(t.clone());
                    fetched.push((name, t));
                }
                device_outputs.push((out.node, values));
            }
        }
        for (h, copies) in &vars {
            let name = graph.node(*h).name.to_string();
            let mut host_copies = Vec::with_capacity(replicas);
            for b in copies.iter().step_by(partitions) {
                host_copies.push(b.to_host(&name)?);
            }
            mirrors.insert(name, host_copies);
        }
    }
    // Host ops after the step, on the last step's outputs.
    let mut after = Host::new(graph, config.feeds, MissingFeed::Error).without_variable_reads();
    for (node, values) in device_outputs {
        after.seed(node, values);
    }
    for name in config.fetch {
        // A host target (a print or an assert after the step) runs for its effect.
        if let Some(target) = name.strip_prefix('^') {
            // Variable ops on the host (initialisers) are not after the step: they are not run here.
            let host_op = graph.find(target).filter(|&id| {
                let node = graph.node(id);
                node.attrs.get_str(crate::passes::common::TPU_REPLICATE).is_none()
                    && &*node.op != "NoOp"
                    && !node.op.contains("Variable")
            });
            if let Some(id) = host_op {
                after
                    .evaluate(id)
                    .map_err(|e| XlaError::HostAfterStep { name: name.clone(), message: e.to_string() })?;
            }
            continue;
        }
        if fetched.iter().any(|(n, _)| n == name) {
            continue;
        }
        let (node, output) = match name.rsplit_once(':') {
            Some((n, o)) if o.parse::<u32>().is_ok() => (n, o.parse().unwrap_or(0)),
            _ => (name.as_str(), 0),
        };
        if let Some(id) = graph.find(node) {
            let value = after
                .value(id, output)
                .map_err(|e| XlaError::HostAfterStep { name: name.clone(), message: e.to_string() })?;
            fetched.push((name.clone(), value));
        }
    }
    let variables = mirrors.iter().filter_map(|(k, v)| v.first().map(|t| (k.clone(), t.clone()))).collect();
    let iterations = u64::from(config.steps.max(1)) * u64::from(config.steps_per_run.max(1));
    Ok(Outcome { run: RunOutcome { fetched, variables, mirrors, iterations }, timings })
}

/// How many `size` results (true lengths of padded outputs, see
/// `stablehlo::ops::dynamic_shape`) follow a stage's outputs.
fn padded_sizes(emitted: &stablehlo::Emitted) -> usize {
    emitted.signature.results.iter().filter(|r| r.size_of.is_some()).count()
}

/// Output `name`, a buffer padded along `axis`, trimmed to its true length `size` (an i32 scalar).
fn trim(name: &str, t: &Tensor, axis: usize, size: &Tensor) -> Result<Tensor, XlaError> {
    let bad = |message: String| XlaError::UnsupportedGraph { message: format!("output `{name}`: {message}") };
    let n = size.to_i64_vec("", "size").ok().and_then(|v| v.first().copied()).ok_or_else(|| bad("no size".into()))?;
    let bound = t.shape().get(axis).copied().ok_or_else(|| bad(format!("no axis {axis}")))?;
    if n < 0 || n as usize > bound {
        return Err(bad(format!("its size {n} is outside the bound {bound}")));
    }
    let begin = Tensor::vector(vec![0i64; t.shape().len()]);
    let sizes: Vec<i64> = t.shape().iter().enumerate().map(|(d, &l)| if d == axis { n } else { l as i64 }).collect();
    let mut out =
        crate::exec::run_kernel("Slice", &crate::ir::AttrMap::new(), &[t.clone(), begin, Tensor::vector(sizes)])
            .map_err(|e| bad(e.to_string()))?;
    out.pop().ok_or_else(|| bad("the slice gave no tensor".into()))
}

/// The process's CPU time so far: user + system, all threads.
pub fn process_cpu_time() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `getrusage` fills the struct it is given; zeroes are a valid `rusage`.
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init()
    };
    let time = |t: libc::timeval| Duration::new(t.tv_sec.max(0) as u64, (t.tv_usec.max(0) as u32) * 1000);
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// Runs the outside-compilation ops that follow stage `k`, per replica,
/// with the simulator's kernels; their results join `values`.
pub(crate) fn run_host_ops(
    graph: &Graph,
    staged: &stablehlo::Staged,
    k: usize,
    replicas: usize,
    values: &mut std::collections::HashMap<(crate::ir::NodeId, u32), Vec<Tensor>>,
    host: &mut Host,
) -> Result<(), XlaError> {
    for &id in &staged.host_ops[k] {
        let node = graph.node(id);
        let inputs = graph.data_inputs(id);
        let mut per_replica: Vec<Vec<Tensor>> = vec![Vec::with_capacity(inputs.len()); replicas];
        for input in &inputs {
            let key = (input.src, input.output.unwrap_or(0));
            if let Some(v) = values.get(&key) {
                for (r, t) in v.iter().enumerate() {
                    per_replica[r].push(t.clone());
                }
            } else if let Some(t) = staged.folded.get(&key) {
                per_replica.iter_mut().for_each(|row| row.push(t.clone()));
            } else {
                let t = host.value(key.0, key.1)?;
                per_replica.iter_mut().for_each(|row| row.push(t.clone()));
            }
        }
        let mut outputs: Vec<Vec<Tensor>> = Vec::new();
        for args in per_replica {
            let out = crate::exec::run_kernel(&node.op, &node.attrs, &args)
                .map_err(|e| XlaError::Host { node: node.name.to_string(), message: e.to_string() })?;
            if outputs.is_empty() {
                outputs = vec![Vec::with_capacity(replicas); out.len()];
            }
            for (o, t) in out.into_iter().enumerate() {
                outputs[o].push(t);
            }
        }
        for (o, v) in outputs.into_iter().enumerate() {
            values.insert((id, o as u32), v);
        }
    }
    Ok(())
}

/// The fetch name of output `node`'s replica `r`: the tagged graph's
/// `Identity` reading it (`output_<i>_shard_<r>:0`), else `node:r`.
pub(crate) fn output_name(graph: &Graph, node: crate::ir::NodeId, r: usize) -> String {
    graph
        .uses(node)
        .into_iter()
        .map(|(user, _)| user)
        .find(|&user| {
            &*graph.node(user).op == "Identity"
                && graph.data_inputs(user).first().is_some_and(|i| i.src == node && i.output.unwrap_or(0) as usize == r)
        })
        .map(|user| format!("{}:0", graph.node(user).name))
        .unwrap_or_else(|| format!("{}:{r}", graph.node(node).name))
}
