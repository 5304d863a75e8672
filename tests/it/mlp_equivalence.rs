//! The end-to-end demonstration: `examples/mlp_train.opg` trained over 8
//! replicas matches training the same model on one device with the 8
//! per-replica batches concatenated.
//!
//! With per-replica mean losses, gradients summed by CrossReplicaSum and a
//! learning rate of 0.1 / 8, each replicated step equals one single-device
//! step on the mean loss over all 32 examples with learning rate 0.1.

use tpu_rewrite::exec::driver::{self, RunConfig, RunOutcome};
use tpu_rewrite::ir::{self, AttrValue, Module, TensorData};
use tpu_rewrite::lower::{lower, LowerConfig, Topology};
use tpu_rewrite::passes::{run_pipeline, PipelineConfig};

const EXAMPLE: &str = include_str!("../../examples/mlp_train.opg");
const STEPS: u32 = 5;

fn train(text: &str, topology: &str) -> RunOutcome {
    let (mut module, errors) = ir::parse_module(text.as_bytes()).expect("parses");
    assert!(errors.is_empty(), "{errors:?}");
    let report = run_pipeline(&mut module, &PipelineConfig::default());
    assert!(!report.has_errors(), "{:?}", report.diagnostics);
    let config = LowerConfig { topology: Topology::parse(topology).unwrap(), ..LowerConfig::default() };
    let lowered = lower(&module.graphs[0], &config).unwrap_or_else(|e| panic!("{e:?}"));
    driver::run(&lowered.module, &[], &[], &RunConfig { steps: STEPS, ..RunConfig::default() }, &mut |_, _| {})
        .unwrap_or_else(|e| panic!("{e:?}"))
}

/// The f32 values of a Const node's literal.
fn literal(module: &Module, name: &str) -> Vec<f32> {
    let g = &module.graphs[0];
    let node = g.node(g.find(name).unwrap_or_else(|| panic!("no node {name}")));
    match node.attrs.get("value").and_then(AttrValue::as_tensor).map(|t| &t.data) {
        Some(TensorData::Float(v)) => v.clone(),
        other => panic!("{name} is not an f32 literal: {other:?}"),
    }
}

fn list(values: &[f32]) -> String {
    values.iter().map(|v| format!("{v:?}")).collect::<Vec<_>>().join(", ")
}

/// The same model on one device: one replica, the batches concatenated.
fn single_device_text() -> String {
    let (module, _) = ir::parse_module(EXAMPLE.as_bytes()).unwrap();
    let xs: Vec<f32> = (0..8).flat_map(|r| literal(&module, &format!("x{r}_data"))).collect();
    let ys: Vec<f32> = (0..8).flat_map(|r| literal(&module, &format!("y{r}_data"))).collect();
    let mut out = String::new();
    for line in EXAMPLE.lines() {
        if line.trim_start().starts_with("replicate (") {
            out.push_str(&format!(
                "  %x_all = Const() {{dtype = f32, value = tensor(f32, [32, 3]) [{}]}}\n",
                list(&xs)
            ));
            out.push_str(&format!(
                "  %y_all = Const() {{dtype = f32, value = tensor(f32, [32, 1]) [{}]}}\n",
                list(&ys)
            ));
            out.push_str("  replicate (num_replicas = 1) (%x = [%x_all], %y = [%y_all]) {\n");
        } else if line.contains("%group = Const()") {
            out.push_str("    %group = Const() {dtype = i32, value = tensor(i32, [1, 1]) [0]}\n");
        } else if line.contains("%lr = Const()") {
            out.push_str("    %lr = Const() {dtype = f32, value = tensor(f32, []) [0.1]}\n");
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[test]
fn replicated_training_matches_one_device() {
    let replicated = train(EXAMPLE, "2x4");
    let single = train(&single_device_text(), "1x1");
    assert_eq!(replicated.iterations, u64::from(STEPS));
    for name in ["w1", "b1", "w2"] {
        let copies = &replicated.mirrors[name];
        assert_eq!(copies.len(), 8, "{name} has a copy per replica");
        for (r, copy) in copies.iter().enumerate() {
            assert!(copy.bit_eq(&copies[0]), "{name} on replica {r} differs from replica 0");
        }
        let a = copies[0].to_vec::<f32>().unwrap();
        let b = single.mirrors[name][0].to_vec::<f32>().unwrap();
        let initial = {
            let (m, _) = ir::parse_module(EXAMPLE.as_bytes()).unwrap();
            literal(&m, &format!("{name}_init_value"))
        };
        assert_eq!(a.len(), b.len());
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            assert!((x - y).abs() <= 1e-5 * (1.0 + y.abs()), "{name}[{i}]: replicated {x} vs one device {y}");
        }
        // Training moved the weights (the check above is not vacuous).
        if initial.len() == a.len() {
            assert!(a.iter().zip(&initial).any(|(x, y)| (x - y).abs() > 1e-4), "{name} did not change");
        }
    }
}

#[test]
fn loss_falls_over_training() {
    let (mut module, _) = ir::parse_module(EXAMPLE.as_bytes()).unwrap();
    run_pipeline(&mut module, &PipelineConfig::default());
    let config = LowerConfig { topology: Topology::parse("1x8").unwrap(), ..LowerConfig::default() };
    let lowered = lower(&module.graphs[0], &config).unwrap();
    let mut losses = Vec::new();
    driver::run(
        &lowered.module,
        &[],
        &["output_0_shard_0:0".to_string()],
        &RunConfig { steps: 40, ..RunConfig::default() },
        &mut |_, v| losses.push(v[0].to_vec::<f32>().unwrap()[0]),
    )
    .unwrap();
    assert!(losses[39] < losses[0] * 0.5, "loss went from {} to {}", losses[0], losses[39]);
}
