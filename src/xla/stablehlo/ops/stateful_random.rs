//! The draws of `tf.random.Generator` from its state variable, lowered as
//! TensorFlow's XLA bridge lowers them: `StatefulUniform`,
//! `StatefulStandardNormalV2`, `StatefulTruncatedNormal`,
//! `StatefulUniformInt` and `StatefulUniformFullInt`.
//!
//! The variable is int64: Philox's `[counter_lo, counter_hi, key]`
//! (algorithm 1, or 3, auto-select, which the bridge treats as Philox) or
//! ThreeFry's `[counter, key]` (algorithm 2). Its words become the state of
//! one `stablehlo.rng_bit_generator` (`[key, counter...]`), whose bits turn
//! into numbers as the stateless ops' bits do ([`super::random`]); the state
//! `rng_bit_generator` returns (the counter moved on by the blocks it used)
//! is written back with the key. These are TensorFlow's numbers under
//! `jit_compile=True`; its CPU kernels draw other numbers from the same
//! state (docs/xla.md, "Generator state"). The algorithm must be a
//! compile-time constant, as in the bridge. Cost: one `rng_bit_generator`
//! and a few elementwise ops per output element.
//!
//! `XlaRngBitGenerator(algorithm, initial_state, shape)` is `rng_bit_generator`
//! itself: `(new state, bits)`, Philox (1), ThreeFry (2) or XLA's default (3).

use super::random::{float_values, int_values, rng_bit_generator as bit_generator, Dist, Gen};
use super::Call;
use crate::ir::DType;
use crate::xla::stablehlo::text::{Ctx, Ty, Val};

/// Elements `start..limit` of the vector `v`.
fn slice(c: &mut Ctx, v: &Val, start: usize, limit: usize) -> Val {
    c.op(
        "stablehlo.slice",
        &[v],
        &format!("start_indices = array<i64: {start}>, limit_indices = array<i64: {limit}>, strides = array<i64: 1>"),
        v.ty.with_shape(vec![limit - start]),
    )
}

fn concat(c: &mut Ctx, parts: &[&Val]) -> Val {
    let len = parts.iter().map(|v| v.ty.count()).sum();
    c.op("stablehlo.concatenate", parts, "dimension = 0 : i64", Ty::new(parts[0].ty.dtype, vec![len]))
}

/// A draw (`n.inputs`: the algorithm, the shape and, for `StatefulUniformInt`, the bounds) from
/// the state variable `var`: the variable's new value and the draw.
pub(super) fn draw(c: &mut Ctx, n: &Call, var: &Val) -> Result<(Vec<Val>, Vec<Val>), String> {
    let alg = n
        .consts
        .first()
        .and_then(Option::as_ref)
        .ok_or_else(|| format!("{}: the algorithm must be a compile-time constant", n.op))?;
    let alg = alg.to_i64_vec(n.op, "algorithm").map_err(|e| e.to_string())?;
    let (philox, size) = match alg.as_slice() {
        [1] | [3] => (true, 3),
        [2] => (false, 2),
        other => return Err(format!("{}: unsupported algorithm id {other:?} (Philox 1, ThreeFry 2, auto 3)", n.op)),
    };
    if var.ty.dtype != DType::I64 || var.ty.shape != [size] {
        let layout = if philox { "Philox: counter low, counter high, key" } else { "ThreeFry: counter, key" };
        return Err(format!(
            "{}: the generator state must be int64 of shape [{size}] ({layout}), got {}",
            n.op,
            var.ty.mlir()
        ));
    }
    let words = c.op("stablehlo.bitcast_convert", &[var], "", var.ty.with_dtype(DType::U64));
    let counter = slice(c, &words, 0, size - 1);
    let key = slice(c, &words, size - 1, size);
    let state = concat(c, &[&key, &counter]);
    let mut g = if philox { Gen::philox(state) } else { Gen::three_fry(state) };
    let out = n.out(0)?.clone();
    if out.dtype == DType::F16 {
        return Err(format!("{}: f16 draws are not lowered (TensorFlow's XLA bridge refuses them too)", n.op));
    }
    let float = |c: &mut Ctx, g: &mut Gen, dist: Dist| -> Result<Val, String> {
        if out.dtype != DType::BF16 {
            return float_values(c, g, dist, &out);
        }
        // The bridge draws bf16 in f32 and keeps the high 16 bits (rounding toward zero).
        let wide = float_values(c, g, dist, &out.with_dtype(DType::F32))?;
        let bits = c.op("stablehlo.bitcast_convert", &[&wide], "", wide.ty.with_dtype(DType::U32));
        let mask = c.splat(&bits.ty, f64::from(0xFFFF_0000u32));
        let bits = c.op("stablehlo.and", &[&bits, &mask], "", bits.ty.clone());
        let wide = c.op("stablehlo.bitcast_convert", &[&bits], "", wide.ty.clone());
        Ok(c.convert(&wide, DType::BF16))
    };
    let value = match n.op {
        "StatefulUniform" => float(c, &mut g, Dist::Uniform)?,
        "StatefulStandardNormalV2" => float(c, &mut g, Dist::Normal)?,
        "StatefulTruncatedNormal" => float(c, &mut g, Dist::Truncated)?,
        "StatefulUniformFullInt" => int_values(c, &mut g, &out, None)?,
        "StatefulUniformInt" => {
            let (lo, hi) = (n.input(2)?.clone(), n.input(3)?.clone());
            if lo.ty.dtype != out.dtype || hi.ty.dtype != out.dtype {
                return Err(format!("{}: minval and maxval must be {}, the output's type", n.op, out.dtype));
            }
            int_values(c, &mut g, &out, Some((lo, hi)))?
        }
        other => return Err(format!("{other} is not a draw from a generator's state")),
    };
    let next = g.next();
    let counter = slice(c, &next, 1, size);
    let new = concat(c, &[&counter, &key]);
    let new = c.op("stablehlo.bitcast_convert", &[&new], "", var.ty.clone());
    Ok((vec![new], vec![value]))
}

/// `XlaRngBitGenerator(algorithm, initial_state, shape)`: the new state and the bits.
pub(super) fn rng_bit_generator(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let alg = n
        .consts
        .first()
        .and_then(Option::as_ref)
        .ok_or_else(|| format!("{}: the algorithm must be a compile-time constant", n.op))?;
    let (algorithm, size) = match alg.to_i64_vec(n.op, "algorithm").map_err(|e| e.to_string())?.as_slice() {
        [1] => ("PHILOX", 3),
        [2] => ("THREE_FRY", 2),
        [3] => ("DEFAULT", 3),
        other => return Err(format!("{}: unsupported algorithm {other:?} (Philox 1, ThreeFry 2, default 3)", n.op)),
    };
    let state = n.input(1)?.clone();
    if state.ty.dtype != DType::U64 || state.ty.shape != [size] {
        return Err(format!("{}: the state must be u64 [{size}] for {algorithm}, got {}", n.op, state.ty.mlir()));
    }
    let out = n.out(1)?.clone();
    if !matches!(out.dtype, DType::U8 | DType::U32 | DType::U64) {
        return Err(format!("{}: bits of {} are not lowered (u8, u32 or u64, as in the bridge)", n.op, out.dtype));
    }
    let (next, bits) = bit_generator(c, &state, algorithm, out.dtype, &out.shape);
    Ok(vec![next, bits])
}
