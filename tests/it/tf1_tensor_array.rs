//! A `dynamic_rnn`-style TF1 `while_loop` over TensorArrays with
//! `tf.gradients` (`tests/tf/corpus/tf1_tensor_array/`, written by
//! `tests/tf/corpus_tf1_tensor_array.py` with TensorFlow 2.21 and control
//! flow v2 off): the gradient loop pops from stacks what the forward loop
//! pushed (`StackV2`, `StackPushV2`, `StackPopV2`). Each case runs on the
//! simulator with TensorFlow's numbers (the loss, the states and the
//! gradients). `rnn_replicated` (the step in `tpu.replicate`, with bounded
//! stacks) is not run yet: its gradient loop's `ControlTrigger` reads the
//! cluster's pivot from the top level, which the loop frames refuse
//! (`xla_stablehlo::every_corpus_graph_is_typed_by_the_rules` lists it).

use crate::support::corpus;

use std::path::{Path, PathBuf};

use corpus::import;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tf/corpus/tf1_tensor_array")
}

/// The graphs hold TensorFlow's stack accumulators (else they test nothing here).
#[test]
fn the_gradient_loops_use_stacks() {
    for case in ["rnn_plain", "rnn_replicated"] {
        let module = import(&corpus_dir(), case);
        let main = module.graph("main").expect("@main");
        let count = |op: &str| main.node_ids().filter(|&id| &*main.node(id).op == op).count();
        assert!(count("StackV2") > 0 && count("StackPushV2") == count("StackPopV2"), "{case}");
        assert!(count("TensorArrayGradV3") > 0, "{case}");
    }
}

#[test]
fn rnn_plain_runs_on_the_simulator() {
    corpus::run_on_the_simulator(&corpus_dir(), "rnn_plain");
}

/// On XLA a stack needs a compile-time bound: outside an XLA context TensorFlow makes the
/// gradient's stacks unbounded (`max_size` -1), and `lower` refuses the graph with a diagnostic
/// naming a `StackV2` (as tf2xla does).
#[test]
fn rnn_plain_unbounded_stacks_are_refused_by_the_stablehlo_lowering() {
    let file = corpus_dir().join("rnn_plain.pbtxt");
    let out = crate::support::cli::run(&["lower", "--format", "stablehlo", file.to_str().expect("a UTF-8 path")]);
    let err = crate::support::cli::stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("tpu_rewrite::xla::lowering"), "{err}");
    assert!(err.contains("(StackV2)") && err.contains("max_size is -1"), "{err}");
    assert!(err.contains("maximum_iterations"), "{err}");
}
