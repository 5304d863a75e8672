//! TF2 users' artifacts (tests/tf/corpus_tf2, made by corpus_tf2.py with
//! TensorFlow 2.21 and Keras 3): a SavedModel's `train_step` and the same
//! step's concrete graph run three steps and give TensorFlow's losses and
//! trained variables; `--save-checkpoint` writes a checkpoint TensorFlow
//! restores to the same values; damaged SavedModels give located
//! diagnostics; `--data-parallel 4` over a 4x batch gives TensorFlow's
//! single-device numbers on that global batch, and unsafe steps are refused.

use crate::support::cli as support_cli;
use crate::support::pjrt as support_pjrt;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use support_cli::{run, stderr};
use tpu_rewrite::ir::DType;
use tpu_rewrite::tf::bundle::{self, Entry};

fn corpus(model: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tf/corpus_tf2").join(model)
}

fn expected(model: &str) -> Value {
    let path = corpus(model).join("expected.json");
    let text = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; run tests/tf/setup.sh and tests/tf/corpus_tf2.py", path.display()));
    serde_json::from_slice(&text).expect("expected.json parses")
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tpu-rewrite-tf2-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// The scalar each step logged, in step order: `step N: NAME = V` (the
/// tests fetch the loss alone).
fn step_losses(log: &str) -> Vec<f64> {
    log.lines()
        .filter(|l| l.trim_start().starts_with("step "))
        .filter_map(|l| l.split(" = ").nth(1)?.split(',').next()?.trim().parse().ok())
        .collect()
}

/// An entry's values as f64 (float and integer dtypes).
fn values(entry: &Entry) -> Vec<f64> {
    match entry.dtype {
        DType::F32 => entry.bytes.chunks(4).map(|c| f64::from(f32::from_le_bytes(c.try_into().unwrap()))).collect(),
        DType::I64 => entry.bytes.chunks(8).map(|c| i64::from_le_bytes(c.try_into().unwrap()) as f64).collect(),
        DType::I32 => entry.bytes.chunks(4).map(|c| f64::from(i32::from_le_bytes(c.try_into().unwrap()))).collect(),
        other => panic!("unexpected dtype {other}"),
    }
}

fn json_values(v: &Value) -> Vec<f64> {
    v["values"].as_array().expect("values").iter().map(|x| x.as_f64().expect("a number")).collect()
}

/// Values as f32: JSON's decimal f64 text parses to within an f64 ulp,
/// which rounds to the exact f32 TensorFlow printed.
fn as_f32(values: &[f64]) -> Vec<f32> {
    values.iter().map(|&v| v as f32).collect()
}

fn assert_close(what: &str, got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: {} values, TensorFlow has {}", got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let tolerance = 1e-5 * g.abs().max(w.abs()) + 1e-7;
        assert!((g - w).abs() <= tolerance, "{what}[{i}]: got {g}, TensorFlow {w}");
    }
}

/// The attention models' comparison: each value within 1e-5 of the largest
/// magnitude of TensorFlow's tensor (a sum in another order moves a small
/// element of a tensor by more than 1e-5 of itself after Adam's
/// normalisation), and the key projection's bias (and its Adam slots) within
/// 1e-5 absolute: its gradient is zero in exact arithmetic (softmax is
/// invariant to a shift shared by all keys), so TensorFlow's trained value
/// is rounding noise of the order of 1e-6, where a wrong gradient would move
/// it by the learning rate (1e-2) each step.
fn assert_close_in_scale(what: &str, got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: {} values, TensorFlow has {}", got.len(), want.len());
    let scale = want.iter().fold(0f64, |m, w| m.max(w.abs()));
    let zero_gradient = what.contains("key/bias") || what.contains("key_bias");
    let tolerance = if zero_gradient { 1e-5 } else { 1e-5 * scale + 1e-7 };
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tolerance, "{what}[{i}]: got {g}, TensorFlow {w} (tolerance {tolerance})");
    }
}

/// The comparison of trained values for `model` (see [`assert_close_in_scale`]).
fn compare(model: &str) -> fn(&str, &[f64], &[f64]) {
    if matches!(model, "transformer" | "gpt2") {
        assert_close_in_scale
    } else {
        assert_close
    }
}

/// Runs `args` plus `--steps 3 --save-checkpoint DIR`; returns the logged
/// losses and the checkpoint's entries.
fn run_steps(args: &[&str], name: &str) -> (Vec<f64>, BTreeMap<String, Entry>, PathBuf) {
    let dir = temp_dir(name);
    let ckpt = dir.join("ckpt");
    let mut all: Vec<&str> = args.to_vec();
    let dir_arg = ckpt.to_str().unwrap().to_string();
    all.extend(["--steps", "3", "--save-checkpoint", &dir_arg]);
    let out = run(&all);
    let log = stderr(&out);
    assert!(out.status.success(), "run failed:\n{log}");
    let entries = bundle::read_bundle(&ckpt.join("ckpt")).expect("the checkpoint reads back");
    (step_losses(&log), entries, ckpt)
}

fn saved_model_matches_tensorflow(model: &str) {
    let want = expected(model);
    let saved = corpus(model).join("saved_model");
    let feeds = corpus(model).join("feeds.json");
    let (losses, entries, _) = run_steps(
        &[
            "run",
            saved.to_str().unwrap(),
            "--function",
            "train_step",
            "--feeds",
            feeds.to_str().unwrap(),
            "--fetch",
            "identity:0",
        ],
        &format!("{model}-saved"),
    );
    let tf_losses: Vec<f64> = want["losses"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    assert_close("losses", &losses, &tf_losses);
    for (name, v) in want["variables"].as_object().unwrap() {
        let key = v["checkpoint_key"].as_str().unwrap();
        let entry = entries.get(key).unwrap_or_else(|| panic!("no checkpoint entry {key} for {name}"));
        compare(model)(name, &values(entry), &json_values(&v["final"]));
    }
    // The object graph travels along, so TensorFlow can match the objects.
    assert!(entries.contains_key("_CHECKPOINTABLE_OBJECT_GRAPH"));
}

#[test]
fn the_mlp_saved_model_train_step_gives_tensorflow_numbers() {
    saved_model_matches_tensorflow("mlp");
}

#[test]
fn the_cnn_saved_model_train_step_gives_tensorflow_numbers() {
    saved_model_matches_tensorflow("cnn");
}

/// The SavedModel's `train_step` on XLA (the pinned PJRT CPU plugin): the
/// third step's loss and the trained variables are TensorFlow's.
fn saved_model_matches_tensorflow_on_pjrt(model: &str) {
    let want = expected(model);
    let saved = corpus(model).join("saved_model");
    let feeds = corpus(model).join("feeds.json");
    let plugin = support_pjrt::plugin_path();
    let dir = temp_dir(&format!("{model}-pjrt"));
    let out = run(&[
        "run",
        saved.to_str().unwrap(),
        "--function",
        "train_step",
        "--feeds",
        feeds.to_str().unwrap(),
        "--fetch",
        "identity:0",
        "--steps",
        "3",
        "--backend",
        "pjrt",
        "--pjrt-plugin",
        plugin.to_str().unwrap(),
        "--save-checkpoint",
        dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "run failed:\n{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let loss: f64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("identity:0 = "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no loss printed:\n{stdout}"));
    assert_close("last loss", &[loss], &[want["losses"][2].as_f64().unwrap()]);
    let entries = bundle::read_bundle(&dir.join("ckpt")).expect("the checkpoint reads back");
    for (name, v) in want["variables"].as_object().unwrap() {
        let entry = &entries[v["checkpoint_key"].as_str().unwrap()];
        compare(model)(name, &values(entry), &json_values(&v["final"]));
    }
}

#[test]
fn the_mlp_saved_model_train_step_gives_tensorflow_numbers_on_pjrt() {
    saved_model_matches_tensorflow_on_pjrt("mlp");
}

#[test]
fn the_cnn_saved_model_train_step_gives_tensorflow_numbers_on_pjrt() {
    saved_model_matches_tensorflow_on_pjrt("cnn");
}

fn concrete_graph_matches_tensorflow(model: &str) {
    let want = expected(model);
    let graph = corpus(model).join("concrete.pb");
    let feeds = corpus(model).join("concrete_feeds.json");
    let (losses, entries, _) = run_steps(
        &["run", graph.to_str().unwrap(), "--feeds", feeds.to_str().unwrap(), "--fetch", "Identity:0"],
        &format!("{model}-concrete"),
    );
    let tf_losses: Vec<f64> = want["losses"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    assert_close("losses", &losses, &tf_losses);
    // A graph has no object graph: the keys are the handles' names.
    for (placeholder, name) in want["concrete_names"].as_object().unwrap() {
        let entry = entries.get(placeholder).unwrap_or_else(|| panic!("no checkpoint entry {placeholder}"));
        compare(model)(
            name.as_str().unwrap(),
            &values(entry),
            &json_values(&want["variables"][name.as_str().unwrap()]["final"]),
        );
    }
}

#[test]
fn the_concrete_graph_with_a_feed_per_variable_gives_tensorflow_numbers() {
    concrete_graph_matches_tensorflow("mlp");
}

// A transformer block, an LSTM and keras-hub's GPT2Backbone (tiny, from its
// constructor): the SavedModel's train_step on both backends, and the
// concrete graph with a feed per variable, give TensorFlow's numbers.

#[test]
fn the_transformer_gives_tensorflow_numbers() {
    saved_model_matches_tensorflow("transformer");
    concrete_graph_matches_tensorflow("transformer");
}

#[test]
fn the_transformer_gives_tensorflow_numbers_on_pjrt() {
    saved_model_matches_tensorflow_on_pjrt("transformer");
}

#[test]
fn the_lstm_gives_tensorflow_numbers() {
    saved_model_matches_tensorflow("lstm");
    concrete_graph_matches_tensorflow("lstm");
}

#[test]
fn the_lstm_gives_tensorflow_numbers_on_pjrt() {
    saved_model_matches_tensorflow_on_pjrt("lstm");
}

#[test]
fn the_keras_hub_gpt2_backbone_gives_tensorflow_numbers() {
    saved_model_matches_tensorflow("gpt2");
    concrete_graph_matches_tensorflow("gpt2");
}

#[test]
fn the_keras_hub_gpt2_backbone_gives_tensorflow_numbers_on_pjrt() {
    saved_model_matches_tensorflow_on_pjrt("gpt2");
}

#[test]
fn a_fed_learning_rate_of_zero_keeps_the_weights() {
    let want = expected("mlp");
    let mut feeds: Value = serde_json::from_slice(&std::fs::read(corpus("mlp").join("feeds.json")).unwrap()).unwrap();
    feeds["adam/learning_rate"] = serde_json::json!(0.0);
    let dir = temp_dir("lr0-feeds");
    let file = dir.join("feeds.json");
    std::fs::write(&file, feeds.to_string()).unwrap();
    let saved = corpus("mlp").join("saved_model");
    let (losses, entries, _) = run_steps(
        &[
            "run",
            saved.to_str().unwrap(),
            "--function",
            "train_step",
            "--feeds",
            file.to_str().unwrap(),
            "--fetch",
            "identity:0",
        ],
        "mlp-lr0",
    );
    // No step moves the weights, so every step's loss is the first one's.
    let first = want["losses"][0].as_f64().unwrap();
    assert_close("losses", &losses, &[first, first, first]);
    let kernel = &want["variables"]["sequential/dense/kernel"];
    let entry = &entries[kernel["checkpoint_key"].as_str().unwrap()];
    assert_eq!(as_f32(&values(entry)), as_f32(&json_values(&kernel["initial"])));
    // The step counter still counts.
    let iteration = &want["variables"]["adam/iteration"];
    assert_eq!(values(&entries[iteration["checkpoint_key"].as_str().unwrap()]), vec![3.0]);
}

/// The TF venv's python: made by tests/tf/setup.sh when missing.
fn tf_python() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = root.join("tests/tf/.venv/bin/python");
    if !python.exists() {
        let status = std::process::Command::new("bash").arg(root.join("tests/tf/setup.sh")).status();
        assert!(
            status.is_ok_and(|s| s.success()),
            "this test needs TensorFlow 2.21: `bash tests/tf/setup.sh` (PyPI access) did not make tests/tf/.venv"
        );
    }
    python
}

#[test]
fn tensorflow_restores_the_saved_checkpoint_with_equal_values() {
    let saved = corpus("mlp").join("saved_model");
    let feeds = corpus("mlp").join("feeds.json");
    let (_, entries, dir) = run_steps(
        &["run", saved.to_str().unwrap(), "--function", "train_step", "--feeds", feeds.to_str().unwrap()],
        "mlp-restore",
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tf/restore_tf2.py");
    let out = std::process::Command::new(tf_python())
        .arg(script)
        .arg("mlp")
        .arg(dir.join("ckpt"))
        .output()
        .expect("python runs");
    assert!(out.status.success(), "TensorFlow could not restore:\n{}", String::from_utf8_lossy(&out.stderr));
    let restored: Value = serde_json::from_slice(&out.stdout).expect("the script prints JSON");
    let want = expected("mlp");
    for (name, v) in want["variables"].as_object().unwrap() {
        let ours = values(&entries[v["checkpoint_key"].as_str().unwrap()]);
        // Equal as f32: each value is exactly the one written.
        assert_eq!(as_f32(&json_values(&restored[name])), as_f32(&ours), "{name}");
    }
}

/// A copy of the MLP SavedModel to damage.
fn copy_saved_model(name: &str) -> PathBuf {
    let dir = temp_dir(name);
    let src = corpus("mlp").join("saved_model");
    std::fs::create_dir_all(dir.join("variables")).unwrap();
    std::fs::copy(src.join("saved_model.pb"), dir.join("saved_model.pb")).unwrap();
    for file in ["variables.index", "variables.data-00000-of-00001"] {
        std::fs::copy(src.join("variables").join(file), dir.join("variables").join(file)).unwrap();
    }
    dir
}

/// Checks the SavedModel at `dir` and returns the diagnostic.
fn check_fails(dir: &Path, code: &str) -> String {
    let out = run(&["check", dir.to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(code), "expected {code}:\n{err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn a_truncated_index_is_reported() {
    let dir = copy_saved_model("truncated-index");
    let index = dir.join("variables/variables.index");
    let bytes = std::fs::read(&index).unwrap();
    std::fs::write(&index, &bytes[..bytes.len() - 20]).unwrap();
    let err = check_fails(&dir, "tpu_rewrite::saved_model::index");
    assert!(err.contains("variables.index"), "{err}");
}

#[test]
fn a_missing_shard_is_reported() {
    let dir = copy_saved_model("missing-shard");
    std::fs::remove_file(dir.join("variables/variables.data-00000-of-00001")).unwrap();
    let err = check_fails(&dir, "tpu_rewrite::saved_model::shard");
    assert!(err.contains("is missing") && err.contains("variables.data-00000-of-00001"), "{err}");
}

#[test]
fn a_short_shard_is_reported() {
    let dir = copy_saved_model("short-shard");
    let shard = dir.join("variables/variables.data-00000-of-00001");
    let bytes = std::fs::read(&shard).unwrap();
    std::fs::write(&shard, &bytes[..bytes.len() / 2]).unwrap();
    let err = check_fails(&dir, "tpu_rewrite::saved_model::shard");
    assert!(err.contains(&format!("has {} bytes", bytes.len() / 2)), "{err}");
}

#[test]
fn a_bad_checksum_is_reported() {
    let dir = copy_saved_model("bad-checksum");
    let shard = dir.join("variables/variables.data-00000-of-00001");
    let mut bytes = std::fs::read(&shard).unwrap();
    bytes[100] ^= 0x10;
    std::fs::write(&shard, &bytes).unwrap();
    let err = check_fails(&dir, "tpu_rewrite::saved_model::checksum");
    assert!(err.contains("CRC32C"), "{err}");
}

#[test]
fn a_value_whose_shape_disagrees_with_the_graph_is_reported() {
    let dir = copy_saved_model("bad-shape");
    let prefix = dir.join("variables/variables");
    let mut entries = bundle::read_bundle(&prefix).unwrap();
    let key = expected("mlp")["variables"]["sequential/dense/kernel"]["checkpoint_key"].as_str().unwrap().to_string();
    let kernel = entries.get_mut(&key).unwrap();
    // [4, 8] stored as [8, 4]: the same bytes, the wrong shape.
    kernel.shape = vec![8, 4];
    let (index, data) = bundle::encode_bundle(&entries).unwrap();
    std::fs::write(bundle::index_path(&prefix), index).unwrap();
    std::fs::write(bundle::shard_path(&prefix, 0, 1), data).unwrap();
    let err = check_fails(&dir, "tpu_rewrite::saved_model::mismatch");
    assert!(err.contains("sequential/dense/kernel") && err.contains("f32[8, 4]") && err.contains("f32[4, 8]"), "{err}");
}

#[test]
fn an_unknown_function_lists_the_names() {
    let saved = corpus("mlp").join("saved_model");
    let out = run(&["run", saved.to_str().unwrap(), "--function", "nope"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("tpu_rewrite::saved_model::no_function"), "{err}");
    assert!(err.contains("train_step") && err.contains("serving_default (signature)"), "{err}");
}

#[test]
fn saved_model_pb_names_its_directory() {
    let pb = corpus("mlp").join("saved_model/saved_model.pb");
    let out = run(&["check", pb.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// TensorFlow's single-device numbers on the 4x global batch that
/// `--data-parallel 4` splits (`dp4_expected.json`).
fn expected_dp4(model: &str) -> Value {
    let text = std::fs::read(corpus(model).join("dp4_expected.json")).expect("dp4_expected.json: run corpus_tf2.py");
    serde_json::from_slice(&text).expect("dp4_expected.json parses")
}

/// `run MODEL/saved_model --function train_step --data-parallel 4` over the
/// 4x batch on `backend`: the last loss and the trained variables are
/// TensorFlow's for the global batch.
fn data_parallel_matches_tensorflow(model: &str, backend: &str) {
    let saved = corpus(model).join("saved_model");
    let feeds = corpus(model).join("dp4_feeds.json");
    let plugin = support_pjrt::plugin_path();
    let dir = temp_dir(&format!("{model}-dp4-{backend}"));
    let mut args = vec![
        "run",
        saved.to_str().unwrap(),
        "--function",
        "train_step",
        "--feeds",
        feeds.to_str().unwrap(),
        "--data-parallel",
        "4",
        "--fetch",
        "identity:0",
        "--steps",
        "3",
        "--save-checkpoint",
        dir.to_str().unwrap(),
        "--backend",
        backend,
    ];
    if backend == "pjrt" {
        args.extend(["--pjrt-plugin", plugin.to_str().unwrap()]);
    }
    let out = run(&args);
    let log = stderr(&out);
    assert!(out.status.success(), "run failed:\n{log}");
    assert!(log.contains("data parallel: 4 replicas; batch input(s) x, y"), "{log}");
    let sparse = matches!(model, "transformer" | "gpt2");
    assert_eq!(log.contains("1 sparse gradient(s) (indices and values) gathered"), sparse, "{log}");
    let want = expected_dp4(model);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let loss: f64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("identity:0 = "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no loss printed:\n{stdout}"));
    assert_close("last loss", &[loss], &[want["losses"][2].as_f64().unwrap()]);
    if backend == "sim" {
        let tf_losses: Vec<f64> = want["losses"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        assert_close("losses", &step_losses(&log), &tf_losses);
    }
    let keys = expected(model);
    let entries = bundle::read_bundle(&dir.join("ckpt")).expect("the checkpoint reads back");
    for (name, v) in want["variables"].as_object().unwrap() {
        let entry = &entries[keys["variables"][name]["checkpoint_key"].as_str().unwrap()];
        compare(model)(name, &values(entry), &json_values(v));
    }
}

#[test]
fn data_parallel_4_gives_tensorflow_global_batch_numbers() {
    data_parallel_matches_tensorflow("mlp", "sim");
}

#[test]
fn data_parallel_4_gives_tensorflow_global_batch_numbers_on_pjrt() {
    data_parallel_matches_tensorflow("mlp", "pjrt");
}

#[test]
fn data_parallel_4_on_the_lstm_gives_tensorflow_global_batch_numbers() {
    data_parallel_matches_tensorflow("lstm", "sim");
}

#[test]
fn data_parallel_4_on_the_lstm_gives_tensorflow_global_batch_numbers_on_pjrt() {
    data_parallel_matches_tensorflow("lstm", "pjrt");
}

// The transformer and GPT-2 steps hold an embedding lookup, whose gradient
// is sparse (an `IndexedSlices`): its indices and values are gathered from
// every replica, so Keras 3's Adam squares the global batch's slices.

#[test]
fn data_parallel_4_gathers_the_transformer_s_sparse_gradient() {
    data_parallel_matches_tensorflow("transformer", "sim");
}

#[test]
fn data_parallel_4_gathers_the_transformer_s_sparse_gradient_on_pjrt() {
    data_parallel_matches_tensorflow("transformer", "pjrt");
}

#[test]
fn data_parallel_4_gathers_the_gpt2_backbone_s_sparse_gradient() {
    data_parallel_matches_tensorflow("gpt2", "sim");
}

#[test]
fn data_parallel_4_gathers_the_gpt2_backbone_s_sparse_gradient_on_pjrt() {
    data_parallel_matches_tensorflow("gpt2", "pjrt");
}

#[test]
fn data_parallel_4_on_the_concrete_graph_gives_tensorflow_global_batch_numbers() {
    let want = expected_dp4("mlp");
    let names = expected("mlp");
    let mut feeds: Value =
        serde_json::from_slice(&std::fs::read(corpus("mlp").join("concrete_feeds.json")).unwrap()).unwrap();
    let global: Value = serde_json::from_slice(&std::fs::read(corpus("mlp").join("dp4_feeds.json")).unwrap()).unwrap();
    feeds["x"] = global["x"].clone();
    feeds["y"] = global["y"].clone();
    let dir = temp_dir("dp4-concrete-feeds");
    let file = dir.join("feeds.json");
    std::fs::write(&file, feeds.to_string()).unwrap();
    let graph = corpus("mlp").join("concrete.pb");
    let (losses, entries, _) = run_steps(
        &[
            "run",
            graph.to_str().unwrap(),
            "--feeds",
            file.to_str().unwrap(),
            "--data-parallel",
            "4",
            "--fetch",
            "Identity:0",
        ],
        "mlp-dp4-concrete",
    );
    let tf_losses: Vec<f64> = want["losses"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    assert_close("losses", &losses, &tf_losses);
    for (placeholder, name) in names["concrete_names"].as_object().unwrap() {
        let name = name.as_str().unwrap();
        assert_close(name, &values(&entries[placeholder]), &json_values(&want["variables"][name]));
    }
}

/// Runs `args` and returns the diagnostic of a refused data-parallel step.
fn refused(args: &[&str]) -> String {
    let out = run(args);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("tpu_rewrite::passes::data_parallel"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn data_parallel_refuses_batch_norm_in_training_mode() {
    let saved = corpus("cnn").join("saved_model");
    let feeds = corpus("cnn").join("dp4_feeds.json");
    let err = refused(&[
        "run",
        saved.to_str().unwrap(),
        "--function",
        "train_step",
        "--feeds",
        feeds.to_str().unwrap(),
        "--data-parallel",
        "4",
    ]);
    assert!(err.contains("batch_normalization_1/moments/mean") && err.contains("batch statistic"), "{err}");
}

/// A plain graph written to a temp file.
fn opg(name: &str, text: &str) -> PathBuf {
    let path = temp_dir(name).join("step.opg");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn data_parallel_refuses_a_loss_that_is_not_a_mean() {
    let path = opg(
        "dp-sum-loss",
        r#"graph @main {
  %x = Placeholder() {dtype = f32, shape = shape[2, 3]}
  %axes = Const() {dtype = i32, value = tensor(i32, [2]) [0, 1]}
  %loss = Sum(%x, %axes) {T = f32, keep_dims = false}
  %Identity = Identity(%loss) {T = f32}
}
"#,
    );
    let err = refused(&["run", path.to_str().unwrap(), "--data-parallel", "2", "--fetch", "Identity:0"]);
    assert!(err.contains("`loss` (`Sum`) depends on the batch and is not a mean over it"), "{err}");
}

#[test]
fn data_parallel_refuses_a_variable_written_from_per_replica_values() {
    let path = opg(
        "dp-diverging-write",
        r#"graph @main {
  %x = Placeholder() {dtype = f32, shape = shape[2]}
  %v = VarHandleOp() {container = "", dtype = f32, shape = shape[2], shared_name = ""}
  %update = AssignAddVariableOp(%v, %x) {dtype = f32}
}
"#,
    );
    let err = refused(&["run", path.to_str().unwrap(), "--data-parallel", "2", "--fetch", "^update"]);
    assert!(err.contains("`%update`") && err.contains("writes a variable from `x`"), "{err}");
}

#[test]
fn data_parallel_refuses_indices_without_values() {
    // An integer gradient is the indices of a sparse gradient; here no op
    // reads it with float gradient values, so there is nothing to gather.
    let path = opg(
        "dp-lone-indices",
        r#"graph @main {
  %ids = Placeholder() {dtype = i32, shape = shape[2]}
  %v = VarHandleOp() {container = "", dtype = f32, shape = shape[4], shared_name = ""}
  %gradient_tape/indices = Identity(%ids) {T = i32}
  %ones = Const() {dtype = f32, value = tensor(f32, [2]) [1.0, 1.0]}
  %rows = Const() {dtype = i32, value = tensor(i32, []) [4]}
  %counts = UnsortedSegmentSum(%ones, %gradient_tape/indices, %rows) {T = f32, Tindices = i32, Tnumsegments = i32}
  %update = AssignAddVariableOp(%v, %counts) {dtype = f32}
}
"#,
    );
    let err = refused(&["run", path.to_str().unwrap(), "--data-parallel", "2", "--fetch", "^update"]);
    // The message as one line (the report wraps it).
    let flat = err.split_whitespace().filter(|w| *w != "│").collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("`%gradient_tape/indices`") && flat.contains("no op reads it with float gradient values"),
        "{err}"
    );
}

/// `lower --data-parallel 4 --fetch identity:0` lowers the LSTM step: the
/// fetch prunes the step to its loss, where without it the step's dangling
/// intermediate outputs are outputs too, and data parallelism refuses them
/// (they are not means over the batch).
#[test]
fn lower_data_parallel_with_a_fetch_lowers_the_lstm_step() {
    let saved = corpus("lstm").join("saved_model");
    let saved = saved.to_str().unwrap();
    let base = ["lower", saved, "--function", "train_step", "--data-parallel", "4", "--format", "stablehlo"];
    let err = refused(&base);
    assert!(err.contains("is not a mean over it"), "{err}");

    let file = temp_dir("lstm-dp4-lower").join("step.mlir");
    let mut args = base.to_vec();
    args.extend(["--fetch", "identity:0", "-o", file.to_str().unwrap()]);
    let out = run(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("mhlo.num_replicas = 4") && text.contains("stablehlo.all_reduce"), "{text}");
    // The results: the loss (averaged over the replicas), then the variables.
    let sidecar: Value = serde_json::from_slice(&std::fs::read(file.with_extension("mlir.json")).unwrap()).unwrap();
    let results = sidecar["modules"][0]["results"].as_array().unwrap();
    let outputs: Vec<&str> =
        results.iter().filter(|r| r["kind"] == "output").filter_map(|r| r["name"].as_str()).collect();
    assert_eq!(outputs, ["identity/data_parallel/mean:0"], "{sidecar}");
    let trainable = expected("lstm")["variables"].as_object().unwrap().len();
    assert_eq!(results.len(), 1 + trainable, "{sidecar}");

    // The simulator's programs lower alike; an unknown fetch is named.
    let out = run(&["lower", saved, "--function", "train_step", "--data-parallel", "4", "--fetch", "identity:0"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("CollectiveAllReduce"));
    let out = run(&["lower", saved, "--function", "train_step", "--data-parallel", "4", "--fetch", "identiti:0"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("did you mean `identity:0`?"), "{}", stderr(&out));
}

/// The transformer's sparse embedding gradient lowers to an all-gather of
/// its indices and values: `CollectiveAllGather` in the simulator's program,
/// `stablehlo.all_gather` for XLA (4 replicas' 24 rows each).
#[test]
fn the_sparse_gradient_lowers_to_an_all_gather() {
    let saved = corpus("transformer").join("saved_model");
    let saved = saved.to_str().unwrap();
    let args = ["lower", saved, "--function", "train_step", "--data-parallel", "4", "--fetch", "identity:0"];
    let out = run(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let program = String::from_utf8_lossy(&out.stdout);
    assert_eq!(program.matches("= CollectiveAllGather(").count(), 2, "{program}");
    let mut args = args.to_vec();
    args.extend(["--format", "stablehlo"]);
    let out = run(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let module = String::from_utf8_lossy(&out.stdout);
    let gathers: Vec<&str> = module.lines().filter(|l| l.contains("\"stablehlo.all_gather\"")).collect();
    assert_eq!(gathers.len(), 2, "{module}");
    assert!(gathers.iter().any(|l| l.ends_with("(tensor<24xi32>) -> tensor<96xi32>")), "{gathers:?}");
    assert!(gathers.iter().any(|l| l.ends_with("(tensor<24x8xf32>) -> tensor<96x8xf32>")), "{gathers:?}");
}

#[test]
fn the_serving_signature_lowers_to_stablehlo() {
    let saved = corpus("mlp").join("saved_model");
    let out = run(&["lower", saved.to_str().unwrap(), "--format", "stablehlo"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("func.func"));
}
