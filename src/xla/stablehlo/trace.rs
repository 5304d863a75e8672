//! The trace: the device program run once on the host, with replica 0's
//! argument values, to learn every value's type and which values are
//! compile-time constants; and the emitter that walks the program with it.
//!
//! [`trace`] types the program statically (`types`) unless it holds an op
//! whose types can depend on values (call ops, TensorLists, Optionals):
//! then the whole program runs here, as below, and a note says which op
//! made it.
//!
//! A value is constant when its op is pure and every data operand is
//! constant, or when its op reads only its operands' shapes ([`SHAPE_ONLY`]).
//! Arguments, variable reads, the replica id and collectives are never
//! constant. Collectives are traced as the identity (their shape is their
//! operand's), an all-gather as its operand repeated once per member of its
//! group ([`gathered`]), a reduce-scatter as its operand's first block;
//! their values are not used. `CollectiveAssignGroupV2` is the constants
//! TensorFlow's XLA bridge gives. Call ops (`While`,
//! `If`, …) run the simulator's interpreter on their functions
//! (`calls.rs`); their results are never constant. TensorList and Optional values are traced
//! by the simulator's kernels; a list's compile-time capacity and element
//! shape are fixed by a second trace when they must be inferred (`lists`). Cost: one kernel call per op, plus each
//! call's interpretation.

use std::collections::HashMap;

use super::calls::Library;
use super::ops::dynamic_shape::{masked, masked_reduction, reduces_axis};
use super::ops::{builder, stack, state, Call, FOLD_ONLY, SHAPE_ONLY};
use super::text::{Ctx, Ty, Val};
use super::{ArgSource, Program, VARIABLE_OPS};
use crate::exec::{run_kernel, run_kernel_without_effects, Tensor};
use crate::ir::{Graph, NodeId};
use crate::xla::error::XlaError;

/// A traced value: its type, and its value when known (always for a
/// constant; for every value of a program traced whole).
#[derive(Clone)]
pub(crate) struct Traced {
    pub ty: Ty,
    pub value: Option<Tensor>,
    pub constant: bool,
}

impl Traced {
    /// A value (its type is the value's).
    pub fn known(value: Tensor, constant: bool) -> Traced {
        Traced { ty: Ty::of(&value), value: Some(value), constant }
    }

    /// A computed value of type `ty`, not known at compile time.
    pub fn typed(ty: Ty) -> Traced {
        Traced { ty, value: None, constant: false }
    }
}

/// Every traced value, by (node, output).
pub(crate) struct Trace {
    pub values: HashMap<(NodeId, u32), Traced>,
    /// The value of each variable a call op passes, by (call, operand).
    pub call_vars: HashMap<(NodeId, usize), Tensor>,
    /// How the types were found where not by the type rules (one line each).
    pub notes: Vec<String>,
}

/// Ops traced as their operand repeated once per member of their group.
pub(super) const GATHERS: &[&str] = &["AllGather", "CollectiveAllGather"];

/// A stand-in for the all-gather `op` of `args`: operand 0 repeated along
/// axis 0 to the type the op's rule gives (the type is right; the values
/// of the other members are not known on the host).
pub(super) fn gathered(op: &str, attrs: &crate::ir::AttrMap, args: &[Tensor]) -> Result<Tensor, String> {
    use crate::ir::shapes::rules::{self, Operand};
    let x = args.first().ok_or("expected an operand")?;
    let operands: Vec<Operand> =
        args.iter().map(|t| Operand { dtype: t.dtype(), shape: t.shape(), value: None }).collect();
    let out = rules::infer(op, attrs, &operands).ok_or("no type rule")??;
    let rows = x.shape().first().copied().unwrap_or(1).max(1);
    let copies = out.first().and_then(|t| t.shape.first()).map_or(1, |&r| (r / rows).max(1));
    let mut parts = vec![x.clone(); copies];
    parts.push(Tensor::scalar(0i32));
    let mut joined = run_kernel("ConcatV2", &crate::ir::AttrMap::new(), &parts).map_err(|e| e.to_string())?;
    joined.pop().ok_or_else(|| "the concatenation gave no tensor".to_string())
}

/// Ops traced as the identity of their data operands.
const COLLECTIVES: &[&str] =
    &["CrossReplicaSum", "AllReduce", "Broadcast", "CollectiveAllReduce", "CollectiveBroadcast"];

fn lowering(graph: &Graph, id: NodeId, message: impl Into<String>) -> XlaError {
    XlaError::lowering(graph.node(id), message)
}

/// The update an op applies to its variable: `Assign`, `AssignAdd` or `AssignSub`.
fn update_kind(graph: &Graph, id: NodeId) -> Result<&'static str, XlaError> {
    let node = graph.node(id);
    let kind = match &*node.op {
        "AssignVariableOp" => "Assign",
        "AssignAddVariableOp" => "AssignAdd",
        "AssignSubVariableOp" => "AssignSub",
        _ => node.attrs.get_str("fn").unwrap_or_default(),
    };
    match kind {
        "Assign" => Ok("Assign"),
        "AssignAdd" => Ok("AssignAdd"),
        "AssignSub" => Ok("AssignSub"),
        other => Err(lowering(graph, id, format!("update fn must be Assign, AssignAdd or AssignSub, not {other:?}"))),
    }
}

/// Types the program: statically from the argument types (`types`), or,
/// when an op's types can depend on values, by running it on the host with
/// `args` (replica 0's argument values; see [`trace_values`]).
pub(crate) fn trace(graph: &Graph, program: &Program, args: &[Tensor], lib: &Library) -> Result<Trace, XlaError> {
    let why = match super::types::needs_values(graph, program) {
        None => {
            let types: Vec<Ty> = args.iter().map(Ty::of).collect();
            match super::types::infer(graph, program, &types, Some(args))? {
                super::types::Typed::Done(trace) => return Ok(trace),
                super::types::Typed::Whole(why) => why,
            }
        }
        Some((id, why)) => {
            let node = graph.node(id);
            format!("`{}` ({}) is {why}", node.name, node.op)
        }
    };
    let mut trace = trace_values(graph, program, args, lib)?;
    trace.notes.insert(0, format!("the whole program was run on the host for its types: {why}"));
    Ok(trace)
}

/// Runs the program on the host with `args` (replica 0's argument values).
/// When a TensorList the program makes needs its capacity or element shape
/// fixed (`lists`), the program is traced again with them fixed.
/// An unbounded stack (`StackV2` with `max_size` -1) gets the most elements
/// the first trace saw it hold (`ops::stack`), in the same second trace.
fn trace_values(graph: &Graph, program: &Program, args: &[Tensor], lib: &Library) -> Result<Trace, XlaError> {
    let (first, peaks) = trace_with(graph, program, args, lib, &HashMap::new(), &HashMap::new())?;
    let fixes = super::lists::fixes(graph, &program.nodes, &first.values, lib)?;
    if fixes.is_empty() && peaks.is_empty() {
        return Ok(first);
    }
    let capacities: HashMap<NodeId, usize> = peaks.into_iter().map(|(h, n)| (h, n.max(1))).collect();
    Ok(trace_with(graph, program, args, lib, &fixes, &capacities)?.0)
}

/// One trace, with the lists the maker ops in `fixes` make fixed and the
/// unbounded stacks in `capacities` given those. Returns the trace and,
/// for every unbounded stack given no capacity, the most elements it held.
fn trace_with(
    graph: &Graph,
    program: &Program,
    args: &[Tensor],
    lib: &Library,
    fixes: &HashMap<NodeId, super::lists::Fix>,
    capacities: &HashMap<NodeId, usize>,
) -> Result<(Trace, HashMap<NodeId, usize>), XlaError> {
    // TF1 control flow has no StableHLO lowering (yet): refused before anything is traced.
    const TF1_CONTROL_FLOW: &[&str] = &["Enter", "Exit", "LoopCond", "Merge", "NextIteration", "Switch"];
    if let Some(&id) = program.nodes.iter().find(|&&id| TF1_CONTROL_FLOW.contains(&&*graph.node(id).op)) {
        return Err(lowering(
            graph,
            id,
            "TF1 control flow (Switch, Merge, Enter, Exit, NextIteration, LoopCond) has no StableHLO lowering; \
             the simulator (`--backend sim`) runs it",
        ));
    }
    let mut values: HashMap<(NodeId, u32), Traced> = HashMap::new();
    let mut vars: HashMap<NodeId, Tensor> = HashMap::new();
    let mut call_vars = HashMap::new();
    let mut stacks = stack::Stacks::new();
    let mut peaks: HashMap<NodeId, usize> = HashMap::new();
    for (arg, v) in program.args.iter().zip(args) {
        match *arg {
            ArgSource::Replicated(id) => {
                values.insert((id, 0), Traced::known(v.clone(), false));
            }
            ArgSource::Host(id, o) | ArgSource::Carried(id, o) => {
                values.insert((id, o), Traced::known(v.clone(), false));
            }
            // A stack passed into a function is its elements, a list (`calls`).
            ArgSource::Variable(id) => match stack::as_stack(v) {
                Some(list) => {
                    stacks.insert(id, list.clone());
                }
                None => {
                    vars.insert(id, v.clone());
                }
            },
        }
    }
    for &id in &program.nodes {
        let node = graph.node(id);
        let op = &*node.op;
        let inputs = graph.data_inputs(id);
        let operand = |values: &HashMap<(NodeId, u32), Traced>, i: usize| {
            let input = inputs.get(i).ok_or_else(|| lowering(graph, id, format!("has no operand {i}")))?;
            values
                .get(&(input.src, input.output.unwrap_or(0)))
                .and_then(|t| Some((t.value.clone()?, t.constant)))
                .ok_or_else(|| {
                    lowering(graph, id, format!("operand {i} (`{}`) has no value", graph.node(input.src).name))
                })
        };
        let handle = || inputs.first().map(|i| i.src).ok_or_else(|| lowering(graph, id, "has no variable operand"));
        let outputs: Vec<Traced> = match op {
            _ if stack::is_stack_op(op) => {
                let max_size =
                    if op == "StackV2" { Some(operand(&values, 0)?).filter(|v| v.1).map(|v| v.0) } else { None };
                let rest = if op == "StackPushV2" { vec![operand(&values, 1)?.0] } else { Vec::new() };
                let capacity = capacities.get(&id).copied();
                let results = stack::trace(graph, id, &node.attrs, &rest, max_size.as_ref(), capacity, &mut stacks)
                    .map_err(|m| lowering(graph, id, m))?;
                if op == "StackV2" && stacks.get(&id).is_some_and(|l| l.max_num_elements.is_none()) {
                    peaks.insert(id, 0);
                }
                // The device form of a stack is known once an element was pushed.
                if op == "StackPushV2" {
                    let h = stack::stack_of(graph, id).map_err(|m| lowering(graph, id, m))?;
                    let depth = stacks.get(&h).map_or(0, |l| l.items.len());
                    if let Some(peak) = peaks.get_mut(&h) {
                        *peak = (*peak).max(depth);
                    }
                    if let Some(ty) = stacks.get(&h).and_then(stack::buffer_type) {
                        values.insert((h, 0), Traced::typed(ty));
                    }
                }
                results.into_iter().map(|value| Traced::known(value, false)).collect()
            }
            "ReadVariableOp" => {
                let h = handle()?;
                let v = vars.get(&h).cloned().ok_or_else(|| lowering(graph, id, "reads an unknown variable"))?;
                vec![Traced::known(v, false)]
            }
            "VarIsInitializedOp" => vec![Traced::known(Tensor::scalar(true), true)],
            // A variable's shape is fixed at compile time. A call (a loop
            // passing its variables through) gives back the handle of its
            // operand: follow it to the variable.
            "VariableShape" => {
                let mut at = *inputs.first().ok_or_else(|| lowering(graph, id, "has no variable operand"))?;
                let v = loop {
                    if let Some(v) = vars.get(&at.src) {
                        break v;
                    }
                    let is_call = crate::ir::functions::call_kind(&graph.node(at.src).op).is_some();
                    let operand = values
                        .get(&(at.src, at.output.unwrap_or(0)))
                        .and_then(|t| t.value.as_ref()?.as_resource())
                        .filter(|_| is_call)
                        .and_then(|h| h.name.parse::<usize>().ok())
                        .and_then(|i| graph.data_inputs(at.src).get(i).copied());
                    at = operand.ok_or_else(|| lowering(graph, id, "reads an unknown variable"))?;
                };
                let value = run_kernel("Shape", &node.attrs, std::slice::from_ref(v))
                    .map_err(|e| lowering(graph, id, e.to_string()))?
                    .remove(0);
                vec![Traced::known(value, true)]
            }
            "AssignVariableOp" | "AssignAddVariableOp" | "AssignSubVariableOp" | "Update" => {
                let h = handle()?;
                let (value, _) = operand(&values, 1)?;
                let old = vars.get(&h).cloned().ok_or_else(|| lowering(graph, id, "writes an unknown variable"))?;
                let new = match update_kind(graph, id)? {
                    "Assign" => value,
                    kind => {
                        let k = if kind == "AssignAdd" { "AddV2" } else { "Sub" };
                        run_kernel(k, &node.attrs, &[old, value])
                            .map_err(|e| lowering(graph, id, e.to_string()))?
                            .remove(0)
                    }
                };
                vars.insert(h, new);
                Vec::new()
            }
            "CollectiveAssignGroupV2" => {
                let shape = operand(&values, 0)?.0.shape().to_vec();
                let v = super::ops::xla_misc::assign_group_values(&shape).map_err(|m| lowering(graph, id, m))?;
                v.into_iter().map(|t| Traced::known(t, true)).collect()
            }
            "ReplicaId" | "XlaReplicaId" => vec![Traced::known(Tensor::scalar(0i32), false)],
            _ if state::has_builder(op) => {
                let k = state::handle_operands(op);
                let mut handles = Vec::with_capacity(k);
                let mut old = Vec::with_capacity(k);
                for input in inputs.iter().take(k) {
                    let v = vars
                        .get(&input.src)
                        .cloned()
                        .ok_or_else(|| lowering(graph, id, "names an unknown variable"))?;
                    handles.push(input.src);
                    old.push(v);
                }
                let mut rest = Vec::with_capacity(inputs.len().saturating_sub(k));
                for i in k..inputs.len() {
                    rest.push(operand(&values, i)?.0);
                }
                let (new, results) =
                    state::evaluate(op, &node.attrs, &old, &rest).map_err(|m| lowering(graph, id, m))?;
                for (h, v) in handles.into_iter().zip(new) {
                    vars.insert(h, v);
                }
                results.into_iter().map(|value| Traced::known(value, false)).collect()
            }
            // Calls run the simulator's interpreter; their results are never constant.
            _ if crate::ir::functions::call_kind(op).is_some() => {
                // Variables pass by handle: the body's variable ops use their values.
                let mut args = Vec::with_capacity(inputs.len());
                let mut handles = Vec::new();
                for (i, input) in inputs.iter().enumerate() {
                    if let Some(v) = vars.get(&input.src) {
                        call_vars.insert((id, i), v.clone());
                        handles.push((i, input.src, v.clone()));
                        args.push(super::calls::handle_tensor(i));
                    } else if let Some(list) = stacks.get(&input.src) {
                        // A stack passes as a variable does: its elements, by value.
                        let v = stack::as_tensor(list.clone());
                        call_vars.insert((id, i), v.clone());
                        handles.push((i, input.src, v));
                        args.push(super::calls::handle_tensor(i));
                    } else {
                        args.push(operand(&values, i)?.0);
                    }
                }
                let state: Vec<(usize, Tensor)> = handles.iter().map(|(i, _, v)| (*i, v.clone())).collect();
                let (results, state, call_peaks) = super::calls::trace_call(lib, graph, id, args, state)?;
                for ((i, h, _), (_, v)) in handles.iter().zip(state) {
                    if let Some(peak) = peaks.get(h).copied() {
                        unbounded_stack_in_call(graph, id, *i, *h, &values, lib)?;
                        let depth = stack::as_stack(&v).map_or(0, |l| l.items.len());
                        let inside = call_peaks.get(i).copied().unwrap_or(0);
                        peaks.insert(*h, peak.max(depth).max(inside));
                    }
                    let Some(list) = stack::as_stack(&v).filter(|_| stacks.contains_key(h)) else {
                        vars.insert(*h, v);
                        continue;
                    };
                    // The stack's device form is known once the call pushed onto it: the call
                    // passes it so, and its `StackV2` makes it so.
                    if let Some(ty) = stack::buffer_type(list) {
                        values.insert((*h, 0), Traced::typed(ty));
                        if let Some(passed) = call_vars.get_mut(&(id, *i)) {
                            *passed = stack::with_shape_of(passed, list);
                        }
                    }
                    stacks.insert(*h, list.clone());
                }
                results.into_iter().map(|value| Traced::known(value, false)).collect()
            }
            // TensorFlow's collectives, traced as one member alone: its own value (a reduce-scatter: its first block).
            "XlaAllReduce" | "CollectiveReduceV2" => vec![Traced::known(operand(&values, 0)?.0, false)],
            "XlaReduceScatter" => {
                let args = (0..3).map(|i| operand(&values, i).map(|v| v.0)).collect::<Result<Vec<_>, _>>()?;
                let v = super::ops::xla_misc::reduce_scatter_stand_in(&node.attrs, &args)
                    .map_err(|m| lowering(graph, id, m))?;
                vec![Traced::known(v, false)]
            }
            _ if COLLECTIVES.contains(&op) => {
                let n = if op == "CrossReplicaSum" { 1 } else { inputs.len() };
                let mut out = Vec::with_capacity(n);
                for i in 0..n {
                    out.push(Traced::known(operand(&values, i)?.0, false));
                }
                out
            }
            _ if GATHERS.contains(&op) => {
                let args: Vec<Tensor> =
                    (0..inputs.len()).map(|i| operand(&values, i).map(|v| v.0)).collect::<Result<_, _>>()?;
                vec![Traced::known(gathered(op, &node.attrs, &args).map_err(|m| lowering(graph, id, m))?, false)]
            }
            _ => {
                let mut args = Vec::with_capacity(inputs.len());
                let mut all_constant = true;
                for i in 0..inputs.len() {
                    let (v, c) = operand(&values, i)?;
                    all_constant &= c;
                    args.push(v);
                }
                // Random draws stay in the program: folding would put the simulator's stream there.
                let constant = (all_constant && !super::ops::random::is_draw(op)) || SHAPE_ONLY.contains(&op);
                let fix = fixes.get(&id);
                // A trace computes types on dummy values: host ops print nothing here.
                run_kernel_without_effects(op, &node.attrs, &args)
                    .map_err(|e| lowering(graph, id, e.to_string()))?
                    .into_iter()
                    .enumerate()
                    .map(|(k, value)| {
                        let value = match fix {
                            Some(f) => super::lists::apply(&value, f),
                            None => value,
                        };
                        // TensorListConcatV2's (and TensorArrayConcatV3's) lengths are its elements' leading dimensions: on the
                        // device every element has the list's one shape, so they are compile-time
                        // facts (as in tf2xla).
                        let lengths = matches!(op, "TensorListConcatV2" | "TensorArrayConcatV3") && k == 1;
                        Traced::known(value, constant || lengths)
                    })
                    .collect()
            }
        };
        for (i, t) in outputs.into_iter().enumerate() {
            values.insert((id, i as u32), t);
        }
    }
    Ok((Trace { values, call_vars, notes: Vec::new() }, peaks))
}

/// Refuses the unbounded stack `h` that call op `id` takes as operand
/// `operand` when its depth could depend on run-time values: a `While`
/// whose functions may push onto it must run a number of times fixed at
/// compile time, and an `If` or `Case` must not push onto it. Cost: one
/// pass over the called functions (and the loop's trip-count analysis).
fn unbounded_stack_in_call(
    graph: &Graph,
    id: NodeId,
    operand: usize,
    h: NodeId,
    values: &HashMap<(NodeId, u32), Traced>,
    lib: &Library,
) -> Result<(), XlaError> {
    use crate::ir::functions::{call_kind, CallKind};
    let node = graph.node(id);
    let kind = call_kind(&node.op);
    // A conditional's functions take its operands after the predicate or index.
    let arg = match kind {
        Some(CallKind::If | CallKind::Case) => operand.checked_sub(1),
        _ => Some(operand),
    };
    let mut names = Vec::new();
    for (_, value) in node.attrs.iter() {
        match value {
            crate::ir::AttrValue::Func(f) => names.push(f.name.to_string()),
            crate::ir::AttrValue::List(items) => names.extend(items.iter().filter_map(|v| match v {
                crate::ir::AttrValue::Func(f) => Some(f.name.to_string()),
                _ => None,
            })),
            _ => {}
        }
    }
    let pushes = match arg {
        Some(arg) => names.iter().filter_map(|n| lib.graph(n)).any(|f| stack::may_push(f, arg)),
        None => true,
    };
    if !pushes {
        return Ok(());
    }
    let why = match kind {
        Some(CallKind::While) if super::lists::static_trip_count(graph, id, values, lib)? => return Ok(()),
        Some(CallKind::While) => format!("grows in loop `{}`, whose trip count depends on run-time values", node.name),
        Some(CallKind::If | CallKind::Case) => format!("grows in `{}`, a conditional", node.name),
        _ => return Ok(()),
    };
    Err(lowering(graph, h, stack::unbounded(&why)))
}

/// Walks the program, appending StableHLO for each op.
pub(crate) struct Emitter<'a> {
    pub graph: &'a Graph,
    pub traced: &'a Trace,
    /// SSA values emitted so far.
    pub env: HashMap<(NodeId, u32), Val>,
    /// Each variable's current value.
    pub vars: HashMap<NodeId, Val>,
    pub replicas: usize,
    /// Logical cores per replica; above 1, every op gets a maximal sharding.
    pub partitions: u32,
    /// The module's functions, for call ops.
    pub lib: &'a Library<'a>,
}

/// The logical core an op is placed on (`…TPU_REPLICATED_CORE:k`), else 0.
pub(crate) fn logical_core(node: &crate::ir::Node) -> u32 {
    node.device
        .as_deref()
        .and_then(|d| d.rsplit_once("TPU_REPLICATED_CORE:"))
        .and_then(|(_, k)| k.parse().ok())
        .unwrap_or(0)
}

impl Emitter<'_> {
    /// The SSA value of `(node, output)`, printing a constant on first use.
    pub fn value(&mut self, ctx: &mut Ctx, key: (NodeId, u32)) -> Result<Val, XlaError> {
        if let Some(v) = self.env.get(&key) {
            return Ok(v.clone());
        }
        let t = self.traced.values.get(&key).ok_or_else(|| {
            lowering(self.graph, key.0, format!("output {} was not computed (is it a resource?)", key.1))
        })?;
        if !t.constant {
            return Err(lowering(self.graph, key.0, format!("output {} has no value on the device", key.1)));
        }
        let value = t.value.as_ref().ok_or_else(|| lowering(self.graph, key.0, "a constant has no value"))?;
        let v = match value.as_variant() {
            // A constant TensorList: its buffer and its size.
            Some(crate::exec::variant::Variant::List(l)) => {
                let buffer = super::lists::buffer(l).map_err(|m| lowering(self.graph, key.0, m))?;
                let size = i32::try_from(l.items.len()).map_err(|_| lowering(self.graph, key.0, "too long"))?;
                let parts = [ctx.constant(&buffer), ctx.constant(&Tensor::scalar(size))];
                Val::composite(&parts)
            }
            // A constant Optional: its flag and its components.
            Some(crate::exec::variant::Variant::Optional(v)) => {
                let mut parts = vec![ctx.constant(&Tensor::scalar(v.is_some()))];
                for t in v.iter().flatten() {
                    if !super::text::device_dtype(t.dtype()) {
                        return Err(lowering(
                            self.graph,
                            key.0,
                            format!("a {} component cannot go to the device", t.dtype()),
                        ));
                    }
                    parts.push(ctx.constant(t));
                }
                Val::composite(&parts)
            }
            None if !super::text::device_dtype(value.dtype()) => {
                return Err(lowering(
                    self.graph,
                    key.0,
                    format!("a {} constant cannot go to the device", value.dtype()),
                ))
            }
            None => ctx.constant(value),
        };
        self.env.insert(key, v.clone());
        Ok(v)
    }

    /// Emits one op.
    pub fn node(&mut self, ctx: &mut Ctx, id: NodeId) -> Result<(), XlaError> {
        let graph = self.graph;
        let node = graph.node(id);
        let _checked = crate::xla::device_check::Node::enter(&node.name, &node.op);
        let op = &*node.op;
        let inputs = graph.data_inputs(id);
        let key = |i: usize| inputs.get(i).map(|x| (x.src, x.output.unwrap_or(0)));
        self.refuse_padded_operands(ctx, id)?;
        if self.partitions > 1 {
            ctx.sharding = Some(logical_core(node));
        }
        // Constant results are printed where they are used.
        let traced_outputs: Vec<&Traced> = (0u32..).map_while(|o| self.traced.values.get(&(id, o))).collect();
        if !traced_outputs.is_empty() && traced_outputs.iter().all(|t| t.constant) {
            return Ok(());
        }
        if VARIABLE_OPS.contains(&op) {
            let h = key(0).ok_or_else(|| lowering(graph, id, "has no variable operand"))?.0;
            let current = self.vars.get(&h).cloned().ok_or_else(|| lowering(graph, id, "unknown variable"))?;
            match op {
                "ReadVariableOp" => {
                    self.env.insert((id, 0), current);
                }
                "VarIsInitializedOp" => {}
                _ => {
                    let value = self.value(ctx, key(1).ok_or_else(|| lowering(graph, id, "has no value"))?)?;
                    let value = ctx.broadcast_to(&value, &current.ty.shape);
                    let new = match update_kind(graph, id)? {
                        "Assign" => value,
                        "AssignAdd" => ctx.elementwise("add", &[&current, &value]),
                        _ => ctx.elementwise("subtract", &[&current, &value]),
                    };
                    self.vars.insert(h, new);
                }
            }
            return Ok(());
        }
        if state::has_builder(op) {
            return self.state_op(ctx, id);
        }
        if stack::is_stack_op(op) {
            return self.stack_op(ctx, id);
        }
        if crate::ir::functions::call_kind(op).is_some() {
            return self.call_op(ctx, id);
        }
        if FOLD_ONLY.contains(&op) {
            return Err(lowering(graph, id, "its operands must be compile-time constants (shapes, index lists)"));
        }
        let build = builder(op).ok_or_else(|| XlaError::unsupported(node))?;
        let read = super::ops::operands_read(op).unwrap_or(inputs.len()).min(inputs.len());
        let mut vals = Vec::with_capacity(read);
        let mut consts = Vec::with_capacity(read);
        for i in 0..read {
            let k = key(i).unwrap_or((id, 0));
            let t = self.traced.values.get(&k);
            let fact = super::ops::tensor_array::TRACED_OPERANDS.contains(&(op, i));
            consts.push(t.filter(|t| t.constant || fact).and_then(|t| t.value.clone()));
            vals.push(self.value(ctx, k)?);
        }
        // A reduction over a padded axis (checked above) reads the padding as its identity.
        if let Some(reducer) = masked_reduction(op) {
            if let Some(d) = vals.first().and_then(|x| ctx.dynamic.get(&x.name)).cloned() {
                let x = vals[0].clone();
                vals[0] = masked(ctx, &x, &d, reducer);
            }
        }
        let outputs: Vec<Ty> = traced_outputs.iter().map(|t| t.ty.clone()).collect();
        let call =
            Call { op, attrs: &node.attrs, inputs: vals, consts, outputs: &outputs, num_replicas: self.replicas };
        let results = build(ctx, &call).map_err(|m| lowering(graph, id, m))?;
        for (i, v) in results.into_iter().enumerate() {
            self.env.insert((id, i as u32), v);
        }
        Ok(())
    }
}

/// Ops that pass a padded buffer on unchanged (their builder is the
/// identity), so its size goes with it.
const PASS_PADDED: &[&str] = &["Identity", "IdentityN", "PreventGradient", "Snapshot", "StopGradient"];

impl Emitter<'_> {
    /// Emits a stack op ([`stack`]): a `StackV2` makes the stack's buffer and
    /// depth, kept as the `StackV2` node's current value; a push or pop
    /// updates that value.
    fn stack_op(&mut self, ctx: &mut Ctx, id: NodeId) -> Result<(), XlaError> {
        let graph = self.graph;
        let node = graph.node(id);
        let op = &*node.op;
        if op == "StackV2" {
            // A stack nothing was pushed onto has no device form (and no pops: the trace checked).
            if let Some(t) = self.traced.values.get(&(id, 0)) {
                let v = stack::make(ctx, &t.ty).map_err(|m| lowering(graph, id, m))?;
                self.vars.insert(id, v);
            }
            return Ok(());
        }
        let h = stack::stack_of(graph, id).map_err(|m| lowering(graph, id, m))?;
        let Some(current) = self.vars.get(&h).cloned() else {
            return match op {
                "StackCloseV2" => Ok(()),
                _ => Err(lowering(graph, id, "uses a stack nothing was pushed onto")),
            };
        };
        let mut operands = Vec::new();
        if op == "StackPushV2" {
            let input = graph.data_inputs(id).get(1).copied().ok_or_else(|| lowering(graph, id, "has no element"))?;
            operands.push(self.value(ctx, (input.src, input.output.unwrap_or(0)))?);
        }
        let (new, results) =
            stack::emit(ctx, op, &node.attrs, current, operands, self.replicas).map_err(|m| lowering(graph, id, m))?;
        self.vars.insert(h, new);
        for (i, v) in results.into_iter().enumerate() {
            self.env.insert((id, i as u32), v);
        }
        Ok(())
    }

    /// Refuses op `id` when it reads a padded buffer whose size depends on
    /// values (`ops::dynamic_shape`) and cannot respect that size: the
    /// identities pass one on (to a program output), and a reduction over
    /// the padded axis masks the padding; any other reader is refused.
    pub(crate) fn refuse_padded_operands(&self, ctx: &Ctx, id: NodeId) -> Result<(), XlaError> {
        let graph = self.graph;
        let op = &*graph.node(id).op;
        if PASS_PADDED.contains(&op) {
            return Ok(());
        }
        for (i, input) in graph.data_inputs(id).into_iter().enumerate() {
            let key = (input.src, input.output.unwrap_or(0));
            let Some(dynamic) = self.env.get(&key).and_then(|v| ctx.dynamic.get(&v.name).map(|d| (v, d))) else {
                continue;
            };
            let (v, d) = dynamic;
            if i == 0 && self.reduces_padded_axis(id, v, d.axis) {
                continue;
            }
            return Err(lowering(
                graph,
                id,
                format!(
                    "it reads `{}:{}`, whose size along axis {} depends on values (`{}` gives a buffer of {} padded \
                     past its size): on PJRT such a value can only be a program output or reduced over that axis \
                     (docs/xla.md, \"Ops whose output size depends on values\")",
                    graph.node(key.0).name,
                    key.1,
                    d.axis,
                    graph.node(key.0).op,
                    v.ty.mlir()
                ),
            ));
        }
        Ok(())
    }

    /// True when op `id` is a reduction ([`masked_reduction`]) whose constant
    /// axes include `axis` of its operand 0, `v`.
    fn reduces_padded_axis(&self, id: NodeId, v: &Val, axis: usize) -> bool {
        let graph = self.graph;
        if masked_reduction(&graph.node(id).op).is_none() {
            return false;
        }
        let Some(axes) = graph.data_inputs(id).get(1).map(|i| (i.src, i.output.unwrap_or(0))) else { return false };
        let axes = self.traced.values.get(&axes).filter(|t| t.constant).and_then(|t| t.value.as_ref());
        axes.is_some_and(|a| reduces_axis(a, v.ty.rank(), axis))
    }

    /// Emits an op of [`state`]: reads the variables it names, calls its
    /// builder, and keeps the variables' new values.
    fn state_op(&mut self, ctx: &mut Ctx, id: NodeId) -> Result<(), XlaError> {
        let graph = self.graph;
        let node = graph.node(id);
        let inputs = graph.data_inputs(id);
        let k = state::handle_operands(&node.op);
        let mut handles = Vec::with_capacity(k);
        let mut vars = Vec::with_capacity(k);
        for input in inputs.iter().take(k) {
            let v = self.vars.get(&input.src).cloned().ok_or_else(|| lowering(graph, id, "unknown variable"))?;
            handles.push(input.src);
            vars.push(v);
        }
        let mut vals = Vec::new();
        let mut consts = Vec::new();
        for input in inputs.iter().skip(k) {
            let key = (input.src, input.output.unwrap_or(0));
            consts.push(self.traced.values.get(&key).filter(|t| t.constant).and_then(|t| t.value.clone()));
            vals.push(self.value(ctx, key)?);
        }
        let outputs: Vec<Ty> = (0u32..).map_while(|o| self.traced.values.get(&(id, o))).map(|t| t.ty.clone()).collect();
        let call = Call {
            op: &node.op,
            attrs: &node.attrs,
            inputs: vals,
            consts,
            outputs: &outputs,
            num_replicas: self.replicas,
        };
        let (new, results) = state::build(ctx, &call, &vars).map_err(|m| lowering(graph, id, m))?;
        for (h, v) in handles.into_iter().zip(new) {
            self.vars.insert(h, v);
        }
        for (i, v) in results.into_iter().enumerate() {
            self.env.insert((id, i as u32), v);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_all_gather_is_traced_as_its_operand_once_per_member() {
        let x = Tensor::from_vec(&[2, 1], vec![1.0f32, 2.0]).unwrap();
        let groups = Tensor::from_vec(&[1, 3], vec![0i32, 1, 2]).unwrap();
        let got = gathered("AllGather", &crate::ir::AttrMap::new(), &[x, groups]).unwrap();
        assert_eq!(got, Tensor::from_vec(&[6, 1], vec![1.0f32, 2.0, 1.0, 2.0, 1.0, 2.0]).unwrap());
    }
}
