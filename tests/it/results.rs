//! Results a user can read and keep (issue 28): outputs named by the
//! tensors the user knows, the default results of a plain graph, trained
//! variables in `--json` and `--npy-dir` and by `--fetch`, a plain graph's
//! initialisers run once, the StableHLO signature and its sidecar JSON,
//! lowering without side effects, quiet XLA logging, and every example
//! running with no flag. Expected numbers come from TensorFlow
//! (`tests/tf/make_corpus.py`, outputs in `tests/tf/corpus/`).

use crate::support::cli;
use crate::support::pjrt;

use std::path::Path;

use cli::{example, run, stderr};
use serde_json::Value;

fn root(path: &str) -> String {
    format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))
}

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Runs `args`, which must succeed, and parses standard output as JSON.
fn run_json(args: &[&str]) -> (Value, String) {
    let o = run(args);
    assert!(o.status.success(), "{args:?} failed:\n{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)));
    (v, stderr(&o))
}

/// The numbers of a nested JSON array, flattened.
fn flat(v: &Value) -> Vec<f64> {
    match v {
        Value::Array(items) => items.iter().flat_map(flat).collect(),
        Value::Number(n) => vec![n.as_f64().expect("a number")],
        Value::Bool(b) => vec![f64::from(u8::from(*b))],
        other => panic!("not a number: {other}"),
    }
}

fn assert_close(what: &str, got: &[f64], want: &[f64], rtol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: {} values, TensorFlow has {}", got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= rtol * w.abs().max(1.0), "{what}[{i}]: {g}, TensorFlow gives {w}");
    }
}

/// The TensorFlow corpus case `name`: its JSON description.
fn corpus(name: &str) -> Value {
    let text = std::fs::read_to_string(root(&format!("tests/tf/corpus/{name}.json"))).expect("corpus case");
    serde_json::from_str(&text).expect("corpus JSON")
}

/// The variable `name` of a `--json` result.
fn variable<'v>(json: &'v Value, name: &str) -> &'v Value {
    json["variables"]
        .as_array()
        .expect("variables")
        .iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("no variable {name} in {json}"))
}

#[test]
fn every_example_runs_with_no_flag() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).expect("examples/") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "opg") {
            continue;
        }
        count += 1;
        let o = run(&["run", path.to_str().expect("utf-8 path")]);
        assert!(o.status.success(), "{} failed:\n{}", path.display(), stderr(&o));
        let text = stdout(&o);
        let outputs: Vec<&str> = text.lines().filter(|l| l.starts_with("output ")).collect();
        assert!(!outputs.is_empty(), "{}: no output\n{text}", path.display());
        for line in outputs {
            // `output <tensor>:<k> ...`: named by a tensor, not by a number.
            let name = line.split_whitespace().nth(1).expect("a name");
            assert!(name.contains(':') && name.parse::<u32>().is_err(), "{}: {line}", path.display());
        }
    }
    assert!(count >= 6, "expected the six bundled examples, found {count}");
}

#[test]
fn outputs_and_the_step_log_name_the_tensors_the_user_knows() {
    let o = run(&["run", &example("mlp_train.opg"), "--steps", "3", "--log-every", "1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("output loss:0 replica 0 = "), "{text}");
    assert!(text.contains("output loss:0 replica 7 = "), "{text}");
    assert!(!text.contains("output 0 "), "{text}");
    let log = stderr(&o);
    assert!(log.contains("step      1: loss:0 (replica 0) = "), "{log}");
    assert!(!log.contains("output_0_shard_0"), "{log}");
}

#[test]
fn json_and_npy_dir_keep_every_variable_whole() {
    let dir = tempfile::tempdir().expect("temp dir");
    let npy = dir.path().join("out");
    let (json, _) =
        run_json(&["run", &example("mlp_train.opg"), "--steps", "2", "--json", "--npy-dir", npy.to_str().unwrap()]);
    for (name, shape) in [("w1", vec![3, 8]), ("b1", vec![8]), ("w2", vec![8, 1])] {
        let v = variable(&json, name);
        assert_eq!(v["dtype"], "f32", "{v}");
        assert_eq!(v["shape"], serde_json::json!(shape), "{v}");
        // The mirrored copies agree, so there is one value, whole.
        let values = flat(&v["value"]);
        assert_eq!(values.len(), shape.iter().product::<usize>(), "{v}");
        let file = npy.join("variables").join(format!("{name}.npy"));
        let t = tpu_rewrite::exec::read_npy_file(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert_eq!(t.shape(), shape.as_slice());
        // JSON prints each f32 in its shortest form: compare as f32.
        let from_json: Vec<f32> = values.iter().map(|&v| v as f32).collect();
        assert_eq!(t.to_vec::<f32>().expect("f32"), from_json, "{name}: the .npy file and --json differ");
    }
    // The outputs are written under the names the user knows.
    assert!(npy.join("loss_0_replica_0.npy").is_file(), "{:?}", std::fs::read_dir(&npy).unwrap().collect::<Vec<_>>());
    // Fetching a variable's handle gives its value, not `<resource>`.
    let (fetched, _) = run_json(&["run", &example("mlp_train.opg"), "--steps", "2", "--json", "--fetch", "w1:0"]);
    let out = &fetched["outputs"][0];
    assert_eq!(out["name"], "w1:0", "{fetched}");
    assert_eq!(out["dtype"], "f32", "{fetched}");
    assert_eq!(flat(&out["value"]), flat(&variable(&json, "w1")["value"]), "{fetched}");
}

#[test]
fn a_plain_graph_runs_its_initialisers_once_before_the_first_step() {
    // TensorFlow ran `init` once, then `train` twice, then read every variable.
    let case = corpus("optimizers");
    let reads = &case["runs"][3]["fetches"];
    let rtol = case["rtol"].as_f64().unwrap_or(1e-4);
    let graph = root("tests/tf/corpus/optimizers.pbtxt");
    let (json, log) = run_json(&["run", &graph, "--fetch", "^train", "--steps", "2", "--json"]);
    assert!(log.contains("set by the graph's initialisers once, before the first step"), "{log}");
    assert!(log.contains("--no-initializers"), "{log}");
    let mut checked = 0;
    for (tensor, want) in reads.as_object().expect("fetches") {
        let name = tensor.trim_start_matches("read_").trim_end_matches(":0");
        assert_close(name, &flat(&variable(&json, name)["value"]), &flat(&want["values"]), rtol);
        checked += 1;
    }
    assert_eq!(checked, 23);
    // `--fetch NAME:0` of a variable handle gives the same values.
    let (fetched, _) = run_json(&["run", &graph, "--fetch", "^train", "--fetch", "adam_w:0", "--steps", "2", "--json"]);
    assert_close("adam_w:0", &flat(&fetched["outputs"][0]["value"]), &flat(&reads["read_adam_w:0"]["values"]), rtol);
    // Turned off, the variables start as zeros, and the run says so.
    let (zeros, log) = run_json(&["run", &graph, "--fetch", "^train", "--no-initializers", "--json"]);
    assert!(log.contains("they start as zeros"), "{log}");
    let sgd = flat(&variable(&zeros, "sgd")["value"]);
    let want = flat(&reads["read_sgd:0"]["values"]);
    assert!(sgd.iter().zip(&want).any(|(g, w)| (g - w).abs() > 1e-3), "without initialisers sgd still matches");
}

#[test]
fn a_plain_graph_fetch_runs_the_initialisers_it_needs() {
    // `lookup_out` reads the table that `init` fills; no `^init` is asked for.
    let case = corpus("embeddings");
    let want = &case["runs"][1]["fetches"]["lookup_out:0"];
    let dir = tempfile::tempdir().expect("temp dir");
    let feeds = dir.path().join("feeds.json");
    std::fs::write(&feeds, r#"{"ids:0": [1, 4, 1, 5, 0]}"#).expect("writes");
    let graph = root("tests/tf/corpus/embeddings.pbtxt");
    let args = ["run", &graph, "--feeds", feeds.to_str().unwrap(), "--fetch", "lookup_out:0", "--json"];
    let (json, log) = run_json(&args);
    assert!(log.contains("table"), "{log}");
    assert_close("lookup_out:0", &flat(&json["outputs"][0]["value"]), &flat(&want["values"]), 1e-6);
}

#[test]
fn a_plain_graph_without_fetches_gives_its_results_not_internal_tensors() {
    let case = corpus("embeddings");
    let dir = tempfile::tempdir().expect("temp dir");
    let feeds = dir.path().join("feeds.json");
    // Any values: only the names of the results are checked here.
    std::fs::write(
        &feeds,
        r#"{"ids:0": [1, 4, 1, 5, 0], "x:0": [[1,2,3],[4,5,6],[7,8,9],[1,0,1],[0,1,0],[2,2,2]],
            "nd:0": [[0, 1], [5, 2], [3, 0], [0, 1]]}"#,
    )
    .expect("writes");
    let graph = root("tests/tf/corpus/embeddings.pbtxt");
    let (json, log) = run_json(&["run", &graph, "--feeds", feeds.to_str().unwrap(), "--json"]);
    let names: Vec<&str> =
        json["outputs"].as_array().expect("outputs").iter().map(|o| o["name"].as_str().expect("a name")).collect();
    for internal in &names {
        assert!(!internal.starts_with("gradients/") && !internal.contains("/Read"), "{names:?}");
    }
    // The results TensorFlow's script asked for that nothing else reads, and the loss.
    let asked = case["runs"][1]["fetches"].as_object().expect("fetches");
    for result in ["lookup_out:0", "grad_table:0", "grad_x:0", "tsu:0", "add_1:0"] {
        assert!(result == "add_1:0" || asked.contains_key(result), "{result} is not one of TensorFlow's results");
        assert!(names.contains(&result), "{result} missing from {names:?}");
    }
    assert!(log.contains("results (nothing fetched by name): the graph's sinks"), "{log}");
}

/// A plain step whose ops read `y` before `x` and `b` before `w`.
const PLAIN_STEP: &str = r#"graph @main {
  %x = Placeholder() {dtype = f32, shape = shape[4, 3]}
  %y = Placeholder() {dtype = f32, shape = shape[4, 1]}
  %w = VarHandleOp() {dtype = f32, shape = shape[3, 1], shared_name = "w"}
  %b = VarHandleOp() {dtype = f32, shape = shape[1], shared_name = "b"}
  %b_read = ReadVariableOp(%b) {dtype = f32}
  %ny = Neg(%y) {T = f32}
  %shifted = AddV2(%ny, %b_read) {T = f32}
  %w_read = ReadVariableOp(%w) {dtype = f32}
  %pred = MatMul(%x, %w_read) {T = f32}
  %err = AddV2(%pred, %shifted) {T = f32}
  %sq = Square(%err) {T = f32}
  %axes = Const() {dtype = i32, value = tensor(i32, [2]) [0, 1]}
  %loss = Mean(%sq, %axes) {T = f32, keep_dims = false}
}
"#;

#[test]
fn stablehlo_keeps_the_placeholder_order_and_writes_a_sidecar() {
    let dir = tempfile::tempdir().expect("temp dir");
    let graph = dir.path().join("step.opg");
    std::fs::write(&graph, PLAIN_STEP).expect("writes");
    let mlir = dir.path().join("step.mlir");
    let o = run(&["lower", "--format", "stablehlo", graph.to_str().unwrap(), "-o", mlir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&mlir).expect("the module");
    let main = text.lines().find(|l| l.contains("func.func public @main")).expect("@main");
    let order: Vec<&str> = main.split("tpu_rewrite.name = \"").skip(1).map(|s| s.split('"').next().unwrap()).collect();
    assert_eq!(order[..4], ["x:0", "y:0", "w", "b"], "{main}");
    let sidecar: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("step.mlir.json")).expect("step.mlir.json"))
            .expect("JSON");
    let module = &sidecar["modules"][0];
    let args = module["arguments"].as_array().expect("arguments");
    let described: Vec<(&str, &str)> =
        args.iter().map(|a| (a["name"].as_str().unwrap(), a["kind"].as_str().unwrap())).collect();
    assert_eq!(described, [("x:0", "feed"), ("y:0", "feed"), ("w", "variable"), ("b", "variable")]);
    assert_eq!(args[0]["shape"], serde_json::json!([4, 3]));
    assert_eq!(args[0]["dtype"], "f32");
    assert_eq!(args[2]["shape"], serde_json::json!([3, 1]));
    let results = module["results"].as_array().expect("results");
    assert_eq!(results[0]["name"], "loss:0", "{module}");
    assert_eq!(results[0]["kind"], "output");
    assert_eq!(results[0]["shape"], serde_json::json!([]));
    // Each variable's result comes from its argument (aliased).
    let w = results.iter().find(|r| r["name"] == "w").expect("w's result");
    assert_eq!((w["kind"].as_str(), w["alias"].as_u64()), (Some("variable"), Some(2)));
    assert_eq!(args[2]["alias"].as_u64().map(|i| &results[i as usize]["name"]), Some(&Value::from("w")));
    // The attribute names the same tensors.
    assert!(main.contains("tpu_rewrite.name = \"loss:0\""), "{main}");
}

#[test]
fn lowering_a_host_print_prints_nothing() {
    // The example's Print says `h = ...` when it runs ...
    let ran = run(&["run", &example("outside_compilation.opg")]);
    assert!(ran.status.success(), "{}", stderr(&ran));
    assert!(stderr(&ran).contains("h = "), "{}", stderr(&ran));
    // ... and nothing when it is only compiled.
    for format in ["stablehlo", "text"] {
        let o = run(&["lower", "--format", format, &example("outside_compilation.opg")]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(!stderr(&o).contains("h = "), "lower --format {format} printed:\n{}", stderr(&o));
    }
}

#[test]
fn xla_logging_is_quiet_unless_verbose() {
    let plugin = pjrt::plugin_path();
    let args = ["run", &example("tf_tagged.opg"), "--backend", "pjrt", "--pjrt-plugin", plugin.to_str().unwrap()];
    let quiet = cli::bin().args(args).env_remove("TF_CPP_MIN_LOG_LEVEL").output().expect("runs");
    assert!(quiet.status.success(), "{}", stderr(&quiet));
    let log = stderr(&quiet);
    assert!(!log.contains("cpu_device_count") && !log.contains("absl::InitializeLog"), "{log}");
    let verbose = cli::bin().args(args).arg("-v").env_remove("TF_CPP_MIN_LOG_LEVEL").output().expect("runs");
    assert!(verbose.status.success(), "{}", stderr(&verbose));
    assert!(stderr(&verbose).contains("cpu_device_count"), "-v hides the plugin's log:\n{}", stderr(&verbose));
    assert_eq!(stdout(&quiet), stdout(&verbose));
}

#[test]
fn a_feed_that_names_no_tensor_is_refused_on_both_backends() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let feeds = dir.path().join("feeds.json");
    std::fs::write(&feeds, r#"{"nosuch:0": [1.0, 2.0]}"#).expect("writes the feeds");
    let plugin = pjrt::plugin_path();
    for (backend, code) in [
        (vec!["--backend", "sim"], "exec::unknown_tensor"),
        (vec!["--backend", "pjrt", "--pjrt-plugin", plugin.to_str().unwrap()], "xla::unknown_feed"),
    ] {
        let mut args = vec!["run", "examples/mlp_train.opg", "--feeds", feeds.to_str().unwrap()];
        args.extend(backend.iter().copied());
        let o = cli::bin().args(&args).current_dir(env!("CARGO_MANIFEST_DIR")).output().expect("runs");
        assert_eq!(o.status.code(), Some(1), "{backend:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(err.contains(code) && err.contains("nosuch"), "{backend:?}:\n{err}");
        assert!(stdout(&o).is_empty(), "{backend:?} ran the step:\n{}", stdout(&o));
    }
}

#[test]
fn variable_shape_of_a_bare_handle_runs_on_both_backends() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let feeds = dir.path().join("feeds.json");
    std::fs::write(&feeds, r#"{"x0:0": [1.0, 1.0], "x1:0": [2.0, 2.0]}"#).expect("writes the feeds");
    let graph = root("tests/data/graphs/variable_shape_in_cluster.opg");
    let plugin = pjrt::plugin_path();
    let mut outputs = Vec::new();
    for backend in [vec!["--backend", "sim"], vec!["--backend", "pjrt", "--pjrt-plugin", plugin.to_str().unwrap()]] {
        let mut args = vec!["run", graph.as_str(), "--feeds", feeds.to_str().unwrap(), "--json"];
        args.extend(backend.iter().copied());
        let (doc, _) = run_json(&args);
        outputs.push(doc["outputs"].clone());
    }
    // The shape [3, 2] is added to each replica's input.
    let sim = &outputs[0];
    assert_eq!(flat(&sim[0]["per_replica"]), [4.0, 3.0, 5.0, 4.0], "{sim}");
    assert_eq!(sim, &outputs[1], "the simulator and PJRT differ");
}
