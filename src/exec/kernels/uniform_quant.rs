//! TensorFlow's quantized-integer ops as its CPU kernels compute them:
//! `UniformQuantize`, `UniformDequantize`, `UniformRequantize`,
//! `UniformQuantizedClipByValue`, `UniformQuantizedAdd`, `UniformQuantizedDot`,
//! `UniformQuantizedConvolution` and the classic `Dequantize`.
//!
//! A quantized tensor (`qint8`, `quint8`, `qint32`) is held as its plain
//! integer tensor ([`DType::plain`]); the op's attributes say which
//! quantized dtype it is. A uniform quantization has a scale and a zero
//! point per tensor (`quantization_axis = -1`, scalar operands) or one per
//! index of the quantization axis (vectors of that dimension's size).
//!
//! Quantizing computes `floor(x * (1 / scale) + 0.5) + zero_point` in f32,
//! clamped to `[quantization_min_val, quantization_max_val]`; dequantizing
//! `(q - zero_point) * scale`. Requantizing multiplies `q - input_zero_point`
//! by `input_scale / output_scale` as a 31-bit fixed-point multiplier and a
//! shift, rounding half up once, then adds the output zero point and
//! clamps (so its ties round up, where the XLA lowering rounds half to
//! even). Adding requantizes both sides to the output scales and adds the
//! output zero point; the dot product accumulates `(lhs - zero point) *
//! (rhs - zero point)` in i32 and requantizes by `lhs_scale * rhs_scale /
//! output_scale`; the convolution (`XlaConv`'s general convolution on the
//! centered integers) requantizes the same way per output feature.
//! `Dequantize` supports the `MIN_COMBINED` and `SCALED` modes of a
//! whole tensor (`axis = -1`) and refuses `MIN_FIRST` and per-axis ranges.

use super::arg;
use crate::exec::error::KernelError;
use crate::exec::tensor::Tensor;
use crate::ir::{AttrMap, AttrValue, DType};

/// This family's ops: they take 8-bit operands as they are (no widening).
pub(crate) const OPS: &[&str] = &[
    "Dequantize",
    "UniformDequantize",
    "UniformQuantize",
    "UniformQuantizedAdd",
    "UniformQuantizedClipByValue",
    "UniformQuantizedConvolution",
    "UniformQuantizedDot",
    "UniformRequantize",
];

/// Runs `op` if it is one of this family's; `None` otherwise.
pub(crate) fn dispatch(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Option<Result<Vec<Tensor>, KernelError>> {
    let x = |i: usize| arg(op, inputs, i);
    let result = match op {
        "UniformQuantize" => (|| {
            let input = x(0)?;
            let q = Quant::read(op, attrs, "", x(1)?, x(2)?, input.shape())?;
            let values = floats(op, input)?;
            let inv: Vec<f32> = q.scales.iter().map(|s| 1.0 / s).collect();
            let out = q.map(input.shape(), &values, |v, c| {
                let steps = (v * inv[c] + 0.5).floor() as i64;
                q.clamp(steps + i64::from(q.zero_points[c]))
            });
            quantized(op, type_attr(op, attrs, "Tout")?, input.shape(), out)
        })(),
        "UniformDequantize" => (|| {
            let input = x(0)?;
            let q = Quant::read(op, attrs, "", x(1)?, x(2)?, input.shape())?;
            let values = integers(op, input)?;
            let out: Vec<f32> =
                q.map(input.shape(), &values, |v, c| ((v - i64::from(q.zero_points[c])) as i32) as f32 * q.scales[c]);
            Tensor::from_vec(input.shape(), out)
        })(),
        "UniformRequantize" => requantize(op, attrs, inputs),
        "UniformQuantizedClipByValue" => (|| {
            let operand = x(0)?;
            let q = Quant::read(op, attrs, "", x(3)?, x(4)?, operand.shape())?;
            let (low, high) = (integers(op, x(1)?)?, integers(op, x(2)?)?);
            if low.len() != q.scales.len() || high.len() != q.scales.len() {
                return Err(KernelError::invalid(op, "min and max must be shaped like scales"));
            }
            let values = integers(op, operand)?;
            let out = q.map(operand.shape(), &values, |v, c| v.max(low[c]).min(high[c]));
            quantized(op, operand.dtype(), operand.shape(), out)
        })(),
        "Dequantize" => dequantize(op, attrs, inputs),
        "UniformQuantizedAdd" => add(op, attrs, inputs),
        "UniformQuantizedDot" => dot(op, attrs, inputs),
        "UniformQuantizedConvolution" => convolution(op, attrs, inputs),
        _ => return None,
    };
    Some(result.map(|t| vec![t]))
}

/// A type attribute.
fn type_attr(op: &str, attrs: &AttrMap, key: &str) -> Result<DType, KernelError> {
    attrs
        .get(key)
        .and_then(AttrValue::as_type)
        .ok_or_else(|| KernelError::invalid(op, format!("missing type attribute `{key}`")))
}

/// The scales and zero points of one quantization, per tensor or per axis.
struct Quant {
    scales: Vec<f32>,
    zero_points: Vec<i32>,
    /// The quantization axis, or `None` per tensor.
    axis: Option<usize>,
    min: i64,
    max: i64,
}

impl Quant {
    /// Reads `<prefix>quantization_{axis,min_val,max_val}` and checks the
    /// scales and zero points against `shape`.
    fn read(
        op: &str,
        attrs: &AttrMap,
        prefix: &str,
        scales: &Tensor,
        zero_points: &Tensor,
        shape: &[usize],
    ) -> Result<Quant, KernelError> {
        let axis = attrs.get_int(&format!("{prefix}quantization_axis")).unwrap_or(-1);
        let min = attrs.get_int(&format!("{prefix}quantization_min_val")).unwrap_or(i64::from(i32::MIN));
        let max = attrs.get_int(&format!("{prefix}quantization_max_val")).unwrap_or(i64::from(i32::MAX));
        if min > max {
            return Err(KernelError::invalid(op, format!("{prefix}quantization_min_val {min} exceeds the max {max}")));
        }
        let axis = match axis {
            -1 => None,
            a if a >= 0 && (a as usize) < shape.len() => Some(a as usize),
            a => {
                return Err(KernelError::invalid(
                    op,
                    format!("{prefix}quantization_axis {a} is out of range for rank {}", shape.len()),
                ))
            }
        };
        let want: &[usize] = match axis {
            None => &[],
            Some(a) => std::slice::from_ref(&shape[a]),
        };
        if scales.shape() != want || zero_points.shape() != want {
            return Err(KernelError::invalid(
                op,
                format!(
                    "{prefix}scales {:?} and zero_points {:?} must have shape {want:?} for quantization axis {axis:?}",
                    scales.shape(),
                    zero_points.shape()
                ),
            ));
        }
        let scales =
            scales.to_vec::<f32>().ok_or_else(|| KernelError::dtype(op, scales.dtype(), "scales must be f32"))?;
        if scales.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
            return Err(KernelError::invalid(op, format!("{prefix}scales must be positive and finite")));
        }
        let zero_points = zero_points
            .to_vec::<i32>()
            .ok_or_else(|| KernelError::dtype(op, zero_points.dtype(), "zero_points must be i32"))?;
        Ok(Quant { scales, zero_points, axis, min, max })
    }

    fn clamp(&self, v: i64) -> i64 {
        v.clamp(self.min, self.max)
    }

    /// `f(value, channel)` over row-major `values` of `shape`.
    fn map<A: Copy, B>(&self, shape: &[usize], values: &[A], f: impl Fn(A, usize) -> B) -> Vec<B> {
        let channel = channels(shape, self.axis);
        values.iter().enumerate().map(|(i, &v)| f(v, channel(i))).collect()
    }
}

/// The index along `axis` of each flat position of `shape` (0 per tensor).
fn channels(shape: &[usize], axis: Option<usize>) -> impl Fn(usize) -> usize {
    let (inner, dim) = match axis {
        Some(a) => (shape[a + 1..].iter().product::<usize>().max(1), shape[a].max(1)),
        None => (1, 1),
    };
    move |i| (i / inner) % dim
}

/// The values of a float tensor as f32.
fn floats(op: &str, t: &Tensor) -> Result<Vec<f32>, KernelError> {
    t.to_vec::<f32>().ok_or_else(|| KernelError::dtype(op, t.dtype(), "the input must be f32"))
}

/// The values of a quantized (plain integer) tensor.
fn integers(op: &str, t: &Tensor) -> Result<Vec<i64>, KernelError> {
    match t {
        Tensor::I8(a) => Ok(a.iter().map(|&v| i64::from(v)).collect()),
        Tensor::U8(a) => Ok(a.iter().map(|&v| i64::from(v)).collect()),
        Tensor::I32(a) => Ok(a.iter().map(|&v| i64::from(v)).collect()),
        other => Err(KernelError::dtype(op, other.dtype(), "expected a qint8, quint8 or qint32 tensor")),
    }
}

/// Clamped integers as a tensor of quantized dtype `dtype` (held plain).
fn quantized(op: &str, dtype: DType, shape: &[usize], values: Vec<i64>) -> Result<Tensor, KernelError> {
    match dtype.plain() {
        DType::I8 => Tensor::from_vec(shape, values.into_iter().map(|v| v.clamp(-128, 127) as i8).collect()),
        DType::U8 => Tensor::from_vec(shape, values.into_iter().map(|v| v.clamp(0, 255) as u8).collect()),
        DType::I32 => Tensor::from_vec(
            shape,
            values.into_iter().map(|v| v.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32).collect(),
        ),
        other => Err(KernelError::dtype(op, other, "the output must be qint8, quint8 or qint32")),
    }
}

/// `multiplier` (positive, finite) as a 31-bit fixed-point fraction and a
/// power of two: `multiplier ≈ fraction / 2^31 * 2^shift`, the fraction in
/// `[2^30, 2^31)`; the shift clamped to `[-31, 30]` as TensorFlow clamps it.
pub(crate) fn quantize_multiplier(multiplier: f64) -> (i64, i32) {
    // frexp: multiplier = mantissa * 2^shift with the mantissa in [0.5, 1).
    let mut shift = multiplier.log2().floor() as i32 + 1;
    let mut mantissa = multiplier / 2f64.powi(shift);
    // log2 may be off by one near powers of two.
    if mantissa >= 1.0 {
        mantissa /= 2.0;
        shift += 1;
    } else if mantissa < 0.5 {
        mantissa *= 2.0;
        shift -= 1;
    }
    let mut fixed = (mantissa * 2f64.powi(31)).round() as i64;
    if fixed == 1 << 31 {
        fixed /= 2;
        shift += 1;
    }
    if shift < -31 {
        return (0, 0);
    }
    if shift > 30 {
        return ((1 << 31) - 1, 30);
    }
    (fixed, shift)
}

/// `x * fraction / 2^31 * 2^shift`, rounded half up once, saturated to i32.
pub(crate) fn multiply_by_fixed(x: i32, fraction: i64, shift: i32) -> i32 {
    let total = 31 - shift;
    let round = 1i64 << (total - 1);
    let product = i64::from(x).saturating_mul(fraction).saturating_add(round) >> total;
    product.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
}

/// `UniformRequantize(input, input_scales, input_zero_points, output_scales, output_zero_points)`.
fn requantize(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Result<Tensor, KernelError> {
    let input = arg(op, inputs, 0)?;
    let shape = input.shape();
    let from = Quant::read(op, attrs, "input_", arg(op, inputs, 1)?, arg(op, inputs, 2)?, shape)?;
    let to = Quant::read(op, attrs, "output_", arg(op, inputs, 3)?, arg(op, inputs, 4)?, shape)?;
    let out = requantize_values(op, &integers(op, input)?, shape, &from, &to)?;
    quantized(op, type_attr(op, attrs, "Tout")?, shape, out)
}

/// `values` (of `shape`, quantized by `from`) quantized by `to` instead, as
/// TensorFlow's CPU kernels requantize: a fixed-point multiplier per index
/// of the one quantization axis either side has.
fn requantize_values(
    op: &str,
    values: &[i64],
    shape: &[usize],
    from: &Quant,
    to: &Quant,
) -> Result<Vec<i64>, KernelError> {
    let axis = match (from.axis, to.axis) {
        (Some(a), Some(b)) if a != b => {
            return Err(KernelError::invalid(op, "per-axis input and output must share the quantization axis"))
        }
        (a, b) => a.or(b),
    };
    let per = |q: &Quant, c: usize| if q.axis.is_some() { c } else { 0 };
    let count = axis.map_or(1, |a| shape[a]);
    let fixed: Vec<(i64, i32)> = (0..count)
        .map(|c| quantize_multiplier(f64::from(from.scales[per(from, c)]) / f64::from(to.scales[per(to, c)])))
        .collect();
    let channel = channels(shape, axis);
    Ok(values
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let c = channel(i);
            let centered = (v as i32).wrapping_sub(from.zero_points[per(from, c)]);
            let (fraction, shift) = fixed[c];
            let moved = multiply_by_fixed(centered, fraction, shift).wrapping_add(to.zero_points[per(to, c)]);
            to.clamp(i64::from(moved))
        })
        .collect())
}

/// `UniformQuantizedAdd(lhs, rhs, lhs_scales, lhs_zero_points, rhs_scales,
/// rhs_zero_points, output_scales, output_zero_points)`: each side
/// requantized to the output scales (zero point 0), added with NumPy
/// broadcasting, plus the output zero point, clamped.
fn add(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Result<Tensor, KernelError> {
    let x = |i: usize| arg(op, inputs, i);
    let (lhs, rhs) = (x(0)?, x(1)?);
    let shape = broadcast_shape(op, lhs.shape(), rhs.shape())?;
    let out = Quant::read(op, attrs, "output_", x(6)?, x(7)?, &shape)?;
    let side = |prefix: &str, t: &Tensor, scales: &Tensor, zeros: &Tensor| -> Result<Vec<i64>, KernelError> {
        let from = Quant::read(op, attrs, prefix, scales, zeros, t.shape())?;
        // The output's quantization axis, counted from the end, in this side's dimensions.
        let axis = match out.axis {
            None => None,
            Some(a) => match (t.shape().len() + a).checked_sub(shape.len()) {
                Some(b) if t.shape()[b] == shape[a] => Some(b),
                _ => {
                    return Err(KernelError::invalid(
                        op,
                        format!("{prefix}operand {:?} lacks the output's quantization axis {a}", t.shape()),
                    ))
                }
            },
        };
        if let (Some(a), Some(b)) = (from.axis, axis) {
            if a != b {
                return Err(KernelError::invalid(op, format!("{prefix}quantization_axis must match the output's")));
            }
        }
        let zero_points = vec![0; out.scales.len()];
        let to =
            Quant { scales: out.scales.clone(), zero_points, axis, min: i64::from(i32::MIN), max: i64::from(i32::MAX) };
        requantize_values(op, &integers(op, t)?, t.shape(), &from, &to)
    };
    let (l, r) = (side("lhs_", lhs, x(2)?, x(3)?)?, side("rhs_", rhs, x(4)?, x(5)?)?);
    let (li, ri) = (broadcast_index(lhs.shape(), &shape), broadcast_index(rhs.shape(), &shape));
    let channel = channels(&shape, out.axis);
    let count: usize = shape.iter().product();
    let values = (0..count).map(|i| out.clamp(l[li(i)] + r[ri(i)] + i64::from(out.zero_points[channel(i)]))).collect();
    quantized(op, lhs.dtype(), &shape, values)
}

/// The NumPy broadcast of two shapes.
fn broadcast_shape(op: &str, a: &[usize], b: &[usize]) -> Result<Vec<usize>, KernelError> {
    let rank = a.len().max(b.len());
    let dim = |s: &[usize], i: usize| if i + s.len() >= rank { s[i + s.len() - rank] } else { 1 };
    (0..rank)
        .map(|i| match (dim(a, i), dim(b, i)) {
            (x, y) if x == y || y == 1 => Ok(x),
            (1, y) => Ok(y),
            _ => Err(KernelError::invalid(op, format!("shapes {a:?} and {b:?} do not broadcast"))),
        })
        .collect()
}

/// The flat index into a tensor of `shape` of each flat index of its broadcast to `out`.
fn broadcast_index(shape: &[usize], out: &[usize]) -> impl Fn(usize) -> usize {
    let offset = out.len() - shape.len();
    let (shape, out) = (shape.to_vec(), out.to_vec());
    move |mut i| {
        let (mut index, mut stride) = (0, 1);
        for d in (0..out.len()).rev() {
            let at = i % out[d];
            i /= out[d];
            if d >= offset {
                let size = shape[d - offset];
                index += if size == 1 { 0 } else { at * stride };
                stride *= size;
            }
        }
        index
    }
}

/// `UniformQuantizedDot(lhs, rhs, lhs_scales, lhs_zero_points, rhs_scales,
/// rhs_zero_points, output_scales, output_zero_points)`: a 2-D matrix
/// product of qint8 operands accumulated in i32, requantized to the output
/// (per tensor, or per output channel: dimension 1).
fn dot(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Result<Tensor, KernelError> {
    let x = |i: usize| arg(op, inputs, i);
    let (lhs, rhs) = (x(0)?, x(1)?);
    let (&[rows, depth], &[depth2, cols]) = (lhs.shape(), rhs.shape()) else {
        return Err(KernelError::invalid(
            op,
            format!("lhs {:?} and rhs {:?} must be matrices", lhs.shape(), rhs.shape()),
        ));
    };
    if depth != depth2 {
        return Err(KernelError::invalid(
            op,
            format!("lhs {:?} and rhs {:?} do not multiply", lhs.shape(), rhs.shape()),
        ));
    }
    let l = Quant::read(op, attrs, "lhs_", x(2)?, x(3)?, lhs.shape())?;
    let r = Quant::read(op, attrs, "rhs_", x(4)?, x(5)?, rhs.shape())?;
    let out = Quant::read(op, attrs, "output_", x(6)?, x(7)?, &[rows, cols])?;
    if l.axis.is_some() || r.axis.is_some_and(|a| a != 1) || out.axis.is_some_and(|a| a != 1) {
        return Err(KernelError::invalid(op, "lhs must be per tensor; rhs and output per tensor or per dimension 1"));
    }
    let (lv, rv) = (integers(op, lhs)?, integers(op, rhs)?);
    let at = |q: &Quant, c: usize| if q.axis.is_some() { c } else { 0 };
    let mut values = Vec::with_capacity(rows * cols);
    for b in 0..rows {
        for c in 0..cols {
            let mut acc = 0i32;
            for d in 0..depth {
                let a = (lv[b * depth + d] as i32).wrapping_sub(l.zero_points[0]);
                let w = (rv[d * cols + c] as i32).wrapping_sub(r.zero_points[at(&r, c)]);
                acc = acc.wrapping_add(a.wrapping_mul(w));
            }
            let multiplier =
                f64::from(l.scales[0]) * f64::from(r.scales[at(&r, c)]) / f64::from(out.scales[at(&out, c)]);
            let (fraction, shift) = quantize_multiplier(multiplier);
            let moved = multiply_by_fixed(acc, fraction, shift).wrapping_add(out.zero_points[at(&out, c)]);
            values.push(out.clamp(i64::from(moved)));
        }
    }
    quantized(op, type_attr(op, attrs, "Tout")?, &[rows, cols], values)
}

/// `UniformQuantizedConvolution(lhs, rhs, lhs_scales, lhs_zero_points,
/// rhs_scales, rhs_zero_points, output_scales, output_zero_points)`: the
/// zero points subtracted, the general convolution of `XlaConv` in integers,
/// then a fixed-point requantize per output feature (the rhs and output
/// quantized per tensor or along their feature dimensions).
fn convolution(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Result<Tensor, KernelError> {
    let x = |i: usize| arg(op, inputs, i);
    let (lhs, rhs) = (x(0)?, x(1)?);
    let g = crate::ir::shapes::rules::uniform_quant::quantized_conv_geometry(attrs, lhs.shape(), rhs.shape())
        .map_err(|e| KernelError::invalid(op, e))?;
    let l = Quant::read(op, attrs, "lhs_", x(2)?, x(3)?, lhs.shape())?;
    let r = Quant::read(op, attrs, "rhs_", x(4)?, x(5)?, rhs.shape())?;
    let out = Quant::read(op, attrs, "output_", x(6)?, x(7)?, &g.out_shape)?;
    if l.axis.is_some() || r.axis.is_some_and(|a| a != g.k_out) || out.axis.is_some_and(|a| a != g.out_feature) {
        return Err(KernelError::invalid(
            op,
            "lhs must be per tensor; rhs and output per tensor or along their output feature dimension",
        ));
    }
    let centered = |t: &Tensor, q: &Quant| -> Result<Tensor, KernelError> {
        let values = integers(op, t)?;
        let v: Vec<i32> = q.map(t.shape(), &values, |v, c| (v as i32).wrapping_sub(q.zero_points[c]));
        Tensor::from_vec(t.shape(), v)
    };
    let acc = super::xla_ops::conv(op, &centered(lhs, &l)?, &centered(rhs, &r)?, &g, DType::I32)?;
    let acc = acc.to_vec::<i32>().ok_or_else(|| KernelError::invalid(op, "the accumulator is not i32"))?;
    let at = |q: &Quant, c: usize| if q.axis.is_some() { c } else { 0 };
    let channel = channels(&g.out_shape, Some(g.out_feature));
    let fixed: Vec<(i64, i32)> = (0..g.out_shape[g.out_feature])
        .map(|c| {
            quantize_multiplier(
                f64::from(l.scales[0]) * f64::from(r.scales[at(&r, c)]) / f64::from(out.scales[at(&out, c)]),
            )
        })
        .collect();
    let values = acc
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let c = channel(i);
            let (fraction, shift) = fixed[c];
            out.clamp(i64::from(multiply_by_fixed(v, fraction, shift).wrapping_add(out.zero_points[at(&out, c)])))
        })
        .collect();
    quantized(op, type_attr(op, attrs, "Tout")?, &g.out_shape, values)
}

/// The lowest and highest values of the plain integer dtype of `t`.
pub(crate) fn integer_range(dtype: DType) -> Option<(f32, f32)> {
    Some(match dtype.plain() {
        DType::I8 => (-128.0, 127.0),
        DType::U8 => (0.0, 255.0),
        DType::I32 => (i32::MIN as f32, i32::MAX as f32),
        _ => return None,
    })
}

/// `Dequantize(input, min_range, max_range) {mode, narrow_range, axis, dtype}`.
fn dequantize(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Result<Tensor, KernelError> {
    let input = arg(op, inputs, 0)?;
    let scalar = |i: usize, what: &str| -> Result<f32, KernelError> {
        let t = arg(op, inputs, i)?;
        match t.to_vec::<f32>().as_deref() {
            Some(&[v]) if t.shape().is_empty() || t.shape() == [1] => Ok(v),
            _ => Err(KernelError::invalid(
                op,
                format!("{what} must be an f32 scalar (per-axis ranges are not supported)"),
            )),
        }
    };
    if attrs.get_int("axis").unwrap_or(-1) != -1 {
        return Err(KernelError::invalid(op, "only axis = -1 (one range for the whole tensor) is supported"));
    }
    let (min, max) = (scalar(1, "min_range")?, scalar(2, "max_range")?);
    let (lowest, highest) = integer_range(input.dtype())
        .ok_or_else(|| KernelError::dtype(op, input.dtype(), "expected qint8, quint8 or qint32"))?;
    let values = integers(op, input)?;
    let out: Vec<f32> = match attrs.get_str("mode").unwrap_or("MIN_COMBINED") {
        "MIN_COMBINED" => {
            let full = highest - lowest;
            let half = if lowest < 0.0 { (full + 1.0) / 2.0 } else { 0.0 };
            let scale = (max - min) / full;
            values.iter().map(|&v| (v as f32 + half) * scale + min).collect()
        }
        "SCALED" => {
            let narrow = attrs.get_bool("narrow_range").unwrap_or(false);
            let lowest_out = lowest + if narrow { 1.0 } else { 0.0 };
            let scale = if lowest == 0.0 { max / highest } else { (min / lowest_out).max(max / highest) };
            values.iter().map(|&v| v as f32 * scale).collect()
        }
        other => {
            return Err(KernelError::invalid(op, format!("mode {other:?} is not supported (MIN_COMBINED or SCALED)")))
        }
    };
    let out = Tensor::from_vec(input.shape(), out)?;
    match attrs.get("dtype").and_then(AttrValue::as_type).unwrap_or(DType::F32) {
        DType::F32 => Ok(out),
        DType::BF16 => super::dtypes::cast(op, &out, DType::BF16),
        other => Err(KernelError::dtype(op, other, "the output dtype must be f32 or bf16")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fixed_point_multiplier_rounds_half_up_once() {
        // 0.5 is 2^30 / 2^31 with no shift; 1.5 * 0.5 rounds up to 1, -1.5 * 0.5 rounds up to -1.
        let (fraction, shift) = quantize_multiplier(0.5);
        assert_eq!((fraction, shift), (1 << 30, 0));
        assert_eq!(multiply_by_fixed(3, fraction, shift), 2);
        assert_eq!(multiply_by_fixed(-3, fraction, shift), -1);
        assert_eq!(multiply_by_fixed(1, fraction, shift), 1);
        let (fraction, shift) = quantize_multiplier(3.0);
        assert_eq!(shift, 2);
        assert_eq!(multiply_by_fixed(7, fraction, shift), 21);
    }

    #[test]
    fn bad_scales_and_axes_are_errors_not_panics() {
        let x = Tensor::from_vec(&[2, 3], vec![0.5f32; 6]).unwrap();
        let mut attrs = AttrMap::new();
        attrs.insert("Tout", AttrValue::Type(DType::QInt8));
        let run = |attrs: &AttrMap, scales: Tensor, zeros: Tensor| {
            dispatch("UniformQuantize", attrs, &[x.clone(), scales, zeros]).expect("a family op")
        };
        // Per tensor: scalars; a vector is refused, as is a scale that is not positive.
        assert!(run(&attrs, Tensor::from_vec(&[3], vec![1f32; 3]).unwrap(), Tensor::scalar(0i32)).is_err());
        assert!(run(&attrs, Tensor::scalar(0f32), Tensor::scalar(0i32)).is_err());
        let ok = run(&attrs, Tensor::scalar(0.25f32), Tensor::scalar(1i32)).unwrap();
        assert_eq!(ok[0].to_vec::<i8>().unwrap(), vec![3i8; 6]);
        // Per axis 1: three scales; axis 2 is out of range.
        attrs.insert("quantization_axis", AttrValue::Int(1));
        let per_axis = run(
            &attrs,
            Tensor::from_vec(&[3], vec![0.25f32, 0.5, 1.0]).unwrap(),
            Tensor::from_vec(&[3], vec![0i32; 3]).unwrap(),
        );
        assert_eq!(per_axis.unwrap()[0].to_vec::<i8>().unwrap(), vec![2, 1, 1, 2, 1, 1]);
        attrs.insert("quantization_axis", AttrValue::Int(2));
        assert!(run(&attrs, Tensor::scalar(1f32), Tensor::scalar(0i32)).is_err());
    }
}
