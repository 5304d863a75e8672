//! Expansion time of the gradients pass on a long chain of element-wise ops, on an MLP stack, and
//! on the training step `tpu-rewrite gen` writes (`gen`: a gradients call whose path spans every
//! layer, inside a replicate region, through outside-compilation blocks), run after the passes
//! that precede gradients in the pipeline. `GRADIENTS_BENCH_OPS` sets the size of the `gen` case
//! (default 100 000 ops).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use tpu_rewrite::ir::{parse_module, AttrValue, DType, Graph, Node, NodeId, NodeKind};
use tpu_rewrite::passes::gradients::{expand_gradients, GradientsConfig};
use tpu_rewrite::passes::{run_pipeline, Pass, PassSelection, PipelineConfig};
use tpu_rewrite::syntax::Span;
use tpu_rewrite::synth::{generate, GenConfig};

fn op(graph: &mut Graph, name: String, op_type: &str, inputs: &[NodeId]) -> NodeId {
    let node = Node::op(name, op_type).with_attr("T", AttrValue::Type(DType::F32));
    let id = graph.add_node(node).expect("fresh name");
    for &input in inputs {
        graph.add_data_input(id, input, 0, Span::DETACHED);
    }
    id
}

fn call(graph: &mut Graph, y: NodeId, xs: &[NodeId]) {
    let mut node = Node::op("g", "gradients");
    node.kind = NodeKind::Gradients { num_ys: 1, num_xs: xs.len() as u32, has_grad_ys: false };
    let id = graph.add_node(node).expect("fresh name");
    graph.add_data_input(id, y, 0, Span::DETACHED);
    for &x in xs {
        graph.add_data_input(id, x, 0, Span::DETACHED);
    }
}

/// `n` forward ops: Tanh, Mul by a weight, Sigmoid, Relu, repeated; gradient w.r.t. the input.
fn chain(n: usize) -> Graph {
    let mut g = Graph::new("chain");
    let x = op(&mut g, "x".into(), "Placeholder", &[]);
    let w = op(&mut g, "w".into(), "Placeholder", &[]);
    let mut cur = x;
    for i in 0..n {
        cur = match i % 4 {
            0 => op(&mut g, format!("t{i}"), "Tanh", &[cur]),
            1 => op(&mut g, format!("m{i}"), "Mul", &[cur, w]),
            2 => op(&mut g, format!("s{i}"), "Sigmoid", &[cur]),
            _ => op(&mut g, format!("r{i}"), "Relu", &[cur]),
        };
    }
    call(&mut g, cur, &[x, w]);
    g
}

/// `layers` dense layers (MatMul, BiasAdd, Relu) and a Mean loss; gradients w.r.t. all weights.
fn mlp(layers: usize) -> Graph {
    let mut g = Graph::new("mlp");
    let mut cur = op(&mut g, "x".into(), "Placeholder", &[]);
    let mut params = Vec::new();
    for l in 0..layers {
        let w = op(&mut g, format!("w{l}"), "Placeholder", &[]);
        let b = op(&mut g, format!("b{l}"), "Placeholder", &[]);
        let h = op(&mut g, format!("h{l}"), "MatMul", &[cur, w]);
        let hb = op(&mut g, format!("hb{l}"), "BiasAdd", &[h, b]);
        cur = op(&mut g, format!("a{l}"), "Relu", &[hb]);
        params.extend([w, b]);
    }
    let axes = op(&mut g, "axes".into(), "Const", &[]);
    let loss = op(&mut g, "loss".into(), "Mean", &[cur, axes]);
    call(&mut g, loss, &params);
    g
}

/// The graph of `tpu-rewrite gen --ops ops --seed 1`, after the passes before gradients.
fn gen(ops: usize) -> Graph {
    let text = generate(&GenConfig { ops, seed: 1, ..GenConfig::default() });
    let (mut module, errors) = parse_module(text.as_bytes()).expect("generated text parses");
    assert!(errors.is_empty(), "generated graph is valid: {errors:?}");
    let before = vec![Pass::ReplicateClustering, Pass::OutsideCompilation];
    let config = PipelineConfig { passes: PassSelection::Only(before), ..PipelineConfig::default() };
    let report = run_pipeline(&mut module, &config);
    assert!(!report.has_errors(), "{:?}", report.diagnostics.first());
    module.graphs.swap_remove(0)
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("gradients");
    group.sample_size(10);
    for n in [1_000usize, 10_000, 100_000] {
        group.bench_with_input(BenchmarkId::new("chain", n), &n, |b, &n| {
            b.iter_batched(
                || chain(n),
                |mut g| black_box(expand_gradients(&mut g, &GradientsConfig::default())),
                criterion::BatchSize::LargeInput,
            )
        });
    }
    for layers in [100usize, 10_000] {
        group.bench_with_input(BenchmarkId::new("mlp_layers", layers), &layers, |b, &l| {
            b.iter_batched(
                || mlp(l),
                |mut g| black_box(expand_gradients(&mut g, &GradientsConfig::default())),
                criterion::BatchSize::LargeInput,
            )
        });
    }
    let ops = std::env::var("GRADIENTS_BENCH_OPS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let graph = gen(ops);
    group.bench_with_input(BenchmarkId::new("gen", ops), &graph, |b, graph| {
        b.iter_batched(
            || graph.clone(),
            // The graph is returned so that dropping it is not timed.
            |mut g| {
                let errors = expand_gradients(&mut g, &GradientsConfig::default());
                (g, errors)
            },
            criterion::BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
