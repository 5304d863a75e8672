//! Errors of the lowering layer: topology, device assignment, partitioning.
//!
//! Messages give the numbers in plain words, as users of TPUStrategy know
//! them. Codes are `tpu_rewrite::lower::*`; `Internal` means a bug.

use miette::Diagnostic;
use thiserror::Error;

use crate::syntax::Span;

/// An error found while lowering a rewritten graph to device programs.
#[derive(Debug, Clone, Error, Diagnostic, PartialEq)]
pub enum LowerError {
    /// A topology string that is not `HOSTSxCORES`.
    #[error("invalid topology `{text}`: {reason}")]
    #[diagnostic(code(tpu_rewrite::lower::topology), help("write the topology as HOSTSxCORES_PER_HOST, e.g. `2x4`"))]
    Topology {
        /// The topology as given.
        text: String,
        /// What is wrong with it.
        reason: String,
    },

    /// More cores are needed than the topology has.
    #[error(
        "num_replicas ({num_replicas}) x num_cores_per_replica ({cores_per_replica}) needs {needed} cores, but the topology has {available} ({hosts} hosts x {cores_per_host} cores)"
    )]
    #[diagnostic(
        code(tpu_rewrite::lower::too_few_cores),
        help("use a larger --topology, or fewer --num-replicas / --cores-per-replica")
    )]
    TooFewCores {
        /// The replica count asked for.
        num_replicas: u32,
        /// The logical cores per replica asked for.
        cores_per_replica: u32,
        /// Their product: the cores needed.
        needed: u32,
        /// The cores the topology has.
        available: u32,
        /// The topology's hosts.
        hosts: u32,
        /// The topology's cores per host.
        cores_per_host: u32,
    },

    /// The replicas span several hosts but leave part of a host's cores
    /// unused: the last host would hold fewer replicas than the others,
    /// which no per-host input pipeline or strategy fact describes.
    #[error(
        "{needed} cores ({num_replicas} replicas x {cores_per_replica}) span {hosts_used} hosts of the {hosts}x{cores_per_host} topology unevenly: host {last_host} would use {last_cores} of its {cores_per_host} cores and the rest stay idle"
    )]
    #[diagnostic(
        code(tpu_rewrite::lower::uneven_hosts),
        help("replicas that span several hosts fill each host's cores: use a --topology whose cores per host divide {needed} (e.g. `{suggested}`), or --num-replicas {fill}")
    )]
    UnevenHosts {
        /// The replica count.
        num_replicas: u32,
        /// The logical cores per replica.
        cores_per_replica: u32,
        /// Their product: the cores used.
        needed: u32,
        /// The topology's hosts.
        hosts: u32,
        /// The topology's cores per host.
        cores_per_host: u32,
        /// How many hosts the replicas touch.
        hosts_used: u32,
        /// The partly used host.
        last_host: u32,
        /// The cores of it that are used.
        last_cores: u32,
        /// A topology the cores fill evenly.
        suggested: String,
        /// The replica count that fills the hosts touched (when whole replicas do).
        fill: u32,
    },

    /// An op placed on a logical core the replica does not have.
    #[error(
        "`logical_device_id` not in range (was {logical}, but there are only {per_replica} logical devices per replica)"
    )]
    #[diagnostic(
        code(tpu_rewrite::lower::logical_device),
        help("raise num_cores_per_replica, or place the op on TPU_REPLICATED_CORE:0..{max}")
    )]
    LogicalDevice {
        /// The logical core the op is placed on.
        logical: u32,
        /// How many logical cores a replica has.
        per_replica: u32,
        /// The highest valid logical core.
        max: u32,
        /// The op's definition.
        #[label("placed on TPU_REPLICATED_CORE:{logical}")]
        span: Span,
    },

    /// An explicit device assignment that does not fit.
    #[error("invalid device assignment: {reason}")]
    #[diagnostic(
        code(tpu_rewrite::lower::device_assignment),
        help(
            "give one `task:core` per logical core, cores separated by `,` and replicas by `;`, e.g. `0:0,0:1;0:2,0:3`"
        )
    )]
    DeviceAssignment {
        /// Why the assignment does not fit the topology or the module.
        reason: String,
    },

    /// A reduction other than SUM or MEAN.
    #[error("unsupported reduce op `{op}`: only SUM and MEAN are supported")]
    #[diagnostic(code(tpu_rewrite::lower::reduce_op), help("use reduce_op = \"SUM\" or \"MEAN\""))]
    ReduceOp {
        /// The reduction as given.
        op: String,
        /// The op that asks for it.
        #[label("reduce_op = {op:?}")]
        span: Span,
    },

    /// An `Update` or `UpdateNonSlot` whose `fn` is not a variable update.
    #[error("`{op}` updates a variable with fn = \"Assign\", \"AssignAdd\" or \"AssignSub\", not {value:?}")]
    #[diagnostic(
        code(tpu_rewrite::lower::update_fn),
        help("write e.g. `Update(%var, %delta) {{fn = \"AssignAdd\"}}`")
    )]
    UpdateFn {
        /// The op type (`Update` or `UpdateNonSlot`).
        op: String,
        /// The `fn` attribute as given.
        value: String,
        /// The update op.
        #[label("this update")]
        span: Span,
    },

    /// A variable assignment outside every cluster that reads a value the
    /// step computes (Keras leaves batch-norm moving averages so): the
    /// lowering runs such assignments once, as initialisers, before the
    /// first step, when that value does not exist yet.
    #[error("`{node}` ({op}) outside the replicate cluster reads `{reads}`, a value of the step")]
    #[diagnostic(
        code(tpu_rewrite::lower::update_after_step),
        help(
            "assignments outside a cluster run once, before the first step, as variable initialisers; \
             update the variable inside the cluster (as TPUStrategy's `strategy.run` does), or drop the update"
        )
    )]
    UpdateAfterStep {
        /// The assignment's node name.
        node: String,
        /// Its op type.
        op: String,
        /// The step's value it reads (a cluster output).
        reads: String,
        /// The assignment.
        #[label("runs before the first step, but reads the step's result")]
        span: Span,
    },

    /// A global batch size that does not divide by the replicas in sync.
    #[error(
        "The `global_batch_size` {global_batch_size} is not divisible by `num_replicas_in_sync` {num_replicas_in_sync}"
    )]
    #[diagnostic(
        code(tpu_rewrite::lower::indivisible_batch),
        help("choose a global batch size that is a multiple of the replica count")
    )]
    IndivisibleBatch {
        /// The global batch size asked for.
        global_batch_size: u64,
        /// The replica count it must divide by.
        num_replicas_in_sync: u32,
    },

    /// A value leaves a replicate cluster other than through TPUReplicatedOutput.
    #[error("`{consumer}` outside cluster `{cluster}` reads `{producer}` inside it")]
    #[diagnostic(
        code(tpu_rewrite::lower::cluster_escape),
        help("per-replica values leave a cluster through TPUReplicatedOutput (a region's `return`)")
    )]
    ClusterEscape {
        /// The cluster the value belongs to.
        cluster: String,
        /// The node outside the cluster that reads the value.
        consumer: String,
        /// The node inside the cluster that makes the value.
        producer: String,
        /// The read.
        #[label("reads a per-replica value")]
        span: Span,
    },

    /// The graph has no cluster to lower.
    #[error("nothing to lower: the graph has no replicate cluster")]
    #[diagnostic(
        code(tpu_rewrite::lower::no_cluster),
        help("wrap the step in `replicate (num_replicas = N) (...) {{ ... }}`")
    )]
    NoCluster {
        /// The graph's header.
        #[label("this graph has no replicate region and no `_tpu_replicate` ops")]
        span: Span,
    },

    /// num_replicas requested differs from the cluster's metadata.
    #[error("cluster `{cluster}` was built for {built} replica(s), but {requested} were requested")]
    #[diagnostic(
        code(tpu_rewrite::lower::replica_mismatch),
        help("drop --num-replicas, or rewrite the graph for the requested count")
    )]
    ReplicaMismatch {
        /// The cluster's name.
        cluster: String,
        /// The replica count in the cluster's metadata.
        built: u32,
        /// The replica count asked for.
        requested: u32,
    },

    /// A broken internal invariant: a bug in tpu-rewrite, not in the input.
    #[error("internal error (a bug in tpu-rewrite): {message}")]
    #[diagnostic(code(tpu_rewrite::lower::internal), help("please report this with the input that caused it"))]
    Internal {
        /// The invariant that broke.
        message: String,
    },
}
