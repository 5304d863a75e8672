//! Rules of the indexing ops: strided slices and their gradient, gathers
//! and scatters by index tuples, segment sums, one-hot, top-k membership
//! and `Einsum`. Index operands are read only for their shapes; the
//! operands that fix the output shape (slice bounds, `depth`,
//! `num_segments`, a scatter's `shape`) must be constants.

use super::{axis, dim, Args, OutType};
use crate::ir::DType;

/// `StridedSlice(input, begin, end, strides)` with its five masks, as
/// TensorFlow resolves them: an ellipsis takes the axes no other entry
/// names, a new axis adds a dimension of 1, a shrunk axis disappears, and
/// axes after the last entry are taken whole.
pub(super) fn strided_slice(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let shape = strided_shape(a, x.shape, 1)?;
    Ok(vec![OutType::new(x.dtype, shape)])
}

/// `StridedSliceGrad(shape, begin, end, strides, dy)`: `dy`'s dtype in
/// the constant `shape`.
pub(super) fn strided_slice_grad(a: &Args) -> Result<Vec<OutType>, String> {
    let shape = a.ints(0, "shape")?.iter().map(|&d| dim(d, "dimension")).collect::<Result<Vec<_>, _>>()?;
    Ok(vec![OutType::new(a.x(4)?.dtype, shape)])
}

/// The output shape of a strided slice of `shape` whose bounds are
/// operands `first`, `first + 1` and `first + 2`.
fn strided_shape(a: &Args, shape: &[usize], first: usize) -> Result<Vec<usize>, String> {
    let begin = a.ints(first, "begin")?;
    let end = a.ints(first + 1, "end")?;
    let strides = a.ints(first + 2, "strides")?;
    let n = begin.len();
    if end.len() != n || strides.len() != n {
        return Err("begin, end and strides must have one length".into());
    }
    let mask = |key: &str| a.int_attr(key, 0);
    let (begin_mask, end_mask, ellipsis, new_axis, shrink) =
        (mask("begin_mask"), mask("end_mask"), mask("ellipsis_mask"), mask("new_axis_mask"), mask("shrink_axis_mask"));
    let bit = |m: i64, i: usize| i < 63 && (m >> i) & 1 == 1;
    if (0..n).filter(|&i| bit(ellipsis, i)).count() > 1 {
        return Err("only one ellipsis is allowed".into());
    }
    let rank = shape.len();
    let consuming = (0..n).filter(|&i| !bit(ellipsis, i) && !bit(new_axis, i)).count();
    if consuming > rank {
        return Err(format!("{consuming} slice entries for rank {rank}"));
    }
    let mut out = Vec::with_capacity(rank + n);
    let mut ax = 0usize;
    for i in 0..n {
        if bit(ellipsis, i) {
            out.extend_from_slice(&shape[ax..ax + rank - consuming]);
            ax += rank - consuming;
            continue;
        }
        if bit(new_axis, i) {
            out.push(1);
            continue;
        }
        let size = shape[ax] as i64;
        let s = strides[i];
        if s == 0 {
            return Err("strides must not be zero".into());
        }
        ax += 1;
        if bit(shrink, i) {
            let b = if begin[i] < 0 { begin[i] + size } else { begin[i] };
            if !(0..size).contains(&b) {
                return Err(format!("index {} is out of range for size {size}", begin[i]));
            }
            continue;
        }
        let norm = |v: i64, lo: i64, hi: i64| (if v < 0 { v + size } else { v }).clamp(lo, hi);
        let len = if s > 0 {
            let b = if bit(begin_mask, i) { 0 } else { norm(begin[i], 0, size) };
            let e = if bit(end_mask, i) { size } else { norm(end[i], 0, size) };
            if e > b {
                (e - b + s - 1) / s
            } else {
                0
            }
        } else {
            let b = if bit(begin_mask, i) { size - 1 } else { norm(begin[i], -1, size - 1) };
            let e = if bit(end_mask, i) { -1 } else { norm(end[i], -1, size - 1) };
            if b > e {
                (b - e + (-s) - 1) / (-s)
            } else {
                0
            }
        };
        out.push(len as usize);
    }
    // Without an ellipsis, the remaining axes are taken whole.
    if !(0..n).any(|i| bit(ellipsis, i)) {
        out.extend_from_slice(&shape[ax..]);
    }
    Ok(out)
}

/// `GatherNd(params, indices)`: `indices`' leading dims, then the dims of
/// `params` its last dim does not index.
pub(super) fn gather_nd(a: &Args) -> Result<Vec<OutType>, String> {
    let (params, indices) = (a.x(0)?, a.x(1)?);
    if a.int_attr("batch_dims", 0) != 0 {
        return Err("batch_dims other than 0".into());
    }
    let (&q, lead) = indices.shape.split_last().ok_or("indices must have rank at least 1")?;
    if q > params.shape.len() {
        return Err(format!("index tuples of {q} for params of rank {}", params.shape.len()));
    }
    let mut shape = lead.to_vec();
    shape.extend_from_slice(&params.shape[q..]);
    Ok(vec![OutType::new(params.dtype, shape)])
}

/// `ScatterNd(indices, updates, shape)`: `updates`' dtype in the constant `shape`.
pub(super) fn scatter_nd(a: &Args) -> Result<Vec<OutType>, String> {
    let shape = a.ints(2, "shape")?.iter().map(|&d| dim(d, "dimension")).collect::<Result<Vec<_>, _>>()?;
    Ok(vec![OutType::new(a.x(1)?.dtype, shape)])
}

/// `UnsortedSegmentSum(data, segment_ids, num_segments)`: `num_segments`
/// rows of `data`'s dims past those of `segment_ids`.
pub(super) fn unsorted_segment(a: &Args) -> Result<Vec<OutType>, String> {
    let (data, ids) = (a.x(0)?, a.x(1)?);
    let num = match a.ints(2, "num_segments")? {
        [n] => dim(*n, "num_segments")?,
        other => return Err(format!("num_segments must be a scalar, got {} values", other.len())),
    };
    if !data.shape.starts_with(ids.shape) {
        return Err(format!("segment ids of shape {:?} do not prefix data of shape {:?}", ids.shape, data.shape));
    }
    let mut shape = vec![num];
    shape.extend_from_slice(&data.shape[ids.shape.len()..]);
    Ok(vec![OutType::new(data.dtype, shape)])
}

/// `Concat(concat_dim, values...)`: `ConcatV2`'s rule with the axis moved last.
pub(super) fn concat_v1(a: &Args) -> Result<Vec<OutType>, String> {
    let (&axis, values) = a.operands.split_first().ok_or("expected an axis and values")?;
    let mut rotated = values.to_vec();
    rotated.push(axis);
    super::shape::concat(&Args { op: a.op, attrs: a.attrs, operands: &rotated })
}

/// `Gather(params, indices)`: `indices`' shape followed by `params`' own after its first.
pub(super) fn gather_v1(a: &Args) -> Result<Vec<OutType>, String> {
    let (p, i) = (a.x(0)?, a.x(1)?);
    let rest = p.shape.get(1..).ok_or("params must have rank 1 or more")?;
    let mut shape = i.shape.to_vec();
    shape.extend_from_slice(rest);
    Ok(vec![OutType::new(p.dtype, shape)])
}

/// `LinSpace(start, stop, num)`: `num` (a constant) values of `start`'s dtype.
pub(super) fn lin_space(a: &Args) -> Result<Vec<OutType>, String> {
    let num = match a.ints(2, "num")? {
        [n] if *n > 0 => *n as usize,
        other => return Err(format!("num must be a positive scalar, got {other:?}")),
    };
    Ok(vec![OutType::new(a.x(0)?.dtype, vec![num])])
}

/// `Empty(shape) {dtype}`: the constant `shape`.
pub(super) fn empty(a: &Args) -> Result<Vec<OutType>, String> {
    let shape = a.ints(0, "shape")?.iter().map(|&d| dim(d, "dimension")).collect::<Result<Vec<_>, _>>()?;
    Ok(vec![OutType::new(a.type_attr("dtype", DType::F32), shape)])
}

/// `Bucketize(input)`: i32 of the input's shape.
pub(super) fn bucketize(a: &Args) -> Result<Vec<OutType>, String> {
    Ok(vec![OutType::new(DType::I32, a.x(0)?.shape.to_vec())])
}

/// `LowerBound`/`UpperBound(sorted_inputs, values)`: `out_type` of the values' shape.
pub(super) fn search_sorted(a: &Args) -> Result<Vec<OutType>, String> {
    let (s, v) = (a.x(0)?, a.x(1)?);
    if s.shape.len() != 2 || v.shape.len() != 2 || s.shape[0] != v.shape[0] {
        return Err(format!("sorted_inputs {:?} and values {:?} must be [B, N] and [B, M]", s.shape, v.shape));
    }
    Ok(vec![OutType::new(a.type_attr("out_type", DType::I32), v.shape.to_vec())])
}

/// `TopKV2(input, k)`: values and `index_type` indices, the last dimension cut to the constant `k`.
pub(super) fn top_k(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let n = *x.shape.last().ok_or("input must have rank 1 or more")?;
    let k = match a.ints(1, "k")? {
        [k] if *k >= 0 && *k as usize <= n => *k as usize,
        other => return Err(format!("k must be a scalar in [0, {n}], got {other:?}")),
    };
    let mut shape = x.shape.to_vec();
    *shape.last_mut().ok_or("input must have rank 1 or more")? = k;
    Ok(vec![OutType::new(x.dtype, shape.clone()), OutType::new(a.type_attr("index_type", DType::I32), shape)])
}

/// `OneHot(indices, depth, on_value, off_value) {axis}`: `on_value`'s
/// dtype, `indices`' shape with `depth` inserted at `axis` (-1: last).
pub(super) fn one_hot(a: &Args) -> Result<Vec<OutType>, String> {
    let indices = a.x(0)?;
    let depth = match a.ints(1, "depth")? {
        [d] => dim(*d, "depth")?,
        other => return Err(format!("depth must be a scalar, got {} values", other.len())),
    };
    let rank = indices.shape.len();
    let at = match a.int_attr("axis", -1) {
        -1 => rank,
        k => axis(k, rank + 1)?,
    };
    let mut shape = indices.shape.to_vec();
    shape.insert(at, depth);
    Ok(vec![OutType::new(a.x(2)?.dtype, shape)])
}

/// `InTopKV2(predictions, targets, k)`: one bool per row of `predictions`.
pub(super) fn in_top_k(a: &Args) -> Result<Vec<OutType>, String> {
    match a.x(0)?.shape {
        [rows, _] => Ok(vec![OutType::new(DType::Bool, vec![*rows])]),
        s => Err(format!("predictions must be a matrix, got shape {s:?}")),
    }
}

/// `Einsum(inputs...) {equation}`: the output labels' sizes, in the
/// output's order (implicit output: the labels that appear once, sorted).
/// Ellipses and repeated labels within an operand are left to the kernel.
pub(super) fn einsum(a: &Args) -> Result<Vec<OutType>, String> {
    let equation: String = a.str_attr("equation", "").chars().filter(|c| !c.is_whitespace()).collect();
    if equation.contains("...") {
        return Err(format!("an ellipsis in `{equation}`"));
    }
    let (lhs, out) = match equation.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (equation.as_str(), None),
    };
    let specs: Vec<&str> = lhs.split(',').collect();
    if specs.len() != a.operands.len() {
        return Err(format!("`{equation}` has {} operands, the op {}", specs.len(), a.operands.len()));
    }
    let mut size = std::collections::BTreeMap::new();
    for (spec, x) in specs.iter().zip(a.operands) {
        if spec.chars().count() != x.shape.len() {
            return Err(format!("`{equation}`: operand `{spec}` has rank {}", x.shape.len()));
        }
        for (c, &d) in spec.chars().zip(x.shape) {
            if *size.entry(c).or_insert(d) != d {
                return Err(format!("`{equation}`: label `{c}` has two sizes"));
            }
        }
    }
    let labels: Vec<char> = match out {
        Some(o) => o.chars().collect(),
        None => {
            let all: String = specs.concat();
            let mut once: Vec<char> = all.chars().filter(|&c| all.matches(c).count() == 1).collect();
            once.sort_unstable();
            once
        }
    };
    let shape = labels
        .iter()
        .map(|c| size.get(c).copied().ok_or_else(|| format!("`{equation}`: output label `{c}` is in no operand")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(vec![OutType::new(a.x(0)?.dtype, shape)])
}

#[cfg(test)]
mod tests {
    use super::super::tests::{check, k, k0, x};
    use crate::ir::{AttrValue, DType};

    const F: DType = DType::F32;

    #[test]
    fn strided_slices_follow_every_mask() {
        let input = || x(F, &[4, 5, 6]);
        let ss = |attrs: &[(&str, AttrValue)], b: &[i64], e: &[i64], s: &[i64], want: Result<&[usize], &str>| {
            let want: Result<Vec<(DType, &[usize])>, &str> = want.map(|w| vec![(F, w)]);
            check("StridedSlice", attrs, &[input(), k(b), k(e), k(s)], want.as_deref().map_err(|e| *e));
        };
        ss(&[], &[1], &[3], &[1], Ok(&[2, 5, 6]));
        ss(&[], &[0, 1], &[4, 5], &[2, 3], Ok(&[2, 2, 6]));
        ss(&[], &[-1], &[-5], &[-1], Ok(&[4, 5, 6]));
        ss(&[], &[3], &[0], &[-2], Ok(&[2, 5, 6]));
        ss(&[], &[3], &[1], &[1], Ok(&[0, 5, 6]));
        ss(&[("begin_mask", AttrValue::Int(1)), ("end_mask", AttrValue::Int(1))], &[9], &[0], &[1], Ok(&[4, 5, 6]));
        ss(&[("shrink_axis_mask", AttrValue::Int(1))], &[-1], &[0], &[1], Ok(&[5, 6]));
        ss(&[("new_axis_mask", AttrValue::Int(1))], &[0, 0], &[1, 2], &[1, 1], Ok(&[1, 2, 5, 6]));
        ss(&[("ellipsis_mask", AttrValue::Int(1))], &[0, 1], &[0, 3], &[1, 1], Ok(&[4, 5, 2]));
        ss(
            &[("ellipsis_mask", AttrValue::Int(2)), ("shrink_axis_mask", AttrValue::Int(1))],
            &[2, 0],
            &[3, 0],
            &[1, 1],
            Ok(&[5, 6]),
        );
        ss(&[("shrink_axis_mask", AttrValue::Int(1))], &[4], &[5], &[1], Err("out of range"));
        ss(&[], &[0], &[1], &[0], Err("zero"));
        check("StridedSlice", &[], &[input(), x(DType::I32, &[1]), k(&[1]), k(&[1])], Err("compile-time constant"));
        check("StridedSliceGrad", &[], &[k(&[4, 5]), k(&[0]), k(&[1]), k(&[1]), x(F, &[1, 5])], Ok(&[(F, &[4, 5])]));
    }

    #[test]
    fn gathers_scatters_and_segments() {
        check("GatherNd", &[], &[x(F, &[4, 5, 6]), x(DType::I32, &[3, 2])], Ok(&[(F, &[3, 6])]));
        check("GatherNd", &[], &[x(F, &[4]), x(DType::I32, &[2, 3])], Err("rank"));
        check("ScatterNd", &[], &[x(DType::I32, &[2, 1]), x(F, &[2, 3]), k(&[5, 3])], Ok(&[(F, &[5, 3])]));
        check("TensorScatterUpdate", &[], &[x(F, &[5, 3]), x(DType::I32, &[2, 1]), x(F, &[2, 3])], Ok(&[(F, &[5, 3])]));
        check("UnsortedSegmentSum", &[], &[x(F, &[6, 3]), x(DType::I32, &[6]), k0(4)], Ok(&[(F, &[4, 3])]));
        check("UnsortedSegmentSum", &[], &[x(F, &[6, 3]), x(DType::I32, &[5]), k0(4)], Err("prefix"));
    }

    #[test]
    fn one_hot_in_top_k_and_einsum() {
        let on = (DType::F64, vec![], None);
        let idx = x(DType::I32, &[2, 3]);
        check("OneHot", &[], &[idx.clone(), k0(4), on.clone(), on.clone()], Ok(&[(DType::F64, &[2, 3, 4])]));
        let axis0 = [("axis", AttrValue::Int(0))];
        check("OneHot", &axis0, &[idx.clone(), k0(4), on.clone(), on.clone()], Ok(&[(DType::F64, &[4, 2, 3])]));
        check("InTopKV2", &[], &[x(F, &[8, 10]), x(DType::I32, &[8]), k0(3)], Ok(&[(DType::Bool, &[8])]));
        let eq = |e: &str| [("equation", AttrValue::str(e))];
        check("Einsum", &eq("bij,bjk->bik"), &[x(F, &[2, 3, 4]), x(F, &[2, 4, 5])], Ok(&[(F, &[2, 3, 5])]));
        check("Einsum", &eq("abc,cd->abd"), &[x(F, &[2, 3, 4]), x(F, &[4, 7])], Ok(&[(F, &[2, 3, 7])]));
        check("Einsum", &eq("i,j"), &[x(F, &[3]), x(F, &[2])], Ok(&[(F, &[3, 2])]));
        check("Einsum", &eq("ij->ji"), &[x(F, &[3, 2])], Ok(&[(F, &[2, 3])]));
        check("Einsum", &eq("ij,jk->ik"), &[x(F, &[3, 2]), x(F, &[3, 4])], Err("two sizes"));
        check("Einsum", &eq("...ij,jk->...ik"), &[x(F, &[3, 2]), x(F, &[2, 4])], Err("ellipsis"));
    }
}
