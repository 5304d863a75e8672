//! Filters the PJRT plugin's harmless log lines out of stderr.
//!
//! XLA's CPU plugin logs through absl straight to file descriptor 2:
//! `WARNING: All log messages before absl::InitializeLog() …`, info lines
//! (`I0000 … cpu_device_count set via create_options: 8`) and
//! `library_matcher` notes, and the SPMD partitioner's warning that a
//! maximally sharded value moves whole between cores (what model
//! parallelism asks for). While a [`Filter`] lives, descriptor 2 is a
//! pipe whose lines a thread copies to the real stderr, minus those.
//! Warnings and errors (`W…`, `E…`, `F…` lines) pass. Unix only; elsewhere
//! [`Filter::install`] does nothing.
//!
//! Before the plugin loads, [`quiet_plugin_logging`] sets
//! `TF_CPP_MIN_LOG_LEVEL=1` when the environment does not choose a level,
//! so the plugin itself logs warnings and errors only, in the CLI and in
//! any program using the library. [`set_verbose`] (the CLI's `-v`) lets
//! everything through: level 0 and no filter.

use std::sync::atomic::{AtomicBool, Ordering};

/// The environment variable XLA's logging reads for its least severity.
pub const LOG_LEVEL_ENV: &str = "TF_CPP_MIN_LOG_LEVEL";

static VERBOSE: AtomicBool = AtomicBool::new(false);

/// Lets the plugin's own logging through (`-v`): call it before the plugin loads.
pub fn set_verbose(on: bool) {
    VERBOSE.store(on, Ordering::Relaxed);
}

/// True after [`set_verbose`]`(true)`.
pub fn verbose() -> bool {
    VERBOSE.load(Ordering::Relaxed)
}

/// Chooses the plugin's log level, once, before it loads: the
/// environment's `TF_CPP_MIN_LOG_LEVEL` if set, else 0 when verbose and 1
/// (warnings and errors) otherwise.
pub fn quiet_plugin_logging() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if std::env::var_os(LOG_LEVEL_ENV).is_none() {
            std::env::set_var(LOG_LEVEL_ENV, if verbose() { "0" } else { "1" });
        }
    });
}

/// True for a plugin log line that says nothing to a user.
pub fn is_noise(line: &str) -> bool {
    line.starts_with("WARNING: All log messages before absl::InitializeLog()")
        || line.contains("library_matcher")
        // Expected with maximal shardings: a value moves whole between cores.
        || line.contains("[SPMD] Involuntary full rematerialization")
        || (line.starts_with('I') && line.as_bytes().get(1..5).is_some_and(|d| d.iter().all(u8::is_ascii_digit)))
}

/// An installed filter; dropping it restores stderr.
pub struct Filter {
    #[cfg(unix)]
    saved: i32,
    #[cfg(unix)]
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Filter {
    /// Routes descriptor 2 through the filter; `None` if that fails, or
    /// when verbose (everything passes).
    #[cfg(unix)]
    pub fn install() -> Option<Filter> {
        use std::io::{BufRead, Write};
        use std::os::fd::FromRawFd;
        if verbose() {
            return None;
        }
        let mut fds = [0i32; 2];
        // SAFETY: plain descriptor calls; every result is checked.
        unsafe {
            if libc::pipe(fds.as_mut_ptr()) != 0 {
                return None;
            }
            let saved = libc::dup(2);
            if saved < 0 || libc::dup2(fds[1], 2) < 0 {
                libc::close(fds[0]);
                libc::close(fds[1]);
                return None;
            }
            libc::close(fds[1]);
            let reader = std::fs::File::from_raw_fd(fds[0]);
            let out = libc::dup(saved);
            let mut sink = std::fs::File::from_raw_fd(out);
            let thread = std::thread::spawn(move || {
                for line in std::io::BufReader::new(reader).lines().map_while(Result::ok) {
                    if !is_noise(&line) {
                        let _ = writeln!(sink, "{line}");
                    }
                }
            });
            Some(Filter { saved, thread: Some(thread) })
        }
    }

    /// Does nothing off Unix.
    #[cfg(not(unix))]
    pub fn install() -> Option<Filter> {
        None
    }
}

#[cfg(unix)]
impl Drop for Filter {
    fn drop(&mut self) {
        use std::io::Write;
        let _ = std::io::stderr().flush();
        // SAFETY: puts the saved descriptor back on 2, which closes the
        // pipe's last write end, so the thread sees EOF and ends.
        unsafe {
            libc::dup2(self.saved, 2);
            libc::close(self.saved);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::is_noise;

    #[test]
    fn plugin_info_lines_are_noise_and_errors_are_not() {
        assert!(is_noise("I0000 00:00:1795461745.331343   21656 pjrt_c_api_cpu_internal.cc:59] cpu_device_count set via create_options: 8"));
        assert!(is_noise("WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"));
        assert!(is_noise("something library_matcher.cc:42] skipped"));
        assert!(!is_noise("E0000 00:00:1 something failed"));
        assert!(!is_noise("  × XLA could not compile cluster `cluster`:"));
        assert!(!is_noise("Illegal instruction"));
    }
}
