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
}

impl Default for MeshConfig {
    fn default() -> Self {
        MeshConfig { timeout: Duration::from_secs(30) }
    }
}

/// A tensor or op of one graph: `x` (output 0), `x:1`, or `^x` (the op only, as a target).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Fetch {
    pub graph: String,
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
        let programs =
            module.graphs.iter().map(|g| build_program(g, assignment.as_ref())).collect::<Result<Vec<_>, _>>()?;
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
        };
        let results: Vec<Option<Vec<Option<Vec<Tensor>>>>> = std::thread::scope(|scope| {
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
                    std::thread::Builder::new().name(thread_name(&instance.name)).spawn_scoped(scope, worker)
                })
                .collect();
            // A worker that could not start fails the step at once, so the
            // started ones stop instead of waiting for it until the timeout.
            if let Some(Err(e)) = handles.iter().find(|h| h.is_err()) {
                shared.fail(ExecError::Internal { message: format!("cannot start a worker thread: {e}") });
            }
            handles.into_iter().map(|h| h.ok().and_then(|h| h.join().unwrap_or(None))).collect()
        });
        if let Some(e) = shared.error.lock().unwrap_or_else(|p| p.into_inner()).take() {
            return Err(e);
        }
        wanted
            .iter()
            .zip(fetches)
            .map(|(&(wi, node, output), f)| {
                let output = output.unwrap_or(0);
                results[wi]
                    .as_ref()
                    .and_then(|values| values[node].as_ref())
                    .and_then(|outs| outs.get(output as usize).cloned())
                    .ok_or_else(|| ExecError::UnknownTensor {
                        graph: f.graph.clone(),
                        tensor: f.tensor.clone(),
                        reason: format!("the op has no output {output}"),
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

/// A worker thread's name: the instance's, without the NUL bytes a thread
/// name cannot hold.
fn thread_name(instance: &str) -> String {
    instance.replace('\0', "\u{fffd}")
}

fn build_program(
    graph: &crate::ir::Graph,
    assignment: Option<&crate::lower::DeviceAssignment>,
) -> Result<Program, ExecError> {
    if let Some(region) = graph.regions.first() {
        return Err(ExecError::NotLowered {
            graph: graph.name.clone(),
            reason: "it still has replicate or outside_compilation regions".into(),
            span: region.keyword_span,
        });
    }
    let ids = graph.nodes_in_order();
    let index: HashMap<_, usize> = ids.iter().enumerate().map(|(i, &id)| (id, i)).collect();
    let mut steps = Vec::with_capacity(ids.len());
    for &id in &ids {
        let node = graph.node(id);
        if node.kind != NodeKind::Op {
            return Err(ExecError::NotLowered {
                graph: graph.name.clone(),
                reason: format!(
                    "`%{}` is a {} and not an op",
                    node.name,
                    if node.op.is_empty() { "region input" } else { &node.op }
                ),
                span: node.span,
            });
        }
        let mut inputs = Vec::new();
        let mut preds = Vec::new();
        for input in graph.inputs(id) {
            let src = index[&input.src];
            if let Some(output) = input.output {
                inputs.push((src, output));
            }
            if !preds.contains(&src) {
                preds.push(src);
            }
        }
        let class = match &*node.op {
            "_Recv" => Class::Recv,
            "CollectiveAllReduce" | "CollectiveBroadcast" => Class::Collective,
            _ => Class::Compute,
        };
        let channel = match &*node.op {
            "_Send" | "_Recv" => Some(channel_of(graph, node)?),
            _ => None,
        };
        steps.push(Step {
            name: node.name.clone(),
            op: node.op.clone(),
            attrs: node.attrs.clone(),
            channel,
            span: node.span,
            device: node.device.clone(),
            inputs,
            preds,
            succs: Vec::new(),
            seq: node.seq,
            class,
        });
    }
    for i in 0..steps.len() {
        for p in steps[i].preds.clone() {
            steps[p].succs.push(i);
        }
    }
    // Kahn's algorithm finds cycles now rather than as a hang later.
    let mut remaining: Vec<usize> = steps.iter().map(|s| s.preds.len()).collect();
    let mut queue: Vec<usize> = (0..steps.len()).filter(|&i| remaining[i] == 0).collect();
    let mut seen = 0;
    while let Some(i) = queue.pop() {
        seen += 1;
        for &s in &steps[i].succs {
            remaining[s] -= 1;
            if remaining[s] == 0 {
                queue.push(s);
            }
        }
    }
    if seen != steps.len() {
        let stuck = (0..steps.len()).find(|&i| remaining[i] > 0).unwrap_or(0);
        return Err(ExecError::Cycle {
            graph: graph.name.clone(),
            node: steps[stuck].name.to_string(),
            span: steps[stuck].span,
        });
    }
    let by_name = steps.iter().enumerate().map(|(i, s)| (s.name.clone(), i)).collect();
    let mode = match graph.attrs.get_str("role") {
        Some("replica") | Some("host") => Mode::Whole,
        _ => Mode::Needed,
    };
    let not_lowered = |reason: String| ExecError::NotLowered { graph: graph.name.clone(), reason, span: graph.span };
    let spmd = spmd::is_spmd(graph);
    let instances = if spmd {
        let replicas = graph.attrs.get_int(spmd::NUM_REPLICAS).and_then(|n| u32::try_from(n).ok()).unwrap_or(0);
        let a = assignment
            .ok_or_else(|| not_lowered("it runs once per replica, but the module has no `device_assignment`".into()))?;
        if replicas == 0 || replicas > a.num_replicas {
            return Err(not_lowered(format!(
                "it runs on {replicas} replica(s), but the device assignment has {}",
                a.num_replicas
            )));
        }
        (0..replicas)
            .map(|r| {
                let device = spmd::instance_device(graph, a, r)
                    .ok_or_else(|| not_lowered(format!("replica {r} has no device in the device assignment")))?;
                Ok(Instance { name: spmd::instance_name(graph, r), device: device.into(), replica: Some(r) })
            })
            .collect::<Result<Vec<_>, ExecError>>()?
    } else {
        let device: Arc<str> = graph.attrs.get_str("device").map_or_else(|| Arc::from(graph.name.as_str()), Arc::from);
        let replica = graph.attrs.get_int(spmd::REPLICA).and_then(|r| u32::try_from(r).ok());
        vec![Instance { name: graph.name.clone(), device, replica }]
    };
    let num_replicas = match graph.attrs.get_int(spmd::NUM_REPLICAS) {
        Some(n) => u32::try_from(n).unwrap_or(1),
        None => 1,
    };
    Ok(Program { name: graph.name.clone(), num_replicas, spmd, mode, steps, by_name, instances })
}

/// The channel of a `_Send` or `_Recv` node, and its peer.
fn channel_of(graph: &crate::ir::Graph, node: &crate::ir::Node) -> Result<(Arc<str>, Peer), ExecError> {
    let missing = |problem: String| ExecError::Channel {
        graph: graph.name.clone(),
        channel: String::new(),
        problem,
        span: node.span,
    };
    let channel = node
        .attrs
        .get_str("channel")
        .ok_or_else(|| missing(format!("is missing: `%{}` has no string attribute `channel`", node.name)))?;
    let count = |key: &str| -> Result<Option<u32>, ExecError> {
        match node.attrs.get_int(key) {
            None => Ok(None),
            Some(v) => u32::try_from(v)
                .map(Some)
                .map_err(|_| missing(format!("of `%{}` has `{key} = {v}`, which is not a replica", node.name))),
        }
    };
    let peer = match (count(spmd::REPLICA)?, count(spmd::ALL_REPLICAS)?) {
        (Some(r), _) => Peer::Replica(r),
        (None, Some(n)) => Peer::All(n),
        (None, None) => Peer::Implied,
    };
    Ok((Arc::from(channel), peer))
}

/// Checks every `_Recv` has exactly one `_Send`; returns the channel keys.
fn check_channels(programs: &[Program], workers: &[Worker]) -> Result<Vec<ChannelKey>, ExecError> {
    let spell = |(channel, replica): &ChannelKey| match replica {
        Some(r) => format!("{channel} (replica {r})"),
        None => channel.to_string(),
    };
    let mut sends: HashMap<ChannelKey, ()> = HashMap::new();
    for &(pi, ii) in workers {
        let (p, instance) = (&programs[pi], &programs[pi].instances[ii]);
        for s in p.steps.iter().filter(|s| &*s.op == "_Send") {
            for key in s.channel_keys(p, instance) {
                if sends.contains_key(&key) {
                    return Err(ExecError::Channel {
                        graph: instance.name.clone(),
                        channel: spell(&key),
                        problem: "is written by two `_Send` ops".into(),
                        span: s.span,
                    });
                }
                sends.insert(key, ());
            }
        }
    }
    let mut recvs: HashMap<ChannelKey, ()> = HashMap::new();
    for &(pi, ii) in workers {
        let (p, instance) = (&programs[pi], &programs[pi].instances[ii]);
        for s in p.steps.iter().filter(|s| &*s.op == "_Recv") {
            for key in s.channel_keys(p, instance) {
                if !sends.contains_key(&key) {
                    return Err(ExecError::Channel {
                        graph: instance.name.clone(),
                        channel: spell(&key),
                        problem: "has no `_Send` anywhere in the module".into(),
                        span: s.span,
                    });
                }
                if recvs.insert(key.clone(), ()).is_some() {
                    return Err(ExecError::Channel {
                        graph: instance.name.clone(),
                        channel: spell(&key),
                        problem: "is read by two `_Recv` ops".into(),
                        span: s.span,
                    });
                }
            }
        }
    }
    let mut keys: Vec<ChannelKey> = sends.into_keys().collect();
    keys.sort();
    Ok(keys)
}

/// The nodes a program runs this step: all, or the ancestors of the roots
/// and of every `_Send`, stopping at fed nodes.
fn active_set(program: &Program, roots: &[usize], fed: &HashMap<usize, Vec<(u32, Tensor)>>) -> Vec<bool> {
    if program.mode == Mode::Whole {
        return vec![true; program.steps.len()];
    }
    let mut active = vec![false; program.steps.len()];
    let mut stack: Vec<usize> = roots.to_vec();
    stack.extend(program.steps.iter().enumerate().filter(|(_, s)| &*s.op == "_Send").map(|(i, _)| i));
    while let Some(i) = stack.pop() {
        if std::mem::replace(&mut active[i], true) {
            continue;
        }
        if !fed.contains_key(&i) {
            stack.extend(program.steps[i].preds.iter().copied());
        }
    }
    active
}

/// A `_Recv` waiting for its value (or, with `all_replicas`, for one
/// token from each replica).
struct PendingRecv<'a> {
    step: usize,
    channels: Vec<&'a Receiver<Tensor>>,
    since: Instant,
}

/// What a worker runs: a program, as one instance.
#[derive(Clone, Copy)]
struct Run<'a> {
    program: &'a Program,
    instance: &'a Instance,
}

/// Runs one instance of a program for a step: the `active` nodes, keeping
/// the values of the `roots` (fetches); every other value is dropped once
/// its last consumer has run, so a worker holds only live tensors.
fn run_program(
    program: &Program,
    instance: &Instance,
    (active, roots): (Vec<bool>, &[usize]),
    mut fed: HashMap<usize, Vec<(u32, Tensor)>>,
    receivers: &HashMap<&ChannelKey, Receiver<Tensor>>,
    shared: &StepShared<'_>,
) -> Result<Vec<Option<Vec<Tensor>>>, Stop> {
    let run = Run { program, instance };
    let n = program.steps.len();
    let mut values: Vec<Option<Vec<Tensor>>> = vec![None; n];
    // Count only active predecessors; fed nodes have none (they do not run).
    let is_fed: Vec<bool> = (0..n).map(|i| fed.contains_key(&i)).collect();
    let mut remaining: Vec<usize> = (0..n)
        .map(|i| if is_fed[i] { 0 } else { program.steps[i].preds.iter().filter(|&&p| active[p]).count() })
        .collect();
    // Collectives run in one fixed order, the same on every member: by
    // instance (lowering numbers them in a topological order of the source
    // graph). Running whichever is ready first could deadlock: two members
    // could each block in a different collective, waiting for the other.
    let mut collective_order: Vec<(i64, u64, usize)> = (0..n)
        .filter(|&i| active[i] && !is_fed[i] && program.steps[i].class == Class::Collective)
        .map(|i| (program.steps[i].attrs.get_int("instance").unwrap_or(0), program.steps[i].seq, i))
        .collect();
    collective_order.sort_unstable();
    let mut next_collective = 0;
    let mut compute: BTreeSet<(u64, usize)> = BTreeSet::new();
    let mut collectives: BTreeSet<(i64, u64, usize)> = BTreeSet::new();
    let mut recvs: Vec<PendingRecv<'_>> = Vec::new();
    for i in (0..n).filter(|&i| active[i] && remaining[i] == 0) {
        if is_fed[i] {
            compute.insert((program.steps[i].seq, i));
        } else {
            make_ready(run, i, receivers, &mut compute, &mut collectives, &mut recvs)?;
        }
    }
    // Data consumers still to run, per node; a root keeps its value.
    let mut uses: Vec<u32> = vec![0; n];
    for i in (0..n).filter(|&i| active[i] && !is_fed[i]) {
        for &(src, _) in &program.steps[i].inputs {
            uses[src] += 1;
        }
    }
    for &r in roots {
        uses[r] = u32::MAX;
    }
    let mut done = 0;
    let total = active.iter().filter(|&&a| a).count();
    while done < total {
        if shared.cancelled.load(Ordering::Relaxed) {
            return Err(Stop::Cancelled);
        }
        let next = if let Some((_, i)) = compute.pop_first() {
            let outputs = match fed.remove(&i) {
                Some(feeds) => Ok(feed_outputs(feeds)),
                None => run_node(run, i, &values, shared),
            };
            Some((i, outputs?))
        } else if let Some(got) = poll_recvs(&mut recvs) {
            Some(got)
        } else if collectives.first().is_some_and(|c| Some(c) == collective_order.get(next_collective)) {
            let (_, _, i) = collectives.pop_first().expect("checked non-empty");
            next_collective += 1;
            Some((i, run_node(run, i, &values, shared)?))
        } else if !recvs.is_empty() {
            wait_recvs(run, &mut recvs, shared)?
        } else {
            return Err(Stop::Failed(ExecError::Internal {
                message: format!("program `@{}` has no runnable node but {} of {total} ran", instance.name, done),
            }));
        };
        let Some((i, outputs)) = next else { continue };
        values[i] = Some(outputs);
        done += 1;
        if !is_fed[i] {
            for &(src, _) in &program.steps[i].inputs {
                uses[src] = uses[src].saturating_sub(1);
                if uses[src] == 0 {
                    values[src] = None;
                }
            }
        }
        for &s in &program.steps[i].succs {
            if !active[s] || is_fed[s] {
                continue;
            }
            remaining[s] -= 1;
            if remaining[s] == 0 {
                make_ready(run, s, receivers, &mut compute, &mut collectives, &mut recvs)?;
            }
        }
    }
    Ok(values)
}

/// Queues node `i`, whose inputs are ready, by its class.
fn make_ready<'r>(
    run: Run<'_>,
    i: usize,
    receivers: &'r HashMap<&ChannelKey, Receiver<Tensor>>,
    compute: &mut BTreeSet<(u64, usize)>,
    collectives: &mut BTreeSet<(i64, u64, usize)>,
    recvs: &mut Vec<PendingRecv<'r>>,
) -> Result<(), Stop> {
    let s = &run.program.steps[i];
    match s.class {
        Class::Compute => {
            compute.insert((s.seq, i));
        }
        Class::Collective => {
            collectives.insert((s.attrs.get_int("instance").unwrap_or(0), s.seq, i));
        }
        Class::Recv => {
            let channels = s
                .channel_keys(run.program, run.instance)
                .iter()
                .map(|key| {
                    receivers.get(key).ok_or_else(|| {
                        Stop::Failed(ExecError::Internal { message: format!("no receiver for channel `{}`", key.0) })
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            recvs.push(PendingRecv { step: i, channels, since: Instant::now() });
        }
    }
    Ok(())
}

fn feed_outputs(mut feeds: Vec<(u32, Tensor)>) -> Vec<Tensor> {
    feeds.sort_by_key(|f| f.0);
    let len = feeds.last().map_or(0, |f| f.0 as usize + 1);
    let mut out = vec![Tensor::scalar(0.0f32); len];
    for (k, t) in feeds {
        out[k as usize] = t;
    }
    out
}

/// Takes what has arrived for the pending recvs; returns a recv that has
/// all it waits for.
fn poll_recvs(recvs: &mut Vec<PendingRecv<'_>>) -> Option<(usize, Vec<Tensor>)> {
    for pos in 0..recvs.len() {
        if let Some(got) = take_arrived(recvs, pos, None) {
            return Some(got);
        }
    }
    None
}

/// Takes what has arrived on pending recv `pos` (and `first`, a value
/// already taken from its channel `first.0`); removes and returns the recv
/// when nothing more is due.
fn take_arrived(
    recvs: &mut Vec<PendingRecv<'_>>,
    pos: usize,
    first: Option<(usize, Tensor)>,
) -> Option<(usize, Vec<Tensor>)> {
    let r = &mut recvs[pos];
    let mut last = None;
    if let Some((ci, t)) = first {
        r.channels.swap_remove(ci);
        last = Some(t);
    }
    let mut k = 0;
    while k < r.channels.len() {
        match r.channels[k].try_recv() {
            Ok(t) => {
                r.channels.swap_remove(k);
                last = Some(t);
            }
            Err(_) => k += 1,
        }
    }
    if !r.channels.is_empty() {
        return None;
    }
    let r = recvs.remove(pos);
    // A gather of tokens from every replica gives one token.
    last.map(|t| (r.step, vec![t]))
}

/// Blocks until one pending `_Recv` gets a value, the step is cancelled,
/// or the oldest one times out.
fn wait_recvs(
    run: Run<'_>,
    recvs: &mut Vec<PendingRecv<'_>>,
    shared: &StepShared<'_>,
) -> Result<Option<(usize, Vec<Tensor>)>, Stop> {
    let timeout = shared.mesh.config.timeout;
    let oldest = recvs.iter().map(|r| r.since).min().unwrap_or_else(Instant::now);
    let now = Instant::now();
    let deadline = oldest.checked_add(timeout).unwrap_or(now + MAX_TIMEOUT);
    if now >= deadline {
        let r = recvs.iter().find(|r| r.since == oldest).unwrap_or(&recvs[0]);
        let s = &run.program.steps[r.step];
        let channel = s.channel.as_ref().map_or("", |c| &*c.0);
        return Err(Stop::Failed(ExecError::Timeout {
            graph: run.instance.name.clone(),
            device: run.instance.device.to_string(),
            node: s.name.to_string(),
            op: s.op.to_string(),
            what: format!("channel `{channel}`"),
            waited: timeout,
            span: s.span,
        }));
    }
    let mut select = Select::new();
    let mut owners = Vec::new();
    for (pos, r) in recvs.iter().enumerate() {
        for (ci, channel) in r.channels.iter().enumerate() {
            select.recv(channel);
            owners.push((pos, ci));
        }
    }
    let limit = POLL.min(deadline - now);
    match select.select_timeout(limit) {
        Ok(op) => {
            let (pos, ci) = owners[op.index()];
            match op.recv(recvs[pos].channels[ci]) {
                Ok(t) => Ok(take_arrived(recvs, pos, Some((ci, t)))),
                Err(_) => Err(Stop::Cancelled),
            }
        }
        Err(_) => Ok(None),
    }
}

fn node_error(run: Run<'_>, step: &Step, source: KernelError) -> Stop {
    Stop::Failed(ExecError::Kernel {
        graph: run.instance.name.clone(),
        device: run.instance.device.to_string(),
        node: step.name.to_string(),
        op: step.op.to_string(),
        source,
        span: step.span,
    })
}

/// Runs node `i` with its inputs from `values`; panics become errors.
fn run_node(
    run: Run<'_>,
    i: usize,
    values: &[Option<Vec<Tensor>>],
    shared: &StepShared<'_>,
) -> Result<Vec<Tensor>, Stop> {
    let program = run.program;
    let step = &program.steps[i];
    let inputs: Vec<Tensor> = step
        .inputs
        .iter()
        .map(|&(src, output)| {
            values[src].as_ref().and_then(|outs| outs.get(output as usize)).cloned().ok_or_else(|| {
                let producer = &program.steps[src];
                node_error(
                    run,
                    step,
                    KernelError::invalid(
                        &step.op,
                        format!("input `%{}:{output}` has no value (its op has no such output)", producer.name),
                    ),
                )
            })
        })
        .collect::<Result<_, _>>()?;
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| device_kernel(run, step, inputs, shared)));
    match result {
        Ok(r) => r,
        Err(payload) => Err(Stop::Failed(ExecError::Panic {
            graph: run.instance.name.clone(),
            device: run.instance.device.to_string(),
            node: step.name.to_string(),
            op: step.op.to_string(),
            message: panic_message(payload.as_ref()),
            span: step.span,
        })),
    }
}

/// The kernels that need the device: variables, channels, collectives.
fn device_kernel(run: Run<'_>, step: &Step, inputs: Vec<Tensor>, shared: &StepShared<'_>) -> Result<Vec<Tensor>, Stop> {
    let op = &*step.op;
    let err = |e: KernelError| node_error(run, step, e);
    let instance = run.instance;
    let handle = |inputs: &[Tensor]| -> Result<ResourceHandle, Stop> {
        kernels::arg(op, inputs, 0)
            .map_err(err)?
            .as_resource()
            .cloned()
            .ok_or_else(|| err(KernelError::invalid(op, "input 0 must be a resource handle (from VarHandleOp)")))
    };
    let check_dtype = |t: &Tensor| -> Result<(), Stop> {
        match step.attrs.get("dtype").and_then(|v| v.as_type()) {
            Some(d) if d != t.dtype() => {
                Err(err(KernelError::invalid(op, format!("the variable holds {} but the op expects {d}", t.dtype()))))
            }
            _ => Ok(()),
        }
    };
    let mesh = shared.mesh;
    match op {
        "Placeholder" => Err(err(KernelError::invalid(op, format!("`%{}` must be fed", step.name)))),
        "ReplicaId" => match instance.replica {
            Some(r) => Ok(vec![Tensor::scalar(
                i32::try_from(r).map_err(|_| err(KernelError::invalid(op, "replica id too large")))?,
            )]),
            None => Err(err(KernelError::invalid(op, format!("graph `@{}` runs on no replica", instance.name)))),
        },
        "TPUReplicatedInput" => {
            let index = if inputs.len() > 1 { instance.replica.unwrap_or(0) } else { 0 };
            let picked = usize::try_from(index).ok().and_then(|i| inputs.get(i)).cloned();
            picked.map(|t| vec![t]).ok_or_else(|| {
                err(KernelError::invalid(op, format!("replica {index} has no operand among {} inputs", inputs.len())))
            })
        }
        "VarHandleOp" => Ok(vec![Tensor::Resource(variable_handle(run.program, instance, step))]),
        "MirroredVarHandleOp" if step.attrs.contains_key("programs") => {
            let copies = mirror_copies(shared.mesh, step).map_err(|m| err(KernelError::invalid(op, m)))?;
            let mut copies = copies.into_iter();
            let (device, name) = copies.next().ok_or_else(|| err(KernelError::invalid(op, "lists no copies")))?;
            Ok(vec![Tensor::Resource(ResourceHandle { device, name, mirrors: copies.collect() })])
        }
        "MirroredVarHandleOp" => {
            let list = |key: &str| -> Vec<Arc<str>> {
                let items = step.attrs.get(key).and_then(|v| v.as_list()).unwrap_or_default();
                items.iter().filter_map(|v| v.as_str().map(Arc::from)).collect()
            };
            let (devices, names) = (list("devices"), list("shared_names"));
            if devices.is_empty() || devices.len() != names.len() {
                return Err(err(KernelError::invalid(
                    op,
                    format!(
                        "needs as many `devices` as `shared_names`, at least one (got {} and {})",
                        devices.len(),
                        names.len()
                    ),
                )));
            }
            let mut copies = devices.into_iter().zip(names);
            let (device, name) = copies.next().expect("checked non-empty");
            Ok(vec![Tensor::Resource(ResourceHandle { device, name, mirrors: copies.collect() })])
        }
        "ReadVariableOp" => {
            let h = handle(&inputs)?;
            let value = mesh.device_variable(&h.device, &h.name).ok_or_else(|| {
                err(KernelError::invalid(op, format!("variable `{}` on {} is not initialised", h.name, h.device)))
            })?;
            check_dtype(&value)?;
            Ok(vec![value])
        }
        "VarIsInitializedOp" => {
            let h = handle(&inputs)?;
            Ok(vec![Tensor::scalar(mesh.device_variable(&h.device, &h.name).is_some())])
        }
        "AssignVariableOp" | "AssignAddVariableOp" | "AssignSubVariableOp" | "Update" | "UpdateNonSlot" => {
            let update = match op {
                "Update" | "UpdateNonSlot" => match step.attrs.get_str("fn").unwrap_or_default() {
                    "Assign" => "AssignVariableOp",
                    "AssignAdd" => "AssignAddVariableOp",
                    "AssignSub" => "AssignSubVariableOp",
                    other => {
                        return Err(err(KernelError::invalid(
                            op,
                            format!("fn must be \"Assign\", \"AssignAdd\" or \"AssignSub\", not {other:?}"),
                        )))
                    }
                },
                _ => op,
            };
            let h = handle(&inputs)?;
            let value = kernels::arg(op, &inputs, 1).map_err(err)?.clone();
            check_dtype(&value)?;
            let mut stores = mesh.stores();
            // Every copy: a mirrored handle from outside the cluster writes them all.
            for (device, name) in h.copies() {
                let store = stores.entry(device.clone()).or_default();
                let new = if update == "AssignVariableOp" {
                    value.clone()
                } else {
                    let old = store.get(&**name).ok_or_else(|| {
                        err(KernelError::invalid(op, format!("variable `{name}` on {device} is not initialised")))
                    })?;
                    if old.shape() != value.shape() {
                        return Err(err(KernelError::invalid(
                            op,
                            format!(
                                "variable `{name}` has shape {:?} but the update has {:?}",
                                old.shape(),
                                value.shape()
                            ),
                        )));
                    }
                    let b = if update == "AssignAddVariableOp" { "AddV2" } else { "Sub" };
                    kernels::run_kernel(b, &AttrMap::new(), &[old.clone(), value.clone()]).map_err(err)?.remove(0)
                };
                store.insert(name.to_string(), new);
            }
            Ok(Vec::new())
        }
        "_Send" => {
            let value = kernels::arg(op, &inputs, 0).map_err(err)?.clone();
            for key in step.channel_keys(run.program, instance) {
                let sender = shared.senders.get(&key).ok_or_else(|| {
                    Stop::Failed(ExecError::Internal { message: format!("no sender for channel `{}`", key.0) })
                })?;
                // The receiver lives until the step ends, so this cannot fail.
                sender.send(value.clone()).map_err(|_| Stop::Cancelled)?;
            }
            Ok(Vec::new())
        }
        "CollectiveAllReduce" | "CollectiveBroadcast" => collective(run, step, inputs, shared),
        "ResourceGather" => {
            let h = handle(&inputs)?;
            let value = mesh.device_variable(&h.device, &h.name).ok_or_else(|| {
                err(KernelError::invalid(op, format!("variable `{}` on {} is not initialised", h.name, h.device)))
            })?;
            let indices = kernels::arg(op, &inputs, 1).map_err(err)?;
            if step.attrs.get_int("batch_dims").unwrap_or(0) != 0 {
                return Err(err(KernelError::invalid(op, "batch_dims other than 0 is not supported")));
            }
            kernels::run_kernel("GatherV2", &AttrMap::new(), &[value, indices.clone(), Tensor::scalar(0i32)])
                .map_err(err)
        }
        "ResourceScatterAdd" | "ResourceScatterSub" | "ResourceScatterUpdate" => {
            // The sparse (IndexedSlices) updates of embedding tables.
            let h = handle(&inputs)?;
            let (indices, updates) =
                (kernels::arg(op, &inputs, 1).map_err(err)?, kernels::arg(op, &inputs, 2).map_err(err)?);
            let mut stores = mesh.stores();
            let old = stores.get(&h.device).and_then(|s| s.get(&*h.name)).cloned().ok_or_else(|| {
                err(KernelError::invalid(op, format!("variable `{}` on {} is not initialised", h.name, h.device)))
            })?;
            use kernels::gather::Combine;
            let (how, negate) = match op {
                "ResourceScatterAdd" => (Combine::Add, false),
                "ResourceScatterSub" => (Combine::Add, true),
                _ => (Combine::Replace, false),
            };
            let new = kernels::gather::scatter_rows(op, &old, indices, updates, how, negate).map_err(err)?;
            for (device, name) in h.copies() {
                stores.entry(device.clone()).or_default().insert(name.to_string(), new.clone());
            }
            Ok(Vec::new())
        }
        _ if kernels::optimizers::resource_inputs(op).is_some() => resource_apply(step, &inputs, mesh).map_err(err),
        _ => kernels::run_kernel(op, &step.attrs, &inputs).map_err(err),
    }
}

/// An optimizer op (`ResourceApply*`): reads the variables behind its
/// resource inputs, computes their new values, writes every copy.
fn resource_apply(step: &Step, inputs: &[Tensor], mesh: &Mesh) -> Result<Vec<Tensor>, KernelError> {
    let op = &*step.op;
    let n = kernels::optimizers::resource_inputs(op).unwrap_or(0);
    if inputs.len() < n {
        return Err(KernelError::invalid(op, format!("expected {n} resource inputs, got {} inputs", inputs.len())));
    }
    let handles = inputs[..n]
        .iter()
        .map(|t| t.as_resource().ok_or_else(|| KernelError::invalid(op, "the slot inputs must be resource handles")))
        .collect::<Result<Vec<_>, _>>()?;
    let mut stores = mesh.stores();
    let slots = handles
        .iter()
        .map(|h| {
            stores.get(&h.device).and_then(|s| s.get(&*h.name)).cloned().ok_or_else(|| {
                KernelError::invalid(op, format!("variable `{}` on {} is not initialised", h.name, h.device))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let updated = kernels::optimizers::apply(op, &step.attrs, &slots, &inputs[n..])?;
    for (h, value) in handles.iter().zip(updated) {
        for (device, name) in h.copies() {
            stores.entry(device.clone()).or_default().insert(name.to_string(), value.clone());
        }
    }
    Ok(Vec::new())
}

fn collective(run: Run<'_>, step: &Step, inputs: Vec<Tensor>, shared: &StepShared<'_>) -> Result<Vec<Tensor>, Stop> {
    let op = &*step.op;
    let err = |m: String| node_error(run, step, KernelError::invalid(op, m));
    let int = |key: &str, default: Option<i64>| -> Result<i64, Stop> {
        step.attrs.get_int(key).or(default).ok_or_else(|| err(format!("missing int attribute `{key}`")))
    };
    // A bound collective names its group and rank; an SPMD one takes them
    // from the running replica.
    let member = match (step.attrs.get_int("rank"), run.instance.replica) {
        (None, Some(replica)) if run.program.spmd => {
            spmd::collective_member(&step.attrs, replica, run.program.num_replicas).map_err(err)?
        }
        _ => spmd::Member {
            group: step.attrs.get_str("group").ok_or_else(|| err("missing string attribute `group`".into()))?.into(),
            group_size: int("group_size", None)?,
            rank: int("rank", None)?,
        },
    };
    let group = member.group.as_str();
    let instance = int("instance", Some(0))?;
    let group_size = usize::try_from(member.group_size).map_err(|_| err("group_size must be >= 1".into()))?;
    let rank = usize::try_from(member.rank).map_err(|_| err("rank must be >= 0".into()))?;
    let kind = if op == "CollectiveAllReduce" {
        match step.attrs.get_str("reduce_op").unwrap_or("SUM") {
            "SUM" | "Add" => Kind::AllReduce(ReduceOp::Sum),
            "MEAN" => Kind::AllReduce(ReduceOp::Mean),
            other => return Err(err(format!("reduce_op `{other}`: only SUM and MEAN are supported"))),
        }
    } else {
        Kind::Broadcast {
            source: usize::try_from(int("source", Some(0))?).map_err(|_| err("source must be >= 0".into()))?,
        }
    };
    let call = Call { group, instance, group_size, rank, kind };
    let waiter = Waiter { timeout: shared.mesh.config.timeout, cancelled: &shared.cancelled };
    // bf16 / f16 / i8 / u8 values are reduced in f32 / i32 and rounded back once.
    let (inputs, widened) = match kernels::dtypes::widen(op, &inputs) {
        Ok(Some((wide, how))) => (wide, Some(how)),
        Ok(None) => (inputs, None),
        Err(e) => return Err(node_error(run, step, e)),
    };
    let outputs = shared.collectives.run(&call, inputs, &waiter).map_err(|e| match e {
        CollectiveError::Cancelled => Stop::Cancelled,
        CollectiveError::Mismatch(message) => Stop::Failed(ExecError::Collective {
            graph: run.instance.name.clone(),
            node: step.name.to_string(),
            group: group.to_string(),
            instance,
            message,
            span: step.span,
        }),
        CollectiveError::Timeout => Stop::Failed(ExecError::Timeout {
            graph: run.instance.name.clone(),
            device: run.instance.device.to_string(),
            node: step.name.to_string(),
            op: op.to_string(),
            what: format!("the other members of collective group `{group}` instance {instance} ({group_size} members)"),
            waited: shared.mesh.config.timeout,
            span: step.span,
        }),
    })?;
    match widened {
        Some(how) => kernels::dtypes::narrow(op, &step.attrs, &how, outputs).map_err(|e| node_error(run, step, e)),
        None => Ok(outputs),
    }
}

/// The variable a `VarHandleOp` names when `instance` runs it: in the
/// store of the node's device (else the instance's), under `shared_name`
/// (else the node's name); in an SPMD program a `mirrored` handle names
/// the running replica's copy.
fn variable_handle(program: &Program, instance: &Instance, step: &Step) -> ResourceHandle {
    let shared = match step.attrs.get_str("shared_name") {
        Some(s) if !s.is_empty() => s,
        _ => &step.name,
    };
    let name: Arc<str> = match instance.replica {
        Some(r) if program.spmd && step.attrs.get_bool(spmd::MIRRORED) == Some(true) => {
            spmd::mirrored_name(shared, r).into()
        }
        _ => Arc::from(shared),
    };
    let device = step.device.clone().unwrap_or_else(|| instance.device.clone());
    ResourceHandle::new(device, name)
}

/// The copies a `MirroredVarHandleOp` with `programs` names: each replica's
/// copy in each listed program, replica 0's first, each (device, name) once.
/// A variable copy: (device, name in its store).
type Copy = (Arc<str>, Arc<str>);

fn mirror_copies(mesh: &Mesh, step: &Step) -> Result<Vec<Copy>, String> {
    let names: Vec<&str> = step
        .attrs
        .get("programs")
        .and_then(|v| v.as_list())
        .unwrap_or_default()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    let shared = step.attrs.get_str("shared_name").unwrap_or(&step.name);
    let mut listed = Vec::with_capacity(names.len());
    for name in names {
        let program = mesh.programs.iter().find(|p| p.name == name).ok_or_else(|| format!("no program `@{name}`"))?;
        listed.push(program);
    }
    let replicas = listed.iter().map(|p| p.instances.len()).max().unwrap_or(0);
    let mut copies: Vec<Copy> = Vec::new();
    for r in 0..replicas {
        for p in &listed {
            let Some(instance) = p.instances.get(r) else { continue };
            let name: Arc<str> = spmd::mirrored_name(shared, r as u32).into();
            let copy = (instance.device.clone(), name);
            if !copies.contains(&copy) {
                copies.push(copy);
            }
        }
    }
    Ok(copies)
}
