//! All-reduce bandwidth on the simulated mesh against a plain memcpy.
//!
//! - `memcpy/64MiB`: `copy_from_slice` of 64 MiB of f32 into a preallocated buffer.
//! - `allreduce/64MiB x 8 devices`: one `CollectiveAllReduce` (SUM) of a 64 MiB
//!   f32 tensor on each of 8 replica programs, run as a full mesh step.
//! - `allreduce/32 x 256KiB x 8 devices`: 32 separate all-reduces of 256 KiB in one step.
//!
//! Throughput is the bytes of one member's tensor over the time (algorithm
//! bandwidth); NCCL's "bus bandwidth" is that times 2(n-1)/n = 1.75 for n = 8.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use std::time::Duration;

use tpu_rewrite::exec::{Feeds, Fetch, Mesh, MeshConfig, Tensor};
use tpu_rewrite::ir::parse_module;

const DEVICES: usize = 8;

fn module(count: usize, len: usize) -> String {
    (0..DEVICES)
        .map(|r| {
            let mut body = format!("  %x = Placeholder() {{dtype = f32, shape = shape[{len}]}}\n");
            for k in 0..count {
                body.push_str(&format!(
                    "  %s{k} = CollectiveAllReduce(%x) {{group = \"replicas\", group_size = {DEVICES}, rank = {r}, reduce_op = \"SUM\", instance = {k}}}\n"
                ));
            }
            format!(
                "graph @replica_{r} (device = \"/job:worker/replica:0/task:{}/device:TPU:{}\", role = \"replica\", replica = {r}) {{\n{body}}}\n",
                r / 4,
                r % 4
            )
        })
        .collect()
}

fn setup(count: usize, len: usize) -> (Mesh, Feeds, Vec<Fetch>) {
    let (m, errors) = parse_module(module(count, len).as_bytes()).expect("bench module parses");
    assert!(errors.is_empty(), "{errors:?}");
    let mesh = Mesh::new(&m, MeshConfig::default()).expect("mesh");
    let mut feeds = Feeds::new();
    for r in 0..DEVICES {
        let values: Vec<f32> = (0..len).map(|i| ((i + r) % 17) as f32 * 0.25).collect();
        feeds.insert(format!("replica_{r}"), "x", Tensor::vector(values));
    }
    let fetches = (0..count).map(|k| Fetch::new("replica_0", format!("s{k}"))).collect();
    (mesh, feeds, fetches)
}

fn bench(c: &mut Criterion) {
    let bytes = 64usize << 20;
    let len = bytes / 4;

    let mut group = c.benchmark_group("memcpy");
    group.throughput(Throughput::Bytes(bytes as u64));
    group.sample_size(10).measurement_time(Duration::from_secs(3));
    let src: Vec<f32> = (0..len).map(|i| i as f32).collect();
    let mut dst = vec![0.0f32; len];
    group.bench_function("64MiB", |b| {
        b.iter(|| {
            dst.copy_from_slice(black_box(&src));
            black_box(&dst);
        })
    });
    group.finish();

    let mut group = c.benchmark_group("allreduce");
    group.sample_size(10).measurement_time(Duration::from_secs(5));
    group.throughput(Throughput::Bytes(bytes as u64));
    let (mesh, feeds, fetches) = setup(1, len);
    group.bench_function("64MiB x 8 devices", |b| b.iter(|| black_box(mesh.run_step(&feeds, &fetches).expect("step"))));
    drop(mesh);

    let small = 256usize << 10;
    group.throughput(Throughput::Bytes((32 * small) as u64));
    let (mesh, feeds, fetches) = setup(32, small / 4);
    group.bench_function("32 x 256KiB x 8 devices", |b| {
        b.iter(|| black_box(mesh.run_step(&feeds, &fetches).expect("step")))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
