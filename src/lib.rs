//! tpu-rewrite: a compiler for TPU-style replicated op graphs.
//!
//! The pipeline, each stage a module, dependencies pointing down it:
//! `syntax` (text → AST) → `ir` (graph, verifier) → `passes` (rewrites) →
//! `lower` (per-device programs) → `exec` (the device mesh). `emit` prints
//! any stage; `tf` reads and writes TensorFlow GraphDefs; `cli` drives it all.

/// The global allocator (feature `mimalloc`, on by default).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub mod cli;
pub mod emit;
pub mod exec;
pub mod harness;
pub mod ir;
pub mod lower;
pub mod passes;
pub mod progress;
pub mod syntax;
pub mod tf;
pub mod xla;
