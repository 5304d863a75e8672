//! Image ops as TensorFlow's CPU kernels compute them: resizing
//! (`ResizeBilinear`, `ResizeNearestNeighbor` and their gradients), local
//! response normalisation (`LRN`, `LRNGrad`), colour space and adjustment
//! (`RGBToHSV`, `HSVToRGB`, `AdjustHue`, `AdjustSaturation`,
//! `AdjustContrastv2`), `BiasAddV1`, the generic `Conv` (as `Conv2D` or
//! `Conv3D`), and the max pools whose window comes
//! as operands (`MaxPoolV2` and its gradients) or whose gradient is
//! differentiated again (`MaxPoolGradGrad`).
//!
//! Images are NHWC. Resizing and colour math run in f32 whatever the
//! input's dtype, as TensorFlow's kernels do; a bilinear resize reads the
//! two neighbours and the fraction [`lerps`] gives per output coordinate,
//! which the StableHLO lowering shares. Cost: a few operations per output
//! element (LRN: the window's depth per element).

use super::conv::{ConvKind, PoolKind};
use super::dtypes::cast;
use super::spatial::{apply, scatter_add};
use crate::exec::error::KernelError;
use crate::exec::limits::checked_elements;
use crate::exec::tensor::Tensor;
use crate::ir::{AttrMap, AttrValue, DType};

/// Runs `op` if it is an image op; `None` otherwise.
pub(crate) fn dispatch(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Option<Result<Vec<Tensor>, KernelError>> {
    let x = |i: usize| super::arg(op, inputs, i);
    let run = || -> Result<Tensor, KernelError> {
        match op {
            "BiasAddV1" => super::math::bias_add(op, x(0)?, x(1)?, super::math::DataFormat::ChannelsLast),
            "ResizeBilinear" => resize_bilinear(op, attrs, x(0)?, x(1)?),
            "ResizeBilinearGrad" => resize_bilinear_grad(op, attrs, x(0)?, x(1)?),
            "ResizeNearestNeighbor" => {
                let (shape, map) = nearest_map(op, attrs, x(0)?.shape(), x(1)?)?;
                apply(op, x(0)?, &shape, &map)
            }
            "ResizeNearestNeighborGrad" => {
                let g = x(0)?;
                let size = pair(op, x(1)?, "size")?;
                let &[b, _, _, c] = g.shape() else {
                    return Err(KernelError::invalid(op, format!("grads must be 4-D, got {:?}", g.shape())));
                };
                let original = [b, size[0], size[1], c];
                let (_, map) =
                    nearest_map(op, attrs, &original, &Tensor::vector(vec![g.shape()[1] as i32, g.shape()[2] as i32]))?;
                scatter_add(op, g, &original, &map)
            }
            "LRN" => lrn(op, attrs, x(0)?),
            "LRNGrad" => lrn_grad(op, attrs, x(0)?, x(1)?, x(2)?),
            "RGBToHSV" | "HSVToRGB" | "AdjustHue" | "AdjustSaturation" => colour(op, x(0)?, inputs.get(1)),
            "AdjustContrastv2" => adjust_contrast(op, x(0)?, x(1)?),
            "MaxPoolV2" => window_pool(op, attrs, PoolKind::Max, inputs, 1),
            "MaxPoolGradV2" => window_pool(op, attrs, PoolKind::MaxGrad, inputs, 3),
            "MaxPoolGradGradV2" => window_pool(op, attrs, PoolKind::MaxGradGrad, inputs, 3),
            "MaxPoolGradGrad" => super::nchw::pool(op, PoolKind::MaxGradGrad, attrs, inputs),
            "Conv" => {
                let (fixed, attrs) = crate::ir::shapes::rules::conv_as_fixed_rank(attrs, x(0)?.shape().len())
                    .map_err(|e| KernelError::invalid(op, e))?;
                if fixed == "Conv2D" {
                    super::nchw::conv(op, ConvKind::Forward, false, &attrs, inputs)
                } else {
                    super::conv3d::conv(op, ConvKind::Forward, &attrs, inputs)
                }
            }
            _ => Err(KernelError::invalid(op, "not an image op")),
        }
    };
    OPS.contains(&op).then(|| run().map(|t| vec![t]))
}

/// The ops of [`dispatch`].
const OPS: &[&str] = &[
    "AdjustContrastv2",
    "AdjustHue",
    "AdjustSaturation",
    "BiasAddV1",
    "Conv",
    "HSVToRGB",
    "LRN",
    "LRNGrad",
    "MaxPoolGradGrad",
    "MaxPoolGradGradV2",
    "MaxPoolGradV2",
    "MaxPoolV2",
    "RGBToHSV",
    "ResizeBilinear",
    "ResizeBilinearGrad",
    "ResizeNearestNeighbor",
    "ResizeNearestNeighborGrad",
];

/// A max pool whose `ksize` and `strides` are operands `at` and `at + 1`:
/// the attribute form's kernel on the other operands.
fn window_pool(op: &str, attrs: &AttrMap, kind: PoolKind, inputs: &[Tensor], at: usize) -> Result<Tensor, KernelError> {
    let mut attrs = attrs.clone();
    for (key, i) in [("ksize", at), ("strides", at + 1)] {
        let v = super::arg(op, inputs, i)?.to_i64_vec(op, key)?;
        attrs.insert(key, AttrValue::List(v.into_iter().map(AttrValue::Int).collect()));
    }
    super::nchw::pool(op, kind, &attrs, &inputs[..at])
}

/// A 2-vector of non-negative sizes.
fn pair(op: &str, t: &Tensor, what: &str) -> Result<[usize; 2], KernelError> {
    match t.to_i64_vec(op, what)?.as_slice() {
        &[h, w] if h >= 0 && w >= 0 => Ok([h as usize, w as usize]),
        other => Err(KernelError::invalid(op, format!("{what} must hold two non-negative sizes, got {other:?}"))),
    }
}

/// `align_corners` and `half_pixel_centers`, which cannot both be set.
fn resize_flags(op: &str, attrs: &AttrMap) -> Result<(bool, bool), KernelError> {
    let align = attrs.get_bool("align_corners").unwrap_or(false);
    let half = attrs.get_bool("half_pixel_centers").unwrap_or(false);
    if align && half {
        return Err(KernelError::invalid(op, "align_corners and half_pixel_centers cannot both be true"));
    }
    Ok((align, half))
}

/// How far one output step moves in the input, as TensorFlow computes it (in f32).
pub(crate) fn resize_scale(input: usize, output: usize, align_corners: bool) -> f32 {
    if align_corners && output > 1 {
        (input as f32 - 1.0) / (output as f32 - 1.0)
    } else {
        input as f32 / output as f32
    }
}

/// One output coordinate of a bilinear resize: the lower and upper input
/// coordinates it reads and the weight of the upper one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Lerp {
    pub(crate) lower: usize,
    pub(crate) upper: usize,
    pub(crate) frac: f32,
}

/// The [`Lerp`] of every output coordinate of a bilinear resize from `input` to `output`.
pub(crate) fn lerps(input: usize, output: usize, align_corners: bool, half_pixel: bool) -> Vec<Lerp> {
    let scale = resize_scale(input, output, align_corners);
    (0..output)
        .map(|i| {
            let at = if half_pixel { (i as f32 + 0.5) * scale - 0.5 } else { i as f32 * scale };
            let floor = at.floor();
            Lerp {
                lower: (floor as i64).max(0) as usize,
                upper: (at.ceil() as i64).min(input as i64 - 1).max(0) as usize,
                frac: at - floor,
            }
        })
        .collect()
}

/// The input coordinate of every output coordinate of a nearest-neighbour resize.
pub(crate) fn nearest(input: usize, output: usize, align_corners: bool, half_pixel: bool) -> Vec<usize> {
    let scale = resize_scale(input, output, align_corners);
    (0..output)
        .map(|i| {
            let at = if half_pixel { (i as f32 + 0.5) * scale } else { i as f32 * scale };
            let at = if align_corners { at.round() } else { at.floor() } as i64;
            at.min(input as i64 - 1).max(0) as usize
        })
        .collect()
}

/// The NHWC image shape `[b, h, w, c]` of `shape`.
fn image(op: &str, shape: &[usize]) -> Result<[usize; 4], KernelError> {
    <[usize; 4]>::try_from(shape)
        .map_err(|_| KernelError::invalid(op, format!("images must be 4-D NHWC, got {shape:?}")))
}

/// The output shape and index map of `ResizeNearestNeighbor(images of shape, size)`.
fn nearest_map(
    op: &str,
    attrs: &AttrMap,
    shape: &[usize],
    size: &Tensor,
) -> Result<(Vec<usize>, Vec<usize>), KernelError> {
    let (align, half) = resize_flags(op, attrs)?;
    let [b, h, w, c] = image(op, shape)?;
    let [oh, ow] = pair(op, size, "size")?;
    if h == 0 || w == 0 {
        return Err(KernelError::invalid(op, "cannot resize an empty image"));
    }
    let (ys, xs) = (nearest(h, oh, align, half), nearest(w, ow, align, half));
    let out = vec![b, oh, ow, c];
    let mut map = Vec::with_capacity(checked_elements(op, DType::I64, &out)?);
    for n in 0..b {
        for &y in &ys {
            for &x in &xs {
                map.extend((0..c).map(|k| ((n * h + y) * w + x) * c + k));
            }
        }
    }
    Ok((out, map))
}

/// The elements of `t` as f32, whatever its numeric dtype.
fn f32s(op: &str, t: &Tensor) -> Result<Vec<f32>, KernelError> {
    let wide = cast(op, t, DType::F32)?;
    wide.to_vec::<f32>().ok_or_else(|| KernelError::invalid(op, "did not widen to f32"))
}

/// `ResizeBilinear(images, size)`: f32 images of the new size, each pixel
/// blended from its four neighbours (rows first, then columns).
fn resize_bilinear(op: &str, attrs: &AttrMap, images: &Tensor, size: &Tensor) -> Result<Tensor, KernelError> {
    let (align, half) = resize_flags(op, attrs)?;
    let [b, h, w, c] = image(op, images.shape())?;
    let [oh, ow] = pair(op, size, "size")?;
    if h == 0 || w == 0 {
        return Err(KernelError::invalid(op, "cannot resize an empty image"));
    }
    let x = f32s(op, images)?;
    let (ys, xs) = (lerps(h, oh, align, half), lerps(w, ow, align, half));
    let mut out = Vec::with_capacity(checked_elements(op, DType::F32, &[b, oh, ow, c])?);
    let at = |n: usize, y: usize, xx: usize, k: usize| x[((n * h + y) * w + xx) * c + k];
    for n in 0..b {
        for ly in &ys {
            for lx in &xs {
                for k in 0..c {
                    let (tl, tr) = (at(n, ly.lower, lx.lower, k), at(n, ly.lower, lx.upper, k));
                    let (bl, br) = (at(n, ly.upper, lx.lower, k), at(n, ly.upper, lx.upper, k));
                    let top = tl + (tr - tl) * lx.frac;
                    let bottom = bl + (br - bl) * lx.frac;
                    out.push(top + (bottom - top) * ly.frac);
                }
            }
        }
    }
    Tensor::from_vec(&[b, oh, ow, c], out)
}

/// `ResizeBilinearGrad(grads, original_image)`: each gradient pixel's four
/// weighted parts summed into the neighbours it was blended from, in the
/// original image's dtype.
fn resize_bilinear_grad(op: &str, attrs: &AttrMap, grads: &Tensor, original: &Tensor) -> Result<Tensor, KernelError> {
    let (align, half) = resize_flags(op, attrs)?;
    let [b, h, w, c] = image(op, original.shape())?;
    let [gb, oh, ow, gc] = image(op, grads.shape())?;
    if (gb, gc) != (b, c) {
        return Err(KernelError::invalid(
            op,
            format!("grads {:?} do not match the image {:?}", grads.shape(), original.shape()),
        ));
    }
    if grads.dtype() != DType::F32 {
        return Err(KernelError::dtype(op, grads.dtype(), "grads must be float32"));
    }
    let g = f32s(op, grads)?;
    let (ys, xs) = (lerps(h, oh, align, half), lerps(w, ow, align, half));
    let mut out = vec![0f64; checked_elements(op, original.dtype(), original.shape())?];
    let wide = original.dtype() == DType::F64;
    // Each part is a product in f32, added in the image's dtype (f32 sums round after each add).
    let mut add = |i: usize, v: f32| {
        out[i] = if wide { out[i] + f64::from(v) } else { f64::from(out[i] as f32 + v) };
    };
    let idx = |n: usize, y: usize, x: usize, k: usize| ((n * h + y) * w + x) * c + k;
    for n in 0..b {
        for (y, ly) in ys.iter().enumerate() {
            for (xx, lx) in xs.iter().enumerate() {
                for k in 0..c {
                    let v = g[((n * oh + y) * ow + xx) * c + k];
                    let (iy, ix) = (1.0 - ly.frac, 1.0 - lx.frac);
                    add(idx(n, ly.lower, lx.lower, k), v * iy * ix);
                    add(idx(n, ly.lower, lx.upper, k), v * iy * lx.frac);
                    add(idx(n, ly.upper, lx.lower, k), v * ly.frac * ix);
                    add(idx(n, ly.upper, lx.upper, k), v * ly.frac * lx.frac);
                }
            }
        }
    }
    let out = Tensor::from_vec(original.shape(), out)?;
    cast(op, &out, if wide { DType::F64 } else { DType::F32 })
}

/// The LRN attributes: `depth_radius`, `bias`, `alpha`, `beta`.
fn lrn_attrs(op: &str, attrs: &AttrMap) -> Result<(usize, f32, f32, f32), KernelError> {
    let float = |key: &str, default: f32| match attrs.get(key) {
        Some(AttrValue::Float(f)) => *f,
        Some(AttrValue::Int(i)) => *i as f32,
        _ => default,
    };
    let radius = attrs.get_int("depth_radius").unwrap_or(5);
    if !(0..=i64::from(i32::MAX)).contains(&radius) {
        return Err(KernelError::invalid(op, format!("depth_radius must be non-negative, got {radius}")));
    }
    Ok((radius as usize, float("bias", 1.0), float("alpha", 1.0), float("beta", 0.5)))
}

/// The float values of a 4-D LRN operand, checked to be f32 (bf16/f16 arrive widened).
fn lrn_input(op: &str, t: &Tensor, what: &str) -> Result<Vec<f32>, KernelError> {
    if t.shape().len() != 4 {
        return Err(KernelError::invalid(op, format!("{what} must be 4-D, got {:?}", t.shape())));
    }
    t.to_vec::<f32>()
        .ok_or_else(|| KernelError::dtype(op, t.dtype(), format!("{what} must be float32, float16 or bfloat16")))
}

/// `LRN(input)`: each value divided by `(bias + alpha · Σ window²)^beta`, the
/// window spanning `depth_radius` channels either side.
fn lrn(op: &str, attrs: &AttrMap, x: &Tensor) -> Result<Tensor, KernelError> {
    let (r, bias, alpha, beta) = lrn_attrs(op, attrs)?;
    let v = lrn_input(op, x, "input")?;
    let depth = x.shape()[3];
    let mut out = vec![0f32; v.len()];
    for (row, o) in v.chunks(depth.max(1)).zip(out.chunks_mut(depth.max(1))) {
        for d in 0..depth {
            let window = &row[d.saturating_sub(r)..(d + r + 1).min(depth)];
            let sum: f32 = window.iter().map(|a| a * a).sum();
            o[d] = row[d] * (bias + alpha * sum).powf(-beta);
        }
    }
    Tensor::from_vec(x.shape(), out)
}

/// `LRNGrad(input_grads, input_image, output_image)`.
fn lrn_grad(op: &str, attrs: &AttrMap, dy: &Tensor, x: &Tensor, y: &Tensor) -> Result<Tensor, KernelError> {
    let (r, bias, alpha, beta) = lrn_attrs(op, attrs)?;
    if dy.shape() != x.shape() || y.shape() != x.shape() {
        return Err(KernelError::invalid(op, "input_grads, input_image and output_image must have one shape"));
    }
    let (g, xv, yv) =
        (lrn_input(op, dy, "input_grads")?, lrn_input(op, x, "input_image")?, lrn_input(op, y, "output_image")?);
    let depth = x.shape()[3].max(1);
    let mut out = vec![0f32; xv.len()];
    for base in (0..xv.len()).step_by(depth) {
        for j in 0..depth {
            let (lo, hi) = (j.saturating_sub(r), (j + r + 1).min(depth));
            let norm = alpha * (lo..hi).map(|k| xv[base + k] * xv[base + k]).sum::<f32>() + bias;
            for k in lo..hi {
                let mut d = -2.0 * alpha * beta * xv[base + k] * yv[base + j] / norm;
                if k == j {
                    d += norm.powf(-beta);
                }
                out[base + k] += d * g[base + j];
            }
        }
    }
    Tensor::from_vec(x.shape(), out)
}

/// RGB to HSV, as TensorFlow's `RGBToHSV` kernel computes it.
pub(crate) fn rgb_to_hsv(r: f64, g: f64, b: f64) -> (f64, f64, f64) {
    let v = r.max(g).max(b);
    let range = v - r.min(g).min(b);
    let s = if v > 0.0 { range / v } else { 0.0 };
    let norm = 1.0 / range / 6.0;
    let mut h = if r == v {
        norm * (g - b)
    } else if g == v {
        norm * (b - r) + 2.0 / 6.0
    } else {
        norm * (r - g) + 4.0 / 6.0
    };
    if range <= 0.0 {
        h = 0.0;
    }
    if h < 0.0 {
        h += 1.0;
    }
    (h, s, v)
}

/// HSV to RGB, as TensorFlow's `HSVToRGB` kernel computes it.
pub(crate) fn hsv_to_rgb(h: f64, s: f64, v: f64) -> (f64, f64, f64) {
    let dh = h * 6.0;
    let dr = ((dh - 3.0).abs() - 1.0).clamp(0.0, 1.0);
    let dg = (2.0 - (dh - 2.0).abs()).clamp(0.0, 1.0);
    let db = (2.0 - (dh - 4.0).abs()).clamp(0.0, 1.0);
    let one_s = 1.0 - s;
    ((one_s + s * dr) * v, (one_s + s * dg) * v, (one_s + s * db) * v)
}

/// RGB to a hue in [0, 6) and the value range, as `AdjustHue`'s CPU kernel does.
fn rgb_to_hue_range(r: f32, g: f32, b: f32) -> (f32, f32, f32) {
    let (max, mid, min, category) = if r < g {
        if b < r {
            (g, r, b, 1)
        } else if b > g {
            (b, g, r, 3)
        } else {
            (g, b, r, 2)
        }
    } else if b < g {
        (r, g, b, 0)
    } else if b > r {
        (b, r, g, 4)
    } else {
        (r, b, g, 5)
    };
    if max == min {
        return (0.0, min, max);
    }
    let ratio = (mid - min) / (max - min);
    let h = category as f32 + if category % 2 == 0 { ratio } else { 1.0 - ratio };
    (h, min, max)
}

/// A hue in [0, 6) and a value range back to RGB.
fn hue_range_to_rgb(h: f32, min: f32, max: f32) -> [f32; 3] {
    let category = h as i32;
    let mut ratio = h - category as f32;
    if category % 2 != 0 {
        ratio = 1.0 - ratio;
    }
    let mid = min + ratio * (max - min);
    match category {
        0 => [max, mid, min],
        1 => [mid, max, min],
        2 => [min, max, mid],
        3 => [min, mid, max],
        4 => [mid, min, max],
        _ => [max, min, mid],
    }
}

/// AdjustSaturation's own RGB to HSV (hue in [0, 1)), in f32.
fn rgb_to_hsv_f32(r: f32, g: f32, b: f32) -> (f32, f32, f32) {
    let v = r.max(g.max(b));
    let range = v - r.min(g.min(b));
    let s = if v > 0.0 { range / v } else { 0.0 };
    let norm = 1.0 / (6.0 * range);
    let mut h = if r == v {
        norm * (g - b)
    } else if g == v {
        norm * (b - r) + (2.0f64 / 6.0) as f32
    } else {
        norm * (r - g) + (4.0f64 / 6.0) as f32
    };
    if range <= 0.0 {
        h = 0.0;
    }
    if h < 0.0 {
        h += 1.0;
    }
    (h, s, v)
}

/// AdjustSaturation's own HSV to RGB, in f32.
fn hsv_to_rgb_f32(h: f32, s: f32, v: f32) -> [f32; 3] {
    let c = s * v;
    let m = v - c;
    let dh = h * 6.0;
    let category = dh as i32;
    let mut f = dh;
    while f <= 0.0 {
        f += 2.0;
    }
    while f >= 2.0 {
        f -= 2.0;
    }
    let x = c * (1.0 - (f - 1.0).abs());
    let [r, g, b] = match category {
        0 => [c, x, 0.0],
        1 => [x, c, 0.0],
        2 => [0.0, c, x],
        3 => [0.0, x, c],
        4 => [x, 0.0, c],
        5 => [c, 0.0, x],
        _ => [0.0, 0.0, 0.0],
    };
    [r + m, g + m, b + m]
}

/// The colour ops, pixel by pixel over the last dimension (3 channels).
fn colour(op: &str, images: &Tensor, factor: Option<&Tensor>) -> Result<Tensor, KernelError> {
    if images.shape().last() != Some(&3) {
        return Err(KernelError::invalid(
            op,
            format!("the last dimension must hold 3 channels, got {:?}", images.shape()),
        ));
    }
    let scalar = || -> Result<f32, KernelError> {
        let t = factor.ok_or_else(|| KernelError::invalid(op, "expected 2 inputs"))?;
        match f32s(op, t)?.as_slice() {
            &[v] if t.shape().is_empty() => Ok(v),
            _ => Err(KernelError::invalid(op, format!("the factor must be a scalar, got shape {:?}", t.shape()))),
        }
    };
    match op {
        "RGBToHSV" | "HSVToRGB" => {
            let f = if op == "RGBToHSV" { rgb_to_hsv } else { hsv_to_rgb };
            let convert = |v: &[f64], out: &mut Vec<f64>| {
                for p in v.chunks(3) {
                    let (a, b, c) = f(p[0], p[1], p[2]);
                    out.extend([a, b, c]);
                }
            };
            match images.dtype() {
                DType::F64 => {
                    let mut out = Vec::with_capacity(images.len());
                    convert(&images.to_vec::<f64>().unwrap_or_default(), &mut out);
                    Tensor::from_vec(images.shape(), out)
                }
                DType::F32 => {
                    // f32 images compute in f32: each step rounds as TensorFlow's kernel does.
                    let v = images.to_vec::<f32>().unwrap_or_default();
                    let mut out = Vec::with_capacity(v.len());
                    for p in v.chunks(3) {
                        out.extend(if op == "RGBToHSV" { rgb_to_hsv_eigen(p) } else { hsv_to_rgb_eigen(p) });
                    }
                    Tensor::from_vec(images.shape(), out)
                }
                other => Err(KernelError::dtype(op, other, "images must be floating point")),
            }
        }
        _ => {
            if images.dtype() != DType::F32 {
                return Err(KernelError::dtype(op, images.dtype(), "images must be float32 on the CPU"));
            }
            let k = scalar()?;
            let v = images.to_vec::<f32>().unwrap_or_default();
            let mut out = Vec::with_capacity(v.len());
            for p in v.chunks(3) {
                if op == "AdjustHue" {
                    let (mut h, min, max) = rgb_to_hue_range(p[0], p[1], p[2]);
                    h += k * 6.0;
                    while h < 0.0 {
                        h += 6.0;
                    }
                    while h >= 6.0 {
                        h -= 6.0;
                    }
                    out.extend(hue_range_to_rgb(h, min, max));
                } else {
                    let (h, s, v) = rgb_to_hsv_f32(p[0], p[1], p[2]);
                    out.extend(hsv_to_rgb_f32(h, (s * k).clamp(0.0, 1.0), v));
                }
            }
            Tensor::from_vec(images.shape(), out)
        }
    }
}

/// [`rgb_to_hsv`] in f32.
fn rgb_to_hsv_eigen(p: &[f32]) -> [f32; 3] {
    let (r, g, b) = (p[0], p[1], p[2]);
    let v = r.max(g).max(b);
    let range = v - r.min(g).min(b);
    let s = if v > 0.0 { range / v } else { 0.0 };
    let norm = (1.0 / range) * (1.0 / 6.0);
    let mut h = if r == v {
        norm * (g - b)
    } else if g == v {
        norm * (b - r) + 2.0 / 6.0
    } else {
        norm * (r - g) + 4.0 / 6.0
    };
    if range <= 0.0 {
        h = 0.0;
    }
    if h < 0.0 {
        h += 1.0;
    }
    [h, s, v]
}

/// [`hsv_to_rgb`] in f32.
fn hsv_to_rgb_eigen(p: &[f32]) -> [f32; 3] {
    let (h, s, v) = (p[0], p[1], p[2]);
    let dh = h * 6.0;
    let dr = ((dh - 3.0).abs() - 1.0).clamp(0.0, 1.0);
    let dg = (2.0 - (dh - 2.0).abs()).clamp(0.0, 1.0);
    let db = (2.0 - (dh - 4.0).abs()).clamp(0.0, 1.0);
    let one_s = 1.0 - s;
    [(one_s + s * dr) * v, (one_s + s * dg) * v, (one_s + s * db) * v]
}

/// `AdjustContrastv2(images, contrast_factor)`: per image and channel,
/// `(x - mean) · factor + mean`, the mean over height and width, in f32.
fn adjust_contrast(op: &str, images: &Tensor, factor: &Tensor) -> Result<Tensor, KernelError> {
    let shape = images.shape();
    if shape.len() < 3 {
        return Err(KernelError::invalid(op, format!("images must be at least 3-D, got {shape:?}")));
    }
    let k = match f32s(op, factor)?.as_slice() {
        &[k] if factor.shape().is_empty() => k,
        _ => return Err(KernelError::invalid(op, "contrast_factor must be a scalar")),
    };
    let n = shape.len();
    let (hw, c) = (shape[n - 3] * shape[n - 2], shape[n - 1]);
    let batch: usize = shape[..n - 3].iter().product();
    let v = f32s(op, images)?;
    let mut out = vec![0f32; v.len()];
    for b in 0..batch {
        let base = b * hw * c;
        for ch in 0..c {
            let sum: f32 = (0..hw).map(|p| v[base + p * c + ch]).sum();
            let mean = sum / hw.max(1) as f32;
            for p in 0..hw {
                let i = base + p * c + ch;
                out[i] = (v[i] - mean) * k + mean;
            }
        }
    }
    let out = Tensor::from_vec(shape, out)?;
    cast(op, &out, images.dtype())
}
