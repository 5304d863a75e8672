//! Functionalization: TF1 control flow (`Switch`, `Merge`, `Enter`, `Exit`,
//! `NextIteration`, `LoopCond`) rewritten into functional `While` and `If`
//! ops over functions of the module, as TensorFlow's XLA bridge does before
//! it compiles a graph (StableHLO has no dead tensors and no frames).
//!
//! Meaning:
//! - Each loop frame (the nodes between its `Enter`s and `Exit`s, found as
//!   TensorFlow's executor finds frames) becomes one `While`. Loop variable
//!   `i` is the chain `Enter -> Merge -> Switch(pred = LoopCond)`, with
//!   `NextIteration` closing it and optional `Exit`s on the `Switch`'s false
//!   output. The `While`'s operands are the variables' initial values, then
//!   the loop invariants (`Enter` with `is_constant = true`), which the body
//!   returns unchanged. The `cond` function computes the `LoopCond`'s input
//!   from the `Merge`s; the `body` function computes each `NextIteration`'s
//!   input from the `Switch`es' true outputs. Each `Exit` keeps its name and
//!   becomes an `Identity` of the `While`'s result, so fetches and consumers
//!   are unchanged. Frames are rewritten innermost first, so an inner loop is
//!   already a `While` node of the outer body.
//! - Each conditional (the `Switch`es whose outputs meet again at `Merge`s)
//!   becomes one `If` on the `Switch`es' predicate (an `Identity` chain such
//!   as `pred_id` is looked through). Its operands are the switched values,
//!   then the values the branches read from outside without a `Switch`; each
//!   `Merge` keeps its name and becomes an `Identity` of an `If` result
//!   (`Merge:1`, the taken index, is a further result). Conditionals are
//!   rewritten innermost first; those inside a loop body are rewritten in
//!   the body function.
//! - Control inputs from outside a frame or conditional become control
//!   inputs of the `While`/`If`; control edges inside it move into the
//!   functions; control edges from the frame's own `Switch`/`Merge`/`Enter`
//!   (which only say "in this iteration" or "on this side") are dropped.
//! - Cluster tags: every node of a frame or conditional must carry the same
//!   `_tpu_replicate` (or none), which the new node carries; an
//!   `_xla_outside_compilation` tag shared by all of them moves to the new
//!   node. Outside compilation on only some ops of a loop or conditional is
//!   refused ([`PassError::OutsideCompilationInControlFlow`]), as is a frame
//!   whose ops span clusters. Function bodies carry no `_tpu_replicate`.
//!
//! Invariants: the result has no TF1 control-flow op; names of nodes that
//! stay (`Exit`s, `Merge`s, everything outside the constructs) do not
//! change; a graph that fails is left as it was, with one error.
//!
//! Cost: one topological order and one frame assignment (linear), each
//! node copied into one function per loop or conditional that holds it, so
//! linear in the graph size times the nesting depth.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use petgraph::visit::{EdgeRef, IntoEdgeReferences, NodeIndexable};
use petgraph::Direction;

use super::common::{output_dtype, OUTSIDE_COMPILATION, TPU_REPLICATE};
use super::error::PassError;
use crate::ir::functions::{ARG_OP, CONTROL_OUTPUTS_ATTR, FUNCTION_ROLE, RETVAL_OP, ROLE_ATTR};
use crate::ir::types::FuncRef;
use crate::ir::Input;
use crate::ir::{AttrValue, DType, Graph, Module, Node, NodeId};
use crate::syntax::Span;

/// The TF1 control-flow op types.
pub const TF1_CONTROL_FLOW: &[&str] = &["Enter", "Exit", "LoopCond", "Merge", "NextIteration", "Switch"];

/// True when `graph` has a TF1 control-flow op.
pub fn has_tf1_control_flow(graph: &Graph) -> bool {
    graph.node_ids().any(|id| TF1_CONTROL_FLOW.contains(&&*graph.node(id).op))
}

/// True when some graph of `module` has a TF1 control-flow op.
pub fn module_has_tf1_control_flow(module: &Module) -> bool {
    module.graphs.iter().any(has_tf1_control_flow)
}

/// Rewrites the TF1 control flow of every graph of `module` into `While`
/// and `If` ops, appending their functions to the module (see the module
/// docs). A graph that cannot be rewritten is left as it was and gives one
/// error; the others are rewritten.
pub fn functionalize(module: &mut Module) -> Vec<PassError> {
    let mut lib = Library { taken: module.graphs.iter().map(|g| g.name.clone()).collect(), new: Vec::new() };
    let mut errors = Vec::new();
    for i in 0..module.graphs.len() {
        if !has_tf1_control_flow(&module.graphs[i]) {
            continue;
        }
        let mut graph = module.graphs[i].clone();
        let (kept, taken) = (lib.new.len(), lib.taken.clone());
        match functionalize_graph(&mut graph, &mut lib) {
            Ok(()) => module.graphs[i] = graph,
            Err(e) => {
                lib.new.truncate(kept);
                lib.taken = taken;
                errors.push(e);
            }
        }
    }
    module.graphs.append(&mut lib.new);
    errors
}

/// The functions made so far and the graph names in use.
struct Library {
    taken: HashSet<String>,
    new: Vec<Graph>,
}

impl Library {
    /// A free graph name made from `base` (`/` becomes `_`).
    fn fresh(&mut self, base: &str) -> String {
        let base: String = base.chars().map(|c| if c == '/' || c == ':' { '_' } else { c }).collect();
        let name = if self.taken.contains(&base) {
            (1..).map(|i| format!("{base}_{i}")).find(|n| !self.taken.contains(n)).expect("an unbounded search")
        } else {
            base
        };
        self.taken.insert(name.clone());
        name
    }
}

fn functionalize_graph(graph: &mut Graph, lib: &mut Library) -> Result<(), PassError> {
    functionalize_loops(graph, lib)?;
    functionalize_conds(graph, lib)
}

fn op(graph: &Graph, id: NodeId) -> &str {
    &graph.node(id).op
}

fn name(graph: &Graph, id: NodeId) -> String {
    graph.node(id).name.to_string()
}

/// The nodes in a topological order that ignores loop back edges
/// (`NextIteration` -> `Merge`); ties go by text order.
fn topological_order(graph: &Graph) -> Result<Vec<NodeId>, PassError> {
    let pg = graph.petgraph();
    let mut indegree = vec![0u32; pg.node_bound()];
    for e in pg.edge_references() {
        if !graph.is_back_edge(NodeId(e.source()), NodeId(e.target())) {
            indegree[e.target().index()] += 1;
        }
    }
    let mut ready: Vec<NodeId> = graph.nodes_in_order().into_iter().filter(|id| indegree[id.0.index()] == 0).collect();
    ready.reverse();
    let mut queue: VecDeque<NodeId> = ready.into_iter().rev().collect();
    let mut order = Vec::with_capacity(graph.node_count());
    while let Some(id) = queue.pop_front() {
        order.push(id);
        for e in pg.edges_directed(id.0, Direction::Outgoing) {
            let target = NodeId(e.target());
            if graph.is_back_edge(id, target) {
                continue;
            }
            let d = &mut indegree[target.0.index()];
            *d -= 1;
            if *d == 0 {
                queue.push_back(target);
            }
        }
    }
    if order.len() != graph.node_count() {
        let placed: HashSet<NodeId> = order.iter().copied().collect();
        let stuck = graph.nodes_in_order().into_iter().find(|id| !placed.contains(id)).expect("a node is unplaced");
        return Err(PassError::MalformedLoop {
            frame: String::new(),
            reason: format!(
                "`%{}` is on a cycle that no `NextIteration` -> `Merge` back edge closes",
                graph.node(stuck).name
            ),
            span: graph.node(stuck).span,
        });
    }
    Ok(order)
}

/// The cluster and outside-compilation tags that a construct's new node
/// carries: all of `nodes` must agree on `_tpu_replicate`; an
/// `_xla_outside_compilation` tag moves to the new node only when all share it.
fn construct_tags(
    graph: &Graph,
    nodes: &[NodeId],
    what: &str,
) -> Result<(Option<Arc<str>>, Option<Arc<str>>), PassError> {
    let tag = |id: NodeId, key: &str| graph.node(id).attrs.get_str(key).map(Arc::<str>::from);
    let Some(&first) = nodes.first() else { return Ok((None, None)) };
    let cluster = tag(first, TPU_REPLICATE);
    if let Some(&other) = nodes.iter().find(|&&id| tag(id, TPU_REPLICATE) != cluster) {
        let show = |c: Option<Arc<str>>| c.map_or("no cluster".to_string(), |c| format!("cluster `{c}`"));
        return Err(PassError::ConstructSpansClusters {
            what: what.to_string(),
            first: show(cluster),
            second: show(tag(other, TPU_REPLICATE)),
            span: graph.node(other).span,
            other: graph.node(first).span,
        });
    }
    let oc = tag(first, OUTSIDE_COMPILATION);
    if let Some(&mixed) = nodes.iter().find(|&&id| tag(id, OUTSIDE_COMPILATION) != oc) {
        let host = if oc.is_some() { first } else { mixed };
        return Err(PassError::OutsideCompilationInControlFlow {
            what: what.to_string(),
            node: name(graph, host),
            span: graph.node(host).span,
        });
    }
    Ok((cluster, oc))
}

/// Where an input of a copied node comes from, inside its function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Src {
    /// Argument `k`.
    Arg(usize),
    /// A copied node's output (`None`: a control input).
    Node(NodeId, Option<u32>),
    /// Nothing: a control input that has no meaning inside the function.
    Drop,
}

/// What a function is made of.
struct FunctionSpec<'a> {
    name: String,
    /// Name, dtype and span of each argument.
    args: Vec<(String, DType, Span)>,
    /// The nodes copied in, each with its inputs mapped by `classify`.
    nodes: Vec<NodeId>,
    /// Name, dtype and value of each result.
    rets: Vec<(String, DType, Src)>,
    /// Where an input of a copied node comes from.
    classify: &'a dyn Fn(&Graph, NodeId, &Input) -> Result<Src, PassError>,
}

/// Builds a function graph from `spec`, copying the nodes from `graph`
/// without their `_tpu_replicate` tag. Copied nodes that nothing inside
/// consumes and that are not plain values are the function's control outputs.
fn build_function(graph: &Graph, spec: &FunctionSpec<'_>) -> Result<Graph, PassError> {
    let mut f = Graph::new(spec.name.clone());
    f.attrs.insert(ROLE_ATTR, AttrValue::str(FUNCTION_ROLE));
    let mut args = Vec::with_capacity(spec.args.len());
    for (k, (arg, dtype, span)) in spec.args.iter().enumerate() {
        let node = Node::op(arg.as_str(), ARG_OP)
            .with_attr("T", AttrValue::Type(*dtype))
            .with_attr("index", AttrValue::Int(k as i64))
            .with_span(*span);
        args.push(f.add_node_unique(node));
    }
    let mut nodes = spec.nodes.clone();
    nodes.sort_by_key(|&id| graph.node(id).seq);
    let mut copies: HashMap<NodeId, NodeId> = HashMap::with_capacity(nodes.len());
    for &id in &nodes {
        let mut node = graph.node(id).clone();
        node.attrs.remove(TPU_REPLICATE);
        node.region = None;
        copies.insert(id, f.add_node_unique(node));
    }
    let resolve = |src: Src, span: Span| -> Option<Input> {
        match src {
            Src::Arg(k) => Some(Input { src: args[k], output: Some(0), span }),
            Src::Node(n, output) => Some(Input { src: copies[&n], output, span }),
            Src::Drop => None,
        }
    };
    let mut consumed: HashSet<NodeId> = HashSet::new();
    for &id in &nodes {
        let mut inputs = Vec::new();
        for input in graph.inputs(id) {
            let src = (spec.classify)(graph, id, &input)?;
            if let Src::Node(n, _) = src {
                consumed.insert(n);
            }
            // A control input from an argument only says "after the call began": dropped.
            if matches!(src, Src::Arg(_)) && input.is_control() {
                continue;
            }
            inputs.extend(resolve(src, input.span));
        }
        f.set_inputs(copies[&id], &inputs);
    }
    for (k, (ret, dtype, src)) in spec.rets.iter().enumerate() {
        if let Src::Node(n, _) = src {
            consumed.insert(*n);
        }
        let node = Node::op(ret.as_str(), RETVAL_OP)
            .with_attr("T", AttrValue::Type(*dtype))
            .with_attr("index", AttrValue::Int(k as i64));
        let r = f.add_node_unique(node);
        if let Some(input) = resolve(*src, Span::DETACHED) {
            f.add_input(r, input);
        }
    }
    let effects: Vec<AttrValue> = nodes
        .iter()
        .filter(|id| !consumed.contains(id) && !matches!(op(graph, **id), "Identity" | "Const" | "NoOp"))
        .map(|&id| AttrValue::str(f.node(copies[&id]).name.clone()))
        .collect();
    if !effects.is_empty() {
        f.attrs.insert(CONTROL_OUTPUTS_ATTR, AttrValue::List(effects));
    }
    Ok(f)
}

fn func_attr(name: &str) -> AttrValue {
    AttrValue::Func(Box::new(FuncRef { name: name.to_string(), attrs: Default::default() }))
}

fn type_list(types: &[DType]) -> AttrValue {
    AttrValue::List(types.iter().map(|&t| AttrValue::Type(t)).collect())
}

/// The dtype attribute `key` of `id`, or an error naming the construct.
fn dtype_attr(graph: &Graph, id: NodeId, key: &str, frame: &str) -> Result<DType, PassError> {
    graph.node(id).attrs.get(key).and_then(AttrValue::as_type).ok_or_else(|| PassError::MalformedLoop {
        frame: frame.to_string(),
        reason: format!("`%{}` has no dtype attribute `{key}`", graph.node(id).name),
        span: graph.node(id).span,
    })
}

/// Turns `id` into an `Identity` of `value`, keeping its name, `T` and tags.
fn become_identity(graph: &mut Graph, id: NodeId, value: Input, dtype: DType) {
    become_forward(graph, id, &[(value, dtype)]);
}

/// Turns `id` into an `Identity` of one value, or an `IdentityN` of
/// several (a `Merge` whose taken index is used keeps both outputs), keeping
/// its name and tags.
fn become_forward(graph: &mut Graph, id: NodeId, values: &[(Input, DType)]) {
    let node = graph.node_mut(id);
    let keep = |k: &str| k == TPU_REPLICATE || k == OUTSIDE_COMPILATION || k == "_class";
    let kept: Vec<(Arc<str>, AttrValue)> =
        node.attrs.iter().filter(|(k, _)| keep(k)).map(|(k, v)| (Arc::from(k), v.clone())).collect();
    let mut attrs = crate::ir::attrs::AttrMap::from_entries(kept);
    if let [(_, dtype)] = values {
        node.op = "Identity".into();
        attrs.insert("T", AttrValue::Type(*dtype));
    } else {
        node.op = "IdentityN".into();
        attrs.insert("T", type_list(&values.iter().map(|v| v.1).collect::<Vec<_>>()));
    }
    node.attrs = attrs;
    let inputs: Vec<Input> = values.iter().map(|v| v.0).collect();
    graph.set_inputs(id, &inputs);
}

// ----- loops -----

/// A loop frame: its name, its parent frame and its nodes.
struct Frame {
    name: String,
    parent: usize,
    members: Vec<NodeId>,
}

const ROOT: usize = 0;

/// Assigns every node its frame, as TensorFlow's executor does: an `Enter`
/// starts the child frame its `frame_name` names, an `Exit` returns to the
/// parent, every other edge stays in its frame.
fn assign_frames(graph: &Graph, order: &[NodeId]) -> Result<Vec<Frame>, PassError> {
    let mut frames = vec![Frame { name: String::new(), parent: ROOT, members: Vec::new() }];
    let mut frame_of = vec![usize::MAX; graph.petgraph().node_bound()];
    let mut children: HashMap<(usize, String), usize> = HashMap::new();
    let show = |frames: &[Frame], f: usize| {
        if f == ROOT {
            "the top level".to_string()
        } else {
            format!("loop frame `{}`", frames[f].name)
        }
    };
    for &id in order {
        let mut here: Option<(usize, NodeId)> = None;
        for input in graph.inputs(id) {
            if graph.is_back_edge(input.src, id) {
                continue;
            }
            let f = frame_of[input.src.0.index()];
            let out = if op(graph, input.src) == "Exit" {
                if f == ROOT {
                    let n = graph.node(input.src);
                    return Err(PassError::FrameCrossing {
                        node: n.name.to_string(),
                        reason: "it is an `Exit` outside every loop".into(),
                        span: n.span,
                    });
                }
                frames[f].parent
            } else {
                f
            };
            match here {
                None => here = Some((out, input.src)),
                Some((f0, src0)) if f0 != out => {
                    let n = graph.node(id);
                    return Err(PassError::FrameCrossing {
                        node: n.name.to_string(),
                        reason: format!(
                            "it reads `%{}` from {} and `%{}` from {}",
                            graph.node(src0).name,
                            show(&frames, f0),
                            graph.node(input.src).name,
                            show(&frames, out)
                        ),
                        span: input.span,
                    });
                }
                _ => {}
            }
        }
        let outer = here.map_or(ROOT, |h| h.0);
        let f = if op(graph, id) == "Enter" {
            let node = graph.node(id);
            let Some(frame_name) = node.attrs.get_str("frame_name") else {
                return Err(PassError::MalformedLoop {
                    frame: String::new(),
                    reason: format!("`Enter` `%{}` has no `frame_name`", node.name),
                    span: node.span,
                });
            };
            let next = frames.len();
            let f = *children.entry((outer, frame_name.to_string())).or_insert(next);
            if f == next {
                frames.push(Frame { name: frame_name.to_string(), parent: outer, members: Vec::new() });
            }
            f
        } else {
            outer
        };
        frame_of[id.0.index()] = f;
        frames[f].members.push(id);
    }
    Ok(frames)
}

fn functionalize_loops(graph: &mut Graph, lib: &mut Library) -> Result<(), PassError> {
    if !graph.node_ids().any(|id| op(graph, id) == "Enter") {
        return Ok(());
    }
    let order = topological_order(graph)?;
    let mut frames = assign_frames(graph, &order)?;
    // Children are made after their parents: the reverse order is innermost first.
    for f in (1..frames.len()).rev() {
        let members = std::mem::take(&mut frames[f].members);
        let (made, kept) = functionalize_frame(graph, &frames[f].name, members, lib)?;
        let parent = frames[f].parent;
        frames[parent].members.extend(made);
        frames[parent].members.extend(kept);
    }
    Ok(())
}

/// A loop variable: `Enter -> Merge -> Switch`, closed by `NextIteration`.
struct LoopVar {
    enter: NodeId,
    merge: NodeId,
    next: NodeId,
    exits: Vec<NodeId>,
    dtype: DType,
}

/// What a structural node of a frame stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Enter(usize),
    Merge(usize),
    Switch(usize),
    Next,
    Exit,
    Invariant(usize),
    LoopCond,
}

/// Rewrites one frame into a `While`; returns the new node and the `Exit`s
/// (now `Identity`s), which belong to the parent frame.
fn functionalize_frame(
    graph: &mut Graph,
    frame: &str,
    mut members: Vec<NodeId>,
    lib: &mut Library,
) -> Result<(Vec<NodeId>, Vec<NodeId>), PassError> {
    members.sort_by_key(|id| graph.node(*id).seq);
    let member_set: HashSet<NodeId> = members.iter().copied().collect();
    let first = members[0];
    let malformed = |graph: &Graph, at: NodeId, reason: String| PassError::MalformedLoop {
        frame: frame.to_string(),
        reason,
        span: graph.node(at).span,
    };
    let (cluster, oc) = construct_tags(graph, &members, &format!("loop frame `{frame}`"))?;
    let loop_conds: Vec<NodeId> = members.iter().copied().filter(|&id| op(graph, id) == "LoopCond").collect();
    let [loop_cond] = loop_conds[..] else {
        return Err(malformed(graph, first, format!("it has {} `LoopCond` ops; a loop has one", loop_conds.len())));
    };
    let mut vars: Vec<LoopVar> = Vec::new();
    let mut invariants: Vec<(NodeId, DType)> = Vec::new();
    let mut role: HashMap<NodeId, Role> = HashMap::new();
    role.insert(loop_cond, Role::LoopCond);
    for &id in members.iter().filter(|&&id| op(graph, id) == "Enter") {
        let dtype = dtype_attr(graph, id, "T", frame)?;
        if graph.data_inputs(id).len() != 1 {
            return Err(malformed(graph, id, format!("`Enter` `%{}` needs one data input", name(graph, id))));
        }
        if graph.node(id).attrs.get_bool("is_constant") == Some(true) {
            role.insert(id, Role::Invariant(invariants.len()));
            invariants.push((id, dtype));
            continue;
        }
        let data_uses: Vec<NodeId> = graph
            .uses(id)
            .into_iter()
            .filter(|(_, e)| matches!(e.kind, crate::ir::EdgeKind::Data { .. }))
            .map(|u| u.0)
            .collect();
        let [merge] = data_uses[..] else {
            return Err(malformed(
                graph,
                id,
                format!("loop variable `%{}` feeds {} ops; it must feed one `Merge`", name(graph, id), data_uses.len()),
            ));
        };
        let merge_inputs = graph.data_inputs(merge);
        let next = merge_inputs.iter().find(|i| i.src != id).map(|i| i.src);
        let (true, 2, Some(next)) = (op(graph, merge) == "Merge", merge_inputs.len(), next) else {
            return Err(malformed(
                graph,
                id,
                format!("loop variable `%{}` must enter a two-input `Merge` with its `NextIteration`", name(graph, id)),
            ));
        };
        if op(graph, next) != "NextIteration" || !member_set.contains(&next) {
            return Err(malformed(
                graph,
                merge,
                format!("`%{}` does not merge a `NextIteration` of the frame", name(graph, merge)),
            ));
        }
        let switches: Vec<NodeId> = graph
            .uses(merge)
            .into_iter()
            .filter(|(u, e)| {
                op(graph, *u) == "Switch"
                    && matches!(e.kind, crate::ir::EdgeKind::Data { slot: 0, .. })
                    && graph.data_inputs(*u).get(1).is_some_and(|p| p.src == loop_cond)
            })
            .map(|u| u.0)
            .collect();
        let [switch] = switches[..] else {
            return Err(malformed(
                graph,
                merge,
                format!("`%{}` must feed one `Switch` on the `LoopCond`, found {}", name(graph, merge), switches.len()),
            ));
        };
        let mut exits = Vec::new();
        for (user, edge) in graph.uses(switch) {
            if let crate::ir::EdgeKind::Data { output: 0, .. } = edge.kind {
                if op(graph, user) != "Exit" {
                    return Err(malformed(
                        graph,
                        user,
                        format!(
                            "`%{}` reads the exit side of `Switch` `%{}`; only an `Exit` may",
                            name(graph, user),
                            name(graph, switch)
                        ),
                    ));
                }
                exits.push(user);
            }
        }
        let i = vars.len();
        for (node, r) in [(id, Role::Enter(i)), (merge, Role::Merge(i)), (switch, Role::Switch(i)), (next, Role::Next)]
        {
            if role.insert(node, r).is_some() {
                return Err(malformed(graph, node, format!("`%{}` belongs to two loop variables", name(graph, node))));
            }
        }
        for &x in &exits {
            role.insert(x, Role::Exit);
        }
        vars.push(LoopVar { enter: id, merge, next, exits, dtype });
    }
    if vars.is_empty() {
        return Err(malformed(graph, first, "it has no loop variable (a non-constant `Enter`)".into()));
    }
    // Every loop-structure op of the frame must be part of a variable.
    if let Some(&stray) = members
        .iter()
        .find(|&&id| matches!(op(graph, id), "NextIteration" | "Exit" | "Enter") && !role.contains_key(&id))
    {
        return Err(malformed(graph, stray, format!("`%{}` is not part of a loop variable", name(graph, stray))));
    }
    let nv = vars.len();
    let classify_in = |graph: &Graph, in_cond: bool, node: NodeId, input: &Input| -> Result<Src, PassError> {
        let control = input.is_control();
        match role.get(&input.src) {
            Some(Role::Merge(i)) => Ok(if control { Src::Drop } else { Src::Arg(*i) }),
            Some(Role::Switch(i)) if control => {
                let _ = i;
                Ok(Src::Drop)
            }
            Some(Role::Switch(i)) if input.output == Some(1) && !in_cond => Ok(Src::Arg(*i)),
            Some(Role::Invariant(j)) => Ok(if control { Src::Drop } else { Src::Arg(nv + j) }),
            Some(Role::Enter(_) | Role::LoopCond) if control => Ok(Src::Drop),
            Some(_) => Err(PassError::MalformedLoop {
                frame: frame.to_string(),
                reason: format!(
                    "`%{}` reads `%{}` ({}), which the {} cannot",
                    graph.node(node).name,
                    graph.node(input.src).name,
                    graph.node(input.src).op,
                    if in_cond { "loop condition" } else { "loop body" }
                ),
                span: input.span,
            }),
            None if member_set.contains(&input.src) => Ok(Src::Node(input.src, input.output)),
            None => Err(PassError::FrameCrossing {
                node: graph.node(node).name.to_string(),
                reason: format!(
                    "it reads `%{}` from outside loop frame `{frame}` without an `Enter`",
                    graph.node(input.src).name
                ),
                span: input.span,
            }),
        }
    };
    // The nodes a set of seeds needs, within the frame, up to its structure.
    let closure = |graph: &Graph, in_cond: bool, seeds: Vec<NodeId>| -> Result<Vec<NodeId>, PassError> {
        let mut seen: HashSet<NodeId> = seeds.iter().copied().collect();
        let mut stack = seeds;
        let mut out = Vec::new();
        while let Some(id) = stack.pop() {
            out.push(id);
            for input in graph.inputs(id) {
                if let Src::Node(n, _) = classify_in(graph, in_cond, id, &input)? {
                    if seen.insert(n) {
                        stack.push(n);
                    }
                }
            }
        }
        out.sort_by_key(|&id| graph.node(id).seq);
        Ok(out)
    };
    let pred = graph
        .data_inputs(loop_cond)
        .first()
        .copied()
        .ok_or_else(|| malformed(graph, loop_cond, "the `LoopCond` has no input".into()))?;
    let pred_src = classify_in(graph, true, loop_cond, &pred)?;
    let cond_nodes = match pred_src {
        Src::Node(n, _) => closure(graph, true, vec![n])?,
        _ => Vec::new(),
    };
    let cond_set: HashSet<NodeId> = cond_nodes.iter().copied().collect();
    let mut seeds: Vec<NodeId> =
        members.iter().copied().filter(|id| !role.contains_key(id) && !cond_set.contains(id)).collect();
    for v in &vars {
        for input in graph.inputs(v.next) {
            if let Src::Node(n, _) = classify_in(graph, false, v.next, &input)? {
                seeds.push(n);
            }
        }
    }
    seeds.sort();
    seeds.dedup();
    let body_nodes = closure(graph, false, seeds)?;

    let prefix = frame.strip_suffix("/while_context").unwrap_or(frame).to_string();
    let mut args: Vec<(String, DType, Span)> =
        vars.iter().map(|v| (name(graph, v.merge), v.dtype, graph.node(v.enter).span)).collect();
    args.extend(invariants.iter().map(|&(e, t)| (name(graph, e), t, graph.node(e).span)));
    let cond_name = lib.fresh(&format!("{prefix}_cond"));
    let body_name = lib.fresh(&format!("{prefix}_body"));
    let cond_fn = {
        let classify = |g: &Graph, n: NodeId, i: &Input| classify_in(g, true, n, i);
        let spec = FunctionSpec {
            name: cond_name.clone(),
            args: args.clone(),
            nodes: cond_nodes,
            rets: vec![(name(graph, loop_cond), DType::Bool, pred_src)],
            classify: &classify,
        };
        build_function(graph, &spec)?
    };
    let body_fn = {
        let classify = |g: &Graph, n: NodeId, i: &Input| classify_in(g, false, n, i);
        let mut rets = Vec::new();
        for v in &vars {
            let input = graph
                .data_inputs(v.next)
                .first()
                .copied()
                .ok_or_else(|| malformed(graph, v.next, "the `NextIteration` has no input".into()))?;
            rets.push((name(graph, v.next), v.dtype, classify_in(graph, false, v.next, &input)?));
        }
        for (j, &(e, t)) in invariants.iter().enumerate() {
            rets.push((format!("{}/next", name(graph, e)), t, Src::Arg(nv + j)));
        }
        let spec = FunctionSpec { name: body_name.clone(), args, nodes: body_nodes, rets, classify: &classify };
        build_function(graph, &spec)?
    };
    for mut f in [cond_fn, body_fn] {
        functionalize_conds(&mut f, lib)?;
        lib.new.push(f);
    }

    // The While, at the place of the frame's first node.
    let mut types: Vec<DType> = vars.iter().map(|v| v.dtype).collect();
    types.extend(invariants.iter().map(|i| i.1));
    let parallel = graph.node(vars[0].enter).attrs.get_int("parallel_iterations").unwrap_or(10);
    let mut node = Node::op(graph.unique_name(&format!("{prefix}/While")), "While")
        .with_attr("T", type_list(&types))
        .with_attr("cond", func_attr(&cond_name))
        .with_attr("body", func_attr(&body_name))
        .with_attr("parallel_iterations", AttrValue::Int(parallel))
        .with_span(graph.node(vars[0].enter).span);
    if let Some(c) = &cluster {
        node = node.with_attr(TPU_REPLICATE, AttrValue::str(c.clone()));
    }
    if let Some(o) = &oc {
        node = node.with_attr(OUTSIDE_COMPILATION, AttrValue::str(o.clone()));
    }
    let seq = graph.node(first).seq;
    let w = graph
        .add_node(node)
        .map_err(|_| PassError::Internal { message: "a fresh name was taken".into(), span: Span::DETACHED })?;
    graph.node_mut(w).seq = seq;
    let enters: Vec<NodeId> = vars.iter().map(|v| v.enter).chain(invariants.iter().map(|i| i.0)).collect();
    let mut inputs: Vec<Input> = enters.iter().map(|&e| graph.data_inputs(e)[0]).collect();
    let mut controls: HashSet<NodeId> = HashSet::new();
    for &e in &enters {
        for input in graph.inputs(e).into_iter().filter(Input::is_control) {
            if controls.insert(input.src) {
                inputs.push(input);
            }
        }
    }
    graph.add_inputs(w, &inputs);
    let mut kept = Vec::new();
    let mut exits = HashSet::new();
    for (i, v) in vars.iter().enumerate() {
        for &x in &v.exits {
            let span = graph.node(x).span;
            become_identity(graph, x, Input { src: w, output: Some(i as u32), span }, v.dtype);
            kept.push(x);
            exits.insert(x);
        }
    }
    for id in members {
        if !exits.contains(&id) {
            graph.remove_node(id);
        }
    }
    Ok((vec![w], kept))
}

// ----- conditionals -----

/// One level of a node's conditional context: the side `port` of the
/// `Switch`es on predicate `pred` (an `Identity` chain looked through),
/// of conditional `inst` (a union-find element).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Level {
    pred: (NodeId, u32),
    port: u32,
    inst: usize,
}

/// Union-find over conditional instances (one element per `Switch`).
#[derive(Default)]
struct Instances(Vec<usize>);

impl Instances {
    fn add(&mut self) -> usize {
        self.0.push(self.0.len());
        self.0.len() - 1
    }

    fn find(&mut self, mut x: usize) -> usize {
        while self.0[x] != x {
            self.0[x] = self.0[self.0[x]];
            x = self.0[x];
        }
        x
    }

    fn union(&mut self, a: usize, b: usize) {
        let (a, b) = (self.find(a), self.find(b));
        self.0[a.max(b)] = a.min(b);
    }
}

/// The predicate a `Switch` tests, through `Identity` chains (`pred_id`).
fn canonical(graph: &Graph, mut value: (NodeId, u32)) -> (NodeId, u32) {
    let mut steps = 0;
    while op(graph, value.0) == "Identity" && steps < graph.node_count() {
        match graph.data_inputs(value.0).first() {
            Some(i) => value = (i.src, i.output.unwrap_or(0)),
            None => break,
        }
        steps += 1;
    }
    value
}

/// Makes `into` the longer of two contexts when one extends the other,
/// joining the conditionals they share; false when they diverge.
fn combine(into: &mut Vec<Level>, other: &[Level], instances: &mut Instances) -> bool {
    let common = into.len().min(other.len());
    for (a, b) in into[..common].iter().zip(&other[..common]) {
        if (a.pred, a.port) != (b.pred, b.port) {
            return false;
        }
        instances.union(a.inst, b.inst);
    }
    if other.len() > into.len() {
        *into = other.to_vec();
    }
    true
}

/// The nodes of one conditional.
#[derive(Default)]
struct Cond {
    switches: Vec<NodeId>,
    /// The nodes of the false (0) and true (1) side.
    sides: [Vec<NodeId>; 2],
    merges: Vec<NodeId>,
    depth: usize,
    /// The conditional and side this one sits in.
    parent: Option<(usize, u32)>,
    /// The predicate its `Switch`es test.
    pred: Option<(NodeId, u32)>,
}

fn malformed_cond(graph: &Graph, id: NodeId, reason: String) -> PassError {
    PassError::MalformedCond { node: name(graph, id), reason, span: graph.node(id).span }
}

/// Rewrites every conditional of `graph` (which has no loop frames) into
/// an `If`, innermost first.
fn functionalize_conds(graph: &mut Graph, lib: &mut Library) -> Result<(), PassError> {
    if !graph.node_ids().any(|id| matches!(op(graph, id), "Switch" | "Merge")) {
        return Ok(());
    }
    let order = topological_order(graph)?;
    let bound = graph.petgraph().node_bound();
    let mut ctx: Vec<Vec<Level>> = vec![Vec::new(); bound];
    let mut instances = Instances::default();
    let mut switch_level: HashMap<NodeId, ((NodeId, u32), usize)> = HashMap::new();
    let mut merge_inst: HashMap<NodeId, (usize, [u32; 2])> = HashMap::new();
    for &id in &order {
        let inputs = graph.inputs(id);
        let of = |input: &Input, ctx: &[Vec<Level>]| -> Vec<Level> {
            let mut c = ctx[input.src.0.index()].clone();
            if let (Some(&(pred, inst)), Some(port)) = (switch_level.get(&input.src), input.output) {
                c.push(Level { pred, port, inst });
            }
            c
        };
        if op(graph, id) == "Merge" {
            let data: Vec<&Input> = inputs.iter().filter(|i| !i.is_control()).collect();
            let [a, b] = data[..] else {
                return Err(malformed_cond(
                    graph,
                    id,
                    format!("it merges {} value(s); a conditional's `Merge` has two", data.len()),
                ));
            };
            let (mut ca, cb) = (of(a, &ctx), of(b, &ctx));
            let (Some(ta), Some(tb)) = (ca.pop(), cb.last().copied()) else {
                return Err(malformed_cond(graph, id, "no `Switch` separates the values it merges".into()));
            };
            if cb.len() != ca.len() + 1
                || !combine(&mut ca, &cb[..cb.len() - 1], &mut instances)
                || ta.pred != tb.pred
                || ta.port == tb.port
            {
                return Err(malformed_cond(
                    graph,
                    id,
                    "its inputs are not the two sides of one conditional's `Switch`es".into(),
                ));
            }
            instances.union(ta.inst, tb.inst);
            for c in inputs.iter().filter(|i| i.is_control()) {
                if !combine(&mut ca, &of(c, &ctx), &mut instances) {
                    return Err(malformed_cond(graph, id, "its control inputs come from another conditional".into()));
                }
            }
            merge_inst.insert(id, (ta.inst, [ta.port, tb.port]));
            ctx[id.0.index()] = ca;
            continue;
        }
        let mut here: Vec<Level> = Vec::new();
        for input in &inputs {
            if !combine(&mut here, &of(input, &ctx), &mut instances) {
                return Err(malformed_cond(
                    graph,
                    id,
                    format!(
                        "it reads `%{}` from a side of a conditional that its other inputs are not on",
                        graph.node(input.src).name
                    ),
                ));
            }
        }
        if op(graph, id) == "Switch" {
            let data: Vec<&Input> = inputs.iter().filter(|i| !i.is_control()).collect();
            let [_, pred] = data[..] else {
                return Err(PassError::UnmatchedSwitch {
                    node: name(graph, id),
                    reason: "it needs a value and a predicate".into(),
                    span: graph.node(id).span,
                });
            };
            let pred = canonical(graph, (pred.src, pred.output.unwrap_or(0)));
            switch_level.insert(id, (pred, instances.add()));
        }
        ctx[id.0.index()] = here;
    }

    // Group the nodes by conditional.
    let mut conds: HashMap<usize, Cond> = HashMap::new();
    for &id in &order {
        let here = ctx[id.0.index()].clone();
        if let Some(top) = here.last() {
            let root = instances.find(top.inst);
            conds.entry(root).or_default().sides[top.port as usize].push(id);
        }
        let parent = here.last().map(|t| (instances.find(t.inst), t.port));
        let own = switch_level.get(&id).map(|s| s.1).or_else(|| merge_inst.get(&id).map(|m| m.0));
        if let Some(inst) = own {
            let cond = conds.entry(instances.find(inst)).or_default();
            if let Some(&(pred, _)) = switch_level.get(&id) {
                cond.switches.push(id);
                cond.pred = Some(pred);
            } else {
                cond.merges.push(id);
            }
            cond.depth = here.len() + 1;
            cond.parent = parent;
        }
    }
    // Switches whose sides reach no Merge (a `switch_t` Identity no branch
    // op waits on) join a conditional on the same predicate in the same place.
    let mut lone: Vec<usize> = conds.iter().filter(|(_, c)| c.merges.is_empty()).map(|(k, _)| *k).collect();
    lone.sort_unstable();
    for key in lone {
        let (pred, parent) = (conds[&key].pred, conds[&key].parent);
        let mut siblings: Vec<usize> = conds
            .iter()
            .filter(|(k, c)| **k != key && !c.merges.is_empty() && c.pred == pred && c.parent == parent)
            .map(|(k, _)| *k)
            .collect();
        siblings.sort_unstable();
        if let Some(&into) = siblings.first() {
            let from = conds.remove(&key).expect("a conditional");
            let target = conds.get_mut(&into).expect("a conditional");
            target.switches.extend(from.switches);
            for (side, more) in target.sides.iter_mut().zip(from.sides) {
                side.extend(more);
            }
        }
    }
    let mut keys: Vec<usize> = conds.keys().copied().collect();
    keys.sort_by_key(|k| (std::cmp::Reverse(conds[k].depth), *k));
    for key in keys {
        let Some(cond) = conds.remove(&key) else { continue };
        let made = functionalize_cond(graph, &cond, &merge_inst, lib)?;
        // The If takes the place of the Switches (now removed) in the enclosing conditional.
        if let Some((parent, port)) = cond.parent {
            if let Some(p) = conds.get_mut(&parent) {
                for side in &mut p.sides {
                    side.retain(|id| !cond.switches.contains(id));
                }
                p.sides[port as usize].push(made);
            }
        }
    }
    Ok(())
}

/// Rewrites one conditional into an `If`; returns it.
fn functionalize_cond(
    graph: &mut Graph,
    cond: &Cond,
    merge_inst: &HashMap<NodeId, (usize, [u32; 2])>,
    lib: &mut Library,
) -> Result<NodeId, PassError> {
    let Some(&first_switch) = cond.switches.first() else {
        return Err(PassError::Internal {
            message: "a conditional without a `Switch`".into(),
            span: graph.node(cond.merges[0]).span,
        });
    };
    let Some(&first_merge) = cond.merges.first() else {
        return Err(PassError::UnmatchedSwitch {
            node: name(graph, first_switch),
            reason: "its outputs never meet again at a `Merge`".into(),
            span: graph.node(first_switch).span,
        });
    };
    // Members of this conditional, by side (merges and switches of inner
    // conditionals rewritten already are gone; merges of this one are not members).
    let mut side_of: HashMap<NodeId, u32> = HashMap::new();
    for (port, side) in cond.sides.iter().enumerate() {
        for &id in side {
            if graph.contains(id) && !cond.merges.contains(&id) {
                side_of.insert(id, port as u32);
            }
        }
    }
    let switch_index: HashMap<NodeId, usize> = cond.switches.iter().enumerate().map(|(k, &s)| (s, k)).collect();
    let mut all: Vec<NodeId> = cond.switches.iter().chain(&cond.merges).copied().collect();
    all.extend(side_of.keys().copied());
    all.sort_by_key(|&id| graph.node(id).seq);
    let (cluster, oc) = construct_tags(graph, &all, &format!("the conditional of `%{}`", name(graph, first_merge)))?;

    // Operands: the switched values, then values read from outside.
    let mut operands: Vec<Input> = Vec::new();
    let mut types: Vec<DType> = Vec::new();
    for &s in &cond.switches {
        let data = graph.data_inputs(s);
        types.push(
            graph
                .node(s)
                .attrs
                .get("T")
                .and_then(AttrValue::as_type)
                .ok_or_else(|| malformed_cond(graph, s, format!("`Switch` `%{}` has no dtype `T`", name(graph, s))))?,
        );
        operands.push(data[0]);
    }
    let mut captured: HashMap<(NodeId, u32), usize> = HashMap::new();
    let mut controls: Vec<Input> = Vec::new();
    let mut members: Vec<NodeId> = side_of.keys().copied().collect();
    members.sort_by_key(|&id| graph.node(id).seq);
    for &id in &members {
        for input in graph.inputs(id) {
            if switch_index.contains_key(&input.src) || side_of.contains_key(&input.src) {
                continue;
            }
            match input.output {
                Some(o) => {
                    if let std::collections::hash_map::Entry::Vacant(v) = captured.entry((input.src, o)) {
                        let dtype = output_dtype(graph, input.src, o).ok_or_else(|| {
                            malformed_cond(
                                graph,
                                id,
                                format!(
                                    "cannot tell the dtype of `%{}`, which a branch reads",
                                    graph.node(input.src).name
                                ),
                            )
                        })?;
                        v.insert(operands.len());
                        operands.push(input);
                        types.push(dtype);
                    }
                }
                None => {
                    if !controls.iter().any(|c| c.src == input.src) {
                        controls.push(input);
                    }
                }
            }
        }
    }

    let classify_for = |port: u32| {
        let (switch_index, side_of, captured) = (&switch_index, &side_of, &captured);
        move |graph: &Graph, node: NodeId, input: &Input| -> Result<Src, PassError> {
            if let Some(&k) = switch_index.get(&input.src) {
                return match input.output {
                    None => Ok(Src::Drop),
                    Some(o) if o == port => Ok(Src::Arg(k)),
                    Some(_) => Err(malformed_cond(
                        graph,
                        node,
                        format!("it reads the other side of `Switch` `%{}`", graph.node(input.src).name),
                    )),
                };
            }
            match side_of.get(&input.src) {
                Some(&p) if p == port => Ok(Src::Node(input.src, input.output)),
                Some(_) => Err(malformed_cond(
                    graph,
                    node,
                    format!("it reads `%{}` from the other branch", graph.node(input.src).name),
                )),
                None => Ok(match input.output {
                    Some(o) => Src::Arg(captured[&(input.src, o)]),
                    None => Src::Drop,
                }),
            }
        }
    };
    // Results: each Merge's value on that side, then the taken index of
    // each Merge whose index output is used.
    let mut out_types: Vec<DType> = Vec::new();
    for &m in &cond.merges {
        out_types.push(
            graph
                .node(m)
                .attrs
                .get("T")
                .and_then(AttrValue::as_type)
                .ok_or_else(|| malformed_cond(graph, m, format!("`Merge` `%{}` has no dtype `T`", name(graph, m))))?,
        );
    }
    let indexed: Vec<NodeId> = cond
        .merges
        .iter()
        .copied()
        .filter(|&m| graph.uses(m).iter().any(|(_, e)| matches!(e.kind, crate::ir::EdgeKind::Data { output: 1, .. })))
        .collect();
    let scope = name(graph, first_merge).rsplit_once('/').map_or(name(graph, first_merge), |s| s.0.to_string());
    let args: Vec<(String, DType, Span)> = operands
        .iter()
        .zip(&types)
        .enumerate()
        .map(|(k, (input, t))| {
            let base = match cond.switches.get(k) {
                Some(&s) => name(graph, s),
                None => format!("{}_{}", graph.node(input.src).name, input.output.unwrap_or(0)),
            };
            (base, *t, input.span)
        })
        .collect();
    let mut branch_names = Vec::new();
    for (port, suffix) in [(1u32, "then"), (0, "else")] {
        let fname = lib.fresh(&format!("{scope}_{suffix}"));
        let classify = classify_for(port);
        let mut rets = Vec::new();
        for (&m, &t) in cond.merges.iter().zip(&out_types) {
            let (_, ports) = merge_inst[&m];
            let j = ports.iter().position(|&p| p == port).expect("a merge has both sides");
            let input = graph.data_inputs(m)[j];
            rets.push((format!("{}/{suffix}", name(graph, m)), t, classify(graph, m, &input)?));
        }
        let nodes: Vec<NodeId> = members.iter().copied().filter(|id| side_of[id] == port).collect();
        let spec = FunctionSpec { name: fname.clone(), args: args.clone(), nodes, rets, classify: &classify };
        let mut f = build_function(graph, &spec)?;
        // The taken index of each indexed Merge is a constant of the branch.
        for (k, &m) in indexed.iter().enumerate() {
            let (_, ports) = merge_inst[&m];
            let j = ports.iter().position(|&p| p == port).expect("a merge has both sides") as i32;
            let value = crate::ir::types::TensorLit {
                dtype: DType::I32,
                shape: Vec::new(),
                data: crate::ir::types::TensorData::Int(vec![j]),
            };
            let c = f.add_node_unique(
                Node::op(format!("{}/index", name(graph, m)), "Const")
                    .with_attr("dtype", AttrValue::Type(DType::I32))
                    .with_attr("value", AttrValue::Tensor(Arc::new(value))),
            );
            let r = f.add_node_unique(
                Node::op(format!("{}/index/{suffix}", name(graph, m)), RETVAL_OP)
                    .with_attr("T", AttrValue::Type(DType::I32))
                    .with_attr("index", AttrValue::Int((cond.merges.len() + k) as i64)),
            );
            f.add_data_input(r, c, 0, Span::DETACHED);
        }
        functionalize_conds(&mut f, lib)?;
        lib.new.push(f);
        branch_names.push(fname);
    }
    let mut tout = out_types.clone();
    tout.extend(indexed.iter().map(|_| DType::I32));
    let pred = graph.data_inputs(first_switch)[1];
    let mut node = Node::op(graph.unique_name(&format!("{scope}/If")), "If")
        .with_attr("Tcond", AttrValue::Type(DType::Bool))
        .with_attr("Tin", type_list(&types))
        .with_attr("Tout", type_list(&tout))
        .with_attr("then_branch", func_attr(&branch_names[0]))
        .with_attr("else_branch", func_attr(&branch_names[1]))
        .with_span(graph.node(first_merge).span);
    if let Some(c) = &cluster {
        node = node.with_attr(TPU_REPLICATE, AttrValue::str(c.clone()));
    }
    if let Some(o) = &oc {
        node = node.with_attr(OUTSIDE_COMPILATION, AttrValue::str(o.clone()));
    }
    let seq = all.iter().map(|&id| graph.node(id).seq).min().unwrap_or(0);
    let made = graph
        .add_node(node)
        .map_err(|_| PassError::Internal { message: "a fresh name was taken".into(), span: Span::DETACHED })?;
    graph.node_mut(made).seq = seq;
    let mut inputs = vec![pred];
    inputs.extend(operands);
    inputs.extend(controls);
    graph.add_inputs(made, &inputs);
    for (i, (&m, &t)) in cond.merges.iter().zip(&out_types).enumerate() {
        let span = graph.node(m).span;
        let mut values = vec![(Input { src: made, output: Some(i as u32), span }, t)];
        if let Some(k) = indexed.iter().position(|&x| x == m) {
            let output = Some((cond.merges.len() + k) as u32);
            values.push((Input { src: made, output, span }, DType::I32));
        }
        become_forward(graph, m, &values);
    }
    // Control consumers of a Switch outside the branches wait for the If instead.
    for &s in &cond.switches {
        for (user, edge) in graph.uses(s) {
            if matches!(edge.kind, crate::ir::EdgeKind::Control { .. }) && !side_of.contains_key(&user) {
                graph.add_control_input(user, made, edge.span);
            }
        }
    }
    for id in cond.switches.iter().chain(side_of.keys()) {
        graph.remove_node(*id);
    }
    Ok(made)
}
