//! Printing a stage's program as a module: `@step` (one step: the ops,
//! then the outputs, carried values and variables as results) and `@main`
//! (calls `@step` once, or loops it `steps_per_run` times in a
//! `stablehlo.while`), with the variable arguments aliased to their
//! results. Cost: linear in the program.

use std::collections::HashMap;

use super::calls::Library;
use super::signature::{self, Signature};
use super::text::{self, Ctx, Ty, Val};
use super::{trace, ArgSource, Program};
use crate::ir::{Graph, NodeId};
use crate::passes::ReplicateCluster;
use crate::xla::error::XlaError;

/// How a module is put together.
#[derive(Clone, Copy, Debug)]
pub(super) struct Assembly {
    /// Device iterations `@main` loops over (1: one call of `@step`).
    pub steps: usize,
    /// Whether independent cross-replica sums share all-reduces.
    pub pack_sums: bool,
}

/// Prints the module: `@step`, then `@main`; with `@main`'s signature.
pub(super) fn assemble(
    graph: &Graph,
    cluster: &ReplicateCluster,
    program: &Program,
    traced: &trace::Trace,
    arg_types: &[Ty],
    how: Assembly,
    lib: &Library,
) -> Result<(String, Signature), XlaError> {
    let Assembly { steps, pack_sums } = how;
    lib.reset();
    let replicas = cluster.num_replicas as usize;
    let num_vars = program.args.iter().filter(|a| matches!(a, ArgSource::Variable(_))).count();
    let num_data = program.args.len() - num_vars;
    let num_outputs = program.outputs.len() + program.carried.len();
    let mut ctx = Ctx::default();
    ctx.indent = 2;
    // @step's body.
    let params: Vec<Val> = arg_types.iter().map(|t| Val { name: ctx.fresh(), ty: t.clone() }).collect();
    let mut env: HashMap<(NodeId, u32), Val> = HashMap::new();
    let mut vars: HashMap<NodeId, Val> = HashMap::new();
    for (arg, p) in program.args.iter().zip(&params) {
        match *arg {
            ArgSource::Replicated(id) => {
                env.insert((id, 0), p.clone());
            }
            ArgSource::Host(id, o) | ArgSource::Carried(id, o) => {
                env.insert((id, o), p.clone());
            }
            ArgSource::Variable(id) => {
                vars.insert(id, p.clone());
            }
        }
    }
    let partitions = cluster.num_cores_per_replica.max(1);
    let mut emitter = trace::Emitter { graph, traced, env, vars, replicas, partitions, lib };
    if pack_sums && program.calls.is_empty() && partitions == 1 {
        // Independent cross-replica sums packed into one all-reduce each.
        for step in super::pack::schedule(&emitter, &program.nodes) {
            match step {
                super::pack::Step::Op(id) => emitter.node(&mut ctx, id)?,
                super::pack::Step::Pack(ids) => {
                    for &id in &ids {
                        emitter.refuse_padded_operands(&ctx, id)?;
                    }
                    super::pack::emit(&mut emitter, &mut ctx, &ids)?
                }
            }
        }
    } else {
        let mut calls = program.calls.iter().peekable();
        for (i, &id) in program.nodes.iter().enumerate() {
            while let Some(call) = calls.next_if(|c| c.at == i) {
                super::host_call::emit(&mut emitter, &mut ctx, call, &cluster.name)?;
            }
            emitter.node(&mut ctx, id)?;
        }
        for call in calls {
            super::host_call::emit(&mut emitter, &mut ctx, call, &cluster.name)?;
        }
    }
    let mut results = Vec::new();
    // The true sizes of padded outputs (ops::dynamic_shape): (output, axis, size).
    let mut sizes: Vec<(usize, usize, Val)> = Vec::new();
    for (k, out) in program.outputs.iter().enumerate() {
        let input = graph.data_inputs(out.node).first().map(|i| (i.src, i.output.unwrap_or(0))).ok_or_else(|| {
            XlaError::UnsupportedGraph { message: format!("`{}` reads nothing", graph.node(out.node).name) }
        })?;
        if partitions > 1 {
            ctx.sharding = Some(trace::logical_core(graph.node(input.0)));
        }
        let mut v = emitter.value(&mut ctx, input)?;
        if let Some(d) = ctx.dynamic.get(&v.name).cloned() {
            if out.reduce.is_some() {
                return Err(padded(graph, out.node, "an all-reduced output"));
            }
            sizes.push((k, d.axis, d.size));
        }
        if let Some(reduce) = out.reduce {
            let all = vec![(0..replicas as i64).collect::<Vec<_>>()];
            v = ctx.all_reduce_sum(&v, &all);
            if reduce == crate::exec::ReduceOp::Mean {
                let k = ctx.splat(&v.ty, replicas as f64);
                v = ctx.elementwise("divide", &[&v, &k]);
            }
        }
        results.push(v);
    }
    for (_, _, size) in &sizes {
        results.push(size.clone());
    }
    for &key in &program.carried {
        let v = emitter.value(&mut ctx, key)?;
        if ctx.dynamic.contains_key(&v.name) {
            return Err(padded(graph, key.0, "a value another stage or a host op reads"));
        }
        results.push(v);
    }
    // Results before the variables: outputs, their sizes, then carried values.
    let num_outputs = num_outputs + sizes.len();
    for arg in &program.args {
        if let ArgSource::Variable(h) = arg {
            results.push(emitter.vars[h].clone());
        }
    }
    ctx.sharding = None;
    let result_types: Vec<String> = results.iter().map(|v| v.ty.mlir()).collect();
    let step_body = std::mem::take(&mut ctx.text);
    let mut out = String::new();
    out.push_str(&format!(
        "// The device program of cluster `{}`, stage {} of {}: {} replicas; arguments: {} inputs, {} variables.\n",
        cluster.name,
        program.stage + 1,
        program.stages,
        replicas,
        num_data,
        num_vars
    ));
    for note in &traced.notes {
        out.push_str(&format!("// Note: {note}.\n"));
    }
    let module_name = mlir_ident(&if program.stages > 1 {
        format!("{}_stage{}", cluster.name, program.stage)
    } else {
        cluster.name.clone()
    });
    out.push_str(&format!(
        "module @{module_name} attributes {{mhlo.num_replicas = {replicas} : i32, mhlo.num_partitions = {partitions} : i32}} {{\n"
    ));
    let mut sig = Signature { module: format!("@{module_name}"), num_replicas: replicas, ..Signature::default() };
    let step_sig: Vec<String> = params.iter().map(|p| format!("{}: {}", p.name, p.ty.mlir())).collect();
    out.push_str(&format!("  func.func private @step({}) -> ({}) {{\n", step_sig.join(", "), result_types.join(", ")));
    out.push_str(&step_body);
    let names: Vec<&str> = results.iter().map(|v| v.name.as_str()).collect();
    out.push_str(&format!("    \"func.return\"({}) : ({}) -> ()\n  }}\n", names.join(", "), result_types.join(", ")));
    // The functions the program's call ops name, each specialised to its argument types.
    out.push_str(&lib.definitions());

    // @main, each argument and result named after the graph value it is
    // (`tpu_rewrite.name`, which XLA ignores).
    // A tensor is `node:k`, as feeds and fetches name it; an input or a variable is its node.
    let value_name = |node: NodeId, k: Option<u32>| match k {
        None => graph.node(node).name.to_string(),
        Some(k) => format!("{}:{k}", graph.node(node).name),
    };
    let main_args: Vec<String> = arg_types
        .iter()
        .zip(&program.args)
        .enumerate()
        .map(|(i, (t, arg))| {
            let name = match *arg {
                ArgSource::Replicated(n) | ArgSource::Variable(n) => value_name(n, None),
                ArgSource::Host(n, k) | ArgSource::Carried(n, k) => value_name(n, Some(k)),
            };
            let alias = (i >= num_data).then(|| num_outputs + (i - num_data));
            sig.arguments.push(signature::argument(graph, arg, name.clone(), t, alias));
            let name = mlir_string(&name);
            match alias {
                Some(alias) => {
                    format!("%arg{i}: {} {{tf.aliasing_output = {alias} : i32, tpu_rewrite.name = {name}}}", t.mlir())
                }
                None => format!("%arg{i}: {} {{tpu_rewrite.name = {name}}}", t.mlir()),
            }
        })
        .collect();
    // Results: each output named after the tensor the computation returns.
    let size_names = sizes
        .iter()
        .map(|(k, _, _)| (format!("{}:size", signature::output_name(graph, program.outputs[*k].node)), "size", None));
    let result_names = program
        .outputs
        .iter()
        .map(|o| (signature::output_name(graph, o.node), "output", None))
        .chain(size_names)
        .chain(program.carried.iter().map(|&(n, k)| (value_name(n, Some(k)), "carried", None)))
        .chain(program.args.iter().enumerate().filter_map(|(i, a)| match *a {
            ArgSource::Variable(n) => Some((value_name(n, None), "variable", Some(i))),
            _ => None,
        }));
    let main_results: Vec<String> = results
        .iter()
        .zip(result_names)
        .map(|(v, (name, kind, alias))| {
            let mut entry = signature::result(name.clone(), kind, &v.ty, alias);
            if kind == "size" {
                let (k, axis, _) = &sizes[sig.results.len() - program.outputs.len()];
                entry.size_of = Some(signature::SizeOf { result: *k, axis: *axis });
            }
            sig.results.push(entry);
            format!("{} {{tpu_rewrite.name = {}}}", v.ty.mlir(), mlir_string(&name))
        })
        .collect();
    out.push_str(&format!("  func.func public @main({}) -> ({}) {{\n", main_args.join(", "), main_results.join(", ")));
    let arg_names: Vec<String> = (0..arg_types.len()).map(|i| format!("%arg{i}")).collect();
    let arg_mlir: Vec<String> = arg_types.iter().map(Ty::mlir).collect();
    let mut body = Ctx::default();
    body.indent = 2;
    // Keep SSA names distinct from @step's.
    for _ in 0..params.len() + results.len() + 1 {
        body.fresh();
    }
    let finals: Vec<String> = if steps == 1 {
        let r = body.fresh();
        body.line(&format!(
            "{r}:{} = \"func.call\"({}) {{callee = @step}} : ({}) -> ({})",
            results.len(),
            arg_names.join(", "),
            arg_mlir.join(", "),
            result_types.join(", ")
        ));
        (0..results.len()).map(|i| format!("{r}#{i}")).collect()
    } else {
        while_loop(&mut body, &arg_names, arg_types, &results, num_data, num_outputs, steps)
    };
    out.push_str(&body.text);
    out.push_str(&format!(
        "    \"func.return\"({}) : ({}) -> ()\n  }}\n}}\n",
        finals.join(", "),
        result_types.join(", ")
    ));
    if results.is_empty() {
        // A call with no results prints without `:0`; keep the form simple.
        return Ok((out.replace(":0 = \"func.call\"", " = \"func.call\""), sig));
    }
    Ok((out, sig))
}

/// The refusal of a padded buffer (`ops::dynamic_shape`) where `what` needs its true size.
fn padded(graph: &Graph, node: NodeId, what: &str) -> XlaError {
    XlaError::lowering(
        graph.node(node),
        format!(
            "{what} is a buffer whose size depends on values: on PJRT such a value can only be a plain program output \
             (docs/xla.md, \"Ops whose output size depends on values\")"
        ),
    )
}

/// `@main`'s loop: carries (counter, data args, variables, last outputs).
fn while_loop(
    c: &mut Ctx,
    arg_names: &[String],
    arg_types: &[Ty],
    results: &[Val],
    num_data: usize,
    num_outputs: usize,
    steps: usize,
) -> Vec<String> {
    let counter_ty = Ty::scalar(crate::ir::DType::I64);
    let zero = c.splat(&counter_ty, 0.0);
    let mut init = vec![zero.name.clone()];
    let mut types = vec![counter_ty.clone()];
    init.extend(arg_names.iter().cloned());
    types.extend(arg_types.iter().cloned());
    for v in &results[..num_outputs] {
        let z = c.splat(&v.ty, 0.0);
        init.push(z.name);
        types.push(v.ty.clone());
    }
    let mlir: Vec<String> = types.iter().map(Ty::mlir).collect();
    let n = types.len();
    let w = c.fresh();
    let cond_args: Vec<String> = (0..n).map(|_| c.fresh()).collect();
    let body_args: Vec<String> = (0..n).map(|_| c.fresh()).collect();
    let block =
        |names: &[String]| names.iter().zip(&mlir).map(|(a, t)| format!("{a}: {t}")).collect::<Vec<_>>().join(", ");
    c.line(&format!("{w}:{n} = \"stablehlo.while\"({}) ({{", init.join(", ")));
    c.line(&format!("^bb0({}):", block(&cond_args)));
    c.indent += 1;
    let limit = c.splat(&counter_ty, steps as f64);
    let counter = Val { name: cond_args[0].clone(), ty: counter_ty.clone() };
    let p = c.compare(&counter, &limit, text::Cmp::Lt);
    c.line(&format!("\"stablehlo.return\"({}) : (tensor<i1>) -> ()", p.name));
    c.indent -= 1;
    c.line("}, {");
    c.line(&format!("^bb0({}):", block(&body_args)));
    c.indent += 1;
    let step_args = &body_args[1..1 + arg_names.len()];
    let result_mlir: Vec<String> = results.iter().map(|v| v.ty.mlir()).collect();
    let r = c.fresh();
    c.line(&format!(
        "{r}:{} = \"func.call\"({}) {{callee = @step}} : ({}) -> ({})",
        results.len(),
        step_args.join(", "),
        arg_types.iter().map(Ty::mlir).collect::<Vec<_>>().join(", "),
        result_mlir.join(", ")
    ));
    let one = c.splat(&counter_ty, 1.0);
    let next = c.elementwise("add", &[&Val { name: body_args[0].clone(), ty: counter_ty.clone() }, &one]);
    let mut carried = vec![next.name];
    carried.extend(body_args[1..1 + num_data].iter().cloned());
    carried.extend((num_outputs..results.len()).map(|i| format!("{r}#{i}")));
    carried.extend((0..num_outputs).map(|i| format!("{r}#{i}")));
    c.line(&format!("\"stablehlo.return\"({}) : ({}) -> ()", carried.join(", "), mlir.join(", ")));
    c.indent -= 1;
    c.line(&format!("}}) : ({}) -> ({})", mlir.join(", "), mlir.join(", ")));
    // Results: outputs, then variables.
    let vars_at = 1 + num_data;
    let outs_at = 1 + arg_names.len();
    let mut finals: Vec<String> = (0..num_outputs).map(|i| format!("{w}#{}", outs_at + i)).collect();
    finals.extend((0..results.len() - num_outputs).map(|i| format!("{w}#{}", vars_at + i)));
    finals
}

/// A symbol name MLIR accepts (`@cluster`, `@"odd name"`).
fn mlir_ident(name: &str) -> String {
    if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "'"))
    }
}

/// `text` as an MLIR string literal.
pub(super) fn mlir_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push_str(&format!("\\{:02X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
