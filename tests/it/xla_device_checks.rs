//! Device checks for integer division by zero, scatter indices out of
//! range and `Assert`s in called functions, on both backends. XLA accepts
//! these in silence (a quotient of -1, a dropped update, an ignored
//! assertion) where TensorFlow's CPU kernels and the simulator refuse
//! them; `run --backend pjrt` checks them on the device.
//!
//! Each case is one op under a two-replica `replicate` reading one fed
//! `i32` tensor: replica 0 is fed an operand both paths accept, replica 1
//! one that TensorFlow's CPU kernels refuse. The operands and TensorFlow's
//! results (on its CPU kernels and under `jit_compile`) come from
//! `tests/tf/known_differences.py` (`device_checks` in its JSON). The
//! simulator fails on replica 1; PJRT fails with
//! `tpu_rewrite::xla::device_check` naming the program, replica 1, the
//! node and the op; and with `--no-device-checks` PJRT gives
//! TensorFlow's `jit_compile` results on both replicas, so the check is
//! what stopped it (and replica 0 shows that both paths agree on the
//! valid operand: integer `Div` truncates).

use crate::support::lowering::{default_fetches, prepare};
use crate::support::pjrt as support;

use miette::Diagnostic;
use tpu_rewrite::exec::{driver, Tensor};
use tpu_rewrite::xla::{backend, XlaError};

/// A case: its name in the JSON, its body (reading `%i`, the fed
/// operand, and defining `%out`), what runs before the `replicate`
/// (variables), and the op the check names.
struct Case {
    name: &'static str,
    setup: &'static str,
    body: &'static str,
    checked: &'static str,
}

const A: &str = "%a = Const() {dtype = i32, value = tensor(i32, [3]) [7, -7, 5]}";
const DATA: &str = "%data = Const() {dtype = f32, value = tensor(f32, [4]) [1.0, 2.0, 3.0, 4.0]}";
const UPDATES: &str = "%u = Const() {dtype = f32, value = tensor(f32, [2]) [1.0, 2.0]}";
const VAR: &str = "%w = VarHandleOp() {dtype = f32, shape = shape[4], shared_name = \"w\"}
  %w_zeros = Const() {dtype = f32, value = tensor(f32, [4]) [0.0, 0.0, 0.0, 0.0]}
  %w_init = AssignVariableOp(%w, %w_zeros) {dtype = f32}";

fn division(op: &'static str) -> Case {
    let body = match op {
        "Div" => "%out = Div(%a, %i) {T = i32}",
        "FloorDiv" => "%out = FloorDiv(%a, %i) {T = i32}",
        _ => "%out = FloorMod(%a, %i) {T = i32}",
    };
    Case { name: op, setup: "", body, checked: op }
}

fn resource_scatter(op: &'static str) -> Case {
    let body = match op {
        "ResourceScatterUpdate" => "%s = ResourceScatterUpdate(%w, %i, %u) {dtype = f32, Tindices = i32}",
        "ResourceScatterAdd" => "%s = ResourceScatterAdd(%w, %i, %u) {dtype = f32, Tindices = i32}",
        _ => "%s = ResourceScatterSub(%w, %i, %u) {dtype = f32, Tindices = i32}",
    };
    Case { name: op, setup: VAR, body, checked: op }
}

fn cases() -> Vec<Case> {
    let mut all: Vec<Case> = ["Div", "FloorDiv", "FloorMod"].into_iter().map(division).collect();
    all.extend([
        Case {
            name: "ScatterNd",
            setup: "",
            body: "%shape = Const() {dtype = i32, value = tensor(i32, [1]) [4]}
                %out = ScatterNd(%i, %u, %shape) {T = f32, Tindices = i32}",
            checked: "ScatterNd",
        },
        Case {
            name: "TensorScatterUpdate",
            setup: "",
            body: "%out = TensorScatterUpdate(%data, %i, %u) {T = f32, Tindices = i32}",
            checked: "TensorScatterUpdate",
        },
        Case {
            name: "TensorScatterAdd",
            setup: "",
            body: "%out = TensorScatterAdd(%data, %i, %u) {T = f32, Tindices = i32}",
            checked: "TensorScatterAdd",
        },
        Case {
            name: "UnsortedSegmentSum",
            setup: "",
            body: "%n = Const() {dtype = i32, value = tensor(i32, []) [4]}
                %out = UnsortedSegmentSum(%data, %i, %n) {T = f32, Tindices = i32, Tnumsegments = i32}",
            checked: "UnsortedSegmentSum",
        },
    ]);
    all.extend(["ResourceScatterUpdate", "ResourceScatterAdd", "ResourceScatterSub"].into_iter().map(resource_scatter));
    all
}

/// TensorFlow's record of a case (`device_checks` in the JSON).
struct Recorded {
    good: Tensor,
    bad: Tensor,
    /// TensorFlow's CPU result for `good`, and under `jit_compile` for each.
    cpu_good: Vec<f64>,
    jit_good: Vec<f64>,
    jit_bad: Vec<f64>,
}

fn recorded(name: &str) -> Recorded {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tf/known_differences.json");
    let text = std::fs::read_to_string(&path).expect("tests/tf/known_differences.json (run the script beside it)");
    let json: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let row = &json["device_checks"][name];
    assert_eq!(
        row["cpu_bad"].as_str(),
        Some("error: InvalidArgumentError"),
        "{name}: TensorFlow's CPU kernel must refuse the bad operand"
    );
    let operand = |key: &str| -> Tensor {
        let v = &row[key];
        let rows = v.as_array().unwrap_or_else(|| panic!("{name}: no {key}"));
        let nested = rows.first().is_some_and(|r| r.is_array());
        let flat: Vec<i32> = if nested {
            rows.iter()
                .flat_map(|r| r.as_array().expect("rows").iter().map(|x| x.as_i64().expect("int") as i32))
                .collect()
        } else {
            rows.iter().map(|x| x.as_i64().expect("int") as i32).collect()
        };
        let shape = if nested { vec![rows.len(), flat.len() / rows.len()] } else { vec![flat.len()] };
        Tensor::from_vec(&shape, flat).expect("the operand")
    };
    let values = |key: &str| -> Vec<f64> {
        let v = row[key].as_array().unwrap_or_else(|| panic!("{name}: no {key}"));
        v.iter().map(|x| x.as_str().expect("a number as text").parse().expect("a number")).collect()
    };
    Recorded {
        good: operand("good"),
        bad: operand("bad"),
        cpu_good: values("cpu_good"),
        jit_good: values("jit_compile_good"),
        jit_bad: values("jit_compile_bad"),
    }
}

/// The module text of a case, `%i` fed per replica (`shape`).
fn source(case: &Case, shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    let dims = dims.join(", ");
    let mut text = String::from("graph @main {\n");
    text.push_str(&format!("  %i0 = Placeholder() {{dtype = i32, shape = shape[{dims}]}}\n"));
    text.push_str(&format!("  %i1 = Placeholder() {{dtype = i32, shape = shape[{dims}]}}\n"));
    if !case.setup.is_empty() {
        text.push_str(&format!("  {}\n", case.setup));
    }
    text.push_str("  replicate (num_replicas = 2) (%i = [%i0, %i1]) {\n");
    for line in [A, DATA, UPDATES].into_iter().chain(case.body.lines()) {
        text.push_str(&format!("    {}\n", line.trim()));
    }
    if !case.setup.is_empty() {
        text.push_str("    %out = ReadVariableOp(%w, ^%s) {dtype = f32}\n");
    }
    text.push_str("    return %out\n  }\n}\n");
    text
}

fn as_f64(t: &Tensor) -> Vec<f64> {
    match t.to_vec::<f32>() {
        Some(v) => v.into_iter().map(f64::from).collect(),
        None => t.to_vec::<i32>().expect("f32 or i32").into_iter().map(f64::from).collect(),
    }
}

fn check(case: &Case) {
    let tf = recorded(case.name);
    assert_eq!(tf.cpu_good, tf.jit_good, "{}: TensorFlow's two paths agree on the valid operand", case.name);
    assert_ne!(tf.cpu_good, tf.jit_bad, "{}: XLA's unchecked result differs from the valid one", case.name);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join(format!("{}.opg", case.name));
    std::fs::write(&path, source(case, tf.good.shape())).expect("writes the case");
    let (tagged, lowered) = prepare(path.to_str().expect("utf-8"), "1x2", 1);
    let graph = &tagged.graphs[0];
    let feeds = vec![("i0:0".to_string(), tf.good.clone()), ("i1:0".to_string(), tf.bad.clone())];
    let fetches = default_fetches(&lowered.module);

    let sim = driver::run(&lowered.module, &feeds, &fetches, &driver::RunConfig::default(), &mut |_, _| {});
    let sim = sim.err().unwrap_or_else(|| panic!("{}: the simulator ran it", case.name)).to_string();
    assert!(sim.contains("replica_1"), "{}: the simulator fails on replica 1: {sim}", case.name);

    let config = support::one_step(&feeds, Some(&tagged));
    let err = match backend::run(graph, &lowered.assignment, &config) {
        Ok(_) => panic!("{}: PJRT ran it with device checks (the simulator said: {sim})", case.name),
        Err(e) => e,
    };
    let code = err.code().map(|c| c.to_string());
    assert_eq!(code.as_deref(), Some("tpu_rewrite::xla::device_check"), "{}: {err:?}", case.name);
    let XlaError::DeviceCheck { program, replica, node, op, .. } = &err else {
        panic!("{}: not a device check: {err:?}", case.name)
    };
    assert_eq!((*replica, op.as_str()), (1, case.checked), "{}: {err}", case.name);
    assert!(program.contains("cluster") && !node.is_empty(), "{}: {err}", case.name);

    let unchecked = backend::RunConfig { no_device_checks: true, ..support::one_step(&feeds, Some(&tagged)) };
    let run = backend::run(graph, &lowered.assignment, &unchecked)
        .unwrap_or_else(|e| panic!("{}: without device checks XLA runs it, but: {e:?}", case.name))
        .run;
    let mut fetched = run.fetched.clone();
    fetched.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(fetched.len(), 2, "{}: one output per replica: {:?}", case.name, run.fetched);
    assert_eq!(as_f64(&fetched[0].1), tf.jit_good, "{}: replica 0 ({})", case.name, fetched[0].0);
    assert_eq!(as_f64(&fetched[1].1), tf.jit_bad, "{}: replica 1 ({}), unchecked", case.name, fetched[1].0);
}

#[test]
fn integer_division_by_zero_fails_on_both_backends() {
    for case in cases().iter().filter(|c| c.setup.is_empty() && c.name.contains("Div") || c.name == "FloorMod") {
        check(case);
    }
}

#[test]
fn scatter_indices_out_of_range_fail_on_both_backends() {
    for case in cases().iter().filter(|c| c.setup.is_empty() && !c.name.contains("Div") && c.name != "FloorMod") {
        check(case);
    }
}

#[test]
fn variable_scatter_indices_out_of_range_fail_on_both_backends() {
    for case in cases().iter().filter(|c| !c.setup.is_empty()) {
        check(case);
    }
}

/// An `Assert` in a function the step calls (as Keras's
/// PiecewiseConstantDecay puts one in a branch): replica 1's condition is
/// false. The simulator and PJRT both stop there; without device checks
/// PJRT runs it as TensorFlow's XLA bridge compiles `Assert`, as nothing.
#[test]
fn an_assert_in_a_called_function_fails_on_both_backends() {
    let text = "graph @main {
  %i0 = Placeholder() {dtype = i32, shape = shape[]}
  %i1 = Placeholder() {dtype = i32, shape = shape[]}
  replicate (num_replicas = 2) (%i = [%i0, %i1]) {
    %out = PartitionedCall(%i) {Tin = [i32], Tout = [i32], f = func \"checked\"}
    return %out
  }
}

graph @checked (role = \"function\") {
  %a = _Arg() {T = i32, index = 0}
  %zero = Const() {dtype = i32, value = tensor(i32, []) [0]}
  %ok = GreaterEqual(%a, %zero) {T = i32}
  %assert = Assert(%ok, %a) {T = [i32], summarize = 3}
  %same = Identity(%a, ^%assert) {T = i32}
  %r = _Retval(%same) {T = i32, index = 0}
}
";
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("assert.opg");
    std::fs::write(&path, text).expect("writes the graph");
    let (tagged, lowered) = prepare(path.to_str().expect("utf-8"), "1x2", 1);
    let graph = &tagged.graphs[0];
    let feeds = vec![("i0:0".to_string(), Tensor::scalar(5i32)), ("i1:0".to_string(), Tensor::scalar(-5i32))];
    let fetches = default_fetches(&lowered.module);

    let sim = driver::run(&lowered.module, &feeds, &fetches, &driver::RunConfig::default(), &mut |_, _| {});
    let sim = sim.err().map(|e| format!("{:?}", miette::Report::new(e))).expect("the simulator stops the step");
    assert!(sim.contains("replica_1") && sim.contains("assertion failed"), "{sim}");

    let err = backend::run(graph, &lowered.assignment, &support::one_step(&feeds, Some(&tagged)))
        .err()
        .expect("PJRT stops the step");
    let XlaError::DeviceCheck { replica, op, .. } = &err else { panic!("not a device check: {err:?}") };
    assert_eq!((*replica, op.as_str()), (1, "Assert"), "{err}");

    let unchecked = backend::RunConfig { no_device_checks: true, ..support::one_step(&feeds, Some(&tagged)) };
    let run = backend::run(graph, &lowered.assignment, &unchecked).unwrap_or_else(|e| panic!("{e:?}")).run;
    let mut fetched: Vec<(String, Vec<i32>)> =
        run.fetched.iter().map(|(n, t)| (n.clone(), t.to_vec::<i32>().expect("i32"))).collect();
    fetched.sort();
    assert_eq!(fetched.iter().map(|f| f.1.clone()).collect::<Vec<_>>(), [vec![5], vec![-5]], "{fetched:?}");
}
