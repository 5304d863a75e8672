//! Random ops, lowered as TensorFlow's XLA bridge lowers them.
//!
//! The seeded stateful ops (`RandomUniform`, `RandomStandardNormal`,
//! `TruncatedNormal`, `RandomUniformInt`) draw from XLA's own generator
//! (`stablehlo.rng`), ignoring their seeds as the bridge does, and so do
//! `RandomShuffle` (a sort by random keys) and `Multinomial` (Gumbel-max);
//! the stateless ones follow.
//!
//! The bits come from `stablehlo.rng_bit_generator` with the Philox
//! algorithm on the state `[key, counter_lo, counter_hi]`: the same Philox
//! words TensorFlow's CPU kernels draw from that key and counter. The
//! bridge then turns them into numbers differently from the CPU kernels,
//! and so does this lowering (docs/xla.md says where the streams differ):
//! - uniform floats take the *high* mantissa bits of each word (f64: of each
//!   64-bit word) under exponent 0, minus one;
//! - normals are Box-Muller pairs of consecutive uniforms (sine first);
//! - truncated normals invert the normal CDF (`erf_inv`) of a uniform
//!   between the CDF's values at -2 and 2;
//! - integers are the words themselves, or `minval + word mod range`.
//!
//! A seed becomes a key and counter by one Philox block of the seed under
//! TensorFlow's fixed key, as on the CPU, except that the bridge keeps only
//! the low 32 bits of each seed (zero-extended) where the CPU sign-extends
//! an i32 seed and keeps an i64 one whole. Keys and draws are never
//! folded to constants: that would put the simulator's (CPU) stream in the
//! program. Only the Philox algorithm id (1, or 3: auto-select) is lowered.

use super::Call;
use crate::ir::DType;
use crate::xla::stablehlo::text::{Ctx, Ty, Val};

/// The stateless ops whose results are random draws, or keys made as the bridge makes them,
/// sorted; with the seeded ops ([`crate::exec::kernels::random::SEEDED`]) they are the draws.
const STATELESS_DRAWS: &[&str] = &[
    "StatelessMultinomial",
    "StatelessParameterizedTruncatedNormal",
    "StatelessRandomGetKeyCounter",
    "StatelessRandomGetKeyCounterAlg",
    "StatelessRandomNormal",
    "StatelessRandomNormalV2",
    "StatelessRandomUniform",
    "StatelessRandomUniformFullInt",
    "StatelessRandomUniformFullIntV2",
    "StatelessRandomUniformInt",
    "StatelessRandomUniformIntV2",
    "StatelessRandomUniformV2",
    "StatelessTruncatedNormal",
    "StatelessTruncatedNormalV2",
    "StochasticCastToInt",
];

/// True when `op`'s results are random draws (or keys made as the bridge makes them): never
/// folded to constants (folding runs the simulator, which follows TensorFlow's CPU kernels).
pub fn is_draw(op: &str) -> bool {
    crate::exec::kernels::random::SEEDED.contains(&op) || STATELESS_DRAWS.contains(&op)
}

/// TensorFlow's fixed key for scrambling a seed into a key and counter.
const SEED_KEY: u64 = 0x0246_1E29_3EC8_F720;

/// A constant of an unsigned (or any integer) type holding `value` in every element.
fn uint(c: &mut Ctx, ty: &Ty, value: u64) -> Val {
    let r = c.fresh();
    let mlir = ty.mlir();
    c.line(&format!("{r} = \"stablehlo.constant\"() {{value = dense<{value}> : {mlir}}} : () -> {mlir}"));
    Val { name: r, ty: ty.clone() }
}

pub(super) fn op1(c: &mut Ctx, name: &str, a: &Val, b: &Val) -> Val {
    c.op(&format!("stablehlo.{name}"), &[a, b], "", a.ty.clone())
}

fn bitcast(c: &mut Ctx, v: &Val, dtype: DType) -> Val {
    c.op("stablehlo.bitcast_convert", &[v], "", v.ty.with_dtype(dtype))
}

/// `(new state, bits)` of `rng_bit_generator` with `algorithm` (`PHILOX` or `THREE_FRY`): bits of
/// `dtype` and `shape`.
pub(super) fn rng_bit_generator(
    c: &mut Ctx,
    state: &Val,
    algorithm: &str,
    dtype: DType,
    shape: &[usize],
) -> (Val, Val) {
    let out = c.op_regions(
        "stablehlo.rng_bit_generator",
        &[state],
        &[],
        &format!("rng_algorithm = #stablehlo<rng_algorithm {algorithm}>"),
        &[state.ty.clone(), Ty::new(dtype, shape.to_vec())],
    );
    (out[0].clone(), out[1].clone())
}

/// The bits of `rng_bit_generator` with Philox (its new state dropped).
fn philox_bits(c: &mut Ctx, state: &Val, dtype: DType, shape: &[usize]) -> Val {
    rng_bit_generator(c, state, "PHILOX", dtype, shape).1
}

/// A generator's state as `rng_bit_generator` takes it (Philox: u64 `[key, counter_lo,
/// counter_hi]`; ThreeFry: u64 `[key, counter]`), and the state after the last draw from it.
pub(super) struct Gen {
    state: Val,
    algorithm: &'static str,
    next: Option<Val>,
}

impl Gen {
    /// A Philox generator at `state`.
    pub(super) fn philox(state: Val) -> Gen {
        Gen { state, algorithm: "PHILOX", next: None }
    }

    /// A ThreeFry generator at `state`.
    pub(super) fn three_fry(state: Val) -> Gen {
        Gen { state, algorithm: "THREE_FRY", next: None }
    }

    /// Bits of `dtype` and `shape` from the state; the state after them becomes [`Gen::next`].
    fn bits(&mut self, c: &mut Ctx, dtype: DType, shape: &[usize]) -> Val {
        let (next, bits) = rng_bit_generator(c, &self.state, self.algorithm, dtype, shape);
        self.next = Some(next);
        bits
    }

    /// The state after the last draw (the state itself before any).
    pub(super) fn next(&self) -> Val {
        self.next.clone().unwrap_or_else(|| self.state.clone())
    }
}

/// The Philox state `[key, counter_lo, counter_hi]` of a V2 op's operands 1 and 2.
pub(super) fn state_of_operands(c: &mut Ctx, n: &Call) -> Result<Val, String> {
    if let Some(Some(alg)) = n.consts.get(3) {
        let alg = alg.to_i64_vec(n.op, "alg").map_err(|e| e.to_string())?;
        if !matches!(alg.as_slice(), [1] | [3]) {
            return Err(format!("{}: algorithm {alg:?} is not lowered (Philox, 1, only)", n.op));
        }
    }
    let key = n.input(1)?.clone();
    let counter = n.input(2)?.clone();
    let key = slice(c, &key, 0, 1);
    let counter = slice(c, &counter, 0, 2);
    Ok(c.op("stablehlo.concatenate", &[&key, &counter], "dimension = 0 : i64", Ty::new(DType::U64, vec![3])))
}

fn slice(c: &mut Ctx, v: &Val, start: usize, limit: usize) -> Val {
    c.op(
        "stablehlo.slice",
        &[v],
        &format!("start_indices = array<i64: {start}>, limit_indices = array<i64: {limit}>, strides = array<i64: 1>"),
        v.ty.with_shape(vec![limit - start]),
    )
}

/// A seed (operand `i`, two i32 or i64) scrambled into `(key [1], counter [2])`, as u64.
fn key_counter_of_seed(c: &mut Ctx, n: &Call, i: usize) -> Result<(Val, Val), String> {
    let seed = n.input(i)?.clone();
    if seed.ty.shape != [2] {
        return Err(format!("{}: seed must have shape [2], got {:?}", n.op, seed.ty.shape));
    }
    // TensorFlow's XLA bridge keeps the low 32 bits of each seed, zero-extended (its CPU kernels
    // sign-extend an i32 seed and keep all 64 bits of an i64 one).
    let seed = match seed.ty.dtype {
        DType::I32 => {
            let bits = bitcast(c, &seed, DType::U32);
            c.convert(&bits, DType::U64)
        }
        DType::I64 => {
            let bits = bitcast(c, &seed, DType::U64);
            let mask = uint(c, &bits.ty, 0xFFFF_FFFF);
            op1(c, "and", &bits, &mask)
        }
        other => return Err(format!("{}: seeds are i32 or i64, got {other}", n.op)),
    };
    let key = uint(c, &Ty::new(DType::U64, vec![1]), SEED_KEY);
    let state = c.op("stablehlo.concatenate", &[&key, &seed], "dimension = 0 : i64", Ty::new(DType::U64, vec![3]));
    let words = philox_bits(c, &state, DType::U32, &[4]);
    let words = c.convert(&words, DType::U64);
    let pair = |c: &mut Ctx, lo: usize| {
        let low = slice(c, &words, lo, lo + 1);
        let high = slice(c, &words, lo + 1, lo + 2);
        let shift = uint(c, &high.ty, 32);
        let high = op1(c, "shift_left", &high, &shift);
        op1(c, "or", &low, &high)
    };
    let key = pair(c, 0);
    let high = pair(c, 2);
    let zero = uint(c, &Ty::new(DType::U64, vec![1]), 0);
    let counter = c.op("stablehlo.concatenate", &[&zero, &high], "dimension = 0 : i64", Ty::new(DType::U64, vec![2]));
    Ok((key, counter))
}

/// The Philox state of a V1 op's seed (operand `i`).
pub(super) fn state_of_seed(c: &mut Ctx, n: &Call, i: usize) -> Result<Val, String> {
    let (key, counter) = key_counter_of_seed(c, n, i)?;
    Ok(c.op("stablehlo.concatenate", &[&key, &counter], "dimension = 0 : i64", Ty::new(DType::U64, vec![3])))
}

/// `StatelessRandomGetKeyCounter(seed)` and, with `alg`, `...Alg`.
pub(super) fn get_key_counter(c: &mut Ctx, n: &Call, alg: bool) -> Result<Vec<Val>, String> {
    let (key, counter) = key_counter_of_seed(c, n, 0)?;
    let mut out = vec![key, counter];
    if alg {
        out.push(c.splat(&Ty::scalar(DType::I32), 1.0));
    }
    Ok(out)
}

/// `StatelessRandomGetAlg()`: Philox.
pub(super) fn get_alg(c: &mut Ctx, _: &Call) -> Result<Vec<Val>, String> {
    Ok(vec![c.splat(&Ty::scalar(DType::I32), 1.0)])
}

/// The distributions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Dist {
    Uniform,
    Normal,
    Truncated,
}

/// Uniform floats in `[0, 1)` of `dtype`, `count` of them (flat), from the high mantissa bits.
pub(super) fn uniform(c: &mut Ctx, g: &mut Gen, dtype: DType, count: usize) -> Result<Val, String> {
    let (bits_ty, width, mantissa, one): (DType, u64, u64, u64) = match dtype {
        DType::F32 => (DType::U32, 32, 23, 0x3F80_0000),
        DType::F64 => (DType::U64, 64, 52, 0x3FF0_0000_0000_0000),
        DType::F16 => (DType::U16, 16, 10, 0x3C00),
        DType::BF16 => (DType::U16, 16, 7, 0x3F80),
        other => return Err(format!("random floats of {other} are not lowered")),
    };
    let bits = g.bits(c, bits_ty, &[count]);
    let shift = uint(c, &bits.ty, width - mantissa);
    let bits = op1(c, "shift_right_logical", &bits, &shift);
    let exponent = uint(c, &bits.ty, one);
    let bits = op1(c, "or", &bits, &exponent);
    let value = bitcast(c, &bits, dtype);
    let one = c.splat(&value.ty, 1.0);
    Ok(op1(c, "subtract", &value, &one))
}

/// Normals of `shape` (flat), as XLA makes them: the shape splits in halves along its first
/// even dimension (else its first largest one), `d` becomes `[ceil(d/2), 2]`, and Box-Muller
/// turns the uniforms at 0 and 1 of that new axis into the normals there (sine at 0).
fn normal(c: &mut Ctx, g: &mut Gen, dtype: DType, shape: &[usize]) -> Result<Val, String> {
    let count: usize = shape.iter().product();
    let split = shape.iter().position(|d| d % 2 == 0).or_else(|| {
        let most = shape.iter().copied().max()?;
        shape.iter().position(|&d| d == most)
    });
    let (a, d, b) = match split {
        Some(s) => (shape[..s].iter().product(), shape[s], shape[s + 1..].iter().product()),
        None => (1, 1, 1),
    };
    let h = d.div_ceil(2);
    let u = uniform(c, g, dtype, a * h * 2 * b)?;
    let u = c.reshape(&u, vec![a, h, 2, b]);
    let half = |c: &mut Ctx, k: usize| {
        c.op(
            "stablehlo.slice",
            &[&u],
            &format!(
                "start_indices = array<i64: 0, 0, {k}, 0>, limit_indices = array<i64: {a}, {h}, {}, {b}>, \
                 strides = array<i64: 1, 1, 1, 1>",
                k + 1
            ),
            u.ty.with_shape(vec![a, h, 1, b]),
        )
    };
    let (u1, u2) = (half(c, 0), half(c, 1));
    let tiny = c.splat(&u1.ty, 1.0e-7);
    let u1 = op1(c, "maximum", &u1, &tiny);
    let two_pi = c.splat(&u2.ty, 2.0 * std::f64::consts::PI);
    let angle = op1(c, "multiply", &u2, &two_pi);
    let log = c.elementwise("log", &[&u1]);
    let minus_two = c.splat(&log.ty, -2.0);
    let radius = op1(c, "multiply", &log, &minus_two);
    let radius = c.elementwise("sqrt", &[&radius]);
    let sin = c.elementwise("sine", &[&angle]);
    let cos = c.elementwise("cosine", &[&angle]);
    let sin = op1(c, "multiply", &sin, &radius);
    let cos = op1(c, "multiply", &cos, &radius);
    let both = c.op("stablehlo.concatenate", &[&sin, &cos], "dimension = 2 : i64", u.ty.clone());
    let both = c.reshape(&both, vec![a, 2 * h, b]);
    let both = if 2 * h == d {
        both
    } else {
        c.op(
            "stablehlo.slice",
            &[&both],
            &format!(
                "start_indices = array<i64: 0, 0, 0>, limit_indices = array<i64: {a}, {d}, {b}>, \
                 strides = array<i64: 1, 1, 1>"
            ),
            both.ty.with_shape(vec![a, d, b]),
        )
    };
    Ok(c.reshape(&both, vec![count]))
}

/// The smallest normal float of `dtype`: the bridge's truncated normals start their uniforms there.
pub(super) fn min_positive(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => f64::MIN_POSITIVE,
        DType::F16 => 6.103_515_625e-5,
        _ => f64::from(f32::MIN_POSITIVE),
    }
}

/// Truncated normals in (-2, 2): the inverse normal CDF of uniforms between its values at -2 and 2.
fn truncated(c: &mut Ctx, g: &mut Gen, dtype: DType, count: usize) -> Result<Val, String> {
    let u = uniform(c, g, dtype, count)?;
    // The uniform runs from the smallest normal float (not 0) to 1.
    let tiny = min_positive(dtype);
    let scale = c.splat(&u.ty, 1.0 - tiny);
    let low = c.splat(&u.ty, tiny);
    let u = op1(c, "multiply", &u, &scale);
    let u = op1(c, "add", &u, &low);
    Ok(truncated_of_uniform(c, &u))
}

/// Truncated normals from uniforms in `[min_positive, 1)`.
fn truncated_of_uniform(c: &mut Ctx, u: &Val) -> Val {
    let cdf = |x: f64| 0.5 * (1.0 + erf(x / std::f64::consts::SQRT_2));
    let (alpha, beta) = (cdf(-2.0), cdf(2.0));
    let span = c.splat(&u.ty, beta - alpha);
    let alpha = c.splat(&u.ty, alpha);
    let p = op1(c, "multiply", u, &span);
    let p = op1(c, "add", &p, &alpha);
    let two = c.splat(&p.ty, 2.0);
    let one = c.splat(&p.ty, 1.0);
    let v = op1(c, "multiply", &p, &two);
    let v = op1(c, "subtract", &v, &one);
    let x = c.op("chlo.erf_inv", &[&v], "", v.ty.clone());
    let sqrt2 = c.splat(&x.ty, std::f64::consts::SQRT_2);
    let x = op1(c, "multiply", &x, &sqrt2);
    let lo = c.splat(&x.ty, -2.0);
    let hi = c.splat(&x.ty, 2.0);
    c.op("stablehlo.clamp", &[&lo, &x, &hi], "", x.ty.clone())
}

/// The error function in f64 (for two compile-time constants).
fn erf(x: f64) -> f64 {
    // Abramowitz-Stegun 7.1.26 is too coarse here; the series and continued fraction are exact enough.
    if x.abs() < 3.0 {
        let mut sum = x;
        let mut term = x;
        let mut n = 0.0;
        while term.abs() > 1e-17 * sum.abs() {
            n += 1.0;
            term *= -x * x / n;
            sum += term / (2.0 * n + 1.0);
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    } else {
        x.signum()
    }
}

/// A float draw of a V2 (`v2`) or V1 op.
pub(super) fn float_draw(c: &mut Ctx, n: &Call, dist: Dist, v2: bool) -> Result<Vec<Val>, String> {
    let out = n.out(0)?.clone();
    let state = if v2 { state_of_operands(c, n)? } else { state_of_seed(c, n, 1)? };
    Ok(vec![float_values(c, &mut Gen::philox(state), dist, &out)?])
}

/// Floats of type `out` drawn from `g` by `dist`.
pub(super) fn float_values(c: &mut Ctx, g: &mut Gen, dist: Dist, out: &Ty) -> Result<Val, String> {
    let count = out.count();
    let flat = match dist {
        Dist::Uniform => uniform(c, g, out.dtype, count)?,
        Dist::Normal => normal(c, g, out.dtype, &out.shape)?,
        Dist::Truncated => truncated(c, g, out.dtype, count)?,
    };
    Ok(c.reshape(&flat, out.shape.clone()))
}

/// An integer draw: every bit pattern, or `minval + bits mod (maxval - minval)` with bounds at `bounds`.
pub(super) fn int_draw(c: &mut Ctx, n: &Call, v2: bool, bounds: Option<usize>) -> Result<Vec<Val>, String> {
    let out = n.out(0)?.clone();
    let state = if v2 { state_of_operands(c, n)? } else { state_of_seed(c, n, 1)? };
    let bounds = match bounds {
        Some(i) => Some((n.input(i)?.clone(), n.input(i + 1)?.clone())),
        None => None,
    };
    Ok(vec![int_values(c, &mut Gen::philox(state), &out, bounds)?])
}

/// Integers of type `out` drawn from `g`: every bit pattern, or `lo + bits mod (hi - lo)`.
pub(super) fn int_values(c: &mut Ctx, g: &mut Gen, out: &Ty, bounds: Option<(Val, Val)>) -> Result<Val, String> {
    let unsigned = match out.dtype {
        DType::I32 | DType::U32 => DType::U32,
        DType::I64 | DType::U64 => DType::U64,
        other => return Err(format!("random integers of {other} are not lowered")),
    };
    let bits = g.bits(c, unsigned, &[out.count()]);
    let value = match bounds {
        None => bitcast(c, &bits, out.dtype),
        Some((lo, hi)) => {
            let lo_u = bitcast(c, &lo, unsigned);
            let hi_u = bitcast(c, &hi, unsigned);
            let range = op1(c, "subtract", &hi_u, &lo_u);
            let range = c.broadcast_to(&range, &[out.count()]);
            let offset = op1(c, "remainder", &bits, &range);
            let offset = bitcast(c, &offset, out.dtype);
            let lo = c.broadcast_to(&lo, &[out.count()]);
            op1(c, "add", &lo, &offset)
        }
    };
    Ok(c.reshape(&value, out.shape.clone()))
}

/// `stablehlo.rng` of `distribution` (`UNIFORM` in `[a, b)`, `NORMAL` with mean `a` and deviation
/// `b`) in the result type `ty`: XLA's own generator, whose state moves on every execution.
pub(super) fn rng(c: &mut Ctx, distribution: &str, a: &Val, b: &Val, ty: &Ty) -> Val {
    let dims: Vec<i64> = ty.shape.iter().map(|&d| d as i64).collect();
    let shape = c.constant(&crate::exec::Tensor::vector(dims));
    c.op(
        "stablehlo.rng",
        &[a, b, &shape],
        &format!("rng_distribution = #stablehlo<rng_distribution {distribution}>"),
        ty.clone(),
    )
}

/// A seeded stateful op (`RandomUniform`, `RandomStandardNormal`, `TruncatedNormal`,
/// `RandomUniformInt`), as TensorFlow's XLA bridge lowers it: XLA's generator, which ignores
/// the `seed` attributes (the bridge's stream is not TensorFlow's CPU stream, nor repeatable).
/// f16 and bf16 draws are made in f32 and rounded.
pub(super) fn seeded_draw(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let out = n.out(0)?.clone();
    if n.op == "RandomUniformInt" {
        if !matches!(out.dtype, DType::I32 | DType::I64) {
            return Err(format!("RandomUniformInt of {} is not lowered (i32 or i64)", out.dtype));
        }
        let (lo, hi) = (n.input(1)?.clone(), n.input(2)?.clone());
        return Ok(vec![rng(c, "UNIFORM", &lo, &hi, &out)]);
    }
    let wide = match out.dtype {
        DType::F32 | DType::F64 => out.dtype,
        DType::F16 | DType::BF16 => DType::F32,
        other => return Err(format!("{} of {other} is not lowered (random floats are f32, f64, f16 or bf16)", n.op)),
    };
    let ty = out.with_dtype(wide);
    let scalar = Ty::scalar(wide);
    let value = match n.op {
        "RandomStandardNormal" => {
            let (mean, deviation) = (c.splat(&scalar, 0.0), c.splat(&scalar, 1.0));
            rng(c, "NORMAL", &mean, &deviation, &ty)
        }
        "TruncatedNormal" => {
            let (low, one) = (c.splat(&scalar, min_positive(out.dtype)), c.splat(&scalar, 1.0));
            let u = rng(c, "UNIFORM", &low, &one, &ty);
            truncated_of_uniform(c, &u)
        }
        _ => {
            let (zero, one) = (c.splat(&scalar, 0.0), c.splat(&scalar, 1.0));
            rng(c, "UNIFORM", &zero, &one, &ty)
        }
    };
    Ok(vec![if wide == out.dtype { value } else { c.convert(&value, out.dtype) }])
}

/// `RandomShuffle(value)`: the rows of `value` sorted by random 32-bit keys from XLA's generator
/// (ties keep their order), then gathered; a value of at most one row or element is unchanged.
pub(super) fn shuffle(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?.clone();
    let rows = x.ty.shape.first().copied().unwrap_or(0);
    if rows <= 1 || x.ty.count() <= 1 {
        return Ok(vec![x]);
    }
    let keys_ty = Ty::new(DType::U32, vec![rows]);
    let (lo, hi) = (uint(c, &Ty::scalar(DType::U32), 0), uint(c, &Ty::scalar(DType::U32), u64::from(u32::MAX)));
    let keys = rng(c, "UNIFORM", &lo, &hi, &keys_ty);
    let order = c.op("stablehlo.iota", &[], "iota_dimension = 0 : i64", Ty::new(DType::I32, vec![rows]));
    let (a, b, i, j) = (c.fresh(), c.fresh(), c.fresh(), c.fresh());
    let less = c.fresh();
    let (k, o) = (Ty::scalar(DType::U32).mlir(), Ty::scalar(DType::I32).mlir());
    let region = format!(
        "({{\n^bb0({a}: {k}, {b}: {k}, {i}: {o}, {j}: {o}):\n  {less} = \"stablehlo.compare\"({a}, {b}) \
         {{comparison_direction = #stablehlo<comparison_direction LT>}} : ({k}, {k}) -> tensor<i1>\n  \
         \"stablehlo.return\"({less}) : (tensor<i1>) -> ()\n}})"
    );
    let sorted = c.op_regions(
        "stablehlo.sort",
        &[&keys, &order],
        &[region],
        "dimension = 0 : i64, is_stable = true",
        &[keys_ty.clone(), order.ty.clone()],
    );
    Ok(vec![super::gather::gather(c, &x, &sorted[1], 0, x.ty.clone())])
}

/// `Multinomial(logits, num_samples)` and `StatelessMultinomial(logits, num_samples, seed)`, as the
/// bridge lowers them: the Gumbel-max trick, `argmax(logits - log(-log(u)))` over the classes for
/// uniforms `u` in `[min_positive, 1)` of shape `[rows, samples, classes]`, drawn from XLA's
/// generator (seeds ignored) or, stateless, from the seed's Philox stream. f16/bf16 logits are
/// widened to f32.
pub(super) fn multinomial(c: &mut Ctx, n: &Call, stateless: bool) -> Result<Vec<Val>, String> {
    let logits = n.input(0)?.clone();
    let out = n.out(0)?.clone();
    let (&[rows, classes], &[_, samples]) = (logits.ty.shape.as_slice(), out.shape.as_slice()) else {
        return Err(format!("{}: logits must be a matrix, got {:?}", n.op, logits.ty.shape));
    };
    let dtype = match logits.ty.dtype {
        DType::F32 | DType::F64 => logits.ty.dtype,
        DType::F16 | DType::BF16 => DType::F32,
        other => return Err(format!("{}: logits of {other} are not lowered (floats only)", n.op)),
    };
    let logits = if dtype == logits.ty.dtype { logits } else { c.convert(&logits, dtype) };
    let shape = vec![rows, samples, classes];
    let ty = Ty::new(dtype, shape.clone());
    let tiny = min_positive(dtype);
    let u = if stateless {
        let state = state_of_seed(c, n, 2)?;
        let u = uniform(c, &mut Gen::philox(state), dtype, rows * samples * classes)?;
        let (scale, low) = (c.splat(&u.ty, 1.0 - tiny), c.splat(&u.ty, tiny));
        let u = op1(c, "multiply", &u, &scale);
        let u = op1(c, "add", &u, &low);
        c.reshape(&u, shape.clone())
    } else {
        let (low, one) = (c.splat(&Ty::scalar(dtype), tiny), c.splat(&Ty::scalar(dtype), 1.0));
        rng(c, "UNIFORM", &low, &one, &ty)
    };
    let log = c.elementwise("log", &[&u]);
    let minus = c.elementwise("negate", &[&log]);
    let gumbel = c.elementwise("log", &[&minus]);
    let wide = c.reshape(&logits, vec![rows, 1, classes]);
    let wide = c.broadcast_to(&wide, &shape);
    let scores = op1(c, "subtract", &wide, &gumbel);
    let best = c.reduce(&scores, &[2], crate::xla::stablehlo::text::Reducer::Max);
    let best = c.reshape(&best, vec![rows, samples, 1]);
    let best = c.broadcast_to(&best, &shape);
    let hit = c.compare(&scores, &best, crate::xla::stablehlo::text::Cmp::Eq);
    let index = c.op("stablehlo.iota", &[], "iota_dimension = 2 : i64", Ty::new(out.dtype, shape.clone()));
    let past = c.splat(&index.ty, classes as f64);
    let index = c.select(&hit, &index, &past);
    Ok(vec![c.reduce(&index, &[2], crate::xla::stablehlo::text::Reducer::Min)])
}
