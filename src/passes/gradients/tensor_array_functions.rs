//! Gradient functions of the TensorArray ops, as TensorFlow's
//! `tensor_array_grad.py` registers them. The gradient of an array's flow
//! is the flow of its gradient array (`TensorArrayGradV3` by `source`):
//!
//! - `TensorArrayReadV3` / `TensorArrayGatherV3`: the value's gradient
//!   written / scattered into the gradient array made from the forward
//!   flow; the flow of that array is the forward flow's gradient;
//! - `TensorArrayWriteV3` / `TensorArrayScatterV3`: the value's gradient
//!   read / gathered from the gradient array the flow's gradient carries,
//!   which also passes on as the gradient of the flow before the write;
//! - `TensorArrayConcatV3` / `TensorArraySplitV3`: each other, with the
//!   forward op's element lengths.
//!
//! The handle, indices and lengths get no gradient. Where several reads
//! meet, their gradient flows add (`AddN` of the arrays), which is how
//! TensorFlow's gradient arrays aggregate writes. Cost: two ops per
//! differentiated op.

use super::emitter::{Emitter, Tensor};
use super::functions::Unsupported;
use crate::ir::{AttrValue, NodeId, Shape};

/// The gradient source every array made here is marked with.
const SOURCE: &str = "gradients";

/// The gradient array of the array `handle` whose flow is `flow`: (handle, flow).
fn grad_array(e: &mut Emitter<'_>, handle: Tensor, flow: Tensor) -> (Tensor, Tensor) {
    let g = e.emit(
        "TensorArrayGradV3",
        "TensorArrayGrad/TensorArrayGradV3",
        &[handle, flow],
        [("source", AttrValue::Str(SOURCE.into()))],
    );
    (g, Tensor { node: g.node, output: 1 })
}

/// The gradients of `op`'s data inputs given `g`; `Err(None)` for other op types.
pub fn gradient(
    e: &mut Emitter<'_>,
    op: NodeId,
    op_type: &str,
    inputs: &[Tensor],
    g: Tensor,
) -> Result<Vec<Option<Tensor>>, Unsupported> {
    const GRADIENTS: &[&str] = &[
        "TensorArrayConcatV3",
        "TensorArrayGatherV3",
        "TensorArrayReadV3",
        "TensorArrayScatterV3",
        "TensorArraySplitV3",
        "TensorArrayWriteV3",
    ];
    if !GRADIENTS.contains(&op_type) {
        return Err(None);
    }
    let attrs = e.graph.node(op).attrs.clone();
    // The element dtype (`dtype` of reads, `T` of writes), read before anything is emitted.
    let key = if matches!(op_type, "TensorArrayReadV3" | "TensorArrayGatherV3" | "TensorArrayConcatV3") {
        "dtype"
    } else {
        "T"
    };
    let Some(t) = attrs.get(key).cloned() else {
        return Err(Some(format!("the op has no attribute `{key}`")));
    };
    let want = match op_type {
        "TensorArrayConcatV3" => 2,
        "TensorArrayReadV3" | "TensorArrayGatherV3" => 3,
        _ => 4,
    };
    if inputs.len() < want {
        return Err(Some(format!("expected {want} inputs, got {}", inputs.len())));
    }
    let x = |i: usize| inputs[i];
    match op_type {
        "TensorArrayReadV3" => {
            let (h, flow) = grad_array(e, x(0), x(2));
            let w = e.emit("TensorArrayWriteV3", "TensorArrayWrite", &[h, x(1), g, flow], [("T", t)]);
            Ok(vec![None, None, Some(w)])
        }
        "TensorArrayGatherV3" => {
            let (h, flow) = grad_array(e, x(0), x(2));
            let s = e.emit("TensorArrayScatterV3", "TensorArrayScatter", &[h, x(1), g, flow], [("T", t)]);
            Ok(vec![None, None, Some(s)])
        }
        "TensorArrayConcatV3" => {
            let (h, flow) = grad_array(e, x(0), x(1));
            let lengths = Tensor { node: op, output: 1 };
            let s = e.emit("TensorArraySplitV3", "TensorArraySplit", &[h, g, lengths, flow], [("T", t)]);
            Ok(vec![None, Some(s)])
        }
        "TensorArrayWriteV3" => {
            let (h, flow) = grad_array(e, x(0), g);
            let r = e.emit("TensorArrayReadV3", "TensorArrayRead", &[h, x(1), flow], [("dtype", t)]);
            Ok(vec![None, None, Some(r), Some(g)])
        }
        "TensorArrayScatterV3" => {
            let (h, flow) = grad_array(e, x(0), g);
            let attrs = [("dtype", t), ("element_shape", AttrValue::Shape(Shape::unknown()))];
            let r = e.emit("TensorArrayGatherV3", "TensorArrayGather", &[h, x(1), flow], attrs);
            Ok(vec![None, None, Some(r), Some(g)])
        }
        "TensorArraySplitV3" => {
            let (h, flow) = grad_array(e, x(0), g);
            let attrs = [("dtype", t), ("element_shape_except0", AttrValue::Shape(Shape::unknown()))];
            let r = e.emit("TensorArrayConcatV3", "TensorArrayConcat", &[h, flow], attrs);
            Ok(vec![None, Some(r), None, Some(g)])
        }
        _ => Err(None),
    }
}
