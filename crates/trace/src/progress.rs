//! `ProgressLine`: a one-line progress report on standard error, drawn only when standard
//! error is a terminal (never in logs, pipes or CI), at most five times a second.
//! (The workspace has no `indicatif`; a counter line is all these commands need.)

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// A progress counter drawn on standard error.
pub(crate) struct ProgressLine {
    label: &'static str,
    total: Option<u64>,
    every: u64,
    enabled: bool,
    last_draw: Instant,
    drawn: bool,
}

impl ProgressLine {
    /// A progress line for `label`, out of `total` if known, looking at the clock every
    /// `every` updates.
    pub(crate) fn new(label: &'static str, total: Option<u64>, every: u64) -> ProgressLine {
        ProgressLine {
            label,
            total,
            every: every.max(1),
            enabled: std::io::stderr().is_terminal(),
            last_draw: Instant::now(),
            drawn: false,
        }
    }

    /// Report `done` units; cheap enough to call for every record.
    pub(crate) fn update(&mut self, done: u64) {
        if !self.enabled
            || !done.is_multiple_of(self.every)
            || self.last_draw.elapsed() < Duration::from_millis(200)
        {
            return;
        }
        self.last_draw = Instant::now();
        self.drawn = true;
        let text = match self.total {
            Some(total) if total > 0 => {
                format!("{}: {done}/{total} ({:.0}%)", self.label, done as f64 * 100.0 / total as f64)
            }
            _ => format!("{}: {done}", self.label),
        };
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r{text}\x1b[K");
        let _ = err.flush();
    }

    /// Clear the line.
    pub(crate) fn finish(&mut self) {
        if self.drawn {
            let _ = write!(std::io::stderr().lock(), "\r\x1b[K");
            self.drawn = false;
        }
    }
}

impl Drop for ProgressLine {
    fn drop(&mut self) {
        self.finish();
    }
}
