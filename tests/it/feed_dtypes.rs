//! Feeds and fetches of every numeric dtype a tensor holds, through the
//! CLI on both backends: JSON feeds (`--feeds`) come back unchanged in
//! `--json`; the `.npy` files `--npy-dir` writes carry NumPy's dtype of
//! each (bf16 as `ml_dtypes` saves it) and feed the next run
//! (`--feed NAME=FILE.npy`) to the same values. A feed the readers cannot
//! take is a diagnostic that names it.

use std::path::Path;

use serde_json::{json, Value};

use crate::support::cli::{bin, stderr};

/// Each dtype of the test graph, the NumPy descr `--npy-dir` writes for
/// it (NumPy's names: `ml_dtypes` saves bfloat16 as a 2-byte void), and
/// two values at the edges of its range.
fn dtypes() -> Vec<(&'static str, &'static str, Value)> {
    vec![
        ("f32", "<f4", json!([1.5, -2.25])),
        ("f64", "<f8", json!([0.1, -1e300])),
        ("bf16", "|V2", json!([1.5, -3.0])),
        ("f16", "<f2", json!([0.5, 65504.0])),
        ("i8", "|i1", json!([-128, 127])),
        ("u8", "|u1", json!([0, 255])),
        ("i16", "<i2", json!([-32768, 32767])),
        ("u16", "<u2", json!([0, 65535])),
        ("i32", "<i4", json!([-2147483648i64, 7])),
        ("i64", "<i8", json!([i64::MIN, i64::MAX])),
        ("u32", "<u4", json!([0, 4294967295u32])),
        ("u64", "<u8", json!([0, u64::MAX])),
        ("bool", "|b1", json!([true, false])),
        ("c64", "<c8", json!([[1.0, -2.0], [0.5, 0.25]])),
        ("c128", "<c16", json!([[1e-300, 2.0], [-3.0, 4.5]])),
    ]
}

/// A graph with one placeholder per dtype, each passed through a replica.
fn graph() -> String {
    let names: Vec<&str> = dtypes().iter().map(|(d, _, _)| *d).collect();
    let mut text = String::from("graph @main {\n");
    for d in &names {
        text += &format!("  %x_{d} = Placeholder() {{dtype = {d}, shape = shape[2]}}\n");
    }
    let inputs: Vec<String> = names.iter().map(|d| format!("%v_{d} = [%x_{d}]")).collect();
    text += &format!("  replicate (num_replicas = 1) ({}) {{\n", inputs.join(", "));
    for d in &names {
        text += &format!("    %y_{d} = Identity(%v_{d}) {{T = {d}}}\n");
    }
    let outputs: Vec<String> = names.iter().map(|d| format!("%y_{d}")).collect();
    text += &format!("    return {}\n  }}\n}}\n", outputs.join(", "));
    text
}

/// Runs `tpu-rewrite run GRAPH ARGS --backend BACKEND --json`, which must succeed.
fn run_json(graph: &Path, backend: &str, args: &[String]) -> Value {
    let out = bin()
        .arg("run")
        .arg(graph)
        .args(args)
        .args(["--backend", backend, "--json"])
        .env("TPU_REWRITE_PJRT_PLUGIN", crate::support::pjrt::plugin_path())
        .env("NO_COLOR", "1")
        .output()
        .expect("the binary runs");
    assert!(out.status.success(), "{backend}: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).expect("--json output")
}

/// Checks that every output of a `--json` run equals the value fed for it.
fn assert_outputs_are_the_feeds(run: &Value, what: &str) {
    let outputs = run["outputs"].as_array().expect("outputs");
    for (d, _, fed) in dtypes() {
        let name = format!("y_{d}:0");
        let o = outputs.iter().find(|o| o["name"] == name.as_str()).unwrap_or_else(|| panic!("{what}: no {name}"));
        assert_eq!(o["dtype"], d, "{what}: {name}");
        assert_eq!(o["per_replica"][0], fed, "{what}: {name}");
    }
}

/// The `descr` of a `.npy` file's header.
fn descr(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let header = String::from_utf8_lossy(&bytes[10..bytes.len().min(128)]).into_owned();
    let start = header.find("'descr': '").expect("a descr") + "'descr': '".len();
    header[start..].split('\'').next().expect("a quoted descr").to_string()
}

#[test]
fn every_dtype_goes_in_and_out_through_json_and_npy_on_both_backends() {
    let dir = tempfile::tempdir().unwrap();
    let graph_path = dir.path().join("dtypes.opg");
    std::fs::write(&graph_path, graph()).unwrap();
    let feeds: serde_json::Map<String, Value> = dtypes().into_iter().map(|(d, _, v)| (format!("x_{d}"), v)).collect();
    let feeds_path = dir.path().join("feeds.json");
    std::fs::write(&feeds_path, Value::Object(feeds).to_string()).unwrap();
    for backend in ["sim", "pjrt"] {
        let npy_dir = dir.path().join(backend);
        let args = [
            "--feeds".to_string(),
            feeds_path.display().to_string(),
            "--npy-dir".to_string(),
            npy_dir.display().to_string(),
        ];
        assert_outputs_are_the_feeds(&run_json(&graph_path, backend, &args), &format!("{backend}, JSON feeds"));
        // The written files carry NumPy's dtypes, and feed the next run to the same values.
        let mut npy_feeds = Vec::new();
        for (d, numpy, _) in dtypes() {
            let file = npy_dir.join(format!("y_{d}_0.npy"));
            assert_eq!(descr(&file), numpy, "{backend}: the .npy of {d}");
            npy_feeds.extend(["--feed".to_string(), format!("x_{d}={}", file.display())]);
        }
        assert_outputs_are_the_feeds(&run_json(&graph_path, backend, &npy_feeds), &format!("{backend}, .npy feeds"));
    }
}

/// Exit code 1 and a report that names `needles`, never a panic.
fn assert_refused(args: &[String], needles: &[&str]) {
    let out = bin().arg("run").args(args).env("NO_COLOR", "1").output().expect("the binary runs");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    for needle in needles {
        assert!(err.contains(needle), "expected {needle:?} in:\n{err}");
    }
}

#[test]
fn feeds_the_readers_cannot_take_name_the_feed_and_the_dtype() {
    let dir = tempfile::tempdir().unwrap();
    let graph_path = dir.path().join("dtypes.opg");
    std::fs::write(&graph_path, graph()).unwrap();
    let graph_arg = graph_path.display().to_string();
    // A NumPy unicode array (`<U3`): no tensor holds it.
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    let mut header = "{'descr': '<U3', 'fortran_order': False, 'shape': (2,), }".to_string();
    while !(10 + header.len() + 1).is_multiple_of(64) {
        header.push(' ');
    }
    header.push('\n');
    bytes.extend((header.len() as u16).to_le_bytes());
    bytes.extend(header.as_bytes());
    bytes.extend([0u8; 24]);
    let npy = dir.path().join("text.npy");
    std::fs::write(&npy, bytes).unwrap();
    assert_refused(&[graph_arg.clone(), "--feed".into(), format!("x_u16={}", npy.display())], &["x_u16", "<U3"]);
    // A JSON value beyond its dtype's range is refused, not wrapped.
    let feeds = dir.path().join("feeds.json");
    std::fs::write(&feeds, r#"{"x_u8": [256, 0]}"#).unwrap();
    assert_refused(&[graph_arg, "--feeds".into(), feeds.display().to_string()], &["x_u8", "a u8 integer"]);
}
