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
//! TensorFlow's numbers too. On PJRT `rnn_plain` is refused (unbounded
//! stacks), and so is `rnn_replicated` for now: its stacks enter the
//! functional `While`s as operands, which the lowering does not carry.

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

/// A run's fetches by name, with the case's metadata (TensorFlow's numbers).
type Fetched = (Vec<(String, Tensor)>, serde_json::Value);

/// `rnn_replicated` on PJRT: the TF1 loops arrive functionalized into `While`s, as the CLI
/// gives them. Returns the run's fetches with TensorFlow's, or the refusal's code and text.
fn rnn_replicated_on_pjrt() -> Result<Fetched, (String, String)> {
    let meta = read_json(&corpus_dir().join("rnn_replicated.json"));
    let mut module = import(&corpus_dir(), "rnn_replicated");
    let errors = tpu_rewrite::passes::functionalize::functionalize(&mut module);
    assert!(errors.is_empty(), "functionalize: {errors:?}");
    let replicas = meta["num_replicas"].as_u64().expect("num_replicas") as u32;
    let config = LowerConfig {
        topology: Topology { hosts: 1, cores_per_host: replicas, job: "worker".into() },
        ..LowerConfig::default()
    };
    let graph = module.graph("main").expect("@main");
    let lowered = lower(graph, &config).unwrap_or_else(|e| panic!("lowering failed: {e:?}"));
    let feeds: Vec<(String, Tensor)> =
        meta["feeds"].as_object().expect("feeds").iter().map(|(n, v)| (n.clone(), tensor_of(v))).collect();
    let fetch: Vec<String> = meta["runs"][0]["fetches"].as_object().expect("fetches").keys().cloned().collect();
    let run_config = backend::RunConfig { fetch: &fetch, ..pjrt::one_step(&feeds, Some(&module)) };
    match backend::run(graph, &lowered.assignment, &run_config) {
        Ok(outcome) => Ok((outcome.run.fetched, meta)),
        Err(e) => {
            let code = miette::Diagnostic::code(&e).map(|c| c.to_string()).unwrap_or_default();
            Err((code, e.to_string()))
        }
    }
}

/// On PJRT the stacks enter the functional `While`s as loop-carried values (a buffer and a
/// depth): the forward loop pushes, the gradient loop pops, and every fetch (the loss, the states
/// and the gradients of both replicas) has TensorFlow's numbers.
#[test]
fn rnn_replicated_runs_on_pjrt_with_tensorflows_numbers() {
    let (fetched, meta) = rnn_replicated_on_pjrt().unwrap_or_else(|(code, text)| panic!("{code}: {text}"));
    let rtol = meta["rtol"].as_f64().expect("rtol");
    let wanted = meta["runs"][0]["fetches"].as_object().expect("fetches");
    assert_eq!(fetched.len(), wanted.len(), "one value per fetch");
    for (name, got) in &fetched {
        let want = wanted.get(name).unwrap_or_else(|| panic!("`{name}` was not fetched by TensorFlow"));
        corpus::assert_close(&format!("rnn_replicated on PJRT: {name}"), got, &tensor_of(want), rtol);
    }
}

/// On XLA a stack needs a compile-time bound: outside an XLA context TensorFlow makes the
/// gradient's stacks unbounded (`max_size` -1), and `lower` refuses the graph with a diagnostic
/// naming a `StackV2` (as tf2xla does).
#[test]
fn rnn_plain_unbounded_stacks_are_refused_by_the_stablehlo_lowering() {
    let file = corpus_dir().join("rnn_plain.pbtxt");
    let out = crate::support::cli::run(&["lower", "--format", "stablehlo", file.to_str().expect("a UTF-8 path")]);
    let err = crate::support::cli::stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("tpu_rewrite::xla::lowering"), "{err}");
    assert!(err.contains("(StackV2)") && err.contains("max_size is -1"), "{err}");
    assert!(err.contains("maximum_iterations"), "{err}");
}
