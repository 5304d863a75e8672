//! TensorList ops on a list's buffer `tensor<N x E>` and `i32` size (the
//! form `lists` describes): pushes and sets are
//! `stablehlo.dynamic_update_slice`, pops and reads `stablehlo.dynamic_slice`,
//! `TensorListStack` the buffer's first `length` rows, `TensorListGather` a
//! gather of rows, `TensorListScatterIntoExistingList` a scatter of rows,
//! `TensorListConcatV2` and `TensorListSplit` reshapes of the rows (equal
//! lengths only, as tf2xla's).
//! An Optional (`tf.cond`'s gradient intermediates) is its `i1` flag and
//! its components. `TensorListElementShape` is a constant. As tf2xla's,
//! a push onto a full list, a pop of an empty one, a read past the size
//! and an empty Optional's value are not checked on the device (XLA
//! clamps the index, an empty Optional reads as zeros) unless a
//! device-check scope is open ([`crate::xla::device_check`]): then a push
//! past the capacity, a pop of an empty list, a `TensorListGather` index
//! outside the capacity and `OptionalGetValue` of an empty Optional fail
//! the run. Cost: one slice or update per op (and a compare per check).

use super::{check, gather, Call};
use crate::ir::DType;
use crate::xla::stablehlo::text::Cmp;
use crate::xla::stablehlo::text::{Ctx, Ty, Val};

/// A list operand's (buffer, size).
fn list(n: &Call, i: usize) -> Result<(Val, Val), String> {
    let parts = n.input(i)?.parts();
    match parts.as_slice() {
        [buffer, size] => Ok((buffer.clone(), size.clone())),
        _ => Err(format!("operand {i} is not a TensorList")),
    }
}

/// A list result of type `ty` (a composite: buffer, size).
fn buffer_type(ty: &Ty) -> Result<Ty, String> {
    ty.parts.first().cloned().ok_or_else(|| "the result is not a TensorList".to_string())
}

/// An index operand as a scalar `i32`.
fn index(c: &mut Ctx, v: &Val) -> Result<Val, String> {
    if v.ty.count() != 1 {
        return Err(format!("the index must have one element, not shape {:?}", v.ty.shape));
    }
    let v = if v.ty.shape.is_empty() { v.clone() } else { c.reshape(v, Vec::new()) };
    Ok(if v.ty.dtype == DType::I32 { v } else { c.convert(&v, DType::I32) })
}

/// The start indices `[row, 0, 0, …]` of a row of `buffer`.
fn starts(c: &mut Ctx, buffer: &Ty, row: &Val) -> Vec<Val> {
    let zero = c.splat(&Ty::scalar(DType::I32), 0.0);
    let mut out = vec![row.clone()];
    out.extend((1..buffer.rank()).map(|_| zero.clone()));
    out
}

/// Row `row` of `buffer`, as an element.
fn read(c: &mut Ctx, buffer: &Val, row: &Val) -> Val {
    let mut sizes = buffer.ty.shape.clone();
    sizes[0] = 1;
    let mut operands = vec![buffer.clone()];
    operands.extend(starts(c, &buffer.ty, row));
    let refs: Vec<&Val> = operands.iter().collect();
    let slice = c.op(
        "stablehlo.dynamic_slice",
        &refs,
        &format!("slice_sizes = {}", super::i64s(&sizes)),
        buffer.ty.with_shape(sizes),
    );
    c.reshape(&slice, buffer.ty.shape[1..].to_vec())
}

/// `buffer` with row `row` set to `item`.
fn write(c: &mut Ctx, buffer: &Val, row: &Val, item: &Val) -> Result<Val, String> {
    if item.ty.shape != buffer.ty.shape[1..] || item.ty.dtype != buffer.ty.dtype {
        return Err(format!(
            "the element {} does not fit the list's elements of shape {:?} ({}): on XLA every element of a \
             TensorList (or TensorArray) has one shape, so elements of different shapes cannot lower",
            item.ty.mlir(),
            &buffer.ty.shape[1..],
            buffer.ty.dtype
        ));
    }
    let mut one = buffer.ty.shape.clone();
    one[0] = 1;
    let update = c.reshape(item, one);
    let mut operands = vec![buffer.clone(), update];
    operands.extend(starts(c, &buffer.ty, row));
    let refs: Vec<&Val> = operands.iter().collect();
    Ok(c.op("stablehlo.dynamic_update_slice", &refs, "", buffer.ty.clone()))
}

fn add(c: &mut Ctx, v: &Val, k: f64) -> Val {
    let k = c.splat(&v.ty, k);
    c.elementwise("add", &[v, &k])
}

/// `EmptyTensorList(element_shape, max_num_elements)`: zeros, size 0.
pub(super) fn empty(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let ty = buffer_type(n.out(0)?)?;
    let buffer = c.splat(&ty, 0.0);
    let size = c.splat(&Ty::scalar(DType::I32), 0.0);
    Ok(vec![Val::composite(&[buffer, size])])
}

/// `TensorListReserve(element_shape, num_elements)`: zeros, size `num_elements`.
pub(super) fn reserve(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let ty = buffer_type(n.out(0)?)?;
    let buffer = c.splat(&ty, 0.0);
    let size = index(c, n.input(1)?)?;
    Ok(vec![Val::composite(&[buffer, size])])
}

/// `TensorListFromTensor(tensor, element_shape)`: the tensor's rows.
pub(super) fn from_tensor(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let ty = buffer_type(n.out(0)?)?;
    let t = n.input(0)?;
    let rows = *t.ty.shape.first().ok_or("the tensor must have at least one dimension")?;
    let buffer = if t.ty == ty {
        t.clone()
    } else {
        let zeros = c.splat(&ty, 0.0);
        let zero = c.splat(&Ty::scalar(DType::I32), 0.0);
        let mut operands = vec![zeros, t.clone()];
        operands.extend((0..ty.rank()).map(|_| zero.clone()));
        let refs: Vec<&Val> = operands.iter().collect();
        c.op("stablehlo.dynamic_update_slice", &refs, "", ty)
    };
    let size = c.splat(&Ty::scalar(DType::I32), rows as f64);
    Ok(vec![Val::composite(&[buffer, size])])
}

/// `TensorListPushBack(list, item)`: writes at `size`, then `size + 1`.
pub(super) fn push_back(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (buffer, size) = list(n, 0)?;
    let capacity = buffer.ty.shape.first().copied().unwrap_or(0);
    if crate::xla::device_check::enabled() {
        let full = c.splat(&size.ty, capacity as f64);
        let bad = c.compare(&size, &full, Cmp::Ge);
        check::fail_if(c, &bad, || {
            format!("{}: a push onto a full list (its compile-time capacity is {capacity})", n.op)
        });
    }
    let buffer = write(c, &buffer, &size, n.input(1)?)?;
    let size = add(c, &size, 1.0);
    Ok(vec![Val::composite(&[buffer, size])])
}

/// `AddN` of TensorLists (the gradients of a loop's accumulators): the
/// buffers add (an element never set is zeros); the lists have one size.
pub(super) fn add_n(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (mut buffer, size) = list(n, 0)?;
    for i in 1..n.inputs.len() {
        let (other, _) = list(n, i)?;
        buffer = c.elementwise("add", &[&buffer, &other]);
    }
    Ok(vec![Val::composite(&[buffer, size])])
}

/// `TensorListPopBack(list, element_shape)`: `size - 1`, and the element there.
pub(super) fn pop_back(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (buffer, size) = list(n, 0)?;
    if crate::xla::device_check::enabled() {
        let zero = c.splat(&size.ty, 0.0);
        let bad = c.compare(&size, &zero, Cmp::Le);
        check::fail_if(c, &bad, || format!("{}: a pop from an empty list", n.op));
    }
    let size = add(c, &size, -1.0);
    let item = read(c, &buffer, &size);
    Ok(vec![Val::composite(&[buffer, size]), item])
}

/// `TensorListGetItem(list, index, element_shape)`.
pub(super) fn get_item(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (buffer, _) = list(n, 0)?;
    let i = index(c, n.input(1)?)?;
    Ok(vec![read(c, &buffer, &i)])
}

/// `TensorListSetItem(list, index, item)`; with
/// `resize_if_index_out_of_bounds` the size becomes at least `index + 1`.
pub(super) fn set_item(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (buffer, size) = list(n, 0)?;
    let i = index(c, n.input(1)?)?;
    let buffer = write(c, &buffer, &i, n.input(2)?)?;
    let size = if n.attrs.get_bool("resize_if_index_out_of_bounds") == Some(true) {
        let next = add(c, &i, 1.0);
        c.elementwise("maximum", &[&size, &next])
    } else {
        size
    };
    Ok(vec![Val::composite(&[buffer, size])])
}

/// `TensorListLength(list)`: the size.
pub(super) fn length(_: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    Ok(vec![list(n, 0)?.1])
}

/// `TensorListStack(list, element_shape)`: the first rows of the buffer
/// (as many as the traced length, which the result's static shape holds).
pub(super) fn stack(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (buffer, _) = list(n, 0)?;
    let out = n.out(0)?.clone();
    if out == buffer.ty {
        return Ok(vec![buffer]);
    }
    if out.shape.get(1..) != buffer.ty.shape.get(1..) || out.shape.first() > buffer.ty.shape.first() {
        return Err(format!("cannot stack a list of type {} as {}", buffer.ty.mlir(), out.mlir()));
    }
    let start = vec![0; out.rank()];
    let strides = vec![1; out.rank()];
    let attrs = format!(
        "start_indices = {}, limit_indices = {}, strides = {}",
        super::i64s(&start),
        super::i64s(&out.shape),
        super::i64s(&strides)
    );
    Ok(vec![c.op("stablehlo.slice", &[&buffer], &attrs, out)])
}

/// `TensorListScatterIntoExistingList(list, tensor, indices)`: row `k` of
/// `tensor` replaces element `indices[k]`; the size grows to hold the
/// largest index, as TensorFlow's does.
pub(super) fn scatter_rows(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (buffer, size) = list(n, 0)?;
    let (rows, indices) = (n.input(1)?, n.input(2)?);
    if indices.ty.rank() != 1 || rows.ty.shape.first() != indices.ty.shape.first() {
        return Err(format!("{} indices for rows of {}", indices.ty.mlir(), rows.ty.mlir()));
    }
    if rows.ty.shape.get(1..) != buffer.ty.shape.get(1..) {
        return Err(format!("rows {} do not fit the list's elements {}", rows.ty.mlir(), buffer.ty.mlir()));
    }
    let indices = if indices.ty.dtype == DType::I32 { indices.clone() } else { c.convert(indices, DType::I32) };
    let column = c.reshape(&indices, vec![indices.ty.shape[0], 1]);
    let buffer = gather::scatter(c, &buffer, &column, rows, gather::Combine::Replace);
    let size = if indices.ty.shape[0] == 0 {
        size
    } else {
        let top = c.reduce(&indices, &[0], crate::xla::stablehlo::text::Reducer::Max);
        let next = add(c, &top, 1.0);
        c.elementwise("maximum", &[&size, &next])
    };
    Ok(vec![Val::composite(&[buffer, size])])
}

/// `TensorListGather(list, indices, element_shape)`: the rows at `indices`.
pub(super) fn gather_rows(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (buffer, _) = list(n, 0)?;
    let out = n.out(0)?.clone();
    let capacity = buffer.ty.shape.first().copied().unwrap_or(0);
    check::in_range(c, n.input(1)?, capacity, || format!("{} of a list of capacity {capacity}", n.op));
    Ok(vec![gather::gather(c, &buffer, n.input(1)?, 0, out)])
}

/// `OptionalFromValue(components…)`: the flag `true`, then the components.
pub(super) fn optional_from_value(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let flag = c.constant(&crate::exec::Tensor::scalar(true));
    let mut parts = vec![flag];
    parts.extend(n.inputs.iter().cloned());
    Ok(vec![Val::composite(&parts)])
}

/// `OptionalNone()`: the flag `false`; the components, if a branch beside
/// it gives them types, are zeros added where the branches join (`calls`).
pub(super) fn optional_none(c: &mut Ctx, _: &Call) -> Result<Vec<Val>, String> {
    let flag = c.constant(&crate::exec::Tensor::scalar(false));
    Ok(vec![Val::composite(&[flag])])
}

/// `OptionalHasValue(optional)`: the flag.
pub(super) fn optional_has_value(_: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let parts = n.input(0)?.parts();
    parts.into_iter().next().map(|f| vec![f]).ok_or_else(|| "operand 0 is not an Optional".to_string())
}

/// `OptionalGetValue(optional)`: the components (unchecked on the device
/// without a device-check scope, as tf2xla's: an empty Optional gives
/// zeros).
pub(super) fn optional_get_value(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let parts = n.input(0)?.parts();
    if let Some(flag) = parts.first().filter(|_| crate::xla::device_check::enabled()) {
        let none = c.constant(&crate::exec::Tensor::scalar(false));
        let bad = c.compare(flag, &none, Cmp::Eq);
        check::fail_if(c, &bad, || format!("{}: the Optional is empty", n.op));
    }
    if parts.len() != n.outputs.len() + 1 {
        return Err(format!(
            "the Optional holds {} components, the op returns {} (an Optional that no branch sets)",
            parts.len().saturating_sub(1),
            n.outputs.len()
        ));
    }
    Ok(parts.into_iter().skip(1).collect())
}

/// `TensorListConcatV2(list, element_shape, leading_dims)`: the first
/// `n` rows of the buffer (`n` the traced length, which the lengths'
/// static shape holds) reshaped to one tensor, and each element's leading
/// dimension. A list's elements share one shape on the device, so every
/// length is the buffer's second dimension.
pub(super) fn concat(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (buffer, _) = list(n, 0)?;
    let (out, lengths_ty) = (n.out(0)?.clone(), n.out(1)?.clone());
    let rows = *lengths_ty.shape.first().ok_or("the lengths must be a vector")?;
    let Some(&lead) = buffer.ty.shape.get(1) else {
        return Err("the list's elements must have at least one dimension to join".to_string());
    };
    let mut want = vec![rows * lead];
    want.extend_from_slice(&buffer.ty.shape[2..]);
    if out.shape != want || rows > buffer.ty.shape[0] {
        return Err(format!("cannot join {rows} elements of a list of type {} as {}", buffer.ty.mlir(), out.mlir()));
    }
    let mut limit = buffer.ty.shape.clone();
    limit[0] = rows;
    let used = if limit == buffer.ty.shape {
        buffer
    } else {
        let attrs = format!(
            "start_indices = {}, limit_indices = {}, strides = {}",
            super::i64s(&vec![0; limit.len()]),
            super::i64s(&limit),
            super::i64s(&vec![1; limit.len()])
        );
        c.op("stablehlo.slice", &[&buffer], &attrs, buffer.ty.with_shape(limit))
    };
    let joined = c.reshape(&used, want);
    let lengths = c.splat(&lengths_ty, lead as f64);
    Ok(vec![joined, lengths])
}

/// `TensorListSplit(tensor, element_shape, lengths)`: the tensor reshaped
/// to rows of one length. As tf2xla's, the lengths must be compile-time
/// constants and all equal (a list's elements share one shape on the
/// device).
pub(super) fn split(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let ty = buffer_type(n.out(0)?)?;
    let t = n.input(0)?;
    let lengths = n.ints(2, "lengths")?;
    let size = c.splat(&Ty::scalar(DType::I32), lengths.len() as f64);
    let Some(&first) = lengths.first() else {
        return Ok(vec![Val::composite(&[c.splat(&ty, 0.0), size])]);
    };
    if lengths.iter().any(|&l| l != first) {
        return Err(format!(
            "lengths {lengths:?} differ: on XLA a TensorList's elements share one shape, so TensorListSplit needs \
             equal lengths (as TensorFlow's XLA bridge does)"
        ));
    }
    let mut rows = vec![lengths.len(), first as usize];
    rows.extend_from_slice(t.ty.shape.get(1..).unwrap_or_default());
    if rows[1..] != ty.shape[1..] || rows[0] > ty.shape[0] || rows[0] * rows[1] != t.ty.shape[0] {
        return Err(format!("cannot split {} into a list of type {}", t.ty.mlir(), ty.mlir()));
    }
    let cut = c.reshape(t, rows);
    let buffer = if cut.ty == ty {
        cut
    } else {
        let zeros = c.splat(&ty, 0.0);
        let zero = c.splat(&Ty::scalar(DType::I32), 0.0);
        let mut operands = vec![zeros, cut];
        operands.extend((0..ty.rank()).map(|_| zero.clone()));
        let refs: Vec<&Val> = operands.iter().collect();
        c.op("stablehlo.dynamic_update_slice", &refs, "", ty)
    };
    Ok(vec![Val::composite(&[buffer, size])])
}
