//! Reading TensorFlow corpus cases (the formats `tests/tf/make_corpus.py`
//! documents): the graph, its metadata and tags, tensors in the corpus
//! encoding, and the comparison with TensorFlow's numbers.

#![allow(dead_code)] // Each test file uses the helpers it needs.

use std::path::Path;

use half::{bf16, f16};
use serde_json::Value;
use tpu_rewrite::exec::{missing_kernels, Feeds, Fetch, Mesh, MeshConfig, Tensor};
use tpu_rewrite::ir::Module;
use tpu_rewrite::lower::{lower, LowerConfig, Topology};
use tpu_rewrite::tf::{import_graphdef, GraphDefFormat};

/// The case names in `dir`: the stems of its `*.json` files that are not
/// tags (`*.tags.json`), sorted. `missing` says how to make a missing corpus.
pub fn case_names(dir: &Path, missing: &str) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e} ({missing})", dir.display()))
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| n.ends_with(".json") && !n.ends_with(".tags.json"))
        .map(|n| n.trim_end_matches(".json").to_string())
        .collect();
    out.sort();
    out
}

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

/// A number of the corpus encoding (`"nan"`, `"inf"` and `"-inf"` as strings).
pub fn float_of(v: &Value) -> f64 {
    match v {
        Value::String(s) if s == "nan" => f64::NAN,
        Value::String(s) if s == "inf" => f64::INFINITY,
        Value::String(s) if s == "-inf" => f64::NEG_INFINITY,
        other => other.as_f64().unwrap_or_else(|| panic!("not a number: {other}")),
    }
}

/// A tensor from the corpus encoding `{"dtype", "shape", "values"}`;
/// strings are lists of byte values.
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
        "int8" => Tensor::from_vec(&shape, ints().map(|x| x as i8).collect()),
        "uint8" => Tensor::from_vec(&shape, ints().map(|x| x as u8).collect()),
        "int16" => Tensor::from_vec(&shape, ints().map(|x| x as i16).collect()),
        "uint16" => Tensor::from_vec(&shape, ints().map(|x| x as u16).collect()),
        "uint32" => Tensor::from_vec(&shape, ints().map(|x| x as u32).collect()),
        "uint64" => Tensor::from_vec(&shape, values.iter().map(|x| x.as_u64().expect("an unsigned integer")).collect()),
        "bool" => Tensor::from_vec(&shape, values.iter().map(|x| x.as_bool().expect("a bool")).collect()),
        // Interleaved (real, imaginary) pairs.
        "complex64" => Tensor::from_vec(
            &shape,
            values
                .chunks_exact(2)
                .map(|p| num_complex::Complex32::new(float_of(&p[0]) as f32, float_of(&p[1]) as f32))
                .collect(),
        ),
        "complex128" => Tensor::from_vec(
            &shape,
            values.chunks_exact(2).map(|p| num_complex::Complex64::new(float_of(&p[0]), float_of(&p[1]))).collect(),
        ),
        "string" => Tensor::from_vec(
            &shape,
            values
                .iter()
                .map(|s| s.as_array().expect("bytes").iter().map(|b| b.as_u64().expect("a byte") as u8).collect())
                .collect::<Vec<Vec<u8>>>(),
        ),
        other => panic!("dtype {other} is not in the corpus encoding"),
    };
    t.expect("values fill the shape")
}

/// The elements of a float tensor as f64 with the tolerance of its dtype,
/// or `None` for exact dtypes.
fn floats(t: &Tensor) -> Option<(Vec<f64>, f64)> {
    if let Some(v) = t.to_vec::<f32>() {
        return Some((v.into_iter().map(f64::from).collect(), 1e-4));
    }
    if let Some(v) = t.to_vec::<f64>() {
        return Some((v, 1e-4));
    }
    // bf16 has 8 significant bits, f16 11: allow two units in the last place.
    if let Some(v) = t.to_vec::<bf16>() {
        return Some((v.into_iter().map(f64::from).collect(), 2.0 * 2f64.powi(-8)));
    }
    t.to_vec::<f16>().map(|v| (v.into_iter().map(f64::from).collect(), 2.0 * 2f64.powi(-11)))
}

/// Compares `got` with TensorFlow's `want`: same dtype and shape; floats to
/// the larger of `rtol` and the dtype's tolerance, relative to the magnitude
/// (at least 1), NaNs and infinities exactly; everything else exactly.
pub fn assert_close(label: &str, got: &Tensor, want: &Tensor, rtol: f64) {
    assert_eq!(got.dtype(), want.dtype(), "{label}: dtype");
    assert_eq!(got.shape(), want.shape(), "{label}: shape");
    match (floats(got), floats(want)) {
        (Some((g, tol)), Some((w, _))) => {
            let tol = tol.max(rtol);
            for (k, (a, b)) in g.iter().zip(&w).enumerate() {
                let ok = if b.is_finite() {
                    (a - b).abs() <= tol * b.abs().max(1.0)
                } else {
                    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
                };
                assert!(ok, "{label}[{k}]: got {a}, TensorFlow computed {b} (tolerance {tol})");
            }
        }
        _ => assert_eq!(got, want, "{label}"),
    }
}

/// Lowers `@main` of a replicated case for `num_replicas` replicas on one
/// host, with the module's functions carried to the programs.
pub fn lower_for(case: &str, module: &Module, num_replicas: u32) -> Module {
    let config = LowerConfig {
        topology: Topology { hosts: 1, cores_per_host: num_replicas.max(1), job: "worker".into() },
        ..LowerConfig::default()
    };
    let graph = module.graph("main").expect("@main");
    match lower(graph, &config) {
        Ok(mut lowered) => {
            // The bodies of While / If / calls travel with the programs.
            tpu_rewrite::ir::functions::carry_functions(module, &mut lowered.module);
            lowered.module
        }
        Err(e) => panic!("{case}: lowering failed: {e:?}"),
    }
}

/// Runs the TF1 corpus case `case` of `dir` on the simulator (lowered
/// first when its metadata says `replicated`) and compares every fetch
/// with TensorFlow's.
pub fn run_on_the_simulator(dir: &Path, case: &str) {
    let meta = read_json(&dir.join(format!("{case}.json")));
    let rtol = meta["rtol"].as_f64().expect("rtol");
    let module = import(dir, case);
    let (module, graph) = if meta["kind"] == "replicated" {
        let replicas = meta["num_replicas"].as_u64().expect("num_replicas") as u32;
        let lowered = lower_for(case, &module, replicas);
        (lowered, "host")
    } else {
        (module, "main")
    };
    let missing = missing_kernels(&module);
    assert!(missing.is_empty(), "{case}: ops without kernels: {missing:?}");
    let mesh = Mesh::new(&module, MeshConfig::default()).unwrap_or_else(|e| panic!("{case}: {e:?}"));
    let mut feeds = Feeds::new();
    for (name, value) in meta["feeds"].as_object().expect("feeds") {
        feeds.insert(graph, name.clone(), tensor_of(value));
    }
    let run = &meta["runs"][0];
    let wanted: Vec<(&String, &Value)> = run["fetches"].as_object().expect("fetches").iter().collect();
    assert!(!wanted.is_empty(), "{case}: TensorFlow fetched nothing");
    let fetches: Vec<Fetch> = wanted.iter().map(|(name, _)| Fetch::new(graph, name.as_str())).collect();
    let got = mesh.run_step(&feeds, &fetches).unwrap_or_else(|e| panic!("{case}: the run failed: {e:?}"));
    for (g, (name, want)) in got.iter().zip(&wanted) {
        assert_close(&format!("{case}: {name}"), g, &tensor_of(want), rtol);
    }
}
