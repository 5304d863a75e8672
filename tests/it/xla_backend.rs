//! Differential tests: every example and TensorFlow graph that the
//! simulator runs also runs on XLA through the pinned PJRT CPU plugin,
//! with the same outputs and variables (|a − b| ≤ 1e-5 + 1e-4·|b|).
//! Among them: steps_per_run > 1, all-reduce SUM and MEAN, broadcast,
//! replica ids and mirrored-variable updates. Also: `lower --format
//! stablehlo` output is compiled and run by the plugin from the file.

use crate::support::lowering;
use crate::support::pjrt as support;

use lowering::{default_fetches, prepare};

use tpu_rewrite::exec::driver;
use tpu_rewrite::exec::Tensor;
use tpu_rewrite::xla::backend;
use tpu_rewrite::xla::stablehlo::HostTransfer;

fn close(a: &Tensor, b: &Tensor, what: &str) {
    assert_eq!(a.shape(), b.shape(), "{what}: shapes differ");
    let to_f64 = |t: &Tensor| -> Vec<f64> {
        match t {
            Tensor::F32(x) => x.iter().map(|&v| f64::from(v)).collect(),
            Tensor::F64(x) => x.iter().copied().collect(),
            Tensor::I32(x) => x.iter().map(|&v| f64::from(v)).collect(),
            Tensor::I64(x) => x.iter().map(|&v| v as f64).collect(),
            Tensor::Bool(x) => x.iter().map(|&v| f64::from(u8::from(v))).collect(),
            other => panic!("{what}: unexpected {other:?}"),
        }
    };
    assert_eq!(a.dtype(), b.dtype(), "{what}: dtypes differ");
    for (i, (x, y)) in to_f64(a).into_iter().zip(to_f64(b)).enumerate() {
        assert!((x - y).abs() <= 1e-5 + 1e-4 * y.abs(), "{what}[{i}]: pjrt {x} vs sim {y}");
    }
}

/// Runs `path` on both backends and compares every output and variable copy.
fn differential(path: &str, topology: &str, steps: u32, steps_per_run: u32) -> backend::Outcome {
    differential_with(path, topology, steps, steps_per_run, None)
}

/// As [`differential`], with outside-compilation ops reached by `transfer`
/// (`None`: the backend's default, a host callback on the CPU plugin).
fn differential_with(
    path: &str,
    topology: &str,
    steps: u32,
    steps_per_run: u32,
    host_transfer: Option<HostTransfer>,
) -> backend::Outcome {
    let (tagged, lowered) = prepare(path, topology, steps_per_run);
    let graph = &tagged.graphs[0];
    let feeds = support::synthetic_feeds(graph);
    let fetches = default_fetches(&lowered.module);
    assert!(!fetches.is_empty(), "{path}: no outputs to compare");
    let config = driver::RunConfig { steps, ..driver::RunConfig::default() };
    let sim = driver::run(&lowered.module, &feeds, &fetches, &config, &mut |_, _| {}).expect("the simulator runs");
    let pjrt_config =
        backend::RunConfig { steps, steps_per_run, host_transfer, ..support::one_step(&feeds, Some(&tagged)) };
    let outcome = backend::run(graph, &lowered.assignment, &pjrt_config).unwrap_or_else(|e| panic!("{path}: {e}"));
    let pjrt = &outcome.run;
    for (name, want) in &sim.fetched {
        let got = pjrt.fetched.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("{path}: pjrt has no {name}"));
        close(&got.1, want, &format!("{path} {name}"));
    }
    assert_eq!(pjrt.mirrors.keys().collect::<Vec<_>>(), sim.mirrors.keys().collect::<Vec<_>>(), "{path}: variables");
    for (name, copies) in &sim.mirrors {
        assert_eq!(copies.len(), pjrt.mirrors[name].len(), "{path}: copies of {name}");
        for (r, (got, want)) in pjrt.mirrors[name].iter().zip(copies).enumerate() {
            close(got, want, &format!("{path} variable {name} replica {r}"));
        }
    }
    assert_eq!(pjrt.iterations, sim.iterations);
    outcome
}

#[test]
fn mlp_train_matches_the_simulator() {
    let out = differential("examples/mlp_train.opg", "1x8", 1, 1);
    assert_eq!(out.run.mirrors.len(), 3);
}

#[test]
fn mlp_train_over_several_steps_matches() {
    let out = differential("examples/mlp_train.opg", "1x8", 3, 1);
    // Compiled once for all steps (no cache here), executed once per step.
    assert_eq!((out.timings.compiles, out.timings.executions), (1, 3));
}

#[test]
fn mlp_train_with_steps_per_run_matches() {
    differential("examples/mlp_train.opg", "1x8", 2, 4);
}

#[test]
fn model_parallel_matches() {
    // Two partitions per replica, each op on its logical core (maximal sharding).
    differential("examples/model_parallel.opg", "1x8", 1, 1);
}

#[test]
fn model_parallel_with_steps_per_run_matches() {
    differential("examples/model_parallel.opg", "1x8", 2, 3);
}

#[test]
fn tf_tagged_matches() {
    differential("examples/tf_tagged.opg", "1x8", 1, 1);
}

#[test]
fn outside_compilation_example_with_a_host_print_matches() {
    // Two outside-compilation blocks: TF1 `Print` (passes its input through)
    // and a `Square` placed under logical core 0, both reached by callback.
    differential("examples/outside_compilation.opg", "1x2", 1, 1);
    differential("examples/outside_compilation.opg", "1x2", 2, 3);
}

/// TF2 functional control flow in a cluster: a While whose body calls a
/// function, an If, a Case with an out-of-range index on one replica
/// (the last branch) and a PartitionedCall, lowered to `stablehlo.while`,
/// `stablehlo.if`, `stablehlo.case` and `func.call`.
#[test]
fn functional_control_flow_matches() {
    let out = differential("tests/fixtures/replicated_control_flow.opg", "1x2", 1, 1);
    assert_eq!(out.run.fetched.len(), 6, "three outputs on two replicas");
}

#[test]
fn functional_control_flow_with_steps_per_run_matches() {
    differential("tests/fixtures/replicated_control_flow.opg", "1x2", 2, 3);
}

/// Stateful `While` and `If` (TensorFlow's form with resource arguments):
/// the bodies read and update a variable; PJRT threads its value through
/// the functions and matches the simulator's outputs and every replica's
/// copy of the variable.
#[test]
fn stateful_functional_control_flow_matches() {
    let out = differential("tests/fixtures/replicated_stateful_control_flow.opg", "1x2", 1, 1);
    assert_eq!(out.run.mirrors.len(), 1, "the variable w");
}

#[test]
fn stateful_functional_control_flow_over_several_steps_matches() {
    differential("tests/fixtures/replicated_stateful_control_flow.opg", "1x2", 2, 2);
}

/// A While whose body grows its carried value (a ConcatV2 of it with
/// itself) runs on the simulator, but StableHLO needs loop-invariant
/// shapes: the emission is refused with a coded lowering error naming the
/// loop, before any plugin is loaded.
#[test]
fn a_while_whose_shapes_change_is_refused() {
    let fixture = std::fs::read_to_string("tests/fixtures/replicated_control_flow.opg").expect("the fixture");
    let growing = fixture.replace(
        r#"%twice = PartitionedCall(%v) {Tin = [f32], Tout = [f32], f = func "double"}"#,
        r#"%twice = ConcatV2(%v, %v, %zero) {N = 2, T = f32, Tidx = i32}
  %zero = Const() {dtype = i32, value = tensor(i32, []) [0]}"#,
    );
    assert_ne!(growing, fixture, "the body was rewritten");
    let path = std::env::temp_dir().join(format!("xcf_growing_{}.opg", std::process::id()));
    std::fs::write(&path, growing).expect("writes the graph");
    let (tagged, lowered) = prepare(path.to_str().expect("a UTF-8 path"), "1x2", 1);
    std::fs::remove_file(&path).ok();
    let err = tpu_rewrite::xla::stablehlo::emit_all(
        &tagged.graphs[0],
        &lowered.assignment,
        1,
        HostTransfer::default(),
        Some(&tagged),
    )
    .expect_err("a loop whose shapes change is refused");
    let code = miette::Diagnostic::code(&err).map(|c| c.to_string()).unwrap_or_default();
    assert_eq!(code, "tpu_rewrite::xla::lowering", "{err}");
    let text = err.to_string();
    assert!(text.starts_with("loop (StatelessWhile)") && text.contains("must be invariant"), "{text}");
    assert!(text.contains("tensor<2xf32>") && text.contains("tensor<4xf32>"), "{text}");
}

#[test]
fn two_clusters_match() {
    differential("examples/two_clusters.opg", "1x8", 1, 1);
}

#[test]
fn all_reduce_sum_and_mean_match() {
    differential("tests/strategy/all_reduce.opg", "1x4", 1, 1);
}

#[test]
fn broadcast_matches() {
    differential("tests/strategy/broadcast.opg", "1x4", 1, 1);
}

#[test]
fn cross_replica_sums_match() {
    differential("tests/strategy/crs4.opg", "1x4", 1, 1);
}

/// Sums over groups of one replica, over pairs and over all four, each
/// grouping's sums fused into one `AllReduce` by the graph pass: every
/// fused all-reduce keeps its grouping on XLA.
#[test]
fn cross_replica_sums_over_groups_match() {
    differential("tests/strategy/crs_groups.opg", "1x4", 1, 1);
}

/// Small sums share one concatenated buffer of the all-reduce and a large
/// one is its own operand; each result is still its own value's sum.
#[test]
fn packed_small_and_separate_large_sums_match() {
    differential("tests/strategy/crs_pack.opg", "1x2", 1, 1);
}

#[test]
fn replica_id_matches() {
    differential("tests/strategy/replica_id.opg", "1x2", 1, 1);
}

#[test]
fn mirrored_variable_updates_and_reduced_outputs_match() {
    let out = differential("tests/strategy/last_step.opg", "1x2", 3, 2);
    assert_eq!(out.run.mirrors["c"].len(), 2);
}

// Outside compilation through the host callback: one module, so one
// `execute` per step (the stages form needs one per stage and iteration).

#[test]
fn outside_compilation_with_second_order_gradients_matches() {
    let out = differential("examples/second_order.opg", "1x8", 2, 1);
    assert_eq!(out.timings.executions, 2, "one execution per step: the host callback, not stages");
}

#[test]
fn outside_compilation_with_steps_per_run_matches() {
    let out = differential("examples/second_order.opg", "1x8", 1, 3);
    assert_eq!(out.timings.executions, 1, "steps_per_run loops on the device around the callbacks");
}

#[test]
fn tensorflow_outside_compilation_gradients_match() {
    let out = differential(&shared("oc_grad_r2.pb"), "1x2", 1, 1);
    assert_eq!(out.timings.executions, 1, "one execution: the host callback, not stages");
}

#[test]
fn outside_compilation_by_stages_still_matches() {
    let out = differential_with("examples/second_order.opg", "1x8", 1, 2, Some(HostTransfer::Stages));
    assert!(out.timings.executions > 2, "stages: one execution per stage and iteration");
    assert_eq!(out.timings.compiles as usize, out.timings.cache.len(), "each stage is compiled once");
    let out = differential_with(&shared("oc_grad_r2.pb"), "1x2", 1, 1, Some(HostTransfer::Stages));
    assert!(out.timings.executions > 1);
}

#[test]
fn send_recv_is_refused_by_the_run() {
    let (tagged, lowered) = prepare("examples/second_order.opg", "1x8", 1);
    let graph = &tagged.graphs[0];
    let feeds = support::synthetic_feeds(graph);
    let config = backend::RunConfig { host_transfer: Some(HostTransfer::SendRecv), ..support::one_step(&feeds, None) };
    let err = backend::run(graph, &lowered.assignment, &config).err().expect("send/recv cannot run here");
    assert!(matches!(err, tpu_rewrite::xla::XlaError::SendRecvRun { .. }), "{err}");
}

/// A graph TensorFlow's `tpu.replicate` made (`tests/fixtures/tf-graphs`,
/// copies of the project's shared GraphDefs).
fn shared(name: &str) -> String {
    format!("tests/fixtures/tf-graphs/{name}")
}

#[test]
fn tensorflow_mlp_matches() {
    differential(&shared("mlp_r4.pb"), "1x4", 1, 1);
}

/// `lower --format stablehlo -o FILE`, then the plugin compiles and runs the file.
#[test]
fn lowered_stablehlo_files_compile_and_run_on_the_plugin() {
    use tpu_rewrite::xla::client::{Client, ClientConfig};
    let exe = env!("CARGO_BIN_EXE_tpu-rewrite");
    let dir = tempfile::tempdir().unwrap();
    let client = Client::new(support::loaded(), &ClientConfig { cpu_device_count: Some(8) }).expect("client");
    // A module with host callbacks compiles only once the handler is registered.
    tpu_rewrite::xla::callback::install(client.plugin(), tpu_rewrite::xla::callback::CPU_PLATFORM).expect("handler");
    let cases = [
        ("mlp_train", "callback"),
        ("model_parallel", "callback"),
        ("tf_tagged", "callback"),
        ("two_clusters", "callback"),
        ("second_order", "callback"),
        ("second_order", "stages"),
        ("second_order", "send-recv"),
        ("outside_compilation", "callback"),
        ("outside_compilation", "stages"),
        // Functional control flow: stablehlo.while/if/case over private functions.
        ("../tests/fixtures/replicated_control_flow", "callback"),
        ("../tests/fixtures/replicated_stateful_control_flow", "callback"),
    ];
    for (example, transfer) in cases {
        let out = dir.path().join(format!("{}_{transfer}.mlir", example.replace(['.', '/'], "_")));
        let status = std::process::Command::new(exe)
            .args(["lower", "--format", "stablehlo", "--steps-per-run", "2", "--host-transfer", transfer, "-o"])
            .arg(&out)
            .arg(format!("examples/{example}.opg"))
            .status()
            .expect("runs");
        assert!(status.success(), "{example}: lower failed");
        let text = std::fs::read_to_string(&out).unwrap();
        for module in text.split("// -----\n") {
            let replicas: usize = module
                .split("mhlo.num_replicas = ")
                .nth(1)
                .and_then(|s| s.split(' ').next())
                .and_then(|n| n.parse().ok())
                .expect("mhlo.num_replicas");
            // One stage loops on the device; stages split by host ops loop on the host.
            assert!(
                module.contains("stablehlo.while") || !module.contains(" of 1: "),
                "{example}: steps_per_run 2 must loop"
            );
            let partitions: usize = module
                .split("mhlo.num_partitions = ")
                .nth(1)
                .and_then(|s| s.split(' ').next())
                .and_then(|n| n.parse().ok())
                .expect("mhlo.num_partitions");
            if transfer == "send-recv" {
                // XLA:CPU parses the module and converts it to HLO, then
                // its backend refuses host transfers: the form is for TPU/GPU.
                let err = client.compile(example, module, replicas, partitions).err().expect("CPU has no Send");
                assert!(err.to_string().contains("Send is not implemented on CPU"), "{example}: {err}");
                continue;
            }
            let exe =
                client.compile(example, module, replicas, partitions).unwrap_or_else(|e| panic!("{example}: {e}"));
            // Zeros of every argument type, read back from the signature.
            let sig = module.split("@main(").nth(1).and_then(|s| s.split(") ->").next()).unwrap_or_default();
            let args: Vec<Vec<_>> = (0..replicas * partitions)
                .map(|d| {
                    sig.split("%arg")
                        .skip(1)
                        .map(|a| {
                            let ty = a.split("tensor<").nth(1).and_then(|t| t.split('>').next()).unwrap();
                            let parts: Vec<&str> = ty.split('x').collect();
                            let shape: Vec<usize> =
                                parts[..parts.len() - 1].iter().map(|d| d.parse().unwrap()).collect();
                            let n = shape.iter().product();
                            let t = match parts[parts.len() - 1] {
                                "f32" => Tensor::from_vec(&shape, vec![0.5f32; n]).unwrap(),
                                "i32" => Tensor::from_vec(&shape, vec![1i32; n]).unwrap(),
                                other => panic!("{example}: argument type {other}"),
                            };
                            client.to_device(&t, d, "arg").unwrap()
                        })
                        .collect()
                })
                .collect();
            let refs: Vec<Vec<_>> = args.iter().map(|row| row.iter().collect()).collect();
            if module.contains("stablehlo.custom_call") {
                // Run 0 (what `lower` prints) has no host programs in this
                // process: the handler is reached and refuses, by name.
                let err = exe.execute(&refs).err().unwrap_or_else(|| panic!("{example}: run 0 is not registered"));
                assert!(err.to_string().contains("no run 0 is registered"), "{example}: {err}");
                continue;
            }
            let outputs = exe.execute(&refs).unwrap_or_else(|e| panic!("{example}: {e}"));
            assert_eq!(outputs.len(), replicas * partitions);
            assert_eq!(outputs[0].len(), exe.num_outputs);
        }
    }
}

/// `lower --format stablehlo` on a plain TensorFlow graph (no replicate
/// cluster) makes it one single-replica cluster, says so, and the written
/// file compiles and runs on the plugin.
#[test]
fn a_plain_graph_lowers_to_a_single_replica_file_that_runs() {
    use tpu_rewrite::xla::client::{Client, ClientConfig};
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("math.mlir");
    let result = std::process::Command::new(env!("CARGO_BIN_EXE_tpu-rewrite"))
        .args(["lower", "--format", "stablehlo", "-o"])
        .arg(&out)
        .arg("tests/tf/corpus/math.pbtxt")
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&result.stderr);
    assert!(result.status.success(), "{err}");
    assert!(err.contains("plain graph: compiled as one single-replica cluster"), "{err}");
    let module = std::fs::read_to_string(&out).unwrap();
    assert!(module.contains("mhlo.num_replicas = 1 : i32"), "{module}");
    let client = Client::new(support::loaded(), &ClientConfig { cpu_device_count: Some(1) }).expect("client");
    let exe = client.compile("math", &module, 1, 1).unwrap_or_else(|e| panic!("{e}"));
    let sig = module.split("@main(").nth(1).and_then(|s| s.split(") ->").next()).unwrap();
    let args: Vec<_> = sig
        .split("%arg")
        .skip(1)
        .map(|a| {
            let ty = a.split("tensor<").nth(1).and_then(|t| t.split('>').next()).unwrap();
            let parts: Vec<&str> = ty.split('x').collect();
            let shape: Vec<usize> = parts[..parts.len() - 1].iter().map(|d| d.parse().unwrap()).collect();
            let n = shape.iter().product();
            let t = match parts[parts.len() - 1] {
                "f32" => Tensor::from_vec(&shape, vec![0.5f32; n]).unwrap(),
                "i32" => Tensor::from_vec(&shape, vec![2i32; n]).unwrap(),
                "i1" => Tensor::from_vec(&shape, vec![true; n]).unwrap(),
                other => panic!("argument type {other}"),
            };
            client.to_device(&t, 0, "arg").unwrap()
        })
        .collect();
    assert_eq!(args.len(), 11, "math.pbtxt has 11 placeholders: {sig}");
    let outputs = exe.execute(&[args.iter().collect()]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(outputs.len(), 1);
    assert_eq!(outputs[0].len(), exe.num_outputs);
    // Every result reads back; the square root of 0.5 is among them.
    let values: Vec<Tensor> = outputs[0].iter().map(|b| b.to_host("result").unwrap()).collect();
    let root = 0.5f32.sqrt();
    assert!(
        values
            .iter()
            .any(|t| matches!(t, Tensor::F32(a) if a.len() == 12 && a.iter().all(|&v| (v - root).abs() < 1e-6))),
        "no sqrt(x) among the results"
    );
}
