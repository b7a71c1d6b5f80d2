//! `Draining`: the old generations of a server that still finish their connections after a
//! reload or upgrade, each with the moment it was told to; polled (every 10 ms while a run
//! waits) so that the time each takes to exit is known to that resolution.

use std::time::{Duration, Instant};

use locus_rig::ChildGuard;

/// How long an old generation may take to finish and exit (Locus's drain timeout is 10 s).
pub const DRAIN_DEADLINE: Duration = Duration::from_secs(20);

/// What the old generations of a run did.
#[derive(Clone, Debug, Default)]
pub struct DrainReport {
    /// Longest time from being told to finish to exiting, in ms (`None`: none tracked).
    pub longest_ms: Option<u64>,
    /// Old generations still running at [`DRAIN_DEADLINE`] (then killed).
    pub stuck: u32,
}

/// Old generations still finishing.
#[derive(Default)]
pub struct Draining {
    old: Vec<(ChildGuard, Instant)>,
    pub report: DrainReport,
}

impl Draining {
    /// `old` was told to finish just now.
    pub fn push(&mut self, old: ChildGuard) {
        self.old.push((old, Instant::now()));
    }

    pub fn is_empty(&self) -> bool {
        self.old.is_empty()
    }

    /// Note the generations that have exited (and kill those past the deadline).
    pub fn poll(&mut self) {
        let report = &mut self.report;
        self.old.retain_mut(|(child, since)| {
            let exited = child.exited().is_some();
            let late = !exited && since.elapsed() >= DRAIN_DEADLINE;
            if exited || late {
                report.stuck += u32::from(late);
                let ms = since.elapsed().as_millis() as u64;
                report.longest_ms = Some(report.longest_ms.map_or(ms, |m| m.max(ms)));
            }
            !(exited || late)
        });
    }

    /// Wait until every old generation has exited or passed the deadline.
    pub fn wait_all(&mut self) {
        self.poll();
        while !self.is_empty() {
            std::thread::sleep(Duration::from_millis(10));
            self.poll();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exited_generation_is_timed_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = std::process::Command::new("sleep");
        cmd.arg("0.1");
        let mut d = Draining::default();
        d.push(ChildGuard::spawn("sleeper", cmd, &dir.path().join("log")).unwrap());
        d.poll();
        assert!(!d.is_empty() && d.report.longest_ms.is_none());
        d.wait_all();
        let ms = d.report.longest_ms.unwrap();
        assert!((100..1000).contains(&ms), "{ms}");
        assert_eq!(d.report.stuck, 0);
    }
}
