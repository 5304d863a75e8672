//! Rewrite passes over the IR and the pass manager that runs them.

pub mod cluster_cycles;
pub mod error;
pub mod gradients;

pub use error::PassError;
