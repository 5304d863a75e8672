//! Type rules of the ops whose output size depends on their operands'
//! values: `Unique`, `UniqueV2`, `DynamicPartition`, `NonMaxSuppressionV3`
//! and `NonMaxSuppressionV4`.
//!
//! Meaning: where the size is not known at compile time, the type is the
//! bound, as TensorFlow's XLA bridge bounds the dimension: every element of
//! `Unique`'s input may be distinct, every row of `DynamicPartition`'s data
//! may go to one partition, and a suppression selects at most
//! `min(max_output_size, boxes)` boxes. The StableHLO lowering fills such a
//! buffer and gives its true size beside it (docs/xla.md, "Ops whose output
//! size depends on values"). Where the size is known (`DynamicPartition`
//! with constant partitions, `NonMaxSuppressionV4` padded to
//! `max_output_size`), the type is exact.

use super::{axis, dim, Args, OutType};
use crate::ir::DType;

/// `Unique(x)`: `y` bounded by `x`'s length, `idx` of `x`'s length.
pub(super) fn unique(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let [n] = x.shape else { return Err(format!("x must be a vector, got shape {:?}", x.shape)) };
    let idx = a.type_attr("out_idx", DType::I32);
    Ok(vec![OutType::new(x.dtype, vec![*n]), OutType::new(idx, vec![*n])])
}

/// `UniqueV2(x, axis)`: `y` shaped like `x` (bounded along `axis`), `idx`
/// of the axis' length; an empty `axis` takes a vector as it is.
pub(super) fn unique_v2(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let along = unique_axis(x.shape, a.ints(1, "axis")?)?;
    let idx = a.type_attr("out_idx", DType::I32);
    Ok(vec![OutType::new(x.dtype, x.shape.to_vec()), OutType::new(idx, vec![x.shape[along]])])
}

/// The axis `UniqueV2` compares slices along, for `x` of `shape`.
pub fn unique_axis(shape: &[usize], axes: &[i64]) -> Result<usize, String> {
    match axes {
        [] if shape.len() == 1 => Ok(0),
        [] => Err(format!("an empty axis needs a vector, got shape {shape:?}")),
        [a] => axis(*a, shape.len()),
        more => Err(format!("axis must hold at most one value, got {more:?}")),
    }
}

/// `DynamicPartition(data, partitions) {num_partitions}`: each output is
/// the data's rows past `partitions`' dims, as many as `partitions` sends
/// there when it is constant, else bounded by its element count.
pub(super) fn dynamic_partition(a: &Args) -> Result<Vec<OutType>, String> {
    let (data, parts) = (a.x(0)?, a.x(1)?);
    let n = dim(a.int_attr("num_partitions", 0), "num_partitions")?;
    if n == 0 {
        return Err("num_partitions must be at least 1".into());
    }
    if data.shape.get(..parts.shape.len()) != Some(parts.shape) {
        return Err(format!("the data's shape {:?} does not start with the partitions' {:?}", data.shape, parts.shape));
    }
    let row = &data.shape[parts.shape.len()..];
    let total: usize = parts.shape.iter().product();
    let mut counts = vec![total; n];
    if let Some(values) = parts.value {
        counts = vec![0; n];
        for &p in values {
            let slot = usize::try_from(p).ok().filter(|&p| p < n);
            counts[slot.ok_or_else(|| format!("partition {p} is outside [0, {n})"))?] += 1;
        }
    }
    Ok(counts
        .into_iter()
        .map(|c| OutType::new(data.dtype, std::iter::once(c).chain(row.iter().copied()).collect()))
        .collect())
}

/// `NonMaxSuppressionV3/V4(boxes, scores, max_output_size, ...)`: i32
/// indices bounded by `min(max_output_size, boxes)`, exactly
/// `max_output_size` when V4 pads; V4 adds the i32 count.
pub(super) fn non_max_suppression(a: &Args) -> Result<Vec<OutType>, String> {
    let (boxes, scores) = (a.x(0)?, a.x(1)?);
    let [b, 4] = boxes.shape else { return Err(format!("boxes must be [boxes, 4], got {:?}", boxes.shape)) };
    if scores.shape != [*b] {
        return Err(format!("scores must be [{b}], got {:?}", scores.shape));
    }
    let max = match a.ints(2, "max_output_size")? {
        [m] => dim(*m, "max_output_size")?,
        other => return Err(format!("max_output_size must be a scalar, got {} values", other.len())),
    };
    let padded = a.op == "NonMaxSuppressionV4" && a.bool_attr("pad_to_max_output_size", false);
    let indices = OutType::new(DType::I32, vec![if padded { max } else { max.min(*b) }]);
    if a.op == "NonMaxSuppressionV4" {
        Ok(vec![indices, OutType::new(DType::I32, Vec::new())])
    } else {
        Ok(vec![indices])
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{check, k, k0, x};
    use crate::ir::{AttrValue, DType};

    #[test]
    fn unique_outputs_are_bounded_by_the_input() {
        let idx64 = [("out_idx", AttrValue::Type(DType::I64))];
        check("Unique", &idx64, &[x(DType::F32, &[7])], Ok(&[(DType::F32, &[7]), (DType::I64, &[7])]));
        check("Unique", &[], &[x(DType::F32, &[2, 3])], Err("must be a vector"));
        check("UniqueV2", &[], &[x(DType::I32, &[5, 2]), k(&[-1])], Ok(&[(DType::I32, &[5, 2]), (DType::I32, &[2])]));
        check("UniqueV2", &[], &[x(DType::I32, &[5]), k(&[])], Ok(&[(DType::I32, &[5]), (DType::I32, &[5])]));
        check("UniqueV2", &[], &[x(DType::I32, &[5, 2]), k(&[])], Err("an empty axis needs a vector"));
        check("UniqueV2", &[], &[x(DType::I32, &[5, 2]), k(&[2])], Err("out of range"));
    }

    #[test]
    fn partitions_give_exact_sizes_when_constant_and_bounds_otherwise() {
        let three = [("num_partitions", AttrValue::Int(3))];
        let data = x(DType::F32, &[4, 2]);
        check(
            "DynamicPartition",
            &three,
            &[data.clone(), k(&[2, 0, 2, 2])],
            Ok(&[(DType::F32, &[1, 2]), (DType::F32, &[0, 2]), (DType::F32, &[3, 2])]),
        );
        check(
            "DynamicPartition",
            &three,
            &[data.clone(), x(DType::I32, &[4])],
            Ok(&[(DType::F32, &[4, 2]), (DType::F32, &[4, 2]), (DType::F32, &[4, 2])]),
        );
        check("DynamicPartition", &three, &[data.clone(), k(&[0, 3, 1, 1])], Err("partition 3 is outside [0, 3)"));
        check("DynamicPartition", &three, &[data, x(DType::I32, &[3])], Err("does not start with"));
    }

    #[test]
    fn suppressions_are_bounded_by_max_output_size_and_the_boxes() {
        let (boxes, scores) = (x(DType::F32, &[7, 4]), x(DType::F32, &[7]));
        let f = x(DType::F32, &[]);
        let v3 = |max: i64| vec![boxes.clone(), scores.clone(), k0(max), f.clone(), f.clone()];
        check("NonMaxSuppressionV3", &[], &v3(10), Ok(&[(DType::I32, &[7])]));
        check("NonMaxSuppressionV3", &[], &v3(2), Ok(&[(DType::I32, &[2])]));
        let pad = [("pad_to_max_output_size", AttrValue::Bool(true))];
        check("NonMaxSuppressionV4", &pad, &v3(10), Ok(&[(DType::I32, &[10]), (DType::I32, &[])]));
        check("NonMaxSuppressionV4", &[], &v3(10), Ok(&[(DType::I32, &[7]), (DType::I32, &[])]));
        let fed = vec![boxes.clone(), scores.clone(), x(DType::I32, &[]), f.clone(), f.clone()];
        check("NonMaxSuppressionV3", &[], &fed, Err("compile-time constant"));
        let wrong = vec![x(DType::F32, &[7, 3]), scores, k0(2), f.clone(), f];
        check("NonMaxSuppressionV3", &[], &wrong, Err("boxes must be [boxes, 4]"));
    }
}
