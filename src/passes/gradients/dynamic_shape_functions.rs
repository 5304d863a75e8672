//! The gradient of `DynamicPartition`, as TensorFlow's
//! `_DynamicPartitionGrads` builds it: the positions `0..n` of the rows
//! (shaped like `partitions`) are partitioned as the data was, and
//! `ParallelDynamicStitch` puts each output's gradient rows back at those
//! positions (zeros for an output that received no gradient); the result is
//! reshaped like the data. `partitions` gets none. The ops are emitted with
//! dynamic shapes: the gradient needs no size known before the run.

use super::emitter::{Emitter, Tensor};
use super::functions::Unsupported;
use crate::ir::{AttrValue, DType, NodeId};

/// The gradients of `op`'s inputs when it is a `DynamicPartition`; `None`
/// otherwise.
pub fn gradient(
    e: &mut Emitter<'_>,
    op: NodeId,
    op_type: &str,
    inputs: &[Tensor],
    out_grads: &[Option<Tensor>],
) -> Option<Result<Vec<Option<Tensor>>, Unsupported>> {
    (op_type == "DynamicPartition").then(|| dynamic_partition_grad(e, op, inputs, out_grads))
}

fn dynamic_partition_grad(
    e: &mut Emitter<'_>,
    op: NodeId,
    inputs: &[Tensor],
    out_grads: &[Option<Tensor>],
) -> Result<Vec<Option<Tensor>>, Unsupported> {
    let (Some(&data), Some(&partitions)) = (inputs.first(), inputs.get(1)) else {
        return Err(Some("DynamicPartition expects data and partitions".to_string()));
    };
    let n = e.graph.node(op).attrs.get_int("num_partitions").unwrap_or(0);
    if n < 1 || out_grads.len() != n as usize {
        return Err(Some(format!("DynamicPartition has {} outputs for num_partitions = {n}", out_grads.len())));
    }
    let grads: Vec<Tensor> = (0..n as u32).map(|k| e.grad_or_zeros(op, k, out_grads)).collect();
    let i32_t = e.t_attr(Some(DType::I32));
    let prefix = e.shape("Shape", partitions);
    let name = e.fresh_name("Prod");
    let axis = e.int_const_named(format!("{name}/reduction_indices"), &[0], true);
    let prod_attrs =
        [("keep_dims", AttrValue::Bool(false)), ("Tidx", AttrValue::Type(DType::I32))].into_iter().chain(i32_t.clone());
    let count = e.emit_named(name, "Prod", &[prefix, axis], prod_attrs);
    let name = e.fresh_name("range");
    let start = e.int_const_named(format!("{name}/start"), &[0], true);
    let delta = e.int_const_named(format!("{name}/delta"), &[1], true);
    let range = e.emit_named(name, "Range", &[start, count, delta], [("Tidx", AttrValue::Type(DType::I32))]);
    let reshape_attrs = |t: Option<DType>| {
        [("Tshape", AttrValue::Type(DType::I32))].into_iter().chain(t.map(|d| ("T", AttrValue::Type(d))))
    };
    let attrs = reshape_attrs(Some(DType::I32));
    let positions = e.emit("Reshape", "Reshape", &[range, prefix], attrs);
    let part_attrs = [("num_partitions", AttrValue::Int(n))].into_iter().chain(i32_t);
    let parted = e.emit("DynamicPartition", "DynamicPartition", &[positions, partitions], part_attrs);
    let mut stitch_inputs: Vec<Tensor> = (0..n as u32).map(|k| Tensor { node: parted.node, output: k }).collect();
    stitch_inputs.extend(grads.iter().copied());
    let dtype = e.dtype_of(grads[0]);
    let stitch_attrs = [("N", AttrValue::Int(n))].into_iter().chain(e.t_attr(dtype));
    let stitched = e.emit("ParallelDynamicStitch", "ParallelDynamicStitch", &stitch_inputs, stitch_attrs);
    let data_shape = e.shape("Shape_1", data);
    let attrs = reshape_attrs(dtype);
    let grad = e.emit("Reshape", "Reshape_1", &[stitched, data_shape], attrs);
    Ok(vec![Some(grad), None])
}
