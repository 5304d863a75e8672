//! Replicate clustering: every `replicate` region becomes a TPU cluster.
//!
//! Meaning: each top-level replicate region gets a cluster name chosen with
//! the graph's unique-name rule (`cluster`, `cluster_1`, ...; names already
//! used by nodes or by existing clusters are skipped), stored in the
//! region's `_tpu_replicate` attribute, and every node of its body (nested
//! outside_compilation blocks and gradients calls included) gets
//! `_tpu_replicate = "<cluster>"`.
//!
//! Errors: a replicate region inside another is "TPU computations cannot be
//! nested", labelled on both regions; a body op that already carries
//! `_tpu_replicate` is the same error on that op; a region without a valid
//! `num_replicas` is malformed.
//!
//! Invariants after the pass: every named cluster has `num_replicas >= 1`;
//! a node is tagged iff its nearest enclosing replicate region is named.
//! Graphs without regions are left unchanged (the pass is idempotent on
//! rewritten graphs). Cost: O(nodes + regions × nesting depth).

use std::collections::HashSet;

use super::common::{Namer, PIVOT_FOR_CLUSTER, TPU_REPLICATE};
use super::error::PassError;
use crate::ir::{AttrValue, Graph, RegionId, RegionKind};

/// Names the replicate regions of `graph` and tags their ops.
pub fn replicate_clustering(graph: &mut Graph) -> Vec<PassError> {
    let mut errors = Vec::new();
    if graph.regions.is_empty() {
        return errors;
    }
    let mut order: Vec<RegionId> = (0..graph.regions.len() as u32).map(RegionId).collect();
    order.sort_by_key(|r| graph.region(*r).seq);

    // Cluster names in use: existing tags and pivots of earlier rewrites.
    let mut in_use = HashSet::new();
    for id in graph.node_ids() {
        let attrs = &graph.node(id).attrs;
        for key in [TPU_REPLICATE, PIVOT_FOR_CLUSTER] {
            if let Some(name) = attrs.get_str(key) {
                in_use.insert(name.to_string());
            }
        }
    }
    // Cluster names avoid node names and each other ignoring case, as TF's
    // `Graph.unique_name` does.
    let mut namer = Namer::case_insensitive(graph, in_use);

    // `cluster_of_region[r]`: the cluster name of the nearest enclosing
    // replicate region of `r`, if that region is named.
    let mut cluster_of_region: Vec<Option<String>> = vec![None; graph.regions.len()];
    for &rid in &order {
        let region = graph.region(rid);
        if !matches!(region.kind, RegionKind::Replicate { .. }) {
            continue;
        }
        let outer =
            graph.region_chain(region.parent).find(|r| matches!(graph.region(*r).kind, RegionKind::Replicate { .. }));
        if let Some(outer) = outer {
            errors.push(PassError::NestedReplicate {
                span: region.keyword_span,
                outer: graph.region(outer).keyword_span,
            });
            continue;
        }
        match region.num_replicas() {
            Some(n) if (1..=crate::ir::MAX_REPLICAS).contains(&n) => {}
            _ => {
                errors.push(PassError::MalformedRegion {
                    reason: format!("`num_replicas` must be an integer from 1 to {}", crate::ir::MAX_REPLICAS),
                    span: region.keyword_span,
                });
                continue;
            }
        }
        let name = namer.fresh(graph, "cluster");
        graph.region_mut(rid).attrs.insert(TPU_REPLICATE, AttrValue::str(name.clone()));
        cluster_of_region[rid.0 as usize] = Some(name);
    }
    // Propagate each name to the regions nested in its replicate region.
    for r in 0..graph.regions.len() {
        if cluster_of_region[r].is_some() {
            continue;
        }
        let nearest = graph
            .region_chain(Some(RegionId(r as u32)))
            .find(|x| matches!(graph.region(*x).kind, RegionKind::Replicate { .. }));
        if let Some(rep) = nearest {
            cluster_of_region[r] = cluster_of_region[rep.0 as usize].clone();
        }
    }

    // One shared string per cluster, not one per tagged node.
    let tags: Vec<Option<AttrValue>> = cluster_of_region.iter().map(|n| n.as_deref().map(AttrValue::str)).collect();
    let tagged: Vec<_> = graph.node_ids().filter_map(|id| Some((id, graph.node(id).region?))).collect();
    for (id, region) in tagged {
        let Some(tag) = &tags[region.0 as usize] else { continue };
        let node = graph.node_mut(id);
        if let Some(existing) = node.attrs.get_str(TPU_REPLICATE) {
            errors.push(PassError::AlreadyInCluster {
                node: node.name.to_string(),
                cluster: existing.to_string(),
                span: node.span,
            });
            continue;
        }
        node.attrs.insert(TPU_REPLICATE, tag.clone());
    }
    errors
}
