//! Fan-out: computation outputs become `TPUReplicatedOutput` ops.
//!
//! Meaning, following TensorFlow's `tpu.replicate`: a cluster's `return`
//! lists zero or more tensors, then zero or more ops (`^%op`).
//! - A `NoOp` joins the cluster (after `^<cluster>/pivot`), so that fetching
//!   any result runs the computation; it ends the control outputs.
//! - Tensor output i is wrapped in an `Identity` in the cluster
//!   (`_tpu_output_identity = true`, on the producer's device or
//!   `/device:TPU_REPLICATED_CORE:0`), read by a `TPUReplicatedOutput`
//!   named `output{i}` with `num_replicas` results, and result r by an
//!   `Identity` named `output_{i}_shard_{r}` that also waits for every
//!   control output.
//! - A region attribute `output_reduce_ops = ["NONE", "SUM", ...]` marks
//!   output i with a reduce op: its `TPUReplicatedOutput` carries
//!   `reduce_op = "SUM"` (or `"MEAN"`); `"NONE"` or `""` leaves it unmarked.
//! - A computation returning no tensors yields, per replica r, a `NoOp`
//!   named `shard_{r}` waiting for every control output.
//!
//! Errors: a tensor listed after an op. Requires `metadata` (the pivot).
//!
//! Fan-out is the last pass that needs the regions, and the edges it adds
//! leave them, so when it succeeds it ends by dissolving them with
//! [`flatten`](super::flatten::flatten): afterwards the graph has no
//! regions. Cost: O(outputs × replicas), plus the flattening.

use super::common::{
    authored_clusters, find_per_cluster, output_dtype, Namer, PIVOT_FOR_CLUSTER, REPLICATED_CORE_0,
    TPU_OUTPUT_IDENTITY, TPU_REPLICATE,
};
use super::error::PassError;
use crate::ir::{AttrValue, Graph, Node, NodeId, RegionKind, ValueRef};
use crate::syntax::Span;

/// Builds the fan-out of every named replicate region of `graph`.
pub fn fan_out(graph: &mut Graph) -> Vec<PassError> {
    let mut errors = Vec::new();
    let clusters = authored_clusters(graph);
    let pivots = find_per_cluster(graph, &clusters, PIVOT_FOR_CLUSTER, "NoOp");
    let mut namer = Namer::default();
    for cluster in &clusters {
        let region = graph.region(cluster.region);
        let RegionKind::Replicate { outputs, .. } = &region.kind else { continue };
        let outputs: Vec<ValueRef> = outputs.clone();
        let reduce_ops: Vec<String> = region
            .attrs
            .get("output_reduce_ops")
            .and_then(AttrValue::as_list)
            .map(|l| l.iter().map(|v| v.as_str().unwrap_or_default().to_string()).collect())
            .unwrap_or_default();
        let Some(&pivot) = pivots.get(&cluster.name) else {
            errors.push(PassError::MissingPrerequisite {
                pass: "fan-out",
                needs: "metadata",
                span: region.keyword_span,
            });
            continue;
        };
        let split = outputs.iter().position(|v| v.output.is_none()).unwrap_or(outputs.len());
        let (tensors, controls) = outputs.split_at(split);
        if let Some(bad) = controls.iter().find(|v| v.output.is_some()) {
            errors.push(PassError::ReturnOrder { span: bad.span });
            continue;
        }
        let tag = AttrValue::str(cluster.name.as_str());
        let mut noop = Node::op(namer.fresh(graph, "NoOp"), "NoOp").with_attr(TPU_REPLICATE, tag.clone());
        noop.region = Some(cluster.region);
        let Ok(noop) = graph.add_node(noop) else {
            errors.push(internal(region_span(graph, cluster.region)));
            continue;
        };
        graph.add_control_input(noop, pivot, Span::DETACHED);
        let mut waits: Vec<(NodeId, Span)> = controls.iter().map(|v| (v.node, v.span)).collect();
        waits.push((noop, Span::DETACHED));
        let n = cluster.num_replicas;

        for (i, value) in tensors.iter().enumerate() {
            let output = value.output.unwrap_or(0);
            let dtype = output_dtype(graph, value.node, output);
            let producer = graph.node(value.node);
            let device = producer.device.clone().unwrap_or_else(|| REPLICATED_CORE_0.into());
            // The identity stands for the user's op: a problem with its
            // placement is shown there (once: equal diagnostics are merged).
            let mut identity = Node::op(namer.fresh(graph, "Identity"), "Identity")
                .with_span(producer.span)
                .with_device(device)
                .with_attr(TPU_OUTPUT_IDENTITY, AttrValue::Bool(true))
                .with_attr(TPU_REPLICATE, tag.clone());
            identity.region = Some(cluster.region);
            let mut fan = Node::op(namer.fresh(graph, &format!("output{i}")), "TPUReplicatedOutput")
                .with_span(value.span)
                .with_attr("num_replicas", AttrValue::Int(n));
            if let Some(op) = reduce_ops.get(i).filter(|op| !op.is_empty() && *op != "NONE") {
                fan = fan.with_attr("reduce_op", AttrValue::str(op.as_str()));
            }
            if let Some(t) = dtype {
                identity = identity.with_attr("T", AttrValue::Type(t));
                fan = fan.with_attr("T", AttrValue::Type(t));
            }
            let (Ok(identity), Ok(fan)) = (graph.add_node(identity), graph.add_node(fan)) else {
                errors.push(internal(value.span));
                continue;
            };
            graph.add_data_input(identity, value.node, output, value.span);
            graph.add_data_input(fan, identity, 0, Span::DETACHED);
            for r in 0..n {
                let mut shard = Node::op(namer.fresh(graph, &format!("output_{i}_shard_{r}")), "Identity");
                if let Some(t) = dtype {
                    shard = shard.with_attr("T", AttrValue::Type(t));
                }
                let Ok(shard) = graph.add_node(shard) else {
                    errors.push(internal(value.span));
                    break;
                };
                graph.add_data_input(shard, fan, r as u32, Span::DETACHED);
                for &(op, span) in &waits {
                    graph.add_control_input(shard, op, span);
                }
            }
        }
        if tensors.is_empty() {
            for r in 0..n {
                let Ok(shard) = graph.add_node(Node::op(namer.fresh(graph, &format!("shard_{r}")), "NoOp")) else {
                    errors.push(internal(region_span(graph, cluster.region)));
                    break;
                };
                for &(op, span) in &waits {
                    graph.add_control_input(shard, op, span);
                }
            }
        }
        let region = graph.region_mut(cluster.region);
        region.return_span = None;
        if let RegionKind::Replicate { outputs, .. } = &mut region.kind {
            outputs.clear();
        }
    }
    if errors.is_empty() {
        errors = super::flatten::flatten(graph);
    }
    errors
}

fn region_span(graph: &Graph, region: crate::ir::RegionId) -> Span {
    graph.region(region).keyword_span
}

fn internal(span: Span) -> PassError {
    PassError::Internal { message: "a fresh name was taken".into(), span }
}
