//! Helpers shared by the passes: TensorFlow's attribute names, a linear
//! unique-name allocator, dtype inference for fan-in/fan-out, device parsing
//! and lookups over replicate regions.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, Hasher};

use hashbrown::HashTable;
use rustc_hash::FxBuildHasher;

use crate::ir::{AttrValue, DType, Graph, NodeId, NodeKind, RegionId, RegionKind};

/// The cluster an op belongs to.
pub const TPU_REPLICATE: &str = "_tpu_replicate";
/// The outside-compilation cluster an op belongs to, within its TPU cluster.
pub const OUTSIDE_COMPILATION: &str = "_xla_outside_compilation";
/// Marks the `replicated_input_<i>` identities.
pub const TPU_INPUT_IDENTITY: &str = "_tpu_input_identity";
/// Marks the identities that wrap each computation output.
pub const TPU_OUTPUT_IDENTITY: &str = "_tpu_output_identity";
/// Names the cluster of a `<cluster>/pivot` NoOp.
pub const PIVOT_FOR_CLUSTER: &str = "_pivot_for_cluster";
/// Names the cluster of a `TPUCompilationResult`.
pub const COMPILATION_STATUS: &str = "_tpu_compilation_status";
/// The device TensorFlow gives computation outputs without a device.
pub const REPLICATED_CORE_0: &str = "/device:TPU_REPLICATED_CORE:0";

/// Allocates node names with TensorFlow's rule (`base`, `base_1`, ...) in
/// amortised constant time: a counter per base remembers where the last
/// search stopped, so naming k nodes `Identity` costs O(k), not O(k²).
#[derive(Debug, Default)]
pub struct Namer {
    next_suffix: HashMap<String, u64>,
    reserved: HashSet<String>,
    /// For [`Namer::case_insensitive`]: every name in use, lowercased.
    folded: Option<FoldedNames>,
}

/// The names in use, compared as `str::to_lowercase` folds them, without a
/// lowercased copy per node: the graph's nodes sit in a table by the hash
/// of their folded name (16 bytes a node), and the few names reserved
/// later are kept folded.
#[derive(Debug, Default)]
struct FoldedNames {
    nodes: HashTable<(u64, NodeId)>,
    others: HashSet<String>,
}

/// The hash of `folded` (an already lowercased name) byte by byte, as
/// [`folded_hash`] computes it without lowercasing an ASCII name first.
fn hash_folded(folded: impl Iterator<Item = u8>) -> u64 {
    let mut h = FxBuildHasher.build_hasher();
    for b in folded {
        h.write_u8(b);
    }
    h.finish()
}

/// The hash of `name.to_lowercase()`.
fn folded_hash(name: &str) -> u64 {
    if name.is_ascii() {
        hash_folded(name.bytes().map(|b| b.to_ascii_lowercase()))
    } else {
        hash_folded(name.to_lowercase().bytes())
    }
}

/// Whether `name.to_lowercase() == folded`.
fn folds_to(name: &str, folded: &str) -> bool {
    if name.is_ascii() {
        name.len() == folded.len() && name.bytes().zip(folded.bytes()).all(|(a, b)| a.to_ascii_lowercase() == b)
    } else {
        name.to_lowercase() == folded
    }
}

impl FoldedNames {
    fn of(graph: &Graph) -> FoldedNames {
        let mut nodes = HashTable::with_capacity(graph.node_count());
        for id in graph.node_ids() {
            let hash = folded_hash(&graph.node(id).name);
            nodes.insert_unique(hash, (hash, id), |e| e.0);
        }
        FoldedNames { nodes, others: HashSet::new() }
    }

    /// Whether a node of `graph` or a reserved name folds to `folded`.
    fn contains(&self, graph: &Graph, folded: &str) -> bool {
        let hash = hash_folded(folded.bytes());
        self.others.contains(folded)
            || self.nodes.find(hash, |&(h, id)| h == hash && folds_to(&graph.node(id).name, folded)).is_some()
    }
}

impl Namer {
    /// A namer that also avoids `reserved` (e.g. cluster names in use).
    pub fn with_reserved(reserved: HashSet<String>) -> Namer {
        Namer { next_suffix: HashMap::new(), reserved, folded: None }
    }

    /// A namer that, like TensorFlow's `Graph.unique_name`, compares names
    /// ignoring case: with a node `Cluster` in `graph`, `cluster` is taken.
    /// Costs one pass over the graph's names.
    pub fn case_insensitive(graph: &Graph, reserved: HashSet<String>) -> Namer {
        let mut folded = FoldedNames::of(graph);
        folded.others.extend(reserved.iter().map(|r| r.to_lowercase()));
        Namer { next_suffix: HashMap::new(), reserved, folded: Some(folded) }
    }

    fn taken(&self, graph: &Graph, name: &str) -> bool {
        let folded = self.folded.as_ref().is_some_and(|f| f.contains(graph, &name.to_lowercase()));
        folded || graph.find(name).is_some() || self.reserved.contains(name)
    }

    fn reserve(&mut self, name: &str) {
        if let Some(folded) = &mut self.folded {
            folded.others.insert(name.to_lowercase());
        }
        self.reserved.insert(name.to_string());
    }

    /// A name free in `graph` and not handed out before; it is reserved.
    pub fn fresh(&mut self, graph: &Graph, base: &str) -> String {
        if !self.taken(graph, base) {
            self.reserve(base);
            return base.to_string();
        }
        let mut i = self.next_suffix.get(base).copied().unwrap_or(1);
        loop {
            let candidate = format!("{base}_{i}");
            i += 1;
            if !self.taken(graph, &candidate) {
                self.next_suffix.insert(base.to_string(), i);
                self.reserve(&candidate);
                return candidate;
            }
        }
    }
}

/// The string value of attribute `key` of `id`.
pub fn str_attr<'g>(graph: &'g Graph, id: NodeId, key: &str) -> Option<&'g str> {
    graph.node(id).attrs.get_str(key)
}

/// The cluster tag of `id`.
pub fn cluster_of(graph: &Graph, id: NodeId) -> Option<&str> {
    str_attr(graph, id, TPU_REPLICATE)
}

/// The dtype of output `output` of `id`, read from the attributes that
/// carry it for most ops (`T`, `dtype`, `DstT`, `out_type`, list `Tout`/`T`).
pub fn output_dtype(graph: &Graph, id: NodeId, output: u32) -> Option<DType> {
    let node = graph.node(id);
    if let NodeKind::RegionInput { .. } = node.kind {
        let first = graph.petgraph().edges_directed(id.0, petgraph::Direction::Incoming).find_map(|e| {
            use petgraph::visit::EdgeRef;
            match e.weight().kind {
                crate::ir::EdgeKind::Data { output, slot: 0 } => Some((NodeId(e.source()), output)),
                _ => None,
            }
        })?;
        let producer = graph.node(first.0);
        if matches!(producer.kind, NodeKind::RegionInput { .. }) {
            return None;
        }
        return output_dtype(graph, first.0, first.1);
    }
    let attrs = &node.attrs;
    for key in ["DstT", "out_type", "dtype", "T"] {
        match attrs.get(key) {
            Some(AttrValue::Type(t)) => return Some(*t),
            Some(AttrValue::List(items)) if key == "T" => {
                return items.get(output as usize).and_then(AttrValue::as_type);
            }
            _ => {}
        }
    }
    if let Some(AttrValue::List(items)) = attrs.get("Tout") {
        return items.get(output as usize).and_then(AttrValue::as_type);
    }
    None
}

/// The type and index of a device string such as `TPU_REPLICATED_CORE:0`,
/// `/device:TPU_REPLICATED_CORE:0` or `/job:w/replica:0/task:0/device:TPU:1`.
pub fn device_type_and_index(device: &str) -> Option<(&str, Option<u32>)> {
    let mut found = None;
    for part in device.split('/').filter(|p| !p.is_empty()) {
        let part = part.strip_prefix("device:").unwrap_or(part);
        let (kind, index) = match part.split_once(':') {
            Some((k, i)) => (k, Some(i)),
            None => (part, None),
        };
        if matches!(kind, "job" | "replica" | "task") {
            continue;
        }
        let index = match index {
            None | Some("*") => None,
            Some(i) => Some(i.parse::<u32>().ok()?),
        };
        found = Some((kind, index));
    }
    found
}

/// A replicate region being rewritten, with the cluster name the
/// clustering pass gave it (stored in the region's `_tpu_replicate`).
#[derive(Clone, Debug)]
pub struct AuthoredCluster {
    /// The replicate region.
    pub region: RegionId,
    /// The cluster name.
    pub name: String,
    /// The region's `num_replicas`.
    pub num_replicas: i64,
}

/// The replicate regions of `graph` that the clustering pass has named,
/// in text order.
pub fn authored_clusters(graph: &Graph) -> Vec<AuthoredCluster> {
    let mut out: Vec<AuthoredCluster> = graph
        .regions
        .iter()
        .enumerate()
        .filter(|(_, r)| matches!(r.kind, RegionKind::Replicate { .. }))
        .filter_map(|(i, r)| {
            let name = r.attrs.get_str(TPU_REPLICATE)?.to_string();
            let num_replicas = r.num_replicas().unwrap_or(1);
            Some(AuthoredCluster { region: RegionId(i as u32), name, num_replicas })
        })
        .collect();
    out.sort_by_key(|c| graph.region(c.region).seq);
    out
}

/// True when `graph` has replicate regions the clustering pass has not named.
pub fn first_unnamed_replicate(graph: &Graph) -> Option<RegionId> {
    graph
        .regions
        .iter()
        .enumerate()
        .find(|(_, r)| matches!(r.kind, RegionKind::Replicate { .. }) && !r.attrs.contains_key(TPU_REPLICATE))
        .map(|(i, _)| RegionId(i as u32))
}

/// Finds, in one scan, the node of each authored cluster that satisfies
/// `pick` (e.g. its metadata op or its pivot).
pub fn find_per_cluster(graph: &Graph, clusters: &[AuthoredCluster], key: &str, op: &str) -> HashMap<String, NodeId> {
    let wanted: HashSet<&str> = clusters.iter().map(|c| c.name.as_str()).collect();
    let mut found = HashMap::new();
    for id in graph.node_ids() {
        let node = graph.node(id);
        if &*node.op != op {
            continue;
        }
        if let Some(name) = node.attrs.get_str(key) {
            if wanted.contains(name) {
                found.entry(name.to_string()).or_insert(id);
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Node;

    fn graph_of(names: &[&str]) -> Graph {
        let mut graph = Graph::new("g".to_string());
        for name in names {
            graph.add_node(Node::op(*name, "NoOp")).unwrap();
        }
        graph
    }

    #[test]
    fn the_case_insensitive_namer_skips_names_taken_in_any_case() {
        // `Cluster` takes `cluster`; `CLUSTER_1` takes `cluster_1`; the Kelvin
        // sign lowercases to ASCII `k`, so `\u{212A}luster_2` takes `kluster_2`.
        let graph = graph_of(&["Cluster", "CLUSTER_1", "\u{212A}luster_2", "other"]);
        let mut namer = Namer::case_insensitive(&graph, HashSet::from(["Cluster_2".to_string()]));
        assert_eq!(namer.fresh(&graph, "cluster"), "cluster_3");
        assert_eq!(namer.fresh(&graph, "cluster"), "cluster_4");
        assert_eq!(namer.fresh(&graph, "kluster_2"), "kluster_2_1");
        assert_eq!(namer.fresh(&graph, "fresh"), "fresh");
        assert_eq!(namer.fresh(&graph, "FRESH"), "FRESH_1");
    }
}
