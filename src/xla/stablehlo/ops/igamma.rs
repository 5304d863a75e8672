//! Builders of the incomplete gamma and beta functions as TensorFlow's XLA
//! bridge lowers them (XLA's `math.cc`): `Igamma`, `Igammac`, `IgammaGradA`,
//! `RandomGammaGrad` and `Betainc`.
//!
//! The gamma functions evaluate `P(a, x)` by its power series where
//! `x ≤ 1` or `x ≤ a` and `Q = 1 - P` by Legendre's continued fraction
//! elsewhere, each as one `stablehlo.while` over the whole tensor: the loop
//! carries an `enabled` mask, runs while any element is enabled, and an
//! element stops changing once its last step falls below the dtype's
//! epsilon (for the derivatives, the derivative's step). `IgammaGradA` and
//! `RandomGammaGrad` carry the derivative of each term in `a` along.
//! `Betainc` runs the modified Lentz algorithm on the continued fraction
//! of DLMF 8.17.22 (on `1 - x` with `a`, `b` swapped where it converges
//! faster), up to 200 (f32) or 600 (f64) steps. Domain edges are XLA's:
//! NaN for `a ≤ 0`, `x < 0` or a NaN operand (`Igammac`: 1 for `x ≤ 0` or
//! `a ≤ 0`), 0 or 1 at `x = 0` and `x = ∞`. bf16 and f16 compute in f32.
//! Every value the loop bodies read is carried (the regions capture
//! nothing); constants are made inside them. Cost: O(terms) elementwise
//! ops on the tensor, the terms being those of its slowest element.

use super::{is_float, Call};
use crate::ir::DType;
use crate::xla::stablehlo::text::{Cmp, Ctx, Reducer, Ty, Val};

/// What the gamma expansions compute.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Value,
    Derivative,
    SampleDerivative,
}

/// `stablehlo.while` over `init`: `cond` gives the scalar predicate and `body` the next values.
fn while_loop(
    c: &mut Ctx,
    init: &[Val],
    cond: impl FnOnce(&mut Ctx, &[Val]) -> Val,
    body: impl FnOnce(&mut Ctx, &[Val]) -> Vec<Val>,
) -> Vec<Val> {
    let types: Vec<Ty> = init.iter().map(|v| v.ty.clone()).collect();
    let mut cr = c.scratch();
    let (args, head) = Val::params(&mut cr, &types);
    cr.line(&format!("^bb0({head}):"));
    let p = cond(&mut cr, &args);
    ret(&mut cr, &[p]);
    let mut br = cr.scratch();
    let (args, head) = Val::params(&mut br, &types);
    br.line(&format!("^bb0({head}):"));
    let out = body(&mut br, &args);
    ret(&mut br, &out);
    c.resume(&br);
    let regions = [format!("{{\n{}}}", cr.text), format!("{{\n{}}}", br.text)];
    let refs: Vec<&Val> = init.iter().collect();
    c.op_regions("stablehlo.while", &refs, &regions, "", &types)
}

/// `"stablehlo.return"(vals)`.
fn ret(c: &mut Ctx, vals: &[Val]) {
    let names: Vec<&str> = vals.iter().map(|v| v.name.as_str()).collect();
    let types: Vec<String> = vals.iter().map(|v| v.ty.mlir()).collect();
    c.line(&format!("\"stablehlo.return\"({}) : ({}) -> ()", names.join(", "), types.join(", ")));
}

/// Whether any element of a predicate tensor is set, as a scalar.
fn any(c: &mut Ctx, p: &Val) -> Val {
    let dims: Vec<usize> = (0..p.ty.shape.len()).collect();
    c.reduce(p, &dims, Reducer::Or)
}

/// The epsilon and the largest finite value of `dtype`.
fn limits(dtype: DType) -> (f64, f64) {
    match dtype {
        DType::F64 => (f64::EPSILON, f64::MAX),
        DType::BF16 => (f64::from(half::bf16::EPSILON), f64::from(half::bf16::MAX)),
        DType::F16 => (f64::from(half::f16::EPSILON), f64::from(half::f16::MAX)),
        _ => (f64::from(f32::EPSILON), f64::from(f32::MAX)),
    }
}

/// Small helpers over one tensor type.
struct Math<'c> {
    c: &'c mut Ctx,
    ty: Ty,
}

impl Math<'_> {
    fn k(&mut self, v: f64) -> Val {
        self.c.splat(&self.ty, v)
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
    fn un(&mut self, op: &str, a: &Val) -> Val {
        self.c.elementwise(op, &[a])
    }
    fn chlo(&mut self, op: &str, a: &Val) -> Val {
        let ty = a.ty.clone();
        self.c.op(op, &[a], "", ty)
    }
    fn cmp(&mut self, a: &Val, b: &Val, cmp: Cmp) -> Val {
        self.c.compare(a, b, cmp)
    }
    fn cmp_k(&mut self, a: &Val, v: f64, cmp: Cmp) -> Val {
        let k = self.k(v);
        self.c.compare(a, &k, cmp)
    }
    fn and(&mut self, a: &Val, b: &Val) -> Val {
        self.c.elementwise("and", &[a, b])
    }
    fn or(&mut self, a: &Val, b: &Val) -> Val {
        self.c.elementwise("or", &[a, b])
    }
    fn not(&mut self, a: &Val) -> Val {
        self.c.elementwise("not", &[a])
    }
    fn sel(&mut self, p: &Val, a: &Val, b: &Val) -> Val {
        self.c.select(p, a, b)
    }
    fn sel_k(&mut self, p: &Val, v: f64, b: &Val) -> Val {
        let k = self.k(v);
        self.c.select(p, &k, b)
    }
}

/// The series for `P(a, x)` (or its derivative), over the elements `enabled` selects.
fn series(c: &mut Ctx, mode: Mode, ax: &Val, x: &Val, a: &Val, enabled: &Val, eps: f64) -> Val {
    let ty = a.ty.clone();
    let mut m = Math { c, ty: ty.clone() };
    let (one, zero) = (m.k(1.0), m.k(0.0));
    let init = [enabled.clone(), a.clone(), one.clone(), one, x.clone(), zero.clone(), zero];
    let out = while_loop(
        m.c,
        &init,
        |c, v| any(c, &v[0]),
        |c, v| {
            let mut m = Math { c, ty: ty.clone() };
            let (en, r, cc, ans, x, dc_da, dans_da) = (&v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6]);
            let one = m.k(1.0);
            let r1 = m.add(r, &one);
            let xr = m.div(x, &r1);
            // dc_da · x/r - c·x / r².
            let t1 = m.mul(dc_da, &xr);
            let cx = m.mul(cc, x);
            let ncx = m.un("negate", &cx);
            let rr = m.mul(&r1, &r1);
            let t2 = m.div(&ncx, &rr);
            let dc = m.add(&t1, &t2);
            let dans = m.add(dans_da, &dc);
            let c1 = m.mul(cc, &xr);
            let ans1 = m.add(ans, &c1);
            let step = if mode == Mode::Value {
                m.div(&c1, &ans1)
            } else {
                let q = m.div(&dc, &dans);
                m.un("abs", &q)
            };
            let going = m.cmp_k(&step, eps, Cmp::Gt);
            let going = m.and(en, &going);
            let mut next = vec![going];
            for (new, old) in [(&r1, r), (&c1, cc), (&ans1, ans), (x, x), (&dc, dc_da), (&dans, dans_da)] {
                next.push(m.sel(en, new, old));
            }
            next
        },
    );
    let (ans, dans_da) = (&out[3], &out[6]);
    if mode == Mode::Value {
        let t = m.mul(ans, ax);
        return m.div(&t, a);
    }
    let one = m.k(1.0);
    let a1 = m.add(a, &one);
    let dg = m.chlo("chlo.digamma", &a1);
    let lx = m.un("log", x);
    let dlogax_da = m.sub(&lx, &dg);
    let t = m.mul(ans, &dlogax_da);
    if mode == Mode::Derivative {
        let s = m.add(&t, dans_da);
        let s = m.mul(ax, &s);
        m.div(&s, a)
    } else {
        let s = m.add(dans_da, &t);
        let s = m.mul(&s, x);
        let s = m.div(&s, a);
        m.un("negate", &s)
    }
}

/// The continued fraction for `Q(a, x)` (or its derivative), over the elements `enabled` selects.
fn continued_fraction(c: &mut Ctx, mode: Mode, ax: &Val, x: &Val, a: &Val, enabled: &Val, eps: f64) -> Val {
    let ty = a.ty.clone();
    let scalar = Ty::scalar(ty.dtype);
    let mut m = Math { c, ty: ty.clone() };
    let one = m.k(1.0);
    let y = m.sub(&one, a);
    let z = m.add(x, &y);
    let z = m.add(&z, &one);
    let count = m.c.splat(&scalar, 0.0);
    let pkm2 = one.clone();
    let qkm2 = x.clone();
    let pkm1 = m.add(x, &one);
    let qkm1 = m.mul(&z, x);
    let ans = m.div(&pkm1, &qkm1);
    let t = one;
    let zero = m.k(0.0);
    let dqkm1 = m.un("negate", x);
    // (dpkm1 - ans · dqkm1) / qkm1 with dpkm1 = 0.
    let p = m.mul(&ans, &dqkm1);
    let p = m.un("negate", &p);
    let dans_da = m.div(&p, &qkm1);
    let init = [
        enabled.clone(),
        ans,
        t,
        y,
        z,
        count,
        pkm1,
        qkm1,
        pkm2,
        qkm2,
        zero.clone(),
        zero.clone(),
        zero,
        dqkm1,
        dans_da,
    ];
    let out = while_loop(
        m.c,
        &init,
        |c, v| {
            let limit = c.splat(&v[5].ty, 2000.0);
            let more = c.compare(&v[5], &limit, Cmp::Lt);
            let on = any(c, &v[0]);
            c.elementwise("and", &[&more, &on])
        },
        |c, v| {
            let mut m = Math { c, ty: ty.clone() };
            let en = &v[0];
            let one_s = m.c.splat(&v[5].ty, 1.0);
            let count = m.c.elementwise("add", &[&v[5], &one_s]);
            let cnt = m.c.broadcast_to(&count, &ty.shape);
            let one = m.k(1.0);
            let two = m.k(2.0);
            let y = m.add(&v[3], &one);
            let z = m.add(&v[4], &two);
            let yc = m.mul(&y, &cnt);
            let (pkm1, qkm1, pkm2, qkm2) = (&v[6], &v[7], &v[8], &v[9]);
            let (dpkm2, dqkm2, dpkm1, dqkm1, dans_da) = (&v[10], &v[11], &v[12], &v[13], &v[14]);
            let a1 = m.mul(pkm1, &z);
            let a2 = m.mul(pkm2, &yc);
            let pk = m.sub(&a1, &a2);
            let b1 = m.mul(qkm1, &z);
            let b2 = m.mul(qkm2, &yc);
            let qk = m.sub(&b1, &b2);
            let nonzero = m.cmp_k(&qk, 0.0, Cmp::Ne);
            let r = m.div(&pk, &qk);
            let d = m.sub(&v[1], &r);
            let d = m.div(&d, &r);
            let d = m.un("abs", &d);
            let t = m.sel(&nonzero, &d, &one);
            let ans = m.sel(&nonzero, &r, &v[1]);
            // d/da of the recurrences: dpk = dpkm1 z - pkm1 - dpkm2 yc + pkm2 c, likewise dqk.
            let deriv = |m: &mut Math, d1: &Val, v1: &Val, d2: &Val, v2: &Val| {
                let s = m.mul(d1, &z);
                let s = m.sub(&s, v1);
                let u = m.mul(d2, &yc);
                let s = m.sub(&s, &u);
                let w = m.mul(v2, &cnt);
                m.add(&s, &w)
            };
            let dpk = deriv(&mut m, dpkm1, pkm1, dpkm2, pkm2);
            let dqk = deriv(&mut m, dqkm1, qkm1, dqkm2, qkm2);
            let num = m.mul(&ans, &dqk);
            let num = m.sub(&dpk, &num);
            let dnew = m.div(&num, &qk);
            let dnew = m.sel(&nonzero, &dnew, dans_da);
            let diff = m.sub(&dnew, dans_da);
            let diff = m.un("abs", &diff);
            let grad_step = m.sel(&nonzero, &diff, &one);
            // Rescale when the numerators grow past 1/eps.
            let apk = m.un("abs", &pk);
            let rescale = m.cmp_k(&apk, 1.0 / eps, Cmp::Gt);
            let epsv = m.k(eps);
            let scaled = |m: &mut Math, v: &Val| {
                let s = m.mul(v, &epsv);
                m.sel(&rescale, &s, v)
            };
            let npkm2 = scaled(&mut m, pkm1);
            let npkm1 = scaled(&mut m, &pk);
            let nqkm2 = scaled(&mut m, qkm1);
            let nqkm1 = scaled(&mut m, &qk);
            let ndpkm2 = scaled(&mut m, dpkm1);
            let ndqkm2 = scaled(&mut m, dqkm1);
            let ndpkm1 = scaled(&mut m, &dpk);
            let ndqkm1 = scaled(&mut m, &dqk);
            let step = if mode == Mode::Value { &t } else { &grad_step };
            let going = m.cmp_k(step, eps, Cmp::Gt);
            let going = m.and(en, &going);
            let mut next = vec![going];
            for (new, i) in [(&ans, 1), (&t, 2), (&y, 3), (&z, 4)] {
                next.push(m.sel(en, new, &v[i]));
            }
            next.push(count);
            for (new, i) in [
                (&npkm1, 6),
                (&nqkm1, 7),
                (&npkm2, 8),
                (&nqkm2, 9),
                (&ndpkm2, 10),
                (&ndqkm2, 11),
                (&ndpkm1, 12),
                (&ndqkm1, 13),
                (&dnew, 14),
            ] {
                next.push(m.sel(en, new, &v[i]));
            }
            next
        },
    );
    let ans = &out[1];
    if mode == Mode::Value {
        return m.mul(ans, ax);
    }
    let dans_da = &out[14];
    let dg = m.chlo("chlo.digamma", a);
    let lx = m.un("log", x);
    let dlogax_da = m.sub(&lx, &dg);
    let t = m.mul(ans, &dlogax_da);
    let s = m.add(&t, dans_da);
    if mode == Mode::Derivative {
        m.mul(ax, &s)
    } else {
        let s = m.mul(&s, x);
        m.un("negate", &s)
    }
}

/// The operands broadcast to the result's shape, widened to f32 when 16-bit; and the result type.
fn operands(c: &mut Ctx, n: &Call, count: usize) -> Result<(Vec<Val>, Ty), String> {
    let out = n.out(0)?.clone();
    if !is_float(out.dtype) {
        return Err(format!("{} takes floating-point operands, not {:?}", n.op, out.dtype));
    }
    let mut vals = Vec::with_capacity(count);
    for i in 0..count {
        let v = c.broadcast_to(n.input(i)?, &out.shape);
        vals.push(if matches!(out.dtype, DType::BF16 | DType::F16) { c.convert(&v, DType::F32) } else { v });
    }
    Ok((vals, out))
}

/// `Igamma`, `IgammaGradA`, `RandomGammaGrad` and `Igammac`.
pub(super) fn igamma(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (vals, out) = operands(c, n, 2)?;
    let (a, x) = (&vals[0], &vals[1]);
    let ty = a.ty.clone();
    // XLA takes the limits of f32 for Igamma and Igammac, of the operands' own type for the others.
    let limit_type = if matches!(n.op, "Igamma" | "Igammac") { ty.dtype } else { out.dtype };
    let (eps, max) = limits(limit_type);
    let mut m = Math { c, ty: ty.clone() };
    let lx = m.un("log", x);
    let t = m.mul(a, &lx);
    let t = m.sub(&t, x);
    let lg = m.chlo("chlo.lgamma", a);
    let log_ax = m.sub(&t, &lg);
    let underflow = m.cmp_k(&log_ax, -max.ln(), Cmp::Lt);
    let ax = m.un("exponential", &log_ax);
    let inf = m.cmp_k(x, f64::INFINITY, Cmp::Eq);
    let result = if n.op == "Igammac" {
        let x_le0 = m.cmp_k(x, 0.0, Cmp::Le);
        let a_le0 = m.cmp_k(a, 0.0, Cmp::Le);
        let out_of_range = m.or(&x_le0, &a_le0);
        let x_lt1 = m.cmp_k(x, 1.0, Cmp::Lt);
        let x_lta = m.cmp(x, a, Cmp::Lt);
        let use_series = m.or(&x_lt1, &x_lta);
        let off = m.or(&out_of_range, &underflow);
        let enabled = m.not(&off);
        let on_series = m.and(&enabled, &use_series);
        let not_series = m.not(&use_series);
        let on_fraction = m.and(&enabled, &not_series);
        let p = series(m.c, Mode::Value, &ax, x, a, &on_series, eps);
        let one = m.k(1.0);
        let q_series = m.sub(&one, &p);
        let q = continued_fraction(m.c, Mode::Value, &ax, x, a, &on_fraction, eps);
        let r = m.sel(&use_series, &q_series, &q);
        let r = m.sel_k(&inf, 0.0, &r);
        m.sel_k(&out_of_range, 1.0, &r)
    } else {
        let mode = match n.op {
            "Igamma" => Mode::Value,
            "IgammaGradA" => Mode::Derivative,
            _ => Mode::SampleDerivative,
        };
        let nan_a = m.cmp(a, a, Cmp::Ne);
        let nan_x = m.cmp(x, x, Cmp::Ne);
        let is_nan = m.or(&nan_a, &nan_x);
        let x_zero = m.cmp_k(x, 0.0, Cmp::Eq);
        let x_lt0 = m.cmp_k(x, 0.0, Cmp::Lt);
        let a_le0 = m.cmp_k(a, 0.0, Cmp::Le);
        let domain_error = m.or(&x_lt0, &a_le0);
        let x_gt1 = m.cmp_k(x, 1.0, Cmp::Gt);
        let x_gta = m.cmp(x, a, Cmp::Gt);
        let use_fraction = m.and(&x_gt1, &x_gta);
        let off = m.or(&x_zero, &domain_error);
        let off = m.or(&off, &underflow);
        let off = m.or(&off, &is_nan);
        let enabled = m.not(&off);
        let on_fraction = m.and(&enabled, &use_fraction);
        let not_fraction = m.not(&use_fraction);
        let on_series = m.and(&enabled, &not_fraction);
        let q = continued_fraction(m.c, mode, &ax, x, a, &on_fraction, eps);
        let from_fraction = if mode == Mode::Value {
            let one = m.k(1.0);
            m.sub(&one, &q)
        } else {
            m.un("negate", &q)
        };
        let p = series(m.c, mode, &ax, x, a, &on_series, eps);
        let r = m.sel(&use_fraction, &from_fraction, &p);
        let r = m.sel_k(&x_zero, 0.0, &r);
        let r = if mode == Mode::Value { m.sel_k(&inf, 1.0, &r) } else { r };
        let bad = m.or(&domain_error, &is_nan);
        m.sel_k(&bad, f64::NAN, &r)
    };
    Ok(vec![c_out(m.c, result, out.dtype)])
}

/// `result` in the op's own dtype.
fn c_out(c: &mut Ctx, result: Val, dtype: DType) -> Val {
    c.convert(&result, dtype)
}

/// `Betainc(a, b, x)`: the regularized incomplete beta function by the Lentz algorithm.
pub(super) fn betainc(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (vals, out) = operands(c, n, 3)?;
    let ty = vals[0].ty.clone();
    let (iterations, small) =
        if ty.dtype == DType::F64 { (600.0, f64::EPSILON / 2.0) } else { (200.0, 0.5 * f64::from(f32::EPSILON)) };
    let mut m = Math { c, ty: ty.clone() };
    let (a0, b0, x0) = (&vals[0], &vals[1], &vals[2]);
    let a_le0 = m.cmp_k(a0, 0.0, Cmp::Le);
    let b_le0 = m.cmp_k(b0, 0.0, Cmp::Le);
    let x_lt0 = m.cmp_k(x0, 0.0, Cmp::Lt);
    let x_gt1 = m.cmp_k(x0, 1.0, Cmp::Gt);
    let is_nan = m.or(&a_le0, &b_le0);
    let is_nan = m.or(&is_nan, &x_lt0);
    let is_nan = m.or(&is_nan, &x_gt1);
    // Where x ≥ (a + 1) / (a + b + 2), I_x(a, b) = 1 - I_{1-x}(b, a) converges faster.
    let one = m.k(1.0);
    let two = m.k(2.0);
    let a1 = m.add(a0, &one);
    let ab = m.add(a0, b0);
    let ab2 = m.add(&ab, &two);
    let bound = m.div(&a1, &ab2);
    let fast = m.cmp(x0, &bound, Cmp::Lt);
    let a = m.sel(&fast, a0, b0);
    let b = m.sel(&fast, b0, a0);
    let x1 = m.sub(&one, x0);
    let x = m.sel(&fast, x0, &x1);
    // The first partial denominator is 0, below `small`: the Lentz start is `small`.
    let h = m.k(small);
    let zero = m.k(0.0);
    let iteration = m.c.splat(&Ty::scalar(DType::I32), 1.0);
    let unconverged = m.c.splat(&Ty::scalar(DType::Bool), 1.0);
    let init = [iteration, unconverged, h.clone(), zero, h, a.clone(), b.clone(), x.clone()];
    let out_vals = while_loop(
        m.c,
        &init,
        |c, v| {
            let limit = c.splat(&v[0].ty, iterations);
            let more = c.compare(&v[0], &limit, Cmp::Lt);
            c.elementwise("and", &[&more, &v[1]])
        },
        |c, v| {
            let (it, cc, d, h, a, b, x) = (&v[0], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
            let int = Ty::scalar(DType::I32);
            // m = (n - 1) / 2 for the n-th partial numerator; odd and even n differ, n = 1 gives 1.
            let one_i = c.splat(&int, 1.0);
            let two_i = c.splat(&int, 2.0);
            let zero_i = c.splat(&int, 0.0);
            let nm1 = c.elementwise("subtract", &[it, &one_i]);
            let half = c.elementwise("divide", &[&nm1, &two_i]);
            let rem = c.elementwise("remainder", &[it, &two_i]);
            let even = c.compare(&rem, &zero_i, Cmp::Eq);
            let first = c.compare(it, &one_i, Cmp::Eq);
            let even = c.broadcast_to(&even, &ty.shape);
            let first = c.broadcast_to(&first, &ty.shape);
            let mf = c.convert(&half, ty.dtype);
            let mf = c.broadcast_to(&mf, &ty.shape);
            let mut m = Math { c, ty: ty.clone() };
            let one = m.k(1.0);
            let two = m.k(2.0);
            let two_m = m.mul(&two, &mf);
            let a2m = m.add(a, &two_m);
            // Even: -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1)).
            let am = m.add(a, &mf);
            let abm = m.add(a, b);
            let abm = m.add(&abm, &mf);
            let e = m.mul(&am, &abm);
            let e = m.mul(&e, x);
            let e = m.un("negate", &e);
            let a2m1 = m.add(&a2m, &one);
            let ed = m.mul(&a2m, &a2m1);
            let even_num = m.div(&e, &ed);
            // Odd: m (b - m) x / ((a + 2m - 1)(a + 2m)).
            let bm = m.sub(b, &mf);
            let o = m.mul(&mf, &bm);
            let o = m.mul(&o, x);
            let a2m_1 = m.sub(&a2m, &one);
            let od = m.mul(&a2m_1, &a2m);
            let odd_num = m.div(&o, &od);
            let num = m.sel(&even, &even_num, &odd_num);
            let num = m.sel(&first, &one, &num);
            // The partial denominators after the first are 1.
            let smallv = m.k(small);
            let q = m.div(&num, cc);
            let c1 = m.add(&one, &q);
            let ac = m.un("abs", &c1);
            let tiny = m.cmp(&ac, &smallv, Cmp::Lt);
            let c1 = m.sel(&tiny, &smallv, &c1);
            let nd = m.mul(&num, d);
            let d1 = m.add(&one, &nd);
            let ad = m.un("abs", &d1);
            let tiny = m.cmp(&ad, &smallv, Cmp::Lt);
            let d1 = m.sel(&tiny, &smallv, &d1);
            let d1 = m.div(&one, &d1);
            let delta = m.mul(&c1, &d1);
            let h1 = m.mul(h, &delta);
            let dm1 = m.sub(&delta, &one);
            let dm1 = m.un("abs", &dm1);
            let far = m.cmp_k(&dm1, small, Cmp::Ge);
            let unconverged = any(m.c, &far);
            let it1 = m.c.elementwise("add", &[it, &one_i]);
            vec![it1, unconverged, c1, d1, h1, a.clone(), b.clone(), x.clone()]
        },
    );
    let fraction = &out_vals[4];
    // fraction · exp(a log x + b log1p(-x) - ln B(a, b)) / a.
    let la = m.chlo("chlo.lgamma", &a);
    let lb = m.chlo("chlo.lgamma", &b);
    let ab = m.add(&a, &b);
    let lab = m.chlo("chlo.lgamma", &ab);
    let lbeta = m.add(&la, &lb);
    let lbeta = m.sub(&lbeta, &lab);
    let lx = m.un("log", &x);
    let t1 = m.mul(&lx, &a);
    let nx = m.un("negate", &x);
    let l1 = m.un("log_plus_one", &nx);
    let t2 = m.mul(&l1, &b);
    let s = m.add(&t1, &t2);
    let s = m.sub(&s, &lbeta);
    let e = m.un("exponential", &s);
    let r = m.mul(fraction, &e);
    let r = m.div(&r, &a);
    let r = m.sel_k(&is_nan, f64::NAN, &r);
    let one = m.k(1.0);
    let flipped = m.sub(&one, &r);
    let result = m.sel(&fast, &r, &flipped);
    Ok(vec![c_out(m.c, result, out.dtype)])
}
