//! Segment reductions and the combining tensor scatters, as TensorFlow's
//! XLA bridge lowers them: `UnsortedSegmentMax`/`Min`/`Prod` and the
//! sorted `Segment*V2` ops scatter each data row into a buffer of
//! `num_segments` rows that starts at the reduction's identity (−∞ for a
//! float maximum, +∞ for a minimum, one for a product), dropping
//! negative ids; `TensorScatterSub`/`Max`/`Min` scatter into the tensor
//! with the matching combiner. Under a device-check scope
//! ([`crate::xla::device_check`]) ids past the segment count and scatter
//! indices outside the tensor fail the run, as the simulator's do. The
//! resource scatters beyond add, sub and update combine into the
//! variable's value the same way ([`resource_scatter`]).
//! Cost: one scatter per op.

use super::gather::{checked_indices, scatter, Combine};
use super::{check, Call};
use crate::xla::stablehlo::text::{Ctx, Reducer, Val};

/// `Segment*(data, ids, num_segments)` reduced with `how`.
pub(super) fn segment_reduce(c: &mut Ctx, n: &Call, how: Reducer) -> Result<Vec<Val>, String> {
    let data = n.input(0)?;
    let ids = n.input(1)?;
    let out = n.out(0)?.clone();
    let rows = *out.shape.first().ok_or("the result has no segment dimension")?;
    check::below(c, ids, rows, || format!("{} into {rows} segments", n.op));
    let init = c.splat(&out, how.identity(out.dtype));
    let mut shape = ids.ty.shape.clone();
    shape.push(1);
    let idx = c.reshape(ids, shape);
    let combine = match how {
        Reducer::Add => Combine::Add,
        Reducer::Max => Combine::Max,
        Reducer::Min => Combine::Min,
        Reducer::Mul => Combine::Mul,
        other => return Err(format!("{}: no segment reduction {other:?}", n.op)),
    };
    Ok(vec![scatter(c, &init, &idx, data, combine)])
}

/// `TensorScatterSub`/`Max`/`Min(tensor, indices, updates)`.
pub(super) fn tensor_scatter(c: &mut Ctx, n: &Call, how: Combine) -> Result<Vec<Val>, String> {
    checked_indices(c, n, n.input(1)?, &n.input(0)?.ty)?;
    Ok(vec![scatter(c, n.input(0)?, n.input(1)?, n.input(2)?, how)])
}

/// One of the resource scatters of [`crate::exec::kernels::segment::RESOURCE_SCATTERS`] on the
/// variable's value `var` (`n.inputs` are the indices and updates): its new value. Row scatters
/// flatten their indices to one index per update row.
pub(super) fn resource_scatter(c: &mut Ctx, n: &Call, var: &Val) -> Result<Val, String> {
    use crate::exec::kernels::segment::{resource_scatter_kind, Scatter};
    let (how, rows) = resource_scatter_kind(n.op).ok_or_else(|| format!("{} is not a resource scatter", n.op))?;
    let combine = match how {
        Scatter::Add => Combine::Add,
        Scatter::Sub => Combine::Sub,
        Scatter::Mul => Combine::Mul,
        Scatter::Div => Combine::Div,
        Scatter::Replace => Combine::Replace,
        Scatter::Max => Combine::Max,
        Scatter::Min => Combine::Min,
    };
    let (ids, updates) = (n.input(0)?, n.input(1)?);
    if how == Scatter::Div {
        check::nonzero_divisor(c, updates, n.op);
    }
    if !rows {
        checked_indices(c, n, ids, &var.ty)?;
        return Ok(scatter(c, var, ids, updates, combine));
    }
    let count = ids.ty.count();
    let first = var.ty.shape.first().copied().unwrap_or(1);
    check::in_range(c, ids, first, || format!("{} into {}", n.op, var.ty.mlir()));
    let idx = c.reshape(ids, vec![count, 1]);
    let mut shape = vec![count];
    shape.extend_from_slice(var.ty.shape.get(1..).unwrap_or_default());
    let updates = c.reshape(updates, shape);
    Ok(scatter(c, var, &idx, &updates, combine))
}
