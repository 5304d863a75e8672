//! The guard of TensorFlow's XLA op set (`tpu-rewrite ops --coverage`).
//!
//! Every op of the list must be covered (kernel, lowering, and a gradient
//! where TensorFlow registers one), carry a reason that it cannot matter on
//! a TPU, or be listed in `tests/data/ops_not_yet_covered.txt` with exactly
//! what it lacks. That file may only shrink: an op that gains a kernel,
//! gradient or lowering must lose it from its line (the line goes when the
//! op is covered), and an op that loses one, or a new op of the list that
//! is not covered, fails the test.

use std::collections::BTreeMap;
use std::path::Path;

use crate::support::cli as support_cli;
use support_cli::{run, stderr};

const NOT_YET: &str = "tests/data/ops_not_yet_covered.txt";

/// One op line of `ops --coverage`: (op, status).
fn coverage_lines(text: &str) -> Vec<(String, String)> {
    text.lines()
        .skip(1)
        .filter(|l| !l.starts_with("covered "))
        .map(|l| {
            let op = l.split_whitespace().next().unwrap_or_default().to_string();
            let status = l
                .find("covered")
                .filter(|&i| l[i..] == *"covered")
                .or_else(|| l.find("missing "))
                .or_else(|| l.find("not needed: "))
                .map(|i| l[i..].to_string())
                .unwrap_or_default();
            (op, status)
        })
        .collect()
}

/// The parts an op lacks, from its status (`missing kernel, lowering (not lowered: ...)`).
fn missing_parts(status: &str) -> Option<Vec<String>> {
    let rest = status.strip_prefix("missing ")?;
    let rest = rest.split(" (").next().unwrap_or(rest);
    Some(rest.split(", ").map(str::to_string).collect())
}

/// The committed list: op → the parts it lacks.
fn not_yet_list() -> BTreeMap<String, Vec<String>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(NOT_YET);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut list = BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')) {
        let (op, parts) = line.split_once(": ").unwrap_or_else(|| panic!("{NOT_YET}: malformed line {line:?}"));
        let parts: Vec<String> = parts.split(", ").map(str::to_string).collect();
        assert!(list.insert(op.to_string(), parts).is_none(), "{NOT_YET}: {op} is listed twice");
    }
    list
}

#[test]
fn every_op_of_the_list_is_covered_explained_or_not_yet_covered() {
    let o = run(&["ops", "--coverage"]);
    assert!(o.status.success(), "exit {:?}: {}", o.status.code(), stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let ops = coverage_lines(&text);
    let list = not_yet_list();
    let mut problems = Vec::new();
    let mut seen = 0;
    for (op, status) in &ops {
        assert!(!status.is_empty(), "no status on the line of {op}:\n{text}");
        match (missing_parts(status), list.get(op)) {
            (None, Some(_)) => problems.push(format!("{op} is no longer missing anything: remove it from {NOT_YET}")),
            (None, None) => {}
            (Some(parts), None) => problems.push(format!(
                "{op} is not covered ({}) and not in {NOT_YET}: cover it (new ops must come with a kernel, gradient \
                 and lowering) or give a reason it cannot matter on a TPU",
                parts.join(", ")
            )),
            (Some(parts), Some(listed)) => {
                seen += 1;
                if let Some(lost) = parts.iter().find(|p| !listed.contains(p)) {
                    problems.push(format!("{op} lost its {lost} (it had one when {NOT_YET} was written)"));
                } else if parts != *listed {
                    problems.push(format!(
                        "{op} gained a part: its line in {NOT_YET} must shrink to `{op}: {}`",
                        parts.join(", ")
                    ));
                }
            }
        }
    }
    for op in list.keys() {
        if !ops.iter().any(|(o, _)| o == op) {
            problems.push(format!("{op} is in {NOT_YET} but not in TensorFlow's XLA op set: remove it"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert_eq!(seen, list.len());

    // The counts line agrees with the lines above it.
    let covered = ops.iter().filter(|(_, s)| s == "covered").count();
    let reasons = ops.iter().filter(|(_, s)| s.starts_with("not needed: ")).count();
    let summary = text.lines().last().unwrap_or_default();
    let expected = format!("covered {covered}/{} ops of TensorFlow 2.21.0's XLA op set;", ops.len());
    assert!(summary.starts_with(&expected), "{summary:?} does not start with {expected:?}");
    assert!(summary.contains(&format!("; {reasons} need none")), "{summary}");
    assert!(summary.ends_with(&format!("; {} not yet covered", list.len())), "{summary}");
    assert_eq!(covered + reasons + list.len(), ops.len());
    println!("{summary}");
}

#[test]
fn the_list_is_tensorflows_and_reasons_are_few() {
    let o = run(&["ops", "--coverage"]);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let ops = coverage_lines(&text);
    let data = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/ir/tf_xla_ops.txt")).unwrap();
    let listed: Vec<&str> = data.lines().filter(|l| !l.starts_with('#')).filter_map(|l| l.split(' ').next()).collect();
    let printed: Vec<&str> = ops.iter().map(|(op, _)| op.as_str()).collect();
    assert_eq!(printed, listed, "`ops --coverage` prints every op of the generated list, in its order");
    // Ops every TPU training step uses are covered.
    for op in ["MatMul", "AddV2", "Relu", "Softmax", "Conv2D", "Sum"] {
        assert!(ops.iter().any(|(o, s)| o == op && s == "covered"), "{op} is not covered:\n{text}");
    }
    // A reason is the exception: only ops that cannot matter on a TPU.
    let reasons: Vec<&str> =
        ops.iter().filter(|(_, s)| s.starts_with("not needed: ")).map(|(o, _)| o.as_str()).collect();
    assert!(reasons.iter().all(|op| op.starts_with('_')), "unexpected reasons: {reasons:?}");
}
