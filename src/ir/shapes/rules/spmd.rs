//! Type rules of the sharding, SPMD, dynamic-size and runtime ops: the
//! annotations keep their operand's type (`XlaSpmdShardToFullShape` gives
//! its `full_shape`), `XlaSetDynamicDimensionSize` shortens one dimension
//! to its constant `size` (the kernels' static form of a dynamic
//! dimension), `XlaSplitND` gives `N` equal tiles of the padded operand
//! and `XlaConcatND` their joined shape less the padding.

use super::{Args, OutType};
use crate::ir::sharding::Sharding;
use crate::ir::DType;

/// `XlaSharding`, `XlaSetBound`, `XlaRemoveDynamicDimensionSize`: operand 0's type.
pub(super) fn same(a: &Args) -> Result<Vec<OutType>, String> {
    Ok(vec![a.same(0)?])
}

/// `XlaOptimizationBarrier(inputs...)`: every operand's type.
pub(super) fn each(a: &Args) -> Result<Vec<OutType>, String> {
    Ok(a.operands.iter().map(|x| OutType::new(x.dtype, x.shape.to_vec())).collect())
}

/// `DeviceIndex`: an int32 scalar.
pub(super) fn device_index(_: &Args) -> Result<Vec<OutType>, String> {
    Ok(vec![OutType::new(DType::I32, Vec::new())])
}

/// `ControlTrigger`: no outputs.
pub(super) fn none(_: &Args) -> Result<Vec<OutType>, String> {
    Ok(Vec::new())
}

/// `XlaSetDynamicDimensionSize(input, dim_index, size)`.
pub(super) fn set_dynamic_size(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let dim = *a.ints(1, "dim_index")?.first().ok_or("dim_index is empty")?;
    let size = *a.ints(2, "size")?.first().ok_or("size is empty")?;
    let d = super::axis(dim, x.shape.len())?;
    let size = super::dim(size, "size")?;
    if size > x.shape[d] {
        return Err(format!("size {size} exceeds dimension {d}'s static size {}", x.shape[d]));
    }
    let mut shape = x.shape.to_vec();
    shape[d] = size;
    Ok(vec![OutType::new(x.dtype, shape)])
}

/// The SPMD shape ops: the shard shape of the full shape (of the operand, or `full_shape`).
pub(super) fn spmd_shape(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let sharding = Sharding::of_attr(a.attrs, "manual_sharding")?;
    let dim = match a.int_attr("dim", -1) {
        -1 => None,
        d => Some(super::dim(d, "dim")?),
    };
    if a.op == "XlaSpmdFullToShardShape" {
        return Ok(vec![OutType::new(x.dtype, sharding.shard_shape(x.shape, dim)?)]);
    }
    let full = a.attrs.get("full_shape").and_then(|v| v.as_shape()).and_then(|s| s.dims.clone());
    let full = full.ok_or("`full_shape` must be a fully known shape")?;
    let full = full.iter().map(|&d| super::dim(d, "a full_shape dimension")).collect::<Result<Vec<_>, _>>()?;
    Ok(vec![OutType::new(x.dtype, full)])
}

/// Tile counts and paddings of a split or concatenation of rank `rank`.
fn grid(a: &Args, key: &str, rank: usize) -> Result<(Vec<usize>, Vec<usize>), String> {
    let counts = a.int_list(key);
    let mut pads = a.int_list("paddings");
    if pads.is_empty() {
        pads = vec![0; rank];
    }
    if counts.len() != rank || pads.len() != rank {
        return Err(format!("`{key}` and `paddings` need one entry per dimension ({rank})"));
    }
    let counts = counts.iter().map(|&c| super::dim(c, key)).collect::<Result<Vec<_>, _>>()?;
    if counts.contains(&0) {
        return Err(format!("`{key}` must be positive"));
    }
    let pads = pads.iter().map(|&p| super::dim(p, "padding")).collect::<Result<Vec<_>, _>>()?;
    Ok((counts, pads))
}

/// `XlaSplitND(input) {num_splits, paddings}`.
pub(super) fn split_nd(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let (counts, pads) = grid(a, "num_splits", x.shape.len())?;
    let mut tile = Vec::with_capacity(counts.len());
    for (d, ((&n, &p), &c)) in x.shape.iter().zip(&pads).zip(&counts).enumerate() {
        if (n + p) % c != 0 {
            return Err(format!("dimension {d} padded to {} does not split into {c} equal tiles", n + p));
        }
        tile.push((n + p) / c);
    }
    Ok(vec![OutType::new(x.dtype, tile); counts.iter().product()])
}

/// `XlaConcatND(inputs...) {num_concats, paddings}`.
pub(super) fn concat_nd(a: &Args) -> Result<Vec<OutType>, String> {
    let x = a.x(0)?;
    let (counts, pads) = grid(a, "num_concats", x.shape.len())?;
    let mut shape = Vec::with_capacity(counts.len());
    for (d, ((&n, &p), &c)) in x.shape.iter().zip(&pads).zip(&counts).enumerate() {
        shape.push((n * c).checked_sub(p).ok_or_else(|| format!("padding {p} exceeds dimension {d} ({})", n * c))?);
    }
    Ok(vec![OutType::new(x.dtype, shape)])
}

#[cfg(test)]
mod tests {
    use super::super::tests::{check, k0, x};
    use crate::ir::{AttrValue, DType};

    fn list(values: &[i64]) -> AttrValue {
        AttrValue::List(values.iter().map(|&v| AttrValue::Int(v)).collect())
    }

    #[test]
    fn split_and_concat_shapes() {
        let split = [("num_splits", list(&[2, 3])), ("paddings", list(&[1, 1]))];
        let tiles = [(DType::F32, &[2usize, 2][..]); 6];
        check("XlaSplitND", &split, &[x(DType::F32, &[3, 5])], Ok(&tiles));
        check("XlaSplitND", &split, &[x(DType::F32, &[3, 4])], Err("equal tiles"));
        let concat = [("num_concats", list(&[2, 3])), ("paddings", list(&[1, 1]))];
        let tiles: [_; 6] = std::array::from_fn(|_| x(DType::I32, &[2, 2]));
        check("XlaConcatND", &concat, &tiles, Ok(&[(DType::I32, &[3, 5])]));
    }

    #[test]
    fn a_dynamic_size_shortens_its_dimension() {
        let args = [x(DType::F32, &[2, 4]), k0(1), k0(3)];
        check("XlaSetDynamicDimensionSize", &[], &args, Ok(&[(DType::F32, &[2, 3])]));
        let args = [x(DType::F32, &[2, 4]), k0(1), k0(5)];
        check("XlaSetDynamicDimensionSize", &[], &args, Err("exceeds"));
    }

    #[test]
    fn shard_shapes_follow_the_tile_grid() {
        let tiled = [("manual_sharding", AttrValue::Str("\x08\x03\x1a\x02\x02\x01\"\x02\x00\x01".into()))];
        check("XlaSpmdFullToShardShape", &tiled, &[x(DType::F32, &[5, 3])], Ok(&[(DType::F32, &[3, 3])]));
        let manual = [("manual_sharding", AttrValue::Str("\x08\x04".into()))];
        check("XlaSpmdFullToShardShape", &manual, &[x(DType::F32, &[5, 3])], Ok(&[(DType::F32, &[5, 3])]));
    }
}
