//! `run --backend pjrt` from the command line: the same printed result as
//! the simulator, plugin discovery, and clear errors.

use crate::support::pjrt as support;

use std::process::Command;

fn run(args: &[&str], plugin_env: Option<&str>) -> (bool, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tpu-rewrite"));
    command.arg("run").args(args);
    command.env_remove("TPU_REWRITE_PJRT_PLUGIN");
    if let Some(p) = plugin_env {
        command.env("TPU_REWRITE_PJRT_PLUGIN", p);
    }
    let out = command.output().expect("the binary runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn pjrt_prints_what_the_simulator_prints_for_the_mlp() {
    let plugin = support::plugin_path();
    let (ok, sim, err) = run(&["examples/mlp_train.opg", "--steps", "2"], None);
    assert!(ok, "{err}");
    let (ok, pjrt, err) = run(&["examples/mlp_train.opg", "--steps", "2", "--backend", "pjrt"], plugin.to_str());
    assert!(ok, "{err}");
    let lines = |s: &str| s.lines().map(|l| l.split(" = ").next().unwrap_or("").to_string()).collect::<Vec<_>>();
    assert_eq!(lines(&sim), lines(&pjrt), "the same outputs and variables, in the same order");
    assert!(pjrt.contains("variable w1 = "), "{pjrt}");
    // The plugin's info log lines are filtered out of stderr.
    assert!(!err.contains("cpu_device_count set via create_options"), "{err}");
}

#[test]
fn the_flag_beats_the_environment() {
    let plugin = support::plugin_path();
    let (ok, _, err) = run(
        &["examples/mlp_train.opg", "--backend", "pjrt", "--pjrt-plugin", "/nonexistent/plugin.so"],
        plugin.to_str(),
    );
    assert!(!ok);
    assert!(err.contains("tpu_rewrite::xla::plugin_not_found"), "{err}");
}

#[test]
fn a_bad_plugin_path_in_the_environment_is_reported() {
    let (ok, _, err) = run(&["examples/mlp_train.opg", "--backend", "pjrt"], Some("/nonexistent/libtpu.so"));
    assert!(!ok);
    assert!(err.contains("/nonexistent/libtpu.so"), "{err}");
}

#[test]
fn an_unfed_placeholder_is_a_diagnostic() {
    let plugin = support::plugin_path();
    // A copy away from the example's sample feeds (`tf_tagged.feeds.json`).
    let dir = tempfile::tempdir().unwrap();
    let graph = dir.path().join("tf_tagged.opg");
    std::fs::copy("examples/tf_tagged.opg", &graph).unwrap();
    let (ok, _, err) = run(&[graph.to_str().unwrap(), "--backend", "pjrt"], plugin.to_str());
    assert!(!ok);
    // Feeds are checked against their placeholders before any backend runs.
    assert!(err.contains("tpu_rewrite::exec::missing_feed") && err.contains("not fed"), "{err}");
}

/// The numbers of `output I replica R = V` lines, by their name.
fn printed(text: &str) -> Vec<(String, Vec<f64>)> {
    text.lines()
        .filter(|l| l.starts_with("output ") || l.starts_with("variable "))
        .filter_map(|l| l.split_once(" = "))
        .map(|(name, v)| {
            let nums = v.trim_matches(|c| c == '[' || c == ']').split(',').map(|x| x.trim().parse().unwrap()).collect();
            (name.to_string(), nums)
        })
        .collect()
}

#[test]
fn outside_compilation_runs_through_the_host_callback_from_the_cli() {
    let plugin = support::plugin_path();
    let dir = tempfile::tempdir().unwrap();
    let feeds = dir.path().join("feeds.json");
    std::fs::write(&feeds, r#"{"x0:0": [0.1, -0.5, 0.9], "x1:0": [0.3, 0.2, -1.2]}"#).unwrap();
    let feeds = feeds.to_str().unwrap();
    let base = ["examples/second_order.opg", "--steps", "2", "--steps-per-run", "3", "--feeds", feeds];
    let (ok, sim, err) = run(&base, None);
    assert!(ok, "{err}");
    let with = |extra: &[&str]| {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        let (ok, out, err) = run(&args, plugin.to_str());
        assert!(ok, "{err}");
        out
    };
    for pjrt in [with(&["--backend", "pjrt"]), with(&["--backend", "pjrt", "--host-transfer", "stages"])] {
        let (want, got) = (printed(&sim), printed(&pjrt));
        assert_eq!(want.len(), 6, "{sim}");
        assert_eq!(want.iter().map(|w| &w.0).collect::<Vec<_>>(), got.iter().map(|g| &g.0).collect::<Vec<_>>());
        for ((name, w), (_, g)) in want.iter().zip(&got) {
            for (a, b) in g.iter().zip(w) {
                assert!((a - b).abs() <= 1e-5 + 1e-4 * b.abs(), "{name}: pjrt {a} vs sim {b}");
            }
        }
    }
    // send/recv is the TPU/GPU form: this backend refuses to run it, by code.
    let args: Vec<&str> = base.iter().chain(&["--backend", "pjrt", "--host-transfer", "send-recv"]).copied().collect();
    let (ok, _, err) = run(&args, plugin.to_str());
    assert!(!ok && err.contains("tpu_rewrite::xla::send_recv_run"), "{err}");
}

#[test]
fn fetch_takes_the_device_results_and_refuses_targets() {
    let plugin = support::plugin_path();
    let base = ["examples/mlp_train.opg", "--steps", "2", "--fetch", "output_0_shard_1:0"];
    let (ok, sim, err) = run(&base, None);
    assert!(ok, "{err}");
    let args: Vec<&str> = base.iter().chain(&["--backend", "pjrt"]).copied().collect();
    let (ok, pjrt, err) = run(&args, plugin.to_str());
    assert!(ok, "{err}");
    let value = |text: &str| -> f64 {
        let line = text.lines().find(|l| l.starts_with("output_0_shard_1:0 = ")).unwrap_or_else(|| panic!("{text}"));
        line.split(" = ").nth(1).unwrap().parse().unwrap()
    };
    let (a, b) = (value(&pjrt), value(&sim));
    assert!((a - b).abs() <= 1e-5 + 1e-4 * b.abs(), "pjrt {a} vs sim {b}");
    // A target is not a device result.
    let (ok, _, err) = run(&["examples/mlp_train.opg", "--backend", "pjrt", "--fetch", "^w1_init"], plugin.to_str());
    assert!(!ok && err.contains("tpu_rewrite::xla::not_fetchable") && err.contains("output_0_shard_0:0"), "{err}");
}

#[test]
fn pure_host_ops_after_the_step_are_fetched_and_variable_reads_refused() {
    let plugin = support::plugin_path();
    let dir = tempfile::tempdir().unwrap();
    let feeds = dir.path().join("feeds.json");
    std::fs::write(&feeds, r#"{"x0:0": [1.0, -2.0], "x1:0": [3.0, 4.0]}"#).unwrap();
    let feeds = feeds.to_str().unwrap();
    let base = [
        "tests/fixtures/host_after_step.opg",
        "--topology",
        "1x2",
        "--steps",
        "2",
        "--feeds",
        feeds,
        "--fetch",
        "total:0",
    ];
    let (ok, sim, err) = run(&base, None);
    assert!(ok, "{err}");
    let args: Vec<&str> = base.iter().chain(&["--backend", "pjrt"]).copied().collect();
    let (ok, pjrt, err) = run(&args, plugin.to_str());
    assert!(ok, "{err}");
    let last = |text: &str| text.lines().find(|l| l.starts_with("total:0 = ")).map(str::to_string);
    // relu([1, -2]) + relu([3, 4]) on the host, after the device step.
    assert_eq!(last(&sim).as_deref(), Some("total:0 = [4.0,4.0]"), "{sim}");
    assert_eq!(last(&pjrt), last(&sim), "{pjrt}");
    let args = ["tests/fixtures/host_after_step.opg", "--topology", "1x2", "--feeds", feeds];
    let args: Vec<&str> = args.iter().chain(&["--backend", "pjrt", "--fetch", "w_host:0"]).copied().collect();
    let (ok, _, err) = run(&args, plugin.to_str());
    assert!(!ok && err.contains("tpu_rewrite::xla::host_after_step") && err.contains("w_host"), "{err}");
}

/// The values of a nested JSON array, flattened.
fn flat(v: &serde_json::Value, out: &mut Vec<f64>) {
    match v {
        serde_json::Value::Array(items) => items.iter().for_each(|i| flat(i, out)),
        other => out.push(other.as_f64().unwrap_or_else(|| panic!("not a number: {other}"))),
    }
}

/// Nests flat corpus values into the feed JSON's arrays of `shape`.
fn nest(values: &[serde_json::Value], shape: &[usize]) -> serde_json::Value {
    match shape {
        [] => values[0].clone(),
        [_] => serde_json::Value::Array(values.to_vec()),
        [n, rest @ ..] => {
            let step = values.len() / n;
            serde_json::Value::Array((0..*n).map(|i| nest(&values[i * step..(i + 1) * step], rest)).collect())
        }
    }
}

/// A plain TensorFlow graph (no replicate cluster) runs end to end with
/// `--backend pjrt` as one single-replica cluster, with TensorFlow's numbers.
#[test]
fn a_plain_tensorflow_graph_runs_on_pjrt_from_the_command_line() {
    let plugin = support::plugin_path();
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string("tests/tf/corpus/math.json").unwrap()).unwrap();
    let mut feeds = serde_json::Map::new();
    for name in ["x:0", "p:0"] {
        let feed = &meta["feeds"][name];
        let shape: Vec<usize> =
            feed["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
        feeds.insert(name.to_string(), nest(feed["values"].as_array().unwrap(), &shape));
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("feeds.json");
    std::fs::write(&path, serde_json::Value::Object(feeds).to_string()).unwrap();
    let args = [
        "tests/tf/corpus/math.pbtxt",
        "--backend",
        "pjrt",
        "--feeds",
        path.to_str().unwrap(),
        "--fetch",
        "max:0",
        "--fetch",
        "sqrt:0",
        "--json",
    ];
    let (ok, out, err) = run(&args, plugin.to_str());
    assert!(ok, "{err}");
    assert!(
        err.contains("plain graph: compiled as one single-replica cluster") && err.contains("no op on the host"),
        "{err}"
    );
    let printed: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let outputs = printed["outputs"].as_array().expect("outputs");
    assert_eq!(outputs.len(), 2, "{out}");
    for output in outputs {
        let name = output["name"].as_str().expect("a name");
        let (mut got, mut want) = (Vec::new(), Vec::new());
        flat(&output["value"], &mut got);
        flat(&meta["runs"][0]["fetches"][name]["values"], &mut want);
        assert_eq!(got.len(), want.len(), "{name}");
        for (a, b) in got.iter().zip(&want) {
            assert!((a - b).abs() <= 1e-5 + 1e-4 * b.abs(), "{name}: pjrt {a}, TensorFlow {b}");
        }
    }
}

/// Host ops of a plain graph run on the host, and the CLI lists them; an
/// op that neither compiles nor runs on the host is refused by name.
#[test]
fn a_plain_graph_lists_its_host_ops_and_refuses_what_cannot_run() {
    let plugin = support::plugin_path();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("feeds.json");
    std::fs::write(&path, r#"{"x:0": [[0.5, -1.25, 0.0], [2.0, 0.001, 7.0]], "n:0": [1, 2, 3, 4]}"#).unwrap();
    let file = "tests/tf/corpus/host/host_string_format.pbtxt";
    let base = [file, "--feeds", path.to_str().unwrap(), "--fetch", "all:0", "--fetch", "^print"];
    let (ok, sim, err) = run(&base, None);
    assert!(ok, "{err}");
    let args: Vec<&str> = base.iter().chain(&["--backend", "pjrt"]).copied().collect();
    let (ok, pjrt, err) = run(&args, plugin.to_str());
    assert!(ok, "{err}");
    assert_eq!(pjrt, sim, "the same string on both backends");
    assert!(pjrt.starts_with("all:0 = \"[[0.5 -1.25 0]"), "{pjrt}");
    assert!(err.contains("PrintV2 (print): host"), "the CLI says where the print runs: {err}");
    assert!(err.contains("\"x = [[0.5 -1.25 0]"), "the print ran: {err}");
    // A ragged TensorList concatenation does not lower: a list's elements share one shape on XLA.
    // The refusal names the list op that cannot take the element.
    let dir = tempfile::tempdir().unwrap();
    let feeds = dir.path().join("feeds.json");
    std::fs::write(&feeds, r#"{"x:0": [[1, 2, 3], [4, 5, 6], [7, 8, 9], [10, 11, 12]]}"#).unwrap();
    let args = ["tests/tf/corpus/tensor_array.pbtxt", "--backend", "pjrt", "--feeds", feeds.to_str().unwrap()];
    let (ok, _, err) = run(&args, plugin.to_str());
    assert!(
        !ok && err.contains("tpu_rewrite::xla::lowering") && err.contains("every element of a TensorList"),
        "{err}"
    );
    assert!(err.contains("(TensorListSetItem)"), "the refusal names the op: {err}");
}

/// The numbers of every output in `run --json` output, in order, with their names.
fn json_outputs(out: &str) -> Vec<(String, Vec<f64>)> {
    let printed: serde_json::Value = serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let outputs = printed["outputs"].as_array().unwrap_or_else(|| panic!("no outputs: {out}"));
    outputs
        .iter()
        .map(|o| {
            let mut values = Vec::new();
            flat(&o["per_replica"], &mut values);
            (o["name"].as_str().unwrap_or_default().to_string(), values)
        })
        .collect()
}

/// A generated transformer's gradient all-reduces are fused into one on
/// the PJRT path by default (`--all-reduce-fusion auto`): the fused and
/// unfused runs give the same numbers, their loss is the simulator's, and
/// the StableHLO has one `stablehlo.all_reduce` fused and one per gradient
/// unfused. (The generator's constant weights put every ReLU input of the
/// layer-normed activations at zero up to rounding, so which units pass a
/// gradient depends on each backend's rounding: the `w1` updates are
/// compared between the two PJRT runs only.)
#[test]
fn fused_gradient_all_reduces_give_the_unfused_numbers() {
    let plugin = support::plugin_path();
    let bin = env!("CARGO_BIN_EXE_tpu-rewrite");
    let dir = tempfile::tempdir().unwrap();
    let graph = dir.path().join("transformer.pbtxt");
    let graph = graph.to_str().unwrap();
    let gen = Command::new(bin)
        .args(["gen", "--model", "transformer", "--ops", "600", "--replicas", "4", "--format", "pbtxt", "-o", graph])
        .output()
        .unwrap();
    assert!(gen.status.success(), "{}", String::from_utf8_lossy(&gen.stderr));
    // Each replica's x and y: 16 tokens of width 16, distinct per replica.
    let mut feeds = serde_json::Map::new();
    for (p, name) in ["x", "y"].iter().enumerate() {
        for r in 0..4 {
            let rows: Vec<serde_json::Value> = (0..16)
                .map(|i| (0..16).map(|j| ((i * 7 + j * 3 + r * 5 + p * 11) % 13) as f64 / 13.0 - 0.5).collect())
                .collect();
            feeds.insert(format!("{name}{r}:0"), serde_json::Value::from(rows));
        }
    }
    let path = dir.path().join("feeds.json");
    std::fs::write(&path, serde_json::Value::Object(feeds).to_string()).unwrap();
    let base = [graph, "--feeds", path.to_str().unwrap(), "--json"];
    let with = |extra: &[&str]| {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        let (ok, out, err) = run(&args, plugin.to_str());
        assert!(ok, "{err}");
        json_outputs(&out)
    };
    let sim = with(&[]);
    let gradients = std::fs::read_to_string(graph).unwrap().matches("op: \"CrossReplicaSum\"").count();
    assert!(gradients >= 12, "{gradients} gradient sums");
    assert_eq!(sim.len(), 1 + gradients, "the loss and every updated weight");
    let fused = with(&["--backend", "pjrt"]);
    let unfused = with(&["--backend", "pjrt", "--all-reduce-fusion", "off"]);
    let names = |outputs: &[(String, Vec<f64>)]| outputs.iter().map(|o| o.0.clone()).collect::<Vec<_>>();
    assert_eq!(names(&sim), names(&fused));
    assert_eq!(names(&sim), names(&unfused));
    for ((name, want), (_, got)) in unfused.iter().zip(&fused) {
        assert_eq!(want.len(), got.len(), "{name}");
        for (a, b) in got.iter().zip(want) {
            assert!((a - b).abs() <= 1e-6 * b.abs().max(1e-3), "{name}: fused {a} vs unfused {b}");
        }
    }
    let (loss_sim, loss_fused) = (&sim[0], &fused[0]);
    assert_eq!(loss_sim.0, "loss:0");
    assert_eq!(loss_sim.1.len(), 4, "one loss per replica");
    for (a, b) in loss_fused.1.iter().zip(&loss_sim.1) {
        assert!((a - b).abs() <= 1e-5 + 1e-4 * b.abs(), "loss: pjrt {a} vs sim {b}");
    }
    let all_reduces = |extra: &[&str]| {
        let out = Command::new(bin)
            .args(["lower", graph, "--topology", "1x4", "--format", "stablehlo"])
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).matches("\"stablehlo.all_reduce\"").count()
    };
    assert_eq!(all_reduces(&[]), 1);
    assert_eq!(all_reduces(&["--all-reduce-fusion", "off"]), gradients);
}

/// `values` (row-major) nested into arrays of `shape`, as `--feeds` reads them.
fn nested(values: &[serde_json::Value], shape: &[usize]) -> serde_json::Value {
    match shape.split_first() {
        None => values[0].clone(),
        Some((&n, rest)) => {
            let inner: usize = rest.iter().product();
            serde_json::Value::Array((0..n).map(|i| nested(&values[i * inner..(i + 1) * inner], rest)).collect())
        }
    }
}

/// A Keras step made by TensorFlow (`dense_adam`, 2 replicas) whose four
/// gradient sums the graph pass leaves alone (their sizes are not known
/// before typing): the StableHLO emitter packs them into one
/// `stablehlo.all_reduce`, `--all-reduce-fusion off` keeps one per sum,
/// and both give the same losses and variables on the plugin after two
/// steps (TensorFlow's own numbers for the packed run are checked by
/// `keras_corpus::dense_adam`).
#[test]
fn a_keras_steps_gradient_sums_are_packed_into_one_all_reduce() {
    let plugin = support::plugin_path();
    let bin = env!("CARGO_BIN_EXE_tpu-rewrite");
    let graph = "tests/tf/corpus/keras/dense_adam.pbtxt";
    let sums = std::fs::read_to_string(graph).unwrap().matches("op: \"CrossReplicaSum\"").count();
    assert_eq!(sums, 4, "the step's gradient sums");
    let all_reduces = |extra: &[&str]| {
        let out = Command::new(bin)
            .args(["lower", graph, "--topology", "1x2", "--format", "stablehlo"])
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).matches("\"stablehlo.all_reduce\"").count()
    };
    assert_eq!(all_reduces(&[]), 1);
    assert_eq!(all_reduces(&["--all-reduce-fusion", "off"]), sums);
    let case: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string("tests/tf/corpus/keras/dense_adam.json").unwrap()).unwrap();
    let mut feeds = serde_json::Map::new();
    for (name, t) in case["feeds"].as_object().unwrap() {
        let shape: Vec<usize> = t["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
        feeds.insert(name.clone(), nested(t["values"].as_array().unwrap(), &shape));
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("feeds.json");
    std::fs::write(&path, serde_json::Value::Object(feeds).to_string()).unwrap();
    // Each run's variables after two steps: name -> values.
    let with = |extra: &[&str]| {
        let base = [graph, "--feeds", path.to_str().unwrap(), "--json", "--backend", "pjrt", "--steps", "2"];
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        let (ok, out, err) = run(&args, plugin.to_str());
        assert!(ok, "{err}");
        let printed: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        let mut vars = std::collections::BTreeMap::new();
        for v in printed["variables"].as_array().unwrap_or_else(|| panic!("no variables: {out}")) {
            let mut values = Vec::new();
            flat(&v["value"], &mut values);
            vars.insert(v["name"].as_str().unwrap().to_string(), values);
        }
        vars
    };
    let packed = with(&[]);
    let unpacked = with(&["--all-reduce-fusion", "off"]);
    let rtol = case["rtol"].as_f64().unwrap();
    let tf = case["variables_after"].as_object().unwrap();
    assert!(tf.len() >= 4, "the layers' kernels and biases");
    for (name, copies) in tf {
        // One copy per replica, all equal: the first stands for them.
        let want: Vec<f64> = copies[0]["values"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        for (how, vars) in [("packed", &packed), ("unpacked", &unpacked)] {
            let got = vars.get(name).unwrap_or_else(|| panic!("{how}: no variable {name}: {vars:?}"));
            assert_eq!(got.len(), want.len(), "{how} {name}");
            for (a, b) in got.iter().zip(&want) {
                assert!((a - b).abs() <= 1e-6 + rtol * b.abs(), "{how} {name}: {a} vs TensorFlow's {b}");
            }
        }
    }
}

/// A plain graph that initialises its variable in the graph and gathers
/// from it with `batch_dims = 1` (along axis 1, row by row): both backends
/// give TensorFlow's result, worked out by hand.
#[test]
fn an_in_graph_initialiser_and_a_batched_resource_gather_run_on_both_backends() {
    let plugin = support::plugin_path();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gather.opg");
    std::fs::write(
        &path,
        r#"graph @main {
  %w = VarHandleOp() {dtype = f32, shape = shape[2, 3], shared_name = "w"}
  %w_value = Const() {dtype = f32, value = tensor(f32, [2, 3]) [0.5, -1.0, 1.5, 2.0, -0.5, 0.25]}
  %w_init = AssignVariableOp(%w, %w_value) {dtype = f32}
  %i = Const() {dtype = i32, value = tensor(i32, [2, 2]) [2, 0, 1, 1]}
  %g = ResourceGather(%w, %i, ^%w_init) {dtype = f32, Tindices = i32, batch_dims = 1}
}
"#,
    )
    .unwrap();
    let path = path.to_str().unwrap();
    for backend in ["sim", "pjrt"] {
        let (ok, out, err) = run(&[path, "--fetch", "g:0", "--backend", backend, "--json"], plugin.to_str());
        assert!(ok, "{backend}: {err}");
        let printed: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        let mut got = Vec::new();
        flat(&printed["outputs"][0]["value"], &mut got);
        // Row 0 takes w[0][2], w[0][0]; row 1 takes w[1][1] twice.
        assert_eq!(got, [1.5, 0.5, -0.5, -0.5], "{backend}: {out}");
    }
}

/// The `compile: S s for N program(s), C compiled by XLA` line of `-v`: (S, C).
fn compile_line(err: &str) -> (f64, u32) {
    let line = err.lines().find(|l| l.starts_with("compile: ")).unwrap_or_else(|| panic!("no compile line in {err}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let seconds = words[1].parse().unwrap_or_else(|_| panic!("{line}"));
    let compiled = words[words.len() - 4].parse().unwrap_or_else(|_| panic!("{line}"));
    (seconds, compiled)
}

/// The `--time-passes` line of `phase`: its wall and CPU milliseconds (CPU when printed).
fn phase_line(err: &str, phase: &str) -> (String, f64, Option<f64>) {
    let line = err
        .lines()
        .find(|l| l.strip_prefix(phase).is_some_and(|rest| rest.starts_with(' ') && !rest.trim().starts_with("per")))
        .unwrap_or_else(|| panic!("no `{phase}` line in {err}"));
    let words: Vec<&str> = line[phase.len()..].split_whitespace().collect();
    assert_eq!(&words[1..3], ["ms", "wall"], "{line}");
    let wall = words[0].parse().unwrap_or_else(|_| panic!("{line}"));
    let cpu = (words.len() > 5 && words[4] == "ms" && words[5] == "cpu").then(|| words[3].parse().unwrap());
    (line.to_string(), wall, cpu)
}

#[test]
fn time_passes_splits_a_pjrt_run_into_its_phases() {
    let plugin = support::plugin_path();
    let args = ["examples/mlp_train.opg", "--steps", "3", "--backend", "pjrt", "--time-passes", "--no-compile-cache"];
    let (ok, _, err) = run(&args, plugin.to_str());
    assert!(ok, "{err}");
    for phase in ["load", "rewrite", "lower", "pjrt plugin load", "pjrt client", "stablehlo emit", "transfers"] {
        phase_line(&err, phase);
    }
    let (compile, compile_ms, compile_cpu) = phase_line(&err, "xla compile");
    assert!(compile.ends_with("(1 program(s), 1 compiled by XLA)") && compile_ms > 0.0, "{compile}");
    assert!(compile_cpu.is_some_and(|c| c > 0.0), "XLA's compile takes CPU time: {compile}");
    // Three steps are three `execute` calls of the one compiled program.
    let (_, total_ms, total_cpu) = phase_line(&err, "execute");
    let per_call = err.lines().find(|l| l.starts_with("execute per call")).unwrap_or_else(|| panic!("{err}"));
    assert!(per_call.ends_with("(3 calls)"), "{per_call}");
    let per_call_ms: f64 = per_call.split_whitespace().nth(3).and_then(|w| w.parse().ok()).unwrap();
    assert!(total_ms > 0.0 && (per_call_ms * 3.0 - total_ms).abs() < 0.01, "{per_call} against {total_ms} ms");
    assert!(total_cpu.is_some_and(|c| c >= 0.0), "{err}");
}

#[test]
fn the_compile_cache_loads_a_second_run_and_recovers_from_a_damaged_entry() {
    let plugin = support::plugin_path();
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("compile");
    let cache_arg = cache.to_str().unwrap();
    let go = |graph: &str, extra: &[&str]| {
        let mut args = vec!["-v", graph, "--steps", "4", "--backend", "pjrt", "--compile-cache", cache_arg];
        args.extend_from_slice(extra);
        let start = std::time::Instant::now();
        let (ok, out, err) = run(&args, plugin.to_str());
        assert!(ok, "{err}");
        (out, err, start.elapsed().as_secs_f64())
    };
    let entries = || std::fs::read_dir(&cache).map_or(0, |d| d.filter_map(Result::ok).count());
    // First run: XLA compiles once for all four steps and stores the executable.
    let (first, err, first_wall) = go("examples/mlp_train.opg", &[]);
    assert!(err.contains("compile cache: miss for cluster `cluster`"), "{err}");
    let (miss_s, compiled) = compile_line(&err);
    assert_eq!(compiled, 1, "{err}");
    assert_eq!(entries(), 1);
    // Second run: loaded, not compiled; the same numbers.
    let (second, err, second_wall) = go("examples/mlp_train.opg", &[]);
    assert!(err.contains("compile cache: hit for cluster `cluster`"), "{err}");
    let (hit_s, compiled) = compile_line(&err);
    assert_eq!(compiled, 0, "{err}");
    assert!(hit_s < miss_s, "loading ({hit_s} s) is faster than compiling ({miss_s} s)");
    assert_eq!(first, second);
    eprintln!("compile {miss_s:.3} s, load {hit_s:.3} s; whole run {first_wall:.2} s, then {second_wall:.2} s");
    // A changed program (a device loop of two iterations) misses and gets its own entry.
    let (_, err, _) = go("examples/mlp_train.opg", &["--steps-per-run", "2"]);
    assert!(err.contains("compile cache: miss"), "{err}");
    assert_eq!(entries(), 2);
    // Other XLA flags may make other code: the same program misses under them.
    let dump = dir.path().join("dump");
    let out = Command::new(env!("CARGO_BIN_EXE_tpu-rewrite"))
        .args(["run", "-v", "examples/mlp_train.opg", "--backend", "pjrt", "--compile-cache", cache_arg])
        .env("TPU_REWRITE_PJRT_PLUGIN", &plugin)
        .env("XLA_FLAGS", format!("--xla_dump_to={}", dump.display()))
        .output()
        .expect("the binary runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && err.contains("compile cache: miss"), "{err}");
    assert_eq!(entries(), 3);
    // A damaged entry is noted, removed and replaced by a fresh compile.
    for entry in std::fs::read_dir(&cache).unwrap().filter_map(Result::ok) {
        let mut bytes = std::fs::read(entry.path()).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x5a;
        std::fs::write(entry.path(), bytes).unwrap();
    }
    let (third, err, _) = go("examples/mlp_train.opg", &[]);
    assert!(err.contains("fails its checksum; it was removed; cluster `cluster` was compiled afresh"), "{err}");
    assert_eq!(third, first);
    let (_, err, _) = go("examples/mlp_train.opg", &[]);
    assert!(err.contains("compile cache: hit"), "the fresh compile was stored again: {err}");
    // Outside compilation through the host callback: the loaded executable reaches the host too.
    let feeds = dir.path().join("feeds.json");
    std::fs::write(&feeds, r#"{"x0:0": [0.1, -0.5, 0.9], "x1:0": [0.3, 0.2, -1.2]}"#).unwrap();
    let with_feeds = ["--feeds", feeds.to_str().unwrap()];
    let (compiled_out, err, _) = go("examples/second_order.opg", &with_feeds);
    assert!(err.contains("compile cache: miss"), "{err}");
    let (loaded_out, err, _) = go("examples/second_order.opg", &with_feeds);
    assert!(err.contains("compile cache: hit"), "{err}");
    assert_eq!(compiled_out, loaded_out);
    // --no-compile-cache compiles and writes nothing.
    let before = entries();
    let (ok, _, err) =
        run(&["-v", "examples/mlp_train.opg", "--backend", "pjrt", "--no-compile-cache"], plugin.to_str());
    assert!(ok, "{err}");
    assert!(!err.contains("compile cache:") && compile_line(&err).1 == 1, "{err}");
    assert_eq!(entries(), before);
    // The cache belongs to the PJRT backend.
    let (ok, _, err) = run(&["examples/mlp_train.opg", "--compile-cache", cache_arg], None);
    assert!(!ok && err.contains("--backend pjrt only"), "{err}");
}

/// A step whose StochasticCastToInt takes f16, which the StableHLO lowering refuses.
const UNLOWERED_STEP: &str = "// StochasticCastToInt of an f16 input has no StableHLO lowering.
graph @main {
  %x0 = Placeholder() {dtype = f16, shape = shape[4]}
  replicate (num_replicas = 1) (%x = [%x0]) {
    %key = Const() {dtype = u64, value = tensor(u64, [1]) [7]}
    %counter = Const() {dtype = u64, value = tensor(u64, [2]) [1, 2]}
    %alg = Const() {dtype = i32, value = tensor(i32, []) [1]}
    %y = StochasticCastToInt(%x, %key, %counter, %alg) {Tin = f16, Tout = i32}
    return %y
  }
}
";

#[test]
fn a_lowering_error_points_at_the_op_in_the_input() {
    use crate::support::cli::{run as run_cli, run_stdin, stderr};
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("step.mlir");
    let o = run_stdin(&["lower", "-", "--format", "stablehlo", "-o", out.to_str().unwrap()], UNLOWERED_STEP.as_bytes());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(!out.exists(), "a failed lowering writes no output");
    insta::assert_snapshot!(stderr(&o));
    // A GraphDef in text form: the label is on the node's text in the .pbtxt.
    let step = dir.path().join("step.opg");
    std::fs::write(&step, UNLOWERED_STEP).unwrap();
    let tagged = dir.path().join("tagged.pbtxt");
    let o = run_cli(&["rewrite", step.to_str().unwrap(), "-o", tagged.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run_cli(&["lower", tagged.to_str().unwrap(), "--format", "stablehlo", "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("tpu_rewrite::xla::lowering") && err.contains("y (StochasticCastToInt)"), "{err}");
    assert!(err.contains("tagged.pbtxt:") && err.contains("name: \"y\"") && err.contains("this op"), "{err}");
    // A binary GraphDef has no text: the report names the node and the file.
    let binary = dir.path().join("tagged.pb");
    let o = run_cli(&["rewrite", step.to_str().unwrap(), "-o", binary.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run_cli(&["lower", binary.to_str().unwrap(), "--format", "stablehlo", "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("y (StochasticCastToInt)") && err.contains("tagged.pb:1:1"), "{err}");
    // Running it on PJRT reports the same lowering error, naming the file too.
    let feeds = dir.path().join("feeds.json");
    std::fs::write(&feeds, r#"{"x0": [1, 2, 3, 4]}"#).unwrap();
    let o = run_cli(&["run", binary.to_str().unwrap(), "--backend", "pjrt", "--feeds", feeds.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("tpu_rewrite::xla::lowering") && err.contains("tagged.pb:1:1"), "{err}");
}
