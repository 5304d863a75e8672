//! Gradient functions of the data-dependent and update ops, as TensorFlow
//! registers them:
//! - `CumulativeLogsumexp`: the incoming gradient split into its positive
//!   and negative parts, each taken to the log domain (the dtype's lowest
//!   value where the part is empty), scanned the other way from the output
//!   and brought back with `exp(... + x)`; the difference is `x`'s gradient.
//! - `TensorStridedSliceUpdate`: the input gets the gradient with the slice
//!   zeroed; the value gets the slice of the gradient, summed over the axes
//!   it was broadcast along.
//! - `SparseToDense`: the values get the gradient at their indices, the
//!   default value the sum of the rest.
//! - `ParallelDynamicStitch`: each data input gets the gradient's rows at
//!   its indices.
//! - `ApproxTopK`: the values' gradient scattered to the input at the
//!   indices, as `TopKV2`'s.
//! - `ResourceGather`: the variable (its handle) gets the gathered rows'
//!   gradients summed into a dense tensor of the variable's shape, as
//!   TensorFlow's `IndexedSlices` stand for (only without `batch_dims`).
//!
//! Cost: a handful of ops each.

use super::emitter::{Attr, Emitter, Tensor};
use super::functions::{Broadcast, Unsupported};
use crate::ir::{AttrValue, DType, NodeId};

/// The masks of a strided slice.
const MASKS: [&str; 5] = ["begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask"];

/// The gradients of `op`'s data inputs given `g`; `Err(None)` for other op types.
pub fn gradient(
    e: &mut Emitter<'_>,
    op: NodeId,
    op_type: &str,
    inputs: &[Tensor],
    g: Tensor,
) -> Result<Vec<Option<Tensor>>, Unsupported> {
    let x = |i: usize| inputs.get(i).copied().ok_or_else(|| Some(format!("expected at least {} inputs", i + 1)));
    let copied = |e: &Emitter<'_>, keys: &[&'static str]| -> Vec<Attr> {
        let attrs = &e.graph.node(op).attrs;
        keys.iter().filter_map(|&k| attrs.get(k).cloned().map(|v| (k, v))).collect()
    };
    let t = e.dtype_of(g);
    let ta = e.t_attr(t);
    match op_type {
        "CumulativeLogsumexp" => {
            let (input, axis) = (x(0)?, x(1)?);
            let out = Tensor::of(op);
            let attrs = e.graph.node(op).attrs.clone();
            let exclusive = attrs.get_bool("exclusive").unwrap_or(false);
            let reverse = attrs.get_bool("reverse").unwrap_or(false);
            let mut scan = vec![("exclusive", AttrValue::Bool(exclusive)), ("reverse", AttrValue::Bool(!reverse))];
            scan.extend(copied(e, &["Tidx"]));
            scan.extend(ta.clone());
            let lowest = match t {
                Some(DType::F64) => f64::MIN,
                _ => f64::from(f32::MIN),
            };
            let zero = e.scalar_const_named(&format!("{}/zero", e.graph.node(op).name), t, 0.0);
            let part = |e: &mut Emitter<'_>, positive: bool| {
                let (cmp, base) = if positive { ("Greater", "Greater") } else { ("Less", "Less") };
                let keep = e.emit(cmp, base, &[g, zero], ta.clone());
                let magnitude = if positive { g } else { e.emit("Neg", "Neg", &[g], ta.clone()) };
                let log = e.emit("Log", "Log", &[magnitude], ta.clone());
                let floor = e.scalar_const_named(&format!("{}/lowest", e.graph.node(op).name), t, lowest);
                let log = e.emit("SelectV2", "SelectV2", &[keep, log, floor], ta.clone());
                let shifted = e.emit("Sub", "sub", &[log, out], ta.clone());
                let scanned = e.emit("CumulativeLogsumexp", "CumulativeLogsumexp", &[shifted, axis], scan.clone());
                let back = e.emit("AddV2", "add", &[scanned, input], ta.clone());
                e.emit("Exp", "Exp", &[back], ta.clone())
            };
            let pos = part(e, true);
            let neg = part(e, false);
            Ok(vec![Some(e.emit("Sub", "sub", &[pos, neg], ta)), None])
        }
        "TensorStridedSliceUpdate" => {
            let (begin, end, strides, value) = (x(1)?, x(2)?, x(3)?, x(4)?);
            let mut attrs = copied(e, &MASKS);
            attrs.extend(copied(e, &["Index"]));
            let mut sliced = attrs.clone();
            sliced.extend(ta.clone());
            let dy = e.emit("StridedSlice", "StridedSlice", &[g, begin, end, strides], sliced.clone());
            let zeros = e.emit("ZerosLike", "zeros_like", &[dy], ta.clone());
            let dx = e.emit(
                "TensorStridedSliceUpdate",
                "TensorStridedSliceUpdate",
                &[g, begin, end, strides, zeros],
                sliced,
            );
            let dv = Broadcast::new(e, dy, value).reduce_y(e, dy, &ta);
            Ok(vec![Some(dx), None, None, None, Some(dv)])
        }
        "SparseToDense" => {
            let indices = x(0)?;
            let tind = copied(e, &["Tindices"]);
            let gather: Vec<Attr> = [("Tparams", AttrValue::Type(t.unwrap_or(DType::F32)))]
                .into_iter()
                .chain(tind.into_iter().map(|(_, v)| ("Tindices", v)))
                .collect();
            let values = e.emit("GatherNd", "GatherNd", &[g, indices], gather);
            let all = |e: &mut Emitter<'_>, v: Tensor, base: &str| {
                let rank = e.emit("Rank", &format!("{base}/Rank"), &[v], ta.clone());
                let start = e.int_const_named(format!("{}/{base}/start", e.graph.node(op).name), &[0], true);
                let step = e.int_const_named(format!("{}/{base}/delta", e.graph.node(op).name), &[1], true);
                let axes = e.emit(
                    "Range",
                    &format!("{base}/range"),
                    &[start, rank, step],
                    [("Tidx", AttrValue::Type(DType::I32))],
                );
                let attrs = [("keep_dims", AttrValue::Bool(false)), ("Tidx", AttrValue::Type(DType::I32))];
                e.emit("Sum", base, &[v, axes], attrs.into_iter().chain(ta.clone()))
            };
            let total = all(e, g, "Sum");
            let taken = all(e, values, "Sum_1");
            let default = e.emit("Sub", "sub", &[total, taken], ta);
            Ok(vec![None, None, Some(values), Some(default)])
        }
        "ResourceGather" => {
            let (handle, indices) = (x(0)?, x(1)?);
            let batch_dims = e.graph.node(op).attrs.get_int("batch_dims").unwrap_or(0);
            if batch_dims != 0 {
                return Err(Some(format!("TensorFlow's gradient of ResourceGather ignores batch_dims ({batch_dims})")));
            }
            // TensorFlow takes `VariableShape(handle)`; the shape of a read is the same and folds on
            // every backend (the pjrt backend has no host value for a bare handle).
            let read = e.emit("ReadVariableOp", "ReadVariableOp", &[handle], copied(e, &["dtype"]));
            let shape = e.shape("Shape", read);
            let dense = super::nn_functions::gather_grad_of_shape(e, shape, indices, g, &ta);
            Ok(vec![Some(dense), None])
        }
        "ApproxTopK" => {
            // TensorFlow scatters the values' gradient to the indices along the reduction axis: as
            // TopKV2's gradient does along the last one.
            let d = e.graph.node(op).attrs.get_int("reduction_dimension").unwrap_or(-1);
            if d != -1 {
                return Err(Some(format!("the gradient of ApproxTopK along axis {d} (not -1) is not written")));
            }
            Ok(vec![Some(super::index_functions::top_k_grad(e, op, x(0)?, g, &ta))])
        }
        "ParallelDynamicStitch" => {
            let half = inputs.len() / 2;
            let mut grads = vec![None; half];
            for &ids in &inputs[..half] {
                let gather = e.fresh_name("GatherV2");
                let axis = e.int_const_named(format!("{gather}/axis"), &[0], true);
                let attrs = [
                    ("Tparams", AttrValue::Type(t.unwrap_or(DType::F32))),
                    ("Tindices", AttrValue::Type(DType::I32)),
                    ("Taxis", AttrValue::Type(DType::I32)),
                    ("batch_dims", AttrValue::Int(0)),
                ];
                grads.push(Some(e.emit_named(gather, "GatherV2", &[g, ids, axis], attrs)));
            }
            Ok(grads)
        }
        _ => Err(None),
    }
}
