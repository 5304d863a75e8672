//! Spatial data-movement builders: `DepthToSpace`, `SpaceToDepth`,
//! `SpaceToBatchND`/`SpaceToBatch`, `BatchToSpaceND`/`BatchToSpace`,
//! `MirrorPad`, `MirrorPadGrad`, `DataFormatVecPermute` and
//! `DataFormatDimMap`.
//!
//! A movement op's result depends on its operand's shape and constant
//! operands only, so the builder runs the simulator's own kernel on the
//! element numbers `1..=count` of the operand: each result element says
//! which operand element it copies (0: a padded zero). The device program
//! gathers exactly those from the flat operand with a zero in front; a
//! gradient (`MirrorPadGrad`, and in `image` `ResizeNearestNeighborGrad`)
//! scatter-adds instead. The values are copies,
//! so they equal those of TensorFlow's XLA bridge, which reshapes and
//! transposes. Cost: one gather of a constant index per result element.

use super::{i64s, Call};
use crate::exec::Tensor;
use crate::ir::{AttrValue, DType};
use crate::xla::stablehlo::text::{Cmp, Ctx, Reducer, Ty, Val};

/// Runs the simulator's kernel of `op` (with `n`'s attributes) on the
/// element numbers `1..=count` of `shape` and the operands `rest`.
pub(super) fn numbered(n: &Call, op: &str, shape: &[usize], rest: Vec<Tensor>) -> Result<Tensor, String> {
    let count: usize = shape.iter().product();
    let numbers = Tensor::from_vec(shape, (1..=count as i64).collect()).map_err(|e| e.to_string())?;
    let mut inputs = vec![numbers];
    inputs.extend(rest);
    let mut attrs = n.attrs.clone();
    attrs.insert("T", AttrValue::Type(DType::I64));
    let out = crate::exec::run_kernel(op, &attrs, &inputs).map_err(|e| e.to_string())?;
    out.into_iter().next().ok_or_else(|| format!("{op} gave no result"))
}

/// `n`'s constant operands after the first.
fn constant_rest(n: &Call) -> Result<Vec<Tensor>, String> {
    let mut rest = Vec::new();
    for (i, t) in n.consts.iter().enumerate().skip(1) {
        rest.push(t.clone().ok_or_else(|| format!("{}: operand {i} must be a compile-time constant", n.op))?);
    }
    Ok(rest)
}

/// The numbers `idx` as an i64 constant with a trailing index-vector dimension of 1.
fn index_constant(c: &mut Ctx, n: &Call, idx: &Tensor) -> Result<Val, String> {
    let mut shape = idx.shape().to_vec();
    shape.push(1);
    let v = idx.to_i64_vec(n.op, "indices").map_err(|e| e.to_string())?;
    Ok(c.constant(&Tensor::from_vec(&shape, v).map_err(|e| e.to_string())?))
}

/// A movement op: the elements the kernel picks, gathered from `[0, x...]`.
pub(super) fn moved(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let out = n.out(0)?.clone();
    let idx = numbered(n, n.op, &x.ty.shape, constant_rest(n)?)?;
    if idx.shape() != out.shape.as_slice() {
        return Err(format!("{}: the kernel gives shape {:?}, the trace {:?}", n.op, idx.shape(), out.shape));
    }
    let flat = c.reshape(x, vec![x.ty.count()]);
    let zero = c.splat(&x.ty.with_shape(vec![1]), 0.0);
    let padded =
        c.op("stablehlo.concatenate", &[&zero, &flat], "dimension = 0 : i64", x.ty.with_shape(vec![x.ty.count() + 1]));
    let indices = index_constant(c, n, &idx)?;
    let rank = idx.shape().len();
    let attrs = format!(
        "dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = {rank}>, slice_sizes = array<i64: 1>, indices_are_sorted = false"
    );
    Ok(vec![c.op("stablehlo.gather", &[&padded, &indices], &attrs, out)])
}

/// `MirrorPadGrad(grad, paddings)`: each gradient element added into the
/// input element `MirrorPad` copies to its place.
pub(super) fn mirror_pad_grad(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let out = n.out(0)?.clone();
    let idx = numbered(n, "MirrorPad", &out.shape, constant_rest(n)?)?;
    Ok(vec![scatter_numbered(c, n, n.input(0)?, &idx, out)?])
}

/// `g` scattered (added) into zeros of type `out`: element `k` of `g` to
/// the element numbered `idx[k]` (numbers from 1; 0 drops it).
pub(super) fn scatter_numbered(c: &mut Ctx, n: &Call, g: &Val, idx: &Tensor, out: Ty) -> Result<Val, String> {
    if idx.shape() != g.ty.shape.as_slice() {
        return Err(format!(
            "{}: the gradient has shape {:?}, the forward op gives {:?}",
            n.op,
            g.ty.shape,
            idx.shape()
        ));
    }
    // The scatter target is the flat result with a slot 0 in front.
    let zeros = c.splat(&out.with_shape(vec![out.count() + 1]), 0.0);
    let indices = index_constant(c, n, idx)?;
    let rank = idx.shape().len();
    let region = c.reducer_region(out.dtype, Reducer::Add);
    let attrs = format!(
        "scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = {rank}>, indices_are_sorted = false, unique_indices = false"
    );
    let ty = zeros.ty.clone();
    let s = c.op_regions("stablehlo.scatter", &[&zeros, &indices, g], &[region], &attrs, &[ty]).remove(0);
    let body = c.op(
        "stablehlo.slice",
        &[&s],
        &format!(
            "start_indices = {}, limit_indices = {}, strides = {}",
            i64s(&[1]),
            i64s(&[out.count() + 1]),
            i64s(&[1])
        ),
        out.with_shape(vec![out.count()]),
    );
    Ok(c.reshape(&body, out.shape))
}

/// `DataFormatDimMap(x)`: each index, taken modulo the format's length,
/// replaced by its entry of the constant table (a chain of selects).
pub(super) fn data_format_dim_map(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let table = {
        // The kernel maps the indices 0..len to the table.
        let probe = Tensor::vector((0..5i64).collect());
        let mut attrs = n.attrs.clone();
        attrs.insert("T", AttrValue::Type(DType::I64));
        let len = n.attrs.get_str("src_format").map_or(4, str::len);
        let probe = probe.head(len);
        crate::exec::run_kernel("DataFormatDimMap", &attrs, &[probe])
            .map_err(|e| e.to_string())?
            .remove(0)
            .to_i64_vec(n.op, "table")
            .map_err(|e| e.to_string())?
    };
    let len = c.splat(&x.ty, table.len() as f64);
    let r = c.elementwise("remainder", &[x, &len]);
    let shifted = c.elementwise("add", &[&r, &len]);
    let idx = c.elementwise("remainder", &[&shifted, &len]);
    let mut out = c.splat(&x.ty, 0.0);
    for (i, &v) in table.iter().enumerate() {
        let at = c.splat(&x.ty, i as f64);
        let hit = c.compare(&idx, &at, Cmp::Eq);
        let value = c.splat(&x.ty, v as f64);
        out = c.select(&hit, &value, &out);
    }
    Ok(vec![out])
}
