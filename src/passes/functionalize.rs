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

mod conds;
mod loops;

use conds::functionalize_conds;
use loops::functionalize_loops;

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
    functionalize_conds(graph, lib)?;
    // What is left belongs to no loop or conditional (an `Exit` or `NextIteration` without a frame).
    match graph.nodes_in_order().into_iter().find(|&id| TF1_CONTROL_FLOW.contains(&op(graph, id))) {
        None => Ok(()),
        Some(stray) => {
            let node = graph.node(stray);
            Err(PassError::MalformedLoop {
                frame: "a loop".into(),
                reason: format!("`{}` `%{}` belongs to no loop frame", node.op, node.name),
                span: node.span,
            })
        }
    }
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
            frame: "a loop".into(),
            reason: format!(
                "`%{}` is on a cycle that no `NextIteration` -> `Merge` back edge closes",
                graph.node(stuck).name
            ),
            span: graph.node(stuck).span,
        });
    }
    Ok(order)
}

/// The cluster and outside-compilation tags of a construct's new node.
#[derive(Clone, Debug, Default)]
struct Tags {
    cluster: Option<Arc<str>>,
    outside: Option<Arc<str>>,
}

impl Tags {
    /// `node` with the tags.
    fn apply(&self, mut node: Node) -> Node {
        if let Some(c) = &self.cluster {
            node = node.with_attr(TPU_REPLICATE, AttrValue::str(c.clone()));
        }
        if let Some(o) = &self.outside {
            node = node.with_attr(OUTSIDE_COMPILATION, AttrValue::str(o.clone()));
        }
        node
    }
}

/// The tags that a construct's new node carries: all of `nodes` must agree
/// on `_tpu_replicate`; an `_xla_outside_compilation` tag moves to the new
/// node only when all share it.
fn construct_tags(graph: &Graph, nodes: &[NodeId], what: &str) -> Result<Tags, PassError> {
    let tag = |id: NodeId, key: &str| graph.node(id).attrs.get_str(key).map(Arc::<str>::from);
    let Some(&first) = nodes.first() else { return Ok(Tags::default()) };
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
    Ok(Tags { cluster, outside: oc })
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
        frame: format!("loop frame `{frame}`"),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::parse_module;

    fn parse(text: &str) -> Module {
        let (module, errors) = parse_module(text.as_bytes()).expect("parses");
        assert!(errors.is_empty(), "{errors:?}");
        module
    }

    /// `i = 0; while i < 3: i += 1`, with `%k` a loop invariant and a control input on the Enter.
    const LOOP: &str = r#"graph @main {
  %zero = Const() {dtype = i32, value = tensor(i32, []) [0], _tpu_replicate = "c"}
  %k = Const() {dtype = i32, value = tensor(i32, []) [3], _tpu_replicate = "c"}
  %go = NoOp() {_tpu_replicate = "c"}
  %e = Enter(%zero, ^%go) {T = i32, frame_name = "w/while_context", is_constant = false, _tpu_replicate = "c"}
  %ek = Enter(%k) {T = i32, frame_name = "w/while_context", is_constant = true, _tpu_replicate = "c"}
  %m = Merge(%e, %n) {T = i32, N = 2, _tpu_replicate = "c"}
  %less = Less(%m, %ek) {T = i32, _tpu_replicate = "c"}
  %c = LoopCond(%less) {_tpu_replicate = "c"}
  %s = Switch(%m, %c) {T = i32, _tpu_replicate = "c"}
  %one = Const(^%s) {dtype = i32, value = tensor(i32, []) [1], _tpu_replicate = "c"}
  %add = AddV2(%s:1, %one) {T = i32, _tpu_replicate = "c"}
  %n = NextIteration(%add) {T = i32, _tpu_replicate = "c"}
  %out = Exit(%s) {T = i32, _tpu_replicate = "c"}
  %twice = Mul(%out, %out) {T = i32, _tpu_replicate = "c"}
}
"#;

    #[test]
    fn a_loop_becomes_a_while_with_its_invariant_carried_and_its_control_input_kept() {
        let mut module = parse(LOOP);
        assert!(module_has_tf1_control_flow(&module));
        assert!(functionalize(&mut module).is_empty());
        let text = crate::print_module(&module);
        let main = module.graph("main").unwrap();
        assert!(!has_tf1_control_flow(main), "{text}");
        let w = main.find("w/While").expect("the While");
        let inputs: Vec<String> = main.inputs(w).iter().map(|i| main.node(i.src).name.to_string()).collect();
        assert_eq!(inputs, ["zero", "k", "go"], "{text}");
        assert_eq!(main.node(w).attrs.get_str(TPU_REPLICATE), Some("c"));
        let out = main.node(main.find("out").unwrap());
        assert_eq!(&*out.op, "Identity");
        let body = module.graph("w_body").expect("the body");
        let cond = module.graph("w_cond").expect("the cond");
        // The body returns the invariant unchanged; the condition reads it as argument 1.
        let sig = crate::ir::functions::signature(body).unwrap();
        assert_eq!((sig.args.len(), sig.rets.len()), (2, 2));
        assert_eq!(crate::ir::functions::signature(cond).unwrap().rets, [Some(DType::Bool)]);
        assert!(body.node_ids().all(|id| body.node(id).attrs.get_str(TPU_REPLICATE).is_none()));
        assert!(crate::ir::verify::verify(&module).is_empty(), "{text}");
    }

    #[test]
    fn a_graph_without_tf1_control_flow_is_left_alone() {
        let text = "graph @main {\n  %x = Const() {dtype = f32, value = tensor(f32, []) [1.0]}\n}\n";
        let mut module = parse(text);
        assert!(!module_has_tf1_control_flow(&module));
        assert!(functionalize(&mut module).is_empty());
        assert_eq!(crate::print_module(&module), text);
    }

    #[test]
    fn a_failed_graph_is_left_as_it_was_and_the_others_are_rewritten() {
        let broken =
            LOOP.replace("graph @main", "graph @broken").replace("%c = LoopCond(%less)", "%c = Identity(%less)");
        let mut module = parse(&format!("{LOOP}\n{broken}"));
        let before = crate::print_module(&module.graphs[1..2].iter().cloned().fold(Module::default(), |mut m, g| {
            m.graphs.push(g);
            m
        }));
        let errors = functionalize(&mut module);
        assert!(matches!(errors.as_slice(), [PassError::MalformedLoop { .. }]), "{errors:?}");
        assert!(!has_tf1_control_flow(&module.graphs[0]));
        assert!(has_tf1_control_flow(&module.graphs[1]));
        let after = Module { header: Vec::new(), graphs: vec![module.graphs[1].clone()] };
        assert_eq!(crate::print_module(&after), before);
        // Only the good graph's two functions were added.
        assert_eq!(module.graphs.len(), 4);
    }

    #[test]
    fn function_names_are_fresh_in_the_module() {
        let mut lib = Library { taken: ["w_body".to_string()].into_iter().collect(), new: Vec::new() };
        assert_eq!(lib.fresh("w/body"), "w_body_1");
        assert_eq!(lib.fresh("w/body"), "w_body_2");
        assert_eq!(lib.fresh("c:0/then"), "c_0_then");
    }

    #[test]
    fn a_cond_whose_merge_index_is_used_keeps_both_outputs() {
        let mut module = parse(
            r#"graph @main {
  %x = Const() {dtype = f32, value = tensor(f32, []) [2.0]}
  %p = Const() {dtype = bool, value = tensor(bool, []) [true]}
  %s = Switch(%x, %p) {T = f32}
  %f = Neg(%s) {T = f32}
  %t = Exp(%s:1) {T = f32}
  %m = Merge(%f, %t) {T = f32, N = 2}
  %i = Identity(%m:1) {T = i32}
}
"#,
        );
        assert!(functionalize(&mut module).is_empty());
        let main = module.graph("main").unwrap();
        let m = main.node(main.find("m").unwrap());
        assert_eq!(&*m.op, "IdentityN");
        let cond = main.node(main.find("m/If").expect("the If"));
        assert_eq!(cond.attrs.get("Tout"), Some(&type_list(&[DType::F32, DType::I32])));
        assert!(crate::ir::verify::verify(&module).is_empty());
    }
}
