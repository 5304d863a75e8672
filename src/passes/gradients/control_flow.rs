//! Gradients of the call ops: `PartitionedCall`, `If`, `Case` and `While` (and their stateful or
//! stateless twins), as TensorFlow's `gradients` differentiates them.
//!
//! - A call's gradient calls the gradient function of its function (see [`super::library`]).
//! - `If`/`Case`'s gradient is an `If`/`Case` on the same predicate or index over the gradient
//!   functions of the branches, which all take and give the same types.
//! - `While`'s gradient needs each iteration's values. The forward loop is widened, once, with a
//!   trip counter and one unbounded TensorList per loop variable, to which its body pushes the
//!   values each iteration starts from (the attribute [`ACCUMULATED_ATTR`] records how many loop
//!   variables the loop had before). The gradient is a second loop that runs the trip count down:
//!   each iteration pops one set of values and calls the body's gradient function on them and on
//!   the gradients carried from the later iteration. The body's gradient recomputes the body from
//!   the popped values, so only loop variables are pushed.
//!
//! Only floating-point values carry gradients; an integer argument or result (a loop counter) gets
//! none. Loop variables that are resources or variants (TensorLists) are refused with a reason.

use std::sync::Arc;

use super::emitter::{Emitter, Tensor};
use super::functions::Unsupported;
use super::library::{is_differentiable, signature, Library};
use crate::ir::functions::{call_kind, CallKind, ARG_OP, FUNCTION_ROLE, RETVAL_OP, ROLE_ATTR};
use crate::ir::types::{FuncRef, Shape, TensorData, TensorLit};
use crate::ir::{AttrMap, AttrValue, DType, Graph, Node, NodeId};
use crate::syntax::Span;

/// The attribute of a `While` widened with accumulators: how many loop variables it had before.
pub const ACCUMULATED_ATTR: &str = "_gradient_accumulators";

/// The gradient of each data input of call op `op` (`inputs`, by slot), given those of its outputs.
pub fn gradient(
    e: &mut Emitter<'_>,
    lib: &mut Library<'_>,
    op: NodeId,
    inputs: &[Tensor],
    out_grads: &[Option<Tensor>],
) -> Result<Vec<Option<Tensor>>, Unsupported> {
    let node = e.graph.node(op).clone();
    let Some(kind) = call_kind(&node.op) else {
        return Err(Some(format!("`{}` is not a call op", node.op)));
    };
    match kind {
        CallKind::While => while_gradient(e, lib, op, &node, inputs, out_grads),
        // TensorFlow registers no gradient for `SymbolicGradient` or `XlaCallModule`.
        CallKind::Call if matches!(&*node.op, "SymbolicGradient" | "XlaCallModule") => Err(None),
        CallKind::Call => {
            let f = func_name(&node, "f")?;
            branch_gradient(e, lib, op, &node, inputs, out_grads, 0, &[("f", f)])
        }
        CallKind::If => {
            let then = func_name(&node, "then_branch")?;
            let els = func_name(&node, "else_branch")?;
            branch_gradient(e, lib, op, &node, inputs, out_grads, 1, &[("then_branch", then), ("else_branch", els)])
        }
        CallKind::Case => {
            let branches = node.attrs.get("branches").and_then(AttrValue::as_list).unwrap_or(&[]);
            let names: Vec<String> = branches
                .iter()
                .map(|b| match b {
                    AttrValue::Func(f) => Ok(f.name.clone()),
                    _ => Err(Some("`branches` names no function".to_string())),
                })
                .collect::<Result<_, _>>()?;
            if names.is_empty() {
                return Err(Some("`branches` is empty".into()));
            }
            let list: Vec<(&'static str, String)> = names.into_iter().map(|n| ("branches", n)).collect();
            branch_gradient(e, lib, op, &node, inputs, out_grads, 1, &list)
        }
        // TensorFlow registers no gradient for the XLA ops that apply functions.
        CallKind::Apply => Err(None),
    }
}

/// The gradient of a call, `If` or `Case`: the same op over the gradient functions of its
/// functions (`funcs`: attribute and function), taking the `skip` leading inputs (predicate or
/// index) as they are, then the forward inputs, then the gradients of the float outputs.
#[allow(clippy::too_many_arguments)]
fn branch_gradient(
    e: &mut Emitter<'_>,
    lib: &mut Library<'_>,
    op: NodeId,
    node: &Node,
    inputs: &[Tensor],
    out_grads: &[Option<Tensor>],
    skip: usize,
    funcs: &[(&'static str, String)],
) -> Result<Vec<Option<Tensor>>, Unsupported> {
    let tin = type_list(node, "Tin")?;
    let tout = type_list(node, "Tout")?;
    if inputs.len() != skip + tin.len() {
        return Err(Some(format!("expected {} inputs, found {}", skip + tin.len(), inputs.len())));
    }
    let args: Vec<usize> = (0..tin.len()).filter(|&i| is_differentiable(tin[i])).collect();
    let results: Vec<usize> = (0..tout.len()).filter(|&j| is_differentiable(tout[j])).collect();
    let mut grads = vec![None; inputs.len()];
    if args.is_empty() || results.is_empty() {
        return Ok(grads);
    }
    let mut attrs: Vec<(&'static str, AttrValue)> = Vec::new();
    let mut branches = Vec::new();
    for (attr, f) in funcs {
        let name = lib.gradient_function(f, &args, &results, &mut e.errors).map_err(Some)?;
        if *attr == "branches" {
            branches.push(func(name));
        } else {
            attrs.push((attr, func(name)));
        }
    }
    if !branches.is_empty() {
        attrs.push(("branches", AttrValue::List(branches)));
    }
    let mut operands: Vec<Tensor> = inputs.to_vec();
    for &j in &results {
        operands.push(grad_or_zeros(e, op, j, tout[j], out_grads));
    }
    let mut all_in = tin.clone();
    all_in.extend(results.iter().map(|&j| tout[j]));
    attrs.push(("Tin", types_attr(&all_in)));
    attrs.push(("Tout", types_attr(&args.iter().map(|&i| tin[i]).collect::<Vec<_>>())));
    if let Some(t) = node.attrs.get("Tcond") {
        attrs.push(("Tcond", t.clone()));
    }
    let op_type = static_op(&node.op);
    let call = e.emit(op_type, op_type, &operands, attrs);
    for (k, &i) in args.iter().enumerate() {
        grads[skip + i] = Some(Tensor { node: call.node, output: k as u32 });
    }
    Ok(grads)
}

/// The gradient of a `While`: a loop over the forward loop's accumulators (see the module docs).
fn while_gradient(
    e: &mut Emitter<'_>,
    lib: &mut Library<'_>,
    op: NodeId,
    node: &Node,
    inputs: &[Tensor],
    out_grads: &[Option<Tensor>],
) -> Result<Vec<Option<Tensor>>, Unsupported> {
    let all = type_list(node, "T")?;
    let n = node.attrs.get_int(ACCUMULATED_ATTR).map_or(all.len(), |n| n as usize);
    if inputs.len() < n || all.len() < n {
        return Err(Some(format!("expected {n} loop variables, found {}", inputs.len())));
    }
    let types = all[..n].to_vec();
    if let Some(d) = types.iter().find(|d| matches!(d, DType::Resource | DType::Variant)) {
        return Err(Some(format!(
            "a loop variable of type {d} is not differentiated through; pass the value (a read of the variable, \
             a stacked tensor) as the loop variable"
        )));
    }
    let diff: Vec<usize> = (0..n).filter(|&k| is_differentiable(types[k])).collect();
    let mut grads = vec![None; inputs.len()];
    if diff.is_empty() {
        return Ok(grads);
    }
    let body = func_name(node, "body")?;
    let cond = func_name(node, "cond")?;
    let stateless = &*node.op == "StatelessWhile";
    let (count, lists) = accumulators(e, lib, op, node, &types, &body, &cond)?;
    let body_grad = lib.gradient_function(&body, &diff, &diff, &mut e.errors).map_err(Some)?;
    let (back_body, back_cond) = backward_functions(lib, &body, &types, &diff, &body_grad).map_err(Some)?;
    let mut operands = vec![count];
    for &k in &diff {
        operands.push(grad_or_zeros(e, op, k, types[k], out_grads));
    }
    operands.extend(lists);
    let mut loop_types = vec![DType::I32];
    loop_types.extend(diff.iter().map(|&k| types[k]));
    loop_types.extend(std::iter::repeat_n(DType::Variant, n));
    let attrs = [
        ("T", types_attr(&loop_types)),
        ("body", func(back_body)),
        ("cond", func(back_cond)),
        ("parallel_iterations", AttrValue::Int(10)),
    ];
    let op_type = if stateless { "StatelessWhile" } else { "While" };
    let back = e.emit(op_type, op_type, &operands, attrs);
    for (p, &k) in diff.iter().enumerate() {
        grads[k] = Some(Tensor { node: back.node, output: 1 + p as u32 });
    }
    Ok(grads)
}

/// The trip count and the accumulators of `While` op `op`, widening it first if it has none.
fn accumulators(
    e: &mut Emitter<'_>,
    lib: &mut Library<'_>,
    op: NodeId,
    node: &Node,
    types: &[DType],
    body: &str,
    cond: &str,
) -> Result<(Tensor, Vec<Tensor>), Unsupported> {
    let n = types.len();
    let outputs = |n: usize| {
        let count = Tensor { node: op, output: n as u32 };
        (count, (0..n).map(|k| Tensor { node: op, output: (n + 1 + k) as u32 }).collect())
    };
    if node.attrs.get_int(ACCUMULATED_ATTR).is_some() {
        return Ok(outputs(n));
    }
    let body_acc = accumulating_body(lib, body, types).map_err(Some)?;
    let cond_acc = widened_cond(lib, cond, n).map_err(Some)?;
    let zero = e.emit("Const", "accumulator_count", &[], const_attrs(0));
    let unknown = e.emit("Const", "accumulator_size", &[], const_attrs(-1));
    let mut edges = vec![(zero.node, 0)];
    for &d in types {
        let attrs = [("element_dtype", AttrValue::Type(d)), ("shape_type", AttrValue::Type(DType::I32))];
        let list = e.emit("EmptyTensorList", "accumulator", &[unknown, unknown], attrs);
        edges.push((list.node, 0));
    }
    e.graph.add_data_inputs(op, &edges, Span::DETACHED);
    let mut widened = types.to_vec();
    widened.push(DType::I32);
    widened.extend(std::iter::repeat_n(DType::Variant, n));
    let attrs = &mut e.graph.node_mut(op).attrs;
    attrs.insert("T", types_attr(&widened));
    attrs.insert("body", func(body_acc));
    attrs.insert("cond", func(cond_acc));
    attrs.insert(ACCUMULATED_ATTR, AttrValue::Int(n as i64));
    if let Some(AttrValue::List(shapes)) = attrs.get("output_shapes").cloned() {
        let mut shapes = shapes;
        shapes.extend(std::iter::repeat_n(AttrValue::Shape(Shape::known(Vec::new())), n + 1));
        attrs.insert("output_shapes", AttrValue::List(shapes));
    }
    Ok(outputs(n))
}

/// A copy of loop body `body` that also counts its iterations and pushes the values each
/// iteration starts from onto one TensorList per loop variable.
fn accumulating_body(lib: &mut Library<'_>, body: &str, types: &[DType]) -> Result<String, String> {
    let mut g = lib.function(body).ok_or_else(|| format!("the module has no function `{body}`"))?.clone();
    g.name = lib.fresh_name(&format!("{body}_accumulating"));
    let (args, rets) = signature(&g)?;
    let n = types.len();
    if args.len() != n || rets.len() != n {
        return Err(format!("`{body}` takes {} and gives {} values, not {n}", args.len(), rets.len()));
    }
    let mut b = Builder { g: &mut g };
    let count = b.arg("accumulator_count", DType::I32, n)?;
    let one = b.constant("accumulator_one", 1)?;
    let next = b.op("accumulator_next", "AddV2", &[(count, 0), (one, 0)], [("T", AttrValue::Type(DType::I32))])?;
    b.ret("accumulator_count_out", (next, 0), DType::I32, n)?;
    for (k, &d) in types.iter().enumerate() {
        let list = b.arg(&format!("accumulator_{k}"), DType::Variant, n + 1 + k)?;
        let push = b.op(
            &format!("accumulator_{k}_push"),
            "TensorListPushBack",
            &[(list, 0), (args[k].node, 0)],
            [("element_dtype", AttrValue::Type(d))],
        )?;
        b.ret(&format!("accumulator_{k}_out"), (push, 0), DType::Variant, n + 1 + k)?;
    }
    let name = g.name.clone();
    lib.add(g);
    Ok(name)
}

/// A copy of loop predicate `cond` that takes (and ignores) the accumulators after the `n` loop
/// variables.
fn widened_cond(lib: &mut Library<'_>, cond: &str, n: usize) -> Result<String, String> {
    let mut g = lib.function(cond).ok_or_else(|| format!("the module has no function `{cond}`"))?.clone();
    g.name = lib.fresh_name(&format!("{cond}_accumulating"));
    let mut b = Builder { g: &mut g };
    b.arg("accumulator_count", DType::I32, n)?;
    for k in 0..n {
        b.arg(&format!("accumulator_{k}"), DType::Variant, n + 1 + k)?;
    }
    let name = g.name.clone();
    lib.add(g);
    Ok(name)
}

/// The body and predicate of the gradient loop of a `While` over `body`: loop variables are the
/// remaining trip count, the gradients of the float loop variables (`diff`) and the accumulators.
fn backward_functions(
    lib: &mut Library<'_>,
    body: &str,
    types: &[DType],
    diff: &[usize],
    body_grad: &str,
) -> Result<(String, String), String> {
    let (n, m) = (types.len(), diff.len());
    let mut g = function_graph(lib.fresh_name(&format!("{body}_backward")));
    let mut b = Builder { g: &mut g };
    let count = b.arg("count", DType::I32, 0)?;
    let grads: Vec<NodeId> = diff
        .iter()
        .enumerate()
        .map(|(p, &k)| b.arg(&format!("grad_{k}"), types[k], 1 + p))
        .collect::<Result<_, _>>()?;
    let shape = b.constant("element_shape", -1)?;
    let mut pops = Vec::with_capacity(n);
    for (k, &d) in types.iter().enumerate() {
        let list = b.arg(&format!("accumulator_{k}"), DType::Variant, 1 + m + k)?;
        let pop = b.op(
            &format!("pop_{k}"),
            "TensorListPopBack",
            &[(list, 0), (shape, 0)],
            [("element_dtype", AttrValue::Type(d))],
        )?;
        pops.push(pop);
    }
    let mut operands: Vec<(NodeId, u32)> = pops.iter().map(|&p| (p, 1)).collect();
    operands.extend(grads.iter().map(|&g| (g, 0)));
    let diff_types: Vec<DType> = diff.iter().map(|&k| types[k]).collect();
    let mut tin = types.to_vec();
    tin.extend(&diff_types);
    let call = b.op(
        "body_gradient",
        "PartitionedCall",
        &operands,
        [("Tin", types_attr(&tin)), ("Tout", types_attr(&diff_types)), ("f", func(body_grad.to_string()))],
    )?;
    let one = b.constant("one", 1)?;
    let next = b.op("next_count", "Sub", &[(count, 0), (one, 0)], [("T", AttrValue::Type(DType::I32))])?;
    b.ret("count_out", (next, 0), DType::I32, 0)?;
    for (p, &k) in diff.iter().enumerate() {
        b.ret(&format!("grad_{k}_out"), (call, p as u32), types[k], 1 + p)?;
    }
    for (k, &pop) in pops.iter().enumerate() {
        b.ret(&format!("accumulator_{k}_out"), (pop, 0), DType::Variant, 1 + m + k)?;
    }
    let body_name = g.name.clone();
    lib.add(g);

    let mut g = function_graph(lib.fresh_name(&format!("{body}_backward_cond")));
    let mut b = Builder { g: &mut g };
    let count = b.arg("count", DType::I32, 0)?;
    for (p, &k) in diff.iter().enumerate() {
        b.arg(&format!("grad_{k}"), types[k], 1 + p)?;
    }
    for k in 0..n {
        b.arg(&format!("accumulator_{k}"), DType::Variant, 1 + m + k)?;
    }
    let zero = b.constant("zero", 0)?;
    let more = b.op("more", "Greater", &[(count, 0), (zero, 0)], [("T", AttrValue::Type(DType::I32))])?;
    b.ret("more_out", (more, 0), DType::Bool, 0)?;
    let cond_name = g.name.clone();
    lib.add(g);
    Ok((body_name, cond_name))
}

/// Adds nodes with free names to a function being built.
struct Builder<'a> {
    g: &'a mut Graph,
}

impl Builder<'_> {
    fn add(&mut self, node: Node, inputs: &[(NodeId, u32)]) -> Result<NodeId, String> {
        let name = node.name.to_string();
        let id = self.g.add_node(node).map_err(|_| format!("`{name}` is taken in `{}`", self.g.name))?;
        self.g.add_data_inputs(id, inputs, Span::DETACHED);
        Ok(id)
    }

    fn arg(&mut self, base: &str, dtype: DType, index: usize) -> Result<NodeId, String> {
        let node = Node::op(self.g.unique_name(base), ARG_OP)
            .with_attr("T", AttrValue::Type(dtype))
            .with_attr("index", AttrValue::Int(index as i64));
        self.add(node, &[])
    }

    fn ret(&mut self, base: &str, src: (NodeId, u32), dtype: DType, index: usize) -> Result<NodeId, String> {
        let node = Node::op(self.g.unique_name(base), RETVAL_OP)
            .with_attr("T", AttrValue::Type(dtype))
            .with_attr("index", AttrValue::Int(index as i64));
        self.add(node, &[src])
    }

    fn constant(&mut self, base: &str, value: i32) -> Result<NodeId, String> {
        let mut node = Node::op(self.g.unique_name(base), "Const");
        for (k, v) in const_attrs(value) {
            node = node.with_attr(k, v);
        }
        self.add(node, &[])
    }

    fn op<const N: usize>(
        &mut self,
        base: &str,
        op: &str,
        inputs: &[(NodeId, u32)],
        attrs: [(&str, AttrValue); N],
    ) -> Result<NodeId, String> {
        let mut node = Node::op(self.g.unique_name(base), op);
        for (k, v) in attrs {
            node = node.with_attr(k, v);
        }
        self.add(node, inputs)
    }
}

/// An empty function.
fn function_graph(name: String) -> Graph {
    let mut g = Graph::new(name);
    g.attrs.insert(ROLE_ATTR, AttrValue::str(FUNCTION_ROLE));
    g
}

/// The gradient received by output `k` of `op`, or zeros shaped like it.
fn grad_or_zeros(e: &mut Emitter<'_>, op: NodeId, k: usize, dtype: DType, out_grads: &[Option<Tensor>]) -> Tensor {
    match out_grads.get(k).copied().flatten() {
        Some(g) => g,
        None => {
            let output = Tensor { node: op, output: k as u32 };
            e.emit("ZerosLike", "zeros_like", &[output], [("T", AttrValue::Type(dtype))])
        }
    }
}

/// The attributes of a scalar i32 `Const`.
fn const_attrs(value: i32) -> [(&'static str, AttrValue); 2] {
    let lit = TensorLit { dtype: DType::I32, shape: Vec::new(), data: TensorData::Int(vec![value]) };
    [("dtype", AttrValue::Type(DType::I32)), ("value", AttrValue::Tensor(Arc::new(lit)))]
}

/// The function a `func` attribute names.
fn func_name(node: &Node, attr: &str) -> Result<String, Unsupported> {
    match node.attrs.get(attr) {
        Some(AttrValue::Func(f)) => Ok(f.name.clone()),
        _ => Err(Some(format!("`{attr}` names no function"))),
    }
}

/// A `func` attribute naming `name`.
fn func(name: String) -> AttrValue {
    AttrValue::Func(Box::new(FuncRef { name, attrs: AttrMap::new() }))
}

/// The types of list attribute `attr`.
fn type_list(node: &Node, attr: &str) -> Result<Vec<DType>, Unsupported> {
    let list = node.attrs.get(attr).and_then(AttrValue::as_list);
    list.and_then(|l| l.iter().map(AttrValue::as_type).collect())
        .ok_or_else(|| Some(format!("`{attr}` is not a list of types")))
}

/// A list of types as an attribute.
fn types_attr(list: &[DType]) -> AttrValue {
    AttrValue::List(list.iter().map(|&d| AttrValue::Type(d)).collect())
}

/// The call op type as a static string (the emitter takes one).
fn static_op(op: &str) -> &'static str {
    crate::ir::functions::CALL_OPS.iter().find(|(name, _)| *name == op).map_or("PartitionedCall", |(name, _)| name)
}
