//! Tearing a lab down whatever happens. Every namespace (a lab's bridge and veth ports live in
//! its `lan` namespace and go with it), child process, CPU cgroup and scratch folder the lab makes is
//! registered here while it exists, so one call (`tear_down_everything`) removes them
//! all: Drop does it piece by piece on the normal path, and `InterruptWatch`'s thread does it
//! at once on Ctrl-C or SIGTERM (both blocked in every thread and taken with sigwait).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Mutex, MutexGuard};

use locus_io::TerminationSignals;

use crate::error::RigError;
use crate::network::{SCRATCH_FOLDER_PREFIX, delete_namespace};
use crate::process::{kill_and_reap, kill_processes_in_namespace, remove_cgroup};

/// What currently exists and must be removed.
pub(crate) struct TeardownRegistry {
    closing: bool,
    processes: Vec<u32>,
    namespaces: Vec<String>,
    folders: Vec<PathBuf>,
    cgroups: Vec<PathBuf>,
}

static REGISTRY: Mutex<TeardownRegistry> = Mutex::new(TeardownRegistry {
    closing: false,
    processes: Vec::new(),
    namespaces: Vec::new(),
    folders: Vec::new(),
    cgroups: Vec::new(),
});

/// The registry, locked. Creating or removing anything happens under this lock, so a teardown
/// never races a half-made namespace or a child being spawned.
pub(crate) fn registry() -> MutexGuard<'static, TeardownRegistry> {
    REGISTRY.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl TeardownRegistry {
    /// Fail once a teardown has begun: nothing new may be created.
    pub(crate) fn ensure_open(&self) -> Result<(), RigError> {
        if self.closing { Err(RigError::Interrupted) } else { Ok(()) }
    }

    pub(crate) fn add_process(&mut self, pid: u32) {
        self.processes.push(pid);
    }

    pub(crate) fn remove_process(&mut self, pid: u32) {
        self.processes.retain(|p| *p != pid);
    }

    pub(crate) fn add_namespace(&mut self, name: &str) {
        self.namespaces.push(name.to_string());
    }

    pub(crate) fn remove_namespace(&mut self, name: &str) {
        self.namespaces.retain(|n| n != name);
    }

    pub(crate) fn add_cgroup(&mut self, path: &Path) {
        self.cgroups.push(path.to_path_buf());
    }

    pub(crate) fn remove_cgroup(&mut self, path: &Path) {
        self.cgroups.retain(|p| p != path);
    }
}

/// Have a scratch folder removed by a teardown (its owner removes it on the normal path and
/// then calls `forget_scratch_folder`).
fn register_scratch_folder(path: &Path) {
    registry().folders.push(path.to_path_buf());
}

/// A scratch folder its owner has removed.
fn forget_scratch_folder(path: &Path) {
    registry().folders.retain(|p| p != path);
}

/// A temporary folder (a lab's sites, a benchmark's configurations and server logs) removed
/// on drop, by the teardown if the process is interrupted first, and by `locus lab clean`
/// after a SIGKILL: its name, `locus-scratch-<pid>-<what>-<random>`, carries the owner's pid.
pub struct ScratchFolder {
    dir: tempfile::TempDir,
}

impl ScratchFolder {
    /// A new folder under the system's temporary folder; `what` names its use.
    pub fn new(what: &str) -> Result<ScratchFolder, RigError> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("{SCRATCH_FOLDER_PREFIX}{}-{what}-", std::process::id()))
            .tempdir()
            .map_err(|e| RigError::io(std::env::temp_dir(), e))?;
        register_scratch_folder(dir.path());
        Ok(ScratchFolder { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for ScratchFolder {
    fn drop(&mut self) {
        // The folder itself goes when `dir` drops, right after.
        forget_scratch_folder(self.dir.path());
    }
}

/// What a teardown removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TeardownSummary {
    pub processes: usize,
    pub namespaces: usize,
}

/// Kill every registered child process (and anything else still running in a registered
/// namespace), delete every registered namespace and CPU cgroup, and refuse to create anything
/// afterwards (`RigError::Interrupted`). Safe to call from any thread, more than once.
pub fn tear_down_everything() -> TeardownSummary {
    let mut reg = registry();
    reg.closing = true;
    let summary = TeardownSummary { processes: reg.processes.len(), namespaces: reg.namespaces.len() };
    for pid in std::mem::take(&mut reg.processes) {
        kill_and_reap(pid);
    }
    for ns in std::mem::take(&mut reg.namespaces) {
        kill_processes_in_namespace(&ns);
        let _ = delete_namespace(&ns);
    }
    // After the processes: a cgroup with a process in it cannot be removed.
    for cgroup in std::mem::take(&mut reg.cgroups) {
        remove_cgroup(&cgroup);
    }
    for folder in std::mem::take(&mut reg.folders) {
        let _ = std::fs::remove_dir_all(folder);
    }
    summary
}

/// The signal an `InterruptWatch` took (0: none yet). Set before the teardown begins, so
/// any failure the teardown causes in the working threads happens after it is visible.
static TAKEN_SIGNAL: AtomicI32 = AtomicI32::new(0);

/// SIGINT and SIGTERM handled on a dedicated thread: both are blocked in the thread that
/// installs the watch and so in every thread it starts later (install it first thing); the
/// watch thread takes them with `sigwait`, so none is lost however early it arrives. On either
/// it prints a line, tears everything down and exits with 128 + the signal number.
///
/// The teardown kills the lab's servers and load generators, so the working thread usually
/// fails at once and returns, dropping the watch, while the teardown still runs. Drop then
/// finishes the teardown (it waits on the registry's lock) and exits with the same status,
/// so an interrupted run never exits 1 nor leaves half a lab behind.
pub struct InterruptWatch {
    _thread: std::thread::JoinHandle<()>,
}

impl InterruptWatch {
    /// Block the signals and start the watch thread.
    pub fn install() -> Result<InterruptWatch, RigError> {
        let signals = TerminationSignals::block().map_err(|e| RigError::system("pthread_sigmask", e))?;
        let thread = std::thread::Builder::new()
            .name("lab-signals".into())
            .spawn(move || {
                loop {
                    let Ok(signal) = signals.wait() else { continue };
                    TAKEN_SIGNAL.store(signal, Ordering::SeqCst);
                    let name = if signal == libc::SIGINT { "SIGINT" } else { "SIGTERM" };
                    eprintln!(
                        "locus: {name}: tearing down the lab's servers, namespaces and scratch folders"
                    );
                    let s = tear_down_everything();
                    eprintln!(
                        "locus: stopped {} processes, removed {} namespaces (with their bridges)",
                        s.processes, s.namespaces
                    );
                    std::process::exit(128 + signal);
                }
            })
            .map_err(|e| RigError::system("starting the signal thread", e))?;
        Ok(InterruptWatch { _thread: thread })
    }
}

impl Drop for InterruptWatch {
    fn drop(&mut self) {
        let signal = TAKEN_SIGNAL.load(Ordering::SeqCst);
        if signal != 0 {
            // Waits for the watch thread's teardown to finish; removes nothing twice.
            tear_down_everything();
            std::process::exit(128 + signal);
        }
    }
}
