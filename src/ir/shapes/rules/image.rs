//! Image and spatial rules: depth/space and space/batch rearrangements,
//! mirror padding and its gradient, and the data-format helpers, following
//! TensorFlow's shape functions for these ops.

use super::super::super::attrs::AttrMap;
use super::super::super::types::{AttrValue, DType};
use super::{dim, Args, OutType};

/// The `block_size` attribute, at least 2.
fn block_size(a: &Args) -> Result<usize, String> {
    match a.attrs.get_int("block_size") {
        Some(b) if b >= 2 => Ok(b as usize),
        other => Err(format!("block_size must be at least 2, got {other:?}")),
    }
}

/// `DepthToSpace` and `SpaceToDepth` of a 4-D input in NHWC or NCHW.
pub(super) fn depth_space(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let bs = block_size(a)?;
    let &[n, d1, d2, d3] = x.shape else { return Err(format!("input {:?} is not 4-D", x.shape)) };
    let nchw = a.str_attr("data_format", "NHWC") == "NCHW";
    let (h, w, c) = if nchw { (d2, d3, d1) } else { (d1, d2, d3) };
    let (h, w, c) = if a.op == "DepthToSpace" {
        if !c.is_multiple_of(bs * bs) {
            return Err(format!("depth {c} is not divisible by block_size² {}", bs * bs));
        }
        (h * bs, w * bs, c / (bs * bs))
    } else {
        if !h.is_multiple_of(bs) || !w.is_multiple_of(bs) {
            return Err(format!("height {h} and width {w} are not divisible by block_size {bs}"));
        }
        (h / bs, w / bs, c * bs * bs)
    };
    let shape = if nchw { vec![n, c, h, w] } else { vec![n, h, w, c] };
    Ok(vec![OutType::new(x.dtype, shape)])
}

/// `SpaceToBatchND`, `BatchToSpaceND` and their 4-D forms with a `block_size` attribute.
pub(super) fn space_batch(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let nd = a.op.ends_with("ND");
    let (block, pads): (Vec<usize>, &[i64]) = if nd {
        let b = a.ints(1, "block_shape")?.iter().map(|&b| dim(b, "block size")).collect::<Result<_, _>>()?;
        (b, a.ints(2, "paddings")?)
    } else {
        let b = block_size(a)?;
        (vec![b, b], a.ints(1, "paddings")?)
    };
    let m = block.len();
    if m == 0 || block.contains(&0) || pads.len() != 2 * m || x.shape.len() < m + 1 {
        return Err(format!("block {block:?} and {} pad values do not fit input {:?}", pads.len(), x.shape));
    }
    let blocks: usize = block.iter().product();
    let mut shape = x.shape.to_vec();
    if a.op.starts_with("Space") {
        shape[0] *= blocks;
        for d in 0..m {
            let padded = x.shape[d + 1] + dim(pads[2 * d], "padding")? + dim(pads[2 * d + 1], "padding")?;
            if !padded.is_multiple_of(block[d]) {
                return Err(format!("padded dimension {padded} is not divisible by block size {}", block[d]));
            }
            shape[d + 1] = padded / block[d];
        }
    } else {
        if !x.shape[0].is_multiple_of(blocks) {
            return Err(format!("batch {} is not divisible by {blocks} blocks", x.shape[0]));
        }
        shape[0] /= blocks;
        for d in 0..m {
            let crop = dim(pads[2 * d], "crop")? + dim(pads[2 * d + 1], "crop")?;
            shape[d + 1] = (x.shape[d + 1] * block[d])
                .checked_sub(crop)
                .ok_or_else(|| format!("crops {crop} exceed dimension {}", x.shape[d + 1] * block[d]))?;
        }
    }
    Ok(vec![OutType::new(x.dtype, shape)])
}

/// `MirrorPadGrad(grad, paddings)`: the gradient's shape less the paddings.
pub(super) fn mirror_pad_grad(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let p = a.ints(1, "paddings")?;
    if p.len() != 2 * x.shape.len() {
        return Err(format!("paddings have {} values for rank {}", p.len(), x.shape.len()));
    }
    let shape = x
        .shape
        .iter()
        .zip(p.chunks(2))
        .map(|(&d, lr)| {
            d.checked_sub(dim(lr[0], "padding")? + dim(lr[1], "padding")?)
                .ok_or_else(|| format!("paddings {lr:?} exceed dimension {d}"))
        })
        .collect::<Result<_, String>>()?;
    Ok(vec![OutType::new(x.dtype, shape)])
}

/// `MaxPoolV2(input, ksize, strides)`: `MaxPool` with its window from the constant operands.
pub(super) fn max_pool_v2(a: &Args) -> Result<Vec<OutType>, String> {
    let mut attrs = a.attrs.clone();
    for (key, i) in [("ksize", 1), ("strides", 2)] {
        let v = a.ints(i, key)?;
        attrs.insert(key, AttrValue::List(v.iter().map(|&x| AttrValue::Int(x)).collect()));
    }
    super::nn::pool(&Args { op: "MaxPool", attrs: &attrs, operands: &a.operands[..1] })
}

/// `MaxPoolGradGrad*` (the pool's output) and `ResizeBilinearGrad` (the original image): operand 1's type.
pub(super) fn pooled(a: &Args) -> Result<Vec<OutType>, String> {
    Ok(vec![a.same(1)?])
}

/// `ResizeBilinear`, `ResizeNearestNeighbor` and `ResizeNearestNeighborGrad`
/// `(images, size)`: `[batch, size..., channels]`; a bilinear resize gives f32.
pub(super) fn resize(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let &[b, _, _, c] = x.shape else { return Err(format!("images {:?} are not 4-D", x.shape)) };
    let &[h, w] = a.ints(1, "size")? else { return Err("size must hold 2 values".into()) };
    let dtype = if a.op == "ResizeBilinear" { DType::F32 } else { x.dtype };
    Ok(vec![OutType::new(dtype, vec![b, dim(h, "height")?, dim(w, "width")?, c])])
}

/// `ExtractImagePatches(images)`: one pixel per (dilated) window position,
/// `ksize_rows · ksize_cols · depth` deep.
pub(super) fn patches(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let &[b, h, w, d] = x.shape else { return Err(format!("images {:?} are not 4-D", x.shape)) };
    let pair = |key: &str| -> Result<[usize; 2], String> {
        match a.int_list(key).as_slice() {
            &[1, r, c, 1] if r > 0 && c > 0 => Ok([r as usize, c as usize]),
            other => Err(format!("{key} {other:?} is not [1, rows, cols, 1]")),
        }
    };
    let (k, s, r) = (pair("ksizes")?, pair("strides")?, pair("rates")?);
    let same = a.str_attr("padding", "VALID") == "SAME";
    let size = |i: usize, n: usize| {
        let span = (k[i] - 1) * r[i] + 1;
        if same {
            n.div_ceil(s[i])
        } else {
            (n + s[i]).saturating_sub(span) / s[i]
        }
    };
    Ok(vec![OutType::new(x.dtype, vec![b, size(0, h), size(1, w), k[0] * k[1] * d])])
}

/// The generic `Conv` op as the fixed-rank op it is for an input of `rank`
/// (`Conv2D` for 4, `Conv3D` for 5), with that op's attributes: the layout
/// named as those ops name it, empty lists dropped, `batch_dims` and
/// `groups` checked and removed (a grouped convolution is the fixed-rank
/// op's business: its filter has fewer input channels).
pub fn conv_as_fixed_rank(attrs: &AttrMap, rank: usize) -> Result<(&'static str, AttrMap), String> {
    let (op, last, first) = match rank {
        4 => ("Conv2D", "NHWC", "NCHW"),
        5 => ("Conv3D", "NDHWC", "NCDHW"),
        _ => return Err(format!("Conv: only 4-D and 5-D inputs are supported, got rank {rank}")),
    };
    let batch_dims = attrs.get_int("batch_dims").unwrap_or(1);
    if batch_dims != 1 {
        return Err(format!("Conv: batch_dims {batch_dims} is not supported (only 1)"));
    }
    let mut out = AttrMap::default();
    for (key, value) in attrs.iter() {
        match key {
            "batch_dims" | "groups" => {}
            "data_format" => {
                let f = match value.as_str() {
                    Some("CHANNELS_LAST") | None => last,
                    Some("CHANNELS_FIRST") => first,
                    Some(other) => return Err(format!("Conv: data_format {other} is not supported")),
                };
                out.insert(key, AttrValue::str(f));
            }
            "dilations" | "explicit_paddings" if value.as_list().is_some_and(|l| l.is_empty()) => {}
            _ => {
                out.insert(key, value.clone());
            }
        }
    }
    Ok((op, out))
}

/// `Conv(input, filter)`: the type of the fixed-rank convolution it is.
pub(super) fn generic_conv(a: &Args) -> Result<Vec<OutType>, String> {
    let (op, attrs) = conv_as_fixed_rank(a.attrs, a.x(0)?.shape.len())?;
    let args = Args { op, attrs: &attrs, operands: a.operands };
    if op == "Conv2D" {
        super::nn::conv2d(&args)
    } else {
        super::nn::conv3d(&args)
    }
}
