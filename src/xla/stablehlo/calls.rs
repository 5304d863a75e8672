//! Functional control flow: `While`, `If`, `Case` and the call ops as
//! `func.call`, `stablehlo.while`, `stablehlo.if` and `stablehlo.case`
//! over private functions of the module.
//!
//! Meaning: each function a call names (a graph of the module with
//! `role = "function"`) is printed once per distinct list of argument
//! types as `func.func private @f_<name>_<k>`, its body emitted op by op
//! like the device program, with the types the call site's traced values
//! give. A `While`'s carried values must keep their types (shape
//! invariance): the body is traced once with the loop's initial values and
//! its result types must equal its argument types, else the lowering is
//! refused. A `Case` index outside `0..n` runs the last branch, as both
//! TensorFlow and `stablehlo.case` do. Variables (TensorFlow's stateful
//! `While`/`If` take them as resource operands) pass by value: a function
//! gets the variable's current value, its variable ops
//! (`ReadVariableOp`, `Assign{,Add,Sub}VariableOp`, the optimizer updates,
//! gathers and scatters) work on it, and the final value comes back: in
//! the variable's own slot for a `While`, after the results for the
//! others. A
//! TensorList argument or result is its buffer and its size (`lists`), an
//! Optional its flag and components: several values in every signature,
//! block and call. An Optional one branch leaves empty takes the
//! components' types another branch gives it (zeros where the branches
//! join), and traces as holding zeros in the branches that read it.
//! Cost: each specialisation is traced and printed once; the host trace
//! of a call runs the simulator's interpreter (a `While` costs its
//! iterations times its body).

use std::cell::RefCell;
use std::collections::HashMap;

use super::ops::stack;
use super::ops::xla_fn::Apply;
use super::text::{leaf_count, Cmp, Ctx, Ty, Val};
use super::trace::{self, Emitter};
use super::{ArgSource, Program};
use crate::exec::kernels::control_flow::{self, Functions};
use crate::exec::Tensor;
use crate::ir::functions::{self as fns, call_kind, CallKind, ARG_OP, RETVAL_OP};
use crate::ir::{AttrValue, DType, Graph, Module, NodeId};
use crate::xla::error::XlaError;

/// The module's functions: their graphs, the simulator's compiled bodies
/// (for the host trace) and the definitions printed so far.
pub(crate) struct Library<'a> {
    graphs: HashMap<&'a str, &'a Graph>,
    host: Functions,
    defs: RefCell<Defs>,
}

/// Printed definitions of one module.
#[derive(Default)]
struct Defs {
    /// `func.func` texts, in the order they were printed.
    texts: Vec<String>,
    /// (function, argument types) → (symbol, result types).
    names: HashMap<(String, String), (String, Vec<Ty>)>,
}

impl<'a> Library<'a> {
    /// The functions of `module` (none without one).
    pub fn new(module: Option<&'a Module>) -> Result<Library<'a>, XlaError> {
        let Some(module) = module else {
            return Ok(Library { graphs: HashMap::new(), host: Functions::default(), defs: RefCell::default() });
        };
        let host = Functions::from_module(module).map_err(|e| XlaError::UnsupportedGraph { message: e.to_string() })?;
        let graphs = fns::functions(module).map(|g| (g.name.as_str(), g)).collect();
        Ok(Library { graphs, host, defs: RefCell::default() })
    }

    /// The function called `name`.
    pub fn graph(&self, name: &str) -> Option<&'a Graph> {
        self.graphs.get(name).copied()
    }

    /// Forgets the printed definitions (a new module starts).
    pub fn reset(&self) {
        *self.defs.borrow_mut() = Defs::default();
    }

    /// The definitions printed since the last [`Library::reset`].
    pub fn definitions(&self) -> String {
        self.defs.borrow().texts.concat()
    }
}

fn lowering(graph: &Graph, id: NodeId, message: impl Into<String>) -> XlaError {
    XlaError::lowering(graph.node(id), message)
}

/// Variables a call passes: (operand, value).
pub(crate) type CallVars = Vec<(usize, Tensor)>;

/// The handle tensor the host trace passes for the variable at call operand `i`.
pub(crate) fn handle_tensor(i: usize) -> Tensor {
    Tensor::Resource(crate::exec::ResourceHandle::new("trace".into(), i.to_string().into()))
}

/// What the host trace of a call gives: its results, the final values of
/// the variables (and stacks) it passes, and the most elements each stack
/// it passes held during the call (by operand).
pub(crate) type Traced = (Vec<Tensor>, CallVars, HashMap<usize, usize>);

/// Runs call op `id` on the host for the trace (the simulator's
/// interpreter). `state` holds the value of the variable (or stack) at
/// each handle operand; the body's variable and stack ops read and update
/// it.
pub(crate) fn trace_call(
    lib: &Library,
    graph: &Graph,
    id: NodeId,
    args: Vec<Tensor>,
    state: CallVars,
) -> Result<Traced, XlaError> {
    use crate::exec::KernelError;
    let node = graph.node(id);
    let state = RefCell::new(state);
    let peaks: RefCell<HashMap<usize, usize>> = RefCell::default();
    let device = |op: &str, attrs: &crate::ir::AttrMap, inputs: Vec<Tensor>| -> Result<Vec<Tensor>, KernelError> {
        if op == "StackV2" {
            return Err(KernelError::invalid(
                op,
                "a stack made inside a function body is not lowered to StableHLO; make it outside the loop",
            ));
        }
        let slot_of = |t: &Tensor| {
            t.as_resource()
                .and_then(|h| h.name.parse::<usize>().ok())
                .ok_or_else(|| KernelError::invalid(op, "a handle operand is not a variable the call passes"))
        };
        let slot = slot_of(inputs.first().ok_or_else(|| KernelError::invalid(op, "has no operands"))?)?;
        let mut state = state.borrow_mut();
        if super::ops::state::has_builder(op) {
            // An optimizer update (or a gather or scatter) on the variables the call passes.
            let handles = super::ops::state::handle_operands(op).min(inputs.len());
            let slots = inputs[..handles].iter().map(slot_of).collect::<Result<Vec<_>, _>>()?;
            let vars = slots
                .iter()
                .map(|s| state.iter().find(|(i, _)| i == s).map(|(_, v)| v.clone()))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| KernelError::invalid(op, "unknown variable"))?;
            let (new, out) = super::ops::state::evaluate(op, attrs, &vars, &inputs[handles..])
                .map_err(|e| KernelError::invalid(op, e))?;
            for (s, v) in slots.iter().zip(new) {
                if let Some(entry) = state.iter_mut().find(|(i, _)| i == s) {
                    entry.1 = v;
                }
            }
            return Ok(out);
        }
        if stack::is_stack_op(op) {
            // A stack the call passes: its elements, as a list (`ops::stack`).
            let entry = state
                .iter_mut()
                .find(|(i, _)| *i == slot)
                .map(|(_, v)| v)
                .ok_or_else(|| KernelError::invalid(op, "unknown stack"))?;
            if op == "StackCloseV2" {
                return Ok(Vec::new());
            }
            let mut list =
                stack::as_stack(entry).cloned().ok_or_else(|| KernelError::invalid(op, "the handle is not a stack"))?;
            let out = stack::on_list(op, attrs, &mut list, &inputs[1..]).map_err(|m| KernelError::invalid(op, m))?;
            let peak = peaks.borrow().get(&slot).copied().unwrap_or(0).max(list.items.len());
            peaks.borrow_mut().insert(slot, peak);
            *entry = stack::as_tensor(list);
            return Ok(out);
        }
        let var = state
            .iter_mut()
            .find(|(i, _)| *i == slot)
            .map(|(_, v)| v)
            .ok_or_else(|| KernelError::invalid(op, "unknown variable"))?;
        let value = || inputs.get(1).cloned().ok_or_else(|| KernelError::invalid(op, "has no value operand"));
        match op {
            "ReadVariableOp" => Ok(vec![var.clone()]),
            "VarIsInitializedOp" => Ok(vec![Tensor::scalar(true)]),
            "AssignVariableOp" => {
                *var = value()?;
                Ok(Vec::new())
            }
            "AssignAddVariableOp" | "AssignSubVariableOp" => {
                let k = if op == "AssignAddVariableOp" { "AddV2" } else { "Sub" };
                *var = crate::exec::run_kernel(k, attrs, &[var.clone(), value()?])?.remove(0);
                Ok(Vec::new())
            }
            _ => Err(KernelError::invalid(op, "this variable op inside a function body is not lowered to StableHLO")),
        }
    };
    let results = control_flow::call(&node.op, &node.attrs, args, &lib.host, &device, &|| false)
        .map_err(|e| lowering(graph, id, e.to_string()))?;
    Ok((results, state.into_inner(), peaks.into_inner()))
}

/// Whether a function returns its variables' final values after its results.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Finals {
    /// No (a `While` body returns them in the variables' own slots).
    InPlace,
    /// Yes (`If`, `Case`, calls).
    Append,
}

/// A symbol MLIR accepts without quotes.
fn symbol(name: &str, k: usize) -> String {
    let clean: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    format!("f_{clean}_{k}")
}

/// Prints function `name` specialised to `args` (once), returning its
/// symbol and result types.
///
/// Arguments marked in `resource` are variables: `args` holds their values,
/// the body's variable ops use them, a result that passes such an argument
/// through returns the variable's final value, and with
/// [`Finals::Append`] every variable's final value follows the results.
pub(super) fn define(
    lib: &Library,
    name: &str,
    args: &[Tensor],
    resource: &[bool],
    finals: Finals,
    replicas: usize,
) -> Result<(String, Vec<Ty>), XlaError> {
    let arg_types: Vec<Ty> = args.iter().map(Ty::of).collect();
    let mask: String = resource.iter().map(|&r| if r { 'r' } else { 'v' }).collect();
    let key = (
        name.to_string(),
        format!("{}|{mask}|{finals:?}", arg_types.iter().map(Ty::mlir).collect::<Vec<_>>().join(",")),
    );
    if let Some(found) = lib.defs.borrow().names.get(&key) {
        return Ok(found.clone());
    }
    let graph = *lib.graphs.get(name).ok_or_else(|| XlaError::UnsupportedGraph {
        message: format!("a call names function `{name}`, which the module does not have"),
    })?;
    let bad = |m: String| XlaError::UnsupportedGraph { message: format!("function `{name}`: {m}") };
    let sig = fns::signature(graph).map_err(bad)?;
    if sig.args.len() != args.len() {
        return Err(bad(format!("takes {} arguments, the call passes {}", sig.args.len(), args.len())));
    }
    let mut roots = Vec::new();
    let mut arg_nodes = vec![None; sig.args.len()];
    let mut ret_inputs = vec![None; sig.rets.len()];
    for id in graph.node_ids() {
        let node = graph.node(id);
        let slot = node.attrs.get_int("index").and_then(|k| usize::try_from(k).ok()).unwrap_or(0);
        match &*node.op {
            ARG_OP => arg_nodes[slot] = Some(id),
            RETVAL_OP => {
                roots.push(id);
                let input = graph.data_inputs(id).first().map(|i| (i.src, i.output.unwrap_or(0)));
                ret_inputs[slot] = Some(input.ok_or_else(|| bad(format!("result {slot} reads nothing")))?);
            }
            _ => {}
        }
    }
    let arg_nodes: Vec<NodeId> = arg_nodes
        .into_iter()
        .enumerate()
        .map(|(i, a)| a.ok_or_else(|| bad(format!("no `_Arg` {i}"))))
        .collect::<Result<_, _>>()?;
    let ret_inputs: Vec<(NodeId, u32)> = ret_inputs
        .into_iter()
        .enumerate()
        .map(|(i, r)| r.ok_or_else(|| bad(format!("no `_Retval` {i}"))))
        .collect::<Result<_, _>>()?;
    // The nodes the results and control outputs need, in dependency order
    // (depth first from the `_Retval` nodes, control edges included).
    // The control outputs run although no result needs them (TensorFlow's `control_ret`).
    let control_outputs = graph.attrs.get(fns::CONTROL_OUTPUTS_ATTR).and_then(AttrValue::as_list).unwrap_or_default();
    for name in control_outputs.iter().filter_map(AttrValue::as_str) {
        roots.push(graph.find(name).ok_or_else(|| bad(format!("control output `{name}` is not a node")))?);
    }
    let mut order = crate::ir::walk::post_order(graph, roots.iter().copied(), |_, _| true);
    // A `NoOp` only orders the body's effects, which the walk has already ordered.
    order.retain(|&id| !matches!(&*graph.node(id).op, ARG_OP | RETVAL_OP | "NoOp"));
    // A result that passes a variable argument through returns its final value.
    let program = Program {
        nodes: order,
        args: arg_nodes
            .iter()
            .zip(resource)
            .map(|(&id, &r)| if r { ArgSource::Variable(id) } else { ArgSource::Host(id, 0) })
            .collect(),
        outputs: Vec::new(),
        carried: Vec::new(),
        stage: 0,
        stages: 1,
        calls: Vec::new(),
    };
    let traced = trace::trace(graph, &program, args, lib)?;
    let mut ctx = Ctx::default();
    ctx.indent = 2;
    let (params, sig_text) = Val::params(&mut ctx, &arg_types);
    let mut env = HashMap::new();
    let mut vars = HashMap::new();
    for ((&id, p), &r) in arg_nodes.iter().zip(&params).zip(resource) {
        if r {
            vars.insert(id, p.clone());
        } else {
            env.insert((id, 0), p.clone());
        }
    }
    let mut emitter = Emitter { graph, traced: &traced, env, vars, replicas, partitions: 1, lib };
    for &id in &program.nodes {
        emitter.node(&mut ctx, id)?;
    }
    let mut results = Vec::with_capacity(ret_inputs.len());
    for &k in &ret_inputs {
        results.push(match emitter.vars.get(&k.0) {
            Some(v) => v.clone(),
            None => emitter.value(&mut ctx, k)?,
        });
    }
    for ((&id, &r), ty) in arg_nodes.iter().zip(resource).zip(&arg_types) {
        if !r {
            continue;
        }
        let v = emitter.vars[&id].clone();
        if &v.ty != ty {
            return Err(bad(format!(
                "variable argument {} changes type from {} to {}",
                graph.node(id).name,
                ty.mlir(),
                v.ty.mlir()
            )));
        }
        if finals == Finals::Append {
            results.push(v);
        }
    }
    let result_types: Vec<Ty> = results.iter().map(|v| v.ty.clone()).collect();
    let mlir: Vec<String> = result_types.iter().map(Ty::mlir).collect();
    let sym = {
        let defs = lib.defs.borrow();
        symbol(name, defs.texts.len())
    };
    let names: Vec<&str> = results.iter().map(|v| v.name.as_str()).collect();
    let text = format!(
        "  func.func private @{sym}({}) -> ({}) {{\n{}    \"func.return\"({}) : ({}) -> ()\n  }}\n",
        sig_text,
        mlir.join(", "),
        ctx.text,
        names.join(", "),
        mlir.join(", ")
    );
    let mut defs = lib.defs.borrow_mut();
    defs.texts.push(text);
    defs.names.insert(key, (sym.clone(), result_types.clone()));
    Ok((sym, result_types))
}

/// `"func.call"` of `sym` on `args`, returning its results.
pub(super) fn call(c: &mut Ctx, sym: &str, args: &[Val], results: &[Ty]) -> Vec<Val> {
    let names: Vec<&str> = args.iter().map(|v| v.name.as_str()).collect();
    let types: Vec<String> = args.iter().map(|v| v.ty.mlir()).collect();
    let outs: Vec<String> = results.iter().map(Ty::mlir).collect();
    let head = format!(
        "\"func.call\"({}) {{callee = @{sym}}} : ({}) -> ({})",
        names.join(", "),
        types.join(", "),
        outs.join(", ")
    );
    if results.is_empty() {
        c.line(&head);
        return Vec::new();
    }
    let r = c.fresh();
    match leaf_count(results) {
        1 => c.line(&format!("{r} = {head}")),
        n => c.line(&format!("{r}:{n} = {head}")),
    }
    Val::results(&r, results)
}

/// A predicate or index as the scalar `stablehlo.while`/`if`/`case` want:
/// a one-element tensor reshaped to a scalar, then `!= 0` (`pred`) or
/// converted to i32 (index).
fn scalar(c: &mut Ctx, v: &Val, want: DType) -> Result<Val, String> {
    if v.ty.count() != 1 {
        return Err(format!("the predicate or index must have one element, not shape {:?}", v.ty.shape));
    }
    let v = if v.ty.shape.is_empty() { v.clone() } else { c.reshape(v, Vec::new()) };
    Ok(match (want, v.ty.dtype) {
        (DType::Bool, DType::Bool) | (DType::I32, DType::I32) => v,
        (DType::Bool, _) => {
            let zero = c.splat(&v.ty, 0.0);
            c.compare(&v, &zero, Cmp::Ne)
        }
        (_, _) => c.convert(&v, want),
    })
}

/// The block `^bb0(args):` of a region, with fresh argument names.
pub(super) fn block(c: &mut Ctx, types: &[Ty]) -> (String, Vec<Val>) {
    let (vals, head) = Val::params(c, types);
    (format!("^bb0({head}):"), vals)
}

/// `"stablehlo.return"(vals)`.
pub(super) fn ret(c: &mut Ctx, vals: &[Val]) {
    let names: Vec<&str> = vals.iter().map(|v| v.name.as_str()).collect();
    let types: Vec<String> = vals.iter().map(|v| v.ty.mlir()).collect();
    c.line(&format!("\"stablehlo.return\"({}) : ({}) -> ()", names.join(", "), types.join(", ")));
}

/// An empty Optional whose device value has components (another branch
/// set them) traces as one holding zeros of those types, so a branch that
/// reads it (and does not run when it is empty) can be traced.
fn typed_optional(t: Tensor, ty: &Ty) -> Result<Tensor, String> {
    use crate::exec::variant::Variant;
    if !matches!(t.as_variant(), Some(Variant::Optional(None))) || ty.parts.len() < 2 {
        return Ok(t);
    }
    let mut parts = Vec::with_capacity(ty.parts.len() - 1);
    for p in &ty.parts[1..] {
        let dims = Tensor::vector(p.shape.iter().map(|&d| d as i64).collect::<Vec<i64>>());
        let zero = crate::exec::run_kernel("Fill", &crate::ir::AttrMap::default(), &[dims, Tensor::scalar(0f32)])
            .map_err(|e| e.to_string())?
            .remove(0);
        let mut attrs = crate::ir::AttrMap::default();
        attrs.insert("DstT", AttrValue::Type(p.dtype));
        parts.push(crate::exec::run_kernel("Cast", &attrs, &[zero]).map_err(|e| e.to_string())?.remove(0));
    }
    Ok(Tensor::Variant(std::sync::Arc::new(Variant::Optional(Some(parts)))))
}

/// The result types of a conditional's branches, each Optional with the
/// components some branch gives it.
fn joined_types<'t>(mut branches: impl Iterator<Item = &'t [Ty]>) -> Vec<Ty> {
    let mut all: Vec<Ty> = branches.next().map(<[Ty]>::to_vec).unwrap_or_default();
    for tys in branches {
        for (a, t) in all.iter_mut().zip(tys) {
            if a.is_optional() && t.is_optional() && t.parts.len() > a.parts.len() {
                *a = t.clone();
            }
        }
    }
    all
}

/// `tys` with each empty Optional given the components of its `all` type.
fn join_optionals(tys: &[Ty], all: &[Ty]) -> Vec<Ty> {
    tys.iter().zip(all).map(|(t, a)| if t.is_optional() && a.is_optional() { a.clone() } else { t.clone() }).collect()
}

/// A region that calls `sym` on `args` (values of the enclosing function)
/// and returns its results as the types `want`: an empty Optional gets zero components.
fn call_region(c: &mut Ctx, sym: &str, args: &[Val], results: &[Ty], want: &[Ty]) -> String {
    let mut r = c.scratch();
    let mut out = call(&mut r, sym, args, results);
    for (v, w) in out.iter_mut().zip(want) {
        if v.ty != *w && v.ty.is_optional() && w.is_optional() {
            let mut parts = v.parts();
            parts.truncate(1);
            for t in &w.parts[1..] {
                parts.push(r.splat(t, 0.0));
            }
            *v = Val::composite(&parts);
        }
    }
    ret(&mut r, &out);
    c.resume(&r);
    format!("{{\n{}}}", r.text)
}

/// The functions a call op names, in order.
fn branches(graph: &Graph, id: NodeId, keys: &[&str]) -> Result<Vec<String>, XlaError> {
    let node = graph.node(id);
    let mut out = Vec::new();
    for key in keys {
        match node.attrs.get(key) {
            Some(AttrValue::Func(f)) => out.push(f.name.to_string()),
            Some(AttrValue::List(items)) => {
                for item in items {
                    let AttrValue::Func(f) = item else {
                        return Err(lowering(graph, id, format!("`{key}` holds a non-function")));
                    };
                    out.push(f.name.to_string());
                }
            }
            _ => return Err(lowering(graph, id, format!("has no function attribute `{key}`"))),
        }
    }
    Ok(out)
}

impl Emitter<'_> {
    /// Emits call op `id` (`While`, `If`, `Case`, `PartitionedCall`, …).
    pub(crate) fn call_op(&mut self, ctx: &mut Ctx, id: NodeId) -> Result<(), XlaError> {
        let graph = self.graph;
        let lib = self.lib;
        let op = &*graph.node(id).op;
        let kind = call_kind(op).ok_or_else(|| lowering(graph, id, "is not a call"))?;
        let inputs = graph.data_inputs(id);
        let mut vals = Vec::with_capacity(inputs.len());
        let mut traced = Vec::with_capacity(inputs.len());
        // Variable operands: (operand, handle); they pass their current values.
        let mut handles: Vec<(usize, NodeId)> = Vec::new();
        for (i, input) in inputs.iter().enumerate() {
            let key = (input.src, input.output.unwrap_or(0));
            if let Some(v) = self.vars.get(&input.src) {
                let t = self.traced.call_vars.get(&(id, i)).cloned();
                traced.push(t.ok_or_else(|| lowering(graph, id, "a variable operand has no traced value"))?);
                vals.push(v.clone());
                handles.push((i, input.src));
                continue;
            }
            let t = self
                .traced
                .values
                .get(&key)
                .and_then(|t| t.value.clone())
                .ok_or_else(|| lowering(graph, id, "an operand has no traced value"))?;
            let v = self.value(ctx, key)?;
            traced.push(typed_optional(t, &v.ty).map_err(|m| lowering(graph, id, m))?);
            vals.push(v);
        }
        let resource: Vec<bool> = (0..inputs.len()).map(|i| handles.iter().any(|&(k, _)| k == i)).collect();
        // The op's result types; a variable passed through a result has its value's type.
        let mut expected: Vec<Ty> = Vec::new();
        for (o, t) in (0u32..).map_while(|o| self.traced.values.get(&(id, o)).map(|t| (o, t))) {
            let ty = match (t.value.as_ref(), kind) {
                (Some(Tensor::Resource(_)), CallKind::While) => vals
                    .get(o as usize)
                    .map(|v| v.ty.clone())
                    .ok_or_else(|| lowering(graph, id, "a variable result has no operand"))?,
                (Some(Tensor::Resource(_)), _) => {
                    return Err(lowering(graph, id, "returns a variable handle, which is not lowered"))
                }
                _ => t.ty.clone(),
            };
            expected.push(ty);
        }
        let check = |what: &str, got: &[Ty]| {
            if got.get(..expected.len()) != Some(expected.as_slice()) {
                let show = |t: &[Ty]| t.iter().map(Ty::mlir).collect::<Vec<_>>().join(", ");
                return Err(lowering(
                    graph,
                    id,
                    format!("{what} returns ({}) but the op's results are ({})", show(got), show(&expected)),
                ));
            }
            Ok(())
        };
        let n = expected.len();
        // Results past the op's own: the variables' final values (If, Case, calls).
        let mut finals_at: Vec<NodeId> = Vec::new();
        let results = match kind {
            CallKind::Apply => {
                if !handles.is_empty() {
                    return Err(lowering(graph, id, "a variable operand, which this op does not take"));
                }
                let consts = inputs
                    .iter()
                    .map(|i| {
                        let t = self.traced.values.get(&(i.src, i.output.unwrap_or(0)));
                        t.filter(|t| t.constant).and_then(|t| t.value.clone())
                    })
                    .collect();
                let apply = Apply { graph, id, lib, vals: &vals, consts, out: &expected, replicas: self.replicas };
                super::ops::xla_fn::apply(ctx, &apply)?
            }
            CallKind::Call => {
                let f = branches(graph, id, &[fns::called_function_attr(op)])?.remove(0);
                let (sym, tys) = define(lib, &f, &traced, &resource, Finals::Append, self.replicas)?;
                check(&format!("`{f}`"), &tys)?;
                finals_at = handles.iter().map(|&(_, h)| h).collect();
                call(ctx, &sym, &vals, &tys)
            }
            CallKind::While => {
                self.flows_as_lists(ctx, id, &mut traced, &mut vals)?;
                let names = branches(graph, id, &["cond", "body"])?;
                let (cond, ctys) = define(lib, &names[0], &traced, &resource, Finals::InPlace, self.replicas)?;
                let (body, btys) = define(lib, &names[1], &traced, &resource, Finals::InPlace, self.replicas)?;
                let carried: Vec<Ty> = vals.iter().map(|v| v.ty.clone()).collect();
                if btys != carried {
                    let show = |t: &[Ty]| t.iter().map(Ty::mlir).collect::<Vec<_>>().join(", ");
                    return Err(lowering(
                        graph,
                        id,
                        format!(
                            "loop-carried shapes must be invariant: the loop enters with ({}) and the body `{}` returns ({})",
                            show(&carried),
                            names[1],
                            show(&btys)
                        ),
                    ));
                }
                check(&format!("`{}`", names[1]), &btys)?;
                let mut cr = ctx.scratch();
                let (head, args) = block(&mut cr, &carried);
                cr.line(&head);
                let p = call(&mut cr, &cond, &args, &ctys);
                let p = p.first().ok_or_else(|| lowering(graph, id, format!("`{}` returns nothing", names[0])))?;
                let p = scalar(&mut cr, p, DType::Bool).map_err(|m| lowering(graph, id, m))?;
                ret(&mut cr, &[p]);
                let (head, args) = block(&mut cr, &carried);
                let mut br = cr.scratch();
                br.line(&head);
                let out = call(&mut br, &body, &args, &btys);
                ret(&mut br, &out);
                ctx.resume(&br);
                let regions = [format!("{{\n{}}}", cr.text), format!("{{\n{}}}", br.text)];
                let refs: Vec<&Val> = vals.iter().collect();
                let out = self.multi(ctx, "stablehlo.while", &refs, &regions, &carried);
                // A variable's slot carries its final value.
                for &(i, h) in &handles {
                    self.vars.insert(h, out[i].clone());
                }
                out
            }
            CallKind::If | CallKind::Case => {
                let keys: &[&str] = if kind == CallKind::If { &["then_branch", "else_branch"] } else { &["branches"] };
                let names = branches(graph, id, keys)?;
                if resource.first() == Some(&true) {
                    return Err(lowering(graph, id, "the predicate or index is a variable handle"));
                }
                let selector = vals.first().ok_or_else(|| lowering(graph, id, "has no predicate or index"))?;
                let selector = if kind == CallKind::If {
                    scalar(ctx, selector, DType::Bool)
                } else {
                    scalar(ctx, selector, DType::I32)
                }
                .map_err(|m| lowering(graph, id, m))?;
                let mut defined = Vec::with_capacity(names.len());
                for name in &names {
                    defined.push(define(lib, name, &traced[1..], &resource[1..], Finals::Append, self.replicas)?);
                }
                // An Optional a branch leaves empty takes its components' types from the others.
                let all = joined_types(defined.iter().map(|(_, t)| t.as_slice()));
                let mut regions = Vec::with_capacity(names.len());
                for (name, (sym, tys)) in names.iter().zip(&defined) {
                    // The traced results fix every type but an Optional's components.
                    let padded = join_optionals(tys, &all);
                    let seen: Vec<Ty> = padded
                        .iter()
                        .zip(&expected)
                        .map(|(p, e)| if e.is_optional() && p.is_optional() { e.clone() } else { p.clone() })
                        .collect();
                    check(&format!("branch `{name}`"), &seen)?;
                    if padded != all {
                        return Err(lowering(
                            graph,
                            id,
                            format!("branch `{name}` returns other types than the others"),
                        ));
                    }
                    regions.push(call_region(ctx, sym, &vals[1..], tys, &all));
                }
                finals_at = handles.iter().map(|&(_, h)| h).collect();
                // `stablehlo.if` takes the true branch first, as TensorFlow's `then_branch`.
                let name = if kind == CallKind::If { "stablehlo.if" } else { "stablehlo.case" };
                self.multi(ctx, name, &[&selector], &regions, &all)
            }
        };
        for (h, v) in finals_at.into_iter().zip(results.iter().skip(n)) {
            self.vars.insert(h, v.clone());
        }
        let results: Vec<Val> = results.into_iter().take(n).collect();
        for (i, v) in results.into_iter().enumerate() {
            self.env.insert((id, i as u32), v);
        }
        Ok(())
    }

    /// A TensorArray's flow a `While` carries that enters as a float (a
    /// constant zero: TensorFlow's gradient accumulator of a flow) and
    /// leaves as a TensorList (the host trace added the loop's flows to it)
    /// enters as the zero list of the result's length and element type:
    /// the simulator's list plus zero is that list, and the loop-carried
    /// type stays one. Other operands are left as they are.
    fn flows_as_lists(
        &self,
        ctx: &mut Ctx,
        id: NodeId,
        traced: &mut [Tensor],
        vals: &mut [Val],
    ) -> Result<(), XlaError> {
        use crate::exec::variant::{TensorList, Variant};
        let graph = self.graph;
        for (k, (t, v)) in traced.iter_mut().zip(vals.iter_mut()).enumerate() {
            let result = self.traced.values.get(&(id, k as u32)).and_then(|r| r.value.as_ref());
            let Some(Variant::List(out)) = result.and_then(Tensor::as_variant) else { continue };
            if t.dtype() != DType::F32 || !t.to_vec::<f32>().is_some_and(|x| x.iter().all(|&e| e == 0.0)) {
                continue;
            }
            let zero = TensorList { items: vec![None; out.items.len()], ..out.clone() };
            let ty = super::lists::list_type(&zero);
            let size = i32::try_from(zero.items.len()).map_err(|_| lowering(graph, id, "a flow's list is too long"))?;
            let buffer = ctx.splat(&ty.parts[0], 0.0);
            let size = ctx.constant(&Tensor::scalar(size));
            *v = Val::composite(&[buffer, size]);
            *t = Tensor::Variant(std::sync::Arc::new(Variant::List(zero)));
        }
        Ok(())
    }

    /// An op with regions and any number of results (none included).
    fn multi(&self, ctx: &mut Ctx, name: &str, operands: &[&Val], regions: &[String], results: &[Ty]) -> Vec<Val> {
        if results.is_empty() {
            let names: Vec<&str> = operands.iter().map(|v| v.name.as_str()).collect();
            let types: Vec<String> = operands.iter().map(|v| v.ty.mlir()).collect();
            let regions: Vec<String> = regions.iter().map(|g| ctx.indent_block(g)).collect();
            ctx.line(&format!(
                "\"{name}\"({}) ({}) : ({}) -> ()",
                names.join(", "),
                regions.join(", "),
                types.join(", ")
            ));
            return Vec::new();
        }
        ctx.op_regions(name, operands, regions, "", results)
    }
}
