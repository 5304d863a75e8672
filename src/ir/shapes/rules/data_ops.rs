//! Type rules of the data-dependent ops whose output shape comes from a
//! constant operand: `SparseToDense` (its `output_shape`), the bincounts
//! (their `size`) and `ParallelDynamicStitch` (its indices); and `ApproxTopK`.

use super::{dim, Args, OutType};

/// `SparseToDense(sparse_indices, output_shape, sparse_values, default_value)`.
pub(super) fn sparse_to_dense(a: &Args) -> Result<Vec<OutType>, String> {
    let shape = a.ints(1, "output_shape")?.iter().map(|&d| dim(d, "dimension")).collect::<Result<Vec<_>, _>>()?;
    Ok(vec![OutType::new(a.x(2)?.dtype, shape)])
}

/// `Bincount(arr, size, weights)` and `DenseBincount(input, size, weights)`:
/// `[size]` for a vector input, `[rows, size]` for a matrix (`DenseBincount` only).
pub(super) fn bincount(a: &Args) -> Result<Vec<OutType>, String> {
    let size = match a.ints(1, "size")? {
        [s] => dim(*s, "size")?,
        other => return Err(format!("size must be a scalar, got {} values", other.len())),
    };
    let shape = match a.x(0)?.shape {
        [_] => vec![size],
        [rows, _] if a.op == "DenseBincount" => vec![*rows, size],
        s => return Err(format!("the input must be a vector (or a matrix for DenseBincount), got shape {s:?}")),
    };
    Ok(vec![OutType::new(a.x(2)?.dtype, shape)])
}

/// `ParallelDynamicStitch(indices..., data...)`: one row per index up to the
/// largest (the indices must be constants), each shaped like the data's
/// dims past those of its indices.
pub(super) fn dynamic_stitch(a: &Args) -> Result<Vec<OutType>, String> {
    let half = a.operands.len() / 2;
    if half == 0 || !a.operands.len().is_multiple_of(2) {
        return Err(format!("expected n indices and n data operands, got {}", a.operands.len()));
    }
    let mut rows = 0usize;
    for i in 0..half {
        for &r in a.ints(i, "indices")? {
            rows = rows.max(dim(r, "index")? + 1);
        }
    }
    let (ids, data) = (a.x(0)?, a.x(half)?);
    let row = data.shape.get(ids.shape.len()..).ok_or("the data has fewer dims than its indices")?;
    let shape = std::iter::once(rows).chain(row.iter().copied()).collect();
    Ok(vec![OutType::new(data.dtype, shape)])
}

/// `ApproxTopK(input) {k}`: values shaped like the input with `k` along the
/// last axis, and i32 indices of the same shape.
pub(super) fn approx_top_k(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let n = *x.shape.last().ok_or("the input must have rank 1 or more")?;
    let d = a.int_attr("reduction_dimension", -1);
    if d != -1 && d != x.shape.len() as i64 - 1 {
        return Err(format!("reduction_dimension {d} is not the last axis; only the last axis is supported"));
    }
    let k = a.int_attr("k", 0);
    let k = usize::try_from(k).ok().filter(|&k| k <= n).ok_or_else(|| format!("k must be in [0, {n}], got {k}"))?;
    let mut shape = x.shape.to_vec();
    *shape.last_mut().ok_or("the input must have rank 1 or more")? = k;
    Ok(vec![OutType::new(x.dtype, shape.clone()), OutType::new(crate::ir::DType::I32, shape)])
}
