//! Tests of the gradients pass and the cluster cycle check.
//!
//! Cases under `tests/cases/gradients/{ok,err}/*.opg` are tagged by hand as the replicate and
//! outside-compilation passes tag them (`_tpu_replicate`, `_xla_outside_compilation` on ops). A
//! first comment line `// policy: flat` selects the flat gradient cluster policy. Each snapshot
//! holds the input, the expanded graph and the rendered diagnostics.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use miette::{GraphicalReportHandler, GraphicalTheme, NamedSource, Report};
use tpu_rewrite::emit::print_module;
use tpu_rewrite::ir::{parse_module, AttrValue, Graph, Module, NodeId, NodeKind, RegionKind};
use tpu_rewrite::passes::cluster_cycles::{check_cluster_cycles, check_cluster_cycles_with, Contraction};
use tpu_rewrite::passes::gradients::colocation::ColocationContext;
use tpu_rewrite::passes::gradients::{expand_gradients, GradientClusterPolicy, GradientsConfig};
use tpu_rewrite::passes::PassError;

const TPU_REPLICATE: &str = "_tpu_replicate";
const OUTSIDE: &str = "_xla_outside_compilation";

/// Gives each gradients call the tags of its region, as the tagging passes do: the
/// `_tpu_replicate` of the ops of its replicate region and, inside an outside_compilation block,
/// that block's `_xla_outside_compilation`.
fn tag_calls_like_their_regions(graph: &mut Graph) {
    let calls: Vec<NodeId> =
        graph.node_ids().filter(|&id| matches!(graph.node(id).kind, NodeKind::Gradients { .. })).collect();
    for call in calls {
        let region = graph.node(call).region;
        let replicate = graph.enclosing_replicate(region);
        let innermost_outside = region.filter(|r| matches!(graph.region(*r).kind, RegionKind::OutsideCompilation));
        let mut tags = Vec::new();
        for id in graph.node_ids() {
            let node = graph.node(id);
            if replicate.is_some() && graph.enclosing_replicate(node.region) == replicate {
                if let Some(r) = node.attrs.get_str(TPU_REPLICATE) {
                    tags.push((TPU_REPLICATE, r.to_string()));
                }
            }
            if innermost_outside.is_some() && node.region == innermost_outside && id != call {
                if let Some(c) = node.attrs.get_str(OUTSIDE) {
                    tags.push((OUTSIDE, c.to_string()));
                }
            }
        }
        for key in [TPU_REPLICATE, OUTSIDE] {
            if let Some((_, v)) = tags.iter().find(|(k, _)| *k == key) {
                graph.node_mut(call).attrs.insert(key, AttrValue::str(v.clone()));
            }
        }
    }
}

fn policy_of(source: &str) -> GradientClusterPolicy {
    match source.lines().next() {
        Some(l) if l.trim() == "// policy: flat" => GradientClusterPolicy::Flat,
        _ => GradientClusterPolicy::Nested,
    }
}

/// Parses, tags the calls, expands gradients and checks cluster cycles.
fn run(source: &str) -> (Module, Vec<PassError>) {
    let (mut module, ir_errors) = parse_module(source.as_bytes()).expect("case parses");
    assert!(ir_errors.is_empty(), "case must be valid IR: {ir_errors:?}");
    let config = GradientsConfig { policy: policy_of(source) };
    let mut errors = Vec::new();
    for graph in &mut module.graphs {
        tag_calls_like_their_regions(graph);
        errors.extend(expand_gradients(graph, &config));
        errors.extend(check_cluster_cycles(graph));
    }
    (module, errors)
}

fn render(name: &str, source: &str, errors: &[PassError]) -> String {
    let handler = GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor()).with_width(100);
    let mut out = String::new();
    for e in errors {
        let report = Report::new(e.clone()).with_source_code(NamedSource::new(name, source.to_string()));
        handler.render_report(&mut out, report.as_ref()).expect("rendering to a string");
        out.push('\n');
    }
    out
}

fn snapshot(path: &Path) -> String {
    let source = std::fs::read_to_string(path).expect("case is readable");
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let (module, errors) = run(&source);
    let printed = print_module(&module);
    // The expanded graph must itself be valid IR and print back to itself.
    let (reparsed, reparse_errors) = parse_module(printed.as_bytes()).expect("expanded graph parses");
    assert!(reparse_errors.is_empty(), "expanded graph must be valid: {reparse_errors:?}");
    assert_eq!(print_module(&reparsed), printed);
    format!("== input ==\n{source}\n== expanded ==\n{printed}\n== diagnostics ==\n{}", render(&name, &source, &errors))
}

#[test]
fn ok_cases() {
    insta::glob!("../cases/gradients", "ok/*.opg", |path| {
        let out = snapshot(path);
        let expanded = out.split("== expanded ==").nth(1).and_then(|s| s.split("== diagnostics ==").next());
        let expanded = expanded.unwrap_or_default();
        assert!(!expanded.contains("gradients("), "every call is expanded");
        insta::assert_snapshot!(out);
    });
}

#[test]
fn err_cases() {
    insta::glob!("../cases/gradients", "err/*.opg", |path| {
        let source = std::fs::read_to_string(path).expect("case is readable");
        let (_, errors) = run(&source);
        assert!(!errors.is_empty(), "an err case reports something");
        insta::assert_snapshot!(snapshot(path));
    });
}

/// `(scope, forward op) -> {_xla_outside_compilation of each op colocated with it}` over the
/// gradient ops (names under a `gradients*` scope) of `nodes`.
fn colocated_clusters<'a>(
    nodes: impl Iterator<Item = (&'a str, Option<&'a str>, Vec<String>)>,
) -> BTreeMap<(String, String), BTreeSet<Option<String>>> {
    let mut out: BTreeMap<(String, String), BTreeSet<Option<String>>> = BTreeMap::new();
    for (name, cluster, classes) in nodes {
        let scope = name.split('/').next().unwrap_or_default();
        if !scope.starts_with("gradients") {
            continue;
        }
        for class in classes {
            let Some(op) = class.strip_prefix("loc:@") else { continue };
            out.entry((scope.to_string(), op.to_string())).or_default().insert(cluster.map(str::to_string));
        }
    }
    out
}

/// The oc_grad_r2 program, expanded under the flat policy, gives every (call, forward op) the same
/// outside-compilation clusters on its colocated gradient ops as TensorFlow 2.21 did.
#[test]
fn oc_grad_r2_tag_pattern_matches_tensorflow_under_flat() {
    let tags: serde_json::Value =
        serde_json::from_str(include_str!("../data/oc_grad_r2.tags.json")).expect("tags.json parses");
    let tags = tags.as_object().expect("an object of nodes");
    let expected = colocated_clusters(tags.iter().map(|(name, t)| {
        let classes = t["class"].as_array().map(|a| a.iter().filter_map(|c| c.as_str().map(String::from)).collect());
        (name.as_str(), t["OC"].as_str(), classes.unwrap_or_default())
    }));
    assert!(expected.len() >= 8, "the fixture has colocated gradient ops");

    let source = include_str!("../cases/gradients/ok/oc_grad_r2_flat.opg");
    let (module, errors) = run(source);
    assert!(errors.iter().all(|e| matches!(e, PassError::OutsideCompilationCycle { .. })), "{errors:?}");
    let graph = &module.graphs[0];
    let nodes: Vec<(String, Option<String>, Vec<String>)> = graph
        .node_ids()
        .map(|id| {
            let node = graph.node(id);
            let classes = node
                .attrs
                .get("_class")
                .and_then(AttrValue::as_list)
                .map(|l| l.iter().filter_map(|c| c.as_str().map(String::from)).collect())
                .unwrap_or_default();
            (node.name.to_string(), node.attrs.get_str(OUTSIDE).map(String::from), classes)
        })
        .collect();
    let ours = colocated_clusters(nodes.iter().map(|(n, c, k)| (n.as_str(), c.as_deref(), k.clone())));
    assert_eq!(ours, expected);
}

/// The nested policy gives the seed's names for the same program.
#[test]
fn oc_grad_r2_nested_names_follow_the_seed() {
    let (module, errors) = run(include_str!("../cases/gradients/ok/oc_grad_r2_nested.opg"));
    assert!(errors.is_empty(), "{errors:?}");
    let graph = &module.graphs[0];
    let cluster_of = |name: &str| {
        let id = graph.find(name).unwrap_or_else(|| panic!("no node {name}"));
        graph.node(id).attrs.get_str(OUTSIDE).map(String::from)
    };
    assert_eq!(cluster_of("gradients/host_tanh_grad/TanhGrad").as_deref(), Some("1.gradients/uid"));
    assert_eq!(
        cluster_of("gradients_1/gradients/host_tanh_grad/TanhGrad_grad/TanhGrad").as_deref(),
        Some("1.gradients/uid.gradients_1/uid")
    );
    assert_eq!(cluster_of("gradients_1/host_tanh_grad/TanhGrad").as_deref(), Some("1.gradients_1/uid"));
    assert_eq!(cluster_of("gradients_1/MatMul_grad/MatMul_1"), None);
}

/// Builds a graph from a GraphDef text: node names, ops and inputs from the `.pbtxt`, and the
/// `_tpu_replicate` / `_xla_outside_compilation` tags from the `.tags.json`.
fn graph_of_tf_fixture(pbtxt: &str, tags: &serde_json::Value) -> Graph {
    let mut nodes: Vec<(String, String, Vec<String>)> = Vec::new();
    for block in format!("\n{pbtxt}").split("\nnode {").skip(1) {
        let field = |line: &str, key: &str| line.trim().strip_prefix(key).map(|v| v.trim_matches('"').to_string());
        let mut lines = block.lines().filter(|l| l.starts_with("  ") && !l.starts_with("   "));
        let name = lines.clone().find_map(|l| field(l, "name: ")).expect("a node has a name");
        let op = lines.clone().find_map(|l| field(l, "op: ")).expect("a node has an op");
        let inputs = lines.by_ref().filter_map(|l| field(l, "input: ")).collect();
        nodes.push((name, op, inputs));
    }
    let mut graph = Graph::new("tf");
    for (name, op, _) in &nodes {
        let mut node = tpu_rewrite::ir::Node::op(name.as_str(), op.as_str());
        for (key, json_key) in [(TPU_REPLICATE, "R"), (OUTSIDE, "OC")] {
            if let Some(v) = tags[name.as_str()][json_key].as_str() {
                node.attrs.insert(key, AttrValue::str(v));
            }
        }
        graph.add_node(node).expect("GraphDef names are unique");
    }
    for (name, _, inputs) in &nodes {
        let dst = graph.find(name).expect("added above");
        for input in inputs {
            let span = tpu_rewrite::syntax::Span::DETACHED;
            if let Some(src) = input.strip_prefix('^') {
                let src = graph.find(src).expect("control input exists");
                graph.add_control_input(dst, src, span);
            } else {
                let (src, output) = match input.rsplit_once(':') {
                    Some((n, k)) => (n, k.parse().expect("output index")),
                    None => (input.as_str(), 0),
                };
                let src = graph.find(src).expect("data input exists");
                graph.add_data_input(dst, src, output, span);
            }
        }
    }
    graph
}

/// TensorFlow's own oc_grad_r2 graph (flat naming) has a cycle between the clusters
/// `0.gradients_1/uid` and `1.gradients_1/uid`; the check finds it, and our flat expansion has the
/// same cycle while the nested one has none.
#[test]
fn flat_naming_of_tensorflow_makes_a_cluster_cycle_in_oc_grad_r2() {
    let tags: serde_json::Value =
        serde_json::from_str(include_str!("../data/oc_grad_r2.tags.json")).expect("tags.json parses");
    let graph = graph_of_tf_fixture(include_str!("../data/oc_grad_r2.pbtxt"), &tags);
    let errors = check_cluster_cycles(&graph);
    let paths: Vec<String> = errors
        .iter()
        .map(|e| match e {
            PassError::OutsideCompilationCycle { path, .. } => path.clone(),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(paths.len(), 1, "{paths:?}");
    assert!(paths[0].contains("\"0.gradients_1/uid\"") && paths[0].contains("\"1.gradients_1/uid\""), "{}", paths[0]);

    let (_, flat_errors) = run(include_str!("../cases/gradients/ok/oc_grad_r2_flat.opg"));
    assert_eq!(flat_errors.len(), 1);
    let (_, nested_errors) = run(include_str!("../cases/gradients/ok/oc_grad_r2_nested.opg"));
    assert!(nested_errors.is_empty());

    // Contracting the device part too makes even the forward pass cyclic (device -> host -> device).
    let forward_only: Vec<String> =
        tags.as_object().expect("an object").keys().filter(|k| k.starts_with("gradients")).cloned().collect();
    let mut forward = graph.clone();
    for name in forward_only {
        if let Some(id) = forward.find(&name) {
            forward.remove_node(id);
        }
    }
    assert!(check_cluster_cycles(&forward).is_empty());
    assert!(!check_cluster_cycles_with(&forward, Contraction::WithDevicePart).is_empty());
}

/// The colocation stack's errors that the pass cannot produce from valid input (see the
/// `colocation` module docs), reached through its API, rendered.
#[test]
fn colocation_stack_errors() {
    let source = "graph @main {\n  %a = Placeholder() {_xla_outside_compilation = \"0\", dtype = f32}\n  %b = Neg(%a) {_xla_outside_compilation = \"1\", T = f32}\n}\n";
    let (module, ir_errors) = parse_module(source.as_bytes()).expect("parses");
    assert!(ir_errors.is_empty());
    let graph = &module.graphs[0];
    let (a, b) = (graph.find("a").expect("a"), graph.find("b").expect("b"));
    let mut errors = Vec::new();

    // A caller without a uid colocating with an outside-compilation op.
    let mut ctx = ColocationContext::new(GradientClusterPolicy::Nested);
    errors.push(ctx.enter_gradient_colocation(graph, a, None).expect_err("no uid"));
    ctx.exit_gradient_colocation(graph, a).expect("balanced");

    // A caller that closes the cluster inside an open gradient colocation, then nests another.
    let mut ctx = ColocationContext::new(GradientClusterPolicy::Nested);
    ctx.enter_gradient_colocation(graph, a, Some("gradients/uid")).expect("enters");
    assert_eq!(ctx.cluster(), Some("0.gradients/uid"));
    assert!(ctx.exit_outside_compilation());
    errors.push(ctx.enter_gradient_colocation(graph, b, Some("gradients/uid")).expect_err("nested"));

    // Exits out of order, and with an empty stack.
    errors.push(ctx.exit_gradient_colocation(graph, a).expect_err("b is innermost"));
    ctx.exit_gradient_colocation(graph, a).expect("a is innermost now");
    errors.push(ctx.exit_gradient_colocation(graph, b).expect_err("empty"));

    assert!(matches!(errors[0], PassError::MissingGradientUid { .. }));
    assert!(matches!(errors[1], PassError::NestedGradientColocation { .. }));
    assert!(matches!(errors[2], PassError::BadlyNestedColocation { .. }));
    assert!(matches!(errors[3], PassError::BadlyNestedColocation { .. }));
    insta::assert_snapshot!(render("colocation.opg", source, &errors));
}

/// A gradients call whose operands do not match its counts is left in place with an error.
#[test]
fn malformed_call_is_reported_not_expanded() {
    let (mut module, _) =
        parse_module(b"graph @main {\n  %a = Placeholder() {dtype = f32}\n  %g = gradients(ys = [%a], xs = [%a])\n}\n")
            .expect("parses");
    let graph = &mut module.graphs[0];
    let call = graph.find("g").expect("g");
    graph.node_mut(call).kind = NodeKind::Gradients { num_ys: 2, num_xs: 1, has_grad_ys: false };
    let errors = expand_gradients(graph, &GradientsConfig::default());
    assert!(matches!(&errors[..], [PassError::MalformedGradientsCall { .. }]), "{errors:?}");
    assert!(graph.find("g").is_some());
}
