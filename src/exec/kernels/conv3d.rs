//! Volumetric (3-D) convolution and pooling in NDHWC with DHWIO filters,
//! as Keras's `Conv3D`, `Conv3DTranspose`, `MaxPooling3D` and
//! `AveragePooling3D` emit them: `Conv3D` with `Conv3DBackpropInputV2` and
//! `Conv3DBackpropFilterV2`, `MaxPool3D`/`MaxPool3DGrad` and
//! `AvgPool3D`/`AvgPool3DGrad`, with `SAME` and `VALID` padding, strides
//! and (for convolutions) dilations.
//!
//! A 3-D convolution is a sum over the filter's depth taps of 2-D
//! convolutions: for depth tap `kd`, every (batch, output depth) pair whose
//! input depth lies inside the volume contributes the 2-D convolution of
//! that input plane by filter plane `kd`. The planes of all such pairs are
//! stacked as one batch and handed to the 2-D im2col/GEMM kernels
//! (`conv_gemm`), so the arithmetic is theirs. Pooling walks the window
//! taps directly; average pooling divides by the taps inside the input
//! (padding is not counted) and a max-pool gradient goes to the first
//! maximum of each window, as the 2-D kernels do.
//!
//! Cost: per depth tap, one copy of the input planes it reads and one 2-D
//! convolution; pooling is output size × window size.

use num_traits::{Float as _, Zero};

use super::conv::{axis1, contiguous, dims_of, Axis1, ConvKind, Geometry, Padding, PoolKind};
use super::conv_gemm;
use super::elementwise::{same, with_float, Flt};
use super::num::Num;
use crate::exec::error::KernelError;
use crate::exec::limits::checked_elements;
use crate::exec::tensor::Tensor;
use crate::ir::AttrMap;

/// The attributes of a 3-D window op.
struct Attrs3 {
    strides: [usize; 3],
    dilations: [usize; 3],
    ksize: Option<[usize; 3]>,
    same: bool,
}

/// `[1, d, h, w, 1]` of attribute `key`, or `[1, 1, 1]` when absent.
fn triple(op: &str, attrs: &AttrMap, key: &str) -> Result<[usize; 3], KernelError> {
    let Some(list) = attrs.get(key).and_then(|v| v.as_list()) else { return Ok([1, 1, 1]) };
    let ints: Vec<i64> = list.iter().filter_map(|v| v.as_int()).collect();
    match ints.as_slice() {
        &[1, d, h, w, 1] if d > 0 && h > 0 && w > 0 => Ok([d as usize, h as usize, w as usize]),
        other => Err(KernelError::invalid(op, format!("{key} {other:?} is not supported (NDHWC, [1, d, h, w, 1])"))),
    }
}

fn attrs3(op: &str, attrs: &AttrMap) -> Result<Attrs3, KernelError> {
    if let Some(f) = attrs.get_str("data_format") {
        if f != "NDHWC" {
            return Err(KernelError::invalid(op, format!("data_format {f} is not supported (only NDHWC)")));
        }
    }
    let same = match attrs.get_str("padding").unwrap_or("VALID") {
        "SAME" => true,
        "VALID" => false,
        other => return Err(KernelError::invalid(op, format!("padding {other:?} is not supported"))),
    };
    Ok(Attrs3 {
        strides: triple(op, attrs, "strides")?,
        dilations: triple(op, attrs, "dilations")?,
        ksize: attrs.get("ksize").map(|_| triple(op, attrs, "ksize")).transpose()?,
        same,
    })
}

/// The geometry of a 3-D window op on `[batch, depth, rows, cols, channels]`.
#[derive(Clone, Copy, Debug)]
struct Geometry3 {
    batch: usize,
    /// Depth, rows, columns.
    axes: [Axis1; 3],
    channels: usize,
}

impl Geometry3 {
    fn new(op: &str, input: &[usize], window: [usize; 3], a: &Attrs3) -> Result<Self, KernelError> {
        let &[batch, d, h, w, channels] = input else {
            return Err(KernelError::invalid(op, format!("input must be 5-D NDHWC, got {input:?}")));
        };
        let pad = if a.same { Padding::Same } else { Padding::Valid };
        let mut axes = [Axis1 { input: 0, window: 1, stride: 1, dilation: 1, pad_before: 0, output: 0 }; 3];
        for (i, size) in [d, h, w].into_iter().enumerate() {
            axes[i] = axis1(op, size, window[i], a.strides[i], a.dilations[i], (pad.clone(), 0))?;
        }
        Ok(Geometry3 { batch, axes, channels })
    }

    fn output_shape(&self, channels: usize) -> [usize; 5] {
        [self.batch, self.axes[0].output, self.axes[1].output, self.axes[2].output, channels]
    }

    /// The (batch, output depth, input depth) triples that depth tap `kd` joins.
    fn depth_pairs(&self, kd: usize) -> Vec<(usize, usize, usize)> {
        let d = self.axes[0];
        let mut pairs = Vec::new();
        for b in 0..self.batch {
            for od in 0..d.output {
                let id = (od * d.stride + kd * d.dilation).wrapping_sub(d.pad_before);
                if id < d.input {
                    pairs.push((b, od, id));
                }
            }
        }
        pairs
    }

    /// Calls `f(output position, input position)` (both without channels) for every tap inside the input.
    fn taps(&self, mut f: impl FnMut(usize, usize)) {
        let [d, r, c] = self.axes;
        let inside = |a: Axis1, o: usize, k: usize| {
            let i = (o * a.stride + k * a.dilation).wrapping_sub(a.pad_before);
            (i < a.input).then_some(i)
        };
        for b in 0..self.batch {
            for od in 0..d.output {
                for orow in 0..r.output {
                    for ocol in 0..c.output {
                        let out = ((b * d.output + od) * r.output + orow) * c.output + ocol;
                        for kd in 0..d.window {
                            let Some(id) = inside(d, od, kd) else { continue };
                            for kr in 0..r.window {
                                let Some(ir) = inside(r, orow, kr) else { continue };
                                for kc in 0..c.window {
                                    let Some(ic) = inside(c, ocol, kc) else { continue };
                                    f(out, ((b * d.input + id) * r.input + ir) * c.input + ic);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn five(op: &str, s: &[usize], what: &str) -> Result<[usize; 5], KernelError> {
    <[usize; 5]>::try_from(s).map_err(|_| KernelError::invalid(op, format!("{what} must be 5-D, got {s:?}")))
}

/// A depth tap's 2-D convolution over the stacked planes of `pairs`.
fn plane_shape(g: &Geometry3, fs: [usize; 5], pairs: usize) -> conv_gemm::Shape {
    let planes = Geometry { batch: pairs, rows: g.axes[1], cols: g.axes[2] };
    conv_gemm::Shape { g: planes, channels: g.channels, filter: [fs[1], fs[2], fs[3], fs[4]] }
}

/// The planes of `src` (each `len` long) at plane indices `at`, stacked.
fn gather_planes<T: Copy>(src: &[T], len: usize, at: impl Iterator<Item = usize>) -> Vec<T> {
    at.flat_map(|p| src[p * len..(p + 1) * len].iter().copied()).collect()
}

/// Adds stacked plane `i` of `planes` onto plane `at(i)` of `dst`.
fn scatter_planes<T: Num>(planes: &[T], len: usize, dst: &mut [T], at: impl Iterator<Item = usize>) {
    for (plane, p) in planes.chunks(len.max(1)).zip(at) {
        for (d, &v) in dst[p * len..(p + 1) * len].iter_mut().zip(plane) {
            *d = d.add(v);
        }
    }
}

/// The three volumetric convolution kernels over the 2-D ones, one depth tap at a time.
fn forward<T: Num + ndarray::LinalgScalar>(g: &Geometry3, fs: [usize; 5], x: &[T], f: &[T]) -> Vec<T> {
    let [d, r, c] = g.axes;
    let (in_plane, out_plane, tap) =
        (r.input * c.input * g.channels, r.output * c.output * fs[4], fs[1..].iter().product::<usize>());
    let mut y = vec![<T as Num>::zero(); g.batch * d.output * out_plane];
    for kd in 0..d.window {
        let pairs = g.depth_pairs(kd);
        let xs = gather_planes(x, in_plane, pairs.iter().map(|&(b, _, id)| b * d.input + id));
        let planes = conv_gemm::forward(&plane_shape(g, fs, pairs.len()), &xs, &f[kd * tap..(kd + 1) * tap]);
        scatter_planes(&planes, out_plane, &mut y, pairs.iter().map(|&(b, od, _)| b * d.output + od));
    }
    y
}

fn backprop_input<T: Num + ndarray::LinalgScalar>(g: &Geometry3, fs: [usize; 5], dy: &[T], f: &[T]) -> Vec<T> {
    let [d, r, c] = g.axes;
    let (in_plane, out_plane, tap) =
        (r.input * c.input * g.channels, r.output * c.output * fs[4], fs[1..].iter().product::<usize>());
    let mut dx = vec![<T as Num>::zero(); g.batch * d.input * in_plane];
    for kd in 0..d.window {
        let pairs = g.depth_pairs(kd);
        let dys = gather_planes(dy, out_plane, pairs.iter().map(|&(b, od, _)| b * d.output + od));
        let s = plane_shape(g, fs, pairs.len());
        let planes = conv_gemm::backprop_input(&s, &dys, &f[kd * tap..(kd + 1) * tap], pairs.len() * in_plane);
        scatter_planes(&planes, in_plane, &mut dx, pairs.iter().map(|&(b, _, id)| b * d.input + id));
    }
    dx
}

fn backprop_filter<T: Num>(g: &Geometry3, fs: [usize; 5], x: &[T], dy: &[T]) -> Vec<T> {
    let [d, r, c] = g.axes;
    let (in_plane, out_plane) = (r.input * c.input * g.channels, r.output * c.output * fs[4]);
    let mut df = Vec::with_capacity(fs.iter().product());
    for kd in 0..d.window {
        let pairs = g.depth_pairs(kd);
        let xs = gather_planes(x, in_plane, pairs.iter().map(|&(b, _, id)| b * d.input + id));
        let dys = gather_planes(dy, out_plane, pairs.iter().map(|&(b, od, _)| b * d.output + od));
        df.extend(conv_gemm::backprop_filter(&plane_shape(g, fs, pairs.len()), &xs, &dys));
    }
    df
}

/// `Conv3D(input, filter)`, `Conv3DBackpropInputV2(input_sizes, filter, out_backprop)` and
/// `Conv3DBackpropFilterV2(input, filter_sizes, out_backprop)`.
pub(crate) fn conv(op: &str, kind: ConvKind, attrs: &AttrMap, inputs: &[Tensor]) -> Result<Tensor, KernelError> {
    let a = attrs3(op, attrs)?;
    let arg = |i| super::arg(op, inputs, i);
    let (in_shape, fs) = match kind {
        ConvKind::Forward => (five(op, arg(0)?.shape(), "input")?, five(op, arg(1)?.shape(), "filter")?),
        ConvKind::BackpropInput => {
            (five(op, &dims_of(op, arg(0)?, "input_sizes")?, "input_sizes")?, five(op, arg(1)?.shape(), "filter")?)
        }
        ConvKind::BackpropFilter => {
            (five(op, arg(0)?.shape(), "input")?, five(op, &dims_of(op, arg(1)?, "filter_sizes")?, "filter_sizes")?)
        }
    };
    if fs[3] != in_shape[4] {
        return Err(KernelError::invalid(
            op,
            format!("filter has {} input channels, the input {}", fs[3], in_shape[4]),
        ));
    }
    let g = Geometry3::new(op, &in_shape, [fs[0], fs[1], fs[2]], &a)?;
    let out_shape = g.output_shape(fs[4]);
    if kind != ConvKind::Forward && arg(2)?.shape() != out_shape {
        let got = arg(2)?.shape();
        return Err(KernelError::invalid(
            op,
            format!("out_backprop has shape {got:?}, the convolution's output is {out_shape:?}"),
        ));
    }
    match kind {
        ConvKind::Forward => {
            let x = arg(0)?;
            checked_elements(op, x.dtype(), &out_shape)?;
            with_float!(op, x, xa, T => {
                let fa = same::<T>(op, arg(1)?, x)?;
                Tensor::from_vec(&out_shape, forward(&g, fs, &contiguous(xa), &contiguous(fa)))
            })
        }
        ConvKind::BackpropInput => {
            let dy = arg(2)?;
            checked_elements(op, dy.dtype(), &in_shape)?;
            with_float!(op, dy, dya, T => {
                let fa = same::<T>(op, arg(1)?, dy)?;
                Tensor::from_vec(&in_shape, backprop_input(&g, fs, &contiguous(dya), &contiguous(fa)))
            })
        }
        ConvKind::BackpropFilter => {
            let dy = arg(2)?;
            checked_elements(op, dy.dtype(), &fs)?;
            with_float!(op, dy, dya, T => {
                let xa = same::<T>(op, arg(0)?, dy)?;
                Tensor::from_vec(&fs, backprop_filter(&g, fs, &contiguous(xa), &contiguous(dya)))
            })
        }
    }
}

/// `MaxPool3D(input)`, `MaxPool3DGrad(orig_input, orig_output, grad)`, `MaxPool3DGradGrad` (the
/// same operands), `AvgPool3D(input)` and
/// `AvgPool3DGrad(orig_input_shape, grad)`.
pub(crate) fn pool(op: &str, kind: PoolKind, attrs: &AttrMap, inputs: &[Tensor]) -> Result<Tensor, KernelError> {
    let a = attrs3(op, attrs)?;
    let ksize = a.ksize.ok_or_else(|| KernelError::invalid(op, "missing ksize"))?;
    let arg = |i| super::arg(op, inputs, i);
    let in_shape = match kind {
        PoolKind::AvgGrad => five(op, &dims_of(op, arg(0)?, "orig_input_shape")?, "orig_input_shape")?,
        _ => five(op, arg(0)?.shape(), "input")?,
    };
    // Pooling has no dilation.
    let a = Attrs3 { dilations: [1, 1, 1], ..a };
    let g = Geometry3::new(op, &in_shape, ksize, &a)?;
    let ch = g.channels;
    let out_shape = g.output_shape(ch);
    let n_out: usize = out_shape.iter().product();
    let n_in: usize = in_shape.iter().product();
    let mut taps: Vec<(usize, usize)> = Vec::new();
    g.taps(|o, i| taps.push((o * ch, i * ch)));
    let grad = match kind {
        PoolKind::Max | PoolKind::Avg => None,
        PoolKind::MaxGrad | PoolKind::MaxGradGrad => Some(arg(2)?),
        PoolKind::AvgGrad => Some(arg(1)?),
    };
    // A second-order gradient is shaped like the input.
    let grad_shape = if kind == PoolKind::MaxGradGrad { in_shape } else { out_shape };
    if let Some(grad) = grad.filter(|t| t.shape() != grad_shape) {
        let got = grad.shape();
        return Err(KernelError::invalid(op, format!("grad has shape {got:?}, expected {grad_shape:?}")));
    }
    let value = grad.filter(|_| kind == PoolKind::AvgGrad).unwrap_or(arg(0)?);
    checked_elements(
        op,
        value.dtype(),
        if matches!(kind, PoolKind::Max | PoolKind::Avg | PoolKind::MaxGradGrad) { &out_shape } else { &in_shape },
    )?;
    with_float!(op, value, va, T => {
        let v = contiguous(va);
        match kind {
            PoolKind::Max | PoolKind::MaxGrad | PoolKind::MaxGradGrad => {
                let mut best = vec![T::neg_infinity(); n_out];
                let mut at = vec![usize::MAX; n_out];
                for &(y, xb) in &taps {
                    for k in 0..ch {
                        if at[y + k] == usize::MAX || v[xb + k] > best[y + k] {
                            best[y + k] = v[xb + k];
                            at[y + k] = xb + k;
                        }
                    }
                }
                if kind == PoolKind::Max {
                    return Tensor::from_vec(&out_shape, best);
                }
                let grad = grad.expect("a gradient operand");
                let gv = contiguous(same::<T>(op, grad, value)?);
                if kind == PoolKind::MaxGradGrad {
                    let out = at.iter().map(|&i| if i == usize::MAX { <T as Zero>::zero() } else { gv[i] }).collect();
                    return Tensor::from_vec(&out_shape, out);
                }
                let mut dx = vec![<T as Zero>::zero(); n_in];
                for (y, &gy) in gv.iter().enumerate() {
                    if at[y] != usize::MAX {
                        dx[at[y]] += gy;
                    }
                }
                Tensor::from_vec(&in_shape, dx)
            }
            PoolKind::Avg | PoolKind::AvgGrad => {
                let mut count = vec![0usize; n_out / ch.max(1)];
                for &(y, _) in &taps {
                    count[y / ch.max(1)] += 1;
                }
                let n = |y: usize| T::c(count[y / ch.max(1)].max(1) as f64);
                if kind == PoolKind::Avg {
                    let mut sum = vec![<T as Zero>::zero(); n_out];
                    for &(y, xb) in &taps {
                        for k in 0..ch {
                            sum[y + k] += v[xb + k];
                        }
                    }
                    for (y, s) in sum.iter_mut().enumerate() {
                        *s /= n(y);
                    }
                    return Tensor::from_vec(&out_shape, sum);
                }
                let mut dx = vec![<T as Zero>::zero(); n_in];
                for &(y, xb) in &taps {
                    for k in 0..ch {
                        dx[xb + k] += v[y + k] / n(y);
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

    fn attrs(padding: &str, strides: [i64; 3], dilations: [i64; 3], ksize: Option<[i64; 3]>) -> AttrMap {
        let l = |v: [i64; 3]| AttrValue::List([1, v[0], v[1], v[2], 1].into_iter().map(AttrValue::Int).collect());
        let mut a = AttrMap::new();
        a.insert("padding", AttrValue::Str(padding.into()));
        a.insert("strides", l(strides));
        a.insert("dilations", l(dilations));
        if let Some(k) = ksize {
            a.insert("ksize", l(k));
        }
        a
    }

    fn values(n: usize, seed: f64) -> Vec<f64> {
        (0..n).map(|i| ((i as f64 + seed) * 0.618).sin()).collect()
    }

    /// The forward convolution tap by tap, and `<y, dy>` against `<x, dx>` and `<f, df>` (the
    /// backprops are the adjoints of the forward map in each argument).
    fn check(xs: [usize; 5], fs: [usize; 5], padding: &str, strides: [i64; 3], dilations: [i64; 3]) {
        let a = attrs(padding, strides, dilations, None);
        let x = values(xs.iter().product(), 0.5);
        let f = values(fs.iter().product(), 7.0);
        let xt = Tensor::from_vec(&xs, x.clone()).unwrap();
        let ft = Tensor::from_vec(&fs, f.clone()).unwrap();
        let y = conv("Conv3D", ConvKind::Forward, &a, &[xt.clone(), ft.clone()]).unwrap();
        let ys = y.shape().to_vec();
        let yv = y.to_vec::<f64>().unwrap();
        let a3 = attrs3("Conv3D", &a).unwrap();
        let g = Geometry3::new("Conv3D", &xs, [fs[0], fs[1], fs[2]], &a3).unwrap();
        let mut want = vec![0.0; yv.len()];
        for b in 0..xs[0] {
            for (od, oh, ow) in itertools_product(ys[1], ys[2], ys[3]) {
                for (kd, kh, kw) in itertools_product(fs[0], fs[1], fs[2]) {
                    let pos = |ax: Axis1, o: usize, k: usize| {
                        let i = (o * ax.stride + k * ax.dilation) as isize - ax.pad_before as isize;
                        (i >= 0 && (i as usize) < ax.input).then_some(i as usize)
                    };
                    let (Some(id), Some(ih), Some(iw)) =
                        (pos(g.axes[0], od, kd), pos(g.axes[1], oh, kh), pos(g.axes[2], ow, kw))
                    else {
                        continue;
                    };
                    for ci in 0..fs[3] {
                        for o in 0..fs[4] {
                            let xi = (((b * xs[1] + id) * xs[2] + ih) * xs[3] + iw) * xs[4] + ci;
                            let fi = (((kd * fs[1] + kh) * fs[2] + kw) * fs[3] + ci) * fs[4] + o;
                            want[(((b * ys[1] + od) * ys[2] + oh) * ys[3] + ow) * ys[4] + o] += x[xi] * f[fi];
                        }
                    }
                }
            }
        }
        for (i, (p, q)) in yv.iter().zip(&want).enumerate() {
            assert!((p - q).abs() < 1e-10, "{xs:?} {fs:?} {padding}: y[{i}] {p} != {q}");
        }
        let dy = values(yv.len(), 3.0);
        let dyt = Tensor::from_vec(&ys, dy.clone()).unwrap();
        let sizes = |s: &[usize]| Tensor::vector(s.iter().map(|&d| d as i32).collect::<Vec<i32>>());
        let dx = conv("BI", ConvKind::BackpropInput, &a, &[sizes(&xs), ft, dyt.clone()]).unwrap();
        let df = conv("BF", ConvKind::BackpropFilter, &a, &[xt, sizes(&fs), dyt]).unwrap();
        let dot = |p: &[f64], q: &[f64]| p.iter().zip(q).map(|(a, b)| a * b).sum::<f64>();
        let lhs = dot(&yv, &dy);
        assert!((lhs - dot(&x, &dx.to_vec::<f64>().unwrap())).abs() < 1e-9, "{xs:?} {fs:?}: input backprop");
        assert!((lhs - dot(&f, &df.to_vec::<f64>().unwrap())).abs() < 1e-9, "{xs:?} {fs:?}: filter backprop");
    }

    fn itertools_product(a: usize, b: usize, c: usize) -> impl Iterator<Item = (usize, usize, usize)> {
        (0..a).flat_map(move |i| (0..b).flat_map(move |j| (0..c).map(move |k| (i, j, k))))
    }

    #[test]
    fn convolutions_match_a_direct_sum_and_their_adjoints() {
        check([2, 4, 3, 5, 2], [3, 2, 3, 2, 3], "SAME", [1, 1, 1], [1, 1, 1]);
        check([1, 5, 5, 4, 3], [2, 3, 2, 3, 2], "VALID", [2, 1, 2], [1, 1, 1]);
        check([2, 6, 4, 5, 2], [2, 2, 2, 2, 2], "SAME", [2, 2, 1], [1, 1, 1]);
        check([1, 6, 5, 5, 1], [2, 2, 3, 1, 2], "VALID", [1, 1, 1], [2, 1, 2]);
    }

    #[test]
    fn pools() {
        // A 2x2x2 volume, one channel: one VALID window sees all of it.
        let x = Tensor::from_vec(&[1, 2, 2, 2, 1], vec![1.0f32, 4.0, 3.0, 2.0, 8.0, 5.0, 7.0, 6.0]).unwrap();
        let a = attrs("VALID", [2, 2, 2], [1, 1, 1], Some([2, 2, 2]));
        let max = pool("MaxPool3D", PoolKind::Max, &a, std::slice::from_ref(&x)).unwrap();
        assert_eq!(max.to_vec::<f32>().unwrap(), vec![8.0]);
        let avg = pool("AvgPool3D", PoolKind::Avg, &a, std::slice::from_ref(&x)).unwrap();
        assert_eq!(avg.to_vec::<f32>().unwrap(), vec![4.5]);
        let g = Tensor::from_vec(&[1, 1, 1, 1, 1], vec![8.0f32]).unwrap();
        let mg = pool("MaxPool3DGrad", PoolKind::MaxGrad, &a, &[x.clone(), max, g.clone()]).unwrap();
        assert_eq!(mg.to_vec::<f32>().unwrap(), vec![0.0, 0.0, 0.0, 0.0, 8.0, 0.0, 0.0, 0.0]);
        let ag = pool("AvgPool3DGrad", PoolKind::AvgGrad, &a, &[Tensor::vector(vec![1i32, 2, 2, 2, 1]), g]).unwrap();
        assert_eq!(ag.to_vec::<f32>().unwrap(), vec![1.0; 8]);
        // SAME with a 3x3x3 window at stride 1: every window holds the whole volume.
        let s = attrs("SAME", [1, 1, 1], [1, 1, 1], Some([3, 3, 3]));
        assert_eq!(
            pool("AvgPool3D", PoolKind::Avg, &s, std::slice::from_ref(&x)).unwrap().to_vec::<f32>().unwrap(),
            vec![4.5; 8]
        );
        // A window over padding only counts the taps inside the volume.
        let s2 = attrs("SAME", [2, 2, 2], [1, 1, 1], Some([3, 3, 3]));
        let x3 = Tensor::from_vec(&[1, 3, 1, 1, 1], vec![1.0f32, 2.0, 6.0]).unwrap();
        assert_eq!(pool("AvgPool3D", PoolKind::Avg, &s2, &[x3]).unwrap().to_vec::<f32>().unwrap(), vec![1.5, 4.0]);
    }

    #[test]
    fn bad_attributes_are_errors() {
        let x = Tensor::from_vec(&[1, 2, 2, 2, 1], vec![0.0f32; 8]).unwrap();
        let mut a = attrs("VALID", [1, 1, 1], [1, 1, 1], Some([2, 2, 2]));
        a.insert("data_format", AttrValue::str("NCDHW"));
        assert!(pool("MaxPool3D", PoolKind::Max, &a, std::slice::from_ref(&x)).is_err());
        let b = attrs("EXPLICIT", [1, 1, 1], [1, 1, 1], Some([2, 2, 2]));
        assert!(pool("MaxPool3D", PoolKind::Max, &b, std::slice::from_ref(&x)).is_err());
        let c = attrs("VALID", [1, 1, 1], [1, 1, 1], None);
        let f = Tensor::from_vec(&[1, 1, 1, 2, 1], vec![0.0f32; 2]).unwrap();
        assert!(conv("Conv3D", ConvKind::Forward, &c, &[x, f]).is_err(), "channel mismatch");
    }
}
