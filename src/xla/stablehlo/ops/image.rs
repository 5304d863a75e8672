//! Image builders, as TensorFlow's XLA bridge lowers these ops: bilinear
//! resizing as two products with constant interpolation matrices (one per
//! spatial axis, the weights the simulator's kernel uses), nearest-neighbour
//! resizing and its gradient as a gather and a scatter of the pixels the
//! simulator's kernel picks, `LRN`/`LRNGrad` as window sums over the
//! channels, the colour ops elementwise on the three channels, and the max
//! pools whose window is an operand or whose gradient is differentiated
//! again (`MaxPoolGradGrad*`: at each window's first maximum, the gradient
//! there), and the generic `Conv` as `Conv2D` or `Conv3D`. Images are NHWC (NCHW goes through `nchw`); 16-bit floats
//! compute in f32. Cost: a few ops per TF op; a max-pool second-order
//! gradient takes two slices and two selects per window tap.

use super::spatial::{numbered, scatter_numbered};
use super::{conv, i64s, nchw, Call};
use crate::exec::kernels::image::lerps;
use crate::exec::Tensor;
use crate::ir::{AttrMap, AttrValue, DType};
use crate::xla::stablehlo::text::{Cmp, Ctx, Reducer, Ty, Val};

/// `align_corners` and `half_pixel_centers`.
fn flags(n: &Call) -> (bool, bool) {
    (n.attrs.get_bool("align_corners").unwrap_or(false), n.attrs.get_bool("half_pixel_centers").unwrap_or(false))
}

/// The `[output, input]` matrix of bilinear weights along one axis.
fn weights(c: &mut Ctx, input: usize, output: usize, n: &Call) -> Result<Val, String> {
    let (align, half) = flags(n);
    let mut w = vec![0f32; output * input];
    for (o, l) in lerps(input, output, align, half).iter().enumerate() {
        w[o * input + l.lower] += 1.0 - l.frac;
        w[o * input + l.upper] += l.frac;
    }
    Ok(c.constant(&Tensor::from_vec(&[output, input], w).map_err(|e| e.to_string())?))
}

/// `dot_general(w, v)` contracting `w`'s dimension `wd` with `v`'s `vd`.
fn contract(c: &mut Ctx, w: &Val, wd: usize, v: &Val, vd: usize) -> Val {
    let mut shape = vec![w.ty.shape[1 - wd]];
    shape.extend(v.ty.shape.iter().enumerate().filter(|&(d, _)| d != vd).map(|(_, &s)| s));
    let attrs = format!(
        "dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [{wd}], rhs_contracting_dimensions = [{vd}]>"
    );
    c.op("stablehlo.dot_general", &[w, v], &attrs, v.ty.with_shape(shape))
}

/// `[a, b, n, c]` (the products' order) back to `[n, b, a, c]`.
fn unswap(c: &mut Ctx, v: &Val) -> Val {
    let s = &v.ty.shape;
    let shape = vec![s[2], s[1], s[0], s[3]];
    c.op("stablehlo.transpose", &[v], &format!("permutation = {}", i64s(&[2, 1, 0, 3])), v.ty.with_shape(shape))
}

/// The 4-D NHWC shape of `v`.
fn nhwc(v: &Val) -> Result<[usize; 4], String> {
    <[usize; 4]>::try_from(v.ty.shape.as_slice()).map_err(|_| format!("images must be 4-D, got {:?}", v.ty.shape))
}

/// `ResizeBilinear(images, size)`: rows, then columns, each a product with its weights.
pub(super) fn resize_bilinear(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let [_, h, w, _] = nhwc(x)?;
    let out = n.out(0)?.clone();
    let (oh, ow) = (out.shape[1], out.shape[2]);
    let x = c.convert(x, DType::F32);
    let (wy, wx) = (weights(c, h, oh, n)?, weights(c, w, ow, n)?);
    let rows = contract(c, &wy, 1, &x, 1);
    let cols = contract(c, &wx, 1, &rows, 2);
    Ok(vec![unswap(c, &cols)])
}

/// `ResizeBilinearGrad(grads, original_image)`: the transposed products, in the image's dtype.
pub(super) fn resize_bilinear_grad(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let g = n.input(0)?;
    let [_, oh, ow, _] = nhwc(g)?;
    let out = n.out(0)?.clone();
    let (h, w) = (out.shape[1], out.shape[2]);
    let (wy, wx) = (weights(c, h, oh, n)?, weights(c, w, ow, n)?);
    let rows = contract(c, &wy, 0, g, 1);
    let cols = contract(c, &wx, 0, &rows, 2);
    let v = unswap(c, &cols);
    Ok(vec![c.convert(&v, out.dtype)])
}

/// `ResizeNearestNeighborGrad(grads, size)`: each gradient pixel added to
/// the pixel the forward resize (from `size` to the gradient's size) read.
pub(super) fn resize_nearest_grad(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let g = n.input(0)?;
    let out = n.out(0)?.clone();
    let [_, gh, gw, _] = nhwc(g)?;
    let size = Tensor::vector(vec![gh as i32, gw as i32]);
    let idx = numbered(n, "ResizeNearestNeighbor", &out.shape, vec![size])?;
    Ok(vec![scatter_numbered(c, n, g, &idx, out)?])
}

/// `v` in f32 when it is a 16-bit float (the dtype to return to, too).
fn widened(c: &mut Ctx, v: &Val) -> (Val, DType) {
    let d = v.ty.dtype;
    (if matches!(d, DType::BF16 | DType::F16) { c.convert(v, DType::F32) } else { v.clone() }, d)
}

/// A float attribute, or `default`.
fn float(n: &Call, key: &str, default: f64) -> f64 {
    n.float_attr(key, default)
}

/// The sum over a window of `2r + 1` channels (the last dimension), centred, zeros outside.
fn channel_window_sum(c: &mut Ctx, v: &Val, r: usize) -> Val {
    let rank = v.ty.rank();
    let mut window = vec![1; rank];
    window[rank - 1] = 2 * r + 1;
    let pads: Vec<String> =
        (0..rank).map(|d| if d + 1 == rank { format!("[{r}, {r}]") } else { "[0, 0]".into() }).collect();
    let init = c.splat(&Ty::scalar(v.ty.dtype), 0.0);
    let region = c.reducer_region(v.ty.dtype, Reducer::Add);
    let attrs = format!(
        "window_dimensions = {}, window_strides = {}, padding = dense<[{}]> : tensor<{rank}x2xi64>",
        i64s(&window),
        i64s(&vec![1; rank]),
        pads.join(", ")
    );
    c.op_regions("stablehlo.reduce_window", &[v, &init], &[region], &attrs, std::slice::from_ref(&v.ty)).remove(0)
}

/// The LRN attributes: radius, bias, alpha, beta.
fn lrn_attrs(n: &Call) -> (usize, f64, f64, f64) {
    let r = n.int_attr("depth_radius", 5).max(0) as usize;
    (r, float(n, "bias", 1.0), float(n, "alpha", 1.0), float(n, "beta", 0.5))
}

/// `LRN(x)`: `x · (bias + alpha · Σ window x²)^-beta`.
pub(super) fn lrn(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (r, bias, alpha, beta) = lrn_attrs(n);
    let (x, dtype) = widened(c, n.input(0)?);
    let sq = c.elementwise("multiply", &[&x, &x]);
    let sum = channel_window_sum(c, &sq, r);
    let scale = affine(c, &sum, alpha, bias);
    let p = c.splat(&scale.ty, -beta);
    let f = c.elementwise("power", &[&scale, &p]);
    let y = c.elementwise("multiply", &[&x, &f]);
    Ok(vec![c.convert(&y, dtype)])
}

/// `a · v + b` with scalar constants.
fn affine(c: &mut Ctx, v: &Val, a: f64, b: f64) -> Val {
    let (ka, kb) = (c.splat(&v.ty, a), c.splat(&v.ty, b));
    let m = c.elementwise("multiply", &[&ka, v]);
    c.elementwise("add", &[&m, &kb])
}

/// `LRNGrad(dy, x, y)`: `dy · norm^-beta + x · Σ window (-2 alpha beta · dy · y / norm)`.
pub(super) fn lrn_grad(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (r, bias, alpha, beta) = lrn_attrs(n);
    let (dy, dtype) = widened(c, n.input(0)?);
    let (x, _) = widened(c, n.input(1)?);
    let (y, _) = widened(c, n.input(2)?);
    let sq = c.elementwise("multiply", &[&x, &x]);
    let sum = channel_window_sum(c, &sq, r);
    let norm = affine(c, &sum, alpha, bias);
    let ratio = c.elementwise("divide", &[&y, &norm]);
    let k = c.splat(&x.ty, -2.0 * alpha * beta);
    let scaled = c.elementwise("multiply", &[&k, &ratio]);
    let part = c.elementwise("multiply", &[&scaled, &dy]);
    let spread = channel_window_sum(c, &part, r);
    let cross = c.elementwise("multiply", &[&x, &spread]);
    let p = c.splat(&norm.ty, -beta);
    let f = c.elementwise("power", &[&norm, &p]);
    let direct = c.elementwise("multiply", &[&dy, &f]);
    let g = c.elementwise("add", &[&cross, &direct]);
    Ok(vec![c.convert(&g, dtype)])
}

/// Channel `k` of the last dimension (kept as a size-1 dimension).
fn channel(c: &mut Ctx, v: &Val, k: usize) -> Val {
    let rank = v.ty.rank();
    let mut start = vec![0; rank];
    let mut limit = v.ty.shape.clone();
    start[rank - 1] = k;
    limit[rank - 1] = k + 1;
    let mut shape = v.ty.shape.clone();
    shape[rank - 1] = 1;
    let attrs = format!(
        "start_indices = {}, limit_indices = {}, strides = {}",
        i64s(&start),
        i64s(&limit),
        i64s(&vec![1; rank])
    );
    c.op("stablehlo.slice", &[v], &attrs, v.ty.with_shape(shape))
}

/// Elementwise helpers on same-typed values.
fn bin(c: &mut Ctx, name: &str, a: &Val, b: &Val) -> Val {
    c.elementwise(name, &[a, b])
}

/// RGB to HSV as the bridge computes it.
fn to_hsv(c: &mut Ctx, r: &Val, g: &Val, b: &Val) -> [Val; 3] {
    let mx = bin(c, "maximum", r, g);
    let v = bin(c, "maximum", &mx, b);
    let mn = bin(c, "minimum", r, g);
    let mn = bin(c, "minimum", &mn, b);
    let range = bin(c, "subtract", &v, &mn);
    let zero = c.splat(&v.ty, 0.0);
    let pos = c.compare(&v, &zero, Cmp::Gt);
    let ratio = bin(c, "divide", &range, &v);
    let s = c.select(&pos, &ratio, &zero);
    let sixth = c.splat(&v.ty, 1.0 / 6.0);
    let norm = bin(c, "divide", &sixth, &range);
    let part = |c: &mut Ctx, a: &Val, b: &Val, offset: f64| {
        let d = bin(c, "subtract", a, b);
        let m = bin(c, "multiply", &norm, &d);
        let k = c.splat(&m.ty, offset);
        bin(c, "add", &m, &k)
    };
    let from_g = part(c, b, r, 2.0 / 6.0);
    let from_b = part(c, r, g, 4.0 / 6.0);
    let g_max = c.compare(g, &v, Cmp::Eq);
    let h = c.select(&g_max, &from_g, &from_b);
    let d = bin(c, "subtract", g, b);
    let from_r = bin(c, "multiply", &norm, &d);
    let r_max = c.compare(r, &v, Cmp::Eq);
    let h = c.select(&r_max, &from_r, &h);
    let some = c.compare(&range, &zero, Cmp::Gt);
    let h = c.select(&some, &h, &zero);
    let neg = c.compare(&h, &zero, Cmp::Lt);
    let one = c.splat(&h.ty, 1.0);
    let up = bin(c, "add", &h, &one);
    [c.select(&neg, &up, &h), s, v]
}

/// HSV to RGB as the bridge (and TensorFlow's CPU kernel) computes it.
fn to_rgb(c: &mut Ctx, h: &Val, s: &Val, v: &Val) -> [Val; 3] {
    let six = c.splat(&h.ty, 6.0);
    let dh = bin(c, "multiply", h, &six);
    let (zero, one) = (c.splat(&h.ty, 0.0), c.splat(&h.ty, 1.0));
    // clamp(sign · |dh - at| + add, 0, 1)
    let part = |c: &mut Ctx, at: f64, sign: f64, add: f64| {
        let k = c.splat(&h.ty, at);
        let d = bin(c, "subtract", &dh, &k);
        let a = c.op("stablehlo.abs", &[&d], "", d.ty.clone());
        let a = if sign < 0.0 { c.op("stablehlo.negate", &[&a], "", a.ty.clone()) } else { a };
        let k = c.splat(&h.ty, add);
        let t = bin(c, "add", &a, &k);
        c.op("stablehlo.clamp", &[&zero, &t, &one], "", t.ty.clone())
    };
    let (dr, dg, db) = (part(c, 3.0, 1.0, -1.0), part(c, 2.0, -1.0, 2.0), part(c, 4.0, -1.0, 2.0));
    let one_s = bin(c, "subtract", &one, s);
    let out = |c: &mut Ctx, d: &Val| {
        let m = bin(c, "multiply", s, d);
        let t = bin(c, "add", &one_s, &m);
        bin(c, "multiply", &t, v)
    };
    [out(c, &dr), out(c, &dg), out(c, &db)]
}

/// The colour ops: the three channels, converted, adjusted, and joined again.
pub(super) fn colour(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (x, dtype) = widened(c, n.input(0)?);
    if x.ty.shape.last() != Some(&3) {
        return Err(format!("{}: the last dimension must hold 3 channels, got {:?}", n.op, x.ty.shape));
    }
    let [a, b, d] = [channel(c, &x, 0), channel(c, &x, 1), channel(c, &x, 2)];
    let factor = |c: &mut Ctx, ty: &Ty| -> Result<Val, String> {
        let f = c.convert(n.input(1)?, ty.dtype);
        Ok(c.broadcast_to(&f, &ty.shape))
    };
    let parts = match n.op {
        "RGBToHSV" => to_hsv(c, &a, &b, &d),
        "HSVToRGB" => to_rgb(c, &a, &b, &d),
        "AdjustHue" => {
            let [h, s, v] = to_hsv(c, &a, &b, &d);
            let delta = factor(c, &h.ty)?;
            let one = c.splat(&h.ty, 1.0);
            let moved = bin(c, "add", &h, &delta);
            let h = bin(c, "remainder", &moved, &one);
            let zero = c.splat(&h.ty, 0.0);
            let neg = c.compare(&h, &zero, Cmp::Lt);
            let up = bin(c, "add", &one, &h);
            let up = bin(c, "remainder", &up, &one);
            let h = c.select(&neg, &up, &h);
            to_rgb(c, &h, &s, &v)
        }
        _ => {
            let [h, s, v] = to_hsv(c, &a, &b, &d);
            let scale = factor(c, &s.ty)?;
            let (zero, one) = (c.splat(&s.ty, 0.0), c.splat(&s.ty, 1.0));
            let m = bin(c, "multiply", &scale, &s);
            let s = c.op("stablehlo.clamp", &[&zero, &m, &one], "", m.ty.clone());
            to_rgb(c, &h, &s, &v)
        }
    };
    let rank = x.ty.rank();
    let joined = c.op(
        "stablehlo.concatenate",
        &[&parts[0], &parts[1], &parts[2]],
        &format!("dimension = {} : i64", rank - 1),
        x.ty.clone(),
    );
    Ok(vec![c.convert(&joined, dtype)])
}

/// `AdjustContrastv2(images, factor)`: `factor · (x - mean) + mean`, the
/// mean over height and width in f32.
pub(super) fn adjust_contrast(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (x, dtype) = widened(c, n.input(0)?);
    let rank = x.ty.rank();
    if rank < 3 {
        return Err(format!("AdjustContrastv2: images must be at least 3-D, got {:?}", x.ty.shape));
    }
    let sum = c.reduce(&x, &[rank - 3, rank - 2], Reducer::Add);
    let count = c.splat(&sum.ty, (x.ty.shape[rank - 3] * x.ty.shape[rank - 2]) as f64);
    let mean = bin(c, "divide", &sum, &count);
    let dims: Vec<usize> = (0..rank).filter(|&d| d != rank - 3 && d != rank - 2).collect();
    let mean =
        c.op("stablehlo.broadcast_in_dim", &[&mean], &format!("broadcast_dimensions = {}", i64s(&dims)), x.ty.clone());
    let f = c.convert(n.input(1)?, DType::F32);
    let f = c.broadcast_to(&f, &x.ty.shape);
    let d = bin(c, "subtract", &x, &mean);
    let m = bin(c, "multiply", &f, &d);
    let y = bin(c, "add", &m, &mean);
    Ok(vec![c.convert(&y, dtype)])
}

/// A max pool with its `ksize` and `strides` operands (at `at` and `at + 1`)
/// as attributes, built by `build` in either layout.
fn with_window(c: &mut Ctx, n: &Call, at: usize, build: super::Builder) -> Result<Vec<Val>, String> {
    let mut attrs: AttrMap = n.attrs.clone();
    for (key, i) in [("ksize", at), ("strides", at + 1)] {
        let v = n.ints(i, key)?;
        attrs.insert(key, AttrValue::List(v.into_iter().map(AttrValue::Int).collect()));
    }
    let call = Call {
        op: n.op,
        attrs: &attrs,
        inputs: n.inputs[..at].to_vec(),
        consts: n.consts[..at].to_vec(),
        outputs: n.outputs,
        num_replicas: n.num_replicas,
    };
    nchw::with_layout(c, &call, build)
}

pub(super) fn max_pool_v2(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    with_window(c, n, 1, conv::max_pool)
}

pub(super) fn max_pool_grad_v2(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    with_window(c, n, 3, conv::max_pool_grad)
}

pub(super) fn max_pool_grad_grad_v2(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    with_window(c, n, 3, max_pool_grad_grad)
}

/// `MaxPoolGradGrad(x, y, g)` (and its 3-D form, NDHWC): at every window,
/// `g` where `x` has its first maximum. The windows are walked tap by tap:
/// strided slices of the padded `x` and `g`, a tap replacing the best so
/// far where its value is strictly greater.
pub(super) fn max_pool_grad_grad(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (x, g) = (n.input(0)?, n.input(2)?);
    let out = n.out(0)?.clone();
    let rank = x.ty.rank();
    let (k, s) = (n.int_list("ksize"), n.int_list("strides"));
    if k.len() != rank || s.len() != rank || k.iter().chain(&s).any(|&v| v < 1) || out.rank() != rank {
        return Err(format!("{}: ksize {k:?} and strides {s:?} must have {rank} positive entries", n.op));
    }
    if (k[0], k[rank - 1], s[0], s[rank - 1]) != (1, 1, 1, 1) {
        return Err(format!("{}: only windows over the spatial dimensions lower", n.op));
    }
    let same = match n.attrs.get_str("padding") {
        Some("SAME") => true,
        Some("VALID") => false,
        other => return Err(format!("{}: padding {other:?} does not lower", n.op)),
    };
    let (k, s): (Vec<usize>, Vec<usize>) =
        (k.iter().map(|&v| v as usize).collect(), s.iter().map(|&v| v as usize).collect());
    // Pad each spatial dimension so that every window lies inside.
    let mut low = vec![0usize; rank];
    let mut high = vec![0usize; rank];
    for d in 1..rank - 1 {
        let need = ((out.shape[d].max(1) - 1) * s[d] + k[d]).saturating_sub(x.ty.shape[d]);
        low[d] = if same { need / 2 } else { 0 };
        high[d] = need - low[d];
    }
    let pad = |c: &mut Ctx, v: &Val, fill: f64| {
        let shape: Vec<usize> = (0..rank).map(|d| v.ty.shape[d] + low[d] + high[d]).collect();
        let f = c.splat(&Ty::scalar(v.ty.dtype), fill);
        let attrs = format!(
            "edge_padding_low = {}, edge_padding_high = {}, interior_padding = {}",
            i64s(&low),
            i64s(&high),
            i64s(&vec![0; rank])
        );
        c.op("stablehlo.pad", &[v, &f], &attrs, v.ty.with_shape(shape))
    };
    let (xp, gp) = (pad(c, x, f64::NEG_INFINITY), pad(c, g, 0.0));
    let taps: usize = k.iter().product();
    let mut best: Option<(Val, Val)> = None;
    for t in 0..taps {
        // The tap's offset in each dimension, row-major over the window.
        let mut rest = t;
        let mut start = vec![0usize; rank];
        for d in (0..rank).rev() {
            start[d] = rest % k[d];
            rest /= k[d];
        }
        let limit: Vec<usize> = (0..rank).map(|d| start[d] + (out.shape[d].max(1) - 1) * s[d] + 1).collect();
        let attrs =
            format!("start_indices = {}, limit_indices = {}, strides = {}", i64s(&start), i64s(&limit), i64s(&s));
        let xt = c.op("stablehlo.slice", &[&xp], &attrs, x.ty.with_shape(out.shape.clone()));
        let gt = c.op("stablehlo.slice", &[&gp], &attrs, out.clone());
        best = Some(match best {
            None => (xt, gt),
            Some((bx, bg)) => {
                let more = c.compare(&xt, &bx, Cmp::Gt);
                (c.select(&more, &xt, &bx), c.select(&more, &gt, &bg))
            }
        });
    }
    let (_, picked) = best.ok_or_else(|| format!("{}: an empty window", n.op))?;
    Ok(vec![picked])
}

/// The generic `Conv(input, filter)`: the fixed-rank convolution it is.
pub(super) fn generic_conv(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let (op, attrs) = crate::ir::shapes::rules::conv_as_fixed_rank(n.attrs, n.input(0)?.ty.rank())?;
    let call = Call {
        op,
        attrs: &attrs,
        inputs: n.inputs.clone(),
        consts: n.consts.clone(),
        outputs: n.outputs,
        num_replicas: n.num_replicas,
    };
    if op == "Conv2D" {
        nchw::with_layout(c, &call, |c, n| conv::conv(c, n, conv::Kind::Forward, false))
    } else {
        super::conv3d::conv(c, &call, conv::Kind::Forward)
    }
}
