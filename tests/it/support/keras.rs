//! Running a Keras corpus case (the files `tests/tf/corpus_keras.py`
//! writes, its docstring says what they hold) on both backends: the graph
//! forms the clusters TensorFlow tagged, then runs its steps on the
//! simulator and on PJRT (the pinned CPU plugin), where every replica's
//! fetches of the last step and every replica's copy of every variable
//! (weights, optimizer slots, moving statistics) must equal TensorFlow's.

#![allow(dead_code)] // Each test file uses the helpers it needs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;
use tpu_rewrite::exec::driver::{self, RunConfig, RunOutcome};
use tpu_rewrite::exec::Tensor;
use tpu_rewrite::ir::Module;
use tpu_rewrite::lower::{lower, LowerConfig, Topology};
use tpu_rewrite::passes::form_clusters::form_clusters;
use tpu_rewrite::xla::backend;

use super::corpus::{self, assert_close, read_json, tensor_of};

/// The graph of `case` in `dir`, from `.pbtxt` or, for large graphs, `.pb`.
pub fn import(dir: &Path, case: &str) -> Module {
    if dir.join(format!("{case}.pbtxt")).exists() {
        return corpus::import(dir, case);
    }
    let path = dir.join(format!("{case}.pb"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (module, errors) = tpu_rewrite::tf::import_graphdef(&bytes, tpu_rewrite::tf::GraphDefFormat::Binary)
        .unwrap_or_else(|e| panic!("{case}: {e:?}"));
    assert!(errors.is_empty(), "{case}: import problems: {errors:?}");
    module
}

/// The clusters of `@main` equal the `_tpu_replicate` tags TensorFlow set.
pub fn assert_tf_clusters(dir: &Path, case: &str, module: &Module) {
    let tags = read_json(&dir.join(format!("{case}.tags.json")));
    let mut want: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (name, entry) in tags.as_object().expect("tags") {
        if let Some(cluster) = entry.get("R").and_then(Value::as_str) {
            want.entry(cluster.to_string()).or_default().insert(name.clone());
        }
    }
    let graph = module.graph("main").expect("@main");
    let (clusters, errors) = form_clusters(graph);
    assert!(errors.iter().all(|e| e.is_warning()), "{case}: {errors:?}");
    let got: BTreeMap<String, BTreeSet<String>> = clusters
        .iter()
        .map(|c| (c.name.clone(), c.members.iter().map(|&m| graph.node(m).name.to_string()).collect()))
        .collect();
    assert!(!want.is_empty(), "{case}: TensorFlow tagged no cluster");
    assert_eq!(got, want, "{case}: cluster members");
}

/// One backend's results against TensorFlow's: every fetch of the last
/// step and every replica's copy of every variable.
pub fn assert_tf_numbers(label: &str, meta: &Value, outcome: &RunOutcome, rtol: f64) {
    let fetches = meta["runs"][0]["fetches"].as_object().expect("fetches");
    for (name, want) in fetches {
        let got = &outcome.fetched.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("{label}: no {name}")).1;
        assert_close(&format!("{label}: {name}"), got, &tensor_of(want), rtol);
    }
    let after = meta["variables_after"].as_object().expect("variables_after");
    assert!(!after.is_empty(), "{label}: TensorFlow recorded no variable");
    for (var, copies) in after {
        let got = outcome.mirrors.get(var).unwrap_or_else(|| panic!("{label}: no mirrored variable `{var}`"));
        let copies = copies.as_array().expect("one value per replica");
        assert_eq!(got.len(), copies.len(), "{label}: copies of `{var}`");
        for (r, (g, w)) in got.iter().zip(copies).enumerate() {
            assert_close(&format!("{label}: `{var}` on replica {r}"), g, &tensor_of(w), rtol);
        }
    }
}

/// Runs `case` of `dir` on the simulator and on PJRT, each against TensorFlow's numbers.
pub fn check_runs(dir: &Path, case: &str) {
    check_runs_with(dir, case, &|label, meta, outcome, rtol| assert_tf_numbers(label, meta, outcome, rtol));
}

/// How a PJRT run is checked: `(label, the case's JSON, the run, rtol)`.
pub type PjrtCheck<'a> = &'a dyn Fn(&str, &Value, &RunOutcome, f64);

/// Runs `case` of `dir` on the simulator against TensorFlow's numbers and on PJRT, whose run
/// `pjrt` checks (a case that draws stateful random numbers has XLA's stream there, not TF's CPU's).
pub fn check_runs_with(dir: &Path, case: &str, pjrt: PjrtCheck<'_>) {
    let meta = read_json(&dir.join(format!("{case}.json")));
    let rtol = meta["rtol"].as_f64().expect("rtol");
    let steps = meta["steps"].as_u64().expect("steps") as u32;
    let replicas = meta["num_replicas"].as_u64().expect("num_replicas") as u32;
    let module = import(dir, case);
    assert_tf_clusters(dir, case, &module);

    let graph = module.graph("main").expect("@main");
    let config = LowerConfig {
        topology: Topology { hosts: 1, cores_per_host: replicas, job: "worker".into() },
        ..LowerConfig::default()
    };
    let mut lowered = lower(graph, &config).unwrap_or_else(|e| panic!("{case}: lowering failed: {e:?}"));
    tpu_rewrite::ir::functions::carry_functions(&module, &mut lowered.module);
    let feeds: Vec<(String, Tensor)> =
        meta["feeds"].as_object().expect("feeds").iter().map(|(n, v)| (n.clone(), tensor_of(v))).collect();
    let fetches: Vec<String> = meta["runs"][0]["fetches"].as_object().expect("fetches").keys().cloned().collect();

    // A replica of a large model may wait minutes for the other on a loaded
    // two-core machine running the whole suite; the default 30 s is for users.
    let sim_config = RunConfig { steps, timeout: std::time::Duration::from_secs(900), ..RunConfig::default() };
    let sim = driver::run(&lowered.module, &feeds, &fetches, &sim_config, &mut |_, _| {})
        .unwrap_or_else(|e| panic!("{case}: the simulator failed: {:?}", miette::Report::new(e)));
    assert_tf_numbers(&format!("{case} (simulator)"), &meta, &sim, rtol);

    // PJRT gets TF1 control flow as functional While/If, as the CLI gives it.
    let mut functional = module.clone();
    if let Some(e) = tpu_rewrite::passes::functionalize::functionalize(&mut functional).first() {
        panic!("{case}: functionalize failed: {:?}", miette::Report::new(e.clone()));
    }
    let functional_graph = functional.graph("main").expect("@main");
    let functional_lowered =
        lower(functional_graph, &config).unwrap_or_else(|e| panic!("{case}: lowering failed: {e:?}"));
    let pjrt_config = backend::RunConfig { fetch: &fetches, steps, ..super::pjrt::one_step(&feeds, Some(&functional)) };
    match backend::run(functional_graph, &functional_lowered.assignment, &pjrt_config) {
        Ok(outcome) => pjrt(&format!("{case} (pjrt)"), &meta, &outcome.run, rtol),
        Err(e) => panic!("{case}: PJRT refused it: {:?}", miette::Report::new(e)),
    }
}

/// The graphs of `dir` (file stems of `.pbtxt` and `.pb`), sorted; `missing` says how to make them.
pub fn graph_names(dir: &Path, missing: &str) -> Vec<String> {
    let mut found: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e} ({missing})", dir.display()))
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter_map(|n| n.strip_suffix(".pbtxt").or_else(|| n.strip_suffix(".pb")).map(str::to_string))
        .collect();
    found.sort();
    found
}
