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

/// CPU time used so far by every thread of this process (lowering clones
/// replicas on rayon's threads), from Linux's per-thread schedstat; `None`
/// where that is not available.
pub fn process_cpu_time() -> Option<std::time::Duration> {
    let mut total = 0u64;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let stat = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
        total += stat.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(std::time::Duration::from_nanos(total))
}
