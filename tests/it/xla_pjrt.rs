//! The PJRT client against the pinned CPU plugin: loading, version checks,
//! compiling and running a hand-written StableHLO module.

use crate::support::pjrt as support;

use tpu_rewrite::exec::Tensor;
use tpu_rewrite::xla::client::{Client, ClientConfig};
use tpu_rewrite::xla::{ffi, XlaError};

const ALL_REDUCE: &str = r#"
module @sum attributes {mhlo.num_replicas = 8 : i32, mhlo.num_partitions = 1 : i32} {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = "stablehlo.all_reduce"(%arg0) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = "stablehlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%s) : (tensor<f32>) -> ()
    }) {replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}
"#;

#[test]
fn plugin_reports_its_version() {
    let plugin = support::loaded();
    assert_eq!(plugin.version.0, ffi::API_MAJOR);
    assert!(plugin.version.1 >= ffi::API_MINOR_MIN, "version {:?}", plugin.version);
}

#[test]
fn eight_device_all_reduce() {
    let plugin = support::loaded();
    let client = Client::new(plugin, &ClientConfig { cpu_device_count: Some(8) }).expect("client");
    assert_eq!(client.platform, "cpu");
    assert_eq!(client.device_count(), 8);
    let exe = client.compile("sum", ALL_REDUCE, 8, 1).expect("compile");
    assert_eq!(exe.num_outputs, 1);
    let args: Vec<Vec<_>> = (0..8)
        .map(|r| vec![client.to_device(&Tensor::vector(vec![r as f32, 1.0]), r, "x").expect("to device")])
        .collect();
    let refs: Vec<Vec<_>> = args.iter().map(|row: &Vec<_>| row.iter().collect()).collect();
    let outputs = exe.execute(&refs).expect("execute");
    for (r, out) in outputs.iter().enumerate() {
        let t = out[0].to_host("out").expect("to host");
        assert_eq!(t.to_vec::<f32>().expect("f32"), vec![28.0, 8.0], "replica {r}");
    }
}

#[test]
fn a_bad_module_is_a_compile_error_with_the_plugin_message() {
    let client = Client::new(support::loaded(), &ClientConfig { cpu_device_count: Some(1) }).expect("client");
    let err = client.compile("broken", "module { func.func @main( }", 1, 1).err().expect("must fail");
    match err {
        XlaError::Compile { program, message } => {
            assert_eq!(program, "broken");
            assert!(!message.is_empty());
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn too_few_devices_is_refused_before_compiling() {
    let client = Client::new(support::loaded(), &ClientConfig { cpu_device_count: Some(2) }).expect("client");
    let err = client.compile("sum", ALL_REDUCE, 8, 1).err().expect("must fail");
    assert!(matches!(err, XlaError::Devices { needed: 8, available: 2, .. }), "{err:?}");
}

#[test]
fn a_missing_plugin_file_is_a_clear_error() {
    let err = ffi::load(std::path::Path::new("/nonexistent/libtpu.so")).expect_err("must fail");
    assert!(matches!(err, XlaError::PluginNotFound { .. }), "{err:?}");
}

#[test]
fn a_library_without_get_pjrt_api_is_refused() {
    // libc is a shared object, but no PJRT plugin.
    let libc = ["/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6", "/lib64/libc.so.6"]
        .into_iter()
        .map(std::path::Path::new)
        .find(|p| p.is_file())
        .expect("a libc.so.6 to load");
    let err = ffi::load(libc).expect_err("must fail");
    assert!(matches!(err, XlaError::IncompatiblePlugin { .. }), "{err:?}");
}

/// Builds a shared object whose `GetPjrtApi` returns a table with the given
/// size and version (the rest zero), with the system C compiler.
fn fake_plugin(dir: &std::path::Path, size: usize, major: i32, minor: i32) -> std::path::PathBuf {
    let source = dir.join(format!("fake_{major}_{minor}_{size}.c"));
    let library = dir.join(format!("fake_{major}_{minor}_{size}.so"));
    std::fs::write(
        &source,
        format!(
            "#include <stddef.h>\n\
             struct V {{ size_t s; void* e; int major; int minor; }};\n\
             struct A {{ size_t s; void* e; struct V v; void* f[200]; }};\n\
             static struct A api = {{ {size}, 0, {{ 24, 0, {major}, {minor} }}, {{0}} }};\n\
             const struct A* GetPjrtApi(void) {{ return &api; }}\n"
        ),
    )
    .unwrap();
    let status = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&library)
        .arg(&source)
        .status()
        .expect("this test needs a C compiler (`cc`) to build a fake plugin");
    assert!(status.success(), "cc failed");
    library
}

#[test]
fn an_older_or_newer_major_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (major, minor) in [(0, 50), (1, 0)] {
        let err = ffi::load(&fake_plugin(dir.path(), ffi::Api::STRUCT_SIZE, major, minor)).expect_err("must fail");
        match err {
            XlaError::IncompatiblePlugin { reason, .. } => {
                assert!(reason.contains(&format!("{major}.{minor}")), "{reason}")
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[test]
fn a_short_function_table_or_a_missing_function_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let err = ffi::load(&fake_plugin(dir.path(), 64, 0, 81)).expect_err("must fail");
    assert!(matches!(&err, XlaError::IncompatiblePlugin { reason, .. } if reason.contains("bytes")), "{err:?}");
    // The right size and version, but every entry null.
    let err = ffi::load(&fake_plugin(dir.path(), ffi::Api::STRUCT_SIZE, 0, 81)).expect_err("must fail");
    assert!(
        matches!(&err, XlaError::IncompatiblePlugin { reason, .. } if reason.contains("PJRT_Error_Destroy")),
        "{err:?}"
    );
}

/// A program whose only work is on a 1 MiB argument: XLA's compiled
/// memory stats give its argument and output buffers, which the backend
/// checks against the run's memory budget before running it.
#[test]
fn compiled_memory_stats_give_the_program_buffers() {
    let client = Client::new(support::loaded(), &ClientConfig { cpu_device_count: Some(1) }).expect("client");
    let module = r#"
module @double attributes {mhlo.num_replicas = 1 : i32, mhlo.num_partitions = 1 : i32} {
  func.func public @main(%arg0: tensor<512x512xf32>) -> tensor<512x512xf32> {
    %0 = "stablehlo.add"(%arg0, %arg0) : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
    return %0 : tensor<512x512xf32>
  }
}
"#;
    let exe = client.compile("double", module, 1, 1).expect("compile");
    let stats = exe.memory_stats().expect("memory stats").expect("the CPU plugin reports compiled memory stats");
    assert_eq!(stats.arguments, 1 << 20, "{stats:?}");
    assert_eq!(stats.outputs, 1 << 20, "{stats:?}");
    assert!(stats.per_device() >= 2 << 20, "{stats:?}");
}

/// Two replicas gather from `len` ones: replica 0 at index 2, replica 1
/// at `len`, one past the end.
fn out_of_range_gather(len: usize) -> String {
    format!(
        "graph @main {{
  %dims = Const() {{dtype = i32, value = tensor(i32, [1]) [{len}]}}
  %one = Const() {{dtype = f32, value = tensor(f32, []) [1.0]}}
  %x0 = Fill(%dims, %one) {{T = f32, index_type = i32}}
  %i0 = Const() {{dtype = i32, value = tensor(i32, []) [2]}}
  %i1 = Const() {{dtype = i32, value = tensor(i32, []) [{len}]}}
  replicate (num_replicas = 2) (%x = [%x0, %x0], %i = [%i0, %i1]) {{
    %a = Const() {{dtype = i32, value = tensor(i32, []) [0]}}
    %g = GatherV2(%x, %i, %a) {{Taxis = i32, Tindices = i32, Tparams = f32, batch_dims = 0}}
    return %g
  }}
}}
"
    )
}

/// Faults on PJRT through the command line, each a coded diagnostic and
/// exit 1, never a panic or an abort: a plugin file that is no shared
/// object, and a device program that fails while it runs (a gather index
/// out of range on replica 1, stopped by its device check).
#[test]
fn plugin_and_execution_faults_end_the_run_with_a_diagnostic() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let graph = dir.path().join("gather.opg");
    std::fs::write(&graph, out_of_range_gather(4)).expect("writes the graph");
    let not_a_library = dir.path().join("libbroken.so");
    std::fs::write(&not_a_library, "this is not a shared object").expect("writes");
    let plugin = support::plugin_path();
    let run = |plugin: &std::path::Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_tpu-rewrite"))
            .args(["run", "--backend", "pjrt", "--pjrt-plugin"])
            .arg(plugin)
            .arg(&graph)
            .env("NO_COLOR", "1")
            .output()
            .expect("runs the binary")
    };
    for (plugin, code, says) in [
        (not_a_library.as_path(), "tpu_rewrite::xla::plugin_load", "libbroken.so"),
        (plugin.as_path(), "tpu_rewrite::xla::device_check", "replica 1"),
    ] {
        let out = run(plugin);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(code) && err.contains(says), "{code}, {says}: {err}");
        assert!(!err.contains("panicked") && !err.contains("Aborted"), "{err}");
    }
}

/// A field of `/proc/self/status` (`Threads`, `VmRSS` in kB).
fn status_field(name: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("reads /proc/self/status");
    let line = status.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("no {name} line"));
    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("a number in {line}"))
}

/// A device program that fails while it runs (replica 1's gather index is
/// out of range, stopped by its device check), run again and again through
/// the library: each run ends with the error naming the replica, and the
/// process keeps no thread and no buffer of it (each run's 4 MiB operand
/// per replica would show in the resident set). Measured in a process of
/// its own, since the other tests of this binary start and stop threads.
#[test]
fn a_failing_device_program_leaves_no_thread_or_buffer_behind() {
    const NAME: &str = "xla_pjrt::a_failing_device_program_leaves_no_thread_or_buffer_behind";
    if std::env::var_os("TPU_REWRITE_FAULT_CHILD").is_none() {
        let out = std::process::Command::new(std::env::current_exe().expect("the test binary"))
            .args(["--exact", NAME, "--test-threads", "1", "--nocapture"])
            .env("TPU_REWRITE_FAULT_CHILD", "1")
            .output()
            .expect("runs the test binary");
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success() && text.contains("1 passed"), "{text}");
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("gather.opg");
    std::fs::write(&path, out_of_range_gather(1 << 20)).expect("writes the graph");
    let (tagged, lowered) = crate::support::lowering::prepare(path.to_str().expect("utf-8"), "1x2", 1);
    let feeds = Vec::new();
    let config = support::one_step(&feeds, Some(&tagged));
    let fail = || {
        let Err(e) = tpu_rewrite::xla::backend::run(&tagged.graphs[0], &lowered.assignment, &config) else {
            panic!("replica 1's gather index is out of range, and the run succeeded");
        };
        assert!(e.to_string().contains("replica 1"), "{e}");
    };
    // The first run loads the plugin and starts what lives as long as it does.
    fail();
    let (threads, rss_kb) = (status_field("Threads:"), status_field("VmRSS:"));
    for _ in 0..6 {
        fail();
    }
    // The plugin frees a failed execution's buffers on its own threads: on a
    // loaded machine that may finish a little after the error returns.
    let settled = |limit_kb: u64| status_field("VmRSS:").saturating_sub(rss_kb) < limit_kb;
    for _ in 0..100 {
        if settled(16 * 1024) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(status_field("Threads:") <= threads, "threads grew from {threads} to {}", status_field("Threads:"));
    let grown_kb = status_field("VmRSS:").saturating_sub(rss_kb);
    assert!(grown_kb < 16 * 1024, "the resident set grew by {grown_kb} kB over 6 failed runs of 2 × 4 MiB operands");
}
