//! Finding the PJRT plugin, and fetching the pinned CPU plugin into the
//! cache.
//!
//! Order: `--pjrt-plugin PATH`, then `$TPU_REWRITE_PJRT_PLUGIN`, then the
//! cached copy of the pinned CPU plugin (PyPI `xla-cpu-pjrt==0.0.1`,
//! sha256 [`PINNED_SHA256`]) under [`cache_dir`]. The cache is outside git:
//! `$TPU_REWRITE_CACHE_DIR`, else `$XDG_CACHE_HOME/tpu-rewrite`, else
//! `~/.cache/tpu-rewrite`. [`fetch_pinned`] fills it with `pip download
//! --no-deps --require-hashes` and unpacks the wheel with Python's zipfile
//! module; the shell script `.ci/fetch-pjrt` does the same for CI.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::error::XlaError;

/// The pinned CPU plugin's PyPI requirement.
pub const PINNED_REQUIREMENT: &str = "xla-cpu-pjrt==0.0.1";
/// The sha256 of `xla_cpu_pjrt-0.0.1-py3-none-manylinux_2_27_x86_64.whl`.
pub const PINNED_SHA256: &str = "55837b6b7b47daa717f2d9a5a03563ea0ceaa338d06a81a1e2d3f060d960decc";
/// The directory the wheel unpacks into, under the cache.
pub const PINNED_DIR: &str = "xla-cpu-pjrt-0.0.1";
/// The plugin inside the unpacked wheel.
pub const PLUGIN_IN_WHEEL: &str = "xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so";
/// The C API header inside the unpacked wheel.
pub const HEADER_IN_WHEEL: &str = "xla_plugins/xla_cpu_pjrt/include/pjrt_c_api.h";
/// The environment variable naming a plugin.
pub const PLUGIN_ENV: &str = "TPU_REWRITE_PJRT_PLUGIN";

/// The cache directory (see the module docs).
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("TPU_REWRITE_CACHE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("tpu-rewrite");
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    home.join(".cache").join("tpu-rewrite")
}

/// Where the pinned plugin lives once fetched.
pub fn cached_plugin() -> PathBuf {
    cache_dir().join(PINNED_DIR).join(PLUGIN_IN_WHEEL)
}

/// Where the pinned plugin's header lives once fetched.
pub fn cached_header() -> PathBuf {
    cache_dir().join(PINNED_DIR).join(HEADER_IN_WHEEL)
}

/// The plugin to load: `flag`, then `$TPU_REWRITE_PJRT_PLUGIN`, then the cache.
pub fn locate(flag: Option<&Path>) -> Result<PathBuf, XlaError> {
    if let Some(path) = flag {
        return Ok(path.to_path_buf());
    }
    if let Some(path) = std::env::var_os(PLUGIN_ENV).filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    let cached = cached_plugin();
    if cached.is_file() {
        Ok(cached)
    } else {
        Err(XlaError::NoPlugin { cached: cached.display().to_string() })
    }
}

/// Downloads and unpacks the pinned plugin into the cache unless it is
/// there already; returns the plugin's path. Callers that may race (tests)
/// hold a lock around it.
pub fn fetch_pinned() -> Result<PathBuf, XlaError> {
    let plugin = cached_plugin();
    if plugin.is_file() && cached_header().is_file() {
        return Ok(plugin);
    }
    let fail = |message: String| XlaError::Fetch { message };
    let cache = cache_dir();
    std::fs::create_dir_all(&cache).map_err(|e| fail(format!("cannot create {}: {e}", cache.display())))?;
    let staging = tempfile::Builder::new()
        .prefix(".fetch-")
        .tempdir_in(&cache)
        .map_err(|e| fail(format!("cannot create a directory in {}: {e}", cache.display())))?;
    let requirements = staging.path().join("requirements.txt");
    std::fs::write(&requirements, format!("{PINNED_REQUIREMENT} --hash=sha256:{PINNED_SHA256}\n"))
        .map_err(|e| fail(format!("cannot write {}: {e}", requirements.display())))?;
    let download = staging.path().join("download");
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    run(Command::new(&python)
        .args(["-m", "pip", "download", "--no-deps", "--require-hashes", "--only-binary=:all:", "-r"])
        .arg(&requirements)
        .arg("-d")
        .arg(&download))
    .map_err(fail)?;
    let wheel = std::fs::read_dir(&download)
        .map_err(|e| fail(format!("cannot read {}: {e}", download.display())))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| fail("pip downloaded no wheel".into()))?;
    let unpacked = staging.path().join(PINNED_DIR);
    run(Command::new(&python).args(["-m", "zipfile", "-e"]).arg(&wheel).arg(&unpacked)).map_err(fail)?;
    if !unpacked.join(PLUGIN_IN_WHEEL).is_file() {
        return Err(fail(format!("the wheel has no {PLUGIN_IN_WHEEL}")));
    }
    let target = cache.join(PINNED_DIR);
    if target.exists() {
        std::fs::remove_dir_all(&target).map_err(|e| fail(format!("cannot replace {}: {e}", target.display())))?;
    }
    std::fs::rename(&unpacked, &target).map_err(|e| fail(format!("cannot move into {}: {e}", target.display())))?;
    Ok(plugin)
}

/// Runs a command; its stderr becomes the error.
fn run(command: &mut Command) -> Result<(), String> {
    let output = command.output().map_err(|e| format!("cannot run {command:?}: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!("{command:?} failed ({}):\n{}", output.status, String::from_utf8_lossy(&output.stderr)))
    }
}
