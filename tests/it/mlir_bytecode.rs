//! The StableHLO portable-artifact reader against MLIR itself: every
//! artifact of `tests/tf/corpus/mlir` (written by `tests/tf/mlir_artifacts.py`
//! with jax.export) is decoded and printed, and the text must equal what
//! MLIR prints for the same artifact, token by token after normalising what
//! the two printers choose differently (value names, multi-result syntax,
//! float spelling). Truncated and mutated artifacts must give an error,
//! never a panic.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use tpu_rewrite::syntax::mlir::{read_portable_artifact, Attribute, MlirError, Module, Visibility};

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tf/corpus/mlir")
}

/// The artifact names, from the `.mlirbc` files.
fn artifact_names() -> Vec<String> {
    let dir = corpus_dir();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}; run tests/tf/mlir_artifacts.py", dir.display()))
        .filter_map(|e| {
            let path = e.ok()?.path();
            (path.extension()? == "mlirbc").then(|| path.file_stem()?.to_str().map(str::to_owned))?
        })
        .collect();
    names.sort();
    assert!(names.len() >= 8, "expected the artifacts of tests/tf/mlir_artifacts.py in {}", dir.display());
    names
}

fn artifact(name: &str) -> Vec<u8> {
    std::fs::read(corpus_dir().join(format!("{name}.mlirbc"))).expect("artifact")
}

fn decode(name: &str) -> Module {
    read_portable_artifact(&artifact(name)).unwrap_or_else(|e| panic!("{name}: {e:?}"))
}

/// A token of MLIR's generic text.
#[derive(Debug, PartialEq)]
enum Token {
    /// A value, renamed to its order of first appearance.
    Value(usize),
    /// A number, compared by value.
    Number(f64),
    /// Anything else, verbatim.
    Text(String),
}

/// Tokenises MLIR text: `%name` and `%name#k` are values (renamed by first
/// appearance), `%name:n =` defines `n` values, numbers are parsed, and
/// `sym_visibility = "public"` (the default, which printers may omit) is
/// dropped.
fn tokens(text: &str) -> Vec<Token> {
    let text = text.replace(", sym_visibility = \"public\"", "").replace("sym_visibility = \"public\", ", "");
    let bytes = text.as_bytes();
    let mut names: Vec<String> = Vec::new();
    let id = |names: &mut Vec<String>, name: String| match names.iter().position(|n| *n == name) {
        Some(i) => i,
        None => {
            names.push(name);
            names.len() - 1
        }
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let word_end = |mut j: usize| {
            while j < bytes.len() && (bytes[j].is_ascii_alphanumeric() || b"_.$-+".contains(&bytes[j])) {
                j += 1;
            }
            j
        };
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'%' {
            let mut j = i + 1;
            while j < bytes.len() && (bytes[j].is_ascii_alphanumeric() || bytes[j] == b'_') {
                j += 1;
            }
            let name = text[i + 1..j].to_string();
            if bytes.get(j) == Some(&b'#') {
                let k = word_end(j + 1);
                out.push(Token::Value(id(&mut names, format!("{name}#{}", &text[j + 1..k]))));
                i = k;
            } else if bytes.get(j) == Some(&b':') && bytes.get(j + 1).is_some_and(u8::is_ascii_digit) {
                let k = word_end(j + 1);
                let n: usize = text[j + 1..k].parse().expect("result count");
                for r in 0..n {
                    if r > 0 {
                        out.push(Token::Text(",".into()));
                    }
                    out.push(Token::Value(id(&mut names, format!("{name}#{r}"))));
                }
                i = k;
            } else {
                out.push(Token::Value(id(&mut names, name)));
                i = j;
            }
        } else if c == b'"' {
            let mut j = i + 1;
            while j < bytes.len() && bytes[j] != b'"' {
                j += if bytes[j] == b'\\' { 2 } else { 1 };
            }
            let quoted = &text[i..=j.min(bytes.len() - 1)];
            if quoted == "\"func.func\"" {
                // Each function numbers its values afresh.
                names.clear();
            }
            out.push(Token::Text(quoted.to_string()));
            i = j + 1;
        } else if c.is_ascii_digit() || (c == b'-' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            let j = word_end(i + 1);
            let word = &text[i..j];
            match word.parse::<f64>() {
                Ok(v) if !word.starts_with("0x") => out.push(Token::Number(v)),
                _ => out.push(Token::Text(word.to_string())),
            }
            i = j;
        } else if c.is_ascii_alphabetic() || c == b'_' || c == b'^' || c == b'@' || c == b'#' || c == b'!' {
            let mut j = word_end(i + 1);
            // `4x8xf32` and `2x2xi64` stay one word.
            while j < bytes.len() && bytes[j] == b'x' {
                j = word_end(j + 1);
            }
            out.push(Token::Text(text[i..j].to_string()));
            i = j;
        } else {
            // Shapes such as `4x8xf32` start with a digit: handled above as a
            // number followed by a word; punctuation is one token each.
            out.push(Token::Text((c as char).to_string()));
            i += 1;
        }
    }
    out
}

/// Two numbers agree when equal as written or in `f32` precision (MLIR
/// prints a float with six digits only when that reads back exactly, else
/// with enough digits for its type; both sides are exact at the type).
fn same(a: &Token, b: &Token) -> bool {
    match (a, b) {
        (Token::Number(x), Token::Number(y)) => x == y || (*x as f32) == (*y as f32),
        _ => a == b,
    }
}

fn assert_same_text(name: &str, ours: &str, mlir: &str) {
    let (a, b) = (tokens(ours), tokens(mlir));
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        if !same(x, y) {
            let context = |t: &[Token]| format!("{:?}", &t[i.saturating_sub(8)..(i + 8).min(t.len())]);
            panic!(
                "{name}: token {i} differs: ours {x:?}, MLIR's {y:?}\nours:  {}\nMLIR:  {}\n--- ours ---\n{ours}",
                context(&a),
                context(&b)
            );
        }
    }
    assert_eq!(a.len(), b.len(), "{name}: token counts differ\n--- ours ---\n{ours}\n--- MLIR ---\n{mlir}");
}

#[test]
fn every_artifact_prints_as_mlir_prints_it() {
    for name in artifact_names() {
        let module = decode(&name);
        let mlir = std::fs::read_to_string(corpus_dir().join(format!("{name}.mlir"))).expect("MLIR's text");
        assert_same_text(&name, &module.to_string(), &mlir);
    }
}

/// The operations of a region, depth first.
fn walk<'m>(region: &'m tpu_rewrite::syntax::mlir::Region, out: &mut Vec<&'m tpu_rewrite::syntax::mlir::Operation>) {
    for block in &region.blocks {
        for op in &block.operations {
            out.push(op);
            for r in &op.regions {
                walk(r, out);
            }
        }
    }
}

#[test]
fn the_tree_has_stablehlo_names_terminators_and_structured_attributes() {
    for name in artifact_names() {
        let module = decode(&name);
        let main = module.function("main").unwrap_or_else(|| panic!("{name}: no @main"));
        assert_eq!(main.visibility, Visibility::Public, "{name}");
        for f in &module.functions {
            let entry = &f.body.blocks[0];
            let types: Vec<_> = entry.arguments.iter().map(|a| a.ty.clone()).collect();
            assert_eq!(types, f.inputs, "{name}: @{}'s block arguments are its inputs", f.name);
            let last = entry.operations.last().expect("a terminator");
            assert_eq!(last.name, "func.return", "{name}: @{} ends in func.return", f.name);
            let mut ops = Vec::new();
            walk(&f.body, &mut ops);
            let mut defined = std::collections::HashSet::new();
            for v in entry.arguments.iter() {
                assert!(defined.insert(v.id), "{name}: {} defined twice", v.id);
            }
            for op in &ops {
                assert!(op.name.starts_with("stablehlo.") || op.name.starts_with("func."), "{name}: {}", op.name);
                for r in &op.regions {
                    let inner = r.blocks[0].operations.last().expect("a region terminator");
                    assert_eq!(inner.name, "stablehlo.return", "{name}: {} regions end in stablehlo.return", op.name);
                    for v in &r.blocks[0].arguments {
                        assert!(defined.insert(v.id), "{name}: {} defined twice", v.id);
                    }
                }
                for v in &op.results {
                    assert!(defined.insert(v.id), "{name}: {} defined twice in @{}", v.id, f.name);
                }
            }
        }
    }
    let conv = decode("conv");
    let mut ops = Vec::new();
    walk(&conv.function("main").expect("@main").body, &mut ops);
    let op = ops.iter().find(|o| o.name == "stablehlo.convolution").expect("a convolution");
    match op.attribute("dimension_numbers") {
        Some(Attribute::Struct { kind, fields }) => {
            assert_eq!(kind, "conv");
            let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
            assert!(names.contains(&"input_spatial_dimensions") && names.contains(&"kernel_output_feature_dimension"));
        }
        other => panic!("conv dimension numbers: {other:?}"),
    }
    assert!(op.attribute("input_batch_dimension").is_none(), "VHLO's flat fields are gathered into dimension_numbers");
}

fn code(e: &MlirError) -> String {
    miette::Diagnostic::code(e).map(|c| c.to_string()).unwrap_or_default()
}

#[test]
fn bad_input_gets_a_diagnostic_with_its_offset() {
    let bytes = artifact("cond");
    let e = read_portable_artifact(b"module {}").expect_err("text is not bytecode");
    assert_eq!(code(&e), "tpu_rewrite::syntax::mlir::not_bytecode");

    let e = read_portable_artifact(&bytes[..bytes.len() / 2]).expect_err("half an artifact");
    assert_eq!(code(&e), "tpu_rewrite::syntax::mlir::truncated", "{e:?}");
    assert!(e.offset() <= bytes.len() / 2, "{e:?}");

    // The version is the varint after the magic: 7 is newer than MLIR's.
    let mut newer = bytes.clone();
    newer[4] = (7 << 1) | 1;
    let e = read_portable_artifact(&newer).expect_err("a future version");
    assert_eq!(code(&e), "tpu_rewrite::syntax::mlir::version");
    assert_eq!(e.offset(), 4);

    // Renaming the dialect `vhlo` makes every operation unknown: refused by name.
    let at = bytes.windows(5).position(|w| w == b"vhlo\0").expect("the dialect name");
    let mut renamed = bytes.clone();
    renamed[at] = b'x';
    let e = read_portable_artifact(&renamed).expect_err("an unknown dialect");
    assert_eq!(code(&e), "tpu_rewrite::syntax::mlir::unsupported", "{e:?}");
    assert!(e.to_string().contains("xhlo."), "the diagnostic names the operation: {e}");
}

#[test]
fn every_truncation_is_an_error() {
    for name in artifact_names() {
        let bytes = artifact(&name);
        let step = if bytes.len() > 4000 { 61 } else { 1 };
        for len in (0..bytes.len()).step_by(step) {
            assert!(read_portable_artifact(&bytes[..len]).is_err(), "{name} cut at {len} decoded");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Mutated artifacts decode or fail with a diagnostic; they never panic,
    /// and what decodes also prints.
    #[test]
    fn mutated_artifacts_never_panic(
        which in 0usize..64,
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let names = artifact_names();
        let mut bytes = artifact(&names[which % names.len()]);
        for (at, byte) in edits {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        if let Ok(module) = read_portable_artifact(&bytes) {
            let _ = module.to_string();
        }
    }
}
