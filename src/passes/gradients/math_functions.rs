//! Gradient functions of the trigonometric and hyperbolic ops and their
//! inverses, as TensorFlow registers them: each multiplies the output
//! gradient by the derivative, built from the forward input (or output)
//! with standard ops (`Cos`, `Square`, `Rsqrt`, `Reciprocal`, ...). Called
//! for op types the other gradient tables do not handle; cost is a few ops
//! per differentiated op.

use super::emitter::{Emitter, Tensor};
use super::functions::Unsupported;
use crate::ir::NodeId;

/// The gradient of `op`'s input given `g`; `Err(None)` when `op_type` is not one of these ops.
pub fn gradient(
    e: &mut Emitter<'_>,
    op: NodeId,
    op_type: &str,
    inputs: &[Tensor],
    g: Tensor,
) -> Result<Vec<Option<Tensor>>, Unsupported> {
    let y = Tensor::of(op);
    let x = || inputs.first().copied().ok_or_else(|| Some("expected an input".to_string()));
    let t = e.dtype_of(g);
    let ta = e.t_attr(t);
    let mul = |e: &mut Emitter<'_>, a: Tensor, b: Tensor| e.emit("Mul", "mul", &[a, b], e.t_attr(t));
    let unary = |e: &mut Emitter<'_>, op: &'static str, a: Tensor| e.emit(op, op, &[a], e.t_attr(t));
    // 1 - x² and 1 + x², with a constant named as TensorFlow names it.
    let one_and = |e: &mut Emitter<'_>, a: Tensor, sub: bool| {
        let sq = e.emit("Square", "Square", &[a], ta.clone());
        let one = e.fresh_name("Const");
        let one = e.scalar_const_named(&one, t, 1.0);
        let (op, name) = if sub { ("Sub", "sub") } else { ("AddV2", "add") };
        e.emit(op, name, &[one, sq], ta.clone())
    };
    let grad = match op_type {
        "Sin" => {
            let c = unary(e, "Cos", x()?);
            mul(e, g, c)
        }
        "Cos" => {
            let s = unary(e, "Sin", x()?);
            let n = unary(e, "Neg", s);
            mul(e, g, n)
        }
        "Tan" => {
            let c = unary(e, "Cos", x()?);
            let sec = unary(e, "Reciprocal", c);
            let sec2 = unary(e, "Square", sec);
            mul(e, g, sec2)
        }
        "Asin" | "Acos" => {
            let d = one_and(e, x()?, true);
            let r = unary(e, "Rsqrt", d);
            let r = if op_type == "Acos" { unary(e, "Neg", r) } else { r };
            mul(e, g, r)
        }
        "Atan" => {
            let d = one_and(e, x()?, false);
            let r = unary(e, "Reciprocal", d);
            mul(e, g, r)
        }
        "Sinh" => {
            let c = unary(e, "Cosh", x()?);
            mul(e, g, c)
        }
        "Cosh" => {
            let s = unary(e, "Sinh", x()?);
            mul(e, g, s)
        }
        "Asinh" => {
            let c = unary(e, "Cosh", y);
            e.emit("RealDiv", "truediv", &[g, c], ta.clone())
        }
        "Acosh" => {
            let s = unary(e, "Sinh", y);
            e.emit("RealDiv", "truediv", &[g, s], ta.clone())
        }
        "Atanh" => {
            let d = one_and(e, x()?, true);
            let r = unary(e, "Reciprocal", d);
            mul(e, g, r)
        }
        _ => return super::product_functions::gradient(e, op, op_type, inputs, g),
    };
    Ok(vec![Some(grad)])
}
