//! All-reduce fusion: independent `CrossReplicaSum`s become one `AllReduce`.
//!
//! Meaning: like XLA's all-reduce combiner (and TPUStrategy's
//! `batch_reduce_to`), several `CrossReplicaSum`s of one cluster that share
//! a replica grouping and do not depend on each other are replaced by a
//! single multi-operand `AllReduce` (`reduce_op = "SUM"`): operand `i` is
//! the `i`-th sum's operand and output `i` replaces the `i`-th sum's
//! output. The lowering turns it into one `CollectiveAllReduce` with `N`
//! inputs, so the replicas meet once instead of `N` times. Each element is
//! still reduced on its own in rank order, so fused and unfused programs
//! give bit-identical results.
//!
//! Candidates are `CrossReplicaSum`s tagged `_tpu_replicate`, outside any
//! region and outside compilation. Two candidates may share a fused op when
//! they have the same key: (cluster, device, replica grouping), where the
//! grouping is the value of the `group_assignment` constant (or the operand
//! itself when it is not a constant). Control inputs of the members are
//! merged onto the fused op.
//!
//! Candidates are visited in topological order (text order where the
//! edges allow); each key has one open
//! group. A candidate joins its key's open group when no member of the
//! group reaches it (so no path joins any two members, and merging them
//! cannot form a cycle) and the group's byte size stays within the
//! threshold; otherwise the open group is closed and the candidate opens a
//! new one. Groups of one are left alone. Byte sizes come from static
//! shapes ([`crate::ir::shapes`]: placeholders, constants, variables and
//! `_output_shapes`, carried through the common ops); with a threshold, a
//! sum whose size is unknown is not fused.
//!
//! Invariants: the graph stays acyclic; every use of a fused sum (data and
//! control) reads the fused op; the fused op carries the group assignment
//! as its `group_assignment` attribute. Cost: O(k · (n + e)) for k
//! candidates in a graph of n nodes and e edges, in the worst case.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

use petgraph::visit::EdgeRef;
use petgraph::Direction;

use super::common::{OUTSIDE_COMPILATION, TPU_REPLICATE};
use super::error::PassError;
use crate::ir::shapes::{static_shapes, StaticShapes};
use crate::ir::{AttrValue, DType, EdgeKind, Graph, Node, NodeId, NodeKind};
use crate::syntax::Span;

/// XLA's default combine threshold: 30 MiB.
pub const DEFAULT_THRESHOLD_BYTES: u64 = 30 << 20;

/// Settings of [`fuse_all_reduce`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FusionConfig {
    /// The largest byte size of one fused all-reduce; `None` for no limit
    /// (then sums of unknown size are fused too).
    pub threshold_bytes: Option<u64>,
}

impl Default for FusionConfig {
    fn default() -> Self {
        FusionConfig { threshold_bytes: Some(DEFAULT_THRESHOLD_BYTES) }
    }
}

/// One group of sums to fuse, in topological order.
struct Group {
    members: Vec<NodeId>,
    /// `members` as a set, for the reachability walks.
    member_set: HashSet<NodeId>,
    bytes: u64,
    /// The smallest topological index of a member (ancestor search stops below it).
    first_position: usize,
}

/// Fuses independent `CrossReplicaSum`s of each cluster; returns no diagnostics.
pub fn fuse_all_reduce(graph: &mut Graph, config: &FusionConfig) -> Vec<PassError> {
    // Nothing to fuse without two sums: skip the orders and shapes.
    if graph.node_ids().filter(|&id| &*graph.node(id).op == "CrossReplicaSum").nth(1).is_none() {
        return Vec::new();
    }
    let Some(order) = text_topological_order(graph) else {
        // A cyclic graph is reported by the verifier and the cycle passes.
        return Vec::new();
    };
    // Topological index by node index (`usize::MAX` for none).
    let mut position = vec![usize::MAX; petgraph::visit::NodeIndexable::node_bound(graph.petgraph())];
    for (i, n) in order.iter().enumerate() {
        position[n.0.index()] = i;
    }
    let shapes = static_shapes(graph, &order);
    let mut open: HashMap<String, Group> = HashMap::new();
    let mut closed: Vec<Group> = Vec::new();
    for id in order {
        let Some(key) = candidate_key(graph, id) else { continue };
        let bytes = operand_bytes(graph, &shapes, id);
        let bytes = match (bytes, config.threshold_bytes) {
            (Some(b), Some(limit)) if b <= limit => b,
            (Some(b), None) => b,
            (None, None) => 0,
            // Too large alone, or of unknown size under a threshold.
            _ => continue,
        };
        let joins = open.get(&key).is_some_and(|g| {
            let fits = config.threshold_bytes.is_none_or(|limit| g.bytes.saturating_add(bytes) <= limit);
            fits && !reached_from(graph, id, &g.member_set, g.first_position, &position)
        });
        match open.get_mut(&key) {
            Some(g) if joins => {
                g.members.push(id);
                g.member_set.insert(id);
                g.bytes += bytes;
            }
            _ => {
                let fresh = Group {
                    members: vec![id],
                    member_set: HashSet::from([id]),
                    bytes,
                    first_position: position[id.0.index()],
                };
                if let Some(done) = open.insert(key, fresh) {
                    closed.push(done);
                }
            }
        }
    }
    closed.extend(open.into_values());
    closed.retain(|g| g.members.len() > 1);
    closed.sort_by_key(|g| g.first_position);
    for mut group in closed {
        group.members.sort_by_key(|&m| graph.node(m).seq);
        fuse(graph, &group.members);
    }
    Vec::new()
}

/// A topological order that follows the text order where edges allow
/// (Kahn's algorithm, smallest `seq` first), TF1 loop back edges aside;
/// `None` on a cycle.
fn text_topological_order(graph: &Graph) -> Option<Vec<NodeId>> {
    let g = graph.petgraph();
    // Unvisited operands by node index; `None` for an index with no node.
    let mut indegree: Vec<Option<usize>> = vec![None; petgraph::visit::NodeIndexable::node_bound(g)];
    let mut ready = BinaryHeap::new();
    let mut nodes = 0;
    for id in graph.node_ids() {
        // A TF1 loop's back edges (NextIteration -> Merge) do not order nodes.
        let n =
            g.edges_directed(id.0, Direction::Incoming).filter(|e| !graph.is_back_edge(NodeId(e.source()), id)).count();
        indegree[id.0.index()] = Some(n);
        nodes += 1;
        if n == 0 {
            ready.push(Reverse((graph.node(id).seq, id.0.index())));
        }
    }
    let mut order = Vec::with_capacity(nodes);
    while let Some(Reverse((_, index))) = ready.pop() {
        let id = NodeId(petgraph::graph::NodeIndex::new(index));
        order.push(id);
        for e in g.edges_directed(id.0, Direction::Outgoing) {
            let target = NodeId(e.target());
            if graph.is_back_edge(id, target) {
                continue;
            }
            if let Some(Some(d)) = indegree.get_mut(target.0.index()) {
                *d -= 1;
                if *d == 0 {
                    ready.push(Reverse((graph.node(target).seq, target.0.index())));
                }
            }
        }
    }
    (order.len() == nodes).then_some(order)
}

/// The grouping key of a fusable sum, or `None` when `id` is not one.
fn candidate_key(graph: &Graph, id: NodeId) -> Option<String> {
    let node = graph.node(id);
    if node.kind != NodeKind::Op
        || &*node.op != "CrossReplicaSum"
        || node.region.is_some()
        || node.attrs.contains_key(OUTSIDE_COMPILATION)
    {
        return None;
    }
    let cluster = node.attrs.get_str(TPU_REPLICATE)?;
    let data = graph.data_inputs(id);
    if data.is_empty() || data.len() > 2 {
        return None;
    }
    let grouping = match data.get(1) {
        None => "all".to_string(),
        Some(g) => match graph.node(g.src).attrs.get("value") {
            Some(AttrValue::Tensor(t)) if &*graph.node(g.src).op == "Const" => format!("{t:?}"),
            _ => format!("operand {}:{}", graph.node(g.src).name, g.output.unwrap_or(0)),
        },
    };
    Some(format!("{cluster}\u{0}{}\u{0}{grouping}", node.device.as_deref().unwrap_or("")))
}

/// True when some node of `members` reaches `target` through data or control edges.
fn reached_from(
    graph: &Graph,
    target: NodeId,
    members: &HashSet<NodeId>,
    first_position: usize,
    position: &[usize],
) -> bool {
    let g = graph.petgraph();
    let mut seen: HashSet<NodeId> = HashSet::new();
    let mut stack = vec![target];
    while let Some(n) = stack.pop() {
        for e in g.edges_directed(n.0, Direction::Incoming) {
            let src = NodeId(e.source());
            if members.contains(&src) {
                return true;
            }
            // A node placed before every member cannot lie below one.
            if position.get(src.0.index()).is_some_and(|&p| p != usize::MAX && p > first_position) && seen.insert(src) {
                stack.push(src);
            }
        }
    }
    false
}

/// The static byte size of a sum's operand, when its shape and dtype are known.
fn operand_bytes(graph: &Graph, shapes: &StaticShapes, id: NodeId) -> Option<u64> {
    let dtype = graph.node(id).attrs.get("T").and_then(AttrValue::as_type)?;
    let input = *graph.data_inputs(id).first()?;
    shapes.elements(input)?.checked_mul(dtype_bytes(dtype)?)
}

/// Bytes per element of the numeric dtypes.
pub fn dtype_bytes(dtype: DType) -> Option<u64> {
    Some(match dtype {
        DType::Bool | DType::U8 | DType::I8 => 1,
        DType::I16 | DType::U16 | DType::F16 | DType::BF16 => 2,
        DType::F32 | DType::I32 | DType::U32 => 4,
        DType::F64 | DType::I64 | DType::U64 | DType::C64 => 8,
        DType::C128 => 16,
        _ => return None,
    })
}

/// Replaces `members` (two or more independent sums) by one `AllReduce`.
fn fuse(graph: &mut Graph, members: &[NodeId]) {
    let first = graph.node(members[0]).clone();
    let last_seq = members.iter().map(|&m| graph.node(m).seq).max().unwrap_or(first.seq);
    let mut fused = Node::op(graph.unique_name(&format!("{}/fused", first.name)), "AllReduce");
    fused.device = first.device.clone();
    fused.span = Span::DETACHED;
    for (key, value) in &first.attrs {
        if key.starts_with('_') {
            fused.attrs.insert(key, value.clone());
        }
    }
    fused.attrs.insert("reduce_op", AttrValue::str("SUM"));
    if let Some(g) = graph.data_inputs(members[0]).get(1) {
        if let Some(value @ AttrValue::Tensor(_)) = graph.node(g.src).attrs.get("value") {
            fused.attrs.insert("group_assignment", value.clone());
        }
    }
    let names: Vec<AttrValue> = members.iter().map(|&m| AttrValue::str(&*graph.node(m).name)).collect();
    fused.attrs.insert("_fused_from", AttrValue::List(names));
    let fused_id = graph.add_node_unique(fused);
    let mut controls: Vec<NodeId> = Vec::new();
    for (slot, &m) in members.iter().enumerate() {
        let inputs = graph.inputs(m);
        if let Some(x) = inputs.iter().find(|i| !i.is_control()) {
            graph.add_data_input(fused_id, x.src, x.output.unwrap_or(0), x.span);
        }
        controls.extend(inputs.iter().filter(|i| i.is_control()).map(|i| i.src));
        graph.replace_uses(m, 0, fused_id, slot as u32);
        let control_users: Vec<(NodeId, Span)> = graph
            .uses(m)
            .into_iter()
            .filter(|(_, e)| matches!(e.kind, EdgeKind::Control { .. }))
            .map(|(u, e)| (u, e.span))
            .collect();
        for (user, span) in control_users {
            if !graph.inputs(user).iter().any(|i| i.is_control() && i.src == fused_id) {
                graph.add_control_input(user, fused_id, span);
            }
        }
    }
    let mut seen = HashSet::new();
    for c in controls {
        if seen.insert(c) {
            graph.add_control_input(fused_id, c, Span::DETACHED);
        }
    }
    for &m in members {
        graph.remove_node(m);
    }
    // The fused op takes the place of the last sum in the text order.
    graph.node_mut(fused_id).seq = last_seq;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::parse_module;

    fn parse(text: &str) -> Graph {
        let (m, errors) = parse_module(text.as_bytes()).expect("parses");
        assert!(errors.is_empty(), "{errors:?}");
        m.graphs.into_iter().next().expect("one graph")
    }

    const TAGGED: &str = r#"
graph @g {
  %x = Placeholder() {dtype = f32, shape = shape[4]}
  %groups = Const() {dtype = i32, value = tensor(i32, [1, 2]) [0, 1], _tpu_replicate = "c"}
  %a = CrossReplicaSum(%x, %groups) {T = f32, _tpu_replicate = "c"}
  %y = Neg(%a) {T = f32, _tpu_replicate = "c"}
  %b = CrossReplicaSum(%y, %groups) {T = f32, _tpu_replicate = "c"}
  %c = CrossReplicaSum(%x, %groups) {T = f32, _tpu_replicate = "c"}
  %d = CrossReplicaSum(%x, %groups) {T = f32, _tpu_replicate = "other"}
  %out = Add(%b, %c) {T = f32, _tpu_replicate = "c"}
}
"#;

    fn ops(graph: &Graph) -> Vec<String> {
        graph.nodes_in_order().into_iter().map(|id| format!("{}={}", graph.node(id).name, graph.node(id).op)).collect()
    }

    #[test]
    fn dependent_sums_stay_apart() {
        let mut g = parse(TAGGED);
        fuse_all_reduce(&mut g, &FusionConfig::default());
        // %a reaches %b, so %b closes %a's group and opens its own; %c is
        // independent of %b and joins it; %d belongs to another cluster.
        let fused = g.find("b/fused").expect("b and c fused");
        assert_eq!(&*g.node(fused).op, "AllReduce");
        let operands: Vec<String> = g.data_inputs(fused).iter().map(|i| g.node(i.src).name.to_string()).collect();
        assert_eq!(operands, ["y", "x"]);
        assert!(g.find("b").is_none() && g.find("c").is_none());
        assert!(g.find("a").is_some() && g.find("d").is_some());
        // %out reads %b and %c through outputs 0 and 1 of the fused op.
        let out = g.find("out").unwrap();
        let inputs = g.data_inputs(out);
        assert_eq!((inputs[0].src, inputs[0].output), (fused, Some(0)));
        assert_eq!((inputs[1].src, inputs[1].output), (fused, Some(1)));
        assert!(petgraph::algo::toposort(g.petgraph(), None).is_ok());
        assert!(ops(&g).contains(&"y=Neg".to_string()));
    }

    #[test]
    fn a_loop_back_edge_does_not_stop_fusion() {
        // Two independent sums after a TF1 loop: the back edge is no cycle, so they still fuse.
        let text = r#"
graph @g {
  %x = Placeholder() {dtype = f32, shape = shape[4]}
  %groups = Const() {dtype = i32, value = tensor(i32, [1, 2]) [0, 1], _tpu_replicate = "c"}
  %enter = Enter(%x) {T = f32, frame_name = "f", is_constant = false, _tpu_replicate = "c"}
  %merge = Merge(%enter, %next) {T = f32, N = 2, _tpu_replicate = "c"}
  %body = Neg(%merge) {T = f32, _tpu_replicate = "c"}
  %next = NextIteration(%body) {T = f32, _tpu_replicate = "c"}
  %a = CrossReplicaSum(%x, %groups) {T = f32, _tpu_replicate = "c"}
  %b = CrossReplicaSum(%x, %groups) {T = f32, _tpu_replicate = "c"}
}
"#;
        let mut g = parse(text);
        let order = text_topological_order(&g).expect("a back edge is no cycle");
        let position = |name: &str| order.iter().position(|&id| &*g.node(id).name == name).unwrap();
        assert!(position("merge") < position("body") && position("body") < position("next"));
        fuse_all_reduce(&mut g, &FusionConfig::default());
        assert!(g.find("a").is_none() && g.find("b").is_none(), "{:?}", ops(&g));
    }

    #[test]
    fn threshold_limits_group_size() {
        let mut g = parse(TAGGED);
        // Each operand is 4 f32 = 16 bytes: a 16-byte limit fuses nothing.
        fuse_all_reduce(&mut g, &FusionConfig { threshold_bytes: Some(16) });
        assert!(g.find("b/fused").is_none());
        assert!(g.find("b").is_some() && g.find("c").is_some());
        let mut g = parse(TAGGED);
        fuse_all_reduce(&mut g, &FusionConfig { threshold_bytes: Some(32) });
        assert!(g.find("b/fused").is_some());
    }

    #[test]
    fn variable_reads_take_the_size_of_their_variable() {
        let text = r#"
graph @g {
  %v = VarHandleOp() {dtype = f32, shape = shape[2, 8], shared_name = "v"}
  %w = VarHandleOp() {dtype = f32, shape = shape[8], shared_name = "w"}
  %u = VarHandleOp() {dtype = f32, shared_name = "u"}
  %rv = ReadVariableOp(%v) {dtype = f32, _tpu_replicate = "c"}
  %rw = ReadVariableOp(%w) {dtype = f32, _tpu_replicate = "c"}
  %ru = ReadVariableOp(%u) {dtype = f32, _tpu_replicate = "c"}
  %a = CrossReplicaSum(%rv) {T = f32, _tpu_replicate = "c"}
  %b = CrossReplicaSum(%rw) {T = f32, _tpu_replicate = "c"}
  %c = CrossReplicaSum(%ru) {T = f32, _tpu_replicate = "c"}
}
"#;
        let g = parse(text);
        let shapes = static_shapes(&g, &text_topological_order(&g).unwrap());
        assert_eq!(operand_bytes(&g, &shapes, g.find("a").unwrap()), Some(64));
        assert_eq!(operand_bytes(&g, &shapes, g.find("b").unwrap()), Some(32));
        // A variable without a static shape has no size, so it is not fused under a threshold.
        assert_eq!(operand_bytes(&g, &shapes, g.find("c").unwrap()), None);
        let mut g = parse(text);
        fuse_all_reduce(&mut g, &FusionConfig { threshold_bytes: Some(96) });
        let fused = g.find("a/fused").expect("a and b fused");
        assert_eq!(g.data_inputs(fused).len(), 2);
        assert!(g.find("c").is_some());
        let mut g = parse(text);
        fuse_all_reduce(&mut g, &FusionConfig { threshold_bytes: Some(95) });
        assert!(g.find("a/fused").is_none(), "64 + 32 bytes exceed a 95-byte threshold");
    }
}
