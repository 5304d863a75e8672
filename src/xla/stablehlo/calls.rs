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
//! TensorFlow and `stablehlo.case` do. Bodies that hold variable ops or
//! TensorList/Optional values are refused (the trace names the op).
//! Cost: each specialisation is traced and printed once; the host trace
//! of a call runs the simulator's interpreter (a `While` costs its
//! iterations times its body).

use std::cell::RefCell;
use std::collections::HashMap;

use super::text::{Cmp, Ctx, Ty, Val};
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
    let node = graph.node(id);
    XlaError::Lowering { node: node.name.to_string(), op: node.op.to_string(), message: message.into() }
}

/// Runs call op `id` on the host for the trace (the simulator's interpreter).
pub(crate) fn trace_call(lib: &Library, graph: &Graph, id: NodeId, args: Vec<Tensor>) -> Result<Vec<Tensor>, XlaError> {
    let node = graph.node(id);
    let device: control_flow::Device<'_> = &|op, _, _| {
        Err(crate::exec::KernelError::invalid(
            op,
            "variable ops inside a function body are not lowered to StableHLO; the simulator runs them",
        ))
    };
    control_flow::call(&node.op, &node.attrs, args, &lib.host, device).map_err(|e| lowering(graph, id, e.to_string()))
}

/// A symbol MLIR accepts without quotes.
fn symbol(name: &str, k: usize) -> String {
    let clean: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    format!("f_{clean}_{k}")
}

/// Prints function `name` specialised to `args` (once), returning its
/// symbol and result types.
fn define(lib: &Library, name: &str, args: &[Tensor], replicas: usize) -> Result<(String, Vec<Ty>), XlaError> {
    let arg_types: Vec<Ty> = args.iter().map(Ty::of).collect();
    let key = (name.to_string(), arg_types.iter().map(Ty::mlir).collect::<Vec<_>>().join(","));
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
    let mut arg_nodes = vec![None; sig.args.len()];
    let mut ret_inputs = vec![None; sig.rets.len()];
    for id in graph.node_ids() {
        let node = graph.node(id);
        let slot = node.attrs.get_int("index").and_then(|k| usize::try_from(k).ok()).unwrap_or(0);
        match &*node.op {
            ARG_OP => arg_nodes[slot] = Some(id),
            RETVAL_OP => {
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
    // The nodes the results need, in dependency order (depth first from the results).
    let mut order = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for &(root, _) in &ret_inputs {
        let mut stack = vec![(root, false)];
        while let Some((id, done)) = stack.pop() {
            if done {
                order.push(id);
                continue;
            }
            if !seen.insert(id) {
                continue;
            }
            stack.push((id, true));
            for i in graph.inputs(id).iter().rev() {
                if !seen.contains(&i.src) {
                    stack.push((i.src, false));
                }
            }
        }
    }
    order.retain(|&id| &*graph.node(id).op != ARG_OP);
    let program = Program {
        nodes: order,
        args: arg_nodes.iter().map(|&id| ArgSource::Host(id, 0)).collect(),
        outputs: Vec::new(),
        carried: Vec::new(),
        stage: 0,
        stages: 1,
        calls: Vec::new(),
    };
    let traced = trace::trace(graph, &program, args, lib)?;
    let mut ctx = Ctx::default();
    ctx.indent = 2;
    let params: Vec<Val> = arg_types.iter().map(|t| Val { name: ctx.fresh(), ty: t.clone() }).collect();
    let env = arg_nodes.iter().zip(&params).map(|(&id, p)| ((id, 0), p.clone())).collect();
    let mut emitter = Emitter { graph, traced: &traced, env, vars: HashMap::new(), replicas, partitions: 1, lib };
    for &id in &program.nodes {
        emitter.node(&mut ctx, id)?;
    }
    let results: Vec<Val> = ret_inputs.iter().map(|&k| emitter.value(&mut ctx, k)).collect::<Result<_, _>>()?;
    let result_types: Vec<Ty> = results.iter().map(|v| v.ty.clone()).collect();
    let mlir: Vec<String> = result_types.iter().map(Ty::mlir).collect();
    let sym = {
        let defs = lib.defs.borrow();
        symbol(name, defs.texts.len())
    };
    let sig_text: Vec<String> = params.iter().map(|p| format!("{}: {}", p.name, p.ty.mlir())).collect();
    let names: Vec<&str> = results.iter().map(|v| v.name.as_str()).collect();
    let text = format!(
        "  func.func private @{sym}({}) -> ({}) {{\n{}    \"func.return\"({}) : ({}) -> ()\n  }}\n",
        sig_text.join(", "),
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
fn call(c: &mut Ctx, sym: &str, args: &[Val], results: &[Ty]) -> Vec<Val> {
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
    c.line(&format!("{r}:{} = {head}", results.len()));
    results.iter().enumerate().map(|(i, ty)| Val { name: format!("{r}#{i}"), ty: ty.clone() }).collect()
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
fn block(c: &mut Ctx, types: &[Ty]) -> (String, Vec<Val>) {
    let vals: Vec<Val> = types.iter().map(|t| Val { name: c.fresh(), ty: t.clone() }).collect();
    let head = vals.iter().map(|v| format!("{}: {}", v.name, v.ty.mlir())).collect::<Vec<_>>().join(", ");
    (format!("^bb0({head}):"), vals)
}

/// `"stablehlo.return"(vals)`.
fn ret(c: &mut Ctx, vals: &[Val]) {
    let names: Vec<&str> = vals.iter().map(|v| v.name.as_str()).collect();
    let types: Vec<String> = vals.iter().map(|v| v.ty.mlir()).collect();
    c.line(&format!("\"stablehlo.return\"({}) : ({}) -> ()", names.join(", "), types.join(", ")));
}

/// A region that calls `sym` on `args` (values of the enclosing function) and returns its results.
fn call_region(c: &mut Ctx, sym: &str, args: &[Val], results: &[Ty]) -> String {
    let mut r = c.scratch();
    let out = call(&mut r, sym, args, results);
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
        for input in &inputs {
            let key = (input.src, input.output.unwrap_or(0));
            traced.push(
                self.traced
                    .values
                    .get(&key)
                    .map(|t| t.value.clone())
                    .ok_or_else(|| lowering(graph, id, "an operand has no traced value"))?,
            );
            vals.push(self.value(ctx, key)?);
        }
        let expected: Vec<Ty> =
            (0u32..).map_while(|o| self.traced.values.get(&(id, o))).map(|t| Ty::of(&t.value)).collect();
        let check = |what: &str, got: &[Ty]| {
            if got != expected.as_slice() {
                let show = |t: &[Ty]| t.iter().map(Ty::mlir).collect::<Vec<_>>().join(", ");
                return Err(lowering(
                    graph,
                    id,
                    format!("{what} returns ({}) but the op's results are ({})", show(got), show(&expected)),
                ));
            }
            Ok(())
        };
        let results = match kind {
            CallKind::Call => {
                let f = branches(graph, id, &["f"])?.remove(0);
                let (sym, tys) = define(lib, &f, &traced, self.replicas)?;
                check(&format!("`{f}`"), &tys)?;
                call(ctx, &sym, &vals, &tys)
            }
            CallKind::While => {
                let names = branches(graph, id, &["cond", "body"])?;
                let (cond, ctys) = define(lib, &names[0], &traced, self.replicas)?;
                let (body, btys) = define(lib, &names[1], &traced, self.replicas)?;
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
                self.multi(ctx, "stablehlo.while", &refs, &regions, &carried)
            }
            CallKind::If | CallKind::Case => {
                let keys: &[&str] = if kind == CallKind::If { &["then_branch", "else_branch"] } else { &["branches"] };
                let names = branches(graph, id, keys)?;
                let selector = vals.first().ok_or_else(|| lowering(graph, id, "has no predicate or index"))?;
                let selector = if kind == CallKind::If {
                    scalar(ctx, selector, DType::Bool)
                } else {
                    scalar(ctx, selector, DType::I32)
                }
                .map_err(|m| lowering(graph, id, m))?;
                let mut regions = Vec::with_capacity(names.len());
                for name in &names {
                    let (sym, tys) = define(lib, name, &traced[1..], self.replicas)?;
                    check(&format!("branch `{name}`"), &tys)?;
                    regions.push(call_region(ctx, &sym, &vals[1..], &tys));
                }
                // `stablehlo.if` takes the true branch first, as TensorFlow's `then_branch`.
                let name = if kind == CallKind::If { "stablehlo.if" } else { "stablehlo.case" };
                self.multi(ctx, name, &[&selector], &regions, &expected)
            }
        };
        for (i, v) in results.into_iter().enumerate() {
            self.env.insert((id, i as u32), v);
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
