//! Checks of `run`'s options against the graph, made before anything
//! runs: fetches that name no node (with a "did you mean") and process
//! counts that cannot share the replicas.

use super::error::CliError;
use crate::ir::{Graph, Module};
use crate::lower::DeviceAssignment;

/// Every `--fetch` (`name`, `name:k` or `^name`) must name a node of the
/// tagged graph or of a lowered program; the first that does not is an
/// error whose help names the closest node of the tagged graph.
pub(super) fn check_fetch_names(tagged: &Graph, lowered: &Module, asked: &[String]) -> Result<(), CliError> {
    for name in asked {
        let target = name.strip_prefix('^');
        let (node, output) = match target {
            Some(op) => (op, None),
            None => match name.rsplit_once(':') {
                Some((node, k)) if k.parse::<u32>().is_ok() => (node, Some(k)),
                _ => (name.as_str(), None),
            },
        };
        if tagged.find(node).is_some() || lowered.graphs.iter().any(|g| g.find(node).is_some()) {
            continue;
        }
        let near = if tagged.node_count() <= 200_000 {
            crate::ir::suggest::closest(node, tagged.node_ids().map(|id| &*tagged.node(id).name))
        } else {
            None
        };
        let help = match (near, target, output) {
            (Some(near), Some(_), _) => format!("did you mean `^{near}`?"),
            (Some(near), None, Some(k)) => format!("did you mean `{near}:{k}`?"),
            (Some(near), None, None) => format!("did you mean `{near}`?"),
            (None, _, _) => {
                "fetch a tensor as `node:output` (`loss:0`) or run an op as `^node`; `tpu-rewrite emit FILE` \
                             lists the nodes"
                    .to_string()
            }
        };
        return Err(CliError::UnknownFetch { name: name.clone(), node: node.to_string(), help });
    }
    Ok(())
}

/// Whether `processes` JAX processes can share the replicas of
/// `assignment`: each process owns the same number of devices, so the
/// replicas (times their cores) must divide evenly among them.
pub(super) fn check_processes(processes: u32, assignment: &DeviceAssignment) -> Result<(), String> {
    let replicas = assignment.num_replicas;
    let devices = replicas.saturating_mul(assignment.cores_per_replica);
    if processes > replicas || !replicas.is_multiple_of(processes) || !devices.is_multiple_of(processes) {
        return Err(format!(
            "--processes {processes} cannot share {replicas} replica(s) on {devices} device(s): each process needs \
             the same whole number of replicas (use a divisor of {replicas})"
        ));
    }
    Ok(())
}
