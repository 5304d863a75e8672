//! The type rules of `CollectiveAssignGroupV2` (two int32 scalars),
//! `XlaReduceScatter` (a block of the scatter dimension) and `XlaScatter`, and the geometry of `XlaScatter`'s
//! `ScatterDimensionNumbers`, shared with the simulator's kernel and the
//! StableHLO lowering so that the three agree.
//!
//! Meaning, as XLA's scatter: every update element belongs to one update
//! window; the update's scatter dimensions (those not in
//! `update_window_dims`) pick an index vector of `scatter_indices`, whose
//! components (`scatter_dims_to_operand_dims`) give the window's start in
//! the operand; the window's dimensions are the operand's dimensions less
//! `inserted_window_dims` (which have size 1). The result has the operand's
//! type. Invariant: a geometry is returned only after every dimension number
//! is checked against the operands, as XLA's shape inference checks them.

use super::{Args, OutType};
use crate::ir::xla_proto::{decode, dims_below, ScatterDimensionNumbers};
use crate::ir::{AttrMap, DType};

/// A scatter's dimensions, checked against its operand, indices and updates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScatterGeometry {
    /// The dimension of the indices that holds each index vector (their rank: scalar indices).
    pub index_vector_dim: usize,
    /// Operand dimension of each index vector component.
    pub to_operand: Vec<usize>,
    /// Operand dimensions that the update windows do not have (size 1), increasing.
    pub inserted: Vec<usize>,
    /// Update dimensions that run along a window, increasing.
    pub update_window_dims: Vec<usize>,
    /// The window's size along every operand dimension (1 for inserted ones).
    pub window: Vec<usize>,
}

/// The geometry of `XlaScatter`'s `dimension_numbers` on these shapes.
pub fn scatter_geometry(
    attrs: &AttrMap,
    operand: &[usize],
    indices: &[usize],
    updates: &[usize],
) -> Result<ScatterGeometry, String> {
    let d: ScatterDimensionNumbers = decode(attrs, "dimension_numbers")?;
    if !d.input_batching_dims.is_empty() || !d.scatter_indices_batching_dims.is_empty() {
        return Err("scatters with batching dimensions (input_batching_dims) are not supported".into());
    }
    let rank = operand.len();
    let ivd = usize::try_from(d.index_vector_dim)
        .ok()
        .filter(|&v| v <= indices.len())
        .ok_or_else(|| format!("index_vector_dim {} is outside [0, {}]", d.index_vector_dim, indices.len()))?;
    let vector_len = if ivd == indices.len() { 1 } else { indices[ivd] };
    let to_operand = dims_below(&d.scatter_dims_to_operand_dims, rank, "scatter_dims_to_operand_dims")?;
    if to_operand.len() != vector_len {
        return Err(format!(
            "scatter_dims_to_operand_dims has {} entries for index vectors of {vector_len}",
            to_operand.len()
        ));
    }
    let inserted = dims_below(&d.inserted_window_dims, rank, "inserted_window_dims")?;
    let update_window_dims = dims_below(&d.update_window_dims, updates.len(), "update_window_dims")?;
    for (what, dims) in [("inserted_window_dims", &inserted), ("update_window_dims", &update_window_dims)] {
        if dims.windows(2).any(|w| w[0] > w[1]) {
            return Err(format!("{what} must be in increasing order"));
        }
    }
    if update_window_dims.len() + inserted.len() != rank {
        return Err(format!(
            "update_window_dims ({}) and inserted_window_dims ({}) must together count the operand's rank {rank}",
            update_window_dims.len(),
            inserted.len()
        ));
    }
    // The update's scatter dimensions match the indices' dimensions other than the index vector's.
    let batch: Vec<usize> = (0..indices.len()).filter(|&i| i != ivd).map(|i| indices[i]).collect();
    let scatter: Vec<usize> =
        (0..updates.len()).filter(|d| !update_window_dims.contains(d)).map(|d| updates[d]).collect();
    if batch != scatter {
        return Err(format!(
            "the updates' scatter dimensions {scatter:?} differ from the indices' batch dimensions {batch:?}"
        ));
    }
    let mut sizes = update_window_dims.iter().map(|&u| updates[u]);
    let mut window = Vec::with_capacity(rank);
    for (i, &n) in operand.iter().enumerate() {
        let size = if inserted.contains(&i) { 1 } else { sizes.next().unwrap_or(1) };
        if size > n {
            return Err(format!("the update window is {size} along operand dimension {i} of size {n}"));
        }
        window.push(size);
    }
    Ok(ScatterGeometry { index_vector_dim: ivd, to_operand, inserted, update_window_dims, window })
}

/// `CollectiveAssignGroupV2(group_assignment, device_index, base_key)`:
/// two int32 scalars, the group's size and key.
pub(super) fn assign_group(a: &Args) -> Result<Vec<OutType>, String> {
    let groups = a.x(0)?;
    if groups.shape.len() != 2 {
        return Err(format!("group_assignment must be 2-D, got shape {:?}", groups.shape));
    }
    Ok(vec![OutType::new(DType::I32, Vec::new()); 2])
}

/// `XlaReduceScatter(input, group_assignment, scatter_dimension)`: the
/// input with the scatter dimension divided among the members of a group
/// (the assignment's second dimension); the dimension must be a constant.
pub(super) fn reduce_scatter(a: &Args) -> Result<Vec<OutType>, String> {
    let (x, groups) = (a.x(0)?, a.x(1)?);
    let &[_, members] = groups.shape else {
        return Err(format!("group_assignment must be 2-D, got shape {:?}", groups.shape));
    };
    let d = match a.ints(2, "scatter_dimension")? {
        [d] => *d,
        other => return Err(format!("scatter_dimension must be one integer, got {other:?}")),
    };
    let axis = usize::try_from(d)
        .ok()
        .filter(|&k| k < x.shape.len())
        .ok_or_else(|| format!("scatter_dimension {d} is outside the input's rank {}", x.shape.len()))?;
    if members == 0 || !x.shape[axis].is_multiple_of(members) {
        return Err(format!("dimension {axis} ({}) does not split among {members} members", x.shape[axis]));
    }
    let mut shape = x.shape.to_vec();
    shape[axis] /= members;
    Ok(vec![OutType::new(x.dtype, shape)])
}

/// `XlaScatter(operand, scatter_indices, updates)`: the operand's type.
pub(super) fn scatter(a: &Args) -> Result<Vec<OutType>, String> {
    let (x, indices, updates) = (a.x(0)?, a.x(1)?, a.x(2)?);
    if updates.dtype != x.dtype {
        return Err(format!("the updates are {} but the operand is {}", updates.dtype, x.dtype));
    }
    scatter_geometry(a.attrs, x.shape, indices.shape, updates.shape)?;
    Ok(vec![OutType::new(x.dtype, x.shape.to_vec())])
}

#[cfg(test)]
mod tests {
    use super::super::tests::{check, x};
    use crate::ir::{AttrValue, DType};
    use prost::Message;

    fn dims(window: &[i64], inserted: &[i64], to_operand: &[i64], ivd: i64) -> AttrValue {
        let d = crate::ir::xla_proto::ScatterDimensionNumbers {
            update_window_dims: window.to_vec(),
            inserted_window_dims: inserted.to_vec(),
            scatter_dims_to_operand_dims: to_operand.to_vec(),
            index_vector_dim: ivd,
            ..Default::default()
        };
        AttrValue::Bytes(d.encode_to_vec())
    }

    #[test]
    fn scatter_types_follow_the_operand_and_bad_numbers_are_named() {
        let rows = [("dimension_numbers", dims(&[1], &[0], &[0], 1))];
        let ops = [x(DType::F32, &[5, 3]), x(DType::I32, &[2, 1]), x(DType::F32, &[2, 3])];
        check("XlaScatter", &rows, &ops, Ok(&[(DType::F32, &[5, 3])]));
        let wide = [x(DType::F32, &[5, 3]), x(DType::I32, &[2, 1]), x(DType::F32, &[2, 4])];
        check("XlaScatter", &rows, &wide, Err("update window is 4"));
        let count = [x(DType::F32, &[5, 3]), x(DType::I32, &[3, 1]), x(DType::F32, &[2, 3])];
        check("XlaScatter", &rows, &count, Err("batch dimensions"));
        let mixed = [x(DType::F32, &[5, 3]), x(DType::I32, &[2, 1]), x(DType::F64, &[2, 3])];
        check("XlaScatter", &rows, &mixed, Err("the updates are"));
        let short = [("dimension_numbers", dims(&[1], &[], &[0], 1))];
        check("XlaScatter", &short, &ops, Err("together count"));
        let groups = (DType::I32, vec![1, 2], None);
        let dim = |d: i64| (DType::I32, vec![], Some(vec![d]));
        let rs = [x(DType::F32, &[3, 4]), groups.clone(), dim(1)];
        check("XlaReduceScatter", &[], &rs, Ok(&[(DType::F32, &[3, 2])]));
        check("XlaReduceScatter", &[], &[x(DType::F32, &[3, 4]), groups, dim(0)], Err("does not split"));
    }
}
