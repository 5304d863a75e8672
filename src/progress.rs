//! Progress reports for long work (imports, lowering a large graph).
//!
//! The library only reports: a phase with its number of units, then how
//! many units are done. What to show is the caller's business; the CLI
//! draws an indicatif bar once the work has taken more than a second.
//! Reporting is cheap enough to call every few thousand nodes.
//!
//! [`process_cpu_time`] is the clock the CLI's `--time-passes` and the
//! benchmarks read: on a shared machine CPU time tells more than wall time.

/// Receives progress reports. Implementations must be cheap and must not
/// panic; they are called from the thread doing the work.
pub trait Progress: Sync {
    /// A new phase of `total` units begins (a count of nodes, say).
    fn phase(&self, name: &'static str, total: u64);
    /// `units` more units of the current phase are done.
    fn advance(&self, units: u64);
}

/// Discards every report.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn phase(&self, _name: &'static str, _total: u64) {}
    fn advance(&self, _units: u64) {}
}

/// How many units of work pass between two reports.
pub const REPORT_EVERY: u64 = 4096;

/// CPU time used so far by every thread of this process, including
/// threads that have already exited (the mesh runs each step on fresh
/// threads; lowering clones replicas on rayon's), from the process CPU-time
/// clock; `None` where there is none.
pub fn process_cpu_time() -> Option<std::time::Duration> {
    #[cfg(unix)]
    {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `ts` is a valid, writable timespec for the call.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
        if rc != 0 {
            return None;
        }
        Some(std::time::Duration::new(u64::try_from(ts.tv_sec).ok()?, u32::try_from(ts.tv_nsec).ok()?))
    }
    #[cfg(not(unix))]
    None
}
