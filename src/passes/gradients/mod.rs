//! Expansion of `gradients(ys, xs, grad_ys)` calls into backward graphs.
//!
//! Each call is expanded as TensorFlow's `gradients` does it, then removed:
//! - the ops between xs and ys (reached forward from xs over data edges and backward from ys) are
//!   visited in reverse topological order, ready when every consumer on the path has been visited;
//!   the forward walk does not pass through non-differentiable ops (Shape, StopGradient, ...), which
//!   changes no gradient but keeps shape computations off the path;
//! - each op type has one gradient function (in `functions`); an x op whose inputs are off the path
//!   stops the walk; StopGradient and other non-differentiable ops pass no gradient on;
//! - several gradients reaching one tensor are summed with an `AddN` named `<scope>/AddN`;
//! - a missing grad_ys entry defaults to `Fill(Shape(y), 1)` (`<scope>/Shape`,
//!   `<scope>/grad_ys_<i>/Const`, `<scope>/grad_ys_<i>`);
//! - an x with no path to a y has no gradient: a warning, and if the call's output is used it is
//!   replaced by `ZerosLike(x)`;
//! - a call op (`PartitionedCall`, `If`, `Case`, `While` and their twins) is differentiated through
//!   the functions it runs ([`expand_module`] gives the module's functions; `control_flow` and
//!   `library` make the gradient functions, which are appended to the module); a `SymbolicGradient`
//!   gets the gradient function of its `f` the same way ([`expand_symbolic_gradients`]).
//!
//! Names: each call opens a name scope by the graph's unique-name rule (`gradients`, `gradients_1`,
//! ...; a scope is taken if a node is named like it or starts with it and `/`), and its uid is
//! `<scope>/uid`. The gradient ops of forward op `X` are named `<scope>/X_grad/<Op>`, made unique
//! with `_1`, `_2`, ... Calls are expanded in text order, except that a call is expanded after the
//! calls its ys or xs depend on (a gradient of a gradient).
//!
//! Placement: every emitted op sits in the call's region, carries the call's `_tpu_replicate` (if
//! any), the span of the call, and `_class = ["loc:@X"]` for the op `X` it is colocated with (or
//! `X`'s own `_class`, so gradients of gradients stay with the forward op). An op colocated with an
//! op carrying `_xla_outside_compilation` goes into a gradient cluster named by
//! [`colocation::gradient_cluster`] under the configured [`GradientClusterPolicy`]; a call inside
//! an outside_compilation block puts all its ops into that block's cluster.
//!
//! The pass is linear in the size of the graph per call: one forward and one backward walk, and a
//! bounded number of ops per visited op.

mod bn_grad_functions;
pub mod colocation;
mod complex_functions;
mod control_flow;
mod data_ops_functions;
mod dynamic_shape_functions;
mod emitter;
mod functions;
mod igamma_functions;
mod image_functions;
mod index_functions;
mod library;
mod linalg_functions;
mod linalg_solve_functions;
mod list_functions;
mod math_functions;
mod multi_output;
mod nn_functions;
mod product_functions;
mod ptn_functions;
mod quant_functions;
mod special_functions;
mod spmd_functions;
mod tensor_array_functions;
mod xla_ext_functions;
mod xla_ops_functions;

use std::collections::VecDeque;

use petgraph::visit::{EdgeRef, NodeIndexable};
use petgraph::Direction;
use rustc_hash::FxHashSet;

use self::colocation::{ColocationContext, OUTSIDE_COMPILATION_ATTR};
use self::emitter::Emitter;
use self::library::{Library, LibraryState};
use super::error::PassError;
use crate::ir::{AttrMap, AttrValue, DType, EdgeKind, Graph, Module, NodeId, NodeKind, RegionKind, ValueRef};

pub use self::emitter::Tensor;
pub use self::xla_ext_functions::expand_symbolic_gradients;

/// The attribute naming a node's replicate cluster.
pub const TPU_REPLICATE_ATTR: &str = "_tpu_replicate";

/// How gradient ops colocated with an outside-compilation op are clustered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GradientClusterPolicy {
    /// The seed's rule: `C.uid`, and `C.uid.uid2` for a gradient of a gradient.
    #[default]
    Nested,
    /// TensorFlow 2.x: the root of `C` plus `.uid`.
    Flat,
}

/// Settings of the gradients pass.
#[derive(Clone, Debug, Default)]
pub struct GradientsConfig {
    /// How colocated gradient ops are put into outside-compilation clusters.
    pub policy: GradientClusterPolicy,
}

/// Expands every gradients call of `graph`. Returns errors and warnings (see [`PassError`]).
///
/// A call that cannot be expanded (malformed operands) is left in place with an error; a call whose
/// expansion hits an op without a gradient function is expanded with no gradient through that op.
pub fn expand_gradients(graph: &mut Graph, config: &GradientsConfig) -> Vec<PassError> {
    let mut state = LibraryState::new(&[]);
    let mut lib = Library { graphs: &[], state: &mut state, config: config.clone() };
    expand_gradients_with(graph, config, &mut lib)
}

/// Expands every gradients call of every graph of `module`, differentiating through the functions
/// that call ops run; the gradient functions this makes are appended to the module. Returns the
/// errors and warnings with the name of the graph each was found in.
pub fn expand_module(module: &mut Module, config: &GradientsConfig) -> Vec<(String, PassError)> {
    // Each `SymbolicGradient` gets its gradient function first.
    let mut found = expand_symbolic_gradients(module, config);
    let mut state = LibraryState::new(&module.graphs);
    for i in 0..module.graphs.len() {
        if !module.graphs[i].node_ids().any(|id| matches!(module.graphs[i].node(id).kind, NodeKind::Gradients { .. })) {
            continue;
        }
        // The graph is taken out while its calls expand, so that the library can read the others.
        let mut graph = std::mem::take(&mut module.graphs[i]);
        let mut lib = Library { graphs: &module.graphs, state: &mut state, config: config.clone() };
        let errors = expand_gradients_with(&mut graph, config, &mut lib);
        found.extend(errors.into_iter().map(|e| (graph.name.clone(), e)));
        module.graphs[i] = graph;
    }
    module.graphs.append(&mut state.added);
    found
}

/// [`expand_gradients`] with the functions of `lib` to differentiate call ops through.
fn expand_gradients_with(graph: &mut Graph, config: &GradientsConfig, lib: &mut Library<'_>) -> Vec<PassError> {
    let mut errors = Vec::new();
    let mut calls: Vec<NodeId> =
        graph.node_ids().filter(|&id| matches!(graph.node(id).kind, NodeKind::Gradients { .. })).collect();
    if calls.is_empty() {
        return errors;
    }
    calls.sort_by_key(|&id| graph.node(id).seq);
    let mut scopes = ScopeNames::of(graph, SCOPE_BASE);
    let mut done: FxHashSet<NodeId> = FxHashSet::default();
    for &first in &calls {
        // Depth-first over the calls a call depends on, without recursion.
        let mut stack = vec![first];
        while let Some(&call) = stack.last() {
            if done.contains(&call) {
                stack.pop();
                continue;
            }
            let deps = pending_calls_upstream(graph, call);
            let unvisited: Vec<NodeId> = deps.into_iter().filter(|d| !stack.contains(d)).collect();
            if unvisited.is_empty() {
                stack.pop();
                done.insert(call);
                expand_call(graph, config, lib, call, &mut scopes, &mut errors);
            } else {
                stack.extend(unvisited.into_iter().rev());
            }
        }
    }
    errors
}

/// The unexpanded gradients calls that the operands of `call` depend on, in text order.
fn pending_calls_upstream(graph: &Graph, call: NodeId) -> Vec<NodeId> {
    let pg = graph.petgraph();
    let mut seen = vec![false; pg.node_bound()];
    let mut stack: Vec<NodeId> = graph.data_inputs(call).iter().map(|i| i.src).collect();
    let mut found = Vec::new();
    while let Some(n) = stack.pop() {
        if std::mem::replace(&mut seen[n.0.index()], true) {
            continue;
        }
        if n != call && matches!(graph.node(n).kind, NodeKind::Gradients { .. }) {
            found.push(n);
        }
        stack.extend(pg.edges_directed(n.0, Direction::Incoming).map(|e| NodeId(e.source())));
    }
    found.sort_by_key(|&id| graph.node(id).seq);
    found
}

/// The value of attribute `key` of an op, by a linear scan: an op has a handful of attributes, and
/// comparing keys for equality rejects most by their length, where the binary search of
/// [`AttrMap::get`] orders strings byte by byte. Used on every op the walk visits.
fn op_attr<'a>(attrs: &'a AttrMap, key: &str) -> Option<&'a AttrValue> {
    attrs.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
}

/// The name scope of the first call; later ones are `gradients_1`, `gradients_2`, ...
const SCOPE_BASE: &str = "gradients";

/// A family's gradient functions: `Err(None)` when the op type is not the family's.
type FamilyGradient = fn(
    &mut emitter::Emitter<'_>,
    NodeId,
    &str,
    &[emitter::Tensor],
    emitter::Tensor,
) -> Result<Vec<Option<emitter::Tensor>>, functions::Unsupported>;

/// The op families of TensorFlow's XLA op set beyond the training-step ones, asked in turn after
/// them (one file each).
const OP_FAMILIES: &[FamilyGradient] = &[
    complex_functions::gradient,
    data_ops_functions::gradient,
    igamma_functions::gradient,
    linalg_functions::gradient,
    linalg_solve_functions::gradient,
    ptn_functions::gradient,
    quant_functions::gradient,
    special_functions::gradient,
    spmd_functions::gradient,
    tensor_array_functions::gradient,
    xla_ops_functions::gradient,
];

/// The gradient of `op` from the first family that knows its type; `Err(None)` when none does.
fn op_families(
    e: &mut emitter::Emitter<'_>,
    op: NodeId,
    op_type: &str,
    inputs: &[emitter::Tensor],
    g: emitter::Tensor,
) -> Result<Vec<Option<emitter::Tensor>>, functions::Unsupported> {
    for family in OP_FAMILIES {
        match family(e, op, op_type, inputs, g) {
            Err(None) => continue,
            other => return other,
        }
    }
    Err(None)
}

/// The name scopes in use that a call's scope could collide with.
///
/// A scope is in use if a node is named like it or under it (`scope/...`). Call scopes are `base`
/// or `base_<i>`, without `/`, so only the first `/`-separated component of a node name can
/// collide with one, and only if it starts with `base`: those components are all that is kept.
struct ScopeNames {
    taken: FxHashSet<String>,
}

impl ScopeNames {
    fn of(graph: &Graph, base: &str) -> ScopeNames {
        let mut taken = FxHashSet::default();
        for id in graph.node_ids() {
            let name: &str = &graph.node(id).name;
            let first = name.split('/').next().unwrap_or(name);
            if first.starts_with(base) && !taken.contains(first) {
                taken.insert(first.to_string());
            }
        }
        ScopeNames { taken }
    }

    /// Takes the first free scope of `base`, `base_1`, `base_2`, ...
    fn take(&mut self, base: &str) -> String {
        let scope = if self.taken.contains(base) {
            (1..).map(|i| format!("{base}_{i}")).find(|c| !self.taken.contains(c)).unwrap_or_default()
        } else {
            base.to_string()
        };
        self.taken.insert(scope.clone());
        scope
    }
}

/// The operands of a gradients call.
struct Call {
    id: NodeId,
    name: String,
    ys: Vec<Tensor>,
    xs: Vec<(Tensor, crate::syntax::Span)>,
    grad_ys: Option<Vec<Tensor>>,
}

fn read_call(graph: &Graph, id: NodeId) -> Result<Call, PassError> {
    let node = graph.node(id);
    let name = node.name.to_string();
    let NodeKind::Gradients { num_ys, num_xs, has_grad_ys } = node.kind else {
        return Err(PassError::Internal { message: format!("`%{name}` is not a gradients call"), span: node.span });
    };
    let (num_ys, num_xs) = (num_ys as usize, num_xs as usize);
    let inputs = graph.data_inputs(id);
    let expected = num_ys + num_xs + if has_grad_ys { num_ys } else { 0 };
    if num_ys == 0 || num_xs == 0 || inputs.len() != expected {
        return Err(PassError::MalformedGradientsCall {
            call: name,
            reason: format!("expected {expected} tensor operands, found {}", inputs.len()),
            span: node.span,
        });
    }
    let tensor = |i: &crate::ir::Input| Tensor { node: i.src, output: i.output.unwrap_or(0) };
    Ok(Call {
        id,
        ys: inputs[..num_ys].iter().map(tensor).collect(),
        xs: inputs[num_ys..num_ys + num_xs].iter().map(|i| (tensor(i), i.span)).collect(),
        grad_ys: has_grad_ys.then(|| inputs[num_ys + num_xs..].iter().map(tensor).collect()),
        name,
    })
}

/// The gradients received by the outputs of the forward ops, in arrival order: one linked list
/// per op over a flat entry vector, so that receiving a gradient allocates nothing per op.
struct Received {
    /// First and last entry of each op, by node index (`NONE` if it received nothing).
    head: Vec<u32>,
    tail: Vec<u32>,
    entries: Vec<ReceivedEntry>,
}

struct ReceivedEntry {
    output: u32,
    grad: Tensor,
    next: u32,
}

const NONE: u32 = u32::MAX;

impl Received {
    /// Room for ops with node index below `bound`: every op that receives a gradient existed
    /// before the call.
    fn new(bound: usize) -> Received {
        Received { head: vec![NONE; bound], tail: vec![NONE; bound], entries: Vec::with_capacity(bound) }
    }

    fn push(&mut self, op: NodeId, output: u32, grad: Tensor) {
        let i = self.entries.len() as u32;
        self.entries.push(ReceivedEntry { output, grad, next: NONE });
        let n = op.0.index();
        match self.tail[n] {
            NONE => self.head[n] = i,
            last => self.entries[last as usize].next = i,
        }
        self.tail[n] = i;
    }

    /// Forgets what `op` received.
    fn clear(&mut self, op: NodeId) {
        self.head[op.0.index()] = NONE;
        self.tail[op.0.index()] = NONE;
    }

    /// Fills `lists[k]` with the gradients output `k` of `op` received, in arrival order, and
    /// returns the number of outputs up to the last one that received any.
    fn gather(&self, op: NodeId, lists: &mut Vec<Vec<Tensor>>) -> usize {
        lists.iter_mut().for_each(Vec::clear);
        let mut outputs = 0;
        let mut at = self.head[op.0.index()];
        while at != NONE {
            let entry = &self.entries[at as usize];
            let k = entry.output as usize;
            if lists.len() <= k {
                lists.resize_with(k + 1, Vec::new);
            }
            lists[k].push(entry.grad);
            outputs = outputs.max(k + 1);
            at = entry.next;
        }
        outputs
    }
}

fn expand_call(
    graph: &mut Graph,
    config: &GradientsConfig,
    lib: &mut Library<'_>,
    call_id: NodeId,
    scopes: &mut ScopeNames,
    errors: &mut Vec<PassError>,
) {
    let call = match read_call(graph, call_id) {
        Ok(call) => call,
        Err(e) => {
            errors.push(e);
            return;
        }
    };
    let call_node = graph.node(call_id).clone();
    let scope = scopes.take(SCOPE_BASE);
    let uid = format!("{scope}/uid");
    let mut ctx = ColocationContext::new(config.policy);
    if let Some(cluster) = call_node.attrs.get_str(OUTSIDE_COMPILATION_ATTR) {
        ctx.enter_outside_compilation(cluster);
    }

    // Ops reached from xs, then the ops between: reached and reaching ys.
    let bound = graph.petgraph().node_bound();
    let mut reached = vec![false; bound];
    let mut stack: Vec<NodeId> = call.xs.iter().map(|(x, _)| x.node).collect();
    let is_x: FxHashSet<NodeId> = call.xs.iter().map(|(x, _)| x.node).collect();
    while let Some(n) = stack.pop() {
        // No gradient flows through a non-differentiable op (Shape, StopGradient, ...), so it does
        // not count as reached and the walk does not continue through it.
        if reached[n.0.index()] || (!is_x.contains(&n) && functions::is_not_differentiable(&graph.node(n).op)) {
            continue;
        }
        reached[n.0.index()] = true;
        for e in graph.petgraph().edges_directed(n.0, Direction::Outgoing) {
            if matches!(e.weight().kind, EdgeKind::Data { .. }) && e.target() != call_id.0 {
                stack.push(NodeId(e.target()));
            }
        }
    }
    let mut between = vec![false; bound];
    let mut between_list = Vec::new();
    let mut stack: Vec<NodeId> = call.ys.iter().map(|y| y.node).collect();
    while let Some(n) = stack.pop() {
        let i = n.0.index();
        if !reached[i] || between[i] {
            continue;
        }
        between[i] = true;
        between_list.push(n);
        for e in graph.petgraph().edges_directed(n.0, Direction::Incoming) {
            if matches!(e.weight().kind, EdgeKind::Data { .. }) {
                stack.push(NodeId(e.source()));
            }
        }
    }
    drop(reached);
    let mut pending = vec![0u32; bound];
    for &op in &between_list {
        for e in graph.petgraph().edges_directed(op.0, Direction::Incoming) {
            if matches!(e.weight().kind, EdgeKind::Data { .. }) && between[e.source().index()] {
                pending[e.source().index()] += 1;
            }
        }
    }
    // An x op none of whose inputs is on the path stops the walk.
    let stop: FxHashSet<NodeId> = call
        .xs
        .iter()
        .map(|(x, _)| x.node)
        .filter(|&op| {
            graph
                .petgraph()
                .edges_directed(op.0, Direction::Incoming)
                .filter(|e| matches!(e.weight().kind, EdgeKind::Data { .. }))
                .all(|e| pending[e.source().index()] == 0)
        })
        .collect();

    // About one or two gradient ops per op on the path (more for broadcasting binary ops, none for
    // reads), each with about two inputs. Reserving once for the upper end saves regrowing the
    // node and edge vectors and rehashing the name table, each a copy of the whole graph's worth;
    // the spare capacity of the vectors is address space that is never touched.
    graph.reserve(2 * between_list.len(), 4 * between_list.len());
    let mut e = Emitter::new(graph, ctx, &call_node, scope.clone(), uid.clone());
    let mut received = Received::new(bound);
    for (i, &y) in call.ys.iter().enumerate() {
        let grad = match &call.grad_ys {
            Some(grad_ys) => grad_ys[i],
            None => default_grad_y(&mut e, y, i),
        };
        received.push(y.node, y.output, grad);
    }

    let mut queue: VecDeque<NodeId> = VecDeque::new();
    let mut queued = vec![false; bound];
    for y in &call.ys {
        let i = y.node.0.index();
        if between[i] && pending[i] == 0 && !queued[i] {
            queued[i] = true;
            queue.push_back(y.node);
        }
    }
    let mut inputs: Vec<Tensor> = Vec::new();
    let mut out_grads: Vec<Option<Tensor>> = Vec::new();
    let mut lists: Vec<Vec<Tensor>> = Vec::new();
    while let Some(op) = queue.pop_front() {
        e.enter_colocation(op);
        out_grads.clear();
        let outputs = received.gather(op, &mut lists);
        out_grads.extend(lists[..outputs].iter().map(|list| e.aggregate(list)));
        // The sums replace the lists: an x's gradient is read again after the walk.
        received.clear(op);
        for (k, sum) in out_grads.iter().enumerate() {
            if let Some(sum) = *sum {
                received.push(op, k as u32, sum);
            }
        }
        data_inputs_into(e.graph, op, &mut inputs);
        if out_grads.iter().any(Option::is_some) && !stop.contains(&op) {
            let in_grads = if crate::ir::functions::call_kind(&e.graph.node(op).op).is_some() {
                e.in_op_scope(op, |e| control_flow::gradient(e, lib, op, &inputs, &out_grads))
            } else {
                e.in_op_scope(op, |e| functions::gradient(e, op, &inputs, &out_grads))
            };
            match in_grads {
                Ok(in_grads) => {
                    for (input, grad) in inputs.iter().zip(in_grads) {
                        if let Some(grad) = grad {
                            received.push(input.node, input.output, grad);
                        }
                    }
                }
                Err(reason) => {
                    let node = e.graph.node(op);
                    e.errors.push(PassError::NoGradient {
                        op: node.name.to_string(),
                        op_type: node.op.to_string(),
                        reason: reason.map(|r| format!(": {r}")).unwrap_or_default(),
                        span: node.span,
                        call: call_node.span,
                    });
                }
            }
        }
        e.exit_colocation(op);
        for input in &inputs {
            let i = input.node.0.index();
            if i < bound && between[i] {
                pending[i] = pending[i].saturating_sub(1);
                if pending[i] == 0 && !queued[i] {
                    queued[i] = true;
                    queue.push_back(input.node);
                }
            }
        }
    }

    // The gradient of each x, then rewire the call's uses.
    let mut results: Vec<Option<Tensor>> = Vec::with_capacity(call.xs.len());
    for &(x, _) in &call.xs {
        let outputs = received.gather(x.node, &mut lists);
        let list = lists[..outputs].get(x.output as usize);
        let grad = match list {
            Some(list) if list.len() > 1 => {
                e.enter_colocation(x.node);
                let sum = e.aggregate(list);
                e.exit_colocation(x.node);
                sum
            }
            Some(list) => list.first().copied(),
            None => None,
        };
        results.push(grad);
    }
    // Outputs the region returns keep the user's name (`%dy` → `dy:0`):
    // they are read through an `Identity` (`IdentityN` for several xs)
    // that takes the call's name once the call is gone.
    let named: Vec<bool> = (0..call.xs.len()).map(|i| returned(e.graph, call_id, Some(i as u32))).collect();
    for (i, &(x, x_span)) in call.xs.iter().enumerate() {
        let grad = results[i];
        let used = e
            .graph
            .uses(call_id)
            .iter()
            .any(|(_, edge)| matches!(edge.kind, EdgeKind::Data { output, .. } if output == i as u32))
            || returned(e.graph, call_id, Some(i as u32));
        let grad = match grad {
            Some(grad) => grad,
            None => {
                let zeros = used.then(|| e.zeros_like_for_unconnected(x));
                let what = match zeros {
                    Some(z) => format!(
                        "uses of `%{}:{i}` now read `%{}`, zeros shaped like the x",
                        call.name,
                        e.graph.node(z.node).name
                    ),
                    None => format!("output {i} of `%{}` is unused, so nothing replaces it", call.name),
                };
                let x_ref = ValueRef { node: x.node, output: Some(x.output), span: x_span };
                let x_name = e.graph.value_name(&x_ref);
                e.errors.push(PassError::UnconnectedGradient {
                    call: call.name.clone(),
                    x: x_name,
                    what,
                    span: x_span,
                });
                match zeros {
                    Some(z) => {
                        results[i] = Some(z);
                        z
                    }
                    None => continue,
                }
            }
        };
        e.graph.replace_uses(call_id, i as u32, grad.node, grad.output);
        if !named[i] {
            replace_returned(e.graph, call_id, i as u32, grad);
        }
    }
    let alias = name_returned(&mut e, call_id, &named, &results);
    let mut errors_of_call = e.finish();
    // Control uses of the call now wait for every gradient it produced.
    let control_users: Vec<NodeId> = graph
        .uses(call_id)
        .into_iter()
        .filter(|(_, edge)| matches!(edge.kind, EdgeKind::Control { .. }))
        .map(|(user, _)| user)
        .collect();
    if !control_users.is_empty() {
        let mut producers: Vec<NodeId> = results.iter().flatten().map(|t| t.node).collect();
        producers.sort();
        producers.dedup();
        for user in control_users {
            for &p in &producers {
                graph.add_control_input(user, p, call_node.span);
            }
        }
    }
    // A region returning the call for control returns the gradients' producers instead.
    if returned(graph, call_id, None) {
        let mut producers: Vec<NodeId> = results.iter().flatten().map(|t| t.node).collect();
        producers.sort();
        producers.dedup();
        for region in &mut graph.regions {
            if let RegionKind::Replicate { outputs, .. } = &mut region.kind {
                let Some(pos) = outputs.iter().position(|v| v.node == call_id && v.output.is_none()) else {
                    continue;
                };
                let span = outputs[pos].span;
                outputs.remove(pos);
                outputs.extend(producers.iter().map(|&node| ValueRef { node, output: None, span }));
            }
        }
    }
    graph.remove_node(call.id);
    if let Some(alias) = alias {
        // The call's name is free now; a clash is impossible, as the call held it.
        let _ = graph.rename(alias, &call.name);
    }
    errors.append(&mut errors_of_call);
}

/// Points the returned outputs of the call (`named[i]`) at one new
/// `Identity`/`IdentityN` of the gradients, whose id is returned to be
/// given the call's name; `None` (and the gradients returned directly)
/// when none is returned or some gradient or dtype is missing.
fn name_returned(e: &mut Emitter<'_>, call_id: NodeId, named: &[bool], results: &[Option<Tensor>]) -> Option<NodeId> {
    if !named.iter().any(|&n| n) {
        return None;
    }
    let grads: Option<Vec<Tensor>> = results.iter().copied().collect();
    let dtypes: Option<Vec<DType>> = grads.as_ref().and_then(|g| g.iter().map(|&t| e.dtype_of(t)).collect());
    let (Some(grads), Some(dtypes)) = (grads, dtypes) else {
        // The old way: the region returns the gradients themselves.
        for (i, grad) in results.iter().enumerate() {
            if let (true, Some(grad)) = (named[i], grad) {
                replace_returned(e.graph, call_id, i as u32, *grad);
            }
        }
        return None;
    };
    let name = e.fresh_name("returned");
    let alias = if let [dtype] = dtypes[..] {
        e.emit_named(name, "Identity", &grads, [("T", AttrValue::Type(dtype))])
    } else {
        let list = AttrValue::List(dtypes.into_iter().map(AttrValue::Type).collect());
        e.emit_named(name, "IdentityN", &grads, [("T", list)])
    };
    for (i, _) in named.iter().enumerate().filter(|(_, &n)| n) {
        replace_returned(e.graph, call_id, i as u32, Tensor { node: alias.node, output: i as u32 });
    }
    Some(alias.node)
}

/// Fills `out` with the data inputs of `op`, by slot.
fn data_inputs_into(graph: &Graph, op: NodeId, out: &mut Vec<Tensor>) {
    out.clear();
    // Data slots are `0..n` without gaps (a graph invariant), so each edge has its place.
    for e in graph.petgraph().edges_directed(op.0, Direction::Incoming) {
        if let EdgeKind::Data { output, slot } = e.weight().kind {
            let slot = slot as usize;
            if out.len() <= slot {
                out.resize(slot + 1, Tensor::of(op));
            }
            out[slot] = Tensor { node: NodeId(e.source()), output };
        }
    }
}

/// True if a replicate region returns output `output` of `node` (`None`: returns it for control).
fn returned(graph: &Graph, node: NodeId, output: Option<u32>) -> bool {
    graph.regions.iter().any(|r| match &r.kind {
        RegionKind::Replicate { outputs, .. } => outputs.iter().any(|v| v.node == node && v.output == output),
        RegionKind::OutsideCompilation => false,
    })
}

/// Points the region outputs that return `node:output` at `to`.
fn replace_returned(graph: &mut Graph, node: NodeId, output: u32, to: Tensor) {
    for region in &mut graph.regions {
        if let RegionKind::Replicate { outputs, .. } = &mut region.kind {
            for v in outputs.iter_mut().filter(|v| v.node == node && v.output == Some(output)) {
                v.node = to.node;
                v.output = Some(to.output);
            }
        }
    }
}

/// `Fill(Shape(y), 1)` colocated with y's op: TensorFlow's default grad_ys.
fn default_grad_y(e: &mut Emitter<'_>, y: Tensor, index: usize) -> Tensor {
    e.enter_colocation(y.node);
    let dtype = e.dtype_of(y);
    let shape = e.shape("Shape", y);
    let fill_name = e.fresh_name(&format!("grad_ys_{index}"));
    let one = e.scalar_const_named(&format!("{fill_name}/Const"), dtype, 1.0);
    let fill = e.emit_named(fill_name, "Fill", &[shape, one], e.t_attr(dtype));
    e.exit_colocation(y.node);
    fill
}

/// True when op type `op_type` has a gradient function here, or is one
/// through which no gradient flows (`functions::is_not_differentiable`).
///
/// Found by expanding `gradients` over one op of that type fed by an f32
/// placeholder (three operands, output 0 differentiated): only a type
/// without a gradient function reports [`PassError::NoGradient`] with no
/// reason; a type whose function refuses this particular use still has
/// one. Cost: one parse and one expansion of a four-line graph.
pub fn has_gradient_function(op_type: &str) -> bool {
    if functions::is_not_differentiable(op_type) {
        return true;
    }
    let source = format!(
        "graph @main {{\n  %a = Placeholder() {{dtype = f32}}\n  %y = {op_type}(%a, %a, %a) {{T = f32}}\n  \
         %g = gradients(ys = [%y], xs = [%a])\n}}\n"
    );
    let Ok((mut module, _)) = crate::ir::parse_module(source.as_bytes()) else { return false };
    let Some(graph) = module.graphs.first_mut() else { return false };
    !expand_gradients(graph, &GradientsConfig::default())
        .iter()
        .any(|e| matches!(e, PassError::NoGradient { op_type: t, reason, .. } if t == op_type && reason.is_empty()))
}
