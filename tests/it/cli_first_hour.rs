//! What a new user meets in the first hour (issue 28): nothing wrong is
//! accepted, exit codes follow docs/cli.md, diagnostics point at the
//! mistake, `lower` takes plain graphs, and an installed binary runs the
//! jax-distributed backend without the source tree. One test per bullet.

use std::io::Write;
use std::process::Output;

use crate::support::cli as support_cli;
use support_cli::{bin, example, run, stderr};

fn code(o: &Output) -> Option<i32> {
    o.status.code()
}

/// Writes `text` to a file `name` in a new temporary directory.
fn file(name: &str, text: &[u8]) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join(name);
    std::fs::File::create(&path).and_then(|mut f| f.write_all(text)).expect("writes");
    let path = path.display().to_string();
    (dir, path)
}

/// A plain graph (no replicate region) with a feed and a loss.
const PLAIN: &str = "graph @main {
  %x = Placeholder() {dtype = f32, shape = shape[2]}
  %two = Const() {dtype = f32, value = tensor(f32, []) [2.0]}
  %loss = Mul(%x, %two) {T = f32}
}
";

#[test]
fn unknown_op_types_warn_with_a_suggestion_and_strict_refuses_them() {
    let (_d, path) = file(
        "typo.opg",
        b"graph @main {\n  %x = Placeholder() {dtype = f32, shape = shape[2]}\n  %y = Tahn(%x) {T = f32}\n  %z = MatMull(%x, %x) {T = f32}\n}\n",
    );
    let o = run(&["check", &path]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("tpu_rewrite::ir::unknown_op"), "{err}");
    assert!(err.contains("unknown op type `Tahn`") && err.contains("did you mean `Tanh`?"), "{err}");
    assert!(err.contains("did you mean `MatMul`?"), "{err}");
    // Labelled at the op-type token (column 8), not the whole node.
    assert!(err.contains("typo.opg:3:8") && err.contains("typo.opg:4:8"), "located at the op type: {err}");
    let o = run(&["check", "--strict", &path]);
    assert_eq!(code(&o), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("unknown op type `Tahn`"));
    // `lower` warns too, before the gradient or kernel problems it leads to.
    let o = run(&["lower", &path]);
    assert!(stderr(&o).contains("did you mean `Tanh`?"), "{}", stderr(&o));
    // In a GraphDef's text, the label is the value of `op:` (line 13, column 8).
    let typo = BAD_ATTR.replace("\"Relu\"", "\"Rleu\"").replace("i: 3", "type: DT_FLOAT");
    let (_p, pbtxt) = file("typo.pbtxt", typo.as_bytes());
    let err = stderr(&run(&["check", &pbtxt]));
    assert!(err.contains("unknown op type `Rleu`") && err.contains("did you mean `Relu`?"), "{err}");
    assert!(err.contains("typo.pbtxt:13:8"), "located at the op value: {err}");
    // Known ops (TensorFlow's and ours) give no warning.
    let o = run(&["check", "--strict", &example("mlp_train.opg")]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert!(!stderr(&o).contains("unknown_op"), "{}", stderr(&o));
}

#[test]
fn steps_zero_is_a_usage_error() {
    for flag in ["--steps", "--steps-per-run"] {
        let o = run(&["run", &example("mlp_train.opg"), flag, "0"]);
        assert_eq!(code(&o), Some(2), "{flag} 0: {}", stderr(&o));
        assert!(o.stdout.is_empty(), "{flag} 0 printed results");
    }
}

#[test]
fn processes_are_validated_before_anything_starts() {
    let o = run(&["run", &example("mlp_train.opg"), "--processes", "0", "--backend", "jax-distributed"]);
    assert_eq!(code(&o), Some(2), "{}", stderr(&o));
    // The simulator does not take --processes: refused rather than ignored.
    let o = run(&["run", &example("mlp_train.opg"), "--processes", "2"]);
    assert_eq!(code(&o), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--processes applies to --backend jax-distributed"), "{}", stderr(&o));
    // 3 processes cannot share 8 replicas: refused before a process starts
    // (no Python is needed to see it).
    let o = bin()
        .args(["run", &example("mlp_train.opg"), "--backend", "jax-distributed", "--processes", "3"])
        .env("TPU_REWRITE_JAX_PYTHON", "/nonexistent/python")
        .output()
        .expect("runs");
    assert_eq!(code(&o), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--processes 3 cannot share 8 replica(s)"), "{}", stderr(&o));
}

#[test]
fn a_topology_the_replicas_span_unevenly_is_refused() {
    let o = run(&["lower", &example("mlp_train.opg"), "--topology", "3x3", "--describe"]);
    assert_eq!(code(&o), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("tpu_rewrite::lower::uneven_hosts"), "{err}");
    assert!(err.contains("host 2 would use 2 of its 3 cores"), "{err}");
    assert!(o.stdout.is_empty(), "--describe printed facts for an uneven topology");
    // Filling the hosts works, and says nothing about idle cores.
    let o = run(&["lower", &example("mlp_train.opg"), "--topology", "2x4", "--describe"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert!(!stderr(&o).contains("idle") && !String::from_utf8_lossy(&o.stdout).contains("idle"));
    // Idle cores on a single host run, and are named on stderr and in --describe.
    let o = run(&["lower", &example("mlp_train.opg"), "--topology", "1x16", "--describe"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let idle = "8 of the 16 cores idle (task 0: TPU:8-15)";
    assert!(stderr(&o).contains(&format!("note: 8 replica(s) of 1 core(s) leave {idle}")), "{}", stderr(&o));
    let facts = String::from_utf8_lossy(&o.stdout);
    assert!(facts.contains(&format!("idle_cores: {idle}")), "{facts}");
    assert!(facts.contains("num_replicas_per_host: 8"), "{facts}");
    let o = run(&["run", &example("mlp_train.opg"), "--topology", "1x16"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains(idle), "{}", stderr(&o));
}

#[test]
fn the_lock_file_that_cargo_install_locked_reads_is_current() {
    // `cargo install --locked --path .` (README, Quick start) builds with
    // Cargo.lock's versions, and fails if the lock file would have to
    // change. A release build is too slow for a test, so this checks what
    // `--locked` relies on: Cargo.lock is committed and resolves as is.
    // (`an_installed_binary_writes_its_own_launcher` runs the binary alone.)
    // `cargo tree` resolves for this host only, as `cargo install` does:
    // `cargo metadata` would also want every other platform's crates
    // downloaded, which a fresh machine's registry cache does not hold.
    let root = env!("CARGO_MANIFEST_DIR");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let o = std::process::Command::new(cargo)
        .args(["tree", "--locked", "--offline", "--prefix", "none"])
        .current_dir(root)
        .output()
        .expect("cargo runs");
    assert!(o.status.success(), "Cargo.lock is stale or missing: {}", stderr(&o));
    let readme = std::fs::read_to_string(format!("{root}/README.md")).expect("reads");
    assert!(readme.contains("cargo install --locked --path ."), "the README installs with --locked");
}

#[test]
fn exit_codes_follow_the_docs() {
    // `--feed` without NAME= is a usage error.
    let o = run(&["run", &example("mlp_train.opg"), "--feed", "x32.npy"]);
    assert_eq!(code(&o), Some(2), "{}", stderr(&o));
    // StableHLO is lower's format only: the others do not list it and refuse it as usage.
    for command in ["emit", "rewrite"] {
        let o = run(&[command, &example("mlp_train.opg"), "--format", "stablehlo"]);
        assert_eq!(code(&o), Some(2), "{command}: {}", stderr(&o));
        let dir = tempfile::tempdir().expect("a directory");
        let out = dir.path().join("x.mlir").display().to_string();
        let o = run(&[command, &example("mlp_train.opg"), "-o", &out]);
        assert_eq!(code(&o), Some(2), "{command} -o x.mlir: {}", stderr(&o));
        assert!(stderr(&o).contains("tpu_rewrite::cli::usage"), "{}", stderr(&o));
        let help = String::from_utf8_lossy(&run(&[command, "-h"]).stdout).into_owned();
        assert!(help.contains("[possible values: text, json, dot, pbtxt, pb]"), "{command} -h:\n{help}");
    }
    let o = run(&["gen", "--format", "stablehlo"]);
    assert_eq!(code(&o), Some(2), "{}", stderr(&o));
    // lower --format pbtxt without -o: a usage error with its code.
    let o = run(&["lower", &example("mlp_train.opg"), "--format", "pbtxt"]);
    assert_eq!(code(&o), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("tpu_rewrite::cli::usage"), "{}", stderr(&o));
}

#[test]
fn lower_takes_plain_graphs_as_run_does() {
    let (_d, path) = file("plain.opg", PLAIN.as_bytes());
    let o = run(&["lower", &path, "--topology", "2x4"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("graph @host") && text.contains("num_replicas = 1"), "{text}");
    assert!(stderr(&o).contains("plain graph: compiled as one single-replica cluster"), "{}", stderr(&o));
    // A TensorFlow-made plain GraphDef, written back as the README's workflow does.
    let dir = tempfile::tempdir().expect("a directory");
    let corpus = format!("{}/tests/tf/corpus/math.pbtxt", env!("CARGO_MANIFEST_DIR"));
    let programs = dir.path().join("programs").display().to_string();
    let o = run(&["lower", &corpus, "--format", "pbtxt", "-o", &programs]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert!(dir.path().join("programs/host.pbtxt").is_file());
}

#[test]
fn a_misspelt_fetch_suggests_the_name() {
    let (_d, path) = file("plain.opg", PLAIN.as_bytes());
    let (_f, feeds) = file("feeds.json", br#"{"x:0": [1.0, 2.0]}"#);
    let o = run(&["run", &path, "--feeds", &feeds, "--fetch", "lose:0"]);
    assert_eq!(code(&o), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("unknown_fetch") && err.contains("did you mean `loss:0`?"), "{err}");
    // The same in a replicated graph, where the fetch is checked by the CLI.
    let o = run(&["run", &example("mlp_train.opg"), "--fetch", "^output_0_shard_O"]);
    assert_eq!(code(&o), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("did you mean `^output_0_shard_0`?"), "{}", stderr(&o));
    let o = run(&["run", &path, "--feeds", &feeds, "--fetch", "loss:0"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
}

/// A small valid `.pbtxt` with one node whose attribute has the wrong kind.
const BAD_ATTR: &str = r#"node {
  name: "x"
  op: "Placeholder"
  attr {
    key: "dtype"
    value {
      type: DT_FLOAT
    }
  }
}
node {
  name: "y"
  op: "Relu"
  input: "x"
  attr {
    key: "T"
    value {
      i: 3
    }
  }
}
"#;

#[test]
fn diagnostics_point_at_the_mistake() {
    // A misspelt enum name: the closest name, not "write the number".
    let (_d, path) = file("enum.pbtxt", BAD_ATTR.replace("DT_FLOAT", "DT_FLOT").as_bytes());
    let err = stderr(&run(&["check", &path]));
    assert!(err.contains("did you mean `DT_FLOAT`?"), "{err}");
    assert!(!err.contains("number instead of its name"), "{err}");
    // A truncated .pb: called truncated, not "text files end in .pbtxt".
    let pb =
        std::fs::read(format!("{}/tests/fixtures/tf-graphs/mlp_r4.pb", env!("CARGO_MANIFEST_DIR"))).expect("reads");
    let (_p, path) = file("cut.pb", &pb[..pb.len() / 2]);
    let o = run(&["check", &path]);
    assert_eq!(code(&o), Some(1));
    let err = stderr(&o);
    assert!(err.contains("cut short") && !err.contains("text files end in"), "{err}");
    // .pb bytes in a .pbtxt file: a note names --input-format pb.
    let (_q, path) = file("binary.pbtxt", &pb);
    let err = stderr(&run(&["check", &path]));
    assert!(err.contains("looks like a binary GraphDef") && err.contains("--input-format pb"), "{err}");
    // A wrong attribute kind is labelled at its value, not the whole node.
    let (_r, path) = file("attr.pbtxt", BAD_ATTR.as_bytes());
    let o = run(&["check", &path]);
    assert_eq!(code(&o), Some(1));
    let err = stderr(&o);
    assert!(err.contains("attribute `T` of `Relu` must be"), "{err}");
    assert!(err.contains("attr.pbtxt:17:"), "labelled at the value on line 17: {err}");
}

#[test]
fn the_cli_reference_lists_every_backend_and_the_python_override() {
    let help = String::from_utf8_lossy(&run(&["run", "--help"]).stdout).into_owned();
    assert!(help.contains("TPU_REWRITE_PYTHON_DIR"), "{help}");
    assert!(help.contains("jax-distributed"), "{help}");
}

#[test]
fn an_installed_binary_writes_its_own_launcher() {
    // The library writes the embedded files into a cache directory, equal
    // to the clone's python/ files, once.
    let cache = tempfile::tempdir().expect("a directory");
    let dir = tpu_rewrite::xla::distributed::embedded_python_dir(cache.path()).expect("writes");
    for name in ["tpu_rewrite_launch.py", "requirements.txt", "setup-venv"] {
        let clone = std::fs::read(format!("{}/python/{name}", env!("CARGO_MANIFEST_DIR"))).expect("reads");
        assert_eq!(std::fs::read(dir.join(name)).expect("written"), clone, "{name}");
    }
    assert_eq!(tpu_rewrite::xla::distributed::embedded_python_dir(cache.path()).expect("again"), dir);
    // The binary, copied away from the clone, finds its launcher in the
    // cache: a missing Python is then the only problem it reports.
    let away = tempfile::tempdir().expect("a directory");
    let cache = tempfile::tempdir().expect("a directory");
    let copy = away.path().join("tpu-rewrite");
    std::fs::copy(env!("CARGO_BIN_EXE_tpu-rewrite"), &copy).expect("copies the binary");
    let o = std::process::Command::new(&copy)
        .args(["run", &example("mlp_train.opg"), "--backend", "jax-distributed"])
        .current_dir(away.path())
        .env("TPU_REWRITE_CACHE_DIR", cache.path())
        .env_remove("TPU_REWRITE_PYTHON_DIR")
        .env("TPU_REWRITE_JAX_PYTHON", away.path().join("no-python"))
        .output()
        .expect("runs");
    let err = stderr(&o);
    assert_eq!(code(&o), Some(1), "{err}");
    assert!(err.contains("no-python"), "{err}");
    assert!(!err.contains("setup-venv failed"), "{err}");
    let written = std::fs::read_dir(cache.path())
        .expect("the cache")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("python-"))
        .count();
    assert_eq!(written, 1, "one copy of the launcher in the cache");
}

/// TensorFlow's tpu.replicate form (as `examples/tf_tagged.opg`), plus a
/// variable assigned outside the cluster from the step's result, as Keras
/// leaves a batch-norm moving average.
const UPDATE_AFTER_STEP: &str = "graph @main {
  %x0 = Placeholder() {dtype = f32, shape = shape[2]}
  %x1 = Placeholder() {dtype = f32, shape = shape[2]}
  %input0 = TPUReplicatedInput(%x0, %x1) {N = 2, T = f32, index = 0, is_mirrored_variable = false, is_packed = false}
  %cluster/pivot = NoOp()
  %TPUReplicateMetadata = TPUReplicateMetadata(^%cluster/pivot) {_tpu_replicate = \"cluster\", allow_soft_placement = false, computation_shape = [], device_assignment = [], host_compute_core = [], num_cores_per_replica = 1, num_replicas = 2, padding_map = [], topology = \"\", use_tpu = true}
  %replicated_input_0 = Identity(%input0) {T = f32, _tpu_input_identity = true, _tpu_replicate = \"cluster\"}
  %Relu = Relu(%replicated_input_0) {T = f32, _tpu_replicate = \"cluster\"}
  %Identity = Identity(%Relu) {T = f32, _tpu_replicate = \"cluster\"}
  %output0 = TPUReplicatedOutput(%Identity) {T = f32, num_replicas = 2}
  %output_0_shard_0 = Identity(%output0) {T = f32}
  %output_0_shard_1 = Identity(%output0:1) {T = f32}
  %moving = VarHandleOp() {dtype = f32, shape = shape[2], shared_name = \"moving\"}
  %moving_init_value = Const() {dtype = f32, value = tensor(f32, [2]) [0.0, 0.0]}
  %moving_init = AssignVariableOp(%moving, %moving_init_value) {dtype = f32}
  %moving_update = AssignVariableOp(%moving, %output_0_shard_0) {dtype = f32}
}
";

#[test]
fn an_assignment_outside_the_cluster_that_reads_the_step_is_refused_at_it() {
    let (_d, path) = file("update.opg", UPDATE_AFTER_STEP.as_bytes());
    let (_f, feeds) = file("feeds.json", br#"{"x0:0": [1.5, -2.0], "x1:0": [-0.5, 3.0]}"#);
    for args in [vec!["lower", &path], vec!["run", &path, "--feeds", &feeds]] {
        let o = run(&args);
        let err = stderr(&o);
        assert_eq!(code(&o), Some(1), "{args:?}: {err}");
        assert!(err.contains("tpu_rewrite::lower::update_after_step"), "{err}");
        assert!(err.contains("`moving_update` (AssignVariableOp) outside the replicate cluster reads"), "{err}");
        assert!(err.contains("update.opg:16:3"), "located at the assignment: {err}");
        assert!(!err.contains("moving_init`"), "the initialiser from a constant is fine: {err}");
        assert!(!err.contains("_Send"), "{err}");
    }
    // Without the update, the initialiser runs and the graph runs.
    let fixed = UPDATE_AFTER_STEP
        .replace("  %moving_update = AssignVariableOp(%moving, %output_0_shard_0) {dtype = f32}\n", "");
    let (_g, path) = file("fixed.opg", fixed.as_bytes());
    let o = run(&["run", &path, "--feeds", &feeds]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
}

/// A data-parallel step on two replicas: one variable, a `gradients`
/// call whose result the step returns, and an SGD update.
const TRAIN: &str = "graph @main {
  %x0 = Placeholder() {dtype = f32, shape = shape[3]}
  %x1 = Placeholder() {dtype = f32, shape = shape[3]}
  %w = VarHandleOp() {dtype = f32, shape = shape[3], shared_name = \"w\"}
  %w_init_value = Const() {dtype = f32, value = tensor(f32, [3]) [0.5, -1.0, 2.0]}
  %w_init = AssignVariableOp(%w, %w_init_value) {dtype = f32}
  replicate (num_replicas = 2) (%x = [%x0, %x1]) {
    %w_read = ReadVariableOp(%w) {dtype = f32}
    %p = Mul(%x, %w_read) {T = f32}
    %t = Tanh(%p) {T = f32}
    %sq = Square(%t) {T = f32}
    %axes = Const() {dtype = i32, value = tensor(i32, [1]) [0]}
    %loss = Sum(%sq, %axes) {T = f32, keep_dims = false}
    %g = gradients(ys = [%loss], xs = [%w_read])
    %group = Const() {dtype = i32, value = tensor(i32, [1, 2]) [0, 1]}
    %g_sum = CrossReplicaSum(%g, %group) {T = f32}
    %lr = Const() {dtype = f32, value = tensor(f32, []) [0.1]}
    %step = Mul(%g_sum, %lr) {T = f32}
    %upd = AssignSubVariableOp(%w, %step) {dtype = f32}
    return %loss, %g, ^%upd
  }
}
";

const TRAIN_FEEDS: &[u8] = br#"{"x0:0": [1.0, 2.0, -1.0], "x1:0": [0.5, -0.5, 3.0]}"#;

#[test]
fn a_returned_gradient_keeps_the_users_name() {
    let (_d, path) = file("train.opg", TRAIN.as_bytes());
    let (_f, feeds) = file("feeds.json", TRAIN_FEEDS);
    let o = run(&["run", &path, "--feeds", &feeds, "--json"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let names: Vec<&str> =
        json["outputs"].as_array().expect("outputs").iter().map(|o| o["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["loss:0", "g:0"], "{json}");
    // Several xs: the region returns outputs of one `IdentityN` named `g`.
    let two = TRAIN
        .replace("xs = [%w_read])", "xs = [%w_read, %x])")
        .replace("return %loss, %g, ^%upd", "return %loss, %g, %g:1, ^%upd");
    let (_t, path2) = file("train2.opg", two.as_bytes());
    let o = run(&["run", &path2, "--feeds", &feeds, "--json"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let names: Vec<&str> =
        json["outputs"].as_array().expect("outputs").iter().map(|o| o["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["loss:0", "g:0", "g:1"], "{json}");
    // The text output shows the names too.
    let o = run(&["run", &example("second_order.opg")]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("output dy:0 replica 0") && text.contains("output ddy:0 replica 1"), "{text}");
    assert!(!text.contains("TanhGrad"), "{text}");
}

#[test]
fn the_stablehlo_file_runs_in_jax_from_its_sidecar_with_runs_numbers() {
    // First-hour step 5: `lower --format stablehlo -o step.mlir` and its
    // `step.mlir.json`, run by python/examples/run_stablehlo.py in the
    // pinned JAX venv, give `tpu-rewrite run`'s outputs and variables. The
    // script starts from the variables after step 1 (`--npy-dir`) and runs
    // two steps: the run's step 3.
    let python = tpu_rewrite::xla::distributed::python()
        .unwrap_or_else(|e| panic!("the pinned JAX venv (python/setup-venv) is required: {e}"));
    let dir = tempfile::tempdir().expect("a directory");
    let at = |name: &str| dir.path().join(name).display().to_string();
    std::fs::write(at("train.opg"), TRAIN).expect("writes");
    std::fs::write(at("feeds.json"), TRAIN_FEEDS).expect("writes");
    let o = run(&["lower", &at("train.opg"), "--format", "stablehlo", "-o", &at("step.mlir")]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let o = run(&["run", &at("train.opg"), "--feeds", &at("feeds.json"), "--npy-dir", &at("step1")]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let o = run(&["run", &at("train.opg"), "--feeds", &at("feeds.json"), "--steps", "3", "--json"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    std::fs::write(at("step3.json"), &o.stdout).expect("writes");
    let script = format!("{}/python/examples/run_stablehlo.py", env!("CARGO_MANIFEST_DIR"));
    let jax = |steps: &str| {
        std::process::Command::new(&python)
            .args([&script, &at("step.mlir"), "--feeds", &at("feeds.json"), "--variables", &at("step1/variables")])
            .args(["--steps", steps, "--compare", &at("step3.json")])
            .output()
            .expect("python runs")
    };
    let o = jax("2");
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("every output and variable equals"), "{}", stderr(&o));
    let printed: serde_json::Value = serde_json::from_slice(&o.stdout).expect("the script prints JSON");
    assert_eq!(printed["outputs"][1]["name"], "g:0", "{printed}");
    assert_eq!(printed["variables"][0]["name"], "w", "{printed}");
    // The comparison can fail: one step from there is the run's step 2,
    // not its step 3, and the script says so.
    let o = jax("1");
    assert_eq!(code(&o), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("JAX and `tpu-rewrite run` differ"), "{}", stderr(&o));
}

#[test]
fn tf1_ref_variables_are_initialised_as_resource_variables_are() {
    // tests/tf/tf1_ref_variables.py: `VariableV2`s set by `Assign` from
    // constants (TensorFlow's `init`), no `VarHandleOp`, and TensorFlow's
    // loss after `init`.
    let root = env!("CARGO_MANIFEST_DIR");
    let graph = format!("{root}/tests/tf/corpus/tf1_variables/ref_variables.pbtxt");
    let meta: serde_json::Value = serde_json::from_slice(
        &std::fs::read(format!("{root}/tests/tf/corpus/tf1_variables/ref_variables.json")).expect("reads"),
    )
    .expect("JSON");
    // The corpus' flat values of x (shape [2, 3]) as the nested rows `--feeds` takes.
    let x = &meta["feeds"]["x:0"];
    assert_eq!(x["shape"], serde_json::json!([2, 3]));
    let flat = x["values"].as_array().expect("values");
    let rows: Vec<serde_json::Value> = flat.chunks(3).map(|row| serde_json::Value::Array(row.to_vec())).collect();
    let feeds: serde_json::Map<String, serde_json::Value> =
        [("x:0".to_string(), serde_json::Value::Array(rows))].into_iter().collect();
    let (_d, feeds) = file("feeds.json", serde_json::Value::Object(feeds).to_string().as_bytes());
    let o = run(&["run", &graph, "--feeds", &feeds, "--json"]);
    let err = stderr(&o);
    assert_eq!(code(&o), Some(0), "{err}");
    assert!(err.contains("variable(s) w, b set by the graph's initialisers"), "{err}");
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let loss = json["outputs"][0]["per_replica"][0].as_f64().expect("the loss");
    let want = meta["runs"][1]["fetches"]["loss:0"]["values"][0].as_f64().expect("TensorFlow's loss");
    assert!((loss - want).abs() <= 1e-5 * want.abs(), "loss {loss}, TensorFlow {want}");
    assert_eq!(json["outputs"][0]["name"], "loss:0");
    // A ref variable read other than through its `read` Identity is refused at the reader.
    let text = std::fs::read_to_string(&graph).expect("reads");
    let direct = text.replacen("input: \"w/read\"", "input: \"w\"", 1);
    assert_ne!(direct, text, "the graph reads w through w/read");
    let (_e, path) = file("direct.pbtxt", direct.as_bytes());
    let o = run(&["run", &path, "--feeds", &feeds]);
    let err = stderr(&o);
    assert_eq!(code(&o), Some(1), "{err}");
    assert!(err.contains("tpu_rewrite::session::ref_variable") && err.contains("used by `MatMul`"), "{err}");
}
