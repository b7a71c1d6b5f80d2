//! `ProgressLine`: a progress bar (indicatif) on standard error for long trace commands;
//! indicatif draws nothing when standard error is not a terminal (logs, pipes, CI).

use indicatif::{ProgressBar, ProgressStyle};

/// A progress counter drawn on standard error.
pub(crate) struct ProgressLine {
    bar: ProgressBar,
    every: u64,
}

impl ProgressLine {
    /// A progress line for `label`, out of `total` if known, redrawn at most every `every`
    /// updates (indicatif also limits its own redraw rate).
    pub(crate) fn new(label: &'static str, total: Option<u64>, every: u64) -> ProgressLine {
        let (bar, template) = match total {
            Some(t) => (ProgressBar::new(t), "{msg}: {bar:30} {pos}/{len} ({percent}%) {elapsed}"),
            None => (ProgressBar::new_spinner(), "{msg}: {pos} {per_sec} {elapsed}"),
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style);
        }
        bar.set_message(label);
        ProgressLine { bar, every: every.max(1) }
    }

    /// Report `done` units; cheap enough to call for every record.
    pub(crate) fn update(&mut self, done: u64) {
        if done.is_multiple_of(self.every) {
            self.bar.set_position(done);
        }
    }

    /// Remove the bar.
    pub(crate) fn finish(&mut self) {
        self.bar.finish_and_clear();
    }
}

impl Drop for ProgressLine {
    fn drop(&mut self) {
        self.finish();
    }
}
