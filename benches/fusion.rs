//! All-reduce fusion: 32 CrossReplicaSums of 256 KiB each over 8 replicas.
//!
//! The same replicated graph is rewritten with and without the
//! `fuse-all-reduce` pass, lowered for a 2x4 topology and run on the mesh.
//! The summed values are produced on the devices: each replica reads its
//! own copies of 32 mirrored variables (set once, before timing), so a
//! step is the collective work alone, not host feeds. Each iteration is one
//! `Mesh::run_step` fetching replica 0's first sum. Unfused, the step meets
//! at 32 collectives, each reduced by one member; fused, at one collective
//! over the 32 operands (8 MiB per member), reduced by all members in
//! parallel, each taking its eighth of every operand.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use std::time::Duration;

use tpu_rewrite::exec::{Feeds, Fetch, Mesh, MeshConfig, Tensor};
use tpu_rewrite::ir::parse_module;
use tpu_rewrite::lower::{lower, LowerConfig, Topology};
use tpu_rewrite::passes::{run_pipeline, AllReduceFusion, FusionConfig, PipelineConfig};
use tpu_rewrite::progress::process_cpu_time;

const REPLICAS: usize = 8;
const SUMS: usize = 32;
const BYTES: usize = 256 << 10;

/// A graph whose replicas each all-reduce `SUMS` variables of `len` f32.
fn source(len: usize) -> String {
    let mut text = String::from("graph @main {\n");
    for k in 0..SUMS {
        text.push_str(&format!(
            "  %w{k} = VarHandleOp() {{dtype = f32, shape = shape[{len}], shared_name = \"w{k}\"}}\n"
        ));
    }
    text.push_str(&format!("  replicate (num_replicas = {REPLICAS}) () {{\n"));
    let mut outputs = Vec::new();
    for k in 0..SUMS {
        text.push_str(&format!("    %r{k} = ReadVariableOp(%w{k}) {{dtype = f32}}\n"));
        text.push_str(&format!("    %s{k} = CrossReplicaSum(%r{k}) {{T = f32}}\n"));
        outputs.push(format!("%s{k}"));
    }
    text.push_str(&format!("    return {}\n  }}\n}}\n", outputs.join(", ")));
    text
}

/// The mesh with every replica's copies of the variables set, and the fetch.
fn setup(fusion: AllReduceFusion) -> (Mesh, Vec<Fetch>) {
    let len = BYTES / 4;
    let (mut module, errors) = parse_module(source(len).as_bytes()).expect("bench graph parses");
    assert!(errors.is_empty(), "{errors:?}");
    let report = run_pipeline(&mut module, &PipelineConfig { all_reduce_fusion: fusion, ..PipelineConfig::default() });
    assert!(!report.has_errors(), "{:?}", report.diagnostics);
    let config = LowerConfig { topology: Topology::parse("2x4").expect("topology"), ..LowerConfig::default() };
    let lowered = lower(&module.graphs[0], &config).unwrap_or_else(|e| panic!("lowering failed: {e:?}"));
    // Guard the comparison itself: fused, each replica meets once; unfused, 32 times.
    let replica = lowered.module.graphs.iter().find(|g| g.name == "cluster/replica_0").expect("replica 0's program");
    let collectives =
        replica.nodes_in_order().into_iter().filter(|&id| &*replica.node(id).op == "CollectiveAllReduce").count();
    let expected = if matches!(fusion, AllReduceFusion::Off) { SUMS } else { 1 };
    assert_eq!(collectives, expected, "collectives per replica with {fusion:?}");
    let mesh = Mesh::new(&lowered.module, MeshConfig::default()).expect("mesh");
    for r in 0..REPLICAS {
        for k in 0..SUMS {
            let values: Vec<f32> = (0..len).map(|i| ((i + r + k) % 17) as f32 * 0.25).collect();
            mesh.set_variable(&format!("cluster/replica_{r}"), &format!("w{k}/replica_{r}"), Tensor::vector(values))
                .expect("replica program");
        }
    }
    (mesh, vec![Fetch::new("host", "output_0_shard_0:0")])
}

/// Prints the CPU time and wall time per step over `steps` steps: on a
/// shared machine the CPU time is the steadier figure.
fn report_cpu(name: &str, mesh: &Mesh, fetches: &[Fetch], steps: u32) {
    let (cpu0, wall0) = (process_cpu_time(), std::time::Instant::now());
    for _ in 0..steps {
        black_box(mesh.run_step(&Feeds::new(), fetches).expect("step"));
    }
    let wall = wall0.elapsed().as_secs_f64() * 1e3 / f64::from(steps);
    match (cpu0, process_cpu_time()) {
        (Some(a), Some(b)) => {
            println!(
                "{name}: {:.2} ms CPU, {wall:.2} ms wall per step ({steps} steps)",
                (b - a).as_secs_f64() * 1e3 / f64::from(steps)
            )
        }
        _ => println!("{name}: {wall:.2} ms wall per step ({steps} steps)"),
    }
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("fusion");
    group.sample_size(20).measurement_time(Duration::from_secs(5));
    group.throughput(Throughput::Bytes((SUMS * BYTES) as u64));
    let (mesh, fetches) = setup(AllReduceFusion::Off);
    let unfused = mesh.run_step(&Feeds::new(), &fetches).expect("step");
    group.bench_function("unfused 32 x 256KiB x 8 replicas", |b| {
        b.iter(|| black_box(mesh.run_step(&Feeds::new(), &fetches).expect("step")))
    });
    report_cpu("unfused", &mesh, &fetches, 200);
    drop(mesh);
    let (mesh, fetches) = setup(AllReduceFusion::On(FusionConfig::default()));
    let fused = mesh.run_step(&Feeds::new(), &fetches).expect("step");
    assert!(fused[0].bit_eq(&unfused[0]), "fused and unfused sums differ");
    group.bench_function("fused 32 x 256KiB x 8 replicas", |b| {
        b.iter(|| black_box(mesh.run_step(&Feeds::new(), &fetches).expect("step")))
    });
    report_cpu("fused", &mesh, &fetches, 200);
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
