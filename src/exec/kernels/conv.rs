//! Convolution and pooling in NHWC: `Conv2D` with its two backprops,
//! `DepthwiseConv2dNative` with its two backprops, `MaxPool`/`MaxPoolGrad`,
//! `AvgPool`/`AvgPoolGrad`, with `SAME`, `VALID` and `EXPLICIT` padding,
//! strides and dilations. A `Conv2D` whose input has a multiple of the
//! filter's input depth is grouped (`conv_grouped`).
//!
//! Every kernel walks the same taps — (batch, output row, output column,
//! window row, window column) with the input position each reads — so the
//! forward ops and their gradients agree on the geometry by construction.
//! This module reads attributes and checks shapes; the convolutions'
//! arithmetic (im2col over GEMM, depthwise loops) is in `conv_gemm`.
//! Pooling cost: output size × window size, direct loops.

use crate::exec::error::KernelError;
use crate::exec::tensor::Tensor;
use crate::ir::AttrMap;
use num_traits::{Float as _, Zero as _};

use std::borrow::Cow;

use super::conv_gemm;
use super::conv_grouped::{self, Grouped};
use super::elementwise::{same, with_float, Flt};
use crate::exec::limits::checked_elements;

/// One spatial axis of a window op.
#[derive(Clone, Copy, Debug)]
pub(super) struct Axis1 {
    pub(super) input: usize,
    pub(super) window: usize,
    pub(super) stride: usize,
    pub(super) dilation: usize,
    pub(super) pad_before: usize,
    pub(super) output: usize,
}

/// Padding of a window op.
#[derive(Clone, Debug)]
pub(super) enum Padding {
    Same,
    Valid,
    /// `(before, after)` for the two spatial axes.
    Explicit([(usize, usize); 2]),
}

pub(super) fn axis1(
    op: &str,
    input: usize,
    window: usize,
    stride: usize,
    dilation: usize,
    pad: (Padding, usize),
) -> Result<Axis1, KernelError> {
    if window == 0 || stride == 0 || dilation == 0 {
        return Err(KernelError::invalid(op, "window, strides and dilations must be positive"));
    }
    let span = (window - 1) * dilation + 1;
    let (output, pad_before) = match pad.0 {
        Padding::Valid => (if input >= span { (input - span) / stride + 1 } else { 0 }, 0),
        Padding::Same => {
            let out = input.div_ceil(stride);
            let total = ((out.max(1) - 1) * stride + span).saturating_sub(input);
            (out, total / 2)
        }
        Padding::Explicit(p) => {
            let (b, a) = p[pad.1];
            let padded = input + b + a;
            (if padded >= span { (padded - span) / stride + 1 } else { 0 }, b)
        }
    };
    Ok(Axis1 { input, window, stride, dilation, pad_before, output })
}

/// The geometry of a 2-D window op on `[batch, rows, cols, channels]`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Geometry {
    pub(super) batch: usize,
    pub(super) rows: Axis1,
    pub(super) cols: Axis1,
}

impl Geometry {
    /// Calls `f(b, out_r, out_c, win_r, win_c, in_r, in_c)` for every tap inside the input.
    fn taps(&self, mut f: impl FnMut(usize, usize, usize, usize, usize, usize, usize)) {
        let (r, c) = (self.rows, self.cols);
        for b in 0..self.batch {
            for orow in 0..r.output {
                for ocol in 0..c.output {
                    for wr in 0..r.window {
                        let ir = (orow * r.stride + wr * r.dilation) as isize - r.pad_before as isize;
                        if ir < 0 || ir as usize >= r.input {
                            continue;
                        }
                        for wc in 0..c.window {
                            let ic = (ocol * c.stride + wc * c.dilation) as isize - c.pad_before as isize;
                            if ic < 0 || ic as usize >= c.input {
                                continue;
                            }
                            f(b, orow, ocol, wr, wc, ir as usize, ic as usize);
                        }
                    }
                }
            }
        }
    }
}

/// The attributes of a window op.
struct WindowAttrs {
    strides: [usize; 2],
    dilations: [usize; 2],
    ksize: Option<[usize; 2]>,
    padding: Padding,
}

fn nhwc_pair(op: &str, attrs: &AttrMap, key: &str, default: [usize; 2]) -> Result<[usize; 2], KernelError> {
    let Some(list) = attrs.get(key).and_then(|v| v.as_list()) else { return Ok(default) };
    let ints: Vec<i64> = list.iter().filter_map(|v| v.as_int()).collect();
    match ints.as_slice() {
        &[1, h, w, 1] | &[h, w] if h > 0 && w > 0 => Ok([h as usize, w as usize]),
        other => Err(KernelError::invalid(op, format!("{key} {other:?} is not supported (NHWC, [1, h, w, 1])"))),
    }
}

fn window_attrs(op: &str, attrs: &AttrMap) -> Result<WindowAttrs, KernelError> {
    if let Some(f) = attrs.get_str("data_format") {
        if f != "NHWC" {
            return Err(KernelError::invalid(op, format!("data_format {f} is not supported (only NHWC)")));
        }
    }
    let padding = match attrs.get_str("padding").unwrap_or("VALID") {
        "SAME" => Padding::Same,
        "VALID" => Padding::Valid,
        "EXPLICIT" => {
            let list = attrs.get("explicit_paddings").and_then(|v| v.as_list()).unwrap_or_default();
            let p: Vec<usize> = list.iter().filter_map(|v| v.as_int()).map(|v| v.max(0) as usize).collect();
            if p.len() != 8 {
                return Err(KernelError::invalid(op, "explicit_paddings must have 8 entries"));
            }
            Padding::Explicit([(p[2], p[3]), (p[4], p[5])])
        }
        other => return Err(KernelError::invalid(op, format!("padding {other:?} is not supported"))),
    };
    Ok(WindowAttrs {
        strides: nhwc_pair(op, attrs, "strides", [1, 1])?,
        dilations: nhwc_pair(op, attrs, "dilations", [1, 1])?,
        ksize: attrs.get("ksize").map(|_| nhwc_pair(op, attrs, "ksize", [1, 1])).transpose()?,
        padding,
    })
}

fn geometry(op: &str, input: &[usize], window: [usize; 2], w: &WindowAttrs) -> Result<Geometry, KernelError> {
    let &[batch, rows, cols, _] = input else {
        return Err(KernelError::invalid(op, format!("input must be 4-D NHWC, got {input:?}")));
    };
    Ok(Geometry {
        batch,
        rows: axis1(op, rows, window[0], w.strides[0], w.dilations[0], (w.padding.clone(), 0))?,
        cols: axis1(op, cols, window[1], w.strides[1], w.dilations[1], (w.padding.clone(), 1))?,
    })
}

pub(super) fn dims_of(op: &str, t: &Tensor, what: &str) -> Result<Vec<usize>, KernelError> {
    t.to_i64_vec(op, what)?
        .into_iter()
        .map(|d| usize::try_from(d).map_err(|_| KernelError::invalid(op, format!("{what} must be non-negative"))))
        .collect()
}

fn four(op: &str, s: &[usize], what: &str) -> Result<[usize; 4], KernelError> {
    <[usize; 4]>::try_from(s).map_err(|_| KernelError::invalid(op, format!("{what} must be 4-D, got {s:?}")))
}

/// Which convolution kernel to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ConvKind {
    /// `Conv2D(input, filter)`.
    Forward,
    /// `Conv2DBackpropInput(input_sizes, filter, out_backprop)`.
    BackpropInput,
    /// `Conv2DBackpropFilter(input, filter_sizes, out_backprop)`.
    BackpropFilter,
}

/// A regular (`depthwise = false`) or depthwise convolution or one of its backprops.
pub(crate) fn conv(
    op: &str,
    kind: ConvKind,
    depthwise: bool,
    attrs: &AttrMap,
    inputs: &[Tensor],
) -> Result<Tensor, KernelError> {
    let wrong = || {
        KernelError::invalid(
            op,
            format!("{op} takes {} inputs, got {}", 2 + usize::from(kind != ConvKind::Forward), inputs.len()),
        )
    };
    let w = window_attrs(op, attrs)?;
    match (kind, inputs) {
        (ConvKind::Forward, [x, f]) => {
            let xs = four(op, x.shape(), "input")?;
            let fs = four(op, f.shape(), "filter")?;
            let (s, groups) = conv_shape(op, &xs, fs, &w, depthwise)?;
            let out_channels = if depthwise { xs[3] * fs[3] } else { fs[3] };
            let out_shape = [s.g.batch, s.g.rows.output, s.g.cols.output, out_channels];
            checked_elements(op, x.dtype(), &out_shape)?;
            with_float!(op, x, xa, T => {
                let fa = same::<T>(op, f, x)?;
                let (xv, fv) = (contiguous(xa), contiguous(fa));
                let y = if groups > 1 {
                    conv_grouped::forward(&Grouped { s, groups }, &xv, &fv)
                } else if depthwise {
                    conv_gemm::depthwise_forward(&s, &xv, &fv)
                } else {
                    conv_gemm::forward(&s, &xv, &fv)
                };
                Tensor::from_vec(&out_shape, y)
            })
        }
        (ConvKind::BackpropInput, [sizes, f, dy]) => {
            let in_shape = four(op, &dims_of(op, sizes, "input_sizes")?, "input_sizes")?;
            let fs = four(op, f.shape(), "filter")?;
            let (s, groups) = conv_shape(op, &in_shape, fs, &w, depthwise)?;
            expect_out_backprop(op, &s, depthwise, dy)?;
            let len = checked_elements(op, dy.dtype(), &in_shape)?;
            with_float!(op, dy, dya, T => {
                let fa = same::<T>(op, f, dy)?;
                let (dyv, fv) = (contiguous(dya), contiguous(fa));
                let dx = if groups > 1 {
                    conv_grouped::backprop_input(&Grouped { s, groups }, &dyv, &fv, len)
                } else if depthwise {
                    conv_gemm::depthwise_backprop_input(&s, &dyv, &fv, len)
                } else {
                    conv_gemm::backprop_input(&s, &dyv, &fv, len)
                };
                Tensor::from_vec(&in_shape, dx)
            })
        }
        (ConvKind::BackpropFilter, [x, sizes, dy]) => {
            let xs = four(op, x.shape(), "input")?;
            let fs = four(op, &dims_of(op, sizes, "filter_sizes")?, "filter_sizes")?;
            let (s, groups) = conv_shape(op, &xs, fs, &w, depthwise)?;
            expect_out_backprop(op, &s, depthwise, dy)?;
            checked_elements(op, dy.dtype(), &fs)?;
            with_float!(op, dy, dya, T => {
                let xa = same::<T>(op, x, dy)?;
                let (xv, dyv) = (contiguous(xa), contiguous(dya));
                let df = if groups > 1 {
                    conv_grouped::backprop_filter(&Grouped { s, groups }, &xv, &dyv)
                } else if depthwise {
                    conv_gemm::depthwise_backprop_filter(&s, &xv, &dyv)
                } else {
                    conv_gemm::backprop_filter(&s, &xv, &dyv)
                };
                Tensor::from_vec(&fs, df)
            })
        }
        _ => Err(wrong()),
    }
}

/// The shape of a convolution of an NHWC `input` by an HWIO filter of shape `fs`, and its number
/// of groups: a regular convolution whose input has `groups` times the filter's input depth is
/// grouped; a depthwise one has exactly the filter's input depth.
fn conv_shape(
    op: &str,
    input: &[usize; 4],
    fs: [usize; 4],
    w: &WindowAttrs,
    depthwise: bool,
) -> Result<(conv_gemm::Shape, usize), KernelError> {
    let groups = if depthwise { 1 } else { groups_of(op, input[3], fs)? };
    if depthwise && fs[2] != input[3] {
        return Err(KernelError::invalid(op, format!("filter has {} input channels, the input {}", fs[2], input[3])));
    }
    let g = geometry(op, input, [fs[0], fs[1]], w)?;
    Ok((conv_gemm::Shape { g, channels: input[3], filter: fs }, groups))
}

/// The number of groups of a regular convolution of `channels` input channels by filter `fs`.
fn groups_of(op: &str, channels: usize, fs: [usize; 4]) -> Result<usize, KernelError> {
    if fs[2] == channels {
        return Ok(1);
    }
    if fs[2] == 0 || !channels.is_multiple_of(fs[2]) {
        return Err(KernelError::invalid(
            op,
            format!("the input's {channels} channels are not a multiple of the filter's input depth {}", fs[2]),
        ));
    }
    let groups = channels / fs[2];
    if !fs[3].is_multiple_of(groups) {
        return Err(KernelError::invalid(
            op,
            format!("the filter's {} output channels are not a multiple of the {groups} groups", fs[3]),
        ));
    }
    Ok(groups)
}

/// Checks that the output gradient has the shape the forward convolution produces.
fn expect_out_backprop(op: &str, s: &conv_gemm::Shape, depthwise: bool, dy: &Tensor) -> Result<(), KernelError> {
    let out_channels = if depthwise { s.channels * s.filter[3] } else { s.filter[3] };
    let want = [s.g.batch, s.g.rows.output, s.g.cols.output, out_channels];
    if dy.shape() != want {
        return Err(KernelError::invalid(
            op,
            format!("out_backprop has shape {:?}, the convolution's output is {want:?}", dy.shape()),
        ));
    }
    Ok(())
}

/// The elements of `a` in row-major order, borrowed when it is already laid out so.
pub(super) fn contiguous<T: Clone>(a: &ndarray::ArcArray<T, ndarray::IxDyn>) -> Cow<'_, [T]> {
    match a.as_slice() {
        Some(s) => Cow::Borrowed(s),
        None => Cow::Owned(a.iter().cloned().collect()),
    }
}

/// Which pooling kernel to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PoolKind {
    /// `MaxPool(input)`.
    Max,
    /// `MaxPoolGrad(orig_input, orig_output, grad)`.
    MaxGrad,
    /// `MaxPoolGradGrad(orig_input, orig_output, grad)`: `grad` (input-shaped) at each window's maximum.
    MaxGradGrad,
    /// `AvgPool(value)`.
    Avg,
    /// `AvgPoolGrad(orig_input_shape, grad)`.
    AvgGrad,
}

/// Max and average pooling and their gradients. Average pooling divides by the taps inside the
/// input (padding is not counted); a max-pool gradient goes to the first maximum of each window.
pub(crate) fn pool(op: &str, kind: PoolKind, attrs: &AttrMap, inputs: &[Tensor]) -> Result<Tensor, KernelError> {
    let w = window_attrs(op, attrs)?;
    let ksize = w.ksize.ok_or_else(|| KernelError::invalid(op, "missing ksize"))?;
    let in_shape = match kind {
        PoolKind::AvgGrad => {
            four(op, &dims_of(op, super::arg(op, inputs, 0)?, "orig_input_shape")?, "orig_input_shape")?
        }
        _ => four(op, super::arg(op, inputs, 0)?.shape(), "input")?,
    };
    let g = geometry(op, &in_shape, ksize, &w)?;
    let ch = in_shape[3];
    let out_shape = [g.batch, g.rows.output, g.cols.output, ch];
    let (rows, cols) = (g.rows, g.cols);
    let xi = move |b: usize, r: usize, c: usize| ((b * rows.input + r) * cols.input + c) * ch;
    let yi = move |b: usize, r: usize, c: usize| ((b * rows.output + r) * cols.output + c) * ch;
    // Taps of each output position, grouped: (output base, input base) in scan order.
    let mut taps: Vec<(usize, usize)> = Vec::new();
    g.taps(|b, orow, ocol, _, _, ir, ic| taps.push((yi(b, orow, ocol), xi(b, ir, ic))));
    let value = match kind {
        PoolKind::AvgGrad => super::arg(op, inputs, 1)?,
        _ => super::arg(op, inputs, 0)?,
    };
    with_float!(op, value, _a, T => {
        let n_out: usize = out_shape.iter().product();
        match kind {
            PoolKind::Max | PoolKind::MaxGrad | PoolKind::MaxGradGrad => {
                let x: Vec<T> = super::arg(op, inputs, 0)?.to_vec::<T>().ok_or_else(|| KernelError::invalid(op, "mixed dtypes"))?;
                let mut best = vec![T::neg_infinity(); n_out];
                let mut at = vec![usize::MAX; n_out];
                for &(y, xb) in &taps {
                    for k in 0..ch {
                        if at[y + k] == usize::MAX || x[xb + k] > best[y + k] {
                            best[y + k] = x[xb + k];
                            at[y + k] = xb + k;
                        }
                    }
                }
                if kind == PoolKind::Max {
                    return Tensor::from_vec(&out_shape, best);
                }
                let grad = super::arg(op, inputs, 2)?;
                let gv = same::<T>(op, grad, value)?;
                if kind == PoolKind::MaxGradGrad {
                    if grad.shape() != in_shape {
                        return Err(KernelError::invalid(op, format!("grad has shape {:?}, expected {in_shape:?}", grad.shape())));
                    }
                    let gv = contiguous(gv);
                    let out = at.iter().map(|&i| if i == usize::MAX { T::zero() } else { gv[i] }).collect();
                    return Tensor::from_vec(&out_shape, out);
                }
                if grad.shape() != out_shape {
                    return Err(KernelError::invalid(op, format!("grad has shape {:?}, expected {out_shape:?}", grad.shape())));
                }
                let mut dx = vec![T::zero(); x.len()];
                for (y, &g) in gv.iter().enumerate() {
                    if at[y] != usize::MAX {
                        dx[at[y]] += g;
                    }
                }
                Tensor::from_vec(&in_shape, dx)
            }
            PoolKind::Avg | PoolKind::AvgGrad => {
                let mut count = vec![0usize; n_out / ch.max(1)];
                for &(y, _) in &taps {
                    count[y / ch.max(1)] += 1;
                }
                if kind == PoolKind::Avg {
                    let x: Vec<T> = value.to_vec::<T>().expect("dtype");
                    let mut sum = vec![T::zero(); n_out];
                    for &(y, xb) in &taps {
                        for k in 0..ch {
                            sum[y + k] += x[xb + k];
                        }
                    }
                    for (i, s) in sum.iter_mut().enumerate() {
                        *s /= T::c(count[i / ch].max(1) as f64);
                    }
                    return Tensor::from_vec(&out_shape, sum);
                }
                if value.shape() != out_shape {
                    return Err(KernelError::invalid(op, format!("grad has shape {:?}, expected {out_shape:?}", value.shape())));
                }
                let gv: Vec<T> = value.to_vec::<T>().expect("dtype");
                let mut dx = vec![T::zero(); in_shape.iter().product()];
                for &(y, xb) in &taps {
                    let n = T::c(count[y / ch].max(1) as f64);
                    for k in 0..ch {
                        dx[xb + k] += gv[y + k] / n;
                    }
                }
                Tensor::from_vec(&in_shape, dx)
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::AttrValue;

    fn attrs(padding: &str, strides: [i64; 2], ksize: Option<[i64; 2]>) -> AttrMap {
        let mut a = AttrMap::new();
        a.insert("padding", AttrValue::Str(padding.into()));
        let l = |v: [i64; 2]| {
            AttrValue::List(vec![AttrValue::Int(1), AttrValue::Int(v[0]), AttrValue::Int(v[1]), AttrValue::Int(1)])
        };
        a.insert("strides", l(strides));
        if let Some(k) = ksize {
            a.insert("ksize", l(k));
        }
        a
    }

    /// A direct, index-by-index convolution for comparison.
    fn reference_conv(x: &[f64], xs: [usize; 4], f: &[f64], fs: [usize; 4], pad: usize, out: [usize; 4]) -> Vec<f64> {
        let mut y = vec![0.0; out.iter().product()];
        for b in 0..out[0] {
            for i in 0..out[1] {
                for j in 0..out[2] {
                    for o in 0..out[3] {
                        let mut s = 0.0;
                        for p in 0..fs[0] {
                            for q in 0..fs[1] {
                                let (r, c) =
                                    (i as isize + p as isize - pad as isize, j as isize + q as isize - pad as isize);
                                if r < 0 || c < 0 || r as usize >= xs[1] || c as usize >= xs[2] {
                                    continue;
                                }
                                for k in 0..xs[3] {
                                    s += x[((b * xs[1] + r as usize) * xs[2] + c as usize) * xs[3] + k]
                                        * f[((p * fs[1] + q) * fs[2] + k) * fs[3] + o];
                                }
                            }
                        }
                        y[((b * out[1] + i) * out[2] + j) * out[3] + o] = s;
                    }
                }
            }
        }
        y
    }

    #[test]
    fn same_convolution_matches_a_direct_sum() {
        let xs = [1, 4, 3, 2];
        let fs = [3, 3, 2, 2];
        let x: Vec<f64> = (0..24).map(|v| (v as f64 * 0.37).sin()).collect();
        let f: Vec<f64> = (0..36).map(|v| (v as f64 * 0.11).cos()).collect();
        let xt = Tensor::from_vec(&xs, x.clone()).unwrap();
        let ft = Tensor::from_vec(&fs, f.clone()).unwrap();
        let y =
            conv("Conv2D", ConvKind::Forward, false, &attrs("SAME", [1, 1], None), &[xt.clone(), ft.clone()]).unwrap();
        assert_eq!(y.shape(), &[1, 4, 3, 2]);
        let want = reference_conv(&x, xs, &f, fs, 1, [1, 4, 3, 2]);
        for (g, w) in y.to_vec::<f64>().unwrap().iter().zip(&want) {
            assert!((g - w).abs() < 1e-12);
        }
        // The input backprop is the adjoint: <conv(x), dy> == <x, backprop(dy)>.
        let dy = Tensor::from_vec(&[1, 4, 3, 2], (0..24).map(|v| v as f64 * 0.1 - 1.0).collect()).unwrap();
        let sizes = Tensor::vector(vec![1i32, 4, 3, 2]);
        let dx =
            conv("BI", ConvKind::BackpropInput, false, &attrs("SAME", [1, 1], None), &[sizes, ft.clone(), dy.clone()])
                .unwrap();
        let lhs: f64 = y.to_vec::<f64>().unwrap().iter().zip(dy.to_vec::<f64>().unwrap()).map(|(a, b)| a * b).sum();
        let rhs: f64 = x.iter().zip(dx.to_vec::<f64>().unwrap()).map(|(a, b)| a * b).sum();
        assert!((lhs - rhs).abs() < 1e-9);
        let fsz = Tensor::vector(vec![3i32, 3, 2, 2]);
        let df = conv("BF", ConvKind::BackpropFilter, false, &attrs("SAME", [1, 1], None), &[xt, fsz, dy]).unwrap();
        let rhs: f64 = f.iter().zip(df.to_vec::<f64>().unwrap()).map(|(a, b)| a * b).sum();
        assert!((lhs - rhs).abs() < 1e-9);
    }

    #[test]
    fn pools() {
        let x = Tensor::from_vec(&[1, 2, 2, 1], vec![1.0f32, 4.0, 3.0, 2.0]).unwrap();
        let a = attrs("VALID", [2, 2], Some([2, 2]));
        assert_eq!(
            pool("MaxPool", PoolKind::Max, &a, std::slice::from_ref(&x)).unwrap().to_vec::<f32>().unwrap(),
            vec![4.0]
        );
        assert_eq!(
            pool("AvgPool", PoolKind::Avg, &a, std::slice::from_ref(&x)).unwrap().to_vec::<f32>().unwrap(),
            vec![2.5]
        );
        let g = Tensor::from_vec(&[1, 1, 1, 1], vec![8.0f32]).unwrap();
        let mg = pool("MaxPoolGrad", PoolKind::MaxGrad, &a, &[x.clone(), x.clone(), g.clone()]).unwrap();
        assert_eq!(mg.to_vec::<f32>().unwrap(), vec![0.0, 8.0, 0.0, 0.0]);
        let ag = pool("AvgPoolGrad", PoolKind::AvgGrad, &a, &[Tensor::vector(vec![1i32, 2, 2, 1]), g]).unwrap();
        assert_eq!(ag.to_vec::<f32>().unwrap(), vec![2.0; 4]);
        // SAME with a 3x3 window on 2x2: every window sees all four inputs.
        let s = attrs("SAME", [1, 1], Some([3, 3]));
        assert_eq!(pool("AvgPool", PoolKind::Avg, &s, &[x]).unwrap().to_vec::<f32>().unwrap(), vec![2.5; 4]);
    }
}
