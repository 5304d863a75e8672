//! The IR's own `gradients(...)` through functional control flow, against TensorFlow.
//!
//! `tests/tf/ir_gradients.py` builds small TF 2 graphs with `tf.cond` (If), `tf.switch_case`
//! (Case), `tf.function` calls (PartitionedCall) and `tf.while_loop` (While), and records what
//! `tf.gradients` computes of them. Each test imports the forward graph alone, asks our
//! `gradients(ys = [loss], xs)` of it, runs the expanded graph on the simulator (and, through
//! `tpu-rewrite run --backend pjrt`, on PJRT), and compares the loss and every gradient with
//! TensorFlow's. `examples/rnn_loop.opg` trains like the same RNN trained by TensorFlow.

use std::path::{Path, PathBuf};

use serde_json::Value;
use tpu_rewrite::exec::{Feeds, Fetch, Mesh, MeshConfig};
use tpu_rewrite::ir::{AttrValue, Module, Node, NodeKind};
use tpu_rewrite::passes::{run_pipeline, Pass, PassSelection, PipelineConfig};

use crate::support::corpus::{assert_close, import, read_json, tensor_of};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tf/corpus_ir_gradients")
}

/// The op name of tensor name `name` (`x:0` → `x`).
fn op_of(name: &str) -> &str {
    name.split(':').next().unwrap_or(name)
}

/// Adds `%grads = gradients(ys = [loss], xs = [...])` to `@main`, with one `Identity` per x
/// (`grad_<i>`) to fetch its gradient by.
fn add_gradients(case: &str, module: &mut Module, loss: &str, xs: &[String]) {
    let main = module.graphs.iter_mut().find(|g| g.name == "main").expect("@main");
    let find = |name: &str| main.find(op_of(name)).unwrap_or_else(|| panic!("{case}: no `{name}`"));
    let ys = [find(loss)];
    let xs: Vec<_> = xs.iter().map(|x| find(x)).collect();
    let call = Node {
        kind: NodeKind::Gradients { num_ys: 1, num_xs: xs.len() as u32, has_grad_ys: false },
        ..Node::op("grads", "gradients")
    };
    let call = main.add_node(call).expect("the name is free");
    let edges: Vec<_> = ys.iter().chain(&xs).map(|&n| (n, 0)).collect();
    main.add_data_inputs(call, &edges, Default::default());
    for i in 0..xs.len() {
        let node =
            Node::op(format!("grad_{i}"), "Identity").with_attr("T", AttrValue::Type(tpu_rewrite::ir::DType::F32));
        let id = main.add_node(node).expect("the name is free");
        main.add_data_input(id, call, i as u32, Default::default());
    }
}

/// [`add_gradients`], then the gradients pass.
fn with_gradients(case: &str, module: &mut Module, loss: &str, xs: &[String]) {
    add_gradients(case, module, loss, xs);
    let config = PipelineConfig { passes: PassSelection::Only(vec![Pass::Gradients]), ..PipelineConfig::default() };
    let report = run_pipeline(module, &config);
    let problems: Vec<String> = report.diagnostics.iter().map(|d| format!("{:?}", d.diagnostic())).collect();
    assert!(!report.has_errors() && problems.is_empty(), "{case}: gradients pass: {problems:#?}");
}

/// Checks every run of `case` on the simulator against TensorFlow's loss and gradients.
fn check(case: &str) {
    let meta: Value = read_json(&dir().join(format!("{case}.json")));
    let mut module = import(&dir(), case);
    let loss = meta["loss"].as_str().expect("loss");
    let xs: Vec<String> = meta["xs"].as_array().expect("xs").iter().map(|x| x.as_str().expect("x").into()).collect();
    with_gradients(case, &mut module, loss, &xs);
    let rtol = meta["rtol"].as_f64().expect("rtol");
    let mesh = Mesh::new(&module, MeshConfig::default()).unwrap_or_else(|e| panic!("{case}: {e:?}"));
    let mut fetches = vec![Fetch::new("main", loss)];
    fetches.extend((0..xs.len()).map(|i| Fetch::new("main", format!("grad_{i}:0"))));
    for (r, run) in meta["runs"].as_array().expect("runs").iter().enumerate() {
        let mut feeds = Feeds::new();
        for (name, value) in run["feeds"].as_object().expect("feeds") {
            feeds.insert("main", name.clone(), tensor_of(value));
        }
        let got = mesh.run_step(&feeds, &fetches).unwrap_or_else(|e| panic!("{case}: run {r}: {e}"));
        assert_close(&format!("{case}: run {r}: loss"), &got[0], &tensor_of(&run["loss"]), rtol);
        for (i, want) in run["grads"].as_array().expect("grads").iter().enumerate() {
            let label = format!("{case}: run {r}: d loss / d {}", xs[i]);
            assert_close(&label, &got[1 + i], &tensor_of(want), rtol);
        }
    }
}

#[test]
fn gradient_of_cond_matches_tensorflow() {
    check("cond");
}

#[test]
fn gradient_of_switch_case_matches_tensorflow() {
    check("switch_case");
}

#[test]
fn gradient_of_nested_function_calls_matches_tensorflow() {
    check("call");
}

#[test]
fn gradient_of_an_rnn_while_loop_matches_tensorflow() {
    check("rnn_loop");
}

#[test]
fn gradient_of_a_loop_holding_a_cond_matches_tensorflow() {
    check("loop_with_cond");
}

/// `tpu-rewrite run examples/rnn_loop.opg --steps N --json` (with its sample feeds) on `backend`.
fn run_example(steps: u32, backend: &str) -> Value {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_tpu-rewrite"));
    command.current_dir(env!("CARGO_MANIFEST_DIR")).args([
        "run",
        "examples/rnn_loop.opg",
        "--json",
        "--backend",
        backend,
    ]);
    command.args(["--steps", &steps.to_string()]);
    if backend == "pjrt" {
        command.env("TPU_REWRITE_PJRT_PLUGIN", crate::support::pjrt::plugin_path());
    }
    let out = command.output().expect("the binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "run --backend {backend} failed: {stderr}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("--json output: {e}"))
}

/// The numbers of a JSON value, nested arrays flattened in order.
fn flat(v: &Value) -> Vec<f64> {
    match v {
        Value::Array(items) => items.iter().flat_map(flat).collect(),
        other => vec![other.as_f64().unwrap_or_else(|| panic!("not a number: {other}"))],
    }
}

/// The RNN of `examples/rnn_loop.opg` trains: five steps on `backend` give TensorFlow's losses
/// and variables (the same loop, weights, feeds and update, trained by TF), and the loss falls.
fn rnn_example_trains_like_tensorflow(backend: &str) {
    let want = read_json(&dir().join("rnn_loop_training.json"));
    let steps = want["steps"].as_u64().expect("steps") as u32;
    let rtol = want["rtol"].as_f64().expect("rtol");
    let close = |label: &str, got: &[f64], want: &[f64]| {
        assert_eq!(got.len(), want.len(), "{label}: length");
        for (k, (a, b)) in got.iter().zip(want).enumerate() {
            assert!((a - b).abs() <= rtol * b.abs().max(1.0), "{label}[{k}]: got {a}, TensorFlow computed {b}");
        }
    };
    let last = run_example(steps, backend);
    let loss = |run: &Value| flat(&run["outputs"][0]["per_replica"]);
    let tf_losses = want["losses"].as_array().expect("losses");
    close(&format!("{backend}: loss after {steps} steps"), &loss(&last), &flat(&tf_losses[steps as usize - 1]));
    for var in last["variables"].as_array().expect("variables") {
        let name = var["name"].as_str().expect("name");
        let tf = &want["variables"][name];
        assert!(!tf.is_null(), "TensorFlow has no variable {name}");
        close(&format!("{backend}: variable {name}"), &flat(&var["value"]), &flat(&tf["values"]));
    }
    let first = run_example(1, backend);
    close(&format!("{backend}: loss of step 1"), &loss(&first), &flat(&tf_losses[0]));
    let (before, after): (f64, f64) = (loss(&first).iter().sum(), loss(&last).iter().sum());
    assert!(after < 0.1 * before, "{backend}: the loss falls from {before} to {after} only");
}

#[test]
fn rnn_example_trains_like_tensorflow_on_the_simulator() {
    rnn_example_trains_like_tensorflow("sim");
}

#[test]
fn rnn_example_trains_like_tensorflow_on_pjrt() {
    rnn_example_trains_like_tensorflow("pjrt");
}

/// A loop that carries a variable's handle is refused with the reason, at the loop, not expanded
/// with a silent zero.
#[test]
fn a_loop_carrying_a_resource_is_refused_with_the_reason() {
    let text = r#"graph @main {
  %x = Placeholder() {dtype = f32, shape = shape[2]}
  %v = VarHandleOp() {dtype = f32, shape = shape[2], shared_name = "v"}
  %zero = Const() {dtype = i32, value = tensor(i32, []) [0]}
  %loop = While(%zero, %x, %v) {T = [i32, f32, resource], body = func "body", cond = func "cond"}
  %g = gradients(ys = [%loop:1], xs = [%x])
}

graph @cond (role = "function") {
  %i = _Arg() {T = i32, index = 0}
  %h = _Arg() {T = f32, index = 1}
  %v = _Arg() {T = resource, index = 2}
  %three = Const() {dtype = i32, value = tensor(i32, []) [3]}
  %more = Less(%i, %three) {T = i32}
  %r = _Retval(%more) {T = bool, index = 0}
}

graph @body (role = "function") {
  %i = _Arg() {T = i32, index = 0}
  %h = _Arg() {T = f32, index = 1}
  %v = _Arg() {T = resource, index = 2}
  %one = Const() {dtype = i32, value = tensor(i32, []) [1]}
  %next = AddV2(%i, %one) {T = i32}
  %w = ReadVariableOp(%v) {dtype = f32}
  %h2 = Mul(%h, %w) {T = f32}
  %r0 = _Retval(%next) {T = i32, index = 0}
  %r1 = _Retval(%h2) {T = f32, index = 1}
  %r2 = _Retval(%v) {T = resource, index = 2}
}
"#;
    let (mut module, errors) = tpu_rewrite::ir::parse_module(text.as_bytes()).expect("parses");
    assert!(errors.is_empty(), "{errors:?}");
    let config = PipelineConfig { passes: PassSelection::Only(vec![Pass::Gradients]), ..PipelineConfig::default() };
    let report = run_pipeline(&mut module, &config);
    assert!(report.has_errors(), "the loop was differentiated: {:?}", report.diagnostics);
    let found: Vec<String> = report
        .diagnostics
        .iter()
        .map(|d| {
            format!(
                "{} {}",
                miette::Diagnostic::code(d.diagnostic()).map(|c| c.to_string()).unwrap_or_default(),
                d.diagnostic()
            )
        })
        .collect();
    assert!(
        found.iter().any(|d| d.starts_with("tpu_rewrite::passes::no_gradient")
            && d.contains("%loop")
            && d.contains("type resource")),
        "{found:#?}"
    );
}

/// A tensor of the corpus encoding as nested JSON lists, as `run --feeds` reads them.
fn nested(v: &Value) -> Value {
    let shape: Vec<usize> =
        v["shape"].as_array().expect("shape").iter().map(|d| d.as_u64().expect("dim") as usize).collect();
    let values = v["values"].as_array().expect("values");
    fn nest(values: &[Value], shape: &[usize]) -> Value {
        match shape {
            [] => values[0].clone(),
            [_, rest @ ..] => {
                let inner: usize = rest.iter().product();
                Value::Array(values.chunks(inner.max(1)).map(|c| nest(c, rest)).collect())
            }
        }
    }
    nest(values, &shape)
}

/// Runs every run of `case` through `tpu-rewrite run --backend pjrt` (the gradients call written
/// in the `.opg` text, expanded by the CLI's pipeline): the loss and gradients must be TF's.
fn check_pjrt(case: &str) {
    check_pjrt_or_refusal(case, None);
}

/// [`check_pjrt`], or, with `refused = Some((code, why))`, checks that every run is refused with
/// that diagnostic code and text.
fn check_pjrt_or_refusal(case: &str, refused: Option<(&str, &str)>) {
    let meta: Value = read_json(&dir().join(format!("{case}.json")));
    let mut module = import(&dir(), case);
    let loss = meta["loss"].as_str().expect("loss");
    let xs: Vec<String> = meta["xs"].as_array().expect("xs").iter().map(|x| x.as_str().expect("x").into()).collect();
    add_gradients(case, &mut module, loss, &xs);
    let rtol = meta["rtol"].as_f64().expect("rtol");
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let graph = tmp.path().join(format!("{case}.opg"));
    std::fs::write(&graph, tpu_rewrite::emit::print_module(&module)).expect("writes the graph");
    for (r, run) in meta["runs"].as_array().expect("runs").iter().enumerate() {
        let feeds: serde_json::Map<String, Value> =
            run["feeds"].as_object().expect("feeds").iter().map(|(k, v)| (k.clone(), nested(v))).collect();
        let feeds_path = tmp.path().join(format!("feeds_{r}.json"));
        std::fs::write(&feeds_path, Value::Object(feeds).to_string()).expect("writes the feeds");
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_tpu-rewrite"));
        command.arg("run").arg(&graph).arg("--feeds").arg(&feeds_path).args(["--backend", "pjrt", "--json"]);
        command.args(["--fetch", loss]);
        for i in 0..xs.len() {
            command.args(["--fetch", &format!("grad_{i}:0")]);
        }
        command.env("TPU_REWRITE_PJRT_PLUGIN", crate::support::pjrt::plugin_path());
        let out = command.output().expect("the binary runs");
        if let Some((code, why)) = refused {
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{case}: PJRT ran it");
            assert!(stderr.contains(code) && stderr.contains(why), "{case}: refused with {code} ({why}): {stderr}");
            continue;
        }
        assert!(out.status.success(), "{case}: run {r} on PJRT: {}", String::from_utf8_lossy(&out.stderr));
        let got: Value = serde_json::from_slice(&out.stdout).expect("--json output");
        let outputs = got["outputs"].as_array().expect("outputs");
        let value = |name: &str| {
            let o = outputs.iter().find(|o| o["name"] == name).unwrap_or_else(|| panic!("{case}: no output {name}"));
            flat(&o["value"])
        };
        let close = |label: &str, got: &[f64], want: &Value| {
            let want: Vec<f64> =
                want["values"].as_array().expect("values").iter().map(crate::support::corpus::float_of).collect();
            assert_eq!(got.len(), want.len(), "{label}: length");
            for (k, (a, b)) in got.iter().zip(&want).enumerate() {
                assert!((a - b).abs() <= rtol * b.abs().max(1.0), "{label}[{k}]: got {a}, TensorFlow computed {b}");
            }
        };
        close(&format!("{case}: run {r}: loss on PJRT"), &value(loss), &run["loss"]);
        for (i, want) in run["grads"].as_array().expect("grads").iter().enumerate() {
            close(&format!("{case}: run {r}: d loss / d {} on PJRT", xs[i]), &value(&format!("grad_{i}:0")), want);
        }
    }
}

#[test]
fn gradient_of_cond_matches_tensorflow_on_pjrt() {
    check_pjrt("cond");
}

#[test]
fn gradient_of_switch_case_matches_tensorflow_on_pjrt() {
    check_pjrt("switch_case");
}

#[test]
fn gradient_of_nested_function_calls_matches_tensorflow_on_pjrt() {
    check_pjrt("call");
}

#[test]
fn gradient_of_an_rnn_while_loop_matches_tensorflow_on_pjrt() {
    check_pjrt("rnn_loop");
}

/// A loop whose trip count is fed at run time accumulates into lists of unknown size, which XLA
/// cannot hold: PJRT refuses it at the accumulator, saying why (the simulator runs it, above).
#[test]
fn gradient_of_a_loop_with_a_fed_trip_count_is_refused_on_pjrt() {
    check_pjrt_or_refusal("loop_with_cond", Some(("tpu_rewrite::xla::lowering", "no compile-time capacity")));
}
