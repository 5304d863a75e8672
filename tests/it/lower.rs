//! Lowering tests: topology errors, and snapshots of lowered modules, which
//! must print and parse back.

use tpu_rewrite::emit::print_module;
use tpu_rewrite::ir;
use tpu_rewrite::lower::{lower, LowerConfig, LowerFailure, Topology};

fn parse(text: &str) -> ir::Module {
    let (module, errors) = ir::parse_module(text.as_bytes()).expect("parses");
    assert!(errors.is_empty(), "{errors:?}");
    module
}

fn lower_text(text: &str, topology: &str, config: LowerConfig) -> ir::Module {
    let module = parse(text);
    let config = LowerConfig { topology: Topology::parse(topology).unwrap(), ..config };
    match lower(&module.graphs[0], &config) {
        Ok(lowered) => lowered.module,
        Err(LowerFailure::Lower(e)) => panic!("{e:?}"),
        Err(LowerFailure::Clusters(e)) => panic!("{e:?}"),
    }
}

/// The per-device view of an SPMD module, checked to round-trip too.
fn expanded(module: &ir::Module) -> ir::Module {
    let e = tpu_rewrite::lower::spmd::expand(module).expect("expands");
    assert_round_trips(&e);
    e
}

fn assert_round_trips(module: &ir::Module) {
    let printed = print_module(module);
    let again = parse(&printed);
    assert!(again == *module, "lowered module does not round-trip:\n{printed}");
}

const TAGGED: &str = include_str!("../../examples/tf_tagged.opg");

#[test]
fn tagged_graph_lowers_to_one_program_per_replica() {
    let m = lower_text(TAGGED, "1x2", LowerConfig::default());
    assert_round_trips(&m);
    let names: Vec<&str> = m.graphs.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names, ["host", "cluster"]);
    let e = expanded(&m);
    let names: Vec<&str> = e.graphs.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names, ["host", "cluster/replica_0", "cluster/replica_1"]);
    let r1 = e.graph("cluster/replica_1").unwrap();
    assert_eq!(r1.attrs.get_str("device"), Some("/job:worker/replica:0/task:0/device:TPU:1"));
    assert_eq!(r1.attrs.get_int("replica"), Some(1));
    insta::assert_snapshot!(print_module(&m));
}

#[test]
fn too_small_topology_is_an_error_with_numbers() {
    let module = parse(TAGGED);
    let config = LowerConfig { topology: Topology::parse("1x1").unwrap(), ..LowerConfig::default() };
    let Err(LowerFailure::Lower(errors)) = lower(&module.graphs[0], &config) else { panic!("expected an error") };
    assert_eq!(
        errors[0].to_string(),
        "num_replicas (2) x num_cores_per_replica (1) needs 2 cores, but the topology has 1 (1 hosts x 1 cores)"
    );
}

/// Rewrites an authored `.opg` case and lowers it on `topology`.
fn rewrite_and_lower(path: &str, topology: &str) -> ir::Module {
    let text = std::fs::read_to_string(format!("{}/tests/cases/lower/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let mut module = parse(&text);
    let report = tpu_rewrite::passes::run_pipeline(&mut module, &tpu_rewrite::passes::PipelineConfig::default());
    assert!(!report.has_errors(), "{:?}", report.diagnostics);
    let printed = print_module(&module);
    lower_text(&printed, topology, LowerConfig::default())
}

fn device_of<'m>(m: &'m ir::Module, graph: &str) -> &'m str {
    m.graph(graph).unwrap_or_else(|| panic!("no graph {graph}")).attrs.get_str("device").unwrap()
}

#[test]
fn eight_replicas_on_2x4() {
    let m = rewrite_and_lower("data_parallel_2x4.opg", "2x4");
    assert_round_trips(&m);
    let e = expanded(&m);
    assert_eq!(device_of(&e, "cluster/replica_5"), "/job:worker/replica:0/task:1/device:TPU:1");
    let r5 = e.graph("cluster/replica_5").unwrap();
    let collective = r5.node(r5.find("total").unwrap());
    assert_eq!(&*collective.op, "CollectiveAllReduce");
    assert_eq!(collective.attrs.get_int("rank"), Some(5));
    assert_eq!(collective.attrs.get_int("group_size"), Some(8));
    insta::assert_snapshot!(print_module(&m));
}

#[test]
fn four_replicas_with_two_cores() {
    let m = rewrite_and_lower("model_parallel_4x2.opg", "2x4");
    assert_round_trips(&m);
    let names: Vec<&str> = m.graphs.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names, ["host", "cluster", "cluster/core_1"]);
    // Replica 2's logical core 1 is flat core 5: task 1, core 1.
    let e = expanded(&m);
    assert_eq!(device_of(&e, "cluster/replica_2/core_1"), "/job:worker/replica:0/task:1/device:TPU:1");
    assert_eq!(device_of(&e, "cluster/replica_1/core_1"), "/job:worker/replica:0/task:0/device:TPU:3");
    insta::assert_snapshot!(print_module(&m));
}

#[test]
fn outside_compilation_runs_on_the_host_of_its_core() {
    let m = rewrite_and_lower("host_compute_core.opg", "2x2");
    assert_round_trips(&m);
    let host_programs = |m: &ir::Module| -> Vec<String> {
        m.graphs.iter().filter(|g| g.attrs.get_str("role") == Some("host")).map(|g| g.name.clone()).collect()
    };
    assert_eq!(host_programs(&m), ["cluster/oc_0"]);
    let e = expanded(&m);
    assert_eq!(host_programs(&e), ["cluster/oc_0/replica_0", "cluster/oc_0/replica_1"]);
    // Replica 1's core 1 is flat core 3: task 1, so its host is task 1's CPU.
    assert_eq!(device_of(&e, "cluster/oc_0/replica_1"), "/job:worker/replica:0/task:1/device:CPU:0");
    let printed = print_module(&m);
    assert!(printed.contains("host_compute_channel_0_args/"), "{printed}");
    assert!(printed.contains("host_compute_channel_0_retvals/"), "{printed}");
    insta::assert_snapshot!(printed);
}

#[test]
fn logical_core_out_of_range_uses_the_seed_wording() {
    let text = "graph @main {\n  %x0 = Placeholder() {dtype = f32}\n  replicate (num_cores_per_replica = 2, num_replicas = 1) (%x = [%x0]) {\n    %y = Relu(%x) on \"TPU_REPLICATED_CORE:3\" {T = f32}\n    return %y\n  }\n}\n";
    let mut module = parse(text);
    tpu_rewrite::passes::run_pipeline(&mut module, &tpu_rewrite::passes::PipelineConfig::default());
    let config = LowerConfig { topology: Topology::parse("1x2").unwrap(), ..LowerConfig::default() };
    let Err(LowerFailure::Lower(errors)) = lower(&module.graphs[0], &config) else { panic!("expected an error") };
    assert_eq!(
        errors[0].to_string(),
        "`logical_device_id` not in range (was 3, but there are only 2 logical devices per replica)"
    );
}

/// Counts what a lowering or an import reports.
#[derive(Default)]
struct Counting {
    phases: std::sync::Mutex<Vec<(&'static str, u64)>>,
    done: std::sync::atomic::AtomicU64,
}

impl tpu_rewrite::progress::Progress for Counting {
    fn phase(&self, name: &'static str, total: u64) {
        self.phases.lock().unwrap().push((name, total));
        self.done.store(0, std::sync::atomic::Ordering::Relaxed);
    }
    fn advance(&self, units: u64) {
        self.done.fetch_add(units, std::sync::atomic::Ordering::Relaxed);
    }
}

#[test]
fn lowering_and_import_report_progress_up_to_their_totals() {
    use std::sync::atomic::Ordering;
    use tpu_rewrite::passes::form_clusters::form_clusters;
    use tpu_rewrite::tf::synth::{transformer_graphdef, TransformerConfig};
    use tpu_rewrite::tf::{import_graphdef_observed, GraphDefFormat};

    let tc = TransformerConfig::default();
    let bytes = prost::Message::encode_to_vec(&transformer_graphdef(40, &tc));
    let counting = Counting::default();
    let (module, errors) = import_graphdef_observed(&bytes, GraphDefFormat::Binary, &counting).unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    let phases = counting.phases.lock().unwrap().clone();
    let (name, total) = *phases.last().unwrap();
    assert_eq!(name, "importing nodes");
    let done = counting.done.load(Ordering::Relaxed);
    assert!(done > 0 && done <= total, "{done} of {total}");

    let graph = &module.graphs[0];
    let (clusters, _) = form_clusters(graph);
    let counting = Counting::default();
    let config = LowerConfig { topology: Topology::parse("1x8").unwrap(), ..LowerConfig::default() };
    tpu_rewrite::lower::lower_clusters_observed(graph, clusters, &config, &counting).unwrap();
    let phases = counting.phases.lock().unwrap().clone();
    assert_eq!(phases.len(), 1);
    let (name, total) = phases[0];
    assert_eq!(name, "lowering");
    let done = counting.done.load(Ordering::Relaxed);
    // Placing and wiring report every node; the clones report their share.
    assert!(done * 10 >= total * 9 && done <= total, "{done} of {total}");
}

#[test]
fn a_lowering_failure_is_an_error_and_a_diagnostic() {
    let module = parse(TAGGED);
    let config = LowerConfig { topology: Topology::parse("1x1").unwrap(), ..LowerConfig::default() };
    let failure = lower(&module.graphs[0], &config).unwrap_err();
    let error: &dyn std::error::Error = &failure;
    assert_eq!(
        error.to_string(),
        "num_replicas (2) x num_cores_per_replica (1) needs 2 cores, but the topology has 1 (1 hosts x 1 cores)"
    );
    let diagnostic: &dyn miette::Diagnostic = &failure;
    assert_eq!(diagnostic.code().map(|c| c.to_string()).as_deref(), Some("tpu_rewrite::lower::too_few_cores"));
}

#[test]
fn a_typed_device_assignment_places_the_replicas() {
    let topology = Topology::parse("1x4").unwrap();
    let table = tpu_rewrite::lower::DeviceAssignment::parse_table(&topology, "0:3; 0:1").unwrap();
    let config = LowerConfig { topology, device_assignment: Some(table), ..LowerConfig::default() };
    let module = parse(TAGGED);
    let m = lower(&module.graphs[0], &config).unwrap().module;
    let e = expanded(&m);
    assert_eq!(device_of(&e, "cluster/replica_0"), "/job:worker/replica:0/task:0/device:TPU:3");
    assert_eq!(device_of(&e, "cluster/replica_1"), "/job:worker/replica:0/task:0/device:TPU:1");
}
