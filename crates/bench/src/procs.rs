//! Child processes of a benchmark: started with a parent-death signal so that nothing is
//! left running if the benchmark dies, killed on drop, and waited for until their port
//! accepts connections.

use anyhow::{Context, bail};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};

/// A child process killed when this value is dropped.
pub struct ChildGuard {
    pub name: String,
    child: Child,
}

impl ChildGuard {
    /// Start `cmd` with its output sent to `log` (a file path) and the parent-death signal set.
    pub fn spawn(name: &str, mut cmd: Command, log: &std::path::Path) -> anyhow::Result<ChildGuard> {
        let out = std::fs::File::create(log).with_context(|| format!("create {}", log.display()))?;
        let err = out.try_clone()?;
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        // SAFETY: prctl is async-signal-safe; it runs in the forked child before exec and only
        // asks the kernel to kill the child if this process dies.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().with_context(|| format!("start {name} ({cmd:?})"))?;
        Ok(ChildGuard { name: name.to_string(), child })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Fail if the process has already exited.
    pub fn check_running(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!("{} exited early: {status}", self.name);
        }
        Ok(())
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Resident set size of a process in MiB, from /proc.
pub fn rss_mb(pid: u32) -> anyhow::Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .context("VmRSS missing from /proc status")?;
    Ok(kb / 1024.0)
}

/// Whether a program is on PATH (or at an absolute path).
pub fn find_program(name: &str) -> Option<std::path::PathBuf> {
    let candidates = ["/usr/sbin", "/usr/bin", "/sbin", "/bin", "/usr/local/bin", "/usr/local/sbin"];
    let path = std::env::var("PATH").unwrap_or_default();
    path.split(':').chain(candidates).map(|d| std::path::Path::new(d).join(name)).find(|p| p.is_file())
}
