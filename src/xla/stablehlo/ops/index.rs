//! The first-version indexing ops, lowered as their successors:
//! `Concat(concat_dim, values...)` as `ConcatV2` with the axis moved last,
//! `Gather(params, indices)` as a `GatherV2` along axis 0 (its indices
//! checked under a device-check scope, as `GatherV2`'s are), and
//! `Reverse(tensor, dims)` as `ReverseV2` over the axes its constant
//! boolean `dims` flags. Cost: that of the successor.
//!
//! Also `Roll` (constant shifts: slices and a concatenation), `LinSpace`
//! (constant `num`), `Empty` (zeros), `Bucketize` (one comparison per
//! boundary) and `LowerBound`/`UpperBound` (a `[B, M, N]` comparison
//! summed: linear in the batch times the row length times the values)
//! and `TopKV2` (a stable sort of each row with its indices).

use super::{check, gather, shape, Call};
use crate::exec::Tensor;
use crate::ir::DType;
use crate::xla::stablehlo::text::{Cmp, Ctx, Reducer, Ty, Val};

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

/// `Roll(input, shift, axis)` with constant shifts and axes: per rolled
/// dimension, its last `k` elements sliced off and put first.
pub(super) fn roll(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let (shifts, axes) = (n.ints(1, "shift")?, n.ints(2, "axis")?);
    if shifts.len() != axes.len() {
        return Err(format!("{}: {} shifts for {} axes", n.op, shifts.len(), axes.len()));
    }
    let rank = x.ty.rank();
    let mut total = vec![0i64; rank];
    for (&s, &a) in shifts.iter().zip(&axes) {
        let d = super::axis(a, rank, n.op)?;
        total[d] = total[d].wrapping_add(s);
    }
    let mut out = x.clone();
    for (d, &s) in total.iter().enumerate() {
        let size = x.ty.shape[d];
        if size == 0 || s.rem_euclid(size as i64) == 0 {
            continue;
        }
        let k = s.rem_euclid(size as i64) as usize;
        let shape = out.ty.shape.clone();
        let (mut start, mut limit) = (vec![0; rank], shape.clone());
        start[d] = size - k;
        let tail = shape::slice_range(c, &out, &start, &limit);
        start[d] = 0;
        limit[d] = size - k;
        let head = shape::slice_range(c, &out, &start, &limit);
        out = shape::concatenate(c, &[tail, head], d, out.ty.clone());
    }
    Ok(vec![out])
}

/// `LinSpace(start, stop, num)` with a constant `num`: `start + i · step`,
/// the last value exactly `stop`, as TensorFlow's CPU kernel gives it.
pub(super) fn lin_space(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (start, stop) = (n.input(0)?, n.input(1)?);
    let out = n.out(0)?.clone();
    let num = *out.shape.first().ok_or_else(|| format!("{}: the result must be a vector", n.op))?;
    let a = c.broadcast_to(start, &[num]);
    if num == 1 {
        return Ok(vec![a]);
    }
    let diff = c.elementwise("subtract", &[stop, start]);
    let steps = c.splat(&start.ty, (num - 1) as f64);
    let step = c.elementwise("divide", &[&diff, &steps]);
    let step = c.broadcast_to(&step, &[num]);
    let iota = c.op("stablehlo.iota", &[], "iota_dimension = 0 : i64", out.clone());
    let offsets = c.elementwise("multiply", &[&iota, &step]);
    let values = c.elementwise("add", &[&a, &offsets]);
    let index = c.op("stablehlo.iota", &[], "iota_dimension = 0 : i64", out.with_dtype(DType::I32));
    let last = c.splat(&index.ty, (num - 1) as f64);
    let is_last = c.compare(&index, &last, Cmp::Eq);
    let b = c.broadcast_to(stop, &[num]);
    Ok(vec![c.select(&is_last, &b, &values)])
}

/// `Empty(shape)`: zeros, as TensorFlow's XLA bridge makes it.
pub(super) fn empty(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let out = n.out(0)?.clone();
    Ok(vec![c.splat(&out, 0.0)])
}

/// `Bucketize(input) {boundaries}`: per element, the count of boundaries
/// at or below it, from one comparison against each boundary.
pub(super) fn bucketize(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let bounds: Vec<f64> = n
        .attrs
        .get("boundaries")
        .and_then(|v| v.as_list())
        .unwrap_or_default()
        .iter()
        .filter_map(|v| match v {
            crate::ir::AttrValue::Float(f) => Some(f64::from(*f)),
            crate::ir::AttrValue::Int(i) => Some(*i as f64),
            _ => None,
        })
        .collect();
    let out = n.out(0)?.clone();
    let mut count = c.splat(&out, 0.0);
    let one = c.splat(&out, 1.0);
    let zero = c.splat(&out, 0.0);
    // Float inputs compare in their own type, integers widened to f64.
    let (xv, ty) = if super::is_float(x.ty.dtype) {
        (x.clone(), x.ty.clone())
    } else {
        let f = c.convert(x, DType::F64);
        let ty = f.ty.clone();
        (f, ty)
    };
    for b in bounds {
        let bound = c.splat(&ty, b);
        let above = c.compare(&xv, &bound, Cmp::Ge);
        let add = c.select(&above, &one, &zero);
        count = c.elementwise("add", &[&count, &add]);
    }
    Ok(vec![count])
}

/// `LowerBound`/`UpperBound(sorted_inputs, values)`: per row, the count
/// of sorted inputs below each value (at or below it for the upper
/// bound), from a `[B, M, N]` comparison summed over `N`.
pub(super) fn search_sorted(c: &mut Ctx, n: &Call, upper: bool) -> Result<Vec<Val>, String> {
    let (s, v) = (n.input(0)?, n.input(1)?);
    let (rows, len, m) = match (s.ty.shape.as_slice(), v.ty.shape.as_slice()) {
        (&[r, len], &[_, m]) => (r, len, m),
        _ => return Err(format!("{}: sorted_inputs and values must be matrices", n.op)),
    };
    let out = n.out(0)?.clone();
    let cube = [rows, m, len];
    let sb = c.op(
        "stablehlo.broadcast_in_dim",
        &[s],
        "broadcast_dimensions = array<i64: 0, 2>",
        s.ty.with_shape(cube.to_vec()),
    );
    let vb = c.op(
        "stablehlo.broadcast_in_dim",
        &[v],
        "broadcast_dimensions = array<i64: 0, 1>",
        v.ty.with_shape(cube.to_vec()),
    );
    let below = c.compare(&sb, &vb, if upper { Cmp::Le } else { Cmp::Lt });
    let ones = c.convert(&below, out.dtype);
    Ok(vec![c.reduce(&ones, &[2], Reducer::Add)])
}

/// `TopKV2(input, k)`: a stable descending `stablehlo.sort` of each row
/// together with an iota of its indices, then the first `k` of both.
pub(super) fn top_k(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let (values_ty, indices_ty) = (n.out(0)?.clone(), n.out(1)?.clone());
    let rank = x.ty.rank();
    let last = rank.checked_sub(1).ok_or_else(|| format!("{}: input must have rank 1 or more", n.op))?;
    let iota_ty = x.ty.with_dtype(DType::I32);
    let iota = c.op("stablehlo.iota", &[], &format!("iota_dimension = {last} : i64"), iota_ty.clone());
    // The comparator sees (value a, value b, index a, index b) and orders greater values first.
    let (t, i) = (Ty::scalar(x.ty.dtype).mlir(), Ty::scalar(DType::I32).mlir());
    let (a, b, ia, ib, p) = (c.fresh(), c.fresh(), c.fresh(), c.fresh(), c.fresh());
    let kind = if super::is_float(x.ty.dtype) { "FLOAT" } else { "SIGNED" };
    let region = format!(
        "({{\n^bb0({a}: {t}, {b}: {t}, {ia}: {i}, {ib}: {i}):\n  {p} = \"stablehlo.compare\"({a}, {b}) \
         {{comparison_direction = #stablehlo<comparison_direction GT>, compare_type = #stablehlo<comparison_type {kind}>}} \
         : ({t}, {t}) -> tensor<i1>\n  \"stablehlo.return\"({p}) : (tensor<i1>) -> ()\n}})"
    );
    let sorted = c.op_regions(
        "stablehlo.sort",
        &[x, &iota],
        &[region],
        &format!("dimension = {last} : i64, is_stable = true"),
        &[x.ty.clone(), iota_ty],
    );
    let start = vec![0; rank];
    let limit = values_ty.shape.clone();
    let values = shape::slice_range(c, &sorted[0], &start, &limit);
    let indices = shape::slice_range(c, &sorted[1], &start, &limit);
    Ok(vec![values, c.convert(&indices, indices_ty.dtype)])
}

/// `ReverseSequence(input, seq_lengths) {seq_dim, batch_dim}`: an
/// element-wise gather whose index along `seq_dim` is `len − 1 − i` where
/// `i < len` (the batch's length) and `i` elsewhere.
pub(super) fn reverse_sequence(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (x, lens) = (n.input(0)?, n.input(1)?);
    let rank = x.ty.rank();
    let sd = super::axis(n.int_attr("seq_dim", 0), rank, n.op)?;
    let bd = super::axis(n.int_attr("batch_dim", 0), rank, n.op)?;
    let out = n.out(0)?.clone();
    let int = x.ty.with_dtype(DType::I32);
    let lens = c.convert(lens, DType::I32);
    let lens =
        c.op("stablehlo.broadcast_in_dim", &[&lens], &format!("broadcast_dimensions = array<i64: {bd}>"), int.clone());
    let mut coords = Vec::with_capacity(rank);
    let mut one = x.ty.shape.clone();
    one.push(1);
    for d in 0..rank {
        let iota = c.op("stablehlo.iota", &[], &format!("iota_dimension = {d} : i64"), int.clone());
        let coord = if d == sd {
            let inside = c.compare(&iota, &lens, Cmp::Lt);
            let last = c.splat(&int, 1.0);
            let top = c.elementwise("subtract", &[&lens, &last]);
            let mirrored = c.elementwise("subtract", &[&top, &iota]);
            c.select(&inside, &mirrored, &iota)
        } else {
            iota
        };
        coords.push(c.reshape(&coord, one.clone()));
    }
    let indices =
        shape::concatenate(c, &coords, rank, int.with_shape(one.iter().take(rank).copied().chain([rank]).collect()));
    let all: Vec<String> = (0..rank).map(|d| d.to_string()).collect();
    let attrs = format!(
        "dimension_numbers = #stablehlo.gather<offset_dims = [], collapsed_slice_dims = [{0}], start_index_map = [{0}], index_vector_dim = {rank}>, slice_sizes = {1}, indices_are_sorted = false",
        all.join(", "),
        super::i64s(&vec![1; rank])
    );
    Ok(vec![c.op("stablehlo.gather", &[x, &indices], &attrs, out)])
}
