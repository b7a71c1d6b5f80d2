//! Child processes of a lab or benchmark: started in their own process group with a
//! parent-death signal, registered for teardown, killed on drop; and the /proc look-ups
//! around them (resident memory, processes inside a namespace, programs on PATH).

use std::net::TcpListener;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::LabError;
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
    pub fn spawn(name: &str, mut cmd: Command, log: &Path) -> Result<ChildGuard, LabError> {
        let out = std::fs::File::create(log).map_err(|e| LabError::io(log, e))?;
        let err = out.try_clone().map_err(|e| LabError::io(log, e))?;
        cmd.stdin(Stdio::null()).stdout(out).stderr(err).process_group(0);
        die_with_spawning_thread(&mut cmd);
        let mut reg = registry();
        reg.ensure_open()?;
        let child = cmd
            .spawn()
            .map_err(|e| LabError::Command { command: format!("{cmd:?}"), message: e.to_string() })?;
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
fn kill_descendants(pid: u32) -> Vec<u32> {
    let children = descendants(pid);
    for &descendant in &children {
        // SAFETY: kill with a pid read from /proc just now; at worst it is already gone.
        unsafe { libc::kill(descendant as i32, libc::SIGKILL) };
    }
    children
}

/// The fields of a /proc/<pid>/stat line after the command name, from the state (field 3) on.
/// The name is in parentheses and may hold spaces or ')': the fields start after the last ')'.
pub(crate) fn stat_fields_after_name(stat: &str) -> Option<std::str::SplitWhitespace<'_>> {
    Some(stat[stat.rfind(')')? + 1..].split_whitespace())
}

/// Whether `pid` has exited: gone from /proc, or a zombie (its files are closed by then).
fn exited(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat_fields_after_name(&stat).and_then(|mut f| f.next()) == Some("Z"),
    }
}

/// Wait until every process of `pids` has exited, at most `limit`.
fn wait_exited(pids: &[u32], limit: Duration) {
    let start = Instant::now();
    while !pids.iter().all(|&p| exited(p)) && start.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The parent pid of `pid` from /proc/<pid>/stat.
fn parent_of(pid: u32) -> Option<u32> {
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

/// Whether a process with this pid exists (ours to signal or not).
pub fn process_alive(pid: u32) -> bool {
    if pid == 0 || pid > i32::MAX as u32 {
        return false;
    }
    // SAFETY: signal 0 only checks that the process exists.
    let rc = unsafe { libc::kill(pid as i32, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// A port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> Result<u16, LabError> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| LabError::system("bind 127.0.0.1:0", e))?;
    listener.local_addr().map(|a| a.port()).map_err(|e| LabError::system("local_addr", e))
}

/// Resident set size of a process in MiB, from /proc.
pub fn rss_mb(pid: u32) -> Result<f64, LabError> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).map_err(|e| LabError::io(&path, e))?;
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| {
            LabError::io(&path, std::io::Error::new(std::io::ErrorKind::InvalidData, "no VmRSS line"))
        })?;
    Ok(kb / 1024.0)
}

/// A program on PATH or in the usual system directories.
pub fn find_program(name: &str) -> Option<PathBuf> {
    let candidates = ["/usr/sbin", "/usr/bin", "/sbin", "/bin", "/usr/local/bin", "/usr/local/sbin"];
    let path = std::env::var("PATH").unwrap_or_default();
    path.split(':')
        .filter(|d| !d.is_empty())
        .chain(candidates)
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

/// A program, or the error that names the Debian package to install.
pub fn require_program(name: &str, package: &str) -> Result<PathBuf, LabError> {
    find_program(name)
        .ok_or_else(|| LabError::MissingProgram { program: name.to_string(), package: package.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn parent_pids_are_read_past_names_with_spaces_and_parentheses() {
        assert_eq!(parent_of(std::process::id()), Some(std::os::unix::process::parent_id()));
        assert!(process_alive(std::process::id()));
        assert!(!process_alive(0));
        assert!(find_program("sh").is_some());
        assert!(matches!(require_program("no-such-program-x", "pkg"), Err(LabError::MissingProgram { .. })));
    }
}
