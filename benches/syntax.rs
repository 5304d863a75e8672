//! Benchmarks of the front end: lex, parse (text → AST), build + verify
//! (AST → IR), and print (IR → text), on a graph from `gen`.
//!
//! The size is `TPU_BENCH_OPS` ops (default 100 000); the README quotes
//! figures at 1 000 000 ops.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use logos::Logos;
use tpu_rewrite::ir;
use tpu_rewrite::syntax::lexer::Token;
use tpu_rewrite::synth::{generate, GenConfig};

fn ops() -> usize {
    std::env::var("TPU_BENCH_OPS").ok().and_then(|s| s.parse().ok()).unwrap_or(100_000)
}

fn front_end(c: &mut Criterion) {
    let n = ops();
    let text = generate(&GenConfig { ops: n, replicas: 8, seed: 1, ..GenConfig::default() });
    let mut group = c.benchmark_group(format!("front_end_{n}_ops"));
    group.sample_size(10);
    group.throughput(Throughput::Elements(n as u64));
    group.bench_function("lex", |b| b.iter(|| Token::lexer(&text).count()));
    group.bench_function("parse", |b| b.iter(|| tpu_rewrite::syntax::parse(&text).map(|m| m.graphs.len())));
    group.bench_function("parse_build_verify", |b| {
        b.iter(|| {
            let (module, errors) = ir::parse_module(text.as_bytes()).expect("gen output parses");
            assert!(errors.is_empty());
            module.node_count()
        })
    });
    let (module, _) = ir::parse_module(text.as_bytes()).expect("gen output parses");
    group.bench_function("verify", |b| b.iter(|| ir::verify::verify(&module).len()));
    group.bench_function("print", |b| b.iter(|| tpu_rewrite::emit::print_module(&module).len()));
    group.bench_function("drop_module", |b| {
        b.iter_batched(|| module.clone(), drop, BatchSize::PerIteration);
    });
    group.finish();
}

criterion_group!(benches, front_end);
criterion_main!(benches);
