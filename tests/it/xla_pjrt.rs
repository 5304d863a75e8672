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
