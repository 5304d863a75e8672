//! The `ptn` family: `ParameterizedTruncatedNormal` and `StatelessParameterizedTruncatedNormal`,
//! normals of a given mean and deviation cut to `[minval, maxval]`, drawn as TensorFlow's CPU
//! kernel draws them from its Philox stream.
//!
//! Both split the output into batches that share one set of parameters:
//! - the seeded `ParameterizedTruncatedNormal(shape, means, stdevs, minvals, maxvals)` has batch
//!   `b` at the rows of `shape[0]` (samples `b * per_batch ..`, row-major), each parameter a
//!   scalar or a vector of length 1 or `shape[0]`; when every parameter is one value the output
//!   is re-split into batches of 100 (TensorFlow does so for parallelism, and a batch ends its
//!   Philox block);
//! - `StatelessParameterizedTruncatedNormal(shape, seed, means, stddevs, minvals, maxvals)`
//!   broadcasts the four parameters together; `shape` must end with that broadcast shape, whose
//!   elements are the batches; the leading dimensions are the samples, so sample `s` of batch `b`
//!   sits at `s * batches + b`.
//!
//! Batches draw one after another from one generator (the seed pair scrambled into a key and
//! counter for the stateless op; `seed`/`seed2` for the seeded one, which reserves
//! `batches * 2000 * (per_batch + 3) / 4` blocks per run). TensorFlow's CPU kernel shards large
//! outputs over its threads, each shard skipping ahead in the stream: the simulator follows the
//! single shard TensorFlow runs while the estimated cost stays below Eigen's threshold for a
//! second thread (about a thousand elements); beyond that TensorFlow's numbers depend on its
//! thread count, and the simulator's are still draws of the same distribution.
//!
//! Each batch standardises its bounds (`(bound - mean) / stddev`; a lower bound of `-inf`, or an
//! upper bound below the mean, mirrors the problem by swapping the bounds and negating the
//! deviation) and picks one of three rejection samplers:
//! - normals kept when inside the bounds, when a bound lies 1.3 deviations beyond the mean on
//!   the side the interval covers (one block gives 4 f32/f16 normals, 2 f64);
//! - uniforms `z` on the interval accepted when a second uniform is below
//!   `exp((max(min, 0)^2 - z^2) / 2)`, when the interval is narrower than a cutoff (two blocks
//!   per round: the proposals, then the tests);
//! - else an exponential proposal `min - ln(u) / alpha` shifted past the lower bound, tested by
//!   the next uniform of the same block.
//!
//! A thousand rejections in a row is an error, as in TensorFlow. Arithmetic is in the dtype
//! (f16: each step rounded, as Eigen's `half` computes). Cost: a few blocks per sample; memory is
//! the output.

use super::arg;
use super::random::Philox;
use super::random::{box_muller_f32, box_muller_f64, seed_operand, shape_operand, unit_f16, unit_f32, unit_f64};
use crate::exec::error::KernelError;
use crate::exec::tensor::Tensor;
use crate::ir::{AttrMap, DType};

/// The family's ops: their 16-bit float operands are taken as they are (not widened to f32).
pub(super) const OPS: &[&str] = &["ParameterizedTruncatedNormal", "StatelessParameterizedTruncatedNormal"];

/// Consecutive rejections after which TensorFlow's samplers give up.
const MAX_ITERATIONS: u32 = 1000;

/// Runs the stateless op; the seeded one runs as a seeded draw ([`seeded`]).
pub(super) fn dispatch(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Option<Result<Vec<Tensor>, KernelError>> {
    match op {
        "StatelessParameterizedTruncatedNormal" => Some(stateless(op, attrs, inputs).map(|t| vec![t])),
        _ => None,
    }
}

/// A float type the samplers compute in, with TensorFlow's conversions of
/// Philox blocks. Its arithmetic is `num_traits::Float`'s (for f16: in f32,
/// rounded back, as Eigen's half does).
trait Real: num_traits::Float {
    /// The constant `v` as C++'s `T(v)` makes it.
    fn of(v: f64) -> Self;
    /// The uniforms in `[0, 1)` of one block, and how many there are.
    fn uniforms(b: [u32; 4]) -> ([Self; 4], usize);
    /// The normals of one block, and how many there are.
    fn normals(b: [u32; 4]) -> ([Self; 4], usize);
}

impl Real for f32 {
    fn of(v: f64) -> f32 {
        v as f32
    }
    fn uniforms(b: [u32; 4]) -> ([f32; 4], usize) {
        (b.map(unit_f32), 4)
    }
    fn normals(b: [u32; 4]) -> ([f32; 4], usize) {
        let [a, c] = box_muller_f32(b[0], b[1]);
        let [d, e] = box_muller_f32(b[2], b[3]);
        ([a, c, d, e], 4)
    }
}

impl Real for f64 {
    fn of(v: f64) -> f64 {
        v
    }
    fn uniforms(b: [u32; 4]) -> ([f64; 4], usize) {
        ([unit_f64(b[0], b[1]), unit_f64(b[2], b[3]), 0.0, 0.0], 2)
    }
    fn normals(b: [u32; 4]) -> ([f64; 4], usize) {
        let [a, c] = box_muller_f64(b);
        ([a, c, 0.0, 0.0], 2)
    }
}

impl Real for half::f16 {
    fn of(v: f64) -> half::f16 {
        // Eigen's `half(double)` goes through float.
        half::f16::from_f32(v as f32)
    }
    fn uniforms(b: [u32; 4]) -> ([half::f16; 4], usize) {
        (b.map(unit_f16), 4)
    }
    fn normals(b: [u32; 4]) -> ([half::f16; 4], usize) {
        let [a, c] = box_muller_f32(b[0], b[1]);
        let [d, e] = box_muller_f32(b[2], b[3]);
        ([a, c, d, e].map(half::f16::from_f32), 4)
    }
}

/// One batch's parameters.
#[derive(Clone, Copy, Debug)]
struct Params<T> {
    mean: T,
    stddev: T,
    minval: T,
    maxval: T,
}

/// Draws `count` samples of one batch from `gen`, handing each to `put` in order.
fn sample_batch<T: Real>(
    op: &str,
    gen: &mut Philox,
    p: Params<T>,
    count: usize,
    mut put: impl FnMut(T),
) -> Result<(), KernelError> {
    let zero = T::of(0.0);
    let (two, four) = (T::of(2.0), T::of(4.0));
    let Params { mean, mut stddev, mut minval, mut maxval } = p;
    if !(stddev > zero && minval < maxval && (minval.is_finite() || maxval.is_finite())) {
        return Err(KernelError::invalid(
            op,
            "invalid parameters: need stddev > 0, minval < maxval and a finite bound (TensorFlow's \"Invalid parameters\")",
        ));
    }
    if count == 0 {
        return Ok(());
    }
    // Make a one-sided bound the lower one, or both bounds lie above the mean.
    if (minval.is_infinite() && minval < zero) || maxval < mean {
        std::mem::swap(&mut minval, &mut maxval);
        stddev = -stddev;
    }
    let norm_min = (minval - mean) / stddev;
    let norm_max = (maxval - mean) / stddev;
    let sqrt_factor = (norm_min * norm_min + four).sqrt();
    let cutoff = two * (T::of(0.5) + (norm_min * (norm_min - sqrt_factor)) / four).exp() / (norm_min + sqrt_factor);
    let diff = norm_max - norm_min;
    let inside = T::of(1.3);
    let mut left = count;
    let mut iterations = 0u32;
    let exhausted = |what: &str| {
        KernelError::invalid(op, format!("the {what} rejection sampler rejected {MAX_ITERATIONS} samples in a row"))
    };
    if (norm_min < -inside && norm_max >= zero) || (norm_max > inside && norm_min <= zero) {
        // Normals, kept inside the bounds.
        while left > 0 {
            let (values, n) = T::normals(gen.next_block());
            for &v in &values[..n] {
                if v >= norm_min && v <= norm_max {
                    put(v * stddev + mean);
                    left -= 1;
                    if left == 0 {
                        break;
                    }
                    iterations = 0;
                } else {
                    iterations += 1;
                    if iterations > MAX_ITERATIONS {
                        return Err(exhausted("normal"));
                    }
                }
            }
        }
    } else if diff < cutoff {
        // Uniform proposals on the interval.
        let plus = if norm_min < zero { zero } else { norm_min * norm_min };
        while left > 0 {
            let (r, n) = T::uniforms(gen.next_block());
            let z = r.map(|r| r * diff + norm_min);
            let g = z.map(|z| (plus - z * z) / two);
            let (u, _) = T::uniforms(gen.next_block());
            for i in 0..n {
                let accept = u[i] <= g[i].exp();
                if accept || iterations + 1 >= MAX_ITERATIONS {
                    if !accept {
                        return Err(exhausted("uniform"));
                    }
                    put(z[i] * stddev + mean);
                    left -= 1;
                    if left == 0 {
                        break;
                    }
                    iterations = 0;
                } else {
                    iterations += 1;
                }
            }
        }
    } else {
        // Exponential proposals past the lower bound.
        let alpha = (norm_min + (norm_min * norm_min + four).sqrt()) / two;
        while left > 0 {
            let (r, n) = T::uniforms(gen.next_block());
            for pair in r[..n].chunks_exact(2) {
                let z = -pair[0].ln() / alpha + norm_min;
                let x = if norm_min < alpha { alpha - z } else { norm_min - alpha };
                let g = (-x * x / two).exp();
                let accept = pair[1] <= g && z < norm_max;
                if accept || iterations + 1 >= MAX_ITERATIONS {
                    if !accept {
                        return Err(exhausted("exponential"));
                    }
                    put(z * stddev + mean);
                    left -= 1;
                    if left == 0 {
                        break;
                    }
                    iterations = 0;
                } else {
                    iterations += 1;
                }
            }
        }
    }
    Ok(())
}

/// One parameter operand: its values (row-major) and its shape.
type Param<T> = (Vec<T>, Vec<usize>);

/// The four parameter operands from `first` on, as values of `T`, with their shapes.
fn params<T: crate::exec::tensor::Element>(
    op: &str,
    inputs: &[Tensor],
    first: usize,
    dtype: DType,
) -> Result<Vec<Param<T>>, KernelError> {
    ["means", "stddevs", "minvals", "maxvals"]
        .iter()
        .enumerate()
        .map(|(k, what)| {
            let t = arg(op, inputs, first + k)?;
            let values = t
                .to_vec::<T>()
                .filter(|_| t.dtype() == dtype)
                .ok_or_else(|| KernelError::dtype(op, t.dtype(), format!("{what} must be {dtype}, the op's dtype")))?;
            Ok((values, t.shape().to_vec()))
        })
        .collect()
}

/// The dtype attribute (f32 unless set).
fn dtype(attrs: &AttrMap) -> DType {
    attrs.get("dtype").and_then(|v| v.as_type()).unwrap_or(DType::F32)
}

/// `ParameterizedTruncatedNormal(shape, means, stdevs, minvals, maxvals) {seed, seed2, dtype}`
/// drawn from `gen`: the output and the blocks the run reserves.
pub(super) fn seeded(op: &str, attrs: &AttrMap, gen: Philox, inputs: &[Tensor]) -> Result<(Tensor, u64), KernelError> {
    let dtype = dtype(attrs);
    match dtype {
        DType::F32 => seeded_of::<f32>(op, dtype, gen, inputs),
        DType::F64 => seeded_of::<f64>(op, dtype, gen, inputs),
        DType::F16 => seeded_of::<half::f16>(op, dtype, gen, inputs),
        other => Err(KernelError::dtype(op, other, "dtype must be f16, f32 or f64")),
    }
}

fn seeded_of<T: Real + crate::exec::tensor::Element>(
    op: &str,
    dtype: DType,
    gen: Philox,
    inputs: &[Tensor],
) -> Result<(Tensor, u64), KernelError> {
    let shape = shape_operand(op, arg(op, inputs, 0)?, dtype)?;
    let Some((&rows, rest)) = shape.split_first() else {
        return Err(KernelError::invalid(op, "shape must not be empty: its first dimension counts the batches"));
    };
    let n: usize = shape.iter().product();
    let ps = params::<T>(op, inputs, 1, dtype)?;
    let names = ["means", "stdevs", "minvals", "maxvals"];
    for ((_, s), what) in ps.iter().zip(names) {
        if s.len() > 1 {
            return Err(KernelError::invalid(op, format!("{what} must be a scalar or a vector, got shape {s:?}")));
        }
    }
    let one_value = |k: usize| ps[k].1.is_empty() || ps[k].1 == [1];
    let (batches, per_batch) = if one_value(0) && one_value(1) && ps[2].1.is_empty() && ps[3].1.is_empty() {
        (n.div_ceil(100), 100)
    } else {
        for ((values, _), what) in ps.iter().zip(names) {
            if values.len() != 1 && values.len() != rows {
                return Err(KernelError::invalid(
                    op,
                    format!("{what} must have length 1 or shape[0] = {rows}, got {}", values.len()),
                ));
            }
        }
        (rows, rest.iter().product())
    };
    let at = |k: usize, b: usize| if ps[k].0.len() == 1 { ps[k].0[0] } else { ps[k].0[b] };
    let mut gen = gen;
    let mut out = Vec::with_capacity(n);
    for b in 0..batches {
        let count = n.min((b + 1) * per_batch) - b * per_batch;
        let p = Params { mean: at(0, b), stddev: at(1, b), minval: at(2, b), maxval: at(3, b) };
        sample_batch(op, &mut gen, p, count, |v| out.push(v))?;
    }
    let reserved =
        (batches as u64).saturating_mul(2 * u64::from(MAX_ITERATIONS)).saturating_mul(per_batch as u64 + 3) / 4;
    Ok((Tensor::from_vec(&shape, out)?, reserved))
}

/// `StatelessParameterizedTruncatedNormal(shape, seed, means, stddevs, minvals, maxvals) {dtype}`.
fn stateless(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Result<Tensor, KernelError> {
    let dtype = dtype(attrs);
    match dtype {
        DType::F32 => stateless_of::<f32>(op, dtype, inputs),
        DType::F64 => stateless_of::<f64>(op, dtype, inputs),
        DType::F16 => stateless_of::<half::f16>(op, dtype, inputs),
        other => Err(KernelError::dtype(op, other, "dtype must be f16, f32 or f64")),
    }
}

fn stateless_of<T: Real + crate::exec::tensor::Element>(
    op: &str,
    dtype: DType,
    inputs: &[Tensor],
) -> Result<Tensor, KernelError> {
    let mut gen = Philox::from_seed(seed_operand(op, arg(op, inputs, 1)?)?);
    let ps = params::<T>(op, inputs, 2, dtype)?;
    let mut bcast: Vec<usize> = Vec::new();
    for (_, s) in &ps {
        bcast = super::math::broadcast_shape(op, &bcast, s)?;
    }
    let shape = shape_operand(op, arg(op, inputs, 0)?, dtype)?;
    if shape.len() < bcast.len() || shape[shape.len() - bcast.len()..] != bcast[..] {
        return Err(KernelError::invalid(
            op,
            format!("shape {shape:?} must end with the parameters' broadcast shape {bcast:?}"),
        ));
    }
    let batches: usize = bcast.iter().product();
    let per_batch: usize = shape[..shape.len() - bcast.len()].iter().product();
    // Each parameter's flat index at a flat index of the broadcast shape.
    let index = |s: &[usize], mut at: usize| -> usize {
        let (mut flat, mut stride) = (0, 1);
        for (d, &size) in bcast.iter().enumerate().rev() {
            let i = at % size;
            at /= size;
            if let Some(k) = (d + s.len()).checked_sub(bcast.len()) {
                if s[k] != 1 {
                    flat += i * stride;
                }
                stride *= s[k];
            }
        }
        flat
    };
    let zero = T::of(0.0);
    let mut out = vec![zero; batches * per_batch];
    for b in 0..batches {
        let v = |k: usize| ps[k].0[index(&ps[k].1, b)];
        let p = Params { mean: v(0), stddev: v(1), minval: v(2), maxval: v(3) };
        let mut s = 0;
        sample_batch(op, &mut gen, p, per_batch, |x| {
            out[s * batches + b] = x;
            s += 1;
        })?;
    }
    Tensor::from_vec(&shape, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stateless_f64(shape: &[i64], ps: [(f64, &[usize]); 4]) -> Result<Tensor, KernelError> {
        let mut inputs = vec![Tensor::vector(shape.to_vec()), Tensor::vector(vec![1i64, 2])];
        for (v, s) in ps {
            let n: usize = s.iter().product();
            inputs.push(Tensor::from_vec(s, vec![v; n]).unwrap());
        }
        let attrs: AttrMap = [("dtype".to_string(), crate::ir::AttrValue::Type(DType::F64))].into_iter().collect();
        stateless("StatelessParameterizedTruncatedNormal", &attrs, &inputs)
    }

    #[test]
    fn every_regime_stays_inside_its_bounds() {
        // Wide (normals), narrow (uniforms) and far in the tail (exponential), and a lower bound at -inf.
        for (lo, hi) in [(-3.0, 3.0), (0.1, 0.3), (4.0, 9.0), (f64::NEG_INFINITY, -2.0)] {
            let t = stateless_f64(&[40], [(0.0, &[]), (1.0, &[]), (lo, &[]), (hi, &[])]).unwrap();
            let values = t.to_vec::<f64>().unwrap();
            assert!(values.iter().all(|&v| lo <= v && v <= hi), "{lo}..{hi}: {values:?}");
            assert!(values.windows(2).all(|w| w[0] != w[1]), "{lo}..{hi}: repeated draws");
        }
    }

    #[test]
    fn bad_parameters_and_shapes_are_errors() {
        let bad = stateless_f64(&[4], [(0.0, &[]), (-1.0, &[]), (0.0, &[]), (1.0, &[])]);
        assert!(bad.unwrap_err().to_string().contains("invalid parameters"));
        let unbounded = stateless_f64(&[4], [(0.0, &[]), (1.0, &[]), (f64::NEG_INFINITY, &[]), (f64::INFINITY, &[])]);
        assert!(unbounded.is_err());
        let short = stateless_f64(&[4, 2], [(0.0, &[3]), (1.0, &[]), (0.0, &[]), (1.0, &[])]);
        assert!(short.unwrap_err().to_string().contains("must end with"));
        let t = stateless_f64(&[5, 3], [(0.0, &[3]), (1.0, &[1]), (-1.0, &[]), (1.0, &[3])]).unwrap();
        assert_eq!(t.shape(), &[5, 3]);
    }
}
