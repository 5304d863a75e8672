//! `run --backend pjrt` from the command line: the same printed result as
//! the simulator, plugin discovery, and clear errors.

#[path = "support/pjrt.rs"]
mod support;

use std::process::Command;

fn run(args: &[&str], plugin_env: Option<&str>) -> (bool, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tpu-rewrite"));
    command.arg("run").args(args);
    command.env_remove("TPU_REWRITE_PJRT_PLUGIN");
    if let Some(p) = plugin_env {
        command.env("TPU_REWRITE_PJRT_PLUGIN", p);
    }
    let out = command.output().expect("the binary runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn pjrt_prints_what_the_simulator_prints_for_the_mlp() {
    let plugin = support::plugin_path();
    let (ok, sim, err) = run(&["examples/mlp_train.opg", "--steps", "2"], None);
    assert!(ok, "{err}");
    let (ok, pjrt, err) = run(&["examples/mlp_train.opg", "--steps", "2", "--backend", "pjrt"], plugin.to_str());
    assert!(ok, "{err}");
    let lines = |s: &str| s.lines().map(|l| l.split(" = ").next().unwrap_or("").to_string()).collect::<Vec<_>>();
    assert_eq!(lines(&sim), lines(&pjrt), "the same outputs and variables, in the same order");
    assert!(pjrt.contains("variable w1 = "), "{pjrt}");
    // The plugin's info log lines are filtered out of stderr.
    assert!(!err.contains("cpu_device_count set via create_options"), "{err}");
}

#[test]
fn the_flag_beats_the_environment() {
    let plugin = support::plugin_path();
    let (ok, _, err) = run(
        &["examples/mlp_train.opg", "--backend", "pjrt", "--pjrt-plugin", "/nonexistent/plugin.so"],
        plugin.to_str(),
    );
    assert!(!ok);
    assert!(err.contains("tpu_rewrite::xla::plugin_not_found"), "{err}");
}

#[test]
fn a_bad_plugin_path_in_the_environment_is_reported() {
    let (ok, _, err) = run(&["examples/mlp_train.opg", "--backend", "pjrt"], Some("/nonexistent/libtpu.so"));
    assert!(!ok);
    assert!(err.contains("/nonexistent/libtpu.so"), "{err}");
}

#[test]
fn an_unfed_placeholder_is_a_diagnostic() {
    let plugin = support::plugin_path();
    let (ok, _, err) = run(&["examples/tf_tagged.opg", "--backend", "pjrt"], plugin.to_str());
    assert!(!ok);
    // Feeds are checked against their placeholders before any backend runs.
    assert!(err.contains("tpu_rewrite::exec::missing_feed") && err.contains("not fed"), "{err}");
}

/// The numbers of `output I replica R = V` lines, by their name.
fn printed(text: &str) -> Vec<(String, Vec<f64>)> {
    text.lines()
        .filter(|l| l.starts_with("output ") || l.starts_with("variable "))
        .filter_map(|l| l.split_once(" = "))
        .map(|(name, v)| {
            let nums = v.trim_matches(|c| c == '[' || c == ']').split(',').map(|x| x.trim().parse().unwrap()).collect();
            (name.to_string(), nums)
        })
        .collect()
}

#[test]
fn outside_compilation_runs_through_the_host_callback_from_the_cli() {
    let plugin = support::plugin_path();
    let dir = tempfile::tempdir().unwrap();
    let feeds = dir.path().join("feeds.json");
    std::fs::write(&feeds, r#"{"x0:0": [0.1, -0.5, 0.9], "x1:0": [0.3, 0.2, -1.2]}"#).unwrap();
    let feeds = feeds.to_str().unwrap();
    let base = ["examples/second_order.opg", "--steps", "2", "--steps-per-run", "3", "--feeds", feeds];
    let (ok, sim, err) = run(&base, None);
    assert!(ok, "{err}");
    let with = |extra: &[&str]| {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        let (ok, out, err) = run(&args, plugin.to_str());
        assert!(ok, "{err}");
        out
    };
    for pjrt in [with(&["--backend", "pjrt"]), with(&["--backend", "pjrt", "--host-transfer", "stages"])] {
        let (want, got) = (printed(&sim), printed(&pjrt));
        assert_eq!(want.len(), 6, "{sim}");
        assert_eq!(want.iter().map(|w| &w.0).collect::<Vec<_>>(), got.iter().map(|g| &g.0).collect::<Vec<_>>());
        for ((name, w), (_, g)) in want.iter().zip(&got) {
            for (a, b) in g.iter().zip(w) {
                assert!((a - b).abs() <= 1e-5 + 1e-4 * b.abs(), "{name}: pjrt {a} vs sim {b}");
            }
        }
    }
    // send/recv is the TPU/GPU form: this backend refuses to run it, by code.
    let args: Vec<&str> = base.iter().chain(&["--backend", "pjrt", "--host-transfer", "send-recv"]).copied().collect();
    let (ok, _, err) = run(&args, plugin.to_str());
    assert!(!ok && err.contains("tpu_rewrite::xla::send_recv_run"), "{err}");
}

#[test]
fn fetch_takes_the_device_results_and_refuses_targets() {
    let plugin = support::plugin_path();
    let base = ["examples/mlp_train.opg", "--steps", "2", "--fetch", "output_0_shard_1:0"];
    let (ok, sim, err) = run(&base, None);
    assert!(ok, "{err}");
    let args: Vec<&str> = base.iter().chain(&["--backend", "pjrt"]).copied().collect();
    let (ok, pjrt, err) = run(&args, plugin.to_str());
    assert!(ok, "{err}");
    let value = |text: &str| -> f64 {
        let line = text.lines().find(|l| l.starts_with("output_0_shard_1:0 = ")).unwrap_or_else(|| panic!("{text}"));
        line.split(" = ").nth(1).unwrap().parse().unwrap()
    };
    let (a, b) = (value(&pjrt), value(&sim));
    assert!((a - b).abs() <= 1e-5 + 1e-4 * b.abs(), "pjrt {a} vs sim {b}");
    // A target is not a device result.
    let (ok, _, err) = run(&["examples/mlp_train.opg", "--backend", "pjrt", "--fetch", "^w1_init"], plugin.to_str());
    assert!(!ok && err.contains("tpu_rewrite::xla::not_fetchable") && err.contains("output_0_shard_0:0"), "{err}");
}

#[test]
fn pure_host_ops_after_the_step_are_fetched_and_variable_reads_refused() {
    let plugin = support::plugin_path();
    let dir = tempfile::tempdir().unwrap();
    let feeds = dir.path().join("feeds.json");
    std::fs::write(&feeds, r#"{"x0:0": [1.0, -2.0], "x1:0": [3.0, 4.0]}"#).unwrap();
    let feeds = feeds.to_str().unwrap();
    let base = [
        "tests/fixtures/host_after_step.opg",
        "--topology",
        "1x2",
        "--steps",
        "2",
        "--feeds",
        feeds,
        "--fetch",
        "total:0",
    ];
    let (ok, sim, err) = run(&base, None);
    assert!(ok, "{err}");
    let args: Vec<&str> = base.iter().chain(&["--backend", "pjrt"]).copied().collect();
    let (ok, pjrt, err) = run(&args, plugin.to_str());
    assert!(ok, "{err}");
    let last = |text: &str| text.lines().find(|l| l.starts_with("total:0 = ")).map(str::to_string);
    // relu([1, -2]) + relu([3, 4]) on the host, after the device step.
    assert_eq!(last(&sim).as_deref(), Some("total:0 = [4.0,4.0]"), "{sim}");
    assert_eq!(last(&pjrt), last(&sim), "{pjrt}");
    let args = ["tests/fixtures/host_after_step.opg", "--topology", "1x2", "--feeds", feeds];
    let args: Vec<&str> = args.iter().chain(&["--backend", "pjrt", "--fetch", "w_host:0"]).copied().collect();
    let (ok, _, err) = run(&args, plugin.to_str());
    assert!(!ok && err.contains("tpu_rewrite::xla::host_after_step") && err.contains("w_host"), "{err}");
}
