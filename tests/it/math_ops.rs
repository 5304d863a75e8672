//! Elementwise math ops against TensorFlow's own numbers
//! (`tests/tf/corpus/math/math_ops.json`, made by `tests/tf/math_ops.py`):
//! each op's simulator kernel in f32 and f64, and its gradient from the
//! gradients pass run on the simulator, must equal TensorFlow's values to
//! within a few units in the last place (TensorFlow's Eigen kernels and the
//! platform's libm may round differently).

use serde_json::Value;
use tpu_rewrite::exec::kernels::run_kernel;
use tpu_rewrite::exec::Tensor;
use tpu_rewrite::exec::{Feeds, Fetch, Mesh, MeshConfig};
use tpu_rewrite::ir::{parse_module, AttrMap, AttrValue, DType};
use tpu_rewrite::passes::gradients::{expand_gradients, GradientsConfig};

fn corpus() -> Vec<Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/tf/corpus/math/math_ops.json");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let doc: Value = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(doc["tensorflow"], "2.21.0");
    doc["cases"].as_array().expect("cases").clone()
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array().expect("list").iter().map(|x| x.as_f64().expect("number")).collect()
}

/// Agreement to `ulps` units of the dtype's precision, relative to the value (absolute below 1).
fn close(got: f64, want: f64, dtype: &str, ulps: f64) -> bool {
    let eps = if dtype == "float32" { f64::from(f32::EPSILON) } else { f64::EPSILON };
    (got - want).abs() <= ulps * eps * want.abs().max(1.0)
}

fn tensor(dtype: &str, values: &[f64]) -> Tensor {
    match dtype {
        "float32" => Tensor::vector(values.iter().map(|&v| v as f32).collect()),
        _ => Tensor::vector(values.to_vec()),
    }
}

fn as_f64(t: &Tensor) -> Vec<f64> {
    match t.dtype() {
        DType::F32 => t.to_vec::<f32>().unwrap().into_iter().map(f64::from).collect(),
        _ => t.to_vec::<f64>().expect("f64"),
    }
}

#[test]
fn kernels_give_tensorflows_values() {
    let mut failures = Vec::new();
    for case in corpus() {
        let (op, dtype) = (case["op"].as_str().unwrap(), case["dtype"].as_str().unwrap());
        let mut attrs = AttrMap::new();
        attrs.insert("T", AttrValue::Type(if dtype == "float32" { DType::F32 } else { DType::F64 }));
        let out = run_kernel(op, &attrs, &[tensor(dtype, &floats(&case["x"]))]).expect("the kernel runs");
        let got = as_f64(&out[0]);
        for (i, (g, w)) in got.iter().zip(floats(&case["y"])).enumerate() {
            if !close(*g, w, dtype, 4.0) {
                failures.push(format!("{op} {dtype} [{i}]: {g} vs TensorFlow's {w}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `d sum(op(x)) / dx` by the gradients pass, run on the simulator.
fn gradient(op: &str, dtype: &str, x: &[f64]) -> Vec<f64> {
    let t = if dtype == "float32" { "f32" } else { "f64" };
    let source = format!(
        "graph @main {{\n  %x = Placeholder() {{dtype = {t}, shape = shape[{n}]}}\n  %y = {op}(%x) {{T = {t}}}\n  \
         %axes = Const() {{dtype = i32, value = tensor(i32, [1]) [0]}}\n  %s = Sum(%y, %axes) {{T = {t}, keep_dims = false}}\n  \
         %g = gradients(ys = [%s], xs = [%x])\n  %dx = Identity(%g:0) {{T = {t}}}\n}}\n",
        n = x.len()
    );
    let (mut module, errors) = parse_module(source.as_bytes()).expect("parses");
    assert!(errors.is_empty(), "{errors:?}\n{source}");
    let errors = expand_gradients(&mut module.graphs[0], &GradientsConfig::default());
    assert!(errors.is_empty(), "{op}: {errors:?}");
    let mesh = Mesh::new(&module, MeshConfig::default()).expect("the mesh builds");
    let mut feeds = Feeds::new();
    feeds.insert("main", "x", tensor(dtype, x));
    let out = mesh.run_step(&feeds, &[Fetch::new("main", "dx")]).expect("the gradient runs");
    as_f64(&out[0])
}

#[test]
fn gradients_give_tensorflows_values() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for case in corpus() {
        let (op, dtype) = (case["op"].as_str().unwrap(), case["dtype"].as_str().unwrap());
        let x = floats(&case["x"]);
        if case["dydx"].is_null() {
            // TensorFlow passes no gradient (Rint): neither does the pass, so sum(op(x)) has none.
            continue;
        }
        checked += 1;
        for (i, (g, w)) in gradient(op, dtype, &x).iter().zip(floats(&case["dydx"])).enumerate() {
            if !close(*g, w, dtype, 16.0) {
                failures.push(format!("d{op}/dx {dtype} [{i}] at {}: {g} vs TensorFlow's {w}", x[i]));
            }
        }
    }
    assert!(checked >= 20, "{checked} gradient cases");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
