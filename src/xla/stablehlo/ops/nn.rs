//! Neural-network builders: softmax and log-softmax, the cross-entropy
//! losses, `L2Loss`, `BiasAdd` and its gradient, and fused batch norm
//! (NHWC) with its gradient. bf16 and f16 operands of batch norm are
//! widened to f32 and the results rounded back once, as the simulator
//! does. Cost: a few reductions and elementwise ops per TF op.

use super::{expand, Call};
use crate::ir::DType;
use crate::xla::stablehlo::text::{Ctx, Reducer, Ty, Val};

/// The channel dimension of `BiasAdd`/`BiasAddGrad`.
fn channel_dim(n: &Call, rank: usize) -> usize {
    match n.attrs.get_str("data_format") {
        Some("NCHW") | Some("NCW") | Some("NCDHW") if rank > 1 => 1,
        _ => rank.saturating_sub(1),
    }
}

pub(super) fn bias_add(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let bias = n.input(1)?;
    let dim = channel_dim(n, x.ty.rank());
    let b =
        c.op("stablehlo.broadcast_in_dim", &[bias], &format!("broadcast_dimensions = array<i64: {dim}>"), x.ty.clone());
    Ok(vec![c.elementwise("add", &[x, &b])])
}

pub(super) fn bias_add_grad(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let dim = channel_dim(n, x.ty.rank());
    let dims: Vec<usize> = (0..x.ty.rank()).filter(|&d| d != dim).collect();
    Ok(vec![c.reduce(x, &dims, Reducer::Add)])
}

/// `x - max(x)` over the last axis, with the axis.
fn shifted(c: &mut Ctx, x: &Val) -> (Val, usize) {
    let last = x.ty.rank().saturating_sub(1);
    let m = c.reduce(x, &[last], Reducer::Max);
    let mb = expand(c, &m, &x.ty.shape, &[last]);
    (c.elementwise("subtract", &[x, &mb]), last)
}

/// Softmax over the last axis: `exp(x - max) / sum(exp(x - max))`.
pub(super) fn softmax(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let (s, last) = shifted(c, x);
    let e = c.elementwise("exponential", &[&s]);
    let sum = c.reduce(&e, &[last], Reducer::Add);
    let sb = expand(c, &sum, &x.ty.shape, &[last]);
    Ok(vec![c.elementwise("divide", &[&e, &sb])])
}

/// `x - max - log(sum(exp(x - max)))` over the last axis.
pub(super) fn log_softmax(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let last = x.ty.rank().saturating_sub(1);
    let m = c.reduce(x, &[last], Reducer::Max);
    let mb = expand(c, &m, &x.ty.shape, &[last]);
    let s = c.elementwise("subtract", &[x, &mb]);
    let e = c.elementwise("exponential", &[&s]);
    let sum = c.reduce(&e, &[last], Reducer::Add);
    let l = c.elementwise("log", &[&sum]);
    let lse = c.elementwise("add", &[&l, &m]);
    let lb = expand(c, &lse, &x.ty.shape, &[last]);
    Ok(vec![c.elementwise("subtract", &[x, &lb])])
}

/// Loss `sum(p · (lse - shifted))` and backprop `softmax - p` for targets `p`.
fn xent(c: &mut Ctx, logits: &Val, p: &Val) -> Vec<Val> {
    let (s, last) = shifted(c, logits);
    let e = c.elementwise("exponential", &[&s]);
    let sum = c.reduce(&e, &[last], Reducer::Add);
    let lse = c.elementwise("log", &[&sum]);
    let lb = expand(c, &lse, &logits.ty.shape, &[last]);
    let d = c.elementwise("subtract", &[&lb, &s]);
    let terms = c.elementwise("multiply", &[p, &d]);
    let loss = c.reduce(&terms, &[last], Reducer::Add);
    let sb = expand(c, &sum, &logits.ty.shape, &[last]);
    let soft = c.elementwise("divide", &[&e, &sb]);
    let backprop = c.elementwise("subtract", &[&soft, p]);
    vec![loss, backprop]
}

/// `SoftmaxCrossEntropyWithLogits(logits, labels)` → (loss, backprop).
pub(super) fn softmax_xent(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let logits = n.input(0)?;
    let labels = c.broadcast_to(n.input(1)?, &logits.ty.shape);
    Ok(xent(c, logits, &labels))
}

/// `SparseSoftmaxCrossEntropyWithLogits(logits, ids)`: the targets are `one_hot(ids)`.
pub(super) fn sparse_softmax_xent(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let logits = n.input(0)?;
    let ids = n.input(1)?;
    let shape = logits.ty.shape.clone();
    let iota = c.op("stablehlo.iota", &[], "iota_dimension = 1 : i64", ids.ty.with_shape(shape.clone()));
    let idb = c.op("stablehlo.broadcast_in_dim", &[ids], "broadcast_dimensions = array<i64: 0>", iota.ty.clone());
    let hit = c.compare(&iota, &idb, crate::xla::stablehlo::text::Cmp::Eq);
    let p = c.convert(&hit, logits.ty.dtype);
    Ok(xent(c, logits, &p))
}

/// `sum(x²) / 2`.
pub(super) fn l2_loss(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let sq = c.elementwise("multiply", &[x, x]);
    let dims: Vec<usize> = (0..x.ty.rank()).collect();
    let s = c.reduce(&sq, &dims, Reducer::Add);
    let two = c.splat(&s.ty, 2.0);
    Ok(vec![c.elementwise("divide", &[&s, &two])])
}

/// The dtype batch norm computes in: f64 stays, everything else is f32.
fn wide(dtype: DType) -> DType {
    if dtype == DType::F64 {
        DType::F64
    } else {
        DType::F32
    }
}

/// Batch-norm settings from the attributes.
struct Bn {
    eps: f64,
    factor: f64,
    training: bool,
}

fn bn(n: &Call) -> Bn {
    Bn {
        eps: n.float_attr("epsilon", 1e-4),
        factor: n.float_attr("exponential_avg_factor", 1.0),
        training: n.attrs.get_bool("is_training").unwrap_or(true),
    }
}

/// Per-channel sums over N, H, W of a 4-D NHWC value, divided by `count`.
fn channel_mean(c: &mut Ctx, x: &Val, count: f64) -> Val {
    let s = c.reduce(x, &[0, 1, 2], Reducer::Add);
    let k = c.splat(&s.ty, count);
    c.elementwise("divide", &[&s, &k])
}

/// `FusedBatchNorm{,V2,V3}(x, scale, offset, mean, variance)` → y, running
/// mean, running variance, batch mean, batch (biased) variance, and an
/// empty reserve.
pub(super) fn batch_norm(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let cfg = bn(n);
    let x0 = n.input(0)?;
    if x0.ty.rank() != 4 {
        return Err(format!("x must be 4-D NHWC, got {:?}", x0.ty.shape));
    }
    let w = wide(x0.ty.dtype);
    let x = c.convert(x0, w);
    let [scale, offset, est_mean, est_var] = [1, 2, 3, 4].map(|i| n.input(i).map(|v| c.convert(v, w)));
    let (scale, offset, est_mean, est_var) = (scale?, offset?, est_mean?, est_var?);
    let shape = x.ty.shape.clone();
    let rest = (shape[0] * shape[1] * shape[2]) as f64;
    let (mean, var, out_mean, out_var) = if cfg.training {
        let m = channel_mean(c, &x, rest.max(1.0));
        let mb = expand(c, &m, &shape, &[0, 1, 2]);
        let d = c.elementwise("subtract", &[&x, &mb]);
        let d2 = c.elementwise("multiply", &[&d, &d]);
        let v = channel_mean(c, &d2, rest.max(1.0));
        let adjust = c.splat(&v.ty, if rest > 1.0 { rest / (rest - 1.0) } else { 1.0 });
        let unbiased = c.elementwise("multiply", &[&v, &adjust]);
        if cfg.factor == 1.0 {
            (m.clone(), v.clone(), m, unbiased)
        } else {
            let f = c.splat(&v.ty, cfg.factor);
            let keep = c.splat(&v.ty, 1.0 - cfg.factor);
            let old_m = c.elementwise("multiply", &[&keep, &est_mean]);
            let new_m = c.elementwise("multiply", &[&f, &m]);
            let om = c.elementwise("add", &[&old_m, &new_m]);
            let old_v = c.elementwise("multiply", &[&keep, &est_var]);
            let fv = c.elementwise("multiply", &[&f, &v]);
            let new_v = c.elementwise("multiply", &[&fv, &adjust]);
            let ov = c.elementwise("add", &[&old_v, &new_v]);
            (m, v, om, ov)
        }
    } else {
        (est_mean.clone(), est_var.clone(), est_mean, est_var)
    };
    let eps = c.splat(&var.ty, cfg.eps);
    let ve = c.elementwise("add", &[&var, &eps]);
    let root = c.elementwise("sqrt", &[&ve]);
    let factor = c.elementwise("divide", &[&scale, &root]);
    let mb = expand(c, &mean, &shape, &[0, 1, 2]);
    let fb = expand(c, &factor, &shape, &[0, 1, 2]);
    let ob = expand(c, &offset, &shape, &[0, 1, 2]);
    let d = c.elementwise("subtract", &[&x, &mb]);
    let scaled = c.elementwise("multiply", &[&d, &fb]);
    let y = c.elementwise("add", &[&scaled, &ob]);
    let mut out = Vec::new();
    for (i, v) in [y, out_mean, out_var, mean, var].iter().enumerate() {
        out.push(c.convert(v, n.out(i).map_or(x0.ty.dtype, |t| t.dtype)));
    }
    if let Ok(reserve) = n.out(5) {
        let reserve = reserve.clone();
        out.push(empty(c, &reserve));
    }
    Ok(out)
}

/// A value of `ty` (zero-sized for the reserves).
fn empty(c: &mut Ctx, ty: &Ty) -> Val {
    c.splat(ty, 0.0)
}

/// `FusedBatchNormGrad{,V2,V3}(dy, x, scale, reserve_1, reserve_2, ...)` →
/// dx, dscale, doffset and two empty reserves.
pub(super) fn batch_norm_grad(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let cfg = bn(n);
    let x0 = n.input(1)?;
    if x0.ty.rank() != 4 {
        return Err(format!("x must be 4-D NHWC, got {:?}", x0.ty.shape));
    }
    let w = wide(x0.ty.dtype);
    let [dy, x, scale, mean, var] = [0, 1, 2, 3, 4].map(|i| n.input(i).map(|v| c.convert(v, w)));
    let (dy, x, scale, mean, var) = (dy?, x?, scale?, mean?, var?);
    let shape = x.ty.shape.clone();
    let all = [0, 1, 2];
    let eps = c.splat(&var.ty, cfg.eps);
    let ve = c.elementwise("add", &[&var, &eps]);
    let one = c.splat(&var.ty, 1.0);
    let root = c.elementwise("sqrt", &[&ve]);
    let inv = c.elementwise("divide", &[&one, &root]);
    let mb = expand(c, &mean, &shape, &all);
    let ib = expand(c, &inv, &shape, &all);
    let d = c.elementwise("subtract", &[&x, &mb]);
    let xhat = c.elementwise("multiply", &[&d, &ib]);
    let sum_dy = c.reduce(&dy, &all, Reducer::Add);
    let dxh = c.elementwise("multiply", &[&dy, &xhat]);
    let sum_dy_xhat = c.reduce(&dxh, &all, Reducer::Add);
    let si = c.elementwise("multiply", &[&scale, &inv]);
    let sib = expand(c, &si, &shape, &all);
    let dx = if cfg.training {
        let count = (shape[0] * shape[1] * shape[2]).max(1) as f64;
        let k = c.splat(&x.ty, count);
        let ndy = c.elementwise("multiply", &[&k, &dy]);
        let sb = expand(c, &sum_dy, &shape, &all);
        let sxb = expand(c, &sum_dy_xhat, &shape, &all);
        let t = c.elementwise("subtract", &[&ndy, &sb]);
        let u = c.elementwise("multiply", &[&xhat, &sxb]);
        let inner = c.elementwise("subtract", &[&t, &u]);
        let kk = c.splat(&x.ty, count);
        let f = c.elementwise("divide", &[&sib, &kk]);
        c.elementwise("multiply", &[&f, &inner])
    } else {
        c.elementwise("multiply", &[&dy, &sib])
    };
    let mut out = Vec::new();
    for (i, v) in [dx, sum_dy_xhat, sum_dy].iter().enumerate() {
        out.push(c.convert(v, n.out(i).map_or(x0.ty.dtype, |t| t.dtype)));
    }
    for i in 3..n.outputs.len() {
        let ty = n.out(i)?.clone();
        out.push(empty(c, &ty));
    }
    Ok(out)
}
