//! Data parallelism on request: a single-device TF2 training step becomes
//! a step replicated N ways, as `TPUStrategy`/`MirroredStrategy` run it.
//!
//! Meaning. The input is the graph [`super::single_replica`] made: one
//! 1-replica cluster tagged `_tpu_replicate = "single_replica"`, whose
//! feeds (`Placeholder`) and variables (`VarHandleOp`) stay on the host.
//! The step was traced for one replica's batch. The pass:
//! - sets the cluster's `num_replicas` to N;
//! - makes every fed input of rank at least 1 a batch input: its
//!   placeholder `x` becomes N placeholders `x/replica_<r>` (the traced
//!   shape, one per replica) joined by a `TPUReplicatedInput` named `x`, so
//!   a feed of `x` is the global batch (N times the traced one), split along
//!   dimension 0 in replica order (`run --split-batch` semantics);
//! - averages each gradient over the replicas before the optimizer reads it:
//!   the backward pass is the ops under TensorFlow's `gradient_tape/` scope
//!   and the ops on data paths between two of them (the `AddN` that sums a
//!   value's gradient contributions is named outside the scope); a gradient
//!   is an output of the backward pass that an op outside it reads, and is
//!   replaced there by `CrossReplicaSum(g) / N`;
//! - gathers each sparse gradient (an `IndexedSlices`, as an embedding
//!   lookup's gradient is: integer indices and float values with one row
//!   per index) as `MirroredStrategy` combines one: the indices become
//!   `AllGather(i)` and the values `AllGather(v / N)`, every replica's rows
//!   concatenated in replica order. The global batch's slices are exactly
//!   these rows, so an optimizer that works per slice (Keras 3's Adam
//!   squares each slice before summing them per index) sees what it sees
//!   on one device; a dense mean would change its second moment. A sparse
//!   gradient's values are the float gradients that an op reading its
//!   indices (`UnsortedSegmentSum`, `ResourceScatterAdd`, a sparse apply)
//!   reads too, directly or through ops outside the backward pass;
//! - averages each output of the step that depends on the batch (the loss),
//!   which must be a mean over the batch;
//! - keeps the variables as they are: the backends mirror a cluster's
//!   variables (one copy per replica, updated identically from the averaged
//!   gradients).
//!
//! Invariants. With a loss that is a mean over the batch, each replica's
//! gradient is the mean over its rows, and their mean is the gradient of
//! the global batch: the step equals the single-device step on the global
//! batch. The pass refuses, naming the node, what would break that:
//! - a reduction over the batch axis in the forward computation (a batch
//!   statistic such as batch normalization's moments in training mode), or
//!   a `FusedBatchNorm*` in training mode: each replica would normalise by
//!   its own rows;
//! - a step output that depends on the batch and is not a mean over it
//!   (`Mean` over axes that include 0, or a `Sum` over them divided by a
//!   constant, as Keras losses compute it);
//! - a variable written from per-replica values that are not averaged
//!   gradients (the replicas' copies would diverge);
//! - an integer gradient (the indices of an `IndexedSlices`) that no op
//!   reads with float gradient values of as many rows, or a gradient that
//!   is neither float nor integer;
//! - a batch input of unknown leading dimension.
//!
//! The pass imports no backend. Cost: linear in the graph, plus, for each
//! op that reads a sparse gradient's indices, a walk back to its values.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use super::common::{output_dtype, TPU_REPLICATE};
use super::error::PassError;
use super::single_replica::CLUSTER;
use crate::ir::{AttrValue, DType, EdgeKind, Graph, Input, Node, NodeId, TensorData, TensorLit};
use crate::syntax::Span;

/// What [`data_parallel`] did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DataParallel {
    /// The replicas.
    pub replicas: u32,
    /// The batch inputs (split along dimension 0), by name.
    pub batch_inputs: Vec<String>,
    /// How many gradients are averaged over the replicas.
    pub gradients: usize,
    /// How many sparse gradients (`IndexedSlices`: indices and values) are
    /// gathered over the replicas.
    pub sparse_gradients: usize,
    /// The step outputs averaged over the replicas (the loss), by node name.
    pub averaged_outputs: Vec<String>,
}

impl DataParallel {
    /// One line for the run's log.
    pub fn describe(&self) -> String {
        let mut line = format!(
            "data parallel: {} replicas; batch input(s) {} split along dimension 0; {} gradient(s) and output(s) {} \
             averaged over the replicas",
            self.replicas,
            self.batch_inputs.join(", "),
            self.gradients,
            if self.averaged_outputs.is_empty() { "none".to_string() } else { self.averaged_outputs.join(", ") },
        );
        if self.sparse_gradients > 0 {
            line.push_str(&format!(
                "; {} sparse gradient(s) (indices and values) gathered from every replica",
                self.sparse_gradients
            ));
        }
        line
    }
}

/// Ops that write a variable through operand 0 from their other operands.
fn writes_variable(op: &str) -> bool {
    matches!(op, "AssignVariableOp" | "AssignAddVariableOp" | "AssignSubVariableOp")
        || op.starts_with("ResourceApply")
        || op.starts_with("ResourceSparseApply")
        || op.starts_with("ResourceScatter")
}

/// Reductions whose operand 1 lists the reduced axes.
const REDUCTIONS: &[&str] = &["All", "Any", "ArgMax", "ArgMin", "EuclideanNorm", "Max", "Mean", "Min", "Prod", "Sum"];

/// True when `name` is under a `gradient_tape` scope (TensorFlow's
/// `GradientTape.gradient` names its ops so).
fn in_gradient_tape(name: &str) -> bool {
    name.split('/').rev().skip(1).any(|scope| scope == "gradient_tape")
}

/// The backward pass: the ops under a `gradient_tape` scope, and the ops
/// that lie between two of them on a data path (TensorFlow names the
/// `AddN` that sums a value's gradient contributions outside the scope),
/// except the forward computation: the unscoped ops the step's `outputs`
/// (the loss) read. (Differentiating a `While` rewrites the forward loop to
/// keep its intermediates, in accumulators made under the scope.)
fn backward_pass(graph: &Graph, order: &[NodeId], outputs: &[NodeId]) -> HashSet<NodeId> {
    let scoped: Vec<NodeId> = order.iter().copied().filter(|&id| in_gradient_tape(&graph.node(id).name)).collect();
    let data_users = |id: NodeId| -> Vec<NodeId> {
        graph.uses(id).into_iter().filter(|(_, e)| matches!(e.kind, EdgeKind::Data { .. })).map(|(u, _)| u).collect()
    };
    let mut after: HashSet<NodeId> = HashSet::new();
    let mut stack: Vec<NodeId> = scoped.iter().flat_map(|&id| data_users(id)).collect();
    while let Some(id) = stack.pop() {
        if after.insert(id) {
            stack.extend(data_users(id));
        }
    }
    let mut before: HashSet<NodeId> = HashSet::new();
    let mut stack: Vec<NodeId> = scoped.iter().flat_map(|&id| graph.data_inputs(id)).map(|i| i.src).collect();
    while let Some(id) = stack.pop() {
        if before.insert(id) {
            stack.extend(graph.data_inputs(id).into_iter().map(|i| i.src));
        }
    }
    // The forward computation: what the outputs read, short of the scoped ops
    // (an output may pass a gradient through, as Keras' optimizer does).
    let scoped_set: HashSet<NodeId> = scoped.iter().copied().collect();
    let mut forward: HashSet<NodeId> = HashSet::new();
    let mut stack: Vec<NodeId> = outputs.iter().flat_map(|&id| graph.data_inputs(id)).map(|i| i.src).collect();
    while let Some(id) = stack.pop() {
        if !scoped_set.contains(&id) && forward.insert(id) {
            stack.extend(graph.data_inputs(id).into_iter().map(|i| i.src));
        }
    }
    let mut tape: HashSet<NodeId> = after.intersection(&before).copied().collect();
    tape.extend(scoped);
    tape.retain(|id| !forward.contains(id));
    tape
}

fn refuse(graph: &Graph, id: NodeId, reason: String) -> PassError {
    let node = graph.node(id);
    PassError::NotDataParallel { node: node.name.to_string(), op: node.op.to_string(), reason, span: node.span }
}

/// Makes the single-replica cluster of `graph` a data-parallel cluster of
/// `replicas` replicas (see the module docs).
pub fn data_parallel(graph: &mut Graph, replicas: u32) -> Result<DataParallel, Vec<PassError>> {
    let in_cluster = |graph: &Graph, id: NodeId| graph.node(id).attrs.get_str(TPU_REPLICATE) == Some(CLUSTER);
    let order = crate::ir::walk::post_order(graph, graph.nodes_in_order(), |s, d| !graph.is_back_edge(s, d));
    let shapes = crate::ir::shapes::static_shapes(graph, &order);
    let mut errors = Vec::new();

    // The batch inputs: fed placeholders of rank >= 1 that the cluster reads.
    let mut batch = Vec::new();
    for &id in &order {
        let node = graph.node(id);
        let dtype = node.attrs.get("dtype").and_then(AttrValue::as_type);
        if &*node.op != "Placeholder" || dtype == Some(DType::Resource) {
            continue;
        }
        let dims = node.attrs.get("shape").and_then(AttrValue::as_shape).and_then(|s| s.dims.clone());
        if dims.as_ref().is_some_and(|d| d.is_empty()) {
            continue;
        }
        let users = graph.uses(id);
        if !users.iter().any(|(u, _)| in_cluster(graph, *u)) {
            continue;
        }
        match dims.as_ref().and_then(|d| d.first()) {
            Some(&d) if d > 0 => {}
            _ => {
                errors.push(refuse(
                    graph,
                    id,
                    "a batch input needs a known leading dimension (the batch of one replica): trace the step \
                     with an `input_signature` of fixed batch size"
                        .into(),
                ));
                continue;
            }
        }
        if let Some((u, _)) = users.iter().find(|(u, _)| !in_cluster(graph, *u)) {
            errors.push(refuse(
                graph,
                id,
                format!(
                    "the host op `{}` reads this batch input, which would be split over the replicas",
                    graph.node(*u).name
                ),
            ));
            continue;
        }
        batch.push(id);
    }
    if batch.is_empty() {
        errors.push(PassError::NotDataParallel {
            node: CLUSTER.into(),
            op: "TPUReplicateMetadata".into(),
            reason: "the step reads no batch input (a fed input of rank 1 or more)".into(),
            span: Span::DETACHED,
        });
    }
    if !errors.is_empty() {
        return Err(errors);
    }

    let outputs: Vec<NodeId> =
        order.iter().copied().filter(|&id| &*graph.node(id).op == "TPUReplicatedOutput").collect();
    let tape = backward_pass(graph, &order, &outputs);
    // The values that differ between replicas: those the batch reaches,
    // through the gradients or (`averaged`) not through them, as they will
    // be averaged.
    let per_replica = |graph: &Graph, averaged: bool| -> HashSet<NodeId> {
        let mut seen: HashSet<NodeId> = HashSet::new();
        let mut stack: Vec<NodeId> = batch.clone();
        while let Some(id) = stack.pop() {
            if !seen.insert(id) {
                continue;
            }
            let from_tape = tape.contains(&id);
            for (user, edge) in graph.uses(id) {
                let gradient = from_tape && !tape.contains(&user);
                if matches!(edge.kind, EdgeKind::Data { .. }) && in_cluster(graph, user) && !(averaged && gradient) {
                    stack.push(user);
                }
            }
        }
        seen
    };
    let dependent = per_replica(graph, false);
    let after = per_replica(graph, true);
    let mut gradients: BTreeSet<(NodeId, u32)> = BTreeSet::new();
    for &id in &order {
        if !dependent.contains(&id) || !tape.contains(&id) {
            continue;
        }
        for (user, edge) in graph.uses(id) {
            if let EdgeKind::Data { output, .. } = edge.kind {
                if in_cluster(graph, user) && !tape.contains(&user) {
                    gradients.insert((id, output));
                }
            }
        }
    }
    let sparse = match sparse_gradients(graph, &shapes, &gradients, &tape, &dependent) {
        Ok(sparse) => sparse,
        Err(mut refusals) => {
            errors.append(&mut refusals);
            Sparse::default()
        }
    };

    // Batch statistics in the forward computation.
    let mut loss_reductions: HashSet<NodeId> = HashSet::new();
    let mut averaged = Vec::new();
    for &out in &outputs {
        let Some(input) = graph.data_inputs(out).first().copied() else { continue };
        if !after.contains(&input.src) {
            continue;
        }
        match mean_over_batch(graph, &shapes, input.src) {
            Ok(reductions) => {
                loss_reductions.extend(reductions);
                averaged.push((out, input));
            }
            Err(reason) => errors.push(refuse(graph, input.src, reason)),
        }
    }
    for &id in &order {
        let node = graph.node(id);
        if !dependent.contains(&id) || tape.contains(&id) || loss_reductions.contains(&id) {
            continue;
        }
        let training_norm = node.op.starts_with("FusedBatchNorm")
            && node.attrs.get("is_training").and_then(AttrValue::as_bool) != Some(false);
        let batch_reduction = REDUCTIONS.contains(&&*node.op) && reduces_batch_axis(graph, &shapes, id) != Some(false);
        if training_norm || batch_reduction {
            errors.push(refuse(graph, id, batch_statistic_reason()));
        }
    }
    // Every variable write reads replica-invariant values once the
    // gradients and outputs are averaged.
    for &id in &order {
        let node = graph.node(id);
        if !writes_variable(&node.op) {
            continue;
        }
        if let Some(value) = graph.data_inputs(id).iter().skip(1).find(|i| after.contains(&i.src)) {
            let reason = format!(
                "it writes a variable from `{}`, which differs between replicas (it is not an averaged gradient): \
                 the replicas' copies of the variable would diverge",
                graph.node(value.src).name
            );
            errors.push(refuse(graph, id, reason));
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }

    // Rewrite: the replica count, the batch inputs, the averages.
    let n = i64::from(replicas);
    let metadata: Vec<NodeId> =
        order.iter().copied().filter(|&id| &*graph.node(id).op == "TPUReplicateMetadata").collect();
    for id in metadata {
        if in_cluster(graph, id) {
            graph.node_mut(id).attrs.insert("num_replicas", AttrValue::Int(n));
        }
    }
    let dense = gradients.len() - sparse.indices.len() - sparse.values.len();
    let sparse_count = sparse.indices.len();
    let mut report =
        DataParallel { replicas, gradients: dense, sparse_gradients: sparse_count, ..DataParallel::default() };
    for (index, &id) in batch.iter().enumerate() {
        report.batch_inputs.push(split_input(graph, id, replicas, index));
    }
    for &(id, k) in &gradients {
        let Some(dtype) = output_dtype(graph, id, k) else { continue };
        let base = graph.node(id).name.to_string();
        let (first, combined) = if sparse.indices.contains(&(id, k)) {
            let gathered = gather(graph, (id, k), &base, dtype, replicas);
            (gathered, gathered)
        } else if sparse.values.contains(&(id, k)) {
            let mean = scale(graph, (id, k), &base, dtype, replicas);
            (mean, gather(graph, (mean, 0), &base, dtype, replicas))
        } else {
            average(graph, id, k, dtype, replicas)
        };
        for (user, edge) in graph.uses(id) {
            let outside = in_cluster(graph, user) && !tape.contains(&user);
            if !outside || user == first || !matches!(edge.kind, EdgeKind::Data { output, .. } if output == k) {
                continue;
            }
            redirect(graph, user, (id, k), combined);
        }
    }
    for (out, input) in averaged {
        let k = input.output.unwrap_or(0);
        let Some(dtype) = output_dtype(graph, input.src, k) else { continue };
        let mean = average(graph, input.src, k, dtype, replicas);
        redirect(graph, out, (input.src, k), mean.1);
        report.averaged_outputs.push(graph.node(input.src).name.to_string());
    }
    for &id in &outputs {
        graph.node_mut(id).attrs.insert("num_replicas", AttrValue::Int(n));
    }

    Ok(report)
}

fn batch_statistic_reason() -> String {
    "it reduces over the batch axis in the forward computation (a batch statistic, such as batch \
     normalization's moments in training mode): each replica would use its own rows, which changes the step; \
     use the layer in inference mode, or without data parallelism"
        .into()
}

/// The sparse gradients among `gradients`: their indices and values.
#[derive(Debug, Default)]
struct Sparse {
    indices: BTreeSet<(NodeId, u32)>,
    values: BTreeSet<(NodeId, u32)>,
}

/// Finds the `IndexedSlices` among `gradients`: each integer gradient is
/// the indices of one, and its values are the float gradients that an op
/// reading the indices (outside the backward pass) also reads, directly or
/// through per-replica ops outside the backward pass. Refuses a gradient
/// that is neither float nor integer, indices that no values pair with,
/// and values whose rows do not match their indices.
fn sparse_gradients(
    graph: &Graph,
    shapes: &crate::ir::shapes::StaticShapes,
    gradients: &BTreeSet<(NodeId, u32)>,
    tape: &HashSet<NodeId>,
    dependent: &HashSet<NodeId>,
) -> Result<Sparse, Vec<PassError>> {
    let mut sparse = Sparse::default();
    let mut errors = Vec::new();
    let rows =
        |(id, k): (NodeId, u32)| shapes.of(Input { src: id, output: Some(k), span: Span::DETACHED })?.first().copied();
    for &(id, k) in gradients {
        match output_dtype(graph, id, k) {
            Some(dtype) if is_float(dtype) => continue,
            Some(DType::I32 | DType::I64) => {}
            _ => {
                errors.push(refuse(
                    graph,
                    id,
                    format!("output {k} is a gradient that is neither floating point nor integer indices"),
                ));
                continue;
            }
        }
        // The values: float gradients that the readers of the indices read too.
        let mut values = BTreeSet::new();
        for (reader, edge) in graph.uses(id) {
            if tape.contains(&reader) || !matches!(edge.kind, EdgeKind::Data { output, .. } if output == k) {
                continue;
            }
            let mut seen = HashSet::new();
            let mut stack: Vec<Input> =
                graph.data_inputs(reader).into_iter().filter(|i| (i.src, i.output.unwrap_or(0)) != (id, k)).collect();
            while let Some(input) = stack.pop() {
                let value = (input.src, input.output.unwrap_or(0));
                if gradients.contains(&value) {
                    if output_dtype(graph, value.0, value.1).is_some_and(is_float) {
                        values.insert(value);
                    }
                } else if !tape.contains(&input.src) && dependent.contains(&input.src) && seen.insert(input.src) {
                    stack.extend(graph.data_inputs(input.src));
                }
            }
        }
        if values.is_empty() {
            errors.push(refuse(
                graph,
                id,
                format!(
                    "output {k} is an integer gradient (the indices of an `IndexedSlices`, as an embedding lookup's \
                     gradient has), but no op reads it with float gradient values, so it cannot be gathered as a \
                     sparse gradient"
                ),
            ));
            continue;
        }
        for &value in &values {
            let (want, got) = (rows((id, k)), rows(value));
            if want.is_none() || want != got {
                errors.push(refuse(
                    graph,
                    value.0,
                    format!(
                        "output {} holds the values of the sparse gradient whose indices are `{}`, but its rows \
                         ({}) are not one per index ({}): the replicas' slices cannot be gathered",
                        value.1,
                        graph.node(id).name,
                        got.map_or("unknown".to_string(), |r| r.to_string()),
                        want.map_or("unknown".to_string(), |r| r.to_string()),
                    ),
                ));
            }
        }
        sparse.indices.insert((id, k));
        sparse.values.extend(values);
    }
    if errors.is_empty() {
        Ok(sparse)
    } else {
        Err(errors)
    }
}

fn is_float(dtype: DType) -> bool {
    matches!(dtype, DType::F32 | DType::F64 | DType::BF16 | DType::F16)
}

/// The constant axes a reduction reduces, made non-negative; `None` when
/// they are not constants or the rank of a negative axis is unknown.
fn reduced_axes(graph: &Graph, shapes: &crate::ir::shapes::StaticShapes, id: NodeId) -> Option<Vec<i64>> {
    let inputs = graph.data_inputs(id);
    let (data, axes) = (inputs.first()?, inputs.get(1)?);
    let axes_node = graph.node(axes.src);
    if &*axes_node.op != "Const" {
        return None;
    }
    let values = axes_node.attrs.get("value").and_then(AttrValue::as_tensor)?.to_f64_vec()?;
    let rank = shapes.of(*data).map(|s| s.len() as i64);
    values
        .into_iter()
        .map(|a| {
            let a = a as i64;
            if a >= 0 {
                Some(a)
            } else {
                rank.map(|r| a + r)
            }
        })
        .collect()
}

/// Whether the reduction `id` reduces axis 0; `None` when unknown.
fn reduces_batch_axis(graph: &Graph, shapes: &crate::ir::shapes::StaticShapes, id: NodeId) -> Option<bool> {
    let inputs = graph.data_inputs(id);
    let data = inputs.first()?;
    if shapes.of(*data).is_some_and(|s| s.is_empty()) {
        return Some(false);
    }
    Some(reduced_axes(graph, shapes, id)?.contains(&0))
}

/// The reductions that make `id` a mean over the batch, through `Identity`
/// ops: a `Mean` over axes including 0, or a `Sum` over them divided by a
/// constant. Otherwise the reason it is not one.
fn mean_over_batch(
    graph: &Graph,
    shapes: &crate::ir::shapes::StaticShapes,
    mut id: NodeId,
) -> Result<Vec<NodeId>, String> {
    while matches!(&*graph.node(id).op, "Identity" | "StopGradient") {
        match graph.data_inputs(id).first() {
            Some(i) => id = i.src,
            None => break,
        }
    }
    let node = graph.node(id);
    let not_mean = || {
        format!(
            "the step's output `{}` (`{}`) depends on the batch and is not a mean over it: data parallelism \
             averages the replicas' losses and gradients, which equals the global step only for a mean (fetch \
             the loss, and compute it with a mean over the batch)",
            node.name, node.op
        )
    };
    match &*node.op {
        "Mean" if reduces_batch_axis(graph, shapes, id) == Some(true) => Ok(vec![id]),
        "RealDiv" | "DivNoNan" | "Div" => {
            let inputs = graph.data_inputs(id);
            let (Some(sum), Some(count)) = (inputs.first(), inputs.get(1)) else { return Err(not_mean()) };
            let sum_node = graph.node(sum.src);
            let constant = &*graph.node(count.src).op == "Const";
            if &*sum_node.op == "Sum" && constant && reduces_batch_axis(graph, shapes, sum.src) == Some(true) {
                Ok(vec![sum.src])
            } else {
                Err(not_mean())
            }
        }
        _ => Err(not_mean()),
    }
}

/// Adds `CrossReplicaSum((id, k)) / replicas` to the cluster; returns the
/// sum node and the mean.
fn average(graph: &mut Graph, id: NodeId, k: u32, dtype: DType, replicas: u32) -> (NodeId, NodeId) {
    let base = graph.node(id).name.to_string();
    let sum = collective(graph, (id, k), &base, "CrossReplicaSum", "sum", dtype, replicas);
    let mean = scale(graph, (sum, 0), &base, dtype, replicas);
    (sum, mean)
}

/// Adds `AllGather(value)` over all replicas to the cluster, named after
/// the gradient `base`; returns it.
fn gather(graph: &mut Graph, value: (NodeId, u32), base: &str, dtype: DType, replicas: u32) -> NodeId {
    collective(graph, value, base, "AllGather", "gather", dtype, replicas)
}

/// Adds the collective `op` of `value` over the group of all replicas (a
/// constant `[1, replicas]` operand), named `<base>/data_parallel/<what>`;
/// returns it.
fn collective(
    graph: &mut Graph,
    (id, k): (NodeId, u32),
    name: &str,
    op: &str,
    what: &str,
    dtype: DType,
    replicas: u32,
) -> NodeId {
    let span = graph.node(id).span;
    let tag = AttrValue::str(CLUSTER);
    let group = TensorLit {
        dtype: DType::I32,
        shape: vec![1, i64::from(replicas)],
        data: TensorData::Int((0..replicas as i32).collect()),
    };
    let group = Node::op(graph.unique_name(&format!("{name}/data_parallel/group")), "Const")
        .with_attr("dtype", AttrValue::Type(DType::I32))
        .with_attr("value", AttrValue::Tensor(Arc::new(group)))
        .with_attr(TPU_REPLICATE, tag.clone());
    let node = Node::op(graph.unique_name(&format!("{name}/data_parallel/{what}")), op)
        .with_span(span)
        .with_attr("T", AttrValue::Type(dtype))
        .with_attr(TPU_REPLICATE, tag);
    let group = graph.add_node_unique(group);
    let node = graph.add_node_unique(node);
    graph.add_data_input(node, id, k, Span::DETACHED);
    graph.add_data_input(node, group, 0, Span::DETACHED);
    node
}

/// Adds `value / replicas` to the cluster, named after the gradient
/// `name`; returns it.
fn scale(graph: &mut Graph, (id, k): (NodeId, u32), name: &str, dtype: DType, replicas: u32) -> NodeId {
    let span = graph.node(id).span;
    let tag = AttrValue::str(CLUSTER);
    let count = TensorLit { dtype, shape: vec![], data: scalar(dtype, replicas) };
    let count = Node::op(graph.unique_name(&format!("{name}/data_parallel/replicas")), "Const")
        .with_attr("dtype", AttrValue::Type(dtype))
        .with_attr("value", AttrValue::Tensor(Arc::new(count)))
        .with_attr(TPU_REPLICATE, tag.clone());
    let mean = Node::op(graph.unique_name(&format!("{name}/data_parallel/mean")), "RealDiv")
        .with_span(span)
        .with_attr("T", AttrValue::Type(dtype))
        .with_attr(TPU_REPLICATE, tag);
    let count = graph.add_node_unique(count);
    let mean = graph.add_node_unique(mean);
    graph.add_data_input(mean, id, k, Span::DETACHED);
    graph.add_data_input(mean, count, 0, Span::DETACHED);
    mean
}

/// `value` as a scalar literal of the float `dtype`.
fn scalar(dtype: DType, value: u32) -> TensorData {
    match dtype {
        DType::F64 => TensorData::Double(vec![f64::from(value)]),
        DType::F16 => TensorData::Half(vec![i32::from(half::f16::from_f64(f64::from(value)).to_bits())]),
        DType::BF16 => TensorData::Half(vec![i32::from(half::bf16::from_f64(f64::from(value)).to_bits())]),
        _ => TensorData::Float(vec![value as f32]),
    }
}

/// Makes `user` read `to:0` where it read `from`.
fn redirect(graph: &mut Graph, user: NodeId, from: (NodeId, u32), to: NodeId) {
    let mut inputs = graph.inputs(user);
    for input in inputs.iter_mut() {
        if input.src == from.0 && input.output == Some(from.1) {
            *input = Input { src: to, output: Some(0), span: input.span };
        }
    }
    graph.set_inputs(user, &inputs);
}

/// Splits the placeholder `id` into one per replica behind a
/// `TPUReplicatedInput` of its name; returns the name.
fn split_input(graph: &mut Graph, id: NodeId, replicas: u32, index: usize) -> String {
    let name = graph.node(id).name.to_string();
    let template = graph.node(id).clone();
    let dtype = template.attrs.get("dtype").and_then(AttrValue::as_type);
    let first = graph.unique_name(&format!("{name}/replica_0"));
    // The rename cannot clash: the name is fresh.
    let _ = graph.rename(id, &first);
    let mut operands = vec![id];
    for r in 1..replicas {
        let mut copy =
            Node::op(graph.unique_name(&format!("{name}/replica_{r}")), "Placeholder").with_span(template.span);
        copy.attrs = template.attrs.clone();
        operands.push(graph.add_node_unique(copy));
    }
    let mut fan = Node::op(name.clone(), "TPUReplicatedInput")
        .with_span(template.span)
        .with_attr("N", AttrValue::Int(i64::from(replicas)))
        .with_attr("index", AttrValue::Int(index as i64))
        .with_attr("is_mirrored_variable", AttrValue::Bool(false))
        .with_attr("is_packed", AttrValue::Bool(false));
    let mut identity = Node::op(graph.unique_name(&format!("{name}/replicated_input")), "Identity")
        .with_span(template.span)
        .with_attr("_tpu_input_identity", AttrValue::Bool(true))
        .with_attr(TPU_REPLICATE, AttrValue::str(CLUSTER));
    if let Some(t) = dtype {
        fan = fan.with_attr("T", AttrValue::Type(t));
        identity = identity.with_attr("T", AttrValue::Type(t));
    }
    let users: Vec<NodeId> = graph.uses(id).into_iter().map(|(u, _)| u).collect();
    let fan = graph.add_node_unique(fan);
    let identity = graph.add_node_unique(identity);
    for user in users {
        let mut inputs = graph.inputs(user);
        for input in inputs.iter_mut().filter(|i| i.src == id) {
            input.src = identity;
        }
        graph.set_inputs(user, &inputs);
    }
    let srcs: Vec<(NodeId, u32)> = operands.iter().map(|&o| (o, 0)).collect();
    graph.add_data_inputs(fan, &srcs, Span::DETACHED);
    graph.add_data_input(identity, fan, 0, Span::DETACHED);
    graph.node(fan).name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gradient_tape_scope_is_a_path_segment() {
        assert!(in_gradient_tape("gradient_tape/sequential/dense/MatMul"));
        assert!(in_gradient_tape("outer/gradient_tape/Mul"));
        assert!(!in_gradient_tape("gradient_tape"));
        assert!(!in_gradient_tape("adam/IdentityN"));
        assert!(!in_gradient_tape("my_gradient_tape/Mul"));
    }

    #[test]
    fn the_backward_pass_holds_an_addn_between_tape_ops() {
        // x -> a (forward); gradient_tape/g1, gradient_tape/g2 -> AddN -> gradient_tape/g3 -> opt.
        let mut graph = Graph::new("main");
        let mut add = |name: &str, op: &str, inputs: &[NodeId]| {
            let id = graph.add_node(Node::op(name, op)).expect("a fresh name");
            for &i in inputs {
                graph.add_data_input(id, i, 0, Span::DETACHED);
            }
            id
        };
        let x = add("x", "Placeholder", &[]);
        let a = add("a", "Relu", &[x]);
        let g1 = add("gradient_tape/g1", "Mul", &[a]);
        let g2 = add("gradient_tape/g2", "Mul", &[a]);
        let sum = add("AddN", "AddN", &[g1, g2]);
        let g3 = add("gradient_tape/g3", "MatMul", &[x, sum]);
        let opt = add("adam/Square", "Square", &[g3]);
        let order = crate::ir::walk::post_order(&graph, graph.nodes_in_order(), |_, _| true);
        let tape = backward_pass(&graph, &order, &[]);
        assert!(tape.contains(&sum), "the AddN between tape ops is in the backward pass");
        assert!([g1, g2, g3].iter().all(|g| tape.contains(g)));
        assert!(!tape.contains(&a) && !tape.contains(&x) && !tape.contains(&opt));
    }
}
