//! Lowerings of the quantized-integer ops to plain StableHLO integer and
//! float arithmetic, as TensorFlow's XLA bridge legalizes them (quantized
//! dtypes are their plain integer types on the device).
//!
//! Quantizing divides by the scale, adds the zero point, clamps to the
//! quantization range and rounds half to even, in f32; requantizing scales
//! by `input_scale / output_scale` and adds `output_zero_point -
//! input_zero_point * that ratio` in f32, then clamps and rounds the same
//! way (so exact ties round to even, where the CPU kernels round half up);
//! dequantizing subtracts the zero point in i32 and multiplies by the
//! scale. Adding rescales each side to the output scales, rounds, and adds
//! in i32 with the output zero point; the dot product subtracts the zero
//! points, multiplies in i32 and rescales the product by `lhs_scale *
//! rhs_scale / output_scale` (a qint32 product clamped to the i32 range
//! only, as the bridge does, not to `output_quantization_min/max_val`);
//! the convolution does the same with the general convolution of `XlaConv`,
//! but truncates the rescaled product toward zero where the dot product
//! rounds it, as the bridge does. Scales and zero points are operands of the program: per tensor
//! (scalars) or per axis (vectors broadcast along the quantization axis).
//! TensorFlow's bridge compiles only the per-tensor forms; the per-axis
//! ones lower the same way and give the CPU kernels' values away from ties.
//! `Dequantize` lowers its `MIN_COMBINED` mode as the bridge does, and its
//! `SCALED` mode (which the bridge refuses) as the CPU kernel computes it.

use super::{Call, Ctx, Val};
use crate::exec::kernels::integer_range;
use crate::ir::DType;

/// `v` (a scalar, or a vector along `axis`) broadcast to `shape`, as `dtype`.
fn spread(c: &mut Ctx, v: &Val, axis: Option<usize>, shape: &[usize], dtype: DType) -> Val {
    let v = c.convert(v, dtype);
    let dims = match (axis, v.ty.shape.is_empty()) {
        (Some(a), false) => format!(": {a}"),
        _ => String::new(),
    };
    let v = if v.ty.shape.is_empty() || axis.is_some() { v } else { c.reshape(&v, Vec::new()) };
    let ty = v.ty.with_shape(shape.to_vec());
    c.op("stablehlo.broadcast_in_dim", &[&v], &format!("broadcast_dimensions = array<i64{dims}>"), ty)
}

/// The quantization axis `<prefix>quantization_axis` of an operand of `rank`, `None` per tensor.
fn quant_axis(n: &Call, prefix: &str, rank: usize) -> Result<Option<usize>, String> {
    match n.int_attr(&format!("{prefix}quantization_axis"), -1) {
        -1 => Ok(None),
        a if a >= 0 && (a as usize) < rank => Ok(Some(a as usize)),
        a => Err(format!("{}: {prefix}quantization_axis {a} is out of range for rank {rank}", n.op)),
    }
}

/// `[<prefix>quantization_min_val, <prefix>quantization_max_val]`.
fn quant_range(n: &Call, prefix: &str) -> Result<(f64, f64), String> {
    let min = n.int_attr(&format!("{prefix}quantization_min_val"), i64::from(i32::MIN));
    let max = n.int_attr(&format!("{prefix}quantization_max_val"), i64::from(i32::MAX));
    if min > max {
        return Err(format!("{}: {prefix}quantization_min_val {min} exceeds the max {max}", n.op));
    }
    Ok((min as f64, max as f64))
}

/// `y` (f32) clamped to the range, rounded half to even and converted to the output's dtype.
fn round_into(c: &mut Ctx, n: &Call, y: &Val, (min, max): (f64, f64)) -> Result<Val, String> {
    let low = c.splat(&y.ty, min);
    let high = c.splat(&y.ty, max);
    let clamped = c.op("stablehlo.clamp", &[&low, y, &high], "", y.ty.clone());
    let rounded = c.elementwise("round_nearest_even", &[&clamped]);
    let out = n.out(0)?.dtype;
    Ok(c.convert(&rounded, out))
}

/// `UniformQuantize(input, scales, zero_points)`.
pub(super) fn quantize(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?.clone();
    let axis = quant_axis(n, "", x.ty.rank())?;
    let x = c.convert(&x, DType::F32);
    let scale = spread(c, n.input(1)?, axis, &x.ty.shape, DType::F32);
    let zero = spread(c, n.input(2)?, axis, &x.ty.shape, DType::F32);
    let steps = c.elementwise("divide", &[&x, &scale]);
    let shifted = c.elementwise("add", &[&steps, &zero]);
    Ok(vec![round_into(c, n, &shifted, quant_range(n, "")?)?])
}

/// `UniformDequantize(input, scales, zero_points)`.
pub(super) fn dequantize_uniform(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let q = n.input(0)?;
    let axis = quant_axis(n, "", q.ty.rank())?;
    let q = c.convert(q, DType::I32);
    let zero = spread(c, n.input(2)?, axis, &q.ty.shape, DType::I32);
    let centered = c.elementwise("subtract", &[&q, &zero]);
    let centered = c.convert(&centered, DType::F32);
    let scale = spread(c, n.input(1)?, axis, &q.ty.shape, DType::F32);
    let out = c.elementwise("multiply", &[&centered, &scale]);
    Ok(vec![c.convert(&out, n.out(0)?.dtype)])
}

/// `UniformRequantize(input, input_scales, input_zero_points, output_scales, output_zero_points)`.
pub(super) fn requantize(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let q = n.input(0)?;
    let rank = q.ty.rank();
    let (from, to) = (quant_axis(n, "input_", rank)?, quant_axis(n, "output_", rank)?);
    if let (Some(a), Some(b)) = (from, to) {
        if a != b {
            return Err(format!("{}: per-axis input and output must share the quantization axis", n.op));
        }
    }
    let shape = q.ty.shape.clone();
    let x = c.convert(q, DType::F32);
    let in_scale = spread(c, n.input(1)?, from, &shape, DType::F32);
    let in_zero = spread(c, n.input(2)?, from, &shape, DType::F32);
    let out_scale = spread(c, n.input(3)?, to, &shape, DType::F32);
    let out_zero = spread(c, n.input(4)?, to, &shape, DType::F32);
    let ratio = c.elementwise("divide", &[&in_scale, &out_scale]);
    let moved = c.elementwise("multiply", &[&in_zero, &ratio]);
    let offset = c.elementwise("subtract", &[&out_zero, &moved]);
    let scaled = c.elementwise("multiply", &[&x, &ratio]);
    let y = c.elementwise("add", &[&scaled, &offset]);
    Ok(vec![round_into(c, n, &y, quant_range(n, "output_")?)?])
}

/// `x` (of `shape`, quantized by `scale`/`zero` along `from`) scaled to
/// `to_scale` (along `to`) in f32: `x * ratio + (to_zero - zero * ratio)`.
#[allow(clippy::too_many_arguments)]
fn rescale(
    c: &mut Ctx,
    x: &Val,
    shape: &[usize],
    scale: &Val,
    zero: &Val,
    from: Option<usize>,
    to_scale: &Val,
    to: Option<usize>,
) -> Val {
    let xf = c.convert(x, DType::F32);
    let xf = c.broadcast_to(&xf, shape);
    let s = spread(c, scale, from, shape, DType::F32);
    let z = spread(c, zero, from, shape, DType::F32);
    let t = spread(c, to_scale, to, shape, DType::F32);
    let ratio = c.elementwise("divide", &[&s, &t]);
    let moved = c.elementwise("multiply", &[&z, &ratio]);
    let scaled = c.elementwise("multiply", &[&xf, &ratio]);
    c.elementwise("subtract", &[&scaled, &moved])
}

/// `UniformQuantizedAdd(lhs, rhs, lhs_scales, lhs_zero_points, rhs_scales,
/// rhs_zero_points, output_scales, output_zero_points)`: each side rescaled
/// to the output scales and rounded half to even, added in i32 with the
/// output zero point, clamped.
pub(super) fn add(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let out = n.out(0)?.clone();
    let rank = out.rank();
    let out_axis = quant_axis(n, "output_", rank)?;
    let mut sides = Vec::new();
    for (k, prefix) in [(0, "lhs_"), (1, "rhs_")] {
        let x = n.input(k)?;
        let own = quant_axis(n, prefix, x.ty.rank())?;
        // The side's quantization axis counted in the output's dimensions (trailing aligned).
        let from = own.map(|a| a + rank - x.ty.rank());
        if let (Some(a), Some(b)) = (from, out_axis) {
            if a != b {
                return Err(format!("{}: {prefix}quantization_axis must match the output's", n.op));
            }
        }
        let scaled = rescale(c, x, &out.shape, n.input(2 + 2 * k)?, n.input(3 + 2 * k)?, from, n.input(6)?, out_axis);
        let rounded = c.elementwise("round_nearest_even", &[&scaled]);
        sides.push(c.convert(&rounded, DType::I32));
    }
    let zero = spread(c, n.input(7)?, out_axis, &out.shape, DType::I32);
    let sum = c.elementwise("add", &[&sides[0], &sides[1]]);
    let sum = c.elementwise("add", &[&sum, &zero]);
    let (min, max) = quant_range(n, "output_")?;
    let (low, high) = (c.splat(&sum.ty, min), c.splat(&sum.ty, max));
    let clamped = c.op("stablehlo.clamp", &[&low, &sum, &high], "", sum.ty.clone());
    Ok(vec![c.convert(&clamped, out.dtype)])
}

/// `UniformQuantizedDot(lhs, rhs, lhs_scales, lhs_zero_points, rhs_scales,
/// rhs_zero_points, output_scales, output_zero_points)`: the zero points
/// subtracted in i32, an i32 `dot_general`, then the product rescaled by
/// `lhs_scale * rhs_scale / output_scale` (per tensor, or per output
/// channel), shifted by the output zero point, clamped and rounded.
pub(super) fn dot(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (lhs, rhs) = (n.input(0)?, n.input(1)?);
    let out = n.out(0)?.clone();
    if lhs.ty.rank() != 2 || rhs.ty.rank() != 2 {
        return Err(format!("{}: lhs and rhs must be matrices", n.op));
    }
    let lhs_axis = quant_axis(n, "lhs_", 2)?;
    let (rhs_axis, out_axis) = (quant_axis(n, "rhs_", 2)?, quant_axis(n, "output_", 2)?);
    if lhs_axis.is_some() || rhs_axis == Some(0) || out_axis == Some(0) {
        return Err(format!("{}: lhs must be per tensor; rhs and output per tensor or per dimension 1", n.op));
    }
    let centered = |c: &mut Ctx, x: &Val, zero: &Val, axis: Option<usize>| {
        let x = c.convert(x, DType::I32);
        let z = spread(c, zero, axis, &x.ty.shape, DType::I32);
        c.elementwise("subtract", &[&x, &z])
    };
    let l = centered(c, lhs, n.input(3)?, None);
    let r = centered(c, rhs, n.input(5)?, rhs_axis);
    let attrs =
        "dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>";
    let acc = c.op("stablehlo.dot_general", &[&l, &r], attrs, out.with_dtype(DType::I32));
    let accf = c.convert(&acc, DType::F32);
    let ls = spread(c, n.input(2)?, None, &out.shape, DType::F32);
    let rs = spread(c, n.input(4)?, rhs_axis, &out.shape, DType::F32);
    let os = spread(c, n.input(6)?, out_axis, &out.shape, DType::F32);
    let oz = spread(c, n.input(7)?, out_axis, &out.shape, DType::F32);
    let both = c.elementwise("multiply", &[&ls, &rs]);
    let ratio = c.elementwise("divide", &[&both, &os]);
    let scaled = c.elementwise("multiply", &[&accf, &ratio]);
    let y = c.elementwise("add", &[&scaled, &oz]);
    // TensorFlow's bridge clamps a qint32 product to the i32 range only, not to
    // output_quantization_min_val/max_val (its CPU kernel clamps to those).
    let (min, max) = quant_range(n, "output_")?;
    let range = if out.dtype == DType::I32 { (f64::from(i32::MIN), f64::from(i32::MAX)) } else { (min, max) };
    Ok(vec![round_into(c, n, &y, range)?])
}

/// `UniformQuantizedConvolution(lhs, rhs, lhs_scales, lhs_zero_points,
/// rhs_scales, rhs_zero_points, output_scales, output_zero_points)`: as the
/// dot product, with an i32 `stablehlo.convolution` of `XlaConv`'s
/// geometry and the scales along the output feature dimension, except that
/// the rescaled product is truncated toward zero, not rounded, as the
/// bridge does.
pub(super) fn convolution(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (lhs, rhs) = (n.input(0)?, n.input(1)?);
    let out = n.out(0)?.clone();
    let g = crate::ir::shapes::rules::uniform_quant::quantized_conv_geometry(n.attrs, &lhs.ty.shape, &rhs.ty.shape)?;
    let lhs_axis = quant_axis(n, "lhs_", lhs.ty.rank())?;
    let (rhs_axis, out_axis) = (quant_axis(n, "rhs_", rhs.ty.rank())?, quant_axis(n, "output_", out.rank())?);
    if lhs_axis.is_some() || rhs_axis.is_some_and(|a| a != g.k_out) || out_axis.is_some_and(|a| a != g.out_feature) {
        return Err(format!(
            "{}: lhs must be per tensor; rhs and output per tensor or along their output feature dimension",
            n.op
        ));
    }
    let centered = |c: &mut Ctx, x: &Val, zero: &Val, axis: Option<usize>| {
        let x = c.convert(x, DType::I32);
        let z = spread(c, zero, axis, &x.ty.shape, DType::I32);
        c.elementwise("subtract", &[&x, &z])
    };
    let l = centered(c, lhs, n.input(3)?, None);
    let r = centered(c, rhs, n.input(5)?, rhs_axis);
    let acc = super::xla_ops::convolution(c, &l, &r, &g, out.with_dtype(DType::I32));
    let accf = c.convert(&acc, DType::F32);
    let feature = Some(g.out_feature);
    let ls = spread(c, n.input(2)?, None, &out.shape, DType::F32);
    let rs = spread(c, n.input(4)?, rhs_axis.and(feature), &out.shape, DType::F32);
    let os = spread(c, n.input(6)?, out_axis.and(feature), &out.shape, DType::F32);
    let oz = spread(c, n.input(7)?, out_axis.and(feature), &out.shape, DType::F32);
    let both = c.elementwise("multiply", &[&ls, &rs]);
    let ratio = c.elementwise("divide", &[&both, &os]);
    let scaled = c.elementwise("multiply", &[&accf, &ratio]);
    let y = c.elementwise("add", &[&scaled, &oz]);
    // TensorFlow's bridge converts the rescaled product without rounding
    // (toward zero), clamped to the i32 range only.
    let (min, max) = quant_range(n, "output_")?;
    let (min, max) = if out.dtype == DType::I32 { (f64::from(i32::MIN), f64::from(i32::MAX)) } else { (min, max) };
    let (low, high) = (c.splat(&y.ty, min), c.splat(&y.ty, max));
    let clamped = c.op("stablehlo.clamp", &[&low, &y, &high], "", y.ty.clone());
    Ok(vec![c.convert(&clamped, out.dtype)])
}

/// `UniformQuantizedClipByValue(operand, min, max, scales, zero_points)`.
pub(super) fn clip_by_value(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let axis = quant_axis(n, "", x.ty.rank())?;
    let dtype = x.ty.dtype;
    let low = spread(c, n.input(1)?, axis, &x.ty.shape, dtype);
    let high = spread(c, n.input(2)?, axis, &x.ty.shape, dtype);
    let raised = c.elementwise("maximum", &[x, &low]);
    Ok(vec![c.elementwise("minimum", &[&raised, &high])])
}

/// `Dequantize(input, min_range, max_range) {mode, narrow_range, axis, dtype}`.
pub(super) fn dequantize(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let q = n.input(0)?;
    if n.int_attr("axis", -1) != -1 {
        return Err(format!("{}: only axis = -1 (one range for the whole tensor) is lowered", n.op));
    }
    let (lowest, highest) =
        integer_range(q.ty.dtype).ok_or_else(|| format!("{}: expected qint8, quint8 or qint32", n.op))?;
    let (lowest, highest) = (f64::from(lowest), f64::from(highest));
    let shape = q.ty.shape.clone();
    for i in [1, 2] {
        if n.input(i)?.ty.count() != 1 {
            return Err(format!("{}: min_range and max_range must be scalars (per-axis ranges are not lowered)", n.op));
        }
    }
    let min = spread(c, n.input(1)?, None, &shape, DType::F32);
    let max = spread(c, n.input(2)?, None, &shape, DType::F32);
    let x = c.convert(q, DType::F32);
    let out = match n.attrs.get_str("mode").unwrap_or("MIN_COMBINED") {
        "MIN_COMBINED" => {
            let full = highest - lowest;
            let half = c.splat(&x.ty, if lowest < 0.0 { (full + 1.0) / 2.0 } else { 0.0 });
            let full = c.splat(&x.ty, full);
            let width = c.elementwise("subtract", &[&max, &min]);
            let scale = c.elementwise("divide", &[&width, &full]);
            let shifted = c.elementwise("add", &[&x, &half]);
            let scaled = c.elementwise("multiply", &[&shifted, &scale]);
            c.elementwise("add", &[&scaled, &min])
        }
        "SCALED" => {
            let top = c.splat(&x.ty, highest);
            let up = c.elementwise("divide", &[&max, &top]);
            let scale = if lowest == 0.0 {
                up
            } else {
                let narrow = n.attrs.get_bool("narrow_range").unwrap_or(false);
                let bottom = c.splat(&x.ty, lowest + if narrow { 1.0 } else { 0.0 });
                let down = c.elementwise("divide", &[&min, &bottom]);
                c.elementwise("maximum", &[&down, &up])
            };
            c.elementwise("multiply", &[&x, &scale])
        }
        other => return Err(format!("{}: mode {other:?} is not lowered (MIN_COMBINED or SCALED)", n.op)),
    };
    Ok(vec![c.convert(&out, n.out(0)?.dtype)])
}
