//! The device mesh: runs a lowered module, one worker thread per graph.
//!
//! Each graph of the module is a program for one device (graph attrs
//! `device`, `role`, `replica`, `logical_core`). A step runs every program
//! on its own thread:
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
//! Variables live in per-device stores that persist across steps. A
//! `VarHandleOp` names a variable in the store of its node's device, or of
//! its graph's device when the node has none; the key is `shared_name`, or
//! the node name when that is empty. A `MirroredVarHandleOp` names every
//! copy of a mirrored variable (`devices`, `shared_names`): reads use the
//! first (the primary), assignments write them all. Feeding a tensor replaces the node
//! that produces it: a fed node does not run.

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
use crate::syntax::Span;

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

/// One node of a program, with inputs resolved to node indices.
struct Step {
    name: Arc<str>,
    op: Arc<str>,
    attrs: AttrMap,
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
    device: Arc<str>,
    replica: Option<i64>,
    mode: Mode,
    steps: Vec<Step>,
    by_name: HashMap<Arc<str>, usize>,
}

/// The variable stores: device -> name -> value.
type Stores = HashMap<Arc<str>, HashMap<String, Tensor>>;

/// A simulated device mesh running a lowered module.
pub struct Mesh {
    programs: Vec<Program>,
    channels: Vec<String>,
    stores: Mutex<Stores>,
    config: MeshConfig,
    /// All-reduce output buffers, reused from step to step.
    buffers: Arc<BufferPool>,
}

impl std::fmt::Debug for Mesh {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mesh")
            .field("programs", &self.programs.iter().map(|p| p.name.as_str()).collect::<Vec<_>>())
            .field("config", &self.config)
            .finish()
    }
}

/// The state one step shares between its workers.
struct StepShared<'m> {
    mesh: &'m Mesh,
    cancelled: AtomicBool,
    error: Mutex<Option<ExecError>>,
    senders: HashMap<&'m str, Sender<Tensor>>,
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
    pub fn new(module: &Module, config: MeshConfig) -> Result<Mesh, ExecError> {
        kernels::check_kernels(module)?;
        let programs = module.graphs.iter().map(build_program).collect::<Result<Vec<_>, _>>()?;
        let channels = check_channels(&programs)?;
        Ok(Mesh { programs, channels, stores: Mutex::new(HashMap::new()), config, buffers: Arc::default() })
    }

    /// The names of the graphs (programs), in module order.
    pub fn graphs(&self) -> impl Iterator<Item = &str> {
        self.programs.iter().map(|p| p.name.as_str())
    }

    /// The device of graph `graph`.
    pub fn device(&self, graph: &str) -> Option<&str> {
        self.program(graph).ok().map(|p| &*p.device)
    }

    fn program(&self, graph: &str) -> Result<&Program, ExecError> {
        self.programs
            .iter()
            .find(|p| p.name == graph)
            .ok_or_else(|| ExecError::UnknownGraph { graph: graph.to_string() })
    }

    fn stores(&self) -> std::sync::MutexGuard<'_, Stores> {
        self.stores.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sets variable `name` in the store of `graph`'s device.
    pub fn set_variable(&self, graph: &str, name: &str, value: Tensor) -> Result<(), ExecError> {
        let device = self.program(graph)?.device.clone();
        self.set_device_variable(&device, name, value);
        Ok(())
    }

    /// The value of variable `name` in the store of `graph`'s device.
    pub fn variable(&self, graph: &str, name: &str) -> Option<Tensor> {
        let device = self.program(graph).ok()?.device.clone();
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
        let Ok(p) = self.program(graph) else { return Vec::new() };
        let mut names: Vec<String> =
            self.stores().get(&p.device).map(|s| s.keys().cloned().collect()).unwrap_or_default();
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
        let mut fed: Vec<HashMap<usize, Vec<(u32, Tensor)>>> = vec![HashMap::new(); self.programs.len()];
        for (key, value) in feeds.iter() {
            let (pi, node, output) = self.resolve(key, false)?;
            fed[pi].entry(node).or_default().push((output.unwrap_or(0), value.clone()));
        }
        let mut wanted: Vec<(usize, usize, Option<u32>)> = Vec::new();
        for f in fetches {
            let (pi, node, output) = self.resolve(f, true)?;
            wanted.push((pi, node, output));
        }
        let mut roots: Vec<Vec<usize>> = vec![Vec::new(); self.programs.len()];
        for &(pi, node, _) in &wanted {
            roots[pi].push(node);
        }
        for t in targets {
            let (pi, node, _) = self.resolve(t, true)?;
            roots[pi].push(node);
        }

        let mut receivers: HashMap<&str, Receiver<Tensor>> = HashMap::new();
        let mut senders = HashMap::new();
        for key in &self.channels {
            let (s, r) = crossbeam_channel::unbounded();
            senders.insert(key.as_str(), s);
            receivers.insert(key.as_str(), r);
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
                .programs
                .iter()
                .enumerate()
                .map(|(pi, program)| {
                    let active = active_set(program, &roots[pi], &fed[pi]);
                    let fed = std::mem::take(&mut fed[pi]);
                    let receivers = &receivers;
                    let shared = &shared;
                    let worker = move || match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        run_program(program, active, fed, receivers, shared)
                    })) {
                        Ok(Ok(values)) => Some(values),
                        Ok(Err(Stop::Failed(e))) => {
                            shared.fail(e);
                            None
                        }
                        Ok(Err(Stop::Cancelled)) => None,
                        Err(payload) => {
                            shared.fail(ExecError::Panic {
                                graph: program.name.clone(),
                                device: program.device.to_string(),
                                node: String::new(),
                                op: String::new(),
                                message: panic_message(payload.as_ref()),
                                span: Span::DETACHED,
                            });
                            None
                        }
                    };
                    std::thread::Builder::new().name(program.name.clone()).spawn_scoped(scope, worker)
                })
                .collect();
            handles
                .into_iter()
                .map(|h| match h {
                    Ok(h) => h.join().unwrap_or(None),
                    Err(e) => {
                        shared.fail(ExecError::Internal { message: format!("cannot start a worker thread: {e}") });
                        None
                    }
                })
                .collect()
        });
        if let Some(e) = shared.error.lock().unwrap_or_else(|p| p.into_inner()).take() {
            return Err(e);
        }
        wanted
            .iter()
            .zip(fetches)
            .map(|(&(pi, node, output), f)| {
                let output = output.unwrap_or(0);
                results[pi]
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

    /// Resolves `x`, `x:k` or (if `allow_target`) `^x` to (program, node, output).
    fn resolve(&self, key: &Fetch, allow_target: bool) -> Result<(usize, usize, Option<u32>), ExecError> {
        let pi = self
            .programs
            .iter()
            .position(|p| p.name == key.graph)
            .ok_or_else(|| ExecError::UnknownGraph { graph: key.graph.clone() })?;
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
        let node = *self.programs[pi].by_name.get(name).ok_or_else(|| unknown("no node has this name"))?;
        Ok((pi, node, output))
    }
}

fn build_program(graph: &crate::ir::Graph) -> Result<Program, ExecError> {
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
        steps.push(Step {
            name: node.name.clone(),
            op: node.op.clone(),
            attrs: node.attrs.clone(),
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
    let device: Arc<str> = graph.attrs.get_str("device").map_or_else(|| Arc::from(graph.name.as_str()), Arc::from);
    let mode = match graph.attrs.get_str("role") {
        Some("replica") | Some("host") => Mode::Whole,
        _ => Mode::Needed,
    };
    Ok(Program { name: graph.name.clone(), device, replica: graph.attrs.get_int("replica"), mode, steps, by_name })
}

/// Checks every `_Recv` has exactly one `_Send`; returns the channel keys.
fn check_channels(programs: &[Program]) -> Result<Vec<String>, ExecError> {
    let mut sends: HashMap<String, (usize, &Step)> = HashMap::new();
    let channel = |p: &Program, s: &Step| -> Result<String, ExecError> {
        s.attrs.get_str("channel").map(str::to_string).ok_or_else(|| ExecError::Channel {
            graph: p.name.clone(),
            channel: String::new(),
            problem: format!("is missing: `%{}` has no string attribute `channel`", s.name),
            span: s.span,
        })
    };
    for (pi, p) in programs.iter().enumerate() {
        for s in p.steps.iter().filter(|s| &*s.op == "_Send") {
            let key = channel(p, s)?;
            if sends.insert(key.clone(), (pi, s)).is_some() {
                return Err(ExecError::Channel {
                    graph: p.name.clone(),
                    channel: key,
                    problem: "is written by two `_Send` ops".into(),
                    span: s.span,
                });
            }
        }
    }
    let mut recvs: HashMap<String, ()> = HashMap::new();
    for p in programs {
        for s in p.steps.iter().filter(|s| &*s.op == "_Recv") {
            let key = channel(p, s)?;
            if !sends.contains_key(&key) {
                return Err(ExecError::Channel {
                    graph: p.name.clone(),
                    channel: key,
                    problem: "has no `_Send` anywhere in the module".into(),
                    span: s.span,
                });
            }
            if recvs.insert(key.clone(), ()).is_some() {
                return Err(ExecError::Channel {
                    graph: p.name.clone(),
                    channel: key,
                    problem: "is read by two `_Recv` ops".into(),
                    span: s.span,
                });
            }
        }
    }
    let mut keys: Vec<String> = sends.into_keys().collect();
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

/// A `_Recv` waiting for its value.
struct PendingRecv<'a> {
    step: usize,
    channel: &'a Receiver<Tensor>,
    since: Instant,
}

fn run_program(
    program: &Program,
    active: Vec<bool>,
    mut fed: HashMap<usize, Vec<(u32, Tensor)>>,
    receivers: &HashMap<&str, Receiver<Tensor>>,
    shared: &StepShared<'_>,
) -> Result<Vec<Option<Vec<Tensor>>>, Stop> {
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
            make_ready(program, i, receivers, &mut compute, &mut collectives, &mut recvs)?;
        }
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
                None => run_node(program, i, &values, shared),
            };
            Some((i, outputs?))
        } else if let Some(got) = poll_recvs(&mut recvs) {
            Some(got)
        } else if collectives.first().is_some_and(|c| Some(c) == collective_order.get(next_collective)) {
            let (_, _, i) = collectives.pop_first().expect("checked non-empty");
            next_collective += 1;
            Some((i, run_node(program, i, &values, shared)?))
        } else if !recvs.is_empty() {
            wait_recvs(program, &mut recvs, shared)?
        } else {
            return Err(Stop::Failed(ExecError::Internal {
                message: format!("program `@{}` has no runnable node but {} of {total} ran", program.name, done),
            }));
        };
        let Some((i, outputs)) = next else { continue };
        values[i] = Some(outputs);
        done += 1;
        for &s in &program.steps[i].succs {
            if !active[s] || is_fed[s] {
                continue;
            }
            remaining[s] -= 1;
            if remaining[s] == 0 {
                make_ready(program, s, receivers, &mut compute, &mut collectives, &mut recvs)?;
            }
        }
    }
    Ok(values)
}

/// Queues node `i`, whose inputs are ready, by its class.
fn make_ready<'r>(
    program: &Program,
    i: usize,
    receivers: &'r HashMap<&str, Receiver<Tensor>>,
    compute: &mut BTreeSet<(u64, usize)>,
    collectives: &mut BTreeSet<(i64, u64, usize)>,
    recvs: &mut Vec<PendingRecv<'r>>,
) -> Result<(), Stop> {
    let s = &program.steps[i];
    match s.class {
        Class::Compute => {
            compute.insert((s.seq, i));
        }
        Class::Collective => {
            collectives.insert((s.attrs.get_int("instance").unwrap_or(0), s.seq, i));
        }
        Class::Recv => {
            let key = s.attrs.get_str("channel").unwrap_or_default();
            let channel = receivers.get(key).ok_or_else(|| {
                Stop::Failed(ExecError::Internal { message: format!("no receiver for channel `{key}`") })
            })?;
            recvs.push(PendingRecv { step: i, channel, since: Instant::now() });
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

/// Takes any `_Recv` whose value has arrived.
fn poll_recvs(recvs: &mut Vec<PendingRecv<'_>>) -> Option<(usize, Vec<Tensor>)> {
    let pos = recvs.iter().position(|r| !r.channel.is_empty())?;
    let r = recvs.remove(pos);
    r.channel.try_recv().ok().map(|t| (r.step, vec![t]))
}

/// Blocks until one pending `_Recv` gets its value, the step is cancelled,
/// or the oldest one times out.
fn wait_recvs(
    program: &Program,
    recvs: &mut Vec<PendingRecv<'_>>,
    shared: &StepShared<'_>,
) -> Result<Option<(usize, Vec<Tensor>)>, Stop> {
    let timeout = shared.mesh.config.timeout;
    let oldest = recvs.iter().map(|r| r.since).min().unwrap_or_else(Instant::now);
    let now = Instant::now();
    if now >= oldest + timeout {
        let r = recvs.iter().find(|r| r.since == oldest).unwrap_or(&recvs[0]);
        let s = &program.steps[r.step];
        return Err(Stop::Failed(ExecError::Timeout {
            graph: program.name.clone(),
            device: program.device.to_string(),
            node: s.name.to_string(),
            op: s.op.to_string(),
            what: format!("channel `{}`", s.attrs.get_str("channel").unwrap_or_default()),
            waited: timeout,
            span: s.span,
        }));
    }
    let mut select = Select::new();
    for r in recvs.iter() {
        select.recv(r.channel);
    }
    let limit = POLL.min(oldest + timeout - now);
    match select.select_timeout(limit) {
        Ok(op) => {
            let index = op.index();
            let r = recvs.remove(index);
            match op.recv(r.channel) {
                Ok(t) => Ok(Some((r.step, vec![t]))),
                Err(_) => Err(Stop::Cancelled),
            }
        }
        Err(_) => Ok(None),
    }
}

fn node_error(program: &Program, step: &Step, source: KernelError) -> Stop {
    Stop::Failed(ExecError::Kernel {
        graph: program.name.clone(),
        device: program.device.to_string(),
        node: step.name.to_string(),
        op: step.op.to_string(),
        source,
        span: step.span,
    })
}

/// Runs node `i` with its inputs from `values`; panics become errors.
fn run_node(
    program: &Program,
    i: usize,
    values: &[Option<Vec<Tensor>>],
    shared: &StepShared<'_>,
) -> Result<Vec<Tensor>, Stop> {
    let step = &program.steps[i];
    let inputs: Vec<Tensor> = step
        .inputs
        .iter()
        .map(|&(src, output)| {
            values[src].as_ref().and_then(|outs| outs.get(output as usize)).cloned().ok_or_else(|| {
                let producer = &program.steps[src];
                node_error(
                    program,
                    step,
                    KernelError::invalid(
                        &step.op,
                        format!("input `%{}:{output}` has no value (its op has no such output)", producer.name),
                    ),
                )
            })
        })
        .collect::<Result<_, _>>()?;
    let result =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| device_kernel(program, step, inputs, shared)));
    match result {
        Ok(r) => r,
        Err(payload) => Err(Stop::Failed(ExecError::Panic {
            graph: program.name.clone(),
            device: program.device.to_string(),
            node: step.name.to_string(),
            op: step.op.to_string(),
            message: panic_message(payload.as_ref()),
            span: step.span,
        })),
    }
}

/// The kernels that need the device: variables, channels, collectives.
fn device_kernel(
    program: &Program,
    step: &Step,
    inputs: Vec<Tensor>,
    shared: &StepShared<'_>,
) -> Result<Vec<Tensor>, Stop> {
    let op = &*step.op;
    let err = |e: KernelError| node_error(program, step, e);
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
        "ReplicaId" => match program.replica {
            Some(r) => Ok(vec![Tensor::scalar(
                i32::try_from(r).map_err(|_| err(KernelError::invalid(op, "replica id too large")))?,
            )]),
            None => Err(err(KernelError::invalid(op, format!("graph `@{}` has no `replica` attribute", program.name)))),
        },
        "TPUReplicatedInput" => {
            let index = if inputs.len() > 1 { program.replica.unwrap_or(0) } else { 0 };
            let picked = usize::try_from(index).ok().and_then(|i| inputs.get(i)).cloned();
            picked.map(|t| vec![t]).ok_or_else(|| {
                err(KernelError::invalid(op, format!("replica {index} has no operand among {} inputs", inputs.len())))
            })
        }
        "VarHandleOp" => {
            let name = match step.attrs.get_str("shared_name") {
                Some(s) if !s.is_empty() => Arc::from(s),
                _ => step.name.clone(),
            };
            let device = step.device.clone().unwrap_or_else(|| program.device.clone());
            Ok(vec![Tensor::Resource(ResourceHandle::new(device, name))])
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
            let key = step.attrs.get_str("channel").unwrap_or_default();
            let value = kernels::arg(op, &inputs, 0).map_err(err)?.clone();
            let sender = shared.senders.get(key).ok_or_else(|| {
                Stop::Failed(ExecError::Internal { message: format!("no sender for channel `{key}`") })
            })?;
            // The receiver lives until the step ends, so this cannot fail.
            sender.send(value).map_err(|_| Stop::Cancelled)?;
            Ok(Vec::new())
        }
        "CollectiveAllReduce" | "CollectiveBroadcast" => collective(program, step, inputs, shared),
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

fn collective(
    program: &Program,
    step: &Step,
    inputs: Vec<Tensor>,
    shared: &StepShared<'_>,
) -> Result<Vec<Tensor>, Stop> {
    let op = &*step.op;
    let err = |m: String| node_error(program, step, KernelError::invalid(op, m));
    let int = |key: &str, default: Option<i64>| -> Result<i64, Stop> {
        step.attrs.get_int(key).or(default).ok_or_else(|| err(format!("missing int attribute `{key}`")))
    };
    let group = step.attrs.get_str("group").ok_or_else(|| err("missing string attribute `group`".into()))?;
    let instance = int("instance", Some(0))?;
    let group_size = usize::try_from(int("group_size", None)?).map_err(|_| err("group_size must be >= 1".into()))?;
    let rank = usize::try_from(int("rank", None)?).map_err(|_| err("rank must be >= 0".into()))?;
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
        Err(e) => return Err(node_error(program, step, e)),
    };
    let outputs = shared.collectives.run(&call, inputs, &waiter).map_err(|e| match e {
        CollectiveError::Cancelled => Stop::Cancelled,
        CollectiveError::Mismatch(message) => Stop::Failed(ExecError::Collective {
            graph: program.name.clone(),
            node: step.name.to_string(),
            group: group.to_string(),
            instance,
            message,
            span: step.span,
        }),
        CollectiveError::Timeout => Stop::Failed(ExecError::Timeout {
            graph: program.name.clone(),
            device: program.device.to_string(),
            node: step.name.to_string(),
            op: op.to_string(),
            what: format!("the other members of collective group `{group}` instance {instance} ({group_size} members)"),
            waited: shared.mesh.config.timeout,
            span: step.span,
        }),
    })?;
    match widened {
        Some(how) => kernels::dtypes::narrow(op, &step.attrs, &how, outputs).map_err(|e| node_error(program, step, e)),
        None => Ok(outputs),
    }
}
