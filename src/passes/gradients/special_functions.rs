//! Gradient functions of the elementwise math TensorFlow registers in
//! `math_grad.py`, `nn_grad.py`, `array_grad.py` and `clip_ops.py` beyond
//! the common ones: the `*Grad` ops' own gradients (second derivatives of
//! the activations), `Erfc`, `Expm1`, `Log1p`, `Atan2`, `Inv`, the
//! `x·f(y)` family (`Xlogy`, `Xdivy`, `Xlog1py`, `MulNoNan`),
//! `ClipByValue`, `Select`, `L2Loss`, `Cumprod`, `NextAfter`,
//! `CheckNumerics`, `PreventGradient` (an error, as in TensorFlow) and the
//! special functions (`Lgamma`, `Digamma`, `Erfinv`, `Ndtri`,
//! `BesselI0e`, `BesselI1e`, `Zeta` and `Polygamma` in their second
//! operand, `Betainc` in `x`).
//!
//! Each emits the standard ops TensorFlow's gradient function emits, with
//! dynamic shapes; binary ops sum their gradients back to each operand's
//! shape (`BroadcastGradientArgs`). Cost: a few ops per differentiated op.

use super::emitter::{Emitter, TAttr, Tensor};
use super::functions::{Broadcast, Unsupported};
use crate::ir::{AttrValue, DType, NodeId};

/// Emits standard ops of one dtype.
struct Ops<'a, 'g> {
    e: &'a mut Emitter<'g>,
    t: Option<DType>,
    ta: TAttr,
}

impl Ops<'_, '_> {
    fn un(&mut self, op: &'static str, a: Tensor) -> Tensor {
        self.e.emit(op, op, &[a], self.ta.clone())
    }

    fn bin(&mut self, op: &'static str, a: Tensor, b: Tensor) -> Tensor {
        self.e.emit(op, op, &[a, b], self.ta.clone())
    }

    fn mul(&mut self, a: Tensor, b: Tensor) -> Tensor {
        self.e.emit("Mul", "mul", &[a, b], self.ta.clone())
    }

    /// A scalar constant of the gradient's dtype.
    fn scalar(&mut self, base: &str, v: f64) -> Tensor {
        let name = self.e.fresh_name(base);
        self.e.scalar_const_named(&name, self.t, v)
    }

    /// `Cast(NotEqual(x, 0))`: 1 where `x` is nonzero, else 0.
    fn nonzero(&mut self, x: Tensor) -> Tensor {
        let zero = self.scalar("Cast/x", 0.0);
        let ne = self.bin("NotEqual", x, zero);
        let to = self.t.unwrap_or(DType::F32);
        self.e.emit("Cast", "Cast", &[ne], [("SrcT", AttrValue::Type(DType::Bool)), ("DstT", AttrValue::Type(to))])
    }
}

/// The gradients of `op`'s data inputs given `g`; `Err(None)` when `op_type` has no gradient here.
pub fn gradient(
    e: &mut Emitter<'_>,
    op: NodeId,
    op_type: &str,
    inputs: &[Tensor],
    g: Tensor,
) -> Result<Vec<Option<Tensor>>, Unsupported> {
    let y = Tensor::of(op);
    let x = |i: usize| inputs.get(i).copied().ok_or_else(|| Some(format!("expected at least {} inputs", i + 1)));
    let attrs = e.graph.node(op).attrs.clone();
    let t = e.dtype_of(g);
    let ta = e.t_attr(t);
    let mut o = Ops { e, t, ta: ta.clone() };
    let one = |v: Tensor| Ok(vec![Some(v)]);
    match op_type {
        "Erfc" => {
            // -2 / sqrt(pi) * exp(-x²).
            let sq = o.un("Square", x(0)?);
            let neg = o.un("Neg", sq);
            let ex = o.un("Exp", neg);
            let c = o.scalar("mul/y", -2.0 / std::f64::consts::PI.sqrt());
            let gc = o.mul(g, c);
            one(o.mul(gc, ex))
        }
        "Expm1" => {
            let ex = o.un("Exp", x(0)?);
            one(o.mul(g, ex))
        }
        "Log1p" => {
            let c = o.scalar("add/x", 1.0);
            let s = o.bin("AddV2", c, x(0)?);
            let r = o.un("Reciprocal", s);
            one(o.mul(g, r))
        }
        "Softsign" => one(o.e.emit("SoftsignGrad", "SoftsignGrad", &[g, x(0)?], ta)),
        "Inv" => one(o.e.emit("ReciprocalGrad", "ReciprocalGrad", &[y, g], ta)),
        "L2Loss" => one(o.mul(x(0)?, g)),
        "Lgamma" => {
            let d = o.un("Digamma", x(0)?);
            one(o.mul(g, d))
        }
        "Digamma" => {
            let n = o.scalar("Polygamma/a", 1.0);
            let p = o.bin("Polygamma", n, x(0)?);
            one(o.mul(g, p))
        }
        "Erfinv" => {
            // sqrt(pi) / 2 * exp(erfinv(x)²).
            let c = o.scalar("mul/x", std::f64::consts::PI.sqrt() / 2.0);
            let sq = o.un("Square", y);
            let ex = o.un("Exp", sq);
            let d = o.mul(c, ex);
            one(o.mul(g, d))
        }
        "Ndtri" => {
            // sqrt(2 pi) * exp(ndtri(x)² / 2).
            let c = o.scalar("mul/x", (2.0 * std::f64::consts::PI).sqrt());
            let sq = o.un("Square", y);
            let half = o.scalar("truediv/y", 2.0);
            let h = o.bin("RealDiv", sq, half);
            let ex = o.un("Exp", h);
            let d = o.mul(c, ex);
            one(o.mul(g, d))
        }
        "BesselI0e" => {
            // i1e(x) - sign(x) i0e(x).
            let a = x(0)?;
            let i1 = o.un("BesselI1e", a);
            let s = o.un("Sign", a);
            let m = o.mul(s, y);
            let d = o.bin("Sub", i1, m);
            one(o.mul(g, d))
        }
        "BesselI1e" => {
            // i0e(x) - y (sign(x) + 1 / x), with the limit 1/2 at x = 0.
            let a = x(0)?;
            let zero = o.scalar("zeros", 0.0);
            let is_zero = o.bin("Equal", a, zero);
            let one_c = o.scalar("ones", 1.0);
            let safe = o.e.emit("SelectV2", "SelectV2", &[is_zero, one_c, a], ta.clone());
            let i0 = o.un("BesselI0e", a);
            let s = o.un("Sign", a);
            let r = o.un("Reciprocal", safe);
            let sr = o.bin("AddV2", s, r);
            let ysr = o.mul(y, sr);
            let d = o.bin("Sub", i0, ysr);
            let half = o.scalar("Fill/value", 0.5);
            let d = o.e.emit("SelectV2", "SelectV2", &[is_zero, half, d], ta.clone());
            one(o.mul(g, d))
        }
        "Zeta" | "Polygamma" => {
            // Only the second operand: -x ζ(x + 1, q), or ψ⁽ⁿ⁺¹⁾(x).
            let (a, b) = (x(0)?, x(1)?);
            let bc = Broadcast::new(o.e, a, b);
            let c = o.scalar("add/y", 1.0);
            let a1 = o.bin("AddV2", a, c);
            let partial = if op_type == "Zeta" {
                let z = o.bin("Zeta", a1, b);
                let na = o.un("Neg", a);
                o.mul(na, z)
            } else {
                o.bin("Polygamma", a1, b)
            };
            let gb = o.mul(partial, g);
            Ok(vec![None, Some(bc.reduce_y(o.e, gb, &ta))])
        }
        "Betainc" => {
            // Only x: exp(xlog1py(b - 1, -x) + xlogy(a - 1, x) - ln B(a, b)).
            let (a, b, v) = (x(0)?, x(1)?, x(2)?);
            let bc = Broadcast::new(o.e, a, v);
            let la = o.un("Lgamma", a);
            let lb = o.un("Lgamma", b);
            let ab = o.bin("AddV2", a, b);
            let lab = o.un("Lgamma", ab);
            let s1 = o.bin("AddV2", la, lb);
            let log_beta = o.bin("Sub", s1, lab);
            let one_c = o.scalar("sub/y", 1.0);
            let b1 = o.bin("Sub", b, one_c);
            let a1 = o.bin("Sub", a, one_c);
            let nv = o.un("Neg", v);
            let t1 = o.bin("Xlog1py", b1, nv);
            let t2 = o.bin("Xlogy", a1, v);
            let s2 = o.bin("AddV2", t1, t2);
            let s3 = o.bin("Sub", s2, log_beta);
            let partial = o.un("Exp", s3);
            let gv = o.mul(partial, g);
            Ok(vec![None, None, Some(bc.reduce_y(o.e, gv, &ta))])
        }
        "EluGrad" | "SeluGrad" => {
            // (Grad(g, y), where(y < 0, g * dy, 0)).
            let (dy, out) = (x(0)?, x(1)?);
            let grad_op = if op_type == "EluGrad" { "EluGrad" } else { "SeluGrad" };
            let gg = o.e.emit(grad_op, grad_op, &[g, out], ta.clone());
            let zero = o.scalar("Less/y", 0.0);
            let neg = o.bin("Less", out, zero);
            let m = o.mul(g, dy);
            let zeros = o.un("ZerosLike", out);
            let gy = o.e.emit("SelectV2", "SelectV2", &[neg, m, zeros], ta);
            Ok(vec![Some(gg), Some(gy)])
        }
        "SoftplusGrad" => {
            // (SoftplusGrad(g, x), g dy / (exp(-x) + 2 + exp(x))).
            let (dy, a) = (x(0)?, x(1)?);
            let ddy = o.e.emit("SoftplusGrad", "SoftplusGrad", &[g, a], ta.clone());
            let na = o.un("Neg", a);
            let en = o.un("Exp", na);
            let two = o.scalar("add/y", 2.0);
            let s = o.bin("AddV2", en, two);
            let ep = o.un("Exp", a);
            let s = o.bin("AddV2", s, ep);
            let gdy = o.mul(g, dy);
            let d2x = o.bin("RealDiv", gdy, s);
            Ok(vec![Some(ddy), Some(d2x)])
        }
        "Relu6Grad" | "LeakyReluGrad" => {
            // The op is linear in its first input with the same mask; the features get zeros.
            let features = x(1)?;
            let gg = if op_type == "Relu6Grad" {
                o.e.emit("Relu6Grad", "Relu6Grad", &[g, features], ta.clone())
            } else {
                let alpha = attrs.get("alpha").cloned().map(|a| ("alpha", a));
                o.e.emit("LeakyReluGrad", "LeakyReluGrad", &[g, features], ta.clone().into_iter().chain(alpha))
            };
            let z = o.un("ZerosLike", features);
            Ok(vec![Some(gg), Some(z)])
        }
        "SqrtGrad" => {
            // y = 0.5 dy / a: (-(g / a) y, 0.5 g / a).
            let a = x(0)?;
            let ga = o.bin("RealDiv", g, a);
            let n = o.un("Neg", ga);
            let gy = o.mul(n, y);
            let half = o.scalar("mul_1/x", 0.5);
            let gdy = o.mul(half, ga);
            Ok(vec![Some(gy), Some(gdy)])
        }
        "RsqrtGrad" => {
            // y = -0.5 dy a³: (-1.5 g dy a², RsqrtGrad(a, g)).
            let (a, dy) = (x(0)?, x(1)?);
            let c = o.scalar("mul/x", -1.5);
            let m = o.mul(c, g);
            let m = o.mul(m, dy);
            let sq = o.un("Square", a);
            let ga = o.mul(m, sq);
            let gdy = o.e.emit("RsqrtGrad", "RsqrtGrad", &[a, g], ta);
            Ok(vec![Some(ga), Some(gdy)])
        }
        "ReciprocalGrad" => {
            // y = -dy a²: (-2 g dy a, ReciprocalGrad(a, g)).
            let (a, dy) = (x(0)?, x(1)?);
            let c = o.scalar("mul/y", -2.0);
            let m = o.mul(g, c);
            let m = o.mul(m, dy);
            let ga = o.mul(m, a);
            let gdy = o.e.emit("ReciprocalGrad", "ReciprocalGrad", &[a, g], ta);
            Ok(vec![Some(ga), Some(gdy)])
        }
        "Select" => {
            let (c, a) = (x(0)?, x(1)?);
            let zeros = o.un("ZerosLike", a);
            let ga = o.e.emit("Select", "Select", &[c, g, zeros], ta.clone());
            let gb = o.e.emit("Select", "Select_1", &[c, zeros, g], ta);
            Ok(vec![None, Some(ga), Some(gb)])
        }
        "Cumprod" => {
            // DivNoNan(Cumsum(y g, reversed), x), as TensorFlow: a zero input gets 0.
            let (a, axis) = (x(0)?, x(1)?);
            let exclusive = attrs.get_bool("exclusive").unwrap_or(false);
            let reverse = attrs.get_bool("reverse").unwrap_or(false);
            let yg = o.mul(y, g);
            let flags = [("exclusive", AttrValue::Bool(exclusive)), ("reverse", AttrValue::Bool(!reverse))];
            let tidx = attrs.get("Tidx").cloned().map(|v| ("Tidx", v));
            let out = o.e.emit("Cumsum", "Cumsum", &[yg, axis], flags.into_iter().chain(ta.clone()).chain(tidx));
            Ok(vec![Some(o.bin("DivNoNan", out, a)), None])
        }
        "CheckNumerics" => {
            let message = attrs.get_str("message").unwrap_or_default();
            let message = format!("Not a number (NaN) or infinity (Inf) values detected in gradient. {message}");
            let check = [("message", AttrValue::str(message.as_str()))].into_iter().chain(ta);
            one(o.e.emit("CheckNumerics", "CheckNumerics", &[g], check))
        }
        "PreventGradient" => {
            let message = attrs.get_str("message").unwrap_or_default();
            Err(Some(format!("Gradient explicitly disabled. Reason: {message}")))
        }
        "ClipByValue" => {
            let (a, lo, hi) = (x(0)?, x(1)?, x(2)?);
            let below = o.e.emit("Less", "Less", &[a, lo], ta.clone());
            let above = o.e.emit("Greater", "Greater", &[a, hi], ta.clone());
            let outside = o.e.emit("LogicalOr", "LogicalOr", &[below, above], None);
            let zeros = o.un("ZerosLike", g);
            let gx = o.e.emit("SelectV2", "SelectV2", &[outside, zeros, g], ta.clone());
            let glo = o.e.emit("SelectV2", "SelectV2_1", &[below, g, zeros], ta.clone());
            let ghi = o.e.emit("SelectV2", "SelectV2_2", &[above, g, zeros], ta.clone());
            let to_lo = Broadcast::new(o.e, a, lo);
            let glo = to_lo.reduce_y(o.e, glo, &ta);
            let to_hi = Broadcast::new(o.e, a, hi);
            let ghi = to_hi.reduce_y(o.e, ghi, &ta);
            Ok(vec![Some(gx), Some(glo), Some(ghi)])
        }
        "Atan2" | "Xlogy" | "Xdivy" | "Xlog1py" | "MulNoNan" | "NextAfter" => {
            let (a, b) = (x(0)?, x(1)?);
            let bc = Broadcast::new(o.e, a, b);
            let (ga, gb) = match op_type {
                "Atan2" => {
                    // atan2(a, b): (b, -a) g / (a² + b²).
                    let sa = o.un("Square", a);
                    let sb = o.un("Square", b);
                    let s = o.bin("AddV2", sa, sb);
                    let inv = o.bin("RealDiv", g, s);
                    let ga = o.mul(b, inv);
                    let na = o.un("Neg", a);
                    (ga, o.mul(na, inv))
                }
                "Xlogy" | "Xdivy" | "Xlog1py" => {
                    let nz = o.nonzero(a);
                    let (px, py) = match op_type {
                        "Xlogy" => (o.bin("Xlogy", nz, b), o.bin("Xdivy", a, b)),
                        "Xlog1py" => {
                            let c = o.scalar("add/y", 1.0);
                            let b1 = o.bin("AddV2", b, c);
                            (o.bin("Xlog1py", nz, b), o.bin("Xdivy", a, b1))
                        }
                        _ => {
                            let na = o.un("Neg", a);
                            let two = o.scalar("pow/y", 2.0);
                            let b2 = o.bin("Pow", b, two);
                            (o.bin("Xdivy", nz, b), o.bin("Xdivy", na, b2))
                        }
                    };
                    (o.mul(px, g), o.mul(py, g))
                }
                "MulNoNan" => (o.bin("MulNoNan", g, b), o.bin("MulNoNan", a, g)),
                // NextAfter: 1 for the first operand, 0 for the second.
                _ => (g, o.un("ZerosLike", g)),
            };
            let ga = bc.reduce_x(o.e, ga, &ta);
            let gb = bc.reduce_y(o.e, gb, &ta);
            Ok(vec![Some(ga), Some(gb)])
        }
        _ => Err(None),
    }
}
