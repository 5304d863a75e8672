//! Spatial data-movement ops: `DepthToSpace`, `SpaceToDepth`,
//! `SpaceToBatchND`/`SpaceToBatch`, `BatchToSpaceND`/`BatchToSpace`,
//! `MirrorPad` with its gradient `MirrorPadGrad`, `ExtractImagePatches`,
//! and the layout helpers
//! `DataFormatDimMap` and `DataFormatVecPermute`.
//!
//! Each movement op is computed as an index map: for every output element,
//! the flat index of the input element it copies, or [`FILL`] for a padded
//! zero. The map depends only on shapes and constant operands, so the same
//! function serves the kernels (any dtype) and the StableHLO lowering,
//! which runs these kernels on element indices and gathers. `MirrorPadGrad`
//! sums each gradient element into the input element `MirrorPad` copied.
//! Cost: one pass over the output, rank operations per element.

use crate::exec::error::KernelError;
use crate::exec::limits::checked_elements;
use crate::exec::tensor::{with_element_type, Element, Tensor};
use crate::ir::{AttrMap, DType};

/// An output element that holds a zero (padding) rather than a copy.
pub(crate) const FILL: usize = usize::MAX;

/// Runs `op` if it is one of these ops; `None` otherwise.
pub(crate) fn dispatch(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Option<Result<Vec<Tensor>, KernelError>> {
    let run = || -> Result<Vec<Tensor>, KernelError> {
        let x = super::arg(op, inputs, 0)?;
        Ok(vec![match op {
            "DataFormatDimMap" => data_format_dim_map(op, attrs, x)?,
            "MirrorPadGrad" => mirror_pad_grad(op, attrs, x, super::arg(op, inputs, 1)?)?,
            _ => {
                let (shape, map) = index_map(op, attrs, x.shape(), &inputs[1..])?;
                apply(op, x, &shape, &map)?
            }
        }])
    };
    matches!(
        op,
        "BatchToSpace"
            | "BatchToSpaceND"
            | "DataFormatDimMap"
            | "DataFormatVecPermute"
            | "DepthToSpace"
            | "ExtractImagePatches"
            | "MirrorPad"
            | "MirrorPadGrad"
            | "SpaceToBatch"
            | "SpaceToBatchND"
            | "SpaceToDepth"
    )
    .then(run)
}

/// The output shape of movement op `op` on an input of `shape` and, for each
/// output element, the flat input index it copies ([`FILL`] for a zero).
/// `rest` are the op's operands after the input (block shapes, paddings).
pub(crate) fn index_map(
    op: &str,
    attrs: &AttrMap,
    shape: &[usize],
    rest: &[Tensor],
) -> Result<(Vec<usize>, Vec<usize>), KernelError> {
    let operand = |i: usize| super::arg(op, rest, i);
    let block_attr = || -> Result<usize, KernelError> {
        match attrs.get_int("block_size") {
            Some(b) if b >= 2 => Ok(b as usize),
            Some(b) => Err(KernelError::invalid(op, format!("block_size must be at least 2, got {b}"))),
            None => Err(KernelError::invalid(op, "missing int attribute `block_size`")),
        }
    };
    match op {
        "DepthToSpace" | "SpaceToDepth" => {
            let nchw = match attrs.get_str("data_format").unwrap_or("NHWC") {
                "NHWC" => false,
                "NCHW" => true,
                other => return Err(KernelError::invalid(op, format!("data_format {other} is not supported"))),
            };
            depth_space(op, shape, block_attr()?, nchw, op == "DepthToSpace")
        }
        "SpaceToBatchND" | "BatchToSpaceND" => {
            let block = block_shape(op, operand(0)?)?;
            let pads = pairs(op, operand(1)?, block.len(), if op == "SpaceToBatchND" { "paddings" } else { "crops" })?;
            space_batch(op, shape, &block, &pads, op == "SpaceToBatchND")
        }
        "SpaceToBatch" | "BatchToSpace" => {
            let b = block_attr()?;
            if shape.len() != 4 {
                return Err(KernelError::invalid(op, format!("input must be 4-D, got shape {shape:?}")));
            }
            let pads = pairs(op, operand(0)?, 2, if op == "SpaceToBatch" { "paddings" } else { "crops" })?;
            space_batch(op, shape, &[b, b], &pads, op == "SpaceToBatch")
        }
        "MirrorPad" => {
            let pads = pairs(op, operand(0)?, shape.len(), "paddings")?;
            mirror_pad(op, shape, &pads, reflect(op, attrs)?)
        }
        "DataFormatVecPermute" => vec_permute(op, attrs, shape),
        "ExtractImagePatches" => patches(op, attrs, shape),
        _ => Err(KernelError::invalid(op, "not a spatial movement op")),
    }
}

/// The tensor of `shape` whose element `k` is `x`'s flat element `map[k]` (zero for [`FILL`]).
pub(crate) fn apply(op: &str, x: &Tensor, shape: &[usize], map: &[usize]) -> Result<Tensor, KernelError> {
    checked_elements(op, x.dtype(), shape)?;
    fn run<T: Element + Default>(x: &Tensor, shape: &[usize], map: &[usize]) -> Result<Tensor, KernelError> {
        let v = x.to_vec::<T>().expect("dispatched on this dtype");
        let out = map.iter().map(|&i| if i == FILL { T::default() } else { v[i].clone() }).collect();
        Tensor::from_vec(shape, out)
    }
    with_element_type!(x, T => run::<T>(x, shape, map), resource => {
        Err(KernelError::dtype(op, x.dtype(), "resource handles have no elements"))
    })
}

/// Row-major strides of `shape`.
fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// Calls `f(k, index)` for every element of `shape` in row-major order.
fn for_each_index(shape: &[usize], mut f: impl FnMut(usize, &[usize])) {
    let count: usize = shape.iter().product();
    let mut idx = vec![0; shape.len()];
    for k in 0..count {
        f(k, &idx);
        for d in (0..shape.len()).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// A block shape: a non-empty vector of positive integers.
fn block_shape(op: &str, t: &Tensor) -> Result<Vec<usize>, KernelError> {
    let v = t.to_i64_vec(op, "block_shape")?;
    if t.shape().len() != 1 || v.is_empty() || v.iter().any(|&b| b < 1) {
        return Err(KernelError::invalid(
            op,
            format!("block_shape must be a non-empty vector of positive sizes, got {v:?}"),
        ));
    }
    Ok(v.into_iter().map(|b| b as usize).collect())
}

/// An `[m, 2]` matrix of non-negative (before, after) amounts.
fn pairs(op: &str, t: &Tensor, m: usize, what: &str) -> Result<Vec<(usize, usize)>, KernelError> {
    let v = t.to_i64_vec(op, what)?;
    if t.shape() != [m, 2] || v.iter().any(|&p| p < 0) {
        return Err(KernelError::invalid(
            op,
            format!("{what} must be a [{m}, 2] matrix of non-negative values, got shape {:?}", t.shape()),
        ));
    }
    Ok(v.chunks(2).map(|p| (p[0] as usize, p[1] as usize)).collect())
}

/// `DepthToSpace` (`to_space`) or `SpaceToDepth` of a 4-D input.
fn depth_space(
    op: &str,
    shape: &[usize],
    bs: usize,
    nchw: bool,
    to_space: bool,
) -> Result<(Vec<usize>, Vec<usize>), KernelError> {
    let &[n, a, b, c] = shape else {
        return Err(KernelError::invalid(op, format!("input must be 4-D, got shape {shape:?}")));
    };
    // (batch, height, width, channels) of the input, in either layout.
    let (h, w, ch) = if nchw { (b, c, a) } else { (a, b, c) };
    let layout = |n: usize, h: usize, w: usize, c: usize| if nchw { [n, c, h, w] } else { [n, h, w, c] };
    let (oh, ow, oc) = if to_space {
        if !ch.is_multiple_of(bs * bs) {
            return Err(KernelError::invalid(op, format!("depth {ch} is not divisible by block_size² = {}", bs * bs)));
        }
        (h * bs, w * bs, ch / (bs * bs))
    } else {
        if !h.is_multiple_of(bs) || !w.is_multiple_of(bs) {
            return Err(KernelError::invalid(
                op,
                format!("height {h} and width {w} must be divisible by block_size {bs}"),
            ));
        }
        (h / bs, w / bs, ch * bs * bs)
    };
    let out = layout(n, oh, ow, oc).to_vec();
    let s = strides(shape);
    let at = |i: [usize; 4]| i.iter().zip(&s).map(|(i, s)| i * s).sum::<usize>();
    let mut map = vec![0; out.iter().product()];
    for_each_index(&out, |k, i| {
        let (bi, y, x, z) = if nchw { (i[0], i[2], i[3], i[1]) } else { (i[0], i[1], i[2], i[3]) };
        map[k] = if to_space {
            let depth = ((y % bs) * bs + x % bs) * oc + z;
            at(layout(bi, y / bs, x / bs, depth))
        } else {
            let (block, c) = (z / ch, z % ch);
            at(layout(bi, y * bs + block / bs, x * bs + block % bs, c))
        };
    });
    Ok((out, map))
}

/// `SpaceToBatchND` (`to_batch`, `pads` are paddings) or `BatchToSpaceND` (`pads` are crops).
fn space_batch(
    op: &str,
    shape: &[usize],
    block: &[usize],
    pads: &[(usize, usize)],
    to_batch: bool,
) -> Result<(Vec<usize>, Vec<usize>), KernelError> {
    let m = block.len();
    if shape.len() < m + 1 {
        return Err(KernelError::invalid(op, format!("input of shape {shape:?} has fewer than {} dimensions", m + 1)));
    }
    let blocks: usize = block.iter().product();
    let mut out = shape.to_vec();
    if to_batch {
        out[0] = shape[0] * blocks;
        for d in 0..m {
            let padded = shape[d + 1] + pads[d].0 + pads[d].1;
            if !padded.is_multiple_of(block[d]) {
                return Err(KernelError::invalid(
                    op,
                    format!("padded dimension {} ({padded}) is not divisible by block size {}", d + 1, block[d]),
                ));
            }
            out[d + 1] = padded / block[d];
        }
    } else {
        if !shape[0].is_multiple_of(blocks) {
            return Err(KernelError::invalid(
                op,
                format!("batch {} is not divisible by the {blocks} blocks", shape[0]),
            ));
        }
        out[0] = shape[0] / blocks;
        for d in 0..m {
            let full = shape[d + 1] * block[d];
            if pads[d].0 + pads[d].1 > full {
                return Err(KernelError::invalid(
                    op,
                    format!("crops {:?} exceed dimension {} ({full})", pads[d], d + 1),
                ));
            }
            out[d + 1] = full - pads[d].0 - pads[d].1;
        }
    }
    let s = strides(shape);
    let mut map = vec![0; out.iter().product()];
    // The block offset of a batch of the blocked side, row-major over the block dimensions.
    let offsets = |mut q: usize, into: &mut [usize]| {
        for d in (0..m).rev() {
            into[d] = q % block[d];
            q /= block[d];
        }
    };
    let mut off = vec![0; m];
    for_each_index(&out, |k, i| {
        let mut src = 0;
        if to_batch {
            let (q, b) = (i[0] / shape[0], i[0] % shape[0]);
            offsets(q, &mut off);
            src += b * s[0];
            for d in 0..m {
                let p = i[d + 1] * block[d] + off[d];
                if p < pads[d].0 || p - pads[d].0 >= shape[d + 1] {
                    map[k] = FILL;
                    return;
                }
                src += (p - pads[d].0) * s[d + 1];
            }
        } else {
            let mut q = 0;
            for d in 0..m {
                let u = i[d + 1] + pads[d].0;
                q = q * block[d] + u % block[d];
                src += (u / block[d]) * s[d + 1];
            }
            src += (q * out[0] + i[0]) * s[0];
        }
        for d in m + 1..shape.len() {
            src += i[d] * s[d];
        }
        map[k] = src;
    });
    Ok((out, map))
}

/// `[1, r, c, 1]` of a list attribute of `ExtractImagePatches`.
fn window_pair(op: &str, attrs: &AttrMap, key: &str) -> Result<[usize; 2], KernelError> {
    let list: Vec<i64> = attrs.get(key).and_then(|v| v.as_int_list()).unwrap_or_default();
    match list.as_slice() {
        &[1, r, c, 1] if r > 0 && c > 0 => Ok([r as usize, c as usize]),
        other => Err(KernelError::invalid(
            op,
            format!("{key} must be [1, rows, cols, 1] with positive sizes, got {other:?}"),
        )),
    }
}

/// `ExtractImagePatches(images)`: every (dilated) window of the NHWC images
/// as one pixel of `ksize_rows · ksize_cols · depth` values (row, column,
/// channel order), zeros where a SAME window reaches past the edge.
fn patches(op: &str, attrs: &AttrMap, shape: &[usize]) -> Result<(Vec<usize>, Vec<usize>), KernelError> {
    let &[b, h, w, d] = shape else {
        return Err(KernelError::invalid(op, format!("images must be 4-D, got shape {shape:?}")));
    };
    let (k, st, rate) =
        (window_pair(op, attrs, "ksizes")?, window_pair(op, attrs, "strides")?, window_pair(op, attrs, "rates")?);
    let same = match attrs.get_str("padding") {
        Some("SAME") => true,
        Some("VALID") => false,
        other => return Err(KernelError::invalid(op, format!("padding must be SAME or VALID, got {other:?}"))),
    };
    let mut out_size = [0; 2];
    let mut before = [0; 2];
    for (i, n) in [h, w].into_iter().enumerate() {
        let span = (k[i] - 1) * rate[i] + 1;
        out_size[i] = if same { n.div_ceil(st[i]) } else { (n + st[i]).saturating_sub(span) / st[i] };
        if same {
            before[i] = ((out_size[i].max(1) - 1) * st[i] + span).saturating_sub(n) / 2;
        }
    }
    let out = vec![b, out_size[0], out_size[1], k[0] * k[1] * d];
    let mut map = vec![0; checked_elements(op, DType::I64, &out)?];
    for_each_index(&out, |n, i| {
        let (tap, ch) = (i[3] / d, i[3] % d);
        let y = (i[1] * st[0] + (tap / k[1]) * rate[0]) as isize - before[0] as isize;
        let x = (i[2] * st[1] + (tap % k[1]) * rate[1]) as isize - before[1] as isize;
        map[n] = if y < 0 || x < 0 || y as usize >= h || x as usize >= w {
            FILL
        } else {
            ((i[0] * h + y as usize) * w + x as usize) * d + ch
        };
    });
    Ok((out, map))
}

/// True for `mode = "REFLECT"`, false for `"SYMMETRIC"`.
fn reflect(op: &str, attrs: &AttrMap) -> Result<bool, KernelError> {
    match attrs.get_str("mode") {
        Some("REFLECT") => Ok(true),
        Some("SYMMETRIC") => Ok(false),
        Some(other) => Err(KernelError::invalid(op, format!("mode must be REFLECT or SYMMETRIC, got {other}"))),
        None => Err(KernelError::invalid(op, "missing string attribute `mode`")),
    }
}

/// `MirrorPad`: each padded position reads its mirror image inside the input
/// (REFLECT leaves the edge out of the mirror, SYMMETRIC repeats it).
fn mirror_pad(
    op: &str,
    shape: &[usize],
    pads: &[(usize, usize)],
    reflect: bool,
) -> Result<(Vec<usize>, Vec<usize>), KernelError> {
    let edge = usize::from(reflect);
    for (d, &(b, a)) in pads.iter().enumerate() {
        let n = shape[d];
        if b + edge > n || a + edge > n {
            let most = n.saturating_sub(edge);
            return Err(KernelError::invalid(
                op,
                format!("paddings ({b}, {a}) of dimension {d} exceed {most} for size {n}"),
            ));
        }
    }
    let out: Vec<usize> = shape.iter().zip(pads).map(|(n, (b, a))| n + b + a).collect();
    let s = strides(shape);
    let mut map = vec![0; out.iter().product()];
    for_each_index(&out, |k, i| {
        map[k] = (0..shape.len())
            .map(|d| {
                let (n, p) = (shape[d] as isize, i[d] as isize - pads[d].0 as isize);
                let e = edge as isize;
                let src = if p < 0 {
                    -p - 1 + e
                } else if p >= n {
                    2 * n - 1 - p - e
                } else {
                    p
                };
                src as usize * s[d]
            })
            .sum();
    });
    Ok((out, map))
}

/// `MirrorPadGrad(grad, paddings)`: each element of `grad` summed into the
/// input element `MirrorPad` copied it from.
fn mirror_pad_grad(op: &str, attrs: &AttrMap, g: &Tensor, paddings: &Tensor) -> Result<Tensor, KernelError> {
    let pads = pairs(op, paddings, g.shape().len(), "paddings")?;
    let mut shape = Vec::new();
    for (d, &(b, a)) in pads.iter().enumerate() {
        match g.shape()[d].checked_sub(b + a) {
            Some(n) => shape.push(n),
            None => {
                return Err(KernelError::invalid(op, format!("paddings of dimension {d} exceed the gradient's size")))
            }
        }
    }
    let (_, map) = mirror_pad(op, &shape, &pads, reflect(op, attrs)?)?;
    scatter_add(op, g, &shape, &map)
}

/// The tensor of `shape` with each element `k` of `g` added at flat index `map[k]`.
pub(crate) fn scatter_add(op: &str, g: &Tensor, shape: &[usize], map: &[usize]) -> Result<Tensor, KernelError> {
    checked_elements(op, g.dtype(), shape)?;
    fn run<T: Element + Default + Copy + std::ops::Add<Output = T>>(
        g: &Tensor,
        shape: &[usize],
        map: &[usize],
    ) -> Result<Tensor, KernelError> {
        let v = g.to_vec::<T>().expect("dispatched on this dtype");
        let mut out = vec![T::default(); shape.iter().product()];
        for (&i, &x) in map.iter().zip(&v) {
            if i != FILL {
                out[i] = out[i] + x;
            }
        }
        Tensor::from_vec(shape, out)
    }
    match g.dtype() {
        DType::F32 => run::<f32>(g, shape, map),
        DType::F64 => run::<f64>(g, shape, map),
        DType::I32 => run::<i32>(g, shape, map),
        DType::I64 => run::<i64>(g, shape, map),
        other => Err(KernelError::dtype(op, other, "a float or 32/64-bit integer gradient is required")),
    }
}

/// The `src_format` and `dst_format` attributes, checked to be permutations of each other.
fn formats(op: &str, attrs: &AttrMap) -> Result<(Vec<u8>, Vec<u8>), KernelError> {
    let src = attrs.get_str("src_format").unwrap_or("NHWC").as_bytes().to_vec();
    let dst = attrs.get_str("dst_format").unwrap_or("NCHW").as_bytes().to_vec();
    let (mut a, mut b) = (src.clone(), dst.clone());
    a.sort_unstable();
    b.sort_unstable();
    if a != b || !(4..=5).contains(&src.len()) || a.windows(2).any(|w| w[0] == w[1]) {
        return Err(KernelError::invalid(
            op,
            format!(
                "src_format {} and dst_format {} must be permutations of each other, of 4 or 5 distinct letters",
                String::from_utf8_lossy(&src),
                String::from_utf8_lossy(&dst)
            ),
        ));
    }
    Ok((src, dst))
}

/// For each dimension index of `src_format`, its index in `dst_format`.
pub(crate) fn dim_map_table(op: &str, attrs: &AttrMap) -> Result<Vec<i64>, KernelError> {
    let (src, dst) = formats(op, attrs)?;
    Ok(src.iter().map(|ch| dst.iter().position(|d| d == ch).expect("a permutation") as i64).collect())
}

/// `DataFormatDimMap(x)`: each dimension index of `src_format` (negative
/// ones count from the end) as the index of the same dimension in `dst_format`.
fn data_format_dim_map(op: &str, attrs: &AttrMap, x: &Tensor) -> Result<Tensor, KernelError> {
    let table = dim_map_table(op, attrs)?;
    let n = table.len() as i64;
    let values = x.to_i64_vec(op, "x")?;
    if let Some(v) = values.iter().find(|&&v| v < -n || v >= n) {
        return Err(KernelError::invalid(op, format!("dimension index {v} is out of range [-{n}, {n})")));
    }
    let mapped: Vec<i64> = values.iter().map(|&v| table[v.rem_euclid(n) as usize]).collect();
    match x.dtype() {
        DType::I32 => Tensor::from_vec(x.shape(), mapped.into_iter().map(|v| v as i32).collect()),
        DType::I64 => Tensor::from_vec(x.shape(), mapped),
        other => Err(KernelError::dtype(op, other, "x must be int32 or int64")),
    }
}

/// `DataFormatVecPermute(x)`: the rows of `x` (a vector or an `[n, 2]`
/// matrix, one row per dimension of `src_format`, or per spatial dimension
/// when it has two fewer rows) reordered as `dst_format` orders them.
fn vec_permute(op: &str, attrs: &AttrMap, shape: &[usize]) -> Result<(Vec<usize>, Vec<usize>), KernelError> {
    let (src, dst) = formats(op, attrs)?;
    let rows = match shape {
        &[r] | &[r, 2] => r,
        _ => return Err(KernelError::invalid(op, format!("x must be a vector or an [n, 2] matrix, got {shape:?}"))),
    };
    let spatial = |f: &[u8]| f.iter().copied().filter(|&c| c != b'N' && c != b'C').collect::<Vec<u8>>();
    let (src, dst) = if rows == src.len() {
        (src, dst)
    } else if rows + 2 == src.len() {
        (spatial(&src), spatial(&dst))
    } else {
        return Err(KernelError::invalid(op, format!("x has {rows} rows for the {}-letter formats", src.len())));
    };
    let width: usize = shape[1..].iter().product();
    let map = (0..rows * width)
        .map(|k| {
            let (r, j) = (k / width, k % width);
            src.iter().position(|&c| c == dst[r]).expect("a permutation") * width + j
        })
        .collect();
    Ok((shape.to_vec(), map))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::AttrValue;

    fn attrs(items: &[(&str, AttrValue)]) -> AttrMap {
        items.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }

    #[test]
    fn depth_to_space_inverts_space_to_depth() {
        let x = Tensor::from_vec(&[1, 4, 4, 2], (0..32).collect::<Vec<i64>>()).unwrap();
        let a = attrs(&[("block_size", AttrValue::Int(2))]);
        let d = dispatch("SpaceToDepth", &a, std::slice::from_ref(&x)).unwrap().unwrap().remove(0);
        assert_eq!(d.shape(), &[1, 2, 2, 8]);
        // The first output pixel holds the 2×2 top-left block, row by row, channels innermost.
        assert_eq!(&d.to_vec::<i64>().unwrap()[..8], &[0, 1, 2, 3, 8, 9, 10, 11]);
        let back = dispatch("DepthToSpace", &a, &[d]).unwrap().unwrap().remove(0);
        assert_eq!(back, x);
    }

    #[test]
    fn space_to_batch_pads_and_batch_to_space_crops() {
        let x = Tensor::from_vec(&[1, 2, 3, 1], (1..=6).collect::<Vec<i32>>()).unwrap();
        let block = Tensor::vector(vec![2i32, 2]);
        let pads = Tensor::from_vec(&[2, 2], vec![0i32, 0, 1, 0]).unwrap();
        let none = AttrMap::new();
        let b =
            dispatch("SpaceToBatchND", &none, &[x.clone(), block.clone(), pads.clone()]).unwrap().unwrap().remove(0);
        assert_eq!(b.shape(), &[4, 1, 2, 1]);
        assert_eq!(b.to_vec::<i32>().unwrap(), vec![0, 2, 1, 3, 0, 5, 4, 6]);
        let back = dispatch("BatchToSpaceND", &none, &[b, block, pads]).unwrap().unwrap().remove(0);
        assert_eq!(back, x);
    }

    #[test]
    fn mirror_pad_modes_and_their_gradient() {
        let x = Tensor::vector(vec![1.0f32, 2.0, 3.0]);
        let p = Tensor::from_vec(&[1, 2], vec![2i32, 1]).unwrap();
        let reflect = attrs(&[("mode", AttrValue::Str("REFLECT".into()))]);
        let symmetric = attrs(&[("mode", AttrValue::Str("SYMMETRIC".into()))]);
        let r = dispatch("MirrorPad", &reflect, &[x.clone(), p.clone()]).unwrap().unwrap().remove(0);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![3.0, 2.0, 1.0, 2.0, 3.0, 2.0]);
        let s = dispatch("MirrorPad", &symmetric, &[x.clone(), p.clone()]).unwrap().unwrap().remove(0);
        assert_eq!(s.to_vec::<f32>().unwrap(), vec![2.0, 1.0, 1.0, 2.0, 3.0, 3.0]);
        let g = Tensor::vector(vec![1.0f32, 10.0, 100.0, 1000.0, 10000.0, 100000.0]);
        let dx = dispatch("MirrorPadGrad", &reflect, &[g, p.clone()]).unwrap().unwrap().remove(0);
        assert_eq!(dx.to_vec::<f32>().unwrap(), vec![100.0, 101010.0, 10001.0]);
        let too_far = Tensor::from_vec(&[1, 2], vec![3i32, 0]).unwrap();
        assert!(dispatch("MirrorPad", &reflect, &[x, too_far]).unwrap().is_err());
    }

    #[test]
    fn data_format_ops() {
        let a = attrs(&[]);
        let dims = Tensor::vector(vec![0i32, 1, 2, 3, -1]);
        let m = dispatch("DataFormatDimMap", &a, &[dims]).unwrap().unwrap().remove(0);
        assert_eq!(m.to_vec::<i32>().unwrap(), vec![0, 2, 3, 1, 1]);
        let v = Tensor::vector(vec![10i64, 20, 30, 40]);
        let p = dispatch("DataFormatVecPermute", &a, &[v]).unwrap().unwrap().remove(0);
        assert_eq!(p.to_vec::<i64>().unwrap(), vec![10, 40, 20, 30]);
        let bad = attrs(&[("dst_format", AttrValue::Str("NCHX".into()))]);
        assert!(dispatch("DataFormatDimMap", &bad, &[Tensor::scalar(1i32)]).unwrap().is_err());
    }
}
