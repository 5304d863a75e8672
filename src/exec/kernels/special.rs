//! Elementwise math beyond the common arithmetic, as TensorFlow's CPU
//! kernels compute it: `Atan2`, `Inv`, the truncating divisions (`Mod`,
//! `TruncateDiv`, `TruncateMod`), the `x·f(y)` ops that give 0 where `x`
//! (or `y` for `MulNoNan`) is 0 (`Xlogy`, `Xdivy`, `Xlog1py`, `MulNoNan`),
//! `ApproximateEqual`, `ClipByValue`, `NextAfter`, `ReciprocalGrad`, and
//! the checks and markers that pass their input through (`CheckNumerics`,
//! `EnsureShape`, `PreventGradient`, `ToBool`).
//!
//! Binary ops broadcast NumPy style (`ApproximateEqual` needs equal
//! shapes, as TensorFlow's). Integer divisions by zero are an error, as in
//! the other integer kernels. One pass over the inputs, no temporaries
//! beyond the output.

use ndarray::{ArcArray, IxDyn, Zip};

use super::arg;
use super::elementwise::{same, with_float, Flt};
use super::math::{broadcast_zip, Num};
use super::special_fns as fns;
use crate::exec::error::KernelError;
use crate::exec::tensor::Tensor;
use crate::ir::{AttrMap, AttrValue};

fn one(t: Tensor) -> Result<Vec<Tensor>, KernelError> {
    Ok(vec![t])
}

/// Runs `op` if it is one of these ops; `None` otherwise.
pub(crate) fn dispatch(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Option<Result<Vec<Tensor>, KernelError>> {
    let x = |i: usize| arg(op, inputs, i);
    let un = |f: fn(f64) -> f64, g: fn(f32) -> f32| -> Result<Vec<Tensor>, KernelError> {
        match x(0)? {
            Tensor::F32(a) => one(Tensor::from_array(a.mapv(g))),
            Tensor::F64(a) => one(Tensor::from_array(a.mapv(f))),
            other => Err(KernelError::dtype(op, other.dtype(), "a floating-point input is required")),
        }
    };
    let float2 = |f: fn(f64, f64) -> f64, g: fn(f32, f32) -> f32| -> Result<Vec<Tensor>, KernelError> {
        one(float_binary(op, x(0)?, x(1)?, f, g)?)
    };
    Some(match op {
        "Atan2" => float2(f64::atan2, f32::atan2),
        "NextAfter" => float2(libm::nextafter, libm::nextafterf),
        "Xlogy" => {
            float2(|a, b| if a == 0.0 { 0.0 } else { a * b.ln() }, |a, b| if a == 0.0 { 0.0 } else { a * b.ln() })
        }
        "Xlog1py" => {
            float2(|a, b| if a == 0.0 { 0.0 } else { a * b.ln_1p() }, |a, b| if a == 0.0 { 0.0 } else { a * b.ln_1p() })
        }
        "Xdivy" => float2(|a, b| if a == 0.0 { 0.0 } else { a / b }, |a, b| if a == 0.0 { 0.0 } else { a / b }),
        "MulNoNan" => float2(|a, b| if b == 0.0 { 0.0 } else { a * b }, |a, b| if b == 0.0 { 0.0 } else { a * b }),
        "ReciprocalGrad" => float2(|y, dy| -dy * (y * y), |y, dy| -dy * (y * y)),
        "Lgamma" => un(fns::lgamma, libm::lgammaf),
        "Digamma" => un(fns::digamma, |v| fns::digamma(f64::from(v)) as f32),
        "Erfinv" => un(fns::erfinv, |v| fns::erfinv(f64::from(v)) as f32),
        "Ndtri" => un(fns::ndtri, |v| fns::ndtri(f64::from(v)) as f32),
        "BesselI0e" => un(fns::bessel_i0e, |v| fns::bessel_i0e(f64::from(v)) as f32),
        "BesselI1e" => un(fns::bessel_i1e, |v| fns::bessel_i1e(f64::from(v)) as f32),
        "Zeta" => float2(fns::zeta, |a, b| fns::zeta(f64::from(a), f64::from(b)) as f32),
        "Polygamma" => float2(fns::polygamma, |a, b| fns::polygamma(f64::from(a), f64::from(b)) as f32),
        "Igamma" => float2(fns::igamma, |a, b| fns::igamma(f64::from(a), f64::from(b)) as f32),
        "Igammac" => float2(fns::igammac, |a, b| fns::igammac(f64::from(a), f64::from(b)) as f32),
        "Betainc" => (|| one(betainc(op, x(0)?, x(1)?, x(2)?)?))(),
        "Inv" => x(0).and_then(|t| one(super::math::unary(op, super::math::UnaryOp::Reciprocal, t)?)),
        "Mod" | "TruncateMod" => (|| one(truncating(op, false, x(0)?, x(1)?)?))(),
        "TruncateDiv" => (|| one(truncating(op, true, x(0)?, x(1)?)?))(),
        "ApproximateEqual" => (|| {
            let tolerance = match attrs.get("tolerance") {
                Some(AttrValue::Float(f)) => f64::from(*f),
                _ => 1e-5,
            };
            one(approximate_equal(op, x(0)?, x(1)?, tolerance)?)
        })(),
        "ClipByValue" => (|| one(clip_by_value(op, x(0)?, x(1)?, x(2)?)?))(),
        "CheckNumerics" => x(0).and_then(|t| one(check_numerics(op, t, attrs.get_str("message").unwrap_or(""))?)),
        "EnsureShape" => x(0).and_then(|t| one(ensure_shape(op, t, attrs)?)),
        "PreventGradient" => x(0).map(|t| vec![t.clone()]),
        "ToBool" => x(0).map(|t| vec![Tensor::scalar(to_bool(t))]),
        _ => return None,
    })
}

/// An elementwise float binary op, computed in the input's own type.
fn float_binary(
    op: &str,
    x: &Tensor,
    y: &Tensor,
    f: fn(f64, f64) -> f64,
    g: fn(f32, f32) -> f32,
) -> Result<Tensor, KernelError> {
    match (x, y) {
        (Tensor::F32(a), Tensor::F32(b)) => Ok(Tensor::from_array(broadcast_zip(op, a, b, g)?)),
        (Tensor::F64(a), Tensor::F64(b)) => Ok(Tensor::from_array(broadcast_zip(op, a, b, f)?)),
        (a, b) if a.dtype() != b.dtype() => {
            Err(KernelError::invalid(op, format!("inputs have different dtypes {} and {}", a.dtype(), b.dtype())))
        }
        (a, _) => Err(KernelError::dtype(op, a.dtype(), "a floating-point input is required")),
    }
}

/// `Betainc(a, b, x)`: the regularized incomplete beta function; each operand is a scalar or of
/// the one shape the others have.
fn betainc(op: &str, a: &Tensor, b: &Tensor, x: &Tensor) -> Result<Tensor, KernelError> {
    let shape = [a, b, x].iter().map(|t| t.shape()).find(|s| !s.is_empty()).unwrap_or(&[]).to_vec();
    if let Some(t) = [a, b, x].iter().find(|t| !t.shape().is_empty() && t.shape() != shape.as_slice()) {
        return Err(KernelError::invalid(
            op,
            format!("a, b and x must be scalars or of one shape: {:?} against {:?}", t.shape(), shape),
        ));
    }
    fn run<T: Flt>(op: &str, a: &Tensor, b: &Tensor, x: &Tensor, shape: &[usize]) -> Result<Tensor, KernelError> {
        fn at<'t, T: Flt>(
            op: &str,
            t: &'t Tensor,
            like: &Tensor,
            shape: &[usize],
        ) -> Result<ndarray::ArrayViewD<'t, T>, KernelError> {
            let arr = same::<T>(op, t, like)?;
            arr.broadcast(IxDyn(shape)).ok_or_else(|| KernelError::invalid(op, "operands do not broadcast"))
        }
        let (va, vb, vx) = (at::<T>(op, a, a, shape)?, at::<T>(op, b, a, shape)?, at::<T>(op, x, a, shape)?);
        let out = Zip::from(&va).and(&vb).and(&vx).map_collect(|&p, &q, &v| {
            T::c(fns::betainc(
                p.to_f64().unwrap_or(f64::NAN),
                q.to_f64().unwrap_or(f64::NAN),
                v.to_f64().unwrap_or(f64::NAN),
            ))
        });
        Ok(Tensor::from_array(out))
    }
    match a {
        Tensor::F32(_) => run::<f32>(op, a, b, x, &shape),
        Tensor::F64(_) => run::<f64>(op, a, b, x, &shape),
        other => Err(KernelError::dtype(op, other.dtype(), "a floating-point input is required")),
    }
}

/// Truncated division (`div`) or the remainder with the dividend's sign (C's `%` and `fmod`).
fn truncating(op: &str, div: bool, x: &Tensor, y: &Tensor) -> Result<Tensor, KernelError> {
    fn int<T: Num>(op: &str, div: bool, a: &ArcArray<T, IxDyn>, b: &ArcArray<T, IxDyn>) -> Result<Tensor, KernelError> {
        if !a.is_empty() && b.iter().any(|v| v.is_zero()) {
            return Err(KernelError::invalid(op, "integer division by zero"));
        }
        let out = if div {
            broadcast_zip(op, a, b, T::div)?
        } else {
            broadcast_zip(op, a, b, |p, q| p.sub(p.div(q).mul(q)))?
        };
        Ok(Tensor::from_array(out))
    }
    match (x, y) {
        (Tensor::I32(a), Tensor::I32(b)) => int(op, div, a, b),
        (Tensor::I64(a), Tensor::I64(b)) => int(op, div, a, b),
        (a, b) if a.dtype() != b.dtype() => {
            Err(KernelError::invalid(op, format!("inputs have different dtypes {} and {}", a.dtype(), b.dtype())))
        }
        _ if div => float_binary(op, x, y, |a, b| (a / b).trunc(), |a, b| (a / b).trunc()),
        _ => float_binary(op, x, y, |a, b| a % b, |a, b| a % b),
    }
}

/// `|x - y| < tolerance`, elementwise over operands of one shape.
fn approximate_equal(op: &str, x: &Tensor, y: &Tensor, tolerance: f64) -> Result<Tensor, KernelError> {
    if x.shape() != y.shape() {
        return Err(KernelError::invalid(
            op,
            format!("x and y must be of the same shape: {:?} against {:?}", x.shape(), y.shape()),
        ));
    }
    fn close<T: Num>(a: &ArcArray<T, IxDyn>, b: &ArcArray<T, IxDyn>, tol: f64, abs: impl Fn(T, T) -> f64) -> Tensor {
        Tensor::from_array(Zip::from(a).and(b).map_collect(|&p, &q| abs(p, q) < tol))
    }
    match x {
        Tensor::F32(a) => Ok(close(a, same(op, y, x)?, tolerance, |p, q| f64::from((p - q).abs()))),
        Tensor::F64(a) => Ok(close(a, same(op, y, x)?, tolerance, |p, q| (p - q).abs())),
        Tensor::I32(a) => Ok(close(a, same(op, y, x)?, tolerance, |p, q| (i64::from(p) - i64::from(q)).abs() as f64)),
        Tensor::I64(a) => Ok(close(a, same(op, y, x)?, tolerance, |p, q| p.abs_diff(q) as f64)),
        other => Err(KernelError::dtype(op, other.dtype(), "a numeric input is required")),
    }
}

/// `min(max(t, lo), hi)`; `lo` and `hi` are scalars or of `t`'s shape.
fn clip_by_value(op: &str, t: &Tensor, lo: &Tensor, hi: &Tensor) -> Result<Tensor, KernelError> {
    for (bound, name) in [(lo, "clip_value_min"), (hi, "clip_value_max")] {
        if !bound.shape().is_empty() && bound.shape() != t.shape() {
            return Err(KernelError::invalid(
                op,
                format!("{name} must be a scalar or have the shape of t {:?}, got {:?}", t.shape(), bound.shape()),
            ));
        }
    }
    fn clip<T: Num>(op: &str, t: &Tensor, lo: &Tensor, hi: &Tensor) -> Result<Tensor, KernelError> {
        let (a, l, h) = (same::<T>(op, t, t)?, same::<T>(op, lo, t)?, same::<T>(op, hi, t)?);
        let low = broadcast_zip(op, a, l, |v, l| if v < l { l } else { v })?.into_shared();
        Ok(Tensor::from_array(broadcast_zip(op, &low, h, |v, h| if v > h { h } else { v })?))
    }
    match t {
        Tensor::F32(_) => clip::<f32>(op, t, lo, hi),
        Tensor::F64(_) => clip::<f64>(op, t, lo, hi),
        Tensor::I32(_) => clip::<i32>(op, t, lo, hi),
        Tensor::I64(_) => clip::<i64>(op, t, lo, hi),
        other => Err(KernelError::dtype(op, other.dtype(), "a numeric input is required")),
    }
}

/// The input, or an error naming `message` when it holds a NaN or an infinity.
fn check_numerics(op: &str, t: &Tensor, message: &str) -> Result<Tensor, KernelError> {
    fn bad<T: Flt>(a: &ArcArray<T, IxDyn>) -> (bool, bool) {
        (a.iter().any(|v| v.is_nan()), a.iter().any(|v| v.is_infinite()))
    }
    let (nan, inf) = with_float!(op, t, a, T => Ok::<_, KernelError>(bad::<T>(a)))?;
    let what = match (nan, inf) {
        (false, false) => return Ok(t.clone()),
        (true, true) => "Inf and NaN",
        (true, false) => "NaN",
        (false, true) => "Inf",
    };
    Err(KernelError::invalid(op, format!("{message} : Tensor had {what} values")))
}

/// The input, or an error when its shape does not fit the `shape` attribute (-1 fits any size).
fn ensure_shape(op: &str, t: &Tensor, attrs: &AttrMap) -> Result<Tensor, KernelError> {
    let want = attrs.get("shape").and_then(|v| v.as_shape()).and_then(|s| s.dims.clone());
    if let Some(dims) = want {
        let fits = dims.len() == t.shape().len()
            && dims.iter().zip(t.shape()).all(|(&d, &n)| d < 0 || usize::try_from(d).is_ok_and(|d| d == n));
        if !fits {
            return Err(KernelError::invalid(
                op,
                format!("Shape of tensor {:?} is not compatible with expected shape {dims:?}", t.shape()),
            ));
        }
    }
    Ok(t.clone())
}

/// `ToBool`: a scalar's truth (nonzero, or a non-empty string); otherwise whether it has elements.
fn to_bool(t: &Tensor) -> bool {
    if !t.shape().is_empty() {
        return !t.is_empty();
    }
    match t {
        Tensor::F32(a) => a.iter().any(|&v| v != 0.0),
        Tensor::F64(a) => a.iter().any(|&v| v != 0.0),
        Tensor::I32(a) => a.iter().any(|&v| v != 0),
        Tensor::I64(a) => a.iter().any(|&v| v != 0),
        Tensor::Bool(a) => a.iter().any(|&v| v),
        Tensor::U8(a) => a.iter().any(|&v| v != 0),
        Tensor::I16(a) => a.iter().any(|&v| v != 0),
        Tensor::U16(a) => a.iter().any(|&v| v != 0),
        Tensor::I8(a) => a.iter().any(|&v| v != 0),
        Tensor::U32(a) => a.iter().any(|&v| v != 0),
        Tensor::U64(a) => a.iter().any(|&v| v != 0),
        Tensor::C64(a) => a.iter().any(|v| v.re != 0.0 || v.im != 0.0),
        Tensor::C128(a) => a.iter().any(|v| v.re != 0.0 || v.im != 0.0),
        Tensor::BF16(a) => a.iter().any(|&v| f32::from(v) != 0.0),
        Tensor::F16(a) => a.iter().any(|&v| f32::from(v) != 0.0),
        Tensor::Str(a) => a.iter().any(|v| !v.is_empty()),
        _ => !t.is_empty(),
    }
}
