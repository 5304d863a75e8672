//! The gradient of `StatelessParameterizedTruncatedNormal(shape, seed, mean, stddev, minval,
//! maxval)`, as TensorFlow's `random_grad.py` registers it: implicit reparameterization
//! (Figurnov et al., 2018), the sample held fixed while its CDF value is.
//!
//! With `s`, `a` and `b` the sample and bounds standardised (`(x - mean) / stddev`) and
//! `c = (Φ(s) - Φ(a)) / (Φ(b) - Φ(a))` clipped to `[tiny, 1 - ε]` (Φ the normal CDF, as
//! TensorFlow's `_Ndtr` forms it from `erf` near 0 and `erfc` beyond), the partials are
//! `∂/∂mean = 1`, `∂/∂stddev = s`, `∂/∂maxval = exp((s² - b²) / 2 + ln c)` and
//! `∂/∂minval = exp((s² - a²) / 2 + ln(1 - c))`. Each is multiplied by the incoming gradient,
//! summed over the sample dimensions (the leading dimensions of `shape` beyond the parameters'
//! broadcast rank), then summed back to its parameter's shape (`BroadcastGradientArgs`). The
//! seeded `ParameterizedTruncatedNormal` is not differentiable in TensorFlow, and so here.
//! Cost: about seventy ops per differentiated op, most of them on the sample's shape.

use super::emitter::{Emitter, TAttr, Tensor};
use super::functions::Unsupported;
use crate::ir::{AttrValue, DType, NodeId};

/// The gradients of `op`'s inputs given `g`; `Err(None)` when `op_type` has no gradient here.
pub fn gradient(
    e: &mut Emitter<'_>,
    op: NodeId,
    op_type: &str,
    inputs: &[Tensor],
    g: Tensor,
) -> Result<Vec<Option<Tensor>>, Unsupported> {
    if op_type != "StatelessParameterizedTruncatedNormal" {
        return Err(None);
    }
    let &[shape, _seed, mean, stddev, minval, maxval] = inputs else {
        return Err(Some("expected the inputs shape, seed, means, stddevs, minvals and maxvals".to_string()));
    };
    let t = e.dtype_of(g);
    let (tiny, eps) = match t {
        Some(DType::F64) => (f64::MIN_POSITIVE, f64::EPSILON),
        Some(DType::F32) | None => (f64::from(f32::MIN_POSITIVE), f64::from(f32::EPSILON)),
        Some(DType::F16) => (2f64.powi(-14), 2f64.powi(-10)),
        Some(other) => {
            return Err(Some(format!("gradients of {other} truncated normals are not made (f16, f32 or f64)")))
        }
    };
    let ta = e.t_attr(t);
    let sample = Tensor::of(op);
    let standard = |e: &mut Emitter<'_>, x: Tensor| {
        let centred = e.emit("Sub", "sub", &[x, mean], ta.clone());
        e.emit("RealDiv", "truediv", &[centred, stddev], ta.clone())
    };
    let min_std = standard(e, minval);
    let max_std = standard(e, maxval);
    let sample_std = standard(e, sample);
    let ndtr_sample = ndtr(e, sample_std, t, &ta);
    let ndtr_min = ndtr(e, min_std, t, &ta);
    let ndtr_max = ndtr(e, max_std, t, &ta);
    let above = e.emit("Sub", "sub", &[ndtr_sample, ndtr_min], ta.clone());
    let span = e.emit("Sub", "sub", &[ndtr_max, ndtr_min], ta.clone());
    let cdf = e.emit("RealDiv", "truediv", &[above, span], ta.clone());
    // clip_by_value(cdf, tiny, 1 - eps): the upper bound first, as TensorFlow clips.
    let (hi, lo) = (constant(e, t, 1.0 - eps), constant(e, t, tiny));
    let cdf = e.emit("Minimum", "clip_by_value/Minimum", &[cdf, hi], ta.clone());
    let cdf = e.emit("Maximum", "clip_by_value", &[cdf, lo], ta.clone());
    let sample_sq = e.emit("Square", "Square", &[sample_std], ta.clone());
    // exp(0.5 * (s² - bound²) + log_term).
    let partial = |e: &mut Emitter<'_>, bound: Tensor, log_term: Tensor| {
        let bound_sq = e.emit("Square", "Square", &[bound], ta.clone());
        let diff = e.emit("Sub", "sub", &[sample_sq, bound_sq], ta.clone());
        let half = constant(e, t, 0.5);
        let half = e.emit("Mul", "mul", &[half, diff], ta.clone());
        let sum = e.emit("AddV2", "add", &[half, log_term], ta.clone());
        e.emit("Exp", "Exp", &[sum], ta.clone())
    };
    let log_cdf = e.emit("Log", "Log", &[cdf], ta.clone());
    let dmax = partial(e, max_std, log_cdf);
    let neg_cdf = e.emit("Neg", "Neg", &[cdf], ta.clone());
    let log1p = e.emit("Log1p", "Log1p", &[neg_cdf], ta.clone());
    let dmin = partial(e, min_std, log1p);
    // The sample dimensions: range(size(shape) - size(broadcast shape of the parameters)).
    let i32s = e.t_attr(Some(DType::I32));
    let shapes = [mean, stddev, minval, maxval].map(|p| e.shape("Shape", p));
    let mut bcast = e.emit("BroadcastArgs", "BroadcastArgs", &[shapes[0], shapes[1]], i32s.clone());
    bcast = e.emit("BroadcastArgs", "BroadcastArgs", &[shapes[2], bcast], i32s.clone());
    bcast = e.emit("BroadcastArgs", "BroadcastArgs", &[shapes[3], bcast], i32s.clone());
    let shape_dtype = e.dtype_of(shape).unwrap_or(DType::I32);
    let size_attrs = |d: DType| [("out_type", AttrValue::Type(DType::I32)), ("T", AttrValue::Type(d))];
    let shape_size = e.emit("Size", "Size", &[shape], size_attrs(shape_dtype));
    let bcast_size = e.emit("Size", "Size", &[bcast], size_attrs(DType::I32));
    let extra = e.emit("Sub", "sub", &[shape_size, bcast_size], i32s.clone());
    let (start, delta) = (e.fresh_name("range/start"), e.fresh_name("range/delta"));
    let start = e.int_const_named(start, &[0], true);
    let delta = e.int_const_named(delta, &[1], true);
    let extra = e.emit("Range", "range", &[start, extra, delta], [("Tidx", AttrValue::Type(DType::I32))]);
    let sum = |e: &mut Emitter<'_>, x: Tensor, axes: Tensor, keep: bool| {
        let attrs = [("keep_dims", AttrValue::Bool(keep))].into_iter().chain(ta.clone());
        e.emit("Sum", "Sum", &[x, axes], attrs)
    };
    let grads = [(g, None), (g, Some(sample_std)), (g, Some(dmin)), (g, Some(dmax))];
    let mut out = vec![None, None];
    for (k, (g, partial)) in grads.into_iter().enumerate() {
        let scaled = match partial {
            Some(p) => e.emit("Mul", "mul", &[g, p], ta.clone()),
            None => {
                let ones = e.emit("OnesLike", "ones_like", &[sample_std], ta.clone());
                e.emit("Mul", "mul", &[g, ones], ta.clone())
            }
        };
        let reduced = sum(e, scaled, extra, false);
        let args = e.emit("BroadcastGradientArgs", "BroadcastGradientArgs", &[bcast, shapes[k]], i32s.clone());
        let axes = Tensor { node: args.node, output: 1 };
        let reduced = sum(e, reduced, axes, true);
        out.push(Some(e.emit("Reshape", "Reshape", &[reduced, shapes[k]], ta.clone())));
    }
    Ok(out)
}

/// A scalar constant of dtype `t` (an f16 one cast from f32).
fn constant(e: &mut Emitter<'_>, t: Option<DType>, value: f64) -> Tensor {
    let name = e.fresh_name("Const");
    if t != Some(DType::F16) {
        return e.scalar_const_named(&name, t, value);
    }
    let wide = e.scalar_const_named(&name, Some(DType::F32), value);
    let attrs = [
        ("SrcT", AttrValue::Type(DType::F32)),
        ("DstT", AttrValue::Type(DType::F16)),
        ("Truncate", AttrValue::Bool(false)),
    ];
    e.emit("Cast", "Cast", &[wide], attrs)
}

/// TensorFlow's `_Ndtr(x)`: `(1 + erf(w)) / 2` for `|w| < sqrt(1/2)`, else `1 - erfc(|w|) / 2`
/// above 0 and `erfc(|w|) / 2` below, with `w = x sqrt(1/2)`.
fn ndtr(e: &mut Emitter<'_>, x: Tensor, t: Option<DType>, ta: &TAttr) -> Tensor {
    let half_sqrt_2 = constant(e, t, 0.5 * std::f64::consts::SQRT_2);
    let w = e.emit("Mul", "mul", &[x, half_sqrt_2], ta.clone());
    let z = e.emit("Abs", "Abs", &[w], ta.clone());
    let near = e.emit("Less", "Less", &[z, half_sqrt_2], ta.clone());
    let one = constant(e, t, 1.0);
    let erf = e.emit("Erf", "Erf", &[w], ta.clone());
    let middle = e.emit("AddV2", "add", &[one, erf], ta.clone());
    let zero = constant(e, t, 0.0);
    let positive = e.emit("Greater", "Greater", &[w, zero], ta.clone());
    let two = constant(e, t, 2.0);
    let erfc = e.emit("Erfc", "Erfc", &[z], ta.clone());
    let upper = e.emit("Sub", "sub", &[two, erfc], ta.clone());
    let tail = e.emit("SelectV2", "SelectV2", &[positive, upper, erfc], ta.clone());
    let y = e.emit("SelectV2", "SelectV2", &[near, middle, tail], ta.clone());
    let half = constant(e, t, 0.5);
    e.emit("Mul", "mul", &[half, y], ta.clone())
}
