//! TensorFlow 1's `TensorArray*V3` ops as pure kernels on lists.
//!
//! In TensorFlow a TensorArray is a resource (the handle) plus a float
//! scalar `flow` that only orders the ops on it. Here the flow *is* the
//! array: every op takes the array's state from its `flow_in` operand (a
//! [`TensorList`]) and an op that changes the array returns the new state
//! as its `flow_out`, so data dependencies order reads and writes exactly
//! as TensorFlow's flow does, and the ops are pure. An array's handle is
//! a placeholder scalar (`0i32`) that no kernel reads; a gradient array's
//! handle (from `TensorArrayGradV3`) is `1i32`, and an op given it with an
//! unmarked flow (TensorFlow's `gradient_flow`, an identity of the forward
//! array's flow, which `tf.gradients` passes to the first op on a new
//! gradient array) works on a new gradient array, which any later
//! `TensorArrayGradV3` adopts as its own. (The StableHLO lowering applies
//! the same rule, from the traced handle and flow.)
//!
//! Invariants and differences from TensorFlow's resource kernels:
//! - An array of fixed size is a list whose `max_num_elements` is its size;
//!   a `dynamic_size` array has no bound and grows on writes past its end.
//! - An element not yet written reads as zeros when the element shape is
//!   known (as TensorFlow's reads of gradient arrays do), else fails.
//! - `TensorArrayGradV3` makes the gradient array of its operand's array:
//!   as long as it, with its element shape, unwritten, and marked with the
//!   gradient `source`. Given an array already marked with that source (the
//!   gradient flowing back into a write), it returns it unchanged, as
//!   TensorFlow's lookup of an existing gradient array does. Writes into a
//!   marked array add to what is there (TensorFlow's
//!   `multiple_writes_aggregate`); a second write to an element of any
//!   other array fails.
//! - `clear_after_read` is not modelled: a read returns no new flow, so a
//!   second read of an element gives its value again instead of failing.
//!
//! Cost: each op copies the list's element pointers (the element tensors
//! are shared), plus the data it reads or writes.

use super::control_flow::{list, variant, zeros};
use super::math::{binary, BinaryOp};
use super::{arg, run_kernel};
use crate::exec::error::KernelError;
use crate::exec::tensor::Tensor;
use crate::exec::variant::{TensorList, Variant};
use crate::ir::{AttrMap, AttrValue, DType};

/// The TensorArray ops, sorted.
pub const OPS: &[&str] = &[
    "TensorArrayCloseV3",
    "TensorArrayConcatV3",
    "TensorArrayGatherV3",
    "TensorArrayGradV3",
    "TensorArrayReadV3",
    "TensorArrayScatterV3",
    "TensorArraySizeV3",
    "TensorArraySplitV3",
    "TensorArrayV3",
    "TensorArrayWriteV3",
];

/// The handle every TensorArray op returns: no kernel reads it.
pub fn handle() -> Tensor {
    Tensor::scalar(0i32)
}

/// The handle `TensorArrayGradV3` returns: `1i32`, so that an op given
/// this handle with its forward array's flow (TensorFlow's `gradient_flow`,
/// an identity of the forward flow) works on a new gradient array instead
/// (see [`kernel`]).
pub fn gradient_handle() -> Tensor {
    Tensor::scalar(1i32)
}

/// Whether `t` is a gradient array's handle.
fn is_gradient_handle(t: &Tensor) -> bool {
    t.as_variant().is_none() && t.dtype() == DType::I32 && t.shape().is_empty() && *t == gradient_handle()
}

/// The source of a gradient array made from a gradient handle and a forward
/// flow, where the op does not name its source: any `TensorArrayGradV3`
/// adopts such an array as its own.
const ANY_SOURCE: &str = "";

/// A new, unwritten gradient array for array `l`, marked with `source`.
fn fresh_gradient(l: &TensorList, source: &str) -> TensorList {
    TensorList {
        element_dtype: l.element_dtype,
        element_shape: known_shape(l).map(|d| d.iter().map(|&x| x as i64).collect()).or(l.element_shape.clone()),
        items: vec![None; l.items.len()],
        max_num_elements: Some(l.items.len()),
        gradient_source: Some(source.to_string()),
    }
}

/// The operand slot of the flow (the array's state) of TensorArray op `op`.
pub fn flow_slot(op: &str) -> Option<usize> {
    match op {
        "TensorArrayGradV3" | "TensorArraySizeV3" | "TensorArrayConcatV3" => Some(1),
        "TensorArrayReadV3" | "TensorArrayGatherV3" => Some(2),
        "TensorArrayWriteV3" | "TensorArrayScatterV3" | "TensorArraySplitV3" => Some(3),
        _ => None,
    }
}

fn dtype_attr(op: &str, attrs: &AttrMap, key: &str) -> Result<DType, KernelError> {
    attrs
        .get(key)
        .and_then(AttrValue::as_type)
        .ok_or_else(|| KernelError::invalid(op, format!("missing dtype attribute `{key}`")))
}

/// A shape attribute as a list's element shape (`None`: unknown rank).
fn shape_attr(attrs: &AttrMap, key: &str) -> Option<Vec<i64>> {
    match attrs.get(key) {
        Some(AttrValue::Shape(s)) => s.dims.clone(),
        _ => None,
    }
}

/// The element shape operand of a list kernel: the dims, or `-1` for an unknown rank.
fn shape_tensor(dims: Option<&Vec<i64>>) -> Tensor {
    match dims {
        Some(d) => Tensor::vector(d.iter().map(|&x| x as i32).collect::<Vec<i32>>()),
        None => Tensor::scalar(-1i32),
    }
}

/// The element shape of `l` when fully known: declared, else that of a written element.
fn known_shape(l: &TensorList) -> Option<Vec<usize>> {
    if let Some(d) = l.element_shape.as_ref().filter(|d| d.iter().all(|&x| x >= 0)) {
        return Some(d.iter().map(|&x| x as usize).collect());
    }
    l.items.iter().flatten().next().map(|t| t.shape().to_vec())
}

fn index(op: &str, t: &Tensor) -> Result<i64, KernelError> {
    let v = t.to_i64_vec(op, "index")?;
    match v.as_slice() {
        [i] => Ok(*i),
        _ => Err(KernelError::invalid(op, format!("the index must be a scalar, got {} values", v.len()))),
    }
}

/// Element `i` of `l`, or zeros where it was never written.
fn read(op: &str, l: &TensorList, i: i64) -> Result<Tensor, KernelError> {
    let slot = usize::try_from(i).ok().filter(|&k| k < l.items.len()).ok_or_else(|| {
        KernelError::invalid(op, format!("index {i} is out of range for an array of {}", l.items.len()))
    })?;
    match &l.items[slot] {
        Some(t) => Ok(t.clone()),
        None => {
            let shape = known_shape(l).ok_or_else(|| {
                KernelError::invalid(
                    op,
                    format!("element {i} was never written and the array's element shape is not fully known"),
                )
            })?;
            zeros(op, l.element_dtype, &shape)
        }
    }
}

/// `l` with `value` written at `i` (growing a dynamic array; adding in a gradient array).
fn write(op: &str, l: &mut TensorList, i: i64, value: Tensor) -> Result<(), KernelError> {
    if value.dtype() != l.element_dtype {
        return Err(KernelError::dtype(op, value.dtype(), format!("the array holds {}", l.element_dtype)));
    }
    if let Some(dims) = l.element_shape.as_ref() {
        let fits = dims.len() == value.shape().len()
            && dims.iter().zip(value.shape()).all(|(&d, &s)| d < 0 || d as usize == s);
        if !fits {
            return Err(KernelError::invalid(
                op,
                format!("a value of shape {:?} does not fit the array's element shape {dims:?}", value.shape()),
            ));
        }
    }
    let slot = usize::try_from(i).map_err(|_| KernelError::invalid(op, format!("index {i} is negative")))?;
    if slot >= l.items.len() {
        // A fixed-size array's bound is its size; a dynamic one's none, or the capacity the
        // StableHLO lowering fixed for it.
        if l.max_num_elements.is_some_and(|m| slot >= m) {
            return Err(KernelError::invalid(
                op,
                format!("index {i} is out of range for an array of {} that is not dynamic_size", l.items.len()),
            ));
        }
        crate::exec::limits::checked_dims(op, DType::Variant, &[i.saturating_add(1)])?;
        l.items.resize(slot + 1, None);
    }
    let new = match (l.items[slot].take(), l.gradient_source.is_some()) {
        (None, _) => value,
        (Some(old), true) => binary(op, BinaryOp::Add, &old, &value)?,
        (Some(_), false) => {
            return Err(KernelError::invalid(op, format!("element {i} of the array was already written")));
        }
    };
    l.items[slot] = Some(new);
    Ok(())
}

/// Runs TensorArray op `op`.
pub fn kernel(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Result<Vec<Tensor>, KernelError> {
    let x = |i: usize| arg(op, inputs, i);
    // The array's state: the flow's list, or a fresh gradient array when the handle is a
    // gradient array's and the flow is still its forward array's (TensorFlow's `gradient_flow`).
    let flow = || -> Result<std::borrow::Cow<'_, TensorList>, KernelError> {
        let slot = flow_slot(op).unwrap_or(0);
        let l = list(op, arg(op, inputs, slot)?)?;
        if l.gradient_source.is_none() && inputs.first().is_some_and(is_gradient_handle) {
            return Ok(std::borrow::Cow::Owned(fresh_gradient(l, ANY_SOURCE)));
        }
        Ok(std::borrow::Cow::Borrowed(l))
    };
    let out = |l: TensorList| variant(Variant::List(l));
    match op {
        "TensorArrayV3" => {
            let n = x(0)?.to_i64_vec(op, "size")?.first().copied().unwrap_or(-1);
            let size = usize::try_from(n).map_err(|_| KernelError::invalid(op, format!("size {n} is negative")))?;
            crate::exec::limits::checked_dims(op, DType::Variant, &[n])?;
            let dynamic = attrs.get_bool("dynamic_size").unwrap_or(false);
            let l = TensorList {
                element_dtype: dtype_attr(op, attrs, "dtype")?,
                element_shape: shape_attr(attrs, "element_shape"),
                items: vec![None; size],
                max_num_elements: (!dynamic).then_some(size),
                gradient_source: None,
            };
            Ok(vec![handle(), out(l)])
        }
        "TensorArrayGradV3" => {
            let l = flow()?;
            let source = attrs.get_str("source").unwrap_or_default();
            if matches!(l.gradient_source.as_deref(), Some(s) if s == source || s == ANY_SOURCE) {
                let mut l = l.into_owned();
                l.gradient_source = Some(source.to_string());
                return Ok(vec![gradient_handle(), out(l)]);
            }
            Ok(vec![gradient_handle(), out(fresh_gradient(&l, source))])
        }
        "TensorArrayWriteV3" => {
            let mut l = flow()?.into_owned();
            write(op, &mut l, index(op, x(1)?)?, x(2)?.clone())?;
            Ok(vec![out(l)])
        }
        "TensorArrayReadV3" => Ok(vec![read(op, &*flow()?, index(op, x(1)?)?)?]),
        "TensorArrayGatherV3" => {
            let l = flow()?;
            let l: &TensorList = &l;
            let indices = x(1)?.to_i64_vec(op, "indices")?;
            if indices.is_empty() {
                let shape = shape_attr(attrs, "element_shape")
                    .filter(|d| d.iter().all(|&x| x >= 0))
                    .map(|d| d.iter().map(|&x| x as usize).collect())
                    .or_else(|| known_shape(l))
                    .ok_or_else(|| {
                        KernelError::invalid(op, "gathers nothing from an array of unknown element shape")
                    })?;
                let mut dims = vec![0];
                dims.extend(shape);
                return Ok(vec![zeros(op, l.element_dtype, &dims)?]);
            }
            let rows: Vec<Tensor> = indices.iter().map(|&i| read(op, l, i)).collect::<Result<_, _>>()?;
            let mut pack = AttrMap::new();
            pack.insert("axis", AttrValue::Int(0));
            run_kernel("Pack", &pack, &rows)
        }
        "TensorArrayScatterV3" => {
            let mut l = flow()?.into_owned();
            let indices = x(1)?.to_i64_vec(op, "indices")?;
            let value = x(2)?;
            if value.shape().first().copied() != Some(indices.len()) {
                return Err(KernelError::invalid(
                    op,
                    format!("{} indices for a value of shape {:?}", indices.len(), value.shape()),
                ));
            }
            let rows = super::layout::unpack(op, value, 0)?;
            for (&i, row) in indices.iter().zip(rows) {
                write(op, &mut l, i, row)?;
            }
            Ok(vec![out(l)])
        }
        "TensorArrayConcatV3" => {
            let l = flow()?;
            let l: &TensorList = &l;
            let rest = shape_attr(attrs, "element_shape_except0");
            let mut filled = l.clone();
            for k in 0..filled.items.len() {
                if filled.items[k].is_none() {
                    filled.items[k] = Some(read(op, l, k as i64)?);
                }
            }
            let dims = rest.map(|r| std::iter::once(-1).chain(r).collect::<Vec<i64>>());
            let lists = [out(filled), shape_tensor(dims.as_ref()), Tensor::vector(Vec::<i64>::new())];
            let mut list_attrs = AttrMap::new();
            list_attrs.insert("element_dtype", AttrValue::Type(l.element_dtype));
            run_kernel("TensorListConcatV2", &list_attrs, &lists)
        }
        "TensorArraySplitV3" => {
            let mut l = flow()?.into_owned();
            let (value, lengths) = (x(1)?, x(2)?);
            let shape = match value.shape().len() {
                0 => return Err(KernelError::invalid(op, "cannot split a scalar")),
                r => {
                    let mut d = vec![-1i64];
                    d.extend(value.shape()[1..].iter().map(|&s| s as i64));
                    debug_assert_eq!(d.len(), r);
                    d
                }
            };
            let mut split_attrs = AttrMap::new();
            split_attrs.insert("element_dtype", AttrValue::Type(value.dtype()));
            let operands = [value.clone(), shape_tensor(Some(&shape)), lengths.clone()];
            let split = run_kernel("TensorListSplit", &split_attrs, &operands)?;
            let parts = list(op, &split[0])?.items.clone();
            for (k, part) in parts.into_iter().enumerate() {
                let part = part.ok_or_else(|| KernelError::invalid(op, "the split gave an empty part"))?;
                write(op, &mut l, k as i64, part)?;
            }
            Ok(vec![out(l)])
        }
        "TensorArraySizeV3" => {
            let n = flow()?.items.len();
            let n =
                i32::try_from(n).map_err(|_| KernelError::invalid(op, format!("size {n} does not fit an int32")))?;
            Ok(vec![Tensor::scalar(n)])
        }
        "TensorArrayCloseV3" => Ok(Vec::new()),
        _ => Err(KernelError::invalid(op, "not a TensorArray op")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ta(size: i32, dynamic: bool) -> Tensor {
        let mut attrs = AttrMap::new();
        attrs.insert("dtype", AttrValue::Type(DType::F32));
        attrs.insert("dynamic_size", AttrValue::Bool(dynamic));
        kernel("TensorArrayV3", &attrs, &[Tensor::scalar(size)]).unwrap().remove(1)
    }

    fn write_at(flow: &Tensor, i: i32, v: f32) -> Result<Tensor, KernelError> {
        let value = Tensor::from_vec(&[2], vec![v, v + 1.0]).unwrap();
        kernel("TensorArrayWriteV3", &AttrMap::new(), &[handle(), Tensor::scalar(i), value, flow.clone()])
            .map(|mut o| o.remove(0))
    }

    #[test]
    fn a_fixed_array_refuses_a_write_past_its_end_and_a_second_write() {
        let flow = write_at(&ta(2, false), 1, 3.0).unwrap();
        assert!(write_at(&flow, 2, 1.0).is_err());
        assert!(write_at(&flow, 1, 1.0).is_err());
        let grown = write_at(&ta(1, true), 3, 1.0).unwrap();
        let size = kernel("TensorArraySizeV3", &AttrMap::new(), &[handle(), grown]).unwrap();
        assert_eq!(size[0], Tensor::scalar(4i32));
    }

    #[test]
    fn a_gradient_array_adds_writes_and_is_found_again_by_its_source() {
        let flow = write_at(&ta(2, false), 0, 1.0).unwrap();
        let mut attrs = AttrMap::new();
        attrs.insert("source", AttrValue::Str("gradients".into()));
        let g = kernel("TensorArrayGradV3", &attrs, &[handle(), flow]).unwrap().remove(1);
        let g = write_at(&write_at(&g, 0, 1.0).unwrap(), 0, 2.0).unwrap();
        let again = kernel("TensorArrayGradV3", &attrs, &[handle(), g.clone()]).unwrap().remove(1);
        assert_eq!(again, g);
        let mut read_attrs = AttrMap::new();
        read_attrs.insert("dtype", AttrValue::Type(DType::F32));
        let r0 = kernel("TensorArrayReadV3", &read_attrs, &[handle(), Tensor::scalar(0i32), g.clone()]).unwrap();
        assert_eq!(r0[0], Tensor::from_vec(&[2], vec![3.0f32, 5.0]).unwrap());
        // The unwritten element of a gradient array reads as zeros.
        let r1 = kernel("TensorArrayReadV3", &read_attrs, &[handle(), Tensor::scalar(1i32), g]).unwrap();
        assert_eq!(r1[0], Tensor::from_vec(&[2], vec![0.0f32, 0.0]).unwrap());
    }
}
