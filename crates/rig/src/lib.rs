//! The rig the lab and the benchmarks run on: a cluster's hosts in network namespaces (or
//! loopback) with their congestion control, the servers started on them (Locus nodes and
//! switches, HAProxy, NGINX) as guarded child processes, /proc look-ups, loopback ports never
//! handed out twice, and a teardown that removes everything it made, also on Ctrl-C.

mod error;
mod header_probe;
pub mod network;
mod ports;
mod process;
mod programs;
pub mod servers;
mod stale_labs;
mod teardown;

pub use error::RigError;
pub use header_probe::get_header;
pub use network::{
    BRIDGE_PREFIX, CongestionControl, DEFAULT_CONGESTION_CONTROL, LAN_PREFIX_LEN, LabHost, LabNetwork,
    MAX_NODES, NAMESPACE_PREFIX, Net, SCRATCH_FOLDER_PREFIX, VIRTUAL_IP,
};
pub use ports::free_port;
pub use process::{
    CFS_PERIOD_US, ChildGuard, CpuCgroup, CpuHierarchy, CpuMechanism, cfs_quota, cgroup_owner,
    cpu_us_per_request, descendants, detect_cpu_hierarchy, die_with_spawning_thread, find_hierarchy,
    give_open_files, kill_processes_in_namespace, process_alive, process_tree_cpu, processes_in_namespace,
    rss_mb, run_parent, stat_cpu_ticks,
};
pub use programs::{find_program, require_program};
pub use servers::{HaproxyBalance, HaproxyTuning, NginxBalance, NodeSpec, Server, SwitchSpec};
pub use stale_labs::{CleanReport, bridge_owner, clean_stale_labs, namespace_owner, scratch_folder_owner};
pub use teardown::{InterruptWatch, ScratchFolder, TeardownSummary, tear_down_everything};
