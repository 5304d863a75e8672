//! Embedding ops: `GatherV2` (and `ResourceGather`, which the mesh runs
//! on a variable's value), `GatherNd`, `UnsortedSegmentSum`, `ScatterNd`,
//! `TensorScatterUpdate` / `TensorScatterAdd`.
//!
//! Rows are copied as contiguous slices of the row-major input; every
//! index is checked (an index out of range is an error, never a panic).
//! Cost: linear in the output plus the indices.

use crate::exec::error::KernelError;
use crate::exec::tensor::{with_element_type, Element, Tensor};
use crate::ir::DType;

use super::math::Num;

fn no_elements(op: &str) -> KernelError {
    KernelError::dtype(op, DType::Resource, "resource handles have no elements")
}

pub(super) fn index(op: &str, i: i64, n: usize, what: &str) -> Result<usize, KernelError> {
    usize::try_from(i)
        .ok()
        .filter(|&u| u < n)
        .ok_or_else(|| KernelError::invalid(op, format!("{what} {i} is outside [0, {n})")))
}

/// `ResourceGather(var, indices) {batch_dims}` on the variable's value
/// `var`: a [`gather`] along axis `batch_dims`, as TensorFlow's kernel
/// gathers (negative `batch_dims` counts from the end of the indices).
pub(crate) fn resource_gather(
    op: &str,
    var: &Tensor,
    indices: &Tensor,
    batch_dims: i64,
) -> Result<Tensor, KernelError> {
    let axis = if batch_dims < 0 { batch_dims + indices.shape().len() as i64 } else { batch_dims };
    let axis = i32::try_from(axis)
        .map_err(|_| KernelError::invalid(op, format!("batch_dims {batch_dims} is out of range")))?;
    gather(op, var, indices, &Tensor::scalar(axis), batch_dims)
}

/// `GatherV2(params, indices, axis) {batch_dims}`: for each of the leading
/// `batch_dims` dimensions (shared by `params` and `indices`) separately,
/// the slices of `params` along `axis` that `indices` name. Output shape:
/// `params[..axis] ++ indices[batch_dims..] ++ params[axis + 1..]`.
pub(crate) fn gather(
    op: &str,
    params: &Tensor,
    indices: &Tensor,
    axis: &Tensor,
    batch_dims: i64,
) -> Result<Tensor, KernelError> {
    let rank = params.shape().len();
    let axis = match axis.to_i64_vec(op, "axis")?.as_slice() {
        &[a] if a >= -(rank as i64) && a < rank as i64 => (if a < 0 { a + rank as i64 } else { a }) as usize,
        other => return Err(KernelError::invalid(op, format!("axis {other:?} is out of range for rank {rank}"))),
    };
    let index_rank = indices.shape().len() as i64;
    let b = if batch_dims < 0 { batch_dims + index_rank } else { batch_dims };
    let b = usize::try_from(b).ok().filter(|&b| b as i64 <= index_rank && b <= axis).ok_or_else(|| {
        KernelError::invalid(
            op,
            format!("batch_dims {batch_dims} must lie in [-{index_rank}, {index_rank}] and not exceed axis {axis}"),
        )
    })?;
    let shape = params.shape();
    if shape[..b] != indices.shape()[..b] {
        return Err(KernelError::invalid(
            op,
            format!("the first {b} dimensions of params {shape:?} and indices {:?} differ", indices.shape()),
        ));
    }
    let ids = indices.to_i64_vec(op, "indices")?;
    let dims = Dims {
        batch: shape[..b].iter().product(),
        outer: shape[b..axis].iter().product(),
        n: shape[axis],
        inner: shape[axis + 1..].iter().product(),
        per_batch: indices.shape()[b..].iter().product(),
    };
    let rows: Vec<usize> = ids.iter().map(|&i| index(op, i, dims.n, "index")).collect::<Result<_, _>>()?;
    let mut out_shape = shape[..axis].to_vec();
    out_shape.extend_from_slice(&indices.shape()[b..]);
    out_shape.extend_from_slice(&shape[axis + 1..]);
    fn run<T: Element>(params: &Tensor, rows: &[usize], d: &Dims, out_shape: &[usize]) -> Result<Tensor, KernelError> {
        let flat = params.to_vec::<T>().expect("dispatched on this dtype");
        let mut out = Vec::with_capacity(d.batch * d.outer * d.per_batch * d.inner);
        for batch in 0..d.batch {
            let rows = &rows[batch * d.per_batch..(batch + 1) * d.per_batch];
            for o in 0..d.outer {
                for &r in rows {
                    let start = (((batch * d.outer) + o) * d.n + r) * d.inner;
                    out.extend_from_slice(&flat[start..start + d.inner]);
                }
            }
        }
        Tensor::from_vec(out_shape, out)
    }
    with_element_type!(params, T => run::<T>(params, &rows, &dims, &out_shape), resource => Err(no_elements(op)))
}

/// The sizes a gather walks: batches, dimensions between the batch and the
/// axis, the axis, the slice after it, and indices per batch.
struct Dims {
    batch: usize,
    outer: usize,
    n: usize,
    inner: usize,
    per_batch: usize,
}

/// For `indices` of shape `[..., k]` into `shape`: the flat offsets of the addressed slices, and the slice size.
pub(super) fn nd_offsets(
    op: &str,
    indices: &Tensor,
    shape: &[usize],
) -> Result<(Vec<usize>, usize, Vec<usize>), KernelError> {
    let ishape = indices.shape();
    let k = *ishape.last().ok_or_else(|| KernelError::invalid(op, "indices must have rank >= 1"))?;
    if k > shape.len() {
        return Err(KernelError::invalid(op, format!("index depth {k} exceeds rank {}", shape.len())));
    }
    let slice: usize = shape[k..].iter().product();
    let mut strides = vec![slice; k];
    for d in (0..k.saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    let ids = indices.to_i64_vec(op, "indices")?;
    let mut offsets = Vec::with_capacity(ids.len() / k.max(1));
    if k == 0 {
        offsets.resize(ishape[..ishape.len() - 1].iter().product(), 0);
    } else {
        for row in ids.chunks(k) {
            let mut off = 0;
            for d in 0..k {
                off += index(op, row[d], shape[d], "index")? * strides[d];
            }
            offsets.push(off);
        }
    }
    Ok((offsets, slice, ishape[..ishape.len() - 1].to_vec()))
}

/// `GatherNd(params, indices)`.
pub(crate) fn gather_nd(op: &str, params: &Tensor, indices: &Tensor) -> Result<Tensor, KernelError> {
    let (offsets, slice, lead) = nd_offsets(op, indices, params.shape())?;
    let k = indices.shape().last().copied().unwrap_or(0);
    let mut out_shape = lead;
    out_shape.extend_from_slice(&params.shape()[k..]);
    fn run<T: Element>(
        params: &Tensor,
        offsets: &[usize],
        slice: usize,
        out_shape: &[usize],
    ) -> Result<Tensor, KernelError> {
        let flat = params.to_vec::<T>().expect("dispatched on this dtype");
        let mut out = Vec::with_capacity(offsets.len() * slice);
        for &o in offsets {
            out.extend_from_slice(&flat[o..o + slice]);
        }
        Tensor::from_vec(out_shape, out)
    }
    with_element_type!(params, T => run::<T>(params, &offsets, slice, &out_shape), resource => Err(no_elements(op)))
}

/// How scattered values combine with what is there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Combine {
    Add,
    Replace,
}

fn scatter_into<T: Num>(out: &mut [T], offsets: &[usize], slice: usize, updates: &[T], how: Combine) {
    for (u, &o) in offsets.iter().enumerate() {
        for j in 0..slice {
            let v = updates[u * slice + j];
            out[o + j] = match how {
                Combine::Add => out[o + j].add(v),
                Combine::Replace => v,
            };
        }
    }
}

macro_rules! with_num {
    ($op:expr, $t:expr, $T:ident => $body:expr) => {
        match $t {
            Tensor::F32(_) => {
                type $T = f32;
                $body
            }
            Tensor::F64(_) => {
                type $T = f64;
                $body
            }
            Tensor::I32(_) => {
                type $T = i32;
                $body
            }
            Tensor::I64(_) => {
                type $T = i64;
                $body
            }
            other => Err(KernelError::dtype($op, other.dtype(), "a numeric input is required")),
        }
    };
}

pub(super) fn check_updates(op: &str, updates: &Tensor, lead: &[usize], rest: &[usize]) -> Result<(), KernelError> {
    let mut want = lead.to_vec();
    want.extend_from_slice(rest);
    if updates.shape() != want.as_slice() {
        return Err(KernelError::invalid(op, format!("updates have shape {:?}, expected {want:?}", updates.shape())));
    }
    Ok(())
}

/// `ScatterNd(indices, updates, shape)`: zeros with `updates` added at `indices`.
pub(crate) fn scatter_nd(op: &str, indices: &Tensor, updates: &Tensor, shape: &Tensor) -> Result<Tensor, KernelError> {
    let dims: Vec<usize> = shape
        .to_i64_vec(op, "shape")?
        .into_iter()
        .map(|d| usize::try_from(d).map_err(|_| KernelError::invalid(op, "shape must be non-negative")))
        .collect::<Result<_, _>>()?;
    let (offsets, slice, lead) = nd_offsets(op, indices, &dims)?;
    let k = indices.shape().last().copied().unwrap_or(0);
    check_updates(op, updates, &lead, &dims[k..])?;
    with_num!(op, updates, T => {
        let mut out = vec![T::zero(); dims.iter().product()];
        scatter_into(&mut out, &offsets, slice, &updates.to_vec::<T>().expect("dtype"), Combine::Add);
        Tensor::from_vec(&dims, out)
    })
}

/// `TensorScatterUpdate` / `TensorScatterAdd(tensor, indices, updates)`.
pub(crate) fn tensor_scatter(
    op: &str,
    how: Combine,
    tensor: &Tensor,
    indices: &Tensor,
    updates: &Tensor,
) -> Result<Tensor, KernelError> {
    let dims = tensor.shape().to_vec();
    let (offsets, slice, lead) = nd_offsets(op, indices, &dims)?;
    let k = indices.shape().last().copied().unwrap_or(0);
    check_updates(op, updates, &lead, &dims[k..])?;
    if updates.dtype() != tensor.dtype() {
        return Err(KernelError::invalid(
            op,
            format!("updates are {} but the tensor is {}", updates.dtype(), tensor.dtype()),
        ));
    }
    with_num!(op, tensor, T => {
        let mut out = tensor.to_vec::<T>().expect("dtype");
        scatter_into(&mut out, &offsets, slice, &updates.to_vec::<T>().expect("dtype"), how);
        Tensor::from_vec(&dims, out)
    })
}

/// `ResourceScatterAdd` / `Sub` / `Update` on a variable's value `var`: rows `indices` (any shape)
/// of `var` combined with the matching rows of `updates`; repeated indices all apply, in order.
pub(crate) fn scatter_rows(
    op: &str,
    var: &Tensor,
    indices: &Tensor,
    updates: &Tensor,
    how: Combine,
    negate: bool,
) -> Result<Tensor, KernelError> {
    let ids = Tensor::from_vec(&[indices.len(), 1], indices.to_i64_vec(op, "indices")?)?;
    let mut rows = vec![indices.len()];
    rows.extend_from_slice(var.shape().get(1..).unwrap_or_default());
    let updates = super::shape::reshape(op, updates, &Tensor::vector(rows.iter().map(|&d| d as i64).collect()))?;
    let updates = if negate { super::math::unary(op, super::math::UnaryOp::Neg, &updates)? } else { updates };
    tensor_scatter(op, how, var, &ids, &updates)
}

/// The checked geometry of an unsorted segment reduction: the segment
/// count, the elements per id, the ids and the output's dims.
pub(crate) struct Segments {
    pub n: usize,
    pub slice: usize,
    pub segs: Vec<i64>,
    pub dims: Vec<usize>,
}

/// Checks `(data, segment_ids, num_segments)` as TensorFlow's CPU kernels
/// do: the ids prefix the data's shape, `num_segments` is a non-negative
/// scalar and no id reaches it (negative ids are the caller's to drop).
pub(crate) fn segments(op: &str, data: &Tensor, ids: &Tensor, num: &Tensor) -> Result<Segments, KernelError> {
    let ids_shape = ids.shape();
    if !data.shape().starts_with(ids_shape) {
        return Err(KernelError::invalid(op, format!("segment_ids {ids_shape:?} must prefix data {:?}", data.shape())));
    }
    let n = match num.to_i64_vec(op, "num_segments")?.as_slice() {
        &[n] if n >= 0 => n as usize,
        other => {
            return Err(KernelError::invalid(op, format!("num_segments must be a non-negative scalar, got {other:?}")))
        }
    };
    let rest = &data.shape()[ids_shape.len()..];
    let segs = ids.to_i64_vec(op, "segment_ids")?;
    if let Some((k, s)) = segs.iter().enumerate().find(|(_, &s)| s >= n as i64) {
        return Err(KernelError::invalid(op, format!("segment_ids[{k}] = {s} is outside [0, {n})")));
    }
    let mut dims = vec![n];
    dims.extend_from_slice(rest);
    Ok(Segments { n, slice: rest.iter().product(), segs, dims })
}

/// `UnsortedSegmentSum(data, segment_ids, num_segments)`: negative ids are
/// dropped and an id of `num_segments` or more is an error, as on
/// TensorFlow's CPU kernel.
pub(crate) fn unsorted_segment_sum(op: &str, data: &Tensor, ids: &Tensor, num: &Tensor) -> Result<Tensor, KernelError> {
    let Segments { n, slice, segs, dims } = segments(op, data, ids, num)?;
    with_num!(op, data, T => {
        let values = data.to_vec::<T>().expect("dtype");
        let mut out = vec![T::zero(); n * slice];
        for (u, &s) in segs.iter().enumerate() {
            if let Ok(s) = usize::try_from(s) {
                if s < n {
                    for j in 0..slice {
                        out[s * slice + j] = out[s * slice + j].add(values[u * slice + j]);
                    }
                }
            }
        }
        Tensor::from_vec(&dims, out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Tensor {
        Tensor::from_vec(&[3, 2], vec![0.0f32, 1.0, 10.0, 11.0, 20.0, 21.0]).unwrap()
    }

    #[test]
    fn gathers() {
        let out = gather("GatherV2", &table(), &Tensor::vector(vec![2i32, 0, 2]), &Tensor::scalar(0i32), 0).unwrap();
        assert_eq!(out.shape(), &[3, 2]);
        assert_eq!(out.to_vec::<f32>().unwrap(), vec![20.0, 21.0, 0.0, 1.0, 20.0, 21.0]);
        let cols = gather("GatherV2", &table(), &Tensor::vector(vec![1i64]), &Tensor::scalar(-1i32), 0).unwrap();
        assert_eq!(cols.to_vec::<f32>().unwrap(), vec![1.0, 11.0, 21.0]);
        assert!(gather("GatherV2", &table(), &Tensor::vector(vec![3i32]), &Tensor::scalar(0i32), 0).is_err());
        let idx = Tensor::from_vec(&[2, 2], vec![1i32, 1, 2, 0]).unwrap();
        assert_eq!(gather_nd("GatherNd", &table(), &idx).unwrap().to_vec::<f32>().unwrap(), vec![11.0, 20.0]);
    }

    #[test]
    fn scatters_and_segments() {
        let idx = Tensor::from_vec(&[2, 1], vec![2i32, 2]).unwrap();
        let upd = Tensor::from_vec(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
        let s = scatter_nd("ScatterNd", &idx, &upd, &Tensor::vector(vec![3i32, 2])).unwrap();
        assert_eq!(s.to_vec::<f32>().unwrap(), vec![0.0, 0.0, 0.0, 0.0, 4.0, 6.0]);
        let t = tensor_scatter("TensorScatterUpdate", Combine::Replace, &table(), &idx, &upd).unwrap();
        assert_eq!(t.to_vec::<f32>().unwrap()[4..], [3.0, 4.0]);
        let seg =
            unsorted_segment_sum("USS", &table(), &Tensor::vector(vec![1i32, 1, -1]), &Tensor::scalar(2i32)).unwrap();
        assert_eq!(seg.to_vec::<f32>().unwrap(), vec![0.0, 0.0, 10.0, 12.0]);
        let past = unsorted_segment_sum("USS", &table(), &Tensor::vector(vec![1i32, 2, 0]), &Tensor::scalar(2i32));
        assert!(past.unwrap_err().to_string().contains("segment_ids[1] = 2 is outside [0, 2)"));
    }
}
