//! The counter moves of `tf.random.Generator`'s state as TensorFlow's XLA
//! bridge lowers them: `RngSkip` and `RngReadAndSkip` on the state variable
//! `[counter_lo, counter_hi, key]` (int64, Philox: algorithm 1, or 3,
//! auto-select, which the bridge treats as Philox). The counter moves on by
//! `delta · 256` as a 128-bit sum of two u64 words (the carry from the
//! unsigned low word into the high one); `RngReadAndSkip` returns the state
//! it read. These are the numbers TensorFlow's CPU kernels give too. The
//! algorithm must be a compile-time constant, as in the bridge; ThreeFry
//! and states of another size than 3 are refused (the simulator refuses
//! them as well). Cost: a handful of scalar ops.

use super::Call;
use crate::exec::kernels::random_state::BLOCKS_PER_ELEMENT;
use crate::ir::DType;
use crate::xla::stablehlo::text::{Ctx, Ty, Val};

/// One `u64` element of `v` (`[3]`) at `i`, as `[1]`.
fn word(c: &mut Ctx, v: &Val, i: usize) -> Val {
    c.op(
        "stablehlo.slice",
        &[v],
        &format!("start_indices = array<i64: {i}>, limit_indices = array<i64: {}>, strides = array<i64: 1>", i + 1),
        v.ty.with_shape(vec![1]),
    )
}

/// `RngSkip` and `RngReadAndSkip`: the variable's new value and the op's results.
pub(super) fn skip(c: &mut Ctx, n: &Call, var: &Val) -> Result<(Vec<Val>, Vec<Val>), String> {
    let alg = n
        .consts
        .first()
        .and_then(Option::as_ref)
        .ok_or_else(|| format!("{}: the algorithm must be a compile-time constant", n.op))?;
    match alg.to_i64_vec(n.op, "algorithm").map_err(|e| e.to_string())?.as_slice() {
        [1] | [3] => {}
        [2] => return Err(format!("{}: the ThreeFry algorithm (2) is not lowered; Philox (1) is", n.op)),
        other => return Err(format!("{}: unsupported algorithm id {other:?}", n.op)),
    }
    if var.ty.dtype != DType::I64 || var.ty.shape != [3] {
        return Err(format!(
            "{}: the generator state must be int64 of shape [3] (Philox: counter low, counter high, key), got {}",
            n.op,
            var.ty.mlir()
        ));
    }
    let delta = n.input(1)?;
    if delta.ty.count() != 1 {
        return Err(format!("{}: delta must be one integer, got {}", n.op, delta.ty.mlir()));
    }
    let delta = c.reshape(delta, vec![1]);
    let delta = match delta.ty.dtype {
        DType::U64 => delta,
        DType::I64 => c.op("stablehlo.bitcast_convert", &[&delta], "", delta.ty.with_dtype(DType::U64)),
        other => return Err(format!("{}: delta must be int64 or uint64, got {other}", n.op)),
    };
    let words = c.op("stablehlo.bitcast_convert", &[var], "", var.ty.with_dtype(DType::U64));
    let (lo, hi, key) = (word(c, &words, 0), word(c, &words, 1), word(c, &words, 2));
    let scale = c.splat(&delta.ty, BLOCKS_PER_ELEMENT as f64);
    let step = c.elementwise("multiply", &[&delta, &scale]);
    let new_lo = c.elementwise("add", &[&lo, &step]);
    // The low word wrapped around exactly when the sum is below the step (unsigned).
    let wrapped = c.op(
        "stablehlo.compare",
        &[&new_lo, &step],
        "comparison_direction = #stablehlo<comparison_direction LT>, compare_type = #stablehlo<comparison_type UNSIGNED>",
        new_lo.ty.with_dtype(DType::Bool),
    );
    let carry = c.convert(&wrapped, DType::U64);
    let new_hi = c.elementwise("add", &[&hi, &carry]);
    let state =
        c.op("stablehlo.concatenate", &[&new_lo, &new_hi, &key], "dimension = 0 : i64", Ty::new(DType::U64, vec![3]));
    let state = c.op("stablehlo.bitcast_convert", &[&state], "", var.ty.clone());
    let out = if n.op == "RngReadAndSkip" { vec![var.clone()] } else { Vec::new() };
    Ok((vec![state], out))
}
