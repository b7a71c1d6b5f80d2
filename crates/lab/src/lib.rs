//! The namespace lab behind `locus lab`: builds a cluster in network namespaces (client,
//! switch, N nodes on a bridge, a virtual IP in LVS direct-routing style), runs experiments —
//! a matrix of switches, policies, modes, node counts and workloads, each point on fresh nodes
//! with `locus load` verifying every byte — and writes a Markdown report with SVG plots and
//! `results.json`. Everything it creates is torn down, also on failure and Ctrl-C. The same
//! runner runs an experiment on loopback without root: `locus demo` (`loopback_demo`).

pub mod browser;
pub mod cli;
mod cluster;
mod congestion;
mod cpu_time;
mod dc_node_spec;
mod demo;
mod demo_checks;
mod demo_tuning;
mod error;
mod experiment;
mod experiment_point;
mod listeners;
pub mod loopback_demo;
mod net;
mod plots;
mod process;
mod report;
mod report_setup;
mod results;
mod runner;
pub mod servers;
mod sim_twin;
mod site;
mod stale_labs;
mod switch_row;
mod teardown;
mod toml_lines;
mod topology;
mod utc_time;
mod workload_spec;

pub use cluster::{
    ClusterDelta, ClusterSnapshot, ClusterSpec, LabCluster, NodeCounters, get_header, max_over_mean,
};
pub use congestion::CongestionControl;
pub use cpu_time::{cpu_us_per_request, process_tree_cpu, stat_cpu_ticks};
pub use demo::{DEMO_EXPERIMENT, demo_experiment, tuning_note};
pub use demo_checks::{DemoCheck, checks_markdown, demo_checks};
pub use error::LabError;
pub use experiment::{
    DynamicSpec, Experiment, ExperimentPoint, FileSizes, HAPROXY_POLICIES, HotSpotSpec, NGINX_POLICIES,
    NodeSettings, SwitchKind, SwitchRow, WorkloadSpec, haproxy_balance, nginx_balance,
};
pub use plots::write_plots;
pub use process::{
    ChildGuard, descendants, die_with_spawning_thread, find_program, free_port, give_open_files,
    kill_processes_in_namespace, process_alive, processes_in_namespace, require_program, rss_mb,
};
pub use report::{LabReport, PlotFile, Series, SeriesPoint, ratio_text};
pub use results::{FailedPoint, PointResult, write_results_json};
pub use runner::{
    LabOptions, LabRun, measure, point_result, preflight, run_experiment, run_experiment_on_loopback,
};
pub use servers::{HaproxyBalance, Net, NginxBalance, NodeSpec, Server, SwitchSpec};
pub use sim_twin::{
    TWIN_REQUESTS, TwinPoint, simulate_twin, strategy_of, twin_config, twin_markdown, twin_notes,
    twin_workload,
};
pub use site::LabSite;
pub use stale_labs::{CleanReport, bridge_owner, clean_stale_labs, namespace_owner, scratch_folder_owner};
pub use teardown::{InterruptWatch, ScratchFolder, TeardownSummary, tear_down_everything};
pub use topology::{
    BRIDGE_PREFIX, DEFAULT_CONGESTION_CONTROL, LAN_PREFIX_LEN, LabHost, LabNetwork, MAX_NODES,
    NAMESPACE_PREFIX, SCRATCH_FOLDER_PREFIX, VIRTUAL_IP,
};
pub use utc_time::UtcTime;
