//! Partitioning a rewritten graph into SPMD programs.
//!
//! Every node goes to exactly one *part*: the host driver program, the
//! variable-initialisation program, a cluster's program for one logical
//! core, or a cluster's program for one outside-compilation cluster. A
//! cluster's programs are built once, whatever the replica count, and run
//! once per replica (see [`super::spmd`] for what differs between replicas
//! and how). Then every edge is wired: within a program it stays an edge;
//! across programs it becomes a matched `_Send`/`_Recv` pair with a channel
//! key that names both ends.
//!
//! Rewrites on the way:
//! - `TPUReplicatedInput` disappears: the cluster receives it as a
//!   parameter, `<input>/_recv`; the host sends replica `r` its operand `r`
//!   (`replica = r`).
//! - `TPUReplicatedOutput` becomes one `_Recv` per replica on the host,
//!   named `<output>/replica_<r>`; uses of `<output>:r` read it. One marked
//!   with `reduce_op` (SUM or MEAN) is all-reduced over the replicas first
//!   (`<output>/reduce`), so every replica sends the reduced value.
//! - A variable used in a cluster is mirrored: the cluster's programs get a
//!   `VarHandleOp` with `mirrored = true`, which names the running
//!   replica's own copy. Outside the cluster the host program reaches the
//!   variable through a `MirroredVarHandleOp` `<var>/mirrored` naming the
//!   programs that hold copies: a read gives the primary (replica 0) value
//!   and an assignment writes every copy.
//! - `Update` (a mirrored-variable update, `fn` = `Assign`, `AssignAdd` or
//!   `AssignSub`) becomes `<fn>VariableOp`: in a replica it updates the
//!   local copy, on the host every copy. `UpdateNonSlot` becomes
//!   `<fn>VariableOp` placed on the host device (task 0's CPU), run once.
//! - `CrossReplicaSum` becomes `CollectiveAllReduce` over its replica
//!   groups, `AllGather` a `CollectiveAllGather` over them; `AllReduce` (SUM or MEAN; a fused one with its
//!   `group_assignment`) one collective over all its operands; `Broadcast` a
//!   `CollectiveBroadcast` from replica 0; TensorFlow's `XlaAllReduce`,
//!   `XlaReduceScatter` and `CollectiveReduceV2` a `CollectiveAllReduce`
//!   where their groups and reduction are constants it has (see `nodes`);
//!   `ReplicaId` and `XlaReplicaId` stay, and give the running replica's id.
//! - The host waits for a cluster op (a control edge from the host) with
//!   one `_Recv` of a token from every replica (`all_replicas = N`).
//! - Metadata ops are dropped; the TPU tags are removed from program ops.
//!
//! How: placing nodes, and wiring the edges that stay inside one program,
//! run in parallel over the programs; edges between programs (sends and
//! recvs) are wired after that, serially, in the text order, so names and
//! keys are deterministic.
//!
//! Cost: linear in nodes + edges of the source graph, plus the host's ends
//! of per-replica transfers (one per replicated input operand and output
//! shard, which the source graph already has per replica).

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::sync::Arc;

use petgraph::stable_graph::NodeIndex;
use rayon::prelude::*;

use super::error::LowerError;
use super::spmd::{self, ALL_REPLICAS, MIRRORED, NUM_REPLICAS, REPLICA};
use super::topology::DeviceAssignment;
use crate::ir::{AttrMap, AttrValue, DType, Graph, Input, Module, Node, NodeId, TensorData, TensorLit};
use crate::passes::form_clusters::ReplicateCluster;

mod nodes;
mod parts;
mod wire;

const TPU_REPLICATE: &str = "_tpu_replicate";
const OUTSIDE_COMPILATION: &str = "_xla_outside_compilation";

/// Where a node of the source graph goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Part {
    Host,
    Init,
    /// Both the host and the init program need it (a handle or constant).
    Shared,
    Device {
        cluster: u32,
        core: u32,
    },
    Oc {
        cluster: u32,
        oc: u32,
    },
    FanIn {
        cluster: u32,
    },
    FanOut {
        cluster: u32,
    },
    Drop,
}

/// A program: the host, init, or one of a cluster's SPMD programs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Program {
    Host,
    Init,
    Device { cluster: u32, core: u32 },
    Oc { cluster: u32, oc: u32 },
}

impl Program {
    fn cluster(self) -> Option<u32> {
        match self {
            Program::Device { cluster, .. } | Program::Oc { cluster, .. } => Some(cluster),
            Program::Host | Program::Init => None,
        }
    }

    /// Whether the program runs once per replica.
    fn is_replicated(self) -> bool {
        self.cluster().is_some()
    }
}

/// The port of a channel key: a data output, or a control token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Port {
    Data(u32),
    Control,
}

/// Which replicas a host-side channel end talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Peer {
    /// The running replica (an SPMD program's own end), or none (host to init).
    Implied,
    /// One replica.
    Replica(u32),
    /// Every replica `0..N`.
    All(u32),
}

/// Settings of the partitioner.
pub(crate) struct PartitionInput<'a> {
    /// The rewritten graph.
    pub graph: &'a Graph,
    /// Its replicate clusters.
    pub clusters: &'a [ReplicateCluster],
    /// Where each logical core of each replica runs.
    pub assignment: &'a DeviceAssignment,
    /// How many steps run on the devices before returning to the host.
    pub steps_per_run: u32,
    /// Where to report progress (placing, wiring and cloning nodes).
    pub progress: &'a dyn crate::progress::Progress,
}

/// A built program moved out of the builder to be worked on by itself.
struct Placement {
    pi: usize,
    graph: Graph,
    /// Source node index -> node index in `graph` (see [`Builder::placed`]).
    placed: Slots,
    /// Nodes with an operand from another program, left for the serial pass.
    deferred: Vec<NodeId>,
}

/// Where the source nodes a program holds were placed in it: a slot per
/// source node for a program that holds many, a map for one that holds
/// few. Many small programs (one per outside-compilation cluster) must not
/// cost a slot per source node each: that is quadratic.
#[derive(Debug, Default)]
enum Slots {
    #[default]
    None,
    Sparse(HashMap<u32, u32>),
    Dense(Vec<u32>),
}

impl Slots {
    /// Slots for `members` of a source graph of `bound` nodes.
    fn for_members(members: usize, bound: usize) -> Slots {
        if members.saturating_mul(16) >= bound {
            Slots::Dense(vec![UNPLACED; bound])
        } else {
            Slots::Sparse(HashMap::with_capacity_and_hasher(members, Default::default()))
        }
    }

    fn get(&self, source: usize) -> u32 {
        match self {
            Slots::None => UNPLACED,
            Slots::Sparse(map) => map.get(&(source as u32)).copied().unwrap_or(UNPLACED),
            Slots::Dense(slots) => slots.get(source).copied().unwrap_or(UNPLACED),
        }
    }

    fn set(&mut self, source: usize, node: u32) {
        match self {
            Slots::None => {
                let mut map = HashMap::default();
                map.insert(source as u32, node);
                *self = Slots::Sparse(map);
            }
            Slots::Sparse(map) => {
                map.insert(source as u32, node);
            }
            Slots::Dense(slots) => slots[source] = node,
        }
    }
}

/// No node placed here (a slot of [`Builder::placed`]).
const UNPLACED: u32 = u32::MAX;

struct Builder<'a> {
    src: &'a Graph,
    clusters: &'a [ReplicateCluster],
    assignment: &'a DeviceAssignment,
    parts: Vec<Part>,
    oc_names: Vec<Vec<String>>,
    /// Every program in module order.
    programs: Vec<(Program, Graph)>,
    index: HashMap<Program, usize>,
    /// Source node index -> node index, per program.
    placed: Vec<Slots>,
    /// Per program: the source nodes it takes, in the text order.
    members: Vec<Vec<NodeId>>,
    mirrored: Vec<bool>,
    /// The receiving end of each transfer made so far, by (sending
    /// program, receiving program, producer, port), so that every value
    /// crosses between two programs once. Keyed by structure, not by the
    /// channel's spelling, so a lookup formats nothing.
    channels: HashMap<(usize, usize, NodeId, Port), NodeId>,
    /// The host's recv of a per-replica op's control token from every
    /// replica, by (SPMD program, host-side program, producer).
    control_to_host: HashMap<(usize, usize, NodeId), NodeId>,
    /// The cluster program's recv of each replicated input, by (fan-in, program).
    fan_in_recvs: HashMap<(NodeId, usize), NodeId>,
    /// The host's recv of each replica's result, by output, in replica order.
    output_recvs: HashMap<NodeId, Vec<NodeId>>,
    errors: Vec<LowerError>,
    collective_instance: HashMap<(u32, NodeId), i64>,
    /// The replica groups of each collective that names them (a
    /// `group_assignment` operand or attribute), read once, as the
    /// collective's `group_assignment` attribute. Equal assignments share
    /// one tensor.
    replica_groups: HashMap<NodeId, AttrValue>,
    /// Strings the host's output recvs share (their op and attribute keys),
    /// so that a quarter of a million recvs allocate none of them.
    host_recv: SharedStrings,
}

/// Host recvs of replicated outputs made but not yet added, with their outputs.
#[derive(Default)]
struct PendingRecvs {
    outputs: Vec<NodeId>,
    nodes: Vec<Node>,
}

/// Strings shared by many nodes of one program.
struct SharedStrings {
    op: Arc<str>,
    channel: Arc<str>,
    dtype: Arc<str>,
    replica: Arc<str>,
}

impl SharedStrings {
    fn recv() -> SharedStrings {
        SharedStrings { op: "_Recv".into(), channel: "channel".into(), dtype: "dtype".into(), replica: REPLICA.into() }
    }
}

fn part_index(id: NodeId) -> usize {
    id.0.index()
}

/// Partitions `input.graph` into programs.
pub(crate) fn partition(input: &PartitionInput<'_>) -> Partitioned {
    let src = input.graph;
    let bound = petgraph::visit::NodeIndexable::node_bound(src.petgraph());
    let mut b = Builder {
        src,
        clusters: input.clusters,
        assignment: input.assignment,
        parts: vec![Part::Drop; bound],
        oc_names: Vec::new(),
        programs: Vec::new(),
        index: HashMap::default(),
        placed: Vec::new(),
        members: Vec::new(),
        mirrored: vec![false; bound],
        channels: HashMap::default(),
        control_to_host: HashMap::default(),
        fan_in_recvs: HashMap::default(),
        output_recvs: HashMap::default(),
        errors: Vec::new(),
        collective_instance: HashMap::default(),
        replica_groups: HashMap::default(),
        host_recv: SharedStrings::recv(),
    };
    let mut clock = PhaseClock::start();
    let order = src.nodes_in_order();
    let progress = input.progress;
    progress.phase("lowering", 2 * order.len() as u64);
    b.assign_parts(&order);
    clock.lap("parts");
    b.create_programs();
    b.number_collectives(&topological_text_order(src, &order));
    clock.lap("collectives");
    b.place_nodes(&order);
    clock.lap("place");
    progress.advance(order.len() as u64);
    b.wire(&order);
    clock.lap("wire");
    progress.advance(order.len() as u64);
    b.list_mirrors();
    clock.lap("mirrors");
    let Builder { programs, errors, .. } = b;
    let mut graphs: Vec<Graph> = programs.into_iter().map(|(_, g)| g).collect();
    if let Some(host) = graphs.first_mut() {
        host.attrs.insert("steps_per_run", AttrValue::Int(i64::from(input.steps_per_run.max(1))));
        for (key, value) in spmd::assignment_attrs(input.assignment) {
            host.attrs.insert(key, value);
        }
    }
    Partitioned { module: Module { header: Vec::new(), graphs }, errors, phases: clock.phases }
}

/// The result of [`partition`].
pub(crate) struct Partitioned {
    /// The host program and the device programs.
    pub module: Module,
    /// The problems found; the module is unusable when there is one.
    pub errors: Vec<LowerError>,
    /// The wall time of each phase, in order.
    pub phases: Vec<LowerPhase>,
}

/// One phase of the partitioner and its wall time (`--time-passes` prints them).
#[derive(Clone, Debug)]
pub struct LowerPhase {
    /// The phase's name, as `--time-passes` prints it.
    pub name: &'static str,
    /// How long the phase took.
    pub wall: std::time::Duration,
}

/// Records the wall time of consecutive phases.
struct PhaseClock {
    last: std::time::Instant,
    phases: Vec<LowerPhase>,
}

impl PhaseClock {
    fn start() -> PhaseClock {
        PhaseClock { last: std::time::Instant::now(), phases: Vec::new() }
    }

    fn lap(&mut self, name: &'static str) {
        let now = std::time::Instant::now();
        self.phases.push(LowerPhase { name, wall: now - self.last });
        self.last = now;
    }
}

/// Parses `TPU_REPLICATED_CORE:k` out of a device string.
pub fn replicated_core(device: &str) -> Option<u32> {
    let i = device.find("TPU_REPLICATED_CORE")?;
    let rest = &device[i + "TPU_REPLICATED_CORE".len()..];
    rest.strip_prefix(':').and_then(|r| r.parse().ok()).or(Some(0))
}

impl Builder<'_> {
    fn cluster_of_name(&self, name: &str) -> Option<u32> {
        self.clusters.iter().position(|c| c.name == name).map(|i| i as u32)
    }

    fn num_replicas(&self, cluster: u32) -> u32 {
        self.clusters[cluster as usize].num_replicas
    }

    /// The name and graph attributes of a program.
    fn program_header(&self, program: Program) -> (String, AttrMap) {
        let a = self.assignment;
        let mut attrs = AttrMap::new();
        let name = match program {
            Program::Host => {
                attrs.insert("device", AttrValue::str(a.topology.host_device(0)));
                attrs.insert("role", AttrValue::str("main"));
                "host".to_string()
            }
            Program::Init => {
                attrs.insert("device", AttrValue::str(a.topology.host_device(0)));
                attrs.insert("role", AttrValue::str("init"));
                "init".to_string()
            }
            Program::Device { cluster, core } => {
                let cluster = &self.clusters[cluster as usize];
                attrs.insert("cluster", AttrValue::str(cluster.name.as_str()));
                attrs.insert("logical_core", AttrValue::Int(i64::from(core)));
                attrs.insert(NUM_REPLICAS, AttrValue::Int(i64::from(cluster.num_replicas)));
                attrs.insert("role", AttrValue::str("replica"));
                if core == 0 {
                    cluster.name.clone()
                } else {
                    format!("{}/core_{core}", cluster.name)
                }
            }
            Program::Oc { cluster: ci, oc } => {
                let cluster = &self.clusters[ci as usize];
                let oc = &self.oc_names[ci as usize][oc as usize];
                let core = cluster
                    .host_compute_core
                    .iter()
                    .find(|(name, _)| name == oc)
                    .map_or(0, |(_, core)| *core)
                    .min(cluster.num_cores_per_replica - 1);
                attrs.insert("cluster", AttrValue::str(cluster.name.as_str()));
                attrs.insert("logical_core", AttrValue::Int(i64::from(core)));
                attrs.insert(NUM_REPLICAS, AttrValue::Int(i64::from(cluster.num_replicas)));
                attrs.insert("outside_compilation", AttrValue::str(oc.as_str()));
                attrs.insert("role", AttrValue::str("host"));
                format!("{}/oc_{oc}", cluster.name)
            }
        };
        (name, attrs)
    }

    fn add_program(&mut self, program: Program) {
        let (name, attrs) = self.program_header(program);
        let mut g = Graph::new(name);
        g.attrs = attrs;
        self.index.insert(program, self.programs.len());
        self.programs.push((program, g));
        self.placed.push(Slots::None);
    }

    fn create_programs(&mut self) {
        self.add_program(Program::Host);
        if self.parts.iter().any(|p| matches!(p, Part::Init)) {
            self.add_program(Program::Init);
        }
        for ci in 0..self.clusters.len() as u32 {
            let mut cores: Vec<u32> = vec![0];
            for p in &self.parts {
                if let Part::Device { cluster, core } = p {
                    if *cluster == ci && !cores.contains(core) {
                        cores.push(*core);
                    }
                }
            }
            cores.sort_unstable();
            for &core in &cores {
                self.add_program(Program::Device { cluster: ci, core });
            }
            for oc in 0..self.oc_names[ci as usize].len() as u32 {
                self.add_program(Program::Oc { cluster: ci, oc });
            }
        }
    }

    /// The programs a part is built into: host and/or init, or its cluster program.
    fn programs_of(&self, part: Part) -> [Option<Program>; 2] {
        match part {
            Part::Host => [Some(Program::Host), None],
            Part::Init => [Some(Program::Init), None],
            Part::Shared => [Some(Program::Host), self.index.contains_key(&Program::Init).then_some(Program::Init)],
            Part::Device { cluster, core } => [Some(Program::Device { cluster, core }), None],
            Part::Oc { cluster, oc } => [Some(Program::Oc { cluster, oc }), None],
            Part::FanIn { .. } | Part::FanOut { .. } | Part::Drop => [None, None],
        }
    }

    fn placed(&self, pi: usize, id: NodeId) -> Option<NodeId> {
        let slot = self.placed[pi].get(part_index(id));
        (slot != UNPLACED).then(|| NodeId(NodeIndex::new(slot as usize)))
    }

    /// Numbers the collectives in text order (one instance per op, shared
    /// by all replicas), and reports reduce and update ops it cannot lower.
    fn number_collectives(&mut self, order: &[NodeId]) {
        let mut distinct_groups: HashMap<Vec<Vec<i64>>, Arc<TensorLit>> = HashMap::default();
        for &id in order {
            let node = self.src.node(id);
            if matches!(&*node.op, "Update" | "UpdateNonSlot") {
                let update = node.attrs.get_str("fn").unwrap_or_default();
                if !matches!(update, "Assign" | "AssignAdd" | "AssignSub") {
                    self.errors.push(LowerError::UpdateFn {
                        op: node.op.to_string(),
                        value: update.to_string(),
                        span: node.span,
                    });
                }
            }
            let (Part::Device { cluster, .. } | Part::Oc { cluster, .. }) = self.parts[part_index(id)] else {
                continue;
            };
            match &*node.op {
                "XlaAllReduce" | "XlaReduceScatter" | "CollectiveReduceV2"
                    if self.tf_collective(id, cluster).is_some() =>
                {
                    let next = self.collective_instance.len() as i64;
                    self.collective_instance.entry((cluster, id)).or_insert(next);
                    if let Some(groups) = self.read_replica_groups(id) {
                        let shared = distinct_groups.entry(groups).or_insert_with_key(|g| group_tensor(g));
                        self.replica_groups.insert(id, AttrValue::Tensor(Arc::clone(shared)));
                    }
                }
                "CrossReplicaSum" | "AllGather" | "AllReduce" | "Broadcast" => {
                    let next = self.collective_instance.len() as i64;
                    self.collective_instance.entry((cluster, id)).or_insert(next);
                    if let Some(groups) = self.read_replica_groups(id) {
                        let shared = distinct_groups.entry(groups).or_insert_with_key(|g| group_tensor(g));
                        self.replica_groups.insert(id, AttrValue::Tensor(Arc::clone(shared)));
                    }
                }
                _ => {}
            }
            if &*node.op == "AllReduce" {
                let reduce = node.attrs.get_str("reduce_op").unwrap_or("SUM");
                if reduce != "SUM" && reduce != "MEAN" {
                    self.errors.push(LowerError::ReduceOp { op: reduce.to_string(), span: node.span });
                }
            }
        }
    }

    fn place_nodes(&mut self, order: &[NodeId]) {
        let src = self.src;
        // Which nodes each built program takes, in the text order, and
        // room for them (and their edges) reserved up front: growing
        // vectors of a million nodes by doubling copies them and faults
        // their pages in again. Sends and recvs come on top; they grow.
        let mut members: Vec<Vec<NodeId>> = vec![Vec::new(); self.programs.len()];
        let mut edges = vec![0usize; self.programs.len()];
        for &id in order {
            for program in self.programs_of(self.parts[part_index(id)]).into_iter().flatten() {
                let pi = self.index[&program];
                members[pi].push(id);
                edges[pi] += src.petgraph().edges_directed(id.0, petgraph::Direction::Incoming).count();
            }
        }
        for (pi, ids) in members.iter().enumerate() {
            let nodes = ids.len();
            if nodes > 0 {
                self.programs[pi].1.reserve(nodes + nodes / 8, edges[pi] + edges[pi] / 8);
            }
            self.placed[pi] = Slots::for_members(nodes, self.parts.len());
        }
        // Lowering a node (copying its attributes without the TPU tags,
        // lowering a collective) is most of the work, and independent per
        // node: all threads share it, one program after another, so a big
        // template does not leave the other threads idle.
        let lowered: Vec<Vec<Node>> = members
            .iter()
            .enumerate()
            .map(|(pi, ids)| {
                let program = self.programs[pi].0;
                ids.par_iter().map(|&id| self.lowered_node(id, program)).collect()
            })
            .collect();
        // The per-program work below is one closure shared by the threads;
        // each program takes its own nodes out of its slot, once.
        let lowered: Vec<std::sync::Mutex<Vec<Node>>> = lowered.into_iter().map(std::sync::Mutex::new).collect();
        // Then each program adds its nodes on its own thread: that touches
        // only its graph and slots.
        self.for_each_built_program(|_, w| {
            let nodes = match lowered[w.pi].lock() {
                Ok(mut nodes) => std::mem::take(&mut *nodes),
                Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
            };
            let added = w.graph.add_nodes_unique(nodes);
            for (&id, &new) in members[w.pi].iter().zip(&added) {
                w.placed.set(part_index(id), new.0.index() as u32);
            }
        });
        self.members = members;
    }

    /// Runs `work` on every program, in parallel: each program's graph and
    /// slots are moved out of the builder for the call and put back after.
    /// Returns the nodes each program deferred, by program index.
    fn for_each_built_program(&mut self, work: impl Fn(&Self, &mut Placement) + Sync) -> Vec<(usize, Vec<NodeId>)> {
        let mut programs: Vec<Placement> = (0..self.programs.len())
            .map(|pi| Placement {
                pi,
                graph: std::mem::take(&mut self.programs[pi].1),
                placed: std::mem::take(&mut self.placed[pi]),
                deferred: Vec::new(),
            })
            .collect();
        let this = &*self;
        programs.par_iter_mut().for_each(|w| work(this, w));
        programs
            .into_iter()
            .map(|w| {
                self.programs[w.pi].1 = w.graph;
                self.placed[w.pi] = w.placed;
                (w.pi, w.deferred)
            })
            .collect()
    }

    /// Whether operand `slot` of `id` is dropped in `program`: the group
    /// assignment of a CrossReplicaSum or AllGather is a compile-time fact
    /// in a replica, not an operand.
    fn skips_operand(&self, id: NodeId, program: Program, slot: usize) -> bool {
        if !program.is_replicated() {
            return false;
        }
        match &*self.src.node(id).op {
            "CrossReplicaSum" | "AllGather" => slot == 1,
            // A TensorFlow collective made a `CollectiveAllReduce`: only its input stays.
            "XlaAllReduce" | "XlaReduceScatter" | "CollectiveReduceV2" => {
                slot >= 1 && program.cluster().is_some_and(|c| self.collective_instance.contains_key(&(c, id)))
            }
            _ => false,
        }
    }
}

/// The nodes in text order when that is a topological order (the usual
/// case, checked in one pass over the edges); otherwise in a topological
/// order that takes the earliest node in the text among the ready ones.
/// Collective instances are numbered in this order, and every member runs
/// its collectives by instance, so the numbering must respect dependencies.
fn topological_text_order(graph: &Graph, order: &[NodeId]) -> Vec<NodeId> {
    use petgraph::visit::{EdgeRef, IntoEdgeReferences};
    use std::cmp::Reverse;
    let pg = graph.petgraph();
    let seq = |id: NodeIndex| pg[id].seq;
    // A TF1 loop's back edges (NextIteration -> Merge) do not order nodes.
    let forward = |e: &petgraph::stable_graph::EdgeReference<'_, crate::ir::Edge, u32>| {
        !graph.is_back_edge(NodeId(e.source()), NodeId(e.target()))
    };
    if pg.edge_references().filter(forward).all(|e| seq(e.source()) < seq(e.target())) {
        return order.to_vec();
    }
    let bound = petgraph::visit::NodeIndexable::node_bound(pg);
    let mut remaining = vec![0usize; bound];
    for e in pg.edge_references().filter(forward) {
        remaining[e.target().index()] += 1;
    }
    let mut ready: std::collections::BinaryHeap<Reverse<(u64, u32)>> = order
        .iter()
        .filter(|id| remaining[id.0.index()] == 0)
        .map(|id| Reverse((seq(id.0), id.0.index() as u32)))
        .collect();
    let mut sorted = Vec::with_capacity(order.len());
    while let Some(Reverse((_, i))) = ready.pop() {
        let id = NodeIndex::new(i as usize);
        sorted.push(NodeId(id));
        for next in pg.edges_directed(id, petgraph::Direction::Outgoing).filter(forward).map(|e| e.target()) {
            remaining[next.index()] -= 1;
            if remaining[next.index()] == 0 {
                ready.push(Reverse((seq(next), next.index() as u32)));
            }
        }
    }
    // A cycle (the verifier reports it) leaves nodes out: keep text order for them.
    if sorted.len() < order.len() {
        let placed: HashSet<NodeId> = sorted.iter().copied().collect();
        sorted.extend(order.iter().filter(|id| !placed.contains(id)));
    }
    sorted
}

/// Replica groups as a `group_assignment` tensor.
fn group_tensor(groups: &[Vec<i64>]) -> Arc<TensorLit> {
    let width = groups.first().map_or(0, Vec::len);
    let values = groups.iter().flatten().map(|&v| v as i32).collect();
    Arc::new(TensorLit {
        dtype: DType::I32,
        shape: vec![groups.len() as i64, width as i64],
        data: TensorData::Int(values),
    })
}

/// The dtype of a node's output 0, from its `T`, `dtype` or `DstT` attribute.
pub fn output_dtype(graph: &Graph, id: NodeId) -> Option<DType> {
    let attrs = &graph.node(id).attrs;
    ["T", "dtype", "DstT", "out_type"].iter().find_map(|k| attrs.get(k).and_then(AttrValue::as_type))
}

/// Convenience for tests: the names of a program's nodes in order.
pub fn node_names(graph: &Graph) -> Vec<Arc<str>> {
    graph.nodes_in_order().into_iter().map(|id| graph.node(id).name.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_order_ignores_loop_back_edges_only() {
        // %late and %merge are used before they are written, so text order is not topological;
        // the loop's back edge (%next -> %merge) must not hold %merge (and so %body) back.
        let text = r#"graph @g {
  %x = Placeholder() {dtype = f32, shape = shape[]}
  %use = Neg(%late) {T = f32}
  %late = Neg(%x) {T = f32}
  %enter = Enter(%x) {T = f32, frame_name = "f", is_constant = false}
  %body = Neg(%merge) {T = f32}
  %merge = Merge(%enter, %next) {T = f32, N = 2}
  %next = NextIteration(%body) {T = f32}
}
"#;
        let (module, errors) = crate::ir::parse_module(text.as_bytes()).expect("parses");
        assert!(errors.is_empty(), "{errors:?}");
        let graph = &module.graphs[0];
        let order = topological_text_order(graph, &graph.nodes_in_order());
        let names: Vec<&str> = order.iter().map(|&id| &*graph.node(id).name).collect();
        assert_eq!(names, ["x", "late", "use", "enter", "merge", "body", "next"]);
    }
}
