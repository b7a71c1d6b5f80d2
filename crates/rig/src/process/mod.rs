//! The processes of a lab or benchmark: child guards (`child`), killing and reaping (`kill`),
//! /proc look-ups (`proc_fs`), CPU time from /proc (`cpu_time`) and CPU limits through a
//! cgroup per process (`cpu_cgroup`).

mod child;
mod cpu_cgroup;
mod cpu_time;
mod kill;
mod proc_fs;

pub use child::{ChildGuard, die_with_spawning_thread, give_open_files};
pub use cpu_cgroup::{
    CFS_PERIOD_US, CpuCgroup, CpuHierarchy, CpuMechanism, cfs_quota, cgroup_owner, detect_cpu_hierarchy,
    find_hierarchy, run_parent,
};
pub(crate) use cpu_cgroup::{remove_cgroup, remove_run_parent};
pub use cpu_time::{cpu_us_per_request, process_tree_cpu, stat_cpu_ticks};
pub(crate) use kill::kill_and_reap;
pub use kill::kill_processes_in_namespace;
pub use proc_fs::{descendants, process_alive, processes_in_namespace, rss_mb};
