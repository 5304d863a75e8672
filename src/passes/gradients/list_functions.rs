//! Gradient functions of the TensorList ops, as TensorFlow's `list_ops.py`
//! registers them. The gradient of a list is itself a list (a variant), and
//! each function emits the list ops that carry element gradients back:
//!
//! - `TensorListPushBack`: a `TensorListPopBack` of the list's gradient;
//! - `TensorListPopBack`: a `TensorListPushBack` of the element's gradient
//!   onto the list's (an empty list, or zeros, where one received none);
//! - `TensorListStack` / `TensorListFromTensor`: each other;
//! - `TensorListConcatV2` / `TensorListSplit`: each other, with the
//!   forward op's element lengths;
//! - `TensorListGetItem` / `TensorListGather`: the gradient set or scattered
//!   into a reserved list as long as the input;
//! - `TensorListSetItem`: the list's gradient with the item's slot zeroed,
//!   and the item's gradient read from it.
//!
//! Shapes are dynamic (`Shape`, `TensorListElementShape`,
//! `TensorListLength`), as TensorFlow's. Index, shape and length operands
//! get no gradient. Cost: one to four ops per differentiated op.

use super::emitter::{Emitter, Tensor};
use super::functions::Unsupported;
use crate::ir::{AttrValue, DType, NodeId};

/// The list ops with a gradient here.
const LIST_GRADIENTS: &[&str] = &[
    "TensorListConcatV2",
    "TensorListFromTensor",
    "TensorListGather",
    "TensorListGetItem",
    "TensorListPopBack",
    "TensorListPushBack",
    "TensorListSetItem",
    "TensorListSplit",
    "TensorListStack",
];

/// The gradients of `op`'s inputs when its type is a list op handled here;
/// `None` otherwise. `out_grads` holds every output's gradient (`None`
/// where one received none; not all are `None`).
pub fn gradient(
    e: &mut Emitter<'_>,
    op: NodeId,
    op_type: &str,
    inputs: &[Tensor],
    out_grads: &[Option<Tensor>],
) -> Option<Result<Vec<Option<Tensor>>, Unsupported>> {
    LIST_GRADIENTS.contains(&op_type).then(|| list_gradient(e, op, op_type, inputs, out_grads))
}

fn list_gradient(
    e: &mut Emitter<'_>,
    op: NodeId,
    op_type: &str,
    inputs: &[Tensor],
    out_grads: &[Option<Tensor>],
) -> Result<Vec<Option<Tensor>>, Unsupported> {
    let x = |i: usize| inputs.get(i).copied().ok_or_else(|| Some(format!("expected at least {} inputs", i + 1)));
    let attrs = e.graph.node(op).attrs.clone();
    let first =
        out_grads.iter().flatten().next().copied().ok_or_else(|| Some("no output has a gradient".to_string()))?;
    // The element dtype: the op's attribute, else that of the element gradient or operand.
    let dtype = match attrs.get("element_dtype").and_then(AttrValue::as_type) {
        Some(d) => d,
        None => match op_type {
            "TensorListFromTensor" | "TensorListSplit" => e.dtype_of(x(0)?),
            _ => e.dtype_of(first),
        }
        .unwrap_or(DType::F32),
    };
    let mut l = Lists { e, dtype };
    let g0 = out_grads.first().copied().flatten();
    let need0 = || g0.ok_or_else(|| Some("only the gradient of output 0 is supported".to_string()));
    Ok(match op_type {
        "TensorListPushBack" => {
            let shape = l.e.shape("Shape", x(1)?);
            let popped = l.op("TensorListPopBack", &[need0()?, shape], false);
            vec![Some(popped), Some(Tensor { node: popped.node, output: 1 })]
        }
        "TensorListPopBack" => {
            let dlist = match g0 {
                Some(g) => g,
                None => {
                    let shape = l.element_shape(Tensor::of(op));
                    let name = l.e.fresh_name("EmptyTensorList/max_num_elements");
                    let unbounded = l.e.int_const_named(name, &[-1], true);
                    l.op("EmptyTensorList", &[shape, unbounded], true)
                }
            };
            let delement = match out_grads.get(1).copied().flatten() {
                Some(g) => g,
                None => l.e.zeros_like_for_unconnected(Tensor { node: op, output: 1 }),
            };
            vec![Some(l.op("TensorListPushBack", &[dlist, delement], false)), None]
        }
        "TensorListStack" => {
            let g = need0()?;
            let shape = l.trailing_shape(g);
            vec![Some(l.op("TensorListFromTensor", &[g, shape], true)), None]
        }
        "TensorListFromTensor" => {
            let shape = l.trailing_shape(x(0)?);
            let attrs = [("element_dtype", AttrValue::Type(dtype)), ("num_elements", AttrValue::Int(-1))];
            vec![Some(l.e.emit("TensorListStack", "TensorListStack", &[need0()?, shape], attrs)), None]
        }
        "TensorListConcatV2" => {
            let shape = l.element_shape(x(0)?);
            let lengths = Tensor { node: op, output: 1 };
            vec![Some(l.op("TensorListSplit", &[need0()?, shape, lengths], true)), None, None]
        }
        "TensorListSplit" => {
            // The element shape with an unknown leading dimension: [-1] + shape(tensor)[1:].
            let trailing = l.trailing_shape(x(0)?);
            let name = l.e.fresh_name("concat/values_0");
            let unknown = l.e.int_const_named(name, &[-1], false);
            let name = l.e.fresh_name("concat/axis");
            let axis = l.e.int_const_named(name, &[0], true);
            let i32_attrs =
                [("N", AttrValue::Int(2)), ("T", AttrValue::Type(DType::I32)), ("Tidx", AttrValue::Type(DType::I32))];
            let shape = l.e.emit("ConcatV2", "concat", &[unknown, trailing, axis], i32_attrs);
            vec![Some(l.op("TensorListConcatV2", &[need0()?, shape, x(2)?], true)), None, None]
        }
        "TensorListGetItem" => {
            let reserved = l.reserved_like(x(0)?);
            vec![Some(l.op("TensorListSetItem", &[reserved, x(1)?, need0()?], false)), None, None]
        }
        "TensorListGather" => {
            let reserved = l.reserved_like(x(0)?);
            let scattered = l.op("TensorListScatterIntoExistingList", &[reserved, need0()?, x(1)?], false);
            vec![Some(scattered), None, None]
        }
        "TensorListSetItem" => {
            let (g, index, item) = (need0()?, x(1)?, x(2)?);
            let ta = l.e.t_attr(Some(dtype));
            let zeros = l.e.emit("ZerosLike", "zeros_like", &[item], ta);
            let mut list_grad = l.op("TensorListSetItem", &[g, index, zeros], false);
            let shape = l.e.shape("Shape", item);
            let item_grad = l.op("TensorListGetItem", &[g, index, shape], false);
            if attrs.get_bool("resize_if_index_out_of_bounds") == Some(true) {
                let length = l.e.emit("TensorListLength", "TensorListLength", &[x(0)?], []);
                list_grad = l.e.emit("TensorListResize", "TensorListResize", &[list_grad, length], []);
            }
            vec![Some(list_grad), None, Some(item_grad)]
        }
        other => return Err(Some(format!("{other} has no list gradient"))),
    })
}

/// Emits list ops of one element dtype.
struct Lists<'a, 'g> {
    e: &'a mut Emitter<'g>,
    dtype: DType,
}

impl Lists<'_, '_> {
    /// `op_type(inputs) {element_dtype}`, with `shape_type = i32` when `shaped`.
    fn op(&mut self, op_type: &'static str, inputs: &[Tensor], shaped: bool) -> Tensor {
        let mut attrs = vec![("element_dtype", AttrValue::Type(self.dtype))];
        if shaped {
            attrs.push(("shape_type", AttrValue::Type(DType::I32)));
        }
        self.e.emit(op_type, op_type, inputs, attrs)
    }

    /// `TensorListElementShape(list)` as `i32`.
    fn element_shape(&mut self, list: Tensor) -> Tensor {
        let attrs = [("shape_type", AttrValue::Type(DType::I32))];
        self.e.emit("TensorListElementShape", "TensorListElementShape", &[list], attrs)
    }

    /// `shape(t)[1:]`: the shape of `t`'s rows.
    fn trailing_shape(&mut self, t: Tensor) -> Tensor {
        let shape = self.e.shape("Shape", t);
        let name = self.e.fresh_name("Slice/begin");
        let begin = self.e.int_const_named(name, &[1], false);
        let name = self.e.fresh_name("Slice/size");
        let size = self.e.int_const_named(name, &[-1], false);
        let attrs = [("T", AttrValue::Type(DType::I32)), ("Index", AttrValue::Type(DType::I32))];
        self.e.emit("Slice", "Slice", &[shape, begin, size], attrs)
    }

    /// A list as long as `list` with its element shape and no element set.
    fn reserved_like(&mut self, list: Tensor) -> Tensor {
        let shape = self.element_shape(list);
        let length = self.e.emit("TensorListLength", "TensorListLength", &[list], []);
        self.op("TensorListReserve", &[shape, length], true)
    }
}
