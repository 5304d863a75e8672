//! Reading inputs and writing outputs safely.
//!
//! Outputs go to a temporary file in the target's directory, which is then
//! renamed over the target: a failed or interrupted run never truncates an
//! existing file, and `fmt --write` never loses the input.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

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

/// Writes `bytes` to `path` atomically: temporary file, then rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut tmp = tempfile::NamedTempFile::new_in(&dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    if let Ok(meta) = std::fs::metadata(path) {
        // Keep the permissions of a file we replace.
        let _ = std::fs::set_permissions(tmp.path(), meta.permissions());
    }
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Writes to `path` atomically, or to standard output when `path` is `None`.
pub fn write_output(path: Option<&Path>, bytes: &[u8]) -> std::io::Result<()> {
    match path {
        Some(p) if p != Path::new("-") => write_atomic(p, bytes),
        _ => {
            let stdout = std::io::stdout();
            let mut lock = stdout.lock();
            match lock.write_all(bytes).and_then(|_| lock.flush()) {
                // A closed pipe (e.g. `| head`) is not an error of ours.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                other => other,
            }
        }
    }
}
