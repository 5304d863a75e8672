//! How a source node looks in its program: its op and attributes without
//! the TPU tags, mirrored-variable updates as variable ops, and
//! collectives as `CollectiveAllReduce`/`CollectiveAllGather`/
//! `CollectiveBroadcast` with their group, instance and reduction (see the
//! parent module's list of rewrites). TensorFlow's `XlaAllReduce`,
//! `XlaReduceScatter` and `CollectiveReduceV2` become `CollectiveAllReduce`s
//! too (a reduce-scatter keeps its `scatter_dimension`) when their groups
//! and reduction are constants the collective has.

use super::{spmd, Builder, Program, OUTSIDE_COMPILATION, TPU_REPLICATE};
use crate::ir::{AttrMap, AttrValue, Node, NodeId};

impl Builder<'_> {
    /// The node `id` becomes in `program`.
    pub(super) fn lowered_node(&self, id: NodeId, program: Program) -> Node {
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
        let Some(cluster) = program.cluster() else { return node };
        if let Some(attrs) = self.collective_attrs(id, cluster) {
            node.op = match &*src.op {
                "CrossReplicaSum" | "AllReduce" | "XlaAllReduce" | "XlaReduceScatter" | "CollectiveReduceV2" => {
                    "CollectiveAllReduce".into()
                }
                "AllGather" => "CollectiveAllGather".into(),
                _ => "CollectiveBroadcast".into(),
            };
            node.attrs = attrs;
        }
        node
    }

    /// The attributes of a collective in its cluster's SPMD program, or
    /// `None` for any other op: the group base (its own name when it names
    /// replica groups or is a CrossReplicaSum or AllGather, else the
    /// cluster's), its `group_assignment` when it has one, its instance
    /// and reduction.
    fn collective_attrs(&self, id: NodeId, cluster: u32) -> Option<AttrMap> {
        let src = self.src.node(id);
        let mut attrs = match &*src.op {
            "CrossReplicaSum" | "AllGather" => src.attrs.without(&[TPU_REPLICATE, OUTSIDE_COMPILATION, "T"]),
            "AllReduce" | "Broadcast" => AttrMap::new(),
            "XlaAllReduce" | "XlaReduceScatter" | "CollectiveReduceV2"
                if self.collective_instance.contains_key(&(cluster, id)) =>
            {
                self.tf_collective(id, cluster)?
            }
            _ => return None,
        };
        let groups = self.replica_groups.get(&id);
        let named = matches!(&*src.op, "CrossReplicaSum" | "AllGather" | "XlaAllReduce" | "XlaReduceScatter");
        let base: &str = if groups.is_some() || named { &src.name } else { &self.clusters[cluster as usize].name };
        attrs.insert("group", AttrValue::str(base));
        match groups {
            Some(g) => attrs.insert("group_assignment", g.clone()),
            None => attrs.remove("group_assignment"),
        };
        attrs.insert("instance", AttrValue::Int(self.collective_instance.get(&(cluster, id)).copied().unwrap_or(0)));
        match &*src.op {
            "CrossReplicaSum" => attrs.insert("reduce_op", AttrValue::str("SUM")),
            "AllReduce" => attrs.insert("reduce_op", AttrValue::str(src.attrs.get_str("reduce_op").unwrap_or("SUM"))),
            "AllGather" | "XlaAllReduce" | "XlaReduceScatter" | "CollectiveReduceV2" => None,
            _ => attrs.insert("source", AttrValue::Int(0)),
        };
        Some(attrs)
    }

    /// The replica groups a collective names: a CrossReplicaSum's or
    /// AllGather's `group_assignment` constant operand, or the
    /// `group_assignment` attribute a fused all-reduce carries for its sums.
    pub(super) fn read_replica_groups(&self, id: NodeId) -> Option<Vec<Vec<i64>>> {
        let src = self.src.node(id);
        let tensor = match &*src.op {
            "CrossReplicaSum" | "AllGather" | "XlaAllReduce" | "XlaReduceScatter" => {
                let operand = self.src.data_inputs(id).get(1)?.src;
                self.src.node(operand).attrs.get("value")?.as_tensor()?
            }
            _ => src.attrs.get("group_assignment")?.as_tensor()?,
        };
        spmd::groups_of(tensor)
    }

    /// Constant operand `slot` of `id` (a `Const` node's value).
    fn const_operand(&self, id: NodeId, slot: usize) -> Option<Vec<f64>> {
        let operand = self.src.data_inputs(id).get(slot)?.src;
        self.src.node(operand).attrs.get("value")?.as_tensor()?.to_f64_vec()
    }

    /// The `reduce_op` (and `scatter_dimension`) that TensorFlow's
    /// `XlaAllReduce`, `XlaReduceScatter` or `CollectiveReduceV2` in a
    /// cluster of `cluster` becomes as a `CollectiveAllReduce`; `None` when
    /// it cannot (a reduction the collective lacks, such as a product then
    /// divided; a group assignment, scatter dimension or group size that is
    /// not a constant; a `CollectiveReduceV2` group that is not every
    /// replica): the op then stays, and its kernel runs it alone or fails.
    pub(super) fn tf_collective(&self, id: NodeId, cluster: u32) -> Option<AttrMap> {
        let src = self.src.node(id);
        let reduce = match &*src.op {
            "XlaAllReduce" | "XlaReduceScatter" => {
                self.const_operand(id, 1)?;
                src.attrs.get_str("reduce_op").unwrap_or("Add")
            }
            "CollectiveReduceV2" => {
                let size = self.const_operand(id, 1)?;
                if size.as_slice() != [f64::from(self.clusters[cluster as usize].num_replicas)] {
                    return None;
                }
                match (src.attrs.get_str("merge_op").unwrap_or("Add"), src.attrs.get_str("final_op").unwrap_or("Id")) {
                    ("Add", "Div") => "Mean",
                    (merge, "Id") if merge != "Mean" => merge,
                    _ => return None,
                }
            }
            _ => return None,
        };
        let reduce = match reduce {
            "Add" => "SUM",
            "Mean" => "MEAN",
            "Max" => "MAX",
            "Min" => "MIN",
            "Mul" => "PROD",
            _ => return None,
        };
        let mut attrs = AttrMap::new();
        attrs.insert("reduce_op", AttrValue::str(reduce));
        if &*src.op == "XlaReduceScatter" {
            let d = self.const_operand(id, 2)?;
            attrs.insert("scatter_dimension", AttrValue::Int(*d.first()? as i64));
        }
        Some(attrs)
    }
}
