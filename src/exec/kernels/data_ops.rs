//! Data-dependent and update ops, as TensorFlow's CPU kernels compute them:
//! `CumulativeLogsumexp`, `TensorStridedSliceUpdate` (and the update step of
//! `ResourceStridedSliceAssign`), `SparseToDense`, `Bincount`, `DenseBincount` and
//! `ParallelDynamicStitch` (`DynamicStitch`'s kernel: later rows win), and
//! `ApproxTopK` as XLA's CPU backend computes it: the exact top (or bottom)
//! `k` along the last axis, in order.
//!
//! `CumulativeLogsumexp` folds each lane in index order from `-inf` with
//! `max + log1p(exp(min - max))`, keeping `max` when it is `-inf`, as
//! TensorFlow's reducer does. A strided-slice update writes the value,
//! broadcast to the slice's shape, at the elements `StridedSlice` would
//! read (found by slicing the flat positions). `SparseToDense` refuses
//! out-of-range indices and, with `validate_indices`, indices that are not
//! strictly increasing; later writes win otherwise. The bincounts ignore
//! values at or above `size` and refuse negative ones.

use ndarray::{ArcArray, Axis, IxDyn};

use super::arg;
use crate::exec::error::KernelError;
use crate::exec::tensor::{Element, Tensor};
use crate::ir::{AttrMap, DType};

/// Runs `op` if it is one of this module's ops; `None` otherwise.
pub(crate) fn dispatch(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Option<Result<Vec<Tensor>, KernelError>> {
    let x = |i: usize| arg(op, inputs, i);
    let flag = |key: &str| attrs.get_bool(key).unwrap_or(false);
    Some(
        match op {
            "ApproxTopK" => return Some(x(0).and_then(|t| approx_top_k(op, attrs, t))),
            "CumulativeLogsumexp" => (|| cumulative_logsumexp(op, x(0)?, x(1)?, flag("exclusive"), flag("reverse")))(),
            "TensorStridedSliceUpdate" => (|| strided_update(op, attrs, x(0)?, inputs.get(1..4).unwrap_or_default(), x(4)?))(),
            "SparseToDense" => {
                (|| sparse_to_dense(op, x(0)?, x(1)?, x(2)?, x(3)?, attrs.get_bool("validate_indices").unwrap_or(true)))()
            }
            "Bincount" => (|| bincount(op, x(0)?, x(1)?, x(2)?, false))(),
            "DenseBincount" => (|| bincount(op, x(0)?, x(1)?, x(2)?, flag("binary_output")))(),
            // Without repeated indices the parallel form merges as `DynamicStitch` does.
            "ParallelDynamicStitch" => super::shape::dynamic_stitch(op, inputs),
            _ => return None,
        }
        .map(|t| vec![t]),
    )
}

/// The axis `reduction_dimension` names in a tensor of `rank`, which must be the last one.
pub(crate) fn approx_top_k_axis(attrs: &AttrMap, rank: usize) -> Result<usize, String> {
    let d = attrs.get_int("reduction_dimension").unwrap_or(-1);
    let last = rank.checked_sub(1).ok_or("the input must have rank 1 or more")?;
    match d {
        -1 => Ok(last),
        d if d == last as i64 => Ok(last),
        d => Err(format!("reduction_dimension {d} is not the last axis ({last}); only the last axis is supported")),
    }
}

/// `ApproxTopK(input) {k, reduction_dimension, is_max_k}`: values and i32 indices of the `k`
/// largest (or, without `is_max_k`, smallest) elements along the last axis, ties by lower index.
pub(crate) fn approx_top_k(op: &str, attrs: &AttrMap, x: &Tensor) -> Result<Vec<Tensor>, KernelError> {
    approx_top_k_axis(attrs, x.shape().len()).map_err(|m| KernelError::invalid(op, m))?;
    let k = Tensor::scalar(attrs.get_int("k").unwrap_or(0) as i32);
    if !matches!(x.dtype(), DType::F32 | DType::F64) {
        return Err(KernelError::dtype(op, x.dtype(), "the input must be f32 or f64"));
    }
    if attrs.get_bool("is_max_k").unwrap_or(true) {
        return super::index::top_k(op, x, &k, DType::I32);
    }
    let neg = |t: &Tensor| super::run_kernel("Neg", &AttrMap::new(), std::slice::from_ref(t)).map(|mut v| v.remove(0));
    let mut out = super::index::top_k(op, &neg(x)?, &k, DType::I32)?;
    out[0] = neg(&out[0])?;
    Ok(out)
}

/// `CumulativeLogsumexp(x, axis) {exclusive, reverse}` for f32 and f64.
pub(crate) fn cumulative_logsumexp(
    op: &str,
    x: &Tensor,
    axis: &Tensor,
    exclusive: bool,
    reverse: bool,
) -> Result<Tensor, KernelError> {
    let axes = super::reduce::norm_axes(op, axis, x.shape().len())?;
    let (&[ax], true) = (axes.as_slice(), axis.shape().is_empty()) else {
        return Err(KernelError::invalid(op, "axis must be a scalar within the rank"));
    };
    fn run<T: num_traits::Float>(
        a: &ArcArray<T, IxDyn>,
        ax: usize,
        exclusive: bool,
        reverse: bool,
    ) -> ArcArray<T, IxDyn> {
        let step = |acc: T, v: T| {
            let (lo, hi) = if acc < v { (acc, v) } else { (v, acc) };
            if hi == T::neg_infinity() {
                hi
            } else {
                hi + (lo - hi).exp().ln_1p()
            }
        };
        let mut out = a.to_owned();
        for mut lane in out.lanes_mut(Axis(ax)) {
            let n = lane.len();
            let mut acc = T::neg_infinity();
            for k in 0..n {
                let i = if reverse { n - 1 - k } else { k };
                let next = step(acc, lane[i]);
                lane[i] = if exclusive { acc } else { next };
                acc = next;
            }
        }
        out.into_shared()
    }
    match x {
        Tensor::F32(a) => Ok(Tensor::F32(run(a, ax, exclusive, reverse))),
        Tensor::F64(a) => Ok(Tensor::F64(run(a, ax, exclusive, reverse))),
        other => Err(KernelError::dtype(op, other.dtype(), "a floating-point input is required")),
    }
}

/// The flat positions (row-major) in a `shape` tensor of the elements the
/// strided slice `spec = [begin, end, strides]` with `attrs`' masks reads,
/// shaped as the slice.
pub(crate) fn strided_positions(
    op: &str,
    attrs: &AttrMap,
    shape: &[usize],
    spec: &[Tensor],
) -> Result<Tensor, KernelError> {
    let count = crate::exec::limits::checked_elements(op, DType::I64, shape)?;
    let iota = Tensor::from_vec(shape, (0..count as i64).collect())?;
    let mut inputs = vec![iota];
    inputs.extend(spec.iter().cloned());
    let mut attrs = attrs.clone();
    attrs.insert("T", crate::ir::AttrValue::Type(DType::I64));
    super::run_kernel("StridedSlice", &attrs, &inputs)
        .map_err(|e| KernelError::invalid(op, format!("the slice: {e}")))?
        .into_iter()
        .next()
        .ok_or_else(|| KernelError::invalid(op, "the slice has no result"))
}

/// `TensorStridedSliceUpdate(input, begin, end, strides, value) {masks}`:
/// `input` with the strided slice replaced by `value` (broadcast to it).
pub(crate) fn strided_update(
    op: &str,
    attrs: &AttrMap,
    input: &Tensor,
    spec: &[Tensor],
    value: &Tensor,
) -> Result<Tensor, KernelError> {
    if spec.len() != 3 {
        return Err(KernelError::invalid(op, "expected begin, end and strides"));
    }
    if value.dtype() != input.dtype() {
        return Err(KernelError::dtype(
            op,
            value.dtype(),
            format!("the value must be {:?} like the input", input.dtype()),
        ));
    }
    let positions = strided_positions(op, attrs, input.shape(), spec)?;
    let slice_shape: Vec<i64> = positions.shape().iter().map(|&d| d as i64).collect();
    let value = super::shape::broadcast_to(op, value, &Tensor::vector(slice_shape)).map_err(|e| {
        KernelError::invalid(
            op,
            format!("the value of shape {:?} does not fit the slice {:?}: {e}", value.shape(), positions.shape()),
        )
    })?;
    let positions = positions.to_i64_vec(op, "positions")?;
    fn run<T: Element>(input: &Tensor, value: &Tensor, positions: &[i64]) -> Result<Tensor, KernelError> {
        let mut out = input.to_vec::<T>().expect("dispatched on this dtype");
        let values = value.to_vec::<T>().expect("dispatched on this dtype");
        for (&p, v) in positions.iter().zip(values) {
            out[p as usize] = v;
        }
        Tensor::from_vec(input.shape(), out)
    }
    crate::exec::tensor::with_element_type!(input, T => run::<T>(input, &value, &positions),
        resource => Err(KernelError::dtype(op, input.dtype(), "a resource has no elements to update")))
}

/// The coordinates of `SparseToDense`'s indices as rows of `rank` entries:
/// a scalar is one row of one, a vector one row of one per entry.
fn index_rows(op: &str, indices: &Tensor, rank: usize) -> Result<Vec<Vec<i64>>, KernelError> {
    let flat = indices.to_i64_vec(op, "sparse_indices")?;
    let width = match indices.shape() {
        [] | [_] => 1,
        [_, w] => *w,
        s => return Err(KernelError::invalid(op, format!("sparse_indices must have rank 0, 1 or 2, got shape {s:?}"))),
    };
    if width != rank {
        return Err(KernelError::invalid(
            op,
            format!("sparse_indices rows have {width} entries but the output has rank {rank}"),
        ));
    }
    Ok(flat.chunks(width.max(1)).map(<[i64]>::to_vec).collect())
}

/// `SparseToDense(sparse_indices, output_shape, sparse_values, default_value) {validate_indices}`.
pub(crate) fn sparse_to_dense(
    op: &str,
    indices: &Tensor,
    output_shape: &Tensor,
    values: &Tensor,
    default: &Tensor,
    validate: bool,
) -> Result<Tensor, KernelError> {
    if output_shape.shape().len() != 1 {
        return Err(KernelError::invalid(op, "output_shape must be a vector"));
    }
    let dims: Vec<usize> = output_shape
        .to_i64_vec(op, "output_shape")?
        .into_iter()
        .map(|d| usize::try_from(d).map_err(|_| KernelError::invalid(op, "output_shape must be non-negative")))
        .collect::<Result<_, _>>()?;
    let rows = index_rows(op, indices, dims.len())?;
    if !values.shape().is_empty() && values.shape() != [rows.len()] {
        return Err(KernelError::invalid(
            op,
            format!("sparse_values must be a scalar or have {} entries, got shape {:?}", rows.len(), values.shape()),
        ));
    }
    if !default.shape().is_empty() {
        return Err(KernelError::invalid(op, "default_value must be a scalar"));
    }
    if default.dtype() != values.dtype() {
        return Err(KernelError::dtype(op, default.dtype(), "default_value must have sparse_values' dtype"));
    }
    crate::exec::limits::checked_elements(op, values.dtype(), &dims)?;
    let mut offsets = Vec::with_capacity(rows.len());
    for (k, row) in rows.iter().enumerate() {
        let mut off = 0usize;
        for (d, (&i, &n)) in row.iter().zip(&dims).enumerate() {
            let i = usize::try_from(i).ok().filter(|&i| i < n).ok_or_else(|| {
                KernelError::invalid(op, format!("index {k} {row:?} is out of bounds on axis {d} of size {n}"))
            })?;
            off = off * n + i;
        }
        if validate && k > 0 && offsets.last().is_some_and(|&prev| prev >= off) {
            return Err(KernelError::invalid(
                op,
                format!("index {k} {row:?} is out of order or repeated (validate_indices requires strictly increasing indices)"),
            ));
        }
        offsets.push(off);
    }
    fn run<T: Element>(
        dims: &[usize],
        offsets: &[usize],
        values: &Tensor,
        default: &Tensor,
    ) -> Result<Tensor, KernelError> {
        let fill = default.to_vec::<T>().expect("dispatched on this dtype").remove(0);
        let vals = values.to_vec::<T>().expect("dispatched on this dtype");
        let mut out = vec![fill; dims.iter().product()];
        for (k, &off) in offsets.iter().enumerate() {
            out[off] = vals[if vals.len() == 1 && values.shape().is_empty() { 0 } else { k }].clone();
        }
        Tensor::from_vec(dims, out)
    }
    crate::exec::tensor::with_element_type!(values, T => run::<T>(&dims, &offsets, values, default),
        resource => Err(KernelError::dtype(op, values.dtype(), "resources cannot be scattered")))
}

/// `Bincount(arr, size, weights)` and `DenseBincount(input, size, weights) {binary_output}`:
/// per row of a 1-D or 2-D input, the count (or the weight sum) of each value in `[0, size)`.
/// Empty weights count; `binary_output` records presence (1) instead.
pub(crate) fn bincount(
    op: &str,
    input: &Tensor,
    size: &Tensor,
    weights: &Tensor,
    binary: bool,
) -> Result<Tensor, KernelError> {
    let size = match (size.shape(), size.to_i64_vec(op, "size")?.as_slice()) {
        ([], &[s]) if s >= 0 => s as usize,
        _ => return Err(KernelError::invalid(op, "size must be a non-negative scalar")),
    };
    let (rows, width, two_d) = match input.shape() {
        &[n] => (1, n, false),
        &[r, n] if op == "DenseBincount" => (r, n, true),
        s => {
            return Err(KernelError::invalid(
                op,
                format!("the input must be a vector (or a matrix for DenseBincount), got shape {s:?}"),
            ))
        }
    };
    let values = input.to_i64_vec(op, "input")?;
    if let Some(v) = values.iter().find(|&&v| v < 0) {
        return Err(KernelError::invalid(op, format!("the input must be non-negative, got {v}")));
    }
    let weighted = !weights.is_empty();
    if weighted && weights.shape() != input.shape() {
        return Err(KernelError::invalid(
            op,
            format!("weights must be empty or shaped like the input {:?}, got {:?}", input.shape(), weights.shape()),
        ));
    }
    let shape = if two_d { vec![rows, size] } else { vec![size] };
    crate::exec::limits::checked_elements(op, weights.dtype(), &shape)?;
    let w = if weighted { super::math::cast(op, weights, DType::F64)?.to_vec::<f64>() } else { None };
    let mut acc = vec![0f64; rows * size];
    for r in 0..rows {
        for (k, &v) in values[r * width..(r + 1) * width].iter().enumerate() {
            let v = v as usize;
            if v < size {
                let slot = &mut acc[r * size + v];
                *slot = if binary { 1.0 } else { *slot + w.as_ref().map_or(1.0, |w| w[r * width + k]) };
            }
        }
    }
    let out = Tensor::from_vec(&shape, acc)?;
    match weights.dtype() {
        DType::F32 | DType::F64 | DType::I32 | DType::I64 => super::math::cast(op, &out, weights.dtype()),
        other => Err(KernelError::dtype(op, other, "weights must be f32, f64, i32 or i64")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cumulative_logsumexp_folds_from_negative_infinity() {
        let x = Tensor::vector(vec![0.0f64, 0.0, 2.0_f64.ln()]);
        let axis = Tensor::scalar(0i32);
        let got = cumulative_logsumexp("CumulativeLogsumexp", &x, &axis, false, false).unwrap();
        let got = got.to_vec::<f64>().unwrap();
        assert!((got[1] - 2.0_f64.ln()).abs() < 1e-12 && (got[2] - 4.0_f64.ln()).abs() < 1e-12, "{got:?}");
        let excl = cumulative_logsumexp("CumulativeLogsumexp", &x, &axis, true, true).unwrap();
        assert_eq!(excl.to_vec::<f64>().unwrap()[2], f64::NEG_INFINITY);
        assert!(cumulative_logsumexp("CumulativeLogsumexp", &Tensor::vector(vec![1i32]), &axis, false, false).is_err());
    }

    #[test]
    fn sparse_to_dense_checks_order_and_bounds() {
        let idx = Tensor::from_vec(&[2, 1], vec![3i64, 1]).unwrap();
        let shape = Tensor::vector(vec![4i64]);
        let vals = Tensor::vector(vec![1.0f32, 2.0]);
        let zero = Tensor::scalar(0.0f32);
        assert!(sparse_to_dense("SparseToDense", &idx, &shape, &vals, &zero, true).is_err());
        let got = sparse_to_dense("SparseToDense", &idx, &shape, &vals, &zero, false).unwrap();
        assert_eq!(got.to_vec::<f32>().unwrap(), vec![0.0, 2.0, 0.0, 1.0]);
        let far = Tensor::from_vec(&[1, 1], vec![4i64]).unwrap();
        assert!(sparse_to_dense("SparseToDense", &far, &shape, &Tensor::vector(vec![1.0f32]), &zero, false).is_err());
    }

    #[test]
    fn bincount_ignores_values_past_size_and_refuses_negatives() {
        let arr = Tensor::vector(vec![0i32, 2, 2, 9]);
        let got = bincount("Bincount", &arr, &Tensor::scalar(3i32), &Tensor::vector(Vec::<f32>::new()), false).unwrap();
        assert_eq!(got.to_vec::<f32>().unwrap(), vec![1.0, 0.0, 2.0]);
        let neg = Tensor::vector(vec![-1i32]);
        assert!(bincount("Bincount", &neg, &Tensor::scalar(3i32), &Tensor::vector(Vec::<f32>::new()), false).is_err());
    }
}
