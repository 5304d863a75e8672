//! Property tests over the fuzzing entry points (`tpu_rewrite::harness`),
//! on stable, so CI catches what `cargo fuzz` (nightly) would: inputs made
//! by mutating the seed corpus (the examples, the case files and the TF
//! fixtures) go through import → rewrite → lower, and small ones run one
//! step. Bad input must give diagnostics; a panic (also one the executor
//! catches) fails the test. The fuzz targets live in `fuzz/`.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use tpu_rewrite::harness::{check, Execute, Format, Reached};

fn files_under(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_under(&path, ext, out);
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
}

/// The seed corpus of a format, read once.
fn corpus(ext: &str) -> Vec<Vec<u8>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut paths = Vec::new();
    for dir in ["examples", "tests/cases", "tests/fixtures", "tests/data"] {
        files_under(&root.join(dir), ext, &mut paths);
    }
    paths.sort();
    let files: Vec<Vec<u8>> = paths.iter().map(|p| std::fs::read(p).unwrap()).collect();
    assert!(!files.is_empty(), "no .{ext} seed files found under {}", root.display());
    files
}

/// One edit of a byte string.
#[derive(Clone, Debug)]
enum Edit {
    Flip {
        at: usize,
        bit: u8,
    },
    Insert {
        at: usize,
        bytes: Vec<u8>,
    },
    Delete {
        at: usize,
        len: usize,
    },
    /// Copies `len` bytes from `from` to `at` (duplicates structure).
    Splice {
        from: usize,
        at: usize,
        len: usize,
    },
}

fn edit() -> impl Strategy<Value = Edit> {
    // Tokens that matter to the grammars, besides random bytes.
    let tokens: Vec<&'static [u8]> = vec![
        b"%",
        b"{",
        b"}",
        b"[",
        b"]",
        b"(",
        b")",
        b",",
        b"=",
        b"\"",
        b"-1",
        b"9223372036854775807",
        b"0",
        b"replicate",
        b"num_replicas",
        b"shape",
        b"tensor",
        b"node {",
        b"size: -",
        b"\x00",
    ];
    prop_oneof![
        (any::<usize>(), 0u8..8).prop_map(|(at, bit)| Edit::Flip { at, bit }),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 1..8)).prop_map(|(at, bytes)| Edit::Insert { at, bytes }),
        (any::<usize>(), prop::sample::select(tokens)).prop_map(|(at, t)| Edit::Insert { at, bytes: t.to_vec() }),
        (any::<usize>(), 1usize..64).prop_map(|(at, len)| Edit::Delete { at, len }),
        (any::<usize>(), any::<usize>(), 1usize..256).prop_map(|(from, at, len)| Edit::Splice { from, at, len }),
    ]
}

fn apply(mut bytes: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for e in edits {
        let n = bytes.len().max(1);
        match e {
            Edit::Flip { at, bit } => {
                if let Some(b) = bytes.get_mut(at % n) {
                    *b ^= 1 << bit;
                }
            }
            Edit::Insert { at, bytes: new } => {
                let at = at % (bytes.len() + 1);
                bytes.splice(at..at, new.iter().copied());
            }
            Edit::Delete { at, len } => {
                let at = at % n;
                let end = (at + len).min(bytes.len());
                if at < end {
                    bytes.drain(at..end);
                }
            }
            Edit::Splice { from, at, len } => {
                let from = from % n;
                let end = (from + len).min(bytes.len());
                let piece: Vec<u8> = bytes.get(from..end).unwrap_or_default().to_vec();
                let at = at % (bytes.len() + 1);
                bytes.splice(at..at, piece);
            }
        }
    }
    bytes
}

fn mutated(ext: &'static str) -> impl Strategy<Value = Vec<u8>> {
    let files = corpus(ext);
    (0..files.len(), prop::collection::vec(edit(), 0..6)).prop_map(move |(i, edits)| apply(files[i].clone(), &edits))
}

fn config() -> ProptestConfig {
    ProptestConfig { cases: 96, failure_persistence: None, ..ProptestConfig::default() }
}

/// Whether the test `name` ran in a child process (and passed there). The
/// harness lowers the process's tensor limit for the steps it runs (a
/// fuzz target has a process of its own); this test binary is shared, so
/// the tests that run steps do it in a child, and the other tests keep the
/// default limit.
fn ran_in_child(name: &str) -> bool {
    const CHILD: &str = "TPU_REWRITE_HARNESS_CHILD";
    if std::env::var_os(CHILD).is_some() {
        return false;
    }
    let out = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args(["--exact", name, "--test-threads", "1"])
        .env(CHILD, "1")
        .output()
        .expect("runs the test binary");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.contains("1 passed"), "{name} in a child process:\n{text}");
    true
}

#[test]
fn mutated_opg_never_panics() {
    if ran_in_child("fuzz_props::mutated_opg_never_panics") {
        return;
    }
    let mut runner = proptest::test_runner::TestRunner::new(config());
    let result = runner.run(&mutated("opg"), |bytes| {
        check(&bytes, Format::Opg, Execute::IfSmall);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn mutated_pbtxt_never_panics(bytes in mutated("pbtxt")) {
        check(&bytes, Format::Pbtxt, Execute::No);
    }

    #[test]
    fn mutated_pb_never_panics(bytes in mutated("pb")) {
        check(&bytes, Format::Pb, Execute::No);
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        for format in [Format::Opg, Format::Pbtxt, Format::Pb] {
            check(&bytes, format, Execute::No);
        }
    }
}

#[test]
fn the_seed_corpus_gets_through_the_pipeline() {
    if ran_in_child("fuzz_props::the_seed_corpus_gets_through_the_pipeline") {
        return;
    }
    // Unmutated, the examples reach the end of lowering: the harness drives
    // the real pipeline, not a stage that refuses everything.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for name in ["two_clusters.opg", "mlp_train.opg", "tf_tagged.opg"] {
        let bytes = std::fs::read(root.join("examples").join(name)).unwrap();
        let reached = check(&bytes, Format::Opg, Execute::No);
        assert_eq!(reached, Reached::Lowered, "{name}");
    }
    let bytes = std::fs::read(root.join("tests/fixtures/tf-graphs/mlp_r4.pb")).unwrap();
    assert_eq!(check(&bytes, Format::Pb, Execute::No), Reached::Lowered);
    // A small graph without feeds runs one step.
    let text = b"graph @main {\n  %c = Const() {dtype = f32, value = tensor(f32, [2]) [1.0, -2.0]}\n  \
                 replicate (num_replicas = 2) (%a = [%c, %c]) {\n    %y = Relu(%a) {T = f32}\n    return %y\n  }\n}\n";
    assert_eq!(check(text, Format::Opg, Execute::IfSmall), Reached::Ran);
}
