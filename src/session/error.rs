//! Errors of the session layer: what a plain graph holds that it cannot
//! run as one single-replica cluster. Codes are `tpu_rewrite::session::*`.

use miette::Diagnostic;
use thiserror::Error;

use crate::syntax::Span;

/// An error found while preparing a plain graph.
#[derive(Debug, Clone, Error, Diagnostic, PartialEq)]
pub enum SessionError {
    /// A TF1 ref variable (`VariableV2`) used other than by `Assign`,
    /// `AssignAdd`, `AssignSub` or a read through `Identity`, or an
    /// assignment whose (ref) result is read.
    #[error("TF1 ref variable `{variable}` is used by `{user}` ({op}), which cannot read a resource variable")]
    #[diagnostic(
        code(tpu_rewrite::session::ref_variable),
        help(
            "plain graphs read TF1 ref variables as resource variables: through `Assign`, `AssignAdd`, \
             `AssignSub` and their `<name>/read` Identity; make the variable with `use_resource=True` \
             (TF2's default)"
        )
    )]
    RefVariableUse {
        /// The variable's node name.
        variable: String,
        /// The node that uses it.
        user: String,
        /// That node's op type.
        op: String,
        /// The user.
        #[label("uses the ref variable here")]
        span: Span,
    },
}
