//! `--backend jax-distributed`: the StableHLO module on several JAX
//! processes (coordination service on 127.0.0.1, gloo collectives, CPU
//! devices) gives the simulator's numbers, with outside compilation run by
//! the host that owns each replica; a process killed mid-run ends the
//! others within 30 s and leaves no child behind.
//!
//! The tests make the pinned venv themselves (`python/setup-venv`, from
//! `python/requirements.txt`, into the cache outside git) and fail with the
//! reason when they cannot.

use crate::support::lowering;
use crate::support::pjrt as support;

use lowering::{default_fetches, prepare};

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tpu_rewrite::exec::driver::{self, RunOutcome};
use tpu_rewrite::exec::Tensor;
use tpu_rewrite::xla::distributed;

/// The pinned venv's python, made once; a failure fails the test.
fn ensure_python() {
    static ONCE: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    ONCE.get_or_init(|| {
        let python = distributed::python().unwrap_or_else(|e| panic!("the pinned JAX venv is required: {e}"));
        assert!(python.exists(), "setup-venv printed {}, which does not exist", python.display());
    });
}

/// |a − b| ≤ 1e-6 + 1e-4·|b|, elementwise.
fn close(a: &Tensor, b: &Tensor, what: &str) {
    assert_eq!(a.shape(), b.shape(), "{what}: shapes differ");
    assert_eq!(a.dtype(), b.dtype(), "{what}: dtypes differ");
    let (Tensor::F32(x), Tensor::F32(y)) = (a, b) else { panic!("{what}: expected f32, got {a:?}") };
    for (i, (x, y)) in x.iter().zip(y.iter()).enumerate() {
        let (x, y) = (f64::from(*x), f64::from(*y));
        assert!((x - y).abs() <= 1e-6 + 1e-4 * y.abs(), "{what}[{i}]: jax {x} vs sim {y}");
    }
}

/// Runs `path` on the simulator and on `processes` JAX processes for
/// `steps` steps, and compares every output and every variable copy.
fn differential(path: &str, topology: &str, processes: usize, steps: u32) -> (RunOutcome, Vec<f64>) {
    ensure_python();
    let (tagged, lowered) = prepare(path, topology, 1);
    let graph = &tagged.graphs[0];
    let feeds = support::synthetic_feeds(graph);
    let fetches = default_fetches(&lowered.module);
    assert!(!fetches.is_empty(), "{path}: no outputs to compare");
    let config = driver::RunConfig { steps, ..driver::RunConfig::default() };
    let sim = driver::run(&lowered.module, &feeds, &fetches, &config, &mut |_, _| {}).expect("the simulator runs");
    let dist_config = distributed::Config {
        processes,
        multi_host: None,
        steps,
        steps_per_run: 1,
        feeds: &feeds,
        deadline: Duration::from_secs(300),
        library: None,
    };
    let out = distributed::run(graph, &lowered.assignment, &dist_config).unwrap_or_else(|e| panic!("{path}: {e}"));
    let jax = distributed::in_fetch_order(out.run, &fetches);
    assert_eq!(jax.fetched.len(), sim.fetched.len(), "{path}: output count");
    for ((name, got), (want_name, want)) in jax.fetched.iter().zip(&sim.fetched) {
        assert_eq!(name, want_name);
        close(got, want, &format!("{path} {name}"));
    }
    assert_eq!(jax.mirrors.keys().collect::<Vec<_>>(), sim.mirrors.keys().collect::<Vec<_>>(), "{path}: variables");
    for (name, copies) in &sim.mirrors {
        assert_eq!(copies.len(), jax.mirrors[name].len(), "{path}: copies of {name}");
        for (r, (got, want)) in jax.mirrors[name].iter().zip(copies).enumerate() {
            close(got, want, &format!("{path} variable {name} replica {r}"));
        }
    }
    let steps_timed = out.step_seconds.first().cloned().unwrap_or_default();
    assert_eq!(steps_timed.len(), steps as usize, "process 0 times every step");
    (jax, steps_timed)
}

fn median_ms(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2] * 1e3
}

#[test]
fn mlp_train_on_two_processes_of_four_devices_matches_the_simulator() {
    let (out, steps) = differential("examples/mlp_train.opg", "2x4", 2, 10);
    assert_eq!(out.mirrors.len(), 3, "w1, b1, w2");
    assert_eq!(out.mirrors["w1"].len(), 8);
    eprintln!("mlp_train 2 processes x 4 devices: median step {:.3} ms", median_ms(steps));
}

#[test]
fn mlp_train_on_one_process_of_eight_devices_matches_the_simulator() {
    let (_, steps) = differential("examples/mlp_train.opg", "1x8", 1, 10);
    eprintln!("mlp_train 1 process x 8 devices: median step {:.3} ms", median_ms(steps));
}

#[test]
fn tensorflow_mlp_on_a_2x4_topology_matches_the_simulator() {
    let (out, _) = differential("tests/fixtures/tf-graphs/mlp_r4.pb", "2x4", 2, 10);
    assert_eq!(out.fetched.len(), 5 * 4, "five outputs of four replicas");
}

fn cli() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tpu-rewrite"))
}

/// Runs `path` on `processes` processes and returns its error.
fn refused(path: &str, topology: &str, processes: usize) -> distributed::DistributedError {
    let (tagged, lowered) = prepare(path, topology, 1);
    let graph = &tagged.graphs[0];
    let feeds = support::synthetic_feeds(graph);
    let config = distributed::Config {
        processes,
        multi_host: None,
        steps: 1,
        steps_per_run: 1,
        feeds: &feeds,
        deadline: Duration::from_secs(60),
        library: None,
    };
    match distributed::run(graph, &lowered.assignment, &config) {
        Ok(_) => panic!("{path} ran on {processes} processes"),
        Err(e) => e,
    }
}

#[test]
fn outside_compilation_on_two_processes_matches_the_simulator() {
    // A host `Print` between two device stages, then a host `Square`: each
    // process's tpu-rewrite runs the host ops of its own replica.
    let (out, steps) = differential("examples/outside_compilation.opg", "1x2", 2, 3);
    assert_eq!(out.fetched.len(), 2, "one output of two replicas");
    assert_eq!(steps.len(), 3);
}

#[test]
fn outside_compilation_in_second_order_gradients_matches_the_simulator() {
    // Three host programs (the forward op and its two gradients) between device stages.
    differential("examples/second_order.opg", "1x8", 2, 2);
}

#[test]
fn a_failing_host_op_names_the_op_and_ends_the_run() {
    // Replica 1's doubled index 10 is out of the host gather's range: its
    // process's tpu-rewrite reports the op, and the run ends.
    ensure_python();
    let dir = tempfile::tempdir().unwrap();
    let graph = dir.path().join("gather.opg");
    std::fs::write(
        &graph,
        r#"graph @main {
  %x0 = Placeholder() {dtype = i32, shape = shape[2]}
  %x1 = Placeholder() {dtype = i32, shape = shape[2]}
  replicate (num_replicas = 2) (%x = [%x0, %x1]) {
    %i = Add(%x, %x) {T = i32}
    outside_compilation {
      %table = Const() {dtype = f32, value = tensor(f32, [3]) [1.0, 2.0, 3.0]}
      %axis = Const() {dtype = i32, value = tensor(i32, []) [0]}
      %g = GatherV2(%table, %i, %axis) {Tparams = f32, Tindices = i32, Taxis = i32, batch_dims = 0}
    }
    %out = Mul(%g, %g) {T = f32}
    return %out
  }
}
"#,
    )
    .unwrap();
    let feeds = dir.path().join("feeds.json");
    std::fs::write(&feeds, r#"{"x0:0": [0, 1], "x1:0": [1, 5]}"#).unwrap();
    let args = ["run", graph.to_str().unwrap(), "--topology", "1x2", "--backend", "jax-distributed"];
    let o = cli().args(args).args(["--processes", "2", "--feeds", feeds.to_str().unwrap()]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("tpu_rewrite::xla::host"), "{err}");
    assert!(err.contains("host op g"), "{err}");
}

#[test]
fn more_processes_than_replicas_is_refused() {
    let e = refused("tests/strategy/replica_id.opg", "1x2", 3);
    assert!(matches!(e, distributed::DistributedError::Placement { replicas: 2, processes: 3, .. }), "{e:?}");
}

/// The pids of `pid`'s children.
fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|s| s.parse().ok())
        .collect()
}

/// Argument `i` of process `pid`'s command line.
fn cmdline_arg(pid: u32, i: usize) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    raw.split(|&b| b == 0).nth(i).map(|s| String::from_utf8_lossy(s).into_owned())
}

#[test]
fn a_killed_process_ends_the_others_and_leaves_no_child() {
    ensure_python();
    let mut run = cli()
        .args(["run", "examples/mlp_train.opg", "--backend", "jax-distributed", "--processes", "2"])
        .args(["--steps", "100000000"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts");
    // Wait for both processes to be in their step loop (each touches `running_<p>` in the job directory).
    let start = Instant::now();
    let (kids, job) = loop {
        assert!(start.elapsed() < Duration::from_secs(120), "the processes did not reach their step loop in 120 s");
        if let Ok(Some(status)) = run.try_wait() {
            panic!("tpu-rewrite ended early: {status}");
        }
        let kids = children(run.id());
        if kids.len() == 2 {
            if let Some(job) = cmdline_arg(kids[0], 2) {
                if (0..2).all(|p| Path::new(&job).join(format!("running_{p}")).exists()) {
                    break (kids, job);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(cmdline_arg(kids[1], 4).as_deref(), Some("1"), "the second child is process 1");
    std::thread::sleep(Duration::from_millis(500));
    let killed = Instant::now();
    // SAFETY: signals a child of the tpu-rewrite this test started.
    unsafe {
        libc::kill(kids[1] as i32, libc::SIGKILL);
    }
    let status = loop {
        if let Some(status) = run.try_wait().expect("waits") {
            break status;
        }
        assert!(killed.elapsed() < Duration::from_secs(30), "tpu-rewrite still runs 30 s after process 1 died");
        std::thread::sleep(Duration::from_millis(50));
    };
    eprintln!("tpu-rewrite ended {:.2} s after process 1 was killed", killed.elapsed().as_secs_f64());
    let mut err = String::new();
    std::io::Read::read_to_string(run.stderr.as_mut().expect("piped"), &mut err).expect("reads stderr");
    assert!(!status.success());
    assert!(err.contains("process 1 of 2 was killed by signal 9"), "{err}");
    assert!(err.contains("distributed::process_failed"), "{err}");
    for pid in kids {
        assert!(!Path::new(&format!("/proc/{pid}")).exists(), "process {pid} outlived the run");
    }
    assert!(!Path::new(&job).exists(), "the job directory {job} was left behind");
}

#[test]
fn fetch_is_refused_on_the_distributed_backend() {
    let o = cli()
        .args(["run", "examples/mlp_train.opg", "--backend", "jax-distributed", "--fetch", "w1"])
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("--fetch is for the simulator"), "{err}");
}

/// One `tpu-rewrite run` per "host" of a two-host run on 127.0.0.1:
/// `(graph, extra flags)` for process 0 and process 1; returns each
/// process's (success, stdout, stderr).
fn two_hosts(hosts: [(&str, Vec<String>); 2]) -> Vec<(bool, String, String)> {
    ensure_python();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let coordinator = format!("127.0.0.1:{port}");
    let children: Vec<_> = hosts
        .iter()
        .enumerate()
        .map(|(p, (graph, extra))| {
            cli()
                .args(["run", graph, "--topology", "2x2", "--backend", "jax-distributed", "--json"])
                .args(["--coordinator", &coordinator, "--num-processes", "2", "--process-id", &p.to_string()])
                .args(extra)
                .env_remove("SLURM_NTASKS")
                .env_remove("SLURM_PROCID")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("starts")
        })
        .collect();
    children
        .into_iter()
        .map(|c| {
            let o = c.wait_with_output().expect("waits");
            (
                o.status.success(),
                String::from_utf8_lossy(&o.stdout).into_owned(),
                String::from_utf8_lossy(&o.stderr).into_owned(),
            )
        })
        .collect()
}

#[test]
fn one_command_per_host_with_per_host_feeds_equals_the_simulator() {
    // 2x2, four replicas: host 0 feeds replicas 0 and 1, host 1 replicas 2 and 3.
    let graph = "tests/strategy/per_host.opg";
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("h0.json"), r#"{"input0:0": [[1.0, 2.0], [3.0, 4.0]]}"#).unwrap();
    std::fs::write(dir.path().join("h1.json"), r#"{"input0:0": [[5.0, 6.0], [-7.0, 8.5]]}"#).unwrap();
    let pattern = dir.path().join("h{process_id}.json").to_str().unwrap().to_string();
    let sim = cli().args(["run", graph, "--topology", "2x2", "--json", "--feed-per-host", &pattern]).output().unwrap();
    assert!(sim.status.success(), "{}", String::from_utf8_lossy(&sim.stderr));
    // Process 1 names a host-0 file that does not exist: it reads only its own.
    let missing = dir.path().join("not-here.json").to_str().unwrap().to_string();
    let own = dir.path().join("h1.json").to_str().unwrap().to_string();
    let out = two_hosts([
        (graph, vec!["--feed-per-host".into(), pattern.clone()]),
        (graph, vec!["--feed-per-host".into(), missing, "--feed-per-host".into(), own]),
    ]);
    assert!(out[0].0 && out[1].0, "process 0:\n{}\nprocess 1:\n{}", out[0].2, out[1].2);
    assert_eq!(out[0].1, String::from_utf8_lossy(&sim.stdout), "process 0 prints the simulator's results");
    assert!(out[1].1.is_empty(), "process 1 prints no results: {}", out[1].1);
    assert!(out[1].2.contains("process 1 of 2: done; process 0 prints the results"), "{}", out[1].2);
}

#[test]
fn outside_compilation_runs_on_the_host_that_owns_the_replica() {
    // Host 0 owns replicas 0 and 1, host 1 replicas 2 and 3; each prints only its own rows.
    let graph = "tests/strategy/host_print.opg";
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("h0.json"), r#"{"input0:0": [[1.0, 2.0], [3.0, 4.0]]}"#).unwrap();
    std::fs::write(dir.path().join("h1.json"), r#"{"input0:0": [[5.0, 6.0], [-7.0, 8.5]]}"#).unwrap();
    let pattern = dir.path().join("h{process_id}.json").to_str().unwrap().to_string();
    let sim = cli().args(["run", graph, "--topology", "2x2", "--json", "--feed-per-host", &pattern]).output().unwrap();
    let sim_err = String::from_utf8_lossy(&sim.stderr);
    assert!(sim.status.success(), "{sim_err}");
    let rows = ["y = [[2 4]]", "y = [[6 8]]", "y = [[10 12]]", "y = [[-14 17]]"];
    for row in rows {
        assert!(sim_err.contains(row), "the simulator prints {row}: {sim_err}");
    }
    let flags = vec!["--feed-per-host".to_string(), pattern, "-v".into()];
    let out = two_hosts([(graph, flags.clone()), (graph, flags)]);
    assert!(out[0].0 && out[1].0, "process 0:\n{}\nprocess 1:\n{}", out[0].2, out[1].2);
    assert_eq!(out[0].1, String::from_utf8_lossy(&sim.stdout), "process 0 prints the simulator's results");
    for (p, (_, _, err)) in out.iter().enumerate() {
        for (r, row) in rows.iter().enumerate() {
            let own = r / 2 == p;
            assert_eq!(err.matches(row).count(), usize::from(own), "process {p}, replica {r}'s {row}:\n{err}");
        }
    }
    // Each process loaded only its own two replicas' rows: 2 × 2 f32, not the global 4 × 2.
    assert!(out[0].2.contains("process 0 holds the feeds of replicas 0,1: 16 bytes"), "{}", out[0].2);
    assert!(out[1].2.contains("process 1 holds the feeds of replicas 2,3: 16 bytes"), "{}", out[1].2);
}

#[test]
fn a_host_with_another_graph_is_refused_on_every_host() {
    let dir = tempfile::tempdir().unwrap();
    let graph = "tests/strategy/per_host.opg";
    let other = dir.path().join("other.opg");
    let text = std::fs::read_to_string(graph).unwrap().replace("Add(%x, %x)", "Mul(%x, %x)");
    std::fs::write(&other, text).unwrap();
    std::fs::write(dir.path().join("h0.json"), r#"{"input0:0": [[1.0, 2.0], [3.0, 4.0]]}"#).unwrap();
    std::fs::write(dir.path().join("h1.json"), r#"{"input0:0": [[5.0, 6.0], [-7.0, 8.5]]}"#).unwrap();
    let feeds = vec!["--feed-per-host".to_string(), dir.path().join("h{process_id}.json").to_str().unwrap().into()];
    let out = two_hosts([(graph, feeds.clone()), (other.to_str().unwrap(), feeds)]);
    for (p, (ok, _, err)) in out.iter().enumerate() {
        assert!(!ok, "process {p} ran a mismatched graph");
        assert!(err.contains("distributed::module_mismatch"), "process {p}: {err}");
        assert!(err.contains("the lowered module differs between processes"), "process {p}: {err}");
        assert!(err.contains(&format!("process {p} refused the run")), "process {p}: {err}");
    }
    // Usage errors, before anything starts.
    let usage = |extra: &[&str]| {
        let o = cli().args(["run", graph, "--topology", "2x2"]).args(extra).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{extra:?}");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let err = usage(&["--backend", "jax-distributed", "--num-processes", "2", "--process-id", "2"]);
    assert!(err.contains("--process-id 2 is not below --num-processes 2"), "{err}");
    let err = usage(&["--coordinator", "127.0.0.1:1"]);
    assert!(err.contains("apply to --backend jax-distributed only"), "{err}");
}
