//! Reading TensorFlow corpus cases (the formats `tests/tf/make_corpus.py`
//! documents): the graph, its metadata and tags, tensors in the corpus
//! encoding, and the comparison with TensorFlow's numbers.

#![allow(dead_code)] // Each test file uses the helpers it needs.

use std::path::Path;

use half::{bf16, f16};
use serde_json::Value;
use tpu_rewrite::exec::Tensor;
use tpu_rewrite::ir::Module;
use tpu_rewrite::tf::{import_graphdef, GraphDefFormat};

/// The JSON file at `path`.
pub fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Imports `dir/case.pbtxt`; any import problem fails the test.
pub fn import(dir: &Path, case: &str) -> Module {
    let path = dir.join(format!("{case}.pbtxt"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (module, errors) = import_graphdef(&bytes, GraphDefFormat::Text).unwrap_or_else(|e| panic!("{case}: {e:?}"));
    assert!(errors.is_empty(), "{case}: import problems: {errors:?}");
    module
}

fn float_of(v: &Value) -> f64 {
    match v {
        Value::String(s) if s == "nan" => f64::NAN,
        Value::String(s) if s == "inf" => f64::INFINITY,
        Value::String(s) if s == "-inf" => f64::NEG_INFINITY,
        other => other.as_f64().unwrap_or_else(|| panic!("not a number: {other}")),
    }
}

/// A tensor from the corpus encoding `{"dtype", "shape", "values"}`.
pub fn tensor_of(v: &Value) -> Tensor {
    let dtype = v["dtype"].as_str().expect("dtype");
    let shape: Vec<usize> =
        v["shape"].as_array().expect("shape").iter().map(|d| d.as_u64().expect("dim") as usize).collect();
    let values = v["values"].as_array().expect("values");
    let ints = || values.iter().map(|x| x.as_i64().expect("an integer"));
    let t = match dtype {
        "float32" => Tensor::from_vec(&shape, values.iter().map(|x| float_of(x) as f32).collect()),
        "float64" => Tensor::from_vec(&shape, values.iter().map(float_of).collect()),
        "bfloat16" => Tensor::from_vec(&shape, values.iter().map(|x| bf16::from_f64(float_of(x))).collect()),
        "float16" => Tensor::from_vec(&shape, values.iter().map(|x| f16::from_f64(float_of(x))).collect()),
        "int32" => Tensor::from_vec(&shape, ints().map(|x| x as i32).collect()),
        "int64" => Tensor::from_vec(&shape, ints().collect()),
        "bool" => Tensor::from_vec(&shape, values.iter().map(|x| x.as_bool().expect("a bool")).collect()),
        other => panic!("dtype {other} is not in the corpus encoding"),
    };
    t.expect("values fill the shape")
}

fn floats(t: &Tensor) -> Option<Vec<f64>> {
    if let Some(v) = t.to_vec::<f32>() {
        return Some(v.into_iter().map(f64::from).collect());
    }
    t.to_vec::<f64>()
}

/// Compares `got` with TensorFlow's `want`: same dtype and shape; floats to
/// `rtol` relative to the magnitude (at least 1); everything else exactly.
pub fn assert_close(label: &str, got: &Tensor, want: &Tensor, rtol: f64) {
    assert_eq!(got.dtype(), want.dtype(), "{label}: dtype");
    assert_eq!(got.shape(), want.shape(), "{label}: shape");
    match (floats(got), floats(want)) {
        (Some(g), Some(w)) => {
            for (k, (a, b)) in g.iter().zip(&w).enumerate() {
                assert!((a - b).abs() <= rtol * b.abs().max(1.0), "{label}[{k}]: got {a}, TensorFlow computed {b}");
            }
        }
        _ => assert_eq!(got, want, "{label}"),
    }
}
