//! Partitioning a rewritten graph into per-device programs.
//!
//! Every node goes to exactly one *part*: the host driver program, the
//! variable-initialisation program, a replica's program on one logical core,
//! or a replica's program for one outside-compilation cluster. Parts inside
//! a cluster are instantiated once per replica. Then every edge is wired:
//! within a program it stays an edge; across programs it becomes a matched
//! `_Send`/`_Recv` pair with a channel key that names both ends.
//!
//! Rewrites on the way:
//! - `TPUReplicatedInput` disappears: replica `r` receives operand `r`.
//! - `TPUReplicatedOutput` becomes one `_Recv` per replica on the host,
//!   named `<output>/replica_<r>`; uses of `<output>:r` read it. One marked
//!   with `reduce_op` (SUM or MEAN) is all-reduced over the replicas first
//!   (`<output>/reduce`), so every replica sends the reduced value.
//! - A variable used in a cluster is mirrored: replica `r` gets its own
//!   `VarHandleOp` `<var>/replica_<r>`, so reads and writes in a replica touch
//!   the local copy. Outside the cluster the host program reaches the
//!   variable through a `MirroredVarHandleOp` `<var>/mirrored` listing every
//!   copy (replica 0's first): a read gives the primary (replica 0) value
//!   and an assignment writes every copy.
//! - `Update` (a mirrored-variable update, `fn` = `Assign`, `AssignAdd` or
//!   `AssignSub`) becomes `<fn>VariableOp`: in a replica it updates the
//!   local copy, on the host every copy. `UpdateNonSlot` becomes
//!   `<fn>VariableOp` placed on the host device (task 0's CPU), run once.
//! - `CrossReplicaSum` becomes `CollectiveAllReduce` over its replica group;
//!   `AllReduce` (SUM or MEAN; a fused one with its `group_assignment`)
//!   one collective over all its operands; `Broadcast` a
//!   `CollectiveBroadcast` from replica 0; `ReplicaId` a per-replica constant.
//! - Metadata ops are dropped; the TPU tags are removed from program ops.
//!
//! How: the programs of replica 0 are built node by node (the *templates*),
//! together with the host and init programs, which receive their ends of
//! every replica's channels at the same time. Placing nodes, and wiring the
//! edges that stay inside one program, run in parallel over these built
//! programs; edges between programs (sends and recvs) are wired after
//! that, serially, in the text order, so names and keys are deterministic.
//! While a template is built, each node whose content depends on the replica (a collective's rank, a replica
//! id, a channel key, a mirrored handle's name) is recorded as a [`Patch`].
//! Every other replica's program is then a clone of its template with the
//! patches applied; the clones are made in parallel. A clone shares the
//! template's node and edge storage (see [`Graph`]'s copy on write), so it
//! costs a copy of the name table plus one node per patch.
//!
//! Cost: linear in nodes + edges for the templates, plus patched nodes x
//! replicas (and a name table per replica) for the clones.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::sync::Arc;

use petgraph::stable_graph::NodeIndex;
use rayon::prelude::*;

use super::error::LowerError;
use super::topology::DeviceAssignment;
use crate::ir::{AttrMap, AttrValue, DType, Graph, Input, Module, Node, NodeId, TensorData, TensorLit};
use crate::passes::form_clusters::ReplicateCluster;

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

/// A program instance: a part, and the replica for per-replica parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Program {
    Host,
    Init,
    Device { cluster: u32, core: u32, replica: u32 },
    Oc { cluster: u32, oc: u32, replica: u32 },
}

impl Program {
    fn replica(self) -> Option<u32> {
        match self {
            Program::Device { replica, .. } | Program::Oc { replica, .. } => Some(replica),
            Program::Host | Program::Init => None,
        }
    }

    fn cluster(self) -> Option<u32> {
        match self {
            Program::Device { cluster, .. } | Program::Oc { cluster, .. } => Some(cluster),
            Program::Host | Program::Init => None,
        }
    }

    /// The same program for replica `r` (host and init have no replicas).
    fn for_replica(self, r: u32) -> Program {
        match self {
            Program::Device { cluster, core, .. } => Program::Device { cluster, core, replica: r },
            Program::Oc { cluster, oc, .. } => Program::Oc { cluster, oc, replica: r },
            other => other,
        }
    }
}

/// The port of a channel key: a data output, or a control token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Port {
    Data(u32),
    Control,
}

/// How to spell a channel key for any replica.
#[derive(Clone, Debug)]
enum KeyTemplate {
    /// `{channel}[/replica_r]:{port}/replica_r->{receiving program}`.
    Transfer { channel: Arc<str>, channel_per_replica: bool, port: Port, to: Program },
    /// `{fan_in}/replica_r:{out}/replica_r->{receiving program}`, where
    /// `out` is the output index of the replica's operand.
    FanIn { fan_in: NodeId, to: Program },
    /// `{channel}/replica_r` (a replicated output).
    Output { channel: Arc<str> },
}

/// A template node whose content depends on the replica.
#[derive(Clone, Debug)]
enum Patch {
    /// A collective or replica id: lowered again for the replica (a
    /// collective with its replica groups, when it names them).
    Lowered { node: NodeId, src: NodeId, groups: Option<Arc<Vec<Vec<i64>>>> },
    /// A mirrored variable's handle: `<var>/replica_r`.
    Mirror { node: NodeId, var: NodeId },
    /// A `_Send` or `_Recv`: its channel key.
    Channel { node: NodeId, key: KeyTemplate },
    /// A collective over all replicas (or the all-reduce of a marked
    /// output): its rank is the replica.
    Rank { node: NodeId },
    /// The `_Recv` of a replicated input: named after the replica's operand.
    FanInRecv { node: NodeId, fan_in: NodeId, key: KeyTemplate },
}

/// Settings of the partitioner.
pub struct PartitionInput<'a> {
    pub graph: &'a Graph,
    pub clusters: &'a [ReplicateCluster],
    pub assignment: &'a DeviceAssignment,
    pub steps_per_run: u32,
    /// Where to report progress (placing, wiring and cloning nodes).
    pub progress: &'a dyn crate::progress::Progress,
}

/// A built program moved out of the builder to be worked on by itself.
struct Placement {
    pi: usize,
    graph: Graph,
    /// Source node index -> node index in `graph` (see [`Builder::placed`]).
    placed: Vec<u32>,
    patches: Vec<Patch>,
    /// Nodes with an operand from another program, left for the serial pass.
    deferred: Vec<NodeId>,
}

/// No node placed here (a slot of [`Builder::placed`]).
const UNPLACED: u32 = u32::MAX;

struct Builder<'a> {
    src: &'a Graph,
    clusters: &'a [ReplicateCluster],
    assignment: &'a DeviceAssignment,
    parts: Vec<Part>,
    oc_names: Vec<Vec<String>>,
    /// Every program in module order; replicas other than 0 stay empty
    /// until they are cloned from their template.
    programs: Vec<(Program, Graph)>,
    index: HashMap<Program, usize>,
    /// Source node index -> node index, per program built node by node
    /// (host, init and the templates); empty for the clones.
    placed: Vec<Vec<u32>>,
    /// Per template program: its replica-dependent nodes.
    patches: Vec<Vec<Patch>>,
    mirrored: Vec<bool>,
    /// The receiving end of each transfer made so far, by (sending
    /// program, receiving program, producer, port), so that every value
    /// crosses between two programs once. Keyed by structure, not by the
    /// channel's spelling, so a lookup formats nothing.
    channels: HashMap<(usize, usize, NodeId, Port), NodeId>,
    /// The host's recvs, in replica order, of a per-replica op's control
    /// token, by (template program, host-side program, producer).
    control_to_host: HashMap<(usize, usize, NodeId), Vec<NodeId>>,
    /// Replica 0's recv of each replicated input, by (fan-in, program).
    fan_in_recvs: HashMap<(NodeId, usize), NodeId>,
    /// The host's recv of each replica's result, by output, in replica order.
    output_recvs: HashMap<NodeId, Vec<NodeId>>,
    errors: Vec<LowerError>,
    collective_instance: HashMap<(u32, NodeId), i64>,
    /// The replica groups of each collective that names them (a
    /// `group_assignment` operand or attribute), read once.
    /// Equal assignments share one table.
    replica_groups: HashMap<NodeId, Arc<Vec<Vec<i64>>>>,
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
}

impl SharedStrings {
    fn recv() -> SharedStrings {
        SharedStrings { op: "_Recv".into(), channel: "channel".into(), dtype: "dtype".into() }
    }
}

fn part_index(id: NodeId) -> usize {
    id.0.index()
}

/// Partitions `input.graph` into programs.
pub fn partition(input: &PartitionInput<'_>) -> Partitioned {
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
        patches: Vec::new(),
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
    progress.phase("lowering", 3 * order.len() as u64);
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
    b.clone_replicas(progress, order.len() as u64);
    clock.lap("replicas");
    b.list_mirrors();
    clock.lap("mirrors");
    let Builder { programs, errors, .. } = b;
    let mut graphs: Vec<Graph> = programs.into_iter().map(|(_, g)| g).collect();
    if let Some(host) = graphs.first_mut() {
        host.attrs.insert("steps_per_run", AttrValue::Int(i64::from(input.steps_per_run.max(1))));
    }
    Partitioned { module: Module { header: Vec::new(), graphs }, errors, phases: clock.phases }
}

/// The result of [`partition`].
pub struct Partitioned {
    pub module: Module,
    pub errors: Vec<LowerError>,
    /// The wall time of each phase, in order.
    pub phases: Vec<LowerPhase>,
}

/// One phase of the partitioner and its wall time (`--time-passes` prints them).
#[derive(Clone, Debug)]
pub struct LowerPhase {
    pub name: &'static str,
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

    fn assign_parts(&mut self, order: &[NodeId]) {
        let src = self.src;
        // Cluster members, fan-in and fan-out.
        for (ci, cluster) in self.clusters.iter().enumerate() {
            let ci = ci as u32;
            let ocs: Vec<String> = cluster.outside_compilation.keys().cloned().collect();
            // Each member's part depends on that member alone: read them in parallel.
            let member_parts: Vec<(Part, Option<LowerError>)> = cluster
                .members
                .par_iter()
                .map(|&m| {
                    let node = src.node(m);
                    if m == cluster.metadata {
                        return (Part::Drop, None);
                    }
                    if let Some(oc) = node.attrs.get_str(OUTSIDE_COMPILATION) {
                        let oc = ocs.iter().position(|o| o == oc).unwrap_or(0) as u32;
                        return (Part::Oc { cluster: ci, oc }, None);
                    }
                    let core = node.device.as_deref().and_then(replicated_core).unwrap_or(0);
                    let error = (core >= cluster.num_cores_per_replica).then(|| LowerError::LogicalDevice {
                        logical: core,
                        per_replica: cluster.num_cores_per_replica,
                        max: cluster.num_cores_per_replica.saturating_sub(1),
                        span: node.span,
                    });
                    let core = core.min(cluster.num_cores_per_replica.saturating_sub(1));
                    (Part::Device { cluster: ci, core }, error)
                })
                .collect();
            for (&m, (part, error)) in cluster.members.iter().zip(member_parts) {
                self.parts[part_index(m)] = part;
                self.errors.extend(error);
            }
            for &i in &cluster.inputs {
                self.parts[part_index(i)] = Part::FanIn { cluster: ci };
            }
            for &o in &cluster.outputs {
                self.parts[part_index(o)] = Part::FanOut { cluster: ci };
            }
            self.oc_names.push(ocs);
        }
        // Everything else is host-side: initialisers go to the init program.
        let in_cluster = |parts: &[Part], id: NodeId| {
            matches!(
                parts[part_index(id)],
                Part::Device { .. } | Part::Oc { .. } | Part::FanIn { .. } | Part::FanOut { .. }
            ) || src.node(id).attrs.contains_key(TPU_REPLICATE)
        };
        let mut init: HashSet<NodeId> = HashSet::default();
        let mut stack: Vec<NodeId> = order
            .iter()
            .copied()
            .filter(|&id| {
                !in_cluster(&self.parts, id)
                    && src.node(id).op.starts_with("Assign")
                    && src.node(id).op.ends_with("VariableOp")
            })
            .collect();
        while let Some(id) = stack.pop() {
            if in_cluster(&self.parts, id) || !init.insert(id) {
                continue;
            }
            stack.extend(src.inputs(id).iter().map(|i| i.src));
        }
        for &id in order {
            if in_cluster(&self.parts, id) {
                if self.parts[part_index(id)] == Part::Drop && !src.node(id).attrs.contains_key(TPU_REPLICATE) {
                    self.parts[part_index(id)] = Part::Host;
                }
                continue;
            }
            let needed_by_host = !init.is_empty()
                && src
                    .petgraph()
                    .neighbors_directed(id.0, petgraph::Direction::Outgoing)
                    .any(|user| !init.contains(&NodeId(user)));
            self.parts[part_index(id)] = match (init.contains(&id), needed_by_host) {
                (true, true) => Part::Shared,
                (true, false) => Part::Init,
                (false, _) => Part::Host,
            };
        }
        // Members that are neither metadata nor placed (e.g. pivots tagged by a pass).
        for &id in order {
            if self.parts[part_index(id)] == Part::Drop && src.node(id).attrs.contains_key(TPU_REPLICATE) {
                let is_metadata = self.clusters.iter().any(|c| c.metadata == id);
                if !is_metadata {
                    let cluster = src.node(id).attrs.get_str(TPU_REPLICATE).and_then(|c| self.cluster_of_name(c));
                    self.parts[part_index(id)] = match cluster {
                        Some(ci) => Part::Device { cluster: ci, core: 0 },
                        None => Part::Host,
                    };
                }
            }
        }
        // Variables read or written inside a cluster are mirrored.
        for cluster in self.clusters {
            let parts = &self.parts;
            let variables: Vec<NodeId> = cluster
                .members
                .par_iter()
                .flat_map_iter(|&m| src.petgraph().neighbors_directed(m.0, petgraph::Direction::Incoming).map(NodeId))
                .filter(|&input| {
                    &*src.node(input).op == "VarHandleOp"
                        && !matches!(parts[part_index(input)], Part::Device { .. } | Part::Oc { .. })
                })
                .collect();
            for input in variables {
                self.mirrored[part_index(input)] = true;
            }
        }
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
            Program::Device { cluster, core, replica } => {
                let cluster = &self.clusters[cluster as usize];
                attrs.insert("cluster", AttrValue::str(cluster.name.as_str()));
                attrs.insert("device", AttrValue::str(a.tpu_device(replica, core)));
                attrs.insert("logical_core", AttrValue::Int(i64::from(core)));
                attrs.insert("replica", AttrValue::Int(i64::from(replica)));
                attrs.insert("role", AttrValue::str("replica"));
                if core == 0 {
                    format!("{}/replica_{replica}", cluster.name)
                } else {
                    format!("{}/replica_{replica}/core_{core}", cluster.name)
                }
            }
            Program::Oc { cluster: ci, oc, replica } => {
                let cluster = &self.clusters[ci as usize];
                let oc = &self.oc_names[ci as usize][oc as usize];
                let core = cluster
                    .host_compute_core
                    .iter()
                    .find(|(name, _)| name == oc)
                    .map_or(0, |(_, core)| *core)
                    .min(cluster.num_cores_per_replica - 1);
                attrs.insert("cluster", AttrValue::str(cluster.name.as_str()));
                attrs.insert("device", AttrValue::str(a.host_device(replica, core)));
                attrs.insert("outside_compilation", AttrValue::str(oc.as_str()));
                attrs.insert("replica", AttrValue::Int(i64::from(replica)));
                attrs.insert("role", AttrValue::str("host"));
                format!("{}/oc_{oc}/replica_{replica}", cluster.name)
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
        let built_here = program.replica().is_none_or(|r| r == 0);
        self.placed.push(if built_here { vec![UNPLACED; self.parts.len()] } else { Vec::new() });
        self.patches.push(Vec::new());
    }

    fn create_programs(&mut self) {
        self.add_program(Program::Host);
        if self.parts.iter().any(|p| matches!(p, Part::Init)) {
            self.add_program(Program::Init);
        }
        for (ci, cluster) in self.clusters.iter().enumerate() {
            let ci = ci as u32;
            let mut cores: Vec<u32> = vec![0];
            for p in &self.parts {
                if let Part::Device { cluster, core } = p {
                    if *cluster == ci && !cores.contains(core) {
                        cores.push(*core);
                    }
                }
            }
            cores.sort_unstable();
            for replica in 0..cluster.num_replicas {
                for &core in &cores {
                    self.add_program(Program::Device { cluster: ci, core, replica });
                }
            }
            for oc in 0..self.oc_names[ci as usize].len() as u32 {
                for replica in 0..cluster.num_replicas {
                    self.add_program(Program::Oc { cluster: ci, oc, replica });
                }
            }
        }
    }

    /// The programs a part is built into node by node: host and/or init,
    /// or replica 0's template of a per-replica part.
    fn programs_of(&self, part: Part) -> [Option<Program>; 2] {
        match part {
            Part::Host => [Some(Program::Host), None],
            Part::Init => [Some(Program::Init), None],
            Part::Shared => [Some(Program::Host), self.index.contains_key(&Program::Init).then_some(Program::Init)],
            Part::Device { cluster, core } => [Some(Program::Device { cluster, core, replica: 0 }), None],
            Part::Oc { cluster, oc } => [Some(Program::Oc { cluster, oc, replica: 0 }), None],
            Part::FanIn { .. } | Part::FanOut { .. } | Part::Drop => [None, None],
        }
    }

    fn placed(&self, pi: usize, id: NodeId) -> Option<NodeId> {
        let slot = *self.placed[pi].get(part_index(id))?;
        (slot != UNPLACED).then(|| NodeId(NodeIndex::new(slot as usize)))
    }

    /// Numbers the collectives in text order (one instance per op, shared
    /// by all replicas), and reports reduce and update ops it cannot lower.
    fn number_collectives(&mut self, order: &[NodeId]) {
        let mut distinct_groups: HashMap<Vec<Vec<i64>>, Arc<Vec<Vec<i64>>>> = HashMap::default();
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
                "CrossReplicaSum" | "AllReduce" | "Broadcast" => {
                    let next = self.collective_instance.len() as i64;
                    self.collective_instance.entry((cluster, id)).or_insert(next);
                    if let Some(groups) = self.read_replica_groups(id) {
                        let shared = distinct_groups.entry(groups).or_insert_with_key(|g| Arc::new(g.clone()));
                        self.replica_groups.insert(id, Arc::clone(shared));
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
        // Then each built program adds its nodes on its own thread: that
        // touches only its graph, slots and patches.
        self.for_each_built_program(|this, w| {
            let program = this.programs[w.pi].0;
            let nodes = match lowered[w.pi].lock() {
                Ok(mut nodes) => std::mem::take(&mut *nodes),
                Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
            };
            let added = w.graph.add_nodes_unique(nodes);
            for (&id, &new) in members[w.pi].iter().zip(&added) {
                w.placed[part_index(id)] = new.0.index() as u32;
                if program.replica().is_some() {
                    match &*src.node(id).op {
                        // Over all replicas, only the rank differs between replicas.
                        "CrossReplicaSum" | "AllReduce" | "Broadcast" if !this.has_replica_groups(id) => {
                            w.patches.push(Patch::Rank { node: new })
                        }
                        "CrossReplicaSum" | "AllReduce" | "Broadcast" | "ReplicaId" => w.patches.push(Patch::Lowered {
                            node: new,
                            src: id,
                            groups: this.replica_groups.get(&id).cloned(),
                        }),
                        _ => {}
                    }
                }
            }
        });
    }

    /// Runs `work` on every program built node by node (host, init and
    /// the templates), in parallel: each program's graph, slots and
    /// patches are moved out of the builder for the call and put back
    /// after. Returns the nodes each program deferred, by program index.
    fn for_each_built_program(&mut self, work: impl Fn(&Self, &mut Placement) + Sync) -> Vec<(usize, Vec<NodeId>)> {
        let built: Vec<usize> = self
            .programs
            .iter()
            .enumerate()
            .filter(|(_, (p, _))| p.replica().is_none_or(|r| r == 0))
            .map(|(pi, _)| pi)
            .collect();
        let mut programs: Vec<Placement> = built
            .into_iter()
            .map(|pi| Placement {
                pi,
                graph: std::mem::take(&mut self.programs[pi].1),
                placed: std::mem::take(&mut self.placed[pi]),
                patches: std::mem::take(&mut self.patches[pi]),
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
                self.patches[w.pi] = w.patches;
                (w.pi, w.deferred)
            })
            .collect()
    }

    /// Whether operand `slot` of `id` is dropped in `program`: the group
    /// assignment of a CrossReplicaSum is a compile-time fact in a replica,
    /// not an operand.
    fn skips_operand(&self, id: NodeId, program: Program, slot: usize) -> bool {
        slot == 1 && program.replica().is_some() && &*self.src.node(id).op == "CrossReplicaSum"
    }

    /// The node `id` becomes in `program`.
    fn lowered_node(&self, id: NodeId, program: Program) -> Node {
        let src = self.src.node(id);
        let mut node = Node::op(src.name.clone(), src.op.clone());
        node.attrs = src.attrs.without(&[TPU_REPLICATE, OUTSIDE_COMPILATION]);
        node.span = src.span;
        node.device = match program {
            Program::Host | Program::Init => src.device.clone(),
            _ => None,
        };
        if matches!(&*src.op, "Update" | "UpdateNonSlot") {
            let update = src.attrs.get_str("fn").unwrap_or_default();
            if matches!(update, "Assign" | "AssignAdd" | "AssignSub") {
                node.op = format!("{update}VariableOp").into();
            }
            node.attrs.remove("fn");
            if &*src.op == "UpdateNonSlot" {
                node.device = Some(self.assignment.topology.host_device(0).into());
            }
        }
        let (Some(replica), Some(cluster)) = (program.replica(), program.cluster()) else { return node };
        if let Some(attrs) = self.replica_attrs(id, cluster, replica) {
            if &*src.op == "ReplicaId" {
                node.op = "Const".into();
            } else if &*src.op == "CrossReplicaSum" || &*src.op == "AllReduce" {
                node.op = "CollectiveAllReduce".into();
            } else {
                node.op = "CollectiveBroadcast".into();
            }
            node.attrs = attrs;
        }
        node
    }

    /// The attributes of a per-replica op (collective, replica id) in
    /// `replica`, or `None` for any other op.
    fn replica_attrs(&self, id: NodeId, cluster: u32, replica: u32) -> Option<AttrMap> {
        let src = self.src.node(id);
        let instance = || self.collective_instance.get(&(cluster, id)).copied().unwrap_or(0);
        match &*src.op {
            "CrossReplicaSum" => {
                let mut attrs = src.attrs.without(&[TPU_REPLICATE, OUTSIDE_COMPILATION, "T"]);
                let (group, size, rank) = self.replica_group(id, cluster, replica);
                attrs.insert("group", AttrValue::str(group));
                attrs.insert("group_size", AttrValue::Int(size));
                attrs.insert("rank", AttrValue::Int(rank));
                attrs.insert("reduce_op", AttrValue::str("SUM"));
                attrs.insert("instance", AttrValue::Int(instance()));
                Some(attrs)
            }
            "AllReduce" | "Broadcast" => {
                let mut attrs = AttrMap::new();
                let (group, size, rank) = self.replica_group(id, cluster, replica);
                attrs.insert("group", AttrValue::str(group));
                attrs.insert("group_size", AttrValue::Int(size));
                attrs.insert("rank", AttrValue::Int(rank));
                attrs.insert("instance", AttrValue::Int(instance()));
                if &*src.op == "AllReduce" {
                    let reduce = src.attrs.get_str("reduce_op").unwrap_or("SUM").to_string();
                    attrs.insert("reduce_op", AttrValue::str(reduce));
                } else {
                    attrs.insert("source", AttrValue::Int(0));
                }
                Some(attrs)
            }
            "ReplicaId" => {
                let mut attrs = AttrMap::new();
                attrs.insert("dtype", AttrValue::Type(DType::I32));
                attrs.insert(
                    "value",
                    AttrValue::Tensor(Arc::new(TensorLit {
                        dtype: DType::I32,
                        shape: vec![],
                        data: TensorData::Int(vec![replica as i32]),
                    })),
                );
                Some(attrs)
            }
            _ => None,
        }
    }

    /// The replica groups a collective names: a CrossReplicaSum's
    /// `group_assignment` constant operand, or the `group_assignment`
    /// attribute a fused all-reduce carries for its sums.
    fn read_replica_groups(&self, id: NodeId) -> Option<Vec<Vec<i64>>> {
        let src = self.src.node(id);
        let tensor = match &*src.op {
            "CrossReplicaSum" => {
                let operand = self.src.data_inputs(id).get(1)?.src;
                self.src.node(operand).attrs.get("value")?.as_tensor()?
            }
            _ => src.attrs.get("group_assignment")?.as_tensor()?,
        };
        groups_of(tensor)
    }

    /// Whether a collective names replica groups rather than spanning all replicas.
    fn has_replica_groups(&self, id: NodeId) -> bool {
        self.replica_groups.contains_key(&id)
    }

    /// The (group key, group size, rank) of `replica` in collective `id`:
    /// from its replica groups when it names them, else all replicas
    /// (`<sum>/all` for a CrossReplicaSum, `<cluster>/all` otherwise).
    fn replica_group(&self, id: NodeId, cluster: u32, replica: u32) -> (String, i64, i64) {
        self.replica_group_in(id, self.replica_groups.get(&id).map(|g| g.as_slice()), cluster, replica)
    }

    /// [`Builder::replica_group`] with the collective's groups at hand.
    fn replica_group_in(
        &self,
        id: NodeId,
        groups: Option<&[Vec<i64>]>,
        cluster: u32,
        replica: u32,
    ) -> (String, i64, i64) {
        let src = self.src.node(id);
        let found = groups.and_then(|g| group_of(g, &src.name, replica));
        found.unwrap_or_else(|| {
            let all = match &*src.op {
                "CrossReplicaSum" => format!("{}/all", src.name),
                _ => format!("{}/all", self.clusters[cluster as usize].name),
            };
            (all, i64::from(self.num_replicas(cluster)), i64::from(replica))
        })
    }

    fn wire(&mut self, order: &[NodeId]) {
        let src = self.src;
        // Fan-out first: the host reads each replica's result, one recv
        // per output and replica; room for them is made once.
        let fan_outs: Vec<(NodeId, u32, Input)> = order
            .iter()
            .filter_map(|&id| match self.parts[part_index(id)] {
                Part::FanOut { cluster } => Some((id, cluster, *src.data_inputs(id).first()?)),
                _ => None,
            })
            .collect();
        let recvs: Vec<Vec<Node>> =
            fan_outs.par_iter().map(|&(id, cluster, operand)| self.output_recv_nodes(id, cluster, operand)).collect();
        if let Some(&host) = self.index.get(&Program::Host) {
            let count = recvs.iter().map(Vec::len).sum();
            self.programs[host].1.reserve(count, count);
        }
        let mut pending = PendingRecvs::default();
        for (&(id, cluster, operand), recvs) in fan_outs.iter().zip(recvs) {
            self.wire_fan_out(id, cluster, operand, recvs, &mut pending);
        }
        self.add_pending_recvs(&mut pending);
        // Edges within one program, in parallel over the built programs;
        // a node with any operand from elsewhere is deferred whole.
        let mut deferred: Vec<(usize, NodeId)> = self
            .for_each_built_program(|this, w| this.wire_local(w, order))
            .into_iter()
            .flat_map(|(pi, ids)| ids.into_iter().map(move |id| (pi, id)))
            .collect();
        // The rest in the text order (then by program, as programs_of lists
        // them), so that sends and recvs are made in a fixed order.
        let mut rank = vec![u32::MAX; self.parts.len()];
        for (i, &id) in order.iter().enumerate() {
            rank[part_index(id)] = i as u32;
        }
        deferred.sort_by_key(|&(pi, id)| (rank[part_index(id)], pi));
        let mut operands: Vec<Input> = Vec::new();
        let mut lowered: Vec<Input> = Vec::new();
        for (pi, id) in deferred {
            src.inputs_into(id, &mut operands);
            let program = self.programs[pi].0;
            let Some(dst) = self.placed(pi, id) else { continue };
            lowered.clear();
            for (slot, &input) in operands.iter().enumerate() {
                if self.skips_operand(id, program, slot) {
                    continue;
                }
                if let Some(x) = self.resolve(input, id, (pi, program), &mut lowered) {
                    lowered.push(x);
                }
            }
            self.programs[pi].1.add_inputs(dst, &lowered);
        }
    }

    /// Wires the nodes of one program whose operands all lie in it; records
    /// the others in `w.deferred`, in the text order.
    fn wire_local(&self, w: &mut Placement, order: &[NodeId]) {
        let src = self.src;
        let program = self.programs[w.pi].0;
        let mut operands: Vec<Input> = Vec::new();
        let mut lowered: Vec<Input> = Vec::new();
        for &id in order {
            if !self.programs_of(self.parts[part_index(id)]).contains(&Some(program)) {
                continue;
            }
            let slot = w.placed[part_index(id)];
            if slot == UNPLACED {
                continue;
            }
            src.inputs_into(id, &mut operands);
            if operands.is_empty() {
                continue;
            }
            lowered.clear();
            let mut local = true;
            for (slot, &input) in operands.iter().enumerate() {
                if self.skips_operand(id, program, slot) {
                    continue;
                }
                let producer = w.placed.get(part_index(input.src)).copied().unwrap_or(UNPLACED);
                if program == Program::Host && self.mirrored[part_index(input.src)] {
                    local = false;
                    break;
                }
                if producer == UNPLACED {
                    // A control dependency on metadata or fan-out means nothing
                    // here (as in `resolve`); any other operand is wired later.
                    if input.is_control()
                        && matches!(self.parts[part_index(input.src)], Part::Drop | Part::FanOut { .. })
                    {
                        continue;
                    }
                    local = false;
                    break;
                }
                lowered.push(Input { src: NodeId(NodeIndex::new(producer as usize)), ..input });
            }
            if local {
                w.graph.add_inputs(NodeId(NodeIndex::new(slot as usize)), &lowered);
            } else {
                w.deferred.push(id);
            }
        }
    }

    /// The lowered operand for `input` of `consumer` in `program`.
    ///
    /// A control operand on a replicated op, seen from the host, stands for
    /// one recv per replica: those go straight into `lowered`.
    fn resolve(
        &mut self,
        input: Input,
        consumer: NodeId,
        (pi, program): (usize, Program),
        lowered: &mut Vec<Input>,
    ) -> Option<Input> {
        let src = self.src;
        let producer = input.src;
        let part = self.parts[part_index(producer)];
        if program == Program::Host && self.mirrored[part_index(producer)] {
            return Some(Input { src: self.mirrored_handle(producer), ..input });
        }
        // Same program: a plain edge.
        if let Some(local) = self.placed(pi, producer) {
            return Some(Input { src: local, ..input });
        }
        let replica = program.replica();
        match part {
            Part::FanIn { .. } => {
                if replica.is_none() {
                    self.escape(consumer, producer);
                    return None;
                }
                let recv = self.transfer_fan_in(producer, program)?;
                Some(Input { src: recv, output: input.output.map(|_| 0), span: input.span })
            }
            _ if self.mirrored[part_index(producer)] && replica.is_some() => {
                let name = format!("{}/replica_0", src.node(producer).name);
                let g = &mut self.programs[pi].1;
                let handle = match g.find(&name) {
                    Some(h) => h,
                    None => {
                        let mut node = Node::op(name.clone(), "VarHandleOp");
                        node.attrs = src.node(producer).attrs.clone();
                        node.attrs.insert("shared_name", AttrValue::str(name));
                        node.span = src.node(producer).span;
                        let h = g.add_node_unique(node);
                        self.patches[pi].push(Patch::Mirror { node: h, var: producer });
                        h
                    }
                };
                Some(Input { src: handle, ..input })
            }
            _ if &*src.node(producer).op == "Const" && replica.is_some() && src.inputs(producer).is_empty() => {
                // Constants are cheaper to copy than to send.
                let g = &mut self.programs[pi].1;
                let name = src.node(producer).name.clone();
                let local = match g.find(&name) {
                    Some(h) => h,
                    None => {
                        let mut node = Node::op(name, "Const");
                        node.attrs = src.node(producer).attrs.without(&[TPU_REPLICATE]);
                        node.span = src.node(producer).span;
                        g.add_node_unique(node)
                    }
                };
                self.placed[pi][part_index(producer)] = local.0.index() as u32;
                Some(Input { src: local, ..input })
            }
            Part::Drop | Part::FanOut { .. } => {
                // A control dependency on metadata or fan-out has no runtime meaning here.
                if input.is_control() {
                    return None;
                }
                if let Part::FanOut { .. } = part {
                    // Handled in wire_fan_out: the host's recv replaced the output.
                    let r = input.output.unwrap_or(0);
                    let recv = match self.output_recvs.get(&producer).and_then(|recvs| recvs.get(r as usize)) {
                        Some(&recv) if program == Program::Host => Some(recv),
                        _ => self.programs[pi].1.find(&format!("{}/replica_{r}", src.node(producer).name)),
                    };
                    return recv.map(|recv| Input { src: recv, output: Some(0), span: input.span });
                }
                self.escape(consumer, producer);
                None
            }
            Part::Device { cluster, .. } | Part::Oc { cluster, .. } => {
                let [Some(source), _] = self.programs_of(part) else { return None };
                match program.cluster() {
                    // Another program of the same replica (another core, or outside compilation).
                    Some(consumer_cluster) => {
                        if self.num_replicas(consumer_cluster) != self.num_replicas(cluster) {
                            self.escape(consumer, producer);
                            return None;
                        }
                        let recv = self.transfer_from(input, source, program)?;
                        Some(Input { src: recv, output: input.output.map(|_| 0), span: input.span })
                    }
                    // The host waits for every replica's op.
                    None if input.is_control() => {
                        self.placed(pi, consumer)?;
                        let key = (self.index[&source], pi, producer);
                        if !self.control_to_host.contains_key(&key) {
                            self.transfer_to_host(input, source, program);
                        }
                        let recvs = self.control_to_host.get(&key).map_or(&[][..], Vec::as_slice);
                        lowered.extend(recvs.iter().map(|&recv| Input { src: recv, output: None, span: input.span }));
                        None
                    }
                    None => {
                        self.escape(consumer, producer);
                        None
                    }
                }
            }
            Part::Host | Part::Init | Part::Shared => {
                let source = match (part, replica) {
                    (Part::Host, _) => Program::Host,
                    (Part::Init, _) => Program::Init,
                    // A shared handle or constant outside its programs has no single source.
                    _ => return None,
                };
                let recv = self.transfer_from(input, source, program)?;
                Some(Input { src: recv, output: input.output.map(|_| 0), span: input.span })
            }
        }
    }

    fn channel_name(&self, from: Program, to: Program, producer: NodeId) -> String {
        let name = &self.src.node(producer).name;
        match (from, to) {
            (Program::Device { cluster, .. }, Program::Oc { oc, .. }) => {
                format!("host_compute_channel_{}_args/{name}", self.oc_names[cluster as usize][oc as usize])
            }
            (Program::Oc { cluster, oc, .. }, Program::Device { .. }) => {
                format!("host_compute_channel_{}_retvals/{name}", self.oc_names[cluster as usize][oc as usize])
            }
            _ => format!("value/{name}"),
        }
    }

    /// The host's `MirroredVarHandleOp` `<var>/mirrored` for a mirrored
    /// variable; [`Builder::list_mirrors`] fills in its copies.
    fn mirrored_handle(&mut self, var: NodeId) -> NodeId {
        let src = self.src.node(var);
        let name = format!("{}/mirrored", src.name);
        let host = &mut self.programs[self.index[&Program::Host]].1;
        if let Some(h) = host.find(&name) {
            return h;
        }
        let mut node = Node::op(name, "MirroredVarHandleOp");
        for key in ["dtype", "shape"] {
            if let Some(v) = src.attrs.get(key) {
                node.attrs.insert(key, v.clone());
            }
        }
        node.span = src.span;
        host.add_node_unique(node)
    }

    /// Lists, on each host `MirroredVarHandleOp`, every copy of its
    /// variable (device and shared name), replica 0's first.
    fn list_mirrors(&mut self) {
        let host = self.index[&Program::Host];
        let handles: Vec<(NodeId, String)> = {
            let g = &self.programs[host].1;
            g.nodes_in_order()
                .into_iter()
                .filter(|&id| &*g.node(id).op == "MirroredVarHandleOp")
                .filter_map(|id| Some((id, g.node(id).name.strip_suffix("/mirrored")?.to_string())))
                .collect()
        };
        for (id, var) in handles {
            let mut copies: Vec<(u32, String, String)> = Vec::new();
            for (program, g) in &self.programs {
                let Some(replica) = program.replica() else { continue };
                let Some(copy) = g.find(&format!("{var}/replica_{replica}")) else { continue };
                let device = g.attrs.get_str("device").unwrap_or_default().to_string();
                let name = g.node(copy).attrs.get_str("shared_name").unwrap_or_default().to_string();
                if !copies.iter().any(|(_, d, n)| *d == device && *n == name) {
                    copies.push((replica, device, name));
                }
            }
            // Replica 0's copy first: it is the primary.
            copies.sort_by_key(|(replica, _, _)| *replica);
            let (devices, names): (Vec<_>, Vec<_>) =
                copies.into_iter().map(|(_, d, n)| (AttrValue::str(d), AttrValue::str(n))).unzip();
            let node = self.programs[host].1.node_mut(id);
            node.attrs.insert("devices", AttrValue::List(devices));
            node.attrs.insert("shared_names", AttrValue::List(names));
        }
    }

    fn escape(&mut self, consumer: NodeId, producer: NodeId) {
        let cluster = self.src.node(producer).attrs.get_str(TPU_REPLICATE).unwrap_or("?").to_string();
        self.errors.push(LowerError::ClusterEscape {
            cluster,
            consumer: self.src.node(consumer).name.to_string(),
            producer: self.src.node(producer).name.to_string(),
            span: self.src.node(consumer).span,
        });
    }

    fn program_name(&self, program: Program) -> std::borrow::Cow<'_, str> {
        match self.index.get(&program) {
            Some(&i) => std::borrow::Cow::Borrowed(&self.programs[i].1.name),
            None => std::borrow::Cow::Owned(self.program_header(program).0),
        }
    }

    /// The channel key of `template` for replica `r`.
    fn key(&self, template: &KeyTemplate, r: u32) -> String {
        match template {
            KeyTemplate::Transfer { channel, channel_per_replica, port, to } => {
                let to = self.program_name(to.for_replica(r));
                let channel_suffix = if *channel_per_replica { format!("/replica_{r}") } else { String::new() };
                match port {
                    Port::Data(out) => format!("{channel}{channel_suffix}:{out}/replica_{r}->{to}"),
                    Port::Control => format!("{channel}{channel_suffix}:ctl/replica_{r}->{to}"),
                }
            }
            KeyTemplate::FanIn { fan_in, to } => {
                let to = self.program_name(to.for_replica(r));
                let out = self.src.data_inputs(*fan_in).get(r as usize).and_then(|o| o.output).unwrap_or(0);
                format!("{}/replica_{r}:{out}/replica_{r}->{to}", self.src.node(*fan_in).name)
            }
            KeyTemplate::Output { channel } => {
                // Spelled out: `format!` grows its buffer several times, and
                // there is one of these per output and replica.
                use std::fmt::Write;
                let mut key = String::with_capacity(channel.len() + "/replica_".len() + 10);
                let _ = write!(key, "{channel}/replica_{r}");
                key
            }
        }
    }

    /// Adds a `_Send` of `value` (placed in program `from`) with `key`.
    fn add_send(&mut self, fi: usize, producer: NodeId, value: Input, key: String) -> NodeId {
        let producer_name = self.src.node(value.src).name.clone();
        let g = &mut self.programs[fi].1;
        let sent = if value.is_control() {
            let mut token = Node::op(format!("{producer_name}/_token"), "Const");
            token.attrs.insert("dtype", AttrValue::Type(DType::Bool));
            token.attrs.insert(
                "value",
                AttrValue::Tensor(Arc::new(TensorLit {
                    dtype: DType::Bool,
                    shape: vec![],
                    data: TensorData::Bool(vec![true]),
                })),
            );
            let t = g.add_node_unique(token);
            g.add_control_input(t, producer, value.span);
            Input { src: t, output: Some(0), span: value.span }
        } else {
            Input { src: producer, output: Some(value.output.unwrap_or(0)), span: value.span }
        };
        let mut send = Node::op(format!("{producer_name}/_send"), "_Send");
        send.attrs.insert("channel", AttrValue::str(key));
        let s = g.add_node_unique(send);
        g.add_input(s, sent);
        s
    }

    /// Adds a `_Recv` named after `value`'s producer, with `key`.
    fn add_recv(&mut self, ti: usize, value: Input, key: String) -> NodeId {
        let producer_name = &self.src.node(value.src).name;
        let mut recv = Node::op(format!("{producer_name}/_recv"), "_Recv");
        recv.attrs.insert("channel", AttrValue::str(key));
        let dtype = if value.is_control() { Some(DType::Bool) } else { output_dtype(self.src, value.src) };
        if let Some(d) = dtype {
            recv.attrs.insert("dtype", AttrValue::Type(d));
        }
        self.programs[ti].1.add_node_unique(recv)
    }

    /// Sends `value` from `from` to `to`, once; returns the recv in `to`.
    ///
    /// At most one side is the host or init program; a per-replica side is
    /// a template, and the host side gets its ends for every replica now.
    fn transfer_from(&mut self, value: Input, from: Program, to: Program) -> Option<NodeId> {
        let fi = self.index[&from];
        let ti = self.index[&to];
        let port = match value.output {
            Some(out) => Port::Data(out),
            None => Port::Control,
        };
        if let Some(&recv) = self.channels.get(&(fi, ti, value.src, port)) {
            return Some(recv);
        }
        let channel = self.channel_name(from, to, value.src);
        let template = KeyTemplate::Transfer { channel: channel.as_str().into(), channel_per_replica: false, port, to };
        let replicas = match (from.cluster(), to.cluster()) {
            (_, Some(c)) | (Some(c), None) => Some(self.num_replicas(c)),
            (None, None) => None,
        };
        let key0 = match replicas {
            Some(_) => self.key(&template, 0),
            None => match port {
                Port::Data(out) => format!("{channel}:{out}->{}", self.programs[ti].1.name),
                Port::Control => format!("{channel}:ctl->{}", self.programs[ti].1.name),
            },
        };
        let Some(producer) = self.placed(fi, value.src) else {
            self.errors.push(LowerError::Internal {
                message: format!("`{}` is not placed in the sending program", self.src.node(value.src).name),
            });
            return None;
        };
        let send = self.add_send(fi, producer, value, key0.clone());
        if from.replica().is_some() {
            self.patches[fi].push(Patch::Channel { node: send, key: template.clone() });
        }
        let recv = self.add_recv(ti, value, key0.clone());
        if to.replica().is_some() {
            self.patches[ti].push(Patch::Channel { node: recv, key: template.clone() });
        }
        self.channels.insert((fi, ti, value.src, port), recv);
        // The host side of every other replica's channel.
        if from.replica().is_none() && to.replica().is_some() {
            for r in 1..replicas.unwrap_or(1) {
                let key = self.key(&template, r);
                self.add_send(fi, producer, value, key);
            }
        }
        Some(recv)
    }

    /// Sends a per-replica op's control token from every replica to the
    /// host-side `to`, once; [`Builder::control_to_host`] then holds the
    /// host's recvs in replica order.
    fn transfer_to_host(&mut self, value: Input, from: Program, to: Program) {
        let fi = self.index[&from];
        let ti = self.index[&to];
        if self.control_to_host.contains_key(&(fi, ti, value.src)) {
            return;
        }
        let channel = format!("ctl/{}", self.src.node(value.src).name);
        let template =
            KeyTemplate::Transfer { channel: channel.into(), channel_per_replica: false, port: Port::Control, to };
        let replicas = from.cluster().map_or(1, |c| self.num_replicas(c));
        let Some(producer) = self.placed(fi, value.src) else { return };
        let send = self.add_send(fi, producer, value, self.key(&template, 0));
        self.patches[fi].push(Patch::Channel { node: send, key: template.clone() });
        let recvs = (0..replicas).map(|r| self.add_recv(ti, value, self.key(&template, r))).collect();
        self.control_to_host.insert((fi, ti, value.src), recvs);
    }

    /// Replica 0's recv of a replicated input, with the host's sends of
    /// every replica's operand.
    fn transfer_fan_in(&mut self, fan_in: NodeId, program: Program) -> Option<NodeId> {
        let src = self.src;
        let ti = self.index[&program];
        if let Some(&recv) = self.fan_in_recvs.get(&(fan_in, ti)) {
            return Some(recv);
        }
        let template = KeyTemplate::FanIn { fan_in, to: program };
        let operands = src.data_inputs(fan_in);
        let replicas = program.cluster().map_or(1, |c| self.num_replicas(c));
        let mut recv0 = None;
        for r in 0..replicas {
            let Some(&operand) = operands.get(r as usize) else { continue };
            let source = match self.parts[part_index(operand.src)] {
                Part::Host | Part::Shared => Program::Host,
                Part::Init => Program::Init,
                _ => {
                    // Operands of a replicated input come from the host.
                    self.escape(fan_in, operand.src);
                    return None;
                }
            };
            let fi = self.index[&source];
            let Some(producer) = self.placed(fi, operand.src) else { continue };
            let key = self.key(&template, r);
            self.add_send(fi, producer, operand, key.clone());
            if r == 0 {
                let recv = self.add_recv(ti, operand, key);
                self.patches[ti].push(Patch::FanInRecv { node: recv, fan_in, key: template.clone() });
                self.fan_in_recvs.insert((fan_in, ti), recv);
                recv0 = Some(recv);
            }
        }
        recv0
    }

    /// The host's recv of each replica's result of the output `id`, in
    /// replica order, not yet added: made apart (in parallel) because
    /// there is one per output and replica.
    fn output_recv_nodes(&self, id: NodeId, cluster: u32, operand: Input) -> Vec<Node> {
        let src = self.src;
        let dtype = output_dtype(src, operand.src);
        let template = KeyTemplate::Output { channel: src.node(id).name.clone() };
        let shared = &self.host_recv;
        (0..self.num_replicas(cluster))
            .map(|r| {
                // `<output>/replica_r`: the channel key, and the recv's name.
                let channel: Arc<str> = self.key(&template, r).into();
                let mut attrs = Vec::with_capacity(2);
                attrs.push((shared.channel.clone(), AttrValue::Str(channel.clone())));
                if let Some(d) = dtype {
                    attrs.push((shared.dtype.clone(), AttrValue::Type(d)));
                }
                let mut recv = Node::op(channel, shared.op.clone());
                recv.attrs = AttrMap::from_entries(attrs);
                recv.span = src.node(id).span;
                recv
            })
            .collect()
    }

    /// Sends each replica's result of the output `id` to the host, which
    /// receives it with `recvs` (from [`Builder::output_recv_nodes`]).
    /// Adds the host recvs [`Builder::wire_fan_out`] left pending, all at
    /// once, in their order.
    fn add_pending_recvs(&mut self, pending: &mut PendingRecvs) {
        if pending.nodes.is_empty() {
            return;
        }
        let host = self.index[&Program::Host];
        let added = self.programs[host].1.add_nodes_unique(std::mem::take(&mut pending.nodes));
        for (output, recv) in pending.outputs.drain(..).zip(added) {
            self.output_recvs.entry(output).or_default().push(recv);
        }
    }

    fn wire_fan_out(&mut self, id: NodeId, cluster: u32, operand: Input, recvs: Vec<Node>, pending: &mut PendingRecvs) {
        let src = self.src;
        let host = self.index[&Program::Host];
        let output_name: Arc<str> = src.node(id).name.clone();
        let part = self.parts[part_index(operand.src)];
        let template = KeyTemplate::Output { channel: output_name.clone() };
        let per_replica = matches!(part, Part::Device { .. } | Part::Oc { .. });
        let from = match part {
            Part::Device { .. } | Part::Oc { .. } => self.programs_of(part)[0],
            Part::Host | Part::Shared => Some(Program::Host),
            _ => None,
        };
        let Some(from) = from else { return };
        let fi = self.index[&from];
        let Some(producer) = self.placed(fi, operand.src) else { return };
        if fi == host {
            // Sends (and reductions) go to the host too: keep the order.
            self.add_pending_recvs(pending);
        }
        for (r, recv) in (0u32..).zip(recvs) {
            // A per-replica operand sends from its template once; the clones patch the key.
            if !per_replica || r == 0 {
                let mut value = Input { src: producer, output: operand.output, span: operand.span };
                if let Some(reduce) = src.node(id).attrs.get_str("reduce_op") {
                    value = self.reduce_output(id, reduce, value, fi, r, cluster);
                    if per_replica && value.src != producer {
                        self.patches[fi].push(Patch::Rank { node: value.src });
                    }
                }
                let g = &mut self.programs[fi].1;
                let mut send = Node::op(format!("{output_name}/_send"), "_Send");
                // The recv is named after its channel.
                send.attrs.insert("channel", AttrValue::Str(recv.name.clone()));
                let s = g.add_node_unique(send);
                g.add_input(s, value);
                if per_replica {
                    self.patches[fi].push(Patch::Channel { node: s, key: template.clone() });
                }
            }
            if fi == host {
                let recv = self.programs[host].1.add_node_unique(recv);
                self.output_recvs.entry(id).or_default().push(recv);
            } else {
                pending.outputs.push(id);
                pending.nodes.push(recv);
            }
        }
    }

    /// Makes every replica's program other than 0 from its template.
    fn clone_replicas(&mut self, progress: &dyn crate::progress::Progress, units: u64) {
        let jobs: Vec<(usize, usize, u32)> = self
            .programs
            .iter()
            .enumerate()
            .filter_map(|(target, (program, _))| {
                let r = program.replica().filter(|&r| r > 0)?;
                Some((self.index[&program.for_replica(0)], target, r))
            })
            .collect();
        let this = &*self;
        let per_job = units / (jobs.len() as u64).max(1);
        let made: Vec<(usize, Graph, Vec<LowerError>)> = jobs
            .par_iter()
            .map(|&(template, target, r)| {
                let (program, ref graph) = this.programs[template];
                let mut errors = Vec::new();
                let g = this.instantiate(graph, program.for_replica(r), &this.patches[template], &mut errors);
                progress.advance(per_job);
                (target, g, errors)
            })
            .collect();
        for (target, g, errors) in made {
            self.programs[target].1 = g;
            self.errors.extend(errors);
        }
    }

    /// A template program made into `program` (the same program for another replica).
    fn instantiate(
        &self,
        template: &Graph,
        program: Program,
        patches: &[Patch],
        errors: &mut Vec<LowerError>,
    ) -> Graph {
        let src = self.src;
        let r = program.replica().unwrap_or(0);
        let mut g = template.clone();
        g.reserve_node_changes(patches.len());
        let (name, attrs) = self.program_header(program);
        g.name = name;
        g.attrs = attrs;
        for patch in patches {
            match patch {
                Patch::Lowered { node, src: id, groups } => {
                    let cluster = program.cluster().unwrap_or(0);
                    if &*src.node(*id).op == "ReplicaId" {
                        if let Some(attrs) = self.replica_attrs(*id, cluster, r) {
                            g.node_mut(*node).attrs = attrs;
                        }
                    } else {
                        // A collective: only its group and rank depend on the replica.
                        let (group, size, rank) =
                            self.replica_group_in(*id, groups.as_deref().map(Vec::as_slice), cluster, r);
                        let attrs = &mut g.node_mut(*node).attrs;
                        attrs.insert("group", AttrValue::str(group));
                        attrs.insert("group_size", AttrValue::Int(size));
                        attrs.insert("rank", AttrValue::Int(rank));
                    }
                }
                Patch::Mirror { node, var } => {
                    let name = format!("{}/replica_{r}", src.node(*var).name);
                    g.node_mut(*node).attrs.insert("shared_name", AttrValue::str(name.clone()));
                    if g.rename(*node, &name).is_err() {
                        errors.push(LowerError::Internal { message: format!("the mirrored handle `{name}` is taken") });
                    }
                }
                Patch::Channel { node, key } => {
                    g.node_mut(*node).attrs.insert("channel", AttrValue::str(self.key(key, r)));
                }
                Patch::Rank { node } => {
                    g.node_mut(*node).attrs.insert("rank", AttrValue::Int(i64::from(r)));
                }
                Patch::FanInRecv { node, fan_in, key } => {
                    g.node_mut(*node).attrs.insert("channel", AttrValue::str(self.key(key, r)));
                    if let Some(operand) = src.data_inputs(*fan_in).get(r as usize) {
                        let name = format!("{}/_recv", src.node(operand.src).name);
                        if g.find(&name).is_none() {
                            // A name taken by another node keeps the template's name; the channel decides.
                            let _ = g.rename(*node, &name);
                        }
                    }
                }
            }
        }
        g
    }
}

impl Builder<'_> {
    /// All-reduces `value`, replica `r`'s result of the marked output `id`,
    /// in program `pi`; returns the reduced value.
    fn reduce_output(&mut self, id: NodeId, reduce: &str, value: Input, pi: usize, r: u32, cluster: u32) -> Input {
        let output = self.src.node(id);
        if reduce != "SUM" && reduce != "MEAN" {
            if r == 0 {
                self.errors.push(LowerError::ReduceOp { op: reduce.to_string(), span: output.span });
            }
            return value;
        }
        let next = self.collective_instance.len() as i64;
        let instance = *self.collective_instance.entry((cluster, id)).or_insert(next);
        let mut node = Node::op(format!("{}/reduce", output.name), "CollectiveAllReduce");
        node.attrs.insert("group", AttrValue::str(format!("{}/all", output.name)));
        node.attrs.insert("group_size", AttrValue::Int(i64::from(self.num_replicas(cluster))));
        node.attrs.insert("instance", AttrValue::Int(instance));
        node.attrs.insert("rank", AttrValue::Int(i64::from(r)));
        node.attrs.insert("reduce_op", AttrValue::str(reduce));
        node.span = output.span;
        let g = &mut self.programs[pi].1;
        let reduced = g.add_node_unique(node);
        g.add_input(reduced, value);
        Input { src: reduced, output: Some(0), span: value.span }
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
    if pg.edge_references().all(|e| seq(e.source()) < seq(e.target())) {
        return order.to_vec();
    }
    let bound = petgraph::visit::NodeIndexable::node_bound(pg);
    let mut remaining = vec![0usize; bound];
    for e in pg.edge_references() {
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
        for next in pg.neighbors_directed(id, petgraph::Direction::Outgoing) {
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

/// The rows of a `[groups, size]` group-assignment tensor.
fn groups_of(t: &TensorLit) -> Option<Vec<Vec<i64>>> {
    let values = t.to_f64_vec()?;
    let width = *t.shape.last()? as usize;
    if width == 0 || t.shape.len() != 2 {
        return None;
    }
    Some(values.chunks(width).map(|row| row.iter().map(|&v| v as i64).collect()).collect())
}

/// The (group key, group size, rank) of `replica` in `groups`; the key is
/// `<name>/group_<index>`.
fn group_of(groups: &[Vec<i64>], name: &str, replica: u32) -> Option<(String, i64, i64)> {
    groups.iter().enumerate().find_map(|(gi, g)| {
        let rank = g.iter().position(|&r| r == i64::from(replica))?;
        Some((format!("{name}/group_{gi}"), g.len() as i64, rank as i64))
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
