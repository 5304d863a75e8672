//! Type rules of the simulated-quantization ops whose outputs are not all
//! shaped like their input.

use super::{Args, OutType};

/// `FakeQuantWithMinMaxVars(PerChannel)Gradient(gradients, inputs, min, max)`:
/// the input's gradient is shaped like `gradients`; those of `min` and
/// `max` like `min` and `max`.
pub(super) fn fake_quant_grad(a: &Args) -> Result<Vec<OutType>, String> {
    Ok(vec![a.same(0)?, a.same(2)?, a.same(3)?])
}
