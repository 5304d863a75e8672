//! Ops whose output size depends on values, as the StableHLO lowering
//! bounds them (docs/xla.md, "Ops whose output size depends on values"):
//! a padded output leaves the program with its true size as a `size`
//! result, and an op inside the program that reads a padded value (other
//! than an identity or a reduction over the padded axis) is refused, naming
//! it. TensorFlow's numbers for the ops, and for reductions of their
//! outputs, are checked on both backends by `op_cases::dynamic_shape`.

use std::process::Command;

/// `tpu-rewrite lower --format stablehlo <graph> -o <dir>/step.mlir` on
/// `source`: (success, stderr, the signature file if written).
fn lower(source: &str) -> (bool, String, Option<serde_json::Value>) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let graph = dir.path().join("graph.opg");
    std::fs::write(&graph, source).expect("the graph is written");
    let out = dir.path().join("step.mlir");
    let o = Command::new(env!("CARGO_BIN_EXE_tpu-rewrite"))
        .args(["lower", "--format", "stablehlo"])
        .arg(&graph)
        .arg("-o")
        .arg(&out)
        .output()
        .expect("the binary runs");
    let signature = std::fs::read_to_string(dir.path().join("step.mlir.json"))
        .ok()
        .map(|t| serde_json::from_str(&t).expect("the signature is JSON"));
    (o.status.success(), String::from_utf8_lossy(&o.stderr).into_owned(), signature)
}

const UNIQUE: &str = "graph @main {
  %x = Placeholder() {dtype = f32, shape = shape[6]}
  %u = Unique(%x) {T = f32, out_idx = i32}
  %y = Identity(%u:0) {T = f32}
  %idx = Identity(%u:1) {T = i32}
}
";

#[test]
fn a_padded_output_leaves_the_program_with_its_size() {
    let (ok, err, signature) = lower(UNIQUE);
    assert!(ok, "{err}");
    let signature = signature.expect("lower wrote the signature");
    let results = signature["modules"][0]["results"].as_array().expect("results");
    let kinds: Vec<&str> = results.iter().map(|r| r["kind"].as_str().unwrap_or_default()).collect();
    assert_eq!(kinds, ["output", "output", "size"], "{signature}");
    // The values: padded to x's length; the indices: exact.
    let padded = results.iter().position(|r| r["dtype"] == "f32").expect("the values' result");
    assert_eq!(results[padded]["shape"], serde_json::json!([6]), "{signature}");
    let size = &results[2];
    assert_eq!(size["dtype"], "i32", "{signature}");
    assert_eq!(size["shape"], serde_json::json!([]), "{signature}");
    assert_eq!(size["size_of"], serde_json::json!({"result": padded, "axis": 0}), "{signature}");
}

#[test]
fn an_op_reading_a_padded_value_is_refused_by_name() {
    let source = UNIQUE.replace("  %y = Identity(%u:0) {T = f32}\n", "  %y = Neg(%u:0) {T = f32}\n");
    let (ok, err, _) = lower(&source);
    assert!(!ok, "a Neg of Unique's padded values lowered:\n{err}");
    assert!(err.contains("tpu_rewrite::xla::lowering"), "{err}");
    assert!(err.contains("Neg") && err.contains("`u:0`") && err.contains("depends on values"), "{err}");
}

#[test]
fn a_host_op_reading_a_padded_value_is_refused() {
    // Replica 1's values have two distinct values, replica 0's three.
    let source = "graph @main {
  %a = Const() {dtype = f32, value = tensor(f32, [5]) [1.0, 2.0, 1.0, 3.0, 2.0]}
  %b = Const() {dtype = f32, value = tensor(f32, [5]) [4.0, 4.0, 4.0, 4.0, 5.0]}
  replicate (num_replicas = 2) (%x = [%a, %b]) {
    %u = Unique(%x) {T = f32, out_idx = i32}
    outside_compilation {
      %sq = Square(%u:0) {T = f32}
    }
    return %sq
  }
}
";
    let (ok, err, _) = lower(source);
    assert!(!ok, "a host op read Unique's padded values:\n{err}");
    assert!(err.contains("tpu_rewrite::xla::lowering"), "{err}");
    assert!(err.contains("u (Unique)") && err.contains("a host op reads this value"), "{err}");
}

/// What the docs say of the pinned PJRT CPU plugin: it compiles a bounded
/// dynamic type (`set_dimension_size` to a runtime size), and the buffer it
/// returns reads back at its bound, the padding zeroed; the true size is
/// not in the values, which is why programs here return it as a result.
#[test]
fn the_pinned_plugin_returns_a_bounded_dynamic_buffer_at_its_bound() {
    use tpu_rewrite::exec::Tensor;
    use tpu_rewrite::xla::client::{Client, ClientConfig};
    let client =
        Client::new(crate::support::pjrt::loaded(), &ClientConfig { cpu_device_count: Some(1) }).expect("client");
    let module = r#"
module @bounded attributes {mhlo.num_replicas = 1 : i32, mhlo.num_partitions = 1 : i32} {
  func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<i32>) -> tensor<?xf32, #stablehlo.bounds<4>> {
    %0 = "stablehlo.set_dimension_size"(%arg0, %arg1) {dimension = 0 : i64} : (tensor<4xf32>, tensor<i32>) -> tensor<?xf32, #stablehlo.bounds<4>>
    return %0 : tensor<?xf32, #stablehlo.bounds<4>>
  }
}
"#;
    let exe = client.compile("bounded", module, 1, 1).expect("the plugin compiles a bounded dynamic type");
    let x = client.to_device(&Tensor::vector(vec![1f32, 2., 3., 4.]), 0, "x").expect("x on the device");
    let n = client.to_device(&Tensor::scalar(2i32), 0, "n").expect("n on the device");
    let out = exe.execute(&[vec![&x, &n]]).expect("it runs");
    let got = out[0][0].to_host("the result").expect("the result on the host");
    assert_eq!(got, Tensor::vector(vec![1f32, 2., 0., 0.]));
}
