//! Errors of the StableHLO portable-artifact reader.
//!
//! Every variant carries the byte offset into the artifact it is about (as a
//! one-byte [`Span`]), a label, a stable code
//! (`tpu_rewrite::syntax::mlir::*`) and a hint.

use miette::Diagnostic;
use thiserror::Error;

use crate::syntax::Span;

/// An error found while decoding a StableHLO portable artifact.
#[derive(Debug, Clone, Error, Diagnostic, PartialEq)]
pub enum MlirError {
    /// The bytes do not start with MLIR's bytecode magic `ML\xefR`.
    #[error("not MLIR bytecode: the artifact does not start with `ML\\xefR`")]
    #[diagnostic(
        code(tpu_rewrite::syntax::mlir::not_bytecode),
        help(
            "an XlaCallModule `module` attribute holds a StableHLO portable artifact (jax.export's \
             `mlir_module_serialized`); textual MLIR is not read here"
        )
    )]
    NotBytecode {
        /// The start of the artifact.
        #[label("expected `ML\\xefR` here")]
        span: Span,
    },

    /// A bytecode version this reader does not know.
    #[error("MLIR bytecode version {version} is not supported (versions 0 to {max} are)")]
    #[diagnostic(
        code(tpu_rewrite::syntax::mlir::version),
        help("re-export the module with a StableHLO release whose bytecode version is at most {max}")
    )]
    Version {
        /// The version found.
        version: u64,
        /// The newest version read.
        max: u64,
        /// Where the version is.
        #[label("this version")]
        span: Span,
    },

    /// The artifact ends inside a structure.
    #[error("the artifact ends inside {what}")]
    #[diagnostic(
        code(tpu_rewrite::syntax::mlir::truncated),
        help("the bytes were cut short; pass the whole `module` attribute")
    )]
    Truncated {
        /// What was being read.
        what: String,
        /// Where the missing bytes should have been.
        #[label("ends here")]
        span: Span,
    },

    /// A structure whose contents contradict the format.
    #[error("malformed bytecode: {message}")]
    #[diagnostic(
        code(tpu_rewrite::syntax::mlir::malformed),
        help("the artifact is corrupt or was not written by MLIR's bytecode writer")
    )]
    Malformed {
        /// What is wrong.
        message: String,
        /// Where.
        #[label("here")]
        span: Span,
    },

    /// Something the reader does not decode: an operation, attribute or type
    /// kind, or a bytecode feature StableHLO does not use.
    #[error("{what} is not supported")]
    #[diagnostic(
        code(tpu_rewrite::syntax::mlir::unsupported),
        help("the reader decodes the StableHLO (VHLO) dialect as jax.export writes it; {hint}")
    )]
    Unsupported {
        /// The operation, attribute or type kind, by name.
        what: String,
        /// What the user can do.
        hint: String,
        /// Where it is encoded.
        #[label("not decoded")]
        span: Span,
    },
}

impl MlirError {
    /// The byte offset the error is about.
    pub fn offset(&self) -> usize {
        let span = match self {
            MlirError::NotBytecode { span }
            | MlirError::Version { span, .. }
            | MlirError::Truncated { span, .. }
            | MlirError::Malformed { span, .. }
            | MlirError::Unsupported { span, .. } => span,
        };
        span.start as usize
    }

    pub(super) fn malformed(offset: usize, message: impl Into<String>) -> MlirError {
        MlirError::Malformed { message: message.into(), span: at(offset) }
    }

    pub(super) fn truncated(offset: usize, what: impl Into<String>) -> MlirError {
        MlirError::Truncated { what: what.into(), span: at(offset) }
    }

    pub(super) fn unsupported(offset: usize, what: impl Into<String>, hint: impl Into<String>) -> MlirError {
        MlirError::Unsupported { what: what.into(), hint: hint.into(), span: at(offset) }
    }
}

/// A one-byte span at `offset`.
pub(super) fn at(offset: usize) -> Span {
    Span::new(offset, offset.saturating_add(1))
}
