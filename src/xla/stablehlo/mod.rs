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
//! Functional control flow (`While`, `If`, `Case`, calls) becomes
//! `stablehlo.while`/`if`/`case` and `func.call` over private functions
//! printed after `@step` (`calls.rs`).
//!
//! Static shapes: every value's type comes from the op type rules
//! (`types`, over `ir::shapes::rules`), from the arguments' types; values
//! that depend on no argument, variable, replica id or collective (shape
//! arithmetic, axes, constants) are folded and printed as constants, so
//! `Reshape`, `Sum` and `Tile` see their shapes and axes at compile time.
//! Programs with call ops, TensorLists or Optionals are instead run once
//! on the host (`trace`) with replica 0's argument values, and the module
//! says so in a `// Note:` line. Compiling only ([`emit_all`]), declared
//! placeholder and variable types stand for their values, which are not
//! computed.
//!
//! Logical cores (model parallelism): with several cores per replica the
//! module has `num_partitions` = cores per replica, and every op carries a
//! maximal sharding `mhlo.sharding = "{maximal device=k}"` for its logical
//! core k, as TensorFlow's bridge writes it; XLA's SPMD partitioner moves
//! values between cores. Cost: linear in the program's size, plus the
//! folded constants (and one host evaluation of the program when traced).

mod assemble;
mod calls;
mod host_call;
mod lists;
pub(crate) mod ops;
mod pack;
pub mod signature;
pub(crate) mod text;

/// The op types the StableHLO lowering table has a builder for, sorted.
pub fn lowered_ops() -> impl Iterator<Item = &'static str> {
    ops::TABLE.iter().map(|(name, _)| *name)
}

/// How `--backend pjrt` runs op type `op`: `builder`, `variable update`,
/// `constant`, `structural`, `control flow` (call ops), `function
/// signature` (`_Arg`, `_Retval`), or `None` when it does not.
pub fn lowering_of(op: &str) -> Option<&'static str> {
    ops::lowering_of(op)
}

/// Why op type `op` has no lowering (host-only, TF1 control flow,
/// TensorLists and Optionals, the simulator's transfers), or `None`.
pub fn unlowered_reason(op: &str) -> Option<&'static str> {
    ops::reason(op)
}
mod trace;
mod types;

use std::collections::{BTreeSet, HashMap};

pub use host_call::{CallForm, HostCall, HostTransfer, TARGET};

use super::error::XlaError;
use super::host::{Host, MissingFeed};
use crate::exec::Tensor;
use crate::ir::{DType, Graph, NodeId};
use crate::lower::DeviceAssignment;
use crate::passes::common::OUTSIDE_COMPILATION;
use crate::passes::ReplicateCluster;

/// Settings of an emission.
#[derive(Clone, Debug)]
pub struct Config<'a> {
    /// Device iterations per run: `@main` loops this many times (when the
    /// program has one stage; see [`Staged`]).
    pub steps_per_run: u32,
    /// Feeds (tensor name → value) for the host values the program reads.
    pub feeds: &'a [(String, Tensor)],
    /// What an unfed placeholder becomes.
    pub missing_feed: MissingFeed,
    /// How the device program reaches outside-compilation ops.
    pub host_transfer: HostTransfer,
    /// The registry id host callbacks carry (`run` in `backend_config`).
    pub run: u64,
    /// False when compiling only (`lower`): host ops evaluated for the
    /// program's arguments print nothing (lowering has no side effects).
    pub host_effects: bool,
    /// The module whose functions (`role = "function"`) the graph's
    /// `While`, `If`, `Case` and call ops name; `None`: no functions.
    pub library: Option<&'a crate::ir::Module>,
    /// Whether independent `CrossReplicaSum`s share all-reduces (`pack`);
    /// false under `--all-reduce-fusion off`.
    pub pack_sums: bool,
}

/// Where an argument of `@main` comes from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ArgSource {
    /// A `TPUReplicatedInput`: replica r gets its operand r.
    Replicated(NodeId),
    /// A host tensor, the same on every replica.
    Host(NodeId, u32),
    /// A value of this replica computed by an earlier stage (on the device)
    /// or by an outside-compilation op (on the host).
    Carried(NodeId, u32),
    /// A variable (its `VarHandleOp`), aliased to a result.
    Variable(NodeId),
}

impl ArgSource {
    /// The order of argument kinds in `@main`.
    fn rank(&self) -> u8 {
        match self {
            ArgSource::Replicated(_) => 0,
            ArgSource::Host(..) => 1,
            ArgSource::Carried(..) => 2,
            ArgSource::Variable(_) => 3,
        }
    }
}

/// Puts `@main`'s arguments in their documented order: by kind
/// ([`ArgSource::rank`]), feeds and host values in the order the graph
/// declares their nodes (a replicated input by its replica-0 operand), so
/// placeholders keep the graph's order; carried values in the order the
/// program reads them; variables in the order the graph declares their
/// handles.
fn order_args(graph: &Graph, args: &mut [ArgSource]) {
    let position = |arg: &ArgSource| match *arg {
        ArgSource::Replicated(input) => {
            let first = graph.data_inputs(input).first().map_or(input, |o| o.src);
            (graph.node(first).seq, 0)
        }
        ArgSource::Host(id, k) => (graph.node(id).seq, k),
        ArgSource::Carried(..) => (0, 0),
        ArgSource::Variable(id) => (graph.node(id).seq, 0),
    };
    args.sort_by_key(|a| (a.rank(), position(a)));
}

/// A computation output.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputSpec {
    /// The `TPUReplicatedOutput` node.
    pub node: NodeId,
    /// Its `reduce_op`, if any.
    pub reduce: Option<crate::exec::ReduceOp>,
}

/// One emitted module (one stage of a cluster) and what its signature means.
#[derive(Clone, Debug)]
pub struct Emitted {
    /// The MLIR text.
    pub module: String,
    /// `@main`'s arguments and results, as the sidecar JSON gives them.
    pub signature: signature::Signature,
    /// `@main`'s arguments, in order.
    pub args: Vec<ArgSource>,
    /// The argument values, `[argument][replica]` (for `Carried`
    /// arguments, the trace's replica-0 value: the run supplies its own;
    /// empty for the modules of [`emit_all`], which only compile).
    pub arg_values: Vec<Vec<Tensor>>,
    /// The computation outputs this stage computes (its first results).
    pub outputs: Vec<OutputSpec>,
    /// Values later stages or host ops read (the next results).
    pub carried: Vec<(NodeId, u32)>,
    /// The variables, in argument order (the last results).
    pub variables: Vec<NodeId>,
    /// How many replicas the module runs as.
    pub num_replicas: usize,
    /// How many partitions (logical cores) each replica has.
    pub num_partitions: usize,
    /// `device_ids[replica][partition]`: the device of each program copy.
    pub device_ids: Vec<Vec<i64>>,
}

/// A cluster's device program: one module per stage. Outside-compilation
/// ops whose results the device reads split the program: stage k runs on
/// the devices, then `host_ops[k]` run on the host for every replica, and
/// their results are arguments of later stages. Without such ops there is
/// one stage and no host ops.
#[derive(Clone, Debug)]
pub struct Staged {
    /// The modules, in the order they run.
    pub stages: Vec<Emitted>,
    /// Outside-compilation ops to run after each stage, in dependency order.
    pub host_ops: Vec<Vec<NodeId>>,
    /// Compile-time values host ops read from the cluster (constants).
    pub folded: HashMap<(NodeId, u32), Tensor>,
    /// The host calls inside the (single) module, when the stages were
    /// joined ([`HostTransfer::Callback`], [`HostTransfer::SendRecv`]).
    pub calls: Vec<HostCall>,
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
    "UpdateNonSlot",
    "VarIsInitializedOp",
];

/// A device program (or the whole cluster, for the trace), before emission.
pub(crate) struct Program {
    /// Ops in dependency order.
    pub nodes: Vec<NodeId>,
    pub args: Vec<ArgSource>,
    pub outputs: Vec<OutputSpec>,
    pub carried: Vec<(NodeId, u32)>,
    /// This program's stage and the stage count, for its name.
    pub stage: usize,
    pub stages: usize,
    /// Host calls inside the program (joined stages).
    pub calls: Vec<HostCall>,
}

/// Emits the device program of `cluster` as StableHLO, one module per stage.
pub fn emit_module(
    graph: &Graph,
    cluster: &ReplicateCluster,
    assignment: &DeviceAssignment,
    config: &Config,
) -> Result<Staged, XlaError> {
    emit(graph, cluster, assignment, config, false)
}

/// The type of argument `arg` from its declaration (a placeholder's
/// `dtype` and `shape`, unknown dims 1 as an unfed placeholder's ones; a
/// variable's `dtype` and `shape`), or `None` when it declares none.
fn declared_type(graph: &Graph, arg: &ArgSource) -> Option<text::Ty> {
    let (id, output) = match *arg {
        ArgSource::Replicated(input) => {
            let first = *graph.data_inputs(input).first()?;
            (first.src, first.output.unwrap_or(0))
        }
        ArgSource::Host(id, o) => (id, o),
        ArgSource::Variable(id) => (id, 0),
        ArgSource::Carried(..) => return None,
    };
    let node = graph.node(id);
    let (dtype_key, known) = match &*node.op {
        "Placeholder" if output == 0 => ("dtype", false),
        "VarHandleOp" => ("dtype", true),
        _ => return None,
    };
    let dtype = node.attrs.get(dtype_key)?.as_type()?;
    let dims = node.attrs.get("shape")?.as_shape()?.dims.clone()?;
    if known && dims.iter().any(|&d| d < 0) {
        return None;
    }
    Some(text::Ty::new(dtype, dims.iter().map(|&d| d.max(1) as usize).collect()))
}

/// [`emit_module`]; with `only_types` (compiling without running), the
/// arguments' values are not computed where their declarations give
/// their types, and the stages carry no argument values. Either way the
/// program is typed by the rules ([`types::infer`]) and traced on the
/// simulator only when its types can depend on values.
fn emit(
    graph: &Graph,
    cluster: &ReplicateCluster,
    assignment: &DeviceAssignment,
    config: &Config,
    only_types: bool,
) -> Result<Staged, XlaError> {
    let replicas = cluster.num_replicas as usize;
    let analysis = analyse(graph, cluster)?;
    let mut host = Host::new(graph, config.feeds, config.missing_feed);
    if !config.host_effects {
        host = host.without_effects();
    }
    let only_types = only_types && config.feeds.is_empty() && types::needs_values(graph, &analysis.whole).is_none();
    // Values (or, compiling only, types) of every argument the whole cluster reads.
    let mut values: HashMap<ArgSource, Vec<Tensor>> = HashMap::new();
    let mut arg_types: HashMap<ArgSource, text::Ty> = HashMap::new();
    for arg in &analysis.whole.args {
        if let ArgSource::Replicated(input) = *arg {
            let n = graph.data_inputs(input).len();
            if n != replicas {
                return Err(XlaError::UnsupportedGraph {
                    message: format!("`{}` has {n} operands for {replicas} replicas", graph.node(input).name),
                });
            }
        }
        if let (true, Some(ty)) = (only_types, declared_type(graph, arg)) {
            if !text::device_dtype(ty.dtype) {
                return Err(XlaError::DType { what: arg_name(graph, arg), dtype: ty.dtype.to_string() });
            }
            arg_types.insert(arg.clone(), ty);
            continue;
        }
        let v = match *arg {
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
            ArgSource::Carried(..) => continue,
        };
        for t in &v {
            if !text::device_dtype(t.dtype()) {
                return Err(XlaError::DType { what: arg_name(graph, arg), dtype: t.dtype().to_string() });
            }
        }
        arg_types.insert(arg.clone(), text::Ty::of(&v[0]));
        values.insert(arg.clone(), v);
    }
    let lib = calls::Library::new(config.library)?;
    let traced = if only_types {
        let types: Vec<text::Ty> = analysis.whole.args.iter().map(|a| arg_types[a].clone()).collect();
        match types::infer(graph, &analysis.whole, &types, None)? {
            types::Typed::Done(trace) => trace,
            // Typing needs the arguments' values: compute them.
            types::Typed::Whole(_) => return emit(graph, cluster, assignment, config, false),
        }
    } else {
        // Running: the arguments' values are known, so they fix the types;
        // the rules type the program unless its types can depend on values.
        let first: Vec<Tensor> = analysis.whole.args.iter().map(|a| values[a][0].clone()).collect();
        let typed = match types::needs_values(graph, &analysis.whole) {
            None => {
                let types: Vec<text::Ty> = analysis.whole.args.iter().map(|a| arg_types[a].clone()).collect();
                types::infer(graph, &analysis.whole, &types, Some(&first))?
            }
            Some(_) => types::Typed::Whole(String::new()),
        };
        match typed {
            types::Typed::Done(trace) => trace,
            types::Typed::Whole(_) => trace::trace(graph, &analysis.whole, &first, &lib)?,
        }
    };
    // Strings live on the host: a string value inside the cluster cannot go to the device.
    let mut strings: Vec<NodeId> =
        traced.values.iter().filter(|(_, v)| v.ty.dtype == DType::Str).map(|(&(id, _), _)| id).collect();
    strings.sort_unstable();
    if let Some(&id) = strings.first() {
        return Err(XlaError::DType {
            what: format!("`%{}` (in the cluster)", graph.node(id).name),
            dtype: "string".into(),
        });
    }
    let (mut programs, host_ops) = stage(graph, &analysis, &traced)?;
    let partitions = cluster.num_cores_per_replica.max(1) as usize;
    let mut calls = Vec::new();
    // Joined stages need one program copy per replica: the callback routes
    // by replica id (model parallelism keeps the stages).
    if programs.len() > 1 && config.host_transfer != HostTransfer::Stages && partitions == 1 {
        let (joined, c) =
            host_call::join(graph, &analysis, programs, &host_ops, &traced, config.host_transfer, config.run);
        programs = vec![joined];
        calls = c;
    }
    let steps = if programs.len() == 1 { config.steps_per_run.max(1) as usize } else { 1 };
    let device_ids: Vec<Vec<i64>> = assignment
        .cores
        .iter()
        .take(replicas)
        .map(|cores| {
            cores
                .iter()
                .take(partitions)
                .map(|c| i64::from(c.task * assignment.topology.cores_per_host + c.core))
                .collect()
        })
        .collect();
    let mut stages = Vec::with_capacity(programs.len());
    for program in &programs {
        // Carried values come from the previous stage: placeholders here, of their traced types.
        let arg_values: Vec<Vec<Tensor>> = if only_types {
            Vec::new()
        } else {
            program
                .args
                .iter()
                .map(|a| match a {
                    ArgSource::Carried(id, o) => {
                        let v = traced.values.get(&(*id, *o)).and_then(|t| t.value.clone());
                        vec![v.unwrap_or_else(|| Tensor::scalar(0f32)); replicas]
                    }
                    other => values[other].clone(),
                })
                .collect()
        };
        let mut types = Vec::with_capacity(program.args.len());
        for a in &program.args {
            types.push(match a {
                ArgSource::Carried(id, o) => {
                    traced.values.get(&(*id, *o)).map(|t| t.ty.clone()).ok_or_else(|| XlaError::UnsupportedGraph {
                        message: format!("carried value `{}` has no type", arg_name(graph, a)),
                    })?
                }
                other => arg_types[other].clone(),
            });
        }
        let how = assemble::Assembly { steps, pack_sums: config.pack_sums };
        let (module, signature) = assemble::assemble(graph, cluster, program, &traced, &types, how, &lib)?;
        stages.push(Emitted {
            module,
            signature,
            args: program.args.clone(),
            arg_values,
            outputs: program.outputs.clone(),
            carried: program.carried.clone(),
            variables: program
                .args
                .iter()
                .filter_map(|a| match a {
                    ArgSource::Variable(h) => Some(*h),
                    _ => None,
                })
                .collect(),
            num_replicas: replicas,
            num_partitions: partitions,
            device_ids: device_ids.clone(),
        });
    }
    let mut folded = HashMap::new();
    for ops in &host_ops {
        for &id in ops {
            for input in graph.data_inputs(id) {
                let key = (input.src, input.output.unwrap_or(0));
                if let Some(v) = traced.values.get(&key).filter(|t| t.constant).and_then(|t| t.value.as_ref()) {
                    folded.insert(key, v.clone());
                }
            }
        }
    }
    // Joined stages: the host ops run inside the calls, not between executions.
    let host_ops = if calls.is_empty() { host_ops } else { vec![Vec::new()] };
    Ok(Staged { stages, host_ops, folded, calls })
}

/// Every cluster's modules, for `lower --format stablehlo`: unfed
/// placeholders are ones of their declared shapes (their values do not
/// appear in the module), and modules are separated by `// -----` lines
/// (MLIR's split-input-file marker).
pub fn emit_all(
    graph: &Graph,
    assignment: &DeviceAssignment,
    steps_per_run: u32,
    host_transfer: HostTransfer,
    library: Option<&crate::ir::Module>,
) -> Result<String, XlaError> {
    emit_all_with_signatures(graph, assignment, steps_per_run, host_transfer, library, true).map(|(text, _)| text)
}

/// [`emit_all`], with each module's `@main` signature in module order,
/// and independent cross-replica sums packed when `pack_sums`.
/// Compiling only: host ops print nothing and assert nothing.
pub fn emit_all_with_signatures(
    graph: &Graph,
    assignment: &DeviceAssignment,
    steps_per_run: u32,
    host_transfer: HostTransfer,
    library: Option<&crate::ir::Module>,
    pack_sums: bool,
) -> Result<(String, Vec<signature::Signature>), XlaError> {
    let (clusters, errors) = crate::passes::form_clusters(graph);
    if let Some(e) = errors.into_iter().next() {
        return Err(XlaError::UnsupportedGraph { message: e.to_string() });
    }
    if clusters.is_empty() {
        return Err(XlaError::UnsupportedGraph { message: "the graph has no replicate cluster".into() });
    }
    let config = Config {
        steps_per_run,
        feeds: &[],
        missing_feed: MissingFeed::Ones,
        host_transfer,
        run: 0,
        host_effects: false,
        library,
        pack_sums,
    };
    let mut modules = Vec::new();
    let mut signatures = Vec::new();
    for cluster in &clusters {
        for stage in emit(graph, cluster, assignment, &config, true)?.stages {
            modules.push(stage.module);
            signatures.push(stage.signature);
        }
    }
    Ok((modules.join("// -----\n"), signatures))
}

/// A readable name of an argument.
pub fn arg_name(graph: &Graph, arg: &ArgSource) -> String {
    match *arg {
        ArgSource::Replicated(id) | ArgSource::Variable(id) => graph.node(id).name.to_string(),
        ArgSource::Host(id, o) | ArgSource::Carried(id, o) => format!("{}:{o}", graph.node(id).name),
    }
}

/// A cluster split into device ops and the outside-compilation ops the
/// device depends on, in one dependency order.
struct Analysis {
    /// The whole cluster as one program (device and needed host ops), for the trace.
    whole: Program,
    device: BTreeSet<NodeId>,
    oc: BTreeSet<NodeId>,
}

/// Finds the device ops, the outside-compilation ops whose results reach
/// a device op, their dependency order and the arguments they read.
/// Outside-compilation ops no device op depends on (a value copied to the
/// host and never returned) are left out.
fn analyse(graph: &Graph, cluster: &ReplicateCluster) -> Result<Analysis, XlaError> {
    let is_oc = |id: NodeId| graph.node(id).attrs.get_str(OUTSIDE_COMPILATION).is_some();
    let device: BTreeSet<NodeId> = cluster
        .members
        .iter()
        .copied()
        .filter(|&id| !is_oc(id) && !STRUCTURAL.contains(&&*graph.node(id).op))
        .collect();
    let all_oc: BTreeSet<NodeId> = cluster.members.iter().copied().filter(|&id| is_oc(id)).collect();
    // The host ops some device op depends on (through data edges).
    let mut oc = BTreeSet::new();
    let mut stack: Vec<NodeId> = device
        .iter()
        .flat_map(|&d| graph.data_inputs(d).into_iter().map(|i| i.src))
        .filter(|s| all_oc.contains(s))
        .collect();
    while let Some(id) = stack.pop() {
        if oc.insert(id) {
            stack.extend(
                graph.data_inputs(id).into_iter().map(|i| i.src).filter(|s| all_oc.contains(s) && !oc.contains(s)),
            );
        }
    }
    let inside = |id: NodeId| device.contains(&id) || oc.contains(&id);
    // Dependency order over data and control edges among the chosen ops.
    let roots = cluster.members.iter().copied().filter(|&root| inside(root));
    let order = crate::ir::walk::post_order(graph, roots, |src, _| inside(src));
    let mut args = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for &id in &order {
        for (slot, input) in graph.data_inputs(id).iter().enumerate() {
            if inside(input.src) {
                continue;
            }
            let arg = source(graph, id, slot, input)?;
            if seen.insert(arg.clone()) {
                args.push(arg);
            }
        }
    }
    order_args(graph, &mut args);
    let outputs = cluster
        .outputs
        .iter()
        .map(|&id| OutputSpec {
            node: id,
            reduce: graph.node(id).attrs.get_str("reduce_op").and_then(crate::exec::ReduceOp::parse),
        })
        .collect();
    let whole = Program { nodes: order, args, outputs, carried: Vec::new(), stage: 0, stages: 1, calls: Vec::new() };
    Ok(Analysis { whole, device, oc })
}

/// The argument that operand `slot` of `id` reads from outside the cluster.
fn source(graph: &Graph, id: NodeId, slot: usize, input: &crate::ir::Input) -> Result<ArgSource, XlaError> {
    let node = graph.node(id);
    let src = graph.node(input.src);
    // A handle read by a call, or by an op that reads only the variable's
    // type (`VariableShape`), is a variable argument like a state op's.
    let call_handle = (crate::ir::functions::call_kind(&node.op).is_some() || &*node.op == "VariableShape")
        && &*src.op == "VarHandleOp";
    if &*src.op == "TPUReplicatedInput" {
        Ok(ArgSource::Replicated(input.src))
    } else if slot < ops::state::handle_operands(&node.op) || call_handle {
        if &*src.op != "VarHandleOp" {
            return Err(XlaError::UnsupportedGraph {
                message: format!(
                    "`{}` reads variable handle `{}` ({}), not a VarHandleOp",
                    node.name, src.name, src.op
                ),
            });
        }
        Ok(ArgSource::Variable(input.src))
    } else if src.attrs.get_str(crate::passes::common::TPU_REPLICATE).is_some() {
        Err(XlaError::UnsupportedGraph {
            message: format!(
                "`{}` reads `{}`, an op of cluster `{}` it cannot see",
                node.name,
                src.name,
                src.attrs.get_str(crate::passes::common::TPU_REPLICATE).unwrap_or_default()
            ),
        })
    } else {
        Ok(ArgSource::Host(input.src, input.output.unwrap_or(0)))
    }
}

/// Splits the analysed cluster into stages at the host ops whose results
/// (not compile-time constants) device ops read.
/// Returns the stages' programs and the host ops after each stage.
#[allow(clippy::type_complexity)]
fn stage(
    graph: &Graph,
    analysis: &Analysis,
    traced: &trace::Trace,
) -> Result<(Vec<Program>, Vec<Vec<NodeId>>), XlaError> {
    let constant = |id: NodeId| (0u32..).map_while(|o| traced.values.get(&(id, o))).all(|t| t.constant);
    let mut device_stage: HashMap<NodeId, usize> = HashMap::new();
    let mut host_stage: HashMap<NodeId, usize> = HashMap::new();
    for &id in &analysis.whole.nodes {
        let mut s = 0;
        for i in graph.inputs(id) {
            if let Some(&d) = device_stage.get(&i.src) {
                s = s.max(d);
            } else if let Some(&h) = host_stage.get(&i.src) {
                // A host result reaches the device one stage later.
                let later = analysis.device.contains(&id) && !i.is_control() && !constant(i.src);
                s = s.max(if later { h + 1 } else { h });
            }
        }
        if analysis.oc.contains(&id) {
            host_stage.insert(id, s);
        } else {
            device_stage.insert(id, s);
        }
    }
    let stages = device_stage.values().copied().max().unwrap_or(0) + 1;
    let mut programs: Vec<Program> = (0..stages)
        .map(|k| Program {
            nodes: Vec::new(),
            args: Vec::new(),
            outputs: Vec::new(),
            carried: Vec::new(),
            stage: k,
            stages,
            calls: Vec::new(),
        })
        .collect();
    let mut host_ops = vec![Vec::new(); stages];
    for &id in &analysis.whole.nodes {
        if let Some(&k) = device_stage.get(&id) {
            programs[k].nodes.push(id);
        } else if !constant(id) {
            let k = host_stage[&id];
            if k + 1 >= stages {
                return Err(XlaError::UnsupportedGraph {
                    message: format!(
                        "outside-compilation op `{}` runs after the last device stage",
                        graph.node(id).name
                    ),
                });
            }
            host_ops[k].push(id);
        }
    }
    // Arguments, and the carried values each stage hands on.
    let mut carried: Vec<BTreeSet<(NodeId, u32)>> = vec![BTreeSet::new(); stages];
    let variables: Vec<ArgSource> =
        analysis.whole.args.iter().filter(|a| matches!(a, ArgSource::Variable(_))).cloned().collect();
    for program in programs.iter_mut() {
        let k = program.stage;
        let mut seen = std::collections::HashSet::new();
        for &id in &program.nodes {
            for (slot, input) in graph.data_inputs(id).iter().enumerate() {
                let key = (input.src, input.output.unwrap_or(0));
                let arg = if let Some(&d) = device_stage.get(&input.src) {
                    if d == k {
                        continue;
                    }
                    carried[d].insert(key);
                    ArgSource::Carried(key.0, key.1)
                } else if analysis.oc.contains(&input.src) {
                    if constant(input.src) {
                        continue;
                    }
                    ArgSource::Carried(key.0, key.1)
                } else {
                    source(graph, id, slot, input)?
                };
                if !matches!(arg, ArgSource::Variable(_)) && seen.insert(arg.clone()) {
                    program.args.push(arg);
                }
            }
        }
        program.args.extend(variables.iter().cloned());
        order_args(graph, &mut program.args);
    }
    // Host ops read device values of the stage they follow (or earlier).
    for ops in &host_ops {
        for &id in ops {
            for input in graph.data_inputs(id) {
                if let Some(&d) = device_stage.get(&input.src) {
                    carried[d].insert((input.src, input.output.unwrap_or(0)));
                }
            }
        }
    }
    for (program, c) in programs.iter_mut().zip(carried) {
        program.carried = c.into_iter().collect();
    }
    for out in &analysis.whole.outputs {
        let src = graph.data_inputs(out.node).first().map(|i| i.src);
        match src.and_then(|s| device_stage.get(&s)) {
            Some(&k) => programs[k].outputs.push(out.clone()),
            None => {
                return Err(XlaError::UnsupportedGraph {
                    message: format!("output `{}` is not computed on the device", graph.node(out.node).name),
                })
            }
        }
    }
    Ok((programs, host_ops))
}
