//! TF1 control flow (`Switch`, `Merge`, `Enter`, `Exit`, `NextIteration`,
//! `LoopCond`): the corpus in `tests/tf/corpus/tf1/` (written by
//! `tests/tf/corpus_tf1_control_flow.py` with tensorflow-cpu 2.21.0 and
//! control flow v2 off) runs on the simulator with TensorFlow's numbers, and
//! the replicated loop forms the clusters TensorFlow tagged. The IR accepts a
//! loop's `NextIteration` -> `Merge` back edge and no other cycle; malformed
//! frames are coded errors.

// The helpers return the mesh's error as it is, to match on its variants.
#![allow(clippy::result_large_err)]

use crate::support::corpus;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use corpus::{import, read_json};
use serde_json::Value;
use tpu_rewrite::exec::{ExecError, Feeds, Fetch, Mesh, MeshConfig, Tensor};
use tpu_rewrite::ir::{parse_module, IrError, Module};
use tpu_rewrite::lower::{lower, LowerConfig, Topology};
use tpu_rewrite::passes::cluster_cycles::check_cluster_cycles;
use tpu_rewrite::passes::form_clusters::form_clusters;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tf/corpus/tf1")
}

/// The case names (stems of `*.json` that are not tags), sorted.
fn cases() -> Vec<String> {
    corpus::case_names(&corpus_dir(), "run tests/tf/corpus_tf1_control_flow.py to make it")
}

/// Runs one case on the simulator and compares every fetch with TensorFlow's.
fn run_case(case: &str) {
    corpus::run_on_the_simulator(&corpus_dir(), case);
}

#[test]
fn while_loop() {
    run_case("while_loop");
}

#[test]
fn nested_while() {
    run_case("nested_while");
}

#[test]
fn cond() {
    run_case("cond");
}

#[test]
fn replicated_while() {
    run_case("replicated_while");
}

#[test]
fn every_case_has_a_test() {
    let tested = ["cond", "nested_while", "replicated_while", "replicated_while_outside_compilation", "while_loop"];
    assert_eq!(cases(), tested);
}

#[test]
fn the_tf1_corpus_uses_tf1_control_flow() {
    // Control flow v2 would write While/If instead: each op of the family is in some graph.
    let mut ops = BTreeSet::new();
    for case in cases() {
        let module = import(&corpus_dir(), &case);
        let graph = module.graph("main").expect("@main");
        ops.extend(graph.node_ids().map(|id| graph.node(id).op.to_string()));
    }
    for op in ["Switch", "Merge", "Enter", "Exit", "NextIteration", "LoopCond"] {
        assert!(ops.contains(op), "no graph has {op}");
    }
    assert!(!ops.contains("While") && !ops.contains("If"), "{ops:?}");
}

/// The cluster members and the outside-compilation members TensorFlow tagged in `case`.
type Tagged = (BTreeMap<String, BTreeSet<String>>, BTreeMap<(String, String), BTreeSet<String>>);

fn tensorflow_tags(case: &str) -> Tagged {
    let tags = read_json(&corpus_dir().join(format!("{case}.tags.json")));
    let (mut clusters, mut outside) = Tagged::default();
    for (name, entry) in tags.as_object().expect("tags") {
        if let Some(cluster) = entry.get("R").and_then(Value::as_str) {
            clusters.entry(cluster.to_string()).or_default().insert(name.clone());
            if let Some(oc) = entry.get("OC").and_then(Value::as_str) {
                outside.entry((cluster.to_string(), oc.to_string())).or_default().insert(name.clone());
            }
        }
    }
    (clusters, outside)
}

#[test]
fn replicated_cases_form_the_clusters_tensorflow_tagged() {
    let mut checked = Vec::new();
    for case in cases() {
        if !corpus_dir().join(format!("{case}.tags.json")).exists() {
            continue;
        }
        let (want, want_oc) = tensorflow_tags(&case);
        assert!(!want.is_empty(), "{case}: TensorFlow tagged no cluster");
        let module = import(&corpus_dir(), &case);
        let graph = module.graph("main").expect("@main");
        let (clusters, errors) = form_clusters(graph);
        assert!(errors.iter().all(|e| e.is_warning()), "{case}: {errors:?}");
        let name_of = |id| graph.node(id).name.to_string();
        let got: BTreeMap<String, BTreeSet<String>> =
            clusters.iter().map(|c| (c.name.clone(), c.members.iter().map(|&m| name_of(m)).collect())).collect();
        let got_oc: BTreeMap<(String, String), BTreeSet<String>> = clusters
            .iter()
            .flat_map(|c| {
                c.outside_compilation
                    .iter()
                    .map(|(oc, members)| ((c.name.clone(), oc.clone()), members.iter().map(|&m| name_of(m)).collect()))
            })
            .collect();
        assert_eq!(got, want, "{case}: cluster members");
        assert_eq!(got_oc, want_oc, "{case}: outside-compilation members");
        // The loop is in the cluster, every one of its ops; its back edges close no cluster cycle.
        let members = &want["cluster"];
        for name in
            ["while/Enter", "while/Merge", "while/Switch", "while/LoopCond", "while/NextIteration", "while/Exit"]
        {
            assert!(members.contains(name), "{case}: {name} is not in the cluster");
        }
        assert!(check_cluster_cycles(graph).is_empty(), "{case}: {:?}", check_cluster_cycles(graph));
        checked.push(case);
    }
    assert_eq!(checked, ["replicated_while", "replicated_while_outside_compilation"]);
}

#[test]
fn the_stablehlo_lowering_refuses_tf1_control_flow_with_a_coded_error() {
    let module = import(&corpus_dir(), "replicated_while");
    let topology = Topology::parse("1x2").expect("a topology");
    let assignment = tpu_rewrite::lower::DeviceAssignment::full_mesh(&topology, 2, 1).expect("an assignment");
    let graph = module.graph("main").expect("@main");
    match tpu_rewrite::xla::stablehlo::emit_all(
        graph,
        &assignment,
        1,
        tpu_rewrite::xla::stablehlo::HostTransfer::Callback,
        Some(&module),
    ) {
        Err(e @ tpu_rewrite::xla::XlaError::Lowering { .. }) => {
            let code = miette::Diagnostic::code(&e).map(|c| c.to_string());
            assert_eq!(code.as_deref(), Some("tpu_rewrite::xla::lowering"));
            assert!(e.to_string().contains("TF1 control flow"), "{e}");
        }
        Err(other) => panic!("expected the lowering error, got {other:?}"),
        Ok(_) => panic!("TF1 control flow was lowered to StableHLO"),
    }
}

#[test]
fn replicated_while_outside_compilation() {
    // TensorFlow puts the body's host op in outside-compilation cluster "0", inside the loop.
    let (_, outside) = tensorflow_tags("replicated_while_outside_compilation");
    let key = ("cluster".to_string(), "0".to_string());
    assert!(outside.get(&key).is_some_and(|m| m.contains("while/mul")), "{outside:?}");
    // Lowering moves the host op to its own program with transfers, once per step: inside a loop
    // it would need them once per iteration, which the executor refuses with a coded error.
    let module = import(&corpus_dir(), "replicated_while_outside_compilation");
    let config = LowerConfig {
        topology: Topology { hosts: 1, cores_per_host: 2, job: "worker".into() },
        ..LowerConfig::default()
    };
    let lowered = lower(module.graph("main").expect("@main"), &config).expect("lowers");
    assert!(lowered.module.graph("cluster/oc_0").is_some(), "the host op has its own program");
    match Mesh::new(&lowered.module, MeshConfig::default()) {
        Err(e @ ExecError::ControlFlow { .. }) => {
            let code = miette::Diagnostic::code(&e).map(|c| c.to_string());
            assert_eq!(code.as_deref(), Some("tpu_rewrite::exec::control_flow"));
        }
        other => panic!("expected the control-flow error, got {other:?}"),
    }
}

#[test]
fn every_case_passes_the_verifier_and_round_trips_through_the_text_form() {
    for case in cases() {
        let module = import(&corpus_dir(), &case);
        let errors = tpu_rewrite::ir::verify::verify(&module);
        assert!(errors.is_empty(), "{case}: {errors:?}");
        let text = tpu_rewrite::print_module(&module);
        let (back, errors) = parse_module(text.as_bytes()).unwrap_or_else(|e| panic!("{case}: {e:?}"));
        assert!(errors.is_empty(), "{case}: {errors:?}");
        assert_eq!(tpu_rewrite::print_module(&back), text, "{case}");
    }
}

/// A loop that sums `%x` three times: `i < 3` in the loop frame `f`.
const LOOP: &str = r#"graph @main {
  %x = Placeholder() {dtype = f32, shape = shape[2]}
  %zero = Const() {dtype = i32, value = tensor(i32, []) [0]}
  %acc0 = Const() {dtype = f32, value = tensor(f32, [2]) [0.0, 0.0]}
  %ei = Enter(%zero) {T = i32, frame_name = "f", is_constant = false}
  %ea = Enter(%acc0) {T = f32, frame_name = "f", is_constant = false}
  %ex = Enter(%x) {T = f32, frame_name = "f", is_constant = true}
  %mi = Merge(%ei, %ni) {T = i32, N = 2}
  %ma = Merge(%ea, %na) {T = f32, N = 2}
  %three = Const(^%mi) {dtype = i32, value = tensor(i32, []) [3]}
  %less = Less(%mi, %three) {T = i32}
  %cond = LoopCond(%less)
  %si = Switch(%mi, %cond) {T = i32}
  %sa = Switch(%ma, %cond) {T = f32}
  %one = Const(^%si) {dtype = i32, value = tensor(i32, []) [1]}
  %i2 = AddV2(%si:1, %one) {T = i32}
  %a2 = AddV2(%sa:1, %ex) {T = f32}
  %ni = NextIteration(%i2) {T = i32}
  %na = NextIteration(%a2) {T = f32}
  %out_i = Exit(%si) {T = i32}
  %out = Exit(%sa) {T = f32}
  %twice = Mul(%out, %out) {T = f32}
}
"#;

fn parse(text: &str) -> (Module, Vec<IrError>) {
    parse_module(text.as_bytes()).expect("parses")
}

fn run(text: &str, fetches: &[&str]) -> Result<Vec<Tensor>, ExecError> {
    let (module, errors) = parse(text);
    assert!(errors.is_empty(), "{errors:?}");
    let mesh = Mesh::new(&module, MeshConfig::default())?;
    let feeds = Feeds::new().with("main", "x", Tensor::from_vec(&[2], vec![1.5f32, -2.0]).unwrap());
    let fetches: Vec<Fetch> = fetches.iter().map(|f| Fetch::new("main", *f)).collect();
    mesh.run_step(&feeds, &fetches)
}

#[test]
fn a_loop_written_in_the_text_form_runs() {
    let got = run(LOOP, &["out_i", "out", "twice"]).expect("runs");
    assert_eq!(got[0], Tensor::scalar(3i32));
    assert_eq!(got[1], Tensor::from_vec(&[2], vec![4.5f32, -6.0]).unwrap());
    assert_eq!(got[2], Tensor::from_vec(&[2], vec![20.25f32, 36.0]).unwrap());
}

/// [`LOOP`] with a `ControlTrigger` in the body that waits for the step's `NextIteration` and
/// for `%gate` at the top level, as TensorFlow's gradient loops inside `tpu.replicate` wait for
/// the cluster's pivot.
fn loop_with_a_control_input_from_the_top_level() -> String {
    LOOP.replace("  %zero = Const()", "  %gate = NoOp()\n  %zero = Const()").replace(
        "  %ni = NextIteration(%i2) {T = i32}",
        "  %sync = ControlTrigger(^%gate, ^%i2)\n  %ni = NextIteration(%i2, ^%sync) {T = i32}",
    )
}

/// A control input from an enclosing frame is legal (TensorFlow only requires data to enter
/// through `Enter`): the frame waits for it once. Functionalized, the `While` waits for it.
#[test]
fn a_control_input_from_an_enclosing_frame_is_waited_for_once() {
    let text = loop_with_a_control_input_from_the_top_level();
    let want = run(LOOP, &["out_i", "out", "twice"]).expect("runs");
    assert_eq!(run(&text, &["out_i", "out", "twice"]).expect("runs"), want);
    let (mut module, errors) = parse(&text);
    assert!(errors.is_empty(), "{errors:?}");
    let errors = tpu_rewrite::passes::functionalize::functionalize(&mut module);
    assert!(errors.is_empty(), "{errors:?}");
    let printed = tpu_rewrite::print_module(&module);
    let line = printed.lines().find(|l| l.contains("= While(")).unwrap_or_else(|| panic!("a While: {printed}"));
    assert!(line.contains("^%gate"), "the While waits for %gate: {line}");
    let mesh = Mesh::new(&module, MeshConfig::default()).expect("builds");
    let feeds = Feeds::new().with("main", "x", Tensor::from_vec(&[2], vec![1.5f32, -2.0]).unwrap());
    let fetches: Vec<Fetch> = ["out_i", "out", "twice"].iter().map(|f| Fetch::new("main", *f)).collect();
    assert_eq!(mesh.run_step(&feeds, &fetches).expect("runs"), want);
}

/// A control input from an inner frame to a node outside it (without `Exit`) is refused by the
/// simulator and by functionalize, each with a coded error naming both frames.
#[test]
fn a_control_input_out_of_a_loop_without_exit_is_a_coded_error() {
    let text = LOOP.replace("  %twice = Mul(%out, %out) {T = f32}", "  %twice = Mul(%out, %out, ^%a2) {T = f32}");
    match run(&text, &["twice"]) {
        Err(e @ ExecError::ControlFlow { .. }) => {
            let code = miette::Diagnostic::code(&e).map(|c| c.to_string());
            assert_eq!(code.as_deref(), Some("tpu_rewrite::exec::control_flow"));
            let shown = e.to_string();
            assert!(shown.contains("twice") && shown.contains("a2") && shown.contains("loop frame `f`"), "{shown}");
        }
        other => panic!("expected a control-flow error, got {other:?}"),
    }
    let (mut module, errors) = parse(&text);
    assert!(errors.is_empty(), "{errors:?}");
    let errors = tpu_rewrite::passes::functionalize::functionalize(&mut module);
    let codes: Vec<String> = errors.iter().filter_map(|e| miette::Diagnostic::code(e).map(|c| c.to_string())).collect();
    assert_eq!(codes, ["tpu_rewrite::passes::frame_crossing"], "{errors:?}");
    let shown = errors[0].to_string();
    assert!(shown.contains("`%twice`") && shown.contains("`%a2` from loop frame `f`"), "{shown}");
}

#[test]
fn a_loop_whose_condition_is_false_at_once_runs_no_iteration() {
    let text = LOOP.replace("[3]}", "[0]}");
    let got = run(&text, &["out_i", "out"]).expect("runs");
    assert_eq!(got[0], Tensor::scalar(0i32));
    assert_eq!(got[1], Tensor::from_vec(&[2], vec![0.0f32, 0.0]).unwrap());
}

#[test]
fn the_verifier_accepts_the_back_edge_and_rejects_every_other_cycle() {
    let (_, errors) = parse(LOOP);
    assert!(errors.is_empty(), "{errors:?}");
    // A cycle inside the loop body that does not pass through a back edge.
    let body_cycle = LOOP
        .replace("%a2 = AddV2(%sa:1, %ex)", "%a2 = AddV2(%sa:1, %a3)")
        .replace("  %ni = NextIteration", "  %a3 = Identity(%a2) {T = f32}\n  %ni = NextIteration");
    let (_, errors) = parse(&body_cycle);
    let cycles: Vec<&IrError> = errors.iter().filter(|e| matches!(e, IrError::Cycle { .. })).collect();
    assert_eq!(cycles.len(), 1, "{errors:?}");
    assert_eq!(cycles[0].to_string(), "cycle: %a2 -> %a3 -> %a2");
    let code = miette::Diagnostic::code(cycles[0]).map(|c| c.to_string());
    assert_eq!(code.as_deref(), Some("tpu_rewrite::ir::cycle"));
    // NextIteration into anything but a Merge is no back edge.
    let (_, errors) = parse(
        r#"graph @main {
  %a = Identity(%n) {T = f32}
  %n = NextIteration(%a) {T = f32}
}
"#,
    );
    assert!(matches!(errors.as_slice(), [IrError::Cycle { .. }]), "{errors:?}");
}

#[test]
fn a_value_that_enters_a_loop_without_enter_is_a_coded_error() {
    // The body reads %x directly, not through the constant Enter %ex.
    let text = LOOP.replace("%a2 = AddV2(%sa:1, %ex)", "%a2 = AddV2(%sa:1, %x)");
    match run(&text, &["out"]) {
        Err(e @ ExecError::ControlFlow { .. }) => {
            let code = miette::Diagnostic::code(&e).map(|c| c.to_string());
            assert_eq!(code.as_deref(), Some("tpu_rewrite::exec::control_flow"));
            assert!(e.to_string().contains("loop frame `f`") && e.to_string().contains("top level"), "{e}");
        }
        other => panic!("expected a control-flow error, got {other:?}"),
    }
    let stray_exit = r#"graph @main {
  %x = Placeholder() {dtype = f32, shape = shape[2]}
  %e = Exit(%x) {T = f32}
  %y = Neg(%e) {T = f32}
}
"#;
    match run(stray_exit, &["y"]) {
        Err(ExecError::ControlFlow { node, reason, .. }) => {
            assert_eq!(node, "e");
            assert!(reason.contains("outside every loop"), "{reason}");
        }
        other => panic!("expected a control-flow error, got {other:?}"),
    }
}

/// A top-level cond: `%p` picks Neg or Exp of `%x`, merged; `%dead` reads the untaken side.
const COND: &str = r#"graph @main {
  %x = Placeholder() {dtype = f32, shape = shape[2]}
  %p = Placeholder() {dtype = bool, shape = shape[]}
  %s = Switch(%x, %p) {T = f32}
  %f = Neg(%s:0) {T = f32}
  %t = Exp(%s:1) {T = f32}
  %m = Merge(%f, %t) {T = f32, N = 2}
  %y = Mul(%m, %m) {T = f32}
}
"#;

fn run_cond(text: &str, p: Tensor, fetches: &[&str]) -> Result<Vec<Tensor>, ExecError> {
    let (module, errors) = parse(text);
    assert!(errors.is_empty(), "{errors:?}");
    let mesh = Mesh::new(&module, MeshConfig::default())?;
    let feeds =
        Feeds::new().with("main", "x", Tensor::from_vec(&[2], vec![1.0f32, -2.0]).unwrap()).with("main", "p", p);
    let fetches: Vec<Fetch> = fetches.iter().map(|f| Fetch::new("main", *f)).collect();
    mesh.run_step(&feeds, &fetches)
}

#[test]
fn a_cond_takes_the_live_branch_and_its_merge_says_which() {
    let got = run_cond(COND, Tensor::scalar(false), &["m", "m:1", "y"]).expect("runs");
    assert_eq!(got[0], Tensor::from_vec(&[2], vec![-1.0f32, 2.0]).unwrap());
    assert_eq!(got[1], Tensor::scalar(0i32));
    assert_eq!(got[2], Tensor::from_vec(&[2], vec![1.0f32, 4.0]).unwrap());
    let got = run_cond(COND, Tensor::scalar(true), &["m", "m:1"]).expect("runs");
    assert_eq!(got[0], Tensor::from_vec(&[2], vec![1f32.exp(), (-2f32).exp()]).unwrap());
    assert_eq!(got[1], Tensor::scalar(1i32));
}

#[test]
fn a_dead_tensor_that_leaves_its_region_and_a_bad_predicate_are_errors() {
    // %m1 merges the false side alone, so it is dead when %p is true; %after reads it, past
    // the Merge that closes the cond.
    let text = COND.replace(
        "  %y = Mul(%m, %m) {T = f32}",
        "  %y = Mul(%m, %m) {T = f32}\n  %m1 = Merge(%f) {T = f32, N = 1}\n  %after = Neg(%m1) {T = f32}",
    );
    let (module, _) = parse(&text);
    let mesh = Mesh::new(&module, MeshConfig::default()).expect("builds");
    let feeds = Feeds::new().with("main", "x", Tensor::from_vec(&[2], vec![1.0f32, -2.0]).unwrap()).with(
        "main",
        "p",
        Tensor::scalar(false),
    );
    // The false side is live: %after runs.
    let got = mesh.run_step(&feeds, &[Fetch::new("main", "after")]).expect("runs");
    assert_eq!(got[0], Tensor::from_vec(&[2], vec![1.0f32, -2.0]).unwrap());
    let feeds = feeds.with("main", "p", Tensor::scalar(true));
    let e = mesh.run_step(&feeds, &[Fetch::new("main", "after")]).expect_err("a dead input");
    assert!(format!("{e:?}").contains("dead"), "{e:?}");
    // A fetched dead tensor has no value; the live side can be fetched.
    let e = mesh.run_step(&feeds, &[Fetch::new("main", "f")]).expect_err("dead");
    assert!(matches!(e, ExecError::UnknownTensor { .. }), "{e:?}");
    let got = mesh.run_step(&feeds, &[Fetch::new("main", "t")]).expect("live");
    assert_eq!(got[0], Tensor::from_vec(&[2], vec![1f32.exp(), (-2f32).exp()]).unwrap());
    // The predicate must be one bool.
    let e = run_cond(COND, Tensor::from_vec(&[2], vec![true, false]).unwrap(), &["m"]).expect_err("two preds");
    assert!(format!("{e:?}").contains("bool scalar"), "{e:?}");
}

#[test]
fn a_receive_inside_a_region_is_a_coded_error() {
    // The `_Recv` waits on the taken branch, so it would run inside the cond's region.
    let text = COND.replace(
        "  %y = Mul(%m, %m) {T = f32}",
        "  %y = Mul(%m, %m) {T = f32}\n  %r = _Recv(^%t) {channel = \"c\", dtype = f32}",
    );
    let (module, errors) = parse(&text);
    assert!(errors.is_empty(), "{errors:?}");
    match Mesh::new(&module, MeshConfig::default()) {
        Err(ExecError::ControlFlow { node, reason, .. }) => {
            assert_eq!(node, "r");
            assert!(reason.contains("`_Recv`"), "{reason}");
        }
        other => panic!("expected the control-flow error, got {other:?}"),
    }
}

#[test]
fn the_cluster_cycle_check_ignores_a_loop_back_edge() {
    // A loop inside a cluster whose body runs one op outside compilation: the back edge
    // closes a path device -> host -> device, which is not a cycle between clusters.
    let mut text = String::new();
    for line in LOOP.lines() {
        let tagged = line.starts_with("  %") && !line.contains("Placeholder");
        if tagged && line.contains("%a2 =") {
            text.push_str(
                &line.replace("{T = f32}", "{T = f32, _tpu_replicate = \"c\", _xla_outside_compilation = \"0\"}"),
            );
        } else if tagged {
            text.push_str(&line.replacen('}', ", _tpu_replicate = \"c\"}", 1).replacen("{, ", "{", 1));
        } else {
            text.push_str(line);
        }
        text.push('\n');
    }
    let text = text.replace("%cond = LoopCond(%less)", "%cond = LoopCond(%less) {_tpu_replicate = \"c\"}");
    let (module, errors) = parse(&text);
    assert!(errors.is_empty(), "{errors:?}");
    let graph = module.graph("main").expect("@main");
    let tagged = graph.node_ids().filter(|&id| graph.node(id).attrs.get_str("_tpu_replicate") == Some("c")).count();
    assert_eq!(tagged, graph.node_count() - 1, "{text}");
    assert!(check_cluster_cycles(graph).is_empty(), "{:?}", check_cluster_cycles(graph));
}
