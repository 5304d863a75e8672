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
    assert!(err.contains("typo.opg:3:"), "located at the node: {err}");
    let o = run(&["check", "--strict", &path]);
    assert_eq!(code(&o), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("unknown op type `Tahn`"));
    // `lower` warns too, before the gradient or kernel problems it leads to.
    let o = run(&["lower", &path]);
    assert!(stderr(&o).contains("did you mean `Tanh`?"), "{}", stderr(&o));
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
    // Filling the hosts works, and so do idle cores on a single host.
    let o = run(&["lower", &example("mlp_train.opg"), "--topology", "2x4", "--describe"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let o = run(&["lower", &example("mlp_train.opg"), "--topology", "1x16", "--describe"]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
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
