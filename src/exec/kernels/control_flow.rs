//! Functional control flow: `While`, `If`, `Case` and the call ops run
//! their functions (graphs of the module with `role = "function"`, see
//! [`crate::ir::functions`]) with a small interpreter; the `TensorList*`
//! and `Optional*` ops that carry loop accumulators and `tf.cond`
//! intermediates are pure kernels on [`Variant`] values.
//!
//! A call runs in the worker that meets it: the mesh hands it the
//! module's [`Functions`]. A function body runs its nodes in a topological
//! order, only those its results depend on, each through [`super::run_kernel`]
//! or, for a nested call, through [`call`]. Ops with state (variables) or
//! communication cannot run inside a function body here and fail with
//! [`KernelError::NeedsDevice`], except the variable ops of
//! [`BODY_DEVICE_OPS`] and the optimizer updates (`ResourceApply*`, as a
//! loss-scaled optimizer applies them under a finiteness `If`), which the
//! caller's device runs (a [`Device`] hook): that is what TensorFlow's
//! stateful `While` and `If` carry. A `While` runs its `cond` and `body` once
//! per iteration, so its cost is the iterations times the body's size; a
//! loop over [`MAX_ITERATIONS`] is stopped with an error. A function's
//! argument declared `f32` may be a TensorArray's flow and one declared
//! `resource` its handle, in the simulator's form of the array
//! (`tensor_array`): a functionalized TF1 loop carries them so.

use std::collections::HashMap;
use std::sync::Arc;

use ndarray::{ArrayD, IxDyn};

use super::{arg, Tensor};
use crate::exec::error::KernelError;
use crate::exec::tensor::Element;
use crate::exec::variant::{TensorList, Variant};
use crate::ir::functions::{self, call_kind, CallKind, ARG_OP, RETVAL_OP};
use crate::ir::{AttrMap, AttrValue, DType, Graph, Module};

/// The most iterations one `While` may run before it is stopped.
pub const MAX_ITERATIONS: u64 = 10_000_000;

/// The deepest nesting of calls (a function calling itself would
/// otherwise overflow the stack).
pub const MAX_CALL_DEPTH: usize = 64;

thread_local! {
    /// The calls running on this thread, for [`MAX_CALL_DEPTH`].
    static DEPTH: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Counts one call while it runs.
struct DepthGuard;

impl DepthGuard {
    fn enter(name: &str) -> Result<DepthGuard, KernelError> {
        let depth = DEPTH.with(|d| d.get());
        if depth >= MAX_CALL_DEPTH {
            return Err(KernelError::invalid(
                "call",
                format!("calls nest deeper than {MAX_CALL_DEPTH} at `@{name}` (a function calling itself?)"),
            ));
        }
        DEPTH.with(|d| d.set(depth + 1));
        Ok(DepthGuard)
    }
}

impl Drop for DepthGuard {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

/// The pure `TensorList*` and `Optional*` kernels, sorted.
pub const VARIANT_OPS: &[&str] = &[
    "EmptyTensorList",
    "OptionalFromValue",
    "OptionalGetValue",
    "OptionalHasValue",
    "OptionalNone",
    "TensorListConcatV2",
    "TensorListElementShape",
    "TensorListFromTensor",
    "TensorListGather",
    "TensorListGetItem",
    "TensorListLength",
    "TensorListPopBack",
    "TensorListPushBack",
    "TensorListReserve",
    "TensorListResize",
    "TensorListScatterIntoExistingList",
    "TensorListSetItem",
    "TensorListSplit",
    "TensorListStack",
];

/// Device ops a function body may hold: the caller's device runs them on
/// its variables (a loop that reads or updates a variable).
pub const BODY_DEVICE_OPS: &[&str] = &[
    "AssignAddVariableOp",
    "AssignSubVariableOp",
    "AssignVariableOp",
    "ReadVariableOp",
    "ResourceGather",
    "StackCloseV2",
    "StackPopV2",
    "StackPushV2",
    "StackV2",
    "VarIsInitializedOp",
];

/// Runs a device op of [`BODY_DEVICE_OPS`] for a function body.
pub type Device<'a> = &'a dyn Fn(&str, &AttrMap, Vec<Tensor>) -> Result<Vec<Tensor>, KernelError>;

/// Whether the step a call runs in was cancelled (a failure elsewhere, or
/// its deadline): a `While` looks before every iteration.
pub type Cancelled<'a> = &'a dyn Fn() -> bool;

/// Ops the mesh runs with the module's functions: the calls, and the
/// argument and result nodes of a function body.
pub fn is_call_op(op: &str) -> bool {
    call_kind(op).is_some() || op == ARG_OP || op == RETVAL_OP
}

/// True when this file has a kernel for `op`.
pub fn has_kernel(op: &str) -> bool {
    is_call_op(op) || VARIANT_OPS.contains(&op) || super::tensor_array::OPS.contains(&op)
}

// ---------------------------------------------------------------- functions

/// One node of a compiled function body.
#[derive(Debug)]
struct Step {
    op: Arc<str>,
    attrs: AttrMap,
    /// Data inputs: (step, output).
    inputs: Vec<(usize, u32)>,
}

/// A function body, compiled for the interpreter: the steps its results
/// and its control outputs need, in a topological order.
#[derive(Debug)]
struct Body {
    steps: Vec<Step>,
    /// The step of argument `i` (`None`: the argument is never used) and its dtype.
    args: Vec<(Option<usize>, Option<DType>)>,
    /// The (step, output) of result `j`.
    rets: Vec<(usize, u32)>,
}

/// The functions of a module, compiled once when the mesh is built.
#[derive(Debug, Default)]
pub struct Functions {
    bodies: HashMap<String, Body>,
}

impl Functions {
    /// Compiles every function of `module`. Fails on a malformed function
    /// (argument or result indices, a result without its input, a cycle).
    pub fn from_module(module: &Module) -> Result<Functions, KernelError> {
        let mut bodies = HashMap::new();
        for f in functions::functions(module) {
            bodies.insert(f.name.clone(), compile(f)?);
        }
        Ok(Functions { bodies })
    }

    /// Runs function `name` on `args`, returning its results; `device`
    /// runs the variable ops of the body.
    pub fn run(
        &self,
        name: &str,
        args: Vec<Tensor>,
        device: Device<'_>,
        cancelled: Cancelled<'_>,
    ) -> Result<Vec<Tensor>, KernelError> {
        let _depth = DepthGuard::enter(name)?;
        let body = self
            .bodies
            .get(name)
            .ok_or_else(|| KernelError::invalid("call", format!("the module has no function `@{name}`")))?;
        if args.len() != body.args.len() {
            return Err(KernelError::invalid(
                "call",
                format!("`@{name}` takes {} argument(s), got {}", body.args.len(), args.len()),
            ));
        }
        let mut values: Vec<Option<Vec<Tensor>>> = (0..body.steps.len()).map(|_| None).collect();
        for (i, (t, &(step, dtype))) in args.into_iter().zip(&body.args).enumerate() {
            if let Some(d) = dtype.filter(|&d| !stands_for(d, &t)) {
                return Err(KernelError::dtype(
                    "call",
                    t.dtype(),
                    format!("argument {i} of `@{name}` is {d}, got {}", t.dtype()),
                ));
            }
            if let Some(step) = step {
                values[step] = Some(vec![t]);
            }
        }
        for (i, step) in body.steps.iter().enumerate() {
            if values[i].is_some() {
                continue;
            }
            let inputs = step
                .inputs
                .iter()
                .map(|&(src, out)| {
                    values[src].as_ref().and_then(|v| v.get(out as usize)).cloned().ok_or_else(|| {
                        KernelError::invalid(&step.op, format!("in `@{name}`: input from output {out} is missing"))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            let out = match &*step.op {
                RETVAL_OP => inputs,
                op if call_kind(op).is_some() => call(op, &step.attrs, inputs, self, device, cancelled)?,
                op if BODY_DEVICE_OPS.contains(&op) || super::optimizers::resource_inputs(op).is_some() => {
                    device(op, &step.attrs, inputs)?
                }
                op => super::run_kernel(op, &step.attrs, &inputs)?,
            };
            values[i] = Some(out);
        }
        body.rets
            .iter()
            .map(|&(step, out)| {
                values[step].as_ref().and_then(|v| v.get(out as usize)).cloned().ok_or_else(|| {
                    KernelError::invalid("call", format!("`@{name}` did not compute its result from output {out}"))
                })
            })
            .collect()
    }
}

/// Compiles a function graph: finds its arguments and results, keeps the
/// nodes the results need and orders them (Kahn's algorithm).
fn compile(graph: &Graph) -> Result<Body, KernelError> {
    let bad = |m: String| KernelError::invalid("call", format!("function `@{}`: {m}", graph.name));
    let sig = functions::signature(graph).map_err(bad)?;
    let ids = graph.nodes_in_order();
    let index: HashMap<_, usize> = ids.iter().enumerate().map(|(i, &id)| (id, i)).collect();
    // Producers (data and control) of every node.
    let preds: Vec<Vec<usize>> =
        ids.iter().map(|&id| graph.inputs(id).iter().map(|x| index[&x.src]).collect()).collect();
    let mut args = vec![(None, None); sig.args.len()];
    let mut rets = vec![None; sig.rets.len()];
    let mut needed = vec![false; ids.len()];
    let mut stack = Vec::new();
    for (i, &id) in ids.iter().enumerate() {
        let node = graph.node(id);
        let slot = node.attrs.get_int("index").and_then(|k| usize::try_from(k).ok()).unwrap_or(0);
        match &*node.op {
            ARG_OP => args[slot] = (Some(i), sig.args[slot]),
            RETVAL_OP => {
                rets[slot] = Some(i);
                stack.push(i);
            }
            _ => {}
        }
    }
    // The control outputs run although no result needs them (TensorFlow's `control_ret`).
    let control_outputs =
        graph.attrs.get(functions::CONTROL_OUTPUTS_ATTR).and_then(AttrValue::as_list).unwrap_or_default();
    for name in control_outputs.iter().filter_map(AttrValue::as_str) {
        let id = graph.find(name).ok_or_else(|| bad(format!("control output `{name}` is not a node")))?;
        stack.push(index[&id]);
    }
    while let Some(i) = stack.pop() {
        if !std::mem::replace(&mut needed[i], true) {
            stack.extend(preds[i].iter().copied());
        }
    }
    // Kahn's algorithm over the needed nodes, in text order among the ready ones.
    let mut remaining: Vec<usize> = (0..ids.len()).map(|i| preds[i].iter().filter(|&&p| needed[p]).count()).collect();
    let mut succs: Vec<Vec<usize>> = vec![Vec::new(); ids.len()];
    for i in (0..ids.len()).filter(|&i| needed[i]) {
        for &p in &preds[i] {
            succs[p].push(i);
        }
    }
    let mut ready: std::collections::BTreeSet<usize> =
        (0..ids.len()).filter(|&i| needed[i] && remaining[i] == 0).collect();
    let mut order = Vec::new();
    while let Some(i) = ready.pop_first() {
        order.push(i);
        for &s in &succs[i] {
            remaining[s] -= 1;
            if remaining[s] == 0 {
                ready.insert(s);
            }
        }
    }
    if order.len() != needed.iter().filter(|&&n| n).count() {
        return Err(bad("its nodes form a cycle".into()));
    }
    let position: HashMap<usize, usize> = order.iter().enumerate().map(|(k, &i)| (i, k)).collect();
    let steps = order
        .iter()
        .map(|&i| {
            let id = ids[i];
            let node = graph.node(id);
            let inputs =
                graph.inputs(id).iter().filter_map(|x| x.output.map(|o| (position[&index[&x.src]], o))).collect();
            Step { op: node.op.clone(), attrs: node.attrs.clone(), inputs }
        })
        .collect();
    let args = args.into_iter().map(|(step, d)| (step.and_then(|i| position.get(&i).copied()), d)).collect();
    let rets = rets
        .into_iter()
        .enumerate()
        .map(|(j, r)| {
            let step = r.map(|i| position[&i]).ok_or_else(|| bad(format!("result {j} has no `_Retval`")))?;
            Ok((step, 0))
        })
        .collect::<Result<Vec<_>, KernelError>>()?;
    Ok(Body { steps, args, rets })
}

/// The function an attribute names.
fn func<'a>(op: &str, attrs: &'a AttrMap, key: &str) -> Result<&'a str, KernelError> {
    match attrs.get(key) {
        Some(AttrValue::Func(f)) => Ok(&f.name),
        _ => Err(KernelError::invalid(op, format!("missing function attribute `{key}`"))),
    }
}

/// The truth of a predicate as TensorFlow reads it: a scalar is true when
/// non-zero, any other tensor when it has elements.
fn truth(op: &str, t: &Tensor) -> Result<bool, KernelError> {
    if !t.shape().is_empty() {
        return Ok(!t.is_empty());
    }
    Ok(match t {
        Tensor::Bool(a) => a.iter().any(|&b| b),
        Tensor::I32(a) => a.iter().any(|&x| x != 0),
        Tensor::I64(a) => a.iter().any(|&x| x != 0),
        Tensor::F32(a) => a.iter().any(|&x| x != 0.0),
        Tensor::F64(a) => a.iter().any(|&x| x != 0.0),
        other => return Err(KernelError::dtype(op, other.dtype(), "the predicate must be bool or numeric")),
    })
}

/// Runs call op `op` (`While`, `If`, `Case`, `PartitionedCall`, their
/// stateless and stateful forms, the XLA ops that apply functions) on
/// `inputs` with the module's functions.
pub fn call(
    op: &str,
    attrs: &AttrMap,
    inputs: Vec<Tensor>,
    functions: &Functions,
    device: Device<'_>,
    cancelled: Cancelled<'_>,
) -> Result<Vec<Tensor>, KernelError> {
    let in_op = |e: KernelError| match e {
        KernelError::InvalidArgument { op: o, message } if o == "call" => KernelError::invalid(op, message),
        other => other,
    };
    match call_kind(op) {
        Some(CallKind::While) => {
            let (cond, body) = (func(op, attrs, "cond")?, func(op, attrs, "body")?);
            let mut vars = inputs;
            for _ in 0..MAX_ITERATIONS {
                if cancelled() {
                    return Err(KernelError::invalid(op, "the step was cancelled"));
                }
                let c = functions.run(cond, vars.clone(), device, cancelled).map_err(in_op)?;
                if !truth(op, arg(op, &c, 0)?)? {
                    return Ok(vars);
                }
                vars = functions.run(body, vars, device, cancelled).map_err(in_op)?;
            }
            Err(KernelError::invalid(op, format!("the loop ran {MAX_ITERATIONS} iterations without ending")))
        }
        Some(CallKind::If) => {
            let pred = truth(op, arg(op, &inputs, 0)?)?;
            let branch = func(op, attrs, if pred { "then_branch" } else { "else_branch" })?;
            functions.run(branch, inputs[1..].to_vec(), device, cancelled).map_err(in_op)
        }
        Some(CallKind::Case) => {
            let index = arg(op, &inputs, 0)?.to_i64_vec(op, "the branch index")?;
            let branches = attrs
                .get("branches")
                .and_then(AttrValue::as_list)
                .ok_or_else(|| KernelError::invalid(op, "missing list attribute `branches`"))?;
            // An index out of range takes the last branch, the default.
            let k = match index.first() {
                Some(&k) if k >= 0 && (k as usize) < branches.len() => k as usize,
                _ => branches.len().checked_sub(1).ok_or_else(|| KernelError::invalid(op, "no branches"))?,
            };
            let AttrValue::Func(f) = &branches[k] else {
                return Err(KernelError::invalid(op, format!("branch {k} is not a function")));
            };
            functions.run(&f.name, inputs[1..].to_vec(), device, cancelled).map_err(in_op)
        }
        Some(CallKind::Call) => {
            let key = functions::called_function_attr(op);
            if op == "SymbolicGradient" && !attrs.contains_key(key) {
                return Err(KernelError::invalid(
                    op,
                    "its gradient function was never made: the gradients pass (`tpu-rewrite run`, `rewrite`) makes it",
                ));
            }
            if op == "XlaCallModule" && !attrs.contains_key(key) {
                return Err(KernelError::invalid(
                    op,
                    "its StableHLO module was never raised into a function: `passes::xla_call_module` (`tpu-rewrite run`, `lower`) does it",
                ));
            }
            functions.run(func(op, attrs, key)?, inputs, device, cancelled).map_err(in_op)
        }
        Some(CallKind::Apply) => {
            let run = |name: &str, args: Vec<Tensor>| functions.run(name, args, device, cancelled).map_err(in_op);
            super::xla_fn::apply(op, attrs, &inputs, &run)
        }
        None => Err(KernelError::invalid(op, "`_Arg` and `_Retval` run only inside a function body")),
    }
}

/// Whether `t` may be a function's argument declared `declared`: a tensor of that dtype, or
/// the simulator's form of a TensorArray (see `tensor_array`), which a functionalized TF1 loop
/// carries with TensorFlow's declared types: its flow (f32 in TensorFlow) is the array's list,
/// its handle (a resource in TensorFlow) an `i32` scalar no kernel reads.
fn stands_for(declared: DType, t: &Tensor) -> bool {
    declared == t.dtype()
        || (declared == DType::F32 && matches!(t.as_variant(), Some(Variant::List(_))))
        || (declared == DType::Resource && t.dtype() == DType::I32 && t.shape().is_empty())
}

// ---------------------------------------------------------------- variants

pub(super) fn variant(t: Variant) -> Tensor {
    Tensor::Variant(Arc::new(t))
}

pub(super) fn list<'a>(op: &str, t: &'a Tensor) -> Result<&'a TensorList, KernelError> {
    match t.as_variant() {
        Some(Variant::List(l)) => Ok(l),
        _ => Err(KernelError::dtype(op, t.dtype(), "input 0 must be a TensorList")),
    }
}

pub(super) fn element_dtype(op: &str, attrs: &AttrMap) -> Result<DType, KernelError> {
    attrs
        .get("element_dtype")
        .and_then(AttrValue::as_type)
        .ok_or_else(|| KernelError::invalid(op, "missing dtype attribute `element_dtype`"))
}

/// An element shape operand: `-1` (a scalar) is an unknown rank.
pub(super) fn shape_operand(op: &str, t: &Tensor) -> Result<Option<Vec<i64>>, KernelError> {
    let dims = t.to_i64_vec(op, "element_shape")?;
    Ok(if t.shape().is_empty() && dims.first().is_some_and(|&d| d < 0) { None } else { Some(dims) })
}

/// A tensor of zeros (false for bool).
pub(super) fn zeros(op: &str, dtype: DType, shape: &[usize]) -> Result<Tensor, KernelError> {
    fn of<T: Element + Default>(shape: &[usize]) -> Tensor {
        Tensor::from_array(ArrayD::<T>::from_elem(IxDyn(shape), T::default()))
    }
    crate::exec::limits::checked_dims(op, dtype, &shape.iter().map(|&d| d as i64).collect::<Vec<_>>())?;
    Ok(match dtype.plain() {
        DType::F32 => of::<f32>(shape),
        DType::F64 => of::<f64>(shape),
        DType::I32 => of::<i32>(shape),
        DType::I64 => of::<i64>(shape),
        DType::Bool => of::<bool>(shape),
        DType::BF16 => of::<half::bf16>(shape),
        DType::F16 => of::<half::f16>(shape),
        DType::I8 => of::<i8>(shape),
        DType::U8 => of::<u8>(shape),
        DType::I16 => of::<i16>(shape),
        DType::U16 => of::<u16>(shape),
        DType::U32 => of::<u32>(shape),
        DType::U64 => of::<u64>(shape),
        DType::C64 => of::<num_complex::Complex32>(shape),
        DType::C128 => of::<num_complex::Complex64>(shape),
        other => return Err(KernelError::dtype(op, other, "no zeros of this dtype")),
    })
}

/// The fully known shape of a list's elements, merging the list's and an operand's.
fn known_shape(op: &str, l: &TensorList, operand: Option<&Tensor>) -> Result<Vec<usize>, KernelError> {
    let from_operand = operand.map(|t| shape_operand(op, t)).transpose()?.flatten();
    let dims =
        [from_operand, l.element_shape.clone()].into_iter().flatten().find(|d| d.iter().all(|&x| x >= 0)).ok_or_else(
            || KernelError::invalid(op, "an unset element of a list whose element shape is not fully known"),
        )?;
    Ok(dims.into_iter().map(|d| d as usize).collect())
}

fn index(op: &str, t: &Tensor, len: usize) -> Result<usize, KernelError> {
    let i = t.to_i64_vec(op, "index")?.first().copied().unwrap_or(-1);
    usize::try_from(i)
        .ok()
        .filter(|&i| i < len)
        .ok_or_else(|| KernelError::invalid(op, format!("index {i} is out of range for a list of {len}")))
}

fn check_item(op: &str, l: &TensorList, item: &Tensor) -> Result<(), KernelError> {
    if item.dtype() != l.element_dtype {
        return Err(KernelError::dtype(op, item.dtype(), format!("the list holds {}", l.element_dtype)));
    }
    Ok(())
}

/// Runs a `TensorList*` or `Optional*` kernel; `None` for other ops.
pub(crate) fn dispatch(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Option<Result<Vec<Tensor>, KernelError>> {
    if super::tensor_array::OPS.contains(&op) {
        return Some(super::tensor_array::kernel(op, attrs, inputs));
    }
    VARIANT_OPS.contains(&op).then(|| variant_kernel(op, attrs, inputs))
}

fn variant_kernel(op: &str, attrs: &AttrMap, inputs: &[Tensor]) -> Result<Vec<Tensor>, KernelError> {
    let x = |i: usize| arg(op, inputs, i);
    let one = |t: Tensor| Ok(vec![t]);
    match op {
        "EmptyTensorList" | "TensorListReserve" => {
            let element_shape = shape_operand(op, x(0)?)?;
            let n = if op == "TensorListReserve" {
                let n = x(1)?.to_i64_vec(op, "num_elements")?.first().copied().unwrap_or(0);
                usize::try_from(n).map_err(|_| KernelError::invalid(op, format!("num_elements is {n}")))?
            } else {
                0
            };
            crate::exec::limits::checked_dims(op, DType::Variant, &[n as i64])?;
            // EmptyTensorList's `max_num_elements` (-1: unbounded).
            let max_num_elements = if op == "EmptyTensorList" {
                let m = x(1)?.to_i64_vec(op, "max_num_elements")?.first().copied().unwrap_or(-1);
                usize::try_from(m).ok()
            } else {
                None
            };
            one(variant(Variant::List(TensorList {
                element_dtype: element_dtype(op, attrs)?,
                element_shape,
                items: vec![None; n],
                max_num_elements,
                gradient_source: None,
            })))
        }
        "TensorListFromTensor" => {
            let t = x(0)?;
            if t.shape().is_empty() {
                return Err(KernelError::invalid(op, "the tensor must have at least one dimension"));
            }
            let items = super::layout::unpack(op, t, 0)?.into_iter().map(Some).collect();
            let element_shape = Some(t.shape()[1..].iter().map(|&d| d as i64).collect());
            one(variant(Variant::List(TensorList {
                element_dtype: t.dtype(),
                element_shape,
                items,
                max_num_elements: None,
                gradient_source: None,
            })))
        }
        "TensorListSetItem" => {
            let mut l = list(op, x(0)?)?.clone();
            let item = x(2)?.clone();
            check_item(op, &l, &item)?;
            let want = x(1)?.to_i64_vec(op, "index")?.first().copied().unwrap_or(-1);
            // `resize_if_index_out_of_bounds` grows the list to hold the index.
            if attrs.get_bool("resize_if_index_out_of_bounds") == Some(true) {
                if let Ok(w) = usize::try_from(want) {
                    if w >= l.items.len() {
                        crate::exec::limits::checked_dims(op, DType::Variant, &[want + 1])?;
                        l.items.resize(w + 1, None);
                    }
                }
            }
            let i = index(op, x(1)?, l.items.len())?;
            l.items[i] = Some(item);
            one(variant(Variant::List(l)))
        }
        "TensorListGetItem" => {
            let l = list(op, x(0)?)?;
            let i = index(op, x(1)?, l.items.len())?;
            match &l.items[i] {
                Some(t) => one(t.clone()),
                None => one(zeros(op, l.element_dtype, &known_shape(op, l, inputs.get(2))?)?),
            }
        }
        "TensorListPushBack" => {
            let mut l = list(op, x(0)?)?.clone();
            let item = x(1)?.clone();
            check_item(op, &l, &item)?;
            if l.max_num_elements.is_some_and(|m| l.items.len() >= m) {
                return Err(KernelError::invalid(
                    op,
                    format!("the list is full: it holds its max_num_elements ({})", l.items.len()),
                ));
            }
            l.items.push(Some(item));
            one(variant(Variant::List(l)))
        }
        "TensorListPopBack" => {
            let mut l = list(op, x(0)?)?.clone();
            let last = l.items.pop().ok_or_else(|| KernelError::invalid(op, "the list is empty"))?;
            let item = match last {
                Some(t) => t,
                None => zeros(op, l.element_dtype, &known_shape(op, &l, inputs.get(1))?)?,
            };
            Ok(vec![variant(Variant::List(l)), item])
        }
        "TensorListLength" => {
            let n = list(op, x(0)?)?.items.len();
            one(Tensor::scalar(i32::try_from(n).map_err(|_| KernelError::invalid(op, "the list is too long"))?))
        }
        "TensorListElementShape" => {
            let l = list(op, x(0)?)?;
            let dims = l.element_shape.clone();
            let i64_out = attrs.get("shape_type").and_then(AttrValue::as_type) == Some(DType::I64);
            one(match (dims, i64_out) {
                (None, false) => Tensor::scalar(-1i32),
                (None, true) => Tensor::scalar(-1i64),
                (Some(d), true) => Tensor::vector(d),
                (Some(d), false) => Tensor::vector(d.into_iter().map(|v| v as i32).collect()),
            })
        }
        "TensorListStack" => {
            let l = list(op, x(0)?)?;
            if l.items.is_empty() {
                let mut shape = vec![0];
                shape.extend(known_shape(op, l, inputs.get(1))?);
                return one(zeros(op, l.element_dtype, &shape)?);
            }
            let fill = match l.items.iter().any(Option::is_none) {
                true => Some(zeros(op, l.element_dtype, &known_shape(op, l, inputs.get(1))?)?),
                false => None,
            };
            let items = l
                .items
                .iter()
                .map(|t| t.clone().or_else(|| fill.clone()))
                .collect::<Option<Vec<Tensor>>>()
                .ok_or_else(|| KernelError::invalid(op, "an unset element has no zeros"))?;
            one(super::shape::pack(op, &items, 0)?)
        }
        "TensorListGather" => {
            let l = list(op, x(0)?)?;
            let rows = x(1)?.to_i64_vec(op, "indices")?;
            let mut items = Vec::with_capacity(rows.len());
            for r in rows {
                let i = index(op, &Tensor::scalar(r), l.items.len())?;
                items.push(match &l.items[i] {
                    Some(t) => t.clone(),
                    None => zeros(op, l.element_dtype, &known_shape(op, l, inputs.get(2))?)?,
                });
            }
            if items.is_empty() {
                let mut shape = vec![0];
                shape.extend(known_shape(op, l, inputs.get(2))?);
                return one(zeros(op, l.element_dtype, &shape)?);
            }
            one(super::shape::pack(op, &items, 0)?)
        }
        "TensorListScatterIntoExistingList" => {
            let mut l = list(op, x(0)?)?.clone();
            let (t, rows) = (x(1)?, x(2)?.to_i64_vec(op, "indices")?);
            check_item(op, &l, t)?;
            let parts = if t.shape().is_empty() { Vec::new() } else { super::layout::unpack(op, t, 0)? };
            if parts.len() != rows.len() {
                return Err(KernelError::invalid(op, format!("{} indices for {} rows", rows.len(), parts.len())));
            }
            // The list grows to hold the largest index, as TensorFlow's does.
            if let Some(&max) = rows.iter().max() {
                let need = usize::try_from(max).map_err(|_| KernelError::invalid(op, format!("index {max}")))? + 1;
                if need > l.items.len() {
                    crate::exec::limits::checked_dims(op, DType::Variant, &[need as i64])?;
                    l.items.resize(need, None);
                }
            }
            for (r, part) in rows.into_iter().zip(parts) {
                let i = index(op, &Tensor::scalar(r), l.items.len())?;
                l.items[i] = Some(part);
            }
            one(variant(Variant::List(l)))
        }
        "TensorListConcatV2" | "TensorListSplit" => super::list_concat::kernel(op, attrs, inputs),
        "TensorListResize" => {
            let mut l = list(op, x(0)?)?.clone();
            let n = x(1)?.to_i64_vec(op, "size")?.first().copied().unwrap_or(-1);
            let n = usize::try_from(n).map_err(|_| KernelError::invalid(op, format!("size is {n}")))?;
            crate::exec::limits::checked_dims(op, DType::Variant, &[n as i64])?;
            l.items.resize(n, None);
            one(variant(Variant::List(l)))
        }
        "OptionalFromValue" => one(variant(Variant::Optional(Some(inputs.to_vec())))),
        "OptionalNone" => one(variant(Variant::Optional(None))),
        "OptionalHasValue" => match x(0)?.as_variant() {
            Some(Variant::Optional(v)) => one(Tensor::scalar(v.is_some())),
            _ => Err(KernelError::dtype(op, x(0)?.dtype(), "input 0 must be an Optional")),
        },
        "OptionalGetValue" => match x(0)?.as_variant() {
            Some(Variant::Optional(Some(v))) => Ok(v.clone()),
            Some(Variant::Optional(None)) => Err(KernelError::invalid(op, "the optional has no value")),
            _ => Err(KernelError::dtype(op, x(0)?.dtype(), "input 0 must be an Optional")),
        },
        _ => Err(KernelError::NoKernel { op: op.to_string() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::run_kernel;

    fn attrs(dtype: DType) -> AttrMap {
        let mut a = AttrMap::new();
        a.insert("element_dtype", AttrValue::Type(dtype));
        a
    }

    fn one(op: &str, a: &AttrMap, inputs: &[Tensor]) -> Tensor {
        run_kernel(op, a, inputs).unwrap_or_else(|e| panic!("{op}: {e}")).remove(0)
    }

    #[test]
    fn a_reserved_list_is_set_read_and_stacked() {
        let a = attrs(DType::F32);
        let shape = Tensor::vector(vec![2i32]);
        let list = one("TensorListReserve", &a, &[shape.clone(), Tensor::scalar(3i32)]);
        assert_eq!(one("TensorListLength", &a, std::slice::from_ref(&list)), Tensor::scalar(3i32));
        let item = Tensor::vector(vec![1.0f32, 2.0]);
        let list = one("TensorListSetItem", &a, &[list, Tensor::scalar(1i32), item.clone()]);
        assert_eq!(one("TensorListGetItem", &a, &[list.clone(), Tensor::scalar(1i32), shape.clone()]), item);
        // Unset elements read as zeros of the element shape.
        let stacked = one("TensorListStack", &a, &[list.clone(), shape]);
        assert_eq!(stacked, Tensor::from_vec(&[3, 2], vec![0.0f32, 0.0, 1.0, 2.0, 0.0, 0.0]).unwrap());
        let err = run_kernel("TensorListSetItem", &a, &[list, Tensor::scalar(3i32), item]).unwrap_err();
        assert!(err.to_string().contains("out of range"), "{err}");
    }

    #[test]
    fn push_and_pop_are_last_in_first_out_and_keep_narrow_dtypes() {
        let a = attrs(DType::BF16);
        let empty = one("EmptyTensorList", &a, &[Tensor::scalar(-1i32), Tensor::scalar(-1i32)]);
        let x = Tensor::vector(vec![half::bf16::from_f32(1.5)]);
        let y = Tensor::vector(vec![half::bf16::from_f32(-2.0)]);
        let list = one("TensorListPushBack", &a, &[empty.clone(), x.clone()]);
        let list = one("TensorListPushBack", &a, &[list, y.clone()]);
        let popped = run_kernel("TensorListPopBack", &a, &[list, Tensor::scalar(-1i32)]).unwrap();
        assert_eq!(popped[1], y, "bf16 elements are not widened");
        let popped = run_kernel("TensorListPopBack", &a, &[popped[0].clone(), Tensor::scalar(-1i32)]).unwrap();
        assert_eq!(popped[1], x);
        assert!(run_kernel("TensorListPopBack", &a, &[popped[0].clone(), Tensor::scalar(-1i32)]).is_err());
        // An element of the wrong dtype is refused.
        assert!(run_kernel("TensorListPushBack", &a, &[empty, Tensor::vector(vec![1.0f32])]).is_err());
    }

    #[test]
    fn a_list_holds_at_most_its_max_num_elements() {
        let a = attrs(DType::F32);
        let x = Tensor::vector(vec![1.0f32]);
        let list = one("EmptyTensorList", &a, &[Tensor::vector(vec![1i32]), Tensor::scalar(2i32)]);
        let list = one("TensorListPushBack", &a, &[list, x.clone()]);
        let full = one("TensorListPushBack", &a, &[list, x.clone()]);
        let err = run_kernel("TensorListPushBack", &a, &[full.clone(), x.clone()]).unwrap_err();
        assert!(err.to_string().contains("full"), "{err}");
        // Popping makes room again; an unbounded list (-1) takes any number.
        let popped = run_kernel("TensorListPopBack", &a, &[full, Tensor::vector(vec![1i32])]).unwrap();
        assert!(run_kernel("TensorListPushBack", &a, &[popped[0].clone(), x.clone()]).is_ok());
        let mut open = one("EmptyTensorList", &a, &[Tensor::vector(vec![1i32]), Tensor::scalar(-1i32)]);
        for _ in 0..5 {
            open = one("TensorListPushBack", &a, &[open, x.clone()]);
        }
        assert_eq!(one("TensorListLength", &a, &[open]), Tensor::scalar(5i32));
    }

    #[test]
    fn from_tensor_splits_rows_and_reports_its_element_shape() {
        let a = attrs(DType::I32);
        let t = Tensor::from_vec(&[2, 3], vec![1i32, 2, 3, 4, 5, 6]).unwrap();
        let list = one("TensorListFromTensor", &a, &[t.clone(), Tensor::vector(vec![3i32])]);
        assert_eq!(one("TensorListGetItem", &a, &[list.clone(), Tensor::scalar(1i32)]), Tensor::vector(vec![4, 5, 6]));
        assert_eq!(
            one("TensorListElementShape", &AttrMap::new(), std::slice::from_ref(&list)),
            Tensor::vector(vec![3])
        );
        assert_eq!(one("TensorListStack", &a, &[list, Tensor::vector(vec![3i32])]), t);
    }

    #[test]
    fn optionals_hold_their_components() {
        let none = one("OptionalNone", &AttrMap::new(), &[]);
        assert_eq!(one("OptionalHasValue", &AttrMap::new(), std::slice::from_ref(&none)), Tensor::scalar(false));
        assert!(run_kernel("OptionalGetValue", &AttrMap::new(), &[none]).is_err());
        let parts = [Tensor::scalar(1.0f32), Tensor::vector(vec![2i64])];
        let some = one("OptionalFromValue", &AttrMap::new(), &parts);
        assert_eq!(run_kernel("OptionalGetValue", &AttrMap::new(), &[some]).unwrap(), parts.to_vec());
    }

    #[test]
    fn calls_outside_the_mesh_need_a_device() {
        let err = run_kernel("While", &AttrMap::new(), &[]).unwrap_err();
        assert!(matches!(err, KernelError::NeedsDevice { .. }), "{err}");
    }
}
