//! The first-version indexing ops, as their successors run them:
//! `Concat(concat_dim, values...)` is `ConcatV2` with the axis first,
//! `Gather(params, indices)` is `GatherV2` along axis 0, and
//! `Reverse(tensor, dims)` is `ReverseV2` over the axes whose flag in the
//! boolean `dims` (one per dimension) is set. Cost: that of the successor.
//!
//! Also the small indexing ops: `Roll`, `LinSpace`, `Empty`, `Bucketize`,
//! the row-wise binary searches `LowerBound`/`UpperBound`, `TopKV2`
//! (a stable sort of each row) and `ReverseSequence`. Cost:
//! linear in the output (the searches: output times the row length's
//! logarithm).

use crate::exec::error::KernelError;
use crate::exec::tensor::Tensor;
use crate::ir::DType;

/// `Concat(concat_dim, values...)`.
pub(crate) fn concat_v1(op: &str, inputs: &[Tensor]) -> Result<Tensor, KernelError> {
    let Some((axis, values)) = inputs.split_first() else {
        return Err(KernelError::invalid(op, "needs concat_dim and values"));
    };
    let mut rotated = values.to_vec();
    rotated.push(axis.clone());
    super::layout::concat(op, &rotated)
}

/// `Gather(params, indices)`.
pub(crate) fn gather_v1(op: &str, params: &Tensor, indices: &Tensor) -> Result<Tensor, KernelError> {
    super::gather::gather(op, params, indices, &Tensor::scalar(0i32), 0)
}

/// The axes `Reverse`'s boolean `dims` flags, checked against `rank`.
pub(crate) fn flagged_axes(op: &str, dims: &Tensor, rank: usize) -> Result<Vec<i64>, KernelError> {
    let flags = dims.to_vec::<bool>().ok_or_else(|| KernelError::dtype(op, dims.dtype(), "dims must be bool"))?;
    if dims.shape().len() != 1 || flags.len() != rank {
        return Err(KernelError::invalid(
            op,
            format!("dims must hold one flag per dimension ({rank}), got shape {:?}", dims.shape()),
        ));
    }
    Ok(flags.iter().enumerate().filter(|(_, &f)| f).map(|(a, _)| a as i64).collect())
}

/// `Reverse(tensor, dims)`.
pub(crate) fn reverse_v1(op: &str, x: &Tensor, dims: &Tensor) -> Result<Tensor, KernelError> {
    let axes = flagged_axes(op, dims, x.shape().len())?;
    super::shape::reverse(op, x, &Tensor::vector(axes))
}

/// `Roll(input, shift, axis)`: each element moves `shift` places along
/// `axis`, wrapping around; shifts of a repeated axis add up.
pub(crate) fn roll(op: &str, x: &Tensor, shift: &Tensor, axis: &Tensor) -> Result<Tensor, KernelError> {
    let (shifts, axes) = (shift.to_i64_vec(op, "shift")?, axis.to_i64_vec(op, "axis")?);
    if shifts.len() != axes.len() || shift.shape().len() > 1 || axis.shape().len() > 1 {
        return Err(KernelError::invalid(op, "shift and axis must be scalars or vectors of one length"));
    }
    let shape = x.shape().to_vec();
    let rank = shape.len() as i64;
    let mut total = vec![0i64; shape.len()];
    for (&s, &a) in shifts.iter().zip(&axes) {
        let d = if a < 0 { a + rank } else { a };
        if !(0..rank).contains(&d) {
            return Err(KernelError::invalid(op, format!("axis {a} is out of range for rank {rank}")));
        }
        total[d as usize] = total[d as usize].wrapping_add(s);
    }
    let mut out = x.clone();
    for (d, &s) in total.iter().enumerate() {
        let n = shape[d] as i64;
        if n == 0 || s.rem_euclid(n) == 0 {
            continue;
        }
        // Rolling by k puts the last k elements first.
        let k = s.rem_euclid(n);
        let cut = Tensor::vector(vec![n - k, k]);
        let parts = super::layout::split_v(op, &out, &cut, &Tensor::scalar(d as i64))?;
        let mut rotated = vec![parts[1].clone(), parts[0].clone()];
        rotated.push(Tensor::scalar(d as i64));
        out = super::layout::concat(op, &rotated)?;
    }
    Ok(out)
}

/// `LinSpace(start, stop, num)`: `num` evenly spaced values from `start`
/// to `stop`, the last exactly `stop`.
pub(crate) fn lin_space(op: &str, start: &Tensor, stop: &Tensor, num: &Tensor) -> Result<Tensor, KernelError> {
    let scalar = |t: &Tensor, what: &str| -> Result<f64, KernelError> {
        match super::math::cast(op, t, DType::F64)?.to_vec::<f64>().as_deref() {
            Some(&[v]) if t.shape().is_empty() => Ok(v),
            _ => Err(KernelError::invalid(op, format!("{what} must be a scalar"))),
        }
    };
    let (a, b) = (scalar(start, "start")?, scalar(stop, "stop")?);
    let n = match num.to_i64_vec(op, "num")?.as_slice() {
        &[n] if n > 0 && num.shape().is_empty() => n as usize,
        other => return Err(KernelError::invalid(op, format!("num must be a positive scalar, got {other:?}"))),
    };
    fn run<T: super::math::Num>(a: T, b: T, n: usize) -> Vec<T> {
        if n == 1 {
            return vec![a];
        }
        let step = b.sub(a).div(T::from_usize(n - 1));
        let mut v: Vec<T> = (0..n - 1).map(|i| a.add(step.mul(T::from_usize(i)))).collect();
        v.push(b);
        v
    }
    match start.dtype() {
        DType::F32 => Ok(Tensor::vector(run(a as f32, b as f32, n))),
        DType::F64 => Ok(Tensor::vector(run(a, b, n))),
        other => Err(KernelError::dtype(op, other, "start and stop must be f32 or f64")),
    }
}

/// `Empty(shape) {dtype}`: zeros (TensorFlow leaves them unset unless
/// `init`; XLA gives zeros).
pub(crate) fn empty(op: &str, shape: &Tensor, dtype: DType) -> Result<Tensor, KernelError> {
    let zero = super::math::cast(op, &Tensor::scalar(0i32), dtype)?;
    super::shape::fill(op, shape, &zero)
}

/// `Bucketize(input) {boundaries}`: per element, how many boundaries are
/// at or below it (i32).
pub(crate) fn bucketize(op: &str, x: &Tensor, boundaries: &[f32]) -> Result<Tensor, KernelError> {
    if boundaries.windows(2).any(|w| w[0] > w[1]) {
        return Err(KernelError::invalid(op, "boundaries must be sorted"));
    }
    if !matches!(x.dtype(), DType::F32 | DType::F64 | DType::I32 | DType::I64) {
        return Err(KernelError::dtype(op, x.dtype(), "input must be f32, f64, i32 or i64"));
    }
    let values = super::math::cast(op, x, DType::F64)?.to_vec::<f64>().unwrap_or_default();
    let out: Vec<i32> = values.iter().map(|&v| boundaries.partition_point(|&b| f64::from(b) <= v) as i32).collect();
    Tensor::from_vec(x.shape(), out)
}

/// `LowerBound`/`UpperBound(sorted_inputs, values) {out_type}`: per row,
/// how many sorted inputs are below each value (at or below it for the
/// upper bound).
pub(crate) fn search_sorted(
    op: &str,
    sorted: &Tensor,
    values: &Tensor,
    upper: bool,
    out: DType,
) -> Result<Tensor, KernelError> {
    let (rows, n, m) = match (sorted.shape(), values.shape()) {
        (&[r, n], &[r2, m]) if r == r2 => (r, n, m),
        (s, v) => {
            return Err(KernelError::invalid(
                op,
                format!("sorted_inputs {s:?} and values {v:?} must be [B, N] and [B, M]"),
            ))
        }
    };
    if sorted.dtype() != values.dtype() {
        return Err(KernelError::invalid(op, "sorted_inputs and values must have one dtype"));
    }
    let wide = |t: &Tensor| -> Result<Vec<f64>, KernelError> {
        Ok(super::math::cast(op, t, DType::F64)?.to_vec::<f64>().unwrap_or_default())
    };
    let (s, v) = (wide(sorted)?, wide(values)?);
    let mut idx = Vec::with_capacity(rows * m);
    for r in 0..rows {
        let row = &s[r * n..(r + 1) * n];
        for &x in &v[r * m..(r + 1) * m] {
            idx.push(if upper { row.partition_point(|&e| e <= x) } else { row.partition_point(|&e| e < x) } as i64);
        }
    }
    let t = Tensor::from_vec(&[rows, m], idx)?;
    match out {
        DType::I64 => Ok(t),
        DType::I32 => super::math::cast(op, &t, DType::I32),
        other => Err(KernelError::dtype(op, other, "out_type must be i32 or i64")),
    }
}

/// `TopKV2(input, k) {index_type}`: along the last dimension, the `k`
/// largest values in descending order and their indices (i32 or i64);
/// equal values keep their order, so the lower index comes first.
pub(crate) fn top_k(op: &str, x: &Tensor, k: &Tensor, index_type: DType) -> Result<Vec<Tensor>, KernelError> {
    let shape = x.shape().to_vec();
    let n = *shape.last().ok_or_else(|| KernelError::invalid(op, "input must have rank 1 or more"))?;
    let k = match k.to_i64_vec(op, "k")?.as_slice() {
        &[k] if k >= 0 && k as usize <= n => k as usize,
        other => return Err(KernelError::invalid(op, format!("k must be a scalar in [0, {n}], got {other:?}"))),
    };
    let rows = x.len().checked_div(n).unwrap_or(0);
    let mut out_shape = shape.clone();
    *out_shape.last_mut().expect("rank checked above") = k;
    fn run<T: super::math::Num>(
        x: &Tensor,
        rows: usize,
        n: usize,
        k: usize,
        out_shape: &[usize],
    ) -> Result<(Tensor, Vec<i64>), KernelError> {
        let flat = x.to_vec::<T>().expect("dispatched on this dtype");
        let (mut values, mut picks) = (Vec::with_capacity(rows * k), Vec::with_capacity(rows * k));
        let mut order: Vec<usize> = Vec::with_capacity(n);
        for r in 0..rows {
            let row = &flat[r * n..(r + 1) * n];
            order.clear();
            order.extend(0..n);
            // A stable sort: ties keep the lower index first.
            order.sort_by(|&a, &b| row[b].partial_cmp(&row[a]).unwrap_or(std::cmp::Ordering::Equal));
            for &i in &order[..k] {
                values.push(row[i]);
                picks.push(i as i64);
            }
        }
        Ok((Tensor::from_vec(out_shape, values)?, picks))
    }
    let (values, picks) = match x {
        Tensor::F32(_) => run::<f32>(x, rows, n, k, &out_shape)?,
        Tensor::F64(_) => run::<f64>(x, rows, n, k, &out_shape)?,
        Tensor::I32(_) => run::<i32>(x, rows, n, k, &out_shape)?,
        Tensor::I64(_) => run::<i64>(x, rows, n, k, &out_shape)?,
        other => return Err(KernelError::dtype(op, other.dtype(), "a numeric input is required")),
    };
    let indices = Tensor::from_vec(&out_shape, picks)?;
    let indices = match index_type {
        DType::I64 => indices,
        DType::I32 => super::math::cast(op, &indices, DType::I32)?,
        other => return Err(KernelError::dtype(op, other, "index_type must be i32 or i64")),
    };
    Ok(vec![values, indices])
}

/// `ReverseSequence(input, seq_lengths) {seq_dim, batch_dim}`: for each
/// index `b` along `batch_dim`, the first `seq_lengths[b]` elements along
/// `seq_dim` reversed and the rest kept. A length past the dimension is an
/// error, as on TensorFlow's CPU kernel.
pub(crate) fn reverse_sequence(
    op: &str,
    x: &Tensor,
    lengths: &Tensor,
    seq_dim: i64,
    batch_dim: i64,
) -> Result<Tensor, KernelError> {
    let shape = x.shape().to_vec();
    let rank = shape.len() as i64;
    let norm = |d: i64, what: &str| -> Result<usize, KernelError> {
        let a = if d < 0 { d + rank } else { d };
        usize::try_from(a)
            .ok()
            .filter(|&a| a < shape.len())
            .ok_or_else(|| KernelError::invalid(op, format!("{what} {d} is out of range for rank {rank}")))
    };
    let (sd, bd) = (norm(seq_dim, "seq_dim")?, norm(batch_dim, "batch_dim")?);
    if sd == bd {
        return Err(KernelError::invalid(op, "seq_dim and batch_dim must differ"));
    }
    let lens = lengths.to_i64_vec(op, "seq_lengths")?;
    if lengths.shape().len() != 1 || lens.len() != shape[bd] {
        return Err(KernelError::invalid(op, format!("seq_lengths must be a vector of {} lengths", shape[bd])));
    }
    if let Some(&bad) = lens.iter().find(|&&l| l < 0 || l as usize > shape[sd]) {
        return Err(KernelError::invalid(op, format!("a sequence length {bad} is outside [0, {}]", shape[sd])));
    }
    let mut strides = vec![1usize; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    let src: Vec<usize> = (0..x.len())
        .map(|flat| {
            let (s, b) = ((flat / strides[sd]) % shape[sd], (flat / strides[bd]) % shape[bd]);
            let len = lens[b] as usize;
            if s < len {
                flat - s * strides[sd] + (len - 1 - s) * strides[sd]
            } else {
                flat
            }
        })
        .collect();
    fn run<T: crate::exec::tensor::Element>(x: &Tensor, src: &[usize], shape: &[usize]) -> Result<Tensor, KernelError> {
        let flat = x.to_vec::<T>().expect("dispatched on this dtype");
        Tensor::from_vec(shape, src.iter().map(|&i| flat[i].clone()).collect())
    }
    crate::exec::tensor::with_element_type!(x, T => run::<T>(x, &src, &shape), resource => Err(KernelError::dtype(op, DType::Resource, "resource handles have no elements")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_versions_run_as_their_successors() {
        let a = Tensor::from_vec(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
        let b = Tensor::from_vec(&[2, 1], vec![5.0f32, 6.0]).unwrap();
        let c = concat_v1("Concat", &[Tensor::scalar(1i32), a.clone(), b]).unwrap();
        assert_eq!(c.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 5.0, 3.0, 4.0, 6.0]);
        let g = gather_v1("Gather", &a, &Tensor::vector(vec![1i64, 1, 0])).unwrap();
        assert_eq!(g.to_vec::<f32>().unwrap(), vec![3.0, 4.0, 3.0, 4.0, 1.0, 2.0]);
        let r = reverse_v1("Reverse", &a, &Tensor::vector(vec![false, true])).unwrap();
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![2.0, 1.0, 4.0, 3.0]);
        assert!(reverse_v1("Reverse", &a, &Tensor::vector(vec![true])).is_err());
    }

    #[test]
    fn small_indexing_ops() {
        let x = Tensor::from_vec(&[2, 3], vec![0i32, 1, 2, 3, 4, 5]).unwrap();
        let r = roll("Roll", &x, &Tensor::vector(vec![1i32, -2]), &Tensor::vector(vec![1i32, 1])).unwrap();
        assert_eq!(r.to_vec::<i32>().unwrap(), vec![1, 2, 0, 4, 5, 3]);
        let l = lin_space("LinSpace", &Tensor::scalar(1.0f32), &Tensor::scalar(2.0f32), &Tensor::scalar(5i32)).unwrap();
        assert_eq!(l.to_vec::<f32>().unwrap(), vec![1.0, 1.25, 1.5, 1.75, 2.0]);
        let b = bucketize("Bucketize", &Tensor::vector(vec![-1.0f32, 0.0, 2.5, 9.0]), &[0.0, 2.5, 3.0]).unwrap();
        assert_eq!(b.to_vec::<i32>().unwrap(), vec![0, 1, 2, 3]);
        let sorted = Tensor::from_vec(&[1, 4], vec![1.0f32, 2.0, 2.0, 5.0]).unwrap();
        let values = Tensor::from_vec(&[1, 3], vec![2.0f32, 0.0, 6.0]).unwrap();
        let lo = search_sorted("LowerBound", &sorted, &values, false, DType::I32).unwrap();
        let hi = search_sorted("UpperBound", &sorted, &values, true, DType::I64).unwrap();
        assert_eq!((lo.to_vec::<i32>().unwrap(), hi.to_vec::<i64>().unwrap()), (vec![1, 0, 4], vec![3, 0, 4]));
        let t =
            top_k("TopKV2", &Tensor::vector(vec![3.0f32, 5.0, 3.0, 1.0]), &Tensor::scalar(3i32), DType::I32).unwrap();
        assert_eq!(
            (t[0].to_vec::<f32>().unwrap(), t[1].to_vec::<i32>().unwrap()),
            (vec![5.0, 3.0, 3.0], vec![1, 0, 2])
        );
        let seqs = Tensor::from_vec(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let rs = reverse_sequence("ReverseSequence", &seqs, &Tensor::vector(vec![2i64, 3]), 1, 0).unwrap();
        assert_eq!(rs.to_vec::<f32>().unwrap(), vec![2.0, 1.0, 3.0, 6.0, 5.0, 4.0]);
        assert!(reverse_sequence("ReverseSequence", &seqs, &Tensor::vector(vec![4i64, 0]), 1, 0).is_err());
        let e = empty("Empty", &Tensor::vector(vec![2i32, 1]), DType::F64).unwrap();
        assert_eq!(e.to_vec::<f64>().unwrap(), vec![0.0, 0.0]);
    }
}
