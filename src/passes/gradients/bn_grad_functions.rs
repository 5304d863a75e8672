//! The second-order gradients of the fused batch norms: the gradients of
//! `FusedBatchNormGrad`, `FusedBatchNormGradV2` and `FusedBatchNormGradV3`
//! with respect to the backprop `g`, the input `x` and the scale `γ`, as
//! TensorFlow's `_FusedBatchNormGradGrad*` computes them (the reserve spaces
//! get none).
//!
//! TensorFlow differentiates an unfused copy of the backprop with a tape;
//! here the result of that differentiation is written out in closed form.
//! Per channel, with `N` reduced elements, `A`, `a`, `b` the gradients of the
//! three backprops (zeros where one received none) and `mean` over the
//! reduced axes:
//! - training (`μ`, `v` the batch mean and biased variance of `x`,
//!   `r = (v + ε)^-½`, `x̂ = (x - μ) r`, `gc = g - mean(g)`,
//!   `P = mean(g x̂)`, `mA = mean(A)`, `mAx = mean(A x̂)`,
//!   `mAg = mean(A gc)`):
//!   `dg = γ r (A - mA - x̂ mAx) + a x̂ + b`,
//!   `dx = -γ r² (x̂ (mAg - 3 P mAx) + mAx gc + P (A - mA)) + a r (gc - x̂ P)`,
//!   `dγ = r Σ A (gc - x̂ P)`;
//! - inference (`μ`, `v` the given population statistics, `r = (v + ε)^-½`):
//!   `dg = A γ r + a (x - μ) r + b`, `dx = a g r`, `dγ = r Σ A g`.
//!
//! Everything is computed in the statistics' type (f32) with the reductions
//! kept as size-1 axes, so per-channel values broadcast in every layout
//! (NHWC, NDHWC, NCHW, NCDHW); per-channel inputs are reshaped to the
//! broadcast shape first. A 16-bit `x` and `g` are cast up and the results
//! for them cast back, as TensorFlow's version does. Cost: a constant
//! number of ops per differentiated op.

use super::emitter::{Emitter, TAttr, Tensor};
use super::functions::Unsupported;
use crate::ir::{AttrValue, DType, NodeId};

/// The gradients of a batch norm backprop's inputs; `None` when `op_type`
/// is not one.
pub fn gradient(
    e: &mut Emitter<'_>,
    op: NodeId,
    op_type: &str,
    inputs: &[Tensor],
    out_grads: &[Option<Tensor>],
) -> Option<Result<Vec<Option<Tensor>>, Unsupported>> {
    match op_type {
        "FusedBatchNormGrad" | "FusedBatchNormGradV2" | "FusedBatchNormGradV3" => {
            Some(bn_grad_grad(e, op, op_type, inputs, out_grads))
        }
        _ => None,
    }
}

/// The layout facts the gradient needs: the reduced axes and the broadcast
/// shape of a per-channel vector.
struct Layout {
    axes: &'static [i32],
    channel_shape: &'static [i32],
}

fn layout(data_format: &str) -> Option<Layout> {
    Some(match data_format {
        "NHWC" => Layout { axes: &[0, 1, 2], channel_shape: &[-1] },
        "NDHWC" => Layout { axes: &[0, 1, 2, 3], channel_shape: &[-1] },
        "NCHW" => Layout { axes: &[0, 2, 3], channel_shape: &[1, -1, 1, 1] },
        "NCDHW" => Layout { axes: &[0, 2, 3, 4], channel_shape: &[1, -1, 1, 1, 1] },
        _ => return None,
    })
}

/// Emits the ops of one gradient in the statistics' type.
struct Ops<'e, 'g> {
    e: &'e mut Emitter<'g>,
    ta: TAttr,
    layout: Layout,
}

impl Ops<'_, '_> {
    fn bin(&mut self, op: &'static str, a: Tensor, b: Tensor) -> Tensor {
        self.e.emit(op, op, &[a, b], self.ta.clone())
    }

    fn mul(&mut self, a: Tensor, b: Tensor) -> Tensor {
        self.bin("Mul", a, b)
    }

    fn sub(&mut self, a: Tensor, b: Tensor) -> Tensor {
        self.bin("Sub", a, b)
    }

    fn add(&mut self, a: Tensor, b: Tensor) -> Tensor {
        self.bin("AddV2", a, b)
    }

    /// `Mean` or `Sum` over the reduced axes, keeping them as size-1 axes.
    fn reduce(&mut self, op: &'static str, x: Tensor) -> Tensor {
        let name = self.e.fresh_name(op);
        let axes = self.e.int_const_named(format!("{name}/reduction_indices"), self.layout.axes, false);
        let attrs = [("keep_dims", AttrValue::Bool(true)), ("Tidx", AttrValue::Type(DType::I32))];
        self.e.emit_named(name, op, &[x, axes], attrs.into_iter().chain(self.ta.clone()))
    }

    fn mean(&mut self, x: Tensor) -> Tensor {
        self.reduce("Mean", x)
    }

    fn reshape(&mut self, x: Tensor, shape: &[i32]) -> Tensor {
        let name = self.e.fresh_name("Reshape");
        let shape = self.e.int_const_named(format!("{name}/shape"), shape, false);
        let attrs = [("Tshape", AttrValue::Type(DType::I32))].into_iter().chain(self.ta.clone());
        self.e.emit_named(name, "Reshape", &[x, shape], attrs)
    }

    /// A per-channel vector in the shape that broadcasts against `x`.
    fn per_channel(&mut self, v: Tensor) -> Tensor {
        if self.layout.channel_shape.len() == 1 {
            v
        } else {
            let shape = self.layout.channel_shape;
            self.reshape(v, shape)
        }
    }

    /// A reduced value (size-1 axes) as the channel vector `[C]`.
    fn channel_vector(&mut self, v: Tensor) -> Tensor {
        self.reshape(v, &[-1])
    }

    fn constant(&mut self, value: f64) -> Tensor {
        let name = self.e.fresh_name("Const");
        self.e.scalar_const_named(&name, Some(DType::F32), value)
    }

    fn cast(&mut self, x: Tensor, from: DType, to: DType) -> Tensor {
        let attrs =
            [("SrcT", AttrValue::Type(from)), ("DstT", AttrValue::Type(to)), ("Truncate", AttrValue::Bool(false))];
        self.e.emit("Cast", "Cast", &[x], attrs)
    }
}

fn bn_grad_grad(
    e: &mut Emitter<'_>,
    op: NodeId,
    op_type: &str,
    inputs: &[Tensor],
    out_grads: &[Option<Tensor>],
) -> Result<Vec<Option<Tensor>>, Unsupported> {
    let x = |k: usize| inputs.get(k).copied().ok_or_else(|| Some(format!("{op_type} expects input {k}")));
    let (g, input, scale, pop_mean, pop_var) = (x(0)?, x(1)?, x(2)?, x(3)?, x(4)?);
    let node = e.graph.node(op);
    let epsilon = match node.attrs.get("epsilon") {
        Some(AttrValue::Float(f)) => f64::from(*f),
        _ => 1e-4,
    };
    let training = node.attrs.get_bool("is_training").unwrap_or(true);
    let data_format = node.attrs.get_str("data_format").unwrap_or("NHWC").to_string();
    let Some(layout) = layout(&data_format) else {
        return Err(Some(format!("{op_type}: data_format `{data_format}` is not NHWC, NDHWC, NCHW or NCDHW")));
    };
    let t = match node.attrs.get("T") {
        Some(AttrValue::Type(t)) => *t,
        _ => DType::F32,
    };
    if !matches!(t, DType::F32 | DType::F16 | DType::BF16) {
        return Err(Some(format!("{op_type}: T = {t} is not f32, f16 or bf16")));
    }
    let (ga, gs, gb) =
        (e.grad_or_zeros(op, 0, out_grads), e.grad_or_zeros(op, 1, out_grads), e.grad_or_zeros(op, 2, out_grads));
    let ta = e.t_attr(Some(DType::F32));
    let mut o = Ops { e, ta, layout };
    let wide = t != DType::F32;
    let (g, input, ga) = if wide {
        (o.cast(g, t, DType::F32), o.cast(input, t, DType::F32), o.cast(ga, t, DType::F32))
    } else {
        (g, input, ga)
    };
    let gamma = o.per_channel(scale);
    let (a, b) = (o.per_channel(gs), o.per_channel(gb));
    let eps = o.constant(epsilon);
    let (dg, dx, dgamma) = if training {
        let mx = o.mean(input);
        let xc = o.sub(input, mx);
        let xc2 = o.mul(xc, xc);
        let v = o.mean(xc2);
        let ve = o.add(v, eps);
        let r = o.e.emit("Rsqrt", "Rsqrt", &[ve], o.ta.clone());
        let xh = o.mul(xc, r);
        let mg = o.mean(g);
        let gc = o.sub(g, mg);
        let gxh = o.mul(g, xh);
        let p = o.mean(gxh);
        let m_a = o.mean(ga);
        let axh = o.mul(ga, xh);
        let m_ax = o.mean(axh);
        let agc = o.mul(ga, gc);
        let m_ag = o.mean(agc);
        // dg = γ r (A - mA - x̂ mAx) + a x̂ + b.
        let a_c = o.sub(ga, m_a);
        let xh_max = o.mul(xh, m_ax);
        let inner = o.sub(a_c, xh_max);
        let gr = o.mul(gamma, r);
        let t1 = o.mul(gr, inner);
        let t2 = o.mul(a, xh);
        let t12 = o.add(t1, t2);
        let dg = o.add(t12, b);
        // dx = -γ r² (x̂ (mAg - 3 P mAx) + mAx gc + P (A - mA)) + a r (gc - x̂ P).
        let three = o.constant(3.0);
        let p_max = o.mul(p, m_ax);
        let p3 = o.mul(three, p_max);
        let coef = o.sub(m_ag, p3);
        let u1 = o.mul(xh, coef);
        let u2 = o.mul(m_ax, gc);
        let u3 = o.mul(p, a_c);
        let u12 = o.add(u1, u2);
        let u = o.add(u12, u3);
        let grr = o.mul(gr, r);
        let neg = o.mul(grr, u);
        let xh_p = o.mul(xh, p);
        let gproj = o.sub(gc, xh_p);
        let ar = o.mul(a, r);
        let w = o.mul(ar, gproj);
        let dx = o.sub(w, neg);
        // dγ = r Σ A (gc - x̂ P).
        let agp = o.mul(ga, gproj);
        let s = o.reduce("Sum", agp);
        let sr = o.mul(s, r);
        (dg, dx, o.channel_vector(sr))
    } else {
        let mu = o.per_channel(pop_mean);
        let var = o.per_channel(pop_var);
        let ve = o.add(var, eps);
        let r = o.e.emit("Rsqrt", "Rsqrt", &[ve], o.ta.clone());
        // dg = A γ r + a (x - μ) r + b.
        let gr = o.mul(gamma, r);
        let t1 = o.mul(ga, gr);
        let xc = o.sub(input, mu);
        let ar = o.mul(a, r);
        let t2 = o.mul(xc, ar);
        let t12 = o.add(t1, t2);
        let dg = o.add(t12, b);
        // dx = a g r; dγ = r Σ A g.
        let dx = o.mul(g, ar);
        let ag = o.mul(ga, g);
        let s = o.reduce("Sum", ag);
        let sr = o.mul(s, r);
        (dg, dx, o.channel_vector(sr))
    };
    let (dg, dx) = if wide { (o.cast(dg, DType::F32, t), o.cast(dx, DType::F32, t)) } else { (dg, dx) };
    let mut grads = vec![Some(dg), Some(dx), Some(dgamma), None, None];
    grads.resize(inputs.len().max(5), None);
    grads.truncate(inputs.len());
    Ok(grads)
}
