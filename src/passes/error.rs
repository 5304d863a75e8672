//! Errors and warnings of the rewrite passes.
//!
//! One enum for the whole passes layer. Codes are `tpu_rewrite::passes::*`.
//! Warnings carry `severity(Warning)`; `Internal` means a bug in tpu-rewrite.

use miette::Diagnostic;
use thiserror::Error;

use crate::syntax::Span;

/// An error or warning raised by a rewrite pass.
#[derive(Debug, Clone, Error, Diagnostic, PartialEq)]
pub enum PassError {
    /// A broken internal invariant: a bug in tpu-rewrite, not in the input.
    #[error("internal error (a bug in tpu-rewrite): {message}")]
    #[diagnostic(code(tpu_rewrite::passes::internal), help("please report this with the input that caused it"))]
    Internal {
        message: String,
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
        message: String,
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
        op: String,
        op_type: String,
        /// Empty, or `: <why>` when the type is known but this use is not supported.
        reason: String,
        #[label("a gradient reaches this op")]
        span: Span,
        #[label("in this gradients call")]
        call: Span,
    },

    /// A gradients call the pass cannot expand (the verifier reports the details).
    #[error("cannot expand gradients call `%{call}`: {reason}")]
    #[diagnostic(code(tpu_rewrite::passes::malformed_gradients_call))]
    MalformedGradientsCall {
        call: String,
        reason: String,
        #[label("{reason}")]
        span: Span,
    },

    /// After contracting each outside-compilation cluster to one node, the graph has a cycle:
    /// the cluster would have to run both before and after the device computation between.
    #[error("outside-compilation clusters form a cycle: {path}")]
    #[diagnostic(code(tpu_rewrite::passes::cluster_cycle), help("{help}"))]
    ClusterCycle {
        /// The cycle, cluster by cluster.
        path: String,
        help: String,
        #[label("an op of cluster {first}")]
        span: Span,
        /// The first cluster on the path.
        first: String,
    },
}
