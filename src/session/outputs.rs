//! The computation outputs of a lowered run as the user knows them: each
//! `TPUReplicatedOutput` of the tagged graph, the host's copy of each
//! replica's value (`output_<i>_shard_<r>:0`, what the backends fetch),
//! and the tensor the computation returns (`loss:0`; for a plain graph,
//! the fetch it carries). The binary's text, `--json` and `--npy-dir`
//! output and the Python package's `run` name values the same way.

use crate::exec::driver::HOST;
use crate::exec::{OutputValue, ReduceOp, Tensor};
use crate::ir::Module;
use crate::passes::single_replica::SingleReplica;

/// A computation output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    /// The tensor the computation returns, as the user knows it.
    pub name: String,
    /// The host's copy of each replica's value (`output_<i>_shard_<r>:0`), in replica order.
    pub shards: Vec<String>,
    /// The output's reduce op, if it has one: then one value stands for all.
    pub reduce: Option<ReduceOp>,
}

/// Every computation output of the tagged graph, cluster by cluster in
/// graph order: each `TPUReplicatedOutput`, the `Identity` per replica the
/// host reads, and the tensor it returns (seen through the one `Identity`
/// the fan-out wraps each output in; a plain graph's outputs by the fetch
/// they carry). Shards the lowered host program lacks are left out.
pub fn computation_outputs(tagged: &Module, lowered: &Module, single: Option<&SingleReplica>) -> Vec<Output> {
    let (Some(graph), Some(host)) = (tagged.graphs.first(), lowered.graph(HOST)) else { return Vec::new() };
    let operand = |id| graph.data_inputs(id).into_iter().next();
    let mut outputs = Vec::new();
    for fan in graph.nodes_in_order() {
        let node = graph.node(fan);
        if &*node.op != "TPUReplicatedOutput" {
            continue;
        }
        let mut shards: Vec<(u32, String)> = graph
            .uses(fan)
            .into_iter()
            .filter_map(|(user, edge)| match edge.kind {
                crate::ir::EdgeKind::Data { output, .. } if &*graph.node(user).op == "Identity" => {
                    let name = graph.node(user).name.to_string();
                    host.find(&name).map(|_| (output, format!("{name}:0")))
                }
                _ => None,
            })
            .collect();
        if shards.is_empty() {
            continue;
        }
        shards.sort();
        let shards: Vec<String> = shards.into_iter().map(|(_, name)| name).collect();
        let asked = single.and_then(|s| s.fetches.iter().find(|(_, carrier)| *carrier == shards[0]));
        let name = match asked {
            Some((asked, _)) => asked.clone(),
            None => operand(fan)
                .map(|wrapped| match &*graph.node(wrapped.src).op {
                    "Identity" => operand(wrapped.src).unwrap_or(wrapped),
                    _ => wrapped,
                })
                .map_or_else(
                    || node.name.to_string(),
                    |v| format!("{}:{}", graph.node(v.src).name, v.output.unwrap_or(0)),
                ),
        };
        let reduce = node.attrs.get_str("reduce_op").and_then(ReduceOp::parse);
        outputs.push(Output { name, shards, reduce });
    }
    outputs
}

/// Every shard of `outputs`, in order: the fetches of a run without `--fetch`.
pub fn shard_fetches(outputs: &[Output]) -> Vec<String> {
    outputs.iter().flat_map(|o| o.shards.iter().cloned()).collect()
}

/// The fetched values grouped by output (they come in the order of
/// [`shard_fetches`]): per replica, or one reduced value.
pub fn grouped_outputs(outputs: &[Output], fetched: &[(String, Tensor)]) -> Vec<(Option<ReduceOp>, OutputValue)> {
    let mut values = fetched.iter().map(|(_, t)| t.clone());
    outputs
        .iter()
        .map(|o| {
            let mine: Vec<Tensor> = values.by_ref().take(o.shards.len()).collect();
            match (o.reduce, mine.first()) {
                // Every replica holds the reduced value: show it once.
                (Some(op), Some(first)) => (Some(op), OutputValue::Reduced(first.clone())),
                _ => (None, OutputValue::PerReplica(mine)),
            }
        })
        .collect()
}

/// The name a user knows for each backend fetch: a computation output's
/// shard is its tensor (with its replica when there are several), a plain
/// graph's fetch the name it was asked by; anything else as it is.
pub fn display_names(outputs: &[Output], single: Option<&SingleReplica>, fetches: &[String]) -> Vec<String> {
    fetches
        .iter()
        .map(|f| {
            if let Some((asked, _)) = single.and_then(|s| s.fetches.iter().find(|(_, c)| c == f)) {
                return asked.clone();
            }
            for o in outputs {
                match o.shards.iter().position(|s| s == f) {
                    Some(r) if o.shards.len() > 1 => return format!("{} (replica {r})", o.name),
                    Some(_) => return o.name.clone(),
                    None => {}
                }
            }
            f.clone()
        })
        .collect()
}
