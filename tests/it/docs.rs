//! The commands printed in README.md and docs/*.md run as printed.
//!
//! The convention: a fenced block tagged `sh` holds commands a user can
//! paste into a shell at the root of a clone, after installing the binary;
//! this test runs each such block with bash (`-euo pipefail`), the binary
//! under test first on `PATH` as `tpu-rewrite`, in a scratch directory that
//! links the clone's files (so outputs land in the scratch directory), and
//! requires exit 0. A block tagged `shell` is for another machine (a TPU
//! VM, a GPU host, several hosts), for `cargo` itself (building, testing,
//! benchmarks, fuzzing; `.ci/run` runs the build and the tests), or for a
//! TensorFlow venv: it is shown, not run. Any other shell-like tag
//! (`bash`, `console`, `zsh`) is refused, so that no block escapes both.
//! The README's Rust blocks are doctests (`src/lib.rs`, `ReadmeDoctests`).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::pjrt;

/// One fenced block: the file, the line of its opening fence, its tag and text.
struct Block {
    file: String,
    line: usize,
    tag: String,
    text: String,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every docs/*.md, in name order.
fn documents() -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/ is readable")
        .map(|e| e.expect("a docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    docs.insert(0, root().join("README.md"));
    docs
}

/// The fenced blocks of a Markdown file (backtick fences at the start of a line).
fn blocks(path: &Path) -> Vec<Block> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let file = path.strip_prefix(root()).unwrap_or(path).display().to_string();
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in text.lines().enumerate() {
        let Some(info) = line.strip_prefix("```") else {
            if let Some(b) = &mut open {
                b.text.push_str(line);
                b.text.push('\n');
            }
            continue;
        };
        match open.take() {
            Some(b) => out.push(b),
            None => {
                let tag = info.split_whitespace().next().unwrap_or_default().to_string();
                open = Some(Block { file: file.clone(), line: i + 1, tag, text: String::new() });
            }
        }
    }
    assert!(open.is_none(), "{file}: a code fence is not closed");
    out
}

/// A scratch directory that shows the clone's top-level entries as links.
fn scratch() -> tempfile::TempDir {
    let dir = tempfile::Builder::new().prefix("tpu-rewrite-docs-").tempdir().expect("a temporary directory");
    for entry in std::fs::read_dir(root()).expect("the clone is readable") {
        let path = entry.expect("an entry").path();
        let name = path.file_name().expect("a name").to_owned();
        if name == "target" || name == ".git" {
            continue;
        }
        std::os::unix::fs::symlink(&path, dir.path().join(&name)).expect("links the clone's files");
    }
    dir
}

#[test]
fn every_sh_block_of_the_docs_runs_as_printed() {
    // Blocks with `--backend pjrt` need the pinned plugin; fetch it once.
    pjrt::plugin_path();
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_tpu-rewrite"));
    let bin_dir = binary.parent().expect("the binary's directory");
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let mut ran = 0;
    let mut failures = Vec::new();
    for doc in documents() {
        for block in blocks(&doc) {
            assert!(
                !matches!(block.tag.as_str(), "bash" | "console" | "zsh" | "shell-session"),
                "{}:{}: a `{}` block; tag commands `sh` (run by this test) or `shell` (shown only)",
                block.file,
                block.line,
                block.tag
            );
            if block.tag != "sh" {
                continue;
            }
            let dir = scratch();
            let out = Command::new("bash")
                .args(["-euo", "pipefail", "-c", &block.text])
                .current_dir(dir.path())
                .env("PATH", &path)
                .env("NO_COLOR", "1")
                .output()
                .expect("bash runs");
            ran += 1;
            if !out.status.success() {
                failures.push(format!(
                    "{}:{} exited {:?}:\n{}\n--- stderr ---\n{}",
                    block.file,
                    block.line,
                    out.status.code(),
                    block.text,
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
    }
    assert!(ran >= 5, "only {ran} `sh` blocks found: the convention is not followed");
    assert!(failures.is_empty(), "{} block(s) failed:\n\n{}", failures.len(), failures.join("\n\n"));
}

#[test]
fn docs_cli_reference_md_is_current() {
    let out = Command::new(env!("CARGO_BIN_EXE_tpu-rewrite")).arg("cli-reference").output().expect("runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let on_disk = std::fs::read(root().join("docs/cli-reference.md")).unwrap_or_default();
    assert!(
        on_disk == out.stdout,
        "docs/cli-reference.md is stale: run `cargo run -- cli-reference > docs/cli-reference.md`"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    // What the old hand-written reference lacked is there now.
    for needle in [
        "jax-distributed",
        "--processes",
        "--host-transfer",
        "--log-every",
        "--global-batch-size",
        "--seed",
        "--strict",
    ] {
        assert!(text.contains(needle), "the reference lacks {needle}");
    }
}
