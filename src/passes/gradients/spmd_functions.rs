//! Gradient functions of the sharding ops, as TensorFlow registers them
//! (`tf2xla/python/xla.py`): `XlaSharding`'s gradient is the incoming
//! gradient under the same sharding; `XlaSpmdFullToShardShape` and
//! `XlaSpmdShardToFullShape` are each other's gradients, with the same
//! `manual_sharding`, `dim` and `unspecified_dims`, the full shape being
//! the forward op's operand's static shape. Cost: one op, and for the full
//! shape one walk over the operand's ancestors.

use super::emitter::{Attr, Emitter, Tensor};
use super::functions::Unsupported;
use crate::ir::{AttrValue, NodeId, Shape};

/// The gradients of `op`'s data inputs given `g`; `Err(None)` for other op types.
pub fn gradient(
    e: &mut Emitter<'_>,
    op: NodeId,
    op_type: &str,
    _inputs: &[Tensor],
    g: Tensor,
) -> Result<Vec<Option<Tensor>>, Unsupported> {
    let copied = |e: &Emitter<'_>, keys: &[&'static str]| -> Vec<Attr> {
        let attrs = &e.graph.node(op).attrs;
        keys.iter().filter_map(|&k| attrs.get(k).cloned().map(|v| (k, v))).collect()
    };
    let t = e.dtype_of(g);
    let ta = e.t_attr(t);
    match op_type {
        "XlaSharding" => {
            let mut attrs = copied(e, &["sharding", "unspecified_dims"]);
            // TensorFlow marks the gradient's op with the sharding as well.
            if let Some((_, s)) = attrs.iter().find(|(k, _)| *k == "sharding").cloned() {
                attrs.push(("_XlaSharding", s));
            }
            attrs.extend(ta);
            Ok(vec![Some(e.emit("XlaSharding", "XlaSharding", &[g], attrs))])
        }
        "XlaSpmdFullToShardShape" => {
            let input = e.graph.data_inputs(op).first().copied().ok_or_else(|| Some("expected an operand".into()))?;
            let order = crate::ir::walk::post_order(e.graph, [input.src], |_, _| true);
            let full = crate::ir::shapes::static_shapes(e.graph, &order).of(input).map(<[i64]>::to_vec);
            let full = full.ok_or_else(|| {
                Some("the gradient needs the static shape of the operand (its `full_shape`), which is unknown".into())
            })?;
            let mut attrs = copied(e, &["manual_sharding", "dim", "unspecified_dims"]);
            attrs.push(("full_shape", AttrValue::Shape(Shape::known(full))));
            attrs.extend(ta);
            Ok(vec![Some(e.emit("XlaSpmdShardToFullShape", "XlaSpmdShardToFullShape", &[g], attrs))])
        }
        "XlaSpmdShardToFullShape" => {
            let mut attrs = copied(e, &["manual_sharding", "dim", "unspecified_dims"]);
            attrs.extend(ta);
            Ok(vec![Some(e.emit("XlaSpmdFullToShardShape", "XlaSpmdFullToShardShape", &[g], attrs))])
        }
        _ => Err(None),
    }
}
