//! Outputs that respect the file system, and standard streams that never
//! panic: `-o` and `--write` replace a regular file through a temporary
//! beside it, follow symlinks, write FIFOs and devices in place, honour the
//! umask, clean up stale temporaries; a closed or full stdout/stderr gives
//! a non-zero exit, never a panic (101) and never a silent success.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_tpu-rewrite");

fn example(name: &str) -> String {
    format!("{}/examples/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn fmt_to(target: &std::path::Path) -> Output {
    Command::new(BIN)
        .args(["fmt", &example("two_clusters.opg"), "-o", target.to_str().unwrap()])
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

/// Runs a shell line with `$BIN` and `$EX` (an example) set.
fn sh(line: &str) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(line)
        .env("BIN", BIN)
        .env("EX", example("two_clusters.opg"))
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

fn canonical() -> Vec<u8> {
    Command::new(BIN).args(["fmt", &example("two_clusters.opg")]).output().unwrap().stdout
}

#[test]
fn a_symlink_is_followed_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.opg");
    let link = dir.path().join("link.opg");
    std::fs::write(&real, "old").unwrap();
    std::os::unix::fs::symlink("real.opg", &link).unwrap();
    let o = fmt_to(&link);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read(&real).unwrap(), canonical());
    // A dangling link gets its target created.
    std::fs::remove_file(&real).unwrap();
    assert!(fmt_to(&link).status.success());
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read(&real).unwrap(), canonical());
}

#[test]
fn a_fifo_is_written_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe");
    let status = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(status.success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    let o = fmt_to(&fifo);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(reader.join().unwrap(), canonical());
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
}

#[test]
fn a_character_device_stays_a_device() {
    // /dev/zero rather than /dev/null: tests of other checkouts on this
    // machine may replace /dev/null with a file while this one runs.
    let o = fmt_to(std::path::Path::new("/dev/zero"));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(std::fs::metadata("/dev/zero").unwrap().file_type().is_char_device());
    // `/dev/stdout` is a symlink into /proc to a pipe: written directly.
    let o = sh("\"$BIN\" fmt \"$EX\" -o /dev/stdout | cat");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.stdout, canonical());
}

#[test]
fn a_new_file_gets_the_umask_mode_and_a_replaced_one_keeps_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.opg");
    let o = sh(&format!("umask 027; exec \"$BIN\" fmt \"$EX\" -o '{}'", out.display()));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::metadata(&out).unwrap().permissions().mode() & 0o777, 0o640);
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o604)).unwrap();
    assert!(fmt_to(&out).status.success());
    assert_eq!(std::fs::metadata(&out).unwrap().permissions().mode() & 0o777, 0o604);
}

#[test]
fn a_stale_temporary_is_replaced_and_none_is_left() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.opg");
    let stale = dir.path().join(".out.opg.tpu-rewrite-tmp");
    std::fs::write(&stale, vec![b'x'; 4096]).unwrap();
    assert!(fmt_to(&out).status.success());
    assert!(!stale.exists(), "the stale temporary is still there");
    assert_eq!(std::fs::read(&out).unwrap(), canonical());
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, vec![std::ffi::OsString::from("out.opg")]);
}

#[test]
fn a_bad_directory_error_names_the_users_path() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("missing").join("out.opg");
    let o = fmt_to(&out);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&out.display().to_string()), "{err}");
    assert!(!err.contains("tpu-rewrite-tmp"), "{err}");
    assert!(err.contains("tpu_rewrite::cli::write"), "{err}");
    let o = fmt_to(dir.path());
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("is a directory"));
}

#[test]
fn a_closed_stdout_fails() {
    let o = sh("exec \"$BIN\" fmt \"$EX\" >&-");
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("tpu_rewrite::cli::stdout_closed"));
    // Redirected to /dev/null it is open, and succeeds.
    assert_eq!(sh("exec \"$BIN\" fmt \"$EX\" >/dev/null").status.code(), Some(0));
}

#[test]
fn a_full_or_closed_stderr_never_panics() {
    // A write error other than EPIPE: exit 1, not 101.
    let o = sh("exec \"$BIN\" check \"$EX\" 2>/dev/full");
    assert_eq!(o.status.code(), Some(1));
    // A pipe whose reader is gone (EPIPE): quiet, and the check's own status.
    for (file, code) in [(example("two_clusters.opg"), 0), ("/nonexistent.opg".to_string(), 1)] {
        let o = Command::new(BIN)
            .args(["check", &file])
            .stderr(Stdio::from(pipe_without_reader()))
            .stdout(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(code), "{file}");
    }
}

/// The write end of a pipe whose read end is already closed.
fn pipe_without_reader() -> std::os::fd::OwnedFd {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: `pipe` fills both descriptors, which are then owned here.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: as above; the read end is closed at once.
    drop(unsafe { std::os::fd::OwnedFd::from_raw_fd(fds[0]) });
    unsafe { std::os::fd::OwnedFd::from_raw_fd(fds[1]) }
}
