//! Last-step outputs of a run, grouped as TPUStrategy groups them.
//!
//! A replicated computation yields, per replica, one value per output. The
//! run's result is grouped by output, then replica:
//! `[[out0_r0, out0_r1, ...], [out1_r0, ...]]`. An output marked with a
//! reduce op (SUM or MEAN) was already reduced on the devices, so every
//! replica holds the same value and the result is the first replica's copy;
//! an unmarked output keeps its per-replica list.
//!
//! A user marks output i of a replicate region with the region attribute
//! `output_reduce_ops = ["NONE", "SUM", ...]`; the rewrite puts the mark on
//! the output's `TPUReplicatedOutput` (`reduce_op = "SUM"`), where a
//! TensorFlow graph can carry it too, and the lowering all-reduces the
//! output over the replicas before it leaves them.

use super::tensor::Tensor;
use crate::ir::Graph;

/// A reduction a user asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// The sum over the replicas.
    Sum,
    /// The sum divided by the number of replicas.
    Mean,
}

impl ReduceOp {
    /// Parses `SUM` or `MEAN` (any case); other reductions are not supported.
    pub fn parse(text: &str) -> Option<ReduceOp> {
        match text.to_ascii_uppercase().as_str() {
            "SUM" => Some(ReduceOp::Sum),
            "MEAN" => Some(ReduceOp::Mean),
            _ => None,
        }
    }

    /// The name as the language writes it.
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "SUM",
            ReduceOp::Mean => "MEAN",
        }
    }
}

/// The value of one output of a run.
#[derive(Clone, Debug, PartialEq)]
pub enum OutputValue {
    /// One value per replica, in replica order.
    PerReplica(Vec<Tensor>),
    /// The reduced value (the first replica's copy).
    Reduced(Tensor),
}

/// Groups `per_replica` (`per_replica[r][i]` is output `i` of replica `r`)
/// by output; output `i` is reduced when `reduce[i]` is a reduce op.
///
/// Outputs past the end of `reduce` are unmarked. Replicas with fewer
/// outputs than replica 0 simply contribute nothing to the missing ones; an
/// output no replica produced is an empty per-replica list.
pub fn group_outputs(per_replica: Vec<Vec<Tensor>>, reduce: &[Option<ReduceOp>]) -> Vec<OutputValue> {
    let num_outputs = per_replica.iter().map(Vec::len).max().unwrap_or(0);
    let mut grouped: Vec<Vec<Tensor>> = vec![Vec::with_capacity(per_replica.len()); num_outputs];
    for replica in per_replica {
        for (i, value) in replica.into_iter().enumerate() {
            grouped[i].push(value);
        }
    }
    grouped
        .into_iter()
        .enumerate()
        .map(|(i, values)| match reduce.get(i).copied().flatten() {
            Some(_) if !values.is_empty() => {
                OutputValue::Reduced(values.into_iter().next().expect("checked non-empty"))
            }
            _ => OutputValue::PerReplica(values),
        })
        .collect()
}

/// The reduce op of each output of a rewritten graph, indexed by output:
/// output i's shards are `output_{i}_shard_<r>`, reading a
/// `TPUReplicatedOutput` that may carry `reduce_op`. Outputs are counted up
/// to the highest index found (below the node count, since every output has
/// a node); an unmarked or unknown one is `None`.
pub fn output_reduce_ops(tagged: &Graph) -> Vec<Option<ReduceOp>> {
    let mut ops: Vec<Option<ReduceOp>> = Vec::new();
    for id in tagged.node_ids() {
        let node = tagged.node(id);
        let Some(index) = node.name.strip_prefix("output_").and_then(|rest| rest.strip_suffix("_shard_0")) else {
            continue;
        };
        // A user's node may carry such a name with any number in it: an
        // index no output of this graph can have is not one.
        let Ok(index) = index.parse::<usize>() else { continue };
        if index >= tagged.node_count() {
            continue;
        }
        let fan = tagged.data_inputs(id).first().map(|i| tagged.node(i.src));
        let reduce = fan
            .filter(|f| &*f.op == "TPUReplicatedOutput")
            .and_then(|f| f.attrs.get_str("reduce_op"))
            .and_then(ReduceOp::parse);
        if ops.len() <= index {
            ops.resize(index + 1, None);
        }
        ops[index] = reduce;
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(v: f32) -> Tensor {
        Tensor::scalar(v)
    }

    #[test]
    fn groups_by_output_then_replica() {
        // Replica r's output i is 10 * r + i.
        let per_replica: Vec<Vec<Tensor>> = (0..3).map(|r| (0..2).map(|i| t((10 * r + i) as f32)).collect()).collect();
        let grouped = group_outputs(per_replica, &[]);
        assert_eq!(
            grouped,
            vec![
                OutputValue::PerReplica(vec![t(0.0), t(10.0), t(20.0)]),
                OutputValue::PerReplica(vec![t(1.0), t(11.0), t(21.0)]),
            ]
        );
    }

    #[test]
    fn reduced_outputs_take_the_first_replica_copy() {
        let per_replica = vec![vec![t(6.0), t(1.0)], vec![t(6.0), t(2.0)]];
        let grouped = group_outputs(per_replica, &[Some(ReduceOp::Mean), None]);
        assert_eq!(grouped, vec![OutputValue::Reduced(t(6.0)), OutputValue::PerReplica(vec![t(1.0), t(2.0)])]);
        assert_eq!(group_outputs(Vec::new(), &[Some(ReduceOp::Sum)]), Vec::new());
        assert_eq!(ReduceOp::parse("mean"), Some(ReduceOp::Mean));
        assert_eq!(ReduceOp::parse("MAX"), None);
    }
}
