//! Grouped convolution: `Conv2D` and its two backprops when the input has
//! `groups` times as many channels as the filter's input depth, as
//! TensorFlow's `Conv2D` accepts (Keras `Conv2D(groups=...)`).
//!
//! Invariants:
//! - Group `g` convolves input channels `g·cg .. (g+1)·cg` with filter
//!   columns (output channels) `g·og .. (g+1)·og`, where `cg` is the
//!   filter's input depth and `og = out / groups`; groups never mix.
//! - With one input channel per group the filter `[kh, kw, 1, C·m]` has the
//!   memory layout of a depthwise filter `[kh, kw, C, m]` and output channel
//!   `g·m + j` is the depthwise output `c·m + j`, so that case runs the
//!   depthwise kernels unchanged.
//! - Otherwise each group is gathered into contiguous buffers and runs the
//!   regular im2col GEMM kernels of `conv_gemm`; the results are scattered
//!   back. Groups run one after another in a fixed order, so a result does
//!   not depend on the number of threads.
//!
//! Cost: the GEMM work of the ungrouped convolution divided by `groups`,
//! plus one copy of the input, filter and output (or gradients) per call.

use super::conv_gemm::{self, Shape};
use super::num::Num;
use ndarray::LinalgScalar;

/// A grouped convolution: the full shape (`channels` = all input channels,
/// `filter` = `[kh, kw, cg, out]`) and the number of groups.
#[derive(Clone, Copy, Debug)]
pub(super) struct Grouped {
    pub(super) s: Shape,
    pub(super) groups: usize,
}

impl Grouped {
    /// Input channels per group.
    fn cg(&self) -> usize {
        self.s.filter[2]
    }

    /// Output channels per group.
    fn og(&self) -> usize {
        self.s.filter[3] / self.groups
    }

    /// The shape of one group's convolution.
    fn group_shape(&self) -> Shape {
        let [kh, kw, cg, _] = self.s.filter;
        Shape { g: self.s.g, channels: cg, filter: [kh, kw, cg, self.og()] }
    }

    /// The depthwise shape this convolution equals when every group has one input channel.
    fn as_depthwise(&self) -> Option<Shape> {
        let [kh, kw, cg, _] = self.s.filter;
        (cg == 1).then_some(Shape { g: self.s.g, channels: self.groups, filter: [kh, kw, self.groups, self.og()] })
    }
}

/// Columns `g·width .. (g+1)·width` of the row-major `[rows, width·groups]` matrix `a`, contiguous.
fn columns<T: Num>(a: &[T], width: usize, groups: usize, g: usize) -> Vec<T> {
    a.chunks(width * groups).flat_map(|row| row[g * width..(g + 1) * width].iter().copied()).collect()
}

/// Writes the contiguous `[rows, width]` matrix `part` into columns `g·width ..` of `a`.
fn put_columns<T: Num>(a: &mut [T], part: &[T], width: usize, groups: usize, g: usize) {
    for (row, src) in a.chunks_mut(width * groups).zip(part.chunks(width)) {
        row[g * width..(g + 1) * width].copy_from_slice(src);
    }
}

/// Grouped `Conv2D`: `[positions, out]`.
pub(super) fn forward<T: Num + LinalgScalar>(c: &Grouped, x: &[T], f: &[T]) -> Vec<T> {
    if let Some(d) = c.as_depthwise() {
        return conv_gemm::depthwise_forward(&d, x, f);
    }
    let (cg, og, n) = (c.cg(), c.og(), c.groups);
    let sub = c.group_shape();
    let mut y = vec![<T as Num>::zero(); out_positions(&c.s) * og * n];
    for g in 0..n {
        let yg = conv_gemm::forward(&sub, &columns(x, cg, n, g), &columns(f, og, n, g));
        put_columns(&mut y, &yg, og, n, g);
    }
    y
}

/// Grouped `Conv2DBackpropInput`: each group's input gradient from its output gradient and filter.
pub(super) fn backprop_input<T: Num + LinalgScalar>(c: &Grouped, dy: &[T], f: &[T], dx_len: usize) -> Vec<T> {
    if let Some(d) = c.as_depthwise() {
        return conv_gemm::depthwise_backprop_input(&d, dy, f, dx_len);
    }
    let (cg, og, n) = (c.cg(), c.og(), c.groups);
    let sub = c.group_shape();
    let mut dx = vec![<T as Num>::zero(); dx_len];
    for g in 0..n {
        let dxg = conv_gemm::backprop_input(&sub, &columns(dy, og, n, g), &columns(f, og, n, g), dx_len / n);
        put_columns(&mut dx, &dxg, cg, n, g);
    }
    dx
}

/// Grouped `Conv2DBackpropFilter`: each group's filter columns from its input channels and output gradient.
pub(super) fn backprop_filter<T: Num + LinalgScalar>(c: &Grouped, x: &[T], dy: &[T]) -> Vec<T> {
    if let Some(d) = c.as_depthwise() {
        return conv_gemm::depthwise_backprop_filter(&d, x, dy);
    }
    let (cg, og, n) = (c.cg(), c.og(), c.groups);
    let sub = c.group_shape();
    let mut df = vec![<T as Num>::zero(); c.s.filter.iter().product()];
    for g in 0..n {
        let dfg = conv_gemm::backprop_filter(&sub, &columns(x, cg, n, g), &columns(dy, og, n, g));
        put_columns(&mut df, &dfg, og, n, g);
    }
    df
}

/// Output positions of a convolution (batch × output rows × output columns).
fn out_positions(s: &Shape) -> usize {
    s.g.batch * s.g.rows.output * s.g.cols.output
}

#[cfg(test)]
mod tests {
    use super::super::conv::{Axis1, Geometry};
    use super::*;

    fn axis(input: usize, window: usize, stride: usize, pad: (usize, usize)) -> Axis1 {
        let output = (input + pad.0 + pad.1 - window) / stride + 1;
        Axis1 { input, window, stride, dilation: 1, pad_before: pad.0, output }
    }

    fn values(n: usize, seed: f64) -> Vec<f64> {
        (0..n).map(|i| ((i as f64 + seed) * 0.618).sin()).collect()
    }

    /// `(y, dx, df)` summed tap by tap, each output channel reading only its group's input channels.
    fn reference(c: &Grouped, x: &[f64], f: &[f64], dy: &[f64]) -> [Vec<f64>; 3] {
        let (g, ch, [kh, kw, cg, out]) = (c.s.g, c.s.channels, c.s.filter);
        let og = out / c.groups;
        let (mut y, mut dx, mut df) = (vec![0.0; dy.len()], vec![0.0; x.len()], vec![0.0; f.len()]);
        for b in 0..g.batch {
            for (oh, ow) in (0..g.rows.output).flat_map(|i| (0..g.cols.output).map(move |j| (i, j))) {
                for (wr, wc) in (0..kh).flat_map(|i| (0..kw).map(move |j| (i, j))) {
                    let ir = (oh * g.rows.stride + wr) as isize - g.rows.pad_before as isize;
                    let ic = (ow * g.cols.stride + wc) as isize - g.cols.pad_before as isize;
                    if ir < 0 || ic < 0 || ir as usize >= g.rows.input || ic as usize >= g.cols.input {
                        continue;
                    }
                    let xb = ((b * g.rows.input + ir as usize) * g.cols.input + ic as usize) * ch;
                    let yb = ((b * g.rows.output + oh) * g.cols.output + ow) * out;
                    for o in 0..out {
                        for k in 0..cg {
                            let xi = xb + (o / og) * cg + k;
                            let fi = ((wr * kw + wc) * cg + k) * out + o;
                            y[yb + o] += x[xi] * f[fi];
                            dx[xi] += dy[yb + o] * f[fi];
                            df[fi] += x[xi] * dy[yb + o];
                        }
                    }
                }
            }
        }
        [y, dx, df]
    }

    fn check(batch: usize, rows: Axis1, cols: Axis1, groups: usize, cg: usize, out: usize) {
        let c = Grouped {
            s: Shape {
                g: Geometry { batch, rows, cols },
                channels: groups * cg,
                filter: [rows.window, cols.window, cg, out],
            },
            groups,
        };
        let x = values(batch * rows.input * cols.input * groups * cg, 0.5);
        let f = values(c.s.filter.iter().product(), 7.0);
        let dy = values(out_positions(&c.s) * out, 3.0);
        let want = reference(&c, &x, &f, &dy);
        let got = [forward(&c, &x, &f), backprop_input(&c, &dy, &f, x.len()), backprop_filter(&c, &x, &dy)];
        for (what, (g, w)) in ["y", "dx", "df"].iter().zip(got.iter().zip(&want)) {
            assert_eq!(g.len(), w.len(), "{what} of {c:?}");
            for (i, (a, b)) in g.iter().zip(w).enumerate() {
                assert!((a - b).abs() <= 1e-10 * (1.0 + b.abs()), "{what}[{i}] of {c:?}: {a} != {b}");
            }
        }
    }

    #[test]
    fn groups_match_tap_by_tap_sums() {
        // Two groups of three channels, SAME 3x3, two outputs per group.
        check(2, axis(5, 3, 1, (1, 1)), axis(4, 3, 1, (1, 1)), 2, 3, 4);
        // Four groups of two channels, stride 2, one output per group.
        check(1, axis(7, 3, 2, (0, 0)), axis(6, 2, 2, (0, 1)), 4, 2, 4);
        // One channel per group (the depthwise path), two outputs per group, 1x1 and 3x3.
        check(2, axis(4, 3, 1, (1, 1)), axis(3, 3, 1, (1, 1)), 3, 1, 6);
        check(1, axis(4, 1, 1, (0, 0)), axis(4, 1, 1, (0, 0)), 4, 1, 4);
    }
}
