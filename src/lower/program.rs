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
//! Cost: linear in nodes x replicas plus edges x replicas.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

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

/// Settings of the partitioner.
pub struct PartitionInput<'a> {
    pub graph: &'a Graph,
    pub clusters: &'a [ReplicateCluster],
    pub assignment: &'a DeviceAssignment,
    pub steps_per_run: u32,
}

struct Builder<'a> {
    src: &'a Graph,
    clusters: &'a [ReplicateCluster],
    assignment: &'a DeviceAssignment,
    parts: Vec<Part>,
    oc_names: Vec<Vec<String>>,
    programs: Vec<(Program, Graph)>,
    index: HashMap<Program, usize>,
    /// Source node -> node id, per program.
    placed: Vec<HashMap<NodeId, NodeId>>,
    mirrored: HashSet<NodeId>,
    channels: HashMap<(String, usize), NodeId>,
    errors: Vec<LowerError>,
    collective_instance: HashMap<(u32, NodeId), i64>,
}

fn part_index(id: NodeId) -> usize {
    id.0.index()
}

/// Partitions `input.graph` into programs.
pub fn partition(input: &PartitionInput<'_>) -> (Module, Vec<LowerError>) {
    let src = input.graph;
    let bound = petgraph::visit::NodeIndexable::node_bound(src.petgraph());
    let mut b = Builder {
        src,
        clusters: input.clusters,
        assignment: input.assignment,
        parts: vec![Part::Drop; bound],
        oc_names: Vec::new(),
        programs: Vec::new(),
        index: HashMap::new(),
        placed: Vec::new(),
        mirrored: HashSet::new(),
        channels: HashMap::new(),
        errors: Vec::new(),
        collective_instance: HashMap::new(),
    };
    b.assign_parts();
    b.create_programs();
    b.place_nodes();
    b.wire();
    b.list_mirrors();
    let Builder { programs, errors, .. } = b;
    let mut graphs: Vec<Graph> = programs.into_iter().map(|(_, g)| g).collect();
    if let Some(host) = graphs.first_mut() {
        host.attrs.insert("steps_per_run", AttrValue::Int(i64::from(input.steps_per_run.max(1))));
    }
    (Module { header: Vec::new(), graphs }, errors)
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

    fn assign_parts(&mut self) {
        let src = self.src;
        // Cluster members, fan-in and fan-out.
        for (ci, cluster) in self.clusters.iter().enumerate() {
            let ci = ci as u32;
            let ocs: Vec<String> = cluster.outside_compilation.keys().cloned().collect();
            for &m in &cluster.members {
                let node = src.node(m);
                let part = if m == cluster.metadata {
                    Part::Drop
                } else if let Some(oc) = node.attrs.get_str(OUTSIDE_COMPILATION) {
                    Part::Oc { cluster: ci, oc: ocs.iter().position(|o| o == oc).unwrap_or(0) as u32 }
                } else {
                    let core = node.device.as_deref().and_then(replicated_core).unwrap_or(0);
                    if core >= cluster.num_cores_per_replica {
                        self.errors.push(LowerError::LogicalDevice {
                            logical: core,
                            per_replica: cluster.num_cores_per_replica,
                            max: cluster.num_cores_per_replica.saturating_sub(1),
                            span: node.span,
                        });
                    }
                    Part::Device { cluster: ci, core: core.min(cluster.num_cores_per_replica.saturating_sub(1)) }
                };
                self.parts[part_index(m)] = part;
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
        let order = src.nodes_in_order();
        let in_cluster = |parts: &[Part], id: NodeId| {
            matches!(
                parts[part_index(id)],
                Part::Device { .. } | Part::Oc { .. } | Part::FanIn { .. } | Part::FanOut { .. }
            ) || src.node(id).attrs.contains_key(TPU_REPLICATE)
        };
        let mut init: HashSet<NodeId> = HashSet::new();
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
        for &id in &order {
            if in_cluster(&self.parts, id) {
                if self.parts[part_index(id)] == Part::Drop && !src.node(id).attrs.contains_key(TPU_REPLICATE) {
                    self.parts[part_index(id)] = Part::Host;
                }
                continue;
            }
            let needed_by_host = src.uses(id).iter().any(|(user, _)| !init.contains(user));
            self.parts[part_index(id)] = match (init.contains(&id), needed_by_host) {
                (true, true) => Part::Shared,
                (true, false) => Part::Init,
                (false, _) => Part::Host,
            };
        }
        // Members that are neither metadata nor placed (e.g. pivots tagged by a pass).
        for &id in &order {
            if src.node(id).attrs.contains_key(TPU_REPLICATE) && self.parts[part_index(id)] == Part::Drop {
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
            for &m in &cluster.members {
                for input in src.inputs(m) {
                    if &*src.node(input.src).op == "VarHandleOp"
                        && !matches!(self.parts[part_index(input.src)], Part::Device { .. } | Part::Oc { .. })
                    {
                        self.mirrored.insert(input.src);
                    }
                }
            }
        }
    }

    fn add_program(&mut self, program: Program, name: String, attrs: AttrMap) {
        let mut g = Graph::new(name);
        g.attrs = attrs;
        self.index.insert(program, self.programs.len());
        self.programs.push((program, g));
        self.placed.push(HashMap::new());
    }

    fn create_programs(&mut self) {
        let a = self.assignment;
        let mut host_attrs = AttrMap::new();
        host_attrs.insert("device", AttrValue::str(a.topology.host_device(0)));
        host_attrs.insert("role", AttrValue::str("main"));
        self.add_program(Program::Host, "host".into(), host_attrs);
        if self.parts.iter().any(|p| matches!(p, Part::Init)) {
            let mut attrs = AttrMap::new();
            attrs.insert("device", AttrValue::str(a.topology.host_device(0)));
            attrs.insert("role", AttrValue::str("init"));
            self.add_program(Program::Init, "init".into(), attrs);
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
            for r in 0..cluster.num_replicas {
                for &k in &cores {
                    let name = if k == 0 {
                        format!("{}/replica_{r}", cluster.name)
                    } else {
                        format!("{}/replica_{r}/core_{k}", cluster.name)
                    };
                    let mut attrs = AttrMap::new();
                    attrs.insert("cluster", AttrValue::str(&cluster.name));
                    attrs.insert("device", AttrValue::str(a.tpu_device(r, k)));
                    attrs.insert("logical_core", AttrValue::Int(i64::from(k)));
                    attrs.insert("replica", AttrValue::Int(i64::from(r)));
                    attrs.insert("role", AttrValue::str("replica"));
                    self.add_program(Program::Device { cluster: ci, core: k, replica: r }, name, attrs);
                }
            }
            let host_core: HashMap<&str, u32> =
                cluster.host_compute_core.iter().map(|(oc, core)| (oc.as_str(), *core)).collect();
            for (oi, oc) in self.oc_names[ci as usize].clone().iter().enumerate() {
                let core = host_core.get(oc.as_str()).copied().unwrap_or(0).min(cluster.num_cores_per_replica - 1);
                for r in 0..cluster.num_replicas {
                    let mut attrs = AttrMap::new();
                    attrs.insert("cluster", AttrValue::str(&cluster.name));
                    attrs.insert("device", AttrValue::str(a.host_device(r, core)));
                    attrs.insert("outside_compilation", AttrValue::str(oc));
                    attrs.insert("replica", AttrValue::Int(i64::from(r)));
                    attrs.insert("role", AttrValue::str("host"));
                    let name = format!("{}/oc_{oc}/replica_{r}", cluster.name);
                    self.add_program(Program::Oc { cluster: ci, oc: oi as u32, replica: r }, name, attrs);
                }
            }
        }
    }

    fn programs_of(&self, part: Part) -> Vec<Program> {
        match part {
            Part::Host => vec![Program::Host],
            Part::Init => vec![Program::Init],
            Part::Shared => {
                let mut v = vec![Program::Host];
                if self.index.contains_key(&Program::Init) {
                    v.push(Program::Init);
                }
                v
            }
            Part::Device { cluster, core } => (0..self.clusters[cluster as usize].num_replicas)
                .map(|replica| Program::Device { cluster, core, replica })
                .collect(),
            Part::Oc { cluster, oc } => (0..self.clusters[cluster as usize].num_replicas)
                .map(|replica| Program::Oc { cluster, oc, replica })
                .collect(),
            Part::FanIn { .. } | Part::FanOut { .. } | Part::Drop => Vec::new(),
        }
    }

    fn place_nodes(&mut self) {
        let src = self.src;
        for id in src.nodes_in_order() {
            let part = self.parts[part_index(id)];
            for program in self.programs_of(part) {
                let node = self.lowered_node(id, program);
                let pi = self.index[&program];
                let new = self.programs[pi].1.add_node_unique(node);
                self.placed[pi].insert(id, new);
            }
        }
    }

    fn replica_of(program: Program) -> Option<u32> {
        match program {
            Program::Device { replica, .. } | Program::Oc { replica, .. } => Some(replica),
            _ => None,
        }
    }

    fn lowered_node(&mut self, id: NodeId, program: Program) -> Node {
        let src = self.src.node(id);
        let mut node = Node::op(src.name.clone(), src.op.clone());
        node.attrs = src.attrs.clone();
        node.attrs.remove(TPU_REPLICATE);
        node.attrs.remove(OUTSIDE_COMPILATION);
        node.span = src.span;
        node.device = match program {
            Program::Host | Program::Init => src.device.clone(),
            _ => None,
        };
        if matches!(&*src.op, "Update" | "UpdateNonSlot") {
            let update = src.attrs.get_str("fn").unwrap_or_default();
            if !matches!(update, "Assign" | "AssignAdd" | "AssignSub") {
                if Self::replica_of(program).unwrap_or(0) == 0 {
                    self.errors.push(LowerError::UpdateFn {
                        op: src.op.to_string(),
                        value: update.to_string(),
                        span: src.span,
                    });
                }
            } else {
                node.op = format!("{update}VariableOp").into();
            }
            node.attrs.remove("fn");
            if &*src.op == "UpdateNonSlot" {
                node.device = Some(self.assignment.topology.host_device(0).into());
            }
        }
        let Some(replica) = Self::replica_of(program) else { return node };
        let cluster = match program {
            Program::Device { cluster, .. } | Program::Oc { cluster, .. } => cluster,
            _ => 0,
        };
        let num_replicas = self.clusters[cluster as usize].num_replicas;
        match &*src.op {
            "CrossReplicaSum" => {
                node.op = "CollectiveAllReduce".into();
                node.attrs.remove("T");
                let (group, size, rank) = self.replica_group(id, replica, num_replicas);
                node.attrs.insert("group", AttrValue::str(group));
                node.attrs.insert("group_size", AttrValue::Int(size));
                node.attrs.insert("rank", AttrValue::Int(rank));
                node.attrs.insert("reduce_op", AttrValue::str("SUM"));
                node.attrs.insert("instance", AttrValue::Int(self.instance(cluster, id)));
            }
            "AllReduce" | "Broadcast" => {
                let reduce = src.attrs.get_str("reduce_op").unwrap_or("SUM").to_string();
                if &*src.op == "AllReduce" && reduce != "SUM" && reduce != "MEAN" && replica == 0 {
                    self.errors.push(LowerError::ReduceOp { op: reduce.clone(), span: src.span });
                }
                let op = if &*src.op == "AllReduce" { "CollectiveAllReduce" } else { "CollectiveBroadcast" };
                node.op = op.into();
                let mut attrs = AttrMap::new();
                // A fused all-reduce carries its sums' replica groups as an attribute.
                let groups = src.attrs.get("group_assignment").and_then(|v| v.as_tensor()).and_then(groups_of);
                let (group, size, rank) = match groups.as_deref().and_then(|g| group_of(g, &src.name, replica)) {
                    Some(found) => found,
                    None => (
                        format!("{}/all", self.clusters[cluster as usize].name),
                        i64::from(num_replicas),
                        i64::from(replica),
                    ),
                };
                attrs.insert("group", AttrValue::str(group));
                attrs.insert("group_size", AttrValue::Int(size));
                attrs.insert("rank", AttrValue::Int(rank));
                attrs.insert("instance", AttrValue::Int(self.instance(cluster, id)));
                if op == "CollectiveAllReduce" {
                    attrs.insert("reduce_op", AttrValue::str(reduce));
                } else {
                    attrs.insert("source", AttrValue::Int(0));
                }
                node.attrs = attrs;
            }
            "ReplicaId" => {
                node.op = "Const".into();
                node.attrs = AttrMap::new();
                node.attrs.insert("dtype", AttrValue::Type(DType::I32));
                node.attrs.insert(
                    "value",
                    AttrValue::Tensor(Box::new(TensorLit {
                        dtype: DType::I32,
                        shape: vec![],
                        data: TensorData::Int(vec![replica as i32]),
                    })),
                );
            }
            _ => {}
        }
        node
    }

    /// A stable instance number per collective op, shared by all replicas.
    fn instance(&mut self, cluster: u32, id: NodeId) -> i64 {
        let next = self.collective_instance.len() as i64;
        *self.collective_instance.entry((cluster, id)).or_insert(next)
    }

    /// The group of `replica` for a CrossReplicaSum: from its
    /// `group_assignment` constant when there is one, else all replicas.
    fn replica_group(&self, id: NodeId, replica: u32, num_replicas: u32) -> (String, i64, i64) {
        let name = &self.src.node(id).name;
        let groups: Option<Vec<Vec<i64>>> = self.src.data_inputs(id).get(1).and_then(|i| {
            let c = self.src.node(i.src);
            groups_of(c.attrs.get("value")?.as_tensor()?)
        });
        groups
            .as_deref()
            .and_then(|g| group_of(g, name, replica))
            .unwrap_or_else(|| (format!("{name}/all"), i64::from(num_replicas), i64::from(replica)))
    }

    fn wire(&mut self) {
        let src = self.src;
        let order = src.nodes_in_order();
        // Fan-out first: the host reads each replica's result.
        for &id in &order {
            if let Part::FanOut { cluster } = self.parts[part_index(id)] {
                self.wire_fan_out(id, cluster);
            }
        }
        for &id in &order {
            let part = self.parts[part_index(id)];
            for program in self.programs_of(part) {
                let pi = self.index[&program];
                let dst = self.placed[pi][&id];
                let operands: Vec<Input> = match &*src.node(id).op {
                    // The group assignment is a compile-time fact, not an operand.
                    "CrossReplicaSum" if Self::replica_of(program).is_some() => {
                        src.inputs(id).into_iter().enumerate().filter(|(i, _)| *i != 1).map(|(_, x)| x).collect()
                    }
                    _ => src.inputs(id),
                };
                let mut lowered = Vec::with_capacity(operands.len());
                for input in operands {
                    if let Some(x) = self.resolve(input, id, program) {
                        lowered.push(x);
                    }
                }
                let g = &mut self.programs[pi].1;
                for x in lowered {
                    g.add_input(dst, x);
                }
            }
        }
    }

    /// The lowered operand for `input` of `consumer` in `program`.
    fn resolve(&mut self, input: Input, consumer: NodeId, program: Program) -> Option<Input> {
        let src = self.src;
        let producer = input.src;
        let part = self.parts[part_index(producer)];
        let pi = self.index[&program];
        if program == Program::Host && self.mirrored.contains(&producer) {
            return Some(Input { src: self.mirrored_handle(producer), ..input });
        }
        // Same program: a plain edge.
        if let Some(&local) = self.placed[pi].get(&producer) {
            return Some(Input { src: local, ..input });
        }
        let replica = Self::replica_of(program);
        match part {
            Part::FanIn { .. } => {
                let Some(r) = replica else {
                    self.escape(consumer, producer);
                    return None;
                };
                let operand = src.data_inputs(producer).get(r as usize).copied()?;
                let channel = format!("{}/replica_{r}", src.node(producer).name);
                let recv = self.transfer(operand, program, &channel)?;
                Some(Input { src: recv, output: input.output.map(|_| 0), span: input.span })
            }
            _ if self.mirrored.contains(&producer) && replica.is_some() => {
                let r = replica.expect("checked");
                let name = format!("{}/replica_{r}", src.node(producer).name);
                let g = &mut self.programs[pi].1;
                let handle = match g.find(&name) {
                    Some(h) => h,
                    None => {
                        let mut node = Node::op(name.clone(), "VarHandleOp");
                        node.attrs = src.node(producer).attrs.clone();
                        node.attrs.insert("shared_name", AttrValue::str(name.clone()));
                        node.span = src.node(producer).span;
                        g.add_node_unique(node)
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
                        node.attrs = src.node(producer).attrs.clone();
                        node.attrs.remove(TPU_REPLICATE);
                        node.span = src.node(producer).span;
                        g.add_node_unique(node)
                    }
                };
                self.placed[pi].insert(producer, local);
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
                    let name = format!("{}/replica_{r}", src.node(producer).name);
                    let g = &self.programs[pi].1;
                    return g.find(&name).map(|recv| Input { src: recv, output: Some(0), span: input.span });
                }
                self.escape(consumer, producer);
                None
            }
            _ => {
                let producer_programs = self.programs_of(part);
                let source_program = match (replica, producer_programs.as_slice()) {
                    (_, [single]) => Some(*single),
                    (Some(r), many) => many.iter().copied().find(|p| Self::replica_of(*p) == Some(r)),
                    (None, many) => {
                        if input.is_control() {
                            // Wait for every replica.
                            let programs: Vec<Program> = many.to_vec();
                            let dst = self.placed[pi][&consumer];
                            for p in programs {
                                let channel = format!("ctl/{}", src.node(producer).name);
                                if let Some(recv) = self.transfer_from(input, p, program, &channel) {
                                    self.programs[pi].1.add_control_input(dst, recv, input.span);
                                }
                            }
                            return None;
                        }
                        self.escape(consumer, producer);
                        None
                    }
                };
                let source_program = source_program?;
                let channel = match (source_program, program) {
                    (Program::Device { cluster, .. }, Program::Oc { oc, .. }) => format!(
                        "host_compute_channel_{}_args/{}",
                        self.oc_names[cluster as usize][oc as usize],
                        src.node(producer).name
                    ),
                    (Program::Oc { cluster, oc, .. }, Program::Device { .. }) => format!(
                        "host_compute_channel_{}_retvals/{}",
                        self.oc_names[cluster as usize][oc as usize],
                        src.node(producer).name
                    ),
                    _ => format!("value/{}", src.node(producer).name),
                };
                let recv = self.transfer_from(input, source_program, program, &channel)?;
                Some(Input { src: recv, output: input.output.map(|_| 0), span: input.span })
            }
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
    /// variable (device and shared name), replica programs in order first.
    fn list_mirrors(&mut self) {
        let host = self.index[&Program::Host];
        let handles: Vec<(NodeId, String)> = self.programs[host]
            .1
            .nodes_in_order()
            .into_iter()
            .filter(|&id| &*self.programs[host].1.node(id).op == "MirroredVarHandleOp")
            .filter_map(|id| {
                let name = self.programs[host].1.node(id).name.strip_suffix("/mirrored")?.to_string();
                Some((id, name))
            })
            .collect();
        for (id, var) in handles {
            let mut copies: Vec<(String, String)> = Vec::new();
            for (program, g) in &self.programs {
                let Some(replica) = Self::replica_of(*program) else { continue };
                let Some(copy) = g.find(&format!("{var}/replica_{replica}")) else { continue };
                let device = g.attrs.get_str("device").unwrap_or_default().to_string();
                let name = g.node(copy).attrs.get_str("shared_name").unwrap_or_default().to_string();
                if !copies.contains(&(device.clone(), name.clone())) {
                    copies.push((device, name));
                }
            }
            // Replica 0's copy first: it is the primary.
            copies.sort_by_key(|(_, name)| name.rsplit('_').next().and_then(|r| r.parse::<u32>().ok()));
            let node = self.programs[host].1.node_mut(id);
            let (devices, names): (Vec<_>, Vec<_>) =
                copies.into_iter().map(|(d, n)| (AttrValue::str(d), AttrValue::str(n))).unzip();
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

    /// Sends `value` (a host-side tensor) to `program`; returns the recv node.
    fn transfer(&mut self, value: Input, program: Program, channel: &str) -> Option<NodeId> {
        let part = self.parts[part_index(value.src)];
        let source = match part {
            Part::Host | Part::Shared => Program::Host,
            Part::Init => Program::Init,
            _ => {
                let replica = Self::replica_of(program);
                self.programs_of(part).into_iter().find(|p| Self::replica_of(*p) == replica)?
            }
        };
        self.transfer_from(value, source, program, channel)
    }

    /// Adds (once) a `_Send` in `from` and a `_Recv` in `to` for `value`.
    fn transfer_from(&mut self, value: Input, from: Program, to: Program, channel: &str) -> Option<NodeId> {
        let fi = self.index[&from];
        let ti = self.index[&to];
        let out = value.output.unwrap_or(0);
        let suffix = match Self::replica_of(to).or(Self::replica_of(from)) {
            Some(r) => format!("/replica_{r}"),
            None => String::new(),
        };
        let key = if value.is_control() {
            format!("{channel}:ctl{suffix}->{}", self.programs[ti].1.name)
        } else {
            format!("{channel}:{out}{suffix}->{}", self.programs[ti].1.name)
        };
        if let Some(&recv) = self.channels.get(&(key.clone(), ti)) {
            return Some(recv);
        }
        let Some(&producer) = self.placed[fi].get(&value.src) else {
            self.errors.push(LowerError::Internal {
                message: format!("`{}` is not placed in the sending program", self.src.node(value.src).name),
            });
            return None;
        };
        let producer_name = self.src.node(value.src).name.clone();
        let dtype = output_dtype(self.src, value.src);
        // The sending side.
        let g = &mut self.programs[fi].1;
        let sent = if value.is_control() {
            let mut token = Node::op(format!("{producer_name}/_token"), "Const");
            token.attrs.insert("dtype", AttrValue::Type(DType::Bool));
            token.attrs.insert(
                "value",
                AttrValue::Tensor(Box::new(TensorLit {
                    dtype: DType::Bool,
                    shape: vec![],
                    data: TensorData::Bool(vec![true]),
                })),
            );
            let t = g.add_node_unique(token);
            g.add_control_input(t, producer, value.span);
            Input { src: t, output: Some(0), span: value.span }
        } else {
            Input { src: producer, output: Some(out), span: value.span }
        };
        let mut send = Node::op(format!("{producer_name}/_send"), "_Send");
        send.attrs.insert("channel", AttrValue::str(key.clone()));
        let s = g.add_node_unique(send);
        g.add_input(s, sent);
        // The receiving side.
        let g = &mut self.programs[ti].1;
        let mut recv = Node::op(format!("{producer_name}/_recv"), "_Recv");
        recv.attrs.insert("channel", AttrValue::str(key.clone()));
        let recv_dtype = if value.is_control() { Some(DType::Bool) } else { dtype };
        if let Some(d) = recv_dtype {
            recv.attrs.insert("dtype", AttrValue::Type(d));
        }
        let r = g.add_node_unique(recv);
        self.channels.insert((key, ti), r);
        Some(r)
    }

    fn wire_fan_out(&mut self, id: NodeId, cluster: u32) {
        let src = self.src;
        let num_replicas = self.clusters[cluster as usize].num_replicas;
        let Some(operand) = src.data_inputs(id).first().copied() else { return };
        let host = self.index[&Program::Host];
        let dtype = output_dtype(src, operand.src);
        for r in 0..num_replicas {
            let part = self.parts[part_index(operand.src)];
            let programs = self.programs_of(part);
            let Some(from) = programs.into_iter().find(|p| Self::replica_of(*p) == Some(r)).or(match part {
                Part::Host | Part::Shared => Some(Program::Host),
                _ => None,
            }) else {
                continue;
            };
            let fi = self.index[&from];
            let name = format!("{}/replica_{r}", src.node(id).name);
            let channel = format!("{}/replica_{r}", src.node(id).name);
            let Some(&producer) = self.placed[fi].get(&operand.src) else { continue };
            let mut value = Input { src: producer, output: operand.output, span: operand.span };
            if let Some(reduce) = src.node(id).attrs.get_str("reduce_op") {
                value = self.reduce_output(id, reduce, value, fi, r, num_replicas, cluster);
            }
            let g = &mut self.programs[fi].1;
            let mut send = Node::op(format!("{}/_send", src.node(id).name), "_Send");
            send.attrs.insert("channel", AttrValue::str(channel.clone()));
            let s = g.add_node_unique(send);
            g.add_input(s, value);
            let g = &mut self.programs[host].1;
            let mut recv = Node::op(name, "_Recv");
            recv.attrs.insert("channel", AttrValue::str(channel));
            if let Some(d) = dtype {
                recv.attrs.insert("dtype", AttrValue::Type(d));
            }
            recv.span = src.node(id).span;
            g.add_node_unique(recv);
        }
    }
}

impl Builder<'_> {
    /// All-reduces `value`, replica `r`'s result of the marked output `id`,
    /// in program `pi`; returns the reduced value.
    #[allow(clippy::too_many_arguments)]
    fn reduce_output(
        &mut self,
        id: NodeId,
        reduce: &str,
        value: Input,
        pi: usize,
        r: u32,
        num_replicas: u32,
        cluster: u32,
    ) -> Input {
        let output = self.src.node(id);
        if reduce != "SUM" && reduce != "MEAN" {
            if r == 0 {
                self.errors.push(LowerError::ReduceOp { op: reduce.to_string(), span: output.span });
            }
            return value;
        }
        let mut node = Node::op(format!("{}/reduce", output.name), "CollectiveAllReduce");
        node.attrs.insert("group", AttrValue::str(format!("{}/all", output.name)));
        node.attrs.insert("group_size", AttrValue::Int(i64::from(num_replicas)));
        node.attrs.insert("instance", AttrValue::Int(self.instance(cluster, id)));
        node.attrs.insert("rank", AttrValue::Int(i64::from(r)));
        node.attrs.insert("reduce_op", AttrValue::str(reduce));
        node.span = output.span;
        let g = &mut self.programs[pi].1;
        let reduced = g.add_node_unique(node);
        g.add_input(reduced, value);
        Input { src: reduced, output: Some(0), span: value.span }
    }
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
