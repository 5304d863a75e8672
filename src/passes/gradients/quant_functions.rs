//! Gradient functions of the simulated-quantization ops, as TensorFlow
//! registers them: the fake-quant ops call their own gradient ops (with
//! the forward op's range and bit attributes); `QuantizeAndDequantizeV2`
//! and `V3` pass the gradient straight through; `V4` passes it where the
//! input lies within `[input_min, input_max]`. Cost: one to five ops.

use super::emitter::{Attr, Emitter, Tensor};
use super::functions::Unsupported;
use crate::ir::NodeId;

/// The gradients of `op`'s data inputs given `g`; `Err(None)` for other op types.
pub fn gradient(
    e: &mut Emitter<'_>,
    op: NodeId,
    op_type: &str,
    inputs: &[Tensor],
    g: Tensor,
) -> Result<Vec<Option<Tensor>>, Unsupported> {
    let x = |i: usize| inputs.get(i).copied().ok_or_else(|| Some(format!("expected at least {} inputs", i + 1)));
    let copied = |e: &Emitter<'_>, keys: &[&'static str]| -> Vec<Attr> {
        let attrs = &e.graph.node(op).attrs;
        keys.iter().filter_map(|&k| attrs.get(k).cloned().map(|v| (k, v))).collect()
    };
    match op_type {
        "FakeQuantWithMinMaxArgs" => {
            let attrs = copied(e, &["min", "max", "num_bits", "narrow_range"]);
            Ok(vec![Some(e.emit(
                "FakeQuantWithMinMaxArgsGradient",
                "FakeQuantWithMinMaxArgsGradient",
                &[g, x(0)?],
                attrs,
            ))])
        }
        "FakeQuantWithMinMaxVars" | "FakeQuantWithMinMaxVarsPerChannel" => {
            let grad_op = if op_type == "FakeQuantWithMinMaxVars" {
                "FakeQuantWithMinMaxVarsGradient"
            } else {
                "FakeQuantWithMinMaxVarsPerChannelGradient"
            };
            let attrs = copied(e, &["num_bits", "narrow_range"]);
            let d = e.emit(grad_op, grad_op, &[g, x(0)?, x(1)?, x(2)?], attrs);
            let out = |k: u32| Some(Tensor { node: d.node, output: k });
            Ok(vec![out(0), out(1), out(2)])
        }
        "QuantizeAndDequantizeV2" => Ok(vec![Some(g), None, None]),
        "QuantizeAndDequantizeV3" => Ok(vec![Some(g), None, None, None]),
        "QuantizeAndDequantizeV4" => {
            let axis = e.graph.node(op).attrs.get_int("axis").unwrap_or(-1);
            if axis != -1 {
                return Err(Some(format!(
                    "the gradient of a per-axis QuantizeAndDequantizeV4 (axis {axis}) is not written yet"
                )));
            }
            let (input, low, high) = (x(0)?, x(1)?, x(2)?);
            let t = e.dtype_of(g);
            let ta = e.t_attr(t);
            let above = e.emit("GreaterEqual", "GreaterEqual", &[input, low], ta.clone());
            let below = e.emit("LessEqual", "LessEqual", &[input, high], ta.clone());
            let inside = e.emit("LogicalAnd", "LogicalAnd", &[above, below], []);
            let zeros = e.emit("ZerosLike", "zeros_like", &[g], ta.clone());
            let dx = e.emit("SelectV2", "SelectV2", &[inside, g, zeros], ta);
            Ok(vec![Some(dx), None, None])
        }
        _ => Err(None),
    }
}
