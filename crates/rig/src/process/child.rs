//! Child processes of a lab or benchmark: started in their own process group with a
//! parent-death signal and, as root, the open-file limit they need; registered for teardown
//! and killed (with their own children) when their guard drops.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::error::RigError;
use crate::process::kill::{kill_descendants, wait_exited};
use crate::teardown::registry;

/// A child process, killed (and waited for) when this value is dropped.
pub struct ChildGuard {
    pub name: String,
    child: Child,
}

impl ChildGuard {
    /// Start `cmd` with its output sent to `log` (a file path), in a process group of its own
    /// (a terminal's Ctrl-C reaches only the lab, which then tears down in order) and with the
    /// parent-death signal set. Spawn from a long-lived thread: the signal fires when the
    /// spawning thread ends.
    pub fn spawn(name: &str, mut cmd: Command, log: &Path) -> Result<ChildGuard, RigError> {
        let out = std::fs::File::create(log).map_err(|e| RigError::io(log, e))?;
        let err = out.try_clone().map_err(|e| RigError::io(log, e))?;
        cmd.stdin(Stdio::null()).stdout(out).stderr(err).process_group(0);
        die_with_spawning_thread(&mut cmd);
        let mut reg = registry();
        reg.ensure_open()?;
        let child = cmd
            .spawn()
            .map_err(|e| RigError::Command { command: format!("{cmd:?}"), message: e.to_string() })?;
        reg.add_process(child.id());
        Ok(ChildGuard { name: name.to_string(), child })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `Some(status text)` if the process has already exited.
    pub fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(status.to_string()),
            Ok(None) => None,
            Err(e) => Some(format!("cannot be waited for: {e}")),
        }
    }
}

/// Have the kernel SIGKILL the process `cmd` starts as soon as the thread that spawns it ends
/// (`PR_SET_PDEATHSIG`), so nothing a lab or benchmark starts outlives it, even a run killed
/// with SIGKILL. Spawn from a thread that lives as long as the process should.
pub fn die_with_spawning_thread(cmd: &mut Command) {
    // SAFETY: prctl is async-signal-safe; it runs in the forked child before exec and only
    // asks the kernel to kill the child if its parent thread dies.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// As root (with CAP_SYS_RESOURCE), give the process `cmd` starts an open-file limit (soft
/// and hard) of at least `wanted`, within the kernel's `fs.nr_open`: a switch sized for many
/// connections then fits them instead of lowering its `max_connections` to the machine's
/// hard limit. Only that process's limit changes; without the capability, nothing does.
pub fn give_open_files(cmd: &mut Command, wanted: u64) {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return;
    }
    let wanted = wanted.min(locus_io::system_ceiling()) as libc::rlim_t;
    // SAFETY: getrlimit and setrlimit are async-signal-safe; they run in the forked child
    // before exec, on a struct on its stack.
    unsafe {
        cmd.pre_exec(move || {
            let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_max < wanted {
                // Refused without CAP_SYS_RESOURCE (some containers drop it from root): the
                // process then starts with the limit it inherits and fits itself to it.
                let _ = libc::setrlimit(
                    libc::RLIMIT_NOFILE,
                    &libc::rlimit { rlim_cur: wanted, rlim_max: wanted },
                );
            }
            Ok(())
        });
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let mut reg = registry();
        let pid = self.child.id();
        // Its own children (NGINX workers) first, then the process itself.
        let children = kill_descendants(pid);
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Reaping the process says nothing of its children, which init reaps: until they have
        // exited they hold their listening sockets, and the next server on that address would
        // fail to bind (seen with NGINX workers on a loaded machine).
        wait_exited(&children, Duration::from_secs(2));
        reg.remove_process(pid);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::process::{descendants, process_alive};

    #[test]
    fn a_child_given_open_files_gets_that_limit_as_root_and_the_inherited_one_otherwise() {
        let limit_of = |wanted: Option<u64>| {
            let mut cmd = Command::new("sh");
            cmd.args(["-c", "ulimit -n; ulimit -Hn"]);
            if let Some(w) = wanted {
                give_open_files(&mut cmd, w);
            }
            let out = cmd.output().unwrap();
            assert!(out.status.success(), "{out:?}");
            let text = String::from_utf8(out.stdout).unwrap();
            let v: Vec<u64> = text.split_whitespace().map(|n| n.parse().unwrap()).collect();
            (v[0], v[1])
        };
        let (soft, hard) = limit_of(None);
        let wanted = hard + 12_345;
        // CAP_SYS_RESOURCE (bit 24 of CapEff) lets root raise a hard limit; containers may drop it.
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let caps = status.lines().find_map(|l| l.strip_prefix("CapEff:")).unwrap().trim();
        let sys_resource = u64::from_str_radix(caps, 16).unwrap() & (1 << 24) != 0;
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 && sys_resource {
            assert_eq!(limit_of(Some(wanted)), (wanted, wanted), "root raises both limits for the child");
            assert_eq!(limit_of(Some(16)), (soft, hard), "a limit already large enough is kept");
        } else {
            assert_eq!(
                limit_of(Some(wanted)),
                (soft, hard),
                "without the capability nothing changes, and it starts"
            );
        }
        assert_eq!(limit_of(None), (soft, hard), "this process's own limit is untouched");
    }

    #[test]
    fn a_child_and_its_children_have_exited_when_drop_returns() {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 30 & sleep 30"]);
        let mut child = ChildGuard::spawn("sleeper", cmd, &dir.path().join("log")).unwrap();
        assert!(child.exited().is_none());
        let pid = child.pid();
        let start = Instant::now();
        while descendants(pid).is_empty() && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let kids = descendants(pid);
        assert!(!kids.is_empty(), "sh started its sleeps");
        drop(child);
        // No grace period: drop waits for the children too.
        for k in kids {
            let state = std::fs::read_to_string(format!("/proc/{k}/stat")).unwrap_or_default();
            assert!(state.is_empty() || state.contains(") Z"), "descendant {k} still running: {state}");
        }
        assert!(!process_alive(pid) || std::fs::read_to_string(format!("/proc/{pid}/stat")).is_err());
    }
}
