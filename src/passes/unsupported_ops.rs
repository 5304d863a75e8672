//! Unsupported-op report: host-only ops compiled for the TPU.
//!
//! Meaning: an op of a cluster (`_tpu_replicate`) that is not in an
//! outside-compilation cluster (`_xla_outside_compilation`) and whose type
//! the op registry marks host-only (string ops, `Print`, py-function calls,
//! placeholders, ...) cannot be compiled. Per cluster, one warning lists
//! them in text order as TensorFlow logs them: "N unsupported operations
//! found:", the first five as `  Type (name)`, then "... and M more".
//!
//! Works on tags alone, so it reports on authored and imported graphs
//! alike, and never changes the graph. Cost: O(nodes + k log k) for k
//! reported ops.

use std::collections::BTreeMap;

use super::common::{OUTSIDE_COMPILATION, TPU_REPLICATE};
use super::error::PassError;
use crate::ir::{ops, Graph, NodeId, NodeKind};

/// How many unsupported ops the warning lists by name.
pub const MAX_LISTED: usize = 5;

/// Reports the host-only ops of each cluster of `graph`.
pub fn unsupported_ops(graph: &mut Graph) -> Vec<PassError> {
    report(graph)
}

/// The warnings of [`unsupported_ops`], without needing `&mut`.
pub fn report(graph: &Graph) -> Vec<PassError> {
    let mut per_cluster: BTreeMap<&str, Vec<NodeId>> = BTreeMap::new();
    for id in graph.node_ids() {
        let node = graph.node(id);
        if node.kind != NodeKind::Op || !ops::is_host_only(&node.op) || node.attrs.contains_key(OUTSIDE_COMPILATION) {
            continue;
        }
        if let Some(cluster) = node.attrs.get_str(TPU_REPLICATE) {
            per_cluster.entry(cluster).or_default().push(id);
        }
    }
    let mut warnings: Vec<(u64, PassError)> = per_cluster
        .into_iter()
        .map(|(cluster, mut ids)| {
            ids.sort_by_key(|&id| graph.node(id).seq);
            let mut listing: String = ids
                .iter()
                .take(MAX_LISTED)
                .map(|&id| format!("  {} ({})\n", graph.node(id).op, graph.node(id).name))
                .collect();
            if ids.len() > MAX_LISTED {
                listing.push_str(&format!("... and {} more\n", ids.len() - MAX_LISTED));
            }
            listing.pop();
            let first = graph.node(ids[0]);
            let warning = PassError::UnsupportedOps {
                cluster: cluster.to_string(),
                count: ids.len(),
                listing,
                span: first.span,
            };
            (first.seq, warning)
        })
        .collect();
    warnings.sort_by_key(|w| w.0);
    warnings.into_iter().map(|w| w.1).collect()
}
