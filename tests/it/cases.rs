//! Data-driven snapshot tests over `tests/cases/{ok,err}` and `examples/`.
//!
//! Each case gives one sectioned snapshot: the input, the canonical text,
//! and the rendered diagnostics (no colour, width 100). `ok` cases and
//! examples must have no errors and must round-trip; every `err` case must
//! yield at least one diagnostic.

use std::fmt::Write;
use std::path::Path;

use tpu_rewrite::diagnostics::{render_plain, AnyDiagnostic};
use tpu_rewrite::emit::print_module;
use tpu_rewrite::ir::{self, Module};

const WIDTH: usize = 100;

/// Shows the input; bytes that are not printable UTF-8 are escaped.
fn show_input(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\0' => out.push_str("\\0"),
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

struct Outcome {
    module: Option<Module>,
    diagnostics: Vec<AnyDiagnostic>,
    has_error: bool,
}

fn process(bytes: &[u8]) -> Outcome {
    match ir::parse_module(bytes) {
        Ok((module, errors)) => {
            let has_error = !errors.is_empty();
            let diagnostics = errors.into_iter().map(|e| Box::new(e) as AnyDiagnostic).collect();
            Outcome { module: Some(module), diagnostics, has_error }
        }
        Err(e) => Outcome { module: None, diagnostics: vec![Box::new(e)], has_error: true },
    }
}

fn snapshot_text(path: &Path, bytes: &[u8], outcome: Outcome) -> String {
    let name = format!("cases/{}", path.file_name().unwrap().to_string_lossy());
    let mut text = String::new();
    let _ = writeln!(text, "=== input\n{}", show_input(bytes));
    let _ = writeln!(text, "=== canonical");
    if let Some(m) = &outcome.module {
        text.push_str(&print_module(m));
    }
    let _ = writeln!(text, "=== diagnostics");
    text.push_str(&render_plain(outcome.diagnostics, &name, bytes, WIDTH));
    text
}

fn assert_round_trip(module: &Module, path: &Path) {
    let printed = print_module(module);
    let (again, errors) = ir::parse_module(printed.as_bytes()).expect("printed text parses");
    assert!(errors.is_empty(), "{}: printed text has errors: {errors:?}", path.display());
    for (a, b) in module.graphs.iter().zip(&again.graphs) {
        assert_eq!(ir::eq::first_difference(a, b), None, "{}", path.display());
    }
    assert!(*module == again, "{}: parse(print(m)) != m", path.display());
    assert_eq!(print_module(&again), printed, "{}: printing is not stable", path.display());
}

#[test]
fn ok_cases() {
    insta::glob!("../cases", "ok/*.opg", |path| {
        let bytes = std::fs::read(path).unwrap();
        let outcome = process(&bytes);
        assert!(!outcome.has_error, "{} has errors", path.display());
        let module = outcome.module.as_ref().expect("ok case parses");
        assert_round_trip(module, path);
        insta::assert_snapshot!(snapshot_text(path, &bytes, outcome));
    });
}

#[test]
fn err_cases() {
    insta::glob!("../cases", "err/*.opg", |path| {
        let bytes = std::fs::read(path).unwrap();
        let outcome = process(&bytes);
        assert!(!outcome.diagnostics.is_empty(), "{} yields no diagnostic", path.display());
        assert!(outcome.has_error, "{} yields no error", path.display());
        insta::assert_snapshot!(snapshot_text(path, &bytes, outcome));
    });
}

#[test]
fn examples_are_canonical_and_round_trip() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut count = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "opg") {
            continue;
        }
        count += 1;
        let bytes = std::fs::read(&path).unwrap();
        let outcome = process(&bytes);
        assert!(!outcome.has_error, "{} has errors", path.display());
        let module = outcome.module.unwrap();
        assert_round_trip(&module, &path);
        assert_eq!(print_module(&module).as_bytes(), bytes.as_slice(), "{} is not in canonical form", path.display());
    }
    assert!(count >= 5, "expected at least five examples, found {count}");
}
