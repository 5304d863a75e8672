//! Outside-compilation tagging: each `outside_compilation` block of a
//! cluster becomes an outside-compilation cluster.
//!
//! Meaning: within each TPU cluster, blocks are numbered in text order by a
//! per-cluster counter ("0", "1", ...); the number is stored in the block's
//! `_xla_outside_compilation` attribute and every op of the block gets
//! `_xla_outside_compilation = "<n>"` (ops also keep their `_tpu_replicate`).
//!
//! Errors: a block inside another is "Cannot nest outside_compilation
//! clusters", labelled on both blocks. A block outside any replicate region
//! leaves its ops untagged and yields a warning.
//!
//! Requires `replicate-clustering` (the enclosing cluster's name). Graphs
//! without regions are unchanged. Cost: O(nodes + regions × depth).

use std::collections::HashMap;

use super::common::{OUTSIDE_COMPILATION, TPU_REPLICATE};
use super::error::PassError;
use crate::ir::{AttrValue, Graph, RegionId, RegionKind};

/// Numbers the outside_compilation blocks of `graph` and tags their ops.
pub fn outside_compilation(graph: &mut Graph) -> Vec<PassError> {
    let mut errors = Vec::new();
    if graph.regions.is_empty() {
        return errors;
    }
    let mut order: Vec<RegionId> = (0..graph.regions.len() as u32).map(RegionId).collect();
    order.sort_by_key(|r| graph.region(*r).seq);
    let is_oc = |g: &Graph, r: RegionId| matches!(g.region(r).kind, RegionKind::OutsideCompilation);

    let mut counters: HashMap<RegionId, u64> = HashMap::new();
    let mut name_of_region: Vec<Option<String>> = vec![None; graph.regions.len()];
    for &rid in &order {
        if !is_oc(graph, rid) {
            continue;
        }
        let region = graph.region(rid);
        if let Some(outer) = graph.region_chain(region.parent).find(|r| is_oc(graph, *r)) {
            errors.push(PassError::NestedOutsideCompilation {
                span: region.keyword_span,
                outer: graph.region(outer).keyword_span,
            });
            continue;
        }
        let Some(replicate) = graph.enclosing_replicate(region.parent) else {
            errors.push(PassError::OutsideCompilationOutsideCluster { span: region.keyword_span });
            continue;
        };
        if !graph.region(replicate).attrs.contains_key(TPU_REPLICATE) {
            // The replicate region was rejected (nested or malformed), or
            // clustering did not run.
            if graph.enclosing_replicate(graph.region(replicate).parent).is_none()
                && graph.region(replicate).num_replicas().is_some_and(|n| n >= 1)
            {
                errors.push(PassError::MissingPrerequisite {
                    pass: "outside-compilation",
                    needs: "replicate-clustering",
                    span: graph.region(replicate).keyword_span,
                });
            }
            continue;
        }
        let counter = counters.entry(replicate).or_insert(0);
        let name = counter.to_string();
        *counter += 1;
        graph.region_mut(rid).attrs.insert(OUTSIDE_COMPILATION, AttrValue::str(name.clone()));
        name_of_region[rid.0 as usize] = Some(name);
    }
    // Each region inherits the name of its nearest enclosing block.
    let mut inherited: Vec<Option<String>> = vec![None; graph.regions.len()];
    for r in 0..graph.regions.len() {
        let nearest = graph.region_chain(Some(RegionId(r as u32))).find(|x| is_oc(graph, *x));
        inherited[r] = nearest.and_then(|oc| name_of_region[oc.0 as usize].clone());
    }
    let members: Vec<_> = graph.node_ids().filter_map(|id| Some((id, graph.node(id).region?))).collect();
    for (id, region) in members {
        if let Some(name) = &inherited[region.0 as usize] {
            graph.node_mut(id).attrs.insert(OUTSIDE_COMPILATION, AttrValue::str(name.as_str()));
        }
    }
    errors
}
