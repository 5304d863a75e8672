//! Conformance with TensorFlow: the replicated graphs TensorFlow 2.21's
//! `tpu.replicate` wrote (`tests/fixtures/tf-graphs/`) are imported, lowered
//! and run on the simulated mesh, and their outputs match the numbers
//! TensorFlow computed (`*.expect.json`). Cluster formation on the imported
//! GraphDefs matches the tags TensorFlow put on every node (`*.tags.json`).
//! New fixtures drop in without code changes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;
use tpu_rewrite::exec::{missing_kernels, tensor_from_json, ExecError, Feeds, Fetch, Mesh, MeshConfig, Tensor};
use tpu_rewrite::ir::{self, DType, Module};
use tpu_rewrite::lower::{lower, LowerConfig, Topology};
use tpu_rewrite::passes::form_clusters::form_clusters;
use tpu_rewrite::tf::{import_graphdef, GraphDefFormat};

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tf-graphs")
}

/// The fixture paths ending in `suffix`, sorted.
fn fixtures_with(suffix: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(fixture_dir())
        .expect("fixture dir")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with(suffix)))
        .collect();
    out.sort();
    out
}

/// The fixture stem of `path` with `suffix` removed.
fn stem(path: &Path, suffix: &str) -> String {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    name.strip_suffix(suffix).unwrap_or(name).to_string()
}

/// Both encodings of fixture `stem`, as (label, module).
fn imports(stem: &str) -> Vec<(String, Module)> {
    [("pbtxt", GraphDefFormat::Text), ("pb", GraphDefFormat::Binary)]
        .into_iter()
        .map(|(ext, format)| {
            let path = fixture_dir().join(format!("{stem}.{ext}"));
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let (module, errors) = import_graphdef(&bytes, format).unwrap_or_else(|e| panic!("{stem}.{ext}: {e:?}"));
            assert!(errors.is_empty(), "{stem}.{ext}: import problems: {errors:?}");
            (format!("{stem}.{ext}"), module)
        })
        .collect()
}

fn main_graph(module: &Module) -> &ir::Graph {
    module.graph("main").expect("the imported graph is @main")
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The lowered module of `graph` on a `1 x num_replicas` topology.
fn lower_for(label: &str, graph: &ir::Graph, num_replicas: u32) -> Module {
    let config = LowerConfig {
        topology: Topology { hosts: 1, cores_per_host: num_replicas.max(1), job: "worker".into() },
        ..LowerConfig::default()
    };
    match lower(graph, &config) {
        Ok(lowered) => lowered.module,
        Err(e) => panic!("{label}: lowering failed: {e:?}"),
    }
}

/// Asserts `got` is within `rtol` of `want` elementwise, relative to the
/// expected magnitude, with magnitudes below 1 counted as 1.
fn assert_close(label: &str, got: &Tensor, want: &Tensor, rtol: f64) {
    assert_eq!(got.shape(), want.shape(), "{label}: shape");
    let got: Vec<f64> = got.to_vec::<f32>().expect("f32 output").into_iter().map(f64::from).collect();
    let want: Vec<f64> = want.to_vec::<f32>().expect("f32 expectation").into_iter().map(f64::from).collect();
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        let tolerance = rtol * w.abs().max(1.0);
        assert!((g - w).abs() <= tolerance, "{label}[{k}]: got {g}, TensorFlow computed {w} (rtol {rtol})");
    }
}

#[test]
fn tensorflow_graphs_compute_tensorflows_numbers() {
    let cases = fixtures_with(".expect.json");
    assert!(!cases.is_empty(), "the fixtures hold at least one .expect.json");
    for expect_path in cases {
        let stem = stem(&expect_path, ".expect.json");
        let expect = read_json(&expect_path);
        let rtol = expect["rtol"].as_f64().expect("rtol");
        let pattern = expect["fetch_pattern"].as_str().expect("fetch_pattern");
        let by_replica = expect["outputs_by_replica"].as_array().expect("outputs_by_replica");
        let num_replicas = by_replica.len() as u32;
        let feeds_json = expect["feeds"].as_object().expect("feeds");
        for (label, module) in imports(&stem) {
            let lowered = lower_for(&label, main_graph(&module), num_replicas);
            let missing = missing_kernels(&lowered);
            assert!(missing.is_empty(), "{label}: ops without kernels: {missing:?}");
            let mesh = Mesh::new(&lowered, MeshConfig::default()).unwrap_or_else(|e| panic!("{label}: {e:?}"));
            let mut feeds = Feeds::new();
            for (name, value) in feeds_json {
                let tensor = tensor_from_json(value, DType::F32).unwrap_or_else(|e| panic!("{label}: {name}: {e:?}"));
                feeds.insert("host", name.clone(), tensor);
            }
            let mut fetches = Vec::new();
            let mut wanted = Vec::new();
            for (r, outputs) in by_replica.iter().enumerate() {
                for (i, value) in outputs.as_array().expect("outputs of a replica").iter().enumerate() {
                    let name = pattern.replace("{i}", &i.to_string()).replace("{r}", &r.to_string());
                    fetches.push(Fetch::new("host", name.clone()));
                    wanted.push((name, tensor_from_json(value, DType::F32).expect("expected value")));
                }
            }
            let got = mesh.run_step(&feeds, &fetches).unwrap_or_else(|e| panic!("{label}: step failed: {e:?}"));
            assert_eq!(got.len(), wanted.len());
            for (g, (name, w)) in got.iter().zip(&wanted) {
                assert_close(&format!("{label}: {name}"), g, w, rtol);
            }
        }
    }
}

#[test]
fn every_op_of_every_fixture_has_a_kernel() {
    for path in fixtures_with(".pbtxt") {
        let stem = stem(&path, ".pbtxt");
        for (label, module) in imports(&stem) {
            assert_eq!(missing_kernels(&module), Vec::<String>::new(), "{label}");
        }
    }
}

#[test]
fn missing_kernels_are_all_named_before_anything_runs() {
    let text = r#"graph @main {
  %a = Const() {dtype = f32, value = tensor(f32, []) [1.0]}
  %b = FrobnicateOp(%a) {T = f32}
  %c = Identity(%b) {T = f32}
  %d = QuuxOp(%c) {T = f32}
  %e = AnotherFrobnicate(%d, %b) {T = f32}
}
"#;
    let (module, errors) = ir::parse_module(text.as_bytes()).expect("parses");
    assert!(errors.is_empty(), "{errors:?}");
    let missing = missing_kernels(&module);
    assert_eq!(missing, vec!["AnotherFrobnicate".to_string(), "FrobnicateOp".into(), "QuuxOp".into()]);
    match Mesh::new(&module, MeshConfig::default()) {
        Err(ExecError::MissingKernels { ops, .. }) => assert_eq!(ops, missing),
        other => panic!("expected a missing-kernels error, got {other:?}"),
    }
}

/// The cluster and outside-compilation membership the tags record:
/// cluster -> node names, and (cluster, oc) -> node names.
type Membership = (BTreeMap<String, BTreeSet<String>>, BTreeMap<(String, String), BTreeSet<String>>);

fn membership_from_tags(tags: &Value) -> Membership {
    let mut clusters: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut ocs: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for (name, entry) in tags.as_object().expect("tags are an object") {
        let Some(cluster) = entry.get("R").and_then(Value::as_str) else { continue };
        clusters.entry(cluster.to_string()).or_default().insert(name.clone());
        if let Some(oc) = entry.get("OC").and_then(Value::as_str) {
            ocs.entry((cluster.to_string(), oc.to_string())).or_default().insert(name.clone());
        }
    }
    (clusters, ocs)
}

#[test]
fn formed_clusters_hold_exactly_the_tagged_nodes() {
    let tag_files = fixtures_with(".tags.json");
    assert!(!tag_files.is_empty(), "the fixtures hold at least one .tags.json");
    for tags_path in tag_files {
        let stem = stem(&tags_path, ".tags.json");
        let (want_clusters, want_ocs) = membership_from_tags(&read_json(&tags_path));
        for (label, module) in imports(&stem) {
            let graph = main_graph(&module);
            let (clusters, errors) = form_clusters(graph);
            assert!(errors.iter().all(|e| e.is_warning()), "{label}: {errors:?}");
            let name_of = |id| graph.node(id).name.to_string();
            let got_clusters: BTreeMap<String, BTreeSet<String>> =
                clusters.iter().map(|c| (c.name.clone(), c.members.iter().map(|&m| name_of(m)).collect())).collect();
            let got_ocs: BTreeMap<(String, String), BTreeSet<String>> = clusters
                .iter()
                .flat_map(|c| {
                    c.outside_compilation.iter().map(|(oc, members)| {
                        ((c.name.clone(), oc.clone()), members.iter().map(|&m| name_of(m)).collect())
                    })
                })
                .collect();
            assert_eq!(got_clusters, want_clusters, "{label}: cluster members");
            assert_eq!(got_ocs, want_ocs, "{label}: outside-compilation members");
        }
    }
}

/// Deterministic, replica-dependent feed values.
fn feed_values(shape: &[usize], seed: usize) -> Tensor {
    let n: usize = shape.iter().product();
    let values: Vec<f32> = (0..n).map(|k| (((k * 7 + seed * 13) % 17) as f32 - 8.0) / 8.0).collect();
    Tensor::from_vec(shape, values).expect("shape matches")
}

#[test]
fn synthetic_transformer_lowers_the_same_from_both_encodings_and_replicas_agree() {
    use prost::Message;
    use tpu_rewrite::tf::pbtxt_print::print_graphdef;
    use tpu_rewrite::tf::synth::{transformer_graphdef, TransformerConfig};

    let config = TransformerConfig { replicas: 4, ..TransformerConfig::default() };
    let graph_def = transformer_graphdef(2, &config);
    let pb = graph_def.encode_to_vec();
    let pbtxt = print_graphdef(&graph_def);
    let lower_bytes = |bytes: &[u8], format| {
        let (module, errors) = import_graphdef(bytes, format).expect("imports");
        assert!(errors.is_empty(), "{errors:?}");
        lower_for("synthetic", main_graph(&module), config.replicas as u32)
    };
    let from_pb = lower_bytes(&pb, GraphDefFormat::Binary);
    let from_text = lower_bytes(pbtxt.as_bytes(), GraphDefFormat::Text);
    assert!(from_pb == from_text, "the two encodings lower to different modules");
    // One SPMD program for the cluster, run by every replica.
    let replica_programs: Vec<_> =
        from_pb.graphs.iter().filter(|g| g.attrs.get_str("role") == Some("replica")).collect();
    assert_eq!(replica_programs.len(), 1);
    assert_eq!(replica_programs[0].attrs.get_int("num_replicas"), Some(config.replicas as i64));

    let host = from_pb.graph("host").expect("a host program");
    let outputs = (0..).take_while(|k| host.find(&format!("output_{k}_shard_0")).is_some()).count();
    assert!(outputs >= 2, "a loss and at least one parameter");
    let mesh = Mesh::new(&from_pb, MeshConfig::default()).expect("a mesh");
    let tokens = (config.batch * config.seq) as usize;
    let mut feeds = Feeds::new();
    for r in 0..config.replicas {
        feeds.insert("host", format!("x{r}:0"), feed_values(&[tokens, config.d_model as usize], r));
        feeds.insert("host", format!("y{r}:0"), feed_values(&[tokens, config.d_model as usize], r + 100));
    }
    let fetches: Vec<Fetch> = (0..config.replicas)
        .flat_map(|r| (0..outputs).map(move |k| Fetch::new("host", format!("output_{k}_shard_{r}:0"))))
        .collect();
    let got = mesh.run_step(&feeds, &fetches).expect("the step runs");
    let by_replica: Vec<&[Tensor]> = got.chunks(outputs).collect();
    // Output 0 is the per-replica loss; the others are parameters after an
    // SGD step with all-reduced gradients, so every replica has the same.
    let losses: Vec<f32> = by_replica.iter().map(|o| o[0].to_vec::<f32>().expect("f32")[0]).collect();
    assert!(losses.iter().all(|l| l.is_finite()), "{losses:?}");
    assert!(losses.windows(2).any(|w| w[0] != w[1]), "different feeds give different losses: {losses:?}");
    for (r, outs) in by_replica.iter().enumerate().skip(1) {
        for k in 1..outputs {
            assert_close(&format!("output {k} of replica {r}"), &outs[k], &by_replica[0][k], 1e-5);
        }
    }
}
