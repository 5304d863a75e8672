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
}
