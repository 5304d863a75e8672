//! The binary with GraphDefs everywhere: input formats (flag, extension,
//! sniffed stdin), outputs that keep the function library, errors for what
//! a format cannot hold, GraphDef output of `rewrite`, `lower` and `gen`,
//! pass selection and `--print-*`, and the generated op table.

use std::path::Path;
use std::process::Output;

use crate::support::cli as support_cli;
use support_cli::{example, run, run_stdin, stderr};

fn ok(o: &Output) -> &Output {
    assert!(o.status.success(), "exit {:?}: {}", o.status.code(), stderr(o));
    o
}

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/tf-graphs/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// A GraphDef whose While loop calls a condition and a body in its library.
const WHILE_GRAPH: &str = r#"node { name: "i0" op: "Const" attr { key: "dtype" value { type: DT_INT32 } } attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: 0 } } } }
node { name: "loop" op: "While" input: "i0" attr { key: "body" value { func { name: "body" } } } attr { key: "cond" value { func { name: "cond" } } } attr { key: "T" value { list { type: DT_INT32 } } } }
library {
  function { signature { name: "cond" input_arg { name: "i" type: DT_INT32 } output_arg { name: "ok" type: DT_BOOL } }
    node_def { name: "ten" op: "Const" attr { key: "dtype" value { type: DT_INT32 } } attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: 10 } } } }
    node_def { name: "less" op: "Less" input: "i" input: "ten:output:0" attr { key: "T" value { type: DT_INT32 } } }
    ret { key: "ok" value: "less:z:0" } }
  function { signature { name: "body" input_arg { name: "i" type: DT_INT32 } output_arg { name: "next" type: DT_INT32 } }
    node_def { name: "one" op: "Const" attr { key: "dtype" value { type: DT_INT32 } } attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: 1 } } } }
    node_def { name: "add" op: "AddV2" input: "i" input: "one:output:0" attr { key: "T" value { type: DT_INT32 } } }
    ret { key: "next" value: "add:z:0" } }
}
versions { producer: 1087 }
"#;

#[test]
fn check_and_fmt_read_graphdefs_by_extension_and_flag() {
    ok(&run(&["check", &fixture("mlp_r4.pb"), &fixture("mlp_r4.pbtxt")]));
    let dir = tempfile::tempdir().expect("tempdir");
    // A GraphDef without a telling extension, read with --input-format.
    let odd = dir.path().join("graph.txt");
    std::fs::copy(fixture("mlp_r4.pbtxt"), &odd).expect("copies");
    ok(&run(&["check", "--input-format", "pbtxt", odd.to_str().expect("utf-8")]));
    // fmt prints a GraphDef in canonical text, the same as emit does.
    let formatted = ok(&run(&["fmt", &fixture("mlp_r4.pbtxt")])).stdout.clone();
    let emitted = ok(&run(&["emit", &fixture("mlp_r4.pb"), "--format", "pbtxt"])).stdout.clone();
    assert_eq!(formatted, emitted);
    assert!(String::from_utf8_lossy(&formatted).starts_with("node {\n"));
}

#[test]
fn stdin_is_sniffed_and_errors_say_how_it_was_read() {
    let pbtxt = std::fs::read(fixture("mlp_r4.pbtxt")).expect("reads");
    let pb = std::fs::read(fixture("mlp_r4.pb")).expect("reads");
    let opg = std::fs::read(example("mlp_train.opg")).expect("reads");
    for input in [&pbtxt, &pb, &opg] {
        ok(&run_stdin(&["check", "-"], input));
    }
    ok(&run_stdin(&["check", "-"], b"library {\n}\n"));
    let o = run_stdin(&["check", "-"], b"node { name: \"a\" op: \"X\" bogus: 1 }");
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("unknown_field"), "{}", stderr(&o));
    assert!(stderr(&o).contains("read as `pbtxt` because of its first bytes"), "{}", stderr(&o));
    let o = run_stdin(&["check", "-"], b"hello world");
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("read as `opg`"), "{}", stderr(&o));
}

#[test]
fn emit_keeps_the_function_library_in_both_formats() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = dir.path().join("while.pbtxt");
    std::fs::write(&text, WHILE_GRAPH).expect("writes");
    let pb = dir.path().join("while.pb");
    ok(&run(&["emit", text.to_str().expect("utf-8"), "--format", "pb", "-o", pb.to_str().expect("utf-8")]));
    let canonical = ok(&run(&["fmt", text.to_str().expect("utf-8")])).stdout.clone();
    let back = ok(&run(&["emit", pb.to_str().expect("utf-8"), "--format", "pbtxt"])).stdout.clone();
    assert_eq!(String::from_utf8_lossy(&back), String::from_utf8_lossy(&canonical));
    let back = String::from_utf8_lossy(&back);
    assert!(back.contains("library {\n  function {\n    signature {\n      name: \"cond\""), "{back}");
    assert!(back.contains("name: \"body\""), "{back}");
    // pb -> pbtxt -> pb is byte-identical.
    let again = dir.path().join("again.pb");
    let canonical_path = dir.path().join("canonical.pbtxt");
    std::fs::write(&canonical_path, back.as_bytes()).expect("writes");
    ok(&run(&[
        "emit",
        canonical_path.to_str().expect("utf-8"),
        "--format",
        "pb",
        "-o",
        again.to_str().expect("utf-8"),
    ]));
    assert_eq!(std::fs::read(&pb).expect("reads"), std::fs::read(&again).expect("reads"));
}

#[test]
fn a_graph_a_graphdef_cannot_hold_is_an_error() {
    let o = run(&["emit", &example("mlp_train.opg"), "--format", "pbtxt"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("tpu_rewrite::import::not_flat"), "{}", stderr(&o));
    assert!(o.stdout.is_empty());
}

#[test]
fn rewrite_writes_a_graphdef_that_reads_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    for format in ["pbtxt", "pb"] {
        let out = dir.path().join(format!("tagged.{format}"));
        let out = out.to_str().expect("utf-8");
        ok(&run(&["rewrite", &example("mlp_train.opg"), "--format", format, "-o", out]));
        ok(&run(&["check", out]));
        // A rewritten graph rewrites to itself.
        let again = ok(&run(&["rewrite", out, "--format", format])).stdout.clone();
        assert_eq!(again, std::fs::read(out).expect("reads"), "{format}");
    }
}

#[test]
fn lower_writes_one_graphdef_per_program() {
    let o = run(&["lower", &fixture("mlp_r4.pbtxt"), "--format", "pbtxt"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("-o DIR"), "{}", stderr(&o));
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("programs");
    ok(&run(&["lower", &fixture("mlp_r4.pbtxt"), "--format", "pb", "-o", out.to_str().expect("utf-8")]));
    let text = ok(&run(&["lower", &fixture("mlp_r4.pbtxt")])).stdout.clone();
    let graphs = String::from_utf8_lossy(&text).matches("\ngraph @").count() + 1;
    let mut files: Vec<_> = std::fs::read_dir(&out).expect("a directory").flatten().map(|e| e.path()).collect();
    files.sort();
    assert_eq!(files.len(), graphs, "one file per program: {files:?}");
    assert!(files.iter().any(|f| f.file_name().is_some_and(|n| n == "host.pb")), "{files:?}");
    for file in &files {
        ok(&run(&["check", file.to_str().expect("utf-8")]));
    }
}

#[test]
fn gen_writes_every_format_for_the_default_model() {
    let dir = tempfile::tempdir().expect("tempdir");
    for format in ["text", "json", "dot", "pbtxt", "pb"] {
        let o = ok(&run(&["gen", "--ops", "200", "--replicas", "2", "--format", format])).stdout.clone();
        assert!(!o.is_empty(), "{format}");
        if matches!(format, "pbtxt" | "pb") {
            let path = dir.path().join(format!("g.{format}"));
            std::fs::write(&path, &o).expect("writes");
            ok(&run(&["check", path.to_str().expect("utf-8")]));
        }
    }
}

#[test]
fn passes_are_listed_and_a_bad_selection_is_a_usage_error() {
    let listed = String::from_utf8_lossy(&ok(&run(&["passes"])).stdout).into_owned();
    for name in tpu_rewrite::passes::pass_names() {
        assert!(listed.lines().any(|l| l.starts_with(name) && l.len() > name.len() + 4), "{name}: {listed}");
    }
    let help = run(&["rewrite", "--passes", "help", &example("mlp_train.opg")]);
    assert_eq!(help.status.code(), Some(0));
    assert_eq!(stderr(&help), listed);
    let o = run(&["rewrite", "--passes", "fan-in,replicate-clustering", &example("mlp_train.opg")]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("out_of_order"), "{}", stderr(&o));
    let o = run(&["lower", "--passes", "no-such-pass", &example("mlp_train.opg")]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("unknown pass `no-such-pass`"), "{}", stderr(&o));
}

#[test]
fn print_before_and_after_work_on_lower_and_run() {
    let o = run(&["lower", &example("mlp_train.opg"), "--print-before", "fan-in", "--print-after", "fan-out"]);
    let err = stderr(ok(&o));
    assert!(err.contains("// ----- before fan-in -----\n"), "{err}");
    assert!(err.contains("// ----- after fan-out -----\n"), "{err}");
    assert_eq!(err.matches("\ngraph @main").count(), 2, "{err}");
    assert!(!err.contains("after fan-in"), "{err}");
    let o = run(&["run", &example("mlp_train.opg"), "--print-after-all", "--json"]);
    let printed = stderr(ok(&o)).matches("// ----- after ").count();
    let default_passes = tpu_rewrite::passes::PIPELINE.iter().filter(|p| p.name() != "fuse-all-reduce").count();
    assert_eq!(printed, default_passes, "{}", stderr(&o));
}

#[test]
fn docs_ops_md_is_current() {
    let generated = ok(&run(&["ops", "--markdown"])).stdout.clone();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/ops.md");
    let on_disk = std::fs::read(&path).unwrap_or_default();
    assert!(on_disk == generated, "docs/ops.md is stale: run `cargo run -- ops --markdown > docs/ops.md`");
    let plain = String::from_utf8_lossy(&ok(&run(&["ops"])).stdout).into_owned();
    for op in tpu_rewrite::exec::kernels::PURE_OPS.iter().chain(tpu_rewrite::exec::kernels::DEVICE_OPS) {
        assert!(plain.lines().any(|l| l.split_whitespace().next() == Some(op)), "{op} missing from `ops`");
    }
}

#[test]
fn step_log_counts_the_replicas_it_does_not_show() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("ten.opg");
    let mut text = String::from("graph @main {\n");
    for r in 0..10 {
        text.push_str(&format!("  %x{r} = Const() {{dtype = f32, value = tensor(f32, []) [{r}.0]}}\n"));
    }
    let xs: Vec<String> = (0..10).map(|r| format!("%x{r}")).collect();
    text.push_str(&format!(
        "  replicate (num_replicas = 10) (%x = [{}]) {{\n    %y = Mul(%x, %x) {{T = f32}}\n    return %y\n  }}\n}}\n",
        xs.join(", ")
    ));
    std::fs::write(&path, text).expect("writes");
    let o = run(&["run", path.to_str().expect("utf-8"), "--topology", "1x10", "--steps", "2"]);
    let err = stderr(ok(&o));
    let line = err.lines().find(|l| l.starts_with("step      2:")).unwrap_or_else(|| panic!("no step log:\n{err}"));
    assert_eq!(line.matches(" = ").count(), 8, "{line}");
    assert!(line.ends_with("… and 2 more"), "{line}");
}

/// Without `--format`, the extension of `-o` picks the output format
/// (`.pbtxt`, `.pb`, `.json`, `.dot`, `.opg`); an unknown one is text, and
/// `--format` beats the extension.
#[test]
fn the_output_extension_picks_the_format() {
    let dir = tempfile::tempdir().unwrap();
    let mlp = example("mlp_train.opg");
    let written = |name: &str, extra: &[&str]| {
        let path = dir.path().join(name);
        let mut args = vec!["rewrite", mlp.as_str(), "-o", path.to_str().unwrap()];
        args.extend_from_slice(extra);
        ok(&run(&args));
        std::fs::read(&path).unwrap()
    };
    let pbtxt = String::from_utf8(written("g.pbtxt", &[])).unwrap();
    assert!(pbtxt.contains("node {") && pbtxt.contains("op: \"TPUReplicatedInput\""), "{pbtxt}");
    let pb = written("g.pb", &[]);
    assert!(tpu_rewrite::tf::import_graphdef(&pb, tpu_rewrite::tf::GraphDefFormat::Binary).is_ok());
    let json: serde_json::Value = serde_json::from_slice(&written("g.json", &[])).unwrap();
    assert!(json.is_object());
    assert!(String::from_utf8(written("g.dot", &[])).unwrap().starts_with("digraph"));
    let text = String::from_utf8(written("g.opg", &[])).unwrap();
    assert!(text.contains("TPUReplicatedInput("), "{text}");
    assert_eq!(written("g.txt", &[]), text.as_bytes());
    assert_eq!(written("h.pbtxt", &["--format", "text"]), text.as_bytes());
    // `gen` follows the same rule.
    let path = dir.path().join("t.pbtxt");
    ok(&run(&["gen", "--model", "transformer", "--ops", "200", "-o", path.to_str().unwrap()]));
    let gen = std::fs::read_to_string(&path).unwrap();
    assert!(gen.contains("op: \"TPUReplicateMetadata\""), "{gen}");
}

/// The functions of a lowered module travel in each program's library,
/// not as files of their own, and each program reads back with them.
#[test]
fn lowered_programs_carry_their_functions_in_the_library() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("programs");
    let corpus = format!("{}/tests/tf/corpus/replicated_while.pbtxt", env!("CARGO_MANIFEST_DIR"));
    ok(&run(&["lower", &corpus, "--format", "pbtxt", "-o", out.to_str().expect("utf-8")]));
    let mut files: Vec<_> = std::fs::read_dir(&out).expect("a directory").flatten().map(|e| e.path()).collect();
    files.sort();
    let names: Vec<String> =
        files.iter().filter_map(|f| f.file_name().map(|n| n.to_string_lossy().into_owned())).collect();
    assert_eq!(names, ["cluster.pbtxt", "host.pbtxt"], "the programs only");
    for file in &files {
        let bytes = std::fs::read(file).expect("reads");
        let (module, errors) =
            tpu_rewrite::tf::import_graphdef(&bytes, tpu_rewrite::tf::GraphDefFormat::Text).expect("imports");
        assert!(errors.is_empty(), "{errors:?}");
        let functions = tpu_rewrite::ir::functions::functions(&module).count();
        assert!(functions >= 2, "{}: {functions} functions", file.display());
        let mut call_errors = Vec::new();
        tpu_rewrite::ir::functions::check_calls(&module, &mut call_errors);
        assert!(call_errors.is_empty(), "{}: {call_errors:?}", file.display());
    }
}

/// `check`, `fmt` and `emit` run no pass, so they verify an imported
/// GraphDef themselves: a bad output index is a coded error with its span.
#[test]
fn commands_without_passes_verify_imported_graphdefs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bad.pbtxt");
    std::fs::write(
        &path,
        "node { name: \"x\" op: \"Placeholder\" attr { key: \"dtype\" value { type: DT_FLOAT } } }\n\
         node { name: \"y\" op: \"Relu\" input: \"x:3\" attr { key: \"T\" value { type: DT_FLOAT } } }\n",
    )
    .expect("writes");
    let path = path.to_str().expect("utf-8");
    for args in [vec!["check", path], vec!["fmt", path], vec!["emit", path, "--format", "json"]] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(
            err.contains("tpu_rewrite::ir::output_out_of_range") && err.contains("bad.pbtxt:2:"),
            "{args:?}: {err}"
        );
    }
}
