//! Errors of the XLA layer: finding and loading a PJRT plugin, calls into
//! it, and StableHLO emission.
//!
//! Codes are `tpu_rewrite::xla::*`. Every failure of a PJRT call carries the
//! plugin's own message (with its status code) and names the program it was
//! working on; emission errors name the node and op.

use miette::Diagnostic;
use thiserror::Error;

use crate::ir::Node;
use crate::syntax::Span;

/// An error of the XLA layer.
#[derive(Debug, Clone, Error, Diagnostic, PartialEq)]
pub enum XlaError {
    /// No plugin was given and none is cached.
    #[error(
        "no PJRT plugin: none given with --pjrt-plugin or $TPU_REWRITE_PJRT_PLUGIN, and no cached copy at {cached}"
    )]
    #[diagnostic(
        code(tpu_rewrite::xla::no_plugin),
        help(
            "run `.ci/fetch-pjrt` to download the pinned CPU plugin (xla-cpu-pjrt 0.0.1), or pass --pjrt-plugin PATH"
        )
    )]
    NoPlugin {
        /// Where the cached plugin was looked for.
        cached: String,
    },

    /// The plugin path names no file.
    #[error("PJRT plugin {path} does not exist")]
    #[diagnostic(code(tpu_rewrite::xla::plugin_not_found), help("pass the path of a PJRT plugin shared object"))]
    PluginNotFound {
        /// The path as given.
        path: String,
    },

    /// `dlopen` failed.
    #[error("cannot load PJRT plugin {path}: {message}")]
    #[diagnostic(code(tpu_rewrite::xla::plugin_load))]
    PluginLoad {
        /// The plugin's path.
        path: String,
        /// The loader's error.
        message: String,
    },

    /// The plugin is not a PJRT plugin tpu-rewrite can drive.
    #[error("PJRT plugin {path} is incompatible: {reason}")]
    #[diagnostic(
        code(tpu_rewrite::xla::incompatible_plugin),
        help("tpu-rewrite speaks PJRT C API 0.81 and later 0.x versions; use a matching plugin")
    )]
    IncompatiblePlugin {
        /// The plugin's path.
        path: String,
        /// Why tpu-rewrite cannot drive it.
        reason: String,
    },

    /// A PJRT call failed; `message` is the plugin's.
    #[error("PJRT {call} failed for {program}: {message}")]
    #[diagnostic(code(tpu_rewrite::xla::pjrt))]
    Pjrt {
        /// The C API function that failed.
        call: String,
        /// The program being handled.
        program: String,
        /// The plugin's error message.
        message: String,
    },

    /// A device check ([`super::device_check`]) found an operand XLA would
    /// have accepted in silence (an index out of range, an integer division
    /// by zero, a full or empty list, an empty Optional).
    #[error("device check failed in {program}, replica {replica}, at `{node}`: {message}")]
    #[diagnostic(
        code(tpu_rewrite::xla::device_check),
        help("the simulator and TensorFlow's CPU kernels refuse this too; `--no-device-checks` gives XLA's unchecked result")
    )]
    DeviceCheck {
        /// The program that ran.
        program: String,
        /// The replica whose operands failed the check.
        replica: i64,
        /// The node of the checked op.
        node: String,
        /// Its op type.
        op: String,
        /// What was out of bounds (it starts with the op type).
        message: String,
    },

    /// A compiled program would hold more than the run's memory budget.
    #[error(
        "{program} would hold {bytes} bytes ({per_device} on each of {devices} devices, from XLA's compiled \
         memory stats) beside the {live} the run holds, over the run's memory budget of {budget} bytes"
    )]
    #[diagnostic(
        code(tpu_rewrite::xla::memory_budget),
        help("raise --max-memory, or run fewer replicas or smaller tensors; nothing was run")
    )]
    MemoryBudget {
        /// The program.
        program: String,
        /// Its bytes on all its devices.
        bytes: u64,
        /// Its bytes on one device.
        per_device: u64,
        /// Its devices.
        devices: usize,
        /// What the process held before it.
        live: u64,
        /// The budget.
        budget: u64,
    },

    /// The plugin could not compile a program; `message` is the compiler's.
    #[error("XLA could not compile {program}:\n{message}")]
    #[diagnostic(
        code(tpu_rewrite::xla::compile),
        help("`tpu-rewrite lower --format stablehlo` prints the module that was compiled")
    )]
    Compile {
        /// The program that did not compile.
        program: String,
        /// The compiler's error message.
        message: String,
    },

    /// The client has fewer devices than the program needs.
    #[error("{program} needs {needed} devices, but the {platform} client has {available}")]
    #[diagnostic(
        code(tpu_rewrite::xla::devices),
        help("on a TPU or GPU host, run with a smaller --num-replicas or a larger slice; on CPU the device count is set for you")
    )]
    Devices {
        /// The program.
        program: String,
        /// How many devices it needs: replicas times partitions.
        needed: usize,
        /// How many devices the client has.
        available: usize,
        /// The client's platform name.
        platform: String,
    },

    /// The plugin drives hardware this machine does not have.
    #[error("PJRT plugin {path} needs {kind} devices, and this machine has none (looked for {looked})")]
    #[diagnostic(
        code(tpu_rewrite::xla::no_devices),
        help("run on a {kind} host, or use the CPU plugin (omit --pjrt-plugin to use the cached one)")
    )]
    NoDevices {
        /// The plugin's path.
        path: String,
        /// The kind of device it drives (`TPU`, `GPU`).
        kind: String,
        /// Where the devices were looked for.
        looked: String,
    },

    /// An op of the device program has no StableHLO lowering.
    #[error("{node}: op `{op}` has no StableHLO lowering ({reason})")]
    #[diagnostic(code(tpu_rewrite::xla::unsupported_op), help("see docs/xla.md for the ops the emitter lowers"))]
    UnsupportedOp {
        /// The node's name.
        node: String,
        /// The op type.
        op: String,
        /// Why: the lowering table's documented reason for the op.
        reason: String,
        /// The node's text in the input, when it was parsed from text.
        #[label("this op")]
        span: Option<Span>,
    },

    /// An op cannot be lowered with these operands (dynamic shape, bad attribute, ...).
    #[error("{node} ({op}): {message}")]
    #[diagnostic(code(tpu_rewrite::xla::lowering))]
    Lowering {
        /// The node's name.
        node: String,
        /// The op type.
        op: String,
        /// Why it cannot be lowered.
        message: String,
        /// The node's text in the input, when it was parsed from text.
        #[label("this op")]
        span: Option<Span>,
    },

    /// The graph has nothing the backend can run, or a form it does not take.
    #[error("{message}")]
    #[diagnostic(code(tpu_rewrite::xla::unsupported_graph))]
    UnsupportedGraph {
        /// What the backend cannot take.
        message: String,
    },

    /// A host-side op (outside the cluster) failed in the simulator's kernels.
    #[error("host op {node}: {message}")]
    #[diagnostic(code(tpu_rewrite::xla::host))]
    Host {
        /// The host op's name.
        node: String,
        /// The kernel's error.
        message: String,
    },

    /// A tensor has a dtype the device cannot hold.
    #[error("{what}: dtype {dtype} cannot go to an XLA device")]
    #[diagnostic(code(tpu_rewrite::xla::dtype), help("devices take f32, f64, i32, i64 and bool tensors"))]
    DType {
        /// The tensor: a feed, an argument or a fetch.
        what: String,
        /// Its dtype.
        dtype: String,
    },

    /// `run --backend pjrt --host-transfer send-recv` on a program with
    /// host calls: the send/recv form is emitted for TPU and GPU runtimes,
    /// and this backend does not serve host transfers.
    #[error("cluster `{cluster}` reaches the host through send/recv, which `run --backend pjrt` cannot serve")]
    #[diagnostic(
        code(tpu_rewrite::xla::send_recv_run),
        help("run with --host-transfer callback (CPU plugin) or stages; `lower --format stablehlo --host-transfer send-recv` writes the send/recv form")
    )]
    SendRecvRun {
        /// The cluster whose module has host transfers.
        cluster: String,
    },

    /// `--fetch` names a tensor the device programs do not return (a host
    /// op after the step, or a target).
    #[error("--fetch {name}: `run --backend pjrt` fetches the device programs' results, and this is not one")]
    #[diagnostic(
        code(tpu_rewrite::xla::not_fetchable),
        help("fetch one of: {available}; or run on the simulator (--backend sim)")
    )]
    NotFetchable {
        /// The fetch name.
        name: String,
        /// The device results that can be fetched, comma-separated.
        available: String,
    },

    /// A `--fetch` of a host op after the device step that the backend
    /// cannot evaluate on the step's outputs (a variable read or write on
    /// the host, an op without a kernel).
    #[error("--fetch {name}: host ops after the device step cannot compute it here: {message}")]
    #[diagnostic(
        code(tpu_rewrite::xla::host_after_step),
        help("pure host ops on the device results can be fetched; host reads and writes of variables need the simulator (--backend sim)")
    )]
    HostAfterStep {
        /// The fetch name.
        name: String,
        /// Why the host evaluation failed.
        message: String,
    },

    /// A feed names no tensor of the graph (the simulator refuses it the
    /// same way, with `exec::unknown_tensor`).
    #[error("--feed {name}: {reason}")]
    #[diagnostic(
        code(tpu_rewrite::xla::unknown_feed),
        help("feed a node of the graph as `node:output`; `tpu-rewrite print FILE` shows the names")
    )]
    UnknownFeed {
        /// The feed as given.
        name: String,
        /// Why it names no tensor.
        reason: String,
    },

    /// Fetching the pinned plugin failed.
    #[error("cannot fetch the PJRT plugin: {message}")]
    #[diagnostic(
        code(tpu_rewrite::xla::fetch),
        help("the fetch runs `pip download`; check that pip and the network to PyPI work")
    )]
    Fetch {
        /// What failed.
        message: String,
    },
}

impl XlaError {
    /// [`XlaError::UnsupportedOp`] for `node`, with the lowering table's
    /// reason (or "no builder in the lowering table").
    pub fn unsupported(node: &Node) -> XlaError {
        let op = &*node.op;
        let reason = super::stablehlo::unlowered_reason(op).unwrap_or("no builder in the lowering table");
        XlaError::UnsupportedOp {
            node: node.name.to_string(),
            op: op.to_string(),
            reason: reason.to_string(),
            span: source_span(node),
        }
    }

    /// [`XlaError::Lowering`] for `node`: it cannot be lowered, for `message`.
    pub fn lowering(node: &Node, message: impl Into<String>) -> XlaError {
        XlaError::Lowering {
            node: node.name.to_string(),
            op: node.op.to_string(),
            message: message.into(),
            span: source_span(node),
        }
    }
}

/// The span of `node` in the text it was parsed from; `None` for a node
/// a pass made, or one imported from a binary GraphDef (the message names
/// the node).
fn source_span(node: &Node) -> Option<Span> {
    (!node.span.is_detached()).then_some(node.span)
}
