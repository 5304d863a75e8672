//! `CollectiveAssignGroupV2` (the group of a device in a group assignment),
//! `XlaReduceScatter` for groups of one, and `XlaScatter` on the simulator.
//!
//! `XlaScatter` is XLA's general scatter, whose
//! `update_computation` combines each update element with the operand
//! element it lands on (a call op of kind `Apply`, run through
//! [`super::xla_fn::apply`] with the module's functions).
//!
//! Meaning, as XLA defines the scatter TensorFlow's bridge emits (the
//! geometry is [`scatter_geometry`], shared with the type rule and the
//! lowering): the result starts as the operand; each update window starts
//! at the operand position its index vector names; a window that does not
//! fit the operand whole (a negative start, or one past the end) is skipped
//! whole, as XLA skips it. Updates that meet at one position are combined
//! in row-major order of the updates; XLA leaves that order open, so only
//! order-free combiners give one answer on every backend.
//!
//! Cost: one function call per update element, running the function body
//! in the interpreter; the result is held as scalar tensors (a few words
//! each) until it is packed.

use super::arg;
use super::xla_fn::{assemble, call, func, strides, unravel, Elements, Run};
use crate::exec::error::KernelError;
use crate::exec::tensor::Tensor;
use crate::ir::shapes::rules::xla_misc::scatter_geometry;
use crate::ir::AttrMap;

/// Runs `CollectiveAssignGroupV2` and `XlaReduceScatter`; `None` for other ops.
pub(super) fn dispatch(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Option<Result<Vec<Tensor>, KernelError>> {
    match op {
        "CollectiveAssignGroupV2" => Some(assign_group(op, inputs)),
        "XlaReduceScatter" => Some(reduce_scatter_alone(op, attrs, inputs)),
        _ => None,
    }
}

/// `XlaReduceScatter(input, group_assignment, scatter_dimension) {reduce_op}`
/// outside a replicated program, for groups of one member: the input (its
/// one block). In a replicated program the lowering makes it a
/// `CollectiveAllReduce` that keeps the member's block.
fn reduce_scatter_alone(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Result<Vec<Tensor>, KernelError> {
    let (x, groups) = (arg(op, inputs, 0)?, arg(op, inputs, 1)?);
    let reduce = attrs.get_str("reduce_op").unwrap_or("Add");
    if !matches!(reduce, "Add" | "Mean" | "Max" | "Min" | "Mul") {
        return Err(KernelError::invalid(op, format!("unknown reduce_op `{reduce}`")));
    }
    let d = arg(op, inputs, 2)?.to_i64_vec(op, "scatter_dimension")?;
    if !matches!(d[..], [d] if usize::try_from(d).is_ok_and(|d| d < x.shape().len())) {
        return Err(KernelError::invalid(op, format!("scatter_dimension {d:?} is not a dimension of the input")));
    }
    match groups.shape() {
        [_, 1] => Ok(vec![x.clone()]),
        other => Err(KernelError::invalid(
            op,
            format!(
                "group_assignment of shape {other:?}: outside a replicated program the simulator runs this op \
                 only for groups of one member (PJRT runs any groups)"
            ),
        )),
    }
}

/// `CollectiveAssignGroupV2(group_assignment, device_index, base_key)`:
/// the size of the group (row) that holds the device, and `base_key` plus
/// that row's index, as TensorFlow's CPU kernel gives them. A device in no
/// group is an error; a key of 0 (reserved by TensorFlow) too.
fn assign_group(op: &str, inputs: &[Tensor]) -> Result<Vec<Tensor>, KernelError> {
    let groups = arg(op, inputs, 0)?;
    let [rows, size] = *groups.shape() else {
        return Err(KernelError::invalid(op, format!("group_assignment must be 2-D, got shape {:?}", groups.shape())));
    };
    let scalar = |i: usize, what: &str| -> Result<i64, KernelError> {
        match arg(op, inputs, i)?.to_i64_vec(op, what)?[..] {
            [v] => Ok(v),
            _ => Err(KernelError::invalid(op, format!("{what} must be a scalar"))),
        }
    };
    let (device, base) = (scalar(1, "device_index")?, scalar(2, "base_key")?);
    let ids = groups.to_i64_vec(op, "group_assignment")?;
    let row = (0..rows).find(|&r| ids[r * size..(r + 1) * size].contains(&device)).ok_or_else(|| {
        KernelError::invalid(op, format!("device_index {device} is in no group of group_assignment {ids:?}"))
    })?;
    let key = base + row as i64;
    let key = i32::try_from(key).ok().filter(|&k| k != 0).ok_or_else(|| {
        KernelError::invalid(
            op,
            format!("group key {key} (base_key {base} + group {row}): 0 is reserved and keys are int32"),
        )
    })?;
    let size = i32::try_from(size).map_err(|_| KernelError::invalid(op, "the group is too large"))?;
    Ok(vec![Tensor::scalar(size), Tensor::scalar(key)])
}

/// `XlaScatter(operand, scatter_indices, updates)` with `update_computation`.
pub(super) fn scatter(op: &str, attrs: &AttrMap, inputs: &[Tensor], run: Run) -> Result<Vec<Tensor>, KernelError> {
    let (x, indices, updates) = (arg(op, inputs, 0)?, arg(op, inputs, 1)?, arg(op, inputs, 2)?);
    if updates.dtype() != x.dtype() {
        return Err(KernelError::invalid(
            op,
            format!("the updates are {} but the operand is {}", updates.dtype(), x.dtype()),
        ));
    }
    let g = scatter_geometry(attrs, x.shape(), indices.shape(), updates.shape())
        .map_err(|m| KernelError::invalid(op, m))?;
    let f = func(op, attrs, "update_computation")?;
    let index = indices.to_i64_vec(op, "scatter_indices")?;
    let (shape, index_shape, update_shape) = (x.shape(), indices.shape(), updates.shape());
    let (x_strides, index_strides) = (strides(shape), strides(index_shape));
    let values = Elements::new(op, x)?;
    let sources = Elements::new(op, updates)?;
    let mut out = (0..x.len()).map(|i| values.at(i)).collect::<Result<Vec<_>, _>>()?;
    // The operand dimensions a window runs along, in order (paired with `update_window_dims`).
    let window_dims: Vec<usize> = (0..shape.len()).filter(|d| !g.inserted.contains(d)).collect();
    let vector_step = index_strides.get(g.index_vector_dim).copied().unwrap_or(0);
    let (mut u, mut start) = (vec![0usize; update_shape.len()], vec![0i64; shape.len()]);
    for i in 0..updates.len() {
        unravel(i, update_shape, &mut u);
        // The index vector of this update: its scatter dimensions, in order, address the indices.
        let mut batch = (0..u.len()).filter(|d| !g.update_window_dims.contains(d)).map(|d| u[d]);
        let mut base = 0;
        for (d, &s) in index_strides.iter().enumerate() {
            if d != g.index_vector_dim {
                base += batch.next().unwrap_or(0) * s;
            }
        }
        start.iter_mut().for_each(|s| *s = 0);
        for (k, &dim) in g.to_operand.iter().enumerate() {
            start[dim] = index[base + k * vector_step];
        }
        let fits = start.iter().zip(&g.window).zip(shape).all(|((&s, &w), &n)| s >= 0 && s as usize + w <= n);
        if !fits {
            continue;
        }
        let mut at = 0;
        for (d, &s) in start.iter().enumerate() {
            let within = window_dims.iter().position(|&w| w == d).map_or(0, |k| u[g.update_window_dims[k]]);
            at += (s as usize + within) * x_strides[d];
        }
        let prev = std::mem::replace(&mut out[at], Tensor::scalar(false));
        out[at] = call(op, run, f, vec![prev, sources.at(i)?], &[x])?.remove(0);
    }
    Ok(vec![assemble(op, x, shape, &out)?])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::run_kernel;
    use crate::ir::types::FuncRef;
    use crate::ir::AttrValue;
    use prost::Message;

    fn add(_: &str, args: Vec<Tensor>) -> Result<Vec<Tensor>, KernelError> {
        run_kernel("AddV2", &AttrMap::new(), &args)
    }

    fn attrs(window: &[i64], inserted: &[i64], to_operand: &[i64], ivd: i64) -> AttrMap {
        let d = crate::ir::xla_proto::ScatterDimensionNumbers {
            update_window_dims: window.to_vec(),
            inserted_window_dims: inserted.to_vec(),
            scatter_dims_to_operand_dims: to_operand.to_vec(),
            index_vector_dim: ivd,
            ..Default::default()
        };
        let mut a = AttrMap::new();
        a.insert("dimension_numbers", AttrValue::Bytes(d.encode_to_vec()));
        a.insert(
            "update_computation",
            AttrValue::Func(Box::new(FuncRef { name: "add".into(), attrs: AttrMap::new() })),
        );
        a
    }

    #[test]
    fn rows_add_in_and_windows_past_the_end_are_skipped() {
        let x = Tensor::from_vec(&[3, 2], vec![0f32; 6]).unwrap();
        let rows = attrs(&[1], &[0], &[0], 1);
        let indices = Tensor::from_vec(&[3, 1], vec![2i32, 0, 2]).unwrap();
        let updates = Tensor::from_vec(&[3, 2], vec![1f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let out = scatter("XlaScatter", &rows, &[x.clone(), indices, updates.clone()], &add).unwrap();
        assert_eq!(out[0], Tensor::from_vec(&[3, 2], vec![3f32, 4.0, 0.0, 0.0, 6.0, 8.0]).unwrap());
        // A row index of 3 or -1 is past the operand: those rows are dropped, the others land.
        let outside = Tensor::from_vec(&[3, 1], vec![3i32, 1, -1]).unwrap();
        let out = scatter("XlaScatter", &rows, &[x.clone(), outside, updates.clone()], &add).unwrap();
        assert_eq!(out[0], Tensor::from_vec(&[3, 2], vec![0f32, 0.0, 3.0, 4.0, 0.0, 0.0]).unwrap());
        // Mismatched updates are an error naming the dimensions.
        let few = Tensor::from_vec(&[2, 1], vec![0i32, 1]).unwrap();
        let err = scatter("XlaScatter", &rows, &[x, few, updates], &add).unwrap_err();
        assert!(err.to_string().contains("batch dimensions"), "{err}");
    }
}
