//! The verifier: checks a module and collects every problem it finds.
//!
//! Checks: output indices of registered ops, attribute kinds of registered
//! ops, acyclicity over data and control edges (one error per strongly
//! connected component, with its path; a TF1 loop's `NextIteration` ->
//! `Merge` back edge is the one edge a cycle may pass through, see
//! [`Graph::is_back_edge`]), replicate regions (`num_replicas`,
//! per-replica operand counts), region inputs, gradients calls, and values
//! that leave a region other than through `return`, and the calls of
//! functional control flow against their functions ([`super::functions`]).

use petgraph::algo::tarjan_scc;
use petgraph::visit::{EdgeFiltered, EdgeRef, IntoEdgeReferences, IntoEdges};

use super::error::IrError;
use super::graph::{EdgeKind, Graph, Module, NodeId, NodeKind, RegionId, RegionKind};
use super::ops::{self, Outputs};

/// Verifies every graph of `module`.
pub fn verify(module: &Module) -> Vec<IrError> {
    let mut errors = Vec::new();
    for graph in &module.graphs {
        verify_graph(graph, &mut errors);
    }
    super::functions::check_calls(module, &mut errors);
    errors
}

/// Verifies one graph, appending to `errors`.
pub fn verify_graph(graph: &Graph, errors: &mut Vec<IrError>) {
    check_nodes(graph, errors);
    check_regions(graph, errors);
    check_cycles(graph, errors);
}

/// The number of outputs of `node`, if known.
pub fn output_count(graph: &Graph, id: NodeId) -> Option<u32> {
    output_count_memo(graph, id, &mut rustc_hash::FxHashMap::default())
}

/// [`output_count`], with the counts of ops that have one output per
/// operand (a fused all-reduce may have thousands) kept in `memo`, so each
/// is counted once however often it is used.
fn output_count_memo(graph: &Graph, id: NodeId, memo: &mut rustc_hash::FxHashMap<NodeId, Option<u32>>) -> Option<u32> {
    let node = graph.node(id);
    match &node.kind {
        NodeKind::RegionInput { .. } => Some(1),
        NodeKind::Gradients { num_xs, .. } => Some(*num_xs),
        NodeKind::Op => match ops::lookup(&node.op)?.outputs {
            Outputs::Fixed(n) => Some(n),
            Outputs::FromAttr(key) => node.attrs.get_int(key).and_then(|n| u32::try_from(n).ok()),
            Outputs::FromListAttr(key) => node.attrs.get(key)?.as_list().map(|l| l.len() as u32),
            Outputs::SameAsInputs => *memo.entry(id).or_insert_with(|| Some(graph.data_inputs(id).len() as u32)),
        },
    }
}

fn region_contains(graph: &Graph, outer: RegionId, inner: Option<RegionId>) -> bool {
    graph.region_chain(inner).any(|r| r == outer)
}

fn check_nodes(graph: &Graph, errors: &mut Vec<IrError>) {
    let pg = graph.petgraph();
    // The output counts of ops with one output per operand (a fused
    // all-reduce with thousands), counted once rather than once per use.
    let mut per_operand_counts: rustc_hash::FxHashMap<NodeId, Option<u32>> = rustc_hash::FxHashMap::default();
    for id in graph.nodes_in_order() {
        let node = graph.node(id);
        if node.kind == NodeKind::Op {
            if let Some(def) = ops::lookup(&node.op) {
                for (key, value) in &node.attrs {
                    if let Some((_, expected)) = def.attrs.iter().find(|(k, _)| *k == key) {
                        if value.kind() != *expected {
                            errors.push(IrError::AttrType {
                                op: node.op.to_string(),
                                key: key.to_string(),
                                expected: expected.to_string(),
                                found: value.kind().to_string(),
                                span: node.span,
                            });
                        }
                    }
                }
            }
        }
        // Output indices and region escapes, per incoming data edge.
        for e in pg.edges_directed(id.0, petgraph::Direction::Incoming) {
            let src = NodeId(e.source());
            let weight = e.weight();
            if let EdgeKind::Data { output, .. } = weight.kind {
                if let Some(count) = output_count_memo(graph, src, &mut per_operand_counts) {
                    if output >= count {
                        errors.push(IrError::OutputOutOfRange {
                            producer: graph.node(src).name.to_string(),
                            index: output,
                            count,
                            span: weight.span,
                        });
                    }
                }
            }
            let producer = graph.node(src);
            if let Some(src_region) = producer.region {
                // A region input's operands come from outside its region.
                let user_inside = region_contains(graph, src_region, node.region);
                if !user_inside {
                    let region = match graph.region(src_region).kind {
                        RegionKind::Replicate { .. } => "replicate",
                        RegionKind::OutsideCompilation => "outside_compilation",
                    };
                    // Values may flow out of an outside_compilation block to the
                    // enclosing computation; only replicate regions are sealed.
                    let sealed = graph
                        .enclosing_replicate(Some(src_region))
                        .is_some_and(|rep| !region_contains(graph, rep, node.region));
                    if sealed {
                        errors.push(IrError::RegionEscape {
                            user: node.name.to_string(),
                            producer: producer.name.to_string(),
                            region: region.to_string(),
                            span: weight.span,
                        });
                    }
                }
            }
        }
        if let Err((key, reason)) = super::xla_proto::check(&node.op, &node.attrs) {
            errors.push(IrError::XlaProto { op: node.op.to_string(), key, reason, span: node.span });
        }
        if &*node.op == "TPUReplicatedOutput" {
            if let Some(op) = node.attrs.get_str("reduce_op").filter(|op| !is_supported_reduce_op(op)) {
                errors.push(IrError::UnsupportedReduceOp { op: op.to_string(), span: node.span });
            }
        }
        if let NodeKind::Gradients { num_ys, num_xs, has_grad_ys } = node.kind {
            let data = graph.data_inputs(id).len() as u32;
            let expected = num_ys + num_xs + if has_grad_ys { num_ys } else { 0 };
            if num_ys == 0 || num_xs == 0 {
                errors.push(IrError::MalformedGradients {
                    reason: "ys and xs must each name at least one tensor".into(),
                    span: node.span,
                });
            } else if data != expected {
                let reason = if has_grad_ys && data != expected {
                    format!("grad_ys must have one entry per y ({num_ys})")
                } else {
                    "ys, xs and grad_ys take tensors, not control inputs".into()
                };
                errors.push(IrError::MalformedGradients { reason, span: node.span });
            }
        }
    }
}

/// SUM and MEAN (any case), or no reduction (`NONE`, empty).
fn is_supported_reduce_op(op: &str) -> bool {
    op.is_empty() || ["NONE", "SUM", "MEAN"].iter().any(|k| op.eq_ignore_ascii_case(k))
}

fn check_regions(graph: &Graph, errors: &mut Vec<IrError>) {
    for region in &graph.regions {
        let reduce_ops = region.attrs.get("output_reduce_ops").and_then(|v| v.as_list()).unwrap_or(&[]);
        for op in reduce_ops.iter().filter_map(|v| v.as_str()).filter(|op| !is_supported_reduce_op(op)) {
            errors.push(IrError::UnsupportedReduceOp { op: op.to_string(), span: region.keyword_span });
        }
        let RegionKind::Replicate { inputs, outputs } = &region.kind else { continue };
        let num_replicas = match region.attrs.get("num_replicas") {
            Some(v) => match v.as_int() {
                Some(n) if (1..=super::MAX_REPLICAS).contains(&n) => n,
                _ => {
                    errors.push(IrError::NumReplicas { found: format!(", found {v:?}"), span: region.keyword_span });
                    continue;
                }
            },
            None => {
                errors.push(IrError::NumReplicas { found: String::new(), span: region.keyword_span });
                continue;
            }
        };
        for &input in inputs {
            if !graph.contains(input) {
                continue;
            }
            let operands = graph.inputs(input);
            if operands.iter().any(|o| o.is_control()) {
                errors.push(IrError::MalformedRegion {
                    reason: "per-replica operands must be tensors, not control inputs".into(),
                    span: graph.node(input).span,
                });
            }
            let found = operands.len();
            if found as i64 != num_replicas {
                errors.push(IrError::ReplicateInputCount {
                    input: graph.node(input).name.to_string(),
                    expected: num_replicas,
                    found,
                    span: graph.node(input).span,
                });
            }
        }
        for out in outputs {
            if !graph.contains(out.node) {
                continue;
            }
            if let Some(count) = out.output.and_then(|o| output_count(graph, out.node).map(|c| (o, c))) {
                if count.0 >= count.1 {
                    errors.push(IrError::OutputOutOfRange {
                        producer: graph.node(out.node).name.to_string(),
                        index: count.0,
                        count: count.1,
                        span: out.span,
                    });
                }
            }
        }
    }
}

fn check_cycles(graph: &Graph, errors: &mut Vec<IrError>) {
    let pg = graph.petgraph();
    // The fastest path, one sequential sweep of the edges: when every edge
    // but a back edge runs from a lower node index to a higher one, index
    // order is a topological order (an imported GraphDef in TensorFlow's
    // order, and what passes append after it, usually are).
    let forward_in_index_order = pg
        .edge_references()
        .all(|e| e.source().index() < e.target().index() || graph.is_back_edge(NodeId(e.source()), NodeId(e.target())));
    if forward_in_index_order {
        return;
    }
    // Back edges do not order nodes: every cycle must pass through one.
    let forward = EdgeFiltered::from_fn(pg, |e| !graph.is_back_edge(NodeId(e.source()), NodeId(e.target())));
    // A fast path: most graphs are acyclic, and toposort says so quickly.
    if petgraph::algo::toposort(&forward, None).is_ok() {
        return;
    }
    for scc in tarjan_scc(&forward) {
        let cyclic = scc.len() > 1 || forward.edges(scc[0]).any(|e| e.target() == scc[0]);
        if !cyclic {
            continue;
        }
        let mut members: Vec<NodeId> = scc.into_iter().map(NodeId).collect();
        members.sort_by_key(|&id| graph.node(id).seq);
        let path = cycle_path(graph, &members);
        let span = graph.node(members[0]).span;
        errors.push(IrError::Cycle { path, span });
    }
}

/// A readable cycle through the component's first node: `a -> b -> a`.
fn cycle_path(graph: &Graph, members: &[NodeId]) -> String {
    use std::collections::{HashMap, HashSet, VecDeque};
    let set: HashSet<NodeId> = members.iter().copied().collect();
    let start = members[0];
    let pg = graph.petgraph();
    // Breadth-first search from `start` back to itself inside the component.
    let mut parent: HashMap<NodeId, NodeId> = HashMap::new();
    let mut queue = VecDeque::from([start]);
    let mut found = None;
    while let Some(n) = queue.pop_front() {
        for e in pg.edges_directed(n.0, petgraph::Direction::Outgoing) {
            let t = NodeId(e.target());
            if graph.is_back_edge(n, t) {
                continue;
            }
            if t == start {
                found = Some(n);
                break;
            }
            if set.contains(&t) && !parent.contains_key(&t) {
                parent.insert(t, n);
                queue.push_back(t);
            }
        }
        if found.is_some() {
            break;
        }
    }
    let mut chain = vec![start];
    let mut cur = found.unwrap_or(start);
    while cur != start {
        chain.push(cur);
        cur = parent[&cur];
    }
    chain.push(start);
    let last = chain.len() - 1;
    chain[1..last].reverse();
    const SHOWN: usize = 12;
    let mut names: Vec<String> = chain.iter().take(SHOWN).map(|&id| format!("%{}", graph.node(id).name)).collect();
    if chain.len() > SHOWN {
        names.push(format!("… ({} more)", chain.len() - SHOWN));
    }
    names.join(" -> ")
}
