//! The counter moves of `tf.random.Generator`'s state, as TensorFlow's CPU
//! kernels make them: `RngSkip(state, algorithm, delta)` and
//! `RngReadAndSkip(state, alg, delta)` (which also returns the state it
//! found).
//!
//! The state is an int64 resource variable `[counter_lo, counter_hi, key]`
//! for Philox (algorithm 1, and 3, auto-select, which is Philox on CPU);
//! the 128-bit counter moves on by `delta · 256` blocks (the product wraps
//! at 64 bits, the sum at 128), TensorFlow's reservation of 256 blocks per
//! output element. The key stays. ThreeFry (2) is refused, as TensorFlow's
//! CPU kernels refuse it; so is a state of another size than 3, whose
//! padding TensorFlow's CPU kernels and its XLA bridge read differently.
//! The mesh runs these ops on the variable ([`skip`] is the arithmetic).

use super::random::Philox;
use crate::exec::error::KernelError;
use crate::exec::tensor::Tensor;

/// The ops that move a generator's counter.
pub const SKIP_OPS: &[&str] = &["RngReadAndSkip", "RngSkip"];

/// Blocks TensorFlow reserves per requested output element.
pub const BLOCKS_PER_ELEMENT: u64 = 256;

/// A scalar integer operand as its 64 bits.
fn scalar_bits(op: &str, what: &str, t: &Tensor) -> Result<u64, KernelError> {
    let bits = match t {
        Tensor::I32(a) if a.len() == 1 => a.iter().next().map(|&v| i64::from(v) as u64),
        Tensor::I64(a) if a.len() == 1 => a.iter().next().map(|&v| v as u64),
        Tensor::U64(a) if a.len() == 1 => a.iter().next().copied(),
        _ => None,
    };
    bits.ok_or_else(|| {
        KernelError::invalid(op, format!("{what} must be one integer, got {} of shape {:?}", t.dtype(), t.shape()))
    })
}

/// The Philox generator of a state variable's value `[counter_lo, counter_hi, key]`.
pub(crate) fn philox_of_state(op: &str, state: &Tensor) -> Result<Philox, KernelError> {
    match state {
        Tensor::I64(a) if a.shape() == [3] => {
            let v: Vec<u64> = a.iter().map(|&w| w as u64).collect();
            Ok(Philox::new(v[2], [v[0], v[1]]))
        }
        other => Err(KernelError::invalid(
            op,
            format!(
                "the generator state must be int64 of shape [3] (Philox: counter low, counter high, key), got {} of shape {:?}",
                other.dtype(),
                other.shape()
            ),
        )),
    }
}

/// The state variable's value for `gen`.
pub(crate) fn state_of_philox(gen: &Philox) -> Tensor {
    let [lo, hi] = gen.counter();
    Tensor::from_vec(&[3], vec![lo as i64, hi as i64, gen.key() as i64]).unwrap_or_else(|_| Tensor::scalar(0i64))
}

/// Checks that `alg` names Philox (1, or 3: auto-select).
pub(crate) fn check_philox(op: &str, alg: &Tensor) -> Result<(), KernelError> {
    match scalar_bits(op, "the algorithm", alg)? as i64 {
        1 | 3 => Ok(()),
        2 => Err(KernelError::invalid(op, "the ThreeFry algorithm (2) is not supported on CPU, as in TensorFlow")),
        other => Err(KernelError::invalid(op, format!("unsupported algorithm id {other}"))),
    }
}

/// `(new state, outputs)` of `op` on the state variable's value `state` and operands `alg`, `delta`.
pub(crate) fn skip(
    op: &str,
    state: &Tensor,
    alg: &Tensor,
    delta: &Tensor,
) -> Result<(Tensor, Vec<Tensor>), KernelError> {
    check_philox(op, alg)?;
    let mut gen = philox_of_state(op, state)?;
    let delta = scalar_bits(op, "delta", delta)?;
    gen.skip(delta.wrapping_mul(BLOCKS_PER_ELEMENT));
    let out = if op == "RngReadAndSkip" { vec![state.clone()] } else { Vec::new() };
    Ok((state_of_philox(&gen), out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counter_carries_into_its_high_word() {
        let state = Tensor::from_vec(&[3], vec![-1i64, 4, 99]).unwrap();
        let alg = Tensor::scalar(1i32);
        let (new, out) = skip("RngReadAndSkip", &state, &alg, &Tensor::from_vec(&[], vec![2u64]).unwrap()).unwrap();
        assert_eq!(new, Tensor::from_vec(&[3], vec![511i64, 5, 99]).unwrap());
        assert_eq!(out, vec![state]);
    }

    #[test]
    fn threefry_and_odd_states_are_refused() {
        let state = Tensor::from_vec(&[3], vec![0i64, 0, 1]).unwrap();
        let one = Tensor::scalar(1i64);
        assert!(skip("RngSkip", &state, &Tensor::scalar(2i64), &one).is_err());
        let short = Tensor::from_vec(&[2], vec![0i64, 0]).unwrap();
        assert!(skip("RngSkip", &short, &one, &one).is_err());
    }
}
