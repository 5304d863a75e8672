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
    /// The TPU hosts and cores to lower for.
    pub topology: Topology,
    /// The replica count; defaults to the clusters' own.
    pub num_replicas: Option<u32>,
    /// Logical cores per replica; defaults to the clusters' own.
    pub cores_per_replica: Option<u32>,
    /// An explicit device assignment (e.g. from [`DeviceAssignment::parse_table`]);
    /// TensorFlow's full mesh over `topology` when `None`.
    pub device_assignment: Option<DeviceAssignment>,
    /// How many steps run on the devices before returning to the host.
    pub steps_per_run: u32,
}

/// A lowered module with what was decided on the way.
#[derive(Debug)]
pub struct Lowered {
    /// The host program and the device programs of each cluster.
    pub module: Module,
    /// The clusters that were lowered.
    pub clusters: Vec<ReplicateCluster>,
    /// Where each logical core of each replica runs.
    pub assignment: DeviceAssignment,
    /// How long each phase of the partitioner took.
    pub phases: Vec<program::LowerPhase>,
}

/// Errors that stop lowering, and the wrapped cluster-formation problems.
///
/// Each variant holds every error found; as a diagnostic it shows the
/// first and lists the others as related.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LowerFailure {
    /// The partitioner found these problems.
    #[error("{}", summary(.0))]
    Lower(Vec<LowerError>),
    /// The graph's clusters could not be formed.
    #[error("{}", summary(.0))]
    Clusters(Vec<crate::passes::PassError>),
}

/// The first error of a list, and how many more there are.
fn summary<E: std::fmt::Display>(errors: &[E]) -> String {
    match errors {
        [] => "lowering failed".to_string(),
        [one] => one.to_string(),
        [first, rest @ ..] => format!("{first} (and {} more error(s))", rest.len()),
    }
}

impl LowerFailure {
    /// Every error, as diagnostics.
    pub fn diagnostics(&self) -> Vec<&dyn miette::Diagnostic> {
        match self {
            LowerFailure::Lower(e) => e.iter().map(|e| e as &dyn miette::Diagnostic).collect(),
            LowerFailure::Clusters(e) => e.iter().map(|e| e as &dyn miette::Diagnostic).collect(),
        }
    }
}

impl miette::Diagnostic for LowerFailure {
    fn code<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        self.diagnostics().first().and_then(|d| d.code())
    }

    fn help<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        self.diagnostics().first().and_then(|d| d.help())
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = miette::LabeledSpan> + '_>> {
        self.diagnostics().first().and_then(|d| d.labels())
    }

    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn miette::Diagnostic> + 'a>> {
        Some(Box::new(self.diagnostics().into_iter().skip(1)))
    }
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
        Some(a) => {
            if a.num_replicas < built || a.cores_per_replica < cores {
                return Err(LowerError::DeviceAssignment {
                    reason: format!(
                        "the table has {} replica(s) x {} core(s), the graph needs {built} x {cores}",
                        a.num_replicas, a.cores_per_replica
                    ),
                });
            }
            Ok(a.clone())
        }
        None => DeviceAssignment::full_mesh(&config.topology, config.num_replicas.unwrap_or(built), cores),
    }
}

/// Lowers a rewritten graph to per-device programs.
pub fn lower(graph: &Graph, config: &LowerConfig) -> Result<Lowered, LowerFailure> {
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
) -> Result<Lowered, LowerFailure> {
    lower_clusters_observed(graph, clusters, config, &crate::progress::NoProgress)
}

/// [`lower_clusters`], reporting progress.
pub fn lower_clusters_observed(
    graph: &Graph,
    mut clusters: Vec<ReplicateCluster>,
    config: &LowerConfig,
    progress: &dyn crate::progress::Progress,
) -> Result<Lowered, LowerFailure> {
    if clusters.is_empty() {
        return Err(LowerFailure::Lower(vec![LowerError::NoCluster { span: graph.span }]));
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
    Ok(Lowered { module, clusters, assignment, phases })
}
