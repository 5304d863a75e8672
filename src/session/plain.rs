//! A plain graph (no replicate cluster) run or lowered as one
//! single-replica cluster ([`crate::passes::single_replica`]) after the
//! pipeline: fetches are mapped to the cluster's outputs and back, and
//! [`describe`] says which ops went to the host, which results were chosen
//! and which variables the graph's initialisers set. Cost: linear in the
//! graph.

use crate::exec::Tensor;
use crate::ir::{Graph, Module, TensorLit};
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
}

/// Makes the first graph of `module` one single-replica cluster and forms
/// it; `Ok(None)` when the graph has a cluster already (or there is none).
pub fn cluster(
    module: &mut Module,
    config: &PlainConfig,
) -> Result<Option<(SingleReplica, Vec<ReplicateCluster>)>, Vec<PassError>> {
    let Some(graph) = module.graphs.first_mut() else { return Ok(None) };
    let single_config = SingleReplicaConfig {
        fetches: config.fetches,
        variables: config.variables,
        unlowered: config.unlowered,
        support: &crate::xla::OpSupport,
        skip_initializers: config.skip_initializers,
    };
    let Some(single) = single_replica::single_replica(graph, &single_config)? else { return Ok(None) };
    let (formed, errors) = form_clusters(graph);
    if errors.iter().any(|e| !e.is_warning()) {
        return Err(errors);
    }
    Ok(Some((single, formed)))
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
