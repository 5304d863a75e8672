//! Test support: the pinned PJRT CPU plugin, fetched once into the cache
//! (outside git) under a file lock, so parallel test binaries do not race.
//! A plugin that cannot be fetched fails the test with the reason; it is
//! never skipped.

#![allow(dead_code)] // each test binary uses part of it
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use half::{bf16, f16};
use tpu_rewrite::exec::Tensor;
use tpu_rewrite::ir::{DType, Graph, Module};
use tpu_rewrite::xla::{backend, ffi, plugin};

/// The pinned plugin's path, fetching it first if needed.
pub fn plugin_path() -> PathBuf {
    pinned().to_path_buf()
}

/// A PJRT run of one step on the pinned plugin with `feeds`, fetching
/// every output, the functions of `library` (While/If bodies) available.
pub fn one_step<'a>(feeds: &'a [(String, Tensor)], library: Option<&'a Module>) -> backend::RunConfig<'a> {
    backend::RunConfig { plugin: Some(pinned()), steps: 1, steps_per_run: 1, feeds, library, ..Default::default() }
}

/// The pinned plugin's path, fetched once per test binary.
fn pinned() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let cache = plugin::cache_dir();
        std::fs::create_dir_all(&cache).unwrap_or_else(|e| panic!("cannot create {}: {e}", cache.display()));
        let lock_path = cache.join(".fetch.lock");
        let lock =
            std::fs::File::create(&lock_path).unwrap_or_else(|e| panic!("cannot open {}: {e}", lock_path.display()));
        lock.lock().unwrap_or_else(|e| panic!("cannot lock {}: {e}", lock_path.display()));
        let path = plugin::fetch_pinned()
            .unwrap_or_else(|e| panic!("the PJRT CPU plugin is required and could not be fetched: {e}"));
        drop(lock);
        path
    })
}

/// The pinned plugin's C API header.
pub fn header_path() -> PathBuf {
    plugin_path();
    plugin::cached_header()
}

/// The loaded pinned plugin, shared by the tests of one binary.
pub fn loaded() -> Arc<ffi::Plugin> {
    static PLUGIN: OnceLock<Arc<ffi::Plugin>> = OnceLock::new();
    PLUGIN
        .get_or_init(|| Arc::new(ffi::load(&plugin_path()).unwrap_or_else(|e| panic!("cannot load the plugin: {e}"))))
        .clone()
}

/// Deterministic feeds for every `Placeholder` of a tagged graph: small
/// values in [-2, 2] (floats) or [-3, 3] (ints), varying with position.
pub fn synthetic_feeds(graph: &Graph) -> Vec<(String, Tensor)> {
    let mut out = Vec::new();
    for (k, id) in graph.nodes_in_order().into_iter().enumerate() {
        let node = graph.node(id);
        if &*node.op != "Placeholder" {
            continue;
        }
        let dims = node.attrs.get("shape").and_then(|s| s.as_shape()).and_then(|s| s.dims.clone()).unwrap_or_default();
        let shape: Vec<usize> = dims.iter().map(|&d| d.max(1) as usize).collect();
        let n: usize = shape.iter().product();
        let value = |i: usize| (((i * 7 + k * 13) % 17) as f32 - 8.0) / 4.0;
        let t = match node.attrs.get("dtype").and_then(|v| v.as_type()) {
            Some(DType::I32) => Tensor::from_vec(&shape, (0..n).map(|i| ((i * 3 + k) % 7) as i32 - 3).collect()),
            _ => Tensor::from_vec(&shape, (0..n).map(value).collect()),
        };
        out.push((format!("{}:0", node.name), t.expect("the values fill the shape")));
    }
    out
}

/// The elements of a tensor as f64 and the tolerance of its dtype (0: exact).
pub fn values(t: &Tensor) -> (Vec<f64>, f64) {
    if let Some(v) = t.to_vec::<f32>() {
        return (v.into_iter().map(f64::from).collect(), 1e-4);
    }
    if let Some(v) = t.to_vec::<f64>() {
        return (v, 1e-4);
    }
    if let Some(v) = t.to_vec::<bf16>() {
        return (v.into_iter().map(f64::from).collect(), 2.0 * 2f64.powi(-8));
    }
    if let Some(v) = t.to_vec::<f16>() {
        return (v.into_iter().map(f64::from).collect(), 2.0 * 2f64.powi(-11));
    }
    let exact = |v: Vec<f64>| (v, 0.0);
    match t {
        Tensor::I32(a) => exact(a.iter().map(|&v| f64::from(v)).collect()),
        Tensor::I64(a) => exact(a.iter().map(|&v| v as f64).collect()),
        Tensor::I8(a) => exact(a.iter().map(|&v| f64::from(v)).collect()),
        Tensor::U8(a) => exact(a.iter().map(|&v| f64::from(v)).collect()),
        Tensor::Bool(a) => exact(a.iter().map(|&v| f64::from(u8::from(v))).collect()),
        other => panic!("unexpected {other:?}"),
    }
}
