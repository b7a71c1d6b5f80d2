//! `ProgressLine`: a one-line `\r` status on standard error while a run goes on (elapsed
//! time, responses, current rate, errors), for terminals only.

use std::io::Write;
use std::time::{Duration, Instant};

/// A progress line redrawn at most once a second.
pub struct ProgressLine {
    started: Instant,
    last: Instant,
    last_requests: u64,
    drawn: bool,
}

impl ProgressLine {
    /// A line for a run started at `started`.
    pub fn new(started: Instant) -> ProgressLine {
        ProgressLine { started, last: started, last_requests: 0, drawn: false }
    }

    /// Redraw if a second has passed; `warming` marks the warm-up.
    pub fn update(&mut self, now: Instant, requests: u64, errors: u64, warming: bool) {
        let since = now.saturating_duration_since(self.last);
        if since < Duration::from_secs(1) {
            return;
        }
        let rate = requests.saturating_sub(self.last_requests) as f64 / since.as_secs_f64();
        self.last = now;
        self.last_requests = requests;
        self.drawn = true;
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r\x1b[K{:>6.1} s  {}{requests} responses  {rate:.0} req/s  {errors} errors",
            now.saturating_duration_since(self.started).as_secs_f64(),
            if warming { "(warm-up) " } else { "" },
        );
        let _ = err.flush();
    }

    /// Clear the line.
    pub fn finish(&mut self) {
        if self.drawn {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[K");
            let _ = err.flush();
        }
    }
}
