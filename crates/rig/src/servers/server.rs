//! `Server`: a server a lab or benchmark started as a child process on a `Net`'s host, with its
//! log in a scratch folder, and `start`, which waits for its address to be free, spawns it
//! there and waits until it accepts connections (quoting its log's end if it does not).

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::error::RigError;
use crate::network::Net;
use crate::process::ChildGuard;

/// A started server.
pub struct Server {
    pub name: String,
    /// Where it serves HTTP.
    pub addr: SocketAddr,
    /// Its Locus admin listener (`/locus/status`), if it has one.
    pub admin: Option<SocketAddr>,
    pub process: ChildGuard,
    /// Its output.
    pub log: PathBuf,
    /// Its handoff agent's control address, if it runs one.
    pub agent: Option<SocketAddr>,
    /// The cgroup that limits its CPU, if it has one (last: removed after the process is gone).
    pub cpu_cgroup: Option<crate::process::CpuCgroup>,
}

impl Server {
    /// Fail if the process has exited.
    pub fn check_running(&mut self) -> Result<(), RigError> {
        match self.process.exited() {
            Some(status) => Err(RigError::ServerStart {
                name: self.name.clone(),
                message: format!("exited: {status}"),
                log: self.log.clone(),
            }),
            None => Ok(()),
        }
    }
}

const START_LIMIT: Duration = Duration::from_secs(15);

/// Lines of a failed server's log quoted in its start error.
const LOG_TAIL_LINES: usize = 5;

/// The last [`LOG_TAIL_LINES`] non-empty lines of `log` as ` (log: a | b)`, or nothing when
/// it is empty or unreadable.
fn log_tail(log: &Path) -> String {
    let Ok(text) = std::fs::read(log) else { return String::new() };
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    if lines.is_empty() {
        return String::new();
    }
    format!(" (log: {})", lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join(" | "))
}

/// Wait until `addr` (and `admin`) are free on `role`'s host, spawn `cmd` there and wait until
/// they accept connections from the client host.
pub fn start(
    net: &Net,
    role: &str,
    name: &str,
    cmd: Command,
    addr: SocketAddr,
    admin: Option<SocketAddr>,
    scratch: &Path,
) -> Result<Server, RigError> {
    let log = scratch.join(format!("{name}.log"));
    let wanted: Vec<SocketAddr> = std::iter::once(addr).chain(admin).collect();
    net.wait_until_free(role, &wanted)?;
    let mut process = ChildGuard::spawn(name, cmd, &log)?;
    // The log's end goes into the error: a bench's scratch folder (and the log in it) is
    // removed before anyone reads the message.
    let fail = |message: String| RigError::ServerStart {
        name: name.to_string(),
        message: format!("{message}{}", log_tail(&log)),
        log: log.clone(),
    };
    let outcome = net.on_host("client", || -> Result<Result<(), String>, RigError> {
        let started = Instant::now();
        for a in &wanted {
            loop {
                if let Some(status) = process.exited() {
                    return Ok(Err(format!("exited early: {status}")));
                }
                if TcpStream::connect_timeout(a, Duration::from_millis(200)).is_ok() {
                    break;
                }
                if started.elapsed() > START_LIMIT {
                    return Ok(Err(format!("not listening on {a} within {START_LIMIT:?}")));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Ok(Ok(()))
    })?;
    outcome.map_err(fail)?;
    Ok(Server { name: name.to_string(), addr, admin, process, log, agent: None, cpu_cgroup: None })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_error_quotes_the_last_log_lines_and_nothing_for_an_empty_or_missing_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("s.log");
        assert_eq!(log_tail(&log), "");
        std::fs::write(&log, "\n  \n").unwrap();
        assert_eq!(log_tail(&log), "");
        let lines: Vec<String> = (1..=8).map(|i| format!("line {i}")).collect();
        std::fs::write(&log, lines.join("\n") + "\n\n").unwrap();
        assert_eq!(log_tail(&log), " (log: line 4 | line 5 | line 6 | line 7 | line 8)");
    }
}
