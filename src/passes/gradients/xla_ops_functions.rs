//! Gradient functions of the XLA-only ops, as TensorFlow registers them:
//! of those ops only `XlaEinsum` has one, two more `XlaEinsum`s of the
//! output gradient with the other operand (`out,right->left` and
//! `out,left->right`), so like TensorFlow's it needs every label of an
//! operand in the output or in the other operand. Cost: two ops.

use super::emitter::{Emitter, Tensor};
use super::functions::Unsupported;
use crate::ir::{AttrValue, NodeId};

/// The gradients of `op`'s data inputs given `g`; `Err(None)` for other op types.
pub fn gradient(
    e: &mut Emitter<'_>,
    op: NodeId,
    op_type: &str,
    inputs: &[Tensor],
    g: Tensor,
) -> Result<Vec<Option<Tensor>>, Unsupported> {
    match op_type {
        "XlaEinsum" => {
            let attrs = &e.graph.node(op).attrs;
            let equation: String = attrs
                .get_str("equation")
                .ok_or_else(|| Some("the `equation` attribute is missing".to_string()))?
                .chars()
                .filter(|c| !c.is_whitespace())
                .collect();
            let t = attrs.get("T").cloned();
            let (lhs, out) = equation.split_once("->").ok_or_else(|| Some(format!("`{equation}` has no `->`")))?;
            let (left, right) =
                lhs.split_once(',').ok_or_else(|| Some(format!("`{equation}` does not name two operands")))?;
            let (a, b) = match inputs {
                [a, b] => (*a, *b),
                _ => return Err(Some(format!("XlaEinsum takes two operands, got {}", inputs.len()))),
            };
            let einsum = |e: &mut Emitter<'_>, other: Tensor, eq: String| {
                let attrs = [("equation", AttrValue::str(eq.as_str()))].into_iter().chain(t.clone().map(|t| ("T", t)));
                e.emit("XlaEinsum", "XlaEinsum", &[g, other], attrs)
            };
            let da = einsum(e, b, format!("{out},{right}->{left}"));
            let db = einsum(e, a, format!("{out},{left}->{right}"));
            Ok(vec![Some(da), Some(db)])
        }
        _ => Err(None),
    }
}
