//! Builders of the elementwise math beyond the common arithmetic and of the
//! bitwise ops, as TensorFlow's XLA bridge lowers them: `Atan2`, `Inv`,
//! the truncating divisions, the `x·f(y)` ops that give 0 where `x` (or
//! `y` for `MulNoNan`) is 0, `ApproximateEqual`, `ClipByValue`,
//! `NextAfter` (`chlo.next_after`), `ReciprocalGrad`, the special functions
//! CHLO has (`Lgamma`, `Digamma`, `Erfinv`, `Ndtri`, `BesselI1e`, `Zeta`,
//! `Polygamma`; `BesselI0e` by its series), the pass-through
//! checks and markers, `ToBool`, and `BitwiseAnd`/`Or`/`Xor`, `Invert`,
//! the shifts, `PopulationCount` and `Bitcast`.
//!
//! Operands broadcast to the result's shape first. Integer divisions and
//! `CheckNumerics` check under a device-check scope (XLA divides by zero
//! and passes NaN in silence). Cost: a few ops per TF op.

use super::elementwise::{binary, broadcast_pair};
use super::{check, is_float, Call};
use crate::ir::DType;
use crate::xla::stablehlo::text::{Cmp, Ctx, Val};

/// `f(a, b)`, and 0 where `zero_where` (0: `a`, 1: `b`) is 0.
pub(super) fn zero_where(c: &mut Ctx, n: &Call, which: usize, f: &str) -> Result<Vec<Val>, String> {
    let (a, b) = broadcast_pair(c, n)?;
    let v = match f {
        "log" | "log_plus_one" => {
            let l = c.elementwise(f, &[&b]);
            c.elementwise("multiply", &[&a, &l])
        }
        other => c.elementwise(other, &[&a, &b]),
    };
    let zero = c.splat(&a.ty, 0.0);
    let test = if which == 0 { &a } else { &b };
    let is_zero = c.compare(test, &zero, Cmp::Eq);
    Ok(vec![c.select(&is_zero, &zero, &v)])
}

/// A binary CHLO op (`chlo.next_after`, `chlo.zeta`, `chlo.polygamma`) on the broadcast operands.
pub(super) fn chlo_binary(c: &mut Ctx, n: &Call, name: &str) -> Result<Vec<Val>, String> {
    let (a, b) = broadcast_pair(c, n)?;
    let ty = a.ty.clone();
    Ok(vec![c.op(name, &[&a, &b], "", ty)])
}

/// `Ndtri(p) = √2 erf⁻¹(2p - 1)`, as TensorFlow's XLA bridge computes it.
pub(super) fn ndtri(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let p = n.input(0)?;
    let two = c.splat(&p.ty, 2.0);
    let one = c.splat(&p.ty, 1.0);
    let t = c.elementwise("multiply", &[&two, p]);
    let t = c.elementwise("subtract", &[&t, &one]);
    let e = c.op("chlo.erf_inv", &[&t], "", p.ty.clone());
    let sqrt2 = c.splat(&p.ty, std::f64::consts::SQRT_2);
    Ok(vec![c.elementwise("multiply", &[&sqrt2, &e])])
}

/// `BesselI0e(x) = e^-|x| I₀(x)` (CHLO has only `bessel_i1e`): the power series
/// `Σ_k (x²/4)^k / k!²` up to a limit, the asymptotic expansion
/// `(2π|x|)^-1/2 Σ_k ((2k-1)!!)² / (k! (8|x|)^k)` beyond it. The limit and the
/// term counts make both parts exact to the dtype's precision: for f64 the
/// limit 25 with 40 and 18 terms, for f32 the limit 15 with 22 and 8.
pub(super) fn bessel_i0e(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let ty = x.ty.clone();
    let ax = c.elementwise("abs", &[x]);
    let (limit, series_terms, asymptotic_terms) = if ty.dtype == DType::F64 { (25.0, 40, 18) } else { (15.0, 22, 8) };
    let limit = c.splat(&ty, limit);
    // The series, on |x| clamped to the limit so that its terms stay finite.
    let xs = c.elementwise("minimum", &[&ax, &limit]);
    let quarter = c.splat(&ty, 0.25);
    let sq = c.elementwise("multiply", &[&xs, &xs]);
    let y = c.elementwise("multiply", &[&quarter, &sq]);
    let mut term = c.splat(&ty, 1.0);
    let mut sum = term.clone();
    for k in 1..=series_terms {
        let k = f64::from(k);
        let scale = c.splat(&ty, 1.0 / (k * k));
        let step = c.elementwise("multiply", &[&y, &scale]);
        term = c.elementwise("multiply", &[&term, &step]);
        sum = c.elementwise("add", &[&sum, &term]);
    }
    let neg = c.elementwise("negate", &[&xs]);
    let decay = c.elementwise("exponential", &[&neg]);
    let series = c.elementwise("multiply", &[&sum, &decay]);
    // The asymptotic expansion, on |x| at least the limit.
    let xa = c.elementwise("maximum", &[&ax, &limit]);
    let eight = c.splat(&ty, 8.0);
    let eight_x = c.elementwise("multiply", &[&eight, &xa]);
    let mut term = c.splat(&ty, 1.0);
    let mut sum = term.clone();
    for k in 1..=asymptotic_terms {
        let j = 2.0 * f64::from(k) - 1.0;
        let scale = c.splat(&ty, j * j / f64::from(k));
        let t = c.elementwise("multiply", &[&term, &scale]);
        term = c.elementwise("divide", &[&t, &eight_x]);
        sum = c.elementwise("add", &[&sum, &term]);
    }
    let two_pi = c.splat(&ty, 2.0 * std::f64::consts::PI);
    let r = c.elementwise("multiply", &[&two_pi, &xa]);
    let r = c.elementwise("rsqrt", &[&r]);
    let asymptotic = c.elementwise("multiply", &[&sum, &r]);
    let small = c.compare(&ax, &limit, Cmp::Le);
    Ok(vec![c.select(&small, &series, &asymptotic)])
}

/// `Mod` and `TruncateMod`: the remainder with the dividend's sign.
pub(super) fn truncate_mod(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    check::nonzero_divisor(c, n.input(1)?, n.op);
    binary(c, n, "remainder")
}

/// `TruncateDiv`: the quotient rounded toward zero.
pub(super) fn truncate_div(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    check::nonzero_divisor(c, n.input(1)?, n.op);
    let (a, b) = broadcast_pair(c, n)?;
    let q = c.elementwise("divide", &[&a, &b]);
    if !is_float(q.ty.dtype) {
        return Ok(vec![q]);
    }
    let zero = c.splat(&q.ty, 0.0);
    let negative = c.compare(&q, &zero, Cmp::Lt);
    let up = c.elementwise("ceil", &[&q]);
    let down = c.elementwise("floor", &[&q]);
    Ok(vec![c.select(&negative, &up, &down)])
}

/// `Inv(x) = 1 / x`.
pub(super) fn inv(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    super::elementwise::reciprocal(c, n)
}

/// `ReciprocalGrad(y, dy) = -dy · y²`.
pub(super) fn reciprocal_grad(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (y, dy) = broadcast_pair(c, n)?;
    let sq = c.elementwise("multiply", &[&y, &y]);
    let neg = c.elementwise("negate", &[&dy]);
    Ok(vec![c.elementwise("multiply", &[&neg, &sq])])
}

/// `ApproximateEqual(x, y) {tolerance}`: `|x - y| < tolerance`.
pub(super) fn approximate_equal(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (a, b) = broadcast_pair(c, n)?;
    let d = c.elementwise("subtract", &[&a, &b]);
    let d = c.elementwise("abs", &[&d]);
    let tol = c.splat(&d.ty, n.float_attr("tolerance", 1e-5));
    Ok(vec![c.compare(&d, &tol, Cmp::Lt)])
}

/// `ClipByValue(t, lo, hi)`: `stablehlo.clamp` with the bounds at `t`'s shape.
pub(super) fn clip_by_value(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let t = n.input(0)?;
    let lo = c.broadcast_to(n.input(1)?, &t.ty.shape);
    let hi = c.broadcast_to(n.input(2)?, &t.ty.shape);
    Ok(vec![c.op("stablehlo.clamp", &[&lo, t, &hi], "", t.ty.clone())])
}

/// `CheckNumerics(t) {message}`: `t`, failing the run where it holds a NaN or an infinity.
pub(super) fn check_numerics(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let t = n.input(0)?;
    let finite = c.op("stablehlo.is_finite", &[t], "", t.ty.with_dtype(DType::Bool));
    let bad = c.elementwise("not", &[&finite]);
    let message = n.attrs.get_str("message").unwrap_or("").to_string();
    check::fail_if(c, &bad, || format!("{message} : Tensor had NaN or Inf values"));
    Ok(vec![t.clone()])
}

/// `ToBool(x)`: a scalar's truth (nonzero); otherwise whether `x` has elements.
pub(super) fn to_bool(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    if x.ty.rank() == 0 {
        if x.ty.dtype == DType::Bool {
            return Ok(vec![x.clone()]);
        }
        let zero = c.splat(&x.ty, 0.0);
        return Ok(vec![c.compare(x, &zero, Cmp::Ne)]);
    }
    let has = if x.ty.count() > 0 { 1.0 } else { 0.0 };
    Ok(vec![c.splat(&x.ty.with_dtype(DType::Bool).with_shape(Vec::new()), has)])
}

/// `RightShift`: arithmetic on signed integers, logical on unsigned ones.
pub(super) fn right_shift(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let unsigned = matches!(n.input(0)?.ty.dtype, DType::U8 | DType::U16 | DType::U32 | DType::U64);
    binary(c, n, if unsigned { "shift_right_logical" } else { "shift_right_arithmetic" })
}

/// `PopulationCount(x)`: the set bits of each element, as `uint8`.
pub(super) fn population_count(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let count = c.elementwise("popcnt", &[x]);
    Ok(vec![c.convert(&count, DType::U8)])
}

/// `Bitcast(x) {type}`: `stablehlo.bitcast_convert` to the result type.
pub(super) fn bitcast(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    Ok(vec![c.op("stablehlo.bitcast_convert", &[x], "", n.out(0)?.clone())])
}
