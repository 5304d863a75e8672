//! Integration tests of the executor: hand-written lowered modules run on the mesh.

use std::time::{Duration, Instant};

use tpu_rewrite::exec::{missing_kernels, ExecError, Feeds, Fetch, Mesh, MeshConfig, Tensor};
use tpu_rewrite::ir::{parse_module, Module};

fn parse(source: &str) -> Module {
    let (module, errors) = parse_module(source.as_bytes()).expect("the test module parses");
    assert!(errors.is_empty(), "IR errors: {errors:?}");
    module
}

fn mesh(source: &str) -> Mesh {
    Mesh::new(&parse(source), MeshConfig::default()).expect("the mesh builds")
}

fn tpu(replica: usize) -> String {
    format!("/job:worker/replica:0/task:{}/device:TPU:{}", replica / 4, replica % 4)
}

fn header(name: &str, device: &str, role: &str, replica: usize) -> String {
    format!("graph @{name} (device = \"{device}\", role = \"{role}\", replica = {replica}, logical_core = 0)")
}

/// `n` replica programs: x * w, all-reduced with `reduce_op`, then w -= result.
fn sgd_module(n: usize, reduce_op: &str) -> String {
    (0..n)
        .map(|r| {
            format!(
                "{} {{
  %w = VarHandleOp() {{dtype = f32, shape = shape[3], shared_name = \"w/replica_{r}\"}}
  %x = Placeholder() {{dtype = f32, shape = shape[3]}}
  %read = ReadVariableOp(%w) {{dtype = f32}}
  %g = Mul(%x, %read) {{T = f32}}
  %sum = CollectiveAllReduce(%g) {{group = \"replicas\", group_size = {n}, rank = {r}, reduce_op = \"{reduce_op}\", instance = 1}}
  %upd = AssignSubVariableOp(%w, %sum) {{dtype = f32}}
  %id = ReplicaId()
}}
",
                header(&format!("replica_{r}"), &tpu(r), "replica", r)
            )
        })
        .collect()
}

fn feeds_for(n: usize, make: impl Fn(usize) -> Vec<f32>) -> Feeds {
    let mut feeds = Feeds::new();
    for r in 0..n {
        feeds.insert(format!("replica_{r}"), "x", Tensor::vector(make(r)));
    }
    feeds
}

#[test]
fn all_reduce_updates_every_replica_copy() {
    let n = 4;
    let mesh = mesh(&sgd_module(n, "SUM"));
    for r in 0..n {
        mesh.set_variable(&format!("replica_{r}"), &format!("w/replica_{r}"), Tensor::vector(vec![1.0f32, 2.0, 3.0]))
            .unwrap();
    }
    let feeds = feeds_for(n, |r| vec![r as f32, 1.0, 0.5]);
    let fetches: Vec<Fetch> = (0..n)
        .flat_map(|r| [Fetch::new(format!("replica_{r}"), "sum"), Fetch::new(format!("replica_{r}"), "id:0")])
        .collect();
    let out = mesh.run_step(&feeds, &fetches).unwrap();
    // sum_r x_r * w = [0+1+2+3, 4, 2] * [1, 2, 3] = [6, 8, 6].
    for r in 0..n {
        assert_eq!(out[2 * r], Tensor::vector(vec![6.0f32, 8.0, 6.0]));
        assert_eq!(out[2 * r + 1], Tensor::scalar(r as i32));
        let w = mesh.variable(&format!("replica_{r}"), &format!("w/replica_{r}")).unwrap();
        assert_eq!(w, Tensor::vector(vec![-5.0f32, -6.0, -3.0]));
    }
    // State persists: a second step starts from the updated weights.
    let out = mesh.run_step(&feeds, &[Fetch::new("replica_0", "sum")]).unwrap();
    assert_eq!(out[0], Tensor::vector(vec![-30.0f32, -24.0, -6.0]));
}

#[test]
fn all_reduce_mean_divides_by_group_size() {
    let n = 2;
    let mesh = mesh(&sgd_module(n, "MEAN"));
    for r in 0..n {
        mesh.set_variable(&format!("replica_{r}"), &format!("w/replica_{r}"), Tensor::vector(vec![1.0f32; 3])).unwrap();
    }
    let feeds = feeds_for(n, |r| vec![r as f32 * 2.0, 1.0, 3.0]);
    let out = mesh.run_step(&feeds, &[Fetch::new("replica_1", "sum")]).unwrap();
    assert_eq!(out[0], Tensor::vector(vec![1.0f32, 1.0, 3.0]));
}

#[test]
fn unsupported_reduce_op_is_an_error() {
    let mesh = mesh(&sgd_module(2, "MEDIAN"));
    for r in 0..2 {
        mesh.set_variable(&format!("replica_{r}"), &format!("w/replica_{r}"), Tensor::vector(vec![1.0f32; 3])).unwrap();
    }
    let err = mesh.run_step(&feeds_for(2, |_| vec![1.0; 3]), &[]).unwrap_err();
    assert!(err.to_string().contains("reduce_op `MEDIAN`: one of SUM, MEAN, MAX, MIN, PROD"), "{err}");
}

#[test]
fn results_are_bit_identical_across_runs_and_members() {
    let n = 8;
    let mesh = mesh(&sgd_module(n, "SUM"));
    let feeds = feeds_for(n, |r| (0..3).map(|i| 0.1 + (r * 3 + i) as f32 * 0.37e-3).collect());
    let fetches: Vec<Fetch> = (0..n).map(|r| Fetch::new(format!("replica_{r}"), "sum")).collect();
    let mut first: Option<Vec<Tensor>> = None;
    for _ in 0..5 {
        for r in 0..n {
            mesh.set_variable(
                &format!("replica_{r}"),
                &format!("w/replica_{r}"),
                Tensor::vector(vec![0.3f32, 0.7, 1.1]),
            )
            .unwrap();
        }
        let out = mesh.run_step(&feeds, &fetches).unwrap();
        assert!(out.iter().all(|t| t.bit_eq(&out[0])));
        match &first {
            None => first = Some(out),
            Some(f) => assert!(f.iter().zip(&out).all(|(a, b)| a.bit_eq(b))),
        }
    }
    // The reduction order is by rank: equal to a sequential sum.
    let expected: Vec<f32> = (0..3)
        .map(|i| {
            let w = [0.3f32, 0.7, 1.1][i];
            (0..n).fold(0.0f32, |acc, r| {
                if r == 0 {
                    (0.1 + i as f32 * 0.37e-3) * w
                } else {
                    acc + (0.1 + (r * 3 + i) as f32 * 0.37e-3) * w
                }
            })
        })
        .collect();
    assert!(first.unwrap()[0].bit_eq(&Tensor::vector(expected)));
}

#[test]
fn broadcast_gives_every_member_the_source_value() {
    let n = 3;
    let source: String = (0..n)
        .map(|r| {
            format!(
                "{} {{
  %x = Placeholder() {{dtype = i32, shape = shape[]}}
  %b = CollectiveBroadcast(%x) {{group = \"g\", group_size = {n}, rank = {r}, source = 0, instance = 7}}
}}
",
                header(&format!("replica_{r}"), &tpu(r), "replica", r)
            )
        })
        .collect();
    let mesh = mesh(&source);
    let mut feeds = Feeds::new();
    for r in 0..n {
        feeds.insert(format!("replica_{r}"), "x:0", Tensor::scalar(10 + r as i32));
    }
    let fetches: Vec<Fetch> = (0..n).map(|r| Fetch::new(format!("replica_{r}"), "b")).collect();
    assert_eq!(mesh.run_step(&feeds, &fetches).unwrap(), vec![Tensor::scalar(10i32); n]);
}

/// A replica that asks its host to compute, written with the receive of the
/// answer before the send of the question: the scheduler must send first.
const HOST_ROUND_TRIP: &str = r#"
graph @replica_0 (device = "/job:worker/replica:0/task:0/device:TPU:0", role = "replica", replica = 0, logical_core = 0) {
  %ret = _Recv() {channel = "host_compute_channel_0_retvals/replica_0", dtype = f32}
  %x = Const() {dtype = f32, value = tensor(f32, [2]) [1.5, -2.0]}
  %sq = Square(%x) {T = f32}
  %send = _Send(%sq) {channel = "host_compute_channel_0_args/replica_0"}
  %out = Add(%ret, %x) {T = f32}
}
graph @host_0 (device = "/job:worker/replica:0/task:0/device:CPU:0", role = "host", replica = 0, logical_core = 0) {
  %arg = _Recv() {channel = "host_compute_channel_0_args/replica_0", dtype = f32}
  %ten = Const() {dtype = f32, value = tensor(f32, []) [10.0]}
  %y = Mul(%arg, %ten) {T = f32}
  %back = _Send(%y) {channel = "host_compute_channel_0_retvals/replica_0"}
}
"#;

#[test]
fn send_and_recv_cross_programs() {
    let mesh = mesh(HOST_ROUND_TRIP);
    let out = mesh.run_step(&Feeds::new(), &[Fetch::new("replica_0", "out"), Fetch::new("host_0", "arg")]).unwrap();
    // x^2 * 10 + x = [22.5 + 1.5, 40 - 2].
    assert_eq!(out[0], Tensor::vector(vec![24.0f32, 38.0]));
    assert_eq!(out[1], Tensor::vector(vec![2.25f32, 4.0]));
}

#[test]
fn recv_without_any_send_is_rejected_before_running() {
    let source = r#"
graph @a (device = "/cpu:0", role = "host", replica = 0) {
  %r = _Recv() {channel = "nowhere", dtype = f32}
}
"#;
    let err = Mesh::new(&parse(source), MeshConfig::default()).unwrap_err();
    assert!(matches!(&err, ExecError::Channel { channel, .. } if channel == "nowhere"), "{err}");
}

#[test]
fn recv_that_never_gets_a_value_times_out() {
    // Each program waits for the other before sending: a true deadlock.
    let source = r#"
graph @a (device = "/cpu:0", role = "host", replica = 0) {
  %r = _Recv() {channel = "b_to_a", dtype = f32}
  %s = _Send(%r) {channel = "a_to_b"}
}
graph @b (device = "/cpu:1", role = "host", replica = 1) {
  %r = _Recv() {channel = "a_to_b", dtype = f32}
  %s = _Send(%r) {channel = "b_to_a"}
}
"#;
    let mesh = Mesh::new(&parse(source), MeshConfig { timeout: Duration::from_millis(300), deadline: None }).unwrap();
    let start = Instant::now();
    let err = mesh.run_step(&Feeds::new(), &[]).unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(5), "took {:?}", start.elapsed());
    match err {
        ExecError::Timeout { node, op, what, .. } => {
            assert_eq!(node, "r");
            assert_eq!(op, "_Recv");
            assert!(what.contains("channel"), "{what}");
        }
        other => panic!("expected a timeout, got {other}"),
    }
}

#[test]
fn failing_kernel_on_one_of_eight_devices_cancels_the_step_promptly() {
    let n = 8;
    let bad = 5;
    let source: String = (0..n)
        .map(|r| {
            // Replica `bad` reshapes 3 elements into 2: a kernel error before the all-reduce.
            let target = if r == bad { 2 } else { 3 };
            format!(
                "{} {{
  %x = Placeholder() {{dtype = f32, shape = shape[3]}}
  %shape = Const() {{dtype = i32, value = tensor(i32, [1]) [{target}]}}
  %y = Reshape(%x, %shape) {{T = f32}}
  %sum = CollectiveAllReduce(%y) {{group = \"replicas\", group_size = {n}, rank = {r}, reduce_op = \"SUM\", instance = 1}}
}}
",
                header(&format!("replica_{r}"), &tpu(r), "replica", r)
            )
        })
        .collect();
    let module = parse(&source);
    // A long timeout: the error must come from cancellation, not from waiting it out.
    let mesh = Mesh::new(&module, MeshConfig { timeout: Duration::from_secs(60), deadline: None }).unwrap();
    let start = Instant::now();
    let err = mesh.run_step(&feeds_for(n, |_| vec![1.0, 2.0, 3.0]), &[Fetch::new("replica_0", "sum")]).unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(5), "took {:?}", start.elapsed());
    match &err {
        ExecError::Kernel { graph, node, op, span, device, .. } => {
            assert_eq!(graph, "replica_5");
            assert_eq!(device, &tpu(bad));
            assert_eq!(node, "y");
            assert_eq!(op, "Reshape");
            let text = &source[span.start as usize..span.end as usize];
            assert!(text.contains("Reshape"), "span covers {text:?}");
        }
        other => panic!("expected a kernel error, got {other}"),
    }
    assert!(err.to_string().contains("replica_5") && err.to_string().contains("Reshape"), "{err}");
}

#[test]
fn driver_graph_runs_only_what_is_needed() {
    let source = r#"
graph @main (device = "/job:worker/replica:0/task:0/device:CPU:0", role = "main") {
  %v = VarHandleOp() {dtype = i32, shape = shape[], shared_name = "counter"}
  %zero = Const() {dtype = i32, value = tensor(i32, []) [0]}
  %init = AssignVariableOp(%v, %zero) {dtype = i32}
  %one = Const() {dtype = i32, value = tensor(i32, []) [1]}
  %inc = AssignAddVariableOp(%v, %one) {dtype = i32}
  %read = ReadVariableOp(%v, ^%inc) {dtype = i32}
  %ready = VarIsInitializedOp(%v)
  %unfed = Placeholder() {dtype = f32, shape = shape[]}
}
"#;
    let mesh = mesh(source);
    let ready = mesh.run_step(&Feeds::new(), &[Fetch::new("main", "ready")]).unwrap();
    assert_eq!(ready[0], Tensor::scalar(false));
    mesh.run_step_with_targets(&Feeds::new(), &[], &[Fetch::new("main", "^init")]).unwrap();
    for expected in 1..=3 {
        // The unfed placeholder is not needed, so it is not an error.
        let out = mesh.run_step(&Feeds::new(), &[Fetch::new("main", "read")]).unwrap();
        assert_eq!(out[0], Tensor::scalar(expected));
    }
    assert_eq!(mesh.variable("main", "counter"), Some(Tensor::scalar(3i32)));
    assert_eq!(mesh.variable_names("main"), vec!["counter".to_string()]);
    let err = mesh.run_step(&Feeds::new(), &[Fetch::new("main", "unfed")]).unwrap_err();
    assert!(err.to_string().contains("must be fed"), "{err}");
}

#[test]
fn feeding_a_tensor_replaces_its_op() {
    let source = r#"
graph @main {
  %a = Const() {dtype = f32, value = tensor(f32, []) [1.0]}
  %b = Neg(%a) {T = f32}
  %c = Mul(%b, %b) {T = f32}
}
"#;
    let mesh = mesh(source);
    assert_eq!(mesh.run_step(&Feeds::new(), &[Fetch::new("main", "c")]).unwrap()[0], Tensor::scalar(1.0f32));
    let feeds = Feeds::new().with("main", "b:0", Tensor::scalar(3.0f32));
    assert_eq!(mesh.run_step(&feeds, &[Fetch::new("main", "c")]).unwrap()[0], Tensor::scalar(9.0f32));
}

#[test]
fn unknown_fetches_and_feeds_are_errors() {
    let mesh = mesh(HOST_ROUND_TRIP);
    let none = Feeds::new();
    assert!(matches!(mesh.run_step(&none, &[Fetch::new("nope", "x")]), Err(ExecError::UnknownGraph { .. })));
    assert!(matches!(mesh.run_step(&none, &[Fetch::new("replica_0", "nope")]), Err(ExecError::UnknownTensor { .. })));
    assert!(matches!(mesh.run_step(&none, &[Fetch::new("replica_0", "x:7")]), Err(ExecError::UnknownTensor { .. })));
    let bad_feed = Feeds::new().with("replica_0", "^x", Tensor::scalar(1.0f32));
    assert!(matches!(mesh.run_step(&bad_feed, &[]), Err(ExecError::UnknownTensor { .. })));
}

#[test]
fn tpu_replicated_input_picks_the_graphs_replica() {
    let source: String = (0..2)
        .map(|r| {
            format!(
                "{} {{
  %a = Const() {{dtype = f32, value = tensor(f32, []) [10.0]}}
  %b = Const() {{dtype = f32, value = tensor(f32, []) [20.0]}}
  %in = TPUReplicatedInput(%a, %b) {{N = 2, T = f32}}
  %meta = TPUReplicateMetadata() {{num_replicas = 2}}
  %out = TPUReplicatedOutput(%in) {{num_replicas = 2, T = f32}}
}}
",
                header(&format!("replica_{r}"), &tpu(r), "replica", r)
            )
        })
        .collect();
    let mesh = mesh(&source);
    let out = mesh.run_step(&Feeds::new(), &[Fetch::new("replica_0", "in"), Fetch::new("replica_1", "out:1")]).unwrap();
    assert_eq!(out, vec![Tensor::scalar(10.0f32), Tensor::scalar(20.0f32)]);
}

#[test]
fn missing_kernels_lists_every_op_type_once() {
    let source = r#"
graph @main {
  %a = Frobnicate() {}
  %b = Frobnicate(%a) {}
  %c = Zap(%b) {}
  %d = Relu(%c) {T = f32}
}
"#;
    let module = parse(source);
    assert_eq!(missing_kernels(&module), vec!["Frobnicate".to_string(), "Zap".to_string()]);
    match Mesh::new(&module, MeshConfig::default()) {
        Err(ExecError::MissingKernels { ops, .. }) => assert_eq!(ops, vec!["Frobnicate", "Zap"]),
        other => panic!("expected missing kernels, got {other:?}"),
    }
}

#[test]
fn unlowered_modules_are_rejected() {
    let source = r#"
graph @main {
  %x = Const() {dtype = f32, value = tensor(f32, []) [1.0]}
  replicate (num_replicas = 2) (%y = [%x, %x]) {
    %z = Neg(%y) {T = f32}
    return %z
  }
}
"#;
    let (module, _) = parse_module(source.as_bytes()).unwrap();
    assert!(matches!(Mesh::new(&module, MeshConfig::default()), Err(ExecError::NotLowered { .. })));
}

#[test]
fn many_small_all_reduces_in_one_step() {
    // 32 all-reduces of 256 KiB each (65536 f32) over 8 replicas.
    let n = 8;
    let count = 32;
    let len = 65536;
    let source: String = (0..n)
        .map(|r| {
            let mut body = String::from("  %x = Placeholder() {dtype = f32, shape = shape[65536]}\n");
            for k in 0..count {
                body.push_str(&format!(
                    "  %s{k} = CollectiveAllReduce(%x) {{group = \"replicas\", group_size = {n}, rank = {r}, reduce_op = \"SUM\", instance = {k}}}\n"
                ));
            }
            format!("{} {{\n{body}}}\n", header(&format!("replica_{r}"), &tpu(r), "replica", r))
        })
        .collect();
    let mesh = mesh(&source);
    let feeds = feeds_for(n, |r| vec![r as f32; len]);
    let fetches: Vec<Fetch> = (0..count).map(|k| Fetch::new(format!("replica_{}", k % n), format!("s{k}"))).collect();
    let out = mesh.run_step(&feeds, &fetches).unwrap();
    for t in out {
        assert_eq!(t.shape(), &[len]);
        assert!(t.view::<f32>().unwrap().iter().all(|&v| v == 28.0));
    }
}

#[test]
fn all_reduce_of_half_values_sums_in_f32_and_rounds_once() {
    use half::bf16;
    let n = 3;
    let text: String = (0..n)
        .map(|r| {
            format!(
                "{} {{
  %x = Placeholder() {{dtype = bf16, shape = shape[2]}}
  %sum = CollectiveAllReduce(%x) {{T = bf16, group = \"replicas\", group_size = {n}, rank = {r}, reduce_op = \"SUM\", instance = 1}}
}}
",
                header(&format!("replica_{r}"), &tpu(r), "replica", r)
            )
        })
        .collect();
    let mesh = mesh(&text);
    // 1 + 2^-8 + 2^-8: in bf16 step by step each addition of 2^-8 to 1 rounds back to 1 (ties to
    // even); summed in f32 and rounded once it is 1 + 2^-7.
    let values = [1.0f32, 2f32.powi(-8), 2f32.powi(-8)];
    let mut feeds = Feeds::new();
    for (r, v) in values.iter().enumerate() {
        feeds.insert(format!("replica_{r}"), "x", Tensor::vector(vec![bf16::from_f32(*v), bf16::from_f32(-*v)]));
    }
    let fetches: Vec<Fetch> = (0..n).map(|r| Fetch::new(format!("replica_{r}"), "sum")).collect();
    let out = mesh.run_step(&feeds, &fetches).unwrap();
    let total: f32 = values.iter().sum();
    let want = Tensor::vector(vec![bf16::from_f32(total), bf16::from_f32(-total)]);
    assert_eq!(want.to_vec::<bf16>().unwrap()[0], bf16::from_f32(1.0 + 2f32.powi(-7)));
    assert!(out.iter().all(|t| t == &want), "{out:?}");
}
