//! Shape builders: reshapes (`Reshape`, `ExpandDims`, `Squeeze`),
//! `Transpose`, `Tile`, `Fill`, `BroadcastTo`, `Pack`/`Unpack`,
//! `ConcatV2`, `Slice`, `Split`/`SplitV`, `Pad`/`PadV2`, and
//! `StridedSlice` with its gradient. Result shapes come from the trace.
//!
//! Strided slices (every mask combination) are resolved at compile time
//! by running the simulator's own kernel on the flat element indices of
//! the input: the result says which input element each output element
//! is, and the device program gathers (or, for the gradient, scatters)
//! exactly those. Cost: one op per TF op; a strided slice also holds a
//! constant index per output element.

use super::{axis, i64s, Call};
use crate::exec::Tensor;
use crate::ir::DType;
use crate::xla::stablehlo::text::{list, Ctx, Ty, Val};

pub(super) fn reshape(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let out = n.out(0)?.shape.clone();
    Ok(vec![c.reshape(n.input(0)?, out)])
}

pub(super) fn transpose(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let perm = n.ints(1, "perm")?;
    let out = n.out(0)?.clone();
    Ok(vec![c.op("stablehlo.transpose", &[n.input(0)?], &format!("permutation = {}", i64s(&perm)), out)])
}

/// `Tile`: broadcast to `[m0, d0, m1, d1, ...]`, then reshape to `[m0*d0, ...]`.
pub(super) fn tile(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let multiples = n.ints(1, "multiples")?;
    let mut wide = Vec::new();
    let mut dims = Vec::new();
    for (i, &d) in x.ty.shape.iter().enumerate() {
        wide.push(multiples.get(i).copied().unwrap_or(1).max(0) as usize);
        dims.push((2 * i + 1).to_string());
        wide.push(d);
    }
    let b = c.op(
        "stablehlo.broadcast_in_dim",
        &[x],
        &format!("broadcast_dimensions = array<i64{}>", list(&dims)),
        x.ty.with_shape(wide),
    );
    let out = n.out(0)?.shape.clone();
    Ok(vec![c.reshape(&b, out)])
}

/// `ReverseV2(x, axis)`: `stablehlo.reverse` over the constant axes.
pub(super) fn reverse(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let rank = x.ty.shape.len();
    let mut dims = Vec::new();
    for a in n.ints(1, "axis")? {
        dims.push(axis(a, rank, n.op)? as i64);
    }
    dims.sort_unstable();
    dims.dedup();
    let out = n.out(0)?.clone();
    Ok(vec![c.op("stablehlo.reverse", &[x], &format!("dimensions = {}", i64s(&dims)), out)])
}

pub(super) fn fill(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let out = n.out(0)?.shape.clone();
    Ok(vec![c.broadcast_to(n.input(1)?, &out)])
}

pub(super) fn broadcast_to(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let out = n.out(0)?.shape.clone();
    Ok(vec![c.broadcast_to(n.input(0)?, &out)])
}

/// Concatenates `parts` along `axis` into `out`.
pub(super) fn concatenate(c: &mut Ctx, parts: &[Val], axis: usize, out: Ty) -> Val {
    if parts.len() == 1 {
        return c.reshape(&parts[0], out.shape);
    }
    let refs: Vec<&Val> = parts.iter().collect();
    c.op("stablehlo.concatenate", &refs, &format!("dimension = {axis} : i64"), out)
}

pub(super) fn pack(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let out = n.out(0)?.clone();
    let a = axis(n.int_attr("axis", 0), out.rank(), n.op)?;
    let mut one = out.shape.clone();
    one[a] = 1;
    let parts: Vec<Val> = n.inputs.iter().map(|v| c.reshape(v, one.clone())).collect();
    Ok(vec![concatenate(c, &parts, a, out)])
}

/// `ConcatV2(values..., axis)`.
pub(super) fn concat(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let out = n.out(0)?.clone();
    let k = n.inputs.len().checked_sub(1).ok_or("needs an axis")?;
    let a = axis(*n.ints(k, "axis")?.first().ok_or("axis is empty")?, out.rank(), n.op)?;
    let parts: Vec<Val> = n.inputs[..k].iter().filter(|v| v.ty.shape.get(a) != Some(&0)).cloned().collect();
    if parts.is_empty() {
        return Ok(vec![c.splat(&out, 0.0)]);
    }
    Ok(vec![concatenate(c, &parts, a, out)])
}

/// `stablehlo.slice` of `x` from `start` to `limit` (strides 1).
pub(super) fn slice_range(c: &mut Ctx, x: &Val, start: &[usize], limit: &[usize]) -> Val {
    let shape: Vec<usize> = start.iter().zip(limit).map(|(s, l)| l - s).collect();
    let rank = shape.len();
    c.op(
        "stablehlo.slice",
        &[x],
        &format!(
            "start_indices = {}, limit_indices = {}, strides = {}",
            i64s(start),
            i64s(limit),
            i64s(&vec![1; rank])
        ),
        x.ty.with_shape(shape),
    )
}

/// `Slice(x, begin, size)`; a size of -1 runs to the end.
pub(super) fn slice(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let begin = n.ints(1, "begin")?;
    let out = n.out(0)?.shape.clone();
    let start: Vec<usize> = begin.iter().map(|&b| b.max(0) as usize).collect();
    let limit: Vec<usize> = start.iter().zip(&out).map(|(s, o)| s + o).collect();
    Ok(vec![slice_range(c, x, &start, &limit)])
}

/// `Split(axis, x)` and `SplitV(x, sizes, axis)`: consecutive slices whose
/// sizes are the traced outputs' sizes along the axis.
pub(super) fn split(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (x, axis_operand) = if n.op == "Split" { (n.input(1)?, 0) } else { (n.input(0)?, 2) };
    let a = axis(*n.ints(axis_operand, "axis")?.first().ok_or("axis is empty")?, x.ty.rank(), n.op)?;
    let mut at = 0;
    let mut out = Vec::new();
    for ty in n.outputs {
        let mut start = vec![0; x.ty.rank()];
        let mut limit = x.ty.shape.clone();
        start[a] = at;
        at += ty.shape[a];
        limit[a] = at;
        out.push(slice_range(c, x, &start, &limit));
    }
    Ok(out)
}

/// `Unpack(x) {axis}`: one slice per index, with the axis dropped.
pub(super) fn unpack(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let a = axis(n.int_attr("axis", 0), x.ty.rank(), n.op)?;
    let mut out = Vec::new();
    for (i, ty) in n.outputs.iter().enumerate() {
        let mut start = vec![0; x.ty.rank()];
        let mut limit = x.ty.shape.clone();
        start[a] = i;
        limit[a] = i + 1;
        let s = slice_range(c, x, &start, &limit);
        out.push(c.reshape(&s, ty.shape.clone()));
    }
    Ok(out)
}

/// `Pad(x, paddings)` / `PadV2(x, paddings, value)`.
pub(super) fn pad(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let p = n.ints(1, "paddings")?;
    let rank = x.ty.rank();
    if p.len() != 2 * rank {
        return Err(format!("paddings must be [{rank}, 2], got {} values", p.len()));
    }
    let value = match n.inputs.get(2) {
        Some(v) => c.reshape(v, Vec::new()),
        None => c.splat(&Ty::scalar(x.ty.dtype), 0.0),
    };
    let low: Vec<i64> = (0..rank).map(|d| p[2 * d]).collect();
    let high: Vec<i64> = (0..rank).map(|d| p[2 * d + 1]).collect();
    let out = n.out(0)?.clone();
    Ok(vec![c.op(
        "stablehlo.pad",
        &[x, &value],
        &format!(
            "edge_padding_low = {}, edge_padding_high = {}, interior_padding = {}",
            i64s(&low),
            i64s(&high),
            i64s(&vec![0; rank])
        ),
        out,
    )])
}

/// The flat input index of every element of a strided slice of a `shape`
/// input, by the simulator's kernel run on `0..count`.
fn strided_indices(n: &Call, shape: &[usize], spec: &[Option<Tensor>]) -> Result<Tensor, String> {
    let count: usize = shape.iter().product();
    let iota = Tensor::from_vec(shape, (0..count as i64).collect()).map_err(|e| e.to_string())?;
    let mut inputs = vec![iota];
    for (i, t) in spec.iter().enumerate() {
        inputs.push(t.clone().ok_or_else(|| format!("operand {} must be a compile-time constant", i + 1))?);
    }
    let mut attrs = n.attrs.clone();
    attrs.insert("T", crate::ir::AttrValue::Type(DType::I64));
    let out = crate::exec::run_kernel("StridedSlice", &attrs, &inputs).map_err(|e| e.to_string())?;
    out.into_iter().next().ok_or_else(|| "the strided slice has no result".to_string())
}

/// The flat indices `idx` as an i64 constant with a trailing index-vector
/// dimension of 1, for a gather from (or scatter into) a flat operand.
fn flat_indices(c: &mut Ctx, idx: &Tensor) -> Result<Val, String> {
    let mut shape = idx.shape().to_vec();
    shape.push(1);
    let v = idx.to_i64_vec("StridedSlice", "indices").map_err(|e| e.to_string())?;
    let t = Tensor::from_vec(&shape, v).map_err(|e| e.to_string())?;
    Ok(c.constant(&t))
}

/// `StridedSlice(x, begin, end, strides)` with every mask: a gather of the
/// elements the simulator's kernel picks.
pub(super) fn strided_slice(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let idx = strided_indices(n, &x.ty.shape, &n.consts[1..])?;
    let out = n.out(0)?.clone();
    let flat = c.reshape(x, vec![x.ty.count()]);
    let indices = flat_indices(c, &idx)?;
    let rank = idx.shape().len();
    let attrs = format!(
        "dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = {rank}>, slice_sizes = array<i64: 1>, indices_are_sorted = false"
    );
    let g = c.op("stablehlo.gather", &[&flat, &indices], &attrs, out.with_shape(idx.shape().to_vec()));
    Ok(vec![c.reshape(&g, out.shape)])
}

/// `StridedSliceGrad(shape, begin, end, strides, dy)`: zeros of `shape`
/// with `dy` scattered to the elements the strided slice picked.
pub(super) fn strided_slice_grad(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let dy = n.input(4)?;
    let out = n.out(0)?.clone();
    let idx = strided_indices(n, &out.shape, &n.consts[1..4])?;
    let zeros = c.splat(&out.with_shape(vec![out.count()]), 0.0);
    let indices = flat_indices(c, &idx)?;
    let updates = c.reshape(dy, idx.shape().to_vec());
    let rank = idx.shape().len();
    let region = c.reducer_region(out.dtype, crate::xla::stablehlo::text::Reducer::Add);
    let attrs = format!(
        "scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = {rank}>, indices_are_sorted = false, unique_indices = false"
    );
    let ty = zeros.ty.clone();
    let s = c.op_regions("stablehlo.scatter", &[&zeros, &indices, &updates], &[region], &attrs, &[ty]).remove(0);
    Ok(vec![c.reshape(&s, out.shape)])
}
