//! Gathers and scatters: `GatherV2` (any `batch_dims`), `GatherNd`,
//! `ScatterNd` (duplicates add up), `TensorScatterUpdate`/`Add`,
//! `UnsortedSegmentSum` and `OneHot`. Index tensors are device values;
//! XLA clamps out-of-range gather indices and drops out-of-range scatter
//! updates where the simulator reports an error. Under a device-check
//! scope ([`crate::xla::device_check`]) the gathers and scatters check
//! their indices and fail the run instead (`UnsortedSegmentSum` checks
//! only ids past the segment count: negative ids are dropped everywhere).
//! Cost: one gather or scatter per TF op (and a compare and a reduction
//! per checked op).

use super::{axis, check, expand, Call};
use crate::xla::stablehlo::text::{Cmp, Ctx, Reducer, Ty, Val};

fn ints(items: impl IntoIterator<Item = usize>) -> String {
    items.into_iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")
}

/// `stablehlo.gather` of `params` along `axis` at every index of
/// `indices` (an implicit index vector): the result is
/// `params[..axis] + indices.shape + params[axis + 1..]`.
pub fn gather(c: &mut Ctx, params: &Val, indices: &Val, axis: usize, out: Ty) -> Val {
    gather_batched(c, params, indices, axis, 0, out)
}

/// [`gather`] with the first `batch` dimensions of `params` and `indices`
/// paired (`GatherV2`'s `batch_dims`, `axis` ≥ `batch`): the result is
/// `params[..axis] + indices.shape[batch..] + params[axis + 1..]`, with
/// `operand_batching_dims`/`start_indices_batching_dims` for the pairs.
pub fn gather_batched(c: &mut Ctx, params: &Val, indices: &Val, axis: usize, batch: usize, out: Ty) -> Val {
    let rank = params.ty.rank();
    let index_rank = indices.ty.rank();
    let offset: Vec<usize> =
        (batch..rank).filter(|&d| d != axis).map(|d| if d < axis { d } else { d - 1 + index_rank - batch }).collect();
    let sizes: Vec<usize> = (0..rank).map(|d| if d == axis || d < batch { 1 } else { params.ty.shape[d] }).collect();
    let batching = if batch == 0 {
        String::new()
    } else {
        format!("operand_batching_dims = [{0}], start_indices_batching_dims = [{0}], ", ints(0..batch))
    };
    let attrs = format!(
        "dimension_numbers = #stablehlo.gather<offset_dims = [{}], collapsed_slice_dims = [{axis}], {batching}start_index_map = [{axis}], index_vector_dim = {index_rank}>, slice_sizes = {}, indices_are_sorted = false",
        ints(offset),
        super::i64s(&sizes)
    );
    c.op("stablehlo.gather", &[params, indices], &attrs, out)
}

/// `GatherV2(params, indices, axis)`; `batch_dims` (negative counts from
/// the end of the indices' dimensions) pairs leading dimensions.
pub(super) fn gather_v2(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let params = n.input(0)?;
    let indices = n.input(1)?;
    let a = axis(*n.ints(2, "axis")?.first().ok_or("axis is empty")?, params.ty.rank(), n.op)?;
    let b = n.int_attr("batch_dims", 0);
    let b = if b < 0 { b + indices.ty.rank() as i64 } else { b };
    let b = usize::try_from(b).ok().filter(|&b| b <= a && b <= indices.ty.rank()).ok_or_else(|| {
        format!(
            "batch_dims {} must be in 0..={} (the axis) and at most the indices' rank",
            n.int_attr("batch_dims", 0),
            a
        )
    })?;
    let out = n.out(0)?.clone();
    check::in_range(c, indices, params.ty.shape[a], || format!("{} on axis {a} of {}", n.op, params.ty.mlir()));
    Ok(vec![gather_batched(c, params, indices, a, b, out)])
}

/// `GatherNd(params, indices)`: the last index dimension addresses the leading params dimensions.
pub(super) fn gather_nd(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let params = n.input(0)?;
    let indices = n.input(1)?;
    let m = *indices.ty.shape.last().ok_or("indices must have rank >= 1")?;
    if m > params.ty.rank() {
        return Err(format!("indices address {m} dimensions of a rank-{} tensor", params.ty.rank()));
    }
    let out = n.out(0)?.clone();
    check::nd_in_range(c, indices, &params.ty.shape[..m], || format!("{} of {}", n.op, params.ty.mlir()));
    let batch = indices.ty.rank() - 1;
    let rank = params.ty.rank();
    let offset: Vec<usize> = (batch..batch + rank - m).collect();
    let sizes: Vec<usize> = (0..rank).map(|d| if d < m { 1 } else { params.ty.shape[d] }).collect();
    let attrs = format!(
        "dimension_numbers = #stablehlo.gather<offset_dims = [{}], collapsed_slice_dims = [{}], start_index_map = [{}], index_vector_dim = {batch}>, slice_sizes = {}, indices_are_sorted = false",
        ints(offset),
        ints(0..m),
        ints(0..m),
        super::i64s(&sizes)
    );
    Ok(vec![c.op("stablehlo.gather", &[params, indices], &attrs, out)])
}

/// How scattered updates combine with the operand.
#[derive(Clone, Copy, Debug)]
pub enum Combine {
    Add,
    Replace,
    /// The operand minus the update.
    Sub,
    /// The operand divided by the update.
    Div,
    Max,
    Min,
    Mul,
}

/// `stablehlo.scatter` of `updates` into `operand` at `indices`, whose last
/// dimension (of size `m`) addresses the operand's leading dimensions.
pub fn scatter(c: &mut Ctx, operand: &Val, indices: &Val, updates: &Val, how: Combine) -> Val {
    let m = indices.ty.shape.last().copied().unwrap_or(1);
    let batch = indices.ty.rank().saturating_sub(1);
    let window: Vec<usize> = (batch..updates.ty.rank()).collect();
    let region = match how {
        Combine::Add => c.reducer_region(operand.ty.dtype, Reducer::Add),
        Combine::Replace => c.region(operand.ty.dtype, |_, _, b| b.clone()),
        Combine::Sub => c.region(operand.ty.dtype, |c, a, b| c.elementwise("subtract", &[a, b])),
        Combine::Div => c.region(operand.ty.dtype, |c, a, b| c.elementwise("divide", &[a, b])),
        Combine::Max => c.reducer_region(operand.ty.dtype, Reducer::Max),
        Combine::Min => c.reducer_region(operand.ty.dtype, Reducer::Min),
        Combine::Mul => c.reducer_region(operand.ty.dtype, Reducer::Mul),
    };
    let attrs = format!(
        "scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [{}], inserted_window_dims = [{}], scatter_dims_to_operand_dims = [{}], index_vector_dim = {batch}>, indices_are_sorted = false, unique_indices = false",
        ints(window),
        ints(0..m),
        ints(0..m)
    );
    let ty = operand.ty.clone();
    c.op_regions("stablehlo.scatter", &[operand, indices, updates], &[region], &attrs, &[ty]).remove(0)
}

/// `ScatterNd(indices, updates, shape)`: zeros with the updates added in.
pub(super) fn scatter_nd(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let out = n.out(0)?.clone();
    checked_indices(c, n, n.input(0)?, &out)?;
    let zeros = c.splat(&out, 0.0);
    Ok(vec![scatter(c, &zeros, n.input(0)?, n.input(1)?, Combine::Add)])
}

/// `TensorScatterUpdate`/`Add(tensor, indices, updates)`.
pub(super) fn tensor_scatter(c: &mut Ctx, n: &Call, add: bool) -> Result<Vec<Val>, String> {
    let how = if add { Combine::Add } else { Combine::Replace };
    checked_indices(c, n, n.input(1)?, &n.input(0)?.ty)?;
    Ok(vec![scatter(c, n.input(0)?, n.input(1)?, n.input(2)?, how)])
}

/// Checks a scatter's `indices` (index vectors in the last dimension)
/// against the leading dimensions of `into`.
pub(super) fn checked_indices(c: &mut Ctx, n: &Call, indices: &Val, into: &Ty) -> Result<(), String> {
    let m = indices.ty.shape.last().copied().unwrap_or(1);
    let bounds = into.shape.get(..m).ok_or_else(|| format!("indices address {m} dimensions of a {}", into.mlir()))?;
    check::nd_in_range(c, indices, bounds, || format!("{} into {}", n.op, into.mlir()));
    Ok(())
}

/// `UnsortedSegmentSum(data, ids, num)`: zeros `[num, ...]` with each data
/// row added at its id.
pub(super) fn unsorted_segment_sum(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let data = n.input(0)?;
    let ids = n.input(1)?;
    let out = n.out(0)?.clone();
    let rows = *out.shape.first().ok_or("the result has no segment dimension")?;
    check::below(c, ids, rows, || format!("{} into {rows} segments", n.op));
    let zeros = c.splat(&out, 0.0);
    let mut shape = ids.ty.shape.clone();
    shape.push(1);
    let idx = c.reshape(ids, shape);
    Ok(vec![scatter(c, &zeros, &idx, data, Combine::Add)])
}

/// `OneHot(indices, depth, on, off) {axis}`: `on` where the iota along the
/// new axis equals the index, else `off`.
pub(super) fn one_hot(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let ids = n.input(0)?;
    let out = n.out(0)?.clone();
    let a = match n.int_attr("axis", -1) {
        -1 => out.rank() - 1,
        k => axis(k, out.rank(), n.op)?,
    };
    let iota =
        c.op("stablehlo.iota", &[], &format!("iota_dimension = {a} : i64"), ids.ty.with_shape(out.shape.clone()));
    let idb = expand(c, ids, &out.shape, &[a]);
    let hit = c.compare(&iota, &idb, Cmp::Eq);
    let on = c.broadcast_to(n.input(2)?, &out.shape);
    let off = c.broadcast_to(n.input(3)?, &out.shape);
    Ok(vec![c.select(&hit, &on, &off)])
}
