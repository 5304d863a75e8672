//! A plain graph (no replicate cluster) run or lowered as one
//! single-replica cluster ([`crate::passes::single_replica`]) after the
//! pipeline: fetches are mapped to the cluster's outputs and back, and
//! [`describe`] says which ops went to the host, which results were chosen
//! and which variables the graph's initialisers set. A TF1 graph's ref
//! variables (`VariableV2`) become resource variables first, so that their
//! `Assign` initialisers run as `AssignVariableOp` ones do. Cost: linear
//! in the graph.

use std::sync::Arc;

use super::SessionError;
use crate::diagnostics::AnyDiagnostic;
use crate::exec::Tensor;
use crate::ir::{AttrMap, AttrValue, Graph, Module, TensorLit};
use crate::passes::common::{OUTSIDE_COMPILATION, TPU_REPLICATE};
use crate::passes::single_replica::{self, SingleReplica, SingleReplicaConfig, Unlowered};
use crate::passes::{form_clusters, PassError, ReplicateCluster};

/// How a plain graph becomes one single-replica cluster.
pub struct PlainConfig<'a> {
    /// The tensors and `^targets` asked for (empty: the graph's results).
    pub fetches: &'a [String],
    /// What happens to ops that neither lower nor run on the host.
    pub unlowered: Unlowered,
    /// Values of variables (by `VarHandleOp` name) from elsewhere: a
    /// SavedModel's checkpoint, values fed by name.
    pub variables: &'a [(String, TensorLit)],
    /// The graph's initialisers do not run first.
    pub skip_initializers: bool,
    /// The cluster becomes this many data-parallel replicas
    /// ([`crate::passes::data_parallel`]).
    pub data_parallel: Option<u32>,
}

/// Makes the first graph of `module` one single-replica cluster and forms
/// it; `Ok(None)` when the graph has a cluster already (or there is none).
pub fn cluster(
    module: &mut Module,
    config: &PlainConfig,
) -> Result<Option<(SingleReplica, Vec<ReplicateCluster>)>, Vec<AnyDiagnostic>> {
    let boxed = |errors: Vec<PassError>| -> Vec<AnyDiagnostic> {
        errors.into_iter().map(|e| Box::new(e) as AnyDiagnostic).collect()
    };
    // `SymbolicGradient`s name their gradient functions, `XlaRecv`s read their sends (once).
    let made = crate::passes::xla_ext::prepare(module);
    if !made.is_empty() {
        return Err(made.into_iter().map(|(_, e)| Box::new(e) as AnyDiagnostic).collect());
    }
    let Some(graph) = module.graphs.first_mut() else { return Ok(None) };
    if graph.node_ids().any(|id| graph.node(id).attrs.contains_key(TPU_REPLICATE)) || !graph.regions.is_empty() {
        return Ok(None);
    }
    ref_variables_to_resources(graph)
        .map_err(|errors| errors.into_iter().map(|e| Box::new(e) as AnyDiagnostic).collect::<Vec<_>>())?;
    let single_config = SingleReplicaConfig {
        fetches: config.fetches,
        variables: config.variables,
        unlowered: config.unlowered,
        support: &crate::xla::OpSupport,
        skip_initializers: config.skip_initializers,
    };
    let Some(mut single) = single_replica::single_replica(graph, &single_config).map_err(boxed)? else {
        return Ok(None);
    };
    if let Some(replicas) = config.data_parallel {
        single.data_parallel = Some(crate::passes::data_parallel::data_parallel(graph, replicas).map_err(boxed)?);
    }
    let (formed, errors) = form_clusters(graph);
    if errors.iter().any(|e| !e.is_warning()) {
        return Err(boxed(errors));
    }
    Ok(Some((single, formed)))
}

/// Makes each TF1 ref variable (`VariableV2`, `Variable`) of `graph` a
/// resource variable: a `VarHandleOp` of the same name, dtype and shape,
/// its `Assign`/`AssignAdd`/`AssignSub` the `Assign*VariableOp` of it, and
/// its `Identity` reads `ReadVariableOp`s. Any other use is an error, as is
/// an assignment whose ref result is read. Returns the variables made.
pub fn ref_variables_to_resources(graph: &mut Graph) -> Result<Vec<String>, Vec<SessionError>> {
    let variables: Vec<_> =
        graph.node_ids().filter(|&id| matches!(&*graph.node(id).op, "VariableV2" | "Variable")).collect();
    let mut errors = Vec::new();
    let mut plan = Vec::new();
    for &var in &variables {
        let name = graph.node(var).name.to_string();
        let Some(dtype) = graph.node(var).attrs.get("dtype").cloned() else { continue };
        for (user, edge) in graph.uses(var) {
            if !matches!(edge.kind, crate::ir::EdgeKind::Data { .. }) {
                continue;
            }
            let node = graph.node(user);
            let slot0 = graph.data_inputs(user).first().is_some_and(|i| i.src == var);
            let resource_op = match &*node.op {
                "Assign" if slot0 => "AssignVariableOp",
                "AssignAdd" if slot0 => "AssignAddVariableOp",
                "AssignSub" if slot0 => "AssignSubVariableOp",
                "Identity" => "ReadVariableOp",
                _ => "",
            };
            let result_read = resource_op.starts_with("Assign")
                && graph.uses(user).iter().any(|(_, e)| matches!(e.kind, crate::ir::EdgeKind::Data { .. }));
            if resource_op.is_empty() || result_read {
                errors.push(SessionError::RefVariableUse {
                    variable: name.clone(),
                    user: node.name.to_string(),
                    op: node.op.to_string(),
                    span: node.span,
                });
                continue;
            }
            plan.push((user, resource_op, dtype.clone()));
        }
        plan.push((var, "VarHandleOp", dtype));
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let mut made = Vec::new();
    for (id, op, dtype) in plan {
        let node = graph.node_mut(id);
        // Placement and colocation tags stay; the ref ops' own attributes go.
        let mut kept: Vec<(Arc<str>, AttrValue)> = node
            .attrs
            .iter()
            .filter(|(k, _)| k.starts_with('_') || (op == "VarHandleOp" && matches!(*k, "shape" | "container")))
            .map(|(k, v)| (Arc::from(k), v.clone()))
            .collect();
        kept.push((Arc::from("dtype"), dtype));
        if op == "VarHandleOp" {
            kept.push((Arc::from("shared_name"), AttrValue::str(node.name.to_string())));
            made.push(node.name.to_string());
        }
        node.op = op.into();
        node.attrs = AttrMap::from_entries(kept);
    }
    Ok(made)
}

/// The fetches the backends take for `asked`: each carried by the
/// cluster's output, targets in the cluster dropped (they run with the
/// device program).
pub fn fetches(single: &SingleReplica, tagged: &Graph, asked: &[String]) -> Vec<String> {
    let in_cluster = |target: &str| {
        tagged.find(target).is_some_and(|id| {
            let attrs = &tagged.node(id).attrs;
            attrs.get_str(TPU_REPLICATE).is_some() && attrs.get_str(OUTSIDE_COMPILATION).is_none()
        })
    };
    asked
        .iter()
        .map(|name| single.fetches.iter().find(|(f, _)| f == name).map_or_else(|| name.clone(), |(_, c)| c.clone()))
        .filter(|f| !f.strip_prefix('^').is_some_and(in_cluster))
        .collect()
}

/// Gives fetched tensors back the names they were asked by.
pub fn rename_fetched(single: &SingleReplica, fetched: &mut [(String, Tensor)]) {
    for (name, _) in fetched.iter_mut() {
        if let Some((asked, _)) = single.fetches.iter().find(|(_, c)| c == name) {
            name.clone_from(asked);
        }
    }
}

/// What a run says about a plain graph: one single-replica cluster, the
/// ops it placed on the host, the results chosen, and the variables its
/// initialisers set or that start as zeros.
pub fn describe(single: &SingleReplica) -> String {
    let mut text =
        format!("plain graph: compiled as one single-replica cluster ({} ops on the device)", single.device_ops);
    if let Some(done) = &single.data_parallel {
        text.push_str(&format!(", then {}", done.describe()));
    }
    if single.host_ops.is_empty() {
        text.push_str("; no op on the host");
    } else {
        text.push_str("; on the host:");
        for op in &single.host_ops {
            text.push_str(&format!("\n  {} ({}): {}", op.op, op.node, op.placement.describe()));
        }
    }
    if let Some(chosen) = &single.chosen {
        let names: Vec<&str> = single.fetches.iter().map(|(name, _)| name.as_str()).collect();
        text.push_str(&format!(
            "\nresults (nothing fetched by name): the graph's {} ({})",
            chosen.rule,
            if names.is_empty() { "none".to_string() } else { names.join(", ") }
        ));
        if chosen.left_out > 0 {
            text.push_str(&format!(
                "; {} internal sink(s) left out (`run --fetch NAME` gives any tensor)",
                chosen.left_out
            ));
        }
    }
    if !single.initialized.is_empty() {
        text.push_str(&format!(
            "\nnote: variable(s) {} set by the graph's initialisers once, before the first step \
             (--no-initializers skips them)",
            single.initialized.join(", ")
        ));
    }
    if !single.uninitialized.is_empty() {
        text.push_str(&format!(
            "\nnote: no value for variable(s) {} in this run: they start as zeros",
            single.uninitialized.join(", ")
        ));
    }
    text
}
