//! Shape ops: `Reshape`, `Transpose`, `InvertPermutation`, `Tile`, `Fill`,
//! `Shape`, `Size`, `Rank`, `Range`, `Pack`, `DynamicStitch`, `SelectV2`,
//! `BroadcastTo`, `BroadcastGradientArgs`, `ZerosLike`, `OnesLike`.
//! They work on every dtype that has elements (strings and bools too).

use ndarray::{ArcArray, ArrayD, Axis, IxDyn};

use super::math::{broadcast_shape, Num};
use crate::exec::error::KernelError;
use crate::exec::tensor::{with_element_type, Element, Tensor};
use crate::ir::DType;

/// Applies `$body` (an expression giving an `ArcArray` of the same element
/// type) to the array of any tensor with elements, binding it as `$a`.
macro_rules! any_array {
    ($op:expr, $t:expr, $a:ident => $body:expr) => {
        match $t {
            Tensor::F32($a) => Tensor::F32($body),
            Tensor::F64($a) => Tensor::F64($body),
            Tensor::I32($a) => Tensor::I32($body),
            Tensor::I64($a) => Tensor::I64($body),
            Tensor::Bool($a) => Tensor::Bool($body),
            Tensor::BF16($a) => Tensor::BF16($body),
            Tensor::F16($a) => Tensor::F16($body),
            Tensor::I8($a) => Tensor::I8($body),
            Tensor::U8($a) => Tensor::U8($body),
            Tensor::I16($a) => Tensor::I16($body),
            Tensor::U16($a) => Tensor::U16($body),
            Tensor::U32($a) => Tensor::U32($body),
            Tensor::U64($a) => Tensor::U64($body),
            Tensor::C64($a) => Tensor::C64($body),
            Tensor::C128($a) => Tensor::C128($body),
            Tensor::Str($a) => Tensor::Str($body),
            Tensor::Resource(_) | Tensor::Variant(_) => {
                return Err(KernelError::dtype($op, DType::Resource, "resource handles have no elements"))
            }
        }
    };
}

fn to_usize(op: &str, v: i64, what: &str) -> Result<usize, KernelError> {
    usize::try_from(v).map_err(|_| KernelError::invalid(op, format!("{what} must be >= 0, got {v}")))
}

fn dims(op: &str, t: &Tensor, what: &str) -> Result<Vec<usize>, KernelError> {
    if t.shape().len() > 1 {
        return Err(KernelError::invalid(op, format!("{what} must be a vector, got shape {:?}", t.shape())));
    }
    t.to_i64_vec(op, what)?.into_iter().map(|d| to_usize(op, d, what)).collect()
}

fn reshaped<T: Clone>(op: &str, a: &ArcArray<T, IxDyn>, shape: &[usize]) -> Result<ArcArray<T, IxDyn>, KernelError> {
    let source = if a.is_standard_layout() { a.clone() } else { a.as_standard_layout().into_owned().into_shared() };
    source.into_shape_with_order(IxDyn(shape)).map_err(|e| KernelError::invalid(op, e.to_string()))
}

/// `Reshape(x, shape)`; one entry of `shape` may be -1.
pub(crate) fn reshape(op: &str, x: &Tensor, shape: &Tensor) -> Result<Tensor, KernelError> {
    let wanted = shape.to_i64_vec(op, "shape")?;
    let total = x.len();
    let known: i64 = wanted.iter().filter(|&&d| d != -1).product();
    let unknown = wanted.iter().filter(|&&d| d == -1).count();
    if unknown > 1 || wanted.iter().any(|&d| d < -1) {
        return Err(KernelError::invalid(op, format!("invalid target shape {wanted:?}")));
    }
    let resolved: Vec<usize> = wanted
        .iter()
        .map(|&d| {
            if d == -1 {
                if known == 0 || total as i64 % known != 0 {
                    Err(KernelError::invalid(op, format!("cannot reshape {total} elements into {wanted:?}")))
                } else {
                    Ok(total / known as usize)
                }
            } else {
                to_usize(op, d, "dimension")
            }
        })
        .collect::<Result<_, _>>()?;
    if resolved.iter().product::<usize>() != total {
        return Err(KernelError::invalid(
            op,
            format!("cannot reshape {total} elements (shape {:?}) into {wanted:?}", x.shape()),
        ));
    }
    Ok(any_array!(op, x, a => reshaped(op, a, &resolved)?))
}

/// `Transpose(x, perm)`.
pub(crate) fn transpose(op: &str, x: &Tensor, perm: &Tensor) -> Result<Tensor, KernelError> {
    let perm = dims(op, perm, "perm")?;
    let rank = x.shape().len();
    let mut seen = vec![false; rank];
    if perm.len() != rank || perm.iter().any(|&p| p >= rank || std::mem::replace(&mut seen[p], true)) {
        return Err(KernelError::invalid(op, format!("{perm:?} is not a permutation of {rank} axes")));
    }
    Ok(any_array!(op, x, a => transposed(a, &perm)))
}

/// `a` with its axes permuted by `perm`, in standard layout.
fn transposed<T: Clone>(a: &ArcArray<T, IxDyn>, perm: &[usize]) -> ArcArray<T, IxDyn> {
    let view = a.view().permuted_axes(IxDyn(perm));
    match a.as_slice() {
        // Runs along the input's contiguous axes are copied whole.
        Some(data) => {
            let values = super::strided::gather(data, view.shape(), view.strides());
            ArcArray::from_shape_vec(view.raw_dim(), values).expect("a permutation keeps the element count")
        }
        None => view.as_standard_layout().into_owned().into_shared(),
    }
}

/// `InvertPermutation(p)`: `y[p[i]] = i`.
pub(crate) fn invert_permutation(op: &str, p: &Tensor) -> Result<Tensor, KernelError> {
    let perm = dims(op, p, "permutation")?;
    let n = perm.len();
    let mut inv = vec![usize::MAX; n];
    for (i, &v) in perm.iter().enumerate() {
        if v >= n || inv[v] != usize::MAX {
            return Err(KernelError::invalid(op, format!("{perm:?} is not a permutation")));
        }
        inv[v] = i;
    }
    match p {
        Tensor::I64(_) => Ok(Tensor::vector(inv.into_iter().map(|v| v as i64).collect())),
        _ => Ok(Tensor::vector(inv.into_iter().map(|v| v as i32).collect())),
    }
}

fn tile_array<T: Clone>(
    op: &str,
    a: &ArcArray<T, IxDyn>,
    multiples: &[usize],
) -> Result<ArcArray<T, IxDyn>, KernelError> {
    if let Some(data) = a.as_slice() {
        // Output axis i is [multiples[i], shape[i]]: the copies repeat (stride 0) the input's axis.
        let mut shape = Vec::with_capacity(2 * multiples.len());
        let mut strides = Vec::with_capacity(2 * multiples.len());
        for ((&m, &d), &s) in multiples.iter().zip(a.shape()).zip(a.strides()) {
            shape.extend([m, d]);
            strides.extend([0, s]);
        }
        let tiled: Vec<usize> = a.shape().iter().zip(multiples).map(|(d, m)| d * m).collect();
        let values = super::strided::gather(data, &shape, &strides);
        return ArcArray::from_shape_vec(IxDyn(&tiled), values).map_err(|e| KernelError::invalid(op, e.to_string()));
    }
    let mut out = a.to_owned();
    for (axis, &m) in multiples.iter().enumerate() {
        if m == 1 {
            continue;
        }
        if m == 0 {
            let mut shape = out.shape().to_vec();
            shape[axis] = 0;
            out = ArrayD::from_shape_vec(IxDyn(&shape), Vec::new())
                .map_err(|e| KernelError::invalid(op, e.to_string()))?;
            continue;
        }
        let views = vec![out.view(); m];
        out = ndarray::concatenate(Axis(axis), &views).map_err(|e| KernelError::invalid(op, e.to_string()))?;
    }
    Ok(out.into_shared())
}

/// `Tile(x, multiples)`.
pub(crate) fn tile(op: &str, x: &Tensor, multiples: &Tensor) -> Result<Tensor, KernelError> {
    let m = dims(op, multiples, "multiples")?;
    if m.len() != x.shape().len() {
        return Err(KernelError::invalid(
            op,
            format!("multiples has {} entries but the input has rank {}", m.len(), x.shape().len()),
        ));
    }
    let tiled: Option<Vec<usize>> = x.shape().iter().zip(&m).map(|(&d, &k)| d.checked_mul(k)).collect();
    let tiled = tiled.ok_or_else(|| KernelError::invalid(op, format!("multiples {m:?} overflow the shape")))?;
    crate::exec::limits::checked_elements(op, x.dtype(), &tiled)?;
    Ok(any_array!(op, x, a => tile_array(op, a, &m)?))
}

/// `ReverseV2(x, axis)`: `x` with the order of each listed axis reversed.
pub(crate) fn reverse(op: &str, x: &Tensor, axes: &Tensor) -> Result<Tensor, KernelError> {
    let rank = x.shape().len();
    let axes = super::reduce::norm_axes(op, axes, rank)?;
    Ok(any_array!(op, x, a => {
        let mut v = a.view();
        for &axis in axes.iter().filter(|&&axis| axis < rank) {
            v.invert_axis(Axis(axis));
        }
        v.as_standard_layout().into_owned().into_shared()
    }))
}

/// `Fill(dims, value)`: a tensor of shape `dims` holding the scalar `value`.
pub(crate) fn fill(op: &str, shape: &Tensor, value: &Tensor) -> Result<Tensor, KernelError> {
    let shape = dims(op, shape, "dims")?;
    if !value.shape().is_empty() {
        return Err(KernelError::invalid(op, format!("value must be a scalar, got shape {:?}", value.shape())));
    }
    crate::exec::limits::checked_elements(op, value.dtype(), &shape)?;
    let empty = || KernelError::invalid(op, "value has no element");
    Ok(any_array!(op, value, a => ArcArray::from_elem(IxDyn(&shape), a.first().cloned().ok_or_else(empty)?)))
}

/// `Shape(x)` as an i32 or i64 vector.
pub(crate) fn shape_of(op: &str, x: &Tensor, out: DType) -> Result<Tensor, KernelError> {
    if x.dtype() == DType::Resource {
        return Err(KernelError::dtype(op, DType::Resource, "resource handles have no shape here"));
    }
    let s = x.shape();
    match out {
        DType::I32 => Ok(Tensor::vector(s.iter().map(|&d| d as i32).collect())),
        DType::I64 => Ok(Tensor::vector(s.iter().map(|&d| d as i64).collect())),
        other => Err(KernelError::dtype(op, other, "out_type must be i32 or i64")),
    }
}

/// `BroadcastTo(x, shape)`.
pub(crate) fn broadcast_to(op: &str, x: &Tensor, shape: &Tensor) -> Result<Tensor, KernelError> {
    let target = dims(op, shape, "shape")?;
    let joined = broadcast_shape(op, x.shape(), &target)?;
    if joined != target {
        return Err(KernelError::invalid(op, format!("cannot broadcast shape {:?} to {target:?}", x.shape())));
    }
    crate::exec::limits::checked_elements(op, x.dtype(), &target)?;
    let bad = || KernelError::invalid(op, format!("cannot broadcast shape {:?} to {target:?}", x.shape()));
    Ok(any_array!(op, x, a => match a.as_slice() {
        Some(data) => {
            let values = super::strided::gather(data, &target, &super::strided::broadcast_strides(a.shape(), &target));
            ArcArray::from_shape_vec(IxDyn(&target), values).map_err(|_| bad())?
        }
        None => a.broadcast(IxDyn(&target)).ok_or_else(bad)?.to_owned().into_shared(),
    }))
}

/// `BroadcastGradientArgs(s0, s1)`: for each input, the axes of the
/// broadcast result that its gradient must be summed over. As TensorFlow
/// does, shapes are aligned on the right, and an axis where every input has
/// size 1 is listed for both.
pub(crate) fn broadcast_gradient_args(op: &str, s0: &Tensor, s1: &Tensor) -> Result<Vec<Tensor>, KernelError> {
    let a = dims(op, s0, "s0")?;
    let b = dims(op, s1, "s1")?;
    broadcast_shape(op, &a, &b)?;
    let rank = a.len().max(b.len());
    let dim = |s: &[usize], i: usize| if i + s.len() < rank { 1 } else { s[i + s.len() - rank] };
    let (mut r0, mut r1) = (Vec::new(), Vec::new());
    for i in 0..rank {
        let (x, y) = (dim(&a, i), dim(&b, i));
        if x == 1 && y == 1 {
            r0.push(i);
            r1.push(i);
        } else if x == 1 {
            r0.push(i);
        } else if y == 1 {
            r1.push(i);
        }
    }
    let out = |v: Vec<usize>| match s0 {
        Tensor::I64(_) => Tensor::vector(v.into_iter().map(|d| d as i64).collect()),
        _ => Tensor::vector(v.into_iter().map(|d| d as i32).collect()),
    };
    Ok(vec![out(r0), out(r1)])
}

/// `ZerosLike` (`value` 0) and `OnesLike` (`value` 1).
pub(crate) fn filled_like(op: &str, x: &Tensor, value: u8) -> Result<Tensor, KernelError> {
    let shape = IxDyn(x.shape());
    let v = value != 0;
    Ok(match x {
        Tensor::F32(_) => Tensor::F32(ArcArray::from_elem(shape, f32::from(value))),
        Tensor::F64(_) => Tensor::F64(ArcArray::from_elem(shape, f64::from(value))),
        Tensor::I32(_) => Tensor::I32(ArcArray::from_elem(shape, i32::from(value))),
        Tensor::I64(_) => Tensor::I64(ArcArray::from_elem(shape, i64::from(value))),
        Tensor::Bool(_) => Tensor::Bool(ArcArray::from_elem(shape, v)),
        // A TensorList's zeros: every element set is zeros of its shape; unset ones stay unset.
        Tensor::Variant(var) if value == 0 => match &**var {
            crate::exec::variant::Variant::List(list) => {
                let mut zeros = list.clone();
                for item in zeros.items.iter_mut().flatten() {
                    *item = filled_like(op, item, 0)?;
                }
                Tensor::Variant(std::sync::Arc::new(crate::exec::variant::Variant::List(zeros)))
            }
            _ => return Err(KernelError::dtype(op, DType::Variant, "only a TensorList variant has zeros")),
        },
        other => match super::complex::filled_like(other, value) {
            Some(t) => t,
            None => return Err(KernelError::dtype(op, other.dtype(), "a numeric or bool input is required")),
        },
    })
}

/// `Size(x)` (the number of elements) or `Rank(x)` (the number of axes) as an i32 or i64 scalar.
pub(crate) fn size_or_rank(op: &str, x: &Tensor, rank: bool, out: DType) -> Result<Tensor, KernelError> {
    if x.dtype() == DType::Resource {
        return Err(KernelError::dtype(op, DType::Resource, "resource handles have no shape here"));
    }
    let n = if rank { x.shape().len() } else { x.len() };
    match out {
        DType::I32 => Ok(Tensor::scalar(i32::try_from(n).map_err(|_| KernelError::invalid(op, "exceeds i32"))?)),
        DType::I64 => Ok(Tensor::scalar(n as i64)),
        other => Err(KernelError::dtype(op, other, "out_type must be i32 or i64")),
    }
}

/// The single value of a scalar (or one-element) tensor.
fn scalar_of<T: Element + Copy>(op: &str, t: &Tensor, what: &str) -> Result<T, KernelError> {
    let a = t.array::<T>().ok_or_else(|| KernelError::invalid(op, format!("{what} has dtype {}", t.dtype())))?;
    match a.len() {
        1 => a.iter().next().copied().ok_or_else(|| KernelError::invalid(op, format!("{what} is empty"))),
        n => Err(KernelError::invalid(op, format!("{what} must be a scalar, got {n} elements"))),
    }
}

/// `Range(start, limit, delta)`: `start, start + delta, ...` while before `limit`.
pub(crate) fn range(op: &str, start: &Tensor, limit: &Tensor, delta: &Tensor) -> Result<Tensor, KernelError> {
    fn run<T: Num>(op: &str, start: &Tensor, limit: &Tensor, delta: &Tensor) -> Result<Tensor, KernelError> {
        let (s, l, d) = (
            scalar_of::<T>(op, start, "start")?,
            scalar_of::<T>(op, limit, "limit")?,
            scalar_of::<T>(op, delta, "delta")?,
        );
        if d.is_zero() {
            return Err(KernelError::invalid(op, "delta must not be zero"));
        }
        let count = ((l.as_f64() - s.as_f64()) / d.as_f64()).ceil().max(0.0);
        if count > (1u64 << 31) as f64 {
            return Err(KernelError::invalid(op, format!("{count} elements are too many")));
        }
        crate::exec::limits::checked_elements(op, T::DTYPE, &[count as usize])?;
        let values = (0..count as usize).map(|i| s.add(T::from_usize(i).mul(d))).collect();
        Ok(Tensor::vector(values))
    }
    match start.dtype() {
        DType::I32 => run::<i32>(op, start, limit, delta),
        DType::I64 => run::<i64>(op, start, limit, delta),
        DType::F32 => run::<f32>(op, start, limit, delta),
        DType::F64 => run::<f64>(op, start, limit, delta),
        other => Err(KernelError::dtype(op, other, "a numeric start is required")),
    }
}

/// `Pack(values, axis)`: stacks same-shaped tensors along a new axis.
pub(crate) fn pack(op: &str, values: &[Tensor], axis: i64) -> Result<Tensor, KernelError> {
    let first = values.first().ok_or_else(|| KernelError::invalid(op, "needs at least one input"))?;
    let rank = first.shape().len() as i64;
    let axis = if axis < 0 { axis + rank + 1 } else { axis };
    if !(0..=rank).contains(&axis) {
        return Err(KernelError::invalid(op, format!("axis is out of range for rank {rank}")));
    }
    fn run<T: Element>(op: &str, values: &[Tensor], axis: usize) -> Result<Tensor, KernelError> {
        let views = values
            .iter()
            .map(|t| t.view::<T>().ok_or_else(|| KernelError::invalid(op, "inputs must have one dtype")))
            .collect::<Result<Vec<_>, _>>()?;
        let out = ndarray::stack(Axis(axis), &views).map_err(|e| KernelError::invalid(op, e.to_string()))?;
        Ok(Tensor::from_array(out))
    }
    let axis = axis as usize;
    with_element_type!(first, T => run::<T>(op, values, axis), resource => Err(KernelError::dtype(op, DType::Resource, "resource handles have no elements")))
}

/// `DynamicStitch(indices[0..n], data[0..n])`: `out[indices[m][i], ...] = data[m][i, ...]`, later
/// inputs winning; the output has `max(indices) + 1` rows.
pub(crate) fn dynamic_stitch(op: &str, inputs: &[Tensor]) -> Result<Tensor, KernelError> {
    if inputs.is_empty() || !inputs.len().is_multiple_of(2) {
        return Err(KernelError::invalid(op, format!("needs n indices and n data inputs, got {}", inputs.len())));
    }
    let (indices, data) = inputs.split_at(inputs.len() / 2);
    let mut rows: Vec<Vec<usize>> = Vec::with_capacity(indices.len());
    for ix in indices {
        rows.push(
            ix.to_i64_vec(op, "indices")?.into_iter().map(|i| to_usize(op, i, "index")).collect::<Result<_, _>>()?,
        );
    }
    let first = &data[0];
    let index_rank = indices[0].shape().len();
    let row_shape = first.shape().get(index_rank..).unwrap_or_default().to_vec();
    for (ix, d) in indices.iter().zip(data) {
        let mut want = ix.shape().to_vec();
        want.extend_from_slice(&row_shape);
        if d.shape() != want.as_slice() {
            return Err(KernelError::invalid(
                op,
                format!(
                    "data shape {:?} does not match indices shape {:?} and rows {row_shape:?}",
                    d.shape(),
                    ix.shape()
                ),
            ));
        }
    }
    let count = rows.iter().flatten().map(|&i| i.saturating_add(1)).max().unwrap_or(0);
    // The output's first dim comes from the index values: size it first.
    let out_shape: Vec<usize> = std::iter::once(count).chain(row_shape.iter().copied()).collect();
    crate::exec::limits::checked_elements(op, first.dtype(), &out_shape)?;
    let row_len: usize = row_shape.iter().product();
    fn run<T: Element + Default>(
        op: &str,
        rows: &[Vec<usize>],
        data: &[Tensor],
        count: usize,
        row_len: usize,
        row_shape: &[usize],
    ) -> Result<Tensor, KernelError> {
        let mut out = vec![T::default(); count * row_len];
        let mut filled = vec![false; count];
        for (r, d) in rows.iter().zip(data) {
            let values = d.to_vec::<T>().ok_or_else(|| KernelError::invalid(op, "data inputs must have one dtype"))?;
            for (k, &i) in r.iter().enumerate() {
                out[i * row_len..(i + 1) * row_len].clone_from_slice(&values[k * row_len..(k + 1) * row_len]);
                filled[i] = true;
            }
        }
        if let Some(missing) = filled.iter().position(|f| !f) {
            return Err(KernelError::invalid(op, format!("index {missing} is missing from the indices")));
        }
        let mut shape = vec![count];
        shape.extend_from_slice(row_shape);
        Tensor::from_vec(&shape, out)
    }
    with_element_type!(first, T => run::<T>(op, &rows, data, count, row_len, &row_shape), resource => Err(KernelError::dtype(op, DType::Resource, "resource handles have no elements")))
}

/// `SelectV2(condition, t, e)`: `t` where `condition` holds, else `e`, all three broadcast.
pub(crate) fn select(op: &str, condition: &Tensor, t: &Tensor, e: &Tensor) -> Result<Tensor, KernelError> {
    let c =
        condition.array::<bool>().ok_or_else(|| KernelError::dtype(op, condition.dtype(), "condition must be bool"))?;
    let shape = broadcast_shape(op, &broadcast_shape(op, c.shape(), t.shape())?, e.shape())?;
    crate::exec::limits::checked_elements(op, t.dtype(), &shape)?;
    let bad = || {
        KernelError::invalid(
            op,
            format!("shapes {:?}, {:?} and {:?} do not broadcast", c.shape(), t.shape(), e.shape()),
        )
    };
    let cv = c.broadcast(IxDyn(&shape)).ok_or_else(bad)?;
    fn run<T: Element>(
        op: &str,
        cv: &ndarray::ArrayViewD<'_, bool>,
        t: &Tensor,
        e: &Tensor,
        shape: &[usize],
    ) -> Result<Tensor, KernelError> {
        let (Some(ta), Some(ea)) = (t.array::<T>(), e.array::<T>()) else {
            return Err(KernelError::invalid(
                op,
                format!("branches have different dtypes {} and {}", t.dtype(), e.dtype()),
            ));
        };
        let bad = || KernelError::invalid(op, "branches do not broadcast");
        let tv = ta.broadcast(IxDyn(shape)).ok_or_else(bad)?;
        let ev = ea.broadcast(IxDyn(shape)).ok_or_else(bad)?;
        let out =
            ndarray::Zip::from(cv).and(&tv).and(&ev).map_collect(|&c, a, b| if c { a.clone() } else { b.clone() });
        Ok(Tensor::from_array(out))
    }
    with_element_type!(t, T => run::<T>(op, &cv, t, e, &shape), resource => Err(KernelError::dtype(op, DType::Resource, "resource handles have no elements")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iota(shape: &[usize]) -> Tensor {
        let n = shape.iter().product::<usize>();
        Tensor::from_vec(shape, (0..n).map(|v| v as f32).collect()).unwrap()
    }

    #[test]
    fn reshape_infers_minus_one() {
        let out = reshape("Reshape", &iota(&[2, 3]), &Tensor::vector(vec![-1i32, 2])).unwrap();
        assert_eq!(out.shape(), &[3, 2]);
        assert_eq!(out.to_vec::<f32>().unwrap(), vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        let scalar = reshape("Reshape", &iota(&[1, 1]), &Tensor::vector(Vec::<i32>::new())).unwrap();
        assert_eq!(scalar.shape(), &[] as &[usize]);
        assert!(reshape("Reshape", &iota(&[2, 3]), &Tensor::vector(vec![4i32, -1])).is_err());
        assert!(reshape("Reshape", &iota(&[2, 3]), &Tensor::vector(vec![-1i32, -1])).is_err());
    }

    #[test]
    fn transpose_and_invert() {
        let out = transpose("Transpose", &iota(&[2, 3]), &Tensor::vector(vec![1i32, 0])).unwrap();
        assert_eq!(out.shape(), &[3, 2]);
        assert_eq!(out.to_vec::<f32>().unwrap(), vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
        // Reshape after transpose sees the transposed order.
        let flat = reshape("Reshape", &out, &Tensor::vector(vec![6i32])).unwrap();
        assert_eq!(flat.to_vec::<f32>().unwrap(), vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
        assert!(transpose("Transpose", &iota(&[2, 3]), &Tensor::vector(vec![0i32, 0])).is_err());
        let inv = invert_permutation("InvertPermutation", &Tensor::vector(vec![2i32, 0, 1])).unwrap();
        assert_eq!(inv.to_vec::<i32>().unwrap(), vec![1, 2, 0]);
        assert!(invert_permutation("InvertPermutation", &Tensor::vector(vec![1i32, 1])).is_err());
    }

    #[test]
    fn tile_repeats_each_axis() {
        let x = Tensor::from_vec(&[1, 2], vec![1i32, 2]).unwrap();
        let out = tile("Tile", &x, &Tensor::vector(vec![2i32, 2])).unwrap();
        assert_eq!(out.shape(), &[2, 4]);
        assert_eq!(out.to_vec::<i32>().unwrap(), vec![1, 2, 1, 2, 1, 2, 1, 2]);
        let none = tile("Tile", &x, &Tensor::vector(vec![0i32, 1])).unwrap();
        assert_eq!(none.shape(), &[0, 2]);
    }

    #[test]
    fn fill_shape_broadcast_to() {
        let f = fill("Fill", &Tensor::vector(vec![2i32, 2]), &Tensor::scalar(1.5f32)).unwrap();
        assert_eq!(f.to_vec::<f32>().unwrap(), vec![1.5; 4]);
        assert_eq!(shape_of("Shape", &f, DType::I32).unwrap(), Tensor::vector(vec![2i32, 2]));
        assert_eq!(shape_of("Shape", &f, DType::I64).unwrap(), Tensor::vector(vec![2i64, 2]));
        let b =
            broadcast_to("BroadcastTo", &Tensor::vector(vec![1.0f32, 2.0]), &Tensor::vector(vec![2i32, 2])).unwrap();
        assert_eq!(b.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 1.0, 2.0]);
        assert!(broadcast_to("BroadcastTo", &iota(&[2, 2]), &Tensor::vector(vec![2i32])).is_err());
    }

    #[test]
    fn broadcast_gradient_args_as_tensorflow() {
        // [2, 3, 5] against [1]: the second is broadcast over all three axes.
        let out =
            broadcast_gradient_args("BGA", &Tensor::vector(vec![2i32, 3, 5]), &Tensor::vector(vec![1i32])).unwrap();
        assert_eq!(out[0].to_vec::<i32>().unwrap(), Vec::<i32>::new());
        assert_eq!(out[1].to_vec::<i32>().unwrap(), vec![0, 1, 2]);
        // [4, 1] against [3]: aligned right, to [4, 3].
        let out = broadcast_gradient_args("BGA", &Tensor::vector(vec![4i32, 1]), &Tensor::vector(vec![3i32])).unwrap();
        assert_eq!(out[0].to_vec::<i32>().unwrap(), vec![1]);
        assert_eq!(out[1].to_vec::<i32>().unwrap(), vec![0]);
        assert!(broadcast_gradient_args("BGA", &Tensor::vector(vec![2i32]), &Tensor::vector(vec![3i32])).is_err());
    }

    #[test]
    fn zeros_and_ones_like() {
        let z = filled_like("ZerosLike", &iota(&[2]), 0).unwrap();
        assert_eq!(z.to_vec::<f32>().unwrap(), vec![0.0, 0.0]);
        let o = filled_like("OnesLike", &Tensor::vector(vec![5i64]), 1).unwrap();
        assert_eq!(o.to_vec::<i64>().unwrap(), vec![1]);
    }

    #[test]
    fn size_rank_range() {
        let x = iota(&[2, 3]);
        assert_eq!(size_or_rank("Size", &x, false, DType::I32).unwrap(), Tensor::scalar(6i32));
        assert_eq!(size_or_rank("Rank", &x, true, DType::I64).unwrap(), Tensor::scalar(2i64));
        let r = range("Range", &Tensor::scalar(0i32), &Tensor::scalar(5i32), &Tensor::scalar(2i32)).unwrap();
        assert_eq!(r.to_vec::<i32>().unwrap(), vec![0, 2, 4]);
        let empty = range("Range", &Tensor::scalar(3i32), &Tensor::scalar(0i32), &Tensor::scalar(1i32)).unwrap();
        assert_eq!(empty.shape(), &[0]);
        assert!(range("Range", &Tensor::scalar(0i32), &Tensor::scalar(1i32), &Tensor::scalar(0i32)).is_err());
    }

    #[test]
    fn pack_stacks_on_a_new_axis() {
        let a = Tensor::vector(vec![1i32, 2]);
        let b = Tensor::vector(vec![3i32, 4]);
        let rows = pack("Pack", &[a.clone(), b.clone()], 0).unwrap();
        assert_eq!(rows.shape(), &[2, 2]);
        assert_eq!(rows.to_vec::<i32>().unwrap(), vec![1, 2, 3, 4]);
        let cols = pack("Pack", &[a.clone(), b], -1).unwrap();
        assert_eq!(cols.to_vec::<i32>().unwrap(), vec![1, 3, 2, 4]);
        assert!(pack("Pack", &[a, Tensor::vector(vec![1i32])], 0).is_err());
    }

    #[test]
    fn dynamic_stitch_merges_by_index() {
        // TensorFlow's reduced_shape for input [2, 3, 5] over axes [1]: [2, 1, 5].
        let out = dynamic_stitch(
            "DynamicStitch",
            &[
                Tensor::vector(vec![0i32, 1, 2]),
                Tensor::vector(vec![1i32]),
                Tensor::vector(vec![2i32, 3, 5]),
                Tensor::vector(vec![1i32]),
            ],
        )
        .unwrap();
        assert_eq!(out.to_vec::<i32>().unwrap(), vec![2, 1, 5]);
        let rows = dynamic_stitch(
            "DynamicStitch",
            &[Tensor::vector(vec![1i32]), Tensor::vector(vec![0i32]), iota(&[1, 2]), iota(&[1, 2])],
        )
        .unwrap();
        assert_eq!(rows.shape(), &[2, 2]);
        let gap = dynamic_stitch("DynamicStitch", &[Tensor::vector(vec![2i32]), Tensor::vector(vec![1.0f32])]);
        assert!(gap.is_err());
    }

    #[test]
    fn select_broadcasts_all_three() {
        let c = Tensor::vector(vec![true, false]);
        let t = iota(&[2, 2]);
        let out = select("SelectV2", &c, &t, &Tensor::scalar(-1.0f32)).unwrap();
        assert_eq!(out.to_vec::<f32>().unwrap(), vec![0.0, -1.0, 2.0, -1.0]);
        assert!(select("SelectV2", &c, &t, &Tensor::scalar(1i32)).is_err());
    }
}
