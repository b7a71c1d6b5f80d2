//! `PidGuard`: a process this bench did not start as its child but must still end — a
//! daemonized NGINX master found in its pid file, and the master a binary upgrade makes —
//! killed with its descendants when the guard drops.

use std::time::{Duration, Instant};

/// A process adopted by pid, SIGKILLed (with its descendants) on drop.
pub struct PidGuard {
    pid: u32,
}

impl PidGuard {
    pub fn adopt(pid: u32) -> PidGuard {
        PidGuard { pid }
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether it still runs (a zombie does not).
    pub fn alive(&self) -> bool {
        state_and_parent(self.pid).is_some_and(|(state, _)| state != 'Z')
    }

    /// Its living direct children, less those in `except`.
    pub fn workers(&self, except: &[u32]) -> Vec<u32> {
        let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
        dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|p| !except.contains(p))
            .filter(|&p| {
                state_and_parent(p).is_some_and(|(state, parent)| parent == self.pid && state != 'Z')
            })
            .collect()
    }
}

/// The state letter and parent pid of `pid`, from `/proc/<pid>/stat`.
fn state_and_parent(pid: u32) -> Option<(char, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: the fields follow the last `)`.
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    let state = fields.next()?.chars().next()?;
    Some((state, fields.next()?.parse().ok()?))
}

impl Drop for PidGuard {
    fn drop(&mut self) {
        let mut all = locus_rig::descendants(self.pid);
        all.push(self.pid);
        for &p in &all {
            // SAFETY: kill with pids read from /proc just now; at worst one is already gone.
            unsafe { libc::kill(p as i32, libc::SIGKILL) };
        }
        let started = Instant::now();
        while all.iter().any(|&p| state_and_parent(p).is_some_and(|(s, _)| s != 'Z'))
            && started.elapsed() < Duration::from_secs(2)
        {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_is_found_alive_with_its_parent_and_killed_on_drop() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let me = std::process::id();
        assert_eq!(state_and_parent(child.id()).map(|(_, p)| p), Some(me));
        let guard = PidGuard::adopt(child.id());
        assert!(guard.alive());
        drop(guard);
        let status = child.wait().unwrap();
        assert!(!status.success(), "killed: {status}");
    }
}
