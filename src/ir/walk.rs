//! Walks over a graph's operand edges.
//!
//! Invariant: a walk visits each node at most once and never recurses, so
//! a million-node chain costs a vector, not a stack overflow. Cost: linear
//! in the nodes and edges reached.

use rustc_hash::FxHashSet;

use super::graph::{Graph, NodeId};

/// The nodes reachable from `roots` through the operands (data and control)
/// that `follow(producer, consumer)` accepts, each after its operands: a
/// depth-first post-order, from the roots in the order given and the
/// operands of a node in operand order.
pub fn post_order(
    graph: &Graph,
    roots: impl IntoIterator<Item = NodeId>,
    mut follow: impl FnMut(NodeId, NodeId) -> bool,
) -> Vec<NodeId> {
    let mut order = Vec::new();
    let mut seen: FxHashSet<NodeId> = FxHashSet::default();
    let mut stack = Vec::new();
    for root in roots {
        stack.push((root, false));
        while let Some((id, done)) = stack.pop() {
            if done {
                order.push(id);
                continue;
            }
            if !seen.insert(id) {
                continue;
            }
            stack.push((id, true));
            for input in graph.inputs(id).iter().rev() {
                if !seen.contains(&input.src) && follow(input.src, id) {
                    stack.push((input.src, false));
                }
            }
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::parse_module;

    #[test]
    fn operands_come_first_and_the_filter_prunes() {
        let (module, errors) = parse_module(
            b"graph @main {\n  %a = Placeholder() {dtype = f32}\n  %b = Neg(%a) {T = f32}\n  \
             %c = Neg(%b) {T = f32}\n  %d = AddV2(%c, %a, ^%b) {T = f32}\n}\n",
        )
        .expect("parses");
        assert!(errors.is_empty(), "{errors:?}");
        let g = &module.graphs[0];
        let id = |n: &str| g.find(n).unwrap();
        let names = |order: Vec<NodeId>| order.into_iter().map(|i| g.node(i).name.to_string()).collect::<Vec<_>>();
        assert_eq!(names(post_order(g, [id("d")], |_, _| true)), ["a", "b", "c", "d"]);
        assert_eq!(names(post_order(g, [id("d"), id("a")], |src, _| src != id("b"))), ["c", "a", "d"]);
    }
}
