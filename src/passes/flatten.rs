//! Flatten: drops the regions once the tags carry their meaning, and lays
//! the rewritten graph out in TensorFlow's order.
//!
//! Meaning: after clustering, tagging and fan-in/fan-out, a region adds
//! nothing that `_tpu_replicate` / `_xla_outside_compilation` do not say,
//! so the graph becomes flat tagged ops that print as plain statements and
//! parse back. Each cluster is laid out as one block where its `replicate`
//! stood: `input{i}`, the pivot, the metadata op, the input identities,
//! the body (in text order, then ops added by passes in creation order),
//! the output identities, `TPUCompilationResult`, then each `output{i}`
//! followed by its shards, and the `shard_{r}` NoOps. Other nodes keep
//! their order.
//!
//! Errors: a replicate region whose inputs were not fanned in (requires
//! `fan-in`). Graphs without regions are unchanged, which makes the whole
//! pipeline idempotent. Not a pipeline pass of its own: `fan-out` ends with
//! it, because the edges fan-out adds leave the regions.
//! Cost: O((nodes + edges) + nodes log nodes).

use std::collections::HashMap;

use petgraph::visit::EdgeRef;
use petgraph::Direction;

use super::common::{
    authored_clusters, COMPILATION_STATUS, PIVOT_FOR_CLUSTER, TPU_INPUT_IDENTITY, TPU_OUTPUT_IDENTITY, TPU_REPLICATE,
};
use super::error::PassError;
use crate::ir::{EdgeKind, Graph, NodeId, NodeKind, RegionKind};

/// Position of a node in the layout: anchor, band (0 before the body, 1
/// body, 2 after), category within the band, and tie-breakers.
type Key = (u64, u8, u8, u64, u64, u64);

/// Removes all regions of `graph`, laying out the clusters they held.
pub fn flatten(graph: &mut Graph) -> Vec<PassError> {
    if graph.regions.is_empty() {
        return Vec::new();
    }
    let pending: Vec<_> = graph
        .regions
        .iter()
        .filter_map(|r| match &r.kind {
            RegionKind::Replicate { inputs, .. } if !inputs.is_empty() => Some(r.keyword_span),
            _ => None,
        })
        .collect();
    if let Some(&span) = pending.first() {
        return vec![PassError::MissingPrerequisite { pass: "flatten", needs: "fan-in", span }];
    }
    if let Some(id) = graph.node_ids().find(|&id| matches!(graph.node(id).kind, NodeKind::RegionInput { .. })) {
        return vec![PassError::MissingPrerequisite { pass: "flatten", needs: "fan-in", span: graph.node(id).span }];
    }
    let order = layout(graph);
    for (seq, id) in order.into_iter().enumerate() {
        let node = graph.node_mut(id);
        node.seq = seq as u64;
        node.region = None;
    }
    graph.regions.clear();
    Vec::new()
}

/// The new text order of all nodes.
fn layout(graph: &Graph) -> Vec<NodeId> {
    let anchors: HashMap<String, u64> =
        authored_clusters(graph).into_iter().map(|c| (c.name, graph.region(c.region).seq)).collect();
    let anchor_of = |id: NodeId, key: &str| graph.node(id).attrs.get_str(key).and_then(|c| anchors.get(c).copied());
    let mut keys: Vec<(Key, NodeId)> = Vec::with_capacity(graph.node_count());
    for id in graph.node_ids() {
        let node = graph.node(id);
        let seq = node.seq;
        let key: Key = if let Some(anchor) = anchor_of(id, TPU_REPLICATE) {
            if &*node.op == "TPUReplicateMetadata" {
                (anchor, 0, 2, seq, 0, 0)
            } else if node.attrs.get_bool(TPU_INPUT_IDENTITY) == Some(true) {
                (anchor, 0, 3, seq, 0, 0)
            } else if node.attrs.get_bool(TPU_OUTPUT_IDENTITY) == Some(true) {
                (anchor, 2, 0, seq, 0, 0)
            } else {
                (anchor, 1, 0, seq, 0, 0)
            }
        } else if let Some(anchor) = anchor_of(id, PIVOT_FOR_CLUSTER) {
            (anchor, 0, 1, seq, 0, 0)
        } else if let Some(anchor) = anchor_of(id, COMPILATION_STATUS) {
            (anchor, 2, 1, seq, 0, 0)
        } else {
            outside_key(graph, &anchors, id).unwrap_or((seq, 1, 0, 0, 0, 0))
        };
        keys.push((key, id));
    }
    keys.sort_unstable_by_key(|k| k.0);
    keys.into_iter().map(|k| k.1).collect()
}

/// The key of a fan-in or fan-out node outside its cluster, if it is one.
fn outside_key(graph: &Graph, anchors: &HashMap<String, u64>, id: NodeId) -> Option<Key> {
    let node = graph.node(id);
    let pg = graph.petgraph();
    let cluster_anchor = |src: NodeId| graph.node(src).attrs.get_str(TPU_REPLICATE).and_then(|c| anchors.get(c).copied());
    match &*node.op {
        "TPUReplicatedInput" => {
            let anchor = pg.edges_directed(id.0, Direction::Outgoing).find_map(|e| cluster_anchor(NodeId(e.target())))?;
            Some((anchor, 0, 0, node.seq, 0, 0))
        }
        "TPUReplicatedOutput" => {
            let anchor = pg.edges_directed(id.0, Direction::Incoming).find_map(|e| cluster_anchor(NodeId(e.source())))?;
            Some((anchor, 2, 2, node.seq, 0, 0))
        }
        _ => {
            let mut data_inputs = 0;
            let mut from_output = None;
            let mut control_anchor = None;
            for e in pg.edges_directed(id.0, Direction::Incoming) {
                let src = NodeId(e.source());
                match e.weight().kind {
                    EdgeKind::Data { output, .. } => {
                        data_inputs += 1;
                        if &*graph.node(src).op == "TPUReplicatedOutput" {
                            from_output = Some((src, output));
                        }
                    }
                    EdgeKind::Control { .. } => control_anchor = control_anchor.or_else(|| cluster_anchor(src)),
                }
            }
            if let (1, Some((fan, r))) = (data_inputs, from_output) {
                let anchor = pg.edges_directed(fan.0, Direction::Incoming).find_map(|e| cluster_anchor(NodeId(e.source())))?;
                return Some((anchor, 2, 2, graph.node(fan).seq, 1 + u64::from(r), node.seq));
            }
            if data_inputs == 0 && &*node.op == "NoOp" {
                return control_anchor.map(|anchor| (anchor, 2, 3, node.seq, 0, 0));
            }
            None
        }
    }
}
