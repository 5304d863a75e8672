//! The first-version indexing ops, lowered as their successors:
//! `Concat(concat_dim, values...)` as `ConcatV2` with the axis moved last,
//! `Gather(params, indices)` as a `GatherV2` along axis 0 (its indices
//! checked under a device-check scope, as `GatherV2`'s are), and
//! `Reverse(tensor, dims)` as `ReverseV2` over the axes its constant
//! boolean `dims` flags. Cost: that of the successor.

use super::{check, gather, shape, Call};
use crate::exec::Tensor;
use crate::xla::stablehlo::text::{Ctx, Val};

/// `Concat(concat_dim, values...)`.
pub(super) fn concat_v1(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    if n.inputs.is_empty() {
        return Err(format!("{}: needs concat_dim and values", n.op));
    }
    let mut inputs = n.inputs[1..].to_vec();
    inputs.push(n.inputs[0].clone());
    let mut consts = n.consts.get(1..).unwrap_or_default().to_vec();
    consts.push(n.consts.first().cloned().flatten());
    let rotated = Call { inputs, consts, ..*n };
    shape::concat(c, &rotated)
}

/// `Gather(params, indices)`.
pub(super) fn gather_v1(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (params, indices) = (n.input(0)?, n.input(1)?);
    let rows = *params.ty.shape.first().ok_or_else(|| format!("{}: params must have rank 1 or more", n.op))?;
    let out = n.out(0)?.clone();
    check::in_range(c, indices, rows, || format!("{} of {}", n.op, params.ty.mlir()));
    Ok(vec![gather::gather(c, params, indices, 0, out)])
}

/// `Reverse(tensor, dims)`.
pub(super) fn reverse_v1(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let rank = n.input(0)?.ty.rank();
    let dims = n
        .consts
        .get(1)
        .and_then(Option::as_ref)
        .ok_or_else(|| format!("{}: dims must be a compile-time constant", n.op))?;
    let flags = dims.to_vec::<bool>().ok_or_else(|| format!("{}: dims must be bool", n.op))?;
    if flags.len() != rank {
        return Err(format!("{}: dims holds {} flags for rank {rank}", n.op, flags.len()));
    }
    let axes: Vec<i64> = flags.iter().enumerate().filter(|(_, &f)| f).map(|(a, _)| a as i64).collect();
    let mut consts = n.consts.clone();
    consts[1] = Some(Tensor::vector(axes));
    let call = Call { inputs: n.inputs.clone(), consts, ..*n };
    shape::reverse(c, &call)
}
