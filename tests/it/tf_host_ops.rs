//! The host-op corpus (`tests/tf/corpus/host/`, written by
//! `tests/tf/corpus_host.py` with tensorflow-cpu 2.21.0): `tf.print`,
//! `StringFormat`, `Assert` and `ScalarSummary` in outside compilation of a
//! replicated step, string tensors on the host, NCHW convolution,
//! pooling and batch norm, `GatherV2` with `batch_dims`, and the gradients of `Prod` and
//! `Einsum`. Every fetched tensor is compared with TensorFlow's (floats to a
//! relative 1e-4, strings byte for byte), every printed line with the text
//! TensorFlow printed, and cluster membership with TensorFlow's tags.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;
use tpu_rewrite::exec::{
    kernel_problems, ExecError, Feeds, Fetch, KernelError, KernelProblem, Mesh, MeshConfig, Tensor,
};
use tpu_rewrite::ir::{AttrValue, Module};
use tpu_rewrite::passes::form_clusters::form_clusters;
use tpu_rewrite::passes::gradients::{expand_gradients, GradientsConfig};

use crate::support::corpus;
use corpus::{assert_close, float_of, lower_for, tensor_of};
use tpu_rewrite::tf::{import_graphdef, GraphDefFormat};

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tf/corpus/host")
}

fn read_json(case: &str) -> Value {
    corpus::read_json(&corpus_dir().join(format!("{case}.json")))
}

fn import(case: &str) -> Module {
    corpus::import(&corpus_dir(), case)
}

/// Points every `PrintV2` of `module` at a file of `dir` named after its stream.
fn print_to_files(module: &mut Module, dir: &Path) -> usize {
    let mut redirected = 0;
    for graph in &mut module.graphs {
        let ids: Vec<_> = graph.node_ids().filter(|&id| &*graph.node(id).op == "PrintV2").collect();
        for id in ids {
            let node = graph.node_mut(id);
            let stream = node.attrs.get_str("output_stream").unwrap_or("stderr").to_string();
            let path = dir.join(format!("{stream}.txt"));
            node.attrs.insert("output_stream", AttrValue::str(format!("file://{}", path.display()).as_str()));
            redirected += 1;
        }
    }
    redirected
}

fn feeds_of(meta: &Value, graph: &str) -> Feeds {
    let mut feeds = Feeds::new();
    for (name, value) in meta["feeds"].as_object().expect("feeds") {
        feeds.insert(graph, name.clone(), tensor_of(value));
    }
    feeds
}

/// Runs run `r` of a case on `mesh` and compares every fetch.
fn check_run(case: &str, mesh: &Mesh, feeds: &Feeds, graph: &str, run: &Value) {
    let targets: Vec<Fetch> = run["targets"]
        .as_array()
        .expect("targets")
        .iter()
        .map(|t| Fetch::new(graph, format!("^{}", t.as_str().expect("op"))))
        .collect();
    let wanted: Vec<(&String, &Value)> = run["fetches"].as_object().expect("fetches").iter().collect();
    let fetches: Vec<Fetch> = wanted.iter().map(|(name, _)| Fetch::new(graph, name.as_str())).collect();
    let got = mesh.run_step_with_targets(feeds, &fetches, &targets).unwrap_or_else(|e| panic!("{case}: {e}"));
    for (g, (name, want)) in got.iter().zip(&wanted) {
        assert_close(&format!("{case}: {name}"), g, &tensor_of(want), 1e-4);
    }
}

/// What the printed file of `stream` must hold: TensorFlow's text of each replica, in any order.
fn assert_printed(case: &str, dir: &Path, meta: &Value) {
    for (stream, texts) in meta["printed"].as_object().expect("printed") {
        let want: Vec<String> =
            texts.as_array().expect("texts").iter().map(|t| t.as_str().expect("text").into()).collect();
        assert!(want.iter().all(|t| !t.is_empty()), "{case}: TensorFlow printed to {stream} in every replica");
        let got = std::fs::read_to_string(dir.join(format!("{stream}.txt")))
            .unwrap_or_else(|e| panic!("{case}: nothing printed to {stream}: {e}"));
        let mut got_lines: Vec<&str> = got.split_inclusive('\n').collect();
        let mut want_lines: Vec<&str> = want.iter().flat_map(|t| t.split_inclusive('\n')).collect();
        got_lines.sort_unstable();
        want_lines.sort_unstable();
        assert_eq!(got_lines, want_lines, "{case}: printed to {stream}");
    }
}

fn temp_dir(case: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tpu-rewrite-{case}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    dir
}

#[test]
fn replicated_step_prints_formats_asserts_and_summarises_in_outside_compilation() {
    let case = "host_print_step";
    let meta = read_json(case);
    let mut module = import(case);
    let dir = temp_dir(case);
    assert_eq!(print_to_files(&mut module, &dir), 2, "the step has two tf.print calls");
    let lowered = lower_for(case, &module, 2);
    assert!(kernel_problems(&lowered).is_empty(), "{:?}", kernel_problems(&lowered));
    let mesh = Mesh::new(&lowered, MeshConfig::default()).unwrap_or_else(|e| panic!("{case}: {e:?}"));
    let feeds = feeds_of(&meta, "host");
    check_run(case, &mesh, &feeds, "host", &meta["runs"][0]);
    // One step: each replica's host program printed once to each stream.
    assert_printed(case, &dir, &meta);
    // The summary stays on the host: one outside-compilation program per replica holds it.
    let hosts = mesh.instances_with_node("loss");
    assert_eq!(hosts.len(), 2, "{hosts:?}");
    for (tensor, per_replica) in meta["host_fetches"].as_object().expect("host_fetches") {
        for (r, (graph, want)) in hosts.iter().zip(per_replica.as_array().expect("per replica")).enumerate() {
            let got = mesh.run_step(&feeds, &[Fetch::new(graph.as_str(), tensor.as_str())]).expect("fetch");
            assert_close(&format!("{case}: {tensor} of replica {r}"), &got[0], &tensor_of(want), 0.0);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn outside_compilation_clusters_are_the_ones_tensorflow_tagged() {
    let case = "host_print_step";
    let path = corpus_dir().join(format!("{case}.tags.json"));
    let tags: Value = serde_json::from_str(&std::fs::read_to_string(path).expect("tags")).expect("json");
    let mut want: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut want_oc: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (name, entry) in tags.as_object().expect("tags") {
        if let Some(cluster) = entry.get("R").and_then(Value::as_str) {
            want.entry(cluster.to_string()).or_default().insert(name.clone());
            if let Some(oc) = entry.get("OC").and_then(Value::as_str) {
                want_oc.entry(oc.to_string()).or_default().insert(name.clone());
            }
        }
    }
    assert!(want_oc.values().flatten().any(|n| n == "PrintV2"), "TensorFlow put PrintV2 in outside compilation");
    let module = import(case);
    let graph = module.graph("main").expect("@main");
    let (clusters, errors) = form_clusters(graph);
    assert!(errors.iter().all(|e| e.is_warning()), "{errors:?}");
    let name_of = |id| graph.node(id).name.to_string();
    let got: BTreeMap<String, BTreeSet<String>> =
        clusters.iter().map(|c| (c.name.clone(), c.members.iter().map(|&m| name_of(m)).collect())).collect();
    let got_oc: BTreeMap<String, BTreeSet<String>> = clusters
        .iter()
        .flat_map(|c| c.outside_compilation.iter().map(|(oc, m)| (oc.clone(), m.iter().map(|&i| name_of(i)).collect())))
        .collect();
    assert_eq!(got, want, "cluster members");
    assert_eq!(got_oc, want_oc, "outside-compilation members");
}

#[test]
fn string_format_and_print_match_tensorflows_text() {
    let case = "host_string_format";
    let meta = read_json(case);
    let mut module = import(case);
    let dir = temp_dir(case);
    assert_eq!(print_to_files(&mut module, &dir), 1);
    let mesh = Mesh::new(&module, MeshConfig::default()).unwrap_or_else(|e| panic!("{case}: {e:?}"));
    let feeds = feeds_of(&meta, "main");
    check_run(case, &mesh, &feeds, "main", &meta["runs"][0]);
    assert_printed(case, &dir, &meta);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_failing_assert_is_a_located_coded_error_with_tensorflows_message() {
    let case = "host_string_format";
    let meta = read_json(case);
    let module = import(case);
    let mesh = Mesh::new(&module, MeshConfig::default()).expect("mesh");
    let target = meta["failing"]["targets"][0].as_str().expect("target");
    let err = mesh
        .run_step_with_targets(&feeds_of(&meta, "main"), &[], &[Fetch::new("main", format!("^{target}"))])
        .expect_err("the Assert fails");
    let want = meta["assert_error"].as_str().expect("TensorFlow's message");
    match &err {
        ExecError::Kernel { node, op, source: KernelError::AssertionFailed { message, .. }, span, .. } => {
            assert_eq!((node.as_str(), op.as_str()), (target, "Assert"));
            assert_eq!(message, want, "TensorFlow's InvalidArgumentError text");
            assert!(span.end > span.start, "the error points at the node");
        }
        other => panic!("expected the Assert's failure, got {other:?}"),
    }
    let report = format!("{:?}", miette::Report::new(err));
    assert!(report.contains("tpu_rewrite::exec::kernel"), "{report}");
    assert!(report.contains("tpu_rewrite::exec::assertion_failed") || report.contains(want), "{report}");
}

#[test]
fn a_string_tensor_on_the_device_is_reported_before_the_run() {
    let module = {
        let mut m = import("host_print_step");
        let g = m.graphs.iter_mut().find(|g| g.name == "main").expect("@main");
        // Take the summary out of outside compilation, as a step that forgot it would.
        let id = g.find("loss").expect("the ScalarSummary");
        g.node_mut(id).attrs = g.node(id).attrs.without(&["_xla_outside_compilation"]);
        let tags = g.find("loss/tags").expect("its tags");
        g.node_mut(tags).attrs = g.node(tags).attrs.without(&["_xla_outside_compilation"]);
        m
    };
    let lowered = lower_for("string on device", &module, 2);
    let problems = kernel_problems(&lowered);
    let on_device: Vec<&str> = problems
        .iter()
        .filter_map(|p| match p {
            KernelProblem::StringOnDevice { node, .. } => Some(node.as_str()),
            _ => None,
        })
        .collect();
    assert!(on_device.contains(&"loss") && on_device.contains(&"loss/tags"), "{problems:?}");
    match Mesh::new(&lowered, MeshConfig::default()) {
        Err(e @ ExecError::MissingKernels { .. }) => {
            let report = format!("{:?}", miette::Report::new(e));
            assert!(report.contains("tpu_rewrite::exec::string_on_device"), "{report}");
        }
        Err(other) => panic!("expected the pre-run report, got {other:?}"),
        Ok(_) => panic!("a mesh was built with a string tensor on the device"),
    }
}

fn plain_case(case: &str) {
    let meta = read_json(case);
    let module = import(case);
    assert!(kernel_problems(&module).is_empty(), "{case}: {:?}", kernel_problems(&module));
    let mesh = Mesh::new(&module, MeshConfig::default()).unwrap_or_else(|e| panic!("{case}: {e:?}"));
    check_run(case, &mesh, &feeds_of(&meta, "main"), "main", &meta["runs"][0]);
}

#[test]
fn nchw_convolution_pooling_and_their_gradients() {
    plain_case("host_nchw");
}

/// `FusedBatchNormV3` and `FusedBatchNormGradV3` in NCHW, training and inference.
#[test]
fn nchw_batch_norm_and_its_gradient() {
    plain_case("host_nchw_batchnorm");
}

#[test]
fn gather_with_batch_dims_and_its_gradient() {
    plain_case("host_gather_batch_dims");
}

#[test]
fn tensorflows_prod_and_einsum_gradient_graphs_run() {
    plain_case("host_prod_einsum_grads");
}

/// The forward part of `host_prod_einsum_grads` in `.opg`, with the weights TensorFlow used and a
/// `gradients` call in place of TensorFlow's own gradient ops.
fn prod_einsum_source(meta: &Value) -> String {
    let mut text = String::from("graph @main {\n");
    for (name, v) in meta["feeds"].as_object().expect("feeds") {
        let name = name.trim_end_matches(":0");
        let dims: Vec<String> = v["shape"].as_array().expect("shape").iter().map(ToString::to_string).collect();
        text += &format!("  %{name} = Placeholder() {{dtype = f32, shape = shape[{}]}}\n", dims.join(", "));
    }
    let ops = [
        ("prod_rows", "Prod(%x, %ax1) {T = f32, Tidx = i32, keep_dims = false}"),
        ("prod_all", "Prod(%x, %ax01) {T = f32, Tidx = i32, keep_dims = true}"),
        ("prod_zero", "Prod(%z, %ax0) {T = f32, Tidx = i32, keep_dims = false}"),
        ("bmm", "Einsum(%a, %b) {equation = \"bij,bjk->bik\", N = 2, T = f32}"),
        ("outer", "Einsum(%c, %e) {equation = \"i,jk->ijk\", N = 2, T = f32}"),
        ("reduce", "Einsum(%a) {equation = \"bij->j\", N = 1, T = f32}"),
        ("trans", "Einsum(%e) {equation = \"ij->ji\", N = 1, T = f32}"),
    ];
    text += "  %ax0 = Const() {dtype = i32, value = tensor(i32, []) [0]}\n";
    text += "  %ax1 = Const() {dtype = i32, value = tensor(i32, []) [1]}\n";
    text += "  %ax01 = Const() {dtype = i32, value = tensor(i32, [2]) [0, 1]}\n";
    let mut terms = Vec::new();
    for (name, op) in ops {
        let w = &meta["weights"][name];
        let dims: Vec<String> = w["shape"].as_array().expect("shape").iter().map(ToString::to_string).collect();
        let values: Vec<String> =
            w["values"].as_array().expect("values").iter().map(|v| format!("{:?}", float_of(v) as f32)).collect();
        let all: Vec<String> = (0..dims.len()).map(|i| i.to_string()).collect();
        text += &format!("  %{name} = {op}\n");
        text += &format!(
            "  %w_{name} = Const() {{dtype = f32, value = tensor(f32, [{}]) [{}]}}\n",
            dims.join(", "),
            values.join(", ")
        );
        text += &format!("  %m_{name} = Mul(%{name}, %w_{name}) {{T = f32}}\n");
        text += &format!(
            "  %axes_{name} = Const() {{dtype = i32, value = tensor(i32, [{}]) [{}]}}\n",
            dims.len(),
            all.join(", ")
        );
        text += &format!("  %s_{name} = Sum(%m_{name}, %axes_{name}) {{T = f32, Tidx = i32, keep_dims = false}}\n");
        terms.push(format!("%s_{name}"));
    }
    text += &format!("  %loss = AddN({}) {{N = {}, T = f32}}\n", terms.join(", "), terms.len());
    let xs = ["x", "z", "a", "b", "c", "e"];
    let list: Vec<String> = xs.iter().map(|x| format!("%{x}")).collect();
    text += &format!("  %grads = gradients(ys = [%loss], xs = [{}])\n", list.join(", "));
    for (i, x) in xs.iter().enumerate() {
        text += &format!("  %d_{x} = Identity(%grads:{i}) {{T = f32}}\n");
    }
    text + "}\n"
}

#[test]
fn prod_and_einsum_gradients_match_tensorflows_numbers() {
    let meta = read_json("host_prod_einsum_grads");
    let text = prod_einsum_source(&meta);
    let (mut module, errors) =
        tpu_rewrite::ir::parse_module(text.as_bytes()).unwrap_or_else(|e| panic!("{e:?}\n{text}"));
    assert!(errors.is_empty(), "{errors:?}\n{text}");
    for graph in &mut module.graphs {
        let errors = expand_gradients(graph, &GradientsConfig::default());
        assert!(errors.is_empty(), "{errors:?}");
    }
    let mesh = Mesh::new(&module, MeshConfig::default()).unwrap_or_else(|e| panic!("{e:?}"));
    let want = meta["runs"][0]["fetches"].as_object().expect("fetches");
    let names: Vec<&String> = want.keys().filter(|k| k.starts_with("d_") || k.as_str() == "loss:0").collect();
    assert_eq!(names.len(), 7, "{names:?}");
    let fetches: Vec<Fetch> = names.iter().map(|n| Fetch::new("main", n.as_str())).collect();
    let got = mesh.run_step(&feeds_of(&meta, "main"), &fetches).unwrap_or_else(|e| panic!("{e}"));
    for (g, name) in got.iter().zip(&names) {
        assert_close(name, g, &tensor_of(&want[name.as_str()]), 1e-4);
    }
}

/// Flat row-major `values` of `shape` as nested JSON arrays.
fn nest(shape: &[usize], values: &[Value]) -> Value {
    match shape.split_first() {
        None => values[0].clone(),
        Some((&n, rest)) => {
            let step: usize = rest.iter().product();
            Value::Array((0..n).map(|i| nest(rest, &values[i * step..(i + 1) * step])).collect())
        }
    }
}

#[test]
fn the_cli_prints_where_tensorflow_prints() {
    let case = "host_print_step";
    let meta = read_json(case);
    let dir = temp_dir("cli-print");
    let mut feeds = serde_json::Map::new();
    for (name, v) in meta["feeds"].as_object().expect("feeds") {
        let shape: Vec<usize> =
            v["shape"].as_array().expect("shape").iter().map(|d| d.as_u64().expect("dim") as usize).collect();
        feeds.insert(name.clone(), nest(&shape, v["values"].as_array().expect("values")));
    }
    let feeds_path = dir.join("feeds.json");
    std::fs::write(&feeds_path, Value::Object(feeds).to_string()).expect("write feeds");
    let graph = corpus_dir().join(format!("{case}.pbtxt"));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tpu-rewrite"))
        .args(["run", graph.to_str().expect("path"), "--topology", "1x2", "--feeds"])
        .arg(&feeds_path)
        .args(["--fetch", "output_1_shard_0:0"])
        .output()
        .expect("the binary runs");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    for text in meta["printed"]["stderr"].as_array().expect("stderr") {
        let text = text.as_str().expect("text");
        assert!(stderr.contains(text), "stderr lacks TensorFlow's {text:?}:\n{stderr}");
    }
    let line = meta["printed"]["stdout"][0].as_str().expect("stdout text");
    assert_eq!(stdout.matches(line).count(), 2, "one line per replica on stdout:\n{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The string `Const`s of `module`'s `@main`, by name, as the executor reads them.
fn string_consts(module: &Module) -> BTreeMap<String, Tensor> {
    let graph = module.graph("main").expect("@main");
    graph
        .node_ids()
        .map(|id| graph.node(id))
        .filter(|n| &*n.op == "Const")
        .filter_map(|n| {
            let lit = n.attrs.get("value").and_then(|v| v.as_tensor())?;
            (lit.dtype == tpu_rewrite::ir::DType::Str)
                .then(|| (n.name.to_string(), Tensor::from_literal(lit).expect("a literal")))
        })
        .collect()
}

#[test]
fn string_constants_survive_opg_text_and_graphdef_export() {
    let module = import("host_string_format");
    let original = string_consts(&module);
    assert!(original.values().any(|t| t.to_vec::<Vec<u8>>() == Some(vec![b"x below one:".to_vec()])), "{original:?}");
    let text = tpu_rewrite::emit::print_module(&module);
    let (reparsed, errors) = tpu_rewrite::ir::parse_module(text.as_bytes()).expect("the printed text parses");
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(string_consts(&reparsed), original, ".opg text");
    let pbtxt = tpu_rewrite::tf::export::to_pbtxt(module.graph("main").expect("@main")).expect("exports");
    assert!(pbtxt.contains("string_val"), "exported as string_val");
    let (reimported, errors) = import_graphdef(pbtxt.as_bytes(), GraphDefFormat::Text).expect("reimports");
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(string_consts(&reimported), original, "GraphDef");
}

#[test]
fn every_host_corpus_graph_passes_the_verifier_and_has_kernels() {
    let mut checked = 0;
    for entry in std::fs::read_dir(corpus_dir()).expect("tests/tf/corpus/host exists (run tests/tf/corpus_host.py)") {
        let name = entry.expect("an entry").file_name().to_string_lossy().into_owned();
        let Some(case) = name.strip_suffix(".pbtxt") else { continue };
        let module = import(case);
        let errors = tpu_rewrite::ir::verify::verify(&module);
        assert!(errors.is_empty(), "{case}: {errors:?}");
        assert!(kernel_problems(&module).is_empty(), "{case}: {:?}", kernel_problems(&module));
        checked += 1;
    }
    assert_eq!(checked, 6, "the six host cases");
}

/// A replicated step whose cluster makes a string: the `Const` and the `Identity` reading it.
const STRING_IN_CLUSTER: &str = r#"graph @main {
  %x0 = Placeholder() {dtype = f32, shape = shape[]}
  %x1 = Placeholder() {dtype = f32, shape = shape[]}
  replicate (num_replicas = 2) (%x = [%x0, %x1]) {
    %tag = Const() {dtype = string, value = tensor(string, []) ["loss"]}
    %same = Identity(%tag) {T = string}
    %y = Square(%x) {T = f32}
    return %y
  }
}
"#;

fn cli(args: &[&str]) -> (bool, String, String) {
    let out =
        std::process::Command::new(env!("CARGO_BIN_EXE_tpu-rewrite")).args(args).output().expect("the binary runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn both_backends_refuse_a_string_on_the_device_and_keep_host_ops_on_the_host() {
    let dir = temp_dir("string-device");
    let path = dir.join("string_in_cluster.opg");
    std::fs::write(&path, STRING_IN_CLUSTER).expect("write");
    let path = path.to_str().expect("path");
    let feeds = dir.join("feeds.json");
    std::fs::write(&feeds, r#"{"x0:0": 1.0, "x1:0": 2.0}"#).expect("write");
    // The simulator reports both nodes before the run, at their spans.
    let (ok, _, err) = cli(&["run", path, "--topology", "1x2", "--feeds", feeds.to_str().expect("path")]);
    assert!(!ok);
    assert_eq!(err.matches("tpu_rewrite::exec::string_on_device").count(), 2, "{err}");
    assert!(err.contains("%tag") && err.contains("%same") && err.contains("2 node(s) cannot run\n"), "{err}");
    // The StableHLO/PJRT path refuses it too.
    let (ok, _, err) = cli(&["lower", "--format", "stablehlo", "--topology", "1x2", path]);
    assert!(!ok);
    assert!(err.contains("tpu_rewrite::xla::dtype") && err.contains("%tag") && err.contains("string"), "{err}");
    // The TensorFlow step keeps its strings in outside compilation: it lowers to StableHLO.
    let graph = corpus_dir().join("host_print_step.pbtxt");
    let (ok, text, err) = cli(&["lower", "--format", "stablehlo", "--topology", "1x2", graph.to_str().expect("path")]);
    assert!(ok, "{err}");
    assert!(text.contains("stablehlo") && !text.contains("PrintV2"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn host_ops_go_through_the_pre_run_kernel_check() {
    let text = r#"graph @main {
  %x = Placeholder() {dtype = f32, shape = shape[2]}
  %s = StringFormat(%x) {T = [dtype(24)], template = "{}", placeholder = "{}", summarize = 3}
  %p = PrintV2(%s) {output_stream = "stderr", end = "\n"}
  %c = Const() {dtype = string, value = tensor(string, [2]) ["a", "b"]}
  %ok = Assert(%x, %c) {T = [string], summarize = 3}
}
"#;
    let (module, errors) = tpu_rewrite::ir::parse_module(text.as_bytes()).expect("parses");
    assert!(errors.is_empty(), "{errors:?}");
    // On the host, strings and the host ops are fine; an 8-bit float (DT_FLOAT8_E5M2, 24) is not.
    match kernel_problems(&module).as_slice() {
        [KernelProblem::UnsupportedDType { node, attr, .. }] => assert_eq!((node.as_str(), attr.as_str()), ("s", "T")),
        other => panic!("expected one problem for %s, got {other:?}"),
    }
}
