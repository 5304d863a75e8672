//! All-reduce fusion: 32 CrossReplicaSums of 256 KiB each over 8 replicas.
//!
//! The same replicated graph is rewritten with and without the
//! `fuse-all-reduce` pass, lowered for a 2x4 topology and run on the mesh;
//! each iteration is one `Mesh::run_step` that feeds the 32 global inputs
//! and fetches replica 0's 32 sums. Unfused, the step meets at 32
//! collectives; fused, at one collective with 32 operands.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use std::time::Duration;

use tpu_rewrite::exec::{Feeds, Fetch, Mesh, MeshConfig, Tensor};
use tpu_rewrite::ir::parse_module;
use tpu_rewrite::lower::{lower, LowerConfig, Topology};
use tpu_rewrite::passes::{run_pipeline, AllReduceFusion, FusionConfig, PipelineConfig};

const REPLICAS: usize = 8;
const SUMS: usize = 32;
const BYTES: usize = 256 << 10;

/// A graph whose replicas each all-reduce `SUMS` inputs of `len` f32.
fn source(len: usize) -> String {
    let mut text = String::from("graph @main {\n");
    let mut operands = Vec::new();
    for k in 0..SUMS {
        let names: Vec<String> = (0..REPLICAS).map(|r| format!("%x{k}_{r}")).collect();
        for n in &names {
            text.push_str(&format!("  {n} = Placeholder() {{dtype = f32, shape = shape[{len}]}}\n"));
        }
        operands.push(format!("%v{k} = [{}]", names.join(", ")));
    }
    text.push_str(&format!("  replicate (num_replicas = {REPLICAS}) ({}) {{\n", operands.join(", ")));
    let mut outputs = Vec::new();
    for k in 0..SUMS {
        text.push_str(&format!("    %s{k} = CrossReplicaSum(%v{k}) {{T = f32}}\n"));
        outputs.push(format!("%s{k}"));
    }
    text.push_str(&format!("    return {}\n  }}\n}}\n", outputs.join(", ")));
    text
}

fn setup(fusion: AllReduceFusion) -> (Mesh, Feeds, Vec<Fetch>) {
    let len = BYTES / 4;
    let (mut module, errors) = parse_module(source(len).as_bytes()).expect("bench graph parses");
    assert!(errors.is_empty(), "{errors:?}");
    let report = run_pipeline(&mut module, &PipelineConfig { all_reduce_fusion: fusion, ..PipelineConfig::default() });
    assert!(!report.has_errors(), "{:?}", report.diagnostics);
    let config = LowerConfig { topology: Topology::parse("2x4").expect("topology"), ..LowerConfig::default() };
    let (lowered, _) = lower(&module.graphs[0], &config).unwrap_or_else(|e| panic!("lowering failed: {e:?}"));
    let mesh = Mesh::new(&lowered.module, MeshConfig::default()).expect("mesh");
    let mut feeds = Feeds::new();
    for k in 0..SUMS {
        for r in 0..REPLICAS {
            let values: Vec<f32> = (0..len).map(|i| ((i + r + k) % 17) as f32 * 0.25).collect();
            feeds.insert("host", format!("x{k}_{r}"), Tensor::vector(values));
        }
    }
    let fetches = (0..SUMS).map(|k| Fetch::new("host", format!("output_{k}_shard_0:0"))).collect();
    (mesh, feeds, fetches)
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("fusion");
    group.sample_size(10).measurement_time(Duration::from_secs(5));
    group.throughput(Throughput::Bytes((SUMS * BYTES) as u64));
    let (mesh, feeds, fetches) = setup(AllReduceFusion::Off);
    group.bench_function("unfused 32 x 256KiB x 8 replicas", |b| {
        b.iter(|| black_box(mesh.run_step(&feeds, &fetches).expect("step")))
    });
    drop(mesh);
    let (mesh, feeds, fetches) = setup(AllReduceFusion::On(FusionConfig::default()));
    group.bench_function("fused 32 x 256KiB x 8 replicas", |b| {
        b.iter(|| black_box(mesh.run_step(&feeds, &fetches).expect("step")))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
