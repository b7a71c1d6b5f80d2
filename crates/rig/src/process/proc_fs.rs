//! Look-ups in /proc: a process's parent, descendants and state, the processes inside a
//! network namespace, whether a pid is alive, and resident memory.

use std::os::unix::fs::MetadataExt;

use crate::error::RigError;

/// The fields of a /proc/<pid>/stat line after the command name, from the state (field 3) on.
/// The name is in parentheses and may hold spaces or ')': the fields start after the last ')'.
pub(crate) fn stat_fields_after_name(stat: &str) -> Option<std::str::SplitWhitespace<'_>> {
    Some(stat[stat.rfind(')')? + 1..].split_whitespace())
}

/// Whether `pid` has exited: gone from /proc, or a zombie (its files are closed by then).
pub(crate) fn exited(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat_fields_after_name(&stat).and_then(|mut f| f.next()) == Some("Z"),
    }
}

/// The parent pid of `pid` from /proc/<pid>/stat.
pub(crate) fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat_fields_after_name(&stat)?.nth(1)?.parse().ok()
}

/// Numeric entries of /proc (every process).
fn all_pids() -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect()
}

/// Every process descended from `pid` (children, grandchildren …), not `pid` itself.
pub fn descendants(pid: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> =
        all_pids().into_iter().filter_map(|p| parent_of(p).map(|pp| (p, pp))).collect();
    let mut out = Vec::new();
    let mut frontier = vec![pid];
    while let Some(parent) = frontier.pop() {
        for &(p, pp) in &parents {
            if pp == parent && p != pid && !out.contains(&p) {
                out.push(p);
                frontier.push(p);
            }
        }
    }
    out
}

/// Processes (other than this one) whose network namespace is the named one
/// (`/run/netns/<name>`), by comparing namespace inodes.
pub fn processes_in_namespace(name: &str) -> Vec<u32> {
    let Ok(ns) = std::fs::metadata(format!("/run/netns/{name}")) else { return Vec::new() };
    let me = std::process::id();
    all_pids()
        .into_iter()
        .filter(|&p| p != me)
        .filter(|p| {
            std::fs::metadata(format!("/proc/{p}/ns/net"))
                .is_ok_and(|m| m.ino() == ns.ino() && m.dev() == ns.dev())
        })
        .collect()
}

/// Whether a process with this pid exists (ours to signal or not).
pub fn process_alive(pid: u32) -> bool {
    if pid == 0 || pid > i32::MAX as u32 {
        return false;
    }
    // SAFETY: signal 0 only checks that the process exists.
    let rc = unsafe { libc::kill(pid as i32, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Resident set size of a process in MiB, from /proc.
pub fn rss_mb(pid: u32) -> Result<f64, RigError> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).map_err(|e| RigError::io(&path, e))?;
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| {
            RigError::io(&path, std::io::Error::new(std::io::ErrorKind::InvalidData, "no VmRSS line"))
        })?;
    Ok(kb / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_pids_are_read_past_names_with_spaces_and_parentheses() {
        assert_eq!(parent_of(std::process::id()), Some(std::os::unix::process::parent_id()));
        assert!(process_alive(std::process::id()));
        assert!(!process_alive(0));
    }
}
