//! Killing what a lab or benchmark started: a child with its descendants (reaped if it is
//! ours), everything inside a namespace, and the bounded wait until processes have exited.

use std::time::{Duration, Instant};

use crate::process::proc_fs::{descendants, exited, processes_in_namespace};

/// SIGKILL `pid` (and its descendants) and reap it if it is our child, waiting at most a
/// second.
pub(crate) fn kill_and_reap(pid: u32) {
    kill_descendants(pid);
    // SAFETY: kill with a pid of our own registered child.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(1) {
        let mut status = 0;
        // SAFETY: waitpid on our own child with a valid status pointer.
        let rc = unsafe { libc::waitpid(pid as i32, &mut status, libc::WNOHANG) };
        if rc != 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// SIGKILL every descendant of `pid` (not `pid` itself); returns their pids.
pub(crate) fn kill_descendants(pid: u32) -> Vec<u32> {
    let children = descendants(pid);
    for &descendant in &children {
        // SAFETY: kill with a pid read from /proc just now; at worst it is already gone.
        unsafe { libc::kill(descendant as i32, libc::SIGKILL) };
    }
    children
}

/// Wait until every process of `pids` has exited, at most `limit`.
pub(crate) fn wait_exited(pids: &[u32], limit: Duration) {
    let start = Instant::now();
    while !pids.iter().all(|&p| exited(p)) && start.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// SIGKILL every process (other than this one) inside a namespace, and wait up to a second
/// for them to be gone.
pub fn kill_processes_in_namespace(name: &str) {
    let pids = processes_in_namespace(name);
    for &p in &pids {
        // SAFETY: kill with pids just read from /proc; never our own (filtered out).
        unsafe { libc::kill(p as i32, libc::SIGKILL) };
    }
    let start = Instant::now();
    while !pids.is_empty() && start.elapsed() < Duration::from_secs(1) {
        // Reap those that are our own children; others are reaped by their parents.
        for &p in &pids {
            let mut status = 0;
            // SAFETY: waitpid with WNOHANG and a valid status pointer; ECHILD for non-children.
            unsafe { libc::waitpid(p as i32, &mut status, libc::WNOHANG) };
        }
        if processes_in_namespace(name).is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
