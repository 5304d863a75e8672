//! Rules of the ops on `tf.random.Generator`'s state: `RngReadAndSkip` returns the state it
//! read, three int64 words (Philox's counter and key; TensorFlow pads other algorithms' states
//! to that size).

use super::{Args, OutType};
use crate::ir::DType;

/// `RngReadAndSkip(resource, alg, delta)`: int64 `[3]`.
pub(super) fn read_and_skip(_: &Args) -> Result<Vec<OutType>, String> {
    Ok(vec![OutType::new(DType::I64, vec![3])])
}
