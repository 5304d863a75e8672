//! Gradient functions of ops whose gradient reads the gradients of several
//! outputs, not only output 0 (`functions` asks here first).
//!
//! An output that received no gradient counts as zeros, as in TensorFlow;
//! an op whose outputs after 0 all received none takes the same path as
//! with output 0 alone, so graphs that never differentiate those outputs
//! keep their gradient graph unchanged.
//!
//! Each entry follows TensorFlow's registered gradient for the op.

use super::emitter::{Emitter, Tensor};
use super::functions::Unsupported;
use super::nn_functions::{expand_last, sum_last_keep};
use crate::ir::NodeId;

/// The gradients of `op`'s inputs when its type is handled here and some
/// output after 0 received a gradient; `None` otherwise.
pub fn gradient(
    e: &mut Emitter<'_>,
    op: NodeId,
    op_type: &str,
    inputs: &[Tensor],
    out_grads: &[Option<Tensor>],
) -> Option<Result<Vec<Option<Tensor>>, Unsupported>> {
    if out_grads.iter().skip(1).all(Option::is_none) {
        return None;
    }
    match op_type {
        "SoftmaxCrossEntropyWithLogits" | "SparseSoftmaxCrossEntropyWithLogits" => {
            Some(softmax_cross_entropy(e, op, op_type, inputs, out_grads))
        }
        _ => None,
    }
}

/// Both cross entropies: the loss gradient times the kernel's backprop,
/// plus, through the backprop output (`grad_grad`), the softmax's Jacobian
/// applied to it: `(grad_grad - sum(grad_grad * softmax, -1)) * softmax`.
/// The dense form's labels get `grad_loss * -log_softmax(logits)`.
fn softmax_cross_entropy(
    e: &mut Emitter<'_>,
    op: NodeId,
    op_type: &str,
    inputs: &[Tensor],
    out_grads: &[Option<Tensor>],
) -> Result<Vec<Option<Tensor>>, Unsupported> {
    let logits = *inputs.first().ok_or_else(|| Some("expected the logits".to_string()))?;
    let grad_loss = e.grad_or_zeros(op, 0, out_grads);
    let grad_grad = e.grad_or_zeros(op, 1, out_grads);
    let dtype = e.dtype_of(grad_loss);
    let ta = e.t_attr(dtype);
    let backprop = Tensor { node: op, output: 1 };
    let gx = expand_last(e, grad_loss);
    let first = e.emit("Mul", "mul", &[gx, backprop], ta.clone());
    let softmax = e.emit("Softmax", "Softmax", &[logits], ta.clone());
    let weighted = e.emit("Mul", "mul", &[grad_grad, softmax], ta.clone());
    let along = sum_last_keep(e, weighted, &ta);
    let centred = e.emit("Sub", "sub", &[grad_grad, along], ta.clone());
    let second = e.emit("Mul", "mul", &[centred, softmax], ta.clone());
    let dlogits = e.emit("AddV2", "add", &[first, second], ta.clone());
    if op_type == "SparseSoftmaxCrossEntropyWithLogits" {
        return Ok(vec![Some(dlogits), None]);
    }
    let ls = e.emit("LogSoftmax", "LogSoftmax", &[logits], ta.clone());
    let neg = e.emit("Neg", "Neg", &[ls], ta.clone());
    let dlabels = e.emit("Mul", "mul", &[gx, neg], ta);
    Ok(vec![Some(dlogits), Some(dlabels)])
}
