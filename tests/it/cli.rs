//! End-to-end tests of the `tpu-rewrite` binary: exit codes, bad input,
//! atomic outputs, stdin, and the generator.

use std::process::{Output, Stdio};

use crate::support::cli as support_cli;
use support_cli::{bin, example, run, run_stdin, stderr};

#[test]
fn check_accepts_examples() {
    let o = run(&["check", &example("mlp_train.opg"), &example("two_clusters.opg")]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// Exit code 1 with a located diagnostic, and never a panic (101).
fn assert_located_failure(o: &Output, needle: &str) {
    assert_eq!(o.status.code(), Some(1), "{}", stderr(o));
    let err = stderr(o);
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains(needle), "expected {needle:?} in:\n{err}");
}

#[test]
fn ten_megabyte_line_gets_a_short_located_diagnostic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long.opg");
    let mut text = String::from("graph @main {\n  %x = Const() {dtype = f32, pad = \"");
    text.push_str(&"a".repeat(10 * 1024 * 1024));
    text.push_str("\", bad = $ }\n}\n");
    std::fs::write(&path, &text).unwrap();
    let o = run(&["check", path.to_str().unwrap()]);
    assert_located_failure(&o, "long.opg:2:");
    assert!(o.stderr.len() < 8 * 1024, "the report must not print the whole line ({} bytes)", o.stderr.len());
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let mut text = String::from("graph @main {\n  %x = NoOp() {v = ");
    text.push_str(&"[".repeat(100_000));
    text.push_str(&"]".repeat(100_000));
    text.push_str("}\n}\n");
    let o = run_stdin(&["check", "-"], text.as_bytes());
    assert_located_failure(&o, "<stdin>:2:");
}

#[test]
fn garbage_nul_and_invalid_utf8_fail_cleanly() {
    for (bytes, needle) in [
        (&b"\x00\x01\x02binary"[..], "nul_byte"),
        (&b"graph @g { %x = NoOp() {s = \"\xff\"} }"[..], "invalid_utf8"),
        (&b"}}}{{{"[..], "unexpected_token"),
        (&b""[..], "empty"),
    ] {
        let o = run_stdin(&["check", "-"], bytes);
        assert_located_failure(&o, needle);
    }
}

#[test]
fn fmt_write_never_damages_a_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.opg");
    let bad = b"graph @main {\n  %x = NoOp(\n";
    std::fs::write(&path, bad).unwrap();
    let o = run(&["fmt", path.to_str().unwrap(), "--write"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(std::fs::read(&path).unwrap(), bad);
}

#[test]
fn fmt_write_canonicalises_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.opg");
    std::fs::write(&path, "graph @main{%b=NoOp(^%a)  %a=NoOp()}").unwrap();
    let o = run(&["fmt", path.to_str().unwrap(), "--write"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "graph @main {\n  %b = NoOp(^%a)\n  %a = NoOp()\n}\n");
}

#[test]
fn failed_run_keeps_existing_output() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.opg");
    std::fs::write(&out, "precious").unwrap();
    let o = run_stdin(&["fmt", "-", "-o", out.to_str().unwrap()], b"graph @broken {");
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "precious");
    let o = run_stdin(&["fmt", "-", "-o", out.to_str().unwrap()], b"graph @ok { %a = NoOp() }");
    assert!(o.status.success());
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "graph @ok {\n  %a = NoOp()\n}\n");
}

#[test]
fn gen_output_checks_and_is_canonical() {
    let o = run(&["gen", "--ops", "2000", "--replicas", "4", "--seed", "7"]);
    assert!(o.status.success());
    let text = o.stdout;
    let again = run(&["gen", "--ops", "2000", "--replicas", "4", "--seed", "7"]).stdout;
    assert_eq!(text, again, "the same seed gives the same graph");
    let checked = run_stdin(&["fmt", "-"], &text);
    assert!(checked.status.success(), "{}", stderr(&checked));
    assert_eq!(String::from_utf8(checked.stdout).unwrap(), String::from_utf8(text.clone()).unwrap());
    let (module, errors) = tpu_rewrite::ir::parse_module(&text).unwrap();
    assert!(errors.is_empty());
    let ops = module.node_count();
    assert!((1800..=2200).contains(&ops), "asked for ~2000 ops, got {ops}");
    let printed = String::from_utf8_lossy(&text);
    for construct in ["replicate (num_replicas = 4)", "outside_compilation {", "gradients(", "CrossReplicaSum"] {
        assert!(printed.contains(construct), "gen output lacks {construct}");
    }
}

#[test]
fn emit_json_and_dot() {
    let o = run(&["emit", &example("two_clusters.opg"), "--format", "json"]);
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let nodes = v["graphs"][0]["nodes"].as_array().unwrap();
    let total = nodes.iter().find(|n| n["name"] == "total").unwrap();
    assert_eq!(total["op"], "CrossReplicaSum");
    assert_eq!(total["inputs"], serde_json::json!(["b", "group"]));
    assert_eq!(v["graphs"][0]["regions"][1]["attrs"]["num_replicas"]["i"], 4);
    let o = run(&["emit", &example("two_clusters.opg"), "--format", "dot"]);
    assert!(o.status.success());
    let dot = String::from_utf8(o.stdout).unwrap();
    assert!(dot.starts_with("digraph"));
    assert_eq!(dot.matches("subgraph cluster_").count(), 2, "one subgraph per region:\n{dot}");
}

#[test]
fn missing_file_is_an_error() {
    let o = run(&["check", "/nonexistent/file.opg"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("cannot read"));
}

#[test]
fn rewrite_output_round_trips_and_is_idempotent() {
    let o = run(&["rewrite", &example("outside_compilation.opg")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("_xla_outside_compilation = \"0\""), "{text}");
    assert!(text.contains("TPUReplicateMetadata"), "{text}");
    let again = run_stdin(&["rewrite", "-"], text.as_bytes());
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(String::from_utf8(again.stdout).unwrap(), text, "rewriting twice changes nothing");
}

#[test]
fn rewrite_time_passes_prints_a_table() {
    let o = run(&["rewrite", &example("two_clusters.opg"), "--time-passes", "-o", "/dev/null"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("replicate-clustering") && err.contains("time (ms)"), "{err}");
}

#[test]
fn lower_prints_one_graph_per_device_and_parses_back() {
    let o = run(&["lower", &example("two_clusters.opg"), "--topology", "1x4"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let (module, errors) = tpu_rewrite::ir::parse_module(&o.stdout).unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    let names: Vec<&str> = module.graphs.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names, ["host", "cluster", "cluster_1"]);
    let o = run(&["lower", &example("two_clusters.opg"), "--topology", "1x4", "--expand"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let (module, errors) = tpu_rewrite::ir::parse_module(&o.stdout).unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    let names: Vec<&str> = module.graphs.iter().map(|g| g.name.as_str()).collect();
    assert!(names.contains(&"host") && names.contains(&"cluster_1/replica_3"), "{names:?}");
}

#[test]
fn lower_on_too_small_topology_names_the_numbers() {
    let o = run(&["lower", &example("mlp_train.opg"), "--topology", "2x2"]);
    assert_located_failure(&o, "needs 8 cores, but the topology has 4 (2 hosts x 2 cores)");
}

#[test]
fn run_trains_the_mlp_and_prints_json() {
    let o = run(&["run", &example("mlp_train.opg"), "--steps", "3", "--json", "--fetch", "output_0_shard_0:0"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let output = &v["outputs"][0];
    assert_eq!(output["name"], "output_0_shard_0:0", "{v}");
    assert_eq!(output["dtype"], "f32", "{v}");
    assert_eq!(output["shape"], serde_json::json!([]), "{v}");
    assert!(output["value"].as_f64().is_some_and(|loss| loss > 0.0), "{v}");
}

#[test]
fn run_refuses_a_fetch_the_feed_fetch_rule_forbids() {
    let o = run(&["run", &example("mlp_train.opg"), "--fetch", "loss:0"]);
    assert_located_failure(&o, "feed/fetch rule");
}

#[test]
fn run_reports_every_missing_kernel_at_once() {
    let text = "graph @main {\n  %x0 = Placeholder() {dtype = f32}\n  replicate (num_replicas = 1) (%x = [%x0]) {\n    %a = Frobnicate(%x)\n    %b = Zorch(%a)\n    return %b\n  }\n}\n";
    let o = run_stdin(&["run", "-", "--topology", "1x1"], text.as_bytes());
    // One located diagnostic per op type, at its node.
    assert_located_failure(&o, "no kernel for op `Frobnicate` (`%a`)");
    assert_located_failure(&o, "no kernel for op `Zorch` (`%b`)");
    assert!(stderr(&o).contains("<stdin>:4:"), "{}", stderr(&o));
}

#[test]
fn split_batch_equals_feeding_the_slices_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let global = dir.path().join("global.json");
    // The placeholders take shape [2]: a global batch of 4 rows splits into two of them.
    std::fs::write(&global, r#"{"input0:0": [1.0, -2.0, -5.0, 6.0]}"#).unwrap();
    let by_hand = dir.path().join("slices.json");
    std::fs::write(&by_hand, r#"{"x0:0": [1.0, -2.0], "x1:0": [-5.0, 6.0]}"#).unwrap();
    let split = run(&[
        "run",
        &example("tf_tagged.opg"),
        "--topology",
        "1x2",
        "--split-batch",
        "--feeds",
        global.to_str().unwrap(),
        "--json",
    ]);
    let manual =
        run(&["run", &example("tf_tagged.opg"), "--topology", "1x2", "--feeds", by_hand.to_str().unwrap(), "--json"]);
    assert!(split.status.success() && manual.status.success(), "{}{}", stderr(&split), stderr(&manual));
    assert_eq!(split.stdout, manual.stdout);
    let odd = dir.path().join("odd.json");
    std::fs::write(&odd, r#"{"input0:0": [1.0, 2.0, 3.0]}"#).unwrap();
    let o = run(&[
        "run",
        &example("tf_tagged.opg"),
        "--topology",
        "1x2",
        "--split-batch",
        "--feeds",
        odd.to_str().unwrap(),
    ]);
    assert_located_failure(&o, "The `global_batch_size` 3 is not divisible by `num_replicas_in_sync` 2");
}

#[test]
fn lower_describe_prints_the_strategy_facts() {
    let o = run(&["lower", &example("mlp_train.opg"), "--topology", "2x4", "--describe", "--global-batch-size", "64"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    for line in ["num_replicas_in_sync: 8", "num_hosts: 2", "num_replicas_per_host: 4"] {
        assert!(text.contains(line), "{line} missing in:\n{text}");
    }
}

#[test]
fn feed_per_host_equals_feeding_each_host_replicas_by_hand() {
    // 2x2 with four replicas: host 0 feeds replicas 0 and 1, host 1 replicas 2 and 3.
    let graph = format!("{}/tests/strategy/per_host.opg", env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let h0 = write("h0.json", r#"{"input0:0": [[1.0, 2.0], [3.0, 4.0]]}"#);
    let h1 = write("h1.json", r#"{"input0:0": [[5.0, 6.0], [-7.0, 8.5]]}"#);
    let by_hand = write(
        "hand.json",
        r#"{"x0:0": [[1.0, 2.0]], "x1:0": [[3.0, 4.0]], "x2:0": [[5.0, 6.0]], "x3:0": [[-7.0, 8.5]]}"#,
    );
    let per_host = run(&["run", &graph, "--topology", "2x2", "--feed-per-host", &h0, "--feed-per-host", &h1, "--json"]);
    let manual = run(&["run", &graph, "--topology", "2x2", "--feeds", &by_hand, "--json"]);
    assert!(per_host.status.success() && manual.status.success(), "{}{}", stderr(&per_host), stderr(&manual));
    assert_eq!(per_host.stdout, manual.stdout);

    let o = run(&["run", &graph, "--topology", "2x2", "--feed-per-host", &h0]);
    assert_located_failure(&o, "1 per-host feed(s) were given, but the device assignment has 2 input host(s)");
    let odd = write("odd.json", r#"{"input0:0": [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]}"#);
    let o = run(&["run", &graph, "--topology", "2x2", "--feed-per-host", &h0, "--feed-per-host", &odd]);
    assert_located_failure(&o, "the batch of host 1 for `input0:0` has 3 rows, not divisible by its 2 replica(s)");
    let other = write("other.json", r#"{"x0:0": [[1.0, 2.0]]}"#);
    let o = run(&["run", &graph, "--topology", "2x2", "--feed-per-host", &other, "--feed-per-host", &other]);
    assert_located_failure(&o, "`x0:0` is not a `TPUReplicatedInput`");
}

#[test]
fn run_groups_outputs_by_output_and_returns_marked_outputs_once() {
    let graph = format!("{}/tests/strategy/last_step.opg", env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let feeds = dir.path().join("feeds.json");
    std::fs::write(&feeds, r#"{"x0:0": [1.0, 2.0], "x1:0": [10.0, 20.0]}"#).unwrap();
    let feeds = feeds.to_str().unwrap();
    let o = run(&["run", &graph, "--topology", "1x2", "--steps-per-run", "3", "--feeds", feeds, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // After three device steps replica r's count is 3 x_r.
    assert_eq!(
        v,
        serde_json::json!({"outputs": [
            {"name": "count:0", "dtype": "f32", "shape": [2], "per_replica": [[3.0, 6.0], [30.0, 60.0]]},
            {"name": "count:0", "dtype": "f32", "shape": [2], "reduce_op": "SUM", "value": [33.0, 66.0]},
            {"name": "count:0", "dtype": "f32", "shape": [2], "reduce_op": "MEAN", "value": [16.5, 33.0]},
        ],
        // Each replica's copy of the counter differs: one value per replica.
        "variables": [{"name": "c", "dtype": "f32", "shape": [2], "per_replica": [[3.0, 6.0], [30.0, 60.0]]}]})
    );
    let text = run(&["run", &graph, "--topology", "1x2", "--steps-per-run", "3", "--feeds", feeds]);
    assert!(String::from_utf8_lossy(&text.stdout).contains("output count:0 (SUM) = [33.0,66.0]"), "{}", stderr(&text));
}

#[test]
fn an_input_over_4_gib_is_refused_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.opg");
    // A sparse file: 5 GiB long, nothing written.
    std::fs::File::create(&path).unwrap().set_len(5 << 30).unwrap();
    let start = std::time::Instant::now();
    let o = run(&["check", path.to_str().unwrap()]);
    assert!(start.elapsed() < std::time::Duration::from_secs(5), "took {:?}", start.elapsed());
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("5368709120 bytes"), "{}", stderr(&o));
}

#[test]
fn feeds_are_checked_against_their_placeholders_all_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let feeds = dir.path().join("f.json");
    // a0: a scalar for shape [4]; a1: one element; b0: right; b1..b3 missing.
    std::fs::write(&feeds, r#"{"a0:0": 1.0, "a1:0": [1.0], "b0:0": [1.0, 2.0, 3.0, 4.0]}"#).unwrap();
    let o = run(&["run", &example("two_clusters.opg"), "--feeds", feeds.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.matches("tpu_rewrite::exec::feed_mismatch").count(), 2, "{err}");
    assert_eq!(err.matches("tpu_rewrite::exec::missing_feed").count(), 3, "{err}");
    for node in ["%a0", "%a1", "%b1", "%b2", "%b3"] {
        assert!(err.contains(&format!("`{node}`")), "{node} not named:\n{err}");
    }
    // The spans point at the placeholders' lines.
    assert!(err.contains("two_clusters.opg:5:"), "{err}");
    // A wrong dtype (.npy of f64 for an f32 placeholder) is refused before the run.
    let npy = dir.path().join("a.npy");
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    let mut header = "{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }".to_string();
    while !(10 + header.len() + 1).is_multiple_of(64) {
        header.push(' ');
    }
    header.push('\n');
    bytes.extend((header.len() as u16).to_le_bytes());
    bytes.extend(header.as_bytes());
    bytes.extend([0u8; 32]);
    std::fs::write(&npy, bytes).unwrap();
    let o = run(&["run", &example("two_clusters.opg"), "--feed", &format!("a0:0={}", npy.display())]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("takes dtype f32"), "{}", stderr(&o));
}

#[test]
fn a_logical_core_out_of_range_is_reported_once_at_the_users_op() {
    let text = "// a comment on line 1\ngraph @main {\n  %x0 = Placeholder() {dtype = f32, shape = shape[2]}\n  \
                replicate (num_replicas = 1) (%x = [%x0]) {\n    %y = Relu(%x) on \"TPU_REPLICATED_CORE:5\" {T = f32}\n    \
                return %y\n  }\n}\n";
    let o = run_stdin(&["lower", "-"], text.as_bytes());
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert_eq!(err.matches("tpu_rewrite::lower::logical_device").count(), 1, "{err}");
    assert!(err.contains("<stdin>:5:5"), "{err}");
    assert!(!err.contains("<stdin>:1:1"), "{err}");
}

#[test]
fn a_huge_steps_per_run_shows_progress_and_ctrl_c_ends_it() {
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::ExitStatusExt;
    let text = "graph @main {\n  %c = Const() {dtype = f32, value = tensor(f32, [2]) [1.0, 2.0]}\n  \
                replicate (num_replicas = 2) (%a = [%c, %c]) {\n    %y = Relu(%a) {T = f32}\n    return %y\n  }\n}\n";
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("loop.opg");
    std::fs::write(&path, text).unwrap();
    let mut command = bin();
    // A test runner started in the background of a non-interactive shell
    // ignores SIGINT, and the child would inherit that: give it Ctrl-C's
    // default action, as a terminal's foreground job has.
    // SAFETY: `signal` is async-signal-safe, as `pre_exec` requires.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut command, || {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut child = command
        .args(["run", path.to_str().unwrap(), "--steps-per-run", "1000000000"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let line = lines.next().expect("a progress line").unwrap();
    assert!(line.starts_with("iteration ") && line.contains("/1000000000") && line.contains("left"), "{line}");
    // SAFETY: signals the child this test started.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let start = std::time::Instant::now();
    let status = child.wait().unwrap();
    assert!(start.elapsed() < std::time::Duration::from_secs(5));
    assert_eq!(status.signal(), Some(libc::SIGINT), "{status:?}");
}

#[test]
fn command_line_errors_have_codes_and_locations() {
    let dir = tempfile::tempdir().unwrap();
    // A JSON feed that does not decode: coded, and labelled at the node it feeds.
    let feeds = dir.path().join("bad.json");
    std::fs::write(&feeds, r#"{"a0:0": [1, "x", 3, 4]}"#).unwrap();
    let o = run(&["run", &example("two_clusters.opg"), "--feeds", feeds.to_str().unwrap()]);
    assert_located_failure(&o, "tpu_rewrite::cli::feed_value");
    assert!(stderr(&o).contains("two_clusters.opg:5:3"), "{}", stderr(&o));
    // The related note points into the JSON file, at the feed's key.
    assert!(stderr(&o).contains("bad.json:1:2"), "{}", stderr(&o));
    // A feed file that is not JSON: coded, and labelled where the parser stopped.
    std::fs::write(&feeds, "{\n  \"a0:0\": [1, 2,,]\n}\n").unwrap();
    let o = run(&["run", &example("two_clusters.opg"), "--feeds", feeds.to_str().unwrap()]);
    assert_located_failure(&o, "tpu_rewrite::cli::feed_json");
    assert!(stderr(&o).contains("bad.json:2:17"), "{}", stderr(&o));
    let o = run(&["run", &example("two_clusters.opg"), "--feeds", "/nonexistent.json"]);
    assert_located_failure(&o, "tpu_rewrite::cli::read");
    // A two-graph module as a GraphDef: coded, at the second graph.
    let o = run_stdin(&["emit", "-", "--format", "pb"], b"graph @a {\n}\ngraph @b {\n}\n");
    assert_located_failure(&o, "tpu_rewrite::cli::graphdef_graphs");
    assert!(stderr(&o).contains("<stdin>:3:1"), "{}", stderr(&o));
    // A bad option value and an unreadable input.
    // An unknown pass is a usage error: exit 2.
    let o = run(&["rewrite", &example("two_clusters.opg"), "--passes", "no-such-pass"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("tpu_rewrite::passes::unknown_pass"), "{}", stderr(&o));
    let o = run(&["check", "/nonexistent.opg"]);
    assert_located_failure(&o, "tpu_rewrite::cli::read");
    // No error line without a code anywhere above.
    assert!(!stderr(&o).lines().any(|l| l.starts_with("error:")), "{}", stderr(&o));
}

#[test]
fn nothing_to_lower_is_located_at_the_graph() {
    // The CLI lowers a plain graph as one single-replica cluster; the
    // library's `lower` of a graph without a cluster says there is nothing to lower.
    let (module, errors) = tpu_rewrite::parse_module(b"graph @main {\n}\n").expect("parses");
    assert!(errors.is_empty());
    let Err(failure) = tpu_rewrite::lower(&module.graphs[0], &tpu_rewrite::LowerConfig::default()) else {
        panic!("a graph without a cluster lowered");
    };
    let text = format!("{failure:?}");
    assert!(text.contains("NoCluster"), "{text}");
    let o = run_stdin(&["lower", "-"], b"graph @main {\n}\n");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("plain graph: compiled as one single-replica cluster"), "{}", stderr(&o));
}

#[test]
fn a_lowered_module_draws_its_device_assignment_as_a_legend() {
    let o = run(&["lower", &example("mlp_train.opg"), "--topology", "2x4", "--format", "dot"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let dot = String::from_utf8(o.stdout).unwrap();
    assert!(dot.contains("legend [shape=note"), "{dot}");
    assert!(dot.contains("8 replica(s) x 1 core(s) on 2x4"), "{dot}");
    // Replica 5 is flat core 5: task 1, core 1.
    assert!(dot.contains("replica 5: core 0 -> task 1 TPU 1"), "{dot}");
    assert!(dot.contains("runs on each of 8 replicas"), "{dot}");
}

#[test]
fn the_outside_compilation_example_prints_on_the_host_as_tensorflow_does() {
    let dir = tempfile::tempdir().unwrap();
    let feeds = dir.path().join("feeds.json");
    std::fs::write(&feeds, r#"{"x0:0": [[0, 0], [0, 0]], "x1:0": [[1, 2], [3, 4]]}"#).unwrap();
    let o = run(&["run", &example("outside_compilation.opg"), "--feeds", feeds.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    // TF1 `Print`: the message, then each data tensor in `SummarizeValue`'s layout.
    let err = stderr(&o);
    assert!(err.contains("h = [[0 0][0 0]]\n"), "{err}");
    assert!(err.contains("h = [[0.761594176 0.964027584][0.995054781 0.999329329]]\n"), "{err}");
    // `%y = Print(h) * h`, then `Square(y) + y`: zero for replica 0.
    assert!(String::from_utf8_lossy(&o.stdout).contains("output out:0 replica 0 = [[0.0,0.0],[0.0,0.0]]"));
}

/// A TF1 loop whose counter never moves.
const ENDLESS_TF1_LOOP: &str = r#"graph @main {
  %zero = Const() {dtype = i32, value = tensor(i32, []) [0]}
  %ei = Enter(%zero) {T = i32, frame_name = "f", is_constant = false}
  %mi = Merge(%ei, %ni) {T = i32, N = 2}
  %three = Const(^%mi) {dtype = i32, value = tensor(i32, []) [3]}
  %less = Less(%mi, %three) {T = i32}
  %cond = LoopCond(%less)
  %si = Switch(%mi, %cond) {T = i32}
  %none = Const(^%si) {dtype = i32, value = tensor(i32, []) [0]}
  %i2 = AddV2(%si:1, %none) {T = i32}
  %ni = NextIteration(%i2) {T = i32}
  %out = Exit(%si) {T = i32}
}
"#;

/// A functional `While` whose condition is always true.
const ENDLESS_WHILE: &str = r#"graph @main {
  %zero = Const() {dtype = i32, value = tensor(i32, []) [0]}
  %loop = While(%zero) {T = [i32], cond = func "cond", body = func "body", parallel_iterations = 10}
}

graph @cond (role = "function") {
  %i = _Arg() {T = i32, index = 0}
  %yes = Const() {dtype = bool, value = tensor(bool, []) [true]}
  %ok = _Retval(%yes) {T = bool, index = 0}
}

graph @body (role = "function") {
  %i = _Arg() {T = i32, index = 0}
  %one = Const() {dtype = i32, value = tensor(i32, []) [1]}
  %next = AddV2(%i, %one) {T = i32}
  %r = _Retval(%next) {T = i32, index = 0}
}
"#;

/// `run --deadline` stops a step that would run forever (a loop waits for
/// no device, so `--timeout` never fires) with a coded error, promptly;
/// the PJRT backend, which cannot stop an execution, refuses the flag.
#[test]
fn a_deadline_stops_an_endless_loop() {
    let dir = tempfile::tempdir().unwrap();
    for (name, text, fetch) in [("tf1.opg", ENDLESS_TF1_LOOP, "out:0"), ("while.opg", ENDLESS_WHILE, "loop:0")] {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let start = std::time::Instant::now();
        let o = run(&["run", path.to_str().unwrap(), "--fetch", fetch, "--deadline", "1"]);
        let took = start.elapsed();
        assert_located_failure(&o, "tpu_rewrite::exec::step_deadline");
        assert!(took < std::time::Duration::from_secs(20), "{name}: stopped after {took:?}");
    }
    let path = dir.path().join("tf1.opg");
    let o = run(&["run", path.to_str().unwrap(), "--deadline", "1", "--backend", "pjrt"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--deadline applies to the simulator"), "{}", stderr(&o));
}
