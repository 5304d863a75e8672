//! Metadata: the `TPUReplicateMetadata` op, the pivot and the compilation
//! result of each cluster.
//!
//! Meaning, following TensorFlow's `tpu.replicate`:
//! - a `NoOp` named `<cluster>/pivot` outside the cluster, with
//!   `_pivot_for_cluster = "<cluster>"`;
//! - `TPUReplicateMetadata` in the cluster, after `^<cluster>/pivot`, with
//!   `num_replicas`, `num_cores_per_replica`, `topology`,
//!   `device_assignment`, `computation_shape`, `host_compute_core`,
//!   `padding_map`, `allow_soft_placement` and `use_tpu`, taken from the
//!   replicate region's attributes where given, else TensorFlow's defaults;
//! - `TPUCompilationResult` outside the cluster, after `^TPUReplicateMetadata`,
//!   with `_tpu_compilation_status = "<cluster>"`.
//!
//! Control edges: TensorFlow builds the body under a control dependency on
//! the metadata op, which attaches to every op none of whose data inputs is
//! produced inside the cluster; ops with no inputs at all thus hang off the
//! metadata op, which hangs off the pivot. A cluster op left with neither
//! data inputs nor control inputs from the cluster gets `^<cluster>/pivot`.
//!
//! Requires `replicate-clustering`; run after `fan-in` so the input
//! identities get their edge too. Cost: O(nodes + edges).

use petgraph::visit::{EdgeRef, NodeIndexable};
use petgraph::Direction;
use rustc_hash::FxHashMap;

use super::common::{authored_clusters, AuthoredCluster, Namer, COMPILATION_STATUS, PIVOT_FOR_CLUSTER, TPU_REPLICATE};
use super::error::PassError;
use crate::ir::{AttrValue, EdgeKind, Graph, Node, NodeId};
use crate::syntax::Span;

/// The ops made for one cluster.
struct Made {
    pivot: NodeId,
    metadata: NodeId,
}

/// Adds the metadata, pivot and compilation result of every named cluster.
pub fn metadata(graph: &mut Graph) -> Vec<PassError> {
    let clusters = authored_clusters(graph);
    if clusters.is_empty() {
        return Vec::new();
    }
    // Members of each cluster, found before the new ops exist.
    let index: FxHashMap<&str, usize> = clusters.iter().enumerate().map(|(i, c)| (c.name.as_str(), i)).collect();
    let mut members: Vec<Vec<NodeId>> = vec![Vec::new(); clusters.len()];
    // Indexed by node index; `usize::MAX` for nodes of no authored cluster.
    let mut member_of: Vec<usize> = vec![usize::MAX; graph.petgraph().node_bound()];
    for id in graph.node_ids() {
        if let Some(&c) = graph.node(id).attrs.get_str(TPU_REPLICATE).and_then(|n| index.get(n)) {
            members[c].push(id);
            member_of[id.0.index()] = c;
        }
    }
    let mut namer = Namer::default();
    let mut made = Vec::with_capacity(clusters.len());
    for cluster in &clusters {
        match build(graph, &mut namer, cluster) {
            Ok(m) => made.push(m),
            Err(e) => return vec![e],
        }
    }
    // TensorFlow's control_dependencies([metadata]) rule, then the pivot rule.
    for (c, ids) in members.iter().enumerate() {
        let Made { pivot, metadata } = made[c];
        for &id in ids {
            let mut data_from_cluster = false;
            let mut control_from_cluster = false;
            let mut has_metadata_edge = false;
            for e in graph.petgraph().edges_directed(id.0, Direction::Incoming) {
                let src = NodeId(e.source());
                let inside = member_of.get(src.0.index()) == Some(&c);
                match e.weight().kind {
                    EdgeKind::Data { .. } => data_from_cluster |= inside,
                    EdgeKind::Control { .. } => {
                        control_from_cluster |= inside;
                        has_metadata_edge |= src == metadata;
                    }
                }
            }
            if !data_from_cluster && !has_metadata_edge {
                graph.add_control_input(id, metadata, Span::DETACHED);
                control_from_cluster = true;
            }
            if !data_from_cluster && !control_from_cluster {
                graph.add_control_input(id, pivot, Span::DETACHED);
            }
        }
    }
    Vec::new()
}

fn build(graph: &mut Graph, namer: &mut Namer, cluster: &AuthoredCluster) -> Result<Made, PassError> {
    let region = graph.region(cluster.region);
    let span = region.keyword_span;
    let attrs = region.attrs.clone();
    let get = |key: &str, default: AttrValue| attrs.get(key).cloned().unwrap_or(default);
    let pivot = Node::op(namer.fresh(graph, &format!("{}/pivot", cluster.name)), "NoOp")
        .with_attr(PIVOT_FOR_CLUSTER, AttrValue::str(cluster.name.as_str()));
    let pivot = graph.add_node(pivot).map_err(|_| internal(span))?;
    let metadata = Node::op(namer.fresh(graph, "TPUReplicateMetadata"), "TPUReplicateMetadata")
        .with_attr(TPU_REPLICATE, AttrValue::str(cluster.name.as_str()))
        .with_attr("num_replicas", AttrValue::Int(cluster.num_replicas))
        .with_attr("num_cores_per_replica", get("num_cores_per_replica", AttrValue::Int(1)))
        .with_attr("topology", get("topology", AttrValue::str("")))
        .with_attr("device_assignment", get("device_assignment", AttrValue::List(Vec::new())))
        .with_attr("computation_shape", get("computation_shape", AttrValue::List(Vec::new())))
        .with_attr("host_compute_core", AttrValue::List(Vec::new()))
        .with_attr("padding_map", get("padding_map", AttrValue::List(Vec::new())))
        .with_attr("allow_soft_placement", get("allow_soft_placement", AttrValue::Bool(false)))
        .with_attr("use_tpu", get("use_tpu", AttrValue::Bool(true)));
    let metadata = graph.add_node(metadata).map_err(|_| internal(span))?;
    graph.add_control_input(metadata, pivot, Span::DETACHED);
    let result = Node::op(namer.fresh(graph, "TPUCompilationResult"), "TPUCompilationResult")
        .with_attr(COMPILATION_STATUS, AttrValue::str(cluster.name.as_str()));
    let result = graph.add_node(result).map_err(|_| internal(span))?;
    graph.add_control_input(result, metadata, Span::DETACHED);
    Ok(Made { pivot, metadata })
}

fn internal(span: Span) -> PassError {
    PassError::Internal { message: "a fresh name was taken".into(), span }
}
