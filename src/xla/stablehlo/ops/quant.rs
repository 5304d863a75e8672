//! Lowerings of the simulated-quantization ops, as TensorFlow's XLA bridge
//! builds them (which differs from its CPU kernels in the last bit: the
//! bridge multiplies by `1 / scale` and adds the nudged minimum back).
//!
//! Fake quantization: the range is nudged so that zero is a step (on the
//! host for the attribute form, in the program for the tensor forms), the
//! input is clamped to it, and `floor(shifted / scale + 0.5)` steps are
//! scaled back. Its gradients select the incoming gradient inside the
//! nudged range and sum what falls below and above it for `min`/`max`.
//! `QuantizeAndDequantize*` follows the bridge's scale choice and rounds
//! half to even (or half up).

use super::{Call, Cmp, Ctx, Reducer, Ty, Val};
use crate::ir::DType;

/// `[quant_min, quant_max]` of a fake quantization.
fn steps(n: &Call) -> Result<(f32, f32), String> {
    let bits = n.int_attr("num_bits", 8);
    if !(2..=16).contains(&bits) {
        return Err(format!("{}: num_bits is {bits}; it must be between 2 and 16", n.op));
    }
    let low = if n.attrs.get_bool("narrow_range").unwrap_or(false) { 1.0 } else { 0.0 };
    Ok((low, ((1i64 << bits) - 1) as f32))
}

/// A nudged range: its minimum, maximum and scale, shaped like `min`.
struct Nudged {
    min: Val,
    max: Val,
    scale: Val,
}

/// The range of the attribute form, nudged on the host in f32.
fn nudge_attrs(c: &mut Ctx, n: &Call, dtype: DType) -> Result<Nudged, String> {
    let (low, high) = steps(n)?;
    let (min, max) = (n.float_attr("min", -6.0) as f32, n.float_attr("max", 6.0) as f32);
    if min > max {
        return Err(format!("{}: min {min} is greater than max {max}", n.op));
    }
    let scale = (max - min) / (high - low);
    let from_min = low - min / scale;
    let zero = if from_min <= low {
        low
    } else if from_min >= high {
        high
    } else {
        from_min.round()
    };
    let ty = Ty::scalar(dtype);
    Ok(Nudged {
        min: c.splat(&ty, f64::from((low - zero) * scale)),
        max: c.splat(&ty, f64::from((high - zero) * scale)),
        scale: c.splat(&ty, f64::from(scale)),
    })
}

/// The range of the tensor forms (`min`, `max` operands 1 and 2 or 2 and 3), nudged in the program.
fn nudge_operands(c: &mut Ctx, n: &Call, first: usize) -> Result<Nudged, String> {
    let (low, high) = steps(n)?;
    let (min, max) = (n.input(first)?.clone(), n.input(first + 1)?.clone());
    let ty = min.ty.clone();
    let (lo, hi) = (c.splat(&ty, f64::from(low)), c.splat(&ty, f64::from(high)));
    let span = c.splat(&ty, f64::from(high - low));
    let width = c.elementwise("subtract", &[&max, &min]);
    let scale = c.elementwise("divide", &[&width, &span]);
    let ratio = c.elementwise("divide", &[&min, &scale]);
    let from_min = c.elementwise("subtract", &[&lo, &ratio]);
    let rounded = c.elementwise("round_nearest_afz", &[&from_min]);
    let at_top = c.compare(&from_min, &hi, Cmp::Ge);
    let upper = c.select(&at_top, &hi, &rounded);
    let at_bottom = c.compare(&from_min, &lo, Cmp::Le);
    let zero = c.select(&at_bottom, &lo, &upper);
    let down = c.elementwise("subtract", &[&lo, &zero]);
    let up = c.elementwise("subtract", &[&hi, &zero]);
    Ok(Nudged {
        min: c.elementwise("multiply", &[&down, &scale]),
        max: c.elementwise("multiply", &[&up, &scale]),
        scale,
    })
}

/// `v` (a scalar, or a vector along the last dimension) broadcast to `x`'s type.
fn spread(c: &mut Ctx, v: &Val, x: &Ty) -> Val {
    let dims = if v.ty.shape.is_empty() { String::new() } else { format!(": {}", x.shape.len().saturating_sub(1)) };
    let ty = x.with_dtype(v.ty.dtype);
    c.op("stablehlo.broadcast_in_dim", &[v], &format!("broadcast_dimensions = array<i64{dims}>"), ty)
}

/// The quantized value of `x` in a nudged range.
fn quantize(c: &mut Ctx, x: &Val, r: &Nudged) -> Val {
    let (min, max, scale) = (spread(c, &r.min, &x.ty), spread(c, &r.max, &x.ty), spread(c, &r.scale, &x.ty));
    let one = c.splat(&x.ty, 1.0);
    let half = c.splat(&x.ty, 0.5);
    let inv = c.elementwise("divide", &[&one, &scale]);
    let clamped = c.op("stablehlo.clamp", &[&min, x, &max], "", x.ty.clone());
    let shifted = c.elementwise("subtract", &[&clamped, &min]);
    let scaled = c.elementwise("multiply", &[&shifted, &inv]);
    let up = c.elementwise("add", &[&scaled, &half]);
    let steps = c.elementwise("floor", &[&up]);
    let back = c.elementwise("multiply", &[&steps, &scale]);
    c.elementwise("add", &[&back, &min])
}

/// `FakeQuantWithMinMaxArgs(inputs)`.
pub(super) fn fake_quant_args(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let r = nudge_attrs(c, n, x.ty.dtype)?;
    Ok(vec![quantize(c, x, &r)])
}

/// `FakeQuantWithMinMaxVars(PerChannel)(inputs, min, max)`.
pub(super) fn fake_quant_vars(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let r = nudge_operands(c, n, 1)?;
    Ok(vec![quantize(c, n.input(0)?, &r)])
}

/// The incoming gradient where `x` lies in the nudged range, and the masks below and above it.
fn pass_inside(c: &mut Ctx, g: &Val, x: &Val, r: &Nudged) -> (Val, Val, Val) {
    let (min, max) = (spread(c, &r.min, &x.ty), spread(c, &r.max, &x.ty));
    let zeros = c.splat(&g.ty, 0.0);
    let low_ok = c.compare(&min, x, Cmp::Le);
    let high_ok = c.compare(x, &max, Cmp::Le);
    let inside = c.elementwise("and", &[&low_ok, &high_ok]);
    let dx = c.select(&inside, g, &zeros);
    let below = c.compare(x, &min, Cmp::Lt);
    let above = c.compare(x, &max, Cmp::Gt);
    let (gb, ga) = (c.select(&below, g, &zeros), c.select(&above, g, &zeros));
    (dx, gb, ga)
}

/// `FakeQuantWithMinMaxArgsGradient(gradients, inputs)`.
pub(super) fn fake_quant_args_grad(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (g, x) = (n.input(0)?, n.input(1)?);
    let r = nudge_attrs(c, n, x.ty.dtype)?;
    Ok(vec![pass_inside(c, g, x, &r).0])
}

/// `FakeQuantWithMinMaxVars(PerChannel)Gradient(gradients, inputs, min, max)`.
pub(super) fn fake_quant_vars_grad(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (g, x) = (n.input(0)?, n.input(1)?);
    let r = nudge_operands(c, n, 2)?;
    let (dx, below, above) = pass_inside(c, g, x, &r);
    // Sum over every dimension the range does not have (all, or all but the last).
    let rank = x.ty.shape.len();
    let kept = r.min.ty.shape.len();
    let dims: Vec<usize> = (0..rank - kept.min(rank)).collect();
    let (dmin, dmax) = (c.reduce(&below, &dims, Reducer::Add), c.reduce(&above, &dims, Reducer::Add));
    let (dmin, dmax) = (c.reshape(&dmin, r.min.ty.shape.clone()), c.reshape(&dmax, r.min.ty.shape.clone()));
    Ok(vec![dx, dmin, dmax])
}

/// `QuantizeAndDequantizeV2/V3/V4(input, input_min, input_max[, num_bits])`.
pub(super) fn quantize_and_dequantize(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?.clone();
    let v3 = n.op == "QuantizeAndDequantizeV3";
    let bits = if v3 {
        match n.ints(3, "num_bits")?.as_slice() {
            &[b] => b,
            _ => return Err(format!("{}: num_bits must be a scalar", n.op)),
        }
    } else {
        n.int_attr("num_bits", 8)
    };
    let signed = n.attrs.get_bool("signed_input").unwrap_or(true);
    let range_given = n.attrs.get_bool("range_given").unwrap_or(v3);
    let narrow = n.attrs.get_bool("narrow_range").unwrap_or(false);
    let half_to_even = match n.attrs.get_str("round_mode").unwrap_or("HALF_TO_EVEN") {
        "HALF_TO_EVEN" => true,
        "HALF_UP" => false,
        other => return Err(format!("{}: round_mode {other:?} is not HALF_TO_EVEN or HALF_UP", n.op)),
    };
    if !(1..=63).contains(&bits) {
        return Err(format!("{}: num_bits is {bits}; it must be in [1, 63]", n.op));
    }
    let rank = x.ty.shape.len();
    let axis = match n.int_attr("axis", -1) {
        -1 => None,
        a => Some(
            usize::try_from(a)
                .ok()
                .filter(|&a| a < rank)
                .ok_or_else(|| format!("{}: axis {a} is out of range for rank {rank}", n.op))?,
        ),
    };
    let (mut min, mut max) = if range_given {
        (n.input(1)?.clone(), n.input(2)?.clone())
    } else {
        let dims: Vec<usize> = (0..rank).filter(|&d| Some(d) != axis).collect();
        (c.reduce(&x, &dims, Reducer::Min), c.reduce(&x, &dims, Reducer::Max))
    };
    let (qmin, qmax) = if signed {
        let half = 2f64.powi(bits as i32 - 1);
        (if narrow { -half + 1.0 } else { -half }, half - 1.0)
    } else {
        (0.0, 2f64.powi(bits as i32) - 1.0)
    };
    let ty = min.ty.clone();
    let (qlo, qhi) = (c.splat(&ty, qmin), c.splat(&ty, qmax));
    let zero = c.splat(&ty, 0.0);
    let biggest = c.splat(&ty, if ty.dtype == DType::F64 { f64::MAX } else { f64::from(f32::MAX) });
    let side = |c: &mut Ctx, q: &Val, bound: &Val| {
        let product = c.elementwise("multiply", &[q, bound]);
        let positive = c.compare(&product, &zero, Cmp::Gt);
        let ratio = c.elementwise("divide", &[q, bound]);
        c.select(&positive, &ratio, &biggest)
    };
    let from_min = side(c, &qlo, &min);
    let from_max = side(c, &qhi, &max);
    let min_side = c.compare(&from_min, &from_max, Cmp::Lt);
    let scale = c.select(&min_side, &from_min, &from_max);
    let inv_min = c.elementwise("divide", &[&min, &qlo]);
    let inv_max = c.elementwise("divide", &[&max, &qhi]);
    let inverse = c.select(&min_side, &inv_min, &inv_max);
    let new_max = c.elementwise("multiply", &[&qhi, &inverse]);
    let new_min = c.elementwise("multiply", &[&qlo, &inverse]);
    max = c.select(&min_side, &new_max, &max);
    min = c.select(&min_side, &min, &new_min);
    let along = |c: &mut Ctx, v: &Val| {
        let dims = match (v.ty.shape.is_empty(), axis) {
            (false, Some(a)) => format!(": {a}"),
            _ => String::new(),
        };
        c.op("stablehlo.broadcast_in_dim", &[v], &format!("broadcast_dimensions = array<i64{dims}>"), x.ty.clone())
    };
    let (scale, inverse) = (along(c, &scale), along(c, &inverse));
    let input = if range_given {
        let (lo, hi) = (along(c, &min), along(c, &max));
        c.op("stablehlo.clamp", &[&lo, &x, &hi], "", x.ty.clone())
    } else {
        x.clone()
    };
    let scaled = c.elementwise("multiply", &[&input, &scale]);
    let rounded = if half_to_even {
        c.elementwise("round_nearest_even", &[&scaled])
    } else {
        let half = c.splat(&x.ty, 0.5);
        let up = c.elementwise("add", &[&scaled, &half]);
        c.elementwise("floor", &[&up])
    };
    Ok(vec![c.elementwise("multiply", &[&rounded, &inverse])])
}
