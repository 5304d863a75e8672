//! Gradient functions of the indexing family: splits and unstacking,
//! the first-version `Concat`, `Gather` and `Reverse`, `ReverseSequence`, `Roll`, `TopKV2`, gathers and
//! scatters by index tuples, segment reductions and the
//! gradient of a strided slice.
//!
//! They follow TensorFlow's registered gradients (`array_grad.py`,
//! `math_grad.py`) and emit the same standard ops with dynamic shapes.
//! Ops with several outputs (`Split`, `SplitV`, `Unpack`) take the
//! gradients of all their outputs: an output that received none counts
//! as zeros of its shape. Segment ids below zero are dropped, as the
//! forward ops drop them: their rows get a zero gradient. Cost: a
//! constant number of ops per differentiated op.

use super::emitter::{Attr, Emitter, TAttr, Tensor};
use super::functions::Unsupported;
use crate::ir::{AttrValue, DType, NodeId};

type Grads = Result<Vec<Option<Tensor>>, Unsupported>;

/// The gradients of `op`'s data inputs given those of its outputs, or
/// `None` when `op_type` is not one of this family's ops.
pub fn gradient(
    e: &mut Emitter<'_>,
    op: NodeId,
    op_type: &str,
    inputs: &[Tensor],
    out_grads: &[Option<Tensor>],
) -> Option<Grads> {
    let multi = matches!(op_type, "Split" | "SplitV" | "Unpack");
    if multi {
        return Some(multi_output(e, op, op_type, inputs, out_grads));
    }
    let known = matches!(
        op_type,
        "Concat"
            | "Gather"
            | "GatherNd"
            | "Reverse"
            | "ReverseSequence"
            | "Roll"
            | "ScatterNd"
            | "StridedSliceGrad"
            | "TensorScatterAdd"
            | "TensorScatterMax"
            | "TensorScatterMin"
            | "TensorScatterSub"
            | "TensorScatterUpdate"
            | "TopKV2"
            | "UnsortedSegmentMax"
            | "UnsortedSegmentMin"
            | "UnsortedSegmentProd"
            | "UnsortedSegmentSum"
    );
    if !known {
        return None;
    }
    let Some(g) = out_grads.first().copied().flatten() else {
        return Some(Err(Some("only the gradient of output 0 is supported".into())));
    };
    Some(single_output(e, op, op_type, inputs, g))
}

fn input(inputs: &[Tensor], i: usize) -> Result<Tensor, Unsupported> {
    inputs.get(i).copied().ok_or_else(|| Some(format!("expected at least {} inputs", i + 1)))
}

/// `Split`, `SplitV` and `Unpack`: the output gradients put back together.
fn multi_output(
    e: &mut Emitter<'_>,
    op: NodeId,
    op_type: &str,
    inputs: &[Tensor],
    out_grads: &[Option<Tensor>],
) -> Grads {
    let dtype = out_grads.iter().flatten().next().and_then(|&g| e.dtype_of(g));
    let ta = e.t_attr(dtype);
    let grads: Vec<Tensor> = out_grads
        .iter()
        .enumerate()
        .map(|(k, g)| match g {
            Some(g) => *g,
            None => {
                let out = Tensor { node: op, output: k as u32 };
                e.emit("ZerosLike", "zeros_like", &[out], ta.clone())
            }
        })
        .collect();
    let n = AttrValue::Int(grads.len() as i64);
    Ok(match op_type {
        "Split" => {
            // Split(axis, value): the pieces concatenated along the same axis.
            let axis = input(inputs, 0)?;
            let mut parts = grads;
            parts.push(axis);
            let attrs = [("N", n), ("Tidx", AttrValue::Type(DType::I32))].into_iter().chain(ta);
            vec![None, Some(e.emit("ConcatV2", "concat", &parts, attrs))]
        }
        "SplitV" => {
            // SplitV(value, size_splits, axis).
            let axis = input(inputs, 2)?;
            let tidx = e.dtype_of(axis).unwrap_or(DType::I32);
            let mut parts = grads;
            parts.push(axis);
            let attrs = [("N", n), ("Tidx", AttrValue::Type(tidx))].into_iter().chain(ta);
            vec![Some(e.emit("ConcatV2", "concat", &parts, attrs)), None, None]
        }
        _ => {
            // Unpack(value) {axis}: the pieces stacked on the same axis.
            let axis = e.graph.node(op).attrs.get_int("axis").unwrap_or(0);
            let attrs = [("N", n), ("axis", AttrValue::Int(axis))].into_iter().chain(ta);
            vec![Some(e.emit("Pack", "stack", &grads, attrs))]
        }
    })
}

fn single_output(e: &mut Emitter<'_>, op: NodeId, op_type: &str, inputs: &[Tensor], g: Tensor) -> Grads {
    let x = |i: usize| input(inputs, i);
    let dtype = e.dtype_of(g);
    let ta = e.t_attr(dtype);
    Ok(match op_type {
        "Concat" => {
            // Concat(concat_dim, values...) differentiates as ConcatV2 with the axis moved last.
            let (&axis, values) = inputs.split_first().ok_or_else(|| Some("Concat needs an axis".to_string()))?;
            let mut rotated = values.to_vec();
            rotated.push(axis);
            let mut grads = super::nn_functions::gradient(e, op, "ConcatV2", &rotated, g)?;
            grads.pop();
            grads.insert(0, None);
            grads
        }
        "Gather" => {
            // Gather(params, indices) differentiates as GatherV2 along a constant axis 0.
            let (params, indices) = (x(0)?, x(1)?);
            let name = e.fresh_name("axis");
            let axis = e.int_const_named(name, &[0], true);
            let mut grads = super::nn_functions::gradient(e, op, "GatherV2", &[params, indices, axis], g)?;
            grads.truncate(2);
            grads
        }
        "Reverse" => {
            // The gradient is reversed back along the same dimensions.
            let dims = x(1)?;
            vec![Some(e.emit("Reverse", "Reverse", &[g, dims], ta)), None]
        }
        "ReverseSequence" => {
            // Reversing the same prefixes again puts the gradient back.
            let lengths = x(1)?;
            let attrs = &e.graph.node(op).attrs;
            let copied: Vec<Attr> = ["seq_dim", "batch_dim", "Tlen"]
                .iter()
                .filter_map(|&k| attrs.get(k).cloned().map(|v| (k, v)))
                .chain(ta)
                .collect();
            vec![Some(e.emit("ReverseSequence", "ReverseSequence", &[g, lengths], copied)), None]
        }
        "Roll" => {
            // Rolled back by the opposite shifts along the same axes.
            let (shift, axis) = (x(1)?, x(2)?);
            let ts = e.dtype_of(shift);
            let back = e.emit("Neg", "Neg", &[shift], e.t_attr(ts));
            let attrs = &e.graph.node(op).attrs;
            let copied: Vec<Attr> =
                ["Tshift", "Taxis"].iter().filter_map(|&k| attrs.get(k).cloned().map(|v| (k, v))).chain(ta).collect();
            vec![Some(e.emit("Roll", "Roll", &[g, back, axis], copied)), None, None]
        }
        "GatherNd" => {
            // GatherNd(params, indices): g scattered back to where it was gathered from.
            let (params, indices) = (x(0)?, x(1)?);
            let shape = e.shape("Shape", params);
            vec![Some(scatter_nd(e, indices, g, shape, &ta)), None]
        }
        "ScatterNd" => {
            // ScatterNd(indices, updates, shape): each update's gradient is read where it went.
            let indices = x(0)?;
            vec![None, Some(gather_nd(e, g, indices, &ta)), None]
        }
        "StridedSliceGrad" => {
            // StridedSliceGrad(shape, begin, end, strides, dy) is linear in dy: slice g the same way.
            let (begin, end, strides) = (x(1)?, x(2)?, x(3)?);
            let attrs = slice_attrs(e, op, &ta);
            let dy = e.emit("StridedSlice", "StridedSlice", &[g, begin, end, strides], attrs);
            vec![None, None, None, None, Some(dy)]
        }
        "TensorScatterAdd" | "TensorScatterSub" | "TensorScatterUpdate" => {
            // The tensor passes g on (zeroed where an update replaced it); an update reads g where it went.
            let (indices, updates) = (x(1)?, x(2)?);
            let read = gather_nd(e, g, indices, &ta);
            let (dt, du) = match op_type {
                "TensorScatterAdd" => (g, read),
                "TensorScatterSub" => (g, e.emit("Neg", "Neg", &[read], ta.clone())),
                _ => {
                    let zeros = e.emit("ZerosLike", "zeros_like", &[updates], ta.clone());
                    let tindices = tindices(e, indices);
                    let attrs = ta.clone().into_iter().chain(tindices);
                    (e.emit("TensorScatterUpdate", "TensorScatterUpdate", &[g, indices, zeros], attrs), read)
                }
            };
            vec![Some(dt), None, Some(du)]
        }
        "TensorScatterMax" | "TensorScatterMin" => tensor_scatter_extreme(e, op, inputs, g, &ta)?,
        "TopKV2" => vec![Some(top_k_grad(e, op, x(0)?, g, &ta)), None],
        "UnsortedSegmentSum" => {
            let ids = x(1)?;
            let (clipped, keep) = clip_ids(e, ids);
            vec![Some(gather_drop_negatives(e, g, clipped, keep, ids, &ta)), None, None]
        }
        "UnsortedSegmentMax" | "UnsortedSegmentMin" => segment_extreme(e, op, inputs, g, &ta)?,
        _ => segment_prod(e, op, inputs, g, &ta)?,
    })
}

/// The `Tindices` attribute for an index tensor.
fn tindices(e: &mut Emitter<'_>, indices: Tensor) -> Option<Attr> {
    e.dtype_of(indices).map(|d| ("Tindices", AttrValue::Type(d)))
}

/// `GatherNd(params, indices)`.
fn gather_nd(e: &mut Emitter<'_>, params: Tensor, indices: Tensor, ta: &TAttr) -> Tensor {
    let tp = ta.clone().map(|(_, v)| ("Tparams", v));
    let attrs = tp.into_iter().chain(tindices(e, indices));
    e.emit("GatherNd", "GatherNd", &[params, indices], attrs)
}

/// `ScatterNd(indices, updates, shape)`; the shape is cast to the indices' type as TF requires.
fn scatter_nd(e: &mut Emitter<'_>, indices: Tensor, updates: Tensor, shape: Tensor, ta: &TAttr) -> Tensor {
    let ti = e.dtype_of(indices).unwrap_or(DType::I32);
    let shape = if ti == DType::I32 {
        shape
    } else {
        let attrs = [("SrcT", AttrValue::Type(DType::I32)), ("DstT", AttrValue::Type(ti))];
        e.emit("Cast", "Cast", &[shape], attrs)
    };
    let attrs = ta.clone().into_iter().chain(Some(("Tindices", AttrValue::Type(ti))));
    e.emit("ScatterNd", "ScatterNd", &[indices, updates, shape], attrs)
}

/// A strided slice's masks copied from `op`, with `Index = i32`.
fn slice_attrs(e: &Emitter<'_>, op: NodeId, ta: &TAttr) -> Vec<Attr> {
    let attrs = &e.graph.node(op).attrs;
    let keys = ["begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask"];
    let index = attrs.get("Index").cloned().unwrap_or(AttrValue::Type(DType::I32));
    keys.iter()
        .filter_map(|&k| attrs.get(k).cloned().map(|v| (k, v)))
        .chain([("Index", index)])
        .chain(ta.clone())
        .collect()
}

/// `Maximum(ids, 0)` and `GreaterEqual(ids, 0)`: ids safe to gather with, and which rows count.
fn clip_ids(e: &mut Emitter<'_>, ids: Tensor) -> (Tensor, Tensor) {
    let dtype = e.dtype_of(ids);
    let it = e.t_attr(dtype);
    let zeros = e.emit("ZerosLike", "zeros_like", &[ids], it.clone());
    let clipped = e.emit("Maximum", "Maximum", &[ids, zeros], it.clone());
    let keep = e.emit("GreaterEqual", "GreaterEqual", &[ids, zeros], it);
    (clipped, keep)
}

/// `keep` (shaped like `ids`) reshaped to broadcast against rows gathered by `ids` from `like`.
fn row_mask(e: &mut Emitter<'_>, keep: Tensor, ids: Tensor, gathered: Tensor) -> Tensor {
    let i32_t = e.t_attr(Some(DType::I32));
    let ids_shape = e.shape("Shape", ids);
    let full = e.shape("Shape_1", gathered);
    let dtype = e.dtype_of(ids);
    let rank = e.emit("Rank", "Rank", &[ids], e.t_attr(dtype));
    let expand = e.fresh_name("ExpandDims");
    let dim = e.int_const_named(format!("{expand}/dim"), &[0], true);
    let begin = e.emit_named(expand, "ExpandDims", &[rank, dim], i32_t.clone());
    let slice = e.fresh_name("Slice");
    let size = e.int_const_named(format!("{slice}/size"), &[-1], false);
    let idx = [("Index", AttrValue::Type(DType::I32))].into_iter().chain(i32_t.clone());
    let rest = e.emit_named(slice, "Slice", &[full, begin, size], idx);
    let ones = e.emit("OnesLike", "ones_like", &[rest], i32_t.clone());
    let concat = e.fresh_name("concat");
    let axis = e.int_const_named(format!("{concat}/axis"), &[0], true);
    let attrs = [("N", AttrValue::Int(2)), ("Tidx", AttrValue::Type(DType::I32))].into_iter().chain(i32_t);
    let shape = e.emit_named(concat, "ConcatV2", &[ids_shape, ones, axis], attrs);
    e.emit("Reshape", "Reshape", &[keep, shape], e.t_attr(Some(DType::Bool)))
}

/// `GatherV2(x, clipped, 0)` with the rows of negative ids zeroed.
fn gather_drop_negatives(
    e: &mut Emitter<'_>,
    x: Tensor,
    clipped: Tensor,
    keep: Tensor,
    ids: Tensor,
    ta: &TAttr,
) -> Tensor {
    let gathered = gather_rows(e, x, clipped, ta);
    let mask = row_mask(e, keep, ids, gathered);
    let zeros = e.emit("ZerosLike", "zeros_like", &[gathered], ta.clone());
    e.emit("SelectV2", "SelectV2", &[mask, gathered, zeros], ta.clone())
}

/// `GatherV2(x, ids, 0)`.
fn gather_rows(e: &mut Emitter<'_>, x: Tensor, ids: Tensor, ta: &TAttr) -> Tensor {
    let gather = e.fresh_name("GatherV2");
    let axis = e.int_const_named(format!("{gather}/axis"), &[0], true);
    let tp = ta.clone().map(|(_, v)| ("Tparams", v));
    let attrs = tp.into_iter().chain(tindices(e, ids)).chain([("Taxis", AttrValue::Type(DType::I32))]);
    e.emit_named(gather, "GatherV2", &[x, ids, axis], attrs)
}

/// `Cast(b, dtype)` of a boolean tensor.
fn cast_bool(e: &mut Emitter<'_>, b: Tensor, ta: &TAttr) -> Tensor {
    let dst = ta.as_ref().map(|(_, v)| v.clone()).unwrap_or(AttrValue::Type(DType::F32));
    e.emit("Cast", "Cast", &[b], [("SrcT", AttrValue::Type(DType::Bool)), ("DstT", dst)])
}

/// `UnsortedSegmentSum(data, ids, num)` with the attributes of the forward op `op`.
fn segment_sum(e: &mut Emitter<'_>, op: NodeId, data: Tensor, ids: Tensor, num: Tensor, ta: &TAttr) -> Tensor {
    let attrs = &e.graph.node(op).attrs;
    let copied: Vec<Attr> = ["Tindices", "Tnumsegments"]
        .iter()
        .filter_map(|&k| attrs.get(k).cloned().map(|v| (k, v)))
        .chain(ta.clone())
        .collect();
    e.emit("UnsortedSegmentSum", "UnsortedSegmentSum", &[data, ids, num], copied)
}

/// `UnsortedSegmentMax`/`Min(data, ids, num)`: each segment's gradient is shared among the data
/// elements equal to its extreme.
fn segment_extreme(e: &mut Emitter<'_>, op: NodeId, inputs: &[Tensor], g: Tensor, ta: &TAttr) -> Grads {
    let (data, ids, num) = (input(inputs, 0)?, input(inputs, 1)?, input(inputs, 2)?);
    let (clipped, keep) = clip_ids(e, ids);
    let y = Tensor::of(op);
    let picked = gather_rows(e, y, clipped, ta);
    let mask = row_mask(e, keep, ids, picked);
    let equal = e.emit("Equal", "Equal", &[data, picked], ta.clone());
    let selected = e.emit("LogicalAnd", "LogicalAnd", &[equal, mask], None);
    let ones = cast_bool(e, selected, ta);
    let count = segment_sum(e, op, ones, ids, num, ta);
    let share = e.emit("RealDiv", "truediv", &[g, count], ta.clone());
    let spread = gather_rows(e, share, clipped, ta);
    let zeros = e.emit("ZerosLike", "zeros_like", &[spread], ta.clone());
    Ok(vec![Some(e.emit("SelectV2", "SelectV2", &[selected, spread, zeros], ta.clone())), None, None])
}

/// `UnsortedSegmentProd(data, ids, num)`: each element's gradient is the product of the rest of
/// its segment, computed without dividing by zero (a segment with two zeros gets none).
fn segment_prod(e: &mut Emitter<'_>, op: NodeId, inputs: &[Tensor], g: Tensor, ta: &TAttr) -> Grads {
    let (data, ids, num) = (input(inputs, 0)?, input(inputs, 1)?, input(inputs, 2)?);
    let i32_t = e.t_attr(Some(DType::I32));
    let zeros = e.emit("ZerosLike", "zeros_like", &[data], ta.clone());
    let is_zero = e.emit("Equal", "Equal", &[data, zeros], ta.clone());
    let zero_count = e.emit(
        "Cast",
        "Cast",
        &[is_zero],
        [("SrcT", AttrValue::Type(DType::Bool)), ("DstT", AttrValue::Type(DType::I32))],
    );
    let zero_count = segment_sum(e, op, zero_count, ids, num, &i32_t);
    let one = e.fresh_name("Greater");
    let one = e.int_const_named(format!("{one}/y"), &[1], true);
    let several = e.emit("Greater", "Greater", &[zero_count, one], i32_t);
    let g_zeros = e.emit("ZerosLike", "zeros_like", &[g], ta.clone());
    let g = e.emit("SelectV2", "SelectV2", &[several, g_zeros, g], ta.clone());
    let ones = e.emit("OnesLike", "ones_like", &[data], ta.clone());
    let non_zero = e.emit("SelectV2", "SelectV2", &[is_zero, ones, data], ta.clone());
    let attrs = &e.graph.node(op).attrs;
    let copied: Vec<Attr> = ["Tindices", "Tnumsegments"]
        .iter()
        .filter_map(|&k| attrs.get(k).cloned().map(|v| (k, v)))
        .chain(ta.clone())
        .collect();
    let non_zero_prod = e.emit("UnsortedSegmentProd", "UnsortedSegmentProd", &[non_zero, ids, num], copied);
    let (clipped, keep) = clip_ids(e, ids);
    let prod = gather_rows(e, Tensor::of(op), clipped, ta);
    let rest_prod = gather_rows(e, non_zero_prod, clipped, ta);
    let divided = e.emit("RealDiv", "truediv", &[prod, non_zero], ta.clone());
    let partial = e.emit("SelectV2", "SelectV2", &[is_zero, rest_prod, divided], ta.clone());
    let spread = gather_drop_negatives(e, g, clipped, keep, ids, ta);
    Ok(vec![Some(e.emit("Mul", "mul", &[spread, partial], ta.clone())), None, None])
}

/// `TensorScatterMax`/`Min(tensor, indices, updates)`: the gradient goes to the tensor elements
/// and updates equal to the result, shared among ties.
fn tensor_scatter_extreme(e: &mut Emitter<'_>, op: NodeId, inputs: &[Tensor], g: Tensor, ta: &TAttr) -> Grads {
    let (tensor, indices, updates) = (input(inputs, 0)?, input(inputs, 1)?, input(inputs, 2)?);
    let z = Tensor::of(op);
    let at_x = e.emit("Equal", "Equal", &[tensor, z], ta.clone());
    let x_ind = cast_bool(e, at_x, ta);
    let z_at = gather_nd(e, z, indices, ta);
    let at_y = e.emit("Equal", "Equal_1", &[updates, z_at], ta.clone());
    let y_ind = cast_bool(e, at_y, ta);
    let shape = e.shape("Shape", tensor);
    let y_count = scatter_nd(e, indices, y_ind, shape, ta);
    let count = e.emit("AddV2", "add", &[x_ind, y_count], ta.clone());
    let share = e.emit("RealDiv", "truediv", &[g, count], ta.clone());
    let dx = e.emit("Mul", "mul", &[share, x_ind], ta.clone());
    let read = gather_nd(e, share, indices, ta);
    let dy = e.emit("Mul", "mul_1", &[read, y_ind], ta.clone());
    Ok(vec![Some(dx), None, Some(dy)])
}

/// The last entry of a `Shape` tensor as a scalar i32 tensor (a shrinking `StridedSlice`).
pub(super) fn last_of_shape(e: &mut Emitter<'_>, shape: Tensor) -> Tensor {
    let i32_t = e.t_attr(Some(DType::I32));
    let name = e.fresh_name("strided_slice");
    let begin = e.int_const_named(format!("{name}/begin"), &[-1], false);
    let end = e.int_const_named(format!("{name}/end"), &[0], false);
    let strides = e.int_const_named(format!("{name}/strides"), &[1], false);
    let masks = [
        ("begin_mask", AttrValue::Int(0)),
        ("end_mask", AttrValue::Int(1)),
        ("ellipsis_mask", AttrValue::Int(0)),
        ("new_axis_mask", AttrValue::Int(0)),
        ("shrink_axis_mask", AttrValue::Int(1)),
        ("Index", AttrValue::Type(DType::I32)),
    ];
    e.emit_named(name, "StridedSlice", &[shape, begin, end, strides], masks.into_iter().chain(i32_t))
}

/// `TopKV2(input, k)`: each value's gradient summed into the input element it came from. Rows are
/// flattened: an index `i` of row `r` addresses element `r · n + i` of the flat input.
pub(super) fn top_k_grad(e: &mut Emitter<'_>, op: NodeId, input: Tensor, g: Tensor, ta: &TAttr) -> Tensor {
    let i32_t = e.t_attr(Some(DType::I32));
    let shape = e.shape("Shape", input);
    let n = last_of_shape(e, shape);
    let max = e.fresh_name("Maximum");
    let one = e.int_const_named(format!("{max}/y"), &[1], true);
    let n = e.emit_named(max, "Maximum", &[n, one], i32_t.clone());
    let size = e.emit("Size", "Size", &[input], [("out_type", AttrValue::Type(DType::I32))]);
    let range = e.fresh_name("range");
    let start = e.int_const_named(format!("{range}/start"), &[0], true);
    let offsets = e.emit_named(range, "Range", &[start, size, n], [("Tidx", AttrValue::Type(DType::I32))]);
    let expand = e.fresh_name("ExpandDims");
    let dim = e.int_const_named(format!("{expand}/dim"), &[-1], true);
    let offsets = e.emit_named(expand, "ExpandDims", &[offsets, dim], i32_t.clone());
    let rows = e.emit("FloorDiv", "floordiv", &[size, n], i32_t.clone());
    let stack = e.fresh_name("stack");
    let minus_one = e.int_const_named(format!("{stack}/values_1"), &[-1], true);
    let pack = [("N", AttrValue::Int(2)), ("axis", AttrValue::Int(0))].into_iter().chain(i32_t.clone());
    let rows_shape = e.emit_named(stack, "Pack", &[rows, minus_one], pack);
    let indices = Tensor { node: op, output: 1 };
    let indices = if e.dtype_of(indices) == Some(DType::I64) {
        let attrs = [("SrcT", AttrValue::Type(DType::I64)), ("DstT", AttrValue::Type(DType::I32))];
        e.emit("Cast", "Cast", &[indices], attrs)
    } else {
        indices
    };
    let by_row = e.emit("Reshape", "Reshape", &[indices, rows_shape], i32_t.clone());
    let global = e.emit("AddV2", "add", &[by_row, offsets], i32_t.clone());
    let flat = e.fresh_name("Reshape_1");
    let all = e.int_const_named(format!("{flat}/shape"), &[-1], false);
    let global = e.emit_named(flat, "Reshape", &[global, all], i32_t.clone());
    let flat_g = e.fresh_name("Reshape_2");
    let all = e.int_const_named(format!("{flat_g}/shape"), &[-1], false);
    let values = e.emit_named(flat_g, "Reshape", &[g, all], ta.clone());
    let attrs = [("Tindices", AttrValue::Type(DType::I32)), ("Tnumsegments", AttrValue::Type(DType::I32))];
    let summed = e.emit(
        "UnsortedSegmentSum",
        "UnsortedSegmentSum",
        &[values, global, size],
        attrs.into_iter().chain(ta.clone()),
    );
    e.emit("Reshape", "Reshape_3", &[summed, shape], ta.clone())
}
