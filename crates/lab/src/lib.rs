//! The namespace lab behind `locus lab`: builds a cluster in network namespaces (client,
//! switch, N nodes on a bridge, a virtual IP in LVS direct-routing style), runs experiments —
//! a matrix of switches, policies, modes, node counts and workloads, each point on fresh nodes
//! with `locus load` verifying every byte — and writes a Markdown report with SVG plots and
//! `results.json`. Everything it creates is torn down, also on failure and Ctrl-C. The same
//! runner runs an experiment on loopback without root: `locus demo` (`loopback_demo`). The
//! namespaces, servers, processes and teardown it runs on are the rig's (`locus-rig`).

pub mod browser;
pub mod cli;
mod cluster;
mod demo;
mod error;
mod experiment;
mod h2load;
mod h2load_point;
pub mod loopback_demo;
mod measured_load;
mod plots;
mod report;
mod results;
mod runner;
mod sim_twin;
mod site;
mod utc_time;

pub use cluster::{
    ClusterDelta, ClusterSnapshot, ClusterSpec, LabCluster, NodeCounters, TLS_NAME, max_over_mean,
};
pub use demo::{DEMO_EXPERIMENT, DemoCheck, checks_markdown, demo_checks, demo_experiment, tuning_note};
pub use error::LabError;
pub use experiment::{
    DynamicSpec, Experiment, ExperimentPoint, FileSizes, HAPROXY_POLICIES, HotSpotSpec, LoadClient,
    NGINX_POLICIES, NodeSettings, SwitchKind, SwitchRow, WorkloadSpec, haproxy_balance, nginx_balance,
};
pub use h2load::{H2loadFigures, H2loadRun, run_h2load};
pub use measured_load::MeasuredLoad;
pub use plots::write_plots;
pub use report::{LabReport, PlotFile, Series, SeriesPoint, ratio_text};
pub use results::{FailedPoint, PointResult, write_results_json};
pub use runner::{
    LabOptions, LabRun, measure, point_result, preflight, run_experiment, run_experiment_on_loopback,
};
pub use sim_twin::{
    TWIN_REQUESTS, TwinPoint, simulate_twin, strategy_of, twin_config, twin_markdown, twin_notes,
    twin_workload,
};
pub use site::LabSite;
pub use utc_time::UtcTime;
