//! The feed/fetch rule of replicated computations.
//!
//! Meaning, as in the seed: an op of a TPU cluster may be neither fed nor
//! fetched when the cluster has more than one replica, or when the op is
//! not in an outside-compilation cluster; what the computation computes
//! leaves it only through `output_<i>_shard_<r>`. The rule is not stored as
//! extra IR: it follows from `_tpu_replicate`, `_xla_outside_compilation`
//! and the cluster metadata's `num_replicas`, which all survive printing
//! and parsing. For graphs not yet rewritten, the enclosing `replicate`
//! and `outside_compilation` regions give the same answer.
//!
//! The executor asks [`FeedFetchRule::check`] before every feed and fetch.

use std::collections::HashMap;

use super::common::{OUTSIDE_COMPILATION, TPU_REPLICATE};
use super::error::PassError;
use crate::ir::{Graph, NodeId, RegionKind};

/// Feeding a value into a node or fetching a value out of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// A value fed into the node.
    Feed,
    /// A value fetched out of the node.
    Fetch,
}

impl Access {
    fn verb(self) -> &'static str {
        match self {
            Access::Feed => "feed",
            Access::Fetch => "fetch",
        }
    }
}

/// The replica count of every cluster of a graph, for fast checks.
#[derive(Clone, Debug, Default)]
pub struct FeedFetchRule {
    num_replicas: HashMap<String, i64>,
}

impl FeedFetchRule {
    /// Reads the clusters' `num_replicas` from their metadata ops.
    pub fn new(graph: &Graph) -> FeedFetchRule {
        let mut num_replicas = HashMap::new();
        for id in graph.node_ids() {
            let node = graph.node(id);
            if &*node.op != "TPUReplicateMetadata" {
                continue;
            }
            if let (Some(cluster), Some(n)) = (node.attrs.get_str(TPU_REPLICATE), node.attrs.get_int("num_replicas")) {
                num_replicas.entry(cluster.to_string()).or_insert(n);
            }
        }
        FeedFetchRule { num_replicas }
    }

    /// Whether `node` may be fed or fetched; the error names the rule.
    pub fn check(&self, graph: &Graph, node: NodeId, access: Access) -> Result<(), PassError> {
        let n = graph.node(node);
        let (cluster, oc, replicas) = if let Some(cluster) = n.attrs.get_str(TPU_REPLICATE) {
            let oc = n.attrs.get_str(OUTSIDE_COMPILATION).map(str::to_string);
            (cluster.to_string(), oc, self.num_replicas.get(cluster).copied())
        } else if let Some(rep) = graph.enclosing_replicate(n.region) {
            let oc = graph
                .region_chain(n.region)
                .take_while(|r| *r != rep)
                .find(|r| matches!(graph.region(*r).kind, RegionKind::OutsideCompilation))
                .map(|r| graph.region(r).attrs.get_str(OUTSIDE_COMPILATION).unwrap_or("?").to_string());
            let name = graph.region(rep).attrs.get_str(TPU_REPLICATE).unwrap_or("replicate").to_string();
            (name, oc, graph.region(rep).num_replicas())
        } else {
            return Ok(());
        };
        let reason = match (oc, replicas) {
            (None, _) => format!("it is compiled for the TPU in cluster `{cluster}`"),
            (Some(_), Some(1)) => return Ok(()),
            (Some(oc), Some(r)) => {
                format!("it is in outside_compilation cluster `{oc}` of cluster `{cluster}`, which has {r} replicas")
            }
            (Some(oc), None) => format!(
                "it is in outside_compilation cluster `{oc}` of cluster `{cluster}`, whose replica count is unknown"
            ),
        };
        Err(PassError::FeedFetch { access: access.verb(), node: n.name.to_string(), reason, span: n.span })
    }
}

/// Checks one feed or fetch; builds the rule first (O(nodes)), so callers
/// with many checks should keep a [`FeedFetchRule`].
pub fn check(graph: &Graph, node: NodeId, access: Access) -> Result<(), PassError> {
    FeedFetchRule::new(graph).check(graph, node, access)
}
