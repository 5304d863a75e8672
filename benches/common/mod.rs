//! Helpers shared by the benchmarks.

use std::time::{Duration, Instant};

use tpu_rewrite::progress::process_cpu_time;

/// Wall time and the process's CPU time (all threads), so one-shot phase
/// figures stay meaningful on a loaded machine.
pub struct Timer {
    wall: Instant,
    cpu: Option<Duration>,
}

impl Timer {
    pub fn start() -> Timer {
        Timer { wall: Instant::now(), cpu: process_cpu_time() }
    }

    /// `wall/cpu ms` since [`Timer::start`] (wall only where CPU time is unknown).
    pub fn stop(&self) -> String {
        let wall = self.wall.elapsed().as_secs_f64() * 1e3;
        match (self.cpu, process_cpu_time()) {
            (Some(a), Some(b)) => format!("{wall:.0}/{:.0} ms", b.saturating_sub(a).as_secs_f64() * 1e3),
            _ => format!("{wall:.0} ms"),
        }
    }
}
