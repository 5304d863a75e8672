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
use crate::ir::AttrMap;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{AttrValue, DType};

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
        i32s.insert("dtype".into(), AttrValue::Type(DType::I32));
        let empty = [Tensor::scalar(1i64), shape(&[2]), Tensor::scalar(5i32), Tensor::scalar(5i32)];
        assert!(draw("StatefulUniformInt", &i32s, &state, &empty).is_err());
        let mixed = [Tensor::scalar(1i64), shape(&[2]), Tensor::scalar(1i64), Tensor::scalar(5i64)];
        assert!(draw("StatefulUniformInt", &i32s, &state, &mixed).is_err());
        let short = Tensor::from_vec(&[2], vec![0i64, 0]).unwrap();
        assert!(draw("StatefulUniform", &attrs, &short, &[Tensor::scalar(1i64), shape(&[2])]).is_err());
    }
}
