//! What a run of a rewritten graph needs beyond the pipeline, shared by
//! the `tpu-rewrite` binary and the Python package: a plain graph (no
//! replicate cluster) made one single-replica cluster ([`plain`]), and the
//! computation outputs named by the tensors the user knows ([`outputs`]).
//!
//! It sits below the command-line interface and above the backends: it
//! may name `exec` and `xla` items (the op support the single-replica pass
//! is given, tensors); nothing below it names it.

pub mod error;
pub mod outputs;
pub mod plain;

pub use error::SessionError;
