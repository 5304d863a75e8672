//! Running the `tpu-rewrite` binary from a test: with arguments, with
//! standard input, and reading what it wrote to stderr.

#![allow(dead_code)] // Each test file uses the helpers it needs.

use std::io::Write;
use std::process::{Command, Output, Stdio};

/// The binary under test.
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tpu-rewrite"))
}

/// Runs the binary with `args`, colours off.
pub fn run(args: &[&str]) -> Output {
    bin().args(args).env("NO_COLOR", "1").output().expect("the binary runs")
}

/// Runs the binary with `args` and `input` on standard input.
pub fn run_stdin(args: &[&str], input: &[u8]) -> Output {
    let mut child = bin()
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    child.stdin.take().expect("piped").write_all(input).expect("writes");
    child.wait_with_output().expect("finishes")
}

/// What the binary wrote to stderr.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The path of a bundled example.
pub fn example(name: &str) -> String {
    format!("{}/examples/{name}", env!("CARGO_MANIFEST_DIR"))
}
