//! Single-replica clustering: a plain graph (no replicate cluster) becomes
//! one 1-replica TPU cluster, as TensorFlow compiles a `jit_compile`
//! function with soft placement and automatic outside compilation.
//!
//! Meaning. The graph is first pruned to what the run asks for (its
//! fetches and targets, through data and control edges), as
//! `Session.run` prunes. Then every op is placed:
//! - feeds (`Placeholder`) and variable handles stay on the host: they are
//!   the device program's arguments (variables aliased to results);
//! - an op with a StableHLO lowering whose types are not `string` goes
//!   into the cluster (`_tpu_replicate`);
//! - a host op (the registry's host-only ops with a simulator kernel, such
//!   as `PrintV2`, `StringFormat`, `Assert`, `ScalarSummary`, and any op
//!   with a `string` type) runs on the host: *before* the device program
//!   when it reads no device value, *outside-compiled* (tagged
//!   `_xla_outside_compilation`, one cluster per connected group) when a
//!   device op reads its result, and *after* the device program otherwise;
//! - ops whose result shape depends on their operands' values and that
//!   have no bounded lowering (`Where`, `ListDiff`) are host ops (folded
//!   when their operands are constants); `Unique` and the other bounded ones
//!   compile, as TensorFlow's bridge compiles them;
//! - a `Const` that only host ops read is a host op too;
//! - anything else (no lowering and not a host op: TF1 control flow,
//!   TensorLists, ops without any kernel) is refused with a diagnostic
//!   naming the node ([`Unlowered::Refuse`]), or kept in the cluster for
//!   the simulator ([`Unlowered::InCluster`]).
//!
//! Every fetched device tensor, and every device tensor a host op after
//! the program reads, leaves the cluster through a `TPUReplicatedOutput`
//! (`num_replicas = 1`) and an `Identity` named `output_<i>_shard_0`, as
//! the fan-out pass writes them; host ops after the program read those.
//! [`SingleReplica::fetches`] maps each fetch to the tensor that now
//! carries it. Variables with a value from an earlier run get a host
//! initialiser (`Const` + `AssignVariableOp`), which is how the lowering
//! and the PJRT backend load variables. A variable with none that the run
//! assigns from constants (its initialiser) and also uses otherwise is
//! initialised on the host before the device program, as a replicated
//! graph's init program does; any other starts as zeros of its declared
//! shape (it must be assigned before it is read, as TensorFlow requires).
//!
//! The pass imports no backend: what the device compiler lowers and what
//! the host runs comes from the caller, through [`OpSupport`].
//!
//! A graph that already has a cluster (a tag or a `replicate` region) is
//! left alone. Run it after the pipeline (which expands `gradients`
//! calls), then form the clusters. Cost: O(nodes + edges).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::common::{output_dtype, OUTSIDE_COMPILATION, TPU_REPLICATE};
use super::error::PassError;
use crate::ir::{AttrValue, DType, Graph, Input, Node, NodeId, TensorData, TensorLit};
use crate::syntax::Span;

/// The `_tpu_replicate` name of the cluster this pass makes.
pub const CLUSTER: &str = "single_replica";

/// What happens to an op that neither lowers to StableHLO nor runs on the host.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Unlowered {
    /// A diagnostic naming the node (for XLA).
    #[default]
    Refuse,
    /// Kept in the cluster (for the simulator, which runs every kernel).
    InCluster,
}

/// What the backends run, as the caller knows it. The pass asks through
/// this trait and so depends on no backend.
pub trait OpSupport {
    /// True when the host (the simulator's executor) has a kernel for `op`.
    fn has_host_kernel(&self, op: &str) -> bool;
    /// True when the device compiler lowers `op`.
    fn lowers(&self, op: &str) -> bool;
    /// Why the device compiler does not lower `op`, where it says.
    fn unlowered_reason(&self, op: &str) -> Option<&'static str>;
}

/// Settings of [`single_replica`].
#[derive(Clone, Copy)]
pub struct SingleReplicaConfig<'a> {
    /// The run's fetches (`name:k` or `name`) and targets (`^name`); empty:
    /// every op runs and every output of an op nothing reads is fetched.
    pub fetches: &'a [String],
    /// Variables' values from an earlier run, by `VarHandleOp` name.
    pub variables: &'a [(String, TensorLit)],
    /// What happens to ops that neither lower nor run on the host.
    pub unlowered: Unlowered,
    /// What the device compiler lowers and the host runs.
    pub support: &'a dyn OpSupport,
    /// Skip the graph's variable initialisers that the fetches do not
    /// reach (they run once before the first step unless this is set).
    pub skip_initializers: bool,
}

/// Where an op runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// In the device program.
    Device,
    /// On the host, before the device program (it reads no device value).
    HostBefore,
    /// On the host, reached from the device program (outside compilation).
    OutsideCompiled,
    /// On the host, after the device program, on its outputs.
    HostAfter,
}

impl Placement {
    /// How the CLI names it.
    pub fn describe(self) -> &'static str {
        match self {
            Placement::Device => "device",
            Placement::HostBefore => "host, before the device program",
            Placement::OutsideCompiled => "host, outside-compiled",
            Placement::HostAfter => "host, after the device program",
        }
    }
}

/// A computation op the pass placed on the host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostOp {
    /// The node's name.
    pub node: String,
    /// Its op type.
    pub op: String,
    /// Where it runs.
    pub placement: Placement,
}

/// What [`single_replica`] did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SingleReplica {
    /// Each fetch (as given) and the tensor or target that now carries it.
    pub fetches: Vec<(String, String)>,
    /// The computation ops placed on the host, in text order.
    pub host_ops: Vec<HostOp>,
    /// How many ops the cluster holds.
    pub device_ops: usize,
    /// Variables with no earlier value, which start as zeros.
    pub uninitialized: Vec<String>,
    /// Variables set by the graph's own initialisers (an `AssignVariableOp`
    /// from constants) before the first step, in graph order.
    pub initialized: Vec<String>,
    /// Without fetches: the outputs chosen as the run's results, and how.
    pub chosen: Option<Chosen>,
    /// The placeholders the run does not need (pruned away): their feeds are ignored.
    pub pruned_feeds: Vec<String>,
    /// What `--data-parallel` made of the cluster, when asked
    /// ([`super::data_parallel`]).
    pub data_parallel: Option<super::data_parallel::DataParallel>,
}

/// The outputs a run without fetches gives, and why.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Chosen {
    /// `declared outputs` (the function's `Identity` returns) or `sinks`.
    pub rule: &'static str,
    /// Sinks left out as internal (gradient and shape bookkeeping).
    pub left_out: usize,
}

/// True when `graph` has a cluster already (a tag or a `replicate` region).
pub fn has_cluster(graph: &Graph) -> bool {
    graph.node_ids().any(|id| graph.node(id).attrs.get_str(TPU_REPLICATE).is_some() || graph.node(id).region.is_some())
}

/// Ops that are arguments of the device program.
const ARGUMENTS: &[&str] = &["Placeholder", "PlaceholderWithDefault", "VarHandleOp", "MirroredVarHandleOp"];

/// Ops whose result shape depends on their operands' values with no bound
/// to compile them to: unless they fold, they are host ops.
const DYNAMIC_SHAPE: &[&str] = &["ListDiff", "Where"];

/// True when an attribute of `node` is or lists the `string` dtype.
fn has_string_type(node: &Node) -> bool {
    node.attrs.iter().any(|(_, v)| match v {
        AttrValue::Type(t) => *t == DType::Str,
        AttrValue::List(items) => items.iter().any(|i| i.as_type() == Some(DType::Str)),
        _ => false,
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Argument,
    Host,
    Device,
}

/// Makes `graph`, if it has no cluster, one 1-replica cluster for the run
/// `config` describes; `Ok(None)` when it already has one.
pub fn single_replica(
    graph: &mut Graph,
    config: &SingleReplicaConfig,
) -> Result<Option<SingleReplica>, Vec<PassError>> {
    if has_cluster(graph) {
        return Ok(None);
    }
    let support = config.support;
    // The roots: what the run asks for.
    let mut errors = Vec::new();
    let mut roots = Vec::new();
    let mut fetched: Vec<(String, NodeId, Option<u32>)> = Vec::new();
    for fetch in config.fetches {
        let (name, output) = match fetch.strip_prefix('^') {
            Some(target) => (target, None),
            None => match fetch.rsplit_once(':') {
                Some((n, k)) if k.parse::<u32>().is_ok() => (n, k.parse().ok()),
                _ => (fetch.as_str(), Some(0)),
            },
        };
        match graph.find(name) {
            Some(id) => {
                roots.push(id);
                fetched.push((fetch.clone(), id, output));
            }
            None => {
                // The closest node, with the fetch's own `^` or `:k` around it.
                let near = crate::ir::suggest::closest(name, graph.node_ids().map(|id| &*graph.node(id).name));
                let help = match near {
                    Some(near) => format!("did you mean `{}`?", fetch.replacen(name, near, 1)),
                    None => "fetch tensors as `name:output` and targets as `^name`, with the node names of the graph"
                        .to_string(),
                };
                errors.push(PassError::UnknownFetch { fetch: fetch.clone(), help })
            }
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let is_initializer = |id: NodeId| {
        let inputs = graph.data_inputs(id);
        &*graph.node(id).op == "AssignVariableOp"
            && inputs.first().is_some_and(|h| &*graph.node(h.src).op == "VarHandleOp")
            && inputs.get(1).is_some_and(|v| constant_ancestors(graph, config.support, v.src).is_some())
    };
    if roots.is_empty() {
        // Every op runs; with `skip_initializers`, the initialisers do not.
        // (TensorFlow's `init` is a `NoOp` on them.)
        let init_group = |id: NodeId| {
            let inputs = graph.inputs(id);
            &*graph.node(id).op == "NoOp" && !inputs.is_empty() && inputs.iter().all(|i| is_initializer(i.src))
        };
        let skipped = |id: NodeId| config.skip_initializers && (is_initializer(id) || init_group(id));
        roots = graph.node_ids().filter(|&id| !skipped(id)).collect();
    }
    // Prune to the roots' ancestors.
    let mut needed: BTreeSet<NodeId> = BTreeSet::new();
    let mut stack = roots.clone();
    while let Some(id) = stack.pop() {
        if needed.insert(id) {
            stack.extend(graph.inputs(id).into_iter().map(|i| i.src).filter(|s| !needed.contains(s)));
        }
    }
    if !config.skip_initializers {
        // The graph's initialisers the roots do not reach: an assignment
        // from constants to a variable the run uses and has no value for,
        // as TensorFlow's `init` op groups them. The first one per
        // variable, in graph order.
        let mut covered: BTreeSet<NodeId> = BTreeSet::new();
        for id in graph.nodes_in_order() {
            if needed.contains(&id) || !is_initializer(id) {
                continue;
            }
            let inputs = graph.data_inputs(id);
            let (Some(handle), Some(value)) = (inputs.first(), inputs.get(1)) else { continue };
            let has_value = config.variables.iter().any(|(n, _)| *n == *graph.node(handle.src).name);
            if !needed.contains(&handle.src) || covered.contains(&handle.src) || has_value {
                continue;
            }
            let Some(ancestors) = constant_ancestors(graph, config.support, value.src) else { continue };
            covered.insert(handle.src);
            needed.insert(id);
            needed.extend(ancestors);
        }
    }
    let unused: Vec<NodeId> = graph.node_ids().filter(|id| !needed.contains(id)).collect();
    let mut pruned_feeds = Vec::new();
    for id in unused {
        if let Some(node) = graph.remove_node(id).filter(|n| ARGUMENTS[..2].contains(&&*n.op)) {
            pruned_feeds.push(node.name.to_string());
        }
    }
    let order = topological(graph);

    // Placement of each op by its kind.
    let mut kind: HashMap<NodeId, Kind> = HashMap::new();
    for &id in &order {
        let node = graph.node(id);
        let op = &*node.op;
        let k = if ARGUMENTS.contains(&op) {
            Kind::Argument
        } else if DYNAMIC_SHAPE.contains(&op) && support.has_host_kernel(op) {
            // Folded at compile time when its operands are constants, else run on the host.
            Kind::Host
        } else if support.lowers(op) && !has_string_type(node) {
            Kind::Device
        } else if support.has_host_kernel(op) && (crate::ir::ops::is_host_only(op) || has_string_type(node)) {
            Kind::Host
        } else {
            if config.unlowered == Unlowered::Refuse {
                let reason = match support.unlowered_reason(op) {
                    Some(why) => why.to_string(),
                    None if support.has_host_kernel(op) => "it has no StableHLO lowering".to_string(),
                    None => "it has no StableHLO lowering and no host kernel".to_string(),
                };
                errors.push(PassError::NotCompilable {
                    node: node.name.to_string(),
                    op: op.to_string(),
                    reason,
                    span: node.span,
                });
            }
            Kind::Device
        };
        kind.insert(id, k);
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    // Initialisers: a variable with no earlier value that the run assigns
    // from constants and also uses otherwise is initialised on the host
    // first, as the init program does for a replicated graph.
    let mut initialized: BTreeSet<NodeId> = BTreeSet::new();
    let mut report_initialized = Vec::new();
    for &id in &order {
        if &*graph.node(id).op != "AssignVariableOp" || config.skip_initializers {
            continue;
        }
        let inputs = graph.data_inputs(id);
        let (Some(handle), Some(value)) = (inputs.first(), inputs.get(1)) else { continue };
        let var = graph.node(handle.src);
        let has_value = config.variables.iter().any(|(n, _)| *n == *var.name);
        let used_otherwise = graph.uses(handle.src).iter().any(|(u, _)| *u != id);
        if &*var.op != "VarHandleOp" || has_value || !used_otherwise || initialized.contains(&handle.src) {
            continue;
        }
        let Some(ancestors) = constant_ancestors(graph, config.support, value.src) else { continue };
        for a in ancestors {
            kind.insert(a, Kind::Host);
        }
        kind.insert(id, Kind::Host);
        initialized.insert(handle.src);
        report_initialized.push(var.name.to_string());
    }
    // A constant only host ops read is a host op.
    for &id in &order {
        let uses = graph.uses(id);
        let data_users: Vec<NodeId> =
            uses.iter().filter(|(_, e)| matches!(e.kind, crate::ir::EdgeKind::Data { .. })).map(|u| u.0).collect();
        if &*graph.node(id).op == "Const"
            && !data_users.is_empty()
            && data_users.iter().all(|u| kind[u] == Kind::Host)
            && graph.inputs(id).is_empty()
        {
            kind.insert(id, Kind::Host);
        }
    }
    // Which host ops read device values (through other host ops), and which feed device ops.
    let mut reads_device: HashMap<NodeId, bool> = HashMap::new();
    for &id in &order {
        let r = graph.data_inputs(id).iter().any(|i| match kind[&i.src] {
            Kind::Device => true,
            Kind::Host => reads_device.get(&i.src).copied().unwrap_or(false),
            Kind::Argument => false,
        });
        reads_device.insert(id, r);
    }
    let mut feeds_device: HashMap<NodeId, bool> = HashMap::new();
    for &id in order.iter().rev() {
        let f =
            graph.uses(id).iter().filter(|(_, e)| matches!(e.kind, crate::ir::EdgeKind::Data { .. })).any(|(u, _)| {
                match kind[u] {
                    Kind::Device => true,
                    Kind::Host => feeds_device.get(u).copied().unwrap_or(false),
                    Kind::Argument => false,
                }
            });
        feeds_device.insert(id, f);
    }
    let placement = |id: NodeId| match kind[&id] {
        Kind::Device => Placement::Device,
        Kind::Argument => Placement::HostBefore,
        Kind::Host if !reads_device[&id] => Placement::HostBefore,
        Kind::Host if feeds_device[&id] => Placement::OutsideCompiled,
        Kind::Host => Placement::HostAfter,
    };
    let placed: HashMap<NodeId, Placement> = order.iter().map(|&id| (id, placement(id))).collect();

    // Outside-compilation clusters: the connected groups of outside-compiled ops.
    let oc: Vec<NodeId> = order.iter().copied().filter(|id| placed[id] == Placement::OutsideCompiled).collect();
    let mut group: HashMap<NodeId, usize> = HashMap::new();
    for &id in &oc {
        let joined = graph.data_inputs(id).iter().find_map(|i| group.get(&i.src).copied());
        let g = joined.unwrap_or(group.len());
        group.insert(id, g);
    }
    // Tags.
    let mut report = SingleReplica { pruned_feeds, initialized: report_initialized, ..SingleReplica::default() };
    for &id in &order {
        let p = placed[&id];
        let node = graph.node_mut(id);
        match p {
            Placement::Device => {
                node.attrs.insert(TPU_REPLICATE, AttrValue::str(CLUSTER));
                report.device_ops += 1;
            }
            Placement::OutsideCompiled => {
                node.attrs.insert(TPU_REPLICATE, AttrValue::str(CLUSTER));
                node.attrs
                    .insert(OUTSIDE_COMPILATION, AttrValue::str(format!("auto_outside_compilation_{}", group[&id])));
            }
            _ => {}
        }
        if kind[&id] == Kind::Host {
            report.host_ops.push(HostOp { node: node.name.to_string(), op: node.op.to_string(), placement: p });
        }
    }
    let metadata = Node::op(graph.unique_name(&format!("{CLUSTER}/TPUReplicateMetadata")), "TPUReplicateMetadata")
        .with_attr(TPU_REPLICATE, AttrValue::str(CLUSTER))
        .with_attr("num_replicas", AttrValue::Int(1))
        .with_attr("num_cores_per_replica", AttrValue::Int(1));
    graph.add_node_unique(metadata);

    // Outputs: fetched device tensors and the device tensors host ops after the program read.
    let mut outputs: BTreeMap<(NodeId, u32), String> = BTreeMap::new();
    let mut output_of = |graph: &mut Graph, src: NodeId, k: u32| -> String {
        if let Some(name) = outputs.get(&(src, k)) {
            return name.clone();
        }
        let i = outputs.len();
        let dtype = output_dtype(graph, src, k);
        let span = graph.node(src).span;
        let mut fan = Node::op(graph.unique_name(&format!("{CLUSTER}/output{i}")), "TPUReplicatedOutput")
            .with_span(span)
            .with_attr("num_replicas", AttrValue::Int(1));
        let mut shard = Node::op(graph.unique_name(&format!("output_{i}_shard_0")), "Identity");
        if let Some(t) = dtype {
            fan = fan.with_attr("T", AttrValue::Type(t));
            shard = shard.with_attr("T", AttrValue::Type(t));
        }
        let fan = graph.add_node_unique(fan);
        let shard = graph.add_node_unique(shard);
        graph.add_data_input(fan, src, k, Span::DETACHED);
        graph.add_data_input(shard, fan, 0, Span::DETACHED);
        let name = graph.node(shard).name.to_string();
        outputs.insert((src, k), name.clone());
        name
    };
    for &id in &order {
        if placed[&id] != Placement::HostAfter {
            continue;
        }
        let mut inputs = graph.inputs(id);
        let mut changed = false;
        for input in inputs.iter_mut() {
            if let Some(k) = input.output.filter(|_| placed[&input.src] == Placement::Device) {
                let name = output_of(graph, input.src, k);
                let shard = graph.find(&name).unwrap_or(input.src);
                *input = Input { src: shard, output: Some(0), span: input.span };
                changed = true;
            }
        }
        if changed {
            graph.set_inputs(id, &inputs);
        }
    }
    for (fetch, id, output) in fetched {
        let carrier = match output {
            Some(k) if placed[&id] == Placement::Device => format!("{}:0", output_of(graph, id, k)),
            _ => fetch.clone(),
        };
        report.fetches.push((fetch, carrier));
    }
    if config.fetches.is_empty() {
        let (chosen, left_out) = default_outputs(graph, &order, |id| placed[&id] == Placement::Device);
        report.chosen = Some(Chosen { rule: chosen.0, left_out });
        for (id, k) in chosen.1 {
            let name = output_of(graph, id, k);
            report.fetches.push((format!("{}:{k}", graph.node(id).name), format!("{name}:0")));
        }
    }

    // Variables: host initialisers with the earlier values, else zeros.
    for &id in &order {
        let node = graph.node(id);
        if &*node.op != "VarHandleOp" || initialized.contains(&id) {
            continue;
        }
        let name = node.name.to_string();
        let span = node.span;
        let literal = match config.variables.iter().find(|(n, _)| *n == name) {
            Some((_, value)) => Some(value.clone()),
            None => {
                report.uninitialized.push(name.clone());
                zeros_of(node)
            }
        };
        let Some(literal) = literal else {
            errors.push(PassError::NotCompilable {
                node: name,
                op: "VarHandleOp".into(),
                reason: "its value cannot be loaded: the variable needs a known dtype and shape".into(),
                span,
            });
            continue;
        };
        let dtype = literal.dtype;
        let value = Node::op(graph.unique_name(&format!("{name}/initial_value")), "Const")
            .with_attr("dtype", AttrValue::Type(dtype))
            .with_attr("value", AttrValue::Tensor(std::sync::Arc::new(literal)));
        let assign = Node::op(graph.unique_name(&format!("{name}/initialize")), "AssignVariableOp")
            .with_attr("dtype", AttrValue::Type(dtype));
        let value = graph.add_node_unique(value);
        let assign = graph.add_node_unique(assign);
        graph.add_data_input(assign, id, 0, Span::DETACHED);
        graph.add_data_input(assign, value, 0, Span::DETACHED);
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    report.host_ops.sort_by_key(|h| graph.find(&h.node).map(|id| graph.node(id).seq));
    Ok(Some(report))
}

/// Op types whose results are bookkeeping (shapes, initialisation
/// checks, a variable's read, which the run reports with the variables),
/// never a result a user fetches by default.
const BOOKKEEPING: &[&str] =
    &["BroadcastGradientArgs", "Rank", "ReadVariableOp", "Shape", "ShapeN", "Size", "VarIsInitializedOp"];

/// The outputs a run without fetches gives: the function's declared
/// returns when the graph has them (sinks named `Identity` or
/// `Identity_<n>`, as TensorFlow names a function's outputs), else every
/// data sink of the device that is not internal (under a `gradients` or
/// `gradient_tape` scope, or bookkeeping such as shapes). Returns the rule, the
/// outputs `(node, k)`, and how many sinks were left out.
#[allow(clippy::type_complexity)]
fn default_outputs(
    graph: &Graph,
    order: &[NodeId],
    on_device: impl Fn(NodeId) -> bool,
) -> ((&'static str, Vec<(NodeId, u32)>), usize) {
    let sinks: Vec<NodeId> = order.iter().copied().filter(|&id| on_device(id) && graph.uses(id).is_empty()).collect();
    let outputs = |ids: &[NodeId]| -> Vec<(NodeId, u32)> {
        ids.iter()
            .flat_map(|&id| {
                let n = crate::ir::verify::output_count(graph, id).unwrap_or(0);
                (0..n).map(move |k| (id, k))
            })
            .collect()
    };
    let is_return = |id: NodeId| {
        let node = graph.node(id);
        &*node.op == "Identity"
            && node
                .name
                .strip_prefix("Identity")
                .is_some_and(|n| n.is_empty() || n.strip_prefix('_').is_some_and(|k| k.parse::<u32>().is_ok()))
    };
    let declared: Vec<NodeId> = sinks.iter().copied().filter(|&id| is_return(id)).collect();
    if !declared.is_empty() {
        let left_out = sinks.len() - declared.len();
        return (("declared outputs", outputs(&declared)), left_out);
    }
    let internal = |id: NodeId| {
        let node = graph.node(id);
        BOOKKEEPING.contains(&&*node.op)
            || node.name.split('/').any(|scope| {
                scope == "gradients"
                    || scope.starts_with("gradients_")
                    || scope == "gradient_tape"
                    || scope.starts_with("gradient_tape_")
            })
    };
    let kept: Vec<NodeId> = sinks.iter().copied().filter(|&id| !internal(id)).collect();
    let left_out = sinks.len() - kept.len();
    (("sinks", outputs(&kept)), left_out)
}

/// `id` and its data ancestors when none of them is a feed or touches a
/// variable (a value computed from constants alone), else `None`.
fn constant_ancestors(graph: &Graph, support: &dyn OpSupport, id: NodeId) -> Option<Vec<NodeId>> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![id];
    while let Some(n) = stack.pop() {
        if !seen.insert(n) {
            continue;
        }
        let op = &*graph.node(n).op;
        if ARGUMENTS.contains(&op) || op.contains("Variable") || !support.has_host_kernel(op) {
            return None;
        }
        stack.extend(graph.data_inputs(n).into_iter().map(|i| i.src));
    }
    Some(seen.into_iter().collect())
}

/// The nodes in an order where every op follows its operands (back edges of
/// TF1 loops aside).
fn topological(graph: &Graph) -> Vec<NodeId> {
    crate::ir::walk::post_order(graph, graph.nodes_in_order(), |src, dst| !graph.is_back_edge(src, dst))
}

/// Zeros of a `VarHandleOp`'s declared dtype and shape.
fn zeros_of(node: &Node) -> Option<TensorLit> {
    let dtype = node.attrs.get("dtype").and_then(AttrValue::as_type)?;
    let dims = node.attrs.get("shape").and_then(|s| s.as_shape()).and_then(|s| s.dims.clone())?;
    if dims.iter().any(|&d| d < 0) {
        return None;
    }
    let data = match dtype {
        DType::F32 => TensorData::Float(Vec::new()),
        DType::F64 => TensorData::Double(Vec::new()),
        DType::I32 | DType::I8 | DType::U8 => TensorData::Int(Vec::new()),
        DType::I64 => TensorData::Int64(Vec::new()),
        DType::Bool => TensorData::Bool(Vec::new()),
        DType::BF16 | DType::F16 => TensorData::Half(Vec::new()),
        _ => return None,
    };
    Some(TensorLit { dtype, shape: dims, data })
}
