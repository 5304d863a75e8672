//! `run` and `lower` on a plain graph (no replicate cluster): the values
//! the run gives its variables (a SavedModel's checkpoint, then `--feeds`
//! and `--feed` entries that name a variable), then the library's
//! single-replica cluster ([`crate::session::plain`]).

use super::diagnostics::AnyDiagnostic;
use super::Loaded;
use crate::passes::single_replica::{SingleReplica, Unlowered};
use crate::passes::ReplicateCluster;
use crate::session::plain::PlainConfig;

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
    let Some(graph) = loaded.module.graphs.first() else { return Ok(None) };
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
    let config = PlainConfig {
        fetches: plain.fetches,
        unlowered: plain.unlowered,
        variables: &variables,
        skip_initializers: plain.skip_initializers,
        data_parallel: plain.data_parallel,
    };
    crate::session::plain::cluster(&mut loaded.module, &config)
}
