//! The `ptn` family, lowered as TensorFlow's XLA bridge lowers it: a truncated normal by the
//! inverse normal CDF of a uniform, not by the CPU kernel's rejection samplers.
//!
//! For uniforms `u` in `[min_positive, 1)` and the parameters broadcast to the output, with
//! `cdf(x) = (1 + erf(x / sqrt 2)) / 2`, `α = (minval - mean) / stddev` and
//! `β = (maxval - mean) / stddev`:
//! `p = cdf(α) + (cdf(β) - cdf(α)) u`, `v = clamp(2p - 1, -1 + ε, 1 - ε)` (ε the dtype's machine
//! epsilon) and the sample is `clamp(mean + stddev sqrt 2 · erf_inv(v), minval, maxval)`.
//!
//! - `StatelessParameterizedTruncatedNormal` draws its uniforms from the seed's Philox stream
//!   as the stateless V1 ops do ([`super::random`]); its parameters broadcast NumPy-style to the
//!   output shape. f32 and f64: the bridge's f16 uniforms come from bits this lowering does not
//!   reproduce, so f16 is refused rather than drawn from another stream.
//! - The seeded `ParameterizedTruncatedNormal` draws from XLA's own generator
//!   (`stablehlo.rng`), ignoring `seed`/`seed2` as the bridge does, so its numbers are neither
//!   TensorFlow's CPU numbers nor repeatable across programs; a parameter (a scalar or a vector
//!   of length 1 or `shape[0]`) runs along the first dimension. f32 and f64, as the bridge.

use super::random::{self, min_positive, op1, Gen};
use super::Call;
use crate::ir::DType;
use crate::xla::stablehlo::text::{Ctx, Ty, Val};

/// The dtype's machine epsilon (the gap above 1).
fn epsilon(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => f64::EPSILON,
        _ => f64::from(f32::EPSILON),
    }
}

/// The truncated normals of uniforms `u` (in `[min_positive, 1)`) with parameters of `u`'s type.
fn inverse_cdf(c: &mut Ctx, u: &Val, mean: &Val, stddev: &Val, minval: &Val, maxval: &Val) -> Val {
    let ty = u.ty.clone();
    let one = c.splat(&ty, 1.0);
    let two = c.splat(&ty, 2.0);
    let sqrt2 = c.splat(&ty, std::f64::consts::SQRT_2);
    let cdf = |c: &mut Ctx, x: &Val| {
        let scaled = op1(c, "divide", x, &sqrt2);
        let erf = c.op("chlo.erf", &[&scaled], "", ty.clone());
        let sum = op1(c, "add", &one, &erf);
        op1(c, "divide", &sum, &two)
    };
    let standard = |c: &mut Ctx, bound: &Val| {
        let centred = op1(c, "subtract", bound, mean);
        op1(c, "divide", &centred, stddev)
    };
    let alpha = standard(c, minval);
    let beta = standard(c, maxval);
    let alpha = cdf(c, &alpha);
    let beta = cdf(c, &beta);
    let span = op1(c, "subtract", &beta, &alpha);
    let step = op1(c, "multiply", &span, u);
    let p = op1(c, "add", &alpha, &step);
    let twice = op1(c, "multiply", &two, &p);
    let v = op1(c, "subtract", &twice, &one);
    let eps = epsilon(ty.dtype);
    let lo = c.splat(&ty, -1.0 + eps);
    let hi = c.splat(&ty, 1.0 - eps);
    let v = c.op("stablehlo.clamp", &[&lo, &v, &hi], "", ty.clone());
    let x = c.op("chlo.erf_inv", &[&v], "", ty.clone());
    let scale = op1(c, "multiply", stddev, &sqrt2);
    let x = op1(c, "multiply", &scale, &x);
    let x = op1(c, "add", mean, &x);
    c.op("stablehlo.clamp", &[minval, &x, maxval], "", ty)
}

/// Operand `i` checked to be of the output's dtype.
fn param(n: &Call, i: usize, dtype: DType) -> Result<Val, String> {
    let v = n.input(i)?.clone();
    if v.ty.dtype != dtype {
        return Err(format!("{}: operand {i} is {}, the op's dtype is {dtype}", n.op, v.ty.dtype));
    }
    Ok(v)
}

/// `StatelessParameterizedTruncatedNormal(shape, seed, means, stddevs, minvals, maxvals)`.
pub(super) fn stateless(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let out = n.out(0)?.clone();
    if !matches!(out.dtype, DType::F32 | DType::F64) {
        return Err(format!(
            "{}: dtype {} is not lowered (f32 or f64; the bridge's f16 uniforms are not reproduced)",
            n.op, out.dtype
        ));
    }
    let mut params = Vec::with_capacity(4);
    for i in 2..6 {
        let p = param(n, i, out.dtype)?;
        let fits = p.ty.shape.len() <= out.shape.len()
            && p.ty.shape.iter().rev().zip(out.shape.iter().rev()).all(|(&a, &b)| a == 1 || a == b);
        if !fits {
            return Err(format!(
                "{}: operand {i} of shape {:?} does not broadcast to the output's {:?}",
                n.op, p.ty.shape, out.shape
            ));
        }
        params.push(c.broadcast_to(&p, &out.shape));
    }
    let state = random::state_of_seed(c, n, 1)?;
    let u = random::uniform(c, &mut Gen::philox(state), out.dtype, out.count())?;
    // The bridge's uniforms run from the smallest normal float to 1.
    let tiny = min_positive(out.dtype);
    let (scale, low) = (c.splat(&u.ty, 1.0 - tiny), c.splat(&u.ty, tiny));
    let u = op1(c, "multiply", &u, &scale);
    let u = op1(c, "add", &u, &low);
    let u = c.reshape(&u, out.shape.clone());
    Ok(vec![inverse_cdf(c, &u, &params[0], &params[1], &params[2], &params[3])])
}

/// `ParameterizedTruncatedNormal(shape, means, stdevs, minvals, maxvals) {seed, seed2}`.
pub(super) fn seeded(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let out = n.out(0)?.clone();
    if !matches!(out.dtype, DType::F32 | DType::F64) {
        return Err(format!("{}: dtype {} is not lowered (f32 or f64, as TensorFlow's bridge)", n.op, out.dtype));
    }
    let Some(&rows) = out.shape.first() else {
        return Err(format!("{}: shape must have rank 1 or more", n.op));
    };
    let mut params = Vec::with_capacity(4);
    for i in 1..5 {
        let p = param(n, i, out.dtype)?;
        let wide = match p.ty.shape.as_slice() {
            [] | [1] => {
                let scalar = c.reshape(&p, Vec::new());
                c.broadcast_to(&scalar, &out.shape)
            }
            [len] if *len == rows => c.op(
                "stablehlo.broadcast_in_dim",
                &[&p],
                "broadcast_dimensions = array<i64: 0>",
                p.ty.with_shape(out.shape.clone()),
            ),
            other => {
                return Err(format!(
                    "{}: operand {i} must be a scalar or a vector of length 1 or {rows}, got shape {other:?}",
                    n.op
                ))
            }
        };
        params.push(wide);
    }
    let scalar = Ty::scalar(out.dtype);
    let (low, one) = (c.splat(&scalar, min_positive(out.dtype)), c.splat(&scalar, 1.0));
    let u = random::rng(c, "UNIFORM", &low, &one, &out);
    Ok(vec![inverse_cdf(c, &u, &params[0], &params[1], &params[2], &params[3])])
}
