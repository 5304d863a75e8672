//! Which part each source node goes to: the host, the initialisation
//! program, a cluster's device program or one of its outside-compilation
//! programs; and which variables the cluster's programs mirror. Cluster
//! members are read in parallel; the result depends on the graph alone.

use rayon::prelude::*;
use rustc_hash::FxHashSet as HashSet;

use super::{part_index, replicated_core, Builder, Part, OUTSIDE_COMPILATION, TPU_REPLICATE};
use crate::ir::NodeId;
use crate::lower::error::LowerError;

impl Builder<'_> {
    pub(super) fn assign_parts(&mut self, order: &[NodeId]) {
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
        // Each node of the init program is walked from the assignment
        // (`root`) that reached it first; an assignment whose data reaches
        // back into a cluster reads the step's result and is refused.
        let mut init: HashSet<NodeId> = HashSet::default();
        let mut stack: Vec<(NodeId, NodeId)> = order
            .iter()
            .copied()
            .filter(|&id| {
                !in_cluster(&self.parts, id)
                    && src.node(id).op.starts_with("Assign")
                    && src.node(id).op.ends_with("VariableOp")
            })
            .map(|id| (id, id))
            .collect();
        let mut refused: HashSet<NodeId> = HashSet::default();
        while let Some((id, root)) = stack.pop() {
            if in_cluster(&self.parts, id) || !init.insert(id) {
                continue;
            }
            for input in src.inputs(id) {
                let data = !input.is_control();
                if data && in_cluster(&self.parts, input.src) {
                    if refused.insert(root) {
                        let node = src.node(root);
                        self.errors.push(LowerError::UpdateAfterStep {
                            node: node.name.to_string(),
                            op: node.op.to_string(),
                            reads: src.node(input.src).name.to_string(),
                            span: node.span,
                        });
                    }
                    continue;
                }
                stack.push((input.src, root));
            }
        }
        for &id in order {
            if in_cluster(&self.parts, id) {
                if self.parts[part_index(id)] == Part::Drop && !src.node(id).attrs.contains_key(TPU_REPLICATE) {
                    self.parts[part_index(id)] = Part::Host;
                }
                continue;
            }
            // Only a value read outside the init program needs a host copy:
            // a control dependency on an initialiser holds anyway, since the
            // init program runs before the first step.
            let needed_by_host = !init.is_empty()
                && src.petgraph().edges_directed(id.0, petgraph::Direction::Outgoing).any(|e| {
                    use petgraph::visit::EdgeRef;
                    matches!(e.weight().kind, crate::ir::EdgeKind::Data { .. }) && !init.contains(&NodeId(e.target()))
                });
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
}
