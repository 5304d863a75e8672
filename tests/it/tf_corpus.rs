//! The TensorFlow corpus (`tests/tf/corpus/`, written by
//! `tests/tf/make_corpus.py` and `tests/tf/corpus_control_flow.py` with
//! tensorflow-cpu 2.21.0): one graph per op
//! family, with the numbers TensorFlow computed. Each graph is imported and
//! run on the simulator, and every fetched tensor is compared with TF's to
//! a relative 1e-4 (bf16 and f16 to their own precision). Plain graphs run
//! as written (`@main`, variables persisting across the runs); replicated
//! ones (made by `tpu.replicate`) are lowered first, and their cluster
//! membership must equal the tags TensorFlow set.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;
use tpu_rewrite::exec::{missing_kernels, Feeds, Fetch, Mesh, MeshConfig, Tensor};
use tpu_rewrite::ir::Module;
use tpu_rewrite::passes::form_clusters::form_clusters;
use tpu_rewrite::tf::{import_graphdef, GraphDefFormat};

use crate::support::corpus;
use corpus::{assert_close, lower_for, read_json, tensor_of};

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tf/corpus")
}

/// The case names (stems of `*.json` that are not tags), sorted.
fn cases() -> Vec<String> {
    corpus::case_names(&corpus_dir(), "run tests/tf/setup.sh and make_corpus.py to make it")
}

fn import(case: &str) -> Module {
    corpus::import(&corpus_dir(), case)
}

/// Runs one corpus case and compares every fetch of every run.
fn run_case(case: &str) {
    let meta = read_json(&corpus_dir().join(format!("{case}.json")));
    let rtol = meta["rtol"].as_f64().expect("rtol");
    let replicated = meta["kind"] == "replicated";
    let module = import(case);
    if meta.get("variables_after").is_some() {
        return run_with_variables(case, &meta, &module, rtol);
    }
    let (module, graph) = if replicated {
        (lower_for(case, &module, meta["num_replicas"].as_u64().expect("num_replicas") as u32), "host")
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
    for (r, run) in meta["runs"].as_array().expect("runs").iter().enumerate() {
        let targets: Vec<Fetch> = run["targets"]
            .as_array()
            .expect("targets")
            .iter()
            .map(|t| Fetch::new(graph, format!("^{}", t.as_str().expect("op"))))
            .collect();
        let wanted: Vec<(&String, &Value)> = run["fetches"].as_object().expect("fetches").iter().collect();
        let fetches: Vec<Fetch> = wanted.iter().map(|(name, _)| Fetch::new(graph, name.as_str())).collect();
        let got = mesh
            .run_step_with_targets(&feeds, &fetches, &targets)
            .unwrap_or_else(|e| panic!("{case}: run {r} failed: {e}"));
        for (g, (name, want)) in got.iter().zip(&wanted) {
            assert_close(&format!("{case}: run {r}: {name}"), g, &tensor_of(want), rtol);
        }
    }
}

/// A replicated case with mirrored variables: the driver runs the init program, one step, and
/// every replica's copy of each variable is compared with TF's.
fn run_with_variables(case: &str, meta: &Value, module: &Module, rtol: f64) {
    use tpu_rewrite::exec::driver::{run, RunConfig};
    let lowered = lower_for(case, module, meta["num_replicas"].as_u64().expect("num_replicas") as u32);
    let feeds: Vec<(String, Tensor)> =
        meta["feeds"].as_object().expect("feeds").iter().map(|(n, v)| (n.clone(), tensor_of(v))).collect();
    let wanted: Vec<(&String, &Value)> = meta["runs"][0]["fetches"].as_object().expect("fetches").iter().collect();
    let fetches: Vec<String> = wanted.iter().map(|(n, _)| (*n).clone()).collect();
    let outcome = run(&lowered, &feeds, &fetches, &RunConfig::default(), &mut |_, _| {})
        .unwrap_or_else(|e| panic!("{case}: run failed: {e}"));
    for ((name, got), (_, want)) in outcome.fetched.iter().zip(&wanted) {
        assert_close(&format!("{case}: {name}"), got, &tensor_of(want), rtol);
    }
    let after = meta["variables_after"].as_object().expect("variables_after");
    for (var, copies) in after {
        let got = outcome.mirrors.get(var).unwrap_or_else(|| panic!("{case}: no mirrored variable `{var}`"));
        let copies = copies.as_array().expect("one value per replica");
        assert_eq!(got.len(), copies.len(), "{case}: copies of `{var}`");
        for (r, (g, w)) in got.iter().zip(copies).enumerate() {
            assert_close(&format!("{case}: `{var}` on replica {r}"), g, &tensor_of(w), rtol);
        }
    }
}

macro_rules! corpus_tests {
    ($($name:ident),* $(,)?) => {
        /// The corpus cases with a test.
        const TESTED: &[&str] = &[$(stringify!($name)),*];
        $(
            #[test]
            fn $name() {
                run_case(stringify!($name));
            }
        )*
    };
}

corpus_tests!(
    optimizers,
    math,
    losses,
    shape,
    embeddings,
    batchnorm,
    conv,
    dtypes,
    replicated_step,
    replicated_cnn,
    replicated_mixed_precision,
    replicated_optimizer,
    // Functional control flow (tests/tf/corpus_control_flow.py).
    while_loop,
    cond,
    replicated_while,
    replicated_cond_grad,
    stateful_control_flow,
    tensor_array,
);

#[test]
fn every_corpus_case_has_a_test() {
    let tested: BTreeSet<&str> = TESTED.iter().copied().collect();
    let found = cases();
    assert!(!found.is_empty(), "the corpus is empty");
    for case in &found {
        assert!(tested.contains(case.as_str()), "corpus case {case} has no test in tests/it/tf_corpus.rs");
    }
}

#[test]
fn replicated_cases_form_the_clusters_tensorflow_tagged() {
    let mut checked = 0;
    for case in cases() {
        let tags_path = corpus_dir().join(format!("{case}.tags.json"));
        if !tags_path.exists() {
            continue;
        }
        let tags = read_json(&tags_path);
        let mut want: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut want_oc: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
        for (name, entry) in tags.as_object().expect("tags") {
            if let Some(cluster) = entry.get("R").and_then(Value::as_str) {
                want.entry(cluster.to_string()).or_default().insert(name.clone());
                if let Some(oc) = entry.get("OC").and_then(Value::as_str) {
                    want_oc.entry((cluster.to_string(), oc.to_string())).or_default().insert(name.clone());
                }
            }
        }
        let module = import(&case);
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
        assert!(!want.is_empty(), "{case}: TensorFlow tagged no cluster");
        assert_eq!(got, want, "{case}: cluster members");
        assert_eq!(got_oc, want_oc, "{case}: outside-compilation members");
        checked += 1;
    }
    assert!(checked > 0, "the corpus has at least one replicated case");
}

/// The text of `span` in `source`.
fn spanned(source: &str, span: tpu_rewrite::syntax::Span) -> &str {
    &source[span.start as usize..span.end as usize]
}

#[test]
fn kernel_problems_name_every_node_and_dtype_before_the_run() {
    use tpu_rewrite::exec::{ExecError, KernelProblem};
    use tpu_rewrite::ir::DType;
    let text = r#"graph @main {
  %a = Const() {dtype = f32, value = tensor(f32, []) [1.0]}
  %first = FrobnicateOp(%a) {T = f32}
  %ok = Sqrt(%a) {T = f32}
  %second = FrobnicateOp(%ok) {T = f32}
  %int_sqrt = Sqrt(%b) {T = i32}
  %b = Cast(%a) {SrcT = f32, DstT = i32}
  %unsigned = Cast(%a) {SrcT = f32, DstT = dtype(24)}
}
"#;
    let (module, errors) = tpu_rewrite::ir::parse_module(text.as_bytes()).expect("parses");
    assert!(errors.is_empty(), "{errors:?}");
    let problems = match Mesh::new(&module, MeshConfig::default()) {
        Err(ExecError::MissingKernels { ops, problems }) => {
            assert_eq!(ops, vec!["FrobnicateOp".to_string()]);
            problems
        }
        Err(other) => panic!("expected the missing-kernels error, got {other:?}"),
        Ok(_) => panic!("a mesh was built for a module with unrunnable nodes"),
    };
    let summary: Vec<(String, String)> = problems
        .iter()
        .map(|p| match p {
            KernelProblem::NoKernel { node, op, span, .. } => {
                assert!(spanned(text, *span).contains(&format!("%{node}")), "{node}: span {span:?}");
                (node.clone(), format!("no kernel for {op}"))
            }
            KernelProblem::UnsupportedDType { node, attr, dtype, span, .. } => {
                assert!(spanned(text, *span).contains(&format!("%{node}")), "{node}: span {span:?}");
                (node.clone(), format!("{attr} = {dtype}"))
            }
            other => panic!("unexpected problem {other:?}"),
        })
        .collect();
    let want: Vec<(String, String)> = [
        ("first", "no kernel for FrobnicateOp".to_string()),
        ("second", "no kernel for FrobnicateOp".to_string()),
        ("int_sqrt", format!("T = {}", DType::I32)),
        ("unsigned", format!("DstT = {}", DType::Other(24))),
    ]
    .into_iter()
    .map(|(n, w)| (n.to_string(), w))
    .collect();
    assert_eq!(summary, want);
    // The rendered error names each node, not only the op types.
    let rendered = format!("{:?}", miette::Report::new(ExecError::MissingKernels { ops: vec![], problems }));
    for node in ["%first", "%second", "%int_sqrt", "%unsigned"] {
        assert!(rendered.contains(node), "{node} missing from:\n{rendered}");
    }
}

#[test]
fn every_corpus_node_can_run() {
    for case in cases() {
        let problems = tpu_rewrite::exec::kernel_problems(&import(&case));
        assert!(problems.is_empty(), "{case}: {problems:?}");
    }
}

#[test]
fn the_verifier_knows_the_outputs_and_attributes_of_the_new_ops() {
    let text = r#"graph @main {
  %x = Placeholder() {dtype = f32, shape = shape[4, 2]}
  %axis = Const() {dtype = i32, value = tensor(i32, []) [0]}
  %parts = Split(%axis, %x) {T = f32, num_split = 2}
  %ok = Identity(%parts:1) {T = f32}
  %bad = Identity(%parts:2) {T = f32}
  %bn = FusedBatchNormV3(%x, %x, %x, %x, %x) {T = f32, epsilon = "small"}
  %rs = Identity(%bn:5) {T = f32}
}
"#;
    let (_, errors) = tpu_rewrite::ir::parse_module(text.as_bytes()).expect("parses");
    let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(messages.iter().any(|m| m.contains("parts") && m.contains('2')), "{messages:?}");
    assert!(messages.iter().any(|m| m.contains("epsilon")), "{messages:?}");
}

#[test]
fn a_node_every_replica_runs_is_reported_once() {
    use tpu_rewrite::exec::{kernel_problems, KernelProblem};
    let path = corpus_dir().join("replicated_cnn.pbtxt");
    let text = std::fs::read_to_string(&path).expect("corpus graph");
    let text = text.replace("op: \"Relu6\"\n", "op: \"Frobnicate\"\n");
    let (module, errors) = import_graphdef(text.as_bytes(), GraphDefFormat::Text).expect("imports");
    assert!(errors.is_empty(), "{errors:?}");
    let lowered = lower_for("replicated_cnn with Frobnicate", &module, 2);
    // One SPMD program holds the node; both replicas run it.
    let programs: Vec<&str> =
        lowered.graphs.iter().filter(|g| g.find("Relu6").is_some()).map(|g| g.name.as_str()).collect();
    assert_eq!(programs.len(), 1, "{programs:?}");
    assert_eq!(lowered.graph(programs[0]).and_then(|g| g.attrs.get_int("num_replicas")), Some(2));
    let problems = kernel_problems(&lowered);
    match problems.as_slice() {
        [KernelProblem::NoKernel { node, op, .. }] => assert_eq!((node.as_str(), op.as_str()), ("Relu6", "Frobnicate")),
        other => panic!("expected one problem for %Relu6, got {other:?}"),
    }
}

#[test]
fn every_corpus_graph_passes_the_verifier() {
    // The registry's output counts and attribute kinds agree with what TensorFlow writes.
    for case in cases() {
        let errors = tpu_rewrite::ir::verify::verify(&import(&case));
        assert!(errors.is_empty(), "{case}: {errors:?}");
    }
}
