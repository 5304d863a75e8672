//! Activation builders and their gradients, term by term as the
//! simulator's kernels (and TensorFlow's CPU kernels) compute them, in the
//! operands' dtype. Gradients take `(gradient, features-or-outputs)`
//! except `*Grad(y, dy)` of tanh, sigmoid, rsqrt and sqrt. Cost: a few
//! elementwise ops per TF op.

use super::elementwise::broadcast_pair;
use super::Call;
use crate::ir::DType;
use crate::xla::stablehlo::text::{Cmp, Ctx, Val};

const SELU_SCALE: f64 = 1.050_700_987_355_480_5;
const SELU_ALPHA: f64 = 1.673_263_242_354_377_3;

pub(super) fn relu(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let zero = c.splat(&x.ty, 0.0);
    Ok(vec![c.elementwise("maximum", &[x, &zero])])
}

/// `min(max(x, 0), 6)`.
pub(super) fn relu6(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let zero = c.splat(&x.ty, 0.0);
    let six = c.splat(&x.ty, 6.0);
    let m = c.elementwise("maximum", &[x, &zero]);
    Ok(vec![c.elementwise("minimum", &[&m, &six])])
}

/// `x < 0 ? expm1(x) : x`.
pub(super) fn elu(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let zero = c.splat(&x.ty, 0.0);
    let neg = c.compare(x, &zero, Cmp::Lt);
    let e = c.elementwise("exponential_minus_one", &[x]);
    Ok(vec![c.select(&neg, &e, x)])
}

/// `x < 0 ? scale·alpha·expm1(x) : scale·x`.
pub(super) fn selu(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let zero = c.splat(&x.ty, 0.0);
    let neg = c.compare(x, &zero, Cmp::Lt);
    let e = c.elementwise("exponential_minus_one", &[x]);
    let sa = c.splat(&x.ty, SELU_SCALE * SELU_ALPHA);
    let s = c.splat(&x.ty, SELU_SCALE);
    let low = c.elementwise("multiply", &[&sa, &e]);
    let high = c.elementwise("multiply", &[&s, x]);
    Ok(vec![c.select(&neg, &low, &high)])
}

/// `x > t ? x : x < -t ? exp(x) : log1p(exp(x))` with `t = 2 - ln(eps)`.
pub(super) fn softplus(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let eps = if x.ty.dtype == DType::F64 { f64::EPSILON } else { f64::from(f32::EPSILON) };
    let t = eps.ln() + 2.0;
    let hi = c.splat(&x.ty, -t);
    let lo = c.splat(&x.ty, t);
    let e = c.elementwise("exponential", &[x]);
    let l = c.elementwise("log_plus_one", &[&e]);
    let big = c.compare(x, &hi, Cmp::Gt);
    let small = c.compare(x, &lo, Cmp::Lt);
    let rest = c.select(&small, &e, &l);
    Ok(vec![c.select(&big, x, &rest)])
}

/// `x / (1 + |x|)`.
pub(super) fn softsign(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let one = c.splat(&x.ty, 1.0);
    let a = c.elementwise("abs", &[x]);
    let d = c.elementwise("add", &[&one, &a]);
    Ok(vec![c.elementwise("divide", &[x, &d])])
}

/// `x > 0 ? x : alpha·x`.
pub(super) fn leaky_relu(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let zero = c.splat(&x.ty, 0.0);
    let alpha = c.splat(&x.ty, n.float_attr("alpha", 0.2));
    let pos = c.compare(x, &zero, Cmp::Gt);
    let scaled = c.elementwise("multiply", &[x, &alpha]);
    Ok(vec![c.select(&pos, x, &scaled)])
}

/// `LeakyReluGrad(g, x)`: `x > 0 ? g : g·alpha`.
pub(super) fn leaky_relu_grad(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (g, x) = broadcast_pair(c, n)?;
    let zero = c.splat(&x.ty, 0.0);
    let alpha = c.splat(&g.ty, n.float_attr("alpha", 0.2));
    let pos = c.compare(&x, &zero, Cmp::Gt);
    let scaled = c.elementwise("multiply", &[&g, &alpha]);
    Ok(vec![c.select(&pos, &g, &scaled)])
}

/// `ReluGrad(dy, x)`: `dy` where `x > 0`, else 0.
pub(super) fn relu_grad(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (dy, x) = broadcast_pair(c, n)?;
    let zero = c.splat(&x.ty, 0.0);
    let pos = c.compare(&x, &zero, Cmp::Gt);
    let zeros = c.splat(&dy.ty, 0.0);
    Ok(vec![c.select(&pos, &dy, &zeros)])
}

/// `Relu6Grad(g, x)`: `g` where `0 < x < 6`, else 0.
pub(super) fn relu6_grad(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (g, x) = broadcast_pair(c, n)?;
    let zero = c.splat(&x.ty, 0.0);
    let six = c.splat(&x.ty, 6.0);
    let pos = c.compare(&x, &zero, Cmp::Gt);
    let below = c.compare(&x, &six, Cmp::Lt);
    let inside = c.elementwise("and", &[&pos, &below]);
    let zeros = c.splat(&g.ty, 0.0);
    Ok(vec![c.select(&inside, &g, &zeros)])
}

/// `EluGrad(g, y)`: `y < 0 ? g·(y + 1) : g`.
pub(super) fn elu_grad(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (g, y) = broadcast_pair(c, n)?;
    let zero = c.splat(&y.ty, 0.0);
    let one = c.splat(&y.ty, 1.0);
    let neg = c.compare(&y, &zero, Cmp::Lt);
    let y1 = c.elementwise("add", &[&y, &one]);
    let low = c.elementwise("multiply", &[&g, &y1]);
    Ok(vec![c.select(&neg, &low, &g)])
}

/// `SeluGrad(g, y)`: `y > 0 ? g·scale : g·(y + scale·alpha)`; at `y = 0` the second, as
/// TensorFlow's XLA bridge computes it (its CPU kernel takes the first).
pub(super) fn selu_grad(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (g, y) = broadcast_pair(c, n)?;
    let zero = c.splat(&y.ty, 0.0);
    let sa = c.splat(&y.ty, SELU_SCALE * SELU_ALPHA);
    let s = c.splat(&y.ty, SELU_SCALE);
    let pos = c.compare(&y, &zero, Cmp::Gt);
    let ys = c.elementwise("add", &[&y, &sa]);
    let low = c.elementwise("multiply", &[&g, &ys]);
    let high = c.elementwise("multiply", &[&g, &s]);
    Ok(vec![c.select(&pos, &high, &low)])
}

/// `SoftplusGrad(g, x)`: `g / (1 + exp(-x))`.
pub(super) fn softplus_grad(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (g, x) = broadcast_pair(c, n)?;
    let one = c.splat(&x.ty, 1.0);
    let m = c.elementwise("negate", &[&x]);
    let e = c.elementwise("exponential", &[&m]);
    let d = c.elementwise("add", &[&one, &e]);
    Ok(vec![c.elementwise("divide", &[&g, &d])])
}

/// `SoftsignGrad(g, x)`: `g / (1 + |x|)²`.
pub(super) fn softsign_grad(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (g, x) = broadcast_pair(c, n)?;
    let one = c.splat(&x.ty, 1.0);
    let a = c.elementwise("abs", &[&x]);
    let d = c.elementwise("add", &[&one, &a]);
    let d2 = c.elementwise("multiply", &[&d, &d]);
    Ok(vec![c.elementwise("divide", &[&g, &d2])])
}

/// `TanhGrad(y, dy)`: `dy * (1 - y²)`.
pub(super) fn tanh_grad(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (y, dy) = broadcast_pair(c, n)?;
    let one = c.splat(&y.ty, 1.0);
    let y2 = c.elementwise("multiply", &[&y, &y]);
    let d = c.elementwise("subtract", &[&one, &y2]);
    Ok(vec![c.elementwise("multiply", &[&dy, &d])])
}

/// `SigmoidGrad(y, dy)`: `dy * y * (1 - y)`.
pub(super) fn sigmoid_grad(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (y, dy) = broadcast_pair(c, n)?;
    let one = c.splat(&y.ty, 1.0);
    let d = c.elementwise("subtract", &[&one, &y]);
    let yd = c.elementwise("multiply", &[&y, &d]);
    Ok(vec![c.elementwise("multiply", &[&dy, &yd])])
}

/// `RsqrtGrad(y, dy)`: `dy * -0.5 * y³`.
pub(super) fn rsqrt_grad(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (y, dy) = broadcast_pair(c, n)?;
    let half = c.splat(&y.ty, -0.5);
    let y2 = c.elementwise("multiply", &[&y, &y]);
    let y3 = c.elementwise("multiply", &[&y2, &y]);
    let s = c.elementwise("multiply", &[&y3, &half]);
    Ok(vec![c.elementwise("multiply", &[&dy, &s])])
}

/// `SqrtGrad(y, dy)`: `dy * 0.5 / y`.
pub(super) fn sqrt_grad(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (y, dy) = broadcast_pair(c, n)?;
    let half = c.splat(&y.ty, 0.5);
    let h = c.elementwise("multiply", &[&dy, &half]);
    Ok(vec![c.elementwise("divide", &[&h, &y])])
}
