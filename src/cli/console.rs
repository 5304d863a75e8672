//! Standard error and standard output that never panic.
//!
//! `eprintln!` panics when stderr is a closed pipe or a full device, which
//! turns `check` of a valid file into exit 101. Every line the CLI writes to
//! stderr goes through [`stderr_write`] instead (the `errln!` and `errprint!`
//! macros): a broken pipe (EPIPE) silences the rest of the diagnostics and
//! leaves the exit status alone, any other write error ends the process
//! with exit 1. Rust's standard streams report success when the descriptor
//! is closed (EBADF); [`stdout_is_open`] tells the command so that writing
//! its result to a closed stdout fails instead of exiting 0.

use std::fmt;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once stderr reported a broken pipe: later diagnostics are dropped.
static STDERR_GONE: AtomicBool = AtomicBool::new(false);

/// Writes formatted text to stderr: quiet after EPIPE, exit 1 on any other
/// write error.
pub fn stderr_write(args: fmt::Arguments<'_>) {
    if STDERR_GONE.load(Ordering::Relaxed) {
        return;
    }
    let stderr = std::io::stderr();
    let mut lock = stderr.lock();
    match lock.write_fmt(args).and_then(|()| lock.flush()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => STDERR_GONE.store(true, Ordering::Relaxed),
        // Nowhere is left to say what went wrong; the status says it.
        Err(_) => std::process::exit(1),
    }
}

/// Set when descriptor 1 was closed as the process started.
static STDOUT_CLOSED_AT_START: AtomicBool = AtomicBool::new(false);

/// True when file descriptor 1 is open now (unix; elsewhere always true).
fn descriptor_1_is_open() -> bool {
    #[cfg(unix)]
    {
        // SAFETY: F_GETFD only reads the descriptor's flags.
        unsafe { libc::fcntl(libc::STDOUT_FILENO, libc::F_GETFD) != -1 }
    }
    #[cfg(not(unix))]
    {
        true
    }
}

/// Records whether stdout is open. The binary calls this from a static
/// constructor, before Rust's runtime reopens closed standard descriptors
/// on `/dev/null` (after which a closed stdout looks open).
pub fn record_stdout_at_start() {
    STDOUT_CLOSED_AT_START.store(!descriptor_1_is_open(), Ordering::Relaxed);
}

/// True unless stdout is closed (`>&-`), now or when the process started.
pub fn stdout_is_open() -> bool {
    !STDOUT_CLOSED_AT_START.load(Ordering::Relaxed) && descriptor_1_is_open()
}

/// `eprintln!` that never panics: see [`stderr_write`].
macro_rules! errln {
    () => {
        $crate::cli::console::stderr_write(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::cli::console::stderr_write(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprint!` that never panics: see [`stderr_write`].
macro_rules! errprint {
    ($($arg:tt)*) => {
        $crate::cli::console::stderr_write(format_args!($($arg)*))
    };
}
