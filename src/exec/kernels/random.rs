//! The stateless random ops, on TensorFlow's CPU Philox stream.
//!
//! Every op computes exactly what TensorFlow's CPU kernels compute, bit for
//! bit, so a dropout or initialiser step gives TensorFlow's numbers:
//! - the generator is Philox-4x32 with 10 rounds: a 64-bit key and a
//!   128-bit counter give four 32-bit words per block, and the counter then
//!   advances by one;
//! - a seed pair becomes a key and a counter by one Philox block of the seed
//!   under a fixed key (`StatelessRandomGetKeyCounter`, and the V1 ops);
//! - output element `i` of a fixed-count distribution comes from block
//!   `i / k` (`k` results per block: 4 for 32-bit and narrower results, 2
//!   for 64-bit ones), as TensorFlow's parallel fill assigns them;
//! - floats in `[0, 1)` are the low mantissa bits of a word under exponent
//!   0, minus one; normals are Box-Muller pairs of two such floats (f32
//!   arithmetic, with TensorFlow's `2π` in f64), cast for f16/bf16;
//! - truncated normals draw words one at a time and keep Box-Muller values
//!   below 2 in magnitude; group `g` of 4 (f64: 2) results starts 256
//!   (f64: 128) blocks into the stream, TensorFlow's reservation per group.
//!
//! The seeded stateful ops ([`SEEDED`]) draw the same way from a generator
//! whose key is the `seed` attribute and whose counter's high half is
//! `seed2`; every run reserves 256 blocks per output element, so the next
//! run (the mesh keeps each node's position) draws new numbers as
//! TensorFlow's do (`ParameterizedTruncatedNormal`, whose sampler is in
//! `ptn`, reserves its own count).
//!
//! Only the Philox algorithm (id 1, and 3, auto-select, which is Philox on
//! CPU) is supported, as on TensorFlow's CPU; another id is an error. Cost:
//! one block of ten rounds per four words; memory is the output.

use super::arg;
use crate::exec::error::KernelError;
use crate::exec::tensor::Tensor;
use crate::ir::{AttrMap, DType};

/// TensorFlow's id of the Philox algorithm.
pub const PHILOX: i32 = 1;

/// Philox-4x32-10: a key and a 128-bit counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Philox {
    key: [u32; 2],
    counter: u128,
}

const ROUND_KEY: [u32; 2] = [0x9E37_79B9, 0xBB67_AE85];
const MULTIPLIER: [u32; 2] = [0xD251_1F53, 0xCD9E_8D57];
/// The key under which a seed pair is scrambled into a key and counter.
const SEED_KEY: [u32; 2] = [0x3EC8_F720, 0x0246_1E29];

impl Philox {
    /// A generator at `counter` (two 64-bit halves, low first) under `key`.
    pub fn new(key: u64, counter: [u64; 2]) -> Philox {
        Philox { key: [key as u32, (key >> 32) as u32], counter: u128::from(counter[0]) | u128::from(counter[1]) << 64 }
    }

    /// The key and counter TensorFlow derives from a seed pair.
    pub fn from_seed(seed: [i64; 2]) -> Philox {
        let counter = u128::from(seed[0] as u64) | u128::from(seed[1] as u64) << 64;
        let mix = Philox { key: SEED_KEY, counter }.block();
        Philox { key: [mix[0], mix[1]], counter: u128::from(mix[2]) << 64 | u128::from(mix[3]) << 96 }
    }

    /// The key as one 64-bit word.
    pub fn key(&self) -> u64 {
        u64::from(self.key[0]) | u64::from(self.key[1]) << 32
    }

    /// The counter as two 64-bit words, low first.
    pub fn counter(&self) -> [u64; 2] {
        [self.counter as u64, (self.counter >> 64) as u64]
    }

    /// Moves the counter `blocks` blocks on.
    pub fn skip(&mut self, blocks: u64) {
        self.counter = self.counter.wrapping_add(u128::from(blocks));
    }

    /// The block at the current counter (the counter does not move).
    fn block(&self) -> [u32; 4] {
        let c = self.counter;
        let mut x = [c as u32, (c >> 32) as u32, (c >> 64) as u32, (c >> 96) as u32];
        let mut k = self.key;
        for round in 0..10 {
            let p0 = u64::from(MULTIPLIER[0]) * u64::from(x[0]);
            let p1 = u64::from(MULTIPLIER[1]) * u64::from(x[2]);
            x = [(p1 >> 32) as u32 ^ x[1] ^ k[0], p1 as u32, (p0 >> 32) as u32 ^ x[3] ^ k[1], p0 as u32];
            if round < 9 {
                k = [k[0].wrapping_add(ROUND_KEY[0]), k[1].wrapping_add(ROUND_KEY[1])];
            }
        }
        x
    }

    /// The next block; the counter advances by one.
    pub fn next_block(&mut self) -> [u32; 4] {
        let out = self.block();
        self.skip(1);
        out
    }
}

/// Words one at a time from whole blocks, as TensorFlow's single-sample adapter hands them out.
struct Words {
    gen: Philox,
    buf: [u32; 4],
    used: usize,
}

impl Words {
    fn new(gen: Philox) -> Words {
        Words { gen, buf: [0; 4], used: 4 }
    }

    fn next(&mut self) -> u32 {
        if self.used == 4 {
            self.buf = self.gen.next_block();
            self.used = 0;
        }
        self.used += 1;
        self.buf[self.used - 1]
    }
}

/// A float in `[0, 1)` from the low 23 bits of a word.
pub(super) fn unit_f32(x: u32) -> f32 {
    f32::from_bits((x & 0x7F_FFFF) | 0x3F80_0000) - 1.0
}

/// A double in `[0, 1)` from 52 bits: the low 20 of `hi` above all of `lo`.
pub(super) fn unit_f64(hi: u32, lo: u32) -> f64 {
    f64::from_bits(u64::from(hi & 0xF_FFFF) << 32 | u64::from(lo) | 0x3FF0_0000_0000_0000) - 1.0
}

/// A half in `[0, 1)` from the low 10 bits of a word.
pub(super) fn unit_f16(x: u32) -> half::f16 {
    half::f16::from_bits((x & 0x3FF) as u16 | 15 << 10) - half::f16::ONE
}

/// A bfloat16 in `[0, 1)` from the low 7 bits of a word.
pub(super) fn unit_bf16(x: u32) -> half::bf16 {
    half::bf16::from_bits((x & 0x7F) as u16 | 127 << 7) - half::bf16::ONE
}

/// Two normals from two words (sine first), in f32 as TensorFlow computes them.
pub(super) fn box_muller_f32(x0: u32, x1: u32) -> [f32; 2] {
    let u1 = unit_f32(x0).max(1.0e-7);
    // TensorFlow multiplies by 2π in double and rounds the angle to float.
    let v1 = (2.0 * std::f64::consts::PI * f64::from(unit_f32(x1))) as f32;
    let u2 = (-2.0f32 * u1.ln()).sqrt();
    [v1.sin() * u2, v1.cos() * u2]
}

/// Two normals from four words, in f64.
pub(super) fn box_muller_f64(x: [u32; 4]) -> [f64; 2] {
    let u1 = unit_f64(x[0], x[1]).max(1.0e-7);
    let v1 = 2.0 * std::f64::consts::PI * unit_f64(x[2], x[3]);
    let u2 = (-2.0 * u1.ln()).sqrt();
    [v1.sin() * u2, v1.cos() * u2]
}

/// `n` values made `per_block` at a time from consecutive blocks.
fn fill<T>(gen: Philox, n: usize, per_block: usize, make: impl Fn([u32; 4]) -> Vec<T>) -> Vec<T> {
    let mut gen = gen;
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let values = make(gen.next_block());
        debug_assert_eq!(values.len(), per_block);
        out.extend(values.into_iter().take(n - out.len()));
    }
    out
}

/// The distributions of the float ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dist {
    Uniform,
    Normal,
    Truncated,
}

/// A float tensor of `shape` and `dtype` drawn from `dist`.
fn float_tensor(op: &str, gen: Philox, dist: Dist, dtype: DType, shape: &[usize]) -> Result<Tensor, KernelError> {
    let n: usize = shape.iter().product();
    let f32s = |dist: Dist| -> Vec<f32> {
        match dist {
            Dist::Uniform => fill(gen, n, 4, |b| b.iter().map(|&x| unit_f32(x)).collect()),
            Dist::Normal => fill(gen, n, 4, |b| {
                let [a, c] = box_muller_f32(b[0], b[1]);
                let [d, e] = box_muller_f32(b[2], b[3]);
                vec![a, c, d, e]
            }),
            Dist::Truncated => truncated_f32(gen, n),
        }
    };
    match dtype {
        DType::F32 => Tensor::from_vec(shape, f32s(dist)),
        DType::F64 => {
            let values = match dist {
                Dist::Uniform => fill(gen, n, 2, |b| vec![unit_f64(b[0], b[1]), unit_f64(b[2], b[3])]),
                Dist::Normal => fill(gen, n, 2, |b| box_muller_f64(b).to_vec()),
                Dist::Truncated => truncated_kept(
                    gen,
                    n,
                    2,
                    |w| box_muller_f64([w.next(), w.next(), w.next(), w.next()]),
                    |v| v.abs() < 2.0,
                ),
            };
            Tensor::from_vec(shape, values)
        }
        DType::F16 => {
            let values = match dist {
                Dist::Uniform => fill(gen, n, 4, |b| b.iter().map(|&x| unit_f16(x)).collect()),
                Dist::Normal => f32s(dist).into_iter().map(half::f16::from_f32).collect(),
                Dist::Truncated => f32s(dist).into_iter().map(half::f16::from_f32).collect(),
            };
            Tensor::from_vec(shape, values)
        }
        DType::BF16 => {
            let values = match dist {
                Dist::Uniform => fill(gen, n, 4, |b| b.iter().map(|&x| unit_bf16(x)).collect()),
                Dist::Normal => f32s(dist).into_iter().map(half::bf16::from_f32).collect(),
                Dist::Truncated => f32s(dist).into_iter().map(half::bf16::from_f32).collect(),
            };
            Tensor::from_vec(shape, values)
        }
        other => Err(KernelError::dtype(op, other, "random floats are f32, f64, f16 or bf16")),
    }
}

/// f32 truncated normals.
fn truncated_f32(gen: Philox, n: usize) -> Vec<f32> {
    truncated_kept(gen, n, 4, |w| box_muller_f32(w.next(), w.next()), |v| v.abs() < 2.0)
}

/// Truncated normals: `draw` makes pairs, `keep` says which are inside the bounds.
fn truncated_kept<T: Copy>(
    gen: Philox,
    n: usize,
    group: usize,
    draw: impl Fn(&mut Words) -> [T; 2],
    keep: impl Fn(T) -> bool,
) -> Vec<T> {
    let skip = (group * 256 / 4) as u64;
    let mut out = Vec::with_capacity(n);
    let mut g = 0u64;
    while out.len() < n {
        let mut at = gen;
        at.skip(g * skip);
        let mut words = Words::new(at);
        let want = group.min(n - out.len());
        let mut got = 0;
        while got < want {
            for v in draw(&mut words) {
                if got < want && keep(v) {
                    out.push(v);
                    got += 1;
                }
            }
        }
        g += 1;
    }
    out
}

/// Integers of `dtype`: uniform in `[lo, hi)` when a range is given, else every bit pattern.
fn int_tensor(
    op: &str,
    gen: Philox,
    dtype: DType,
    shape: &[usize],
    range: Option<(i64, i64)>,
) -> Result<Tensor, KernelError> {
    let n: usize = shape.iter().product();
    if let Some((lo, hi)) = range {
        // Unsigned bounds are compared as the unsigned numbers their bits stand for.
        let empty = match dtype {
            DType::U64 => lo as u64 >= hi as u64,
            DType::U32 => lo as u32 >= hi as u32,
            _ => lo >= hi,
        };
        if empty {
            return Err(KernelError::invalid(op, format!("need minval < maxval, got {lo} >= {hi}")));
        }
    }
    match dtype {
        DType::I32 => {
            let values = fill(gen, n, 4, |b| {
                b.iter()
                    .map(|&x| match range {
                        // TensorFlow: lo + (word mod (hi - lo)), the range as an unsigned 32-bit count.
                        Some((lo, hi)) => {
                            (lo as i32).wrapping_add((x % (hi as i32).wrapping_sub(lo as i32) as u32) as i32)
                        }
                        None => x as i32,
                    })
                    .collect()
            });
            Tensor::from_vec(shape, values)
        }
        DType::I64 => {
            let values = fill(gen, n, 2, |b| {
                [(b[0], b[1]), (b[2], b[3])]
                    .into_iter()
                    .map(|(a, c)| {
                        let bits = u64::from(a) | u64::from(c) << 32;
                        match range {
                            Some((lo, hi)) => lo.wrapping_add((bits % hi.wrapping_sub(lo) as u64) as i64),
                            None => bits as i64,
                        }
                    })
                    .collect()
            });
            Tensor::from_vec(shape, values)
        }
        DType::U32 => {
            // TensorFlow: every word, or lo + (word mod (hi - lo)).
            let values = fill(gen, n, 4, |b| {
                b.iter()
                    .map(|&x| match range {
                        Some((lo, hi)) => (lo as u32).wrapping_add(x % (hi as u32).wrapping_sub(lo as u32)),
                        None => x,
                    })
                    .collect()
            });
            Tensor::from_vec(shape, values)
        }
        DType::U64 => {
            let values = fill(gen, n, 2, |b| {
                [u64::from(b[0]) | u64::from(b[1]) << 32, u64::from(b[2]) | u64::from(b[3]) << 32]
                    .into_iter()
                    .map(|bits| match range {
                        Some((lo, hi)) => (lo as u64).wrapping_add(bits % (hi as u64).wrapping_sub(lo as u64)),
                        None => bits,
                    })
                    .collect()
            });
            Tensor::from_vec(shape, values)
        }
        other => Err(KernelError::dtype(op, other, "random integers are i32, i64, u32 or u64")),
    }
}

/// The output shape operand, checked against the memory budget.
pub(super) fn shape_operand(op: &str, t: &Tensor, dtype: DType) -> Result<Vec<usize>, KernelError> {
    let dims = t.to_i64_vec(op, "shape")?;
    if t.shape().len() > 1 {
        return Err(KernelError::invalid(op, format!("shape must be a vector, got shape {:?}", t.shape())));
    }
    crate::exec::limits::checked_dims(op, dtype, &dims)
}

/// A seed pair operand (i32 or i64, two elements), widened as TensorFlow widens it.
pub(super) fn seed_operand(op: &str, t: &Tensor) -> Result<[i64; 2], KernelError> {
    match t.to_i64_vec(op, "seed")?.as_slice() {
        &[a, b] if t.shape() == [2] => Ok([a, b]),
        _ => Err(KernelError::invalid(op, format!("seed must have shape [2], got {:?}", t.shape()))),
    }
}

/// The generator of a V2 op's key, counter and algorithm operands.
fn key_counter_operands(op: &str, inputs: &[Tensor], first: usize) -> Result<Philox, KernelError> {
    let u64s = |i: usize, what: &str, len: usize| -> Result<Vec<u64>, KernelError> {
        let t = arg(op, inputs, i)?;
        let values =
            t.to_vec::<u64>().ok_or_else(|| KernelError::dtype(op, t.dtype(), format!("{what} must be u64")))?;
        if values.len() < len {
            return Err(KernelError::invalid(
                op,
                format!("{what} needs at least {len} elements, got {}", values.len()),
            ));
        }
        Ok(values)
    };
    let key = u64s(first, "key", 1)?;
    let counter = u64s(first + 1, "counter", 2)?;
    let alg = arg(op, inputs, first + 2)?.to_i64_vec(op, "alg")?;
    match alg.as_slice() {
        // 3 is auto-select, which TensorFlow's CPU resolves to Philox.
        [1] | [3] => Ok(Philox::new(key[0], [counter[0], counter[1]])),
        other => Err(KernelError::invalid(
            op,
            format!("unsupported algorithm {other:?}: TensorFlow's CPU kernels support Philox (1) only"),
        )),
    }
}

fn dtype_attr(attrs: &AttrMap, default: DType) -> DType {
    attrs.get("dtype").and_then(|v| v.as_type()).unwrap_or(default)
}

/// Runs `op` if it is a stateless random op; `None` otherwise.
pub(crate) fn dispatch(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Option<Result<Vec<Tensor>, KernelError>> {
    let x = |i: usize| arg(op, inputs, i);
    let key_counter = |gen: Philox| vec![Tensor::vector(vec![gen.key()]), Tensor::vector(gen.counter().to_vec())];
    let float_v2 = |dist: Dist| -> Result<Vec<Tensor>, KernelError> {
        let dtype = dtype_attr(attrs, DType::F32);
        let shape = shape_operand(op, x(0)?, dtype)?;
        Ok(vec![float_tensor(op, key_counter_operands(op, inputs, 1)?, dist, dtype, &shape)?])
    };
    let float_v1 = |dist: Dist| -> Result<Vec<Tensor>, KernelError> {
        let dtype = dtype_attr(attrs, DType::F32);
        let shape = shape_operand(op, x(0)?, dtype)?;
        Ok(vec![float_tensor(op, Philox::from_seed(seed_operand(op, x(1)?)?), dist, dtype, &shape)?])
    };
    let bound = |i: usize, what: &str| -> Result<i64, KernelError> {
        match x(i)?.to_i64_vec(op, what)?.as_slice() {
            [v] if x(i)?.shape().is_empty() => Ok(*v),
            _ => Err(KernelError::invalid(
                op,
                format!("{what} must be a scalar, got shape {:?}", x(i).map(|t| t.shape().to_vec())),
            )),
        }
    };
    let int_op = |gen: Philox, range: Option<(i64, i64)>| -> Result<Vec<Tensor>, KernelError> {
        let dtype = dtype_attr(attrs, if range.is_some() { DType::I32 } else { DType::U64 });
        let shape = shape_operand(op, x(0)?, dtype)?;
        Ok(vec![int_tensor(op, gen, dtype, &shape, range)?])
    };
    Some(match op {
        "StatelessRandomGetAlg" => Ok(vec![Tensor::scalar(PHILOX)]),
        "StatelessRandomGetKeyCounter" => x(0).and_then(|s| Ok(key_counter(Philox::from_seed(seed_operand(op, s)?)))),
        "StatelessRandomGetKeyCounterAlg" => x(0).and_then(|s| {
            let mut out = key_counter(Philox::from_seed(seed_operand(op, s)?));
            out.push(Tensor::scalar(PHILOX));
            Ok(out)
        }),
        "StatelessRandomUniformV2" => float_v2(Dist::Uniform),
        "StatelessRandomNormalV2" => float_v2(Dist::Normal),
        "StatelessTruncatedNormalV2" => float_v2(Dist::Truncated),
        "StatelessRandomUniform" => float_v1(Dist::Uniform),
        "StatelessRandomNormal" => float_v1(Dist::Normal),
        "StatelessTruncatedNormal" => float_v1(Dist::Truncated),
        "StatelessRandomUniformFullIntV2" => key_counter_operands(op, inputs, 1).and_then(|g| int_op(g, None)),
        "StatelessRandomUniformIntV2" => (|| {
            let gen = key_counter_operands(op, inputs, 1)?;
            int_op(gen, Some((bound(4, "minval")?, bound(5, "maxval")?)))
        })(),
        "StatelessRandomUniformFullInt" => {
            x(1).and_then(|s| seed_operand(op, s)).and_then(|s| int_op(Philox::from_seed(s), None))
        }
        "StatelessRandomUniformInt" => (|| {
            let gen = Philox::from_seed(seed_operand(op, x(1)?)?);
            int_op(gen, Some((bound(2, "minval")?, bound(3, "maxval")?)))
        })(),
        "StatelessMultinomial" => (|| {
            let gen = Philox::from_seed(seed_operand(op, x(2)?)?);
            Ok(vec![multinomial(op, gen, x(0)?, x(1)?, attrs)?.0])
        })(),
        "XlaRngBitGenerator" => super::stateful_random::rng_bit_generator(op, attrs, inputs),
        // Outside a mesh (which keeps each node's generator) a seeded op gives its first run.
        _ if SEEDED.contains(&op) => seeded_draw(op, "", attrs, inputs, 0).map(|(out, _)| out),
        _ => return None,
    })
}

/// The draw of a `tf.random.Generator` op (`StatefulUniform`, `StatefulStandardNormalV2`,
/// `StatefulTruncatedNormal`, `StatefulUniformInt`, `StatefulUniformFullInt`) from `gen`, the
/// generator of its state; `rest` are the operands after the algorithm (the shape, and the bounds
/// of `StatefulUniformInt`). TensorFlow's CPU kernels draw exactly as the stateless V2 ops do
/// from the state's key and counter.
pub(crate) fn stateful_draw(op: &str, attrs: &AttrMap, gen: Philox, rest: &[Tensor]) -> Result<Tensor, KernelError> {
    let x = |i: usize| arg(op, rest, i);
    let dist = match op {
        "StatefulUniform" => Some(Dist::Uniform),
        "StatefulStandardNormalV2" => Some(Dist::Normal),
        "StatefulTruncatedNormal" => Some(Dist::Truncated),
        "StatefulUniformInt" | "StatefulUniformFullInt" => None,
        other => return Err(KernelError::invalid(other, "is not a draw from a generator's state")),
    };
    let default = match op {
        "StatefulUniformInt" => DType::I64,
        "StatefulUniformFullInt" => DType::U64,
        _ => DType::F32,
    };
    let dtype = dtype_attr(attrs, default);
    let shape = shape_operand(op, x(0)?, dtype)?;
    if let Some(dist) = dist {
        return float_tensor(op, gen, dist, dtype, &shape);
    }
    if op == "StatefulUniformFullInt" {
        return int_tensor(op, gen, dtype, &shape, None);
    }
    let bound = |i: usize, what: &str| -> Result<i64, KernelError> {
        let t = x(i)?;
        if t.dtype() != dtype {
            return Err(KernelError::dtype(op, t.dtype(), format!("{what} must be {dtype}, the output's type")));
        }
        // The bound's bits (an unsigned bound is read back as unsigned by `int_tensor`).
        let bits = match t {
            Tensor::U64(a) => a.iter().map(|&v| v as i64).collect(),
            Tensor::U32(a) => a.iter().map(|&v| i64::from(v)).collect(),
            _ => t.to_i64_vec(op, what)?,
        };
        match bits.as_slice() {
            [v] if t.shape().is_empty() => Ok(*v),
            _ => Err(KernelError::invalid(op, format!("{what} must be a scalar, got shape {:?}", t.shape()))),
        }
    };
    int_tensor(op, gen, dtype, &shape, Some((bound(1, "minval")?, bound(2, "maxval")?)))
}

/// The seeded stateful ops (`seed` and `seed2` attributes), sorted: each node keeps a generator
/// from run to run, as TensorFlow's `GuardedPhiloxRandom` does.
pub const SEEDED: &[&str] = &[
    "Multinomial",
    "ParameterizedTruncatedNormal",
    "RandomShuffle",
    "RandomStandardNormal",
    "RandomUniform",
    "RandomUniformInt",
    "TruncatedNormal",
];

/// Blocks a seeded op reserves per output element on each run (TensorFlow's CPU kernels reserve
/// this many so that no run can reach the next run's blocks).
const RESERVED_BLOCKS_PER_OUTPUT: u64 = 256;

/// The generator of a seeded node before its first run: the key is `seed`, the counter's high
/// 64 bits are `seed2`. With `seed = seed2 = 0` TensorFlow draws a fresh key from the system's
/// entropy; the simulator stays reproducible instead and uses a hash of the node's name as `seed`.
pub fn seeded_generator(node: &str, attrs: &AttrMap) -> Philox {
    let (seed, seed2) = (attrs.get_int("seed").unwrap_or(0), attrs.get_int("seed2").unwrap_or(0));
    let seed = if seed == 0 && seed2 == 0 { u64::from(crc32c::crc32c(node.as_bytes())) | 1 << 32 } else { seed as u64 };
    Philox::new(seed, [0, seed2 as u64])
}

/// A seeded op's draw with its generator `skip` blocks past the first run's position; returns the
/// outputs and the blocks this run reserves (the next run starts that many blocks later).
pub fn seeded_draw(
    op: &str,
    node: &str,
    attrs: &AttrMap,
    inputs: &[Tensor],
    skip: u64,
) -> Result<(Vec<Tensor>, u64), KernelError> {
    let mut gen = seeded_generator(node, attrs);
    gen.skip(skip);
    let x = |i: usize| arg(op, inputs, i);
    match op {
        "RandomShuffle" => return shuffle(op, gen, x(0)?).map(|(t, reserved)| (vec![t], reserved)),
        "Multinomial" => {
            let (t, rows, samples) = multinomial(op, gen, x(0)?, x(1)?, attrs)?;
            // TensorFlow reserves 512 blocks (256 per word of a sample's f64) per sample, with each
            // row's sample count rounded up to four.
            let reserved = (rows as u64).saturating_mul(samples.div_ceil(4) as u64 * 4).saturating_mul(512);
            return Ok((vec![t], reserved));
        }
        "ParameterizedTruncatedNormal" => {
            return super::ptn::seeded(op, attrs, gen, inputs).map(|(t, reserved)| (vec![t], reserved));
        }
        _ => {}
    }
    let (dtype, dist) = match op {
        "RandomUniform" => (dtype_attr(attrs, DType::F32), Some(Dist::Uniform)),
        "RandomStandardNormal" => (dtype_attr(attrs, DType::F32), Some(Dist::Normal)),
        "TruncatedNormal" => (dtype_attr(attrs, DType::F32), Some(Dist::Truncated)),
        "RandomUniformInt" => (attrs.get("Tout").and_then(|v| v.as_type()).unwrap_or(DType::I32), None),
        other => return Err(KernelError::invalid(other, "is not a seeded random op")),
    };
    let shape = shape_operand(op, x(0)?, dtype)?;
    let out = match dist {
        Some(dist) => float_tensor(op, gen, dist, dtype, &shape)?,
        None => {
            let bound = |i: usize, what: &str| -> Result<i64, KernelError> {
                let t = x(i)?;
                match t.to_i64_vec(op, what)?.as_slice() {
                    [v] if t.shape().is_empty() => Ok(*v),
                    _ => Err(KernelError::invalid(op, format!("{what} must be a scalar, got shape {:?}", t.shape()))),
                }
            };
            int_tensor(op, gen, dtype, &shape, Some((bound(1, "minval")?, bound(2, "maxval")?)))?
        }
    };
    let reserved = (out.len() as u64).saturating_mul(RESERVED_BLOCKS_PER_OUTPUT);
    Ok((vec![out], reserved))
}

/// `RandomShuffle(value)`: the rows (first dimension) of `value` in a random order, by a forward
/// Fisher-Yates pass as TensorFlow's CPU kernel makes it: row `i` swaps with row
/// `i + word mod (n - i)`, one word each. Returns the blocks the run reserves.
fn shuffle(op: &str, gen: Philox, value: &Tensor) -> Result<(Tensor, u64), KernelError> {
    let n = value.shape().first().copied().unwrap_or(0);
    if value.len() <= 1 || n <= 1 {
        return Ok((value.clone(), 0));
    }
    let Ok(n32) = u32::try_from(n) else {
        return Err(KernelError::invalid(op, format!("{n} rows: at most 2^32 - 1 are shuffled")));
    };
    let mut words = Words::new(gen);
    let mut order: Vec<i64> = (0..i64::from(n32)).collect();
    for i in 0..n - 1 {
        let j = i + (words.next() % (n32 - i as u32)) as usize;
        order.swap(i, j);
    }
    let out = super::gather::gather(op, value, &Tensor::vector(order), &Tensor::scalar(0i64), 0)?;
    Ok((out, (n as u64 - 1).div_ceil(4)))
}

/// `Multinomial`/`StatelessMultinomial(logits [batch, classes], num_samples)`: per row, samples
/// of the classes with probabilities `softmax(logits)`, as TensorFlow's CPU kernel draws them:
/// a running sum of `exp(logit - max)` over the finite logits (in f64), and for each sample the
/// first class whose sum passes `u · total`, with `u` an f64 uniform of two words. Rows draw one
/// after another from one stream (TensorFlow's kernel does so when it runs in one shard, as for
/// every small batch). Returns the samples, the rows and the samples per row.
fn multinomial(
    op: &str,
    gen: Philox,
    logits: &Tensor,
    num_samples: &Tensor,
    attrs: &AttrMap,
) -> Result<(Tensor, usize, usize), KernelError> {
    let &[rows, classes] = logits.shape() else {
        return Err(KernelError::invalid(op, format!("logits must be a matrix, got shape {:?}", logits.shape())));
    };
    let samples = match num_samples.to_i64_vec(op, "num_samples")?.as_slice() {
        &[s] if num_samples.shape().is_empty() && s >= 0 => s,
        other => return Err(KernelError::invalid(op, format!("num_samples must be a scalar >= 0, got {other:?}"))),
    };
    if classes == 0 && rows > 0 {
        return Err(KernelError::invalid(op, "logits need at least one class"));
    }
    let out_dtype = attrs.get("output_dtype").and_then(|v| v.as_type()).unwrap_or(DType::I64);
    let dims = crate::exec::limits::checked_dims(op, out_dtype, &[rows as i64, samples])?;
    let samples = dims[1];
    let wide = super::dtypes::cast(op, logits, DType::F64)?;
    let values =
        wide.to_vec::<f64>().ok_or_else(|| KernelError::dtype(op, logits.dtype(), "logits must be numbers"))?;
    let mut words = Words::new(gen);
    let mut out = Vec::with_capacity(rows * samples);
    let mut cdf = vec![0.0f64; classes];
    for row in values.chunks(classes.max(1)).take(rows) {
        let max = row.iter().copied().filter(|v| v.is_finite()).fold(f64::MIN, f64::max);
        let mut total = 0.0;
        for (c, &v) in cdf.iter_mut().zip(row) {
            if v.is_finite() {
                total += (v - max).exp();
            }
            *c = total;
        }
        for _ in 0..samples {
            let (hi, lo) = (words.next(), words.next());
            let target = unit_f64(hi, lo) * total;
            out.push(cdf.partition_point(|&c| c <= target) as i64);
        }
    }
    let t = match out_dtype {
        DType::I64 => Tensor::from_vec(&dims, out)?,
        DType::I32 => Tensor::from_vec(&dims, out.into_iter().map(|v| v as i32).collect())?,
        other => return Err(KernelError::dtype(op, other, "samples are i32 or i64")),
    };
    Ok((t, rows, samples))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn philox_matches_the_published_known_answer() {
        // Random123's known-answer vectors for Philox-4x32-10.
        let zero = Philox { key: [0, 0], counter: 0 };
        assert_eq!(zero.block(), [0x6627_E8D5, 0xE169_C58D, 0xBC57_AC4C, 0x9B00_DBD8]);
        let ones = Philox { key: [u32::MAX, u32::MAX], counter: u128::MAX };
        assert_eq!(ones.block(), [0x408F_276D, 0x41C8_3B0E, 0xA20B_C7C6, 0x6D54_51FD]);
        let pi = Philox {
            key: [0xA409_3822, 0x299F_31D0],
            counter: 0x243F_6A88 | 0x85A3_08D3 << 32 | 0x1319_8A2E << 64 | 0x0370_7344 << 96,
        };
        assert_eq!(pi.block(), [0xD16C_FE09, 0x94FD_CCEB, 0x5001_E420, 0x2412_6EA1]);
    }

    #[test]
    fn counters_carry_across_words() {
        let mut g = Philox::new(7, [u64::MAX, 0]);
        g.skip(1);
        assert_eq!(g.counter(), [0, 1]);
        assert_eq!(g.key(), 7);
    }
}
