//! Convolutions and pools, NHWC with HWIO filters as TensorFlow writes
//! them: `Conv2D` and its input and filter gradients, the depthwise
//! variants (`feature_group_count` = channels; the filter gradient with
//! `batch_group_count` = channels, as TensorFlow's bridge emits it), grouped `Conv2D`
//! (`feature_group_count` = groups; its filter gradient `batch_group_count`), `MaxPool`/`AvgPool` as
//! `reduce_window`, `MaxPoolGrad` as `select_and_scatter` (the first
//! maximum of a window gets the gradient), and `AvgPoolGrad` as a window
//! sum over the gradient spread back by the strides. `SAME`, `VALID` and
//! `EXPLICIT` padding resolve to the same per-side amounts the simulator
//! uses. Cost: one or two window ops per TF op.

use super::{i64s, Call};
use crate::xla::stablehlo::text::{Cmp, Ctx, Reducer, Ty, Val};

/// Which convolution.
#[derive(Clone, Copy, Debug)]
pub(super) enum Kind {
    Forward,
    BackpropInput,
    BackpropFilter,
}

/// Per spatial dimension: window, stride, dilation, and the forward padding.
struct Window {
    k: [usize; 2],
    s: [usize; 2],
    d: [usize; 2],
    pad: [(i64, i64); 2],
}

/// `[1, h, w, 1]` or `[h, w]` of attribute `key`.
fn pair(n: &Call, key: &str) -> Result<[usize; 2], String> {
    match n.int_list(key).as_slice() {
        [] => Ok([1, 1]),
        &[1, h, w, 1] | &[h, w] if h > 0 && w > 0 => Ok([h as usize, w as usize]),
        other => Err(format!("{key} {other:?} is not supported (NHWC, [1, h, w, 1])")),
    }
}

/// The window of an op over an `input` of NHWC shape with a `k` window.
fn window(n: &Call, input: &[usize], k: [usize; 2]) -> Result<Window, String> {
    if n.attrs.get_str("data_format").is_some_and(|f| f != "NHWC") {
        return Err("only data_format NHWC lowers".into());
    }
    if input.len() != 4 {
        return Err(format!("input must be 4-D NHWC, got {input:?}"));
    }
    let (s, d) = (pair(n, "strides")?, pair(n, "dilations")?);
    let mut pad = [(0, 0); 2];
    for i in 0..2 {
        pad[i] = match n.attrs.get_str("padding").unwrap_or("VALID") {
            "VALID" => (0, 0),
            "SAME" => {
                let out = input[i + 1].div_ceil(s[i]);
                let need = ((out.max(1) - 1) * s[i] + (k[i] - 1) * d[i] + 1).saturating_sub(input[i + 1]) as i64;
                (need / 2, need - need / 2)
            }
            "EXPLICIT" => {
                let p = n.int_list("explicit_paddings");
                if p.len() != 8 {
                    return Err("explicit_paddings must have 8 entries".into());
                }
                (p[2 + 2 * i].max(0), p[3 + 2 * i].max(0))
            }
            other => return Err(format!("padding {other:?} is not supported")),
        };
    }
    Ok(Window { k, s, d, pad })
}

/// `dense<[[a, b], ...]> : tensor<nx2xi64>`.
fn padding(p: &[(i64, i64)]) -> String {
    let rows: Vec<String> = p.iter().map(|(a, b)| format!("[{a}, {b}]")).collect();
    format!("dense<[{}]> : tensor<{}x2xi64>", rows.join(", "), p.len())
}

/// One `stablehlo.convolution`.
struct Conv<'a> {
    dims: &'a str,
    strides: [usize; 2],
    pad: [(i64, i64); 2],
    lhs_dilation: [usize; 2],
    rhs_dilation: [usize; 2],
    groups: usize,
    /// `batch_group_count`: 1 except for a depthwise or grouped filter gradient.
    batch_groups: usize,
}

fn convolution(c: &mut Ctx, lhs: &Val, rhs: &Val, conv: &Conv, out: Ty) -> Val {
    let attrs = format!(
        "dimension_numbers = #stablehlo.conv<{}>, window_strides = {}, padding = {}, lhs_dilation = {}, rhs_dilation = {}, feature_group_count = {} : i64, batch_group_count = {} : i64",
        conv.dims,
        i64s(&conv.strides),
        padding(&conv.pad),
        i64s(&conv.lhs_dilation),
        i64s(&conv.rhs_dilation),
        conv.groups,
        conv.batch_groups
    );
    c.op("stablehlo.convolution", &[lhs, rhs], &attrs, out)
}

fn reverse_spatial(c: &mut Ctx, w: &Val) -> Val {
    c.op("stablehlo.reverse", &[w], "dimensions = array<i64: 0, 1>", w.ty.clone())
}

/// `Conv2D(x, w)`, `Conv2DBackpropInput(sizes, w, dy)`,
/// `Conv2DBackpropFilter(x, sizes, dy)` and their depthwise forms.
pub(super) fn conv(c: &mut Ctx, n: &Call, kind: Kind, depthwise: bool) -> Result<Vec<Val>, String> {
    let out = n.out(0)?.clone();
    let (input_shape, filter_shape) = match kind {
        Kind::Forward => (n.input(0)?.ty.shape.clone(), n.input(1)?.ty.shape.clone()),
        Kind::BackpropInput => (out.shape.clone(), n.input(1)?.ty.shape.clone()),
        Kind::BackpropFilter => (n.input(0)?.ty.shape.clone(), out.shape.clone()),
    };
    if filter_shape.len() != 4 {
        return Err(format!("filter must be 4-D HWIO, got {filter_shape:?}"));
    }
    let w = window(n, &input_shape, [filter_shape[0], filter_shape[1]])?;
    let channels = input_shape[3];
    if !depthwise && filter_shape[2] != channels {
        return grouped(c, n, kind, &w, &input_shape, &filter_shape);
    }
    match kind {
        Kind::Forward => {
            let x = n.input(0)?;
            let mut f = n.input(1)?.clone();
            if depthwise {
                let shape = vec![filter_shape[0], filter_shape[1], 1, filter_shape[2] * filter_shape[3]];
                f = c.reshape(&f, shape);
            }
            let conv = Conv {
                dims: "[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]",
                strides: w.s,
                pad: w.pad,
                lhs_dilation: [1, 1],
                rhs_dilation: w.d,
                groups: if depthwise { channels } else { 1 },
                batch_groups: 1,
            };
            Ok(vec![convolution(c, x, &f, &conv, out)])
        }
        Kind::BackpropInput => {
            let dy = n.input(2)?;
            let f = reverse_spatial(c, n.input(1)?);
            let pad = input_gradient_padding(&w, &input_shape, &dy.ty.shape);
            let (f, dims) = if depthwise {
                let t = c.op(
                    "stablehlo.transpose",
                    &[&f],
                    "permutation = array<i64: 0, 1, 3, 2>",
                    f.ty.with_shape(vec![filter_shape[0], filter_shape[1], filter_shape[3], filter_shape[2]]),
                );
                (t, "[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]")
            } else {
                (f, "[b, 0, 1, f]x[0, 1, o, i]->[b, 0, 1, f]")
            };
            let conv = Conv {
                dims,
                strides: [1, 1],
                pad,
                lhs_dilation: w.s,
                rhs_dilation: w.d,
                groups: if depthwise { channels } else { 1 },
                batch_groups: 1,
            };
            Ok(vec![convolution(c, dy, &f, &conv, out)])
        }
        Kind::BackpropFilter => {
            let x = n.input(0)?;
            let dy = n.input(2)?;
            let mut pad = [(0, 0); 2];
            for i in 0..2 {
                let o = dy.ty.shape[i + 1] as i64;
                let lo = w.pad[i].0;
                let span = ((w.k[i] - 1) * w.d[i]) as i64 + (o - 1) * w.s[i] as i64 + 1;
                pad[i] = (lo, span - input_shape[i + 1] as i64 - lo);
            }
            // The input's channels play the batch, the gradient's the output
            // features. Depthwise: `batch_group_count` = channels pairs input
            // channel c with output channels c·M..c·M+M only, so the result is
            // `[kh, kw, 1, C·M]`, as TensorFlow's bridge emits it.
            let groups = if depthwise { channels.max(1) } else { 1 };
            let full = out.with_shape(vec![filter_shape[0], filter_shape[1], channels / groups, dy.ty.shape[3]]);
            let conv = Conv {
                dims: "[f, 0, 1, b]x[i, 0, 1, o]->[0, 1, b, f]",
                strides: w.d,
                pad,
                lhs_dilation: [1, 1],
                rhs_dilation: w.s,
                groups: 1,
                batch_groups: groups,
            };
            let g = convolution(c, x, dy, &conv, full);
            Ok(vec![if depthwise { c.reshape(&g, out.shape) } else { g }])
        }
    }
}

/// A grouped `Conv2D` (the input has `groups` times the filter's input depth) or one of its
/// backprops, as TensorFlow's XLA bridge lowers them: the forward convolution and the input
/// gradient use `feature_group_count`, the filter gradient `batch_group_count`.
fn grouped(
    c: &mut Ctx,
    n: &Call,
    kind: Kind,
    w: &Window,
    input_shape: &[usize],
    filter_shape: &[usize],
) -> Result<Vec<Val>, String> {
    let out = n.out(0)?.clone();
    let (channels, cg, out_ch) = (input_shape[3], filter_shape[2], filter_shape[3]);
    if cg == 0 || !channels.is_multiple_of(cg) {
        return Err(format!("the input's {channels} channels are not a multiple of the filter's input depth {cg}"));
    }
    let groups = channels / cg;
    if !out_ch.is_multiple_of(groups) {
        return Err(format!("the filter's {out_ch} output channels are not a multiple of the {groups} groups"));
    }
    let regular = "[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]";
    match kind {
        Kind::Forward => {
            let conv = Conv {
                dims: regular,
                strides: w.s,
                pad: w.pad,
                lhs_dilation: [1, 1],
                rhs_dilation: w.d,
                groups,
                batch_groups: 1,
            };
            Ok(vec![convolution(c, n.input(0)?, n.input(1)?, &conv, out)])
        }
        Kind::BackpropInput => {
            let dy = n.input(2)?;
            let f = reverse_spatial(c, n.input(1)?);
            // Filter [kh, kw, cg, G·og] becomes [kh, kw, og, G·cg]: group g's columns turn into its rows.
            let (kh, kw, og) = (filter_shape[0], filter_shape[1], out_ch / groups);
            let f5 = c.reshape(&f, vec![kh, kw, cg, groups, og]);
            let t = c.op(
                "stablehlo.transpose",
                &[&f5],
                "permutation = array<i64: 0, 1, 4, 3, 2>",
                f5.ty.with_shape(vec![kh, kw, og, groups, cg]),
            );
            let f = c.reshape(&t, vec![kh, kw, og, channels]);
            let conv = Conv {
                dims: regular,
                strides: [1, 1],
                pad: input_gradient_padding(w, input_shape, &dy.ty.shape),
                lhs_dilation: w.s,
                rhs_dilation: w.d,
                groups,
                batch_groups: 1,
            };
            Ok(vec![convolution(c, dy, &f, &conv, out)])
        }
        Kind::BackpropFilter => {
            let (x, dy) = (n.input(0)?, n.input(2)?);
            let conv = Conv {
                dims: "[f, 0, 1, b]x[i, 0, 1, o]->[0, 1, b, f]",
                strides: w.d,
                pad: filter_gradient_padding(w, input_shape, &dy.ty.shape),
                lhs_dilation: [1, 1],
                rhs_dilation: w.s,
                groups: 1,
                batch_groups: groups,
            };
            Ok(vec![convolution(c, x, dy, &conv, out)])
        }
    }
}

/// The padding of the input gradient's convolution of `dy` (shape `dy_shape`) by the reversed filter.
fn input_gradient_padding(w: &Window, input_shape: &[usize], dy_shape: &[usize]) -> [(i64, i64); 2] {
    let mut pad = [(0, 0); 2];
    for i in 0..2 {
        let ke = ((w.k[i] - 1) * w.d[i] + 1) as i64;
        let lo = ke - 1 - w.pad[i].0;
        let o = dy_shape[i + 1] as i64;
        pad[i] = (lo, input_shape[i + 1] as i64 + ke - 2 - (o - 1) * w.s[i] as i64 - lo);
    }
    pad
}

/// The padding of the filter gradient's convolution of the input by `dy` (shape `dy_shape`).
fn filter_gradient_padding(w: &Window, input_shape: &[usize], dy_shape: &[usize]) -> [(i64, i64); 2] {
    let mut pad = [(0, 0); 2];
    for i in 0..2 {
        let o = dy_shape[i + 1] as i64;
        let lo = w.pad[i].0;
        let span = ((w.k[i] - 1) * w.d[i]) as i64 + (o - 1) * w.s[i] as i64 + 1;
        pad[i] = (lo, span - input_shape[i + 1] as i64 - lo);
    }
    pad
}

/// The NHWC window of a pool: `ksize`, `strides`, padding.
fn pool_window(n: &Call, input: &[usize]) -> Result<Window, String> {
    let k = pair(n, "ksize")?;
    window(n, input, k)
}

fn nhwc<T: Copy>(inner: [T; 2], one: T) -> [T; 4] {
    [one, inner[0], inner[1], one]
}

/// `stablehlo.reduce_window` of `x` over the pool's window.
fn reduce_window(c: &mut Ctx, x: &Val, w: &Window, reducer: Reducer, out: Ty) -> Val {
    let init = c.splat(&Ty::scalar(x.ty.dtype), reducer.identity(x.ty.dtype));
    let region = c.reducer_region(x.ty.dtype, reducer);
    let attrs = format!(
        "window_dimensions = {}, window_strides = {}, padding = {}",
        i64s(&nhwc(w.k, 1)),
        i64s(&nhwc(w.s, 1)),
        padding(&[(0, 0), w.pad[0], w.pad[1], (0, 0)])
    );
    c.op_regions("stablehlo.reduce_window", &[x, &init], &[region], &attrs, &[out]).remove(0)
}

pub(super) fn max_pool(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let w = pool_window(n, &x.ty.shape)?;
    let out = n.out(0)?.clone();
    Ok(vec![reduce_window(c, x, &w, Reducer::Max, out)])
}

/// The number of input elements (padding excluded) in each window.
fn window_counts(c: &mut Ctx, like: &Ty, w: &Window, out: Ty) -> Val {
    let ones = c.splat(like, 1.0);
    reduce_window(c, &ones, w, Reducer::Add, out)
}

pub(super) fn avg_pool(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let w = pool_window(n, &x.ty.shape)?;
    let out = n.out(0)?.clone();
    let sum = reduce_window(c, x, &w, Reducer::Add, out.clone());
    let count = window_counts(c, &x.ty, &w, out);
    Ok(vec![c.elementwise("divide", &[&sum, &count])])
}

/// `AvgPoolGrad(input_shape, dy)`: each `dy / count` spread over its window.
pub(super) fn avg_pool_grad(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let dy = n.input(1)?;
    let out = n.out(0)?.clone();
    let w = pool_window(n, &out.shape)?;
    let count = window_counts(c, &out, &w, dy.ty.clone());
    let g = c.elementwise("divide", &[dy, &count]);
    let mut low = [0i64; 4];
    let mut high = [0i64; 4];
    let mut interior = [0i64; 4];
    for i in 0..2 {
        let o = dy.ty.shape[i + 1] as i64;
        low[i + 1] = w.k[i] as i64 - 1 - w.pad[i].0;
        high[i + 1] = out.shape[i + 1] as i64 + w.pad[i].0 - (o - 1) * w.s[i] as i64 - 1;
        interior[i + 1] = w.s[i] as i64 - 1;
    }
    let spread_shape: Vec<usize> = (0..4)
        .map(|d| {
            let base = dy.ty.shape[d] as i64;
            (low[d] + high[d] + base + (base - 1).max(0) * interior[d]).max(0) as usize
        })
        .collect();
    let zero = c.splat(&Ty::scalar(g.ty.dtype), 0.0);
    let spread = c.op(
        "stablehlo.pad",
        &[&g, &zero],
        &format!(
            "edge_padding_low = {}, edge_padding_high = {}, interior_padding = {}",
            i64s(&low),
            i64s(&high),
            i64s(&interior)
        ),
        g.ty.with_shape(spread_shape),
    );
    let unit = Window { k: w.k, s: [1, 1], d: [1, 1], pad: [(0, 0), (0, 0)] };
    Ok(vec![reduce_window(c, &spread, &unit, Reducer::Add, out)])
}

/// `MaxPoolGrad(x, y, dy)`: `select_and_scatter` picking the first maximum.
pub(super) fn max_pool_grad(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let dy = n.input(2)?;
    let w = pool_window(n, &x.ty.shape)?;
    let out = n.out(0)?.clone();
    let dtype = x.ty.dtype;
    let select = c.region(dtype, |r, a, b| r.compare(a, b, Cmp::Ge));
    let scatter = c.reducer_region(dtype, Reducer::Add);
    let init = c.splat(&Ty::scalar(dtype), 0.0);
    let attrs = format!(
        "window_dimensions = {}, window_strides = {}, padding = {}",
        i64s(&nhwc(w.k, 1)),
        i64s(&nhwc(w.s, 1)),
        padding(&[(0, 0), w.pad[0], w.pad[1], (0, 0)])
    );
    Ok(c.op_regions("stablehlo.select_and_scatter", &[x, dy, &init], &[select, scatter], &attrs, &[out]))
}
