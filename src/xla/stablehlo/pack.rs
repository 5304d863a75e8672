//! Packing the cross-replica sums of a program: the `CrossReplicaSum`s
//! that do not depend on one another (a step's gradients) are emitted as
//! few `stablehlo.all_reduce`s, one per element type, replica grouping and
//! pack of at most 30 MiB ([`Ctx::all_reduce_sum_many`]: one variadic
//! all-reduce, the small values concatenated into one buffer and each
//! large one in its own), as XLA's all-reduce
//! combiner gives TensorFlow's bridge. The graph pass
//! `fuse_all_reduce` does the same when static shapes give every sum's
//! size; this catches the sums it left (sizes unknown before typing).
//!
//! The order: the program's ops are emitted in their order, except that a
//! sum joins the open pack, and an op that reads a value of the pack or of
//! an op already held back (data or control) is held back too. The pack is
//! emitted, then the held-back ops (in their order, packing again), when
//! an op that is not held back touches a variable a held-back op touches,
//! before a call op (whose variables are not known here), and at the end.
//! Variables are the only state the emitter orders (everything else is
//! SSA values), so the program computes the same values; each element is
//! still summed on its own, so results are bit for bit the same. A
//! filter gradient is summed in the layout the convolution writes it
//! ([`filter_gradient`]), and a sum over groups of one replica each is no
//! op at all ([`Ctx::all_reduce_sum_many`]). Cost:
//! linear in the program's ops and edges for each pack emitted.

use std::collections::{BTreeMap, HashSet, VecDeque};

use super::ops::Call;
use super::text::{Ctx, Val};
use super::trace::Emitter;
use super::VARIABLE_OPS;
use crate::ir::{DType, Graph, NodeId};
use crate::xla::error::XlaError;

/// The largest buffer of one packed all-reduce: XLA's combine threshold.
const THRESHOLD_BYTES: u64 = crate::passes::fuse_all_reduce::DEFAULT_THRESHOLD_BYTES;

/// The sums one all-reduce can take: an element type and a replica grouping.
type Grouping = (DType, Vec<Vec<i64>>);

/// One step of the emission order.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// An op, emitted as usual.
    Op(NodeId),
    /// Cross-replica sums emitted together.
    Pack(Vec<NodeId>),
}

/// Whether `id` is a sum that can join a pack: a `CrossReplicaSum` whose
/// result is not a constant and whose grouping (if any) is.
fn packable(e: &Emitter, id: NodeId) -> bool {
    let graph = e.graph;
    if &*graph.node(id).op != "CrossReplicaSum" {
        return false;
    }
    let inputs = graph.data_inputs(id);
    let computed = e.traced.values.get(&(id, 0)).is_some_and(|t| !t.constant);
    let grouping_known = inputs.get(1).is_none_or(|g| {
        e.traced.values.get(&(g.src, g.output.unwrap_or(0))).is_some_and(|t| t.constant && t.value.is_some())
    });
    computed && inputs.len() <= 2 && grouping_known
}

/// The variables (handle nodes) op `id` reads or writes.
fn variables(graph: &Graph, id: NodeId) -> Vec<NodeId> {
    let op = &*graph.node(id).op;
    let k = if VARIABLE_OPS.contains(&op) { 1 } else { super::ops::state::handle_operands(op) };
    graph.data_inputs(id).iter().take(k).map(|i| i.src).collect()
}

/// The emission order of `nodes` (in dependency order) with packs.
pub(super) fn schedule(e: &Emitter, nodes: &[NodeId]) -> Vec<Step> {
    let graph = e.graph;
    let mut todo: VecDeque<NodeId> = nodes.iter().copied().collect();
    let mut out = Vec::with_capacity(nodes.len());
    let mut pack: Vec<NodeId> = Vec::new();
    let mut held: Vec<NodeId> = Vec::new();
    // The pack's and the held-back ops' ids, and the held-back ops' variables.
    let mut late: HashSet<NodeId> = HashSet::new();
    let mut late_vars: HashSet<NodeId> = HashSet::new();
    loop {
        while let Some(id) = todo.pop_front() {
            if !late.is_empty() && graph.inputs(id).iter().any(|i| late.contains(&i.src)) {
                held.push(id);
                late.insert(id);
                late_vars.extend(variables(graph, id));
                continue;
            }
            if packable(e, id) {
                pack.push(id);
                late.insert(id);
                continue;
            }
            let barrier = crate::ir::functions::call_kind(&graph.node(id).op).is_some()
                || variables(graph, id).iter().any(|v| late_vars.contains(v));
            if barrier && !late.is_empty() {
                // The pack first, then the held-back ops, then this op again.
                todo.push_front(id);
                flush(&mut pack, &mut held, &mut todo, &mut out);
                late.clear();
                late_vars.clear();
                continue;
            }
            out.push(Step::Op(id));
        }
        if late.is_empty() {
            return out;
        }
        // A program that ends in sums and the ops reading them.
        flush(&mut pack, &mut held, &mut todo, &mut out);
        late.clear();
        late_vars.clear();
    }
}

/// Emits the open pack and puts the held-back ops before the rest.
fn flush(pack: &mut Vec<NodeId>, held: &mut Vec<NodeId>, todo: &mut VecDeque<NodeId>, out: &mut Vec<Step>) {
    match pack.len() {
        0 => {}
        1 => out.push(Step::Op(pack[0])),
        _ => out.push(Step::Pack(std::mem::take(pack))),
    }
    pack.clear();
    for &id in held.iter().rev() {
        todo.push_front(id);
    }
    held.clear();
}

/// The bytes of `v` (elements of an unknown width count one byte).
fn size(v: &Val) -> u64 {
    let width = crate::passes::fuse_all_reduce::dtype_bytes(v.ty.dtype).unwrap_or(1);
    (v.ty.count() as u64).saturating_mul(width)
}

fn lowering(graph: &Graph, id: NodeId, message: impl Into<String>) -> XlaError {
    XlaError::lowering(graph.node(id), message)
}

/// `[kh, kw, in, out]` to `[in, kh, kw, out]`: a filter gradient in the
/// layout XLA:CPU's convolution writes it (the input's channels play the
/// batch).
const TO_CONV_LAYOUT: [usize; 4] = [2, 0, 1, 3];
/// `[in, kh, kw, out]` back to `[kh, kw, in, out]`.
const FROM_CONV_LAYOUT: [usize; 4] = [1, 2, 0, 3];

/// Whether `id` is a filter gradient (`Conv2DBackpropFilter`, through
/// `Identity`s). Its sum is taken in the convolution's own layout and
/// turned back after: XLA:CPU gives an all-reduce's operands its default
/// layout, so summing the filter gradient as `[kh, kw, in, out]` made a
/// transposed copy of every such gradient (45 MB per replica and step on
/// ResNet50), where summing it as `[in, kh, kw, out]` needs none and the
/// transpose back fuses into the update that reads the sum. Each element
/// is summed as before, so the results are bit for bit the same.
fn filter_gradient(graph: &Graph, mut id: NodeId) -> bool {
    loop {
        match &*graph.node(id).op {
            "Conv2DBackpropFilter" => return true,
            "Identity" => match graph.data_inputs(id).first() {
                Some(i) => id = i.src,
                None => return false,
            },
            _ => return false,
        }
    }
}

fn transpose(ctx: &mut Ctx, v: &Val, perm: [usize; 4]) -> Val {
    let shape = perm.iter().map(|&i| v.ty.shape[i]).collect();
    let attrs = format!("permutation = array<i64: {}, {}, {}, {}>", perm[0], perm[1], perm[2], perm[3]);
    ctx.op("stablehlo.transpose", &[v], &attrs, v.ty.with_shape(shape))
}

/// Emits the sums `ids` as one `stablehlo.all_reduce` per element type
/// and replica grouping.
pub(super) fn emit(e: &mut Emitter, ctx: &mut Ctx, ids: &[NodeId]) -> Result<(), XlaError> {
    let graph = e.graph;
    let mut parts: BTreeMap<Grouping, Vec<(NodeId, Val)>> = BTreeMap::new();
    for &id in ids {
        let node = graph.node(id);
        let inputs = graph.data_inputs(id);
        let keys: Vec<(NodeId, u32)> = inputs.iter().map(|i| (i.src, i.output.unwrap_or(0))).collect();
        let x = e.value(ctx, *keys.first().ok_or_else(|| lowering(graph, id, "reads nothing"))?)?;
        let consts =
            keys.iter().map(|k| e.traced.values.get(k).filter(|t| t.constant).and_then(|t| t.value.clone())).collect();
        let outputs = [x.ty.clone()];
        let mut vals = vec![x.clone()];
        // The grouping is a constant: its value stands in for its operand.
        vals.extend(keys.iter().skip(1).map(|_| x.clone()));
        let call = Call {
            op: &node.op,
            attrs: &node.attrs,
            inputs: vals,
            consts,
            outputs: &outputs,
            num_replicas: e.replicas,
        };
        let groups = super::ops::collective::groups(&call, 1).map_err(|m| lowering(graph, id, m))?;
        let x = if filter_gradient(graph, inputs[0].src) && x.ty.shape.len() == 4 {
            transpose(ctx, &x, TO_CONV_LAYOUT)
        } else {
            x
        };
        parts.entry((x.ty.dtype, groups)).or_default().push((id, x));
    }
    for ((_, groups), members) in parts {
        // Buffers of at most XLA's combine threshold, as the graph pass makes them.
        let mut start = 0;
        while start < members.len() {
            let mut end = start + 1;
            let mut bytes = size(&members[start].1);
            while end < members.len() && bytes.saturating_add(size(&members[end].1)) <= THRESHOLD_BYTES {
                bytes += size(&members[end].1);
                end += 1;
            }
            let values: Vec<&Val> = members[start..end].iter().map(|(_, v)| v).collect();
            let sums = ctx.all_reduce_sum_many(&values, &groups);
            for ((id, x), s) in members[start..end].iter().zip(sums) {
                let s = if filter_gradient(graph, graph.data_inputs(*id)[0].src) && x.ty.shape.len() == 4 {
                    transpose(ctx, &s, FROM_CONV_LAYOUT)
                } else {
                    s
                };
                e.env.insert((*id, 0), s);
            }
            start = end;
        }
    }
    Ok(())
}
