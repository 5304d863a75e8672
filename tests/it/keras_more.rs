//! More of the Keras corpus (`tests/tf/corpus/keras_more/`, written by
//! `tests/tf/corpus_keras_more.py` with tensorflow-cpu 2.21.0 and tf_keras
//! 2.21, in the way `tests/tf/corpus_keras.py` writes its own): volumetric
//! convolution and pooling, learning-rate schedules and losses. Every case
//! forms the clusters TensorFlow tagged and runs its steps on the simulator
//! and on PJRT with TensorFlow's numbers (`support::keras`).
//! `every_graph_is_listed` fails for a graph without a test.

use std::path::{Path, PathBuf};

use crate::support::keras;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tf/corpus/keras_more")
}

macro_rules! cases {
    ($($name:ident),* $(,)?) => {
        /// The cases with a test, sorted.
        const CASES: &[&str] = &[$(stringify!($name)),*];
        $(
            #[test]
            fn $name() {
                keras::check_runs(&corpus_dir(), stringify!($name));
            }
        )*
    };
}

cases!(conv3d, losses_logits, losses_sparse, mixed_bfloat16, opt_schedule_inverse_time, opt_schedule_polynomial);

/// PiecewiseConstantDecay checks that exactly one of its intervals holds
/// the step with an `Assert` inside the step (an `If` whose other branch
/// asserts). The simulator runs it as a real check; the StableHLO emitter
/// has no lowering for `Assert` yet, and refuses the step rather than drop
/// the check.
#[test]
fn opt_schedule_piecewise() {
    let refused = keras::Pjrt::Refused("tpu_rewrite::xla::unsupported_op", "Assert");
    keras::check(&corpus_dir(), "opt_schedule_piecewise", refused);
}

#[test]
fn every_graph_is_listed() {
    let found = keras::graph_names(&corpus_dir(), "run tests/tf/corpus_keras_more.py to make it");
    assert!(!found.is_empty(), "the corpus is empty");
    let mut tested = CASES.to_vec();
    tested.push("opt_schedule_piecewise");
    tested.sort_unstable();
    assert_eq!(found, tested, "every graph of the corpus has a test, and nothing else");
}
