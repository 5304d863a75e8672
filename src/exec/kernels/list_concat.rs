//! The TensorList ops that cut a tensor into elements or join elements
//! along their first dimension: `TensorListSplit` and `TensorListConcatV2`
//! (each the other's gradient).
//!
//! Elements may differ in their leading dimension. `TensorListConcatV2`
//! takes an element that was never set as zeros whose leading dimension is
//! the element shape's, or the matching entry of `leading_dims` when the
//! element shape leaves it unknown, as TensorFlow's CPU kernel does.

use super::control_flow::{element_dtype, list, shape_operand, variant, zeros};
use super::{arg, Tensor};
use crate::exec::error::KernelError;
use crate::exec::variant::{TensorList, Variant};
use crate::ir::{AttrMap, DType};

/// Runs `TensorListSplit` or `TensorListConcatV2`.
pub(super) fn kernel(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Result<Vec<Tensor>, KernelError> {
    match op {
        "TensorListSplit" => split(op, attrs, inputs),
        _ => concat(op, inputs),
    }
}

/// `TensorListSplit(tensor, element_shape, lengths)`: element `k` is the
/// next `lengths[k]` rows of `tensor`.
fn split(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Result<Vec<Tensor>, KernelError> {
    let t = arg(op, inputs, 0)?;
    let declared = element_dtype(op, attrs)?;
    if t.dtype() != declared {
        return Err(KernelError::dtype(op, t.dtype(), format!("element_dtype is {declared}")));
    }
    let Some(&rows) = t.shape().first() else {
        return Err(KernelError::invalid(op, "the tensor must have at least one dimension"));
    };
    let element_shape = shape_operand(op, arg(op, inputs, 1)?)?;
    if let Some(dims) = &element_shape {
        let fits = dims.len() == t.shape().len()
            && dims.iter().zip(t.shape()).skip(1).all(|(&d, &n)| d < 0 || d as usize == n);
        if !fits {
            return Err(KernelError::invalid(
                op,
                format!("element_shape {dims:?} does not fit rows of a tensor of shape {:?}", t.shape()),
            ));
        }
    }
    let lengths = arg(op, inputs, 2)?.to_i64_vec(op, "lengths")?;
    if lengths.iter().any(|&n| n < 0) || lengths.iter().sum::<i64>() != rows as i64 {
        return Err(KernelError::invalid(op, format!("lengths {lengths:?} do not split {rows} rows")));
    }
    let axis = Tensor::scalar(0i32);
    let parts = super::layout::split_v(op, t, &Tensor::vector(lengths), &axis)?;
    Ok(vec![variant(Variant::List(TensorList {
        element_dtype: declared,
        element_shape,
        items: parts.into_iter().map(Some).collect(),
        max_num_elements: None,
        gradient_source: None,
    }))])
}

/// `TensorListConcatV2(list, element_shape, leading_dims)`: the elements
/// joined along dimension 0, and each one's leading dimension (`i64`).
fn concat(op: &str, inputs: &[Tensor]) -> Result<Vec<Tensor>, KernelError> {
    let l = list(op, arg(op, inputs, 0)?)?;
    let leading = match inputs.get(2) {
        Some(t) => t.to_i64_vec(op, "leading_dims")?,
        None => Vec::new(),
    };
    let mut items = Vec::with_capacity(l.items.len());
    for (k, item) in l.items.iter().enumerate() {
        items.push(match item {
            Some(t) => t.clone(),
            None => zeros(op, l.element_dtype, &unset_shape(op, l, inputs.get(1), leading.get(k).copied())?)?,
        });
    }
    if let Some(t) = items.iter().find(|t| t.shape().is_empty()) {
        return Err(KernelError::invalid(op, format!("an element of shape {:?} has no dimension to join", t.shape())));
    }
    let lengths: Vec<i64> = items.iter().map(|t| t.shape()[0] as i64).collect();
    let out = if items.is_empty() {
        let mut shape = unset_shape(op, l, inputs.get(1), Some(0))?;
        shape[0] = 0;
        zeros(op, l.element_dtype, &shape)?
    } else {
        items.push(Tensor::scalar(0i32));
        super::layout::concat(op, &items)?
    };
    Ok(vec![out, Tensor::vector(lengths)])
}

/// The shape of an element never set: the element shape (the operand's,
/// else the list's) with its unknown leading dimension taken from
/// `leading_dims`.
fn unset_shape(
    op: &str,
    l: &TensorList,
    operand: Option<&Tensor>,
    leading: Option<i64>,
) -> Result<Vec<usize>, KernelError> {
    let candidates = [operand.map(|t| shape_operand(op, t)).transpose()?.flatten(), l.element_shape.clone()];
    for dims in candidates.into_iter().flatten() {
        let Some((&first, rest)) = dims.split_first() else { continue };
        if rest.iter().any(|&d| d < 0) {
            continue;
        }
        let first = if first >= 0 { first } else { leading.filter(|&d| d >= 0).unwrap_or(-1) };
        if first < 0 {
            continue;
        }
        let mut shape = vec![first as usize];
        shape.extend(rest.iter().map(|&d| d as usize));
        crate::exec::limits::checked_dims(op, DType::Variant, &[first])?;
        return Ok(shape);
    }
    Err(KernelError::invalid(
        op,
        "an element that was never set has no known shape (the element shape has unknown dimensions \
         and leading_dims gives none for it)",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::run_kernel;
    use crate::ir::AttrValue;

    fn attrs() -> AttrMap {
        let mut a = AttrMap::new();
        a.insert("element_dtype", AttrValue::Type(DType::F32));
        a
    }

    #[test]
    fn split_then_concat_is_the_identity_and_unset_elements_are_zeros() {
        let t =
            Tensor::from_array(ndarray::ArrayD::from_shape_vec(vec![3, 2], vec![1f32, 2., 3., 4., 5., 6.]).unwrap());
        let shape = Tensor::vector(vec![-1i32, 2]);
        let l = run_kernel("TensorListSplit", &attrs(), &[t.clone(), shape.clone(), Tensor::vector(vec![1i64, 2])])
            .unwrap()
            .remove(0);
        let out =
            run_kernel("TensorListConcatV2", &attrs(), &[l, shape.clone(), Tensor::vector(Vec::<i64>::new())]).unwrap();
        assert_eq!(out[0], t);
        assert_eq!(out[1], Tensor::vector(vec![1i64, 2]));
        let reserved =
            run_kernel("TensorListReserve", &attrs(), &[shape.clone(), Tensor::scalar(2i32)]).unwrap().remove(0);
        let out =
            run_kernel("TensorListConcatV2", &attrs(), &[reserved, shape, Tensor::vector(vec![2i64, 1])]).unwrap();
        assert_eq!(out[0].shape(), &[3, 2]);
        assert_eq!(out[1], Tensor::vector(vec![2i64, 1]));
    }

    #[test]
    fn lengths_that_do_not_split_the_rows_are_refused() {
        let t = Tensor::from_array(ndarray::ArrayD::from_shape_vec(vec![3, 1], vec![1f32, 2., 3.]).unwrap());
        let shape = Tensor::vector(vec![-1i32, 1]);
        for lengths in [vec![1i64, 1], vec![4, -1]] {
            let err = run_kernel("TensorListSplit", &attrs(), &[t.clone(), shape.clone(), Tensor::vector(lengths)]);
            assert!(err.is_err());
        }
    }
}
