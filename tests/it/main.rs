//! The integration tests, in one binary: one link instead of one per file,
//! and one pool of test threads for all of them. Each module is one area;
//! run one with `cargo test --test it MODULE` (a name filter). The memory
//! limit tests are a binary of their own, `tests/limits.rs` (its docs say why).

mod support;

mod bundle_props;
mod cases;
mod cli;
mod cli_first_hour;
mod cli_formats;
mod conformance;
mod differential_fuzz;
mod distributed;
mod docs;
mod dynamic_shape_lowering;
mod exec;
mod feed_dtypes;
mod fuzz_props;
mod gradient_numerics;
mod gradients;
mod gradients_control_flow;
mod graphdef;
mod keras_corpus;
mod keras_more;
mod lower;
mod math_ops;
mod mlir_bytecode;
mod mlp_equivalence;
mod op_cases;
mod ops_coverage;
mod output_files;
mod random_ops;
mod results;
mod rewrite;
mod roundtrip;
mod spmd;
mod strategy;
mod tf1_control_flow;
mod tf1_functionalize;
mod tf1_tensor_array;
mod tf2_saved_model;
mod tf_control_flow;
mod tf_corpus;
mod tf_host_ops;
mod xla_backend;
mod xla_call_module;
mod xla_cli;
mod xla_corpus;
mod xla_device_checks;
mod xla_ffi;
mod xla_fn;
mod xla_misc;
mod xla_ops;
mod xla_pjrt;
mod xla_stablehlo;
mod xla_tensor_list;
