//! Times the rewrite pipeline on large generated graphs.
//!
//! Two shapes, each about `PASSES_BENCH_OPS` ops (default 100 000):
//! `one_cluster`, a single replicate region holding a long chain of ops
//! with an outside_compilation block every 1 000 ops; and `many_clusters`,
//! replicate regions of 100 ops each. The module is parsed once; each
//! iteration rewrites a fresh clone (cloning and dropping are not timed).
//! Every region has its own placeholders: petgraph unlinks an edge by
//! walking its source's edge list, so an operand shared by thousands of
//! regions would make fan-in quadratic in that operand's fan-out.

use std::fmt::Write;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use tpu_rewrite::ir::{parse_module, Module};
use tpu_rewrite::passes::{run_pipeline, PipelineConfig};

const REPLICAS: usize = 8;

fn target_ops() -> usize {
    std::env::var("PASSES_BENCH_OPS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000)
}

/// One replicate region of `ops` body ops, with its own per-replica inputs.
fn region(out: &mut String, tag: &str, ops: usize) {
    for r in 0..REPLICAS {
        let _ = writeln!(out, "  %{tag}x{r} = Placeholder() {{dtype = f32, shape = shape[2]}}");
    }
    let operands: Vec<String> = (0..REPLICAS).map(|r| format!("%{tag}x{r}")).collect();
    let _ = writeln!(out, "  replicate (num_replicas = {REPLICAS}) (%{tag}in = [{}]) {{", operands.join(", "));
    let _ = writeln!(out, "    %{tag}c = Const() {{dtype = f32, value = tensor(f32, []) [1.0]}}");
    let _ = writeln!(out, "    %{tag}v0 = Add(%{tag}in, %{tag}c) {{T = f32}}");
    let mut i = 1;
    while i < ops {
        if i % 1000 == 0 {
            let _ = writeln!(out, "    outside_compilation {{");
            let _ = writeln!(out, "      %{tag}v{i} = Identity(%{tag}v{}) {{T = f32}}", i - 1);
            let _ = writeln!(out, "    }}");
        } else {
            let _ = writeln!(out, "    %{tag}v{i} = Mul(%{tag}v{}, %{tag}c) {{T = f32}}", i - 1);
        }
        i += 1;
    }
    let _ = writeln!(out, "    return %{tag}v{}", ops - 1);
    let _ = writeln!(out, "  }}");
}

fn generate(total: usize, per_cluster: usize) -> Module {
    let mut text = String::with_capacity(total * 48);
    text.push_str("graph @bench {\n");
    let clusters = total.div_ceil(per_cluster);
    for k in 0..clusters {
        region(&mut text, &format!("k{k}_"), per_cluster.min(total - k * per_cluster).max(2));
    }
    text.push_str("}\n");
    let (module, errors) = parse_module(text.as_bytes()).expect("generated text parses");
    assert!(errors.is_empty(), "generated graph is valid: {errors:?}");
    module
}

fn bench_pipeline(c: &mut Criterion) {
    let ops = target_ops();
    let mut group = c.benchmark_group("pipeline");
    group.sample_size(10);
    for (name, per_cluster) in [("one_cluster", ops), ("many_clusters", 100)] {
        let module = generate(ops, per_cluster);
        // One untimed run: check it works and print the per-pass table.
        let mut probe = module.clone();
        let report = run_pipeline(&mut probe, &PipelineConfig::default());
        assert!(!report.has_errors(), "{:?}", report.diagnostics.first());
        eprintln!("{name}: {} ops in, {} ops out\n{}", module.node_count(), probe.node_count(), report.timing_table());
        group.bench_function(format!("{name}/{ops}"), |b| {
            b.iter_batched(
                || module.clone(),
                // The module is returned so that dropping it is not timed.
                |mut m| {
                    let report = run_pipeline(&mut m, &PipelineConfig::default());
                    (m, report)
                },
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, bench_pipeline);
criterion_main!(benches);
