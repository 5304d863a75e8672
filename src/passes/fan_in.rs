//! Fan-in: replicated inputs become `TPUReplicatedInput` ops.
//!
//! Meaning: for computation input i of a cluster with N replicas, a
//! `TPUReplicatedInput` named `input{i}` (outside the cluster) takes the N
//! per-replica operands, with attributes `N`, `T` (when the operand's dtype
//! is known), `index = -1`, `is_mirrored_variable = false` and
//! `is_packed = false`, as TensorFlow writes them. The region-input node
//! itself becomes the `Identity` named `replicated_input_{i}` inside the
//! cluster (`_tpu_input_identity = true`, `_tpu_replicate`), reading
//! `input{i}`; since it is the same node, its users in the body stay wired.
//!
//! Errors: an input whose per-replica list has the wrong length, naming the
//! input and both counts. Requires `replicate-clustering`. Afterwards the
//! region has no inputs. Cost: O(inputs × replicas).

use super::common::{authored_clusters, first_unnamed_replicate, output_dtype, Namer, TPU_INPUT_IDENTITY, TPU_REPLICATE};
use super::error::PassError;
use crate::ir::{AttrValue, Graph, Input, Node, NodeKind, RegionKind};

/// Builds the fan-in of every named replicate region of `graph`.
pub fn fan_in(graph: &mut Graph) -> Vec<PassError> {
    let mut errors = Vec::new();
    if let Some(r) = first_unnamed_replicate(graph) {
        let region = graph.region(r);
        let has_inputs = matches!(&region.kind, RegionKind::Replicate { inputs, .. } if !inputs.is_empty());
        if has_inputs && graph.enclosing_replicate(region.parent).is_none() && region.num_replicas().is_some_and(|n| n >= 1) {
            errors.push(PassError::MissingPrerequisite {
                pass: "fan-in",
                needs: "replicate-clustering",
                span: region.keyword_span,
            });
        }
    }
    let mut namer = Namer::default();
    for cluster in authored_clusters(graph) {
        let RegionKind::Replicate { inputs, .. } = &graph.region(cluster.region).kind else { continue };
        let inputs = inputs.clone();
        let mut remaining = Vec::new();
        for (i, &input) in inputs.iter().enumerate() {
            if !graph.contains(input) || !matches!(graph.node(input).kind, NodeKind::RegionInput { .. }) {
                continue;
            }
            let operands = graph.inputs(input);
            let span = graph.node(input).span;
            if operands.len() as i64 != cluster.num_replicas || operands.iter().any(Input::is_control) {
                errors.push(PassError::ReplicatedInputCount {
                    input: graph.node(input).name.to_string(),
                    expected: cluster.num_replicas,
                    found: operands.iter().filter(|o| !o.is_control()).count(),
                    span,
                });
                remaining.push(input);
                continue;
            }
            let dtype = output_dtype(graph, input, 0);
            let mut fan = Node::op(namer.fresh(graph, &format!("input{i}")), "TPUReplicatedInput")
                .with_span(span)
                .with_attr("N", AttrValue::Int(cluster.num_replicas))
                .with_attr("index", AttrValue::Int(-1))
                .with_attr("is_mirrored_variable", AttrValue::Bool(false))
                .with_attr("is_packed", AttrValue::Bool(false));
            if let Some(t) = dtype {
                fan = fan.with_attr("T", AttrValue::Type(t));
            }
            let Ok(fan) = graph.add_node(fan) else {
                errors.push(PassError::Internal { message: "a fresh name was taken".into(), span });
                continue;
            };
            for operand in &operands {
                graph.add_input(fan, *operand);
            }
            let identity_name = namer.fresh(graph, &format!("replicated_input_{i}"));
            if graph.rename(input, &identity_name).is_err() {
                errors.push(PassError::Internal { message: "a fresh name was taken".into(), span });
                continue;
            }
            graph.set_inputs(input, &[Input { src: fan, output: Some(0), span }]);
            let node = graph.node_mut(input);
            node.kind = NodeKind::Op;
            node.op = "Identity".into();
            node.attrs.insert(TPU_INPUT_IDENTITY, AttrValue::Bool(true));
            node.attrs.insert(TPU_REPLICATE, AttrValue::str(cluster.name.as_str()));
            if let Some(t) = dtype {
                node.attrs.insert("T", AttrValue::Type(t));
            }
        }
        if let RegionKind::Replicate { inputs, .. } = &mut graph.region_mut(cluster.region).kind {
            *inputs = remaining;
        }
    }
    errors
}
