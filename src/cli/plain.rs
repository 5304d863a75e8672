//! `run` on a plain graph (no replicate cluster): the graph becomes one
//! single-replica cluster ([`crate::passes::single_replica`]) after the
//! pipeline, fetches are mapped to the cluster's outputs and back, and the
//! run says which ops it placed on the host. Cost: linear in the graph.

use super::diagnostics::AnyDiagnostic;
use super::Loaded;
use crate::exec::Tensor;
use crate::ir::Graph;
use crate::passes::common::{OUTSIDE_COMPILATION, TPU_REPLICATE};
use crate::passes::single_replica::{self, SingleReplica, SingleReplicaConfig, Unlowered};
use crate::passes::{form_clusters, ReplicateCluster};

/// How `run` treats a plain graph: one single-replica cluster for these fetches.
pub(super) struct PlainRun<'a> {
    /// `--fetch` as given (tensors and `^targets`).
    pub fetches: &'a [String],
    /// What happens to ops that neither lower nor run on the host.
    pub unlowered: Unlowered,
    /// `--feeds`: its entries that name a variable give its value.
    pub feeds_file: Option<&'a std::path::Path>,
    /// `--feed NAME=FILE.npy`: those that name a variable give its value.
    pub feed: &'a [String],
    /// `--no-initializers`: the graph's initialisers do not run first.
    pub skip_initializers: bool,
    /// `--data-parallel N`: the cluster becomes N data-parallel replicas.
    pub data_parallel: Option<u32>,
}

/// Makes the first graph of `loaded` one single-replica cluster and forms
/// it; `Ok(None)` when the graph has a cluster already.
pub(super) fn cluster(
    loaded: &mut Loaded,
    plain: &PlainRun,
) -> Result<Option<(SingleReplica, Vec<ReplicateCluster>)>, Vec<AnyDiagnostic>> {
    let boxed = |errors: Vec<crate::passes::PassError>| -> Vec<AnyDiagnostic> {
        errors.into_iter().map(|e| Box::new(e) as AnyDiagnostic).collect()
    };
    let Some(graph) = loaded.module.graphs.first_mut() else { return Ok(None) };
    // A SavedModel's checkpoint values, then the values fed by name, which win.
    let mut variables: Vec<(String, crate::ir::TensorLit)> = Vec::new();
    for v in loaded.saved_model.iter().flat_map(|c| &c.variables) {
        variables.push((v.name.clone(), v.value.clone()));
    }
    let fed = super::feeds::variable_feeds(graph, plain.feeds_file, plain.feed)
        .map_err(|e| vec![Box::new(e) as AnyDiagnostic])?;
    for (name, tensor) in fed {
        let literal = tensor.to_literal().ok_or_else(|| {
            let e = super::error::CliError::feed(format!(
                "the value fed to variable `{name}` has a dtype ({}) a variable cannot start from",
                tensor.dtype()
            ));
            vec![Box::new(e) as AnyDiagnostic]
        })?;
        variables.retain(|(n, _)| *n != name);
        variables.push((name, literal));
    }
    let config = SingleReplicaConfig {
        fetches: plain.fetches,
        variables: &variables,
        unlowered: plain.unlowered,
        support: &crate::xla::OpSupport,
        skip_initializers: plain.skip_initializers,
    };
    let Some(single) = single_replica::single_replica(graph, &config).map_err(boxed)? else { return Ok(None) };
    if let Some(replicas) = plain.data_parallel {
        let done = crate::passes::data_parallel::data_parallel(graph, replicas).map_err(boxed)?;
        errln!("{}", done.describe());
    }
    let (formed, errors) = form_clusters(graph);
    if errors.iter().any(|e| !e.is_warning()) {
        return Err(boxed(errors));
    }
    Ok(Some((single, formed)))
}

/// The fetches the backends take for `asked`: each carried by the
/// cluster's output, targets in the cluster dropped (they run with the
/// device program).
pub(super) fn fetches(single: &SingleReplica, tagged: &Graph, asked: &[String]) -> Vec<String> {
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
pub(super) fn rename_fetched(single: &SingleReplica, fetched: &mut [(String, Tensor)]) {
    for (name, _) in fetched.iter_mut() {
        if let Some((asked, _)) = single.fetches.iter().find(|(_, c)| c == name) {
            name.clone_from(asked);
        }
    }
}

/// What `run` says about a plain graph: one single-replica cluster, the
/// ops it placed on the host, and the variables that start as zeros.
pub(super) fn describe(single: &SingleReplica) -> String {
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
