//! A `dynamic_rnn`-style TF1 `while_loop` over TensorArrays with
//! `tf.gradients` (`tests/tf/corpus/tf1_tensor_array/`, written by
//! `tests/tf/corpus_tf1_tensor_array.py` with TensorFlow 2.21 and control
//! flow v2 off): the gradient loop pops from stacks what the forward loop
//! pushed (`StackV2`, `StackPushV2`, `StackPopV2`). Both cases run on the
//! simulator with TensorFlow's numbers (the loss, the states and the
//! gradients): `rnn_plain` as a plain graph, `rnn_replicated` inside
//! `tpu.replicate` over two replicas, whose gradient loop's `ControlTrigger`
//! has a control input from the cluster's pivot at the top level (legal in
//! TensorFlow: the frame waits for it once). Functionalized into `While`s
//! (the form PJRT gets) `rnn_replicated` runs on the simulator with
//! TensorFlow's numbers too. On PJRT both run with TensorFlow's numbers:
//! the stacks enter the functional `While`s as loop-carried values (a
//! buffer and a depth), `rnn_replicated`'s bounded by the loop's
//! `maximum_iterations` and `rnn_plain`'s (unbounded, `max_size` -1) by the
//! most elements they hold, since the forward loop's trip count is fixed at
//! compile time. An unbounded stack pushed in a loop of run-time length is
//! refused with a diagnostic naming the `StackV2`.

use crate::support::corpus;

use std::path::{Path, PathBuf};

use corpus::{import, read_json, tensor_of};
use tpu_rewrite::exec::{Feeds, Fetch, Mesh, MeshConfig, Tensor};
use tpu_rewrite::lower::{lower, LowerConfig, Topology};
use tpu_rewrite::xla::backend;

use crate::support::pjrt;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tf/corpus/tf1_tensor_array")
}

/// The graphs hold TensorFlow's stack accumulators (else they test nothing here).
#[test]
fn the_gradient_loops_use_stacks() {
    for case in ["rnn_plain", "rnn_replicated"] {
        let module = import(&corpus_dir(), case);
        let main = module.graph("main").expect("@main");
        let count = |op: &str| main.node_ids().filter(|&id| &*main.node(id).op == op).count();
        assert!(count("StackV2") > 0 && count("StackPushV2") == count("StackPopV2"), "{case}");
        assert!(count("TensorArrayGradV3") > 0, "{case}");
    }
}

#[test]
fn rnn_plain_runs_on_the_simulator() {
    corpus::run_on_the_simulator(&corpus_dir(), "rnn_plain");
}

#[test]
fn rnn_replicated_runs_on_the_simulator() {
    corpus::run_on_the_simulator(&corpus_dir(), "rnn_replicated");
}

/// Functionalized (the form PJRT gets), `rnn_replicated` runs on the simulator with
/// TensorFlow's numbers: each TF1 loop becomes a `While`, and the gradient loop's `While` waits
/// for the cluster's pivot its `ControlTrigger` waited for.
#[test]
fn rnn_replicated_functionalized_runs_on_the_simulator() {
    let meta = read_json(&corpus_dir().join("rnn_replicated.json"));
    let rtol = meta["rtol"].as_f64().expect("rtol");
    let mut module = import(&corpus_dir(), "rnn_replicated");
    let errors = tpu_rewrite::passes::functionalize::functionalize(&mut module);
    assert!(errors.is_empty(), "functionalize: {errors:?}");
    let main = module.graph("main").expect("@main");
    let whiles: Vec<_> = main.node_ids().filter(|&id| &*main.node(id).op == "While").collect();
    assert_eq!(whiles.len(), 2, "the forward and the gradient loop");
    let waits = |id| main.inputs(id).iter().any(|i| i.is_control() && &*main.node(i.src).name == "cluster/pivot");
    assert!(whiles.iter().any(|&id| waits(id)), "a While waits for the cluster's pivot");
    let replicas = meta["num_replicas"].as_u64().expect("num_replicas") as u32;
    let lowered = corpus::lower_for("rnn_replicated", &module, replicas);
    let mesh = Mesh::new(&lowered, MeshConfig::default()).unwrap_or_else(|e| panic!("{e:?}"));
    let mut feeds = Feeds::new();
    for (name, value) in meta["feeds"].as_object().expect("feeds") {
        feeds.insert("host", name.clone(), tensor_of(value));
    }
    let wanted: Vec<(&String, &serde_json::Value)> =
        meta["runs"][0]["fetches"].as_object().expect("fetches").iter().collect();
    let fetches: Vec<Fetch> = wanted.iter().map(|(name, _)| Fetch::new("host", name.as_str())).collect();
    let got = mesh.run_step(&feeds, &fetches).unwrap_or_else(|e| panic!("the run failed: {e:?}"));
    assert_eq!(got.len(), wanted.len());
    for (g, (name, want)) in got.iter().zip(&wanted) {
        corpus::assert_close(&format!("rnn_replicated functionalized: {name}"), g, &tensor_of(want), rtol);
    }
}

/// A run's fetches and TensorFlow's values of them, by name.
type Fetched = (Vec<(String, Tensor)>, Vec<(String, Tensor)>);

/// Case `case` on PJRT: the TF1 loops arrive functionalized into `While`s, as the CLI gives
/// them; a plain case is put in a one-replica cluster first (as `tpu.replicate` would wrap it,
/// its fetches renamed). Returns the run's fetches with TensorFlow's values, or the refusal's
/// code and text.
fn on_pjrt(case: &str) -> Result<Fetched, (String, String)> {
    let meta = read_json(&corpus_dir().join(format!("{case}.json")));
    let mut module = import(&corpus_dir(), case);
    let errors = tpu_rewrite::passes::functionalize::functionalize(&mut module);
    assert!(errors.is_empty(), "functionalize: {errors:?}");
    let mut wanted: Vec<(String, Tensor)> = meta["runs"][0]["fetches"]
        .as_object()
        .expect("fetches")
        .iter()
        .map(|(n, v)| (n.clone(), tensor_of(v)))
        .collect();
    if meta["kind"] == "plain" {
        (module, wanted) = crate::tf1_functionalize::in_one_replica_cluster(module, &wanted);
    }
    let replicas = meta["num_replicas"].as_u64().expect("num_replicas") as u32;
    let config = LowerConfig {
        topology: Topology { hosts: 1, cores_per_host: replicas, job: "worker".into() },
        ..LowerConfig::default()
    };
    let graph = module.graph("main").expect("@main");
    let lowered = lower(graph, &config).unwrap_or_else(|e| panic!("lowering failed: {e:?}"));
    let feeds: Vec<(String, Tensor)> =
        meta["feeds"].as_object().expect("feeds").iter().map(|(n, v)| (n.clone(), tensor_of(v))).collect();
    let fetch: Vec<String> = wanted.iter().map(|(n, _)| n.clone()).collect();
    let run_config = backend::RunConfig { fetch: &fetch, ..pjrt::one_step(&feeds, Some(&module)) };
    match backend::run(graph, &lowered.assignment, &run_config) {
        Ok(outcome) => Ok((outcome.run.fetched, wanted)),
        Err(e) => {
            let code = miette::Diagnostic::code(&e).map(|c| c.to_string()).unwrap_or_default();
            Err((code, e.to_string()))
        }
    }
}

/// Runs `case` on PJRT and compares every fetch with TensorFlow's numbers (the case's rtol).
fn runs_on_pjrt_with_tensorflows_numbers(case: &str) {
    let rtol = read_json(&corpus_dir().join(format!("{case}.json")))["rtol"].as_f64().expect("rtol");
    let (fetched, wanted) = on_pjrt(case).unwrap_or_else(|(code, text)| panic!("{case}: {code}: {text}"));
    assert_eq!(fetched.len(), wanted.len(), "{case}: one value per fetch");
    for (name, got) in &fetched {
        let want = wanted.iter().find(|(n, _)| n == name).map(|(_, t)| t);
        let want = want.unwrap_or_else(|| panic!("{case}: `{name}` was not fetched by TensorFlow"));
        corpus::assert_close(&format!("{case} on PJRT: {name}"), got, want, rtol);
    }
}

/// On PJRT the stacks enter the functional `While`s as loop-carried values (a buffer and a
/// depth): the forward loop pushes, the gradient loop pops, and every fetch (the loss, the states
/// and the gradients of both replicas) has TensorFlow's numbers.
#[test]
fn rnn_replicated_runs_on_pjrt_with_tensorflows_numbers() {
    runs_on_pjrt_with_tensorflows_numbers("rnn_replicated");
}

/// Outside an XLA context TensorFlow makes the gradient's stacks unbounded (`max_size` -1): the
/// forward loop runs a number of times fixed at compile time, so each stack gets the most
/// elements it holds, and the plain graph runs on PJRT with TensorFlow's numbers.
#[test]
fn rnn_plain_runs_on_pjrt_with_tensorflows_numbers() {
    runs_on_pjrt_with_tensorflows_numbers("rnn_plain");
}

/// An unbounded stack (`max_size` -1) pushed onto in a loop whose trip count is a fed value
/// has no compile-time bound: `lower` refuses it with a diagnostic naming the `StackV2` and the
/// loop (as tf2xla needs a constant `max_size`).
#[test]
fn an_unbounded_stack_in_a_loop_of_run_time_length_is_refused() {
    let source = r#"graph @main {
  %n = Placeholder() {dtype = i32, shape = shape[]}
  %x = Placeholder() {dtype = f32, shape = shape[2]}
  %unbounded = Const() {dtype = i32, value = tensor(i32, []) [-1]}
  %acc = StackV2(%unbounded) {elem_type = f32, stack_name = ""}
  %zero = Const() {dtype = i32, value = tensor(i32, []) [0]}
  %loop = While(%zero, %n, %x, %acc) {T = [i32, i32, f32, resource], body = func "body", cond = func "cond", parallel_iterations = 10}
}

graph @cond (role = "function") {
  %i = _Arg() {T = i32, index = 0}
  %n = _Arg() {T = i32, index = 1}
  %x = _Arg() {T = f32, index = 2}
  %acc = _Arg() {T = resource, index = 3}
  %less = Less(%i, %n) {T = i32}
  %go = _Retval(%less) {T = bool, index = 0}
}

graph @body (role = "function") {
  %i = _Arg() {T = i32, index = 0}
  %n = _Arg() {T = i32, index = 1}
  %x = _Arg() {T = f32, index = 2}
  %acc = _Arg() {T = resource, index = 3}
  %pushed = StackPushV2(%acc, %x) {T = f32, swap_memory = false}
  %one = Const() {dtype = i32, value = tensor(i32, []) [1]}
  %next = AddV2(%i, %one) {T = i32}
  %r0 = _Retval(%next) {T = i32, index = 0}
  %r1 = _Retval(%n) {T = i32, index = 1}
  %r2 = _Retval(%pushed) {T = f32, index = 2}
  %r3 = _Retval(%acc) {T = resource, index = 3}
}
"#;
    let out = crate::support::cli::run_stdin(&["lower", "--format", "stablehlo", "-"], source.as_bytes());
    let err = crate::support::cli::stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("tpu_rewrite::xla::lowering"), "{err}");
    assert!(err.contains("acc (StackV2)") && err.contains("max_size is -1"), "{err}");
    assert!(err.contains("grows in loop `loop`, whose trip count depends on run-time values"), "{err}");
    assert!(err.contains("maximum_iterations"), "{err}");
}
