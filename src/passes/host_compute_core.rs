//! host_compute_core: records which TPU core each outside-compilation
//! cluster talks to.
//!
//! Meaning: when an `outside_compilation` block of a cluster has a `device`
//! of type `TPU_REPLICATED_CORE` with index k (as in `TPU_REPLICATED_CORE:0`
//! or `/device:TPU_REPLICATED_CORE:0`), `"<oc cluster>:k"` is appended to
//! the `host_compute_core` list of the cluster's `TPUReplicateMetadata`,
//! in block order. Blocks on other devices or without one add nothing.
//!
//! Requires `outside-compilation` (the block numbers) and `metadata`.
//! Graphs without regions are unchanged. Cost: O(nodes + regions × depth).

use super::common::{authored_clusters, device_type_and_index, find_per_cluster, OUTSIDE_COMPILATION, TPU_REPLICATE};
use super::error::PassError;
use crate::ir::{AttrValue, Graph, RegionId, RegionKind};

/// Appends the host compute cores of every cluster's outside_compilation blocks.
pub fn host_compute_core(graph: &mut Graph) -> Vec<PassError> {
    let mut errors = Vec::new();
    let clusters = authored_clusters(graph);
    if clusters.is_empty() {
        return errors;
    }
    let metadata = find_per_cluster(graph, &clusters, TPU_REPLICATE, "TPUReplicateMetadata");
    let mut blocks: Vec<RegionId> = (0..graph.regions.len() as u32)
        .map(RegionId)
        .filter(|r| matches!(graph.region(*r).kind, RegionKind::OutsideCompilation))
        .collect();
    blocks.sort_by_key(|r| graph.region(*r).seq);
    for block in blocks {
        let region = graph.region(block);
        let Some(oc) = region.attrs.get_str(OUTSIDE_COMPILATION) else { continue };
        let Some(device) = region.attrs.get_str("device") else { continue };
        let Some(("TPU_REPLICATED_CORE", Some(core))) = device_type_and_index(device) else { continue };
        let Some(cluster) = graph
            .enclosing_replicate(region.parent)
            .and_then(|r| graph.region(r).attrs.get_str(TPU_REPLICATE))
        else {
            continue;
        };
        let Some(&meta) = metadata.get(cluster) else {
            errors.push(PassError::MissingPrerequisite {
                pass: "host-compute-core",
                needs: "metadata",
                span: region.keyword_span,
            });
            continue;
        };
        let entry = AttrValue::str(format!("{oc}:{core}"));
        let attrs = &mut graph.node_mut(meta).attrs;
        match attrs.get_mut("host_compute_core") {
            Some(AttrValue::List(list)) => list.push(entry),
            _ => {
                attrs.insert("host_compute_core", AttrValue::List(vec![entry]));
            }
        }
    }
    errors
}
