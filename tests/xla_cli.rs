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
