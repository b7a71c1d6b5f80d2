//! A real CPU limit per process through a cgroup: which mechanism the host has (v2 `cpu.max`
//! or v1 `cpu.cfs_quota_us`), the quota arithmetic, one cgroup per node under a per-run parent
//! `locus-<pid>-cpu` (so a dead run's leftovers are recognisable), joining it before exec, and
//! removing it once its processes are gone.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::error::RigError;
use crate::teardown::registry;

/// The CFS period every lab cgroup uses (the kernel's default, 100 ms).
pub const CFS_PERIOD_US: u64 = 100_000;
/// The smallest quota the kernel accepts (1 ms per period).
const MIN_QUOTA_US: u64 = 1_000;
/// Name prefix of a run's parent cgroup: `locus-<pid>-cpu`.
pub const CGROUP_PREFIX: &str = "locus-";
const CGROUP_SUFFIX: &str = "-cpu";

/// How a CPU limit is enforced on this host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuMechanism {
    /// cgroup v1, the `cpu` controller: `cpu.cfs_period_us` and `cpu.cfs_quota_us`.
    V1,
    /// cgroup v2 (unified hierarchy): `cpu.max`.
    V2,
}

impl CpuMechanism {
    /// What a report prints: `cgroup v1 cpu.cfs_quota_us` or `cgroup v2 cpu.max`.
    pub fn describe(self) -> &'static str {
        match self {
            CpuMechanism::V1 => "cgroup v1 cpu.cfs_quota_us",
            CpuMechanism::V2 => "cgroup v2 cpu.max",
        }
    }
}

/// Where lab cgroups are made: the mechanism and the cgroup of this process (its parents'
/// limits apply to them too).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuHierarchy {
    pub mechanism: CpuMechanism,
    /// The folder under which `locus-<pid>-cpu` is made.
    pub base: PathBuf,
}

/// The quota for `cpus` CPUs (e.g. 0.25, or 1.5) per [`CFS_PERIOD_US`]: `(quota_us, period_us)`.
/// `None` for a value that is not a positive, finite number.
pub fn cfs_quota(cpus: f64) -> Option<(u64, u64)> {
    if !(cpus.is_finite() && cpus > 0.0) {
        return None;
    }
    let quota = (cpus * CFS_PERIOD_US as f64).round() as u64;
    Some((quota.max(MIN_QUOTA_US), CFS_PERIOD_US))
}

/// The hierarchy in `mounts` (`/proc/mounts`) and `own` (`/proc/self/cgroup`); `v2_has_cpu`
/// says whether a unified cgroup at a path offers the `cpu` controller to its children.
/// v2 is preferred where its `cpu` controller is enabled, then v1's `cpu` controller.
pub fn find_hierarchy(mounts: &str, own: &str, v2_has_cpu: impl Fn(&Path) -> bool) -> Option<CpuHierarchy> {
    let own_path = |wanted: &dyn Fn(&str) -> bool| {
        own.lines().find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            wanted(controllers).then(|| path.trim_start_matches('/').to_string())
        })
    };
    let mut v1 = None;
    for line in mounts.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [_, mount, kind, options, ..] = fields[..] else { continue };
        if kind == "cgroup2" {
            let base = Path::new(mount).join(own_path(&|c| c.is_empty()).unwrap_or_default());
            if v2_has_cpu(&base) {
                return Some(CpuHierarchy { mechanism: CpuMechanism::V2, base });
            }
        } else if kind == "cgroup" && options.split(',').any(|o| o == "cpu") && v1.is_none() {
            let path = own_path(&|c| c.split(',').any(|x| x == "cpu")).unwrap_or_default();
            v1 = Some(CpuHierarchy { mechanism: CpuMechanism::V1, base: Path::new(mount).join(path) });
        }
    }
    v1
}

/// The `cpu` controller this host has, or an error saying what was looked for.
pub fn detect_cpu_hierarchy() -> Result<CpuHierarchy, RigError> {
    let read = |p: &str| std::fs::read_to_string(p).map_err(|e| RigError::io(p, e));
    let (mounts, own) = (read("/proc/mounts")?, read("/proc/self/cgroup")?);
    let v2_has_cpu = |base: &Path| {
        std::fs::read_to_string(base.join("cgroup.subtree_control"))
            .is_ok_and(|s| s.split_whitespace().any(|c| c == "cpu"))
    };
    find_hierarchy(&mounts, &own, v2_has_cpu).ok_or_else(|| RigError::NoCpuController {
        looked_for: "a cgroup2 mount whose cgroup.subtree_control (at this process's cgroup) \
                     lists `cpu`, or a cgroup v1 mount with the `cpu` controller, in /proc/mounts"
            .into(),
    })
}

/// The owner pid in a run's parent cgroup name (`locus-<pid>-cpu`).
pub fn cgroup_owner(name: &str) -> Option<u32> {
    name.strip_prefix(CGROUP_PREFIX)?.strip_suffix(CGROUP_SUFFIX)?.parse().ok()
}

/// This run's parent cgroup under `base`.
pub fn run_parent(base: &Path) -> PathBuf {
    base.join(format!("{CGROUP_PREFIX}{}{CGROUP_SUFFIX}", std::process::id()))
}

/// A cgroup with a CPU limit, removed (with the run's parent once it is empty) on drop.
/// Drop it after its processes have exited.
#[derive(Debug)]
pub struct CpuCgroup {
    path: PathBuf,
    mechanism: CpuMechanism,
    cpus: f64,
}

static SEQUENCE: AtomicU32 = AtomicU32::new(0);

impl CpuCgroup {
    /// A new cgroup named after `role`, limited to `cpus` CPUs, in the host's hierarchy.
    pub fn create(role: &str, cpus: f64) -> Result<CpuCgroup, RigError> {
        CpuCgroup::create_in(&detect_cpu_hierarchy()?, role, cpus)
    }

    /// A new cgroup named after `role`, limited to `cpus` CPUs, under `hierarchy`.
    pub fn create_in(hierarchy: &CpuHierarchy, role: &str, cpus: f64) -> Result<CpuCgroup, RigError> {
        let (quota, period) = cfs_quota(cpus).ok_or_else(|| RigError::Command {
            command: format!("cpu limit for {role}"),
            message: format!("{cpus} CPUs: must be a positive number"),
        })?;
        let mut reg = registry();
        reg.ensure_open()?;
        let parent = run_parent(&hierarchy.base);
        if !parent.exists() {
            std::fs::create_dir(&parent).map_err(|e| RigError::io(&parent, e))?;
            if hierarchy.mechanism == CpuMechanism::V2 {
                write_file(&parent.join("cgroup.subtree_control"), "+cpu")?;
            }
        }
        let seq = SEQUENCE.fetch_add(1, Ordering::Relaxed);
        let path = parent.join(format!("{seq}-{role}"));
        std::fs::create_dir(&path).map_err(|e| RigError::io(&path, e))?;
        reg.add_cgroup(&path);
        drop(reg);
        let group = CpuCgroup { path, mechanism: hierarchy.mechanism, cpus };
        match hierarchy.mechanism {
            CpuMechanism::V1 => {
                write_file(&group.path.join("cpu.cfs_period_us"), &period.to_string())?;
                write_file(&group.path.join("cpu.cfs_quota_us"), &quota.to_string())?;
            }
            CpuMechanism::V2 => write_file(&group.path.join("cpu.max"), &format!("{quota} {period}"))?,
        }
        Ok(group)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn mechanism(&self) -> CpuMechanism {
        self.mechanism
    }

    /// The limit in CPUs.
    pub fn cpus(&self) -> f64 {
        self.cpus
    }

    /// Have the process `cmd` starts join this cgroup before it execs, so every thread and
    /// child it makes (e.g. through `ip netns exec`) is limited from the start.
    pub fn enter_on_exec(&self, cmd: &mut Command) -> Result<(), RigError> {
        let procs = self.path.join("cgroup.procs");
        let c_path = CString::new(procs.as_os_str().as_bytes())
            .map_err(|e| RigError::io(&procs, std::io::Error::other(e)))?;
        // SAFETY: open, write and close are async-signal-safe; they run in the forked child
        // before exec on a path prepared beforehand. Writing 0 moves the writing process.
        unsafe {
            cmd.pre_exec(move || {
                let fd = libc::open(c_path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let written = libc::write(fd, b"0".as_ptr().cast(), 1);
                let err = std::io::Error::last_os_error();
                libc::close(fd);
                if written != 1 {
                    return Err(err);
                }
                Ok(())
            });
        }
        Ok(())
    }
}

impl Drop for CpuCgroup {
    fn drop(&mut self) {
        let mut reg = registry();
        remove_cgroup(&self.path);
        reg.remove_cgroup(&self.path);
    }
}

/// Remove a cgroup whose processes have been killed (waiting up to 2 s for them to leave it),
/// then its parent if that is now empty. Errors are ignored: the stale-lab sweep retries.
pub(crate) fn remove_cgroup(path: &Path) {
    let start = Instant::now();
    while std::fs::remove_dir(path).is_err() && path.exists() && start.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(10));
    }
    if let Some(parent) = path.parent() {
        let _ = std::fs::remove_dir(parent);
    }
}

/// Remove every cgroup under a dead run's parent cgroup, then the parent; what was removed.
pub(crate) fn remove_run_parent(parent: &Path) -> Result<Vec<PathBuf>, RigError> {
    let mut removed = Vec::new();
    let entries = std::fs::read_dir(parent).map_err(|e| RigError::io(parent, e))?;
    for entry in entries.filter_map(|e| e.ok()) {
        let path = entry.path();
        if path.is_dir() {
            std::fs::remove_dir(&path).map_err(|e| RigError::io(&path, e))?;
            removed.push(path);
        }
    }
    std::fs::remove_dir(parent).map_err(|e| RigError::io(parent, e))?;
    removed.push(parent.to_path_buf());
    Ok(removed)
}

fn write_file(path: &Path, value: &str) -> Result<(), RigError> {
    std::fs::write(path, value).map_err(|e| RigError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID_MOUNTS: &str = "tmpfs /sys/fs/cgroup tmpfs rw 0 0\n\
        cgroup /sys/fs/cgroup/cpuacct cgroup rw,relatime,cpuacct 0 0\n\
        cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n\
        cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n";
    const HYBRID_OWN: &str = "2:cpuacct:/\n1:cpu:/box/a\n0::/box/u\n";

    #[test]
    fn quota_is_the_cpus_fraction_of_a_100ms_period_and_never_below_1ms() {
        assert_eq!(cfs_quota(0.25), Some((25_000, 100_000)));
        assert_eq!(cfs_quota(1.5), Some((150_000, 100_000)));
        assert_eq!(cfs_quota(0.2), Some((20_000, 100_000)));
        assert_eq!(cfs_quota(0.000_1), Some((1_000, 100_000)));
        assert_eq!(cfs_quota(0.0), None);
        assert_eq!(cfs_quota(-1.0), None);
        assert_eq!(cfs_quota(f64::NAN), None);
        assert_eq!(cfs_quota(f64::INFINITY), None);
    }

    #[test]
    fn v1_cpu_mount_is_found_at_this_process_cgroup_when_v2_has_no_cpu() {
        let h = find_hierarchy(HYBRID_MOUNTS, HYBRID_OWN, |_| false).unwrap();
        assert_eq!(h.mechanism, CpuMechanism::V1);
        assert_eq!(h.base, Path::new("/sys/fs/cgroup/cpu/box/a"), "not the cpuacct mount");
        assert_eq!(h.mechanism.describe(), "cgroup v1 cpu.cfs_quota_us");
    }

    #[test]
    fn v2_is_preferred_where_its_cpu_controller_is_enabled() {
        let h = find_hierarchy(HYBRID_MOUNTS, HYBRID_OWN, |p| p == Path::new("/sys/fs/cgroup/unified/box/u"))
            .unwrap();
        assert_eq!(h.mechanism, CpuMechanism::V2);
        assert_eq!(h.mechanism.describe(), "cgroup v2 cpu.max");
    }

    #[test]
    fn no_cpu_controller_anywhere_gives_none() {
        let mounts =
            "cgroup /sys/fs/cgroup/cpuacct cgroup rw,cpuacct 0 0\ncgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n";
        assert_eq!(find_hierarchy(mounts, "0::/\n", |_| false), None);
    }

    #[test]
    fn owner_is_read_from_run_parent_names_only() {
        assert_eq!(cgroup_owner("locus-4242-cpu"), Some(4242));
        assert_eq!(cgroup_owner("locus-4242"), None);
        assert_eq!(cgroup_owner("locus-x-cpu"), None);
        assert_eq!(cgroup_owner("docker"), None);
        let parent = run_parent(Path::new("/sys/fs/cgroup/cpu"));
        let name = parent.file_name().unwrap().to_str().unwrap();
        assert_eq!(cgroup_owner(name), Some(std::process::id()));
    }
}
