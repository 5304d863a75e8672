//! Reductions over constant axes (`Sum`, `Mean`, `Max`, `Min`, `Prod`,
//! `Any`, `All`), `ArgMax`/`ArgMin` (the first index of the extreme, as
//! TensorFlow picks it) and `Cumsum`/`Cumprod` (a `reduce_window` over the axis).
//! Cost: one `stablehlo.reduce` (two for arg max) per TF op.

use super::{axis, expand, i64s, Call};
use crate::xla::stablehlo::text::{Cmp, Ctx, Reducer, Val};

/// `InTopKV2(predictions, targets, k)`: the target's score is picked by a
/// one-hot mask; a row is in the top `k` when fewer than `k` scores exceed
/// it, the target is in range and its score is finite.
pub(super) fn in_top_k(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (p, t) = (n.input(0)?, n.input(1)?);
    let (rows, classes) = match p.ty.shape.as_slice() {
        &[r, k] => (r, k),
        s => return Err(format!("InTopKV2: predictions must be a matrix, got shape {s:?}")),
    };
    let int = t.ty.with_shape(vec![rows, classes]);
    let cls = c.op("stablehlo.iota", &[], "iota_dimension = 1 : i64", int.clone());
    let tb = c.op("stablehlo.broadcast_in_dim", &[t], "broadcast_dimensions = array<i64: 0>", int);
    let hit = c.compare(&cls, &tb, Cmp::Eq);
    let low = c.splat(&p.ty, f64::NEG_INFINITY);
    let picked = c.select(&hit, p, &low);
    let score = c.reduce(&picked, &[1], Reducer::Max);
    let sb = c.op("stablehlo.broadcast_in_dim", &[&score], "broadcast_dimensions = array<i64: 0>", p.ty.clone());
    let above = c.compare(p, &sb, Cmp::Gt);
    let ones = c.convert(&above, t.ty.dtype);
    let count = c.reduce(&ones, &[1], Reducer::Add);
    let k = c.convert(n.input(2)?, t.ty.dtype);
    let kb = c.broadcast_to(&k, &[rows]);
    let within = c.compare(&count, &kb, Cmp::Lt);
    let finite = c.op("stablehlo.is_finite", &[&score], "", score.ty.with_dtype(crate::ir::DType::Bool));
    let zero = c.splat(&t.ty, 0.0);
    let top = c.splat(&t.ty, classes as f64);
    let (ge, lt) = (c.compare(t, &zero, Cmp::Ge), c.compare(t, &top, Cmp::Lt));
    let a = c.elementwise("and", &[&within, &finite]);
    let b = c.elementwise("and", &[&ge, &lt]);
    Ok(vec![c.elementwise("and", &[&a, &b])])
}

/// Which reduction.
#[derive(Clone, Copy, Debug)]
pub(super) enum Kind {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
    Any,
    All,
}

/// The axes of operand 1, normalised, sorted and distinct.
fn axes(n: &Call, rank: usize) -> Result<Vec<usize>, String> {
    let mut dims = Vec::new();
    for a in n.ints(1, "axes")? {
        dims.push(axis(a, rank, n.op)?);
    }
    dims.retain(|&d| d < rank);
    dims.sort_unstable();
    dims.dedup();
    Ok(dims)
}

/// A reduction over constant axes, keeping dimensions when asked (the traced shape).
pub(super) fn reduce(c: &mut Ctx, n: &Call, kind: Kind) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let dims = axes(n, x.ty.rank())?;
    let reducer = match kind {
        Kind::Sum | Kind::Mean => Reducer::Add,
        Kind::Max => Reducer::Max,
        Kind::Min => Reducer::Min,
        Kind::Prod => Reducer::Mul,
        Kind::Any => Reducer::Or,
        Kind::All => Reducer::And,
    };
    let mut r = c.reduce(x, &dims, reducer);
    if matches!(kind, Kind::Mean) {
        let count: usize = dims.iter().map(|&d| x.ty.shape[d]).product();
        let k = c.splat(&r.ty, count.max(1) as f64);
        r = c.elementwise("divide", &[&r, &k]);
    }
    let out = n.out(0)?.shape.clone();
    Ok(vec![c.reshape(&r, out)])
}

/// `ArgMax`/`ArgMin(x, axis)`: the smallest index where `x` equals its extreme.
pub(super) fn arg_extreme(c: &mut Ctx, n: &Call, max: bool) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let shape = x.ty.shape.clone();
    let a = axis(*n.ints(1, "axis")?.first().ok_or("axis is empty")?, shape.len(), n.op)?;
    let out = n.out(0)?.clone();
    let m = c.reduce(x, &[a], if max { Reducer::Max } else { Reducer::Min });
    let mb = expand(c, &m, &shape, &[a]);
    let hit = c.compare(x, &mb, Cmp::Eq);
    let iota = c.op("stablehlo.iota", &[], &format!("iota_dimension = {a} : i64"), out.with_shape(shape.clone()));
    let big = c.splat(&iota.ty, shape[a] as f64);
    let idx = c.select(&hit, &iota, &big);
    Ok(vec![c.reduce(&idx, &[a], Reducer::Min)])
}

/// `Cumsum`/`Cumprod(x, axis) {exclusive, reverse}`: a window sum (or
/// product) of the axis' length, padded before the first element with the
/// reduction's identity; exclusive shifts the input by one first.
pub(super) fn cumulative(c: &mut Ctx, n: &Call, reducer: Reducer) -> Result<Vec<Val>, String> {
    let identity = reducer.identity(n.input(0)?.ty.dtype);
    scan(c, n, identity, |c, dtype| c.reducer_region(dtype, reducer))
}

/// A running reduction of `x` along `axis` (as [`cumulative`]) with the
/// scalar `region` (made by `region(ctx, dtype)`) and its `identity`.
pub(super) fn scan(
    c: &mut Ctx,
    n: &Call,
    identity: f64,
    region: impl FnOnce(&mut Ctx, crate::ir::DType) -> String,
) -> Result<Vec<Val>, String> {
    let x0 = n.input(0)?;
    let rank = x0.ty.rank();
    let a = axis(*n.ints(1, "axis")?.first().ok_or("axis is empty")?, rank, n.op)?;
    let len = x0.ty.shape[a];
    let reverse = n.attrs.get_bool("reverse").unwrap_or(false);
    let exclusive = n.attrs.get_bool("exclusive").unwrap_or(false);
    let rev =
        |c: &mut Ctx, v: &Val| c.op("stablehlo.reverse", &[v], &format!("dimensions = array<i64: {a}>"), v.ty.clone());
    let mut x = if reverse { rev(c, x0) } else { x0.clone() };
    if exclusive && len > 0 {
        let zero = c.splat(&crate::xla::stablehlo::text::Ty::scalar(x.ty.dtype), identity);
        let low: Vec<i64> = (0..rank).map(|d| i64::from(d == a)).collect();
        let high: Vec<i64> = (0..rank).map(|d| -i64::from(d == a)).collect();
        x = c.op(
            "stablehlo.pad",
            &[&x, &zero],
            &format!(
                "edge_padding_low = {}, edge_padding_high = {}, interior_padding = {}",
                i64s(&low),
                i64s(&high),
                i64s(&vec![0; rank])
            ),
            x.ty.clone(),
        );
    }
    let window: Vec<usize> = (0..rank).map(|d| if d == a { len.max(1) } else { 1 }).collect();
    let pads: Vec<String> =
        (0..rank).map(|d| if d == a { format!("[{}, 0]", len.saturating_sub(1)) } else { "[0, 0]".into() }).collect();
    let init = c.splat(&crate::xla::stablehlo::text::Ty::scalar(x.ty.dtype), identity);
    let region = region(c, x.ty.dtype);
    let attrs = format!(
        "window_dimensions = {}, window_strides = {}, padding = dense<[{}]> : tensor<{rank}x2xi64>",
        i64s(&window),
        i64s(&vec![1; rank]),
        pads.join(", ")
    );
    let ty = x.ty.clone();
    let mut r = c.op_regions("stablehlo.reduce_window", &[&x, &init], &[region], &attrs, &[ty]).remove(0);
    if reverse {
        r = rev(c, &r);
    }
    Ok(vec![r])
}
