//! The `prand` family, lowered as TensorFlow's XLA bridge lowers it.
//!
//! `StochasticCastToInt(input, key, counter, alg) {Tout}` draws uniforms in `[0, 1)` of the
//! input's shape as `StatelessRandomUniformV2` does from the same key and counter (f32 ones for
//! a bf16 input, which is widened to f32), then takes `floor(x + u)` for negative `x` and
//! `floor(x + 1 - u)` otherwise, keeps integers as they are and converts to `Tout`. The bridge's
//! uniforms are not the CPU kernel's (which also swaps key and counter), so the two backends
//! round differently; docs/xla.md says so. An f16 input is refused: the bridge's f16 uniforms
//! come from other bits than a 16-bit `rng_bit_generator` gives here.
//!
//! `XlaDequantize(input) {min_range, max_range, mode, transpose_output}` is XLA's
//! `Dequantize<uint8>`: the four bytes of each u32 (most significant first) along a new last
//! axis, converted to bf16, times `(max - min) / 255` plus `min` in bf16 (the range rounded to
//! bf16 first), and the axes reversed for `transpose_output`.

use super::random::{float_values, state_of_operands, Dist, Gen};
use super::{i64s, Call};
use crate::ir::{AttrValue, DType};
use crate::xla::stablehlo::text::{Cmp, Ctx, Ty, Val};

/// `StochasticCastToInt(input, key, counter, alg) {Tout}`.
pub(super) fn stochastic_cast(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let out = n.out(0)?.clone();
    if !matches!(out.dtype, DType::I8 | DType::I16 | DType::I32) {
        return Err(format!("{}: Tout {} is not lowered (i8, i16 or i32)", n.op, out.dtype));
    }
    let x = n.input(0)?.clone();
    let wide = match x.ty.dtype {
        DType::BF16 => DType::F32,
        DType::F32 | DType::F64 => x.ty.dtype,
        DType::F16 => {
            return Err(format!(
                "{}: an f16 input is not lowered: TensorFlow's bridge draws f16 uniforms from other bits than \
                 this lowering's 16-bit rng_bit_generator gives",
                n.op
            ))
        }
        other => return Err(format!("{}: input must be f16, bf16, f32 or f64, got {other}", n.op)),
    };
    let state = state_of_operands(c, n)?;
    let u = float_values(c, &mut Gen::philox(state), Dist::Uniform, &x.ty.with_dtype(wide))?;
    let x = c.convert(&x, wide);
    let down = c.elementwise("add", &[&x, &u]);
    let down = c.elementwise("floor", &[&down]);
    let one = c.splat(&x.ty, 1.0);
    let up = c.elementwise("add", &[&x, &one]);
    let up = c.elementwise("subtract", &[&up, &u]);
    let up = c.elementwise("floor", &[&up]);
    let zero = c.splat(&x.ty, 0.0);
    let negative = c.compare(&x, &zero, Cmp::Lt);
    let rounded = c.select(&negative, &down, &up);
    let floor = c.elementwise("floor", &[&x]);
    let integral = c.compare(&x, &floor, Cmp::Eq);
    let rounded = c.select(&integral, &x, &rounded);
    Ok(vec![c.op("stablehlo.convert", &[&rounded], "", out)])
}

/// A float attribute that must be present.
fn float_attr(n: &Call, key: &str) -> Result<f32, String> {
    match n.attrs.get(key) {
        Some(AttrValue::Float(f)) => Ok(*f),
        _ => Err(format!("{}: missing float attribute `{key}`", n.op)),
    }
}

/// `XlaDequantize(input) {min_range, max_range, mode, transpose_output}`.
pub(super) fn dequantize(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    use half::bf16;
    let x = n.input(0)?.clone();
    if x.ty.dtype != DType::U32 || x.ty.shape.is_empty() {
        return Err(format!("{}: input must be u32 of rank 1 or more, got {}", n.op, x.ty.mlir()));
    }
    if n.attrs.get_str("mode") != Some("MIN_COMBINED") {
        return Err(format!("{}: mode must be MIN_COMBINED, got {:?}", n.op, n.attrs.get_str("mode")));
    }
    let (min, max) = (bf16::from_f32(float_attr(n, "min_range")?), bf16::from_f32(float_attr(n, "max_range")?));
    let scale = bf16::from_f32(bf16::from_f32(max.to_f32() - min.to_f32()).to_f32() / 255.0);
    let rank = x.ty.shape.len();
    let mut wide = x.ty.shape.clone();
    wide.push(4);
    let words = c.op(
        "stablehlo.broadcast_in_dim",
        &[&x],
        &format!("broadcast_dimensions = {}", i64s(&(0..rank).collect::<Vec<_>>())),
        x.ty.with_shape(wide.clone()),
    );
    let shifts = c.constant(&crate::exec::Tensor::vector(vec![24u32, 16, 8, 0]));
    let shifts = c.op(
        "stablehlo.broadcast_in_dim",
        &[&shifts],
        &format!("broadcast_dimensions = {}", i64s(&[rank])),
        shifts.ty.with_shape(wide.clone()),
    );
    let bytes = c.elementwise("shift_right_logical", &[&words, &shifts]);
    let mask = c.splat(&bytes.ty, 255.0);
    let bytes = c.elementwise("and", &[&bytes, &mask]);
    let values = c.op("stablehlo.convert", &[&bytes], "", bytes.ty.with_dtype(DType::BF16));
    let scale = c.splat(&values.ty, f64::from(scale));
    let values = c.elementwise("multiply", &[&values, &scale]);
    let min = c.splat(&values.ty, f64::from(min));
    let values = c.elementwise("add", &[&values, &min]);
    let mut shape = x.ty.shape.clone();
    shape[rank - 1] *= 4;
    let values = c.reshape(&values, shape.clone());
    if !n.attrs.get_bool("transpose_output").unwrap_or(false) {
        return Ok(vec![values]);
    }
    let order: Vec<usize> = (0..rank).rev().collect();
    shape.reverse();
    Ok(vec![c.op(
        "stablehlo.transpose",
        &[&values],
        &format!("permutation = {}", i64s(&order)),
        Ty::new(DType::BF16, shape),
    )])
}
