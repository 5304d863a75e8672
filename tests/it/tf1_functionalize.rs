//! Functionalization of TF1 control flow (`passes::functionalize`): every
//! graph of `tests/tf/corpus/tf1/` that the simulator runs is rewritten into
//! functional `While`/`If` ops, which run on the simulator with the TF1
//! form's results and TensorFlow's numbers; the replicated ones also run
//! with the PJRT backend (the pinned CPU plugin) with the simulator's
//! outputs (|a−b| ≤ 1e-5 + 1e-4·|b|). The plain ones cannot run on PJRT
//! as they are (it compiles replicate clusters): every op of their
//! functional form has a StableHLO lowering, and, put in a one-replica
//! cluster here as `tpu.replicate` would wrap them, they run on PJRT with
//! the simulator's and TensorFlow's numbers.
//! Malformed frames and conditionals are coded errors
//! (`tests/cases/functionalize/err/*.opg`, snapshot per case).

// The helpers return the mesh's error as it is.
#![allow(clippy::result_large_err)]

use crate::support::corpus;

use crate::support::pjrt as support;

use crate::support::cli;

use std::path::{Path, PathBuf};

use corpus::{assert_close, import, read_json, tensor_of};
use serde_json::Value;
use tpu_rewrite::exec::{driver, Feeds, Fetch, Mesh, MeshConfig, Tensor};
use tpu_rewrite::ir::{parse_module, Module};
use tpu_rewrite::lower::{lower, LowerConfig, Topology};
use tpu_rewrite::passes::functionalize::{functionalize, has_tf1_control_flow, TF1_CONTROL_FLOW};
use tpu_rewrite::tf::GraphDefFormat;
use tpu_rewrite::xla::backend;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tf/corpus/tf1")
}

/// The corpus case rewritten into functional form: no error, no TF1 op
/// left, the verifier content, and `parse(print(x)) == x`.
fn functional(case: &str) -> Module {
    let mut module = import(&corpus_dir(), case);
    let errors = functionalize(&mut module);
    assert!(errors.is_empty(), "{case}: {errors:?}");
    for graph in &module.graphs {
        assert!(!has_tf1_control_flow(graph), "{case}: @{} keeps TF1 control flow", graph.name);
    }
    let errors = tpu_rewrite::ir::verify::verify(&module);
    assert!(errors.is_empty(), "{case}: {errors:?}");
    let text = tpu_rewrite::print_module(&module);
    let (back, errors) = parse_module(text.as_bytes()).unwrap_or_else(|e| panic!("{case}: {e:?}"));
    assert!(errors.is_empty(), "{case}: {errors:?}\n{text}");
    assert!(back == module, "{case}: parse(print(x)) != x\n{text}");
    module
}

/// Tensors by name.
type Named = Vec<(String, Tensor)>;

/// The metadata, the feeds and TensorFlow's fetches of a case.
fn meta(case: &str) -> (Value, Named, Named) {
    let meta = read_json(&corpus_dir().join(format!("{case}.json")));
    let feeds = meta["feeds"].as_object().expect("feeds").iter().map(|(n, v)| (n.clone(), tensor_of(v))).collect();
    let wanted = meta["runs"][0]["fetches"]
        .as_object()
        .expect("fetches")
        .iter()
        .map(|(n, v)| (n.clone(), tensor_of(v)))
        .collect();
    (meta, feeds, wanted)
}

fn replicas(meta: &Value) -> u32 {
    meta["num_replicas"].as_u64().expect("num_replicas") as u32
}

fn lower_config(replicas: u32) -> LowerConfig {
    LowerConfig {
        topology: Topology { hosts: 1, cores_per_host: replicas, job: "worker".into() },
        ..LowerConfig::default()
    }
}

/// Runs `module` (a plain graph, or lowered when replicated) on the simulator.
fn simulate(case: &str, module: &Module, fetches: &[String]) -> Vec<Tensor> {
    let (meta, feeds, _) = meta(case);
    let (module, graph) = if meta["kind"] == "replicated" {
        let mut lowered = lower(module.graph("main").expect("@main"), &lower_config(replicas(&meta)))
            .unwrap_or_else(|e| panic!("{case}: lowering failed: {e:?}"));
        tpu_rewrite::ir::functions::carry_functions(module, &mut lowered.module);
        (lowered.module, "host")
    } else {
        (module.clone(), "main")
    };
    let mesh = Mesh::new(&module, MeshConfig::default()).unwrap_or_else(|e| panic!("{case}: {e:?}"));
    let mut f = Feeds::new();
    for (name, value) in feeds {
        f.insert(graph, name, value);
    }
    let fetches: Vec<Fetch> = fetches.iter().map(|n| Fetch::new(graph, n.as_str())).collect();
    mesh.run_step(&f, &fetches).unwrap_or_else(|e| panic!("{case}: the run failed: {e:?}"))
}

/// The functional form runs on the simulator with the TF1 form's results
/// and TensorFlow's numbers; returns it.
fn same_on_the_simulator(case: &str) -> Module {
    let (meta, _, wanted) = meta(case);
    let rtol = meta["rtol"].as_f64().expect("rtol");
    let names: Vec<String> = wanted.iter().map(|w| w.0.clone()).collect();
    let tf1 = simulate(case, &import(&corpus_dir(), case), &names);
    let module = functional(case);
    let got = simulate(case, &module, &names);
    for ((name, want), (g, t)) in wanted.iter().zip(got.iter().zip(&tf1)) {
        assert_close(&format!("{case}: {name} (functional vs TF1)"), g, t, rtol);
        assert_close(&format!("{case}: {name} (functional vs TensorFlow)"), g, want, rtol);
    }
    // Written as a GraphDef (its new functions as FunctionDefs, text and
    // binary) and read back, it runs with TensorFlow's numbers again.
    for format in [GraphDefFormat::Text, GraphDefFormat::Binary] {
        let back = through_graphdef(&module, format);
        assert_eq!(back.graphs.len(), module.graphs.len(), "{case}: every function comes back");
        let again = simulate(case, &back, &names);
        for ((name, want), g) in wanted.iter().zip(&again) {
            assert_close(&format!("{case}: {name} (through a {format:?} GraphDef vs TensorFlow)"), g, want, rtol);
        }
    }
    module
}

/// `module` written as one GraphDef whose library holds its functions, and
/// imported again.
fn through_graphdef(module: &Module, format: GraphDefFormat) -> Module {
    use tpu_rewrite::ir::functions::is_function;
    let main = module.graphs.iter().find(|g| !is_function(g)).expect("a top-level graph");
    let functions: Vec<&tpu_rewrite::Graph> = module.graphs.iter().filter(|g| is_function(g)).collect();
    let graph_def = tpu_rewrite::tf::to_graphdef_with_functions(main, &functions).expect("exports");
    let bytes = match format {
        GraphDefFormat::Text => tpu_rewrite::tf::pbtxt_print::print_graphdef(&graph_def).into_bytes(),
        GraphDefFormat::Binary => prost::Message::encode_to_vec(&graph_def),
    };
    let (back, errors) = tpu_rewrite::tf::import_graphdef(&bytes, format).expect("imports");
    assert!(errors.is_empty(), "{errors:?}");
    back
}

/// Every op of every graph has a StableHLO lowering (what `lower --format
/// stablehlo` needs; plain graphs cannot be emitted until the plain-graph
/// path lands).
fn every_op_lowers(case: &str, module: &Module) {
    for graph in &module.graphs {
        for id in graph.node_ids() {
            let op = &graph.node(id).op;
            if graph.name == "main" && &**op == "Placeholder" {
                continue;
            }
            assert!(
                tpu_rewrite::xla::stablehlo::lowering_of(op).is_some(),
                "{case}: @{} `{op}` has no StableHLO lowering ({:?})",
                graph.name,
                tpu_rewrite::xla::stablehlo::unlowered_reason(op)
            );
        }
    }
}

fn plain(case: &str) {
    let module = same_on_the_simulator(case);
    every_op_lowers(case, &module);
}

#[test]
fn while_loop() {
    plain("while_loop");
}

#[test]
fn nested_while() {
    let module = same_on_the_simulator("nested_while");
    every_op_lowers("nested_while", &module);
    // Three loops, the inner one inside the outer body: three While ops, two at the top.
    let whiles = |g: &tpu_rewrite::Graph| g.node_ids().filter(|&id| &*g.node(id).op == "While").count();
    assert_eq!(whiles(module.graph("main").unwrap()), 2);
    assert_eq!(module.graphs.iter().map(whiles).sum::<usize>(), 3);
}

#[test]
fn cond() {
    let module = same_on_the_simulator("cond");
    every_op_lowers("cond", &module);
    // Four top-level conditionals; c3 and c4 each hold one more in their true branch.
    let ifs = |g: &tpu_rewrite::Graph| g.node_ids().filter(|&id| &*g.node(id).op == "If").count();
    assert_eq!(ifs(module.graph("main").unwrap()), 4);
    assert_eq!(module.graphs.iter().map(ifs).sum::<usize>(), 6);
}

/// `module` on PJRT against the simulator (both on the lowering for
/// `replicas`) and TensorFlow's numbers `wanted` (fetched by name).
fn pjrt_matches(case: &str, module: &Module, replicas: u32, wanted: &[(String, Tensor)]) {
    let (meta, feeds, _) = meta(case);
    let rtol = meta["rtol"].as_f64().expect("rtol");
    let graph = module.graph("main").expect("@main");
    let mut lowered =
        lower(graph, &lower_config(replicas)).unwrap_or_else(|e| panic!("{case}: lowering failed: {e:?}"));
    tpu_rewrite::ir::functions::carry_functions(module, &mut lowered.module);
    let fetches: Vec<String> = wanted.iter().map(|w| w.0.clone()).collect();
    let sim = driver::run(&lowered.module, &feeds, &fetches, &driver::RunConfig::default(), &mut |_, _| {})
        .unwrap_or_else(|e| panic!("{case}: the simulator failed: {e}"));
    let config = support::one_step(&feeds, Some(module));
    let pjrt = backend::run(graph, &lowered.assignment, &config).unwrap_or_else(|e| panic!("{case}: {e:?}")).run;
    for (name, want) in wanted {
        let got = &pjrt.fetched.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("{case}: no {name}")).1;
        let sim_value = &sim.fetched.iter().find(|(n, _)| n == name).expect("the simulator fetched it").1;
        assert_close(&format!("{case}: {name} (pjrt vs simulator)"), got, sim_value, rtol);
        assert_close(&format!("{case}: {name} (pjrt vs TensorFlow)"), got, want, rtol.max(1e-4));
    }
    assert_eq!(pjrt.mirrors.keys().collect::<Vec<_>>(), sim.mirrors.keys().collect::<Vec<_>>(), "{case}");
    for (var, copies) in &sim.mirrors {
        for (r, (got, want)) in pjrt.mirrors[var].iter().zip(copies).enumerate() {
            assert_close(&format!("{case}: `{var}` on replica {r}"), got, want, rtol);
        }
    }
}

/// A replicated case's functional form on PJRT.
fn on_pjrt(case: &str) {
    let module = same_on_the_simulator(case);
    let (meta, _, wanted) = meta(case);
    pjrt_matches(case, &module, replicas(&meta), &wanted);
}

/// A plain graph put in a one-replica cluster, as `tpu.replicate` would
/// wrap it: every op but the placeholders tagged `_tpu_replicate = "c"`,
/// a `TPUReplicateMetadata`, and fetch `i` returned through
/// `TPUReplicatedOutput` as `output_<i>_shard_0`. Returns the module and
/// TensorFlow's numbers under the new names.
pub(crate) fn in_one_replica_cluster(
    mut module: Module,
    wanted: &[(String, Tensor)],
) -> (Module, Vec<(String, Tensor)>) {
    use tpu_rewrite::ir::{AttrValue, Node};
    let graph = module.graphs.iter_mut().find(|g| g.name == "main").expect("@main");
    let ops: Vec<_> = graph.node_ids().filter(|&id| &*graph.node(id).op != "Placeholder").collect();
    for id in ops {
        graph.node_mut(id).attrs.insert("_tpu_replicate", AttrValue::str("c"));
    }
    let metadata = Node::op("TPUReplicateMetadata", "TPUReplicateMetadata")
        .with_attr("_tpu_replicate", AttrValue::str("c"))
        .with_attr("num_replicas", AttrValue::Int(1))
        .with_attr("num_cores_per_replica", AttrValue::Int(1));
    graph.add_node(metadata).expect("a free name");
    let mut renamed = Vec::new();
    for (i, (name, want)) in wanted.iter().enumerate() {
        let (node, output) = name.split_once(':').expect("a tensor name");
        let src = graph.find(node).unwrap_or_else(|| panic!("no {node}"));
        let dtype = AttrValue::Type(want.dtype());
        let out = graph
            .add_node(
                Node::op(format!("output{i}"), "TPUReplicatedOutput")
                    .with_attr("T", dtype.clone())
                    .with_attr("num_replicas", AttrValue::Int(1)),
            )
            .expect("a free name");
        graph.add_data_input(out, src, output.parse().expect("an output index"), tpu_rewrite::Span::DETACHED);
        let shard = graph
            .add_node(Node::op(format!("output_{i}_shard_0"), "Identity").with_attr("T", dtype))
            .expect("a free name");
        graph.add_data_input(shard, out, 0, tpu_rewrite::Span::DETACHED);
        renamed.push((format!("output_{i}_shard_0:0"), want.clone()));
    }
    let errors = tpu_rewrite::ir::verify::verify(&module);
    assert!(errors.is_empty(), "{errors:?}");
    (module, renamed)
}

/// A plain case's functional form, in a one-replica cluster, on PJRT.
fn plain_on_pjrt(case: &str, module: Module) {
    let (_, _, wanted) = meta(case);
    let (module, wanted) = in_one_replica_cluster(module, &wanted);
    pjrt_matches(case, &module, 1, &wanted);
}

#[test]
fn plain_while_loop_in_a_one_replica_cluster_runs_on_pjrt() {
    plain_on_pjrt("while_loop", functional("while_loop"));
}

#[test]
fn plain_nested_while_in_a_one_replica_cluster_runs_on_pjrt() {
    plain_on_pjrt("nested_while", functional("nested_while"));
}

#[test]
fn plain_cond_in_a_one_replica_cluster_runs_on_pjrt() {
    plain_on_pjrt("cond", functional("cond"));
}

#[test]
fn replicated_while_runs_on_pjrt() {
    on_pjrt("replicated_while");
}

#[test]
fn the_functional_loop_keeps_the_cluster_tags() {
    let module = functional("replicated_while");
    let main = module.graph("main").unwrap();
    let while_op = main.node_ids().find(|&id| &*main.node(id).op == "While").expect("a While");
    assert_eq!(main.node(while_op).attrs.get_str("_tpu_replicate"), Some("cluster"));
    // The Exits keep their names, as Identities of the While, in the cluster.
    let exit = main.node(main.find("while/Exit_1").expect("the Exit keeps its name"));
    assert_eq!((&*exit.op, exit.attrs.get_str("_tpu_replicate")), ("Identity", Some("cluster")));
    // Function bodies carry no cluster tag; the cond inside the body became an If there.
    for f in tpu_rewrite::ir::functions::functions(&module) {
        assert!(f.node_ids().all(|id| f.node(id).attrs.get_str("_tpu_replicate").is_none()), "@{}", f.name);
    }
    let body = module.graph("while_body").expect("the body function");
    assert!(body.node_ids().any(|id| &*body.node(id).op == "If"), "{}", tpu_rewrite::print_module(&module));
}

#[test]
fn outside_compilation_inside_a_tf1_loop_is_refused_with_a_coded_error() {
    let mut module = import(&corpus_dir(), "replicated_while_outside_compilation");
    let before = tpu_rewrite::print_module(&module);
    let errors = functionalize(&mut module);
    let [error] = &errors[..] else { panic!("expected one error, got {errors:?}") };
    let code = miette::Diagnostic::code(error).map(|c| c.to_string());
    assert_eq!(code.as_deref(), Some("tpu_rewrite::passes::outside_compilation_in_control_flow"));
    assert!(error.to_string().contains("while/Identity_2"), "{error}");
    // The graph is left as it was.
    assert_eq!(tpu_rewrite::print_module(&module), before);
}

#[test]
fn every_case_is_covered() {
    let cases = corpus::case_names(&corpus_dir(), "the tf1 corpus");
    assert_eq!(
        cases,
        ["cond", "nested_while", "replicated_while", "replicated_while_outside_compilation", "while_loop"]
    );
}

/// A loop that adds `%x` to an accumulator three times, with a cond in its
/// body and an index output of a Merge used after a top-level cond.
const LOOP: &str = r#"graph @main {
  %x = Placeholder() {dtype = f32, shape = shape[2]}
  %p = Placeholder() {dtype = bool, shape = shape[]}
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
  %s = Switch(%out, %p) {T = f32}
  %neg = Neg(%s) {T = f32}
  %exp = Exp(%s:1) {T = f32}
  %m = Merge(%neg, %exp) {T = f32, N = 2}
  %which = Cast(%m:1) {SrcT = i32, DstT = f32}
}
"#;

#[test]
fn a_text_loop_and_cond_run_alike_in_both_forms() {
    let (tf1, errors) = parse_module(LOOP.as_bytes()).expect("parses");
    assert!(errors.is_empty(), "{errors:?}");
    let mut module = tf1.clone();
    let errors = functionalize(&mut module);
    assert!(errors.is_empty(), "{errors:?}");
    assert!(tpu_rewrite::ir::verify::verify(&module).is_empty());
    let text = tpu_rewrite::print_module(&module);
    assert!(text.contains("%f/While = While(%zero, %acc0, %x)"), "{text}");
    let (back, errors) = parse_module(text.as_bytes()).expect("parses");
    assert!(errors.is_empty() && back == module, "{errors:?}\n{text}");
    for p in [false, true] {
        let run = |m: &Module| {
            let mesh = Mesh::new(m, MeshConfig::default()).expect("builds");
            let feeds = Feeds::new().with("main", "x", Tensor::from_vec(&[2], vec![1.5f32, -2.0]).unwrap()).with(
                "main",
                "p",
                Tensor::scalar(p),
            );
            let fetches: Vec<Fetch> =
                ["out_i", "out", "m", "m:1", "which"].iter().map(|f| Fetch::new("main", *f)).collect();
            mesh.run_step(&feeds, &fetches).expect("runs")
        };
        let (a, b) = (run(&tf1), run(&module));
        assert_eq!(a, b, "p = {p}");
        assert_eq!(b[0], Tensor::scalar(3i32));
        assert_eq!(b[1], Tensor::from_vec(&[2], vec![4.5f32, -6.0]).unwrap());
        assert_eq!(b[3], Tensor::scalar(i32::from(p)));
    }
}

/// The snapshots of the malformed cases: each gives coded errors, and the
/// graph is left as it was.
#[test]
fn malformed_frames_and_conds_are_coded_errors() {
    insta::glob!("../cases/functionalize", "err/*.opg", |path| {
        let bytes = std::fs::read(path).unwrap();
        let (mut module, errors) = parse_module(&bytes).expect("parses");
        assert!(errors.is_empty(), "{}: {errors:?}", path.display());
        let before = tpu_rewrite::print_module(&module);
        let errors = functionalize(&mut module);
        assert!(!errors.is_empty(), "{} functionalizes", path.display());
        assert_eq!(tpu_rewrite::print_module(&module), before, "{}", path.display());
        let name = format!("cases/{}", path.file_name().unwrap().to_string_lossy());
        let diagnostics: Vec<tpu_rewrite::diagnostics::AnyDiagnostic> =
            errors.into_iter().map(|e| Box::new(e) as tpu_rewrite::diagnostics::AnyDiagnostic).collect();
        insta::assert_snapshot!(tpu_rewrite::diagnostics::render_plain(diagnostics, &name, &bytes, 100));
    });
}

#[test]
fn the_cli_prints_the_functional_form_and_emits_stablehlo() {
    let case = corpus_dir().join("replicated_while.pbtxt");
    let case = case.to_str().unwrap();
    let out = cli::run(&["rewrite", case, "--functionalize"]);
    assert!(out.status.success(), "{}", cli::stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let (module, errors) = parse_module(text.as_bytes()).expect("the output parses");
    assert!(errors.is_empty(), "{errors:?}");
    assert!(module.graphs.iter().all(|g| !has_tf1_control_flow(g)), "{text}");
    assert_eq!(tpu_rewrite::print_module(&module), text, "the printed form is canonical");
    // Without the flag, `rewrite` keeps TF1 control flow; `lower --format stablehlo` functionalizes.
    let out = cli::run(&["rewrite", case]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(TF1_CONTROL_FLOW.iter().all(|op| text.contains(&format!(" = {op}("))), "{text}");
    let out = cli::run(&["lower", case, "--topology", "1x2", "--format", "stablehlo"]);
    assert!(out.status.success(), "{}", cli::stderr(&out));
    let mlir = String::from_utf8(out.stdout).unwrap();
    assert!(mlir.contains("stablehlo.while") && mlir.contains("stablehlo.if"), "{mlir}");
    // The outside-compilation loop is refused with the pass's code.
    let oc = corpus_dir().join("replicated_while_outside_compilation.pbtxt");
    let out = cli::run(&["lower", oc.to_str().unwrap(), "--topology", "1x2", "--format", "stablehlo"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        cli::stderr(&out).contains("tpu_rewrite::passes::outside_compilation_in_control_flow"),
        "{}",
        cli::stderr(&out)
    );
}

#[test]
fn removing_any_one_node_gives_a_functional_graph_or_a_coded_error_never_a_panic() {
    for case in ["cond", "nested_while", "replicated_while", "while_loop"] {
        let module = import(&corpus_dir(), case);
        let main = module.graph("main").expect("@main");
        for id in main.nodes_in_order() {
            let mut broken = module.clone();
            let name = main.node(id).name.to_string();
            let graph = broken.graphs.iter_mut().find(|g| g.name == "main").unwrap();
            graph.remove_node(id);
            let before = tpu_rewrite::print_module(&broken);
            let errors = functionalize(&mut broken);
            if errors.is_empty() {
                assert!(broken.graphs.iter().all(|g| !has_tf1_control_flow(g)), "{case} without {name}");
            } else {
                for e in &errors {
                    let code = miette::Diagnostic::code(e).map(|c| c.to_string()).unwrap_or_default();
                    assert!(code.starts_with("tpu_rewrite::passes::"), "{case} without {name}: {e:?}");
                }
                assert_eq!(tpu_rewrite::print_module(&broken), before, "{case} without {name}: changed on error");
            }
        }
    }
}
