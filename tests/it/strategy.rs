//! The TPUStrategy surface end to end: `replicate` graphs run through the
//! pass pipeline, the lowering and the mesh; all_reduce SUM/MEAN, broadcast,
//! replica_id, all-reduce fusion, split batches, per-host feeds and
//! last-step output grouping. Snapshots print each operation's lowering.

use tpu_rewrite::emit::print_module;
use tpu_rewrite::exec::{group_outputs, split_batch, Feeds, Fetch, Mesh, MeshConfig, OutputValue, ReduceOp, Tensor};
use tpu_rewrite::ir::{self, Module};
use tpu_rewrite::lower::{input_workers, lower, LowerConfig, LowerFailure, Topology};
use tpu_rewrite::passes::{run_pipeline, AllReduceFusion, FusionConfig, PipelineConfig};

const CRS4: &str = include_str!("../strategy/crs4.opg");
const ALL_REDUCE: &str = include_str!("../strategy/all_reduce.opg");
const BROADCAST: &str = include_str!("../strategy/broadcast.opg");
const REPLICA_ID: &str = include_str!("../strategy/replica_id.opg");
const SPLIT_BATCH: &str = include_str!("../strategy/split_batch.opg");
const UPDATE: &str = include_str!("../strategy/update.opg");
const PER_HOST: &str = include_str!("../strategy/per_host.opg");
const LAST_STEP: &str = include_str!("../strategy/last_step.opg");

/// Rewrites and lowers `text` for `topology`.
fn lowered(text: &str, topology: &str, fusion: AllReduceFusion) -> Module {
    let (mut module, errors) = ir::parse_module(text.as_bytes()).expect("the test graph parses");
    assert!(errors.is_empty(), "{errors:?}");
    let report = run_pipeline(&mut module, &PipelineConfig { all_reduce_fusion: fusion, ..PipelineConfig::default() });
    assert!(!report.has_errors(), "{:?}", report.diagnostics);
    let config = LowerConfig { topology: Topology::parse(topology).unwrap(), ..LowerConfig::default() };
    match lower(&module.graphs[0], &config) {
        Ok(l) => l.module,
        Err(LowerFailure::Lower(e)) => panic!("{e:?}"),
        Err(LowerFailure::Clusters(e)) => panic!("{e:?}"),
    }
}

/// Runs one step: feeds host placeholders, fetches `output_{i}_shard_{r}`
/// of the host for each output and replica; the result is `[replica][output]`.
fn run(module: &Module, feeds: &[(&str, Tensor)], outputs: usize, replicas: usize) -> Vec<Vec<Tensor>> {
    let mesh = Mesh::new(module, MeshConfig::default()).expect("the mesh builds");
    let mut f = Feeds::new();
    for (name, value) in feeds {
        f.insert("host", *name, value.clone());
    }
    let fetches: Vec<Fetch> = (0..replicas)
        .flat_map(|r| (0..outputs).map(move |i| Fetch::new("host", format!("output_{i}_shard_{r}:0"))))
        .collect();
    let flat = mesh.run_step(&f, &fetches).expect("the step runs");
    flat.chunks(outputs).map(<[Tensor]>::to_vec).collect()
}

fn v(values: &[f32]) -> Tensor {
    Tensor::vector(values.to_vec())
}

#[test]
fn all_reduce_sum_and_mean_match_hand_computed_values() {
    let m = lowered(ALL_REDUCE, "1x4", AllReduceFusion::Off);
    let feeds = [
        ("a0", v(&[1.0, 2.0])),
        ("a1", v(&[3.0, 4.0])),
        ("a2", v(&[5.0, 6.0])),
        ("a3", v(&[7.0, 10.0])),
        ("b0", Tensor::scalar(1i32)),
        ("b1", Tensor::scalar(20i32)),
        ("b2", Tensor::scalar(300i32)),
        ("b3", Tensor::scalar(4000i32)),
    ];
    let out = run(&m, &feeds, 3, 4);
    for replica in &out {
        // SUM: [1+3+5+7, 2+4+6+10] = [16, 22]; 1+20+300+4000 = 4321.
        assert_eq!(replica[0], v(&[16.0, 22.0]));
        assert_eq!(replica[1], Tensor::scalar(4321i32));
        // MEAN: [16/4, 22/4] = [4, 5.5].
        assert_eq!(replica[2], v(&[4.0, 5.5]));
    }
    insta::assert_snapshot!("all_reduce_lowered", print_module(&m));
}

#[test]
fn unsupported_reduce_op_is_a_lowering_error() {
    let text = ALL_REDUCE.replace("\"MEAN\"", "\"MAX\"");
    let (mut module, _) = ir::parse_module(text.as_bytes()).unwrap();
    run_pipeline(&mut module, &PipelineConfig::default());
    let config = LowerConfig { topology: Topology::parse("1x4").unwrap(), ..LowerConfig::default() };
    let Err(LowerFailure::Lower(errors)) = lower(&module.graphs[0], &config) else { panic!("expected an error") };
    assert!(errors[0].to_string().contains("only SUM and MEAN are supported"), "{}", errors[0]);
}

#[test]
fn broadcast_gives_every_replica_replica_zero_value() {
    let m = lowered(BROADCAST, "1x4", AllReduceFusion::Off);
    let feeds = [("x0", v(&[1.0, 2.0, 3.0])), ("x1", v(&[4.0, 5.0, 6.0])), ("x2", v(&[7.0, 8.0, 9.0]))];
    let out = run(&m, &feeds, 1, 3);
    assert_eq!(out, vec![vec![v(&[1.0, 2.0, 3.0])]; 3]);
    insta::assert_snapshot!("broadcast_lowered", print_module(&m));
}

#[test]
fn replica_id_is_a_per_replica_constant() {
    let m = lowered(REPLICA_ID, "1x2", AllReduceFusion::Off);
    let feeds = [("x0", Tensor::vector(vec![3i32, 4])), ("x1", Tensor::vector(vec![3i32, 4]))];
    let out = run(&m, &feeds, 2, 2);
    // Replica r: id r, and x * r.
    assert_eq!(out[0], vec![Tensor::scalar(0i32), Tensor::vector(vec![0i32, 0])]);
    assert_eq!(out[1], vec![Tensor::scalar(1i32), Tensor::vector(vec![3i32, 4])]);
    insta::assert_snapshot!("replica_id_lowered", print_module(&m));
}

/// Feeds for CRS4: replica r's `a` is `[r + 0.1, 2r - 0.3, 0.7]`, its `b` a 2x2 of small values.
fn crs4_feeds() -> Vec<(String, Tensor)> {
    let mut feeds = Vec::new();
    for r in 0..4 {
        let r32 = r as f32;
        feeds.push((format!("a{r}"), v(&[r32 + 0.1, 2.0 * r32 - 0.3, 0.7])));
        let b = Tensor::from_vec(&[2, 2], vec![0.25 * r32, -1.5, 0.1 * r32, 3.0]).unwrap();
        feeds.push((format!("b{r}"), b));
    }
    feeds
}

#[test]
fn fused_and_unfused_all_reduces_are_bit_identical() {
    let unfused = lowered(CRS4, "1x4", AllReduceFusion::Off);
    let fused = lowered(CRS4, "1x4", AllReduceFusion::On(FusionConfig::default()));
    let count = |m: &Module| {
        m.graph("cluster")
            .map(|g| g.nodes_in_order().into_iter().filter(|&id| &*g.node(id).op == "CollectiveAllReduce").count())
    };
    // Four sums, all independent: four collectives unfused, one fused.
    assert_eq!(count(&unfused), Some(4));
    assert_eq!(count(&fused), Some(1));
    let owned = crs4_feeds();
    let feeds: Vec<(&str, Tensor)> = owned.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let a = run(&unfused, &feeds, 3, 4);
    let b = run(&fused, &feeds, 3, 4);
    for (x, y) in a.iter().flatten().zip(b.iter().flatten()) {
        assert!(x.bit_eq(y), "{x:?} != {y:?}");
    }
    // Output 1 is sum(b): [[0.25 * 6, -6], [0.1 * 6, 12]] with r = 0..3 summed in order.
    let by_hand: Vec<f32> =
        vec![((0.0f32 + 0.25) + 0.5) + 0.75, ((-1.5f32 + -1.5) + -1.5) + -1.5, ((0.0f32 + 0.1) + 0.2) + 0.3, 12.0];
    assert!(a[0][1].bit_eq(&Tensor::from_vec(&[2, 2], by_hand).unwrap()), "{:?}", a[0][1]);
    insta::assert_snapshot!("crs4_fused_lowered", print_module(&fused));
}

#[test]
fn fusion_threshold_keeps_large_sums_apart() {
    // The `a` sums are 12 bytes each, the `b` sums 16: under a 32-byte limit
    // any two fit (at most 16 + 16) and no three do (at least 12 + 12 + 16).
    let fusion = AllReduceFusion::On(FusionConfig { threshold_bytes: Some(32) });
    let m = lowered(CRS4, "1x4", fusion);
    let g = m.graph("cluster").unwrap();
    let collectives = g.nodes_in_order().into_iter().filter(|&id| &*g.node(id).op == "CollectiveAllReduce").count();
    assert_eq!(collectives, 2);
}

#[test]
fn split_batch_equals_feeding_slices_by_hand() {
    let m = lowered(SPLIT_BATCH, "1x2", AllReduceFusion::Off);
    let global = Tensor::from_vec(&[4, 2], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]).unwrap();
    let slices = split_batch(&global, 2).unwrap();
    let split = run(&m, &[("x0", slices[0].clone()), ("x1", slices[1].clone())], 2, 2);
    let by_hand = [
        ("x0", Tensor::from_vec(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap()),
        ("x1", Tensor::from_vec(&[2, 2], vec![5.0f32, 6.0, 7.0, 8.0]).unwrap()),
    ];
    assert_eq!(split, run(&m, &by_hand, 2, 2));
    // Squares summed over replicas: [1+25, 4+36, 9+49, 16+64].
    assert_eq!(split[1][1], Tensor::from_vec(&[2, 2], vec![26.0f32, 40.0, 58.0, 80.0]).unwrap());
    let odd = Tensor::from_vec(&[7], vec![0.0f32; 7]).unwrap();
    assert_eq!(
        split_batch(&odd, 2).unwrap_err().to_string(),
        "The `global_batch_size` 7 is not divisible by `num_replicas_in_sync` 2"
    );
}

#[test]
fn per_host_feeds_equal_feeding_each_host_replicas_by_hand() {
    // Four replicas on 2x2: host 0 feeds replicas 0-1, host 1 feeds 2-3.
    let m = lowered(PER_HOST, "2x2", AllReduceFusion::Off);
    let topology = Topology::parse("2x2").unwrap();
    let assignment = tpu_rewrite::lower::DeviceAssignment::full_mesh(&topology, 4, 1).unwrap();
    let hosts: Vec<Vec<u32>> = input_workers(&assignment).into_iter().map(|w| w.replicas).collect();
    assert_eq!(hosts, vec![vec![0, 1], vec![2, 3]]);
    let batch = |rows: [f32; 4]| Tensor::from_vec(&[2, 2], rows.to_vec()).unwrap();
    let host_feeds = vec![
        vec![("input0:0".to_string(), batch([1.0, 2.0, 3.0, 4.0]))],
        vec![("input0:0".to_string(), batch([5.0, 6.0, -7.0, 8.5]))],
    ];
    let split = tpu_rewrite::exec::split_per_host(&host_feeds, &hosts).unwrap();
    let [(name, slices)] = split.as_slice() else { panic!("one input: {split:?}") };
    assert_eq!(name, "input0:0");
    let names = ["x0", "x1", "x2", "x3"];
    let fed: Vec<(&str, Tensor)> = names.iter().copied().zip(slices.iter().cloned()).collect();
    let row = |a: f32, b: f32| Tensor::from_vec(&[1, 2], vec![a, b]).unwrap();
    let by_hand: Vec<(&str, Tensor)> =
        names.iter().copied().zip([row(1.0, 2.0), row(3.0, 4.0), row(5.0, 6.0), row(-7.0, 8.5)]).collect();
    let out = run(&m, &fed, 2, 4);
    assert_eq!(out, run(&m, &by_hand, 2, 4));
    // Doubled rows summed over replicas: 2 * [1 + 3 + 5 - 7, 2 + 4 + 6 + 8.5].
    assert_eq!(out[3][1], row(4.0, 41.0));
}

#[test]
fn last_step_outputs_group_by_output_with_and_without_reduce_ops() {
    let m = lowered(SPLIT_BATCH, "1x2", AllReduceFusion::Off);
    let global = Tensor::from_vec(&[4, 2], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]).unwrap();
    let slices = split_batch(&global, 2).unwrap();
    let per_replica = run(&m, &[("x0", slices[0].clone()), ("x1", slices[1].clone())], 2, 2);
    let squares: Vec<Tensor> = per_replica.iter().map(|r| r[0].clone()).collect();
    let grouped = group_outputs(per_replica, &[None, Some(ReduceOp::Sum)]);
    assert_eq!(grouped[0], OutputValue::PerReplica(squares));
    assert_eq!(grouped[1], OutputValue::Reduced(Tensor::from_vec(&[2, 2], vec![26.0f32, 40.0, 58.0, 80.0]).unwrap()));
}

/// The module without its init program (the mesh of the step programs).
fn step_programs(m: &Module) -> Module {
    Module { header: Vec::new(), graphs: m.graphs.iter().filter(|g| g.name != "init").cloned().collect() }
}

#[test]
fn update_changes_each_copy_in_replicas_and_every_copy_outside() {
    let m = lowered(UPDATE, "1x2", AllReduceFusion::Off);
    insta::assert_snapshot!("update_lowered", print_module(&m));
    let mesh = Mesh::new(&step_programs(&m), MeshConfig::default()).expect("the mesh builds");
    // TPUStrategy's names: replica 0's copy keeps the variable's name,
    // replica r > 0 is `<name>/replica_<r>`.
    let copy = |r: usize| if r == 0 { "w".to_string() } else { format!("w/replica_{r}") };
    // What the driver's initialisation does: every copy of w, and the host's global step.
    for r in 0..2 {
        mesh.set_variable(&format!("cluster/replica_{r}"), &copy(r), v(&[1.0, 2.0])).unwrap();
    }
    mesh.set_variable("host", "global_step", Tensor::scalar(0i64)).unwrap();
    let copies = || -> Vec<Tensor> {
        (0..2).map(|r| mesh.variable(&format!("cluster/replica_{r}"), &copy(r)).unwrap()).collect()
    };
    let feeds = |a: [f32; 2], b: [f32; 2]| Feeds::new().with("host", "x0", v(&a)).with("host", "x1", v(&b));
    let outputs = [Fetch::new("host", "output_0_shard_0:0"), Fetch::new("host", "output_0_shard_1:0")];

    // In the replicas, each device adds its own x to its own copy.
    let out = mesh.run_step(&feeds([1.0, 1.0], [5.0, 7.0]), &outputs).unwrap();
    assert_eq!(out, vec![v(&[2.0, 3.0]), v(&[6.0, 9.0])]);
    assert_eq!(copies(), vec![v(&[2.0, 3.0]), v(&[6.0, 9.0])]);

    // Outside the cluster a read gives the primary (replica 0) copy. The
    // replicas add zero meanwhile, which changes nothing.
    let zeros = feeds([0.0, 0.0], [0.0, 0.0]);
    let read = mesh.run_step(&zeros, &[Fetch::new("host", "w_host:0")]).unwrap();
    assert_eq!(read, vec![v(&[2.0, 3.0])]);

    // Outside the cluster, update writes every copy; update_non_slot runs
    // once, on the host's variable only.
    let targets = [Fetch::new("host", "^reset"), Fetch::new("host", "^tick")];
    mesh.run_step_with_targets(&zeros, &[], &targets).unwrap();
    assert_eq!(copies(), vec![v(&[10.0, 20.0]); 2]);
    assert_eq!(mesh.variable("host", "global_step"), Some(Tensor::scalar(1i64)));
    mesh.run_step_with_targets(&zeros, &[], &targets[1..]).unwrap();
    assert_eq!(mesh.variable("host", "global_step"), Some(Tensor::scalar(2i64)));
    assert_eq!(mesh.variable("cluster/replica_0", "global_step"), None);
}

#[test]
fn update_with_an_unknown_fn_is_a_lowering_error() {
    let text = UPDATE.replace("{fn = \"AssignAdd\"}\n    %w_read", "{fn = \"Scale\"}\n    %w_read");
    let (mut module, _) = ir::parse_module(text.as_bytes()).unwrap();
    run_pipeline(&mut module, &PipelineConfig::default());
    let config = LowerConfig { topology: Topology::parse("1x2").unwrap(), ..LowerConfig::default() };
    let Err(LowerFailure::Lower(errors)) = lower(&module.graphs[0], &config) else { panic!("expected an error") };
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].to_string().contains("not \"Scale\""), "{}", errors[0]);
}

#[test]
fn driver_run_initialises_every_copy_and_each_replica_updates_its_own() {
    let m = lowered(UPDATE, "1x2", AllReduceFusion::Off);
    let feeds = vec![("x0".to_string(), v(&[1.0, 1.0])), ("x1".to_string(), v(&[5.0, 7.0]))];
    let config = tpu_rewrite::exec::driver::RunConfig { steps: 2, ..Default::default() };
    let outcome = tpu_rewrite::exec::driver::run(&m, &feeds, &[], &config, &mut |_, _| {}).unwrap();
    // Two steps from [1, 2]: replica 0 adds [1, 1] twice, replica 1 adds [5, 7] twice.
    assert_eq!(outcome.mirrors["w"], vec![v(&[3.0, 4.0]), v(&[11.0, 16.0])]);
    assert_eq!(outcome.variables["w"], v(&[3.0, 4.0]));
}

#[test]
fn marked_outputs_are_reduced_on_the_devices_and_returned_once() {
    let (mut module, errors) = ir::parse_module(LAST_STEP.as_bytes()).unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    assert!(!run_pipeline(&mut module, &PipelineConfig::default()).has_errors());
    let tagged = module.graphs[0].clone();
    assert_eq!(tpu_rewrite::exec::output_reduce_ops(&tagged), vec![None, Some(ReduceOp::Sum), Some(ReduceOp::Mean)]);
    let config = LowerConfig { topology: Topology::parse("1x2").unwrap(), steps_per_run: 3, ..LowerConfig::default() };
    let Ok(lowering) = lower(&tagged, &config) else { panic!("lowering failed") };
    insta::assert_snapshot!("last_step_lowered", print_module(&lowering.module));
    let feeds = vec![("x0".to_string(), v(&[1.0, 2.0])), ("x1".to_string(), v(&[10.0, 20.0]))];
    // Fetches by replica, then output, as the mesh gives them.
    let fetches: Vec<String> = (0..2).flat_map(|r| (0..3).map(move |i| format!("output_{i}_shard_{r}:0"))).collect();
    let run_config = tpu_rewrite::exec::driver::RunConfig { steps: 1, ..Default::default() };
    let outcome =
        tpu_rewrite::exec::driver::run(&lowering.module, &feeds, &fetches, &run_config, &mut |_, _| {}).unwrap();
    assert_eq!(outcome.iterations, 3);
    let values: Vec<Tensor> = outcome.fetched.into_iter().map(|(_, t)| t).collect();
    let per_replica: Vec<Vec<Tensor>> = values.chunks(3).map(<[Tensor]>::to_vec).collect();
    // Every replica holds the same reduced values.
    assert_eq!(per_replica[0][1..], per_replica[1][1..]);
    let grouped = group_outputs(per_replica, &tpu_rewrite::exec::output_reduce_ops(&tagged));
    // After three steps replica r's count is 3 x_r.
    assert_eq!(
        grouped,
        vec![
            OutputValue::PerReplica(vec![v(&[3.0, 6.0]), v(&[30.0, 60.0])]),
            OutputValue::Reduced(v(&[33.0, 66.0])),
            OutputValue::Reduced(v(&[16.5, 33.0])),
        ]
    );
}
