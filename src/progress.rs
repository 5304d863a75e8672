//! Progress reports for long work (imports, lowering a large graph).
//!
//! The library only reports: a phase with its number of units, then how
//! many units are done. What to show is the caller's business; the CLI
//! draws an indicatif bar once the work has taken more than a second.
//! Reporting is cheap enough to call every few thousand nodes.

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
