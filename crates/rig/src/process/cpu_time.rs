//! CPU time of a process from /proc/<pid>/stat (utime + stime, every thread, plus the
//! processes it started, like NGINX's workers), and the switch's CPU per request: the CPU
//! time it spent over the measured interval divided by the requests it forwarded meanwhile.

use std::time::Duration;

use crate::error::RigError;
use crate::process::descendants;
use crate::process::proc_fs::stat_fields_after_name;

/// Clock ticks per second of /proc times.
fn ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as u64 } else { 100 }
}

/// utime + stime (fields 14 and 15) of one /proc/<pid>/stat line, in clock ticks.
pub fn stat_cpu_ticks(stat: &str) -> Option<u64> {
    let fields: Vec<&str> = stat_fields_after_name(stat)?.collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// CPU time used so far by `pid` and its live descendants.
pub fn process_tree_cpu(pid: u32) -> Result<Duration, RigError> {
    let read = |p: u32| -> Result<u64, RigError> {
        let path = format!("/proc/{p}/stat");
        let text = std::fs::read_to_string(&path).map_err(|e| RigError::io(&path, e))?;
        stat_cpu_ticks(&text).ok_or_else(|| {
            RigError::io(&path, std::io::Error::new(std::io::ErrorKind::InvalidData, "unexpected format"))
        })
    };
    let mut ticks = read(pid)?;
    for d in descendants(pid) {
        // A descendant may end between the scan and the read: it then adds nothing.
        ticks += read(d).unwrap_or(0);
    }
    let hz = ticks_per_second();
    Ok(Duration::from_secs(ticks / hz) + Duration::from_nanos((ticks % hz) * 1_000_000_000 / hz))
}

/// Microseconds of CPU per request between two readings; `None` without requests.
pub fn cpu_us_per_request(before: Duration, after: Duration, requests: u64) -> Option<f64> {
    if requests == 0 {
        return None;
    }
    Some(after.saturating_sub(before).as_secs_f64() * 1e6 / requests as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utime_and_stime_are_fields_14_and_15_after_the_command_name() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime …
        let line = "4242 (locus sw) itch) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 3 0";
        assert_eq!(stat_cpu_ticks(line), Some(325));
        assert_eq!(stat_cpu_ticks("4242 (x) S 1 2"), None);
        assert_eq!(stat_cpu_ticks("garbage"), None);
    }

    #[test]
    fn cpu_per_request_is_the_difference_over_the_requests() {
        let before = Duration::from_millis(1_000);
        let after = Duration::from_millis(1_500);
        assert_eq!(cpu_us_per_request(before, after, 10_000), Some(50.0));
        assert_eq!(cpu_us_per_request(before, after, 0), None);
        assert_eq!(cpu_us_per_request(after, before, 10), Some(0.0), "a clock that went back counts 0");
    }

    #[test]
    fn this_process_has_used_some_cpu() {
        let spin = std::time::Instant::now();
        let mut x = 0u64;
        while spin.elapsed() < Duration::from_millis(50) {
            x = x.wrapping_add(1);
        }
        assert!(x > 0);
        assert!(process_tree_cpu(std::process::id()).unwrap() > Duration::ZERO);
    }
}
