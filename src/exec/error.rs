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
    InvalidArgument {
        /// The op type.
        op: String,
        /// What does not fit.
        message: String,
    },

    /// An input has a dtype the kernel does not handle.
    #[error("{op}: unsupported dtype {dtype} ({what})")]
    #[diagnostic(code(tpu_rewrite::exec::unsupported_dtype))]
    UnsupportedDType {
        /// The op type.
        op: String,
        /// The dtype the kernel does not handle.
        dtype: DType,
        /// Which input or attribute has it.
        what: String,
    },

    /// No kernel is registered for this op type.
    #[error("no kernel for op `{op}`")]
    #[diagnostic(
        code(tpu_rewrite::exec::no_kernel),
        help("see `exec::missing_kernels` for every op type of a module that has no kernel")
    )]
    NoKernel {
        /// The op type.
        op: String,
    },

    /// A custom call names a target the simulator does not run.
    #[error("{op}: the simulator has no custom-call target `{target}`")]
    #[diagnostic(
        code(tpu_rewrite::exec::unknown_custom_call_target),
        help("the simulator runs the targets {known}; another target runs only where an XLA backend links it in (`--backend pjrt`)")
    )]
    UnknownCustomCallTarget {
        /// The custom-call op.
        op: String,
        /// The target it names.
        target: String,
        /// The targets the simulator runs, listed.
        known: String,
    },

    /// The op needs the mesh (variables, channels, collectives, feeds) and
    /// was called through [`crate::exec::run_kernel`], which has no device.
    #[error("{op}: this op needs a device of the mesh and cannot run as a plain kernel")]
    #[diagnostic(code(tpu_rewrite::exec::needs_device))]
    NeedsDevice {
        /// The op type.
        op: String,
    },

    /// The op would take the process past its memory budget (see
    /// [`crate::exec::memory`]); `bytes` is 0 when the op had already
    /// allocated and the process holds more than the budget.
    #[error("{op}: {}, over the run's memory budget of {budget} bytes", held(*live, *bytes))]
    #[diagnostic(
        code(tpu_rewrite::exec::memory_budget),
        help(
            "the budget is three quarters of the memory the machine, the cgroup and `ulimit -v` leave; \
             `run --max-memory BYTES` changes it"
        )
    )]
    MemoryBudget {
        /// The op type.
        op: String,
        /// The bytes the op asked for.
        bytes: u64,
        /// The bytes the process held.
        live: u64,
        /// The budget in bytes.
        budget: u64,
    },

    /// A tensor the op would make is larger than the tensor-size limit, or
    /// its size overflows.
    #[error("{op}: a {dtype} tensor of shape {shape} needs {bytes} bytes, over the limit of {limit}")]
    #[diagnostic(
        code(tpu_rewrite::exec::too_large),
        help("the limit is half the available memory by default; `run --max-tensor-bytes N` changes it")
    )]
    TooLarge {
        /// The op type.
        op: String,
        /// The tensor's shape, as printed.
        shape: String,
        /// The tensor's dtype.
        dtype: DType,
        /// The bytes it needs, as printed.
        bytes: String,
        /// The tensor-size limit in bytes.
        limit: u64,
    },

    /// An `Assert` op's condition was false: TensorFlow's `InvalidArgumentError`.
    #[error("{op}: {message}")]
    #[diagnostic(
        code(tpu_rewrite::exec::assertion_failed),
        help("the graph's own check failed on these values; the message lists the op's data inputs")
    )]
    AssertionFailed {
        /// The `Assert` op's name.
        op: String,
        /// TensorFlow's message: the condition and the op's data inputs.
        message: String,
    },

    /// The kernel panicked: a bug in tpu-rewrite.
    #[error("{op}: kernel panicked (a bug in tpu-rewrite): {message}")]
    #[diagnostic(code(tpu_rewrite::exec::kernel_panic))]
    Panic {
        /// The op type.
        op: String,
        /// The panic's message.
        message: String,
    },
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
        /// The device program's name, without `@`.
        graph: String,
        /// The node's name.
        node: String,
        /// The op type.
        op: String,
        /// The node.
        #[label("no kernel for `{op}`")]
        span: Span,
    },

    /// A dtype attribute of the node names a dtype its kernel does not take.
    #[error("`%{node}` (`@{graph}`): op `{op}` has no kernel for {attr} = {dtype}")]
    #[diagnostic(code(tpu_rewrite::exec::unsupported_node_dtype))]
    UnsupportedDType {
        /// The device program's name, without `@`.
        graph: String,
        /// The node's name.
        node: String,
        /// The op type.
        op: String,
        /// The dtype attribute's name.
        attr: String,
        /// The dtype it names.
        dtype: DType,
        /// The node.
        #[label("{attr} = {dtype} is not supported here")]
        span: Span,
    },

    /// A node of a TPU device program makes or takes a string tensor;
    /// strings live on the host only.
    #[error("`%{node}` (`@{graph}`): op `{op}` has a string tensor on a TPU device")]
    #[diagnostic(
        code(tpu_rewrite::exec::string_on_device),
        help("string tensors (and StringFormat, PrintV2, Assert, ScalarSummary) run on the host: put them under `outside_compilation` (tpu.outside_compilation in TensorFlow)")
    )]
    StringOnDevice {
        /// The device program holding the node.
        graph: String,
        /// The node with a string input or output.
        node: String,
        /// The node's op type.
        op: String,
        /// The node.
        #[label("a string tensor on the device")]
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
        /// The device program's name, without `@`.
        graph: String,
        /// What authoring construct is left.
        reason: String,
        /// The construct.
        #[label("here")]
        span: Span,
    },

    /// Some nodes of the module cannot run: their op type has no kernel
    /// (`ops` lists those types), or a dtype attribute names a dtype their
    /// kernel does not take, or a string tensor sits on a TPU device.
    /// `problems` names every such node with its span.
    #[error(
        "{} node(s) cannot run{}",
        problems.len(),
        if ops.is_empty() { String::new() } else { format!("; no kernel for {} op type(s): {}", ops.len(), ops.join(", ")) }
    )]
    #[diagnostic(
        code(tpu_rewrite::exec::missing_kernels),
        help("docs/ops.md lists the supported op types and dtypes")
    )]
    MissingKernels {
        /// The op types without a kernel.
        ops: Vec<String>,
        /// Every node that cannot run, with its span.
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
        /// The op type.
        op: String,
        /// The node's name.
        node: String,
        /// How many nodes have this op type.
        nodes: usize,
        /// The first such node.
        #[label("no kernel for `{op}`")]
        span: Span,
    },

    /// A graph's data and control edges form a cycle.
    #[error("graph `@{graph}` has a cycle through `%{node}`")]
    #[diagnostic(code(tpu_rewrite::exec::cycle))]
    Cycle {
        /// The device program's name, without `@`.
        graph: String,
        /// The node's name.
        node: String,
        /// A node on the cycle.
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
        /// The program holding the node.
        graph: String,
        /// The node where the control flow breaks.
        node: String,
        /// What is wrong with it.
        reason: String,
        /// The node.
        #[label("here")]
        span: Span,
    },

    /// A `_Recv` whose channel no `_Send` of the module writes, or a channel
    /// written by two `_Send`s.
    #[error("graph `@{graph}`: channel `{channel}` {problem}")]
    #[diagnostic(code(tpu_rewrite::exec::channel))]
    Channel {
        /// The device program's name, without `@`.
        graph: String,
        /// The channel's key.
        channel: String,
        /// What is wrong: no writer, or two writers.
        problem: String,
        /// The `_Recv` or `_Send`.
        #[label("this op")]
        span: Span,
    },

    /// A feed or fetch names a graph that does not exist.
    #[error("unknown graph `@{graph}`")]
    #[diagnostic(code(tpu_rewrite::exec::unknown_graph))]
    UnknownGraph {
        /// The graph's name as given, without `@`.
        graph: String,
    },

    /// A feed or fetch names a tensor that does not exist.
    #[error("graph `@{graph}` has no tensor `{tensor}`: {reason}")]
    #[diagnostic(
        code(tpu_rewrite::exec::unknown_tensor),
        help("name a node of the graph as `node:output`; `tpu-rewrite print FILE` shows the names")
    )]
    UnknownTensor {
        /// The graph's name, without `@`.
        graph: String,
        /// The tensor as given (`node:output`).
        tensor: String,
        /// Why the tensor does not exist.
        reason: String,
    },

    /// A kernel failed on one device; the step was cancelled.
    #[error("on `@{graph}` ({device}), op `{op}` (`%{node}`) failed: {source}")]
    #[diagnostic(code(tpu_rewrite::exec::kernel))]
    Kernel {
        /// The device program's name, without `@`.
        graph: String,
        /// The device the program runs on.
        device: String,
        /// The node's name.
        node: String,
        /// The op type.
        op: String,
        /// The kernel's error.
        #[source]
        source: KernelError,
        /// The node.
        #[label("this op failed")]
        span: Span,
    },

    /// An op on one device would take the run past its memory budget; the
    /// step was cancelled before the op allocated (or, for an op whose
    /// outputs no size check sees beforehand, right after it).
    #[error("on `@{graph}` ({device}), op `{op}` (`%{node}`) stopped: {source}")]
    #[diagnostic(
        code(tpu_rewrite::exec::memory_budget),
        help(
            "the budget is three quarters of the memory the machine, the cgroup and `ulimit -v` leave; \
             `run --max-memory BYTES` changes it"
        )
    )]
    MemoryBudget {
        /// The device program's name, without `@`.
        graph: String,
        /// The device the program runs on.
        device: String,
        /// The node's name.
        node: String,
        /// The op type.
        op: String,
        /// The budget error, with the bytes.
        #[source]
        source: KernelError,
        /// The node.
        #[label("the budget ends here")]
        span: Span,
    },

    /// A kernel or the executor panicked on one device; the step was cancelled.
    #[error("on `@{graph}` ({device}), op `{op}` (`%{node}`) panicked: {message}")]
    #[diagnostic(code(tpu_rewrite::exec::panic), help("a panic is a bug in tpu-rewrite; please report it"))]
    Panic {
        /// The device program's name, without `@`.
        graph: String,
        /// The device the program runs on.
        device: String,
        /// The node's name.
        node: String,
        /// The op type.
        op: String,
        /// The panic's message.
        message: String,
        /// The node.
        #[label("while running this op")]
        span: Span,
    },

    /// A step ran longer than its deadline ([`MeshConfig::deadline`](super::MeshConfig::deadline),
    /// `run --deadline`) and was stopped.
    #[error("the step ran longer than its deadline of {limit:?} and was stopped")]
    #[diagnostic(
        code(tpu_rewrite::exec::step_deadline),
        help("a loop whose condition never turns false runs forever; check it, or raise `--deadline` for a long step")
    )]
    StepDeadline {
        /// The deadline.
        limit: Duration,
    },

    /// The caller's step callback asked the run to stop (an embedder's
    /// Ctrl-C, [`driver::run_until`](super::driver::run_until)).
    #[error("the run was stopped after {iterations} of {total} device iterations")]
    #[diagnostic(code(tpu_rewrite::exec::interrupted))]
    Interrupted {
        /// Device iterations that finished.
        iterations: u64,
        /// Device iterations the run was to make.
        total: u64,
    },

    /// A wait (receive, collective) did not finish within the timeout.
    #[error("on `@{graph}` ({device}), op `{op}` (`%{node}`) timed out after {waited:?} waiting for {what}")]
    #[diagnostic(
        code(tpu_rewrite::exec::timeout),
        help("a peer never sent, or the programs wait on each other; MeshConfig::timeout sets the limit")
    )]
    Timeout {
        /// The device program's name, without `@`.
        graph: String,
        /// The device the program runs on.
        device: String,
        /// The node's name.
        node: String,
        /// The op type.
        op: String,
        /// What the op waited for.
        what: String,
        /// How long it waited.
        waited: Duration,
        /// The node.
        #[label("waiting here")]
        span: Span,
    },

    /// The members of a collective disagree (size, dtype, shape, reduce op).
    #[error("on `@{graph}`, collective `%{node}` (group `{group}`, instance {instance}): {message}")]
    #[diagnostic(code(tpu_rewrite::exec::collective))]
    Collective {
        /// The device program's name, without `@`.
        graph: String,
        /// The node's name.
        node: String,
        /// The collective's group key.
        group: String,
        /// The collective's instance key.
        instance: i64,
        /// How the members disagree.
        message: String,
        /// The node.
        #[label("this collective")]
        span: Span,
    },

    /// A tensor could not be read from or written to JSON or `.npy`.
    #[error("cannot convert tensor data ({format}): {message}")]
    #[diagnostic(code(tpu_rewrite::exec::data))]
    Data {
        /// The format (`json` or `npy`).
        format: String,
        /// What could not be read or written.
        message: String,
    },

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
        /// The Placeholder's name.
        node: String,
        /// The Placeholder.
        #[label("this Placeholder is not fed")]
        span: Span,
    },

    /// A feed whose dtype or shape differs from its placeholder's.
    #[error("feed `{tensor}` is {found}, but `%{node}` takes {expected}")]
    #[diagnostic(code(tpu_rewrite::exec::feed_mismatch), help("feed a tensor of the placeholder's dtype and shape"))]
    FeedMismatch {
        /// The feed as given (`node:output`).
        tensor: String,
        /// The Placeholder's name.
        node: String,
        /// The dtype and shape it takes.
        expected: String,
        /// The dtype and shape fed.
        found: String,
        /// The Placeholder.
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
    IndivisibleBatch {
        /// The size of the batch's first dimension.
        global_batch_size: usize,
        /// The replica count it must divide by.
        num_replicas_in_sync: usize,
    },

    /// A value fed as a global batch has no batch dimension.
    #[error("cannot split a global batch: {reason}")]
    #[diagnostic(code(tpu_rewrite::exec::unbatchable), help("a global batch needs at least one dimension"))]
    Unbatchable {
        /// Why the value cannot be split.
        reason: String,
    },

    /// `--feed-per-host` was given a different number of feeds than the
    /// topology has input hosts.
    #[error("{given} per-host feed(s) were given, but the device assignment has {hosts} input host(s)")]
    #[diagnostic(
        code(tpu_rewrite::exec::host_feed_count),
        help("give one feed per host, in host order (the order `lower --describe` lists the input workers)")
    )]
    HostFeedCount {
        /// How many per-host feeds were given.
        given: usize,
        /// How many input hosts the device assignment has.
        hosts: usize,
    },

    /// A per-host feed lacks a computation input that another host feeds.
    #[error("the feed of host {host} has no `{input}`, which host {other} feeds")]
    #[diagnostic(
        code(tpu_rewrite::exec::host_feed_missing),
        help("every host feeds every computation input for its own replicas")
    )]
    HostFeedMissing {
        /// The host whose feed lacks the input.
        host: usize,
        /// The computation input it lacks.
        input: String,
        /// A host that feeds the input.
        other: usize,
    },

    /// A host's batch does not split evenly among that host's replicas.
    #[error(
        "the batch of host {host} for `{input}` has {host_batch_size} rows, not divisible by its {replicas} replica(s)"
    )]
    #[diagnostic(
        code(tpu_rewrite::exec::indivisible_host_batch),
        help("each host's batch is split along dimension 0 among the replicas it feeds")
    )]
    IndivisibleHostBatch {
        /// The host.
        host: usize,
        /// The computation input.
        input: String,
        /// The rows of the host's batch.
        host_batch_size: usize,
        /// How many replicas the host feeds.
        replicas: usize,
    },

    /// A function of the module (a `role = "function"` graph) that cannot
    /// be run: its `_Arg` / `_Retval` indices are malformed or its nodes
    /// form a cycle.
    #[error("{reason}")]
    #[diagnostic(
        code(tpu_rewrite::exec::malformed_function),
        help("`tpu-rewrite check` reports the problems of a module's functions")
    )]
    MalformedFunction {
        /// What is malformed.
        reason: String,
    },

    /// A broken internal invariant: a bug in tpu-rewrite, not in the input.
    #[error("internal error (a bug in tpu-rewrite): {message}")]
    #[diagnostic(code(tpu_rewrite::exec::internal), help("please report this with the input that caused it"))]
    Internal {
        /// The invariant that broke.
        message: String,
    },
}

impl ExecError {
    /// A [`ExecError::Data`] error.
    pub fn data(format: &str, message: impl Into<String>) -> ExecError {
        ExecError::Data { format: format.to_string(), message: message.into() }
    }
}

/// What a run holds, for [`KernelError::MemoryBudget`]: the live bytes,
/// and the bytes asked for when the op had not allocated yet.
fn held(live: u64, asked: u64) -> String {
    match asked {
        0 => format!("the run holds {live} bytes"),
        _ => format!("{asked} bytes more beside the {live} the run holds would be {}", live.saturating_add(asked)),
    }
}
