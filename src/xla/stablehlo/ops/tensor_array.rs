//! TensorFlow 1's `TensorArray*V3` ops on the device. As on the simulator
//! (`exec::kernels::tensor_array`), an array's state is its flow: a
//! TensorList's buffer `tensor<N x E>` and `i32` size (the form `lists`
//! describes), so each op is the list op on its flow operand: a write or a
//! split sets rows, a read or a gather reads them, a concat joins them.
//! The handle is the constant `0` (a gradient array's `1`), which only
//! the gradient rule reads ([`on_array`]). The capacity `N` is
//! the array's size, or for a `dynamic_size` array the most elements the
//! trace sees (`lists` refuses one whose length depends on run-time values).
//!
//! `TensorArrayGradV3` reads its operand's traced value for one
//! compile-time fact, whether it is already the gradient array of that
//! source ([`TRACED_OPERANDS`]): then it passes it on; otherwise it makes
//! a zero buffer as long as the forward array. Writes replace a row; an
//! element is written once in the programs TensorFlow builds, and a
//! gradient array's writes that meet are added by `AddN` on the flows.
//! Cost: one slice or update per op.

use super::{list, Call};
use crate::exec::variant::Variant;
use crate::exec::Tensor;
use crate::ir::{AttrMap, AttrValue, DType};
use crate::xla::stablehlo::text::{Ctx, Ty, Val};

/// `(op, operand)` whose traced value (not only its type) the lowering
/// reads, for compile-time facts about it, never its run-time contents:
/// whether a flow is a gradient array's, and whether a handle is.
pub const TRACED_OPERANDS: &[(&str, usize)] = &[
    ("TensorArrayConcatV3", 0),
    ("TensorArrayConcatV3", 1),
    ("TensorArrayGatherV3", 0),
    ("TensorArrayGatherV3", 2),
    ("TensorArrayGradV3", 1),
    ("TensorArrayReadV3", 0),
    ("TensorArrayReadV3", 2),
    ("TensorArrayScatterV3", 0),
    ("TensorArrayScatterV3", 3),
    ("TensorArraySizeV3", 0),
    ("TensorArraySizeV3", 1),
    ("TensorArraySplitV3", 0),
    ("TensorArraySplitV3", 3),
    ("TensorArrayWriteV3", 0),
    ("TensorArrayWriteV3", 3),
];

/// `n` with its flow operand the array it works on. As on the simulator,
/// an op given a gradient array's handle (from `TensorArrayGradV3`) and
/// its forward array's flow (TensorFlow's `gradient_flow`, an identity of
/// the forward flow) works on a new gradient array: zeros of the forward
/// buffer's type and the forward array's size. Both facts are traced
/// values (compile-time: a handle is a constant of its op, a flow's mark
/// is fixed by the ops that made it).
fn on_array<'a>(c: &mut Ctx, n: &Call<'a>) -> Result<Call<'a>, String> {
    let slot = crate::exec::kernels::tensor_array::flow_slot(n.op).ok_or("not a TensorArray op with a flow")?;
    let traced = |k: usize| n.consts.get(k).cloned().flatten();
    let handle = traced(0).ok_or("the handle's traced value is unknown")?;
    let unmarked = match traced(slot).as_ref().and_then(Tensor::as_variant) {
        Some(Variant::List(l)) => l.gradient_source.is_none(),
        _ => return Err("the flow's traced value is unknown".to_string()),
    };
    let mut inputs = n.inputs.clone();
    if unmarked && handle == crate::exec::kernels::tensor_array::gradient_handle() {
        let buffer_ty = n.input(slot)?.parts().first().map(|b| b.ty.clone()).ok_or("the flow is not a TensorList")?;
        let buffer = c.splat(&buffer_ty, 0.0);
        inputs[slot] = Val::composite(&[buffer, size_of(n, slot)?]);
    }
    Ok(Call {
        op: n.op,
        attrs: n.attrs,
        inputs,
        consts: n.consts.clone(),
        outputs: n.outputs,
        num_replicas: n.num_replicas,
    })
}

/// The list op `op` applied to `inputs` (as `consts`), with `outputs`.
fn as_list<'a>(
    n: &Call<'a>,
    op: &'a str,
    attrs: &'a AttrMap,
    picks: &[usize],
    outputs: &'a [Ty],
) -> Result<Call<'a>, String> {
    let mut inputs = Vec::with_capacity(picks.len());
    let mut consts = Vec::with_capacity(picks.len());
    for &k in picks {
        inputs.push(n.input(k)?.clone());
        consts.push(n.consts.get(k).cloned().flatten());
    }
    Ok(Call { op, attrs, inputs, consts, outputs, num_replicas: n.num_replicas })
}

fn handle(c: &mut Ctx) -> Val {
    c.constant(&crate::exec::kernels::tensor_array::handle())
}

/// The size part of a flow operand.
fn size_of(n: &Call, i: usize) -> Result<Val, String> {
    match n.input(i)?.parts().as_slice() {
        [_, size] => Ok(size.clone()),
        _ => Err(format!("operand {i} is not a TensorArray's flow")),
    }
}

/// `TensorArrayV3(size)`: the handle, and zeros of size `size`.
pub(super) fn array(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let ty = n.out(1)?.parts.first().cloned().ok_or("the flow is not a TensorList")?;
    let buffer = c.splat(&ty, 0.0);
    let size = n.input(0)?;
    let size = if size.ty.shape.is_empty() { size.clone() } else { c.reshape(size, Vec::new()) };
    let size = if size.ty.dtype == DType::I32 { size } else { c.convert(&size, DType::I32) };
    Ok(vec![handle(c), Val::composite(&[buffer, size])])
}

/// `TensorArrayGradV3(handle, flow, source)`: see the module's doc.
pub(super) fn grad(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let source = n.attrs.get_str("source").unwrap_or_default();
    let marked = match n.consts.get(1).cloned().flatten().as_ref().and_then(Tensor::as_variant) {
        // A gradient array made by an op on a gradient handle has no source yet: any adopts it.
        Some(Variant::List(l)) => matches!(l.gradient_source.as_deref(), Some(s) if s == source || s.is_empty()),
        _ => return Err("the flow's traced value is unknown".to_string()),
    };
    if marked {
        return Ok(vec![handle(c), n.input(1)?.clone()]);
    }
    let ty = n.out(1)?.parts.first().cloned().ok_or("the flow is not a TensorList")?;
    let buffer = c.splat(&ty, 0.0);
    let size = size_of(n, 1)?;
    Ok(vec![handle(c), Val::composite(&[buffer, size])])
}

/// `TensorArrayWriteV3(handle, index, value, flow)`: the row set; the size
/// at least `index + 1` (a `dynamic_size` array grows).
pub(super) fn write(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let n = &on_array(c, n)?;
    let mut attrs = AttrMap::new();
    attrs.insert("resize_if_index_out_of_bounds", AttrValue::Bool(true));
    list::set_item(c, &as_list(n, "TensorListSetItem", &attrs, &[3, 1, 2], n.outputs)?)
}

/// `TensorArrayReadV3(handle, index, flow)`.
pub(super) fn read(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let n = &on_array(c, n)?;
    list::get_item(c, &as_list(n, "TensorListGetItem", n.attrs, &[2, 1], n.outputs)?)
}

/// `TensorArrayGatherV3(handle, indices, flow)`.
pub(super) fn gather(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let n = &on_array(c, n)?;
    list::gather_rows(c, &as_list(n, "TensorListGather", n.attrs, &[2, 1], n.outputs)?)
}

/// `TensorArrayScatterV3(handle, indices, value, flow)`.
pub(super) fn scatter(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let n = &on_array(c, n)?;
    list::scatter_rows(c, &as_list(n, "TensorListScatterIntoExistingList", n.attrs, &[3, 2, 1], n.outputs)?)
}

/// `TensorArrayConcatV3(handle, flow)`: the rows joined, and their lengths.
pub(super) fn concat(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let n = &on_array(c, n)?;
    list::concat(c, &as_list(n, "TensorListConcatV2", n.attrs, &[1], n.outputs)?)
}

/// `TensorArraySplitV3(handle, value, lengths, flow)`: the value's rows in
/// equal parts (compile-time lengths, as tf2xla's); the size at least the
/// number of parts.
pub(super) fn split(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let n = &on_array(c, n)?;
    let parts = list::split(c, &as_list(n, "TensorListSplit", n.attrs, &[1, 2, 2], n.outputs)?)?;
    let made = parts.into_iter().next().ok_or("the split made no list")?.parts();
    let [buffer, count] = made.as_slice() else { return Err("the split made no list".to_string()) };
    let size = size_of(n, 3)?;
    let size = c.elementwise("maximum", &[&size, count]);
    Ok(vec![Val::composite(&[buffer.clone(), size])])
}

/// `TensorArraySizeV3(handle, flow)`.
pub(super) fn size(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    Ok(vec![size_of(&on_array(c, n)?, 1)?])
}

/// `TensorArrayCloseV3(handle)`: nothing on the device.
pub(super) fn close(_: &mut Ctx, _: &Call) -> Result<Vec<Val>, String> {
    Ok(Vec::new())
}
