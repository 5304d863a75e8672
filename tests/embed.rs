//! A crate that embeds tpu-rewrite and has its own `#[global_allocator]`
//! (tests/embed/) builds and runs: the library sets no allocator.
//!
//! The crate is copied to a temporary directory with the path of this
//! checkout and our `Cargo.lock` (so the build is offline and uses the
//! same versions), then built by cargo into `target/embed`.

use std::path::Path;
use std::process::Command;

#[test]
fn an_embedding_crate_with_its_own_allocator_builds_and_runs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().expect("a temporary directory");
    let manifest = std::fs::read_to_string(root.join("tests/embed/Cargo.toml")).expect("the embed manifest");
    let root_text = root.to_str().expect("a UTF-8 checkout path").replace('\\', "/");
    std::fs::write(dir.path().join("Cargo.toml"), manifest.replace("TPU_REWRITE_PATH", &root_text)).expect("writes");
    std::fs::create_dir(dir.path().join("src")).expect("creates src");
    std::fs::copy(root.join("tests/embed/src/main.rs"), dir.path().join("src/main.rs")).expect("copies main.rs");
    std::fs::copy(root.join("Cargo.lock"), dir.path().join("Cargo.lock")).expect("copies Cargo.lock");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let output = Command::new(cargo)
        .args(["run", "--offline", "--quiet", "--manifest-path"])
        .arg(dir.path().join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", root.join("target/embed"))
        .output()
        .expect("cargo runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the embedding crate failed to build or run:\n{stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("graph @main"), "{stdout}");
    assert!(stdout.contains("allocations: "), "{stdout}");
    assert!(!stdout.contains("allocations: 0\n"), "the embedder's allocator served the library: {stdout}");
}
