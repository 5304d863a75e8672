//! Shape-changing rules: reshapes, transposes, tiling, padding,
//! concatenation, packing, slicing and splitting, with their shapes,
//! axes, permutations and sizes read from constant operands.

use super::{axis, dim, Args, OutType};

/// `Reshape(x, shape)`: one `-1` takes the remaining elements.
pub(super) fn reshape(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let target = a.ints(1, "shape")?;
    let count: usize = x.shape.iter().product();
    let known: usize = target.iter().filter(|&&d| d != -1).map(|&d| dim(d, "dimension")).product::<Result<_, _>>()?;
    let wild = target.iter().filter(|&&d| d == -1).count();
    let mut shape = Vec::with_capacity(target.len());
    for &d in target {
        shape.push(if d == -1 {
            if wild > 1 || known == 0 || !count.is_multiple_of(known) {
                return Err(format!("cannot reshape {:?} to {target:?}", x.shape));
            }
            count / known
        } else {
            dim(d, "dimension")?
        });
    }
    if shape.iter().product::<usize>() != count {
        return Err(format!("cannot reshape {:?} ({count} elements) to {target:?}", x.shape));
    }
    Ok(vec![OutType::new(x.dtype, shape)])
}

/// `ExpandDims(x, axis)`: a 1 inserted at `axis` (of rank + 1).
pub(super) fn expand_dims(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let at = *a.ints(1, "axis")?.first().ok_or("the axis is empty")?;
    let at = axis(at, x.shape.len() + 1)?;
    let mut shape = x.shape.to_vec();
    shape.insert(at, 1);
    Ok(vec![OutType::new(x.dtype, shape)])
}

/// `Squeeze(x)`: the size-1 dims named by `squeeze_dims` (all when empty) removed.
pub(super) fn squeeze(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let mut dims = a.int_list("squeeze_dims");
    if dims.is_empty() {
        dims = a.int_list("axis");
    }
    let drop: Vec<usize> = dims.iter().map(|&d| axis(d, x.shape.len())).collect::<Result<_, _>>()?;
    let mut shape = Vec::with_capacity(x.shape.len());
    for (i, &d) in x.shape.iter().enumerate() {
        if drop.contains(&i) && d != 1 {
            return Err(format!("cannot squeeze dimension {i} of size {d}"));
        }
        if !(drop.contains(&i) || drop.is_empty() && d == 1) {
            shape.push(d);
        }
    }
    Ok(vec![OutType::new(x.dtype, shape)])
}

/// `Transpose(x, perm)`.
pub(super) fn transpose(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let perm = a.ints(1, "permutation")?;
    if perm.len() != x.shape.len() {
        return Err(format!("permutation {perm:?} does not fit rank {}", x.shape.len()));
    }
    let shape = perm.iter().map(|&p| axis(p, x.shape.len()).map(|p| x.shape[p])).collect::<Result<_, _>>()?;
    Ok(vec![OutType::new(x.dtype, shape)])
}

/// `Tile(x, multiples)`.
pub(super) fn tile(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let m = a.ints(1, "multiples")?;
    if m.len() != x.shape.len() {
        return Err(format!("{} multiples for rank {}", m.len(), x.shape.len()));
    }
    let shape = x.shape.iter().zip(m).map(|(&d, &k)| dim(k, "multiple").map(|k| d * k)).collect::<Result<_, _>>()?;
    Ok(vec![OutType::new(x.dtype, shape)])
}

/// `Pad`, `PadV2`: each dim grows by its two paddings.
pub(super) fn pad(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let p = a.ints(1, "paddings")?;
    if p.len() != 2 * x.shape.len() {
        return Err(format!("paddings have {} values for rank {}", p.len(), x.shape.len()));
    }
    let shape = x
        .shape
        .iter()
        .zip(p.chunks(2))
        .map(|(&d, lr)| Ok(d + dim(lr[0], "padding")? + dim(lr[1], "padding")?))
        .collect::<Result<_, String>>()?;
    Ok(vec![OutType::new(x.dtype, shape)])
}

/// `ConcatV2(values..., axis)`.
pub(super) fn concat(a: &Args) -> Result<Vec<OutType>, String> {
    let n = a.operands.len();
    if n < 2 {
        return Err("expected values and an axis".into());
    }
    let (axis_at, values) = (n - 1, 0..n - 1);
    let first = a.x(values.start)?;
    let at = axis(*a.ints(axis_at, "axis")?.first().ok_or("the axis is empty")?, first.shape.len())?;
    let mut shape = first.shape.to_vec();
    shape[at] = 0;
    for i in values {
        let v = a.x(i)?;
        let fits = v.shape.len() == shape.len() && (0..shape.len()).all(|d| d == at || v.shape[d] == shape[d]);
        if !fits {
            return Err(format!("operand {i} of shape {:?} does not concatenate with {:?}", v.shape, first.shape));
        }
        shape[at] += v.shape[at];
    }
    Ok(vec![OutType::new(first.dtype, shape)])
}

/// `Pack(values...)`: a new dim of size N at `axis`.
pub(super) fn pack(a: &Args) -> Result<Vec<OutType>, String> {
    let first = a.x(0)?;
    if a.operands.iter().any(|v| v.shape != first.shape) {
        return Err("the packed values differ in shape".into());
    }
    let at = axis(a.int_attr("axis", 0), first.shape.len() + 1)?;
    let mut shape = first.shape.to_vec();
    shape.insert(at, a.operands.len());
    Ok(vec![OutType::new(first.dtype, shape)])
}

/// `Unpack(x)`: `num` values with dim `axis` removed.
pub(super) fn unpack(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let at = axis(a.int_attr("axis", 0), x.shape.len())?;
    let num = x.shape[at];
    let mut shape = x.shape.to_vec();
    shape.remove(at);
    Ok(vec![OutType::new(x.dtype, shape); num])
}

/// `Slice(x, begin, size)`: a size of -1 takes the rest of the dim.
pub(super) fn slice(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let (begin, size) = (a.ints(1, "begin")?, a.ints(2, "size")?);
    if begin.len() != x.shape.len() || size.len() != x.shape.len() {
        return Err(format!("begin and size must have {} values", x.shape.len()));
    }
    let mut shape = Vec::with_capacity(size.len());
    for ((&d, &b), &s) in x.shape.iter().zip(begin).zip(size) {
        let b = dim(b, "begin")?;
        let s = if s == -1 { d.saturating_sub(b) } else { dim(s, "size")? };
        if b + s > d {
            return Err(format!("slice {begin:?} + {size:?} is out of bounds of {:?}", x.shape));
        }
        shape.push(s);
    }
    Ok(vec![OutType::new(x.dtype, shape)])
}

/// `GatherV2(params, indices, axis)`: the rows `indices` picks along
/// `axis`, after `batch_dims` leading dims the two share.
pub(super) fn gather(a: &Args) -> Result<Vec<OutType>, String> {
    let (p, i) = (a.x(0)?, a.x(1)?);
    let at = axis(*a.ints(2, "axis")?.first().ok_or("the axis is empty")?, p.shape.len())?;
    let batch = a.int_attr("batch_dims", 0);
    let batch = if batch < 0 { batch + i.shape.len() as i64 } else { batch };
    let batch = dim(batch, "batch_dims")?;
    if batch > at || batch > i.shape.len() {
        return Err(format!("batch_dims {batch} exceeds the axis {at} or the indices' rank"));
    }
    let mut shape = p.shape[..at].to_vec();
    shape.extend(&i.shape[batch..]);
    shape.extend(&p.shape[at + 1..]);
    Ok(vec![OutType::new(p.dtype, shape)])
}

/// `Fill(dims, value)`.
pub(super) fn fill(a: &Args) -> Result<Vec<OutType>, String> {
    let shape = a.ints(0, "dims")?.iter().map(|&d| dim(d, "dimension")).collect::<Result<_, _>>()?;
    Ok(vec![OutType::new(a.x(1)?.dtype, shape)])
}

/// `BroadcastTo(x, shape)`.
pub(super) fn broadcast_to(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let target: Vec<usize> = a.ints(1, "shape")?.iter().map(|&d| dim(d, "dimension")).collect::<Result<_, _>>()?;
    let shape = super::elementwise::broadcast_shapes(x.shape, &target)?;
    if shape != target {
        return Err(format!("{:?} does not broadcast to {target:?}", x.shape));
    }
    Ok(vec![OutType::new(x.dtype, shape)])
}

/// `Split(axis, x)`: `num_split` equal parts.
pub(super) fn split(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(1)?;
    let at = axis(*a.ints(0, "axis")?.first().ok_or("the axis is empty")?, x.shape.len())?;
    let n = dim(a.int_attr("num_split", 1), "num_split")?;
    if n == 0 || !x.shape[at].is_multiple_of(n) {
        return Err(format!("dimension {at} of {:?} does not split into {n}", x.shape));
    }
    let mut shape = x.shape.to_vec();
    shape[at] /= n;
    Ok(vec![OutType::new(x.dtype, shape); n])
}

/// `SplitV(x, size_splits, axis)`: one size of -1 takes the rest.
pub(super) fn split_v(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let sizes = a.ints(1, "size_splits")?;
    let at = axis(*a.ints(2, "axis")?.first().ok_or("the axis is empty")?, x.shape.len())?;
    let known: usize = sizes.iter().filter(|&&s| s != -1).map(|&s| dim(s, "size")).sum::<Result<_, _>>()?;
    let rest = x.shape[at].checked_sub(known).ok_or("the sizes exceed the dimension")?;
    let mut out = Vec::with_capacity(sizes.len());
    for &s in sizes {
        let mut shape = x.shape.to_vec();
        shape[at] = if s == -1 { rest } else { dim(s, "size")? };
        out.push(OutType::new(x.dtype, shape));
    }
    if out.iter().map(|t| t.shape[at]).sum::<usize>() != x.shape[at] {
        return Err(format!("sizes {sizes:?} do not add up to {}", x.shape[at]));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{check, k, k0, x};
    use crate::ir::{AttrValue, DType::*};

    #[test]
    fn shape_rules() {
        check("Reshape", &[], &[x(F32, &[2, 3, 4]), k(&[-1, 4])], Ok(&[(F32, &[6, 4])]));
        check("Reshape", &[], &[x(F32, &[2, 3]), k(&[4, -1])], Err("cannot reshape"));
        check("Reshape", &[], &[x(F32, &[2, 3]), x(I32, &[2])], Err("compile-time constant"));
        check("ExpandDims", &[], &[x(F32, &[2, 3]), k0(-1)], Ok(&[(F32, &[2, 3, 1])]));
        let dims = |d: &[i64]| AttrValue::List(d.iter().map(|&v| AttrValue::Int(v)).collect());
        check("Squeeze", &[("squeeze_dims", dims(&[1]))], &[x(F32, &[2, 1, 1])], Ok(&[(F32, &[2, 1])]));
        check("Squeeze", &[], &[x(F32, &[1, 2, 1])], Ok(&[(F32, &[2])]));
        check("Squeeze", &[("squeeze_dims", dims(&[0]))], &[x(F32, &[2])], Err("cannot squeeze"));
        check("Transpose", &[], &[x(I32, &[2, 3, 4]), k(&[2, 0, 1])], Ok(&[(I32, &[4, 2, 3])]));
        check("Tile", &[], &[x(F32, &[2, 3]), k(&[3, 1])], Ok(&[(F32, &[6, 3])]));
        check("Pad", &[], &[x(F32, &[1, 32, 32, 3]), k(&[0, 0, 3, 3, 3, 3, 0, 0])], Ok(&[(F32, &[1, 38, 38, 3])]));
        check("ConcatV2", &[], &[x(F32, &[2, 3]), x(F32, &[2, 5]), k0(-1)], Ok(&[(F32, &[2, 8])]));
        check("ConcatV2", &[], &[x(F32, &[2, 3]), x(F32, &[3, 5]), k0(1)], Err("does not concatenate"));
        check("Pack", &[("axis", AttrValue::Int(1))], &[x(I32, &[2]), x(I32, &[2])], Ok(&[(I32, &[2, 2])]));
        check("Unpack", &[("axis", AttrValue::Int(-1))], &[x(F32, &[4, 2])], Ok(&[(F32, &[4]), (F32, &[4])]));
        check("Slice", &[], &[x(F32, &[4, 5]), k(&[1, 2]), k(&[-1, 2])], Ok(&[(F32, &[3, 2])]));
        check("Slice", &[], &[x(F32, &[4, 5]), k(&[1, 4]), k(&[1, 2])], Err("out of bounds"));
        check("Fill", &[], &[k(&[2, 3]), x(Bool, &[])], Ok(&[(Bool, &[2, 3])]));
        check("GatherV2", &[], &[x(F32, &[10, 4]), x(I32, &[2, 3]), k0(0)], Ok(&[(F32, &[2, 3, 4])]));
        check(
            "GatherV2",
            &[("batch_dims", AttrValue::Int(1))],
            &[x(F32, &[2, 5, 4]), x(I64, &[2, 3]), k0(1)],
            Ok(&[(F32, &[2, 3, 4])]),
        );
        check("BroadcastTo", &[], &[x(F32, &[3, 1]), k(&[2, 3, 4])], Ok(&[(F32, &[2, 3, 4])]));
        check(
            "Split",
            &[("num_split", AttrValue::Int(2))],
            &[k0(1), x(F32, &[3, 4])],
            Ok(&[(F32, &[3, 2]), (F32, &[3, 2])]),
        );
        check("SplitV", &[], &[x(F32, &[6]), k(&[1, -1, 2]), k0(0)], Ok(&[(F32, &[1]), (F32, &[3]), (F32, &[2])]));
    }
}
