//! Test support shared by the backend tests: read, rewrite and lower a
//! file, and the simulator's default fetches of a lowered module.

use tpu_rewrite::exec::driver;
use tpu_rewrite::ir::{self, Module};
use tpu_rewrite::lower::{lower, LowerConfig, LowerFailure, Lowered, Topology};
use tpu_rewrite::passes::{run_pipeline, PipelineConfig};

/// Reads, rewrites and lowers a file (`.opg` or `.pb`); returns the tagged
/// module and the lowering.
pub fn prepare(path: &str, topology: &str, steps_per_run: u32) -> (Module, Lowered) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    let mut module = if path.ends_with(".pb") {
        tpu_rewrite::tf::import_graphdef(&bytes, tpu_rewrite::tf::GraphDefFormat::Binary).expect("imports").0
    } else {
        let (m, errors) = ir::parse_module(&bytes).expect("parses");
        assert!(errors.is_empty(), "{errors:?}");
        m
    };
    let report = run_pipeline(&mut module, &PipelineConfig::default());
    assert!(!report.has_errors(), "{path}: {:?}", report.diagnostics);
    let config = LowerConfig { topology: Topology::parse(topology).unwrap(), steps_per_run, ..LowerConfig::default() };
    let mut lowered = match lower(&module.graphs[0], &config) {
        Ok(l) => l,
        Err(LowerFailure::Lower(e)) => panic!("{e:?}"),
        Err(LowerFailure::Clusters(e)) => panic!("{e:?}"),
    };
    // The simulator runs the functions that call ops name from the lowered module.
    tpu_rewrite::ir::functions::carry_functions(&module, &mut lowered.module);
    (module, lowered)
}

/// The simulator's default fetches: `output_<i>_shard_<r>:0` of the host program.
pub fn default_fetches(lowered: &Module) -> Vec<String> {
    let host = lowered.graph(driver::HOST).expect("a host program");
    let mut outs: Vec<(u64, u64, String)> = host
        .node_ids()
        .filter_map(|id| {
            let name = &host.node(id).name;
            let (i, r) = name.strip_prefix("output_")?.split_once("_shard_")?;
            Some((i.parse().ok()?, r.parse().ok()?, format!("{name}:0")))
        })
        .collect();
    outs.sort();
    outs.into_iter().map(|o| o.2).collect()
}
