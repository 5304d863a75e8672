//! The ops whose output size depends on their operands' values, as
//! TensorFlow's CPU kernels compute them: `Unique`, `UniqueV2`,
//! `DynamicPartition`, `NonMaxSuppressionV3` and `NonMaxSuppressionV4`.
//!
//! - `Unique(x)` and `UniqueV2(x, axis)` keep the first occurrence of each
//!   value (of each slice along `axis` for `UniqueV2`), in order of first
//!   occurrence, and give each element (slice) the position of its value in
//!   that list (`out_idx`, i32 or i64). Floats compare as numbers: `-0` equals
//!   `0`, and a NaN equals nothing, so every NaN is its own value. An empty
//!   `axis` takes a vector as it is.
//! - `DynamicPartition(data, partitions)` sends row `i` of `data` (over the
//!   leading axes `partitions` has) to output `partitions[i]`, rows in order;
//!   a partition outside `[0, num_partitions)` is refused.
//! - `NonMaxSuppressionV3/V4` select boxes greedily by score (ties by lower
//!   index) among those scoring above `score_threshold`, dropping a box whose
//!   IoU with a selected one exceeds `iou_threshold`, up to
//!   `max_output_size`; V4 also returns the count, and with
//!   `pad_to_max_output_size` pads the indices with zeros to that size.
//!   Corners may come in either order. f16 scores and thresholds compare in
//!   f16, as TensorFlow's kernel does.
//!
//! Each kernel is linear in its input (the suppression: quadratic in the
//! boxes at most), plus a hash map of the distinct values.

use std::collections::HashMap;

use half::f16;
use ndarray::Axis;

use super::arg;
use crate::exec::error::KernelError;
use crate::exec::tensor::{with_element_type, Element, Tensor};
use crate::ir::{AttrMap, DType};

/// Runs `op` if it is one of this module's ops; `None` otherwise.
pub(crate) fn dispatch(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Option<Result<Vec<Tensor>, KernelError>> {
    let x = |i: usize| arg(op, inputs, i);
    let out_idx = attrs.get("out_idx").and_then(|v| v.as_type()).unwrap_or(DType::I32);
    Some(match op {
        "Unique" => x(0).and_then(|t| unique(op, t, None, out_idx)),
        "UniqueV2" => (|| {
            let axes = x(1)?.to_i64_vec(op, "axis")?;
            let axis = match axes.as_slice() {
                [] => None,
                [a] => Some(*a),
                more => {
                    return Err(KernelError::invalid(op, format!("axis must hold at most one value, got {more:?}")))
                }
            };
            unique(op, x(0)?, axis, out_idx)
        })(),
        "DynamicPartition" => (|| {
            let n = attrs.get_int("num_partitions").unwrap_or(0);
            dynamic_partition(op, x(0)?, x(1)?, n)
        })(),
        "NonMaxSuppressionV3" => (|| Ok(vec![nms(op, inputs, false)?.0]))(),
        "NonMaxSuppressionV4" => (|| {
            let (indices, count) = nms(op, inputs, attrs.get_bool("pad_to_max_output_size").unwrap_or(false))?;
            Ok(vec![indices, Tensor::scalar(count)])
        })(),
        _ => return None,
    })
}

/// The comparison key of each element: numbers by value (`-0` as `0`), a
/// NaN as `None` (equal to nothing).
fn keys(op: &str, t: &Tensor) -> Result<Vec<Option<u64>>, KernelError> {
    fn float(v: f64) -> Option<u64> {
        if v.is_nan() {
            None
        } else if v == 0.0 {
            Some(0)
        } else {
            Some(v.to_bits())
        }
    }
    let keys = match t {
        Tensor::F32(a) => a.iter().map(|&v| float(f64::from(v))).collect(),
        Tensor::F64(a) => a.iter().map(|&v| float(v)).collect(),
        Tensor::F16(a) => a.iter().map(|&v| float(f64::from(v))).collect(),
        Tensor::BF16(a) => a.iter().map(|&v| float(f64::from(v))).collect(),
        Tensor::I32(a) => a.iter().map(|&v| Some(v as u64)).collect(),
        Tensor::I64(a) => a.iter().map(|&v| Some(v as u64)).collect(),
        Tensor::I8(a) => a.iter().map(|&v| Some(v as u64)).collect(),
        Tensor::U8(a) => a.iter().map(|&v| Some(u64::from(v))).collect(),
        Tensor::I16(a) => a.iter().map(|&v| Some(v as u64)).collect(),
        Tensor::U16(a) => a.iter().map(|&v| Some(u64::from(v))).collect(),
        Tensor::U32(a) => a.iter().map(|&v| Some(u64::from(v))).collect(),
        Tensor::U64(a) => a.iter().map(|&v| Some(v)).collect(),
        Tensor::Bool(a) => a.iter().map(|&v| Some(u64::from(v))).collect(),
        other => return Err(KernelError::dtype(op, other.dtype(), "the values must be numbers or booleans")),
    };
    Ok(keys)
}

/// An index vector of `dtype` (i32 or i64).
fn index_tensor(op: &str, values: Vec<usize>, dtype: DType) -> Result<Tensor, KernelError> {
    match dtype {
        DType::I32 => {
            let v = values.into_iter().map(i32::try_from).collect::<Result<Vec<_>, _>>();
            v.map(Tensor::vector).map_err(|_| KernelError::invalid(op, "an index does not fit in i32"))
        }
        DType::I64 => Ok(Tensor::vector(values.into_iter().map(|v| v as i64).collect())),
        other => Err(KernelError::dtype(op, other, "out_idx must be i32 or i64")),
    }
}

/// `Unique` (`axis` `None`: `x` must be a vector) and `UniqueV2` along `axis`.
fn unique(op: &str, x: &Tensor, axis: Option<i64>, out_idx: DType) -> Result<Vec<Tensor>, KernelError> {
    let rank = x.shape().len();
    let axis = match axis {
        None if rank == 1 => 0,
        None => return Err(KernelError::invalid(op, format!("x must be a vector, got shape {:?}", x.shape()))),
        Some(a) => {
            let r = rank as i64;
            if a < -r || a >= r {
                return Err(KernelError::invalid(op, format!("axis {a} is out of range for rank {rank}")));
            }
            (if a < 0 { a + r } else { a }) as usize
        }
    };
    let keys = keys(op, x)?;
    let shape = x.shape();
    let n = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    let outer: usize = shape[..axis].iter().product();
    // The key of slice `i` along the axis: its elements in row-major order.
    let slice = |i: usize| -> Option<Vec<u64>> {
        let mut out = Vec::with_capacity(outer * inner);
        for o in 0..outer {
            for k in 0..inner {
                out.push(keys[(o * n + i) * inner + k]?);
            }
        }
        Some(out)
    };
    let mut first: HashMap<Vec<u64>, usize> = HashMap::new();
    let mut kept = Vec::new();
    let mut idx = Vec::with_capacity(n);
    for i in 0..n {
        let position = match slice(i) {
            Some(key) => *first.entry(key).or_insert_with(|| {
                kept.push(i);
                kept.len() - 1
            }),
            None => {
                kept.push(i);
                kept.len() - 1
            }
        };
        idx.push(position);
    }
    fn select<T: Element>(x: &Tensor, axis: usize, rows: &[usize]) -> Result<Tensor, KernelError> {
        let view = x.view::<T>().ok_or_else(|| KernelError::invalid("Unique", "the values changed type"))?;
        Ok(Tensor::from_array(view.select(Axis(axis), rows)))
    }
    let y = with_element_type!(x, T => select::<T>(x, axis, &kept)?, resource => return Err(KernelError::dtype(op, DType::Resource, "resource handles have no values")));
    Ok(vec![y, index_tensor(op, idx, out_idx)?])
}

/// `DynamicPartition(data, partitions) {num_partitions}`.
fn dynamic_partition(op: &str, data: &Tensor, partitions: &Tensor, n: i64) -> Result<Vec<Tensor>, KernelError> {
    if n < 1 {
        return Err(KernelError::invalid(op, format!("num_partitions must be at least 1, got {n}")));
    }
    let p_shape = partitions.shape();
    if !data.shape().starts_with(p_shape) {
        return Err(KernelError::invalid(
            op,
            format!("partitions shape {p_shape:?} must be a prefix of data shape {:?}", data.shape()),
        ));
    }
    let parts = partitions.to_i64_vec(op, "partitions")?;
    let mut rows: Vec<Vec<usize>> = vec![Vec::new(); n as usize];
    for (i, &p) in parts.iter().enumerate() {
        let Some(list) = usize::try_from(p).ok().and_then(|p| rows.get_mut(p)) else {
            return Err(KernelError::invalid(op, format!("partitions[{i}] = {p} is not in [0, {n})")));
        };
        list.push(i);
    }
    let row_shape = data.shape()[p_shape.len()..].to_vec();
    let row_len: usize = row_shape.iter().product();
    fn run<T: Element>(
        data: &Tensor,
        rows: &[Vec<usize>],
        row_shape: &[usize],
        row_len: usize,
    ) -> Result<Vec<Tensor>, KernelError> {
        let values = data.to_vec::<T>().ok_or_else(|| KernelError::invalid("DynamicPartition", "data changed type"))?;
        rows.iter()
            .map(|list| {
                let mut out = Vec::with_capacity(list.len() * row_len);
                for &r in list {
                    out.extend_from_slice(&values[r * row_len..(r + 1) * row_len]);
                }
                let shape: Vec<usize> = std::iter::once(list.len()).chain(row_shape.iter().copied()).collect();
                Tensor::from_vec(&shape, out)
            })
            .collect()
    }
    with_element_type!(data, T => run::<T>(data, &rows, &row_shape, row_len), resource => Err(KernelError::dtype(op, DType::Resource, "resource handles have no values")))
}

/// A float operand as f32 values, with whether it is f16.
fn floats(op: &str, t: &Tensor, what: &str) -> Result<(Vec<f32>, bool), KernelError> {
    if let Some(v) = t.to_vec::<f32>() {
        return Ok((v, false));
    }
    if let Some(v) = t.to_vec::<f16>() {
        return Ok((v.into_iter().map(f32::from).collect(), true));
    }
    Err(KernelError::dtype(op, t.dtype(), format!("{what} must be f32 or f16")))
}

/// A scalar operand.
fn scalar(op: &str, t: &Tensor, what: &str) -> Result<f32, KernelError> {
    if !t.shape().is_empty() {
        return Err(KernelError::invalid(op, format!("{what} must be a scalar, got shape {:?}", t.shape())));
    }
    Ok(floats(op, t, what)?.0[0])
}

/// The IoU of boxes `i` and `j` (`[y1, x1, y2, x2]`, corners in either order).
fn iou(b: &[f32], i: usize, j: usize) -> f32 {
    let corners = |k: usize| {
        let r = &b[4 * k..4 * k + 4];
        (r[0].min(r[2]), r[1].min(r[3]), r[0].max(r[2]), r[1].max(r[3]))
    };
    let (ymin_i, xmin_i, ymax_i, xmax_i) = corners(i);
    let (ymin_j, xmin_j, ymax_j, xmax_j) = corners(j);
    let area_i = (ymax_i - ymin_i) * (xmax_i - xmin_i);
    let area_j = (ymax_j - ymin_j) * (xmax_j - xmin_j);
    if area_i <= 0.0 || area_j <= 0.0 {
        return 0.0;
    }
    let h = (ymax_i.min(ymax_j) - ymin_i.max(ymin_j)).max(0.0);
    let w = (xmax_i.min(xmax_j) - xmin_i.max(xmin_j)).max(0.0);
    let inter = h * w;
    inter / (area_i + area_j - inter)
}

/// `NonMaxSuppressionV3/V4(boxes, scores, max_output_size, iou_threshold,
/// score_threshold)`: the selected indices (padded with zeros to
/// `max_output_size` when `pad`) and how many were selected.
fn nms(op: &str, inputs: &[Tensor], pad: bool) -> Result<(Tensor, i32), KernelError> {
    let boxes = arg(op, inputs, 0)?;
    let scores_t = arg(op, inputs, 1)?;
    let max_t = arg(op, inputs, 2)?;
    if !max_t.shape().is_empty() {
        return Err(KernelError::invalid(
            op,
            format!("max_output_size must be a scalar, got shape {:?}", max_t.shape()),
        ));
    }
    let max_output = max_t.to_i64_vec(op, "max_output_size")?[0];
    let max_output = usize::try_from(max_output)
        .map_err(|_| KernelError::invalid(op, format!("max_output_size must be non-negative, got {max_output}")))?;
    let iou_threshold = scalar(op, arg(op, inputs, 3)?, "iou_threshold")?;
    if !(0.0..=1.0).contains(&iou_threshold) {
        return Err(KernelError::invalid(op, format!("iou_threshold must be in [0, 1], got {iou_threshold}")));
    }
    let score_threshold = scalar(op, arg(op, inputs, 4)?, "score_threshold")?;
    let n = match boxes.shape() {
        [n, 4] => *n,
        other => return Err(KernelError::invalid(op, format!("boxes must have shape [num_boxes, 4], got {other:?}"))),
    };
    if scores_t.shape() != [n] {
        return Err(KernelError::invalid(op, format!("scores must have shape [{n}], got {:?}", scores_t.shape())));
    }
    let (b, _) = floats(op, boxes, "boxes")?;
    let (scores, half) = floats(op, scores_t, "scores")?;
    // An f16 kernel compares the IoU after rounding it to f16.
    let similarity = |i: usize, j: usize| {
        let s = iou(&b, i, j);
        if half {
            f32::from(f16::from_f32(s))
        } else {
            s
        }
    };
    let mut order: Vec<usize> = (0..n).filter(|&i| scores[i] > score_threshold).collect();
    order.sort_by(|&i, &j| scores[j].total_cmp(&scores[i]).then(i.cmp(&j)));
    let mut selected: Vec<usize> = Vec::new();
    for i in order {
        if selected.len() >= max_output {
            break;
        }
        if selected.iter().rev().all(|&j| similarity(i, j) <= iou_threshold) {
            selected.push(i);
        }
    }
    let count = selected.len();
    if pad {
        selected.resize(max_output, 0);
    }
    let indices = selected.into_iter().map(|i| i as i32).collect();
    Ok((Tensor::vector(indices), count as i32))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::AttrValue;

    fn attrs(entries: &[(&str, AttrValue)]) -> AttrMap {
        let mut map = AttrMap::default();
        for (k, v) in entries {
            map.insert(k, v.clone());
        }
        map
    }

    #[test]
    fn unique_keeps_first_occurrences_and_every_nan() {
        let x = Tensor::vector(vec![0.0f32, f32::NAN, -0.0, 2.0, f32::NAN, 2.0]);
        let out = dispatch("Unique", &AttrMap::default(), &[x]).unwrap().unwrap();
        let y = out[0].to_vec::<f32>().unwrap();
        assert_eq!(y.len(), 4);
        assert!(y[1].is_nan() && y[3].is_nan());
        assert_eq!((y[0], y[2]), (0.0, 2.0));
        assert_eq!(out[1].to_vec::<i32>().unwrap(), vec![0, 1, 0, 2, 3, 2]);
    }

    #[test]
    fn bad_operands_are_refused() {
        let parts = attrs(&[("num_partitions", AttrValue::Int(2))]);
        let data = Tensor::vector(vec![1.0f32, 2.0]);
        let err = dispatch("DynamicPartition", &parts, &[data.clone(), Tensor::vector(vec![0i32, 2])]).unwrap();
        assert!(err.unwrap_err().to_string().contains("is not in [0, 2)"));
        let err = dispatch("DynamicPartition", &parts, &[data, Tensor::vector(vec![0i32])]).unwrap();
        assert!(err.unwrap_err().to_string().contains("must be a prefix"));
        let matrix = Tensor::from_vec(&[2, 2], vec![1i32, 2, 3, 4]).unwrap();
        let err = dispatch("Unique", &AttrMap::default(), std::slice::from_ref(&matrix)).unwrap();
        assert!(err.unwrap_err().to_string().contains("must be a vector"));
        let err = dispatch("UniqueV2", &AttrMap::default(), &[matrix, Tensor::vector(vec![2i32])]).unwrap();
        assert!(err.unwrap_err().to_string().contains("out of range"));
        let boxes = Tensor::from_vec(&[1, 4], vec![0.0f32, 0.0, 1.0, 1.0]).unwrap();
        let nms = |iou: f32, max: i32| {
            let inputs = [
                boxes.clone(),
                Tensor::vector(vec![1.0f32]),
                Tensor::scalar(max),
                Tensor::scalar(iou),
                Tensor::scalar(0.0f32),
            ];
            dispatch("NonMaxSuppressionV3", &AttrMap::default(), &inputs).unwrap()
        };
        assert!(nms(1.5, 1).unwrap_err().to_string().contains("iou_threshold must be in [0, 1]"));
        assert!(nms(0.5, -1).unwrap_err().to_string().contains("non-negative"));
        assert_eq!(nms(0.5, 1).unwrap()[0].to_vec::<i32>().unwrap(), vec![0]);
    }
}
