//! tpu-rewrite: a compiler for TPU-style replicated op graphs.
//!
//! The pipeline, each stage a module, dependencies pointing down it:
//! `syntax` (text → AST) → `ir` (graph, verifier) → `passes` (rewrites) →
//! `lower` (per-device programs) → `exec` (the device mesh). `emit` prints
//! any stage; `tf` reads and writes TensorFlow GraphDefs; `xla` emits
//! StableHLO and runs it through PJRT. `diagnostics` renders any error
//! against its source as the binary does, `session` makes a plain graph one
//! single-replica cluster and names a run's outputs (for the binary and the
//! Python package alike), and `synth` makes synthetic graphs for benchmarks. The command-line interface is the `tpu-rewrite`
//! binary's own code (`src/cli/`) and not part of the library.
//!
//! The main types and entry points are re-exported here. The library
//! brings no global allocator: the binary uses mimalloc, and an embedding
//! program chooses its own.
//!
//! # Example
//!
//! Parse a graph, run the rewrite passes, lower it to one program per
//! device, print the programs and run them on a simulated mesh:
//!
//! ```
//! use tpu_rewrite::{lower, parse_module, print_module, run_pipeline, LowerConfig, PipelineConfig, Topology};
//!
//! let source = br#"graph @main {
//!   %a = Const() {dtype = f32, value = tensor(f32, [2]) [1.0, 2.0]}
//!   %b = Const() {dtype = f32, value = tensor(f32, [2]) [3.0, 4.0]}
//!   replicate (num_replicas = 2) (%x = [%a, %b]) {
//!     %two = Const() {dtype = f32, value = tensor(f32, []) [2.0]}
//!     %y = Mul(%x, %two) {T = f32}
//!     return %y
//!   }
//! }"#;
//! let (mut module, errors) = parse_module(source)?;
//! assert!(errors.is_empty());
//!
//! // The default configuration runs every pass and verifies the result.
//! let report = run_pipeline(&mut module, &PipelineConfig::default());
//! assert!(!report.has_errors());
//!
//! let config = LowerConfig { topology: Topology::parse("1x2")?, steps_per_run: 1, ..LowerConfig::default() };
//! let lowered = lower(&module.graphs[0], &config)?;
//! let text = print_module(&lowered.module);
//! // One program for the cluster, run by both replicas.
//! assert!(text.contains("graph @cluster (") && text.contains("num_replicas = 2"));
//!
//! let fetches = ["output_0_shard_0:0".to_string(), "output_0_shard_1:0".to_string()];
//! let outcome = tpu_rewrite::exec::driver::run(
//!     &lowered.module,
//!     &[],
//!     &fetches,
//!     &tpu_rewrite::exec::driver::RunConfig::default(),
//!     &mut |_, _| {},
//! )?;
//! assert_eq!(outcome.fetched[1].1, tpu_rewrite::Tensor::from_vec(&[2], vec![6.0f32, 8.0])?);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]

pub mod diagnostics;
pub mod emit;
pub mod exec;
pub mod harness;
pub mod ir;
pub mod lower;
pub mod passes;
pub mod progress;
pub mod session;
pub mod syntax;
pub mod synth;
pub mod tf;
pub mod xla;

/// The README's Rust code blocks, compiled and run as doctests by `cargo
/// test` (from the package root, so the README's relative paths hold).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

pub use emit::print_module;
pub use exec::{ExecError, Tensor};
pub use ir::{parse_module, AttrValue, DType, Graph, IrError, Module, Node, NodeId, Shape};
pub use lower::{lower, LowerConfig, LowerError, Lowered, Topology};
pub use passes::{run_pipeline, PassError, PipelineConfig, PipelineReport, SelectionError};
pub use syntax::{Span, SyntaxError};
pub use tf::{import_graphdef, GraphDefFormat, ImportError};
