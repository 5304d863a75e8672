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
        /// The name both nodes carry.
        name: String,
        /// The second definition.
        #[label("defined again here")]
        span: Span,
        /// The first definition.
        #[label("first defined here")]
        first: Span,
    },

    /// Two graphs of one module share a name.
    #[error("duplicate graph name `@{name}`")]
    #[diagnostic(code(tpu_rewrite::ir::duplicate_graph))]
    DuplicateGraph {
        /// The name both graphs carry, without `@`.
        name: String,
        /// The second definition.
        #[label("defined again here")]
        span: Span,
    },

    /// An operand names no node of the graph.
    #[error("unknown input `%{name}`")]
    #[diagnostic(code(tpu_rewrite::ir::unknown_input), help("{help}"))]
    UnknownInput {
        /// The name that was not found, without `%`.
        name: String,
        /// A hint: the closest existing name, or how to define one.
        help: String,
        /// The operand.
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
        /// The name as written.
        name: String,
        /// The known dtype names, comma-separated.
        known: String,
        /// The dtype as written.
        #[label("not a dtype")]
        span: Span,
    },

    /// A literal that does not fit where it stands.
    #[error("invalid attribute value: {reason}")]
    #[diagnostic(code(tpu_rewrite::ir::invalid_value))]
    InvalidValue {
        /// Why the value does not fit.
        reason: String,
        /// The value.
        #[label("{reason}")]
        span: Span,
    },

    /// A proto-valued attribute of an XLA-only op (`dimension_numbers`,
    /// `precision_config`) holds bytes that are not its XLA message.
    #[error("attribute `{key}` of `{op}` does not decode: {reason}")]
    #[diagnostic(
        code(tpu_rewrite::ir::xla_proto),
        help("the attribute holds a serialized xla_data.proto message, as tensorflow.compiler.tf2xla.python.xla writes it (SerializeToString())")
    )]
    XlaProto {
        /// The op type of the node.
        op: String,
        /// The attribute's name.
        key: String,
        /// Why the bytes do not decode.
        reason: String,
        /// The node.
        #[label("this node's `{key}`")]
        span: Span,
    },

    /// An attribute of a known op has the wrong kind of value.
    #[error("attribute `{key}` of `{op}` must be {expected}, found {found}")]
    #[diagnostic(code(tpu_rewrite::ir::attr_type))]
    AttrType {
        /// The op type of the node.
        op: String,
        /// The attribute's name.
        key: String,
        /// The kind of value the op requires.
        expected: String,
        /// The kind of value that was given.
        found: String,
        /// The attribute's value.
        #[label("expected {expected}")]
        span: Span,
    },

    /// An operand asks for an output the producer does not have.
    #[error("`%{producer}` has {count} output(s), so output {index} does not exist")]
    #[diagnostic(code(tpu_rewrite::ir::output_out_of_range), help("outputs are numbered from 0; `%name` is output 0"))]
    OutputOutOfRange {
        /// The node whose output was asked for.
        producer: String,
        /// The output index asked for.
        index: u32,
        /// How many outputs the producer has.
        count: u32,
        /// The operand.
        #[label("output {index} of `%{producer}`")]
        span: Span,
    },

    /// Data and control edges form a cycle.
    #[error("cycle: {path}")]
    #[diagnostic(code(tpu_rewrite::ir::cycle), help("a graph must be acyclic over data and control edges"))]
    Cycle {
        /// The nodes along the cycle, in edge order.
        path: String,
        /// A node on the cycle.
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
        /// The reduction as written.
        op: String,
        /// Where the reduction is given.
        #[label("reduce op `{op}`")]
        span: Span,
    },

    /// A replicate region is missing `num_replicas` or has a bad value.
    #[error("replicate region needs 1 <= `num_replicas` <= {max}{found}", max = crate::ir::MAX_REPLICAS)]
    #[diagnostic(code(tpu_rewrite::ir::num_replicas), help("write `replicate (num_replicas = 8) (...) {{ ... }}`"))]
    NumReplicas {
        /// What was found instead, as a suffix of the message; empty when the attribute is missing.
        found: String,
        /// The region's header.
        #[label("here")]
        span: Span,
    },

    /// A per-replica input list whose length differs from the replica count.
    #[error("replicate input `%{input}` has {found} per-replica operand(s), but num_replicas is {expected}")]
    #[diagnostic(code(tpu_rewrite::ir::replicate_input_count), help("give one operand per replica, in replica order"))]
    ReplicateInputCount {
        /// The region input's name.
        input: String,
        /// The region's replica count.
        expected: i64,
        /// How many operands the list has.
        found: usize,
        /// The operand list.
        #[label("{found} operand(s)")]
        span: Span,
    },

    /// An op outside a region uses a value defined inside it.
    #[error("`%{user}` uses `%{producer}`, which is inside a {region} region it is not part of")]
    #[diagnostic(code(tpu_rewrite::ir::region_escape), help("values leave a replicate region through its `return`; fetch them as `output_<i>_shard_<r>` after rewriting"))]
    RegionEscape {
        /// The node that uses the value.
        user: String,
        /// The node inside the region that defines it.
        producer: String,
        /// The region's kind (`replicate` or `outside_compilation`).
        region: String,
        /// The use.
        #[label("used here")]
        span: Span,
    },

    /// A region input node that is not the input of a replicate region.
    #[error("malformed region: {reason}")]
    #[diagnostic(code(tpu_rewrite::ir::malformed_region))]
    MalformedRegion {
        /// What is wrong with the region.
        reason: String,
        /// The offending node or region.
        #[label("{reason}")]
        span: Span,
    },

    /// A gradients call whose operands are malformed.
    #[error("malformed gradients call: {reason}")]
    #[diagnostic(code(tpu_rewrite::ir::malformed_gradients))]
    MalformedGradients {
        /// What is wrong with the operands.
        reason: String,
        /// The gradients call.
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
        /// The call's op type.
        op: String,
        /// The call node.
        node: String,
        /// The attribute naming the function (`body`, `then_branch`, `f`, ...).
        attr: String,
        /// The function it names.
        name: String,
        /// The call node.
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
        /// The call's op type.
        op: String,
        /// The call node.
        node: String,
        /// The function it calls.
        function: String,
        /// What does not match.
        reason: String,
        /// The call node.
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
        /// The function's graph name.
        function: String,
        /// What is malformed.
        reason: String,
        /// The function's graph.
        #[label("in this function")]
        span: Span,
    },

    /// An op type neither TensorFlow nor tpu-rewrite knows (a warning:
    /// `check --strict` makes it [`IrError::UnknownOpStrict`]).
    #[error("unknown op type `{op}`")]
    #[diagnostic(code(tpu_rewrite::ir::unknown_op), severity(Warning), help("{help}"))]
    UnknownOp {
        /// The op type as written.
        op: String,
        /// The closest known op type, or what to look at.
        help: String,
        /// The node.
        #[label("no registered op has this type")]
        span: Span,
    },

    /// [`IrError::UnknownOp`] as an error (`check --strict`).
    #[error("unknown op type `{op}`")]
    #[diagnostic(code(tpu_rewrite::ir::unknown_op), help("{help}"))]
    UnknownOpStrict {
        /// The op type as written.
        op: String,
        /// The closest known op type, or what to look at.
        help: String,
        /// The node.
        #[label("no registered op has this type")]
        span: Span,
    },

    /// A broken internal invariant: a bug in tpu-rewrite, not in the input.
    #[error("internal error (a bug in tpu-rewrite): {message}")]
    #[diagnostic(code(tpu_rewrite::ir::internal), help("please report this with the input that caused it"))]
    Internal {
        /// The invariant that broke.
        message: String,
        /// The node or statement being handled when it broke.
        #[label("while handling this")]
        span: Span,
    },
}
