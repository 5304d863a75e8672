//! PJRT against the simulator: plugin load and client creation, compile
//! time, and per-step time of `examples/mlp_train.opg` and a generated
//! transformer, side by side in one run. A timed script (one table on
//! stdout), not a criterion harness: a PJRT compile per sample would make
//! criterion's warm-up alone take minutes.
//!
//! Per-step time: the simulator's is (run of 1 + N steps − run of 1 step)
//! / N (median of three), which leaves out building the mesh; PJRT's is
//! the time inside `execute` (arguments already on the devices) divided
//! by the steps, once with one `execute` per step and once with all N
//! steps in one device loop (`steps_per_run` = N). Beside each wall
//! time, the process CPU time of the same interval (all threads): on a
//! shared machine it shows the work done, which wall time under load does
//! not. Both backends run the graph with all-reduce fusion on, as `run
//! --backend pjrt` does by default; one row per model also shows it off.
//! Run: `cargo bench --bench xla` (fetches the pinned plugin if needed).

#[path = "../tests/it/support/pjrt.rs"]
mod support;

use std::time::Instant;

use tpu_rewrite::exec::driver;
use tpu_rewrite::ir::{self, Module};
use tpu_rewrite::lower::{lower, LowerConfig, Lowered, Topology};
use tpu_rewrite::passes::{run_pipeline, AllReduceFusion, FusionConfig, PipelineConfig};
use tpu_rewrite::tf::synth::{layers_for_nodes, transformer_graphdef, TransformerConfig};
use tpu_rewrite::xla::backend;
use tpu_rewrite::xla::client::{Client, ClientConfig};

const STEPS: u32 = 50;

/// The process's CPU time so far (user + system, all threads), in seconds.
fn cpu_time() -> f64 {
    backend::process_cpu_time().as_secs_f64()
}

fn prepare(mut module: Module, fusion: AllReduceFusion) -> (Module, Lowered) {
    let report = run_pipeline(&mut module, &PipelineConfig { all_reduce_fusion: fusion, ..PipelineConfig::default() });
    assert!(!report.has_errors(), "{:?}", report.diagnostics);
    let config = LowerConfig { topology: Topology::parse("1x8").unwrap(), ..LowerConfig::default() };
    let lowered = match lower(&module.graphs[0], &config) {
        Ok(l) => l,
        Err(_) => panic!("the benchmark graph lowers"),
    };
    (module, lowered)
}

fn default_fetches(lowered: &Module) -> Vec<String> {
    let host = lowered.graph(driver::HOST).expect("host");
    let mut names: Vec<String> = host
        .node_ids()
        .map(|id| host.node(id).name.to_string())
        .filter(|n| n.starts_with("output_") && n.contains("_shard_"))
        .map(|n| format!("{n}:0"))
        .collect();
    names.sort();
    names
}

/// One untimed PJRT run of `module`.
fn warm_up(module: Module) {
    let (tagged, lowered) = prepare(module, AllReduceFusion::Off);
    let graph = &tagged.graphs[0];
    let feeds = support::synthetic_feeds(graph);
    let plugin = support::plugin_path();
    let config = backend::RunConfig {
        plugin: Some(plugin.as_path()),
        steps: 5,
        steps_per_run: 1,
        feeds: &feeds,
        host_transfer: None,
        fetch: &[],
        library: None,
        no_device_checks: false,
        compile_cache: None,
        // The graph's sums as written, as the simulator runs them.
        unpacked_sums: true,
    };
    backend::run(graph, &lowered.assignment, &config).expect("the PJRT backend runs");
}

/// Times one graph; `fusion` is the all-reduce fusion both backends run
/// with (on is what `run --backend pjrt` does by default).
fn bench(name: &str, module: Module, fusion: AllReduceFusion) {
    let (tagged, lowered) = prepare(module, fusion);
    let graph = &tagged.graphs[0];
    let feeds = support::synthetic_feeds(graph);
    let fetches = default_fetches(&lowered.module);
    let sim_run = |steps: u32| {
        let config = driver::RunConfig { steps, ..driver::RunConfig::default() };
        let (t, c) = (Instant::now(), cpu_time());
        driver::run(&lowered.module, &feeds, &fetches, &config, &mut |_, _| {}).expect("the simulator runs");
        (t.elapsed().as_secs_f64(), cpu_time() - c)
    };
    // The median of three differences, against the noise of a shared machine.
    let mut diffs: Vec<(f64, f64)> = (0..3)
        .map(|_| {
            let (long, one) = (sim_run(1 + STEPS), sim_run(1));
            ((long.0 - one.0) / f64::from(STEPS), (long.1 - one.1) / f64::from(STEPS))
        })
        .collect();
    diffs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let sim_step = diffs[1].0.max(1e-9);
    let sim_cpu = diffs[1].1;
    let plugin = support::plugin_path();
    // PJRT twice: one host round trip per step, and all steps in one
    // device loop (steps_per_run), which is how a TPU runs a training loop.
    let pjrt = |steps: u32, steps_per_run: u32| {
        let config = backend::RunConfig {
            plugin: Some(plugin.as_path()),
            steps,
            steps_per_run,
            feeds: &feeds,
            host_transfer: None,
            fetch: &[],
            library: None,
            no_device_checks: false,
            compile_cache: None,
            // The graph's sums as written, as the simulator runs them.
            unpacked_sums: true,
        };
        let outcome = backend::run(graph, &lowered.assignment, &config).expect("the PJRT backend runs");
        let t = outcome.timings;
        let iterations = f64::from(t.executions.max(1) * steps_per_run);
        (t.execute.as_secs_f64() / iterations, t.execute_cpu.as_secs_f64() / iterations, t)
    };
    let (per_call, per_call_cpu, t) = pjrt(STEPS, 1);
    // Without variables every iteration computes the same values and XLA
    // hoists the step out of the loop: a looped figure would mean nothing.
    let looped = if lowered.module.graphs.iter().any(|g| g.node_ids().any(|id| &*g.node(id).op == "VarHandleOp")) {
        let (looped, looped_cpu, _) = pjrt(1, STEPS);
        format!("{:>8.3} ms ({:.2}x, cpu {:.3} ms)", looped * 1e3, looped / sim_step.max(1e-12), looped_cpu * 1e3)
    } else {
        "n/a (no variables)".to_string()
    };
    println!(
        "{name:<40} {:>5} nodes  compile {:>7.1} ms  per step: sim {:>8.3} ms (cpu {:>8.3})  pjrt {:>8.3} ms (cpu {:>8.3}) ({:.2}x)  pjrt looped {looped}",
        graph.node_count(),
        t.compile.as_secs_f64() * 1e3,
        sim_step * 1e3,
        sim_cpu * 1e3,
        per_call * 1e3,
        per_call_cpu * 1e3,
        per_call / sim_step.max(1e-12),
    );
}

fn main() {
    let path = support::plugin_path();
    let t = Instant::now();
    let plugin = std::sync::Arc::new(tpu_rewrite::xla::ffi::load(&path).expect("the plugin loads"));
    let load = t.elapsed();
    let t = Instant::now();
    let client = Client::new(plugin, &ClientConfig { cpu_device_count: Some(8) }).expect("a client");
    let create = t.elapsed();
    println!(
        "plugin load {:.1} ms, client create (8 CPU devices) {:.1} ms, platform {}",
        load.as_secs_f64() * 1e3,
        create.as_secs_f64() * 1e3,
        client.platform
    );
    drop(client);

    let text = std::fs::read("examples/mlp_train.opg").expect("examples/mlp_train.opg");
    let (mlp, errors) = ir::parse_module(&text).expect("parses");
    assert!(errors.is_empty());
    // XLA's first execution in a process starts its thread pools; a run of
    // the MLP whose figures are not printed keeps that out of the first row.
    warm_up(mlp.clone());
    let fused = AllReduceFusion::On(FusionConfig::default());
    bench("examples/mlp_train.opg", mlp.clone(), fused);
    bench("examples/mlp_train.opg, unfused", mlp, AllReduceFusion::Off);

    let tc = TransformerConfig { replicas: 8, ..TransformerConfig::default() };
    // `gen --model transformer` (default --ops 1000 --replicas 8), then larger.
    for layers in [layers_for_nodes(1000, &tc), 8, 24] {
        let bytes = prost::Message::encode_to_vec(&transformer_graphdef(layers, &tc));
        let (module, _) = tpu_rewrite::tf::import_graphdef(&bytes, tpu_rewrite::tf::GraphDefFormat::Binary)
            .expect("the generated transformer imports");
        if layers == layers_for_nodes(1000, &tc) {
            // The same graph with one all-reduce per gradient (30 per step).
            bench(&format!("gen transformer ({layers} layers), unfused"), module.clone(), AllReduceFusion::Off);
        }
        bench(&format!("gen transformer ({layers} layers)"), module, fused);
    }
    // One replica of the same model: what the 8 replicas (and their
    // all-reduce rendezvous) cost on top of one replica's work.
    let one = TransformerConfig { replicas: 1, ..tc };
    let layers = layers_for_nodes(1000, &one);
    let bytes = prost::Message::encode_to_vec(&transformer_graphdef(layers, &one));
    let (module, _) = tpu_rewrite::tf::import_graphdef(&bytes, tpu_rewrite::tf::GraphDefFormat::Binary)
        .expect("the generated transformer imports");
    bench(&format!("gen transformer 1 replica ({layers} layers)"), module, fused);
    // A wider model (the generator's `TransformerConfig` with d_model 128,
    // d_ff 512; `gen` takes the default width 16): the same graph size,
    // with matmuls large enough for the kernels to matter.
    let wide = TransformerConfig { d_model: 128, d_ff: 512, ..tc };
    let layers = layers_for_nodes(1000, &wide);
    let bytes = prost::Message::encode_to_vec(&transformer_graphdef(layers, &wide));
    let (module, _) = tpu_rewrite::tf::import_graphdef(&bytes, tpu_rewrite::tf::GraphDefFormat::Binary)
        .expect("the generated transformer imports");
    bench(&format!("gen transformer d128 ff512 ({layers} layers)"), module, fused);
}
