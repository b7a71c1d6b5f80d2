//! Leftovers of labs whose owner died (a run killed with SIGKILL, a machine that lost power):
//! their namespaces, bridges, CPU cgroups and scratch folders, recognised by name prefix and owner pid
//! (bridges also by their alias), and `clean_stale_labs`, which removes them and leaves labs
//! of live processes alone.

use crate::error::RigError;
use crate::network::{
    BRIDGE_ALIAS, BRIDGE_PREFIX, LabNetwork, NAMESPACE_PREFIX, SCRATCH_FOLDER_PREFIX, delete_bridge,
    delete_namespace,
};
use crate::process::{
    cgroup_owner, detect_cpu_hierarchy, kill_processes_in_namespace, process_alive, remove_run_parent,
};

/// What `clean_stale_labs` found and removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CleanReport {
    /// Namespaces removed (their owner had died).
    pub namespaces: Vec<String>,
    /// Bridges removed.
    pub bridges: Vec<String>,
    /// CPU cgroups removed (each node's, then its run's parent `locus-<pid>-cpu`).
    pub cgroups: Vec<std::path::PathBuf>,
    /// Scratch folders removed.
    pub folders: Vec<std::path::PathBuf>,
    /// Lab namespaces and bridges left alone because their owner still runs.
    pub in_use: Vec<String>,
}

/// The owner pid in a lab namespace name (`locus-<pid>-<n>-<role>`).
pub fn namespace_owner(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(NAMESPACE_PREFIX)?;
    let (pid, rest) = rest.split_once('-')?;
    let (seq, role) = rest.split_once('-')?;
    (seq.parse::<u32>().is_ok() && !role.is_empty()).then_some(())?;
    pid.parse().ok()
}

/// The owner pid in a lab bridge name (`lcs<pid hex>x<n hex>`).
pub fn bridge_owner(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(BRIDGE_PREFIX)?;
    let (pid, seq) = rest.split_once('x')?;
    u32::from_str_radix(seq, 16).ok()?;
    u32::from_str_radix(pid, 16).ok()
}

/// The owner pid in a scratch folder's name (`locus-scratch-<pid>-<what>-<random>`).
pub fn scratch_folder_owner(name: &str) -> Option<u32> {
    name.strip_prefix(SCRATCH_FOLDER_PREFIX)?.split_once('-')?.0.parse().ok()
}

/// Remove the namespaces, bridges and scratch folders of labs whose owner process is
/// gone (a run killed with SIGKILL, or a machine that lost power): they are recognised by
/// their name's prefix and owner pid, and bridges also by their alias. Labs of live processes
/// are left alone.
pub fn clean_stale_labs() -> Result<CleanReport, RigError> {
    LabNetwork::available().map_err(RigError::Unavailable)?;
    let mut report = CleanReport::default();
    let mut names: Vec<String> = match std::fs::read_dir("/run/netns") {
        Ok(dir) => dir.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    for ns in names {
        let Some(owner) = namespace_owner(&ns) else { continue };
        if process_alive(owner) {
            report.in_use.push(ns);
            continue;
        }
        kill_processes_in_namespace(&ns);
        delete_namespace(&ns)?;
        report.namespaces.push(ns);
    }
    let mut links: Vec<String> = match std::fs::read_dir("/sys/class/net") {
        Ok(dir) => dir.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect(),
        Err(_) => Vec::new(),
    };
    links.sort();
    for link in links {
        let Some(owner) = bridge_owner(&link) else { continue };
        let alias = std::fs::read_to_string(format!("/sys/class/net/{link}/ifalias")).unwrap_or_default();
        if alias.trim() != format!("{BRIDGE_ALIAS}{owner}") {
            continue;
        }
        if process_alive(owner) {
            report.in_use.push(link);
            continue;
        }
        delete_bridge(&link)?;
        report.bridges.push(link);
    }
    report.cgroups = clean_stale_cgroups()?;
    let tmp = std::env::temp_dir();
    let mut folders: Vec<String> = match std::fs::read_dir(&tmp) {
        Ok(dir) => dir.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect(),
        Err(_) => Vec::new(),
    };
    folders.sort();
    for folder in folders {
        let Some(owner) = scratch_folder_owner(&folder) else { continue };
        if process_alive(owner) {
            continue;
        }
        let path = tmp.join(&folder);
        std::fs::remove_dir_all(&path).map_err(|e| RigError::io(&path, e))?;
        report.folders.push(path);
    }
    Ok(report)
}

/// Remove the CPU cgroups of runs whose owner is gone (none if the host has no cpu controller).
fn clean_stale_cgroups() -> Result<Vec<std::path::PathBuf>, RigError> {
    let Ok(hierarchy) = detect_cpu_hierarchy() else { return Ok(Vec::new()) };
    let mut names: Vec<String> = match std::fs::read_dir(&hierarchy.base) {
        Ok(dir) => dir.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    let mut removed = Vec::new();
    for name in names {
        let Some(owner) = cgroup_owner(&name) else { continue };
        if !process_alive(owner) {
            removed.extend(remove_run_parent(&hierarchy.base.join(&name))?);
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_are_read_from_lab_names_only() {
        assert_eq!(namespace_owner("locus-1234-0-node1"), Some(1234));
        assert_eq!(namespace_owner("locus-1234-12-client"), Some(1234));
        assert_eq!(namespace_owner("locus-x-0-node1"), None);
        assert_eq!(namespace_owner("locus-1234"), None);
        assert_eq!(namespace_owner("other-1234-0-node1"), None);
        assert_eq!(bridge_owner("lcs4d2x0"), Some(0x4d2));
        assert_eq!(bridge_owner("lcs4d2x1f"), Some(0x4d2));
        assert_eq!(bridge_owner("lcs4d2x0p3"), None, "a port, not a bridge");
        assert_eq!(bridge_owner("docker0"), None);
        assert_eq!(scratch_folder_owner("locus-scratch-4242-sites-a8Xz"), Some(4242));
        assert_eq!(scratch_folder_owner("locus-scratch-a8Xz"), None);
        assert_eq!(scratch_folder_owner("locus-lab-sites-4242-a8Xz"), None);
    }
}
