//! Elementwise builders: arithmetic, comparisons, selects, casts, and the
//! math of `tf.math` (sign, finiteness tests). Operands broadcast NumPy
//! style to the result's shape first. Integer divisions check their
//! divisor under a device-check scope (XLA divides by zero in silence).
//! Cost: a few ops per TF op.

use super::{check, is_float, Call};
use crate::xla::stablehlo::text::{Cmp, Ctx, Val};

/// A unary op named `name` (`stablehlo.` is implied unless it has a dialect).
pub(super) fn unary(c: &mut Ctx, n: &Call, name: &str) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let full = if name.contains('.') { name.to_string() } else { format!("stablehlo.{name}") };
    Ok(vec![c.op(&full, &[x], "", x.ty.clone())])
}

/// Both operands broadcast to the result shape (NumPy rules), in their own dtype.
pub(super) fn broadcast_pair(c: &mut Ctx, n: &Call) -> Result<(Val, Val), String> {
    let shape = n.out(0)?.shape.clone();
    let a = c.broadcast_to(n.input(0)?, &shape);
    let b = c.broadcast_to(n.input(1)?, &shape);
    Ok((a, b))
}

pub(super) fn binary(c: &mut Ctx, n: &Call, name: &str) -> Result<Vec<Val>, String> {
    let (a, b) = broadcast_pair(c, n)?;
    Ok(vec![c.elementwise(name, &[&a, &b])])
}

/// `AddV2`; on TensorLists (TensorArray flows, as TensorFlow's gradient
/// of a loop adds them) as the simulator adds them: two lists add their
/// buffers (`AddN`), and a list plus a compile-time float zero is the list.
pub(super) fn add(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let lists = [n.input(0)?, n.input(1)?].map(|v| !v.ty.parts.is_empty());
    let zero = |k: usize| match n.consts.get(k).and_then(Option::as_ref) {
        Some(t) => t.to_vec::<f32>().is_some_and(|v| v.iter().all(|&x| x == 0.0)),
        None => false,
    };
    match lists {
        [false, false] => binary(c, n, "add"),
        [true, true] => super::list::add_n(c, n),
        [true, false] if zero(1) => Ok(vec![n.input(0)?.clone()]),
        [false, true] if zero(0) => Ok(vec![n.input(1)?.clone()]),
        _ => Err("a TensorList (a TensorArray's flow) adds only to a TensorList or to a constant float zero".into()),
    }
}

pub(super) fn compare(c: &mut Ctx, n: &Call, cmp: Cmp) -> Result<Vec<Val>, String> {
    let (a, b) = broadcast_pair(c, n)?;
    Ok(vec![c.compare(&a, &b, cmp)])
}

pub(super) fn div(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    // Integer `Div` truncates, as C and TensorFlow do (`-7 / 2` is -3).
    check::nonzero_divisor(c, n.input(1)?, n.op);
    binary(c, n, "divide")
}

/// `DivNoNan(a, b)`: `a / b`, and 0 where `b` is 0.
pub(super) fn div_no_nan(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (a, b) = broadcast_pair(c, n)?;
    let q = c.elementwise("divide", &[&a, &b]);
    let zero = c.splat(&b.ty, 0.0);
    let by_zero = c.compare(&b, &zero, Cmp::Eq);
    Ok(vec![c.select(&by_zero, &zero, &q)])
}

/// Floor division: `floor(a / b)` for floats; for integers the truncated
/// quotient, one less where the signs differ and the division is inexact.
pub(super) fn floor_div(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    check::nonzero_divisor(c, n.input(1)?, n.op);
    let (a, b) = broadcast_pair(c, n)?;
    if is_float(a.ty.dtype) {
        let q = c.elementwise("divide", &[&a, &b]);
        return Ok(vec![c.elementwise("floor", &[&q])]);
    }
    let q = c.elementwise("divide", &[&a, &b]);
    let r = c.elementwise("remainder", &[&a, &b]);
    let zero = c.splat(&a.ty, 0.0);
    let one = c.splat(&a.ty, 1.0);
    let inexact = c.compare(&r, &zero, Cmp::Ne);
    let a_neg = c.compare(&a, &zero, Cmp::Lt);
    let b_neg = c.compare(&b, &zero, Cmp::Lt);
    let differ = c.compare(&a_neg, &b_neg, Cmp::Ne);
    let fix = c.elementwise("and", &[&inexact, &differ]);
    let less = c.elementwise("subtract", &[&q, &one]);
    Ok(vec![c.select(&fix, &less, &q)])
}

/// Floor modulo: the remainder with the divisor's sign.
pub(super) fn floor_mod(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    check::nonzero_divisor(c, n.input(1)?, n.op);
    let (a, b) = broadcast_pair(c, n)?;
    let r = c.elementwise("remainder", &[&a, &b]);
    let zero = c.splat(&a.ty, 0.0);
    let nonzero = c.compare(&r, &zero, Cmp::Ne);
    let r_neg = c.compare(&r, &zero, Cmp::Lt);
    let b_neg = c.compare(&b, &zero, Cmp::Lt);
    let differ = c.compare(&r_neg, &b_neg, Cmp::Ne);
    let fix = c.elementwise("and", &[&nonzero, &differ]);
    let shifted = c.elementwise("add", &[&r, &b]);
    Ok(vec![c.select(&fix, &shifted, &r)])
}

pub(super) fn reciprocal(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let one = c.splat(&x.ty, 1.0);
    Ok(vec![c.elementwise("divide", &[&one, x])])
}

pub(super) fn square(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    Ok(vec![c.elementwise("multiply", &[x, x])])
}

pub(super) fn squared_difference(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (a, b) = broadcast_pair(c, n)?;
    let d = c.elementwise("subtract", &[&a, &b]);
    Ok(vec![c.elementwise("multiply", &[&d, &d])])
}

pub(super) fn add_n(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    if !n.input(0)?.ty.parts.is_empty() {
        return super::list::add_n(c, n);
    }
    let shape = n.out(0)?.shape.clone();
    let mut acc = c.broadcast_to(n.input(0)?, &shape);
    for v in &n.inputs[1..] {
        let v = c.broadcast_to(v, &shape);
        acc = c.elementwise("add", &[&acc, &v]);
    }
    Ok(vec![acc])
}

/// `SelectV2(p, a, b)`: all three broadcast.
pub(super) fn select(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let shape = n.out(0)?.shape.clone();
    let p = c.broadcast_to(n.input(0)?, &shape);
    let a = c.broadcast_to(n.input(1)?, &shape);
    let b = c.broadcast_to(n.input(2)?, &shape);
    Ok(vec![c.select(&p, &a, &b)])
}

/// `Select(p, a, b)`: a vector `p` picks rows (leading dimension); otherwise as `SelectV2`.
pub(super) fn select_v1(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let p = n.input(0)?;
    let shape = n.out(0)?.shape.clone();
    if p.ty.rank() == 1 && shape.len() > 1 {
        let p =
            c.op("stablehlo.broadcast_in_dim", &[p], "broadcast_dimensions = array<i64: 0>", p.ty.with_shape(shape));
        return Ok(vec![c.select(&p, n.input(1)?, n.input(2)?)]);
    }
    select(c, n)
}

pub(super) fn cast(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let to = n.out(0)?.dtype;
    let x = n.input(0)?;
    Ok(vec![c.convert(x, to)])
}

/// `Sign(x)`: -1, 0 or 1 (NaN stays NaN); `stablehlo.sign` for floats, compares for integers.
pub(super) fn sign(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    if is_float(x.ty.dtype) {
        return Ok(vec![c.elementwise("sign", &[x])]);
    }
    let zero = c.splat(&x.ty, 0.0);
    let one = c.splat(&x.ty, 1.0);
    let minus = c.splat(&x.ty, -1.0);
    let pos = c.compare(x, &zero, Cmp::Gt);
    let neg = c.compare(x, &zero, Cmp::Lt);
    let s = c.select(&neg, &minus, &zero);
    Ok(vec![c.select(&pos, &one, &s)])
}

/// The finiteness tests.
#[derive(Clone, Copy, Debug)]
pub(super) enum FloatTest {
    Finite,
    Nan,
    Inf,
}

pub(super) fn float_test(c: &mut Ctx, n: &Call, t: FloatTest) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let bools = x.ty.with_dtype(crate::ir::DType::Bool);
    Ok(vec![match t {
        FloatTest::Finite => c.op("stablehlo.is_finite", &[x], "", bools),
        FloatTest::Nan => c.compare(x, x, Cmp::Ne),
        FloatTest::Inf => {
            let a = c.elementwise("abs", &[x]);
            let inf = c.splat(&x.ty, f64::INFINITY);
            c.compare(&a, &inf, Cmp::Eq)
        }
    }])
}
