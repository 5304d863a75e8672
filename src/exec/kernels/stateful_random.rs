//! The draws of `tf.random.Generator` from its state variable, as
//! TensorFlow's CPU kernels make them: `StatefulUniform`,
//! `StatefulStandardNormalV2`, `StatefulTruncatedNormal`,
//! `StatefulUniformInt` and `StatefulUniformFullInt`.
//!
//! The state is the int64 variable `[counter_lo, counter_hi, key]` of a
//! Philox generator (algorithm 1, or 3, auto-select, which is Philox on
//! CPU). A draw takes its numbers exactly as the stateless V2 op of the same
//! distribution does from that key and counter
//! ([`super::random::stateful_draw`]), and the counter then moves on by 256
//! blocks per output element, TensorFlow's reservation (the same move as
//! `RngSkip` with a delta of the output's size), so the next draw gives
//! TensorFlow's next numbers. ThreeFry (2) is refused, as TensorFlow's CPU
//! kernels refuse it. The mesh runs these ops on the variable ([`draw`] is
//! the arithmetic). Cost: that of the stateless draw.

use super::random::stateful_draw;
use super::random_state::{check_philox, philox_of_state, state_of_philox, BLOCKS_PER_ELEMENT};
use crate::exec::error::KernelError;
use crate::exec::tensor::Tensor;
use crate::ir::{AttrMap, DType};

/// The ops that draw from a generator's state, sorted.
pub const DRAW_OPS: &[&str] = &[
    "StatefulStandardNormalV2",
    "StatefulTruncatedNormal",
    "StatefulUniform",
    "StatefulUniformFullInt",
    "StatefulUniformInt",
];

/// `(new state, [draw])` of `op` on the state variable's value `state`; `rest` are the operands
/// after the handle (the algorithm, the shape and, for `StatefulUniformInt`, the bounds).
pub(crate) fn draw(
    op: &str,
    attrs: &AttrMap,
    state: &Tensor,
    rest: &[Tensor],
) -> Result<(Tensor, Vec<Tensor>), KernelError> {
    let alg = rest.first().ok_or_else(|| KernelError::invalid(op, "has no algorithm operand"))?;
    check_philox(op, alg)?;
    let gen = philox_of_state(op, state)?;
    let out = stateful_draw(op, attrs, gen, &rest[1..])?;
    let mut next = gen;
    next.skip((out.len() as u64).wrapping_mul(BLOCKS_PER_ELEMENT));
    Ok((state_of_philox(&next), vec![out]))
}

/// ThreeFry-2x32 with 20 rounds (Random123's), under the key `k` on the counter pair `x`.
fn threefry2x32(k: [u32; 2], x: [u32; 2]) -> [u32; 2] {
    const ROTATIONS: [u32; 8] = [13, 15, 26, 6, 17, 29, 16, 24];
    let ks = [k[0], k[1], 0x1BD1_1BDA ^ k[0] ^ k[1]];
    let (mut x0, mut x1) = (x[0].wrapping_add(ks[0]), x[1].wrapping_add(ks[1]));
    for group in 0..5usize {
        for &r in &ROTATIONS[(group % 2) * 4..(group % 2) * 4 + 4] {
            x0 = x0.wrapping_add(x1);
            x1 = x1.rotate_left(r) ^ x0;
        }
        x0 = x0.wrapping_add(ks[(group + 1) % 3]);
        x1 = x1.wrapping_add(ks[(group + 2) % 3]).wrapping_add(group as u32 + 1);
    }
    [x0, x1]
}

/// The words of a u64 split as XLA splits them: low half first.
fn halves(v: u64) -> [u32; 2] {
    [v as u32, (v >> 32) as u32]
}

/// `n` values of `bits` bits (8, 32 or 64) from XLA's `RngBitGenerator` with `algorithm` (1 Philox,
/// 2 ThreeFry, 3 XLA's default, Philox on CPU) on `state` (Philox `[key, counter_lo,
/// counter_hi]`, ThreeFry `[key, counter]`): the new state and the values (narrower ones are the
/// low bits of 32-bit words).
///
/// Philox: 32-bit values are the words of consecutive blocks (four per block), 64-bit ones pair
/// a block's words (two per block); the counter moves on by the blocks used. ThreeFry: for
/// 32-bit values the counters `counter + i`, `i < ceil(n/2)`, give a pair of words each, in
/// order; for 64-bit ones `n` counters give one value each (first word low); the counter moves
/// on by the counters used. These are XLA's values for a vector of bits; for ThreeFry's 32-bit
/// and narrower bits of higher rank XLA orders the words otherwise, and the caller refuses them.
fn xla_bits(op: &str, algorithm: i64, state: &[u64], n: usize, bits: u32) -> Result<(Vec<u64>, Vec<u64>), KernelError> {
    match (algorithm, state) {
        (1 | 3, &[key, lo, hi]) => {
            let mut gen = super::random::Philox::new(key, [lo, hi]);
            let per_block = if bits == 64 { 2 } else { 4 };
            let blocks = n.div_ceil(per_block);
            let mut out = Vec::with_capacity(blocks * per_block);
            for _ in 0..blocks {
                let b = gen.next_block();
                if bits == 64 {
                    out.extend([u64::from(b[0]) | u64::from(b[1]) << 32, u64::from(b[2]) | u64::from(b[3]) << 32]);
                } else {
                    out.extend(b.iter().map(|&w| u64::from(w)));
                }
            }
            out.truncate(n);
            let [lo, hi] = gen.counter();
            Ok((vec![key, lo, hi], out))
        }
        (2, &[key, counter]) => {
            let k = halves(key);
            let word = |i: usize| threefry2x32(k, halves(counter.wrapping_add(i as u64)));
            if bits == 64 {
                let out = (0..n).map(&word).map(|[a, b]| u64::from(a) | u64::from(b) << 32).collect();
                return Ok((vec![key, counter.wrapping_add(n as u64)], out));
            }
            let half = n.div_ceil(2);
            let mut out: Vec<u64> = (0..half).flat_map(word).map(u64::from).collect();
            out.truncate(n);
            Ok((vec![key, counter.wrapping_add(half as u64)], out))
        }
        (1..=3, _) => Err(KernelError::invalid(
            op,
            format!(
                "the state must be u64 [3] for Philox (key, counter low, counter high) and [2] for ThreeFry \
                 (key, counter), got {} elements for algorithm {algorithm}",
                state.len()
            ),
        )),
        _ => Err(KernelError::invalid(
            op,
            format!("unsupported algorithm {algorithm} (Philox 1, ThreeFry 2, default 3)"),
        )),
    }
}

/// `XlaRngBitGenerator(algorithm, initial_state, shape)`: `(new state, bits)` as XLA's
/// `RngBitGenerator` makes them ([`xla_bits`]); `dtype` is u64 (default), u32 (32-bit words) or
/// u8 (the low byte of each 32-bit word).
pub(crate) fn rng_bit_generator(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Result<Vec<Tensor>, KernelError> {
    let x = |i: usize| super::arg(op, inputs, i);
    let algorithm = match x(0)?.to_i64_vec(op, "algorithm")?.as_slice() {
        [a] => *a,
        other => return Err(KernelError::invalid(op, format!("algorithm must be one integer, got {other:?}"))),
    };
    let state = x(1)?;
    let words = state
        .to_vec::<u64>()
        .filter(|_| state.shape().len() == 1)
        .ok_or_else(|| KernelError::dtype(op, state.dtype(), "the initial state must be a u64 vector"))?;
    let dtype = attrs.get("dtype").and_then(|v| v.as_type()).unwrap_or(DType::U64);
    let dims = x(2)?.to_i64_vec(op, "shape")?;
    let shape = crate::exec::limits::checked_dims(op, dtype, &dims)?;
    let n: usize = shape.iter().product();
    let bits = match dtype {
        DType::U64 => 64,
        DType::U32 => 32,
        DType::U8 => 8,
        other => return Err(KernelError::dtype(op, other, "bits are u64, u32 or u8")),
    };
    if algorithm == 2 && bits < 64 && shape.len() > 1 {
        return Err(KernelError::invalid(
            op,
            format!(
                "ThreeFry bits of {dtype} are made as a vector only (XLA orders a shape of rank {} otherwise)",
                shape.len()
            ),
        ));
    }
    let (next, values) = xla_bits(op, algorithm, &words, n, bits)?;
    let out = match bits {
        64 => Tensor::from_vec(&shape, values)?,
        32 => Tensor::from_vec(&shape, values.into_iter().map(|v| v as u32).collect())?,
        _ => Tensor::from_vec(&shape, values.into_iter().map(|v| v as u8).collect())?,
    };
    Ok(vec![Tensor::from_vec(state.shape(), next)?, out])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::AttrValue;

    fn shape(dims: &[i64]) -> Tensor {
        Tensor::vector(dims.to_vec())
    }

    #[test]
    fn a_draw_moves_the_counter_by_256_blocks_per_element() {
        let state = Tensor::from_vec(&[3], vec![1234i64, 0, 7]).unwrap();
        let rest = [Tensor::scalar(1i64), shape(&[2, 3])];
        let (new, out) = draw("StatefulUniform", &AttrMap::new(), &state, &rest).unwrap();
        assert_eq!(new, Tensor::from_vec(&[3], vec![1234 + 6 * 256i64, 0, 7]).unwrap());
        assert_eq!(out[0].shape(), [2, 3]);
        // The next draw starts where the last one's reservation ends: other numbers.
        let (_, again) = draw("StatefulUniform", &AttrMap::new(), &new, &rest).unwrap();
        assert_ne!(out, again);
    }

    #[test]
    fn bad_algorithms_bounds_and_states_are_refused() {
        let state = Tensor::from_vec(&[3], vec![0i64, 0, 1]).unwrap();
        let attrs = AttrMap::new();
        let threefry = [Tensor::scalar(2i64), shape(&[2])];
        assert!(draw("StatefulUniform", &attrs, &state, &threefry).is_err());
        let mut i32s = AttrMap::new();
        i32s.insert("dtype", AttrValue::Type(DType::I32));
        let empty = [Tensor::scalar(1i64), shape(&[2]), Tensor::scalar(5i32), Tensor::scalar(5i32)];
        assert!(draw("StatefulUniformInt", &i32s, &state, &empty).is_err());
        let mixed = [Tensor::scalar(1i64), shape(&[2]), Tensor::scalar(1i64), Tensor::scalar(5i64)];
        assert!(draw("StatefulUniformInt", &i32s, &state, &mixed).is_err());
        let short = Tensor::from_vec(&[2], vec![0i64, 0]).unwrap();
        assert!(draw("StatefulUniform", &attrs, &short, &[Tensor::scalar(1i64), shape(&[2])]).is_err());
    }

    #[test]
    fn threefry_matches_random123s_known_answer() {
        // Random123's known answer for threefry2x32_20 on pi's digits.
        assert_eq!(threefry2x32([0x1319_8A2E, 0x0370_7344], [0x243F_6A88, 0x85A3_08D3]), [0xC492_3A9C, 0x483D_F7A0]);
    }

    #[test]
    fn counters_move_by_the_blocks_and_pairs_used() {
        let (next, out) = xla_bits("XlaRngBitGenerator", 1, &[5, u64::MAX, 0], 5, 64).unwrap();
        assert_eq!((next, out.len()), (vec![5, 2, 1], 5));
        let (next, out) = xla_bits("XlaRngBitGenerator", 2, &[5, 7], 5, 32).unwrap();
        assert_eq!((next, out.len()), (vec![5, 10], 5));
        assert!(xla_bits("XlaRngBitGenerator", 2, &[5, 7, 0], 5, 32).is_err());
        assert!(xla_bits("XlaRngBitGenerator", 4, &[5, 7, 0], 5, 32).is_err());
    }
}
