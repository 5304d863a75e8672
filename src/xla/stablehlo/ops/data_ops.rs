//! Lowerings of the data-dependent and update ops, as TensorFlow's XLA
//! bridge builds them: `CumulativeLogsumexp` (a window reduction with a
//! log-add-exp region from `-inf`), `TensorStridedSliceUpdate` and
//! `ResourceStridedSliceAssign` (a scatter to the flat positions the slice
//! reads), `SparseToDense` (a scatter into the default value) and the
//! bincounts (a scatter-add of the weights, or ones).
//!
//! Shapes are static: the slice specs, `output_shape` and `size` must be
//! compile-time constants, as the bridge requires. The bridge refuses
//! strided updates with strides other than ±1 and values that broadcast;
//! these lowerings take them with the CPU kernels' meaning. Device checks
//! (when a check scope is open) fail a run on what the CPU kernels refuse:
//! out-of-range sparse indices and negative bincount values; XLA itself
//! would drop them. `SparseToDense` does not check the order of its
//! indices on the device (the bridge does not either).

use super::gather::{scatter, Combine};
use super::Call;
use crate::exec::Tensor;
use crate::ir::{AttrMap, DType};
use crate::xla::stablehlo::text::{Cmp, Ctx, Ty, Val};

/// `CumulativeLogsumexp(x, axis) {exclusive, reverse}`: each step keeps
/// `max + log1p(exp(min - max))`, or `max` when it is `-inf`.
pub(super) fn cumulative_logsumexp(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let dtype = n.input(0)?.ty.dtype;
    if !matches!(dtype, DType::F32 | DType::F64) {
        return Err(format!("CumulativeLogsumexp takes f32 or f64 here, got {dtype:?}"));
    }
    super::reduce::scan(c, n, f64::NEG_INFINITY, |c, dtype| {
        c.region(dtype, |c, a, b| {
            let hi = c.elementwise("maximum", &[a, b]);
            let lo = c.elementwise("minimum", &[a, b]);
            let d = c.elementwise("subtract", &[&lo, &hi]);
            let e = c.elementwise("exponential", &[&d]);
            let l = c.elementwise("log_plus_one", &[&e]);
            let sum = c.elementwise("add", &[&hi, &l]);
            let floor = c.splat(&Ty::scalar(dtype), f64::NEG_INFINITY);
            let empty = c.compare(&hi, &floor, Cmp::Eq);
            c.select(&empty, &hi, &sum)
        })
    })
}

/// `input` with the elements the strided slice `spec` (begin, end,
/// strides: constants) with `attrs`' masks reads replaced by `value`,
/// broadcast to the slice's shape.
fn strided_update(
    c: &mut Ctx,
    op: &str,
    attrs: &AttrMap,
    input: &Val,
    spec: &[Option<Tensor>],
    value: &Val,
) -> Result<Val, String> {
    let spec: Vec<Tensor> = spec
        .iter()
        .enumerate()
        .map(|(i, t)| t.clone().ok_or_else(|| format!("{op}: operand {} must be a compile-time constant", i + 1)))
        .collect::<Result<_, _>>()?;
    let positions = crate::exec::kernels::data_ops::strided_positions(op, attrs, &input.ty.shape, &spec)
        .map_err(|e| e.to_string())?;
    let slice = positions.shape().to_vec();
    let fits = value.ty.shape.len() <= slice.len()
        && value.ty.shape.iter().rev().zip(slice.iter().rev()).all(|(&v, &s)| v == s || v == 1);
    if !fits {
        return Err(format!("{op}: a value of shape {:?} does not broadcast to the slice {slice:?}", value.ty.shape));
    }
    let count = positions.len();
    let value = c.broadcast_to(value, &slice);
    let updates = c.reshape(&value, vec![count]);
    let idx = Tensor::from_vec(&[count, 1], positions.to_i64_vec(op, "positions").map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    let idx = c.constant(&idx);
    let flat = c.reshape(input, vec![input.ty.count()]);
    let out = scatter(c, &flat, &idx, &updates, Combine::Replace);
    Ok(c.reshape(&out, input.ty.shape.clone()))
}

/// `TensorStridedSliceUpdate(input, begin, end, strides, value)`.
pub(super) fn tensor_strided_slice_update(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let spec = n.consts.get(1..4).ok_or("expected begin, end and strides")?;
    Ok(vec![strided_update(c, n.op, n.attrs, n.input(0)?, spec, n.input(4)?)?])
}

/// `ResourceStridedSliceAssign(ref, begin, end, strides, value)` on the
/// variable's value `var` (`n`'s operands are those after the handle).
pub(super) fn resource_strided_slice_assign(c: &mut Ctx, n: &Call, var: &Val) -> Result<Val, String> {
    let spec = n.consts.get(0..3).ok_or("expected begin, end and strides")?;
    strided_update(c, n.op, n.attrs, var, spec, n.input(3)?)
}

/// `SparseToDense(sparse_indices, output_shape, sparse_values, default_value)`.
pub(super) fn sparse_to_dense(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let out = n.out(0)?.clone();
    let rank = out.rank();
    let indices = n.input(0)?;
    let rows = match indices.ty.shape.as_slice() {
        [] => 1,
        [k] if rank == 1 => *k,
        [k, w] if *w == rank => *k,
        s => return Err(format!("sparse_indices of shape {s:?} do not address an output of rank {rank}")),
    };
    let indices = c.reshape(indices, vec![rows, rank]);
    super::check::nd_in_range(c, &indices, &out.shape, || format!("SparseToDense into {}", out.mlir()));
    let values = n.input(2)?;
    let values = match values.ty.shape.as_slice() {
        [] => c.broadcast_to(values, &[rows]),
        [k] if *k == rows => values.clone(),
        s => return Err(format!("sparse_values of shape {s:?} for {rows} indices")),
    };
    let dense = c.broadcast_to(n.input(3)?, &out.shape);
    Ok(vec![scatter(c, &dense, &indices, &values, Combine::Replace)])
}

/// `Bincount(arr, size, weights)` and `DenseBincount(input, size, weights)
/// {binary_output}`: per row, a scatter-add of the weights (ones when they
/// are empty) at the input's values; values at or above `size` land past
/// the end and are dropped.
pub(super) fn bincount(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let out = n.out(0)?.clone();
    let input = n.input(0)?;
    let (rows, width) = match input.ty.shape.as_slice() {
        [w] => (1, *w),
        [r, w] => (*r, *w),
        s => return Err(format!("{}: an input of shape {s:?}", n.op)),
    };
    let size = *out.shape.last().ok_or("the output has no size")?;
    let binary = n.attrs.get_bool("binary_output").unwrap_or(false);
    let input = c.convert(input, DType::I64);
    let negative = {
        let zero = c.splat(&input.ty, 0.0);
        c.compare(&input, &zero, Cmp::Lt)
    };
    super::check::fail_if(c, &negative, || format!("{}: a value is negative (XLA would drop it)", n.op));
    // The flat slot of each value: row * size + value, or rows * size (dropped) when out of range.
    let grid = input.ty.with_shape(vec![rows, width]);
    let values = c.reshape(&input, vec![rows, width]);
    let row = c.op("stablehlo.iota", &[], "iota_dimension = 0 : i64", grid.clone());
    let size_v = c.splat(&grid, size as f64);
    let base = c.elementwise("multiply", &[&row, &size_v]);
    let slot = c.elementwise("add", &[&base, &values]);
    let zero = c.splat(&grid, 0.0);
    let low = c.compare(&values, &zero, Cmp::Ge);
    let high = c.compare(&values, &size_v, Cmp::Lt);
    let inside = c.elementwise("and", &[&low, &high]);
    let past = c.splat(&grid, (rows * size) as f64);
    let slot = c.select(&inside, &slot, &past);
    let idx = c.reshape(&slot, vec![rows * width, 1]);
    let weights = n.input(2)?;
    let updates = if binary || weights.ty.count() == 0 {
        c.splat(&out.with_shape(vec![rows * width]), 1.0)
    } else {
        c.reshape(weights, vec![rows * width])
    };
    let zeros = c.splat(&out.with_shape(vec![rows * size]), 0.0);
    let how = if binary { Combine::Replace } else { Combine::Add };
    let flat = scatter(c, &zeros, &idx, &updates, how);
    Ok(vec![c.reshape(&flat, out.shape)])
}

/// `ParallelDynamicStitch(indices..., data...)` with constant indices: the
/// data rows, concatenated with one row of zeros, gathered so that output
/// row `r` takes the last data row whose index is `r` (zeros where none is).
pub(super) fn parallel_dynamic_stitch(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let half = n.inputs.len() / 2;
    if half == 0 || !n.inputs.len().is_multiple_of(2) {
        return Err(format!("{}: expected n indices and n data operands, got {}", n.op, n.inputs.len()));
    }
    let out = n.out(0)?.clone();
    let row: Vec<usize> = out.shape.get(1..).unwrap_or_default().to_vec();
    let mut source = vec![None; out.shape.first().copied().unwrap_or(0)];
    let mut parts = Vec::with_capacity(half + 1);
    let mut total = 0usize;
    for i in 0..half {
        let ids = n.ints(i, "indices")?;
        for (k, &r) in ids.iter().enumerate() {
            let slot = usize::try_from(r).ok().and_then(|r| source.get_mut(r)).ok_or_else(|| {
                format!("{}: index {r} is outside the {} output rows", n.op, out.shape.first().copied().unwrap_or(0))
            })?;
            *slot = Some(total + k);
        }
        let mut shape = vec![ids.len()];
        shape.extend_from_slice(&row);
        parts.push(c.reshape(n.input(half + i)?, shape));
        total += ids.len();
    }
    let mut zero_shape = vec![1];
    zero_shape.extend_from_slice(&row);
    parts.push(c.splat(&out.with_shape(zero_shape), 0.0));
    let mut all_shape = vec![total + 1];
    all_shape.extend_from_slice(&row);
    let refs: Vec<&Val> = parts.iter().collect();
    let all = c.op("stablehlo.concatenate", &refs, "dimension = 0 : i64", out.with_shape(all_shape));
    let picks: Vec<i64> = source.iter().map(|s| s.unwrap_or(total) as i64).collect();
    let picks = c.constant(&Tensor::vector(picks));
    Ok(vec![super::gather::gather(c, &all, &picks, 0, out)])
}

/// `ApproxTopK(input) {k, is_max_k}` as XLA's CPU backend runs it: an exact
/// sort along the last axis (`TopKV2`'s), on the negated input for the
/// smallest `k`.
pub(super) fn approx_top_k(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    crate::exec::kernels::data_ops::approx_top_k_axis(n.attrs, x.ty.rank()).map_err(|m| format!("{}: {m}", n.op))?;
    if n.attrs.get_bool("is_max_k").unwrap_or(true) {
        return super::index::top_k(c, n);
    }
    let neg = c.elementwise("negate", &[x]);
    let call = Call {
        op: n.op,
        attrs: n.attrs,
        inputs: vec![neg],
        consts: vec![None],
        outputs: n.outputs,
        num_replicas: n.num_replicas,
    };
    let mut out = super::index::top_k(c, &call)?;
    out[0] = c.elementwise("negate", &[&out[0]]);
    Ok(out)
}
