//! Lowering: topology, device assignment and per-device programs.
//!
//! [`lower`] takes a rewritten (tagged) graph, forms its clusters, picks a
//! device assignment for the topology and partitions the graph into one
//! program per (replica, logical core), one host program per
//! (outside-compilation cluster, replica), a host driver program and, when
//! the graph initialises variables, an init program. The result is an
//! ordinary [`Module`]: it prints as `.opg` and parses back.

pub mod describe;
pub mod error;
pub mod program;
pub mod spmd;
pub mod topology;

pub use describe::{describe, input_workers, InputContext, InputWorker, ReplicaFacts, StrategyFacts};
pub use error::LowerError;
pub use topology::{host_for_device, DeviceAssignment, PhysicalCore, Topology};

use crate::ir::{Graph, Module};
use crate::passes::form_clusters::{form_clusters, ReplicateCluster};

/// Settings of the lowering.
#[derive(Clone, Debug, Default)]
pub struct LowerConfig {
    pub topology: Topology,
    /// The replica count; defaults to the clusters' own.
    pub num_replicas: Option<u32>,
    /// Logical cores per replica; defaults to the clusters' own.
    pub cores_per_replica: Option<u32>,
    /// An explicit device assignment table (see [`DeviceAssignment::parse_table`]).
    pub device_assignment: Option<String>,
    /// How many steps run on the devices before returning to the host.
    pub steps_per_run: u32,
}

/// A lowered module with what was decided on the way.
#[derive(Debug)]
pub struct Lowered {
    pub module: Module,
    pub clusters: Vec<ReplicateCluster>,
    pub assignment: DeviceAssignment,
    /// How long each phase of the partitioner took.
    pub phases: Vec<program::LowerPhase>,
}

/// Errors that stop lowering, and the wrapped cluster-formation problems.
#[derive(Debug)]
pub enum LowerFailure {
    Lower(Vec<LowerError>),
    Clusters(Vec<crate::passes::PassError>),
}

/// Picks the device assignment for `clusters` under `config`.
pub fn assignment_for(clusters: &[ReplicateCluster], config: &LowerConfig) -> Result<DeviceAssignment, LowerError> {
    let built = clusters.iter().map(|c| c.num_replicas).max().unwrap_or(1);
    if let Some(requested) = config.num_replicas {
        if let Some(c) = clusters.iter().find(|c| c.num_replicas != requested) {
            return Err(LowerError::ReplicaMismatch { cluster: c.name.clone(), built: c.num_replicas, requested });
        }
    }
    let cores = config
        .cores_per_replica
        .unwrap_or_else(|| clusters.iter().map(|c| c.num_cores_per_replica).max().unwrap_or(1).max(1));
    match &config.device_assignment {
        Some(table) => {
            let a = DeviceAssignment::parse_table(&config.topology, table)?;
            if a.num_replicas < built || a.cores_per_replica < cores {
                return Err(LowerError::DeviceAssignment {
                    reason: format!(
                        "the table has {} replica(s) x {} core(s), the graph needs {built} x {cores}",
                        a.num_replicas, a.cores_per_replica
                    ),
                });
            }
            Ok(a)
        }
        None => DeviceAssignment::full_mesh(&config.topology, config.num_replicas.unwrap_or(built), cores),
    }
}

/// Lowers a rewritten graph to per-device programs.
pub fn lower(graph: &Graph, config: &LowerConfig) -> Result<(Lowered, Vec<LowerError>), LowerFailure> {
    let (clusters, errors) = form_clusters(graph);
    if errors.iter().any(|e| !e.is_warning()) {
        return Err(LowerFailure::Clusters(errors));
    }
    lower_clusters(graph, clusters, config)
}

/// Lowers a rewritten graph whose clusters are already formed (by the
/// pipeline's `form-clusters` pass, on this very graph).
pub fn lower_clusters(
    graph: &Graph,
    clusters: Vec<ReplicateCluster>,
    config: &LowerConfig,
) -> Result<(Lowered, Vec<LowerError>), LowerFailure> {
    lower_clusters_observed(graph, clusters, config, &crate::progress::NoProgress)
}

/// [`lower_clusters`], reporting progress.
pub fn lower_clusters_observed(
    graph: &Graph,
    mut clusters: Vec<ReplicateCluster>,
    config: &LowerConfig,
    progress: &dyn crate::progress::Progress,
) -> Result<(Lowered, Vec<LowerError>), LowerFailure> {
    if clusters.is_empty() {
        return Err(LowerFailure::Lower(vec![LowerError::NoCluster]));
    }
    let assignment = assignment_for(&clusters, config).map_err(|e| LowerFailure::Lower(vec![e]))?;
    for c in &mut clusters {
        c.num_cores_per_replica = c.num_cores_per_replica.max(1);
    }
    let input = program::PartitionInput {
        graph,
        clusters: &clusters,
        assignment: &assignment,
        steps_per_run: config.steps_per_run.max(1),
        progress,
    };
    let program::Partitioned { module, errors, phases } = program::partition(&input);
    if !errors.is_empty() {
        return Err(LowerFailure::Lower(errors));
    }
    Ok((Lowered { module, clusters, assignment, phases }, Vec::new()))
}
