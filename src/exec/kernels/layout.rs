//! Shape and layout ops of the TensorFlow shape family that `shape` lacks:
//! `ExpandDims`, `Squeeze`, `ConcatV2`, `ConcatOffset`, `Unpack`, `Split`,
//! `SplitV`, `Slice`, `StridedSlice` (every mask) and `StridedSliceGrad`,
//! `ShapeN`, `Select`, `Where`, `Pad`/`PadV2`, `BroadcastArgs`.
//!
//! All work on every dtype with elements. Slices are computed as one index
//! list per input axis and copied with a flat-offset odometer: linear in
//! the output size.

use ndarray::{ArcArray, Axis, IxDyn};

use super::math::broadcast_shape;
use crate::exec::error::KernelError;
use crate::exec::tensor::{with_element_type, Element, Tensor};
use crate::ir::DType;

fn no_elements(op: &str) -> KernelError {
    KernelError::dtype(op, DType::Resource, "resource handles have no elements")
}

fn scalar_i64(op: &str, t: &Tensor, what: &str) -> Result<i64, KernelError> {
    match t.to_i64_vec(op, what)?.as_slice() {
        &[v] => Ok(v),
        other => Err(KernelError::invalid(op, format!("{what} must be a scalar, got {other:?}"))),
    }
}

/// `axis` normalised into `[0, rank)` (negative counts from the end).
fn axis_in(op: &str, axis: i64, rank: usize) -> Result<usize, KernelError> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(KernelError::invalid(op, format!("axis {axis} is out of range for rank {rank}")));
    }
    Ok(if axis < 0 { axis + r } else { axis } as usize)
}

/// A shape vector in the integer dtype of `like` (i32 unless it is i64).
fn shape_vector(like: DType, dims: &[usize]) -> Tensor {
    match like {
        DType::I64 => Tensor::vector(dims.iter().map(|&d| d as i64).collect()),
        _ => Tensor::vector(dims.iter().map(|&d| d as i32).collect()),
    }
}

fn reshaped(op: &str, x: &Tensor, shape: &[usize]) -> Result<Tensor, KernelError> {
    super::shape::reshape(op, x, &Tensor::vector(shape.iter().map(|&d| d as i64).collect()))
}

/// `ExpandDims(input, axis)`.
pub(crate) fn expand_dims(op: &str, x: &Tensor, axis: &Tensor) -> Result<Tensor, KernelError> {
    let rank = x.shape().len();
    let a = axis_in(op, scalar_i64(op, axis, "axis")?, rank + 1)?;
    let mut shape = x.shape().to_vec();
    shape.insert(a, 1);
    reshaped(op, x, &shape)
}

/// `Squeeze(input) {squeeze_dims}`: drops the listed size-1 axes, or all of them when none are listed.
pub(crate) fn squeeze(op: &str, x: &Tensor, dims: &[i64]) -> Result<Tensor, KernelError> {
    let shape = x.shape();
    let drop: Vec<usize> = if dims.is_empty() {
        (0..shape.len()).filter(|&i| shape[i] == 1).collect()
    } else {
        dims.iter().map(|&d| axis_in(op, d, shape.len())).collect::<Result<_, _>>()?
    };
    if let Some(&bad) = drop.iter().find(|&&i| shape[i] != 1) {
        return Err(KernelError::invalid(op, format!("cannot squeeze axis {bad} of size {}", shape[bad])));
    }
    let kept: Vec<usize> = (0..shape.len()).filter(|i| !drop.contains(i)).map(|i| shape[i]).collect();
    reshaped(op, x, &kept)
}

/// `ConcatV2(values..., axis)`.
pub(crate) fn concat(op: &str, inputs: &[Tensor]) -> Result<Tensor, KernelError> {
    let Some((axis, values)) = inputs.split_last() else {
        return Err(KernelError::invalid(op, "needs values and an axis"));
    };
    let first = values.first().ok_or_else(|| KernelError::invalid(op, "needs at least one value"))?;
    let a = axis_in(op, scalar_i64(op, axis, "axis")?, first.shape().len())?;
    fn run<T: Element>(op: &str, values: &[Tensor], a: usize) -> Result<Tensor, KernelError> {
        let views = values
            .iter()
            .map(|t| t.view::<T>().ok_or_else(|| KernelError::invalid(op, "values must have one dtype")))
            .collect::<Result<Vec<_>, _>>()?;
        let out = ndarray::concatenate(Axis(a), &views).map_err(|e| KernelError::invalid(op, e.to_string()))?;
        Ok(Tensor::from_array(out))
    }
    with_element_type!(first, T => run::<T>(op, values, a), resource => Err(no_elements(op)))
}

/// `ConcatOffset(concat_dim, shapes...)`: where each input starts in the concatenation.
pub(crate) fn concat_offset(op: &str, inputs: &[Tensor]) -> Result<Vec<Tensor>, KernelError> {
    let Some((dim, shapes)) = inputs.split_first() else {
        return Err(KernelError::invalid(op, "needs concat_dim and shapes"));
    };
    let first = shapes.first().ok_or_else(|| KernelError::invalid(op, "needs at least one shape"))?;
    let rank = first.len();
    let a = axis_in(op, scalar_i64(op, dim, "concat_dim")?, rank)?;
    let mut offset = 0i64;
    let mut out = Vec::with_capacity(shapes.len());
    for s in shapes {
        let dims = s.to_i64_vec(op, "shape")?;
        if dims.len() != rank {
            return Err(KernelError::invalid(op, "shapes must have one rank"));
        }
        let mut o = vec![0i64; rank];
        o[a] = offset;
        offset += dims[a];
        out.push(match s.dtype() {
            DType::I64 => Tensor::vector(o),
            _ => Tensor::vector(o.into_iter().map(|v| v as i32).collect()),
        });
    }
    Ok(out)
}

/// `Unpack(value) {num, axis}`.
pub(crate) fn unpack(op: &str, x: &Tensor, axis: i64) -> Result<Vec<Tensor>, KernelError> {
    let a = axis_in(op, axis, x.shape().len())?;
    fn run<T: Element>(x: &Tensor, a: usize) -> Vec<Tensor> {
        let arr = x.array::<T>().expect("dispatched on this dtype");
        arr.axis_iter(Axis(a)).map(|v| Tensor::from_array(v.to_owned())).collect()
    }
    Ok(with_element_type!(x, T => run::<T>(x, a), resource => return Err(no_elements(op))))
}

/// Splits `x` along `axis` into pieces of `sizes`.
fn split_sizes(op: &str, x: &Tensor, a: usize, sizes: &[usize]) -> Result<Vec<Tensor>, KernelError> {
    fn run<T: Element>(x: &Tensor, a: usize, sizes: &[usize]) -> Vec<Tensor> {
        let arr = x.array::<T>().expect("dispatched on this dtype");
        let mut start = 0;
        sizes
            .iter()
            .map(|&n| {
                let piece = arr.slice_axis(Axis(a), ndarray::Slice::from(start..start + n)).to_owned();
                start += n;
                Tensor::from_array(piece)
            })
            .collect()
    }
    Ok(with_element_type!(x, T => run::<T>(x, a, sizes), resource => return Err(no_elements(op))))
}

/// `Split(axis, value) {num_split}`.
pub(crate) fn split(op: &str, axis: &Tensor, x: &Tensor, num: i64) -> Result<Vec<Tensor>, KernelError> {
    let a = axis_in(op, scalar_i64(op, axis, "axis")?, x.shape().len())?;
    let n = usize::try_from(num).ok().filter(|&n| n > 0 && x.shape()[a].is_multiple_of(n)).ok_or_else(|| {
        KernelError::invalid(op, format!("num_split {num} does not divide dimension {} of size {}", a, x.shape()[a]))
    })?;
    split_sizes(op, x, a, &vec![x.shape()[a] / n; n])
}

/// `SplitV(value, size_splits, axis)`; one size may be -1 (the rest).
pub(crate) fn split_v(op: &str, x: &Tensor, sizes: &Tensor, axis: &Tensor) -> Result<Vec<Tensor>, KernelError> {
    let a = axis_in(op, scalar_i64(op, axis, "axis")?, x.shape().len())?;
    let mut sizes = sizes.to_i64_vec(op, "size_splits")?;
    let total = x.shape()[a] as i64;
    let known: i64 = sizes.iter().filter(|&&s| s >= 0).sum();
    let unknown = sizes.iter().filter(|&&s| s < 0).count();
    if unknown > 1 || sizes.iter().any(|&s| s < -1) || known > total || (unknown == 0 && known != total) {
        return Err(KernelError::invalid(op, format!("size_splits {sizes:?} do not split size {total}")));
    }
    for s in sizes.iter_mut().filter(|s| **s < 0) {
        *s = total - known;
    }
    split_sizes(op, x, a, &sizes.iter().map(|&s| s as usize).collect::<Vec<_>>())
}

/// Copies the elements of `x` at the cartesian product of `index` lists (one per axis), row-major.
fn gather_indices<T: Clone>(a: &ArcArray<T, IxDyn>, index: &[Vec<usize>]) -> Vec<T> {
    let std = a.as_standard_layout();
    let flat = std.as_slice().expect("standard layout");
    let mut out = Vec::with_capacity(index.iter().map(Vec::len).product());
    for_each_offset(a.shape(), index, |off| out.push(flat[off].clone()));
    out
}

/// Calls `f` with the flat row-major offset (in `shape`) of each point of the product of `index`.
fn for_each_offset(shape: &[usize], index: &[Vec<usize>], mut f: impl FnMut(usize)) {
    if index.iter().any(Vec::is_empty) {
        return;
    }
    let rank = shape.len();
    let mut strides = vec![1usize; rank];
    for d in (0..rank.saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    let mut pos = vec![0usize; rank];
    loop {
        f((0..rank).map(|d| index[d][pos[d]] * strides[d]).sum());
        let mut d = rank;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            pos[d] += 1;
            if pos[d] < index[d].len() {
                break;
            }
            pos[d] = 0;
        }
    }
}

/// `Slice(input, begin, size)`; a size of -1 takes the rest of the axis.
pub(crate) fn slice(op: &str, x: &Tensor, begin: &Tensor, size: &Tensor) -> Result<Tensor, KernelError> {
    let (b, s) = (begin.to_i64_vec(op, "begin")?, size.to_i64_vec(op, "size")?);
    let shape = x.shape();
    if b.len() != shape.len() || s.len() != shape.len() {
        return Err(KernelError::invalid(op, format!("begin and size must have {} entries", shape.len())));
    }
    let mut index = Vec::with_capacity(shape.len());
    for d in 0..shape.len() {
        let n = shape[d] as i64;
        let len = if s[d] == -1 { n - b[d] } else { s[d] };
        if b[d] < 0 || len < 0 || b[d] + len > n {
            return Err(KernelError::invalid(
                op,
                format!("slice [{}, +{}) is outside axis {d} of size {n}", b[d], len),
            ));
        }
        index.push((b[d]..b[d] + len).map(|i| i as usize).collect::<Vec<_>>());
    }
    let out_shape: Vec<usize> = index.iter().map(Vec::len).collect();
    with_element_type!(x, T => Tensor::from_vec(&out_shape, gather_indices(x.array::<T>().expect("dtype"), &index)),
        resource => Err(no_elements(op)))
}

/// The masks of `StridedSlice`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SliceMasks {
    pub begin: i64,
    pub end: i64,
    pub ellipsis: i64,
    pub new_axis: i64,
    pub shrink_axis: i64,
}

/// A strided slice resolved against an input shape: one index list per input axis, and the output shape.
struct StridedPlan {
    index: Vec<Vec<usize>>,
    out_shape: Vec<usize>,
}

fn plan_strided(
    op: &str,
    shape: &[usize],
    begin: &[i64],
    end: &[i64],
    strides: &[i64],
    m: SliceMasks,
) -> Result<StridedPlan, KernelError> {
    let n = begin.len();
    if end.len() != n || strides.len() != n {
        return Err(KernelError::invalid(op, "begin, end and strides must have one length"));
    }
    let bit = |mask: i64, i: usize| i < 63 && (mask >> i) & 1 == 1;
    let ellipsis_at = (0..n).find(|&i| bit(m.ellipsis, i));
    if (0..n).filter(|&i| bit(m.ellipsis, i)).count() > 1 {
        return Err(KernelError::invalid(op, "only one ellipsis is allowed"));
    }
    let rank = shape.len();
    // Entries that consume an input axis, other than the ellipsis.
    let consuming = (0..n).filter(|&i| !bit(m.ellipsis, i) && !bit(m.new_axis, i)).count();
    if consuming > rank {
        return Err(KernelError::invalid(op, format!("{consuming} slice entries for rank {rank}")));
    }
    let mut index = Vec::with_capacity(rank);
    let mut out_shape = Vec::new();
    let mut axis = 0usize;
    let full = |axis: usize, index: &mut Vec<Vec<usize>>, out_shape: &mut Vec<usize>| {
        index.push((0..shape[axis]).collect());
        out_shape.push(shape[axis]);
    };
    for i in 0..n {
        if bit(m.ellipsis, i) {
            let covered = rank - consuming;
            for _ in 0..covered {
                full(axis, &mut index, &mut out_shape);
                axis += 1;
            }
            continue;
        }
        if bit(m.new_axis, i) {
            out_shape.push(1);
            continue;
        }
        let size = shape[axis] as i64;
        let s = strides[i];
        if s == 0 {
            return Err(KernelError::invalid(op, "strides must not be zero"));
        }
        if bit(m.shrink_axis, i) {
            let b = if begin[i] < 0 { begin[i] + size } else { begin[i] };
            if !(0..size).contains(&b) {
                return Err(KernelError::invalid(op, format!("index {} is out of range for size {size}", begin[i])));
            }
            index.push(vec![b as usize]);
            axis += 1;
            continue;
        }
        let norm = |v: i64, lo: i64, hi: i64| (if v < 0 { v + size } else { v }).clamp(lo, hi);
        let (b, e) = if s > 0 {
            let b = if bit(m.begin, i) { 0 } else { norm(begin[i], 0, size) };
            let e = if bit(m.end, i) { size } else { norm(end[i], 0, size) };
            (b, e)
        } else {
            let b = if bit(m.begin, i) { size - 1 } else { norm(begin[i], -1, size - 1) };
            let e = if bit(m.end, i) { -1 } else { norm(end[i], -1, size - 1) };
            (b, e)
        };
        let list: Vec<usize> = if s > 0 {
            (b..e).step_by(s as usize).map(|v| v as usize).collect()
        } else {
            let mut v = Vec::new();
            let mut k = b;
            while k > e {
                v.push(k as usize);
                k += s;
            }
            v
        };
        out_shape.push(list.len());
        index.push(list);
        axis += 1;
    }
    // Without an ellipsis, the remaining axes are taken whole.
    if ellipsis_at.is_none() {
        while axis < rank {
            full(axis, &mut index, &mut out_shape);
            axis += 1;
        }
    }
    Ok(StridedPlan { index, out_shape })
}

/// `StridedSlice(input, begin, end, strides) {masks}`.
pub(crate) fn strided_slice(op: &str, inputs: &[Tensor], masks: SliceMasks) -> Result<Tensor, KernelError> {
    let [x, begin, end, strides] = inputs else {
        return Err(KernelError::invalid(op, format!("expected 4 inputs, got {}", inputs.len())));
    };
    let plan = plan_strided(
        op,
        x.shape(),
        &begin.to_i64_vec(op, "begin")?,
        &end.to_i64_vec(op, "end")?,
        &strides.to_i64_vec(op, "strides")?,
        masks,
    )?;
    with_element_type!(x, T => Tensor::from_vec(&plan.out_shape, gather_indices(x.array::<T>().expect("dtype"), &plan.index)),
        resource => Err(no_elements(op)))
}

/// `StridedSliceGrad(shape, begin, end, strides, dy) {masks}`: `dy` placed where the slice took its elements.
pub(crate) fn strided_slice_grad(op: &str, inputs: &[Tensor], masks: SliceMasks) -> Result<Tensor, KernelError> {
    let [shape, begin, end, strides, dy] = inputs else {
        return Err(KernelError::invalid(op, format!("expected 5 inputs, got {}", inputs.len())));
    };
    let dims: Vec<usize> = shape
        .to_i64_vec(op, "shape")?
        .into_iter()
        .map(|d| usize::try_from(d).map_err(|_| KernelError::invalid(op, "shape must be non-negative")))
        .collect::<Result<_, _>>()?;
    let plan = plan_strided(
        op,
        &dims,
        &begin.to_i64_vec(op, "begin")?,
        &end.to_i64_vec(op, "end")?,
        &strides.to_i64_vec(op, "strides")?,
        masks,
    )?;
    if plan.out_shape.iter().product::<usize>() != dy.len() {
        return Err(KernelError::invalid(op, format!("dy has shape {:?}, the slice {:?}", dy.shape(), plan.out_shape)));
    }
    fn run<T: Element + Default>(dims: &[usize], plan: &StridedPlan, dy: &Tensor) -> Result<Tensor, KernelError> {
        let values = dy.to_vec::<T>().expect("dispatched on this dtype");
        let mut out = vec![T::default(); dims.iter().product()];
        let mut k = 0;
        for_each_offset(dims, &plan.index, |off| {
            out[off] = values[k].clone();
            k += 1;
        });
        Tensor::from_vec(dims, out)
    }
    with_element_type!(dy, T => run::<T>(&dims, &plan, dy), resource => Err(no_elements(op)))
}

/// `Select(condition, t, e)` (v1): the condition has the shape of `t`, or is a vector over its first axis.
pub(crate) fn select_v1(op: &str, c: &Tensor, t: &Tensor, e: &Tensor) -> Result<Tensor, KernelError> {
    if c.shape().len() == 1 && t.shape().len() > 1 {
        let mut shape = vec![1usize; t.shape().len()];
        shape[0] = c.len();
        return super::shape::select(op, &reshaped(op, c, &shape)?, t, e);
    }
    if !c.shape().is_empty() && c.shape() != t.shape() {
        return Err(KernelError::invalid(op, format!("condition {:?} does not match {:?}", c.shape(), t.shape())));
    }
    super::shape::select(op, c, t, e)
}

/// `Where(condition)`: the coordinates (i64, one row each) of its true (nonzero) elements, row-major.
pub(crate) fn where_true(op: &str, c: &Tensor) -> Result<Tensor, KernelError> {
    let truth = super::dtypes::cast(op, c, DType::Bool)?;
    let a = truth.array::<bool>().ok_or_else(|| KernelError::dtype(op, c.dtype(), "cannot test for truth"))?;
    let rank = a.ndim();
    let mut coords = Vec::new();
    let mut rows = 0;
    for (idx, &v) in a.indexed_iter() {
        if v {
            coords.extend((0..rank).map(|d| idx[d] as i64));
            rows += 1;
        }
    }
    Tensor::from_vec(&[rows, rank], coords)
}

/// `Pad(input, paddings)` / `PadV2(input, paddings, constant_values)`.
pub(crate) fn pad(op: &str, x: &Tensor, paddings: &Tensor, value: Option<&Tensor>) -> Result<Tensor, KernelError> {
    let p = paddings.to_i64_vec(op, "paddings")?;
    let rank = x.shape().len();
    if paddings.shape() != [rank, 2] || p.iter().any(|&v| v < 0) {
        return Err(KernelError::invalid(op, format!("paddings must be non-negative with shape [{rank}, 2]")));
    }
    let out_shape: Vec<usize> = (0..rank).map(|d| x.shape()[d] + (p[2 * d] + p[2 * d + 1]) as usize).collect();
    let index: Vec<Vec<usize>> =
        (0..rank).map(|d| (0..x.shape()[d]).map(|i| i + p[2 * d] as usize).collect()).collect();
    fn run<T: Element + Default>(
        op: &str,
        x: &Tensor,
        value: Option<&Tensor>,
        out_shape: &[usize],
        index: &[Vec<usize>],
    ) -> Result<Tensor, KernelError> {
        let fill = match value {
            Some(v) => super::elementwise::same::<T>(op, v, x)?
                .iter()
                .next()
                .cloned()
                .ok_or_else(|| KernelError::invalid(op, "constant_values is empty"))?,
            None => T::default(),
        };
        let values = x.to_vec::<T>().expect("dispatched on this dtype");
        let mut out = vec![fill; out_shape.iter().product()];
        let mut k = 0;
        for_each_offset(out_shape, index, |off| {
            out[off] = values[k].clone();
            k += 1;
        });
        Tensor::from_vec(out_shape, out)
    }
    with_element_type!(x, T => run::<T>(op, x, value, &out_shape, &index), resource => Err(no_elements(op)))
}

/// `ShapeN(inputs...) {out_type}`.
pub(crate) fn shape_n(inputs: &[Tensor], out: DType) -> Vec<Tensor> {
    inputs.iter().map(|t| shape_vector(out, t.shape())).collect()
}

/// `BroadcastArgs(s0, s1)`: the broadcast shape.
pub(crate) fn broadcast_args(op: &str, s0: &Tensor, s1: &Tensor) -> Result<Tensor, KernelError> {
    let dims = |t: &Tensor| -> Result<Vec<usize>, KernelError> {
        t.to_i64_vec(op, "shape")?
            .into_iter()
            .map(|d| usize::try_from(d).map_err(|_| KernelError::invalid(op, "shape must be non-negative")))
            .collect()
    };
    Ok(shape_vector(s0.dtype(), &broadcast_shape(op, &dims(s0)?, &dims(s1)?)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iota(shape: &[usize]) -> Tensor {
        let n = shape.iter().product::<usize>();
        Tensor::from_vec(shape, (0..n as i32).collect()).unwrap()
    }

    fn ints(t: &Tensor) -> Vec<i32> {
        t.to_vec::<i32>().unwrap()
    }

    fn v(x: &[i32]) -> Tensor {
        Tensor::vector(x.to_vec())
    }

    #[test]
    fn strided_slice_masks() {
        let x = iota(&[2, 3, 4]);
        // x[:, 1:, ::2]
        let m = SliceMasks { begin: 0b101, end: 0b111, ..SliceMasks::default() };
        let out = strided_slice("SS", &[x.clone(), v(&[0, 1, 0]), v(&[0, 0, 0]), v(&[1, 1, 2])], m).unwrap();
        assert_eq!(out.shape(), &[2, 2, 2]);
        assert_eq!(ints(&out), vec![4, 6, 8, 10, 16, 18, 20, 22]);
        // x[::-1, -2:, 3]: reversed, last two rows, shrink the last axis.
        let m = SliceMasks { begin: 0b001, end: 0b011, shrink_axis: 0b100, ..SliceMasks::default() };
        let out = strided_slice("SS", &[x.clone(), v(&[0, -2, 3]), v(&[0, 0, 4]), v(&[-1, 1, 1])], m).unwrap();
        assert_eq!(out.shape(), &[2, 2]);
        assert_eq!(ints(&out), vec![19, 23, 7, 11]);
        // x[tf.newaxis, ..., 1:3]
        let m = SliceMasks { new_axis: 0b001, ellipsis: 0b010, ..SliceMasks::default() };
        let out = strided_slice("SS", &[x.clone(), v(&[0, 0, 1]), v(&[0, 0, 3]), v(&[1, 1, 1])], m).unwrap();
        assert_eq!(out.shape(), &[1, 2, 3, 2]);
        assert_eq!(ints(&out)[..4], [1, 2, 5, 6]);
        let g = strided_slice_grad(
            "SSG",
            &[v(&[2, 3, 4]), v(&[0, 1, 0]), v(&[0, 0, 0]), v(&[1, 1, 2]), iota(&[2, 2, 2])],
            SliceMasks { begin: 0b101, end: 0b111, ..SliceMasks::default() },
        )
        .unwrap();
        assert_eq!(ints(&g)[4..8], [0, 0, 1, 0]);
    }

    #[test]
    fn split_concat_pad_where() {
        let x = iota(&[2, 4]);
        let parts = split("Split", &Tensor::scalar(1i32), &x, 2).unwrap();
        assert_eq!(ints(&parts[1]), vec![2, 3, 6, 7]);
        let parts = split_v("SplitV", &x, &v(&[1, -1]), &Tensor::scalar(1i32)).unwrap();
        assert_eq!(parts[1].shape(), &[2, 3]);
        let back = concat("ConcatV2", &[parts[0].clone(), parts[1].clone(), Tensor::scalar(-1i32)]).unwrap();
        assert_eq!(back, x);
        let p = pad("Pad", &v(&[1, 2]), &Tensor::from_vec(&[1, 2], vec![1i32, 2]).unwrap(), None).unwrap();
        assert_eq!(ints(&p), vec![0, 1, 2, 0, 0]);
        let w = where_true("Where", &Tensor::from_vec(&[2, 2], vec![false, true, true, false]).unwrap()).unwrap();
        assert_eq!(w.to_vec::<i64>().unwrap(), vec![0, 1, 1, 0]);
        let s = slice("Slice", &x, &v(&[1, 1]), &v(&[1, -1])).unwrap();
        assert_eq!(ints(&s), vec![5, 6, 7]);
        assert!(slice("Slice", &x, &v(&[1, 1]), &v(&[2, 1])).is_err());
        let e = expand_dims("ExpandDims", &x, &Tensor::scalar(-1i32)).unwrap();
        assert_eq!(e.shape(), &[2, 4, 1]);
        assert_eq!(squeeze("Squeeze", &e, &[]).unwrap().shape(), &[2, 4]);
        assert!(squeeze("Squeeze", &e, &[0]).is_err());
        let u = unpack("Unpack", &x, 1).unwrap();
        assert_eq!(u.len(), 4);
        assert_eq!(ints(&u[3]), vec![3, 7]);
        let offs = concat_offset("ConcatOffset", &[Tensor::scalar(1i32), v(&[2, 3]), v(&[2, 5])]).unwrap();
        assert_eq!(ints(&offs[1]), vec![0, 3]);
        assert_eq!(ints(&broadcast_args("BA", &v(&[2, 1, 4]), &v(&[3, 1])).unwrap()), vec![2, 3, 4]);
    }
}
