//! Resource limits, checked before anything is allocated: tensor sizes
//! (`--max-tensor-bytes`), negative dims, replica counts, numbers parsed
//! out of names, `.npy` headers, long tokens in diagnostics, and operand
//! counts (adding an input is O(1)), and memory that grows linearly with
//! the graph when lowering.
//!
//! This file is a test binary of its own, not a module of `tests/it`:
//! Linux gives a child its parent's peak resident set at `exec` (the
//! `ru_maxrss` that `wait4` reports starts from it), so the peaks measured
//! here are only the child's while the parent stays small.

#[path = "it/support/pjrt.rs"]
mod support;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_tpu-rewrite");

fn run_in(dir: &tempfile::TempDir, name: &str, text: &str, args: &[&str]) -> Output {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    let mut all: Vec<&str> = vec![args[0], path.to_str().unwrap()];
    all.extend(&args[1..]);
    Command::new(BIN).args(&all).env("NO_COLOR", "1").output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A one-replica graph whose body is `body`, returning `%out`.
fn replicated(body: &str) -> String {
    format!(
        "graph @main {{\n  %c = Const() {{dtype = f32, value = tensor(f32, []) [1.0]}}\n  \
         replicate (num_replicas = 1) (%a = [%c]) {{\n{body}\n    return %out\n  }}\n}}\n"
    )
}

/// Exit 1 with the too_large code, a label at the op, and no panic.
fn assert_too_large(o: &Output, op_text: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("tpu_rewrite::exec::too_large") || err.contains("over the limit"), "{err}");
    assert!(err.contains(op_text), "the op is not shown:\n{err}");
    assert!(!err.contains("panicked") && !err.contains("memory allocation"), "{err}");
}

#[test]
fn a_huge_const_fill_or_tile_fails_at_its_op() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("const", "    %out = Const() {dtype = f32, value = tensor(f32, [1000000000000]) [1.0]}"),
        (
            "fill",
            "    %d = Const() {dtype = i32, value = tensor(i32, [2]) [2147483647, 2147483647]}\n    \
             %out = Fill(%d, %a) {T = f32}",
        ),
        (
            "tile",
            "    %v = Const() {dtype = f32, value = tensor(f32, [2]) [1.0, 2.0]}\n    \
             %m = Const() {dtype = i32, value = tensor(i32, [1]) [2147483647]}\n    \
             %out = Tile(%v, %m) {T = f32}",
        ),
        (
            "stitch",
            "    %i = Const() {dtype = i64, value = tensor(i64, [1]) [1099511627776]}\n    \
             %v = Const() {dtype = f32, value = tensor(f32, [1]) [1.0]}\n    \
             %out = DynamicStitch(%i, %v) {N = 1, T = f32}",
        ),
    ];
    for (name, body) in cases {
        let start = Instant::now();
        let o = run_in(&dir, &format!("{name}.opg"), &replicated(body), &["run"]);
        assert_too_large(&o, "%out");
        assert!(start.elapsed() < Duration::from_secs(30), "{name}");
    }
}

#[test]
fn max_tensor_bytes_sets_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let body = "    %out = Const() {dtype = f32, value = tensor(f32, [1000]) [1.0]}";
    let o = run_in(&dir, "c.opg", &replicated(body), &["run", "--max-tensor-bytes", "3999"]);
    assert_too_large(&o, "%out");
    let o = run_in(&dir, "c.opg", &replicated(body), &["run", "--max-tensor-bytes", "4000"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn negative_dims_are_rejected_at_import() {
    let dir = tempfile::tempdir().unwrap();
    let opg = "graph @main {\n  %p = Placeholder() {dtype = f32, shape = shape[-5, 3]}\n}\n";
    let o = run_in(&dir, "p.opg", opg, &["check"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("found -5"), "{}", stderr(&o));
    let opg = "graph @main {\n  %c = Const() {dtype = f32, value = tensor(f32, [-2]) [1.0]}\n}\n";
    assert_eq!(run_in(&dir, "c.opg", opg, &["check"]).status.code(), Some(1));
    let pbtxt =
        "node { name: \"p\" op: \"Placeholder\" attr { key: \"shape\" value { shape { dim { size: -3 } } } } }\n\
                 node { name: \"c\" op: \"Const\" attr { key: \"value\" value { tensor { dtype: DT_FLOAT \
                 tensor_shape { dim { size: -1 } } } } } }\n";
    let o = run_in(&dir, "g.pbtxt", pbtxt, &["emit"]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("tpu_rewrite::import::negative_dim") && err.contains("node `p`") && err.contains("node `c`"));
    // -1 is an unknown dim in a shape attribute, and stays accepted.
    let opg = "graph @main {\n  %p = Placeholder() {dtype = f32, shape = shape[?, 3]}\n}\n";
    assert!(run_in(&dir, "q.opg", opg, &["check"]).status.success());
}

#[test]
fn a_huge_replica_count_fails_fast() {
    let dir = tempfile::tempdir().unwrap();
    let opg = "graph @main {\n  replicate (num_replicas = 9223372036854775807) () {\n    %a = NoOp()\n  }\n}\n";
    for command in ["check", "rewrite"] {
        let start = Instant::now();
        let o = run_in(&dir, "r.opg", opg, &[command]);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert!(stderr(&o).contains("num_replicas"), "{}", stderr(&o));
        assert!(start.elapsed() < Duration::from_secs(10));
    }
    let pbtxt = "node { name: \"m\" op: \"TPUReplicateMetadata\" attr { key: \"num_replicas\" value { i: 9223372036854775807 } } \
                 attr { key: \"_tpu_replicate\" value { s: \"c\" } } }\n\
                 node { name: \"x\" op: \"NoOp\" attr { key: \"_tpu_replicate\" value { s: \"c\" } } }\n";
    let start = Instant::now();
    let o = run_in(&dir, "r.pbtxt", pbtxt, &["rewrite"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("num_replicas"), "{}", stderr(&o));
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
fn a_number_in_a_node_name_sizes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let opg = "graph @main {\n  %c = Const() {dtype = f32, value = tensor(f32, []) [1.0]}\n  \
               replicate (num_replicas = 2) (%a = [%c, %c]) {\n    %twice = AddV2(%a, %a) {T = f32}\n    return %twice\n  }\n  \
               %output_99999999999_shard_0 = Identity(%c) {T = f32}\n  \
               %output_0_shard_18446744073709551615 = Identity(%c) {T = f32}\n}\n";
    let start = Instant::now();
    let o = run_in(&dir, "n.opg", opg, &["run"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(start.elapsed() < Duration::from_secs(30));
    assert!(String::from_utf8_lossy(&o.stdout).contains("= 2.0"));
}

/// A `.npy` v1 file with `header` (padded as NumPy pads it) and `data`.
fn npy(header: &str, data: &[u8]) -> Vec<u8> {
    let mut h = header.to_string();
    while !(10 + h.len() + 1).is_multiple_of(64) {
        h.push(' ');
    }
    h.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((h.len() as u16).to_le_bytes());
    bytes.extend(h.as_bytes());
    bytes.extend(data);
    bytes
}

#[test]
fn a_deeply_nested_or_lying_npy_header_is_refused_quickly() {
    let dir = tempfile::tempdir().unwrap();
    let graph = "graph @main {\n  %x = Placeholder() {dtype = f32, shape = shape[2]}\n  \
                 replicate (num_replicas = 1) (%a = [%x]) {\n    %out = Identity(%a) {T = f32}\n    return %out\n  }\n}\n";
    let g = dir.path().join("g.opg");
    std::fs::write(&g, graph).unwrap();
    let nested =
        format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {}(2,){}, }}", "[".repeat(22), "]".repeat(22));
    let lying = "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000,), }";
    for (name, header) in [("nested", nested.as_str()), ("lying", lying)] {
        let file = dir.path().join(format!("{name}.npy"));
        std::fs::write(&file, npy(header, &[0; 8])).unwrap();
        let start = Instant::now();
        let o = Command::new(BIN)
            .args(["run", g.to_str().unwrap(), "--feed", &format!("x:0={}", file.display())])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{name}: {}", stderr(&o));
        assert!(stderr(&o).contains("tpu_rewrite::cli::feed"), "{name}: {}", stderr(&o));
        assert!(start.elapsed() < Duration::from_secs(10), "{name}");
    }
}

#[test]
fn a_twenty_megabyte_token_gets_a_short_diagnostic() {
    let dir = tempfile::tempdir().unwrap();
    let token = "a".repeat(20 << 20);
    let opg = format!("graph @main {{\n  %a = NoOp() {{k = {token}}}\n}}\n");
    let o = run_in(&dir, "t.opg", &opg, &["check"]);
    assert_eq!(o.status.code(), Some(1));
    // The old renderer printed the token in full (21 MB of stderr).
    assert!(o.stderr.len() < 16 << 10, "{} bytes of diagnostics", o.stderr.len());
    assert!(stderr(&o).contains('…'));
}

#[test]
fn one_node_with_200k_operands_checks_fast() {
    let dir = tempfile::tempdir().unwrap();
    let operands = vec!["%c"; 200_000].join(", ");
    let opg = format!(
        "graph @main {{\n  %c = Const() {{dtype = f32, value = tensor(f32, []) [1.0]}}\n  %s = AddN({operands}) {{T = f32, N = 200000}}\n}}\n"
    );
    let start = Instant::now();
    let o = run_in(&dir, "wide.opg", &opg, &["check"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Quadratic counting took 36 s; linear takes well under a second.
    assert!(start.elapsed() < Duration::from_secs(15), "{:?}", start.elapsed());
}

/// Runs the binary and returns its exit status and its own peak resident
/// memory in bytes (from `wait4`, so tests running beside it do not count).
#[allow(clippy::zombie_processes)] // `wait4` below reaps the child.
fn peak_rss(args: &[&str]) -> (std::process::ExitStatus, u64) {
    use std::os::unix::process::ExitStatusExt;
    let child = Command::new(BIN)
        .args(args)
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut status = 0;
    // SAFETY: zeroed rusage is a valid value, and the pid is this test's own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32, "wait4 failed");
    (std::process::ExitStatus::from_raw(status), usage.ru_maxrss as u64 * 1024)
}

#[test]
fn lowering_the_generated_mlp_grows_linearly_in_memory() {
    // Every 64 layers the MLP has an outside-compilation block, so its
    // number of host programs grows with its size. A per-program table of
    // every node made lowering quadratic: 22.9 GB at 1M ops, where 1.8 GB
    // is linear. Here 8x the ops take under 5x the memory (the binary's own
    // footprint is shared); that table would make it about 12x.
    let dir = tempfile::tempdir().unwrap();
    let mut peaks = Vec::new();
    for ops in [25_000, 200_000] {
        let input = dir.path().join(format!("mlp{ops}.opg"));
        let o =
            Command::new(BIN).args(["gen", "--ops", &ops.to_string(), "-o", input.to_str().unwrap()]).output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let (status, peak) = peak_rss(&["lower", input.to_str().unwrap(), "--topology", "1x8", "-o", "/dev/null"]);
        assert!(status.success(), "lower of {ops} ops failed: {status:?}");
        peaks.push(peak);
    }
    let ratio = peaks[1] as f64 / peaks[0] as f64;
    assert!(ratio < 7.0, "8x the ops took {ratio:.1}x the memory ({} vs {} bytes)", peaks[1], peaks[0]);
}

/// Runs `run FILE args` on `text` in a child and returns its exit status,
/// stderr, peak resident memory (from `wait4`) and wall time.
#[allow(clippy::zombie_processes)] // `wait4` below reaps the child.
fn run_measured(dir: &tempfile::TempDir, text: &str, args: &[&str]) -> (Option<i32>, String, u64, Duration) {
    use std::io::Read;
    let path = dir.path().join("budget.opg");
    std::fs::write(&path, text).unwrap();
    let start = Instant::now();
    let mut child = Command::new(BIN)
        .arg("run")
        .arg(&path)
        .args(args)
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let mut status = 0;
    // SAFETY: zeroed rusage is a valid value, and the pid is this test's own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32, "wait4 failed");
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    (code, err, usage.ru_maxrss as u64 * 1024, start.elapsed())
}

/// Exit 1 with the memory_budget code naming the op and its device, and no panic.
fn assert_over_budget(code: Option<i32>, err: &str, op: &str) {
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("tpu_rewrite::exec::memory_budget"), "{err}");
    assert!(err.contains(op), "the op is not named:\n{err}");
    assert!(err.contains("TPU:0") || err.contains("device"), "the device is not named:\n{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn a_tile_past_the_memory_budget_stops_before_it_allocates() {
    // One element tiled 2^31 - 1 times is 8.6 GB: under the per-tensor
    // limit on a large machine, over a 512 MiB budget for the whole run.
    let dir = tempfile::tempdir().unwrap();
    let body = "    %v = Const() {dtype = f32, value = tensor(f32, [1]) [1.0]}\n    \
                %m = Const() {dtype = i32, value = tensor(i32, [1]) [2147483647]}\n    \
                %out = Tile(%v, %m) {T = f32}";
    let budget = 512u64 << 20;
    let (code, err, peak, elapsed) = run_measured(&dir, &replicated(body), &["--max-memory", "512M"]);
    assert_over_budget(code, &err, "Tile");
    assert!(elapsed < Duration::from_secs(2), "took {elapsed:?}");
    assert!(peak < budget, "peak resident memory {peak} passed the budget {budget}");
}

#[test]
fn values_kept_alive_past_the_budget_stop_the_run_at_the_kernel_that_crosses_it() {
    // Each `Add` makes a 64 MiB tensor no size check sees beforehand; all
    // stay live as outputs, so the fourth crosses a 200 MiB budget. The
    // overshoot is at most the one kernel's output.
    let dir = tempfile::tempdir().unwrap();
    let body = "    %v = Const() {dtype = f32, value = tensor(f32, [1]) [1.0]}\n    \
                %m = Const() {dtype = i32, value = tensor(i32, [1]) [16777216]}\n    \
                %t = Tile(%v, %m) {T = f32}\n    \
                %s1 = Add(%t, %t) {T = f32}\n    \
                %s2 = Add(%s1, %t) {T = f32}\n    \
                %s3 = Add(%s2, %t) {T = f32}\n    \
                %s4 = Add(%s3, %t) {T = f32}\n    \
                %out = AddN(%s1, %s2, %s3, %s4) {N = 4, T = f32}";
    let text = replicated(body).replace("return %out", "return %out, %s1, %s2, %s3, %s4");
    let budget = 200u64 << 20;
    let (code, err, peak, _) = run_measured(&dir, &text, &["--max-memory", "200M"]);
    assert_over_budget(code, &err, "Add");
    // The constant beyond that is the binary's own resident set (code,
    // allocator slack), measured on a run that allocates nothing large.
    let (code, err, base, _) = run_measured(&dir, &replicated("    %out = Identity(%a) {T = f32}"), &[]);
    assert_eq!(code, Some(0), "{err}");
    let one_output = 64u64 << 20;
    let slack = 16u64 << 20;
    assert!(
        peak < budget + one_output + base + slack,
        "peak resident memory {peak} passed the budget {budget} by more than one output, the base {base} and {slack}"
    );
    // With room for them, the same run succeeds, and printing its five
    // 64 MiB outputs takes a summary of each, not a text of 16M numbers.
    let (code, err, peak, _) = run_measured(&dir, &text, &["--max-memory", "2G"]);
    assert_eq!(code, Some(0), "{err}");
    let held = 6 * one_output;
    assert!(peak < held + base + slack * 4, "printing took {peak} bytes beside the {held} the tensors hold");
}

#[test]
fn a_pjrt_program_past_the_budget_is_refused_from_its_compiled_memory_stats() {
    // Eight replicas each hold a 2 MiB argument and four 2 MiB outputs on
    // XLA: 80 MiB in all by XLA's compiled memory stats, over a 64 MiB
    // budget, while the host holds one copy of the input. Nothing runs.
    let dir = tempfile::tempdir().unwrap();
    let text = "graph @main {
  %d = Const() {dtype = i32, value = tensor(i32, [2]) [512, 1024]}
  %one = Const() {dtype = f32, value = tensor(f32, []) [1.0]}
  %c = Fill(%d, %one) {T = f32}
  replicate (num_replicas = 8) (%a = [%c, %c, %c, %c, %c, %c, %c, %c]) {
    %two = Const() {dtype = f32, value = tensor(f32, []) [2.0]}
    %o1 = Mul(%a, %two) {T = f32}
    %o2 = AddV2(%a, %two) {T = f32}
    %o3 = Sub(%a, %two) {T = f32}
    %o4 = Neg(%a) {T = f32}
    return %o1, %o2, %o3, %o4
  }
}
";
    let plugin = support::plugin_path();
    let plugin = plugin.to_str().expect("a UTF-8 plugin path");
    let args = ["--backend", "pjrt", "--pjrt-plugin", plugin, "--max-memory", "64M"];
    let (code, err, _, elapsed) = run_measured(&dir, text, &args);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("tpu_rewrite::xla::memory_budget"), "{err}");
    assert!(err.contains("from XLA's compiled memory stats") && err.contains("on each of 8 devices"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(elapsed < Duration::from_secs(20), "took {elapsed:?}");
}
