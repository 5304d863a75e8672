//! More of the Keras corpus (`tests/tf/corpus/keras_more/`, written by
//! `tests/tf/corpus_keras_more.py` with tensorflow-cpu 2.21.0 and tf_keras
//! 2.21, in the way `tests/tf/corpus_keras.py` writes its own): volumetric
//! convolution and pooling, learning-rate schedules and losses. Every case
//! forms the clusters TensorFlow tagged and runs its steps on the simulator
//! and on PJRT with TensorFlow's numbers (`support::keras`). The Keras 3
//! optimizers, which build no graph outside a `tf.function`, are SavedModels
//! whose `train_step` runs through `tpu-rewrite run` on both backends.
//! `every_graph_is_listed` fails for a graph without a test.

use std::path::{Path, PathBuf};

use serde_json::Value;
use tpu_rewrite::ir::DType;
use tpu_rewrite::tf::bundle::{self, Entry};

use crate::support::cli::{run, stderr};
use crate::support::{corpus, keras};

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

// PiecewiseConstantDecay checks that exactly one of its intervals holds
// the step with an `Assert` inside the step (an `If` whose other branch
// asserts): the simulator runs it as a real check, and PJRT as a device
// check (`xla_device_checks::` shows a failing one).
cases!(
    conv3d,
    losses_logits,
    losses_sparse,
    mixed_bfloat16,
    opt_schedule_inverse_time,
    opt_schedule_piecewise,
    opt_schedule_polynomial
);

/// Dropout, SpatialDropout1D and GaussianNoise with fixed seeds: TensorFlow's numbers over two
/// steps on the simulator, which draws TensorFlow's CPU stream. On PJRT the seeded ops draw from
/// XLA's generator, as TensorFlow's XLA bridge lowers them (it ignores the seeds: docs/xla.md), so
/// the masks differ from TensorFlow's CPU ones: there every fetch and variable must be finite, of
/// TensorFlow's shapes, and the trained weights must differ from TensorFlow's.
#[test]
fn dropout() {
    let floats = |t: &tpu_rewrite::exec::Tensor| -> Vec<f64> {
        match t {
            tpu_rewrite::exec::Tensor::F32(a) => a.iter().map(|&v| f64::from(v)).collect(),
            _ => Vec::new(),
        }
    };
    let check = |label: &str, meta: &Value, outcome: &tpu_rewrite::exec::driver::RunOutcome, rtol: f64| {
        for (name, want) in meta["runs"][0]["fetches"].as_object().expect("fetches") {
            let got =
                &outcome.fetched.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("{label}: no {name}")).1;
            assert_eq!(got.shape(), corpus::tensor_of(want).shape(), "{label}: shape of {name}");
            assert!(floats(got).iter().all(|v| v.is_finite()), "{label}: {name} is not finite");
        }
        let mut differs_from_tf = false;
        for (var, copies) in meta["variables_after"].as_object().expect("variables_after") {
            let got = outcome.mirrors.get(var).unwrap_or_else(|| panic!("{label}: no mirrored variable `{var}`"));
            let want = corpus::tensor_of(&copies[0]);
            assert_eq!(got[0].shape(), want.shape(), "{label}: shape of `{var}`");
            let (g, w) = (floats(&got[0]), floats(&want));
            assert!(g.iter().all(|v| v.is_finite()), "{label}: `{var}` is not finite: {g:?}");
            differs_from_tf |= g.iter().zip(&w).any(|(a, b)| (a - b).abs() > rtol * b.abs().max(1.0));
        }
        assert!(differs_from_tf, "{label}: XLA's masks gave TensorFlow's CPU numbers");
    };
    keras::check_runs_with(&corpus_dir(), "dropout", &check);
}

#[test]
fn every_graph_is_listed() {
    let found = keras::graph_names(&corpus_dir(), "run tests/tf/corpus_keras_more.py to make it");
    assert!(!found.is_empty(), "the corpus is empty");
    let mut tested = CASES.to_vec();
    tested.push("dropout");
    tested.sort_unstable();
    assert_eq!(found, tested, "every graph of the corpus has a test, and nothing else");
}

// ------------------------------------------------------------ Keras 3 optimizers

/// The Keras 3 optimizer cases (`tests/tf/corpus/keras_more/keras3/NAME/`): a
/// SavedModel whose `train_step` tf.function applies the optimizer, since
/// Keras 3 builds no `tpu.replicate` graph.
const KERAS3: &[&str] = &[
    "adadelta",
    "adafactor",
    "adagrad",
    "adam",
    "adam_amsgrad",
    "adam_global_clipnorm",
    "adamax",
    "adamw",
    "ftrl",
    "lion",
    "nadam",
    "rmsprop_centered",
    "sgd_clipnorm_schedule",
    "sgd_clipvalue",
    "sgd_momentum",
    "sgd_nesterov",
];

/// An entry's values as f64 (f32 and the integer iteration counts).
fn entry_values(entry: &Entry) -> Vec<f64> {
    let words = |n: usize| entry.bytes.chunks(n).map(|c| c.to_vec());
    match entry.dtype {
        DType::F32 => words(4).map(|c| f64::from(f32::from_le_bytes(c.try_into().unwrap()))).collect(),
        DType::I64 => words(8).map(|c| i64::from_le_bytes(c.try_into().unwrap()) as f64).collect(),
        DType::I32 => words(4).map(|c| f64::from(i32::from_le_bytes(c.try_into().unwrap()))).collect(),
        other => panic!("unexpected dtype {other}"),
    }
}

fn assert_near(what: &str, got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: {} values, TensorFlow has {}", got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let tolerance = 1e-4 * g.abs().max(w.abs()).max(1.0);
        assert!((g - w).abs() <= tolerance, "{what}[{i}]: got {g}, TensorFlow {w}");
    }
}

/// Runs the SavedModel's `train_step` for TensorFlow's steps on `backend`,
/// writing a checkpoint; compares the last loss and every variable.
fn keras3_case(name: &str, backend: &str) {
    let dir = corpus_dir().join("keras3").join(name);
    let want = corpus::read_json(&dir.join("expected.json"));
    let steps = want["steps"].as_u64().expect("steps").to_string();
    let out_dir = std::env::temp_dir().join(format!("tpu-rewrite-keras3-{}-{name}-{backend}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out_dir);
    let (saved, feeds) = (dir.join("saved_model"), dir.join("feeds.json"));
    let mut args = vec![
        "run",
        saved.to_str().unwrap(),
        "--function",
        "train_step",
        "--feeds",
        feeds.to_str().unwrap(),
        "--fetch",
        "identity:0",
        "--steps",
        &steps,
        "--save-checkpoint",
        out_dir.to_str().unwrap(),
    ];
    let plugin = crate::support::pjrt::plugin_path();
    if backend == "pjrt" {
        args.extend(["--backend", "pjrt", "--pjrt-plugin", plugin.to_str().unwrap()]);
    }
    let out = run(&args);
    assert!(out.status.success(), "{name} ({backend}): run failed:\n{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let loss: f64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("identity:0 = "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} ({backend}): no loss printed:\n{stdout}"));
    let losses = want["losses"].as_array().expect("losses");
    let last = losses.last().and_then(Value::as_f64).expect("a loss");
    assert_near(&format!("{name} ({backend}): last loss"), &[loss], &[last]);
    let entries = bundle::read_bundle(&out_dir.join("ckpt")).expect("the checkpoint reads back");
    let variables = want["variables"].as_object().expect("variables");
    assert!(!variables.is_empty(), "{name}: TensorFlow recorded no variable");
    for (var, v) in variables {
        let key = v["checkpoint_key"].as_str().expect("checkpoint_key");
        let entry = entries.get(key).unwrap_or_else(|| panic!("{name} ({backend}): no checkpoint entry {key}"));
        let tf: Vec<f64> = v["final"]["values"].as_array().expect("values").iter().filter_map(Value::as_f64).collect();
        assert_near(&format!("{name} ({backend}): {var}"), &entry_values(entry), &tf);
    }
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
fn keras3_optimizers_give_tensorflow_numbers_on_the_simulator() {
    for name in KERAS3 {
        keras3_case(name, "simulator");
    }
}

#[test]
fn keras3_optimizers_give_tensorflow_numbers_on_pjrt() {
    for name in KERAS3 {
        keras3_case(name, "pjrt");
    }
}

#[test]
fn every_keras3_case_is_listed() {
    let dir = corpus_dir().join("keras3");
    let mut found: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e} (run tests/tf/corpus_keras_more.py keras3_optimizers)", dir.display()))
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    found.sort();
    assert_eq!(found, KERAS3, "every Keras 3 case has a test, in order, and nothing else");
}
