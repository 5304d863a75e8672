//! A TensorFlow transformer training step, per-step time on the simulator
//! against TensorFlow's own on the same machine, in one run.
//!
//! `cargo bench --bench tf_step [-- --layers L --steps N]`. The TF side is
//! `benches/tf_step.py`, run with `$TF_PYTHON` (default: the venv that
//! `tests/tf/setup.sh` makes, created when missing): it builds the step in
//! TensorFlow 2.21, times `session.run(train_op)` and writes the GraphDef.
//! This side imports that GraphDef, runs the same initialiser and steps on
//! the simulator (`@main`, variables persisting across steps), checks the
//! loss after the steps against TensorFlow's to 1e-3, and prints both
//! median per-step times and their ratio.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde_json::Value;
use tpu_rewrite::exec::{Feeds, Fetch, Mesh, MeshConfig, Tensor};
use tpu_rewrite::tf::{import_graphdef, GraphDefFormat};

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().unwrap_or_else(|_| panic!("{name} takes a number, got {v}")))
        .unwrap_or(default)
}

/// The python with TensorFlow 2.21: `$TF_PYTHON`, else the project's venv (made when missing).
fn tf_python(root: &Path) -> PathBuf {
    if let Some(p) = std::env::var_os("TF_PYTHON") {
        return PathBuf::from(p);
    }
    let python = root.join("tests/tf/.venv/bin/python");
    if !python.exists() {
        let status = Command::new("bash").arg(root.join("tests/tf/setup.sh")).status().expect("bash runs");
        assert!(status.success(), "tests/tf/setup.sh failed: it installs tensorflow-cpu==2.21.0 from PyPI");
    }
    python
}

fn tensor_of(v: &Value) -> Tensor {
    let shape: Vec<usize> =
        v["shape"].as_array().expect("shape").iter().map(|d| d.as_u64().expect("dim") as usize).collect();
    assert_eq!(v["dtype"], "float32", "the step feeds f32");
    let values = v["values"].as_array().expect("values").iter().map(|x| x.as_f64().expect("a number") as f32).collect();
    Tensor::from_vec(&shape, values).expect("values fill the shape")
}

fn median_ms(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2] * 1e3
}

fn main() {
    let layers = arg("--layers", 4);
    let steps = arg("--steps", 50);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().expect("a temporary directory");
    let status = Command::new(tf_python(root))
        .arg(root.join("benches/tf_step.py"))
        .arg(dir.path())
        .args(["--layers", &layers.to_string(), "--steps", &steps.to_string()])
        .status()
        .expect("python runs");
    assert!(status.success(), "benches/tf_step.py failed");
    let meta: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("step.json")).expect("step.json")).expect("JSON");
    let bytes = std::fs::read(dir.path().join("step.pb")).expect("step.pb");
    let (module, problems) = import_graphdef(&bytes, GraphDefFormat::Binary).expect("the step imports");
    assert!(problems.is_empty(), "import problems: {problems:?}");
    let mesh = Mesh::new(&module, MeshConfig::default()).unwrap_or_else(|e| panic!("no mesh: {e}"));

    let mut feeds = Feeds::new();
    for (name, value) in meta["feeds"].as_object().expect("feeds") {
        feeds.insert("main", name.clone(), tensor_of(value));
    }
    let op = |key: &str| Fetch::new("main", format!("^{}", meta[key].as_str().expect("an op name")));
    let run = |targets: &[Fetch], fetches: &[Fetch]| {
        mesh.run_step_with_targets(&feeds, fetches, targets).unwrap_or_else(|e| panic!("the step failed: {e}"))
    };
    // Warm up as the TF side does, then start again from the initial values.
    run(&[op("init")], &[]);
    for _ in 0..5 {
        run(&[op("train")], &[]);
    }
    run(&[op("init")], &[]);
    let mut times = Vec::with_capacity(steps);
    for _ in 0..steps {
        let start = Instant::now();
        run(&[op("train")], &[]);
        times.push(start.elapsed().as_secs_f64());
    }
    let loss = run(&[], &[Fetch::new("main", meta["loss"].as_str().expect("loss"))]);
    let ours = loss[0].to_vec::<f32>().expect("an f32 loss")[0];
    let theirs = meta["loss_after"]["values"][0].as_f64().expect("TF's loss") as f32;
    assert!(
        (ours - theirs).abs() <= 1e-3 * theirs.abs().max(1.0),
        "loss after {steps} steps: simulator {ours}, TensorFlow {theirs}"
    );

    let sim = median_ms(times);
    let tf = meta["tf_step_ms"].as_f64().expect("tf_step_ms");
    println!(
        "transformer step, {layers} layers, {} nodes: TensorFlow {tf:.3} ms, simulator {sim:.3} ms per step \
         ({:.2}x TF; goal <= 1.5x); loss after {steps} steps {ours} (TF {theirs})",
        meta["nodes"],
        sim / tf
    );
}
