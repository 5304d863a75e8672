//! The CLI's progress bar: an indicatif bar on stderr that appears only
//! once the work has taken more than a second, so quick runs stay quiet.
//! indicatif draws nothing when stderr is not a terminal.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::progress::Progress;

/// How long work runs before the bar is shown.
const SHOW_AFTER: Duration = Duration::from_secs(1);

/// A [`Progress`] drawn as a bar once the work has taken a second.
pub struct DelayedBar {
    bar: ProgressBar,
    start: Instant,
    shown: AtomicBool,
}

impl DelayedBar {
    /// A hidden bar; it starts counting time now.
    pub fn new() -> DelayedBar {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
        let style = ProgressStyle::with_template("{msg:>16} [{bar:40}] {percent:>3}% {elapsed_precise}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        bar.set_style(style);
        DelayedBar { bar, start: Instant::now(), shown: AtomicBool::new(false) }
    }

    fn show_if_slow(&self) {
        if !self.shown.load(Ordering::Relaxed) && self.start.elapsed() >= SHOW_AFTER {
            self.shown.store(true, Ordering::Relaxed);
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
        }
    }
}

impl Default for DelayedBar {
    fn default() -> Self {
        DelayedBar::new()
    }
}

impl Progress for DelayedBar {
    fn phase(&self, name: &'static str, total: u64) {
        self.bar.set_message(name);
        self.bar.set_length(total);
        self.bar.set_position(0);
        self.show_if_slow();
    }

    fn advance(&self, units: u64) {
        self.bar.inc(units);
        self.show_if_slow();
    }
}

impl Drop for DelayedBar {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}
