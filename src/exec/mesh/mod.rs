//! The device mesh: runs a lowered module, one worker thread per device.
//!
//! Each graph of the module is a program. A program for one device has
//! graph attrs `device`, `role` and, in a cluster, `replica` and
//! `logical_core`. An SPMD program (`num_replicas` and no `replica`, see
//! [`crate::lower::spmd`]) runs once per replica: each *instance* has its
//! own replica id, device (from the module's device assignment) and
//! values, and all share the one program. Instances are named as the
//! expanded view names them (`cluster/replica_3`). A step runs every
//! instance on its own thread:
//! - programs with role `replica` or `host` run every node;
//! - other programs (role `main`, or no role: the driver) run only what
//!   the step's fetches and targets need, plus every `_Send` (a peer may
//!   wait for it), as a TensorFlow session would. Variable initialisation
//!   in a driver graph therefore runs only when targeted.
//!
//! TF1 control flow (`Switch`, `Merge`, `Enter`, `Exit`, `NextIteration`,
//! `LoopCond`) runs region by region: each loop or top-level `tf.cond` is
//! one step that [`frames`] interprets with TensorFlow's dead-tensor and
//! iteration semantics.
//!
//! Within a program, nodes run one at a time as their inputs (data and
//! control) become ready: computing nodes first, in text order; then any
//! `_Recv` whose value has arrived; then the program's next collective, in
//! `instance` order (a fixed order shared by every member, so that no two
//! members block in different collectives); a worker blocks only when
//! nothing else can run. So a program never
//! waits on a receive while it still has a send to make that the peer needs.
//!
//! `_Send` never blocks (channels are unbounded); `_Recv`, collectives and
//! every other wait give up after [`MeshConfig::timeout`]. The first failure
//! on any device (a kernel error, a panic, a timeout) cancels the step on
//! every device and is returned; the others stop at their next node or wait.
//!
//! A channel key is the `channel` string and a replica: the node's own
//! `replica`, else the running instance's (none on the host). A `_Send`
//! with `all_replicas = N` sends to each replica `0..N`; a `_Recv` with it
//! takes a control token from each.
//!
//! Variables live in per-device stores that persist across steps. A
//! `VarHandleOp` names a variable in the store of its node's device, or of
//! its instance's device when the node has none; the key is `shared_name`, or
//! the node name when that is empty. In an SPMD program a handle with
//! `mirrored = true` names the running replica's copy
//! ([`crate::lower::spmd::mirrored_name`]). A `MirroredVarHandleOp` names
//! every copy of a mirrored variable (`programs`, or `devices` and
//! `shared_names`): reads use the first (the primary), assignments write
//! them all. Feeding a tensor replaces the node that produces it: a fed
//! node does not run.
//!
//! Memory: one program per graph, whatever the replica count; per instance
//! and step, a slot per node for its outputs while the step runs.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Select, Sender};

use super::collective::{BufferPool, Call, CollectiveError, Collectives, Kind, ReduceOp, Waiter};
use super::error::{ExecError, KernelError};
use super::kernels::{self, panic_message};
use super::tensor::{ResourceHandle, Tensor};
use crate::ir::{AttrMap, Module, NodeKind};
use crate::lower::spmd;
use crate::syntax::Span;

mod device;
mod frames;
mod program;
mod worker;

use device::variable_handle;
use program::{active_set, build_program, check_channels};
use worker::run_program;

/// The longest wait a mesh honours (longer ones are cut to it): about a
/// century, far below where deadlines overflow.
const MAX_TIMEOUT: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// How often a blocked worker looks at the cancellation flag.
const POLL: Duration = Duration::from_millis(20);

/// Settings of a mesh.
#[derive(Clone, Debug)]
pub struct MeshConfig {
    /// The longest any single wait (receive, collective) may take.
    pub timeout: Duration,
    /// The longest one step may run, waits and computation together; a
    /// step past it is cancelled with [`ExecError::StepDeadline`]. `None`:
    /// no limit.
    pub deadline: Option<Duration>,
}

impl Default for MeshConfig {
    fn default() -> Self {
        MeshConfig { timeout: Duration::from_secs(30), deadline: None }
    }
}

/// A tensor or op of one graph: `x` (output 0), `x:1`, or `^x` (the op only, as a target).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Fetch {
    /// The graph (program) that holds the tensor, without `@`.
    pub graph: String,
    /// The tensor as written: `x`, `x:k` or `^x`.
    pub tensor: String,
}

impl Fetch {
    /// A fetch of `tensor` (`x`, `x:k` or `^x`) in `graph`.
    pub fn new(graph: impl Into<String>, tensor: impl Into<String>) -> Fetch {
        Fetch { graph: graph.into(), tensor: tensor.into() }
    }
}

/// Tensors fed into a step, by graph and tensor name (`x` or `x:k`).
#[derive(Clone, Debug, Default)]
pub struct Feeds {
    entries: Vec<(Fetch, Tensor)>,
}

impl Feeds {
    /// No feeds.
    pub fn new() -> Feeds {
        Feeds::default()
    }

    /// Feeds `value` as `tensor` of `graph`, replacing an earlier feed of it.
    pub fn insert(&mut self, graph: impl Into<String>, tensor: impl Into<String>, value: Tensor) {
        let key = Fetch::new(graph, tensor);
        self.entries.retain(|(k, _)| *k != key);
        self.entries.push((key, value));
    }

    /// Builder form of [`Feeds::insert`].
    pub fn with(mut self, graph: impl Into<String>, tensor: impl Into<String>, value: Tensor) -> Feeds {
        self.insert(graph, tensor, value);
        self
    }

    /// The feeds, in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&Fetch, &Tensor)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }
}

/// How a node is scheduled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Compute,
    Recv,
    Collective,
}

/// A channel: its `channel` string and, for per-replica channels, the replica.
type ChannelKey = (Arc<str>, Option<u32>);

/// The replicas a `_Send` or `_Recv` talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Peer {
    /// The running instance's replica (none on the host).
    Implied,
    Replica(u32),
    /// Every replica `0..N`.
    All(u32),
}

/// One node of a program, with inputs resolved to node indices.
struct Step {
    name: Arc<str>,
    op: Arc<str>,
    attrs: AttrMap,
    /// The channel of a `_Send` or `_Recv`, and who is at the other end.
    channel: Option<(Arc<str>, Peer)>,
    span: Span,
    device: Option<Arc<str>>,
    /// Data inputs: (producer index, output).
    inputs: Vec<(usize, u32)>,
    /// Distinct producers (data and control).
    preds: Vec<usize>,
    /// Distinct consumers (data and control).
    succs: Vec<usize>,
    seq: u64,
    class: Class,
    /// A node, a TF1 control-flow region or one of its nodes ([`frames`]).
    unit: frames::Unit,
    /// The outputs of a `Const` node, decoded once when the program is
    /// built (a cheap clone per run: tensors share their buffer); `None`
    /// for other ops and for a literal that does not decode, whose error
    /// the kernel reports when the node runs.
    constant: Option<Vec<Tensor>>,
}

/// Whether a program runs whole or only what is needed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Whole,
    Needed,
}

/// One graph, ready to run.
struct Program {
    name: String,
    /// Replicas of an SPMD program; 1 otherwise.
    num_replicas: u32,
    /// Whether `mirrored` handles name the running replica's copy.
    spmd: bool,
    mode: Mode,
    steps: Vec<Step>,
    by_name: HashMap<Arc<str>, usize>,
    instances: Vec<Instance>,
}

/// One run of a program on one device.
struct Instance {
    name: String,
    device: Arc<str>,
    replica: Option<u32>,
}

/// A worker: (program, instance) indices.
type Worker = (usize, usize);

impl Step {
    /// The channels this `_Send` writes or this `_Recv` reads, run by
    /// `instance` of `program`: only an SPMD program's ends are implicitly
    /// the running replica's.
    fn channel_keys(&self, program: &Program, instance: &Instance) -> Vec<ChannelKey> {
        let Some((channel, peer)) = &self.channel else { return Vec::new() };
        match *peer {
            Peer::Implied => vec![(channel.clone(), instance.replica.filter(|_| program.spmd))],
            Peer::Replica(r) => vec![(channel.clone(), Some(r))],
            Peer::All(n) => (0..n).map(|r| (channel.clone(), Some(r))).collect(),
        }
    }
}

/// A copy of a mirrored variable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MirrorCopy {
    /// The variable's node name (the same in every program).
    pub var: Arc<str>,
    pub replica: u32,
    pub device: Arc<str>,
    /// Its key in the device's store.
    pub name: String,
}

/// The variable stores: device -> name -> value.
type Stores = HashMap<Arc<str>, HashMap<String, Tensor>>;

/// A simulated device mesh running a lowered module.
pub struct Mesh {
    programs: Vec<Program>,
    /// Every instance of every program, in module then replica order.
    workers: Vec<Worker>,
    /// Instance name -> index into `workers`.
    by_instance: HashMap<String, usize>,
    channels: Vec<ChannelKey>,
    stores: Mutex<Stores>,
    config: MeshConfig,
    /// All-reduce output buffers, reused from step to step.
    buffers: Arc<BufferPool>,
    /// The module's functions, which `While`, `If` and the calls run.
    functions: Arc<kernels::control_flow::Functions>,
    /// How many Philox blocks each seeded random node (instance name, node name) has reserved in
    /// the runs so far: its next draw starts there.
    generators: Mutex<HashMap<(String, Arc<str>), u64>>,
}

impl std::fmt::Debug for Mesh {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mesh")
            .field("programs", &self.programs.iter().map(|p| p.name.as_str()).collect::<Vec<_>>())
            .field("instances", &self.workers.len())
            .field("config", &self.config)
            .finish()
    }
}

/// The state one step shares between its workers.
struct StepShared<'m> {
    mesh: &'m Mesh,
    cancelled: AtomicBool,
    error: Mutex<Option<ExecError>>,
    senders: HashMap<&'m ChannelKey, Sender<Tensor>>,
    collectives: Collectives,
    /// The run's TensorFlow 1 stacks (`StackV2` and its pushes and pops).
    stacks: kernels::stack::StackTable,
}

impl StepShared<'_> {
    /// Records the first failure of the step and cancels it.
    fn fail(&self, error: ExecError) {
        let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(error);
        }
        self.cancelled.store(true, Ordering::SeqCst);
    }
}

/// Why a worker stopped early.
enum Stop {
    Failed(ExecError),
    Cancelled,
}

impl Mesh {
    /// Builds a mesh for `module`: checks it is lowered, acyclic, has a
    /// kernel for every op and matched channels.
    pub fn new(module: &Module, mut config: MeshConfig) -> Result<Mesh, ExecError> {
        kernels::check_kernels(module)?;
        config.timeout = config.timeout.min(MAX_TIMEOUT);
        let assignment = match module.graphs.iter().find_map(spmd::assignment_of) {
            Some(a) => Some(a.map_err(|e| ExecError::Internal { message: format!("the module's {e}") })?),
            None => None,
        };
        // Functions are not programs: the calls of functional control flow run them.
        let functions = Arc::new(
            kernels::control_flow::Functions::from_module(module)
                .map_err(|e| ExecError::MalformedFunction { reason: e.to_string() })?,
        );
        let programs = module
            .graphs
            .iter()
            .filter(|g| !crate::ir::functions::is_function(g))
            .map(|g| build_program(g, assignment.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        let workers: Vec<Worker> =
            programs.iter().enumerate().flat_map(|(pi, p)| (0..p.instances.len()).map(move |ii| (pi, ii))).collect();
        let mut by_instance = HashMap::with_capacity(workers.len());
        for (wi, &(pi, ii)) in workers.iter().enumerate() {
            by_instance.insert(programs[pi].instances[ii].name.clone(), wi);
        }
        let channels = check_channels(&programs, &workers)?;
        Ok(Mesh {
            programs,
            workers,
            by_instance,
            channels,
            stores: Mutex::new(HashMap::new()),
            config,
            buffers: Arc::default(),
            functions,
            generators: Mutex::new(HashMap::new()),
        })
    }

    /// The names of the program instances (one per device), in module
    /// then replica order.
    pub fn graphs(&self) -> impl Iterator<Item = &str> {
        self.workers.iter().map(|&(pi, ii)| self.programs[pi].instances[ii].name.as_str())
    }

    /// The device of instance `graph`.
    pub fn device(&self, graph: &str) -> Option<&str> {
        self.instance(graph).ok().map(|(_, i)| &*i.device)
    }

    fn worker_index(&self, graph: &str) -> Result<usize, ExecError> {
        self.by_instance.get(graph).copied().ok_or_else(|| ExecError::UnknownGraph { graph: graph.to_string() })
    }

    fn worker(&self, graph: &str) -> Result<Worker, ExecError> {
        Ok(self.workers[self.worker_index(graph)?])
    }

    fn instance(&self, graph: &str) -> Result<(&Program, &Instance), ExecError> {
        let (pi, ii) = self.worker(graph)?;
        Ok((&self.programs[pi], &self.programs[pi].instances[ii]))
    }

    /// Whether instance `graph` has a node named `node`.
    pub fn has_node(&self, graph: &str, node: &str) -> bool {
        self.instance(graph).is_ok_and(|(p, _)| p.by_name.contains_key(node))
    }

    /// The instances whose program has a node named `node`, in module order.
    pub fn instances_with_node(&self, node: &str) -> Vec<String> {
        self.workers
            .iter()
            .filter(|&&(pi, _)| self.programs[pi].by_name.contains_key(node))
            .map(|&(pi, ii)| self.programs[pi].instances[ii].name.clone())
            .collect()
    }

    /// Every copy of every mirrored variable that a replica's program
    /// reaches through a `mirrored` handle, in module then replica order.
    pub fn mirrored_copies(&self) -> Vec<MirrorCopy> {
        let mut copies = Vec::new();
        for &(pi, ii) in &self.workers {
            let (program, instance) = (&self.programs[pi], &self.programs[pi].instances[ii]);
            let Some(replica) = instance.replica else { continue };
            for step in &program.steps {
                if &*step.op == "VarHandleOp" && step.attrs.get_bool(spmd::MIRRORED) == Some(true) {
                    let handle = variable_handle(program, instance, step);
                    copies.push(MirrorCopy {
                        var: step.name.clone(),
                        replica,
                        device: handle.device,
                        name: handle.name.to_string(),
                    });
                }
            }
        }
        copies
    }

    fn stores(&self) -> std::sync::MutexGuard<'_, Stores> {
        self.stores.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sets variable `name` in the store of `graph`'s device.
    pub fn set_variable(&self, graph: &str, name: &str, value: Tensor) -> Result<(), ExecError> {
        let device = self.instance(graph)?.1.device.clone();
        self.set_device_variable(&device, name, value);
        Ok(())
    }

    /// The value of variable `name` in the store of `graph`'s device.
    pub fn variable(&self, graph: &str, name: &str) -> Option<Tensor> {
        let device = self.instance(graph).ok()?.1.device.clone();
        self.device_variable(&device, name)
    }

    /// Sets variable `name` in the store of `device`.
    pub fn set_device_variable(&self, device: &str, name: &str, value: Tensor) {
        self.stores().entry(Arc::from(device)).or_default().insert(name.to_string(), value);
    }

    /// The value of variable `name` in the store of `device`.
    pub fn device_variable(&self, device: &str, name: &str) -> Option<Tensor> {
        self.stores().get(device)?.get(name).cloned()
    }

    /// The names of the variables in the store of `graph`'s device, sorted.
    pub fn variable_names(&self, graph: &str) -> Vec<String> {
        let Ok((_, instance)) = self.instance(graph) else { return Vec::new() };
        let mut names: Vec<String> =
            self.stores().get(&instance.device).map(|s| s.keys().cloned().collect()).unwrap_or_default();
        names.sort();
        names
    }

    /// Runs one step and returns the fetched tensors in order.
    pub fn run_step(&self, feeds: &Feeds, fetches: &[Fetch]) -> Result<Vec<Tensor>, ExecError> {
        self.run_step_with_targets(feeds, fetches, &[])
    }

    /// Runs one step that also runs the `targets` (ops, as `x` or `^x`),
    /// and returns the fetched tensors in order.
    pub fn run_step_with_targets(
        &self,
        feeds: &Feeds,
        fetches: &[Fetch],
        targets: &[Fetch],
    ) -> Result<Vec<Tensor>, ExecError> {
        // Resolve names before anything runs.
        let workers = self.workers.len();
        let mut fed: Vec<HashMap<usize, Vec<(u32, Tensor)>>> = vec![HashMap::new(); workers];
        for (key, value) in feeds.iter() {
            let (wi, node, output) = self.resolve(key, false)?;
            fed[wi].entry(node).or_default().push((output.unwrap_or(0), value.clone()));
        }
        let mut wanted: Vec<(usize, usize, Option<u32>)> = Vec::new();
        for f in fetches {
            wanted.push(self.resolve(f, true)?);
        }
        let mut roots: Vec<Vec<usize>> = vec![Vec::new(); workers];
        for &(wi, node, _) in &wanted {
            roots[wi].push(node);
        }
        for t in targets {
            let (wi, node, _) = self.resolve(t, true)?;
            roots[wi].push(node);
        }

        let mut receivers: HashMap<&ChannelKey, Receiver<Tensor>> = HashMap::with_capacity(self.channels.len());
        let mut senders = HashMap::with_capacity(self.channels.len());
        for key in &self.channels {
            let (s, r) = crossbeam_channel::unbounded();
            senders.insert(key, s);
            receivers.insert(key, r);
        }
        let shared = StepShared {
            mesh: self,
            cancelled: AtomicBool::new(false),
            error: Mutex::new(None),
            senders,
            collectives: Collectives::with_pool(self.buffers.clone()),
            stacks: kernels::stack::StackTable::default(),
        };
        let results: Vec<Option<Vec<Option<Vec<Tensor>>>>> = std::thread::scope(|scope| {
            // The deadline's watchdog: it cancels the step unless the workers
            // finish (and drop `finished`) first.
            let (finished, step_over) = crossbeam_channel::bounded::<()>(0);
            if let Some(limit) = self.config.deadline {
                let shared = &shared;
                let watchdog = move || {
                    if step_over.recv_timeout(limit) == Err(crossbeam_channel::RecvTimeoutError::Timeout) {
                        shared.fail(ExecError::StepDeadline { limit });
                    }
                };
                if let Err(e) = std::thread::Builder::new().name("deadline".into()).spawn_scoped(scope, watchdog) {
                    shared.fail(ExecError::Internal { message: format!("cannot start the deadline's thread: {e}") });
                }
            }
            let handles: Vec<_> = self
                .workers
                .iter()
                .enumerate()
                .map(|(wi, &(pi, ii))| {
                    let program = &self.programs[pi];
                    let instance = &program.instances[ii];
                    let active = active_set(program, &roots[wi], &fed[wi]);
                    let fed = std::mem::take(&mut fed[wi]);
                    let roots = &roots[wi];
                    let receivers = &receivers;
                    let shared = &shared;
                    let worker = move || match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        run_program(program, instance, (active, roots), fed, receivers, shared)
                    })) {
                        Ok(Ok(values)) => Some(values),
                        Ok(Err(Stop::Failed(e))) => {
                            shared.fail(e);
                            None
                        }
                        Ok(Err(Stop::Cancelled)) => None,
                        Err(payload) => {
                            shared.fail(ExecError::Panic {
                                graph: instance.name.clone(),
                                device: instance.device.to_string(),
                                node: String::new(),
                                op: String::new(),
                                message: panic_message(payload.as_ref()),
                                span: Span::DETACHED,
                            });
                            None
                        }
                    };
                    spawn_worker(scope, wi, thread_name(&instance.name), worker)
                })
                .collect();
            // A worker that could not start fails the step at once, so the
            // started ones stop instead of waiting for it until the timeout.
            if let Some(Err(e)) = handles.iter().find(|h| h.is_err()) {
                shared.fail(ExecError::Internal { message: format!("cannot start a worker thread: {e}") });
            }
            let results = handles.into_iter().map(|h| h.ok().and_then(|h| h.join().unwrap_or(None))).collect();
            drop(finished);
            results
        });
        if let Some(e) = shared.error.lock().unwrap_or_else(|p| p.into_inner()).take() {
            return Err(e);
        }
        wanted
            .iter()
            .zip(fetches)
            .map(|(&(wi, node, output), f)| {
                let output = output.unwrap_or(0);
                let step = &self.programs[self.workers[wi].0].steps[node];
                results[wi]
                    .as_ref()
                    .and_then(|values| values[node].as_ref())
                    .and_then(|outs| outs.get(output as usize).cloned())
                    .ok_or_else(|| ExecError::UnknownTensor {
                        graph: f.graph.clone(),
                        tensor: f.tensor.clone(),
                        reason: if frames::is_dead_member(step) {
                            "it is dead (the untaken side of a TF1 `Switch`) or inside a loop".into()
                        } else {
                            format!("the op has no output {output}")
                        },
                    })
            })
            .collect()
    }

    /// Resolves `x`, `x:k` or (if `allow_target`) `^x` of an instance to
    /// (worker, node, output).
    fn resolve(&self, key: &Fetch, allow_target: bool) -> Result<(usize, usize, Option<u32>), ExecError> {
        let wi = self.worker_index(&key.graph)?;
        let worker = self.workers[wi];
        let unknown = |reason: &str| ExecError::UnknownTensor {
            graph: key.graph.clone(),
            tensor: key.tensor.clone(),
            reason: reason.to_string(),
        };
        let (name, output) = if let Some(op) = key.tensor.strip_prefix('^') {
            if !allow_target {
                return Err(unknown("an op (`^x`) cannot be fed"));
            }
            (op, None)
        } else {
            match key.tensor.rsplit_once(':') {
                Some((n, k)) => (n, Some(k.parse::<u32>().map_err(|_| unknown("the output index is not a number"))?)),
                None => (key.tensor.as_str(), Some(0)),
            }
        };
        let node = *self.programs[worker.0].by_name.get(name).ok_or_else(|| unknown("no node has this name"))?;
        Ok((wi, node, output))
    }
}

/// Starts worker `index` of a step on its own named thread.
fn spawn_worker<'scope, 'env, T: Send + 'scope>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    index: usize,
    name: String,
    worker: impl FnOnce() -> T + Send + 'scope,
) -> std::io::Result<std::thread::ScopedJoinHandle<'scope, T>> {
    #[cfg(test)]
    if tests::FAIL_SPAWN_AT.with(|at| at.get()) == Some(index) {
        return Err(std::io::Error::new(std::io::ErrorKind::WouldBlock, "injected by a test"));
    }
    #[cfg(not(test))]
    let _ = index;
    std::thread::Builder::new().name(name).spawn_scoped(scope, worker)
}

/// A worker thread's name: the instance's, without the NUL bytes a thread
/// name cannot hold.
fn thread_name(instance: &str) -> String {
    instance.replace('\0', "\u{fffd}")
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::time::{Duration, Instant};

    use super::{Feeds, Fetch, Mesh, MeshConfig};
    use crate::exec::ExecError;

    thread_local! {
        /// The worker whose thread fails to start, in tests that ask for it.
        pub(super) static FAIL_SPAWN_AT: Cell<Option<usize>> = const { Cell::new(None) };
    }

    /// Four replicas meeting in an all-reduce: a replica whose thread never
    /// starts would keep the others waiting until the timeout.
    const ALL_REDUCE: &[u8] = br#"graph @main {
  %a = Const() {dtype = f32, value = tensor(f32, [2]) [1.0, 2.0]}
  replicate (num_replicas = 4) (%x = [%a, %a, %a, %a]) {
    %s = CrossReplicaSum(%x) {T = f32}
    return %s
  }
}"#;

    #[test]
    fn a_worker_that_cannot_start_fails_the_step_at_once() {
        let (mut module, errors) = crate::parse_module(ALL_REDUCE).expect("parses");
        assert!(errors.is_empty(), "{errors:?}");
        let report = crate::run_pipeline(&mut module, &crate::PipelineConfig::default());
        assert!(!report.has_errors());
        let config = crate::LowerConfig {
            topology: crate::Topology::parse("1x4").expect("a topology"),
            ..crate::LowerConfig::default()
        };
        let lowered = crate::lower(&module.graphs[0], &config).expect("lowers");
        let mesh = Mesh::new(&lowered.module, MeshConfig { timeout: Duration::from_secs(30), deadline: None })
            .expect("a mesh");
        let fetches: Vec<Fetch> = (0..4).map(|r| Fetch::new("host", format!("output_0_shard_{r}:0"))).collect();
        // Without the failure the step runs: the fetches are right.
        let values = mesh.run_step(&Feeds::new(), &fetches).expect("runs");
        assert_eq!(values[3], crate::Tensor::from_vec(&[2], vec![4.0f32, 8.0]).expect("a tensor"));

        let last = mesh.workers.len() - 1;
        FAIL_SPAWN_AT.with(|at| at.set(Some(last)));
        let start = Instant::now();
        let result = mesh.run_step(&Feeds::new(), &fetches);
        FAIL_SPAWN_AT.with(|at| at.set(None));
        match result {
            Err(ExecError::Internal { message }) => {
                assert!(message.contains("cannot start a worker thread"), "{message}")
            }
            other => panic!("expected a failure to start a worker, got {other:?}"),
        }
        assert!(start.elapsed() < Duration::from_secs(10), "the started workers waited {:?}", start.elapsed());
    }
}
