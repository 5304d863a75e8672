//! Errors of the executor: kernel failures and mesh (step) failures.
//!
//! [`KernelError`] is what a kernel returns; it always names the op type.
//! [`ExecError`] is what the mesh returns: it names the graph (device
//! program), the node, the op and carries the node's span. Codes are
//! `tpu_rewrite::exec::*`. `Internal` means a bug in tpu-rewrite.

use std::time::Duration;

use miette::Diagnostic;
use thiserror::Error;

use crate::ir::DType;
use crate::syntax::Span;

/// An error raised by one kernel.
#[derive(Debug, Clone, Error, Diagnostic, PartialEq)]
pub enum KernelError {
    /// The inputs or attributes do not fit the op (bad shape, bad axis, ...).
    #[error("{op}: {message}")]
    #[diagnostic(code(tpu_rewrite::exec::invalid_argument))]
    InvalidArgument { op: String, message: String },

    /// An input has a dtype the kernel does not handle.
    #[error("{op}: unsupported dtype {dtype} ({what})")]
    #[diagnostic(code(tpu_rewrite::exec::unsupported_dtype))]
    UnsupportedDType { op: String, dtype: DType, what: String },

    /// No kernel is registered for this op type.
    #[error("no kernel for op `{op}`")]
    #[diagnostic(
        code(tpu_rewrite::exec::no_kernel),
        help("see `exec::missing_kernels` for every op type of a module that has no kernel")
    )]
    NoKernel { op: String },

    /// The op needs the mesh (variables, channels, collectives, feeds) and
    /// was called through [`crate::exec::run_kernel`], which has no device.
    #[error("{op}: this op needs a device of the mesh and cannot run as a plain kernel")]
    #[diagnostic(code(tpu_rewrite::exec::needs_device))]
    NeedsDevice { op: String },

    /// A tensor the op would make is larger than the tensor-size limit, or
    /// its size overflows.
    #[error("{op}: a {dtype} tensor of shape {shape} needs {bytes} bytes, over the limit of {limit}")]
    #[diagnostic(
        code(tpu_rewrite::exec::too_large),
        help("the limit is half the available memory by default; `run --max-tensor-bytes N` changes it")
    )]
    TooLarge { op: String, shape: String, dtype: DType, bytes: String, limit: u64 },

    /// The kernel panicked: a bug in tpu-rewrite.
    #[error("{op}: kernel panicked (a bug in tpu-rewrite): {message}")]
    #[diagnostic(code(tpu_rewrite::exec::kernel_panic))]
    Panic { op: String, message: String },
}

impl KernelError {
    /// An [`KernelError::InvalidArgument`] for `op`.
    pub fn invalid(op: &str, message: impl Into<String>) -> KernelError {
        KernelError::InvalidArgument { op: op.to_string(), message: message.into() }
    }

    /// An [`KernelError::UnsupportedDType`] for `op`.
    pub fn dtype(op: &str, dtype: DType, what: impl Into<String>) -> KernelError {
        KernelError::UnsupportedDType { op: op.to_string(), dtype, what: what.into() }
    }
}

/// One node that cannot run, found before a step starts.
#[derive(Debug, Clone, Error, Diagnostic, PartialEq)]
pub enum KernelProblem {
    /// The node's op type has no kernel.
    #[error("`%{node}` (`@{graph}`): no kernel for op `{op}`")]
    #[diagnostic(code(tpu_rewrite::exec::no_kernel_for_node))]
    NoKernel {
        graph: String,
        node: String,
        op: String,
        #[label("no kernel for `{op}`")]
        span: Span,
    },

    /// A dtype attribute of the node names a dtype its kernel does not take.
    #[error("`%{node}` (`@{graph}`): op `{op}` has no kernel for {attr} = {dtype}")]
    #[diagnostic(code(tpu_rewrite::exec::unsupported_node_dtype))]
    UnsupportedDType {
        graph: String,
        node: String,
        op: String,
        attr: String,
        dtype: DType,
        #[label("{attr} = {dtype} is not supported here")]
        span: Span,
    },
}

/// An error of the executor: building a mesh, running a step, converting data.
#[derive(Debug, Clone, Error, Diagnostic, PartialEq)]
pub enum ExecError {
    /// The module still holds authoring constructs (regions, `gradients`
    /// calls) that the rewrite passes and the lowering remove.
    #[error("graph `@{graph}` is not lowered: {reason}")]
    #[diagnostic(
        code(tpu_rewrite::exec::not_lowered),
        help("run the rewrite passes and the lowering before executing")
    )]
    NotLowered {
        graph: String,
        reason: String,
        #[label("here")]
        span: Span,
    },

    /// Some nodes of the module cannot run: their op type has no kernel
    /// (`ops` lists those types), or a dtype attribute names a dtype their
    /// kernel does not take. `problems` names every such node with its span.
    #[error("{} node(s) cannot run; no kernel for {} op type(s): {}", problems.len(), ops.len(), ops.join(", "))]
    #[diagnostic(
        code(tpu_rewrite::exec::missing_kernels),
        help("docs/ops.md lists the supported op types and dtypes")
    )]
    MissingKernels {
        ops: Vec<String>,
        #[related]
        problems: Vec<KernelProblem>,
    },

    /// An op type without a kernel, at its first node (see [`crate::exec::preflight`]).
    #[error("no kernel for op `{op}` (`%{node}`{})", if *nodes > 1 { format!(" and {} more node(s)", nodes - 1) } else { String::new() })]
    #[diagnostic(
        code(tpu_rewrite::exec::no_kernel),
        help("the executor cannot run this op type; `lower` still prints its programs")
    )]
    NoKernel {
        op: String,
        node: String,
        nodes: usize,
        #[label("no kernel for `{op}`")]
        span: Span,
    },

    /// A graph's data and control edges form a cycle.
    #[error("graph `@{graph}` has a cycle through `%{node}`")]
    #[diagnostic(code(tpu_rewrite::exec::cycle))]
    Cycle {
        graph: String,
        node: String,
        #[label("on a cycle")]
        span: Span,
    },

    /// TF1 control flow whose frames do not nest as TensorFlow builds them:
    /// an edge that enters a loop other than through `Enter`, leaves one other
    /// than through `Exit`, or an `Exit` outside every loop (also what a
    /// lowered outside compilation inside a loop looks like: its transfers
    /// belong to no frame).
    #[error("graph `@{graph}`: `%{node}` {reason}")]
    #[diagnostic(
        code(tpu_rewrite::exec::control_flow),
        help(
            "a TF1 loop's values enter it through `Enter` and leave it through `Exit`, as `tf.while_loop` builds \
             them; outside compilation inside a TF1 loop is not supported (its transfers run once per step)"
        )
    )]
    ControlFlow {
        graph: String,
        node: String,
        reason: String,
        #[label("here")]
        span: Span,
    },

    /// A `_Recv` whose channel no `_Send` of the module writes, or a channel
    /// written by two `_Send`s.
    #[error("graph `@{graph}`: channel `{channel}` {problem}")]
    #[diagnostic(code(tpu_rewrite::exec::channel))]
    Channel {
        graph: String,
        channel: String,
        problem: String,
        #[label("this op")]
        span: Span,
    },

    /// A feed or fetch names a graph that does not exist.
    #[error("unknown graph `@{graph}`")]
    #[diagnostic(code(tpu_rewrite::exec::unknown_graph))]
    UnknownGraph { graph: String },

    /// A feed or fetch names a tensor that does not exist.
    #[error("graph `@{graph}` has no tensor `{tensor}`: {reason}")]
    #[diagnostic(code(tpu_rewrite::exec::unknown_tensor))]
    UnknownTensor { graph: String, tensor: String, reason: String },

    /// A kernel failed on one device; the step was cancelled.
    #[error("on `@{graph}` ({device}), op `{op}` (`%{node}`) failed: {source}")]
    #[diagnostic(code(tpu_rewrite::exec::kernel))]
    Kernel {
        graph: String,
        device: String,
        node: String,
        op: String,
        #[source]
        source: KernelError,
        #[label("this op failed")]
        span: Span,
    },

    /// A kernel or the executor panicked on one device; the step was cancelled.
    #[error("on `@{graph}` ({device}), op `{op}` (`%{node}`) panicked: {message}")]
    #[diagnostic(code(tpu_rewrite::exec::panic), help("a panic is a bug in tpu-rewrite; please report it"))]
    Panic {
        graph: String,
        device: String,
        node: String,
        op: String,
        message: String,
        #[label("while running this op")]
        span: Span,
    },

    /// A wait (receive, collective) did not finish within the timeout.
    #[error("on `@{graph}` ({device}), op `{op}` (`%{node}`) timed out after {waited:?} waiting for {what}")]
    #[diagnostic(
        code(tpu_rewrite::exec::timeout),
        help("a peer never sent, or the programs wait on each other; MeshConfig::timeout sets the limit")
    )]
    Timeout {
        graph: String,
        device: String,
        node: String,
        op: String,
        what: String,
        waited: Duration,
        #[label("waiting here")]
        span: Span,
    },

    /// The members of a collective disagree (size, dtype, shape, reduce op).
    #[error("on `@{graph}`, collective `%{node}` (group `{group}`, instance {instance}): {message}")]
    #[diagnostic(code(tpu_rewrite::exec::collective))]
    Collective {
        graph: String,
        node: String,
        group: String,
        instance: i64,
        message: String,
        #[label("this collective")]
        span: Span,
    },

    /// A tensor could not be read from or written to JSON or `.npy`.
    #[error("cannot convert tensor data ({format}): {message}")]
    #[diagnostic(code(tpu_rewrite::exec::data))]
    Data { format: String, message: String },

    /// A feed or fetch that the feed/fetch rule forbids.
    #[error(transparent)]
    #[diagnostic(transparent)]
    FeedFetch(Box<crate::passes::PassError>),

    /// A `Placeholder` the run needs was not fed.
    #[error("`%{node}` must be fed: it is a Placeholder of the host program")]
    #[diagnostic(
        code(tpu_rewrite::exec::missing_feed),
        help("feed it with `--feed {node}:0=FILE.npy` or `--feeds FILE.json`")
    )]
    MissingFeed {
        node: String,
        #[label("this Placeholder is not fed")]
        span: Span,
    },

    /// A feed whose dtype or shape differs from its placeholder's.
    #[error("feed `{tensor}` is {found}, but `%{node}` takes {expected}")]
    #[diagnostic(code(tpu_rewrite::exec::feed_mismatch), help("feed a tensor of the placeholder's dtype and shape"))]
    FeedMismatch {
        tensor: String,
        node: String,
        expected: String,
        found: String,
        #[label("takes {expected}")]
        span: Span,
    },

    /// A global batch that does not split evenly over the replicas.
    #[error(
        "The `global_batch_size` {global_batch_size} is not divisible by `num_replicas_in_sync` {num_replicas_in_sync}"
    )]
    #[diagnostic(
        code(tpu_rewrite::exec::indivisible_batch),
        help("feed a global batch whose first dimension is a multiple of the replica count")
    )]
    IndivisibleBatch { global_batch_size: usize, num_replicas_in_sync: usize },

    /// A value fed as a global batch has no batch dimension.
    #[error("cannot split a global batch: {reason}")]
    #[diagnostic(code(tpu_rewrite::exec::unbatchable), help("a global batch needs at least one dimension"))]
    Unbatchable { reason: String },

    /// `--feed-per-host` was given a different number of feeds than the
    /// topology has input hosts.
    #[error("{given} per-host feed(s) were given, but the device assignment has {hosts} input host(s)")]
    #[diagnostic(
        code(tpu_rewrite::exec::host_feed_count),
        help("give one feed per host, in host order (the order `lower --describe` lists the input workers)")
    )]
    HostFeedCount { given: usize, hosts: usize },

    /// A per-host feed lacks a computation input that another host feeds.
    #[error("the feed of host {host} has no `{input}`, which host {other} feeds")]
    #[diagnostic(
        code(tpu_rewrite::exec::host_feed_missing),
        help("every host feeds every computation input for its own replicas")
    )]
    HostFeedMissing { host: usize, input: String, other: usize },

    /// A host's batch does not split evenly among that host's replicas.
    #[error(
        "the batch of host {host} for `{input}` has {host_batch_size} rows, not divisible by its {replicas} replica(s)"
    )]
    #[diagnostic(
        code(tpu_rewrite::exec::indivisible_host_batch),
        help("each host's batch is split along dimension 0 among the replicas it feeds")
    )]
    IndivisibleHostBatch { host: usize, input: String, host_batch_size: usize, replicas: usize },

    /// A broken internal invariant: a bug in tpu-rewrite, not in the input.
    #[error("internal error (a bug in tpu-rewrite): {message}")]
    #[diagnostic(code(tpu_rewrite::exec::internal), help("please report this with the input that caused it"))]
    Internal { message: String },
}

impl ExecError {
    /// A [`ExecError::Data`] error.
    pub fn data(format: &str, message: impl Into<String>) -> ExecError {
        ExecError::Data { format: format.to_string(), message: message.into() }
    }
}
