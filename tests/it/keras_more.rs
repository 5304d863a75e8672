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

cases!(
    conv3d,
    losses_logits,
    losses_sparse,
    mixed_bfloat16,
    opt_schedule_inverse_time,
    opt_schedule_piecewise,
    opt_schedule_polynomial,
);

#[test]
fn every_graph_is_listed() {
    let found = keras::graph_names(&corpus_dir(), "run tests/tf/corpus_keras_more.py to make it");
    assert!(!found.is_empty(), "the corpus is empty");
    assert_eq!(found, CASES, "every graph of the corpus has a test, in order, and nothing else");
}
