//! The SPMD lowered form end to end: one program per cluster and logical
//! core, run once per replica by the mesh. Each test rewrites, lowers and
//! runs a graph through the driver, and checks numbers that follow from the
//! model: per-replica values that depend only on the replica's own feed,
//! sums over the replicas, replica ids, and the same run through the
//! expanded (per-device) view.

// Errors are built on failure paths only; their size does not matter here.
#![allow(clippy::result_large_err)]

use std::time::{Duration, Instant};

use tpu_rewrite::exec::driver::{run, RunConfig};
use tpu_rewrite::exec::{ExecError, Tensor};
use tpu_rewrite::ir::{self, Module};
use tpu_rewrite::lower::{lower, spmd, LowerConfig, LowerFailure, Topology};
use tpu_rewrite::passes::{run_pipeline, PipelineConfig};

/// A data-parallel step: each replica's loss is the mean of `x_r · w`; the
/// step also returns the sum of the losses over all replicas and the replica
/// id. Logical core 1 (when `cores` is 2) computes the mean.
fn step_graph(replicas: usize, cores: usize) -> String {
    let mut text = String::from("graph @main {\n");
    for r in 0..replicas {
        text.push_str(&format!("  %x{r} = Placeholder() {{dtype = f32, shape = shape[2, 3]}}\n"));
    }
    text.push_str("  %w = VarHandleOp() {dtype = f32, shape = shape[3, 1], shared_name = \"w\"}\n");
    text.push_str("  %w_init_value = Const() {dtype = f32, value = tensor(f32, [3, 1]) [0.5, -0.25, 1.0]}\n");
    text.push_str("  %w_init = AssignVariableOp(%w, %w_init_value) {dtype = f32}\n");
    let xs: Vec<String> = (0..replicas).map(|r| format!("%x{r}")).collect();
    text.push_str(&format!(
        "  replicate (num_replicas = {replicas}, num_cores_per_replica = {cores}) (%x = [{}]) {{\n",
        xs.join(", ")
    ));
    let second = if cores > 1 { " on \"TPU_REPLICATED_CORE:1\"" } else { "" };
    text.push_str("    %w_read = ReadVariableOp(%w) {dtype = f32}\n");
    text.push_str("    %y = MatMul(%x, %w_read) {T = f32}\n");
    text.push_str("    %axes = Const() {dtype = i32, value = tensor(i32, [2]) [0, 1]}\n");
    text.push_str(&format!("    %loss = Mean(%y, %axes){second} {{T = f32, keep_dims = false}}\n"));
    text.push_str("    %total = AllReduce(%loss) {reduce_op = \"SUM\"}\n");
    text.push_str("    %id = ReplicaId()\n");
    text.push_str("    return %loss, %total, %id\n  }\n}\n");
    text
}

/// Replica `r`'s feed: values that differ between replicas.
fn feed(r: usize) -> Tensor {
    let values: Vec<f32> = (0..6).map(|i| ((r * 7 + i * 3) % 11) as f32 * 0.25 - 1.0).collect();
    Tensor::from_vec(&[2, 3], values).expect("fits")
}

fn lowered(text: &str, topology: &str) -> Module {
    let (mut module, errors) = ir::parse_module(text.as_bytes()).expect("parses");
    assert!(errors.is_empty(), "{errors:?}");
    let report = run_pipeline(&mut module, &PipelineConfig::default());
    assert!(!report.has_errors(), "{:?}", report.diagnostics);
    let config = LowerConfig { topology: Topology::parse(topology).expect("topology"), ..LowerConfig::default() };
    match lower(&module.graphs[0], &config) {
        Ok(l) => l.module,
        Err(LowerFailure::Lower(e)) => panic!("{e:?}"),
        Err(LowerFailure::Clusters(e)) => panic!("{e:?}"),
    }
}

/// Per replica: (loss, total, id) after one step.
fn run_step(module: &Module, replicas: usize, feeds: Vec<(String, Tensor)>) -> Result<Vec<[Tensor; 3]>, ExecError> {
    let fetches: Vec<String> =
        (0..replicas).flat_map(|r| (0..3).map(move |o| format!("output_{o}_shard_{r}:0"))).collect();
    let config = RunConfig { steps: 1, timeout: Duration::from_secs(20), deadline: None };
    let outcome = run(module, &feeds, &fetches, &config, &mut |_, _| {})?;
    let values: Vec<Tensor> = outcome.fetched.into_iter().map(|(_, t)| t).collect();
    Ok(values.chunks(3).map(|c| [c[0].clone(), c[1].clone(), c[2].clone()]).collect())
}

fn feeds(replicas: usize) -> Vec<(String, Tensor)> {
    (0..replicas).map(|r| (format!("x{r}"), feed(r))).collect()
}

fn scalar(t: &Tensor) -> f32 {
    t.to_vec::<f32>().expect("f32")[0]
}

/// The loss replica `r` must compute, by hand: mean(x_r · w).
fn expected_loss(r: usize) -> f32 {
    let x = feed(r).to_vec::<f32>().expect("f32");
    let w = [0.5f32, -0.25, 1.0];
    let rows: Vec<f32> = (0..2).map(|i| (0..3).map(|k| x[i * 3 + k] * w[k]).sum()).collect();
    rows.iter().sum::<f32>() / 2.0
}

/// Checks the outputs of a run over `replicas`: each loss by hand, the
/// total as the sum of the losses, the ids in order.
fn check(outputs: &[[Tensor; 3]], replicas: usize) {
    assert_eq!(outputs.len(), replicas);
    let losses: Vec<f32> = outputs.iter().map(|o| scalar(&o[0])).collect();
    for (r, loss) in losses.iter().enumerate() {
        assert!((loss - expected_loss(r)).abs() < 1e-5, "replica {r}: {loss} != {}", expected_loss(r));
        assert_eq!(outputs[r][2], Tensor::scalar(r as i32), "replica id of replica {r}");
    }
    let sum: f32 = losses.iter().sum();
    for (r, o) in outputs.iter().enumerate() {
        let total = scalar(&o[1]);
        assert!((total - sum).abs() <= 1e-4 * sum.abs().max(1.0), "replica {r}: total {total} != {sum}");
    }
}

#[test]
fn one_replica() {
    let m = lowered(&step_graph(1, 1), "1x1");
    check(&run_step(&m, 1, feeds(1)).expect("runs"), 1);
}

#[test]
fn one_replica_with_two_cores() {
    let m = lowered(&step_graph(1, 2), "1x2");
    let names: Vec<&str> = m.graphs.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names, ["host", "init", "cluster", "cluster/core_1"]);
    check(&run_step(&m, 1, feeds(1)).expect("runs"), 1);
}

#[test]
fn four_replicas_with_two_cores_each_on_two_hosts() {
    let m = lowered(&step_graph(4, 2), "2x4");
    check(&run_step(&m, 4, feeds(4)).expect("runs"), 4);
    let e = spmd::expand(&m).expect("expands");
    // Replica 2's core 1 is flat core 5: task 1, core 1.
    let device = e.graph("cluster/replica_2/core_1").and_then(|g| g.attrs.get_str("device"));
    assert_eq!(device, Some("/job:worker/replica:0/task:1/device:TPU:1"));
}

#[test]
fn two_hosts_give_the_numbers_of_one() {
    let one = run_step(&lowered(&step_graph(8, 1), "1x8"), 8, feeds(8)).expect("runs on 1x8");
    let two = run_step(&lowered(&step_graph(8, 1), "2x4"), 8, feeds(8)).expect("runs on 2x4");
    check(&one, 8);
    for (a, b) in one.iter().flatten().zip(two.iter().flatten()) {
        assert!(a.bit_eq(b), "{a:?} != {b:?}");
    }
}

#[test]
fn the_expanded_view_runs_to_the_same_numbers() {
    let m = lowered(&step_graph(4, 2), "1x8");
    let e = spmd::expand(&m).expect("expands");
    assert_eq!(e.graphs.iter().filter(|g| g.attrs.get_str("role") == Some("replica")).count(), 8);
    let a = run_step(&m, 4, feeds(4)).expect("the SPMD module runs");
    let b = run_step(&e, 4, feeds(4)).expect("the expanded module runs");
    for (x, y) in a.iter().flatten().zip(b.iter().flatten()) {
        assert!(x.bit_eq(y), "{x:?} != {y:?}");
    }
}

#[test]
fn the_lowered_size_does_not_grow_with_the_replicas() {
    let program_nodes =
        |m: &Module| -> usize { m.graphs.iter().filter(|g| g.name != "host").map(|g| g.nodes_in_order().len()).sum() };
    let small = lowered(&step_graph(8, 2), "1x16");
    let large = lowered(&step_graph(256, 2), "64x8");
    assert_eq!(small.graphs.len(), large.graphs.len());
    assert_eq!(program_nodes(&small), program_nodes(&large));
}

#[test]
fn two_hundred_fifty_six_replicas_match_eight_where_they_must() {
    let eight = run_step(&lowered(&step_graph(8, 1), "1x8"), 8, feeds(8)).expect("runs at 8");
    let many = run_step(&lowered(&step_graph(256, 1), "32x8"), 256, feeds(256)).expect("runs at 256");
    check(&many, 256);
    // Each loss depends on its own replica's feed only.
    for r in 0..8 {
        assert!(eight[r][0].bit_eq(&many[r][0]), "replica {r}");
    }
}

#[test]
fn a_device_fault_at_256_replicas_is_an_error_naming_it_and_no_hang() {
    let m = lowered(&step_graph(256, 1), "32x8");
    let mut bad = feeds(256);
    // Replica 137's batch has 4 features: its MatMul cannot run.
    bad[137].1 = Tensor::from_vec(&[2, 4], vec![1.0f32; 8]).expect("fits");
    let start = Instant::now();
    let err = run_step(&m, 256, bad).expect_err("the step fails");
    assert!(start.elapsed() < Duration::from_secs(15), "took {:?}", start.elapsed());
    let text = err.to_string();
    assert!(text.contains("cluster/replica_137") && text.contains("MatMul"), "{text}");
}

#[test]
fn outside_compilation_runs_per_replica_on_the_host_of_its_core() {
    let text =
        std::fs::read_to_string(format!("{}/tests/cases/lower/host_compute_core.opg", env!("CARGO_MANIFEST_DIR")))
            .expect("the case exists");
    let m = lowered(&text, "2x2");
    let x = [vec![0.5f32, -1.0], vec![2.0f32, 0.25]];
    let feeds: Vec<(String, Tensor)> = (0..2).map(|r| (format!("x{r}"), Tensor::vector(x[r].clone()))).collect();
    let fetches = ["output_0_shard_0:0".to_string(), "output_0_shard_1:0".to_string()];
    let config = RunConfig { steps: 1, timeout: Duration::from_secs(20), deadline: None };
    let outcome = run(&m, &feeds, &fetches, &config, &mut |_, _| {}).expect("runs");
    for (r, (_, got)) in outcome.fetched.iter().enumerate() {
        // The device computes t = tanh(x); the host squares it; the device adds.
        let want: Vec<f32> = x[r].iter().map(|v| v.tanh() * v.tanh() + v.tanh()).collect();
        let got = got.to_vec::<f32>().expect("f32");
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() < 1e-6, "replica {r}: {got:?} != {want:?}");
        }
    }
}

#[test]
fn a_target_fetch_runs_the_op_for_its_effect() {
    let text = include_str!("../strategy/update.opg");
    let m = lowered(text, "1x2");
    let feeds: Vec<(String, Tensor)> = (0..2).map(|r| (format!("x{r}"), Tensor::vector(vec![0.0f32, 0.0]))).collect();
    let fetches = ["^reset".to_string(), "w_host:0".to_string()];
    let config = RunConfig { steps: 1, timeout: Duration::from_secs(20), deadline: None };
    let outcome = run(&m, &feeds, &fetches, &config, &mut |_, _| {}).expect("runs");
    // The target gives no value; the reset wrote every copy of w.
    assert_eq!(outcome.fetched.len(), 1);
    assert_eq!(outcome.fetched[0].0, "w_host:0");
    assert_eq!(outcome.mirrors["w"], vec![Tensor::vector(vec![10.0f32, 20.0]); 2]);
}

#[test]
fn with_one_replica_an_outside_compilation_op_can_be_fetched_and_fed() {
    let text = "graph @main {\n  %x0 = Placeholder() {dtype = f32, shape = shape[2]}\n  replicate (num_replicas = 1) (%x = [%x0]) {\n    %t = Tanh(%x) {T = f32}\n    outside_compilation {\n      %hs = Square(%t) {T = f32}\n    }\n    %y = AddV2(%hs, %t) {T = f32}\n    return %y\n  }\n}\n";
    let m = lowered(text, "1x1");
    let (tagged, _) = ir::parse_module(text.as_bytes()).expect("parses");
    let mut tagged = tagged;
    run_pipeline(&mut tagged, &PipelineConfig::default());
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    // The seed's rule allows it with one replica...
    tpu_rewrite::exec::driver::check_feeds_and_fetches(&tagged.graphs[0], &[], &names(&["hs:0"])).expect("allowed");
    let feeds = vec![("x0".to_string(), Tensor::vector(vec![0.5f32, -2.0]))];
    let config = RunConfig { steps: 1, timeout: Duration::from_secs(20), deadline: None };
    // ...and the run finds it in its host program.
    let outcome = run(&m, &feeds, &names(&["hs:0", "output_0_shard_0:0"]), &config, &mut |_, _| {}).expect("runs");
    let hs = outcome.fetched[0].1.to_vec::<f32>().expect("f32");
    let want: Vec<f32> = [0.5f32, -2.0].iter().map(|v| v.tanh() * v.tanh()).collect();
    assert!(hs.iter().zip(&want).all(|(a, b)| (a - b).abs() < 1e-6), "{hs:?} != {want:?}");
    // Feeding it replaces what the host computes.
    let fed = vec![feeds[0].clone(), ("hs".to_string(), Tensor::vector(vec![100.0f32, 200.0]))];
    let outcome = run(&m, &fed, &names(&["output_0_shard_0:0"]), &config, &mut |_, _| {}).expect("runs");
    let y = outcome.fetched[0].1.to_vec::<f32>().expect("f32");
    assert!((y[0] - (100.0 + 0.5f32.tanh())).abs() < 1e-5, "{y:?}");
}

#[test]
fn a_nul_in_a_cluster_name_and_an_endless_timeout_still_run() {
    // A cluster name is user data: it names worker threads, which cannot
    // hold NUL bytes. A timeout beyond any deadline means no timeout.
    let text = include_str!("../../examples/tf_tagged.opg").replace("\"cluster\"", "\"c\\0\"");
    let m = lowered(&text, "1x2");
    let feeds: Vec<(String, Tensor)> =
        (0..2).map(|r| (format!("x{r}"), Tensor::vector(vec![r as f32 - 0.5, 1.0]))).collect();
    let fetches = ["output_0_shard_0:0".to_string(), "output_0_shard_1:0".to_string()];
    let config = RunConfig { steps: 1, timeout: Duration::from_secs(u64::MAX), deadline: None };
    let outcome = run(&m, &feeds, &fetches, &config, &mut |_, _| {}).expect("runs");
    assert_eq!(outcome.fetched[0].1, Tensor::vector(vec![0.0f32, 1.0]));
    assert_eq!(outcome.fetched[1].1, Tensor::vector(vec![0.5f32, 1.0]));
}

#[test]
fn a_module_lowered_for_1024_replicas_parses_back() {
    let m = lowered(&step_graph(1024, 1), "128x8");
    let text = tpu_rewrite::emit::print_module(&m);
    let (again, errors) = ir::parse_module(text.as_bytes()).expect("parses");
    assert!(errors.is_empty(), "{errors:?}");
    assert!(again == m, "the 1024-replica module does not round-trip");
    let e = spmd::expand(&m).expect("expands");
    assert_eq!(e.graphs.iter().filter(|g| g.attrs.get_str("role") == Some("replica")).count(), 1024);
}

/// The CLI on the generated MLP: `gen`, feeds from a JSON file, `run --json`.
fn run_gen_mlp(replicas: usize, topology: &str, dir: &std::path::Path) -> Vec<f64> {
    let bin = env!("CARGO_BIN_EXE_tpu-rewrite");
    let graph = dir.join(format!("mlp{replicas}.opg"));
    let gen = std::process::Command::new(bin)
        .args(["gen", "--ops", "300", "--replicas", &replicas.to_string(), "-o"])
        .arg(&graph)
        .output()
        .expect("gen runs");
    assert!(gen.status.success(), "{}", String::from_utf8_lossy(&gen.stderr));
    // Replica r's batch depends on r alone, so replicas 0..8 get the same
    // feeds at any replica count.
    let mut feeds = serde_json::Map::new();
    for r in 0..replicas {
        for (name, offset) in [("x", 0.0), ("y", 0.5)] {
            let rows: Vec<Vec<f64>> = (0..8)
                .map(|i| (0..16).map(|j| (((r * 31 + i * 7 + j * 3) % 17) as f64) / 17.0 - offset).collect())
                .collect();
            feeds.insert(format!("{name}{r}"), serde_json::json!(rows));
        }
    }
    let feeds_path = dir.join(format!("feeds{replicas}.json"));
    std::fs::write(&feeds_path, serde_json::Value::Object(feeds).to_string()).expect("writes feeds");
    let out = std::process::Command::new(bin)
        .args(["run"])
        .arg(&graph)
        .args(["--topology", topology, "--steps", "1", "--json", "--feeds"])
        .arg(&feeds_path)
        .output()
        .expect("run runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let losses = json["outputs"][0]["per_replica"].as_array().expect("per-replica losses");
    losses.iter().map(|v| v.as_f64().expect("a number")).collect()
}

#[test]
fn the_generated_mlp_at_256_replicas_gives_the_8_replica_losses() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let eight = run_gen_mlp(8, "1x8", dir.path());
    let many = run_gen_mlp(256, "32x8", dir.path());
    assert_eq!(many.len(), 256);
    // The loss of a replica depends on its own batch only.
    assert_eq!(eight[..], many[..8]);
    assert!(many.iter().all(|l| l.is_finite()), "{many:?}");
}
