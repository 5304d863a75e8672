//! Cluster formation: reads the TPU clusters of a tagged graph.
//!
//! Meaning: the inverse of the authoring passes, for graphs that carry the
//! tags (rewritten by tpu-rewrite, or written by TensorFlow's
//! `tpu.replicate`). Ops are grouped by `_tpu_replicate`; each group gets
//! its `TPUReplicateMetadata`, its pivot and compilation result, the
//! `TPUReplicatedInput` ops its members read, the `TPUReplicatedOutput`
//! ops that read its members, and its outside-compilation sub-clusters
//! (grouped by `_xla_outside_compilation`). The result is what lowering
//! consumes.
//!
//! Validation: a cluster without metadata, or with two; metadata without a
//! usable `num_replicas`; `_xla_outside_compilation` without
//! `_tpu_replicate`; a `TPUReplicatedInput` whose operand count is not
//! `num_replicas`; a `TPUReplicatedOutput` whose result count is not
//! `num_replicas` or that does not read exactly one tensor; a collective
//! whose replica groups do not partition the replicas; and an op that
//! depends on a cluster and feeds back into it (a cycle once the cluster
//! is contracted to one node). Clusters with broken metadata are left out
//! of the result. Cost: O(nodes + edges) plus sorting each cluster's lists.

use std::collections::{BTreeMap, VecDeque};

use rustc_hash::FxHashMap as HashMap;

use petgraph::visit::{EdgeRef, NodeIndexable};
use petgraph::Direction;

use super::common::{COMPILATION_STATUS, OUTSIDE_COMPILATION, PIVOT_FOR_CLUSTER, TPU_REPLICATE};
use super::error::PassError;
use crate::ir::{EdgeKind, Graph, NodeId};

/// One TPU cluster of a tagged graph.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplicateCluster {
    /// The `_tpu_replicate` value.
    pub name: String,
    /// The metadata's `num_replicas`.
    pub num_replicas: u32,
    /// The metadata's `num_cores_per_replica`.
    pub num_cores_per_replica: u32,
    /// The cluster's `TPUReplicateMetadata` op.
    pub metadata: NodeId,
    /// The `<cluster>/pivot` NoOp, if present.
    pub pivot: Option<NodeId>,
    /// The `TPUCompilationResult` op, if present.
    pub compilation_result: Option<NodeId>,
    /// Every op tagged with the cluster, in text order (metadata included).
    pub members: Vec<NodeId>,
    /// The `TPUReplicatedInput` ops read by members, in text order
    /// (computation input i is `inputs[i]`).
    pub inputs: Vec<NodeId>,
    /// The `TPUReplicatedOutput` ops reading members, in text order
    /// (computation output i is `outputs[i]`).
    pub outputs: Vec<NodeId>,
    /// Outside-compilation clusters: name → members in text order.
    pub outside_compilation: BTreeMap<String, Vec<NodeId>>,
    /// The metadata's `host_compute_core` entries `"<oc>:<core>"`, parsed.
    pub host_compute_core: Vec<(String, u32)>,
}

/// Everything the single scan collects for one cluster name.
#[derive(Default)]
struct Group {
    members: Vec<NodeId>,
    metadata: Vec<NodeId>,
    pivot: Option<NodeId>,
    compilation_result: Option<NodeId>,
    inputs: Vec<NodeId>,
    outputs: Vec<NodeId>,
}

/// Forms the clusters of `graph` and validates them.
pub fn form_clusters(graph: &Graph) -> (Vec<ReplicateCluster>, Vec<PassError>) {
    let mut errors = Vec::new();
    let mut groups: HashMap<&str, Group> = HashMap::default();
    let mut replicated_inputs = Vec::new();
    let mut replicated_outputs = Vec::new();
    for id in graph.nodes_in_order() {
        let node = graph.node(id);
        let attrs = &node.attrs;
        match attrs.get_str(TPU_REPLICATE) {
            Some(cluster) => {
                let group = groups.entry(cluster).or_default();
                group.members.push(id);
                if &*node.op == "TPUReplicateMetadata" {
                    group.metadata.push(id);
                }
            }
            None => {
                if let Some(oc) = attrs.get_str(OUTSIDE_COMPILATION) {
                    errors.push(PassError::OutsideCompilationWithoutCluster {
                        node: node.name.to_string(),
                        oc: oc.to_string(),
                        span: node.span,
                    });
                }
            }
        }
        if let Some(cluster) = attrs.get_str(PIVOT_FOR_CLUSTER) {
            groups.entry(cluster).or_default().pivot.get_or_insert(id);
        }
        if let Some(cluster) = attrs.get_str(COMPILATION_STATUS) {
            groups.entry(cluster).or_default().compilation_result.get_or_insert(id);
        }
        match &*node.op {
            "TPUReplicatedInput" => replicated_inputs.push(id),
            "TPUReplicatedOutput" => replicated_outputs.push(id),
            _ => {}
        }
    }
    let pg = graph.petgraph();
    for &input in &replicated_inputs {
        let mut seen: Vec<&str> = Vec::new();
        for e in pg.edges_directed(input.0, Direction::Outgoing) {
            if let Some(cluster) = graph.node(NodeId(e.target())).attrs.get_str(TPU_REPLICATE) {
                if !seen.contains(&cluster) {
                    seen.push(cluster);
                    groups.entry(cluster).or_default().inputs.push(input);
                }
            }
        }
    }
    for &output in &replicated_outputs {
        let node = graph.node(output);
        let data: Vec<NodeId> = pg
            .edges_directed(output.0, Direction::Incoming)
            .filter(|e| matches!(e.weight().kind, EdgeKind::Data { .. }))
            .map(|e| NodeId(e.source()))
            .collect();
        if data.len() != 1 {
            errors.push(PassError::MalformedTpuOp {
                op: node.op.to_string(),
                node: node.name.to_string(),
                reason: format!("takes {} tensors; it replicates exactly one", data.len()),
                span: node.span,
            });
            continue;
        }
        if let Some(cluster) = graph.node(data[0]).attrs.get_str(TPU_REPLICATE) {
            groups.entry(cluster).or_default().outputs.push(output);
        }
    }

    let mut names: Vec<&str> = groups.keys().copied().collect();
    names.sort_by_key(|name| groups[name].members.first().map(|&id| graph.node(id).seq).unwrap_or(u64::MAX));
    let mut clusters = Vec::new();
    for name in names {
        let group = &groups[name];
        if let Some(cluster) = form_one(graph, name, group, &mut errors) {
            clusters.push(cluster);
        }
    }
    check_cycles(graph, &clusters, &mut errors);
    (clusters, errors)
}

fn form_one(graph: &Graph, name: &str, group: &Group, errors: &mut Vec<PassError>) -> Option<ReplicateCluster> {
    let Some(&metadata) = group.metadata.first() else {
        // A pivot or compilation result alone does not make a cluster.
        let &first = group.members.first()?;
        errors.push(PassError::MissingMetadata { cluster: name.to_string(), span: graph.node(first).span });
        return None;
    };
    for &extra in &group.metadata[1..] {
        errors.push(PassError::DuplicateMetadata {
            cluster: name.to_string(),
            span: graph.node(extra).span,
            first: graph.node(metadata).span,
        });
    }
    let meta = graph.node(metadata);
    let invalid = |reason: String| PassError::InvalidMetadata { cluster: name.to_string(), reason, span: meta.span };
    let positive = |key: &str, default: Option<i64>| -> Result<u32, PassError> {
        match meta.attrs.get_int(key).or(default) {
            Some(n) if n >= 1 => u32::try_from(n).map_err(|_| invalid(format!("`{key}` = {n} is too large"))),
            Some(n) => Err(invalid(format!("`{key}` must be >= 1, found {n}"))),
            None => Err(invalid(format!("`{key}` is missing or not an int"))),
        }
    };
    let bounded = |key: &str| match positive(key, None) {
        Ok(n) if i64::from(n) > crate::ir::MAX_REPLICAS => {
            Err(invalid(format!("`{key}` = {n} is more than {}", crate::ir::MAX_REPLICAS)))
        }
        other => other,
    };
    let (num_replicas, num_cores_per_replica) =
        match (bounded("num_replicas"), positive("num_cores_per_replica", Some(1))) {
            (Ok(r), Ok(c)) => (r, c),
            (r, c) => {
                errors.extend(r.err());
                errors.extend(c.err());
                return None;
            }
        };
    let mut host_compute_core = Vec::new();
    for item in meta.attrs.get("host_compute_core").and_then(|v| v.as_list()).unwrap_or(&[]) {
        let parsed = item
            .as_str()
            .and_then(|s| s.rsplit_once(':'))
            .and_then(|(oc, core)| Some((oc.to_string(), core.parse().ok()?)));
        match parsed {
            Some(entry) => host_compute_core.push(entry),
            None => {
                let mut text = String::new();
                crate::emit::text::push_value(&mut text, item);
                errors.push(invalid(format!("host_compute_core entry {text} is not \"<cluster>:<core>\"")));
            }
        }
    }
    let pg = graph.petgraph();
    for &input in &group.inputs {
        let found = pg
            .edges_directed(input.0, Direction::Incoming)
            .filter(|e| matches!(e.weight().kind, EdgeKind::Data { .. }))
            .count();
        if found != num_replicas as usize {
            errors.push(PassError::ReplicatedInputCount {
                input: graph.node(input).name.to_string(),
                expected: i64::from(num_replicas),
                found,
                span: graph.node(input).span,
            });
        }
    }
    for &output in &group.outputs {
        let node = graph.node(output);
        let found = node.attrs.get_int("num_replicas").unwrap_or(-1);
        if found != i64::from(num_replicas) {
            errors.push(PassError::ReplicatedOutputCount {
                output: node.name.to_string(),
                cluster: name.to_string(),
                expected: i64::from(num_replicas),
                found,
                span: node.span,
            });
        }
    }
    super::replica_groups::check(graph, name, num_replicas, &group.members, errors);
    let mut outside_compilation: BTreeMap<String, Vec<NodeId>> = BTreeMap::new();
    for &id in &group.members {
        if let Some(oc) = graph.node(id).attrs.get_str(OUTSIDE_COMPILATION) {
            outside_compilation.entry(oc.to_string()).or_default().push(id);
        }
    }
    Some(ReplicateCluster {
        name: name.to_string(),
        num_replicas,
        num_cores_per_replica,
        metadata,
        pivot: group.pivot,
        compilation_result: group.compilation_result,
        members: group.members.clone(),
        inputs: group.inputs.clone(),
        outputs: group.outputs.clone(),
        outside_compilation,
        host_compute_core,
    })
}

/// Contracts each cluster to one node and reports every cycle through one.
///
/// Only nodes reachable from a cluster can lie on such a cycle, so the
/// contracted graph holds the clusters and those nodes alone; on rewritten
/// graphs that is little more than the fan-out.
fn check_cycles(graph: &Graph, clusters: &[ReplicateCluster], errors: &mut Vec<PassError>) {
    if clusters.is_empty() {
        return;
    }
    let pg = graph.petgraph();
    let k = clusters.len();
    const NONE: usize = usize::MAX;
    // Component of a node in the contracted graph: its cluster's index, or
    // an index >= k once it is found reachable from a cluster.
    let mut component: Vec<usize> = vec![NONE; pg.node_bound()];
    for (c, cluster) in clusters.iter().enumerate() {
        for &m in &cluster.members {
            component[m.0.index()] = c;
        }
    }
    let mut outside: Vec<NodeId> = Vec::new();
    let mut stack: Vec<NodeId> = clusters.iter().flat_map(|c| c.members.iter().copied()).collect();
    while let Some(n) = stack.pop() {
        for e in pg.edges_directed(n.0, Direction::Outgoing) {
            let t = e.target().index();
            if component[t] == NONE {
                component[t] = k + outside.len();
                outside.push(NodeId(e.target()));
                stack.push(NodeId(e.target()));
            }
        }
    }
    if outside.is_empty() {
        return;
    }
    let mut contracted: petgraph::Graph<(), (), petgraph::Directed, u32> =
        petgraph::Graph::with_capacity(k + outside.len(), outside.len() * 2);
    for _ in 0..k + outside.len() {
        contracted.add_node(());
    }
    let mut add_edges_from = |n: NodeId, from: usize| {
        for e in pg.edges_directed(n.0, Direction::Outgoing) {
            let to = component[e.target().index()];
            if to != NONE && to != from {
                contracted.add_edge(petgraph::graph::NodeIndex::new(from), petgraph::graph::NodeIndex::new(to), ());
            }
        }
    };
    for (c, cluster) in clusters.iter().enumerate() {
        for &m in &cluster.members {
            add_edges_from(m, c);
        }
    }
    for (i, &n) in outside.iter().enumerate() {
        add_edges_from(n, k + i);
    }
    if petgraph::algo::toposort(&contracted, None).is_ok() {
        return;
    }
    let label = |c: usize| -> String {
        if c < k {
            format!("cluster `{}`", clusters[c].name)
        } else {
            format!("%{}", graph.node(outside[c - k]).name)
        }
    };
    for scc in petgraph::algo::tarjan_scc(&contracted) {
        let Some(&start) = scc.iter().filter(|n| n.index() < k).min() else { continue };
        if scc.len() < 2 {
            continue;
        }
        // Breadth-first search from the cluster back to itself.
        let in_scc: std::collections::HashSet<_> = scc.iter().copied().collect();
        let mut parent = HashMap::default();
        let mut queue = VecDeque::from([start]);
        let mut last = None;
        'search: while let Some(n) = queue.pop_front() {
            for t in contracted.neighbors_directed(n, Direction::Outgoing) {
                if t == start {
                    last = Some(n);
                    break 'search;
                }
                if in_scc.contains(&t) && !parent.contains_key(&t) {
                    parent.insert(t, n);
                    queue.push_back(t);
                }
            }
        }
        let Some(mut cur) = last else { continue };
        let mut path = vec![start];
        let mut rest = Vec::new();
        while cur != start {
            rest.push(cur);
            cur = parent[&cur];
        }
        path.extend(rest.into_iter().rev());
        path.push(start);
        let span =
            path.iter().find(|c| c.index() >= k).map(|c| graph.node(outside[c.index() - k]).span).unwrap_or_default();
        let text: Vec<String> = path.iter().map(|c| label(c.index())).collect();
        errors.push(PassError::ClusterDependencyCycle {
            cluster: clusters[start.index()].name.clone(),
            path: text.join(" -> "),
            span,
        });
    }
}
