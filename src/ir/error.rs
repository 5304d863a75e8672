//! Errors and warnings of the IR layer: building from the AST and verifying.
//!
//! Every variant has a stable code `tpu_rewrite::ir::*`, a label on the
//! offending span and, where there is one, help. `Internal` means a bug in
//! tpu-rewrite, never bad input.

use miette::Diagnostic;
use thiserror::Error;

use crate::syntax::Span;

/// An error or warning about a graph.
#[derive(Debug, Clone, Error, Diagnostic, PartialEq)]
pub enum IrError {
    /// Two nodes of one graph share a name.
    #[error("duplicate node name `{name}`")]
    #[diagnostic(
        code(tpu_rewrite::ir::duplicate_name),
        help("node names are unique within a graph; rename one of them")
    )]
    DuplicateName {
        name: String,
        #[label("defined again here")]
        span: Span,
        #[label("first defined here")]
        first: Span,
    },

    /// Two graphs of one module share a name.
    #[error("duplicate graph name `@{name}`")]
    #[diagnostic(code(tpu_rewrite::ir::duplicate_graph))]
    DuplicateGraph {
        name: String,
        #[label("defined again here")]
        span: Span,
    },

    /// An operand names no node of the graph.
    #[error("unknown input `%{name}`")]
    #[diagnostic(code(tpu_rewrite::ir::unknown_input), help("{help}"))]
    UnknownInput {
        name: String,
        help: String,
        #[label("no node of this graph has this name")]
        span: Span,
    },

    /// A dtype name that does not exist.
    #[error("unknown dtype `{name}`")]
    #[diagnostic(
        code(tpu_rewrite::ir::unknown_dtype),
        help("dtypes are: {known}, or dtype(N) for a TensorFlow DataType number")
    )]
    UnknownDType {
        name: String,
        known: String,
        #[label("not a dtype")]
        span: Span,
    },

    /// A literal that does not fit where it stands.
    #[error("invalid attribute value: {reason}")]
    #[diagnostic(code(tpu_rewrite::ir::invalid_value))]
    InvalidValue {
        reason: String,
        #[label("{reason}")]
        span: Span,
    },

    /// An attribute of a known op has the wrong kind of value.
    #[error("attribute `{key}` of `{op}` must be {expected}, found {found}")]
    #[diagnostic(code(tpu_rewrite::ir::attr_type))]
    AttrType {
        op: String,
        key: String,
        expected: String,
        found: String,
        #[label("expected {expected}")]
        span: Span,
    },

    /// An operand asks for an output the producer does not have.
    #[error("`%{producer}` has {count} output(s), so output {index} does not exist")]
    #[diagnostic(code(tpu_rewrite::ir::output_out_of_range), help("outputs are numbered from 0; `%name` is output 0"))]
    OutputOutOfRange {
        producer: String,
        index: u32,
        count: u32,
        #[label("output {index} of `%{producer}`")]
        span: Span,
    },

    /// Data and control edges form a cycle.
    #[error("cycle: {path}")]
    #[diagnostic(code(tpu_rewrite::ir::cycle), help("a graph must be acyclic over data and control edges"))]
    Cycle {
        path: String,
        #[label("this node is on the cycle")]
        span: Span,
    },

    /// An output reduction other than SUM or MEAN (TPUStrategy supports only
    /// those two), on a region's `output_reduce_ops` or a
    /// `TPUReplicatedOutput`'s `reduce_op`.
    #[error("reduce op `{op}` is not supported: outputs are reduced only by SUM or MEAN")]
    #[diagnostic(
        code(tpu_rewrite::ir::unsupported_reduce_op),
        help("use \"SUM\" or \"MEAN\", or \"NONE\" to keep one value per replica")
    )]
    UnsupportedReduceOp {
        op: String,
        #[label("reduce op `{op}`")]
        span: Span,
    },

    /// A replicate region is missing `num_replicas` or has a bad value.
    #[error("replicate region needs 1 <= `num_replicas` <= {max}{found}", max = crate::ir::MAX_REPLICAS)]
    #[diagnostic(code(tpu_rewrite::ir::num_replicas), help("write `replicate (num_replicas = 8) (...) {{ ... }}`"))]
    NumReplicas {
        found: String,
        #[label("here")]
        span: Span,
    },

    /// A per-replica input list whose length differs from the replica count.
    #[error("replicate input `%{input}` has {found} per-replica operand(s), but num_replicas is {expected}")]
    #[diagnostic(code(tpu_rewrite::ir::replicate_input_count), help("give one operand per replica, in replica order"))]
    ReplicateInputCount {
        input: String,
        expected: i64,
        found: usize,
        #[label("{found} operand(s)")]
        span: Span,
    },

    /// An op outside a region uses a value defined inside it.
    #[error("`%{user}` uses `%{producer}`, which is inside a {region} region it is not part of")]
    #[diagnostic(code(tpu_rewrite::ir::region_escape), help("values leave a replicate region through its `return`; fetch them as `output_<i>_shard_<r>` after rewriting"))]
    RegionEscape {
        user: String,
        producer: String,
        region: String,
        #[label("used here")]
        span: Span,
    },

    /// A region input node that is not the input of a replicate region.
    #[error("malformed region: {reason}")]
    #[diagnostic(code(tpu_rewrite::ir::malformed_region))]
    MalformedRegion {
        reason: String,
        #[label("{reason}")]
        span: Span,
    },

    /// A gradients call whose operands are malformed.
    #[error("malformed gradients call: {reason}")]
    #[diagnostic(code(tpu_rewrite::ir::malformed_gradients))]
    MalformedGradients {
        reason: String,
        #[label("{reason}")]
        span: Span,
    },

    /// A call op (`While`, `If`, `Case`, `PartitionedCall`, ...) names a
    /// function the module does not have.
    #[error("`%{node}` ({op}) calls `{name}` through `{attr}`, but the module has no function `@{name}`")]
    #[diagnostic(
        code(tpu_rewrite::ir::unknown_function),
        help("functions are graphs with `role = \"function\"`; a GraphDef brings them in its `library`")
    )]
    UnknownFunction {
        op: String,
        node: String,
        attr: String,
        name: String,
        #[label("calls a missing function")]
        span: Span,
    },

    /// A call op whose operands or results do not match the function it
    /// calls (count or dtype), or that names no function.
    #[error("`%{node}` ({op}) does not match `@{function}`: {reason}")]
    #[diagnostic(
        code(tpu_rewrite::ir::call_signature),
        help("a function takes one `_Arg` per operand and returns one `_Retval` per result, with the dtypes the op declares (`T`, `Tin`, `Tout`)")
    )]
    CallSignature {
        op: String,
        node: String,
        function: String,
        reason: String,
        #[label("{reason}")]
        span: Span,
    },

    /// A function whose `_Arg` or `_Retval` nodes are malformed.
    #[error("function `@{function}` is malformed: {reason}")]
    #[diagnostic(
        code(tpu_rewrite::ir::function_signature),
        help("number the `_Arg` and the `_Retval` nodes 0, 1, ... with an int `index` attribute")
    )]
    FunctionSignature {
        function: String,
        reason: String,
        #[label("in this function")]
        span: Span,
    },

    /// A broken internal invariant: a bug in tpu-rewrite, not in the input.
    #[error("internal error (a bug in tpu-rewrite): {message}")]
    #[diagnostic(code(tpu_rewrite::ir::internal), help("please report this with the input that caused it"))]
    Internal {
        message: String,
        #[label("while handling this")]
        span: Span,
    },
}
