//! Snapshot tests of the rewrite passes, one case file per rule.
//!
//! `cases/rewrite/ok/*.opg` must rewrite without errors; their snapshots
//! show the input, the rewritten graph, the diagnostics (warnings) and the
//! clusters formed from the tags, and every case must round-trip through
//! the printer and be a fixed point of the pipeline. `cases/rewrite/err/*.opg`
//! must yield at least one error. A case may ask for feed/fetch checks
//! after the rewrite with lines `// feed: NAME` or `// fetch: NAME`.

use miette::{GraphicalReportHandler, GraphicalTheme, NamedSource};
use tpu_rewrite::emit::print_module;
use tpu_rewrite::ir::{parse_module, Module};
use tpu_rewrite::passes::feed_fetch::{Access, FeedFetchRule};
use tpu_rewrite::passes::{run_pipeline, PassError, PipelineConfig, PipelineReport, VerifyMode};

fn config() -> PipelineConfig {
    PipelineConfig { verify: VerifyMode::AfterEachPass, ..PipelineConfig::default() }
}

fn render(diagnostic: &dyn miette::Diagnostic, name: &str, source: &str) -> String {
    struct WithSource<'a> {
        inner: &'a dyn miette::Diagnostic,
        source: NamedSource<String>,
    }
    impl std::fmt::Debug for WithSource<'_> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            std::fmt::Debug::fmt(self.inner, f)
        }
    }
    impl std::fmt::Display for WithSource<'_> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            std::fmt::Display::fmt(self.inner, f)
        }
    }
    impl std::error::Error for WithSource<'_> {}
    impl miette::Diagnostic for WithSource<'_> {
        fn code<'b>(&'b self) -> Option<Box<dyn std::fmt::Display + 'b>> {
            self.inner.code()
        }
        fn severity(&self) -> Option<miette::Severity> {
            self.inner.severity()
        }
        fn help<'b>(&'b self) -> Option<Box<dyn std::fmt::Display + 'b>> {
            self.inner.help()
        }
        fn labels(&self) -> Option<Box<dyn Iterator<Item = miette::LabeledSpan> + '_>> {
            self.inner.labels()
        }
        fn source_code(&self) -> Option<&dyn miette::SourceCode> {
            Some(&self.source)
        }
    }
    let wrapped = WithSource { inner: diagnostic, source: NamedSource::new(name, source.to_string()) };
    let mut out = String::new();
    GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor())
        .with_width(100)
        .render_report(&mut out, &wrapped)
        .expect("rendering into a String cannot fail");
    out
}

/// Parses a case, failing the test on syntax or IR errors.
fn parse_case(name: &str, source: &str) -> Module {
    let (module, errors) = match parse_module(source.as_bytes()) {
        Ok(parsed) => parsed,
        Err(e) => panic!("{name}: syntax error: {e}"),
    };
    let rendered: Vec<String> = errors.iter().map(|e| render(e, name, source)).collect();
    assert!(errors.is_empty(), "{name}: IR errors:\n{}", rendered.join("\n"));
    module
}

fn render_report(report: &PipelineReport, name: &str, source: &str) -> String {
    let mut out = String::new();
    for d in &report.diagnostics {
        out.push_str(&format!("[{} in @{}]\n", d.pass.name(), d.graph));
        out.push_str(&render(d.diagnostic(), name, source));
    }
    if out.is_empty() {
        out.push_str("(none)\n");
    }
    out
}

fn clusters_summary(module: &Module, report: &PipelineReport) -> String {
    let mut out = String::new();
    for (graph_name, clusters) in &report.clusters {
        let Some(graph) = module.graph(graph_name) else { continue };
        let names = |ids: &[tpu_rewrite::ir::NodeId]| -> String {
            ids.iter().map(|&id| format!("%{}", graph.node(id).name)).collect::<Vec<_>>().join(", ")
        };
        for c in clusters {
            out.push_str(&format!(
                "@{graph_name} cluster `{}`: num_replicas = {}, num_cores_per_replica = {}, metadata = %{}, {} members\n",
                c.name,
                c.num_replicas,
                c.num_cores_per_replica,
                graph.node(c.metadata).name,
                c.members.len()
            ));
            out.push_str(&format!("  pivot: {}\n", names(&c.pivot.into_iter().collect::<Vec<_>>())));
            out.push_str(&format!(
                "  compilation result: {}\n",
                names(&c.compilation_result.into_iter().collect::<Vec<_>>())
            ));
            out.push_str(&format!("  inputs: [{}]\n", names(&c.inputs)));
            out.push_str(&format!("  outputs: [{}]\n", names(&c.outputs)));
            for (oc, members) in &c.outside_compilation {
                out.push_str(&format!("  outside_compilation `{oc}`: [{}]\n", names(members)));
            }
            out.push_str(&format!("  host_compute_core: {:?}\n", c.host_compute_core));
        }
    }
    if out.is_empty() {
        out.push_str("(none)\n");
    }
    out
}

/// `// feed: NAME` and `// fetch: NAME` lines of a case.
fn access_checks(source: &str) -> Vec<(Access, String)> {
    source
        .lines()
        .filter_map(|line| {
            let line = line.trim().strip_prefix("//")?.trim();
            if let Some(name) = line.strip_prefix("feed:") {
                Some((Access::Feed, name.trim().to_string()))
            } else {
                line.strip_prefix("fetch:").map(|name| (Access::Fetch, name.trim().to_string()))
            }
        })
        .collect()
}

/// Runs the requested feed/fetch checks; returns the text and the errors.
fn run_access_checks(module: &Module, source: &str) -> (String, Vec<PassError>) {
    let checks = access_checks(source);
    let mut out = String::new();
    let mut errors = Vec::new();
    let Some(graph) = module.graphs.first() else { return (out, errors) };
    let rule = FeedFetchRule::new(graph);
    for (access, node) in checks {
        let Some(id) = graph.find(&node) else { panic!("no node `{node}` to check") };
        match rule.check(graph, id, access) {
            Ok(()) => out.push_str(&format!("{access:?} %{node}: allowed\n")),
            Err(e) => {
                // Spans of rewritten nodes still point into the input.
                out.push_str(&format!("{access:?} %{node}: refused\n"));
                errors.push(e);
            }
        }
    }
    (out, errors)
}

#[test]
fn ok_cases() {
    insta::glob!("../cases/rewrite", "ok/*.opg", |path| {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("case").to_string();
        let source = std::fs::read_to_string(path).expect("case file is readable");
        let mut module = parse_case(&name, &source);
        let report = run_pipeline(&mut module, &config());
        let diagnostics = render_report(&report, &name, &source);
        assert!(!report.has_errors(), "{name}: the pipeline reported errors:\n{diagnostics}");
        let rewritten = print_module(&module);

        // Round trip: the rewritten graph parses back to itself.
        let reparsed = parse_case(&format!("{name} (rewritten)"), &rewritten);
        assert!(
            reparsed == module,
            "{name}: round trip differs: {:?}",
            module.graphs.iter().zip(&reparsed.graphs).find_map(|(a, b)| tpu_rewrite::ir::eq::first_difference(a, b))
        );
        // Idempotence: the pipeline changes nothing on its own output.
        let mut again = reparsed;
        let second = run_pipeline(&mut again, &config());
        assert!(!second.has_errors(), "{name}: the second run reported errors");
        assert_eq!(print_module(&again), rewritten, "{name}: the pipeline is not idempotent");
        assert!(again == module, "{name}: the second run changed the module");
        assert_eq!(
            clusters_summary(&again, &second),
            clusters_summary(&module, &report),
            "{name}: clusters differ after the second run"
        );

        let (access_text, access_errors) = run_access_checks(&module, &source);
        let mut snapshot = format!(
            "--- input ---\n{source}\n--- rewritten ---\n{rewritten}\n--- diagnostics ---\n{diagnostics}\n--- clusters ---\n{}",
            clusters_summary(&module, &report)
        );
        if !access_text.is_empty() {
            snapshot.push_str("\n--- feed/fetch ---\n");
            snapshot.push_str(&access_text);
            for e in &access_errors {
                snapshot.push_str(&render(e, &name, &source));
            }
        }
        insta::assert_snapshot!(snapshot);
    });
}

#[test]
fn err_cases() {
    insta::glob!("../cases/rewrite", "err/*.opg", |path| {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("case").to_string();
        let source = std::fs::read_to_string(path).expect("case file is readable");
        // The verifier may already object to some inputs; show what it says,
        // then run the passes anyway, as they must cope with broken input.
        let (mut module, ir_errors) = match parse_module(source.as_bytes()) {
            Ok(parsed) => parsed,
            Err(e) => panic!("{name}: syntax error: {e}"),
        };
        // Re-verifying a graph the verifier already rejected would only
        // repeat its errors and stop the pipeline before the passes speak.
        let verify = if ir_errors.is_empty() { VerifyMode::AfterEachPass } else { VerifyMode::Never };
        let report = run_pipeline(&mut module, &PipelineConfig { verify, ..PipelineConfig::default() });
        let (access_text, access_errors) = run_access_checks(&module, &source);
        let errors = report.diagnostics.iter().filter(|d| d.is_error()).count() + access_errors.len();
        assert!(errors >= 1, "{name}: expected at least one error from the passes");
        let mut snapshot = format!("--- input ---\n{source}\n");
        if !ir_errors.is_empty() {
            snapshot.push_str("--- verifier ---\n");
            for e in &ir_errors {
                snapshot.push_str(&render(e, &name, &source));
            }
        }
        snapshot.push_str(&format!("--- diagnostics ---\n{}", render_report(&report, &name, &source)));
        if let Some(pass) = report.stopped_after {
            snapshot.push_str(&format!("(stopped after {})\n", pass.name()));
        }
        if !access_text.is_empty() {
            snapshot.push_str("\n--- feed/fetch ---\n");
            snapshot.push_str(&access_text);
            for e in &access_errors {
                snapshot.push_str(&render(e, &name, &source));
            }
        }
        insta::assert_snapshot!(snapshot);
    });
}

const SMALL: &str = r#"graph @main {
  %x0 = Placeholder() {dtype = f32, shape = shape[2]}
  %x1 = Placeholder() {dtype = f32, shape = shape[2]}
  replicate (num_replicas = 2) (%x = [%x0, %x1]) {
    %y = Neg(%x) {T = f32}
    outside_compilation {
      %h = Identity(%y) {T = f32}
    }
    return %h
  }
}
"#;

#[test]
fn pass_names_parse_back() {
    use tpu_rewrite::passes::{pass_names, Pass, PassSelection, SelectionError, PIPELINE};
    assert_eq!(pass_names().len(), PIPELINE.len());
    for (&name, &pass) in pass_names().iter().zip(PIPELINE) {
        assert_eq!(Pass::from_name(name), Some(pass));
        assert_eq!(pass.name(), name);
    }
    let error = PassSelection::parse("fan-in,bogus").expect_err("`bogus` is no pass");
    assert!(error.to_string().contains("unknown pass `bogus`"), "{error}");
    assert_eq!(PassSelection::parse("fan-in, fan-out"), Ok(PassSelection::Only(vec![Pass::FanIn, Pass::FanOut])));
    // An order the pipeline would not honour is refused, as is a repeat.
    let error = PassSelection::parse("fan-out, fan-in").expect_err("out of order");
    assert!(
        matches!(error, SelectionError::OutOfOrder { ref name, after: "fan-out", .. } if name == "fan-in"),
        "{error}"
    );
    assert!(matches!(PassSelection::parse("fan-in,fan-in"), Err(SelectionError::Repeated { .. })));
}

#[test]
fn selected_passes_run_in_pipeline_order_and_need_their_prerequisites() {
    use tpu_rewrite::passes::{DiagnosticSource, Pass, PassSelection};
    let mut module = parse_case("small", SMALL);
    let passes = PassSelection::parse("replicate-clustering,fan-in").expect("known passes");
    let report = run_pipeline(&mut module, &PipelineConfig { passes, ..config() });
    assert!(!report.has_errors(), "clustering runs before fan-in");
    let ran: Vec<Pass> = report.timings.iter().map(|t| t.pass).collect();
    assert_eq!(ran, vec![Pass::ReplicateClustering, Pass::FanIn]);

    let mut module = parse_case("small", SMALL);
    let passes = PassSelection::parse("fan-in").expect("known pass");
    let report = run_pipeline(&mut module, &PipelineConfig { passes, ..config() });
    let missing = report.diagnostics.iter().any(|d| {
        matches!(
            &d.source,
            DiagnosticSource::Pass(PassError::MissingPrerequisite { needs: "replicate-clustering", .. })
        )
    });
    assert!(missing, "fan-in alone must ask for clustering: {:?}", report.diagnostics);
    assert_eq!(report.stopped_after, Some(Pass::FanIn));
}

#[test]
fn print_after_all_and_timings_cover_every_pass() {
    use tpu_rewrite::passes::{PrintMode, PIPELINE};
    let mut module = parse_case("small", SMALL);
    let report = run_pipeline(&mut module, &PipelineConfig { print: PrintMode::AfterEachPass, ..config() });
    assert!(!report.has_errors());
    // Every pass runs except the optional all-reduce fusion, which is off by default.
    let default_passes = PIPELINE.iter().filter(|p| p.name() != "fuse-all-reduce").count();
    assert_eq!(report.printed.len(), default_passes);
    assert_eq!(report.timings.len(), default_passes);
    // After clustering the region is still there, tagged; after fan-out it is gone.
    let after = |name: &str| &report.printed.iter().find(|p| p.pass.name() == name).expect("printed").text;
    assert!(after("replicate-clustering").contains("replicate (_tpu_replicate = \"cluster\""));
    assert!(!after("fan-out").contains("replicate ("));
    assert_eq!(after("form-clusters"), &print_module(&module));
    let table = report.timing_table();
    for pass in PIPELINE.iter().filter(|p| p.name() != "fuse-all-reduce") {
        assert!(table.contains(pass.name()), "{table}");
    }
}

#[test]
fn feed_fetch_rule_reads_regions_before_the_rewrite() {
    let module = parse_case("small", SMALL);
    let graph = &module.graphs[0];
    let rule = FeedFetchRule::new(graph);
    let y = graph.find("y").expect("node y");
    let h = graph.find("h").expect("node h");
    let x0 = graph.find("x0").expect("node x0");
    assert!(rule.check(graph, y, Access::Fetch).is_err());
    let error = rule.check(graph, h, Access::Feed).expect_err("two replicas");
    assert!(error.to_string().contains("feed/fetch rule"), "{error}");
    assert!(rule.check(graph, x0, Access::Feed).is_ok());
}

#[test]
fn the_default_pipeline_configuration_verifies_like_the_cli() {
    // The CLI verifies once after the last pass; so does the library default.
    assert_eq!(PipelineConfig::default().verify, VerifyMode::AtEnd);
    // A graph the verifier rejects (a dtype attribute holding an int) fails
    // the default pipeline, and passes when verification is off.
    let source = b"graph @main {\n  %x = Placeholder() {dtype = f32}\n  %y = Relu(%x) {T = 3}\n}\n";
    let (module, errors) = tpu_rewrite::ir::parse_module(source).expect("parses");
    assert!(!errors.is_empty(), "the verifier rejects `T = 3`");
    let report = run_pipeline(&mut module.clone(), &PipelineConfig::default());
    assert!(report.has_errors(), "{:?}", report.diagnostics);
    let unverified = PipelineConfig { verify: VerifyMode::Never, ..PipelineConfig::default() };
    assert!(!run_pipeline(&mut module.clone(), &unverified).has_errors());
}
