//! The whole TensorFlow corpus (`tests/tf/corpus/**.pbtxt`, replicated and
//! plain, `host/` and `tf1/` included; `keras/` has its own test) on XLA. Every graph is listed in
//! [`CASES`]: it either runs on the simulator and with the PJRT backend
//! through the pinned CPU plugin, with TensorFlow's feeds — every fetch and
//! every replica's copy of every variable must agree (|a − b| ≤ 1e-5 +
//! 1e-4·|b|; bf16 and f16 to their precision), and PJRT's fetches must
//! match the numbers TensorFlow computed — or it is refused, and its test
//! asserts the documented diagnostic code. `every_corpus_graph_is_listed`
//! fails for a corpus graph missing from the list.
//!
//! Replicated graphs are lowered as written. Plain graphs run as
//! TensorFlow's `Session.run` does, one run of the case's `.json` at a
//! time: `passes::single_replica` prunes the graph to the run's fetches and
//! targets and makes it one single-replica cluster (host ops outside), and
//! variables carry from run to run on each backend.

use crate::support::pjrt as support;

use crate::support::corpus;
use corpus::{read_json, tensor_of};

use std::path::{Path, PathBuf};

use serde_json::Value;
use tpu_rewrite::exec::driver::{self, RunConfig, RunOutcome};
use tpu_rewrite::exec::Tensor;
use tpu_rewrite::ir::Module;
use tpu_rewrite::lower::{lower, LowerConfig, Topology};
use tpu_rewrite::passes::single_replica::{single_replica, SingleReplicaConfig, Unlowered};
use tpu_rewrite::xla::{backend, OpSupport};

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tf/corpus")
}

/// What a corpus graph does on PJRT.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// Runs on both backends with the same numbers, and TensorFlow's.
    Runs,
    /// Refused with this diagnostic code, naming the node in the message.
    Refused(&'static str, &'static str),
}

use Expect::{Refused, Runs};

/// An op of a plain graph that neither lowers nor runs on the host.
const NOT_COMPILABLE: &str = "tpu_rewrite::passes::not_compilable";
/// A program the StableHLO lowering refuses.
const LOWERING: &str = "tpu_rewrite::xla::lowering";
/// Outside compilation inside a TF1 loop has no host transfer per iteration.
const OC_IN_CONTROL_FLOW: &str = "tpu_rewrite::passes::outside_compilation_in_control_flow";

/// Every corpus graph (path under `tests/tf/corpus`, without `.pbtxt`).
/// The refusals name what the lowering lacks: `tensor_array` concatenates
/// list rows of different shapes, which a fixed-size buffer cannot hold,
/// and outside compilation inside a TF1 loop needs a host transfer per
/// iteration. TF1 control flow reaches PJRT functionalized into
/// `While`/`If`, as the CLI gives it.
const CASES: &[(&str, Expect)] = &[
    ("batchnorm", Runs),
    ("cond", Runs),
    ("conv", Runs),
    ("dtypes", Runs),
    ("embeddings", Runs),
    ("losses", Runs),
    ("math", Runs),
    ("optimizers", Runs),
    ("replicated_cnn", Runs),
    ("replicated_mixed_precision", Runs),
    ("replicated_optimizer", Runs),
    ("replicated_step", Runs),
    ("replicated_while", Runs),
    ("replicated_cond_grad", Runs),
    ("shape", Runs),
    ("stateful_control_flow", Runs),
    ("tensor_array", Refused(LOWERING, "TensorList")),
    ("while_loop", Runs),
    ("host/host_gather_batch_dims", Runs),
    ("host/host_nchw", Runs),
    ("host/host_nchw_batchnorm", Runs),
    ("host/host_print_step", Runs),
    ("host/host_prod_einsum_grads", Runs),
    ("host/host_string_format", Runs),
    ("tf1/cond", Runs),
    ("tf1/nested_while", Runs),
    ("tf1/replicated_while", Runs),
    ("tf1/replicated_while_outside_compilation", Refused(OC_IN_CONTROL_FLOW, "outside compilation")),
    ("tf1/while_loop", Runs),
    ("tf1_variables/ref_variables", Runs),
];

/// PJRT against the simulator: |got − want| ≤ 1e-5 + tol·|want| element by
/// element (`rtol` at least the dtype's); strings exactly.
fn assert_same(label: &str, got: &Tensor, want: &Tensor, rtol: f64) {
    assert_eq!(got.dtype(), want.dtype(), "{label}: dtype");
    assert_eq!(got.shape(), want.shape(), "{label}: shape");
    if got.dtype() == tpu_rewrite::ir::DType::Str {
        assert_eq!(got, want, "{label}");
        return;
    }
    let ((g, tol), (w, _)) = (support::values(got), support::values(want));
    let tol = if tol == 0.0 { 0.0 } else { tol.max(rtol) };
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let special = (a.is_nan() && b.is_nan()) || (a.is_infinite() && a == b);
        assert!(special || (a - b).abs() <= 1e-5 + tol * b.abs(), "{label}[{i}]: {a} vs {b} (tolerance {tol})");
    }
}

/// A refusal: the diagnostic's code and its rendered text.
struct Refusal {
    code: String,
    text: String,
}

fn refusal(e: &dyn miette::Diagnostic) -> Refusal {
    let code = e.code().map(|c| c.to_string()).unwrap_or_default();
    let help = e.help().map(|h| h.to_string()).unwrap_or_default();
    Refusal { code, text: format!("{e} ({help})") }
}

/// The two backends' results of one run.
struct Both {
    sim: RunOutcome,
    pjrt: RunOutcome,
}

fn feeds_of(meta: &Value) -> Vec<(String, Tensor)> {
    meta["feeds"].as_object().expect("feeds").iter().map(|(n, v)| (n.clone(), tensor_of(v))).collect()
}

fn pjrt_config<'a>(feeds: &'a [(String, Tensor)], fetch: &'a [String], module: &'a Module) -> backend::RunConfig<'a> {
    backend::RunConfig { fetch, ..support::one_step(feeds, Some(module)) }
}

/// Runs a replicated case on both backends.
fn run_replicated(case: &str, meta: &Value, module: &Module) -> Result<Both, Refusal> {
    let replicas = meta["num_replicas"].as_u64().expect("num_replicas") as u32;
    let graph = module.graph("main").expect("@main");
    let config = LowerConfig {
        topology: Topology { hosts: 1, cores_per_host: replicas, job: "worker".into() },
        ..LowerConfig::default()
    };
    let mut lowered = lower(graph, &config).unwrap_or_else(|e| panic!("{case}: lowering failed: {e:?}"));
    tpu_rewrite::ir::functions::carry_functions(module, &mut lowered.module);
    let feeds = feeds_of(meta);
    let fetches: Vec<String> = meta["runs"][0]["fetches"].as_object().expect("fetches").keys().cloned().collect();
    // PJRT gets TF1 control flow as functional While/If, as the CLI gives it.
    let functional = functional(module)?;
    let functional_graph = functional.graph("main").expect("@main");
    let functional_lowered =
        lower(functional_graph, &config).unwrap_or_else(|e| panic!("{case}: lowering failed: {e:?}"));
    let pjrt =
        backend::run(functional_graph, &functional_lowered.assignment, &pjrt_config(&feeds, &fetches, &functional))
            .map_err(|e| refusal(&e))?
            .run;
    let sim = driver::run(&lowered.module, &feeds, &fetches, &RunConfig::default(), &mut |_, _| {})
        .unwrap_or_else(|e| panic!("{case}: the simulator failed: {e}"));
    Ok(Both { sim, pjrt })
}

/// The module with its TF1 control flow functionalized (unchanged without any).
fn functional(module: &Module) -> Result<Module, Refusal> {
    let mut functional = module.clone();
    match tpu_rewrite::passes::functionalize::functionalize(&mut functional).first() {
        Some(e) => Err(refusal(e)),
        None => Ok(functional),
    }
}

/// One `Session.run` of a plain case on one backend: the graph pruned to
/// `fetches` as one single-replica cluster, with `state`'s variables.
/// Returns the fetches by their names in the case, and the new state.
fn run_plain_once(
    module: &Module,
    feeds: &[(String, Tensor)],
    fetches: &[String],
    state: &[(String, Tensor)],
    pjrt: bool,
) -> Result<RunOutcome, Refusal> {
    // PJRT gets TF1 control flow as functional While/If, as the CLI gives it.
    let mut module = if pjrt { functional(module)? } else { module.clone() };
    let main = module.graphs.iter().position(|g| g.name == "main").expect("@main");
    // TF1 ref variables become resource variables, as the CLI makes them.
    tpu_rewrite::session::plain::ref_variables_to_resources(&mut module.graphs[main])
        .unwrap_or_else(|errors| panic!("ref variables: {errors:?}"));
    // The simulator runs every kernel in the cluster; XLA refuses what does not lower.
    let unlowered = if pjrt { Unlowered::Refuse } else { Unlowered::InCluster };
    let state: Vec<(String, tpu_rewrite::ir::TensorLit)> = state
        .iter()
        .map(|(name, value)| (name.clone(), value.to_literal().unwrap_or_else(|| panic!("{name} has a literal"))))
        .collect();
    let config =
        SingleReplicaConfig { fetches, variables: &state, unlowered, support: &OpSupport, skip_initializers: false };
    let single = match single_replica(&mut module.graphs[main], &config) {
        Ok(Some(single)) => single,
        Ok(None) => panic!("a plain case has a cluster"),
        Err(errors) => return Err(refusal(&errors[0])),
    };
    let graph = &module.graphs[main];
    let config = LowerConfig {
        topology: Topology { hosts: 1, cores_per_host: 1, job: "worker".into() },
        ..LowerConfig::default()
    };
    let mut lowered = lower(graph, &config).unwrap_or_else(|e| panic!("lowering failed: {e:?}"));
    tpu_rewrite::ir::functions::carry_functions(&module, &mut lowered.module);
    // Feeds of the placeholders the run still has.
    let feeds: Vec<(String, Tensor)> =
        feeds.iter().filter(|(n, _)| graph.find(n.split(':').next().unwrap_or(n)).is_some()).cloned().collect();
    let carriers: Vec<String> = single.fetches.iter().map(|(_, c)| c.clone()).collect();
    let mut outcome = if pjrt {
        backend::run(graph, &lowered.assignment, &pjrt_config(&feeds, &carriers, &module)).map_err(|e| refusal(&e))?.run
    } else {
        driver::run(&lowered.module, &feeds, &carriers, &RunConfig::default(), &mut |_, _| {})
            .map_err(|e| refusal(&e))?
    };
    for (name, _) in outcome.fetched.iter_mut() {
        if let Some((asked, _)) = single.fetches.iter().find(|(_, c)| c == name) {
            name.clone_from(asked);
        }
    }
    Ok(outcome)
}

/// Runs every run of a plain case on both backends, comparing each run's
/// fetches and variables; returns the last run's results.
fn run_plain(case: &str, meta: &Value, module: &Module) -> Result<Both, Refusal> {
    let feeds = feeds_of(meta);
    let rtol = meta["rtol"].as_f64().expect("rtol");
    let mut states: [Vec<(String, Tensor)>; 2] = [Vec::new(), Vec::new()];
    let mut last = None;
    for (r, run) in meta["runs"].as_array().expect("runs").iter().enumerate() {
        let mut fetches: Vec<String> = run["fetches"].as_object().expect("fetches").keys().cloned().collect();
        fetches.extend(run["targets"].as_array().expect("targets").iter().map(|t| format!("^{}", t.as_str().unwrap())));
        let pjrt = run_plain_once(module, &feeds, &fetches, &states[1], true)?;
        let sim = run_plain_once(module, &feeds, &fetches, &states[0], false)
            .unwrap_or_else(|e| panic!("{case}: run {r}: the simulator failed: {}: {}", e.code, e.text));
        compare(&format!("{case}: run {r}"), &sim, &pjrt, rtol);
        for (state, outcome) in states.iter_mut().zip([&sim, &pjrt]) {
            for (name, value) in &outcome.variables {
                state.retain(|(n, _)| n != name);
                state.push((name.clone(), value.clone()));
            }
        }
        for (name, want) in run["fetches"].as_object().expect("fetches") {
            let got = &pjrt.fetched.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("{case}: no {name}")).1;
            corpus::assert_close(&format!("{case}: run {r}: {name} (pjrt vs TensorFlow)"), got, &tensor_of(want), rtol);
        }
        last = Some(Both { sim, pjrt });
    }
    Ok(last.expect("a case has runs"))
}

/// PJRT's fetches and variables against the simulator's.
fn compare(label: &str, sim: &RunOutcome, pjrt: &RunOutcome, rtol: f64) {
    for (name, want) in &sim.fetched {
        let got =
            &pjrt.fetched.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("{label}: pjrt has no {name}")).1;
        assert_same(&format!("{label}: {name} (pjrt vs simulator)"), got, want, rtol);
    }
    assert_eq!(pjrt.mirrors.keys().collect::<Vec<_>>(), sim.mirrors.keys().collect::<Vec<_>>(), "{label}: variables");
    for (var, copies) in &sim.mirrors {
        for (r, (got, want)) in pjrt.mirrors[var].iter().zip(copies).enumerate() {
            assert_same(&format!("{label}: `{var}` on replica {r}"), got, want, rtol);
        }
    }
}

/// Runs corpus graph `case` as [`CASES`] says it goes.
fn check(case: &str) {
    let expect = CASES.iter().find(|(c, _)| *c == case).map(|c| c.1).unwrap_or_else(|| panic!("{case} is not listed"));
    let path = corpus_dir().join(case);
    let dir = path.parent().expect("a directory");
    let stem = path.file_name().expect("a name").to_string_lossy().into_owned();
    let meta = read_json(&dir.join(format!("{stem}.json")));
    let rtol = meta["rtol"].as_f64().expect("rtol");
    let module = corpus::import(dir, &stem);
    let result = if meta["kind"] == "replicated" {
        run_replicated(case, &meta, &module).inspect(|both| {
            compare(case, &both.sim, &both.pjrt, rtol);
            for (name, want) in meta["runs"][0]["fetches"].as_object().expect("fetches") {
                let got = &both.pjrt.fetched.iter().find(|(n, _)| n == name).expect("fetched").1;
                corpus::assert_close(&format!("{case}: {name} (pjrt vs TensorFlow)"), got, &tensor_of(want), rtol);
            }
        })
    } else {
        run_plain(case, &meta, &module)
    };
    match (expect, result) {
        (Runs, Ok(both)) => {
            assert!(!both.pjrt.fetched.is_empty() || !both.pjrt.mirrors.is_empty(), "{case}: nothing was compared");
        }
        (Runs, Err(e)) => panic!("{case}: PJRT refused it: {}: {}", e.code, e.text),
        (Refused(code, why), Err(e)) => {
            assert_eq!(e.code, code, "{case}: {}", e.text);
            assert!(e.text.contains(why), "{case}: the diagnostic says why ({why}): {}", e.text);
        }
        (Refused(..), Ok(_)) => panic!("{case}: PJRT ran it; list it as `Runs`"),
    }
}

macro_rules! corpus_cases {
    ($($test:ident => $case:literal),* $(,)?) => {
        /// The cases with a test.
        const TESTED: &[&str] = &[$($case),*];
        $(
            #[test]
            fn $test() {
                check($case);
            }
        )*
    };
}

corpus_cases!(
    batchnorm_matches => "batchnorm",
    cond_matches => "cond",
    conv_matches => "conv",
    dtypes_matches => "dtypes",
    embeddings_matches => "embeddings",
    losses_matches => "losses",
    math_matches => "math",
    optimizers_matches => "optimizers",
    replicated_cnn_matches => "replicated_cnn",
    replicated_mixed_precision_matches => "replicated_mixed_precision",
    replicated_optimizer_matches => "replicated_optimizer",
    replicated_step_matches => "replicated_step",
    replicated_while_matches => "replicated_while",
    replicated_cond_grad_matches => "replicated_cond_grad",
    shape_matches => "shape",
    stateful_control_flow_matches => "stateful_control_flow",
    tensor_array_is_refused => "tensor_array",
    while_loop_matches => "while_loop",
    host_gather_batch_dims_matches => "host/host_gather_batch_dims",
    host_nchw_matches => "host/host_nchw",
    host_nchw_batchnorm_matches => "host/host_nchw_batchnorm",
    host_print_step_matches => "host/host_print_step",
    host_prod_einsum_grads_matches => "host/host_prod_einsum_grads",
    host_string_format_matches => "host/host_string_format",
    tf1_cond_matches => "tf1/cond",
    tf1_nested_while_matches => "tf1/nested_while",
    tf1_replicated_while_matches => "tf1/replicated_while",
    tf1_replicated_while_outside_compilation_is_refused => "tf1/replicated_while_outside_compilation",
    tf1_while_loop_matches => "tf1/while_loop",
    tf1_ref_variables_match => "tf1_variables/ref_variables",
);

/// Every `.pbtxt` under `dir`, as paths relative to the corpus without the extension.
fn graphs_under(dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).flatten() {
        let path = entry.path();
        if path.is_dir() {
            // The Keras corpora, the op-case families and the TF1 TensorArray loops have their own
            // tests, tests/it/keras_corpus.rs, keras_more.rs, op_cases.rs and tf1_tensor_array.rs
            // (whose refusals on XLA xla_stablehlo.rs checks).
            if path
                .file_name()
                .is_some_and(|n| ["keras", "keras_more", "ops", "tf1_tensor_array"].iter().any(|d| n == *d))
            {
                continue;
            }
            graphs_under(&path, out);
        } else if let Some(rest) = path.to_string_lossy().strip_suffix(".pbtxt") {
            let root = corpus_dir().to_string_lossy().into_owned();
            out.push(rest.trim_start_matches(&root).trim_start_matches('/').to_string());
        }
    }
}

#[test]
fn every_corpus_graph_is_listed() {
    let mut found = Vec::new();
    graphs_under(&corpus_dir(), &mut found);
    found.sort();
    let mut listed: Vec<String> = CASES.iter().map(|c| c.0.to_string()).collect();
    listed.sort();
    assert!(found.len() > 20, "the corpus has its graphs: {found:?}");
    assert_eq!(found, listed, "CASES lists every corpus graph, and nothing else");
    let mut tested: Vec<&str> = TESTED.to_vec();
    tested.sort_unstable();
    assert_eq!(tested, listed.iter().map(String::as_str).collect::<Vec<_>>(), "every listed case has a test");
}

/// A plain graph's host ops: where `passes::single_replica` puts them, and
/// the run on both backends (the host op after the device program reads
/// the device result through the cluster's output).
#[test]
fn host_ops_of_a_plain_graph_run_before_or_after_the_device_program() {
    use tpu_rewrite::passes::single_replica::Placement;
    let text = r#"graph @main {
  %x = Placeholder() {dtype = f32, shape = shape[3]}
  %before = StringFormat(%x) {T = [f32], template = "x: {}", placeholder = "{}", summarize = 3}
  %y = Relu(%x) {T = f32}
  %z = Neg(%y) {T = f32}
  %after = StringFormat(%z) {T = [f32], template = "z: {}", placeholder = "{}", summarize = 3}
  %shown = Identity(%after) {T = string}
  %print = PrintV2(%shown) {output_stream = "stderr", end = "\n"}
}
"#;
    let (module, errors) = tpu_rewrite::ir::parse_module(text.as_bytes()).expect("parses");
    assert!(errors.is_empty(), "{errors:?}");
    let fetches = ["z:0".to_string(), "before:0".to_string(), "shown:0".to_string(), "^print".to_string()];
    let mut graph = module.graphs[0].clone();
    let config = SingleReplicaConfig {
        fetches: &fetches,
        variables: &[],
        unlowered: Unlowered::Refuse,
        support: &OpSupport,
        skip_initializers: false,
    };
    let single = single_replica(&mut graph, &config).expect("clusters").expect("a plain graph");
    let placed: Vec<(&str, Placement)> = single.host_ops.iter().map(|h| (h.node.as_str(), h.placement)).collect();
    assert_eq!(
        placed,
        [
            ("before", Placement::HostBefore),
            ("after", Placement::HostAfter),
            ("shown", Placement::HostAfter),
            ("print", Placement::HostAfter),
        ]
    );
    assert_eq!(single.device_ops, 2, "Relu and Neg compile");
    // The device result is carried by the cluster's output; host results by themselves.
    assert_eq!(single.fetches[0], ("z:0".to_string(), "output_0_shard_0:0".to_string()));
    assert_eq!(single.fetches[1], ("before:0".to_string(), "before:0".to_string()));
    let feeds = vec![("x:0".to_string(), Tensor::vector(vec![1.5f32, -2.0, 0.25]))];
    let sim = run_plain_once(&module, &feeds, &fetches, &[], false).unwrap_or_else(|e| panic!("{}", e.text));
    let pjrt = run_plain_once(&module, &feeds, &fetches, &[], true).unwrap_or_else(|e| panic!("{}", e.text));
    compare("host ops", &sim, &pjrt, 1e-4);
    let shown = &pjrt.fetched.iter().find(|(n, _)| n == "shown:0").expect("fetched").1;
    let bytes = shown.to_vec::<Vec<u8>>().expect("a string")[0].clone();
    let shown = String::from_utf8(bytes).expect("utf-8");
    assert!(shown.starts_with("z: [-1.5 ") && shown.ends_with("-0.25]"), "{shown}");
}

/// An op with neither a lowering nor a host kernel is refused, located.
#[test]
fn an_op_that_neither_compiles_nor_runs_on_the_host_is_named() {
    let text = "graph @main {\n  %x = Placeholder() {dtype = f32, shape = shape[2]}\n  %y = Frobnicate(%x) {T = f32}\n  %z = Relu(%y) {T = f32}\n}\n";
    let (module, _) = tpu_rewrite::ir::parse_module(text.as_bytes()).expect("parses");
    let mut graph = module.graphs[0].clone();
    let fetches = ["z:0".to_string()];
    let config = SingleReplicaConfig {
        fetches: &fetches,
        variables: &[],
        unlowered: Unlowered::Refuse,
        support: &OpSupport,
        skip_initializers: false,
    };
    let errors = single_replica(&mut graph, &config).expect_err("refused");
    let e = refusal(&errors[0]);
    assert_eq!(e.code, NOT_COMPILABLE);
    assert!(e.text.contains("%y") && e.text.contains("no host kernel"), "{}", e.text);
    let span = match &errors[0] {
        tpu_rewrite::passes::PassError::NotCompilable { span, .. } => *span,
        other => panic!("{other:?}"),
    };
    assert!(text[span.start as usize..span.end as usize].contains("%y"), "the span is the node");
}

/// A host `Assert` that fails fails the run on both backends, with
/// TensorFlow's message.
#[test]
fn a_failing_host_assert_fails_the_run_on_both_backends() {
    let dir = corpus_dir().join("host");
    let meta = read_json(&dir.join("host_string_format.json"));
    let module = corpus::import(&dir, "host_string_format");
    let feeds = feeds_of(&meta);
    let targets: Vec<String> = meta["failing"]["targets"]
        .as_array()
        .expect("targets")
        .iter()
        .map(|t| format!("^{}", t.as_str().unwrap()))
        .collect();
    let want = meta["assert_error"].as_str().expect("TensorFlow's message");
    let head = want.split(" [[").next().unwrap_or(want);
    for pjrt in [false, true] {
        match run_plain_once(&module, &feeds, &targets, &[], pjrt) {
            Ok(_) => panic!("the assert passed (pjrt: {pjrt})"),
            Err(e) => assert!(e.text.contains(head), "pjrt: {pjrt}: {}: {}", e.code, e.text),
        }
    }
}

/// A host op between device ops is outside-compiled: `Where` (its result
/// shape depends on the values) reads a device result, and device ops read
/// its result; both backends agree.
#[test]
fn a_host_op_between_device_ops_is_outside_compiled() {
    use tpu_rewrite::passes::single_replica::Placement;
    let text = r#"graph @main {
  %x = Placeholder() {dtype = f32, shape = shape[5]}
  %y = Relu(%x) {T = f32}
  %where = Where(%y) {T = f32}
  %idx = Cast(%where) {SrcT = i64, DstT = f32}
  %axes = Const() {dtype = i32, value = tensor(i32, [2]) [0, 1]}
  %total = Sum(%idx, %axes) {T = f32, Tidx = i32, keep_dims = false}
  %scaled = Mul(%total, %total) {T = f32}
}
"#;
    let (module, errors) = tpu_rewrite::ir::parse_module(text.as_bytes()).expect("parses");
    assert!(errors.is_empty(), "{errors:?}");
    let fetches = ["scaled:0".to_string()];
    let mut graph = module.graphs[0].clone();
    let config = SingleReplicaConfig {
        fetches: &fetches,
        variables: &[],
        unlowered: Unlowered::Refuse,
        support: &OpSupport,
        skip_initializers: false,
    };
    let single = single_replica(&mut graph, &config).expect("clusters").expect("a plain graph");
    let placed: Vec<(&str, Placement)> = single.host_ops.iter().map(|h| (h.node.as_str(), h.placement)).collect();
    assert_eq!(placed, [("where", Placement::OutsideCompiled)]);
    let feeds = vec![("x:0".to_string(), Tensor::vector(vec![1.0f32, -2.0, 3.0, 0.0, 4.0]))];
    let sim = run_plain_once(&module, &feeds, &fetches, &[], false).unwrap_or_else(|e| panic!("{}", e.text));
    let pjrt = run_plain_once(&module, &feeds, &fetches, &[], true).unwrap_or_else(|e| panic!("{}", e.text));
    compare("outside compilation", &sim, &pjrt, 1e-4);
    // Where(relu(x)) = [[0], [2], [4]]: (0 + 2 + 4)² = 36.
    assert_eq!(pjrt.fetched, vec![("scaled:0".to_string(), Tensor::scalar(36f32))]);
}
