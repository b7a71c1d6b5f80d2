//! `ProgressLine`: a one-line status (indicatif spinner) on standard error while a run goes
//! on — elapsed time, responses, current rate, errors; indicatif draws nothing when standard
//! error is not a terminal.

use indicatif::{ProgressBar, ProgressStyle};
use std::time::{Duration, Instant};

/// A status line updated at most once a second.
pub struct ProgressLine {
    bar: ProgressBar,
    last: Instant,
    last_requests: u64,
}

impl ProgressLine {
    /// A line for a run started at `started`.
    pub fn new(started: Instant) -> ProgressLine {
        let bar = ProgressBar::new_spinner();
        if let Ok(style) = ProgressStyle::with_template("{spinner} {elapsed} {msg}") {
            bar.set_style(style);
        }
        ProgressLine { bar, last: started, last_requests: 0 }
    }

    /// Update if a second has passed; `warming` marks the warm-up.
    pub fn update(&mut self, now: Instant, requests: u64, errors: u64, warming: bool) {
        let since = now.saturating_duration_since(self.last);
        if since < Duration::from_secs(1) {
            return;
        }
        let rate = requests.saturating_sub(self.last_requests) as f64 / since.as_secs_f64();
        self.last = now;
        self.last_requests = requests;
        self.bar.set_message(format!(
            "{}{requests} responses  {rate:.0} req/s  {errors} errors",
            if warming { "(warm-up) " } else { "" }
        ));
        self.bar.tick();
    }

    /// Remove the line.
    pub fn finish(&mut self) {
        self.bar.finish_and_clear();
    }
}
