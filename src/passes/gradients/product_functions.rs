//! Gradient functions of `Prod` and `Einsum`.
//!
//! `Prod` follows TensorFlow's registered gradient: the reduced axes are
//! moved to the front and flattened, and each element's gradient is the
//! product of all the others, from an exclusive `Cumprod` from the left
//! times one from the right, so a zero input gets the product of the rest
//! (no division). `Einsum` (one or two operands, no ellipsis) differentiates
//! each operand with another `Einsum` of the output gradient and the other
//! operand; labels only that operand sums over are put back with
//! `ExpandDims` and `BroadcastTo`. Every op is emitted with dynamic shapes;
//! cost is a constant number of ops per differentiated op.

use super::emitter::{Emitter, TAttr, Tensor};
use super::functions::Unsupported;
use crate::ir::{AttrValue, DType, NodeId};

/// The gradients of `op`'s data inputs given `g`; `Err(None)` when `op_type` is neither op.
pub fn gradient(
    e: &mut Emitter<'_>,
    op: NodeId,
    op_type: &str,
    inputs: &[Tensor],
    g: Tensor,
) -> Result<Vec<Option<Tensor>>, Unsupported> {
    let x = |i: usize| inputs.get(i).copied().ok_or_else(|| Some(format!("expected at least {} inputs", i + 1)));
    let t = e.dtype_of(g);
    let ta = e.t_attr(t);
    match op_type {
        "Prod" => Ok(vec![Some(prod_grad(e, x(0)?, x(1)?, g, &ta)), None]),
        "Einsum" => {
            let equation = e.graph.node(op).attrs.get_str("equation").map(str::to_string);
            let equation = equation.ok_or_else(|| Some("the `equation` attribute is missing".to_string()))?;
            einsum_grad(e, &equation, inputs, g, &ta)
        }
        _ => super::quant_functions::gradient(e, op, op_type, inputs, g),
    }
}

/// An i32 attribute list `T = i32`.
fn i32_attr(e: &Emitter<'_>) -> TAttr {
    e.t_attr(Some(DType::I32))
}

/// TensorFlow's `_ProdGrad`.
fn prod_grad(e: &mut Emitter<'_>, a: Tensor, axes: Tensor, g: Tensor, ta: &TAttr) -> Tensor {
    let i32_t = i32_attr(e);
    // The output gradient, broadcast back to the input's shape.
    let tiled = super::functions::sum_grad(e, a, axes, g, ta);
    // The reduced axes, normalised, first; the others after them.
    let axes = if e.dtype_of(axes) == Some(DType::I64) {
        e.emit("Cast", "Cast", &[axes], [("SrcT", AttrValue::Type(DType::I64)), ("DstT", AttrValue::Type(DType::I32))])
    } else {
        axes
    };
    let reshape = e.fresh_name("Reshape");
    let flat = e.int_const_named(format!("{reshape}/shape"), &[-1], false);
    let axes = e.emit_named(reshape, "Reshape", &[axes, flat], i32_t.clone());
    let input_shape = e.shape("Shape", a);
    let rank = e.emit("Size", "Size", &[input_shape], [("out_type", AttrValue::Type(DType::I32))]);
    let shifted = e.emit("AddV2", "add", &[axes, rank], i32_t.clone());
    let reduced = e.emit("FloorMod", "mod", &[shifted, rank], i32_t.clone());
    let range = e.fresh_name("range");
    let start = e.int_const_named(format!("{range}/start"), &[0], true);
    let delta = e.int_const_named(format!("{range}/delta"), &[1], true);
    let all = e.emit_named(range, "Range", &[start, rank, delta], [("Tidx", AttrValue::Type(DType::I32))]);
    let diff = e.emit("ListDiff", "ListDiff", &[all, reduced], [("out_idx", AttrValue::Type(DType::I32))]);
    let other = Tensor { node: diff.node, output: 0 };
    let concat = e.fresh_name("concat");
    let zero = e.int_const_named(format!("{concat}/axis"), &[0], true);
    let cat_attrs = [("N", AttrValue::Int(2)), ("Tidx", AttrValue::Type(DType::I32))].into_iter().chain(i32_t.clone());
    let perm = e.emit_named(concat, "ConcatV2", &[reduced, other, zero], cat_attrs);
    // The sizes of both groups.
    let count = |e: &mut Emitter<'_>, which: Tensor, base: &str| {
        let gather = e.fresh_name("GatherV2");
        let axis = e.int_const_named(format!("{gather}/axis"), &[0], true);
        let gather_attrs = [
            ("Tparams", AttrValue::Type(DType::I32)),
            ("Tindices", AttrValue::Type(DType::I32)),
            ("Taxis", AttrValue::Type(DType::I32)),
            ("batch_dims", AttrValue::Int(0)),
        ];
        let dims = e.emit_named(gather, "GatherV2", &[input_shape, which, axis], gather_attrs);
        let prod = e.fresh_name(base);
        let over = e.int_const_named(format!("{prod}/reduction_indices"), &[0], true);
        let attrs = [("keep_dims", AttrValue::Bool(false)), ("Tidx", AttrValue::Type(DType::I32))];
        let t = i32_attr(e);
        e.emit_named(prod, "Prod", &[dims, over], attrs.into_iter().chain(t))
    };
    let reduced_num = count(e, reduced, "Prod");
    let other_num = count(e, other, "Prod_1");
    let permuted = e.emit("Transpose", "transpose", &[a, perm], ta.clone().into_iter().chain(i32_tperm()));
    let permuted_shape = e.shape("Shape_1", permuted);
    let pack_attrs = [("N", AttrValue::Int(2)), ("axis", AttrValue::Int(0))].into_iter().chain(i32_t.clone());
    let matrix_shape = e.emit("Pack", "stack", &[reduced_num, other_num], pack_attrs);
    let matrix = e.emit("Reshape", "Reshape_1", &[permuted, matrix_shape], ta.clone());
    let cum = |e: &mut Emitter<'_>, reverse: bool, base: &str| {
        let name = e.fresh_name(base);
        let axis = e.int_const_named(format!("{name}/axis"), &[0], true);
        let flags = [("exclusive", AttrValue::Bool(true)), ("reverse", AttrValue::Bool(reverse))];
        e.emit_named(name, "Cumprod", &[matrix, axis], flags.into_iter().chain(ta.clone()))
    };
    let left = cum(e, false, "Cumprod");
    let right = cum(e, true, "Cumprod_1");
    let others = e.emit("Mul", "mul", &[left, right], ta.clone());
    let others = e.emit("Reshape", "Reshape_2", &[others, permuted_shape], ta.clone());
    let inverse = e.emit("InvertPermutation", "InvertPermutation", &[perm], i32_t);
    let back = e.emit("Transpose", "transpose_1", &[others, inverse], ta.clone().into_iter().chain(i32_tperm()));
    let out = e.emit("Mul", "mul_1", &[tiled, back], ta.clone());
    e.emit("Reshape", "Reshape_3", &[out, input_shape], ta.clone())
}

/// `Tperm = i32`.
fn i32_tperm() -> Option<(&'static str, AttrValue)> {
    Some(("Tperm", AttrValue::Type(DType::I32)))
}

/// The gradients of the operands of `Einsum(equation)` given `g`.
fn einsum_grad(
    e: &mut Emitter<'_>,
    equation: &str,
    inputs: &[Tensor],
    g: Tensor,
    ta: &TAttr,
) -> Result<Vec<Option<Tensor>>, Unsupported> {
    let compact: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
    if compact.contains("...") {
        return Err(Some(format!("`{equation}`: an ellipsis is not supported")));
    }
    let (lhs, out) = compact.split_once("->").ok_or_else(|| Some(format!("`{equation}` has no `->`")))?;
    let operands: Vec<&str> = lhs.split(',').collect();
    if operands.len() != inputs.len() || !(1..=2).contains(&operands.len()) {
        return Err(Some(format!("`{equation}`: only one or two operands are supported")));
    }
    for spec in &operands {
        let mut seen: Vec<char> = spec.chars().collect();
        seen.sort_unstable();
        if seen.windows(2).any(|w| w[0] == w[1]) {
            return Err(Some(format!("`{equation}`: a label repeated within an operand is not supported")));
        }
    }
    let mut grads = Vec::with_capacity(operands.len());
    for (i, spec) in operands.iter().enumerate() {
        let other = (operands.len() == 2).then(|| (operands[1 - i], inputs[1 - i]));
        // Labels of this operand that the output or the other operand carries; the rest it sums alone.
        let kept: String =
            spec.chars().filter(|&c| out.contains(c) || other.is_some_and(|(o, _)| o.contains(c))).collect();
        let (eq, args) = match other {
            Some((o, t)) => (format!("{out},{o}->{kept}"), vec![g, t]),
            None => (format!("{out}->{kept}"), vec![g]),
        };
        let attrs = [("equation", AttrValue::str(eq.as_str())), ("N", AttrValue::Int(args.len() as i64))];
        let mut grad = e.emit("Einsum", "Einsum", &args, attrs.into_iter().chain(ta.clone()));
        if kept.len() < spec.len() {
            // Put each label summed alone back as a size-1 axis, then broadcast to the operand.
            for (pos, c) in spec.chars().enumerate() {
                if !kept.contains(c) {
                    let name = e.fresh_name("ExpandDims");
                    let dim = e.int_const_named(format!("{name}/dim"), &[pos as i32], true);
                    let attrs = [("Tdim", AttrValue::Type(DType::I32))].into_iter().chain(ta.clone());
                    grad = e.emit_named(name, "ExpandDims", &[grad, dim], attrs);
                }
            }
            let shape = e.shape("Shape", inputs[i]);
            let attrs = [("Tidx", AttrValue::Type(DType::I32))].into_iter().chain(ta.clone());
            grad = e.emit("BroadcastTo", "BroadcastTo", &[grad, shape], attrs);
        }
        grads.push(Some(grad));
    }
    Ok(grads)
}
