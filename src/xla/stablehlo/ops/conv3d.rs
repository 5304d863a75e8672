//! Volumetric convolutions and pools, NDHWC with DHWIO filters as
//! TensorFlow writes them: `Conv3D` and its input and filter gradients
//! (`Conv3DBackpropInputV2`, `Conv3DBackpropFilterV2`) as one
//! `stablehlo.convolution` each, `MaxPool3D`/`AvgPool3D` as
//! `reduce_window`, `MaxPool3DGrad` as `select_and_scatter` (the first
//! maximum of a window gets the gradient) and `AvgPool3DGrad` as a window
//! sum over the gradient spread back by the strides, the 2-D lowerings
//! (`conv`) with a third spatial axis. `SAME` and `VALID` padding resolve
//! to the per-side amounts the simulator uses. Cost: one or two window ops
//! per TF op.

use super::conv::Kind;
use super::{i64s, Call};
use crate::xla::stablehlo::text::{Cmp, Ctx, Reducer, Ty, Val};

/// Per spatial axis (depth, rows, columns): window, stride, dilation, and the forward padding.
struct Window {
    k: [usize; 3],
    s: [usize; 3],
    d: [usize; 3],
    pad: [(i64, i64); 3],
}

/// `[1, d, h, w, 1]` of attribute `key` (`[1, 1, 1]` when absent).
fn triple(n: &Call, key: &str) -> Result<[usize; 3], String> {
    match n.int_list(key).as_slice() {
        [] => Ok([1, 1, 1]),
        &[1, d, h, w, 1] if d > 0 && h > 0 && w > 0 => Ok([d as usize, h as usize, w as usize]),
        other => Err(format!("{key} {other:?} is not supported (NDHWC, [1, d, h, w, 1])")),
    }
}

/// The window of an op over an NDHWC `input` with a `k` window.
fn window(n: &Call, input: &[usize], k: [usize; 3], dilated: bool) -> Result<Window, String> {
    if n.attrs.get_str("data_format").is_some_and(|f| f != "NDHWC") {
        return Err("only data_format NDHWC lowers".into());
    }
    if input.len() != 5 {
        return Err(format!("input must be 5-D NDHWC, got {input:?}"));
    }
    let s = triple(n, "strides")?;
    let d = if dilated { triple(n, "dilations")? } else { [1, 1, 1] };
    let mut pad = [(0, 0); 3];
    for i in 0..3 {
        pad[i] = match n.attrs.get_str("padding").unwrap_or("VALID") {
            "VALID" => (0, 0),
            "SAME" => {
                let out = input[i + 1].div_ceil(s[i]);
                let need = ((out.max(1) - 1) * s[i] + (k[i] - 1) * d[i] + 1).saturating_sub(input[i + 1]) as i64;
                (need / 2, need - need / 2)
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

/// One `stablehlo.convolution` with three spatial axes.
fn convolution(
    c: &mut Ctx,
    (lhs, rhs): (&Val, &Val),
    dims: &str,
    geometry: [[usize; 3]; 3],
    pad: [(i64, i64); 3],
    out: Ty,
) -> Val {
    let [strides, lhs_dilation, rhs_dilation] = geometry;
    let attrs = format!(
        "dimension_numbers = #stablehlo.conv<{dims}>, window_strides = {}, padding = {}, lhs_dilation = {}, rhs_dilation = {}, feature_group_count = 1 : i64, batch_group_count = 1 : i64",
        i64s(&strides),
        padding(&pad),
        i64s(&lhs_dilation),
        i64s(&rhs_dilation),
    );
    c.op("stablehlo.convolution", &[lhs, rhs], &attrs, out)
}

/// `Conv3D(x, w)`, `Conv3DBackpropInputV2(sizes, w, dy)` and `Conv3DBackpropFilterV2(x, sizes, dy)`.
pub(super) fn conv(c: &mut Ctx, n: &Call, kind: Kind) -> Result<Vec<Val>, String> {
    let out = n.out(0)?.clone();
    let (input_shape, filter_shape) = match kind {
        Kind::Forward => (n.input(0)?.ty.shape.clone(), n.input(1)?.ty.shape.clone()),
        Kind::BackpropInput => (out.shape.clone(), n.input(1)?.ty.shape.clone()),
        Kind::BackpropFilter => (n.input(0)?.ty.shape.clone(), out.shape.clone()),
    };
    if filter_shape.len() != 5 {
        return Err(format!("filter must be 5-D DHWIO, got {filter_shape:?}"));
    }
    let w = window(n, &input_shape, [filter_shape[0], filter_shape[1], filter_shape[2]], true)?;
    match kind {
        Kind::Forward => {
            let dims = "[b, 0, 1, 2, f]x[0, 1, 2, i, o]->[b, 0, 1, 2, f]";
            Ok(vec![convolution(c, (n.input(0)?, n.input(1)?), dims, [w.s, [1; 3], w.d], w.pad, out)])
        }
        Kind::BackpropInput => {
            // The forward convolution's transpose: dy dilated by the strides, the filter mirrored.
            let dy = n.input(2)?;
            let f = n.input(1)?;
            let f = c.op("stablehlo.reverse", &[f], "dimensions = array<i64: 0, 1, 2>", f.ty.clone());
            let mut pad = [(0, 0); 3];
            for i in 0..3 {
                let ke = ((w.k[i] - 1) * w.d[i] + 1) as i64;
                let lo = ke - 1 - w.pad[i].0;
                let o = dy.ty.shape[i + 1] as i64;
                pad[i] = (lo, input_shape[i + 1] as i64 + ke - 2 - (o - 1) * w.s[i] as i64 - lo);
            }
            let dims = "[b, 0, 1, 2, f]x[0, 1, 2, o, i]->[b, 0, 1, 2, f]";
            Ok(vec![convolution(c, (dy, &f), dims, [[1; 3], w.s, w.d], pad, out)])
        }
        Kind::BackpropFilter => {
            // The batch is the contraction: x's channels play the batch, dy is the window.
            let (x, dy) = (n.input(0)?, n.input(2)?);
            let mut pad = [(0, 0); 3];
            for i in 0..3 {
                let o = dy.ty.shape[i + 1] as i64;
                let lo = w.pad[i].0;
                let span = ((w.k[i] - 1) * w.d[i]) as i64 + (o - 1) * w.s[i] as i64 + 1;
                pad[i] = (lo, span - input_shape[i + 1] as i64 - lo);
            }
            let dims = "[f, 0, 1, 2, b]x[i, 0, 1, 2, o]->[0, 1, 2, b, f]";
            Ok(vec![convolution(c, (x, dy), dims, [w.d, [1; 3], w.s], pad, out)])
        }
    }
}

/// The NDHWC window of a pool: `ksize`, `strides`, padding.
fn pool_window(n: &Call, input: &[usize]) -> Result<Window, String> {
    let k = triple(n, "ksize")?;
    window(n, input, k, false)
}

fn ndhwc(inner: [usize; 3]) -> [usize; 5] {
    [1, inner[0], inner[1], inner[2], 1]
}

/// The window attributes of a pool's window op.
fn window_attrs(w: &Window) -> String {
    format!(
        "window_dimensions = {}, window_strides = {}, padding = {}",
        i64s(&ndhwc(w.k)),
        i64s(&ndhwc(w.s)),
        padding(&[(0, 0), w.pad[0], w.pad[1], w.pad[2], (0, 0)])
    )
}

/// `stablehlo.reduce_window` of `x` over the pool's window.
fn reduce_window(c: &mut Ctx, x: &Val, w: &Window, reducer: Reducer, out: Ty) -> Val {
    let init = c.splat(&Ty::scalar(x.ty.dtype), reducer.identity(x.ty.dtype));
    let region = c.reducer_region(x.ty.dtype, reducer);
    c.op_regions("stablehlo.reduce_window", &[x, &init], &[region], &window_attrs(w), &[out]).remove(0)
}

pub(super) fn max_pool(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let w = pool_window(n, &x.ty.shape)?;
    Ok(vec![reduce_window(c, x, &w, Reducer::Max, n.out(0)?.clone())])
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

/// `AvgPool3DGrad(input_shape, dy)`: each `dy / count` spread over its window.
pub(super) fn avg_pool_grad(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let dy = n.input(1)?;
    let out = n.out(0)?.clone();
    let w = pool_window(n, &out.shape)?;
    let count = window_counts(c, &out, &w, dy.ty.clone());
    let g = c.elementwise("divide", &[dy, &count]);
    let (mut low, mut high, mut interior) = ([0i64; 5], [0i64; 5], [0i64; 5]);
    for i in 0..3 {
        let o = dy.ty.shape[i + 1] as i64;
        low[i + 1] = w.k[i] as i64 - 1 - w.pad[i].0;
        high[i + 1] = out.shape[i + 1] as i64 + w.pad[i].0 - (o - 1) * w.s[i] as i64 - 1;
        interior[i + 1] = w.s[i] as i64 - 1;
    }
    let spread_shape: Vec<usize> = (0..5)
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
    let unit = Window { k: w.k, s: [1; 3], d: [1; 3], pad: [(0, 0); 3] };
    Ok(vec![reduce_window(c, &spread, &unit, Reducer::Add, out)])
}

/// `MaxPool3DGrad(x, y, dy)`: `select_and_scatter` picking the first maximum.
pub(super) fn max_pool_grad(c: &mut Ctx, n: &Call) -> Result<Vec<Val>, String> {
    let x = n.input(0)?;
    let dy = n.input(2)?;
    let w = pool_window(n, &x.ty.shape)?;
    let out = n.out(0)?.clone();
    let dtype = x.ty.dtype;
    let select = c.region(dtype, |r, a, b| r.compare(a, b, Cmp::Ge));
    let scatter = c.reducer_region(dtype, Reducer::Add);
    let init = c.splat(&Ty::scalar(dtype), 0.0);
    Ok(c.op_regions("stablehlo.select_and_scatter", &[x, dy, &init], &[select, scatter], &window_attrs(&w), &[out]))
}
