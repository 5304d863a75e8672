//! Validation of the replica groups a collective names.
//!
//! A `CrossReplicaSum`'s or `AllGather`'s `group_assignment` (its constant
//! second operand), or the `group_assignment` attribute of a fused
//! all-reduce, is a `[groups, replicas_per_group]` tensor that must
//! partition the cluster's replicas: every index in `0..num_replicas`, each
//! exactly once. Anything else would leave a replica waiting for a peer
//! that never comes (the run used to wait out its timeout and blame the
//! host). Cost: linear in the members and in the group tensors, which are
//! bounded by the replica count before they are expanded.

use super::error::PassError;
use crate::ir::{DType, Graph, NodeId, TensorData, TensorLit};

/// Checks the replica groups of every collective among `members`.
pub fn check(graph: &Graph, cluster: &str, num_replicas: u32, members: &[NodeId], errors: &mut Vec<PassError>) {
    for &id in members {
        let node = graph.node(id);
        let tensor = match &*node.op {
            "CrossReplicaSum" | "AllGather" => {
                graph.data_inputs(id).get(1).and_then(|operand| graph.node(operand.src).attrs.get("value")?.as_tensor())
            }
            _ => node.attrs.get("group_assignment").and_then(|v| v.as_tensor()),
        };
        let Some(tensor) = tensor else { continue };
        if let Err(reason) = partition(tensor, num_replicas) {
            errors.push(PassError::InvalidReplicaGroups {
                node: node.name.to_string(),
                cluster: cluster.to_string(),
                reason,
                span: node.span,
            });
        }
    }
}

/// `Ok` when `tensor` is a `[g, k]` integer tensor whose values partition
/// `0..num_replicas`; else why not.
fn partition(tensor: &TensorLit, num_replicas: u32) -> Result<(), String> {
    let [groups, size] = tensor.shape[..] else {
        return Err(format!("group_assignment must be 2-D, found shape {:?}", tensor.shape));
    };
    let n = u64::from(num_replicas);
    let total = u64::try_from(groups).ok().zip(u64::try_from(size).ok()).and_then(|(g, k)| g.checked_mul(k));
    if total != Some(n) {
        return Err(format!("{groups} group(s) of {size} replica(s) cannot partition {num_replicas} replicas"));
    }
    let values: Vec<i64> = match (&tensor.data, tensor.dtype) {
        (TensorData::Int(v), _) => v.iter().map(|&x| i64::from(x)).collect(),
        (TensorData::Int64(v), _) => v.clone(),
        // `tensor_content`: little-endian values, at most one per replica read.
        (TensorData::Content(bytes), DType::I32) => {
            bytes.chunks_exact(4).map(|c| i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]]))).collect()
        }
        (TensorData::Content(bytes), DType::I64) => bytes
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
            .collect(),
        _ => return Err(format!("group_assignment must hold integers, found dtype {}", tensor.dtype)),
    };
    // A literal may hold fewer values than its shape: the last one repeats.
    let value = |i: usize| values.get(i).or(values.last()).copied();
    let mut seen = vec![false; num_replicas as usize];
    for i in 0..num_replicas as usize {
        let Some(r) = value(i) else { return Err("group_assignment holds no values".into()) };
        let slot = usize::try_from(r).ok().filter(|&r| r < seen.len());
        let Some(slot) = slot else {
            return Err(format!("replica {r} is out of range (the cluster has replicas 0..{num_replicas})"));
        };
        if std::mem::replace(&mut seen[slot], true) {
            return Err(format!("replica {r} is in more than one group"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups(shape: Vec<i64>, values: Vec<i32>) -> TensorLit {
        TensorLit { dtype: DType::I32, shape, data: TensorData::Int(values) }
    }

    #[test]
    fn only_a_partition_passes() {
        assert!(partition(&groups(vec![2, 2], vec![0, 3, 1, 2]), 4).is_ok());
        assert!(partition(&groups(vec![1, 2], vec![0, 5]), 2).unwrap_err().contains("out of range"));
        assert!(partition(&groups(vec![1, 1], vec![0]), 2).unwrap_err().contains("cannot partition"));
        assert!(partition(&groups(vec![1, 2], vec![1, 1]), 2).unwrap_err().contains("more than one group"));
        assert!(partition(&groups(vec![1_000_000_000_000, 1], vec![0]), 2).is_err());
        let content =
            TensorLit { dtype: DType::I32, shape: vec![1, 2], data: TensorData::Content(vec![1, 0, 0, 0, 0, 0, 0, 0]) };
        assert!(partition(&content, 2).is_ok());
    }
}
