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
        Ok((lowered, _)) => lowered.module,
        Err(LowerFailure::Lower(e)) => panic!("{e:?}"),
        Err(LowerFailure::Clusters(e)) => panic!("{e:?}"),
    }
}

fn assert_round_trips(module: &ir::Module) {
    let printed = print_module(module);
    let again = parse(&printed);
    assert!(again == *module, "lowered module does not round-trip:\n{printed}");
}

const TAGGED: &str = include_str!("../examples/tf_tagged.opg");

#[test]
fn tagged_graph_lowers_to_one_program_per_replica() {
    let m = lower_text(TAGGED, "1x2", LowerConfig::default());
    assert_round_trips(&m);
    let names: Vec<&str> = m.graphs.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names, ["host", "cluster/replica_0", "cluster/replica_1"]);
    let r1 = m.graph("cluster/replica_1").unwrap();
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
