//! The cluster cycle check: can each outside-compilation cluster run as one host computation?
//!
//! After tagging, every op of a replicate cluster `R` carries `_tpu_replicate = R`, and the ops of
//! an outside-compilation cluster also carry `_xla_outside_compilation = C`. Lowering runs each
//! cluster `(R, C)` as one host computation: it receives all its device inputs, runs, and sends
//! all its outputs. That is only possible if contracting the cluster to one node leaves the graph
//! acyclic; a path that leaves the cluster and comes back into it (through device ops or other
//! clusters) would need the cluster to run both before and after that path.
//!
//! [`check_cluster_cycles`] contracts each outside-compilation cluster and keeps device ops as
//! they are, which is what lowering needs. [`Contraction::WithDevicePart`] also contracts the
//! device part of each replicate cluster (its ops without `_xla_outside_compilation`) to one node;
//! that view reports every outside_compilation block that sits between two device ops (device →
//! host → device, the normal use of outside compilation) and is meant for inspecting the
//! cluster-level structure, not as a correctness check.
//!
//! A TF1 loop's back edge (`NextIteration` -> `Merge`) is left out: a loop inside a cluster that
//! runs outside compilation in its body is not a cycle between clusters.
//!
//! Each cycle (one per strongly connected component of the contracted graph) is reported once,
//! with its path, and a help line naming the gradient cluster policy. Linear in the graph size.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::{EdgeRef, IntoEdgeReferences};

use super::error::PassError;
use super::gradients::colocation::OUTSIDE_COMPILATION_ATTR;
use super::gradients::TPU_REPLICATE_ATTR;
use crate::ir::{Graph, NodeId};
use crate::syntax::Span;

/// Which parts of the graph are contracted to single nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Contraction {
    /// Each outside-compilation cluster; device ops stay separate (the lowering view).
    #[default]
    OutsideCompilationOnly,
    /// Each outside-compilation cluster and the device part of each replicate cluster.
    WithDevicePart,
}

/// Reports every cycle between outside-compilation clusters, each contracted to one node.
pub fn check_cluster_cycles(graph: &Graph) -> Vec<PassError> {
    check_cluster_cycles_with(graph, Contraction::OutsideCompilationOnly)
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Group {
    /// An outside-compilation cluster `C` of replicate cluster `R`.
    Outside { replicate: Arc<str>, cluster: Arc<str> },
    /// The device part of replicate cluster `R`.
    Device { replicate: Arc<str> },
    /// A node that is not contracted.
    Single(NodeId),
}

/// Reports every cycle between contracted clusters under `contraction`.
pub fn check_cluster_cycles_with(graph: &Graph, contraction: Contraction) -> Vec<PassError> {
    let mut groups: Vec<Group> = Vec::new();
    let mut index: HashMap<Group, u32> = HashMap::new();
    let mut first_member: Vec<NodeId> = Vec::new();
    let mut group_of: HashMap<NodeId, u32> = HashMap::with_capacity(graph.node_count());
    for id in graph.nodes_in_order() {
        let node = graph.node(id);
        let replicate = node.attrs.get_str(TPU_REPLICATE_ATTR);
        let outside = node.attrs.get_str(OUTSIDE_COMPILATION_ATTR);
        let group = match (replicate, outside, contraction) {
            (Some(r), Some(c), _) => Group::Outside { replicate: r.into(), cluster: c.into() },
            (Some(r), None, Contraction::WithDevicePart) => Group::Device { replicate: r.into() },
            _ => Group::Single(id),
        };
        let g = *index.entry(group.clone()).or_insert_with(|| {
            groups.push(group);
            first_member.push(id);
            (groups.len() - 1) as u32
        });
        group_of.insert(id, g);
    }
    let mut contracted: DiGraph<u32, ()> = DiGraph::with_capacity(groups.len(), graph.edge_count());
    for g in 0..groups.len() as u32 {
        contracted.add_node(g);
    }
    let mut seen_edges: HashSet<(u32, u32)> = HashSet::new();
    for e in graph.petgraph().edge_references() {
        // A TF1 loop's back edge (NextIteration -> Merge) carries a value to the next iteration:
        // it orders nothing within a step, so it closes no cycle between clusters.
        if graph.is_back_edge(NodeId(e.source()), NodeId(e.target())) {
            continue;
        }
        let (Some(&a), Some(&b)) = (group_of.get(&NodeId(e.source())), group_of.get(&NodeId(e.target()))) else {
            continue;
        };
        if a != b && seen_edges.insert((a, b)) {
            contracted.add_edge(NodeIndex::new(a as usize), NodeIndex::new(b as usize), ());
        }
    }
    let mut errors = Vec::new();
    for scc in petgraph::algo::tarjan_scc(&contracted) {
        if scc.len() < 2 {
            continue;
        }
        let members: HashSet<NodeIndex> = scc.iter().copied().collect();
        // Start at the earliest contracted cluster of the component; a component with none is a
        // plain cycle, which the verifier reports.
        let Some(&start) = scc
            .iter()
            .filter(|n| !matches!(groups[n.index()], Group::Single(_)))
            .min_by_key(|n| graph.node(first_member[n.index()]).seq)
        else {
            continue;
        };
        let path = cycle_through(&contracted, &members, start);
        let names: Vec<String> = path.iter().map(|n| group_name(graph, &groups[n.index()])).collect();
        let shown = shorten(&names);
        let nested = path.iter().any(|n| match &groups[n.index()] {
            Group::Outside { cluster, .. } => cluster.matches('.').count() >= 2,
            _ => false,
        });
        let help = if nested {
            "the nested gradient cluster policy put gradients of gradients into clusters of their own; \
             `--gradient-cluster-policy flat` merges the gradient clusters of one root and one gradients call"
                .to_string()
        } else {
            "a cluster must not both feed and consume the same computation: split the outside_compilation block, \
             or, if gradients made the cluster, try the other gradient cluster policy \
             (`--gradient-cluster-policy flat` or `nested`)"
                .to_string()
        };
        errors.push(PassError::OutsideCompilationCycle {
            path: shown,
            help,
            span: representative_span(graph, &group_of, start.index() as u32),
            first: names[0].clone(),
        });
    }
    errors
}

/// A shortest cycle through `start` inside the component `members`, as `start, ..., start`.
fn cycle_through(g: &DiGraph<u32, ()>, members: &HashSet<NodeIndex>, start: NodeIndex) -> Vec<NodeIndex> {
    let mut parent: HashMap<NodeIndex, NodeIndex> = HashMap::new();
    let mut queue = VecDeque::from([start]);
    let mut last = None;
    'search: while let Some(n) = queue.pop_front() {
        for t in g.neighbors(n) {
            if t == start {
                last = Some(n);
                break 'search;
            }
            if members.contains(&t) && !parent.contains_key(&t) {
                parent.insert(t, n);
                queue.push_back(t);
            }
        }
    }
    let mut chain = vec![start];
    let mut cur = last.unwrap_or(start);
    while cur != start {
        chain.push(cur);
        match parent.get(&cur) {
            Some(&p) => cur = p,
            None => break,
        }
    }
    chain.push(start);
    let end = chain.len() - 1;
    chain[1..end].reverse();
    chain
}

fn group_name(graph: &Graph, group: &Group) -> String {
    match group {
        Group::Outside { replicate, cluster } => format!("outside_compilation \"{cluster}\" of \"{replicate}\""),
        Group::Device { replicate } => format!("device part of \"{replicate}\""),
        Group::Single(id) => format!("%{}", graph.node(*id).name),
    }
}

fn shorten(names: &[String]) -> String {
    const SHOWN: usize = 12;
    let mut shown: Vec<String> = names.iter().take(SHOWN).cloned().collect();
    if names.len() > SHOWN {
        shown.push(format!("… ({} more)", names.len() - SHOWN));
    }
    shown.join(" -> ")
}

/// The span of the first member of `group` (in text order) that has one.
fn representative_span(graph: &Graph, group_of: &HashMap<NodeId, u32>, group: u32) -> Span {
    graph
        .nodes_in_order()
        .into_iter()
        .filter(|id| group_of.get(id) == Some(&group))
        .map(|id| graph.node(id).span)
        .find(|s| !s.is_detached())
        .unwrap_or(Span::DETACHED)
}
