//! StableHLO emission: a replicate cluster's device program as one MLIR
//! module in the `stablehlo` and `func` dialects.
//!
//! Meaning: the program of a cluster is its ops minus metadata, pivots and
//! outside-compilation ops. Its arguments, in order: one per
//! `TPUReplicatedInput` it reads (each replica gets its own operand), one
//! per tensor it reads from outside the cluster (the same on every
//! replica), then one per variable (resource) it reads or writes. Its
//! results: one per `TPUReplicatedOutput` (all-reduced when the output
//! carries `reduce_op` SUM or MEAN), then every variable's final value.
//! Each variable argument is aliased to its result (`tf.aliasing_output`),
//! so variables stay on the device between steps. `@step` is one step;
//! `@main` calls it once, or runs it `steps_per_run` times in a
//! `stablehlo.while` that carries the variables and the last outputs.
//! The module carries `mhlo.num_replicas` and `mhlo.num_partitions`.
//!
//! Static shapes: the program is traced once on the host ([`trace`]) with
//! replica 0's argument values, which gives every value's type; values
//! that depend on no argument, variable, replica id or collective (shape
//! arithmetic, axes, constants) are printed as constants, so `Reshape`,
//! `Sum` and `Tile` see their shapes and axes at compile time.
//!
//! Logical cores: a program with several cores per replica is emitted as
//! one program per replica (`num_partitions = 1`), which computes the
//! same values; see docs/xla.md. Cost: linear in the program's size, plus
//! one host evaluation of it for the trace.

pub mod ops;
pub mod text;
mod trace;

use std::collections::{BTreeSet, HashMap};

use super::error::XlaError;
use super::host::{Host, MissingFeed};
use crate::exec::Tensor;
use crate::ir::{Graph, NodeId};
use crate::lower::DeviceAssignment;
use crate::passes::common::OUTSIDE_COMPILATION;
use crate::passes::ReplicateCluster;
use text::{Ctx, Ty, Val};

/// Settings of an emission.
#[derive(Clone, Debug)]
pub struct Config<'a> {
    /// Device iterations per run: `@main` loops this many times.
    pub steps_per_run: u32,
    /// Feeds (tensor name → value) for the host values the program reads.
    pub feeds: &'a [(String, Tensor)],
    /// What an unfed placeholder becomes.
    pub missing_feed: MissingFeed,
}

/// Where an argument of `@main` comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum ArgSource {
    /// A `TPUReplicatedInput`: replica r gets its operand r.
    Replicated(NodeId),
    /// A host tensor, the same on every replica.
    Host(NodeId, u32),
    /// A variable (its `VarHandleOp`), aliased to a result.
    Variable(NodeId),
}

/// A computation output.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputSpec {
    /// The `TPUReplicatedOutput` node.
    pub node: NodeId,
    /// Its `reduce_op`, if any.
    pub reduce: Option<crate::exec::ReduceOp>,
}

/// An emitted module and what its signature means.
#[derive(Clone, Debug)]
pub struct Emitted {
    /// The MLIR text.
    pub module: String,
    /// `@main`'s arguments, in order.
    pub args: Vec<ArgSource>,
    /// The argument values, `[argument][replica]`.
    pub arg_values: Vec<Vec<Tensor>>,
    /// The computation outputs (the first results of `@main`).
    pub outputs: Vec<OutputSpec>,
    /// The variables, in argument order (the last results of `@main`).
    pub variables: Vec<NodeId>,
    pub num_replicas: usize,
    pub num_partitions: usize,
    /// `device_ids[replica][partition]`: the device of each program copy.
    pub device_ids: Vec<Vec<i64>>,
}

/// The ops of a cluster that are not computation.
const STRUCTURAL: &[&str] = &["TPUReplicateMetadata", "NoOp", "TPUCompilationResult"];
/// Ops that read or write a variable through operand 0.
pub(crate) const VARIABLE_OPS: &[&str] = &[
    "ReadVariableOp",
    "AssignVariableOp",
    "AssignAddVariableOp",
    "AssignSubVariableOp",
    "Update",
    "VarIsInitializedOp",
];

/// The device program of a cluster, before emission.
pub(crate) struct Program {
    /// Device ops in dependency order.
    pub nodes: Vec<NodeId>,
    pub args: Vec<ArgSource>,
    pub outputs: Vec<OutputSpec>,
}

/// Emits the device program of `cluster` as a StableHLO module.
pub fn emit_module(
    graph: &Graph,
    cluster: &ReplicateCluster,
    assignment: &DeviceAssignment,
    config: &Config,
) -> Result<Emitted, XlaError> {
    let program = extract(graph, cluster)?;
    let replicas = cluster.num_replicas as usize;
    let mut host = Host::new(graph, config.feeds, config.missing_feed);
    let mut arg_values = Vec::with_capacity(program.args.len());
    for arg in &program.args {
        let values = match *arg {
            ArgSource::Replicated(input) => {
                let operands = graph.data_inputs(input);
                if operands.len() != replicas {
                    return Err(XlaError::UnsupportedGraph {
                        message: format!(
                            "`{}` has {} operands for {replicas} replicas",
                            graph.node(input).name,
                            operands.len()
                        ),
                    });
                }
                let mut v = Vec::with_capacity(replicas);
                for o in &operands {
                    v.push(host.value(o.src, o.output.unwrap_or(0))?);
                }
                v
            }
            ArgSource::Host(id, output) => vec![host.value(id, output)?; replicas],
            ArgSource::Variable(handle) => vec![host.initial_value(handle)?; replicas],
        };
        for v in &values {
            if !text::device_dtype(v.dtype()) {
                return Err(XlaError::DType { what: arg_name(graph, arg), dtype: v.dtype().to_string() });
            }
        }
        arg_values.push(values);
    }
    let first: Vec<Tensor> = arg_values.iter().map(|v| v[0].clone()).collect();
    let traced = trace::trace(graph, &program, &first)?;
    let variables: Vec<NodeId> = program
        .args
        .iter()
        .filter_map(|a| match a {
            ArgSource::Variable(h) => Some(*h),
            _ => None,
        })
        .collect();
    let module = assemble(graph, cluster, &program, &traced, &first, config.steps_per_run.max(1) as usize)?;
    let device_ids = assignment
        .cores
        .iter()
        .take(replicas)
        .map(|cores| {
            let core = cores.first().copied().unwrap_or(crate::lower::PhysicalCore { task: 0, core: 0 });
            vec![i64::from(core.task * assignment.topology.cores_per_host + core.core)]
        })
        .collect();
    Ok(Emitted {
        module,
        args: program.args,
        arg_values,
        outputs: program.outputs,
        variables,
        num_replicas: replicas,
        num_partitions: 1,
        device_ids,
    })
}

/// Every cluster's module, for `lower --format stablehlo`: unfed
/// placeholders are zeros of their declared shapes (their values do not
/// appear in the module), and several clusters' modules are separated by
/// `// -----` lines (MLIR's split-input-file marker).
pub fn emit_all(graph: &Graph, assignment: &DeviceAssignment, steps_per_run: u32) -> Result<String, XlaError> {
    let (clusters, errors) = crate::passes::form_clusters(graph);
    if let Some(e) = errors.into_iter().next() {
        return Err(XlaError::UnsupportedGraph { message: e.to_string() });
    }
    if clusters.is_empty() {
        return Err(XlaError::UnsupportedGraph { message: "the graph has no replicate cluster".into() });
    }
    let config = Config { steps_per_run, feeds: &[], missing_feed: MissingFeed::Zeros };
    let mut modules = Vec::with_capacity(clusters.len());
    for cluster in &clusters {
        modules.push(emit_module(graph, cluster, assignment, &config)?.module);
    }
    Ok(modules.join("// -----\n"))
}

/// A readable name of an argument.
pub fn arg_name(graph: &Graph, arg: &ArgSource) -> String {
    match *arg {
        ArgSource::Replicated(id) | ArgSource::Variable(id) => graph.node(id).name.to_string(),
        ArgSource::Host(id, o) => format!("{}:{o}", graph.node(id).name),
    }
}

/// Finds the device program of `cluster`.
fn extract(graph: &Graph, cluster: &ReplicateCluster) -> Result<Program, XlaError> {
    let is_oc = |id: NodeId| graph.node(id).attrs.get_str(OUTSIDE_COMPILATION).is_some();
    let device: BTreeSet<NodeId> = cluster
        .members
        .iter()
        .copied()
        .filter(|&id| !is_oc(id) && !STRUCTURAL.contains(&&*graph.node(id).op))
        .collect();
    let oc: BTreeSet<NodeId> = cluster.members.iter().copied().filter(|&id| is_oc(id)).collect();
    // Dependency order over data and control edges among device ops.
    let mut order = Vec::with_capacity(device.len());
    let mut state: HashMap<NodeId, bool> = HashMap::new();
    for &root in &cluster.members {
        if !device.contains(&root) || state.contains_key(&root) {
            continue;
        }
        let mut stack = vec![(root, false)];
        while let Some((id, done)) = stack.pop() {
            if done {
                state.insert(id, true);
                order.push(id);
                continue;
            }
            if state.contains_key(&id) {
                continue;
            }
            state.insert(id, false);
            stack.push((id, true));
            for i in graph.inputs(id).iter().rev() {
                if device.contains(&i.src) && !state.contains_key(&i.src) {
                    stack.push((i.src, false));
                }
            }
        }
    }
    let mut args = Vec::new();
    let mut seen: HashMap<ArgSource, ()> = HashMap::new();
    for &id in &order {
        let node = graph.node(id);
        for (slot, input) in graph.data_inputs(id).iter().enumerate() {
            let src = graph.node(input.src);
            let arg = if device.contains(&input.src) {
                continue;
            } else if oc.contains(&input.src) {
                return Err(XlaError::UnsupportedGraph {
                    message: format!(
                        "`{}` reads `{}`, computed in outside_compilation cluster `{}`: the pjrt backend does not yet return host results to the device (see docs/xla.md)",
                        node.name,
                        src.name,
                        src.attrs.get_str(OUTSIDE_COMPILATION).unwrap_or_default()
                    ),
                });
            } else if &*src.op == "TPUReplicatedInput" {
                ArgSource::Replicated(input.src)
            } else if slot == 0 && VARIABLE_OPS.contains(&&*node.op) {
                if !matches!(&*src.op, "VarHandleOp") {
                    return Err(XlaError::UnsupportedGraph {
                        message: format!(
                            "`{}` reads variable handle `{}` ({}), not a VarHandleOp",
                            node.name, src.name, src.op
                        ),
                    });
                }
                ArgSource::Variable(input.src)
            } else {
                ArgSource::Host(input.src, input.output.unwrap_or(0))
            };
            if seen.insert(arg.clone(), ()).is_none() {
                args.push(arg);
            }
        }
    }
    // Inputs first, then host tensors, then variables.
    args.sort_by_key(|a| match a {
        ArgSource::Replicated(_) => 0,
        ArgSource::Host(..) => 1,
        ArgSource::Variable(_) => 2,
    });
    let outputs = cluster
        .outputs
        .iter()
        .map(|&id| OutputSpec {
            node: id,
            reduce: graph.node(id).attrs.get_str("reduce_op").and_then(crate::exec::ReduceOp::parse),
        })
        .collect();
    Ok(Program { nodes: order, args, outputs })
}

impl std::hash::Hash for ArgSource {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        match self {
            ArgSource::Replicated(id) => (0u8, id.0.index(), 0u32).hash(state),
            ArgSource::Host(id, o) => (1u8, id.0.index(), *o).hash(state),
            ArgSource::Variable(id) => (2u8, id.0.index(), 0u32).hash(state),
        }
    }
}
impl Eq for ArgSource {}

/// Prints the module: `@step`, then `@main`.
fn assemble(
    graph: &Graph,
    cluster: &ReplicateCluster,
    program: &Program,
    traced: &trace::Trace,
    first: &[Tensor],
    steps: usize,
) -> Result<String, XlaError> {
    let replicas = cluster.num_replicas as usize;
    let arg_types: Vec<Ty> = first.iter().map(Ty::of).collect();
    let num_vars = program.args.iter().filter(|a| matches!(a, ArgSource::Variable(_))).count();
    let num_data = program.args.len() - num_vars;
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
            ArgSource::Host(id, o) => {
                env.insert((id, o), p.clone());
            }
            ArgSource::Variable(id) => {
                vars.insert(id, p.clone());
            }
        }
    }
    let mut emitter = trace::Emitter { graph, traced, env, vars, replicas };
    for &id in &program.nodes {
        emitter.node(&mut ctx, id)?;
    }
    let mut results = Vec::new();
    for out in &program.outputs {
        let input = graph.data_inputs(out.node).first().map(|i| (i.src, i.output.unwrap_or(0))).ok_or_else(|| {
            XlaError::UnsupportedGraph { message: format!("`{}` reads nothing", graph.node(out.node).name) }
        })?;
        let mut v = emitter.value(&mut ctx, input)?;
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
    for arg in &program.args {
        if let ArgSource::Variable(h) = arg {
            results.push(emitter.vars[h].clone());
        }
    }
    let result_types: Vec<String> = results.iter().map(|v| v.ty.mlir()).collect();
    let step_body = std::mem::take(&mut ctx.text);
    let mut out = String::new();
    out.push_str(&format!(
        "// The device program of cluster `{}`: {} replicas; arguments: {} inputs, {} variables.\n",
        cluster.name, replicas, num_data, num_vars
    ));
    out.push_str(&format!(
        "module @{} attributes {{mhlo.num_replicas = {replicas} : i32, mhlo.num_partitions = 1 : i32}} {{\n",
        mlir_ident(&cluster.name)
    ));
    let sig: Vec<String> = params.iter().map(|p| format!("{}: {}", p.name, p.ty.mlir())).collect();
    out.push_str(&format!("  func.func private @step({}) -> ({}) {{\n", sig.join(", "), result_types.join(", ")));
    out.push_str(&step_body);
    let names: Vec<&str> = results.iter().map(|v| v.name.as_str()).collect();
    out.push_str(&format!("    \"func.return\"({}) : ({}) -> ()\n  }}\n", names.join(", "), result_types.join(", ")));

    // @main.
    let num_outputs = program.outputs.len();
    let main_args: Vec<String> = arg_types
        .iter()
        .enumerate()
        .map(|(i, t)| {
            if i >= num_data {
                format!("%arg{i}: {} {{tf.aliasing_output = {} : i32}}", t.mlir(), num_outputs + (i - num_data))
            } else {
                format!("%arg{i}: {}", t.mlir())
            }
        })
        .collect();
    out.push_str(&format!("  func.func public @main({}) -> ({}) {{\n", main_args.join(", "), result_types.join(", ")));
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
        while_loop(&mut body, &arg_names, &arg_types, &results, num_data, num_outputs, steps)
    };
    out.push_str(&body.text);
    out.push_str(&format!(
        "    \"func.return\"({}) : ({}) -> ()\n  }}\n}}\n",
        finals.join(", "),
        result_types.join(", ")
    ));
    if results.is_empty() {
        // A call with no results prints without `:0`; keep the form simple.
        return Ok(out.replace(":0 = \"func.call\"", " = \"func.call\""));
    }
    Ok(out)
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
