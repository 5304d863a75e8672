//! Reading inputs and writing outputs without harming the file system.
//!
//! An output path (`-o`, `--write`) that names a regular file, or nothing
//! yet, is written to a temporary file beside it, `.NAME.tpu-rewrite-tmp`,
//! which is then renamed over it: a failed or interrupted run never
//! truncates an existing file, and `fmt --write` never loses its input. A
//! symlink is followed, so its target is replaced and the link stays. The
//! temporary is created with the process umask's mode, and a file that is
//! replaced keeps its own permissions. A temporary left by a killed run is
//! replaced on the next write to the same target.
//!
//! Anything else (a FIFO, a character device such as `/dev/null`,
//! `/dev/stdout`) is opened and written directly: replacing it would
//! destroy it. Errors name the path as the user wrote it.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use super::error::CliError;

/// Where an input comes from.
#[derive(Clone, Debug)]
pub enum InputPath {
    Stdin,
    File(PathBuf),
}

impl InputPath {
    /// `-` is standard input; anything else a file.
    pub fn parse(arg: &str) -> InputPath {
        if arg == "-" {
            InputPath::Stdin
        } else {
            InputPath::File(PathBuf::from(arg))
        }
    }

    /// The name shown in diagnostics.
    pub fn display_name(&self) -> String {
        match self {
            InputPath::Stdin => "<stdin>".to_string(),
            InputPath::File(p) => p.display().to_string(),
        }
    }

    /// Reads the whole input; one larger than the parsers read (spans hold
    /// 32-bit offsets) is refused before it is read.
    pub fn read(&self) -> std::io::Result<Vec<u8>> {
        let limit = crate::syntax::MAX_SOURCE_BYTES as u64;
        let too_large = |size: u64| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("the input is {size} bytes; inputs of at most {limit} bytes (4 GiB) are read"),
            )
        };
        match self {
            InputPath::Stdin => {
                let mut buf = Vec::new();
                std::io::stdin().lock().take(limit + 1).read_to_end(&mut buf)?;
                match buf.len() as u64 {
                    size if size > limit => Err(too_large(size)),
                    _ => Ok(buf),
                }
            }
            InputPath::File(p) => match std::fs::metadata(p) {
                Ok(meta) if meta.is_file() && meta.len() > limit => Err(too_large(meta.len())),
                _ => std::fs::read(p),
            },
        }
    }
}

/// The suffix of the temporary beside an output.
pub const TEMP_SUFFIX: &str = ".tpu-rewrite-tmp";

/// The most symlinks followed from an output path (Linux's own limit).
const MAX_SYMLINKS: usize = 40;

/// How an output path is written.
#[derive(Debug, PartialEq, Eq)]
enum Target {
    /// A regular file or a missing path (after symlinks): temporary + rename.
    Replace(PathBuf),
    /// A FIFO, a device, a socket: written in place.
    Direct,
}

/// Follows the symlinks of `path` to the file they end at (which need not exist).
fn resolve_symlinks(path: &Path) -> std::io::Result<PathBuf> {
    let mut current = path.to_path_buf();
    for _ in 0..MAX_SYMLINKS {
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let link = std::fs::read_link(&current)?;
                current = match current.parent() {
                    Some(dir) if link.is_relative() => dir.join(link),
                    _ => link,
                };
            }
            _ => return Ok(current),
        }
    }
    Err(std::io::Error::other("too many levels of symbolic links"))
}

/// Decides how to write `path`.
fn classify(path: &Path) -> std::io::Result<Target> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => Ok(Target::Replace(resolve_symlinks(path)?)),
        Ok(meta) if meta.is_dir() => Err(std::io::Error::other("is a directory")),
        Ok(_) => Ok(Target::Direct),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Target::Replace(resolve_symlinks(path)?)),
        Err(e) => Err(e),
    }
}

/// The temporary beside `target`: `.NAME.tpu-rewrite-tmp` in its directory.
pub fn temp_path(target: &Path) -> PathBuf {
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let file = format!(".{name}{TEMP_SUFFIX}");
    match target.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.join(file),
        _ => PathBuf::from(file),
    }
}

/// Writes `bytes` to `target` through its temporary and a rename.
fn replace(target: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if target.file_name().is_none() {
        return Err(std::io::Error::other("not a file name"));
    }
    let tmp = temp_path(target);
    // A temporary left by a killed run goes first.
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let written = (|| {
        // `create_new` opens with mode 0666 under the umask, and never
        // follows a symlink planted at the temporary's name.
        let mut file = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        if let Ok(meta) = std::fs::metadata(target) {
            // A replaced file keeps its permissions.
            file.set_permissions(meta.permissions())?;
        }
        std::fs::rename(&tmp, target)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Writes `bytes` to the file at `path`: see the module documentation.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    let fail = |e: std::io::Error| CliError::Write { path: path.display().to_string(), reason: e.to_string() };
    match classify(path).map_err(fail)? {
        Target::Replace(target) => replace(&target, bytes).map_err(fail),
        Target::Direct => {
            let mut file = std::fs::OpenOptions::new().write(true).open(path).map_err(fail)?;
            match file.write_all(bytes).and_then(|()| file.flush()) {
                // A reader that went away (a FIFO, `/dev/stdout` into `| head`) is not our error.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                other => other.map_err(fail),
            }
        }
    }
}

/// Writes to `path`, or to standard output when `path` is `None` or `-`.
pub fn write_output(path: Option<&Path>, bytes: &[u8]) -> Result<(), CliError> {
    match path {
        Some(p) if p != Path::new("-") => write_file(p, bytes),
        _ => {
            if !super::console::stdout_is_open() {
                return Err(CliError::StdoutClosed);
            }
            let stdout = std::io::stdout();
            let mut lock = stdout.lock();
            match lock.write_all(bytes).and_then(|_| lock.flush()) {
                // A closed pipe (e.g. `| head`) is not an error of ours.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                Err(e) => Err(CliError::Write { path: "standard output".to_string(), reason: e.to_string() }),
                Ok(()) => Ok(()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_temporary_sits_beside_the_target() {
        assert_eq!(temp_path(Path::new("a/b.opg")), PathBuf::from("a/.b.opg.tpu-rewrite-tmp"));
        assert_eq!(temp_path(Path::new("b.opg")), PathBuf::from(".b.opg.tpu-rewrite-tmp"));
    }
}
