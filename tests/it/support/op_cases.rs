//! The per-op harness: one family of cases made by TensorFlow
//! (`tests/tf/ops_<family>.py` with `tests/tf/op_cases.py`, which documents
//! the files) run on both backends against TensorFlow's numbers.
//!
//! The family's GraphDef is imported as it is. For each case with
//! TensorFlow gradients, the IR's own `gradients(ys = [<case>__loss], xs =
//! [...])` is added and expanded by the gradients pass, so the gradient
//! functions under test are ours, not TensorFlow's. The whole family then
//! runs once as a plain graph on the simulator and once on PJRT (one
//! compiled program): the simulator must give TensorFlow's CPU values, PJRT
//! TensorFlow's XLA values (its CPU values where TensorFlow's bridge does
//! not compile the case), and both TensorFlow's gradients (PJRT the bridge's
//! where a case records them as `xla_grads`). Every mismatch of the family is
//! reported together.

#![allow(dead_code)] // Each test file uses the helpers it needs.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use half::{bf16, f16};
use serde_json::Value;
use tpu_rewrite::exec::{driver, Tensor};
use tpu_rewrite::ir::{parse_module, Module};
use tpu_rewrite::lower::{self, LowerConfig, Topology};
use tpu_rewrite::passes::gradients::{expand_gradients, GradientsConfig};
use tpu_rewrite::passes::single_replica::Unlowered;
use tpu_rewrite::session::plain::{self, PlainConfig};
use tpu_rewrite::tf::{import_graphdef, GraphDefFormat};
use tpu_rewrite::xla::backend;

use super::corpus::{read_json, tensor_of};

/// Where the families live.
fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tf/corpus/ops")
}

/// One case of a family file.
struct Case<'a> {
    name: &'a str,
    rtol: f64,
    doc: &'a Value,
}

impl Case<'_> {
    /// `(node, TensorFlow's value)` of each output, CPU or XLA.
    fn expected(&self, key: &str) -> Vec<(String, Tensor)> {
        let Some(map) = self.doc[key].as_object() else { return Vec::new() };
        map.iter().map(|(k, v)| (k.clone(), tensor_of(v))).collect()
    }

    /// `(placeholder, TensorFlow's gradient)` pairs, when TensorFlow gives gradients.
    fn grads(&self) -> Vec<(String, Tensor)> {
        self.grads_of("grads")
    }

    /// The pairs under `key`: `grads` (TensorFlow's CPU kernels) or `xla_grads` (its XLA bridge).
    fn grads_of(&self, key: &str) -> Vec<(String, Tensor)> {
        let Some(list) = self.doc[key].as_array() else { return Vec::new() };
        list.iter().map(|g| (g["x"].as_str().expect("x").to_string(), tensor_of(&g["value"]))).collect()
    }

    /// The node whose output 0 is our gradient with respect to `x`.
    fn grad_node(&self, x: &str) -> String {
        format!("{}__d_{}", self.name, x.strip_prefix(&format!("{}__", self.name)).unwrap_or(x))
    }
}

/// The family's graph with our gradients added, and every tensor to fetch.
fn graph_with_gradients(family: &str, cases: &[Case]) -> (Module, Vec<String>) {
    let path = dir().join(format!("{family}.pbtxt"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| {
        panic!("{}: {e} (make it with tests/tf/.venv/bin/python tests/tf/ops_{family}.py)", path.display())
    });
    let (module, errors) =
        import_graphdef(&bytes, GraphDefFormat::Text).unwrap_or_else(|e| panic!("{family}: import: {e:?}"));
    assert!(errors.is_empty(), "{family}: import problems: {errors:?}");
    // Our gradients, written in the text IR after the imported graph's nodes.
    let mut lines = String::new();
    let mut fetches = Vec::new();
    for case in cases {
        fetches.extend(case.expected("outputs").into_iter().map(|(n, _)| format!("{n}:0")));
        let grads = case.grads();
        if grads.is_empty() {
            continue;
        }
        let xs: Vec<String> = grads.iter().map(|(x, _)| format!("%{x}")).collect();
        let _ = writeln!(
            lines,
            "  %{}__grads = gradients(ys = [%{}__loss], xs = [{}])",
            case.name,
            case.name,
            xs.join(", ")
        );
        for (k, (x, value)) in grads.iter().enumerate() {
            let t = value.dtype().to_string();
            let node = case.grad_node(x);
            let _ = writeln!(lines, "  %{node} = Identity(%{}__grads:{k}) {{T = {t}}}", case.name);
            fetches.push(format!("{node}:0"));
        }
    }
    let text = tpu_rewrite::emit::text::print_module(&module);
    let main = module.graphs.iter().find(|g| !tpu_rewrite::ir::functions::is_function(g)).expect("a graph");
    let head = format!("graph @{}", main.name);
    let start = text.find(&head).unwrap_or_else(|| panic!("{family}: no `{head}` in the printed module"));
    let end = start + text[start..].find("\n}\n").expect("the graph's closing brace") + 1;
    let source = format!("{}{}{}", &text[..end], lines, &text[end..]);
    let (mut module, errors) = parse_module(source.as_bytes()).unwrap_or_else(|e| panic!("{family}: {e:?}"));
    assert!(errors.is_empty(), "{family}: the graph with gradients does not parse: {errors:?}");
    let index = module.graphs.iter().position(|g| !tpu_rewrite::ir::functions::is_function(g)).expect("a graph");
    let errors = expand_gradients(&mut module.graphs[index], &GradientsConfig::default());
    assert!(errors.is_empty(), "{family}: the gradients pass failed: {errors:?}");
    (module, fetches)
}

/// Which backend runs the family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Backend {
    Sim,
    Pjrt,
}

/// Runs the module's plain graph once on `backend`, fetching `fetches`.
fn run(
    family: &str,
    module: &Module,
    fetches: &[String],
    feeds: &[(String, Tensor)],
    backend: Backend,
) -> Vec<(String, Tensor)> {
    let mut tagged = module.clone();
    let unlowered = match backend {
        Backend::Sim => Unlowered::InCluster,
        Backend::Pjrt => Unlowered::Refuse,
    };
    let config = PlainConfig { fetches, unlowered, variables: &[], skip_initializers: false, data_parallel: None };
    let (single, clusters) = match plain::cluster(&mut tagged, &config) {
        Ok(Some(made)) => made,
        Ok(None) => panic!("{family}: the family graph has a cluster already"),
        Err(errors) => panic!("{family} ({backend:?}): {}", messages(&errors)),
    };
    let graph = tagged.graphs.iter().find(|g| !tpu_rewrite::ir::functions::is_function(g)).expect("a graph");
    let lower_config = LowerConfig { topology: Topology::parse("1x1").expect("a topology"), ..LowerConfig::default() };
    let mut lowered = lower::lower_clusters(graph, clusters, &lower_config)
        .unwrap_or_else(|e| panic!("{family}: lowering failed: {e:?}"));
    tpu_rewrite::ir::functions::carry_functions(&tagged, &mut lowered.module);
    let asked = plain::fetches(&single, graph, fetches);
    let mut fetched = match backend {
        Backend::Sim => {
            driver::run(&lowered.module, feeds, &asked, &driver::RunConfig::default(), &mut |_, _| {})
                .unwrap_or_else(|e| panic!("{family} on the simulator: {}", report(&e)))
                .fetched
        }
        Backend::Pjrt => {
            let plugin = super::pjrt::plugin_path();
            let config = backend::RunConfig {
                plugin: Some(&plugin),
                steps: 1,
                steps_per_run: 1,
                feeds,
                fetch: &asked,
                library: Some(&tagged),
                ..Default::default()
            };
            let outcome = backend::run(graph, &lowered.assignment, &config)
                .unwrap_or_else(|e| panic!("{family} on PJRT: {}", report(&e)));
            let mut by_name: std::collections::HashMap<String, Tensor> = outcome.run.fetched.into_iter().collect();
            asked
                .iter()
                .map(|n| {
                    let t = by_name.remove(n).unwrap_or_else(|| panic!("{family} on PJRT: `{n}` was not fetched"));
                    (n.clone(), t)
                })
                .collect()
        }
    };
    plain::rename_fetched(&single, &mut fetched);
    fetched
}

/// Fetched values by fetch name.
pub type Fetched = Vec<(String, Tensor)>;

/// Runs a module's plain graph once on the simulator and once on PJRT, fetching `fetches`:
/// `(simulator, PJRT)` values by fetch name, for tests of one graph outside a family.
pub fn run_on_both(label: &str, module: &Module, fetches: &[String], feeds: &[(String, Tensor)]) -> (Fetched, Fetched) {
    (run(label, module, fetches, feeds, Backend::Sim), run(label, module, fetches, feeds, Backend::Pjrt))
}

fn messages<E: std::fmt::Debug>(errors: &[E]) -> String {
    errors.iter().map(|e| format!("{e:?}")).collect::<Vec<_>>().join("\n")
}

fn report(e: &dyn miette::Diagnostic) -> String {
    format!("{}{}", e, e.help().map(|h| format!(" (help: {h})")).unwrap_or_default())
}

/// The elements of a float tensor as f64 and the tolerance its dtype
/// allows, or `None` for exact dtypes.
fn floats(t: &Tensor) -> Option<(Vec<f64>, f64)> {
    if let Some(v) = t.to_vec::<f32>() {
        return Some((v.into_iter().map(f64::from).collect(), 0.0));
    }
    if let Some(v) = t.to_vec::<f64>() {
        return Some((v, 0.0));
    }
    // Complex values compare as their interleaved (real, imaginary) parts.
    if let Some(v) = t.to_vec::<num_complex::Complex32>() {
        return Some((v.into_iter().flat_map(|z| [f64::from(z.re), f64::from(z.im)]).collect(), 0.0));
    }
    if let Some(v) = t.to_vec::<num_complex::Complex64>() {
        return Some((v.into_iter().flat_map(|z| [z.re, z.im]).collect(), 0.0));
    }
    // bf16 has 8 significant bits, f16 11: two units in the last place.
    if let Some(v) = t.to_vec::<bf16>() {
        return Some((v.into_iter().map(f64::from).collect(), 2.0 * 2f64.powi(-8)));
    }
    t.to_vec::<f16>().map(|v| (v.into_iter().map(f64::from).collect(), 2.0 * 2f64.powi(-11)))
}

/// `None` when `got` equals TensorFlow's `want` to `rtol` (relative to the
/// magnitude, at least 1; NaN and infinities exactly; other dtypes exactly).
fn mismatch(got: &Tensor, want: &Tensor, rtol: f64) -> Option<String> {
    if got.dtype() != want.dtype() || got.shape() != want.shape() {
        return Some(format!(
            "{}{:?} where TensorFlow gives {}{:?}",
            got.dtype(),
            got.shape(),
            want.dtype(),
            want.shape()
        ));
    }
    match (floats(got), floats(want)) {
        (Some((g, tol)), Some((w, _))) => {
            let tol = tol.max(rtol);
            for (k, (a, b)) in g.iter().zip(&w).enumerate() {
                let ok = if b.is_finite() {
                    (a - b).abs() <= tol * b.abs().max(1.0)
                } else {
                    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
                };
                if !ok {
                    return Some(format!("[{k}] is {a}, TensorFlow gives {b} (tolerance {tol})"));
                }
            }
            None
        }
        _ => (got != want).then(|| format!("{got:?}, TensorFlow gives {want:?}")),
    }
}

/// Runs one family on both backends against TensorFlow's numbers.
pub fn check_family(family: &str) {
    check_family_on(family, &[Backend::Sim, Backend::Pjrt]);
}

/// Runs one family on the simulator only, against TensorFlow's CPU numbers:
/// for a family whose ops have kernels and gradients but no StableHLO
/// lowering yet (the PJRT comparison is what such a family still lacks).
pub fn check_family_on_simulator(family: &str) {
    check_family_on(family, &[Backend::Sim]);
}

fn check_family_on(family: &str, backends: &[Backend]) {
    let doc = read_json(&dir().join(format!("{family}.json")));
    assert_eq!(doc["tensorflow"], "2.21.0", "{family}: made by another TensorFlow");
    let cases: Vec<Case> = doc["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .map(|c| Case { name: c["name"].as_str().expect("name"), rtol: c["rtol"].as_f64().unwrap_or(1e-5), doc: c })
        .collect();
    assert!(!cases.is_empty(), "{family}: no cases");
    let (module, fetches) = graph_with_gradients(family, &cases);
    let mut feeds: Vec<(String, Tensor)> = Vec::new();
    for case in &cases {
        for (name, value) in case.doc["feeds"].as_object().expect("feeds") {
            feeds.push((format!("{name}:0"), tensor_of(value)));
        }
    }
    let mut failures = Vec::new();
    for &backend in backends {
        let got: std::collections::HashMap<String, Tensor> =
            run(family, &module, &fetches, &feeds, backend).into_iter().collect();
        for case in &cases {
            let xla = case.expected("xla");
            let want = match backend {
                Backend::Pjrt if !xla.is_empty() => xla,
                _ => case.expected("outputs"),
            };
            let mut wanted: Vec<(String, Tensor)> = want.into_iter().map(|(n, t)| (format!("{n}:0"), t)).collect();
            // PJRT's gradients are the bridge's where the case records them (their values depend
            // on the sample the backend draws).
            let grads = match backend {
                Backend::Pjrt if case.doc["xla_grads"].is_array() => case.grads_of("xla_grads"),
                _ => case.grads(),
            };
            wanted.extend(grads.into_iter().map(|(x, t)| (format!("{}:0", case.grad_node(&x)), t)));
            for (name, want) in wanted {
                let Some(got) = got.get(&name) else {
                    failures.push(format!("{backend:?} {}: `{name}` was not fetched", case.name));
                    continue;
                };
                if let Some(why) = mismatch(got, &want, case.rtol) {
                    failures.push(format!("{backend:?} {} `{name}`: {why}", case.name));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{family}: {} mismatches:\n{}", failures.len(), failures.join("\n"));
}
