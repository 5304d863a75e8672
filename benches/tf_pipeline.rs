//! The TensorFlow pipeline on a ~100k-node transformer GraphDef: import
//! (`.pb` and `.pbtxt`), cluster formation and lowering to 8 replicas.
//!
//! `cargo bench --bench tf_pipeline`. Before criterion runs, one-shot
//! timings of each phase are printed as wall / CPU time of the process, so
//! the figures stay meaningful on a loaded machine.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use prost::Message;
use tpu_rewrite::ir::Module;
use tpu_rewrite::lower::{lower_clusters, LowerConfig, Topology};
use tpu_rewrite::passes::form_clusters::form_clusters;
use tpu_rewrite::tf::pbtxt_print::print_graphdef;
use tpu_rewrite::tf::synth::{layers_for_nodes, transformer_graphdef, TransformerConfig};
use tpu_rewrite::tf::{import_graphdef, GraphDefFormat};

mod common;
use common::Timer;

const NODES: usize = 100_000;
const REPLICAS: usize = 8;

fn lower_config() -> LowerConfig {
    LowerConfig {
        topology: Topology { hosts: 1, cores_per_host: REPLICAS as u32, job: "worker".into() },
        ..LowerConfig::default()
    }
}

/// Import, cluster formation and lowering; returns the imported and the
/// lowered module, so that criterion frees them outside the timing.
fn pipeline(bytes: &[u8], format: GraphDefFormat, config: &LowerConfig) -> (Module, Module) {
    let (module, _) = import_graphdef(bytes, format).expect("the synthetic graph imports");
    let lowered = lower_module(&module, config);
    (module, lowered)
}

/// Forms the clusters of `@main` once and lowers it.
fn lower_module(module: &Module, config: &LowerConfig) -> Module {
    let graph = module.graph("main").expect("@main");
    let (clusters, _) = form_clusters(graph);
    let lowered = lower_clusters(graph, clusters, config).expect("the synthetic graph lowers");
    lowered.module
}

fn bench_pipeline(c: &mut Criterion) {
    let tc = TransformerConfig { replicas: REPLICAS, ..TransformerConfig::default() };
    let graph_def = transformer_graphdef(layers_for_nodes(NODES, &tc), &tc);
    let pb = graph_def.encode_to_vec();
    let pbtxt = print_graphdef(&graph_def);
    let config = lower_config();
    eprintln!(
        "graph: {} nodes, {REPLICAS} replicas; .pb {:.1} MB, .pbtxt {:.1} MB",
        graph_def.node.len(),
        pb.len() as f64 / 1e6,
        pbtxt.len() as f64 / 1e6
    );
    report_phases(&pb, pbtxt.as_bytes(), &config);

    let mut group = c.benchmark_group("tf_pipeline_100k");
    group.sample_size(10).measurement_time(Duration::from_secs(10)).warm_up_time(Duration::from_secs(1));
    group.throughput(Throughput::Elements(graph_def.node.len() as u64));
    group
        .bench_function("pb", |b| b.iter_with_large_drop(|| pipeline(black_box(&pb), GraphDefFormat::Binary, &config)));
    group.bench_function("pbtxt", |b| {
        b.iter_with_large_drop(|| pipeline(black_box(pbtxt.as_bytes()), GraphDefFormat::Text, &config))
    });
    group.finish();
}

/// One-shot timings of each phase, for both encodings.
fn report_phases(pb: &[u8], pbtxt: &[u8], config: &LowerConfig) {
    for (label, bytes, format) in [("pb", pb, GraphDefFormat::Binary), ("pbtxt", pbtxt, GraphDefFormat::Text)] {
        let total = Timer::start();
        let t = Timer::start();
        let (module, _) = import_graphdef(bytes, format).expect("imports");
        let import = t.stop();
        let graph = module.graph("main").expect("@main");
        let t = Timer::start();
        let (clusters, _) = form_clusters(graph);
        let cluster = t.stop();
        let t = Timer::start();
        let lowered = lower_clusters(graph, clusters, config).expect("lowers");
        let lowering = t.stop();
        let total = total.stop();
        let nodes: usize = lowered.module.graphs.iter().map(|g| g.node_count()).sum();
        eprintln!(
            "{label} (wall/cpu): import {import}, form_clusters {cluster}, lower {lowering} \
             ({} programs, {nodes} nodes), total {total}",
            lowered.module.graphs.len()
        );
        std::mem::forget((module, lowered));
    }
}

criterion_group!(benches, bench_pipeline);
criterion_main!(benches);
