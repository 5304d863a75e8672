//! Variable updates beyond reads and assignments: the optimizers'
//! `ResourceApply*` ops, `ResourceGather`, `ResourceScatter{Add,Sub,Update}`,
//! `ReadVariableXlaSplitND` and `AssignVariableXlaConcatND` (in `xla_misc`)
//! (the other resource scatters are built in `segment`, `ResourceStridedSliceAssign`
//! in `data_ops`).
//! The emitter keeps each variable's current value as an SSA value; for
//! these ops it passes the values of the variables the op names (its
//! leading handle operands) and the other operands, and takes back the
//! variables' new values and the op's results. [`evaluate`] is the same
//! step on the host, by the simulator's own kernels, for the trace.
//!
//! Optimizer arithmetic follows the simulator (and TensorFlow's CPU
//! kernels) term by term; bf16 and f16 slots are updated in f32 and
//! rounded back once. Cost: a few elementwise ops per slot.

use super::gather::{gather, gather_batched, scatter, Combine};
use super::Call;
use crate::exec::kernels::{
    gather as host_gather, optimizers, random_state as host_random_state, segment as host_segment,
    stateful_random as host_stateful_random,
};
use crate::exec::Tensor;
use crate::ir::{AttrMap, DType};
use crate::xla::stablehlo::text::{Cmp, Ctx, Ty, Val};

/// Ops the emitter itself threads through the step (reads and assignments).
const EMITTER_OPS: &[&str] = &[
    "AssignAddVariableOp",
    "AssignSubVariableOp",
    "AssignVariableOp",
    "ReadVariableOp",
    "Update",
    "UpdateNonSlot",
    "VarIsInitializedOp",
];

/// How many leading operands of `op` are variable handles (0: not a variable op).
pub fn handle_operands(op: &str) -> usize {
    if EMITTER_OPS.contains(&op)
        || matches!(
            op,
            "AssignVariableXlaConcatND"
                | "ReadVariableXlaSplitND"
                | "ResourceGather"
                | "ResourceScatterAdd"
                | "ResourceScatterSub"
                | "ResourceScatterUpdate"
                | "ResourceStridedSliceAssign"
        )
        || host_segment::RESOURCE_SCATTERS.contains(&op)
        || host_random_state::SKIP_OPS.contains(&op)
        || host_stateful_random::DRAW_OPS.contains(&op)
    {
        return 1;
    }
    optimizers::resource_inputs(op).unwrap_or(0)
}

/// True for ops on variables (the emitter's own and this module's).
pub fn is_state_op(op: &str) -> bool {
    handle_operands(op) > 0
}

/// True for the ops [`build`] lowers (the rest are the emitter's).
pub fn has_builder(op: &str) -> bool {
    is_state_op(op) && !EMITTER_OPS.contains(&op)
}

/// The variables' new values and the op's results, on the host.
pub(crate) fn evaluate(
    op: &str,
    attrs: &AttrMap,
    vars: &[Tensor],
    rest: &[Tensor],
) -> Result<(Vec<Tensor>, Vec<Tensor>), String> {
    let arg = |i: usize| rest.get(i).ok_or_else(|| format!("missing operand {}", i + 1));
    let var = vars.first().ok_or("no variable")?;
    match op {
        "ReadVariableXlaSplitND" => {
            let tiles = crate::exec::run_kernel("XlaSplitND", attrs, vars).map_err(|e| e.to_string())?;
            Ok((vars.to_vec(), tiles))
        }
        "AssignVariableXlaConcatND" => {
            let joined = crate::exec::run_kernel("XlaConcatND", attrs, rest).map_err(|e| e.to_string())?;
            if joined.first().map(|j| (j.dtype(), j.shape())) != Some((var.dtype(), var.shape())) {
                return Err(format!("the joined tiles do not make the variable's {}{:?}", var.dtype(), var.shape()));
            }
            Ok((joined, Vec::new()))
        }
        "ResourceGather" => {
            let batch_dims = attrs.get_int("batch_dims").unwrap_or(0);
            let out = host_gather::resource_gather(op, var, arg(0)?, batch_dims).map_err(|e| e.to_string())?;
            Ok((vars.to_vec(), vec![out]))
        }
        "ResourceScatterAdd" | "ResourceScatterSub" | "ResourceScatterUpdate" => {
            let how =
                if op == "ResourceScatterUpdate" { host_gather::Combine::Replace } else { host_gather::Combine::Add };
            let new = host_gather::scatter_rows(op, var, arg(0)?, arg(1)?, how, op == "ResourceScatterSub")
                .map_err(|e| e.to_string())?;
            Ok((vec![new], Vec::new()))
        }
        _ if host_random_state::SKIP_OPS.contains(&op) => {
            let (new, out) = host_random_state::skip(op, var, arg(0)?, arg(1)?).map_err(|e| e.to_string())?;
            Ok((vec![new], out))
        }
        _ if host_stateful_random::DRAW_OPS.contains(&op) => {
            let (new, out) = host_stateful_random::draw(op, attrs, var, rest).map_err(|e| e.to_string())?;
            Ok((vec![new], out))
        }
        "ResourceStridedSliceAssign" => {
            let mut operands = vec![var.clone()];
            operands.extend(rest.iter().cloned());
            let new =
                crate::exec::run_kernel("TensorStridedSliceUpdate", attrs, &operands).map_err(|e| e.to_string())?;
            Ok((new, Vec::new()))
        }
        _ if host_segment::RESOURCE_SCATTERS.contains(&op) => {
            let new = host_segment::resource_scatter(op, var, arg(0)?, arg(1)?).map_err(|e| e.to_string())?;
            Ok((vec![new], Vec::new()))
        }
        _ => Ok((optimizers::apply(op, attrs, vars, rest).map_err(|e| e.to_string())?, Vec::new())),
    }
}

/// The variables' new values and the op's results, on the device.
/// `n.inputs` are the operands after the handles.
pub fn build(c: &mut Ctx, n: &Call, vars: &[Val]) -> Result<(Vec<Val>, Vec<Val>), String> {
    let var = vars.first().ok_or("no variable")?;
    match n.op {
        "ReadVariableXlaSplitND" => Ok((vars.to_vec(), super::xla_misc::read_split(c, n, var)?)),
        "AssignVariableXlaConcatND" => Ok((vec![super::xla_misc::assign_concat(c, n, var)?], Vec::new())),
        "ResourceGather" => {
            // Along axis `batch_dims`, the leading `batch_dims` dimensions paired.
            let indices = n.input(0)?;
            let b = n.int_attr("batch_dims", 0);
            let b = if b < 0 { b + indices.ty.rank() as i64 } else { b };
            let b =
                usize::try_from(b).ok().filter(|&b| b <= indices.ty.rank() && b < var.ty.rank().max(1)).ok_or_else(
                    || format!("batch_dims {} does not fit the indices and the variable", n.int_attr("batch_dims", 0)),
                )?;
            let out = n.out(0)?.clone();
            let rows = var.ty.shape.get(b).copied().unwrap_or(1);
            super::check::in_range(c, indices, rows, || format!("{} on axis {b} of {}", n.op, var.ty.mlir()));
            let result =
                if b == 0 { gather(c, var, indices, 0, out) } else { gather_batched(c, var, indices, b, b, out) };
            Ok((vars.to_vec(), vec![result]))
        }
        "ResourceScatterAdd" | "ResourceScatterSub" | "ResourceScatterUpdate" => {
            let ids = n.input(0)?;
            let count = ids.ty.count();
            let rows = var.ty.shape.first().copied().unwrap_or(1);
            super::check::in_range(c, ids, rows, || format!("{} into {}", n.op, var.ty.mlir()));
            let idx = c.reshape(ids, vec![count, 1]);
            let mut rows = vec![count];
            rows.extend_from_slice(&var.ty.shape[1..]);
            let mut updates = c.reshape(n.input(1)?, rows);
            if n.op == "ResourceScatterSub" {
                updates = c.elementwise("negate", &[&updates]);
            }
            let how = if n.op == "ResourceScatterUpdate" { Combine::Replace } else { Combine::Add };
            Ok((vec![scatter(c, var, &idx, &updates, how)], Vec::new()))
        }
        _ if host_random_state::SKIP_OPS.contains(&n.op) => super::random_state::skip(c, n, var),
        _ if host_stateful_random::DRAW_OPS.contains(&n.op) => super::stateful_random::draw(c, n, var),
        "ResourceStridedSliceAssign" => {
            Ok((vec![super::data_ops::resource_strided_slice_assign(c, n, var)?], Vec::new()))
        }
        _ if host_segment::RESOURCE_SCATTERS.contains(&n.op) => {
            Ok((vec![super::segment::resource_scatter(c, n, var)?], Vec::new()))
        }
        _ => Ok((optimizer(c, n, vars)?, Vec::new())),
    }
}

/// The dtype optimizer arithmetic runs in.
fn wide(dtype: DType) -> DType {
    match dtype {
        DType::BF16 | DType::F16 => DType::F32,
        d => d,
    }
}

/// Elementwise arithmetic on same-typed values, with scalars broadcast.
struct Ew<'a> {
    c: &'a mut Ctx,
    ty: Ty,
}

impl Ew<'_> {
    fn v(&mut self, x: &Val) -> Val {
        let x = self.c.convert(x, self.ty.dtype);
        self.c.broadcast_to(&x, &self.ty.shape.clone())
    }
    fn k(&mut self, value: f64) -> Val {
        let ty = self.ty.clone();
        self.c.splat(&ty, value)
    }
    fn add(&mut self, a: &Val, b: &Val) -> Val {
        self.c.elementwise("add", &[a, b])
    }
    fn sub(&mut self, a: &Val, b: &Val) -> Val {
        self.c.elementwise("subtract", &[a, b])
    }
    fn mul(&mut self, a: &Val, b: &Val) -> Val {
        self.c.elementwise("multiply", &[a, b])
    }
    fn div(&mut self, a: &Val, b: &Val) -> Val {
        self.c.elementwise("divide", &[a, b])
    }
    fn sqrt(&mut self, a: &Val) -> Val {
        self.c.elementwise("sqrt", &[a])
    }
    fn max(&mut self, a: &Val, b: &Val) -> Val {
        self.c.elementwise("maximum", &[a, b])
    }
    /// Adam's step size and moments from β1ᵗ, β2ᵗ, the rate, β1, β2 and the
    /// gradient, and the old moments `m` and `v`.
    fn adam(&mut self, one: &Val, [b1p, b2p, lr, b1, b2, g]: [&Val; 6], m: &Val, v: &Val) -> Adam {
        let c2 = self.sub(one, b2p);
        let r2 = self.sqrt(&c2);
        let lr2 = self.mul(lr, &r2);
        let c1 = self.sub(one, b1p);
        let alpha = self.div(&lr2, &c1);
        let ob1 = self.sub(one, b1);
        let ob2 = self.sub(one, b2);
        let gm = self.sub(g, m);
        let dm = self.mul(&gm, &ob1);
        let m = self.add(m, &dm);
        let g2 = self.mul(g, g);
        let gv = self.sub(&g2, v);
        let dv = self.mul(&gv, &ob2);
        let v = self.add(v, &dv);
        Adam { alpha, ob1, m, v }
    }
}

/// What [`Ew::adam`] gives: the bias-corrected step size
/// `lr·√(1−β2ᵗ)/(1−β1ᵗ)`, `1 − β1`, and the new first and second moments.
struct Adam {
    alpha: Val,
    ob1: Val,
    m: Val,
    v: Val,
}

/// `ResourceApply*`: the new slot values (var first).
fn optimizer(c: &mut Ctx, n: &Call, vars: &[Val]) -> Result<Vec<Val>, String> {
    let var_ty = vars[0].ty.clone();
    let ty = var_ty.with_dtype(wide(var_ty.dtype));
    let nesterov = n.attrs.get_bool("use_nesterov").unwrap_or(false);
    let update_slots = n.attrs.get_bool("update_slots").unwrap_or(true);
    let mut e = Ew { c, ty };
    let mut s: Vec<Val> = vars.iter().map(|v| e.v(v)).collect();
    let mut r = Vec::with_capacity(n.inputs.len());
    for x in &n.inputs {
        r.push(e.v(x));
    }
    let get = |i: usize| r.get(i).cloned().ok_or_else(|| format!("missing operand {}", i + vars.len()));
    let one = e.k(1.0);
    match n.op {
        "ResourceApplyGradientDescent" => {
            let (alpha, g) = (get(0)?, get(1)?);
            let step = e.mul(&alpha, &g);
            s[0] = e.sub(&s[0], &step);
        }
        "ResourceApplyMomentum" | "ResourceApplyKerasMomentum" => {
            let (lr, g, momentum) = (get(0)?, get(1)?, get(2)?);
            let am = e.mul(&s[1], &momentum);
            if n.op == "ResourceApplyMomentum" {
                let a = e.add(&am, &g);
                s[0] = if nesterov {
                    let gl = e.mul(&g, &lr);
                    let amo = e.mul(&a, &momentum);
                    let amol = e.mul(&amo, &lr);
                    let step = e.add(&gl, &amol);
                    e.sub(&s[0], &step)
                } else {
                    let step = e.mul(&lr, &a);
                    e.sub(&s[0], &step)
                };
                s[1] = a;
            } else {
                let gl = e.mul(&g, &lr);
                let a = e.sub(&am, &gl);
                s[0] = if nesterov {
                    let amo = e.mul(&a, &momentum);
                    let step = e.sub(&amo, &gl);
                    e.add(&s[0], &step)
                } else {
                    e.add(&s[0], &a)
                };
                s[1] = a;
            }
        }
        "ResourceApplyAdagrad" | "ResourceApplyAdagradV2" => {
            let lr = get(0)?;
            let (eps, g) = if n.op == "ResourceApplyAdagradV2" { (Some(get(1)?), get(2)?) } else { (None, get(1)?) };
            if update_slots {
                let g2 = e.mul(&g, &g);
                s[1] = e.add(&s[1], &g2);
            }
            let gl = e.mul(&g, &lr);
            let mut d = e.sqrt(&s[1]);
            if let Some(eps) = eps {
                d = e.add(&d, &eps);
            }
            let step = e.div(&gl, &d);
            s[0] = e.sub(&s[0], &step);
        }
        "ResourceApplyAdam" => {
            let (b1p, b2p, lr, b1, b2, eps, g) = (get(0)?, get(1)?, get(2)?, get(3)?, get(4)?, get(5)?, get(6)?);
            let Adam { alpha, ob1, m, v } = e.adam(&one, [&b1p, &b2p, &lr, &b1, &b2, &g], &s[1], &s[2]);
            let step = if nesterov {
                let a = e.mul(&g, &ob1);
                let b = e.mul(&b1, &m);
                let ab = e.add(&a, &b);
                e.mul(&ab, &alpha)
            } else {
                e.mul(&m, &alpha)
            };
            let rv = e.sqrt(&v);
            let d = e.add(&rv, &eps);
            let q = e.div(&step, &d);
            s[0] = e.sub(&s[0], &q);
            s[1] = m;
            s[2] = v;
        }
        "ResourceApplyAdamWithAmsgrad" => {
            let (b1p, b2p, lr, b1, b2, eps, g) = (get(0)?, get(1)?, get(2)?, get(3)?, get(4)?, get(5)?, get(6)?);
            let Adam { alpha, m, v, .. } = e.adam(&one, [&b1p, &b2p, &lr, &b1, &b2, &g], &s[1], &s[2]);
            let vhat = e.max(&s[3], &v);
            let ma = e.mul(&m, &alpha);
            let rv = e.sqrt(&vhat);
            let d = e.add(&rv, &eps);
            let q = e.div(&ma, &d);
            s[0] = e.sub(&s[0], &q);
            (s[1], s[2], s[3]) = (m, v, vhat);
        }
        "ResourceApplyAdaMax" => {
            let (b1p, lr, b1, b2, eps, g) = (get(0)?, get(1)?, get(2)?, get(3)?, get(4)?, get(5)?);
            let ob1 = e.sub(&one, &b1);
            let gm = e.sub(&g, &s[1]);
            let dm = e.mul(&gm, &ob1);
            let m = e.add(&s[1], &dm);
            let decayed = e.mul(&b2, &s[2]);
            let ag = e.c.elementwise("abs", &[&g]);
            let v = e.max(&decayed, &ag);
            let c1 = e.sub(&one, &b1p);
            let rate = e.div(&lr, &c1);
            let ve = e.add(&v, &eps);
            let q = e.div(&m, &ve);
            let step = e.mul(&rate, &q);
            s[0] = e.sub(&s[0], &step);
            (s[1], s[2]) = (m, v);
        }
        "ResourceApplyAdadelta" => {
            let (lr, rho, eps, g) = (get(0)?, get(1)?, get(2)?, get(3)?);
            let orho = e.sub(&one, &rho);
            let ar = e.mul(&s[1], &rho);
            let g2 = e.mul(&g, &g);
            let g2r = e.mul(&g2, &orho);
            let accum = e.add(&ar, &g2r);
            let ue = e.add(&s[2], &eps);
            let ae = e.add(&accum, &eps);
            let (su, sa) = (e.sqrt(&ue), e.sqrt(&ae));
            let ratio = e.div(&su, &sa);
            let update = e.mul(&ratio, &g);
            let step = e.mul(&update, &lr);
            s[0] = e.sub(&s[0], &step);
            let ur = e.mul(&s[2], &rho);
            let u2 = e.mul(&update, &update);
            let u2r = e.mul(&u2, &orho);
            s[2] = e.add(&ur, &u2r);
            s[1] = accum;
        }
        "ResourceApplyCenteredRMSProp" => {
            let (lr, rho, momentum, eps, g) = (get(0)?, get(1)?, get(2)?, get(3)?, get(4)?);
            let orho = e.sub(&one, &rho);
            let g2 = e.mul(&g, &g);
            let g2m = e.sub(&g2, &s[2]);
            let dms = e.mul(&g2m, &orho);
            let ms = e.add(&s[2], &dms);
            let gm = e.sub(&g, &s[1]);
            let dmg = e.mul(&gm, &orho);
            let mg = e.add(&s[1], &dmg);
            let mg2 = e.mul(&mg, &mg);
            let var = e.sub(&ms, &mg2);
            let denom = e.add(&var, &eps);
            let rt = e.sqrt(&denom);
            let lg = e.mul(&lr, &g);
            let q = e.div(&lg, &rt);
            let mm = e.mul(&s[3], &momentum);
            let mom = e.add(&mm, &q);
            s[0] = e.sub(&s[0], &mom);
            (s[1], s[2], s[3]) = (mg, ms, mom);
        }
        "ResourceApplyFtrl" | "ResourceApplyFtrlV2" => {
            if n.attrs.get_bool("multiply_linear_by_lr").unwrap_or(false) {
                return Err(format!("{} with multiply_linear_by_lr is not supported", n.op));
            }
            let v2 = n.op == "ResourceApplyFtrlV2";
            let (g, lr, l1, l2) = (get(0)?, get(1)?, get(2)?, get(3)?);
            let lr_power = if v2 { get(5)? } else { get(4)? };
            let two = e.k(2.0);
            let shrunk = if v2 {
                let shrinkage = get(4)?;
                let t = e.mul(&two, &shrinkage);
                let tw = e.mul(&t, &s[0]);
                e.add(&g, &tw)
            } else {
                g.clone()
            };
            let g2 = e.mul(&g, &g);
            let accum = e.add(&s[1], &g2);
            // accum^(-lr_power), as a square root when lr_power is -0.5 (TensorFlow's special case).
            let neg = e.c.elementwise("negate", &[&lr_power]);
            let half = e.k(-0.5);
            let is_half = e.c.compare(&lr_power, &half, Cmp::Eq);
            let power = |e: &mut Ew, x: &Val| {
                let p = e.c.elementwise("power", &[x, &neg]);
                let r = e.sqrt(x);
                e.c.select(&is_half, &r, &p)
            };
            let (pn, po) = (power(&mut e, &accum), power(&mut e, &s[1]));
            let dp = e.sub(&pn, &po);
            let dpl = e.div(&dp, &lr);
            let dw = e.mul(&dpl, &s[0]);
            let step = e.sub(&shrunk, &dw);
            let linear = e.add(&s[2], &step);
            let sign = e.c.elementwise("sign", &[&linear]);
            let l1s = e.mul(&l1, &sign);
            let x = e.sub(&l1s, &linear);
            let pl = e.div(&pn, &lr);
            let tl2 = e.mul(&two, &l2);
            let y = e.add(&pl, &tl2);
            let shrink = e.div(&x, &y);
            let zero = e.k(0.0);
            let mag = e.c.elementwise("abs", &[&linear]);
            let big = e.c.compare(&mag, &l1, Cmp::Gt);
            s[0] = e.c.select(&big, &shrink, &zero);
            (s[1], s[2]) = (accum, linear);
        }
        "ResourceApplyRMSProp" => {
            let (lr, rho, momentum, eps, g) = (get(0)?, get(1)?, get(2)?, get(3)?, get(4)?);
            let orho = e.sub(&one, &rho);
            let g2 = e.mul(&g, &g);
            let gm = e.sub(&g2, &s[1]);
            let dm = e.mul(&gm, &orho);
            let ms = e.add(&s[1], &dm);
            let mm = e.mul(&s[2], &momentum);
            let lg = e.mul(&lr, &g);
            let me = e.add(&ms, &eps);
            let rt = e.sqrt(&me);
            let q = e.div(&lg, &rt);
            let mom = e.add(&mm, &q);
            s[0] = e.sub(&s[0], &mom);
            s[1] = ms;
            s[2] = mom;
        }
        "ResourceApplyProximalGradientDescent" | "ResourceApplyProximalAdagrad" => {
            let adagrad = n.op == "ResourceApplyProximalAdagrad";
            let (lr, l1, l2, g) = (get(0)?, get(1)?, get(2)?, get(3)?);
            let rate = if adagrad {
                let g2 = e.mul(&g, &g);
                s[1] = e.add(&s[1], &g2);
                let root = e.sqrt(&s[1]);
                e.div(&lr, &root)
            } else {
                lr
            };
            let gr = e.mul(&g, &rate);
            let prox = e.sub(&s[0], &gr);
            let rl2 = e.mul(&rate, &l2);
            let shrink = e.add(&one, &rl2);
            // With l1 > 0: sign(prox) · max(|prox| − rate · l1, 0), else prox; both over the shrink.
            let size = e.c.elementwise("abs", &[&prox]);
            let rl1 = e.mul(&rate, &l1);
            let cut = e.sub(&size, &rl1);
            let zero = e.k(0.0);
            let kept = e.max(&cut, &zero);
            let signed = e.c.elementwise("sign", &[&prox]);
            let soft = e.mul(&signed, &kept);
            let positive = e.c.compare(&l1, &zero, Cmp::Gt);
            let top = e.c.select(&positive, &soft, &prox);
            s[0] = e.div(&top, &shrink);
        }
        "ResourceApplyAdagradDA" => {
            let (g, lr, l1, l2, step) = (get(0)?, get(1)?, get(2)?, get(3)?, get(4)?);
            s[1] = e.add(&s[1], &g);
            let g2 = e.mul(&g, &g);
            s[2] = e.add(&s[2], &g2);
            let l2s = e.mul(&l2, &step);
            let l2sl = e.mul(&l2s, &lr);
            let root = e.sqrt(&s[2]);
            let denom = e.add(&l2sl, &root);
            let size = e.c.elementwise("abs", &[&s[1]]);
            let sl1 = e.mul(&step, &l1);
            let cut = e.sub(&size, &sl1);
            let zero = e.k(0.0);
            let kept = e.max(&cut, &zero);
            let signed = e.c.elementwise("sign", &[&s[1]]);
            let soft = e.mul(&signed, &kept);
            let positive = e.c.compare(&l1, &zero, Cmp::Gt);
            let top = e.c.select(&positive, &soft, &s[1]);
            let scaled = e.mul(&lr, &top);
            let neg = e.c.elementwise("negate", &[&scaled]);
            s[0] = e.div(&neg, &denom);
        }
        "ResourceApplyAddSign" | "ResourceApplyPowerSign" => {
            let (lr, base, decay, beta, g) = (get(0)?, get(1)?, get(2)?, get(3)?, get(4)?);
            let mb = e.mul(&s[1], &beta);
            let ob = e.sub(&one, &beta);
            let gb = e.mul(&g, &ob);
            s[1] = e.add(&mb, &gb);
            let sg = e.c.elementwise("sign", &[&g]);
            let sm = e.c.elementwise("sign", &[&s[1]]);
            let agree = e.mul(&sg, &sm);
            let scale = if n.op == "ResourceApplyAddSign" {
                let da = e.mul(&decay, &agree);
                e.add(&base, &da)
            } else {
                let bd = e.mul(&base, &decay);
                let bda = e.mul(&bd, &agree);
                e.c.elementwise("exponential", &[&bda])
            };
            let ls = e.mul(&lr, &scale);
            let step = e.mul(&ls, &g);
            s[0] = e.sub(&s[0], &step);
        }
        other => return Err(format!("no lowering for variable op {other}")),
    }
    Ok(s.iter().map(|v| e.c.convert(v, var_ty.dtype)).collect())
}
