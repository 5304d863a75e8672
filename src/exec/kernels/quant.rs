//! Simulated quantization: the fake-quant ops of quantization-aware
//! training and `QuantizeAndDequantizeV2/V3/V4`, as TensorFlow's CPU
//! kernels compute them.
//!
//! Fake quantization nudges `[min, max]` so that real zero falls on an
//! integer step of `num_bits` (from 1 with `narrow_range`), clamps to the
//! nudged range and rounds to the nearest step, in f32 throughout as
//! TensorFlow's kernels do (so the rounding boundaries match). Its
//! gradient ops pass the incoming gradient where the input lies inside the
//! nudged range, and give `min`/`max` the sums of what falls below/above.
//! Per-channel forms apply one range per last-dimension channel.
//!
//! `QuantizeAndDequantize*` scales by the largest factor that keeps
//! `[min, max]` within the integer range (signed or not, narrow or not),
//! rounds half to even (or half up) and scales back; without a given range
//! it uses the input's own minimum and maximum, per `axis` slice when
//! `axis` is not -1.

use num_traits::Float;

use super::{arg, attr_bool, attr_int};
use crate::exec::error::KernelError;
use crate::exec::tensor::Tensor;
use crate::ir::{AttrMap, AttrValue, DType};

fn one(t: Tensor) -> Result<Vec<Tensor>, KernelError> {
    Ok(vec![t])
}

fn attr_f32(attrs: &AttrMap, key: &str, default: f32) -> f32 {
    match attrs.get(key) {
        Some(AttrValue::Float(f)) => *f,
        _ => default,
    }
}

/// Runs `op` if it is a quantization op; `None` otherwise.
pub(crate) fn dispatch(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Option<Result<Vec<Tensor>, KernelError>> {
    let x = |i: usize| arg(op, inputs, i);
    let steps = || Steps::of(op, attrs);
    Some(match op {
        "FakeQuantWithMinMaxArgs" => (|| {
            let range = Range { min: attr_f32(attrs, "min", -6.0), max: attr_f32(attrs, "max", 6.0) };
            one(fake_quant(op, x(0)?, &[range], steps()?)?)
        })(),
        "FakeQuantWithMinMaxArgsGradient" => (|| {
            let range = Range { min: attr_f32(attrs, "min", -6.0), max: attr_f32(attrs, "max", 6.0) };
            let (dx, _, _) = fake_quant_grad(op, x(0)?, x(1)?, &[range], steps()?)?;
            one(dx)
        })(),
        "FakeQuantWithMinMaxVars" => (|| one(fake_quant(op, x(0)?, &ranges(op, x(1)?, x(2)?, None)?, steps()?)?))(),
        "FakeQuantWithMinMaxVarsPerChannel" => (|| {
            let depth = x(0)?.shape().last().copied();
            one(fake_quant(op, x(0)?, &ranges(op, x(1)?, x(2)?, depth)?, steps()?)?)
        })(),
        "FakeQuantWithMinMaxVarsGradient" | "FakeQuantWithMinMaxVarsPerChannelGradient" => (|| {
            let per_channel = op.ends_with("PerChannelGradient");
            let depth = if per_channel { x(1)?.shape().last().copied() } else { None };
            let rs = ranges(op, x(2)?, x(3)?, depth)?;
            let (dx, dmin, dmax) = fake_quant_grad(op, x(0)?, x(1)?, &rs, steps()?)?;
            let shape = x(2)?.shape().to_vec();
            Ok(vec![dx, Tensor::from_vec(&shape, dmin)?, Tensor::from_vec(&shape, dmax)?])
        })(),
        "QuantizeAndDequantizeV2" | "QuantizeAndDequantizeV4" | "QuantizeAndDequantizeV3" => (|| {
            let num_bits = if op == "QuantizeAndDequantizeV3" {
                match x(3)?.to_i64_vec(op, "num_bits")?.as_slice() {
                    &[n] => n,
                    _ => return Err(KernelError::invalid(op, "num_bits must be a scalar")),
                }
            } else {
                attr_int(attrs, "num_bits", 8)
            };
            let config = QdqConfig {
                signed: attr_bool(attrs, "signed_input", true),
                num_bits,
                range_given: attr_bool(attrs, "range_given", op == "QuantizeAndDequantizeV3"),
                half_to_even: match attrs.get_str("round_mode").unwrap_or("HALF_TO_EVEN") {
                    "HALF_TO_EVEN" => true,
                    "HALF_UP" => false,
                    other => {
                        return Err(KernelError::invalid(
                            op,
                            format!("round_mode {other:?} is not HALF_TO_EVEN or HALF_UP"),
                        ))
                    }
                },
                narrow: attr_bool(attrs, "narrow_range", false),
                axis: attr_int(attrs, "axis", -1),
            };
            one(quantize_and_dequantize(op, x(0)?, x(1)?, x(2)?, &config)?)
        })(),
        _ => return None,
    })
}

/// The integer steps of a fake quantization: `[quant_min, quant_max]`.
#[derive(Clone, Copy, Debug)]
struct Steps {
    low: f32,
    high: f32,
}

impl Steps {
    fn of(op: &str, attrs: &AttrMap) -> Result<Steps, KernelError> {
        let bits = attr_int(attrs, "num_bits", 8);
        if !(2..=16).contains(&bits) {
            return Err(KernelError::invalid(op, format!("num_bits is {bits}; it must be between 2 and 16")));
        }
        let low = if attr_bool(attrs, "narrow_range", false) { 1.0 } else { 0.0 };
        Ok(Steps { low, high: ((1i64 << bits) - 1) as f32 })
    }
}

/// One real range to quantize into.
#[derive(Clone, Copy, Debug)]
struct Range {
    min: f32,
    max: f32,
}

/// A range nudged so that zero is exactly representable.
#[derive(Clone, Copy, Debug)]
struct Nudged {
    min: f32,
    max: f32,
    scale: f32,
    inv_scale: f32,
}

fn nudge(r: Range, s: Steps) -> Nudged {
    let scale = (r.max - r.min) / (s.high - s.low);
    let inv_scale = (s.high - s.low) / (r.max - r.min);
    let zero_from_min = s.low - r.min / scale;
    let zero = if zero_from_min < s.low {
        s.low
    } else if zero_from_min > s.high {
        s.high
    } else {
        zero_from_min.round()
    };
    Nudged { min: (s.low - zero) * scale, max: (s.high - zero) * scale, scale, inv_scale }
}

/// The per-tensor (`depth` = `None`) or per-channel ranges of `min`/`max` operands.
fn ranges(op: &str, min: &Tensor, max: &Tensor, depth: Option<usize>) -> Result<Vec<Range>, KernelError> {
    let (lo, hi) = (f32s(op, min, "min")?, f32s(op, max, "max")?);
    let want = depth.unwrap_or(1);
    if lo.len() != want || hi.len() != want || (depth.is_none() && !min.shape().is_empty()) {
        let what = if depth.is_some() {
            format!("vectors of the last dimension's size {want}")
        } else {
            "scalars".to_string()
        };
        return Err(KernelError::invalid(
            op,
            format!("min and max must be {what}, got shapes {:?} and {:?}", min.shape(), max.shape()),
        ));
    }
    lo.into_iter().zip(hi).map(|(min, max)| checked(op, Range { min, max })).collect()
}

fn checked(op: &str, r: Range) -> Result<Range, KernelError> {
    if r.min <= r.max {
        Ok(r)
    } else {
        Err(KernelError::invalid(op, format!("min {} is greater than max {}", r.min, r.max)))
    }
}

fn f32s(op: &str, t: &Tensor, what: &str) -> Result<Vec<f32>, KernelError> {
    t.to_vec::<f32>().ok_or_else(|| KernelError::dtype(op, t.dtype(), format!("{what} must be float32")))
}

/// `FakeQuantWithMinMax*`: one range for all of `x`, or one per channel (last dimension).
fn fake_quant(op: &str, x: &Tensor, ranges: &[Range], steps: Steps) -> Result<Tensor, KernelError> {
    let values = f32s(op, x, "inputs")?;
    let nudged: Vec<Nudged> = ranges.iter().map(|&r| nudge(r, steps)).collect();
    let out = values
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let n = nudged[i % nudged.len()];
            let shifted = v.min(n.max).max(n.min) - n.min;
            let zero = (-n.min * n.inv_scale + 0.5).floor();
            (shifted * n.inv_scale - zero + 0.5).floor() * n.scale
        })
        .collect();
    Tensor::from_vec(x.shape(), out)
}

/// The three gradients of a fake quantization: of the input, of each `min`, of each `max`.
fn fake_quant_grad(
    op: &str,
    g: &Tensor,
    x: &Tensor,
    ranges: &[Range],
    steps: Steps,
) -> Result<(Tensor, Vec<f32>, Vec<f32>), KernelError> {
    let (gs, xs) = (f32s(op, g, "gradients")?, f32s(op, x, "inputs")?);
    if g.shape() != x.shape() {
        return Err(KernelError::invalid(
            op,
            format!("gradients {:?} and inputs {:?} differ in shape", g.shape(), x.shape()),
        ));
    }
    let nudged: Vec<Nudged> = ranges.iter().map(|&r| nudge(r, steps)).collect();
    let (mut dmin, mut dmax) = (vec![0f32; nudged.len()], vec![0f32; nudged.len()]);
    let dx = gs
        .iter()
        .zip(&xs)
        .enumerate()
        .map(|(i, (&g, &v))| {
            let c = i % nudged.len();
            let n = nudged[c];
            if v < n.min {
                dmin[c] += g;
            } else if v > n.max {
                dmax[c] += g;
            }
            if v >= n.min && v <= n.max {
                g
            } else {
                0.0
            }
        })
        .collect();
    Ok((Tensor::from_vec(x.shape(), dx)?, dmin, dmax))
}

/// The attributes of a `QuantizeAndDequantize*`.
#[derive(Clone, Copy, Debug)]
struct QdqConfig {
    signed: bool,
    num_bits: i64,
    range_given: bool,
    half_to_even: bool,
    narrow: bool,
    axis: i64,
}

fn quantize_and_dequantize(
    op: &str,
    x: &Tensor,
    min: &Tensor,
    max: &Tensor,
    c: &QdqConfig,
) -> Result<Tensor, KernelError> {
    let bits_limit = if c.signed { 64 } else { 63 };
    if c.num_bits < 1 || c.num_bits > bits_limit {
        return Err(KernelError::invalid(op, format!("num_bits is {}; it must be in [1, {bits_limit}]", c.num_bits)));
    }
    match x.dtype() {
        DType::F32 => typed::<f32>(op, x, min, max, c),
        DType::F64 => typed::<f64>(op, x, min, max, c),
        other => Err(KernelError::dtype(op, other, "input must be floating point")),
    }
}

fn typed<T: Float + crate::exec::tensor::Element>(
    op: &str,
    x: &Tensor,
    min: &Tensor,
    max: &Tensor,
    c: &QdqConfig,
) -> Result<Tensor, KernelError> {
    let values = x.to_vec::<T>().ok_or_else(|| KernelError::dtype(op, x.dtype(), "input"))?;
    let shape = x.shape();
    // The slices: one (axis -1) or one per index of `axis`, with their elements' stride.
    let (depth, inner) = if c.axis == -1 {
        (1, 1)
    } else {
        let a = usize::try_from(c.axis).ok().filter(|&a| a < shape.len()).ok_or_else(|| {
            KernelError::invalid(op, format!("axis {} is out of range for rank {}", c.axis, shape.len()))
        })?;
        (shape[a], shape[a + 1..].iter().product::<usize>())
    };
    let slice_of = |i: usize| if depth == 1 { 0 } else { (i / inner) % depth };
    let (mut lo, mut hi): (Vec<T>, Vec<T>) = if c.range_given {
        let lo = min.to_vec::<T>().ok_or_else(|| KernelError::dtype(op, min.dtype(), "input_min"))?;
        let hi = max.to_vec::<T>().ok_or_else(|| KernelError::dtype(op, max.dtype(), "input_max"))?;
        if lo.len() != depth || hi.len() != depth {
            return Err(KernelError::invalid(op, format!("input_min and input_max must have {depth} elements")));
        }
        if let Some(k) = (0..depth).find(|&k| lo[k] > hi[k]) {
            return Err(KernelError::invalid(
                op,
                format!("input_min {:?} is greater than input_max {:?}", lo[k].to_f64(), hi[k].to_f64()),
            ));
        }
        (lo, hi)
    } else {
        let mut lo = vec![T::infinity(); depth];
        let mut hi = vec![T::neg_infinity(); depth];
        for (i, &v) in values.iter().enumerate() {
            let k = slice_of(i);
            lo[k] = lo[k].min(v);
            hi[k] = hi[k].max(v);
        }
        (lo, hi)
    };
    let (qmin, qmax): (i128, i128) = if c.signed {
        let half = 1i128 << (c.num_bits - 1);
        (if c.narrow { -half + 1 } else { -half }, half - 1)
    } else {
        (0, (1i128 << c.num_bits) - 1)
    };
    let (qmin, qmax) = (T::from(qmin).unwrap_or(T::zero()), T::from(qmax).unwrap_or(T::zero()));
    let mut scales = Vec::with_capacity(depth);
    for k in 0..depth {
        let from_min = if qmin * lo[k] > T::zero() { qmin / lo[k] } else { T::max_value() };
        let from_max = if qmax * hi[k] > T::zero() { qmax / hi[k] } else { T::max_value() };
        if from_min < from_max {
            let inverse = lo[k] / qmin;
            hi[k] = qmax * inverse;
            scales.push((from_min, inverse));
        } else {
            let inverse = hi[k] / qmax;
            lo[k] = qmin * inverse;
            scales.push((from_max, inverse));
        }
    }
    let half = T::from(0.5).unwrap_or(T::zero());
    let out: Vec<T> = values
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let k = slice_of(i);
            let (scale, inverse) = scales[k];
            let v = if c.range_given { v.min(hi[k]).max(lo[k]) } else { v };
            let scaled = v * scale;
            let rounded = if c.half_to_even { round_half_to_even(scaled) } else { (scaled + half).floor() };
            rounded * inverse
        })
        .collect();
    Tensor::from_vec(shape, out)
}

fn round_half_to_even<T: Float>(v: T) -> T {
    let r = v.round();
    let two = T::one() + T::one();
    if (v - v.trunc()).abs() == T::from(0.5).unwrap_or(T::zero()) && (r / two).fract() != T::zero() {
        r - v.signum()
    } else {
        r
    }
}
