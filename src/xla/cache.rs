//! The on-disk cache of compiled executables (`run --compile-cache DIR`).
//!
//! Meaning: one file per compiled program, `<key>.xlaexe`, where the key
//! is the SHA3-256 of everything the compiled code depends on: the module
//! text, the serialized compile options, the plugin's identity (its path,
//! size and modification time, and the C API version it reports), the
//! platform name, the client's device count and `$XLA_FLAGS` (which the
//! plugin's compiler reads). A later run of the same
//! program on the same plugin loads the stored executable
//! (`PJRT_Executable_DeserializeAndLoad`) instead of compiling it.
//!
//! Invariants: an entry is written to a uniquely named temporary file in
//! the cache directory and renamed into place, so a reader (another
//! process included) sees a whole entry or none. Each entry starts with
//! [`MAGIC`], repeats its key and carries the CRC-32C and length of the
//! serialized executable: a truncated, corrupted or misplaced entry is
//! reported as [`Lookup::Unusable`], removed, and the program is compiled
//! afresh; it never reaches the plugin. After each store the directory is
//! kept under its size cap by removing the least recently used entries
//! (a hit refreshes an entry's modification time). Cost: one hash of the
//! module text per compile, one file read per hit.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use sha3::{Digest, Sha3_256};

use super::ffi::Plugin;

/// The first bytes of every entry (format version 1).
pub const MAGIC: &[u8; 8] = b"TRXLAEX1";
/// The file extension of an entry.
pub const EXTENSION: &str = "xlaexe";
/// The default size cap: 1 GiB.
pub const DEFAULT_MAX_BYTES: u64 = 1 << 30;
/// The header: magic, the 64 hex digits of the key, the payload's CRC-32C
/// and its length.
const HEADER: usize = 8 + 64 + 4 + 8;

/// A cache directory and its size cap.
#[derive(Clone, Debug)]
pub struct CompileCache {
    /// The directory holding the entries (made when first written).
    pub dir: PathBuf,
    /// The most bytes the entries may take together.
    pub max_bytes: u64,
}

/// What a lookup found.
#[derive(Debug)]
pub enum Lookup {
    /// A whole entry: the serialized executable.
    Hit(Vec<u8>),
    /// No entry for the key.
    Miss,
    /// An entry that cannot be used (removed): why.
    Unusable(String),
}

/// How a compile used the cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CacheUse {
    /// No cache was given.
    Off,
    /// The executable was loaded from the entry `key`.
    Hit {
        /// The entry's key.
        key: String,
    },
    /// The program was compiled (and stored under `key`).
    Miss {
        /// The entry's key.
        key: String,
        /// Why an existing entry could not be used, if there was one.
        recovered: Option<String>,
        /// Why the fresh executable was not stored, if it was not.
        not_stored: Option<String>,
    },
}

impl CompileCache {
    /// The default directory: `compile/` under the cache directory
    /// ([`super::plugin::cache_dir`]).
    pub fn default_dir() -> PathBuf {
        super::plugin::cache_dir().join("compile")
    }

    /// The key of a program: see the module docs.
    pub fn key(&self, plugin: &Plugin, platform: &str, devices: usize, module: &str, options: &[u8]) -> String {
        let mut h = Sha3_256::new();
        let mut field = |bytes: &[u8]| {
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        field(plugin.path.to_string_lossy().as_bytes());
        let (size, mtime) = std::fs::metadata(&plugin.path)
            .map(|m| {
                let t = m.modified().ok().and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok());
                (m.len(), t.map_or(0, |d| d.as_nanos()))
            })
            .unwrap_or((0, 0));
        field(&size.to_le_bytes());
        field(&mtime.to_le_bytes());
        field(format!("{}.{}", plugin.version.0, plugin.version.1).as_bytes());
        field(platform.as_bytes());
        field(&(devices as u64).to_le_bytes());
        field(options);
        field(std::env::var("XLA_FLAGS").unwrap_or_default().as_bytes());
        field(module.as_bytes());
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The file of entry `key`.
    pub fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.{EXTENSION}"))
    }

    /// Reads entry `key`. An unusable entry is removed.
    pub fn load(&self, key: &str) -> Lookup {
        let path = self.path(key);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Lookup::Miss,
            Err(e) => return Lookup::Unusable(format!("cannot read {}: {e}", path.display())),
        };
        match check_entry(key, &bytes) {
            Ok(()) => {
                // A hit makes the entry the most recently used.
                if let Ok(file) = std::fs::File::options().write(true).open(&path) {
                    let _ = file.set_modified(SystemTime::now());
                }
                Lookup::Hit(bytes[HEADER..].to_vec())
            }
            Err(why) => {
                let _ = std::fs::remove_file(&path);
                Lookup::Unusable(format!("{} {why}; it was removed", path.display()))
            }
        }
    }

    /// Stores `payload` as entry `key` (temporary file, then rename), then
    /// evicts the least recently used entries beyond the size cap.
    pub fn store(&self, key: &str, payload: &[u8]) -> Result<(), String> {
        let fail = |e: std::io::Error| format!("cannot write an entry into {}: {e}", self.dir.display());
        if (HEADER + payload.len()) as u64 > self.max_bytes {
            return Err(format!(
                "the executable ({} bytes) is larger than the cache's cap ({} bytes)",
                payload.len(),
                self.max_bytes
            ));
        }
        std::fs::create_dir_all(&self.dir).map_err(fail)?;
        let mut tmp = tempfile::Builder::new().prefix(".entry-").suffix(".tmp").tempfile_in(&self.dir).map_err(fail)?;
        let mut header = Vec::with_capacity(HEADER);
        header.extend_from_slice(MAGIC);
        header.extend_from_slice(key.as_bytes());
        header.extend_from_slice(&crc32c::crc32c(payload).to_le_bytes());
        header.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        tmp.write_all(&header).and_then(|()| tmp.write_all(payload)).and_then(|()| tmp.flush()).map_err(fail)?;
        tmp.persist(self.path(key)).map_err(|e| fail(e.error))?;
        self.evict(key);
        Ok(())
    }

    /// Removes the least recently used entries (never `keep`) until the
    /// entries fit the cap.
    fn evict(&self, keep: &str) {
        let Ok(dir) = std::fs::read_dir(&self.dir) else { return };
        let mut entries: Vec<(SystemTime, u64, PathBuf)> = dir
            .filter_map(Result::ok)
            .filter(|e| e.path().extension().is_some_and(|x| x == EXTENSION))
            .filter_map(|e| {
                let m = e.metadata().ok()?;
                Some((m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len(), e.path()))
            })
            .collect();
        let mut total: u64 = entries.iter().map(|e| e.1).sum();
        entries.sort();
        let kept = self.path(keep);
        for (_, size, path) in entries {
            if total <= self.max_bytes {
                break;
            }
            if path != kept && std::fs::remove_file(&path).is_ok() {
                total = total.saturating_sub(size);
            }
        }
    }
}

/// Checks an entry's header against `key` and its payload's length and
/// checksum; the error says what is wrong.
fn check_entry(key: &str, bytes: &[u8]) -> Result<(), String> {
    if bytes.len() < HEADER || &bytes[..8] != MAGIC {
        return Err("is not a compile cache entry of this version".into());
    }
    if &bytes[8..72] != key.as_bytes() {
        return Err("belongs to another key".into());
    }
    let crc = u32::from_le_bytes(bytes[72..76].try_into().unwrap_or_default());
    let len = u64::from_le_bytes(bytes[76..84].try_into().unwrap_or_default());
    let payload = &bytes[HEADER..];
    if payload.len() as u64 != len {
        return Err(format!("is truncated ({} of {len} bytes)", payload.len()));
    }
    if crc32c::crc32c(payload) != crc {
        return Err("fails its checksum".into());
    }
    Ok(())
}

/// Whether `dir` exists and holds entry `key` (for tests and tools).
pub fn has_entry(dir: &Path, key: &str) -> bool {
    dir.join(format!("{key}.{EXTENSION}")).is_file()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(dir: &Path, max_bytes: u64) -> CompileCache {
        CompileCache { dir: dir.to_path_buf(), max_bytes }
    }

    #[test]
    fn entries_round_trip_and_damage_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let c = cache(dir.path(), 1 << 20);
        let key = "a".repeat(64);
        assert!(matches!(c.load(&key), Lookup::Miss));
        c.store(&key, b"executable bytes").unwrap();
        assert!(matches!(c.load(&key), Lookup::Hit(b) if b == b"executable bytes"));
        // Flip one payload byte: the checksum catches it and the entry goes.
        let path = c.path(&key);
        let mut bytes = std::fs::read(&path).unwrap();
        *bytes.last_mut().unwrap() ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert!(matches!(c.load(&key), Lookup::Unusable(why) if why.contains("checksum")));
        assert!(!path.exists());
        // A truncated entry.
        c.store(&key, b"executable bytes").unwrap();
        std::fs::write(&path, &std::fs::read(&path).unwrap()[..HEADER + 3]).unwrap();
        assert!(matches!(c.load(&key), Lookup::Unusable(why) if why.contains("truncated")));
        // An entry copied under another key's name.
        let other = "b".repeat(64);
        c.store(&other, b"x").unwrap();
        std::fs::copy(c.path(&other), c.path(&key)).unwrap();
        assert!(matches!(c.load(&key), Lookup::Unusable(why) if why.contains("another key")));
    }

    #[test]
    fn the_least_recently_used_entries_go_first() {
        let dir = tempfile::tempdir().unwrap();
        // Room for two entries of 100 payload bytes, not three.
        let c = cache(dir.path(), 2 * (HEADER as u64 + 100) + 10);
        let keys: Vec<String> = ["1", "2", "3"].iter().map(|k| k.repeat(64)).collect();
        let old = SystemTime::now() - std::time::Duration::from_secs(100);
        c.store(&keys[0], &[0; 100]).unwrap();
        c.store(&keys[1], &[1; 100]).unwrap();
        // Entry 1 is older than entry 0, which a hit just refreshed.
        for (k, age) in [(&keys[0], 50), (&keys[1], 60)] {
            let f = std::fs::File::options().write(true).open(c.path(k)).unwrap();
            f.set_modified(old + std::time::Duration::from_secs(100 - age)).unwrap();
        }
        assert!(matches!(c.load(&keys[0]), Lookup::Hit(_)));
        c.store(&keys[2], &[2; 100]).unwrap();
        assert!(has_entry(dir.path(), &keys[0]));
        assert!(!has_entry(dir.path(), &keys[1]), "the least recently used entry is evicted");
        assert!(has_entry(dir.path(), &keys[2]));
        // An entry larger than the cap is refused, not stored.
        assert!(c.store(&keys[1], &vec![0; 4096]).is_err());
    }
}
