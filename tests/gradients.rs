//! Tests of the gradients pass and the cluster cycle check.
//!
//! Cases under `tests/cases/gradients/{ok,err}/*.opg` are tagged by hand as the replicate and
//! outside-compilation passes tag them (`_tpu_replicate`, `_xla_outside_compilation` on ops). A
//! first comment line `// policy: flat` selects the flat gradient cluster policy. Each snapshot
//! holds the input, the expanded graph and the rendered diagnostics.

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
    insta::glob!("cases/gradients/ok/*.opg", |path| {
        let out = snapshot(path);
        let expanded = out.split("== expanded ==").nth(1).and_then(|s| s.split("== diagnostics ==").next());
        let expanded = expanded.unwrap_or_default();
        assert!(!expanded.contains("gradients("), "every call is expanded");
        insta::assert_snapshot!(out);
    });
}

#[test]
fn err_cases() {
    insta::glob!("cases/gradients/err/*.opg", |path| {
        let source = std::fs::read_to_string(path).expect("case is readable");
        let (_, errors) = run(&source);
        assert!(!errors.is_empty(), "an err case reports something");
        insta::assert_snapshot!(snapshot(path));
    });
}
