//! The arithmetic of the convolution kernels: `Conv2D` and its two
//! backprops as im2col matrix products over the GEMM the matrix products
//! use (`matrixmultiply`, through [`products`]), and the depthwise
//! convolutions as direct loops over contiguous channels.
//!
//! Invariants:
//! - An HWIO filter `[kh, kw, in, out]` is the `[kh·kw·in, out]` matrix whose
//!   row `(wr·kw + wc)·in + ci` meets column `(wr·kw + wc)·in + ci` of a patch
//!   row; a patch row holds the input under one output position, with zeros
//!   where the window hangs over the padding.
//! - Work is split by shape alone, never by the number of threads, and
//!   partial sums are added in a fixed order, so a result does not depend on
//!   how many threads ran it.
//! - The patch buffer is bounded ([`PATCH_ELEMENTS`]): large inputs are
//!   processed in chunks of output positions.
//!
//! Cost: the regular convolutions run at GEMM speed plus one copy of each
//! patch (none for a 1×1, stride-1, unpadded convolution, whose patch
//! matrix is its input); the depthwise ones do output size × window size
//! multiply-adds. A forward or input-gradient product of at most
//! [`FEW_ROWS`] output positions skips the GEMM and reads the filter once,
//! in place (the GEMM's copy of the filter would cost more than the product).

use ndarray::{ArrayView2, ArrayViewMut2, LinalgScalar};
use rayon::prelude::*;

use super::conv::Geometry;
use super::linalg::products;
use super::num::Num;

/// The most elements of patch matrix held at once (few in unit tests, so
/// that small shapes take several chunks).
const PATCH_ELEMENTS: usize = if cfg!(test) { 1 << 12 } else { 1 << 21 };

/// Multiply-adds below which a direct (depthwise) loop stays on the calling
/// thread: a hand-over to rayon costs more than it saves on small ops.
const PARALLEL_WORK: usize = 1 << 20;

/// Output positions up to which the forward and input-gradient products
/// skip the GEMM and read the filter row by row ([`few_rows_times`],
/// [`few_rows_times_t`]). A GEMM first copies (packs) the whole filter and
/// computes in blocks of 8 rows, so for a few rows the copy and the padding
/// cost more than the product; ResNet50's last two stages at 32×32 (2×2 and
/// 1×1 positions per image) hold most of its filters.
const FEW_ROWS: usize = 4;

/// The shape of a convolution: its geometry, input channels and HWIO filter shape.
#[derive(Clone, Copy, Debug)]
pub(super) struct Shape {
    pub(super) g: Geometry,
    pub(super) channels: usize,
    pub(super) filter: [usize; 4],
}

impl Shape {
    /// Output positions (rows of the patch matrix).
    fn positions(&self) -> usize {
        self.g.batch * self.g.rows.output * self.g.cols.output
    }

    /// Length of a patch row.
    fn patch(&self) -> usize {
        self.filter[0] * self.filter[1] * self.channels
    }

    /// True when the patch matrix is the input itself: a 1×1 window at stride 1 without padding.
    fn pointwise(&self) -> bool {
        [self.g.rows, self.g.cols]
            .iter()
            .all(|a| a.window == 1 && a.stride == 1 && a.pad_before == 0 && a.output == a.input)
    }

    /// Output positions per chunk, so a chunk's patches fit in [`PATCH_ELEMENTS`].
    fn chunk(&self) -> usize {
        (PATCH_ELEMENTS / self.patch().max(1)).max(1)
    }

    /// Calls `f(patch column, input offset)` for each tap of output position `pos` inside the input.
    fn taps_of(&self, pos: usize, mut f: impl FnMut(usize, usize)) {
        let (r, c, ch) = (self.g.rows, self.g.cols, self.channels);
        let ocol = pos % c.output;
        let orow = (pos / c.output) % r.output;
        let b = pos / (c.output * r.output);
        for wr in 0..r.window {
            let ir = (orow * r.stride + wr * r.dilation).wrapping_sub(r.pad_before);
            if ir >= r.input {
                continue;
            }
            for wc in 0..c.window {
                let ic = (ocol * c.stride + wc * c.dilation).wrapping_sub(c.pad_before);
                if ic >= c.input {
                    continue;
                }
                f((wr * c.window + wc) * ch, ((b * r.input + ir) * c.input + ic) * ch);
            }
        }
    }

    /// Writes the patch rows of positions `first..` into `out` (whole rows), in parallel when large.
    fn im2col<T: Num>(&self, x: &[T], first: usize, out: &mut [T]) {
        let (k, ch) = (self.patch(), self.channels);
        let fill = |(i, row): (usize, &mut [T])| {
            row.fill(T::zero());
            self.taps_of(first + i, |col, src| row[col..col + ch].copy_from_slice(&x[src..src + ch]));
        };
        if out.len() >= PARALLEL_WORK {
            out.par_chunks_mut(k).enumerate().for_each(fill);
        } else {
            out.chunks_mut(k).enumerate().for_each(fill);
        }
    }

    /// Adds the patch rows of positions `first..` in `patches` back onto the input positions they came from.
    fn col2im<T: Num>(&self, patches: &[T], first: usize, dx: &mut [T]) {
        let (k, ch) = (self.patch(), self.channels);
        for (i, row) in patches.chunks(k).enumerate() {
            self.taps_of(first + i, |col, dst| {
                for (d, &v) in dx[dst..dst + ch].iter_mut().zip(&row[col..col + ch]) {
                    *d = d.add(v);
                }
            });
        }
    }
}

fn matrix<T>(data: &[T], rows: usize, cols: usize) -> ArrayView2<'_, T> {
    ArrayView2::from_shape((rows, cols), data).expect("the buffer holds rows × cols elements")
}

/// `out = a · f` for `a` of few rows (`[m, k] · [k, o]`): each filter row is
/// read once, in place, and added scaled into every output row (ndarray's
/// `scaled_add`), so each output element sums over `k` in order.
fn few_rows_times<T: Num + LinalgScalar>(a: &[T], f: &[T], out: &mut [T], (m, k, o): (usize, usize, usize)) {
    let mut y = ArrayViewMut2::from_shape((m, o), out).expect("the buffer holds m × o elements");
    y.fill(<T as Num>::zero());
    for (j, frow) in matrix(f, k, o).outer_iter().enumerate() {
        for (i, mut yrow) in y.outer_iter_mut().enumerate() {
            yrow.scaled_add(a[i * k + j], &frow);
        }
    }
}

/// `out = g · fᵀ` for `g` of few rows (`[m, o] · [o, k]`, `f` being `[k, o]`):
/// element `(i, j)` is the dot product of row `i` of `g` with row `j` of the
/// filter, both contiguous, so the filter is read once and in place.
fn few_rows_times_t<T: Num + LinalgScalar>(g: &[T], f: &[T], out: &mut [T], (m, k, o): (usize, usize, usize)) {
    let g = matrix(g, m, o);
    for (j, frow) in matrix(f, k, o).outer_iter().enumerate() {
        for (i, grow) in g.outer_iter().enumerate() {
            out[i * k + j] = grow.dot(&frow);
        }
    }
}

/// `Conv2D`: `y[pos, o] = Σ patch[pos, j] · filter[j, o]`, `[positions, out]`.
pub(super) fn forward<T: Num + LinalgScalar>(s: &Shape, x: &[T], f: &[T]) -> Vec<T> {
    let (n, k, o) = (s.positions(), s.patch(), s.filter[3]);
    let mut y = vec![<T as Num>::zero(); n * o];
    if n <= FEW_ROWS && n <= s.chunk() {
        if s.pointwise() {
            few_rows_times(x, f, &mut y, (n, k, o));
        } else {
            let mut patches = vec![<T as Num>::zero(); n * k];
            s.im2col(x, 0, &mut patches);
            few_rows_times(&patches, f, &mut y, (n, k, o));
        }
        return y;
    }
    let fm = matrix(f, k, o);
    if s.pointwise() {
        products(&[(matrix(x, n, k), fm)], &mut y, (n, o, k));
        return y;
    }
    let chunk = s.chunk();
    let mut patches = vec![<T as Num>::zero(); chunk.min(n) * k];
    for (i, yc) in y.chunks_mut(chunk * o.max(1)).enumerate() {
        let rows = yc.len().checked_div(o).unwrap_or(0);
        let p = &mut patches[..rows * k];
        s.im2col(x, i * chunk, p);
        products(&[(matrix(p, rows, k), fm)], yc, (rows, o, k));
    }
    y
}

/// `Conv2DBackpropInput`: the patch gradients `dy · filterᵀ`, added back onto the input positions.
pub(super) fn backprop_input<T: Num + LinalgScalar>(s: &Shape, dy: &[T], f: &[T], dx_len: usize) -> Vec<T> {
    let (n, k, o) = (s.positions(), s.patch(), s.filter[3]);
    let mut dx = vec![<T as Num>::zero(); dx_len];
    if n <= FEW_ROWS && n <= s.chunk() {
        if s.pointwise() {
            few_rows_times_t(dy, f, &mut dx, (n, k, o));
        } else {
            let mut patches = vec![<T as Num>::zero(); n * k];
            few_rows_times_t(dy, f, &mut patches, (n, k, o));
            s.col2im(&patches, 0, &mut dx);
        }
        return dx;
    }
    let ft = matrix(f, k, o).reversed_axes();
    if s.pointwise() {
        products(&[(matrix(dy, n, o), ft)], &mut dx, (n, k, o));
        return dx;
    }
    let chunk = s.chunk();
    let mut patches = vec![<T as Num>::zero(); chunk.min(n) * k];
    for first in (0..n).step_by(chunk) {
        let rows = chunk.min(n - first);
        let p = &mut patches[..rows * k];
        products(&[(matrix(&dy[first * o..(first + rows) * o], rows, o), ft)], p, (rows, k, o));
        s.col2im(p, first, &mut dx);
    }
    dx
}

/// `Conv2DBackpropFilter`: `patchᵀ · dy`, summed over chunks of positions in order.
pub(super) fn backprop_filter<T: Num>(s: &Shape, x: &[T], dy: &[T]) -> Vec<T> {
    let (n, k, o) = (s.positions(), s.patch(), s.filter[3]);
    let mut df = vec![T::zero(); k * o];
    if s.pointwise() {
        products(&[(matrix(x, n, k).reversed_axes(), matrix(dy, n, o))], &mut df, (k, o, n));
        return df;
    }
    let chunk = s.chunk();
    let mut patches = vec![T::zero(); chunk.min(n) * k];
    // The first chunk's product is written into `df`; each later one is added to it.
    let mut partial = if n > chunk { vec![T::zero(); k * o] } else { Vec::new() };
    for first in (0..n).step_by(chunk) {
        let rows = chunk.min(n - first);
        let p = &mut patches[..rows * k];
        s.im2col(x, first, p);
        let pair = [(matrix(p, rows, k).reversed_axes(), matrix(&dy[first * o..(first + rows) * o], rows, o))];
        if first == 0 {
            products(&pair, &mut df, (k, o, rows));
            continue;
        }
        products(&pair, &mut partial, (k, o, rows));
        for (d, &v) in df.iter_mut().zip(&partial) {
            *d = d.add(v);
        }
    }
    df
}

/// Runs `f(index, chunk)` over `chunk`-sized pieces of `out`, on rayon's threads when `work` is large.
fn split<T: Send>(out: &mut [T], chunk: usize, work: usize, f: impl Fn(usize, &mut [T]) + Sync + Send) {
    if chunk == 0 {
        return;
    }
    if work >= PARALLEL_WORK {
        out.par_chunks_mut(chunk).enumerate().for_each(|(i, c)| f(i, c));
    } else {
        out.chunks_mut(chunk).enumerate().for_each(|(i, c)| f(i, c));
    }
}

/// `DepthwiseConv2dNative`: output rows in parallel, each summing its taps in window order.
pub(super) fn depthwise_forward<T: Num>(s: &Shape, x: &[T], f: &[T]) -> Vec<T> {
    let (ch, per) = (s.channels, s.filter[3]);
    let (r, c) = (s.g.rows, s.g.cols);
    let width = c.output * ch * per;
    let mut y = vec![T::zero(); s.positions() * ch * per];
    let work = y.len() * r.window * c.window;
    split(&mut y, width, work, |row, yr| {
        for (ocol, out) in yr.chunks_mut(ch * per).enumerate() {
            s.taps_of(row * c.output + ocol, |col, src| {
                let taps = &f[col * per..(col + ch) * per];
                for ((xv, fr), yo) in x[src..src + ch].iter().zip(taps.chunks(per)).zip(out.chunks_mut(per)) {
                    for (yv, &fv) in yo.iter_mut().zip(fr) {
                        *yv = yv.add(xv.mul(fv));
                    }
                }
            });
        }
    });
    y
}

/// `DepthwiseConv2dNativeBackpropInput`: each input row gathers from the outputs whose windows cover it.
pub(super) fn depthwise_backprop_input<T: Num>(s: &Shape, dy: &[T], f: &[T], dx_len: usize) -> Vec<T> {
    let (ch, per) = (s.channels, s.filter[3]);
    let (r, c) = (s.g.rows, s.g.cols);
    let mut dx = vec![T::zero(); dx_len];
    let work = s.positions() * ch * per * r.window * c.window;
    // The output index along one axis whose window tap `w` reads input index `i`.
    let source = |a: super::conv::Axis1, i: usize, w: usize| {
        let t = (i + a.pad_before).checked_sub(w * a.dilation)?;
        (t % a.stride == 0 && t / a.stride < a.output).then_some(t / a.stride)
    };
    split(&mut dx, c.input * ch, work, |row, dr| {
        let (b, ir) = (row / r.input, row % r.input);
        for (ic, out) in dr.chunks_mut(ch).enumerate() {
            for wr in 0..r.window {
                let Some(orow) = source(r, ir, wr) else { continue };
                for wc in 0..c.window {
                    let Some(ocol) = source(c, ic, wc) else { continue };
                    let at = ((b * r.output + orow) * c.output + ocol) * ch * per;
                    let taps = &f[(wr * c.window + wc) * ch * per..][..ch * per];
                    for ((d, g), fr) in out.iter_mut().zip(dy[at..at + ch * per].chunks(per)).zip(taps.chunks(per)) {
                        let mut sum = T::zero();
                        for (&gv, &fv) in g.iter().zip(fr) {
                            sum = sum.add(gv.mul(fv));
                        }
                        *d = d.add(sum);
                    }
                }
            }
        }
    });
    dx
}

/// `DepthwiseConv2dNativeBackpropFilter`: window taps in parallel, each summing over every output position.
pub(super) fn depthwise_backprop_filter<T: Num>(s: &Shape, x: &[T], dy: &[T]) -> Vec<T> {
    let (ch, per) = (s.channels, s.filter[3]);
    let (r, c) = (s.g.rows, s.g.cols);
    let mut df = vec![T::zero(); r.window * c.window * ch * per];
    let work = s.positions() * ch * per * r.window * c.window;
    split(&mut df, ch * per, work, |tap, dft| {
        let (wr, wc) = (tap / c.window, tap % c.window);
        for pos in 0..s.positions() {
            let ocol = pos % c.output;
            let orow = (pos / c.output) % r.output;
            let b = pos / (c.output * r.output);
            let ir = (orow * r.stride + wr * r.dilation).wrapping_sub(r.pad_before);
            let ic = (ocol * c.stride + wc * c.dilation).wrapping_sub(c.pad_before);
            if ir >= r.input || ic >= c.input {
                continue;
            }
            let src = ((b * r.input + ir) * c.input + ic) * ch;
            let g = &dy[pos * ch * per..(pos + 1) * ch * per];
            for ((&xv, gr), dr) in x[src..src + ch].iter().zip(g.chunks(per)).zip(dft.chunks_mut(per)) {
                for (d, &gv) in dr.iter_mut().zip(gr) {
                    *d = d.add(xv.mul(gv));
                }
            }
        }
    });
    df
}

#[cfg(test)]
mod tests {
    use super::super::conv::{Axis1, Geometry};
    use super::*;

    /// One axis with explicit padding `(before, after)`.
    fn axis(input: usize, window: usize, stride: usize, dilation: usize, pad: (usize, usize)) -> Axis1 {
        let span = (window - 1) * dilation + 1;
        let output = (input + pad.0 + pad.1 - span) / stride + 1;
        Axis1 { input, window, stride, dilation, pad_before: pad.0, output }
    }

    fn values(n: usize, seed: f64) -> Vec<f64> {
        (0..n).map(|i| ((i as f64 + seed) * 0.618).sin()).collect()
    }

    /// The three kernels computed tap by tap, the obvious way: `(y, dx, df)` for `x`, `f` and `dy`.
    fn reference(s: &Shape, depthwise: bool, x: &[f64], f: &[f64], dy: &[f64]) -> [Vec<f64>; 3] {
        let (g, ch, per) = (s.g, s.channels, s.filter[3]);
        let out_ch = if depthwise { ch * per } else { per };
        let mut y = vec![0.0; s.positions() * out_ch];
        let (mut dx, mut df) = (vec![0.0; x.len()], vec![0.0; f.len()]);
        for b in 0..g.batch {
            for oh in 0..g.rows.output {
                for ow in 0..g.cols.output {
                    for wr in 0..g.rows.window {
                        for wc in 0..g.cols.window {
                            let ir = (oh * g.rows.stride + wr * g.rows.dilation) as isize - g.rows.pad_before as isize;
                            let ic = (ow * g.cols.stride + wc * g.cols.dilation) as isize - g.cols.pad_before as isize;
                            if ir < 0 || ic < 0 || ir as usize >= g.rows.input || ic as usize >= g.cols.input {
                                continue;
                            }
                            let xb = ((b * g.rows.input + ir as usize) * g.cols.input + ic as usize) * ch;
                            let yb = ((b * g.rows.output + oh) * g.cols.output + ow) * out_ch;
                            for ci in 0..ch {
                                for o in 0..per {
                                    let fi = ((wr * g.cols.window + wc) * ch + ci) * per + o;
                                    let yi = yb + if depthwise { ci * per + o } else { o };
                                    y[yi] += x[xb + ci] * f[fi];
                                    dx[xb + ci] += dy[yi] * f[fi];
                                    df[fi] += x[xb + ci] * dy[yi];
                                }
                            }
                        }
                    }
                }
            }
        }
        [y, dx, df]
    }

    fn assert_close(what: &str, got: &[f64], want: &[f64]) {
        assert_eq!(got.len(), want.len(), "{what}: length");
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert!((g - w).abs() <= 1e-10 * (1.0 + w.abs()), "{what}[{i}]: {g} != {w}");
        }
    }

    fn check(batch: usize, rows: Axis1, cols: Axis1, ch: usize, per: usize) {
        let filter = [rows.window, cols.window, ch, per];
        let s = Shape { g: Geometry { batch, rows, cols }, channels: ch, filter };
        let x = values(batch * rows.input * cols.input * ch, 0.5);
        let f = values(filter.iter().product(), 7.0);
        for depthwise in [false, true] {
            let what = format!("{s:?} depthwise={depthwise}");
            let out_ch = if depthwise { ch * per } else { per };
            let dy = values(s.positions() * out_ch, 3.0);
            let [y, dx, df] = reference(&s, depthwise, &x, &f, &dy);
            let got = if depthwise {
                [
                    depthwise_forward(&s, &x, &f),
                    depthwise_backprop_input(&s, &dy, &f, x.len()),
                    depthwise_backprop_filter(&s, &x, &dy),
                ]
            } else {
                [forward(&s, &x, &f), backprop_input(&s, &dy, &f, x.len()), backprop_filter(&s, &x, &dy)]
            };
            assert_close(&format!("{what} y"), &got[0], &y);
            assert_close(&format!("{what} dx"), &got[1], &dx);
            assert_close(&format!("{what} df"), &got[2], &df);
        }
    }

    #[test]
    fn kernels_match_tap_by_tap_sums() {
        // SAME 3x3, two images.
        check(2, axis(5, 3, 1, 1, (1, 1)), axis(4, 3, 1, 1, (1, 1)), 3, 2);
        // Stride 2, no padding, a row left over.
        check(1, axis(7, 3, 2, 1, (0, 0)), axis(6, 3, 2, 1, (0, 1)), 2, 3);
        // A 2x3 window dilated by 2, uneven strides and padding.
        check(2, axis(6, 2, 1, 2, (1, 0)), axis(7, 3, 2, 2, (2, 1)), 2, 2);
        // 1x1 at stride 1 (the input is the patch matrix) and at stride 2 (it is not).
        check(2, axis(4, 1, 1, 1, (0, 0)), axis(3, 1, 1, 1, (0, 0)), 5, 3);
        check(1, axis(5, 1, 2, 1, (0, 0)), axis(5, 1, 2, 1, (0, 0)), 3, 2);
        // At most FEW_ROWS output positions: the products that read the filter row by row.
        check(1, axis(3, 3, 2, 1, (1, 1)), axis(4, 3, 2, 1, (1, 1)), 3, 2);
        check(1, axis(1, 1, 1, 1, (0, 0)), axis(1, 1, 1, 1, (0, 0)), 5, 3);
        check(2, axis(2, 1, 1, 1, (0, 0)), axis(1, 1, 1, 1, (0, 0)), 4, 6);
        // More patch elements than one chunk holds: several chunks, summed in order.
        let big = axis(9, 3, 1, 1, (1, 1));
        const { assert!(2 * 9 * 9 * 3 * 3 * 8 > 2 * PATCH_ELEMENTS) };
        check(2, big, big, 8, 2);
    }

    #[test]
    fn results_do_not_depend_on_the_thread_count() {
        let a = axis(32, 3, 1, 1, (1, 1));
        let s = Shape { g: Geometry { batch: 2, rows: a, cols: a }, channels: 16, filter: [3, 3, 16, 16] };
        let x: Vec<f32> = values(2 * 32 * 32 * 16, 1.0).iter().map(|&v| v as f32).collect();
        let f: Vec<f32> = values(3 * 3 * 16 * 16, 2.0).iter().map(|&v| v as f32).collect();
        let dy: Vec<f32> = values(s.positions() * 16, 4.0).iter().map(|&v| v as f32).collect();
        let d = Shape { filter: [3, 3, 16, 1], ..s };
        // A 1x1 convolution is one product, large enough to be split between threads.
        let one = axis(32, 1, 1, 1, (0, 0));
        let p = Shape { g: Geometry { batch: 2, rows: one, cols: one }, channels: 16, filter: [1, 1, 16, 144] };
        let run = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("a thread pool");
            pool.install(|| {
                [
                    forward(&s, &x, &f),
                    backprop_input(&s, &dy, &f, x.len()),
                    backprop_filter(&s, &x, &dy),
                    depthwise_forward(&d, &x, &f[..3 * 3 * 16]),
                    depthwise_backprop_input(&d, &dy, &f[..3 * 3 * 16], x.len()),
                    depthwise_backprop_filter(&d, &x, &dy),
                    forward(&p, &x, &f[..16 * 144]),
                    backprop_input(
                        &p,
                        &values(2 * 32 * 32 * 144, 5.0).iter().map(|&v| v as f32).collect::<Vec<_>>(),
                        &f[..16 * 144],
                        x.len(),
                    ),
                    backprop_filter(
                        &p,
                        &x,
                        &values(2 * 32 * 32 * 144, 5.0).iter().map(|&v| v as f32).collect::<Vec<_>>(),
                    ),
                ]
            })
        };
        let (one, three) = (run(1), run(3));
        for (a, b) in one.iter().zip(&three) {
            assert!(a.iter().zip(b).all(|(p, q)| p.to_bits() == q.to_bits()));
        }
    }
}
