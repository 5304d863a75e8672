//! Kernels of the sharding, SPMD, dynamic-size and runtime ops of
//! TensorFlow's XLA op set, as one device runs them.
//!
//! Sharding annotations do not change values: `XlaSharding` is the
//! identity, and `XlaSpmdFullToShardShape` / `XlaSpmdShardToFullShape` are
//! the identity whenever one device's shard is the whole value
//! (replicated, maximal, manual, or a grid of one tile). A sharding that
//! cuts the value into several tiles needs a partitioned program over
//! that many devices; on one device it is an error naming the tiles.
//! `XlaSetDynamicDimensionSize` gives what TensorFlow's XLA bridge returns
//! for a value whose dimension became dynamic: its first `size` entries
//! along that dimension (shapes here are static). `XlaSetBound`,
//! `XlaRemoveDynamicDimensionSize` and `XlaOptimizationBarrier` pass their
//! values through. `XlaSplitND` pads a value with zeros at the end of each
//! dimension and cuts it into a grid of equal tiles (row-major order);
//! `XlaConcatND` joins such a grid and drops the padding. `DeviceIndex`
//! gives what tf2xla compiles it to: the number of `device_names` (the
//! default branch of a switch on the device, since a compiled program's
//! device is none of the names TensorFlow's kernels look up; TensorFlow's
//! CPU kernel instead gives the index of `CPU`). `ControlTrigger` does
//! nothing. `XlaAllReduce` and `CollectiveReduceV2` over a group of one
//! member give their operand (every reduction of one value is that value);
//! a larger group needs its other members, which a kernel does not see:
//! it is an error. Cost: the split and concatenation copy each element once per
//! dimension; the rest copy nothing.

use super::{arg, attr_int};
use crate::exec::error::KernelError;
use crate::exec::tensor::Tensor;
use crate::ir::sharding::Sharding;
use crate::ir::AttrMap;

/// Runs `op` if it is one of these ops; `None` otherwise.
pub(crate) fn dispatch(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Option<Result<Vec<Tensor>, KernelError>> {
    let x = || arg(op, inputs, 0).cloned();
    Some(match op {
        "ControlTrigger" => Ok(Vec::new()),
        "DeviceIndex" => device_index(op, attrs).map(|t| vec![t]),
        "XlaOptimizationBarrier" => Ok(inputs.to_vec()),
        "XlaRemoveDynamicDimensionSize" | "XlaSetBound" => x().map(|t| vec![t]),
        "XlaSetDynamicDimensionSize" => set_dynamic_size(op, inputs).map(|t| vec![t]),
        "XlaSharding" => Sharding::of_attr(attrs, "sharding")
            .map_err(|m| KernelError::invalid(op, m))
            .and_then(|_| x())
            .map(|t| vec![t]),
        "XlaSpmdFullToShardShape" | "XlaSpmdShardToFullShape" => spmd_shape(op, attrs, inputs).map(|t| vec![t]),
        "XlaSplitND" => split_nd(op, attrs, inputs),
        "XlaConcatND" => concat_nd(op, attrs, inputs).map(|t| vec![t]),
        "XlaAllReduce" | "CollectiveReduceV2" => reduce_alone(op, attrs, inputs).map(|t| vec![t]),
        _ => return None,
    })
}

/// A list-of-integers attribute (empty when absent).
fn int_list(attrs: &AttrMap, key: &str) -> Vec<i64> {
    attrs.get(key).and_then(|v| v.as_int_list()).unwrap_or_default()
}

/// `DeviceIndex {device_names}`: the number of names, as tf2xla compiles it.
fn device_index(op: &str, attrs: &AttrMap) -> Result<Tensor, KernelError> {
    let names = attrs.get("device_names").and_then(|v| v.as_list()).unwrap_or_default();
    i32::try_from(names.len()).map(Tensor::scalar).map_err(|_| KernelError::invalid(op, "too many device names"))
}

/// The integer scalar of operand `i`.
fn scalar(op: &str, inputs: &[Tensor], i: usize, what: &str) -> Result<i64, KernelError> {
    match arg(op, inputs, i)?.to_i64_vec(op, what)?.as_slice() {
        [v] => Ok(*v),
        other => Err(KernelError::invalid(op, format!("{what} must be a scalar, got {} values", other.len()))),
    }
}

/// `XlaSetDynamicDimensionSize(input, dim_index, size)`: the first `size`
/// entries of `input` along `dim_index`.
fn set_dynamic_size(op: &str, inputs: &[Tensor]) -> Result<Tensor, KernelError> {
    let x = arg(op, inputs, 0)?;
    let dim = scalar(op, inputs, 1, "dim_index")?;
    let size = scalar(op, inputs, 2, "size")?;
    let rank = x.shape().len();
    let d = usize::try_from(dim)
        .ok()
        .filter(|&d| d < rank)
        .ok_or_else(|| KernelError::invalid(op, format!("dim_index {dim} is out of range for rank {rank}")))?;
    if !(0..=x.shape()[d] as i64).contains(&size) {
        return Err(KernelError::invalid(
            op,
            format!("size {size} is not within dimension {d}'s static size {}", x.shape()[d]),
        ));
    }
    let mut sizes: Vec<i64> = x.shape().iter().map(|&s| s as i64).collect();
    sizes[d] = size;
    slice(x, &vec![0; rank], &sizes)
}

/// The `dim` attribute of the SPMD shape ops: `None` (every dimension) for -1.
fn spmd_dim(op: &str, attrs: &AttrMap, rank: usize) -> Result<Option<usize>, KernelError> {
    match attr_int(attrs, "dim", -1) {
        -1 => Ok(None),
        d => usize::try_from(d)
            .ok()
            .filter(|&d| d < rank)
            .map(Some)
            .ok_or_else(|| KernelError::invalid(op, format!("dim {d} is out of range for rank {rank}"))),
    }
}

/// `XlaSpmdFullToShardShape` / `XlaSpmdShardToFullShape` on one device:
/// the identity when the shard is the whole value.
fn spmd_shape(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Result<Tensor, KernelError> {
    let x = arg(op, inputs, 0)?;
    let sharding = Sharding::of_attr(attrs, "manual_sharding").map_err(|m| KernelError::invalid(op, m))?;
    let full: Vec<usize> = if op == "XlaSpmdFullToShardShape" {
        x.shape().to_vec()
    } else {
        let dims = attrs.get("full_shape").and_then(|v| v.as_shape()).and_then(|s| s.dims.clone());
        let dims = dims.ok_or_else(|| KernelError::invalid(op, "`full_shape` must be a fully known shape"))?;
        let dims: Option<Vec<usize>> = dims.iter().map(|&d| usize::try_from(d).ok()).collect();
        dims.ok_or_else(|| KernelError::invalid(op, "`full_shape` must be a fully known shape"))?
    };
    let dim = spmd_dim(op, attrs, full.len())?;
    let shard = sharding.shard_shape(&full, dim).map_err(|m| KernelError::invalid(op, m))?;
    if shard != full {
        return Err(KernelError::invalid(
            op,
            format!(
                "the sharding {} cuts {full:?} into shards of {shard:?}: that needs a partitioned program over \
                 its devices, and this one runs on one device",
                sharding.hlo_text()
            ),
        ));
    }
    if x.shape() != full.as_slice() {
        return Err(KernelError::invalid(
            op,
            format!("the input has shape {:?}, the full shape is {full:?}", x.shape()),
        ));
    }
    Ok(x.clone())
}

/// `XlaAllReduce(input, group_assignment) {reduce_op}` /
/// `CollectiveReduceV2(input, group_size, ...) {merge_op, final_op}` for a
/// group of one member: the operand.
fn reduce_alone(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Result<Tensor, KernelError> {
    let x = arg(op, inputs, 0)?;
    let (size, reduce) = if op == "XlaAllReduce" {
        let groups = arg(op, inputs, 1)?;
        let size = match groups.shape() {
            [_, size] => *size as i64,
            other => {
                return Err(KernelError::invalid(op, format!("group_assignment must be 2-D, got shape {other:?}")));
            }
        };
        (size, attrs.get_str("reduce_op").unwrap_or("Add"))
    } else {
        (scalar(op, inputs, 1, "group_size")?, attrs.get_str("merge_op").unwrap_or("Add"))
    };
    if !matches!(reduce, "Add" | "Mean" | "Max" | "Min" | "Mul") || (op != "XlaAllReduce" && reduce == "Mean") {
        return Err(KernelError::invalid(op, format!("unknown reduction `{reduce}`")));
    }
    let last = attrs.get_str("final_op").unwrap_or("Id");
    if !matches!(last, "Id" | "Div") {
        return Err(KernelError::invalid(op, format!("unknown final_op `{last}`")));
    }
    if size != 1 {
        return Err(KernelError::invalid(
            op,
            format!(
                "a group of {size} members needs the other members' values: the simulator runs this op only \
                 for a group of one (PJRT runs any replica groups)"
            ),
        ));
    }
    Ok(x.clone())
}

/// Integers as an i64 vector tensor, for the shape kernels.
fn ints(values: &[i64]) -> Tensor {
    Tensor::vector(values.to_vec())
}

fn slice(x: &Tensor, begin: &[i64], size: &[i64]) -> Result<Tensor, KernelError> {
    super::layout::slice("Slice", x, &ints(begin), &ints(size))
}

/// The tile counts and paddings of a split or concatenation of rank `rank`.
fn grid(op: &str, attrs: &AttrMap, key: &str, rank: usize) -> Result<(Vec<usize>, Vec<usize>), KernelError> {
    let counts = int_list(attrs, key);
    let mut pads = int_list(attrs, "paddings");
    if pads.is_empty() {
        pads = vec![0; rank];
    }
    if counts.len() != rank || pads.len() != rank {
        return Err(KernelError::invalid(
            op,
            format!("`{key}` ({}) and `paddings` ({}) need one entry per dimension ({rank})", counts.len(), pads.len()),
        ));
    }
    let counts: Option<Vec<usize>> = counts.iter().map(|&c| usize::try_from(c).ok().filter(|&c| c > 0)).collect();
    let pads: Option<Vec<usize>> = pads.iter().map(|&p| usize::try_from(p).ok()).collect();
    match (counts, pads) {
        (Some(c), Some(p)) => Ok((c, p)),
        _ => Err(KernelError::invalid(op, format!("`{key}` must be positive and `paddings` non-negative"))),
    }
}

/// The row-major grid positions of `counts` tiles.
fn positions(counts: &[usize]) -> Vec<Vec<usize>> {
    let total: usize = counts.iter().product();
    (0..total)
        .map(|mut k| {
            let mut at = vec![0; counts.len()];
            for (a, &c) in at.iter_mut().zip(counts).rev() {
                *a = k % c;
                k /= c;
            }
            at
        })
        .collect()
}

/// `XlaSplitND(input) {num_splits, paddings, N}`.
fn split_nd(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Result<Vec<Tensor>, KernelError> {
    let x = arg(op, inputs, 0)?;
    let rank = x.shape().len();
    let (counts, pads) = grid(op, attrs, "num_splits", rank)?;
    let n = attr_int(attrs, "N", counts.iter().product::<usize>() as i64);
    if n != counts.iter().product::<usize>() as i64 {
        return Err(KernelError::invalid(op, format!("N is {n} but `num_splits` {counts:?} make another count")));
    }
    let mut tile = Vec::with_capacity(rank);
    for d in 0..rank {
        let padded = x.shape()[d] + pads[d];
        if padded % counts[d] != 0 {
            return Err(KernelError::invalid(
                op,
                format!("dimension {d} padded to {padded} does not split into {} equal tiles", counts[d]),
            ));
        }
        tile.push(padded / counts[d]);
    }
    let padded = if pads.iter().all(|&p| p == 0) {
        x.clone()
    } else {
        let flat: Vec<i64> = pads.iter().flat_map(|&p| [0, p as i64]).collect();
        let paddings = Tensor::from_vec(&[rank, 2], flat)?;
        super::layout::pad(op, x, &paddings, None)?
    };
    let size: Vec<i64> = tile.iter().map(|&t| t as i64).collect();
    positions(&counts)
        .iter()
        .map(|at| {
            let begin: Vec<i64> = at.iter().zip(&tile).map(|(&i, &t)| (i * t) as i64).collect();
            slice(&padded, &begin, &size)
        })
        .collect()
}

/// `XlaConcatND(inputs...) {num_concats, paddings}`.
fn concat_nd(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Result<Tensor, KernelError> {
    let first = arg(op, inputs, 0)?;
    let rank = first.shape().len();
    let (counts, pads) = grid(op, attrs, "num_concats", rank)?;
    let total: usize = counts.iter().product();
    if inputs.len() != total {
        return Err(KernelError::invalid(
            op,
            format!("{} inputs for a grid of {total} tiles {counts:?}", inputs.len()),
        ));
    }
    if let Some(t) = inputs.iter().find(|t| t.shape() != first.shape() || t.dtype() != first.dtype()) {
        return Err(KernelError::invalid(
            op,
            format!("every tile must be {} {:?}, one is {} {:?}", first.dtype(), first.shape(), t.dtype(), t.shape()),
        ));
    }
    // Join the innermost dimension first: each pass turns runs of `count` tiles into one.
    let mut tiles: Vec<Tensor> = inputs.to_vec();
    for d in (0..rank).rev() {
        let mut joined = Vec::with_capacity(tiles.len() / counts[d]);
        for run in tiles.chunks(counts[d]) {
            let mut operands = run.to_vec();
            operands.push(Tensor::scalar(d as i32));
            joined.push(super::layout::concat(op, &operands)?);
        }
        tiles = joined;
    }
    let whole = tiles.pop().ok_or_else(|| KernelError::invalid(op, "no tiles"))?;
    let mut size = Vec::with_capacity(rank);
    for (d, (&n, &p)) in whole.shape().iter().zip(&pads).enumerate() {
        let kept = n
            .checked_sub(p)
            .ok_or_else(|| KernelError::invalid(op, format!("padding {p} exceeds dimension {d} ({n})")))?;
        size.push(kept as i64);
    }
    slice(&whole, &vec![0; rank], &size)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::AttrValue;

    fn list(values: &[i64]) -> AttrValue {
        AttrValue::List(values.iter().map(|&v| AttrValue::Int(v)).collect())
    }

    #[test]
    fn split_then_concat_gives_the_value_back() {
        let x = Tensor::from_vec(&[3, 5], (0..15).map(|v| v as f32).collect()).unwrap();
        let mut attrs = AttrMap::new();
        attrs.insert("num_splits", list(&[2, 3]));
        attrs.insert("paddings", list(&[1, 1]));
        let tiles = split_nd("XlaSplitND", &attrs, std::slice::from_ref(&x)).unwrap();
        assert_eq!(tiles.len(), 6);
        assert_eq!(tiles[5].to_vec::<f32>().unwrap(), vec![14.0, 0.0, 0.0, 0.0]);
        let mut attrs = AttrMap::new();
        attrs.insert("num_concats", list(&[2, 3]));
        attrs.insert("paddings", list(&[1, 1]));
        assert_eq!(concat_nd("XlaConcatND", &attrs, &tiles).unwrap(), x);
        attrs.insert("num_concats", list(&[2, 2]));
        assert!(concat_nd("XlaConcatND", &attrs, &tiles).unwrap_err().to_string().contains("6 inputs"));
    }

    #[test]
    fn a_sharding_that_cuts_the_value_is_refused_on_one_device() {
        let mut attrs = AttrMap::new();
        attrs.insert("manual_sharding", AttrValue::Str("\x08\x03\x1a\x02\x02\x01\"\x02\x00\x01".into()));
        let x = Tensor::from_vec(&[2, 3], vec![0f32; 6]).unwrap();
        let err = spmd_shape("XlaSpmdFullToShardShape", &attrs, &[x]).unwrap_err().to_string();
        assert!(err.contains("{devices=[2,1]0,1}") && err.contains("[1, 3]"), "{err}");
    }
}
