//! TensorLists on the device, as TensorFlow's XLA bridge (tf2xla) lowers
//! them: a list of capacity N whose elements have the fully known shape E
//! is a buffer `tensor<N x E>` and an `i32` size. `TensorListPushBack`
//! writes at `size` and adds one, `TensorListPopBack` subtracts one and
//! reads there; the value crosses `While`/`If`/`Case`/calls as those two
//! SSA values (a composite, see `text`).
//!
//! The capacity and the element shape are compile-time facts. A list's
//! capacity is its `max_num_elements` (`EmptyTensorList`), else its length
//! when made (`TensorListReserve`, `TensorListFromTensor`). A list made
//! without a bound (`max_num_elements = -1`, as `tf.while_loop`'s
//! gradient accumulators are when `maximum_iterations` is not given) gets
//! the largest length the trace sees it reach, provided that length cannot
//! depend on run-time values: every loop whose body may push to it must
//! have a trip count fixed at compile time (its predicate depends only on
//! loop values that enter as constants and that the body computes from
//! such values alone, see [`static_trip_count`]), and it must not grow in
//! an `If`/`Case`. A loop that only reads or pops it (a gradient loop)
//! may run any number of times. An
//! element shape with unknown dimensions is taken from the elements
//! pushed or set. Anything else is refused with a diagnostic that says
//! what to change in the TensorFlow program.
//! Cost: one pass over the program (each list value remembers the ops
//! that made it; a loop's trip count is analysed once, linear in its
//! cond and body), plus one more host trace when a list's capacity or
//! element shape is inferred.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::calls::Library;
use super::text::Ty;
use super::trace::Traced;
use crate::exec::variant::{TensorList, Variant};
use crate::exec::Tensor;
use crate::ir::functions::{call_kind, CallKind, ARG_OP, RETVAL_OP};
use crate::ir::{AttrValue, DType, Graph, NodeId};
use crate::xla::error::XlaError;

/// Ops that make a new list.
const MAKERS: &[&str] =
    &["EmptyTensorList", "TensorArrayV3", "TensorListFromTensor", "TensorListReserve", "TensorListSplit"];

/// The output of maker op `op` that is its list (a TensorArray's flow).
fn made_output(op: &str) -> u32 {
    u32::from(op == "TensorArrayV3")
}

/// A list's element shape when every dimension is known: the declared
/// one, else that of an element it holds.
pub(crate) fn element_shape(l: &TensorList) -> Option<Vec<usize>> {
    if let Some(dims) = l.element_shape.as_ref().filter(|d| d.iter().all(|&x| x >= 0)) {
        return Some(dims.iter().map(|&d| d as usize).collect());
    }
    l.items.iter().flatten().next().map(|t| t.shape().to_vec())
}

/// The device type of a list: (buffer `tensor<N x E>`, size `tensor<i32>`).
pub(crate) fn list_type(l: &TensorList) -> Ty {
    let capacity = l.max_num_elements.unwrap_or(l.items.len()).max(l.items.len());
    let mut shape = vec![capacity];
    shape.extend(element_shape(l).unwrap_or_default());
    Ty::composite(vec![Ty::new(l.element_dtype, shape), Ty::scalar(DType::I32)])
}

/// The list `t` holds, if it is one.
fn as_list(t: &Tensor) -> Option<&TensorList> {
    match t.as_variant() {
        Some(Variant::List(l)) => Some(l),
        _ => None,
    }
}

/// The buffer of a list holding its elements (unset ones and the free
/// capacity as zeros), for a list that is a compile-time constant.
pub(crate) fn buffer(l: &TensorList) -> Result<Tensor, String> {
    let ty = list_type(l);
    let buffer_shape = &ty.parts[0].shape;
    let mut full = l.clone();
    full.items.resize(buffer_shape[0], None);
    full.element_shape = Some(buffer_shape[1..].iter().map(|&d| d as i64).collect());
    let attrs = crate::ir::AttrMap::default();
    let shape = Tensor::vector(buffer_shape[1..].iter().map(|&d| d as i32).collect::<Vec<i32>>());
    crate::exec::run_kernel(
        "TensorListStack",
        &attrs,
        &[Tensor::Variant(std::sync::Arc::new(Variant::List(full))), shape],
    )
    .map_err(|e| e.to_string())?
    .into_iter()
    .next()
    .ok_or_else(|| "no buffer".to_string())
}

/// What the trace must fix on a list a maker op makes: its capacity and element shape.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Fix {
    pub capacity: usize,
    pub element_shape: Vec<i64>,
}

/// Applies `fix` to the list output of a maker op.
pub(crate) fn apply(t: &Tensor, fix: &Fix) -> Tensor {
    match as_list(t) {
        Some(l) => {
            let mut l = l.clone();
            l.max_num_elements = Some(fix.capacity);
            l.element_shape = Some(fix.element_shape.clone());
            Tensor::Variant(std::sync::Arc::new(Variant::List(l)))
        }
        None => t.clone(),
    }
}

fn lowering(graph: &Graph, id: NodeId, message: impl Into<String>) -> XlaError {
    XlaError::lowering(graph.node(id), message)
}

/// The length of a traced list value (`None` when it is not a list).
fn len(values: &HashMap<(NodeId, u32), Traced>, key: (NodeId, u32)) -> Option<usize> {
    values.get(&key).and_then(|t| t.value.as_ref().and_then(as_list)).map(|l| l.items.len())
}

/// What one pass over a program learns of a list a maker op makes.
struct Seen {
    /// The list as made.
    made: TensorList,
    /// The most elements any value derived from it holds.
    most: usize,
    /// Its element shape, from the declaration or the first element seen.
    shape: Option<Vec<usize>>,
}

/// Finds, for every list a maker op of `nodes` makes whose capacity or
/// element shape is not yet fixed, the capacity and element shape it
/// needs; refuses a list whose size or shape cannot be known at compile
/// time. One pass in program order: each list value remembers the maker
/// ops it derives from.
pub(crate) fn fixes(
    graph: &Graph,
    nodes: &[NodeId],
    values: &HashMap<(NodeId, u32), Traced>,
    lib: &Library,
) -> Result<HashMap<NodeId, Fix>, XlaError> {
    let mut seen: Vec<(NodeId, Seen)> = Vec::new();
    let mut at: HashMap<NodeId, usize> = HashMap::new();
    let mut origin: HashMap<(NodeId, u32), Vec<NodeId>> = HashMap::new();
    let mut fixed_trips: HashMap<NodeId, bool> = HashMap::new();
    for &id in nodes {
        let node = graph.node(id);
        if MAKERS.contains(&&*node.op) {
            let o = made_output(&node.op);
            if let Some(made) = values.get(&(id, o)).and_then(|t| t.value.as_ref().and_then(as_list)) {
                at.insert(id, seen.len());
                let info = Seen { made: made.clone(), most: made.items.len(), shape: element_shape(made) };
                seen.push((id, info));
                origin.insert((id, o), vec![id]);
            }
            continue;
        }
        let inputs = graph.data_inputs(id);
        let from = |k: usize| inputs.get(k).and_then(|i| origin.get(&(i.src, i.output.unwrap_or(0))));
        if !(0..inputs.len()).any(|k| from(k).is_some()) {
            continue;
        }
        let kind = call_kind(&node.op);
        let lists_out: Vec<u32> = (0u32..)
            .take_while(|&o| values.contains_key(&(id, o)))
            .filter(|&o| len(values, (id, o)).is_some())
            .collect();
        // Each list result and the operands it derives from.
        let reach: Vec<(u32, Vec<usize>)> = match kind {
            Some(CallKind::While) => lists_out.iter().map(|&o| (o, vec![o as usize])).collect(),
            Some(_) => lists_out.iter().map(|&o| (o, (0..inputs.len()).collect())).collect(),
            None if &*node.op == "Identity" || &*node.op == "IdentityN" => {
                lists_out.iter().map(|&o| (o, vec![o as usize])).collect()
            }
            None if node.op.starts_with("TensorList") => {
                lists_out.iter().filter(|&&o| o == 0).map(|&o| (o, vec![0])).collect()
            }
            // A TensorArray op's new flow derives from its flow operand.
            None if node.op.starts_with("TensorArray") => {
                let slot = crate::exec::kernels::tensor_array::flow_slot(&node.op);
                lists_out.iter().filter_map(|&o| slot.map(|s| (o, vec![s]))).collect()
            }
            None => Vec::new(),
        };
        let mut derived = Vec::with_capacity(reach.len());
        for (o, operands) in reach {
            let mut makers: Vec<NodeId> = operands.iter().filter_map(|&k| from(k)).flatten().copied().collect();
            makers.sort_unstable();
            makers.dedup();
            if makers.is_empty() {
                continue;
            }
            let n = len(values, (id, o)).unwrap_or(0);
            let before = operands
                .iter()
                .filter_map(|&k| inputs.get(k).and_then(|i| len(values, (i.src, i.output.unwrap_or(0)))))
                .max();
            let grows = before.is_some_and(|b| n > b);
            for &maker in &makers {
                let info = &mut seen[at[&maker]].1;
                if info.made.max_num_elements.is_none() {
                    match kind {
                        // A loop that may push must run a fixed number of times, whatever the trace saw.
                        Some(CallKind::While) if may_grow(graph, id, o as usize, lib)? => {
                            let fixed = match fixed_trips.get(&id) {
                                Some(&f) => f,
                                None => {
                                    let f = static_trip_count(graph, id, values, lib)?;
                                    fixed_trips.insert(id, f);
                                    f
                                }
                            };
                            if !fixed {
                                return Err(unbounded(
                                    graph,
                                    maker,
                                    &format!(
                                        "grows in loop `{}`, whose trip count depends on run-time values",
                                        node.name
                                    ),
                                ));
                            }
                        }
                        Some(CallKind::If | CallKind::Case) if grows => {
                            return Err(unbounded(
                                graph,
                                maker,
                                &format!("grows in `{}`, a conditional, by as much as the branch taken", node.name),
                            ));
                        }
                        _ => {}
                    }
                }
                info.most = info.most.max(n);
                if info.shape.is_none() {
                    info.shape =
                        values.get(&(id, o)).and_then(|t| t.value.as_ref().and_then(as_list)).and_then(element_shape);
                }
            }
            derived.push(((id, o), makers));
        }
        origin.extend(derived);
    }
    let mut out = HashMap::new();
    for (maker, info) in seen {
        let capacity = info.made.max_num_elements.map_or(info.most, |m| m.max(info.most));
        let shape = info.shape.ok_or_else(|| {
            lowering(
                graph,
                maker,
                "the TensorList's element shape is not known at compile time: its element_shape has unknown \
                 dimensions and nothing is pushed or set into it; XLA needs a fixed shape: give the TensorArray \
                 (or tf.while_loop value) a fully defined element_shape",
            )
        })?;
        let fix = Fix { capacity, element_shape: shape.iter().map(|&d| d as i64).collect() };
        let current = info.made.max_num_elements.unwrap_or(info.made.items.len());
        if current != capacity || info.made.element_shape.as_ref() != Some(&fix.element_shape) {
            out.insert(maker, fix);
        }
    }
    Ok(out)
}

/// The refusal of a list without a compile-time capacity.
fn unbounded(graph: &Graph, maker: NodeId, why: &str) -> XlaError {
    lowering(
        graph,
        maker,
        format!(
            "the TensorList has no compile-time capacity: it is made without max_num_elements (-1) and {why}; \
             XLA needs a fixed size: pass maximum_iterations to the tf.while_loop that accumulates it (or make \
             the TensorArray with a fixed size)"
        ),
    )
}

/// Whether the body of `While` op `id` may make the list it carries in
/// slot `slot` longer: the chain of list ops from its argument to its
/// result holds a push, a growing set, a resize, a scatter or anything
/// but reads, pops and identities.
fn may_grow(graph: &Graph, id: NodeId, slot: usize, lib: &Library) -> Result<bool, XlaError> {
    let body = match graph.node(id).attrs.get("body") {
        Some(AttrValue::Func(f)) => lib.graph(&f.name).ok_or_else(|| {
            lowering(graph, id, format!("names function `{}`, which the module does not have", f.name))
        })?,
        _ => return Err(lowering(graph, id, "has no function attribute `body`")),
    };
    let Some(mut at) = retval(body, slot) else { return Ok(true) };
    loop {
        let node = body.node(at);
        let next = match &*node.op {
            ARG_OP => return Ok(node.attrs.get_int("index") != Some(slot as i64)),
            RETVAL_OP | "Identity" | "TensorListPopBack" => 0,
            "TensorListSetItem" if node.attrs.get_bool("resize_if_index_out_of_bounds") != Some(true) => 0,
            _ => return Ok(true),
        };
        match body.data_inputs(at).get(next) {
            Some(input) => at = input.src,
            None => return Ok(true),
        }
    }
}

/// The `_Arg` indices the value `(id, out)` of function `graph` depends on,
/// or `None` when it depends on anything but arguments, constants and pure ops.
fn arg_deps(graph: &Graph, id: NodeId) -> Option<BTreeSet<usize>> {
    let mut deps = BTreeSet::new();
    let mut seen = HashSet::new();
    let mut stack = vec![id];
    while let Some(id) = stack.pop() {
        if !seen.insert(id) {
            continue;
        }
        let node = graph.node(id);
        match &*node.op {
            ARG_OP => {
                deps.insert(node.attrs.get_int("index").and_then(|k| usize::try_from(k).ok())?);
            }
            RETVAL_OP | "Const" | "Identity" => stack.extend(graph.data_inputs(id).iter().map(|i| i.src)),
            op if crate::exec::kernels::PURE_OPS.contains(&op) && call_kind(op).is_none() => {
                stack.extend(graph.data_inputs(id).iter().map(|i| i.src));
            }
            _ => return None,
        }
    }
    Some(deps)
}

/// The `_Retval` node of result `index` of function `graph`.
fn retval(graph: &Graph, index: usize) -> Option<NodeId> {
    graph.node_ids().find(|&id| {
        let node = graph.node(id);
        &*node.op == RETVAL_OP && node.attrs.get_int("index") == Some(index as i64)
    })
}

/// Whether `While` op `id` runs a number of times fixed at compile time:
/// its predicate depends only on loop values that enter as constants and
/// that the body computes from such values (and constants) alone.
pub(crate) fn static_trip_count(
    graph: &Graph,
    id: NodeId,
    values: &HashMap<(NodeId, u32), Traced>,
    lib: &Library,
) -> Result<bool, XlaError> {
    let node = graph.node(id);
    let func = |key: &str| match node.attrs.get(key) {
        Some(AttrValue::Func(f)) => lib
            .graph(&f.name)
            .ok_or_else(|| lowering(graph, id, format!("names function `{}`, which the module does not have", f.name))),
        _ => Err(lowering(graph, id, format!("has no function attribute `{key}`"))),
    };
    let (cond, body) = (func("cond")?, func("body")?);
    let inputs = graph.data_inputs(id);
    let mut fixed: BTreeSet<usize> = inputs
        .iter()
        .enumerate()
        .filter(|(_, i)| values.get(&(i.src, i.output.unwrap_or(0))).is_some_and(|t| t.constant))
        .map(|(k, _)| k)
        .collect();
    loop {
        let keep: BTreeSet<usize> = fixed
            .iter()
            .copied()
            .filter(|&k| retval(body, k).and_then(|r| arg_deps(body, r)).is_some_and(|d| d.is_subset(&fixed)))
            .collect();
        if keep == fixed {
            break;
        }
        fixed = keep;
    }
    Ok(retval(cond, 0).and_then(|r| arg_deps(cond, r)).is_some_and(|d| d.is_subset(&fixed)))
}
