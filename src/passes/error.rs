//! Errors and warnings of the rewrite passes.
//!
//! One enum for the whole passes layer. Codes are `tpu_rewrite::passes::*`.
//! Warnings carry `severity(Warning)`; `Internal` means a bug in tpu-rewrite.
//! Messages reuse TensorFlow's wording where TensorFlow has one, so users
//! who know `tpu.replicate` recognise them.

use miette::Diagnostic;
use thiserror::Error;

use crate::syntax::Span;

/// An error or warning raised by a rewrite pass.
#[derive(Debug, Clone, Error, Diagnostic, PartialEq)]
pub enum PassError {
    /// A replicate region inside another replicate region.
    #[error("TPU computations cannot be nested")]
    #[diagnostic(
        code(tpu_rewrite::passes::nested_replicate),
        help("move the inner `replicate` out of the outer one; a TPU computation is replicated exactly once")
    )]
    NestedReplicate {
        /// The inner region.
        #[label("this replicate region")]
        span: Span,
        /// The region it is nested in.
        #[label("is inside this replicate region")]
        outer: Span,
    },

    /// An op inside a replicate region already belongs to a cluster.
    #[error("TPU computations cannot be nested: `%{node}` already belongs to cluster `{cluster}`")]
    #[diagnostic(
        code(tpu_rewrite::passes::already_in_cluster),
        help("remove the `_tpu_replicate` attribute; the rewrite assigns it")
    )]
    AlreadyInCluster {
        /// The op's name.
        node: String,
        /// The cluster its `_tpu_replicate` names.
        cluster: String,
        /// The op.
        #[label("already tagged `_tpu_replicate = \"{cluster}\"`")]
        span: Span,
    },

    /// An outside_compilation block inside another one.
    #[error("Cannot nest outside_compilation clusters")]
    #[diagnostic(
        code(tpu_rewrite::passes::nested_outside_compilation),
        help("merge the inner block into the outer one, or place them one after the other")
    )]
    NestedOutsideCompilation {
        /// The inner block.
        #[label("this outside_compilation block")]
        span: Span,
        /// The block it is nested in.
        #[label("is inside this outside_compilation block")]
        outer: Span,
    },

    /// An outside_compilation block that is not inside any replicate region.
    #[error("outside_compilation block outside any replicate region: its ops are left untagged")]
    #[diagnostic(
        code(tpu_rewrite::passes::outside_compilation_outside_cluster),
        severity(Warning),
        help("outside_compilation only has meaning inside a `replicate` region; outside one, ops already run on the host")
    )]
    OutsideCompilationOutsideCluster {
        /// The block.
        #[label("not inside a replicate region")]
        span: Span,
    },

    /// A replicate region the passes cannot rewrite.
    #[error("malformed replicate region: {reason}")]
    #[diagnostic(code(tpu_rewrite::passes::malformed_region))]
    MalformedRegion {
        /// What the pass cannot rewrite.
        reason: String,
        /// The region or the node concerned.
        #[label("{reason}")]
        span: Span,
    },

    /// A replicated input whose per-replica operand count is not the replica count.
    #[error("replicated input `%{input}` has {found} per-replica operand(s), but num_replicas is {expected}")]
    #[diagnostic(
        code(tpu_rewrite::passes::replicated_input_count),
        help("give one operand per replica, in replica order")
    )]
    ReplicatedInputCount {
        /// The input's name.
        input: String,
        /// The replica count.
        expected: i64,
        /// How many operands the input has.
        found: usize,
        /// The input.
        #[label("{found} operand(s)")]
        span: Span,
    },

    /// A replicated output whose result count is not the replica count.
    #[error(
        "replicated output `%{output}` has {found} result(s), but cluster `{cluster}` has num_replicas {expected}"
    )]
    #[diagnostic(
        code(tpu_rewrite::passes::replicated_output_count),
        help("set `num_replicas` of the TPUReplicatedOutput to the cluster's replica count")
    )]
    ReplicatedOutputCount {
        /// The TPUReplicatedOutput's name.
        output: String,
        /// The cluster it reads from.
        cluster: String,
        /// The cluster's replica count.
        expected: i64,
        /// The output's `num_replicas`.
        found: i64,
        /// The output op.
        #[label("{found} result(s)")]
        span: Span,
    },

    /// A `return` that mixes tensors and ops in the wrong order.
    #[error("TPU computations must return zero or more tensors followed by zero or more operations")]
    #[diagnostic(
        code(tpu_rewrite::passes::return_order),
        help("list the tensors first, then the `^%op` control outputs")
    )]
    ReturnOrder {
        /// The first tensor listed after an operation.
        #[label("a tensor after an operation")]
        span: Span,
    },

    /// A pass ran without a pass it depends on.
    #[error("pass `{pass}` needs pass `{needs}` to run before it")]
    #[diagnostic(
        code(tpu_rewrite::passes::missing_prerequisite),
        help("run the passes in pipeline order; `--passes` keeps that order but does not add missing passes")
    )]
    MissingPrerequisite {
        /// The pass that ran.
        pass: &'static str,
        /// The pass that should have run before it.
        needs: &'static str,
        /// The first node the missing pass would have handled.
        #[label("not yet handled by `{needs}`")]
        span: Span,
    },

    /// Ops of a cluster that cannot be compiled for the TPU.
    #[error("{count} unsupported operations found:\n{listing}")]
    #[diagnostic(
        code(tpu_rewrite::passes::unsupported_ops),
        severity(Warning),
        help("wrap host-only ops in `outside_compilation {{ ... }}` so they run on the host")
    )]
    UnsupportedOps {
        /// The cluster holding the ops.
        cluster: String,
        /// How many of its ops are unsupported.
        count: usize,
        /// `  Type (name)` lines, at most five, then `... and M more`.
        listing: String,
        /// The first unsupported op.
        #[label("first unsupported operation in cluster `{cluster}`")]
        span: Span,
    },

    /// A feed or fetch that the feed/fetch rule forbids.
    #[error("cannot {access} `%{node}` (the feed/fetch rule): {reason}")]
    #[diagnostic(
        code(tpu_rewrite::passes::feed_fetch),
        help(
            "the feed/fetch rule: an op of a TPU cluster may be fed or fetched only when it is in an \
             outside_compilation cluster of a computation with num_replicas = 1; fetch the replicated \
             outputs `output_<i>_shard_<r>` instead"
        )
    )]
    FeedFetch {
        /// `feed` or `fetch`.
        access: &'static str,
        /// The node fed or fetched.
        node: String,
        /// Why the rule forbids it.
        reason: String,
        /// The node.
        #[label("compiled as part of a TPU cluster")]
        span: Span,
    },

    /// A cluster without its TPUReplicateMetadata op.
    #[error("TPU cluster `{cluster}` has no TPUReplicateMetadata op")]
    #[diagnostic(
        code(tpu_rewrite::passes::missing_metadata),
        help("every `_tpu_replicate` cluster needs one `TPUReplicateMetadata` op carrying `num_replicas`")
    )]
    MissingMetadata {
        /// The cluster's name.
        cluster: String,
        /// The cluster's first op.
        #[label("first op of cluster `{cluster}`")]
        span: Span,
    },

    /// A cluster with two TPUReplicateMetadata ops.
    #[error("TPU cluster `{cluster}` has more than one TPUReplicateMetadata op")]
    #[diagnostic(code(tpu_rewrite::passes::duplicate_metadata), help("keep exactly one metadata op per cluster"))]
    DuplicateMetadata {
        /// The cluster's name.
        cluster: String,
        /// A later metadata op.
        #[label("another metadata op")]
        span: Span,
        /// The first metadata op.
        #[label("first metadata op")]
        first: Span,
    },

    /// A TPUReplicateMetadata op with unusable attributes.
    #[error("TPUReplicateMetadata of cluster `{cluster}` is invalid: {reason}")]
    #[diagnostic(code(tpu_rewrite::passes::invalid_metadata))]
    InvalidMetadata {
        /// The cluster's name.
        cluster: String,
        /// Which attribute is unusable and why.
        reason: String,
        /// The metadata op.
        #[label("{reason}")]
        span: Span,
    },

    /// A collective's replica groups do not partition its cluster's replicas.
    #[error("`%{node}` in cluster `{cluster}` has invalid replica groups: {reason}")]
    #[diagnostic(
        code(tpu_rewrite::passes::invalid_replica_groups),
        help("group_assignment lists every replica 0..num_replicas exactly once, in groups of equal size")
    )]
    InvalidReplicaGroups {
        /// The collective's name.
        node: String,
        /// Its cluster.
        cluster: String,
        /// How the groups fail to partition the replicas.
        reason: String,
        /// The collective.
        #[label("{reason}")]
        span: Span,
    },

    /// An op tagged outside-compilation that belongs to no cluster.
    #[error("`%{node}` has `_xla_outside_compilation = \"{oc}\"` but no `_tpu_replicate`")]
    #[diagnostic(
        code(tpu_rewrite::passes::outside_compilation_without_cluster),
        help("an outside_compilation cluster lives inside a TPU cluster; add `_tpu_replicate` or drop the tag")
    )]
    OutsideCompilationWithoutCluster {
        /// The op's name.
        node: String,
        /// Its `_xla_outside_compilation` value.
        oc: String,
        /// The op.
        #[label("tagged outside_compilation only")]
        span: Span,
    },

    /// A TPU system op whose operands or attributes are malformed.
    #[error("malformed `{op}` op `%{node}`: {reason}")]
    #[diagnostic(code(tpu_rewrite::passes::malformed_tpu_op))]
    MalformedTpuOp {
        /// The op type.
        op: String,
        /// The node's name.
        node: String,
        /// What is wrong with its operands or attributes.
        reason: String,
        /// The node.
        #[label("{reason}")]
        span: Span,
    },

    /// An op outside a cluster that depends on it and feeds back into it.
    #[error("cyclic dependency with compilation cluster `{cluster}`: {path}")]
    #[diagnostic(
        code(tpu_rewrite::passes::cluster_dependency_cycle),
        help("a cluster runs as one step: nothing outside it may both consume its results and feed it")
    )]
    ClusterDependencyCycle {
        /// The cluster's name.
        cluster: String,
        /// The cycle, node by node, joined by `->`.
        path: String,
        /// An op on the cycle outside the cluster.
        #[label("leaves the cluster and comes back")]
        span: Span,
    },

    /// A broken internal invariant: a bug in tpu-rewrite, not in the input.
    #[error("internal error (a bug in tpu-rewrite): {message}")]
    #[diagnostic(code(tpu_rewrite::passes::internal), help("please report this with the input that caused it"))]
    Internal {
        /// The invariant that broke.
        message: String,
        /// The node being handled when it broke.
        #[label("while handling this")]
        span: Span,
    },
    /// A gradient colocation was entered for an outside-compilation op while another gradient
    /// colocation that set an outside-compilation cluster is still open (the seed's nesting check).
    #[error("Cannot nest gradient colocation operations outside compilation")]
    #[diagnostic(
        code(tpu_rewrite::passes::nested_gradient_colocation),
        help("gradient colocation with `%{op}` started while the gradient of `%{outer}` was being placed outside compilation; close that colocation first")
    )]
    NestedGradientColocation {
        /// The op whose colocation was entered.
        op: String,
        /// The op whose colocation is still open.
        outer: String,
        /// The op whose colocation was entered.
        #[label("gradient colocation with this op")]
        span: Span,
    },

    /// A gradient colocation with an outside-compilation op was requested without a gradient uid,
    /// so the gradient cluster `C.uid` cannot be named.
    #[error("No gradient_uid calling gradient within outside_compilation")]
    #[diagnostic(
        code(tpu_rewrite::passes::missing_gradient_uid),
        help("`%{op}` is in outside_compilation cluster `{cluster}`; its gradient ops need the uid of their gradients call")
    )]
    MissingGradientUid {
        /// The colocated op.
        op: String,
        /// Its `_xla_outside_compilation` value.
        cluster: String,
        /// The colocated op.
        #[label("gradient colocation with this op has no uid")]
        span: Span,
    },

    /// The gradient colocation stack was popped out of order or while empty: a bug in tpu-rewrite.
    #[error("internal error (a bug in tpu-rewrite): Badly nested gradient colocation: {message}")]
    #[diagnostic(
        code(tpu_rewrite::passes::badly_nested_colocation),
        help("please report this with the input that caused it")
    )]
    BadlyNestedColocation {
        /// How the stack was misused.
        message: String,
        /// The op whose colocation was being left.
        #[label("while leaving the gradient colocation of this op")]
        span: Span,
    },

    /// An x of a gradients call that no gradient reaches (no y depends on it, or only through
    /// StopGradient or ops without a gradient): it has no gradient.
    #[error("no gradient flows from the ys of `%{call}` to `%{x}`")]
    #[diagnostic(code(tpu_rewrite::passes::unconnected_gradient), severity(Warning), help("{what}"))]
    UnconnectedGradient {
        /// The gradients call.
        call: String,
        /// The x, as written (`name` or `name:k`).
        x: String,
        /// What became of the call's output for this x.
        what: String,
        /// The x.
        #[label("no gradient reaches this x")]
        span: Span,
    },

    /// A gradient must flow through an op whose type has no gradient function.
    #[error("no gradient defined for `%{op}` of type `{op_type}`{reason}")]
    #[diagnostic(
        code(tpu_rewrite::passes::no_gradient),
        help("differentiate through registered op types only, or stop the gradient with StopGradient")
    )]
    NoGradient {
        /// The op's name.
        op: String,
        /// The op's type.
        op_type: String,
        /// Empty, or `: <why>` when the type is known but this use is not supported.
        reason: String,
        /// The op.
        #[label("a gradient reaches this op")]
        span: Span,
        /// The gradients call.
        #[label("in this gradients call")]
        call: Span,
    },

    /// A gradients call the pass cannot expand (the verifier reports the details).
    #[error("cannot expand gradients call `%{call}`: {reason}")]
    #[diagnostic(code(tpu_rewrite::passes::malformed_gradients_call))]
    MalformedGradientsCall {
        /// The gradients call's name.
        call: String,
        /// Why it cannot be expanded.
        reason: String,
        /// The gradients call.
        #[label("{reason}")]
        span: Span,
    },

    /// A `SymbolicGradient` whose gradient function cannot be made.
    #[error("cannot make the gradient function of `{function}` for SymbolicGradient `%{node}`: {reason}")]
    #[diagnostic(
        code(tpu_rewrite::passes::symbolic_gradient),
        help("`f` must name a function of the module whose float results depend on its arguments through ops with gradients")
    )]
    SymbolicGradient {
        /// The SymbolicGradient node.
        node: String,
        /// The function it differentiates (empty when `f` names none).
        function: String,
        /// Why the gradient function cannot be made.
        reason: String,
        /// The SymbolicGradient node.
        #[label("{reason}")]
        span: Span,
    },

    /// An `XlaCallModule` whose StableHLO module uses an op the raise has no conversion for.
    #[error("XlaCallModule `%{node}`: StableHLO op `{op}` in `@{function}` is not supported: {reason}")]
    #[diagnostic(
        code(tpu_rewrite::passes::xla_call_module::unsupported_op),
        help("docs/xla.md lists the StableHLO ops an XlaCallModule may use; export the JAX function without this op")
    )]
    XlaCallModuleOp {
        /// The XlaCallModule node.
        node: String,
        /// The StableHLO op, e.g. `stablehlo.rng`.
        op: String,
        /// The module function holding it.
        function: String,
        /// Why it cannot be raised.
        reason: String,
        /// The XlaCallModule node.
        #[label("its module uses `{op}`")]
        span: Span,
    },

    /// An `XlaCallModule` whose shapes are not all static (shape polymorphism).
    #[error("XlaCallModule `%{node}`: dynamic shapes are not supported: {what}")]
    #[diagnostic(
        code(tpu_rewrite::passes::xla_call_module::dynamic_shape),
        help("export the JAX function with concrete shapes (no symbolic dimensions in `jax.export` or jax2tf's `polymorphic_shapes`)")
    )]
    XlaCallModuleDynamic {
        /// The XlaCallModule node.
        node: String,
        /// What is dynamic.
        what: String,
        /// The XlaCallModule node.
        #[label("{what}")]
        span: Span,
    },

    /// An `XlaCallModule` serialized for platforms that list neither CPU nor TPU.
    #[error("XlaCallModule `%{node}` is serialized for platforms [{platforms}], which list neither CPU nor TPU")]
    #[diagnostic(
        code(tpu_rewrite::passes::xla_call_module::platform),
        help("export the JAX function for `tpu` or `cpu` (`jax.export(..., platforms=[\"tpu\"])`)")
    )]
    XlaCallModulePlatform {
        /// The XlaCallModule node.
        node: String,
        /// Its `platforms`, comma-separated.
        platforms: String,
        /// The XlaCallModule node.
        #[label("platforms [{platforms}]")]
        span: Span,
    },

    /// An `XlaCallModule` that threads tokens (ordered effects) through its module.
    #[error("XlaCallModule `%{node}` passes tokens: {what}")]
    #[diagnostic(
        code(tpu_rewrite::passes::xla_call_module::token),
        help("ordered effects (host callbacks, debug prints) cannot run here; export the JAX function without them")
    )]
    XlaCallModuleToken {
        /// The XlaCallModule node.
        node: String,
        /// Where the token is.
        what: String,
        /// The XlaCallModule node.
        #[label("{what}")]
        span: Span,
    },

    /// An `XlaCallModule` whose attributes or module are malformed or disagree.
    #[error("XlaCallModule `%{node}`: {problem}")]
    #[diagnostic(
        code(tpu_rewrite::passes::xla_call_module::invalid),
        help("the node's `Tin`, `Tout` and `Sout` must match the module's `main` (as jax2tf writes them), and `module` must be a StableHLO portable artifact")
    )]
    XlaCallModuleInvalid {
        /// The XlaCallModule node.
        node: String,
        /// What is wrong.
        problem: String,
        /// The XlaCallModule node.
        #[label("{problem}")]
        span: Span,
    },

    /// An `XlaSend`/`XlaRecv` channel that cannot be paired.
    #[error("XlaSend/XlaRecv channel `{tensor_name}` at `%{node}`: {problem}")]
    #[diagnostic(
        code(tpu_rewrite::passes::xla_channel),
        help("within one graph, each `tensor_name` needs exactly one XlaSend, of the dtype its XlaRecv declares")
    )]
    XlaChannel {
        /// The send or recv.
        node: String,
        /// The channel's `tensor_name`.
        tensor_name: String,
        /// What is wrong.
        problem: String,
        /// The send or recv.
        #[label("{problem}")]
        span: Span,
    },

    /// After contracting each outside-compilation cluster to one node, the graph has a cycle:
    /// the cluster would have to run both before and after the device computation between.
    #[error("outside-compilation clusters form a cycle: {path}")]
    #[diagnostic(code(tpu_rewrite::passes::outside_compilation_cycle), help("{help}"))]
    OutsideCompilationCycle {
        /// The cycle, cluster by cluster.
        path: String,
        /// How to break the cycle, suited to how the clusters were made.
        help: String,
        /// An op of the first cluster on the path.
        #[label("an op of cluster {first}")]
        span: Span,
        /// The first cluster on the path.
        first: String,
    },
    /// An op of a plain graph that the device cannot compile and the host cannot run.
    #[error("`%{node}` ({op}) can neither be compiled for the device nor run on the host: {reason}")]
    #[diagnostic(
        code(tpu_rewrite::passes::not_compilable),
        help(
            "a plain graph runs as one single-replica cluster: ops with a StableHLO lowering go to the device, \
             host-only ops (strings, prints, asserts) to the host; run it with `--backend sim`, or rewrite the op \
             (`tpu-rewrite ops` lists what each backend runs)"
        )
    )]
    NotCompilable {
        /// The node.
        node: String,
        /// Its op type.
        op: String,
        /// Why it cannot run.
        reason: String,
        /// The node.
        #[label("neither compiled nor run on the host")]
        span: Span,
    },

    /// A fetch or target that names no node of the graph.
    #[error("fetch `{fetch}` names no node of the graph")]
    #[diagnostic(code(tpu_rewrite::passes::unknown_fetch), help("{help}"))]
    UnknownFetch {
        /// The fetch as given.
        fetch: String,
        /// The closest node's name ("did you mean"), else how fetches are written.
        help: String,
    },

    /// A TF1 loop frame that is not a well-formed `tf.while_loop`.
    #[error("cannot functionalize {frame}: {reason}")]
    #[diagnostic(
        code(tpu_rewrite::passes::malformed_loop),
        help(
            "a TF1 loop variable is `Enter -> Merge -> Switch(pred = LoopCond)`, closed by `NextIteration` into the \
             `Merge`, and leaves through `Exit` on the `Switch`'s false output, as `tf.while_loop` builds it"
        )
    )]
    MalformedLoop {
        /// The frame (`loop frame `name``), or `a loop` when it is not known.
        frame: String,
        /// What is wrong.
        reason: String,
        /// The op at fault.
        #[label("here")]
        span: Span,
    },

    /// A value that enters or leaves a TF1 loop frame other than through `Enter` and `Exit`.
    #[error("`%{node}` crosses a loop frame boundary: {reason}")]
    #[diagnostic(
        code(tpu_rewrite::passes::frame_crossing),
        help("values enter a loop through `Enter` (`is_constant = true` for loop invariants) and leave it through `Exit`")
    )]
    FrameCrossing {
        /// The op at fault.
        node: String,
        /// Which frames meet.
        reason: String,
        /// The operand that crosses.
        #[label("here")]
        span: Span,
    },

    /// A TF1 `Merge` that does not close a conditional as `tf.cond` builds it.
    #[error("cannot functionalize the conditional at `%{node}`: {reason}")]
    #[diagnostic(
        code(tpu_rewrite::passes::malformed_cond),
        help(
            "a TF1 conditional switches each value it reads on one predicate, computes each branch from one side of \
             the `Switch`es, and joins the two sides in two-input `Merge`s"
        )
    )]
    MalformedCond {
        /// The op at fault.
        node: String,
        /// What is wrong.
        reason: String,
        /// The op.
        #[label("here")]
        span: Span,
    },

    /// A TF1 `Switch` whose outputs never meet again at a `Merge`.
    #[error("unmatched `Switch` `%{node}`: {reason}")]
    #[diagnostic(
        code(tpu_rewrite::passes::unmatched_switch),
        help("every side of a conditional must end in a `Merge`; a value on one side only has no functional form")
    )]
    UnmatchedSwitch {
        /// The switch.
        node: String,
        /// What is wrong.
        reason: String,
        /// The switch.
        #[label("this Switch")]
        span: Span,
    },

    /// The ops of one TF1 loop or conditional carry different `_tpu_replicate` tags.
    #[error("the ops of {what} belong to {first} and to {second}")]
    #[diagnostic(
        code(tpu_rewrite::passes::construct_spans_clusters),
        help("a loop or conditional becomes one `While`/`If` op, which belongs to one cluster: tag all its ops alike")
    )]
    ConstructSpansClusters {
        /// The loop or conditional.
        what: String,
        /// The first op's cluster.
        first: String,
        /// The other cluster.
        second: String,
        /// An op in the other cluster.
        #[label("this op is in {second}")]
        span: Span,
        /// An op in the first cluster.
        #[label("this op is in {first}")]
        other: Span,
    },

    /// A training step `--data-parallel` cannot replicate safely.
    #[error("`%{node}` ({op}) stops data parallelism: {reason}")]
    #[diagnostic(
        code(tpu_rewrite::passes::data_parallel),
        help("run the step without `--data-parallel`, or change it as the reason says (docs/tf2.md, Data parallel)")
    )]
    NotDataParallel {
        /// The node.
        node: String,
        /// Its op type.
        op: String,
        /// Why the step cannot be replicated.
        reason: String,
        /// The node.
        #[label("here")]
        span: Span,
    },

    /// Outside compilation on some, not all, ops of a TF1 loop or conditional.
    #[error("`%{node}` runs outside compilation inside {what}, which is not supported")]
    #[diagnostic(
        code(tpu_rewrite::passes::outside_compilation_in_control_flow),
        help(
            "functionalizing would move the host op into the device's `While`/`If` body, where it needs a host \
             transfer per iteration; move the host op out of the loop, or run the whole loop outside compilation"
        )
    )]
    OutsideCompilationInControlFlow {
        /// The loop or conditional.
        what: String,
        /// A host op in it.
        node: String,
        /// The host op.
        #[label("tagged `_xla_outside_compilation`")]
        span: Span,
    },
}

impl PassError {
    /// True for warnings, which do not stop the pipeline.
    pub fn is_warning(&self) -> bool {
        matches!(self.severity(), Some(miette::Severity::Warning | miette::Severity::Advice))
    }
}
