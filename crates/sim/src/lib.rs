//! `locus-sim`: the trace-driven discrete-event simulator behind `locus sim`. It runs the
//! switch's own policies (`locus_policy`) and the node's own cache (`locus_cache`) over the
//! LARD paper's FIFO back end (with its idealised baselines LB/GC and WRR/GMS) or a
//! process-driven Apache back end (`apache`, the CSLD paper's model), and reproduces the
//! LARD, CSLD, CAP and Socket Cloning studies into JSON, CSV, SVG plots and Markdown reports.
//! The FIFO back end can also model each node's network link and a shared file server.
//!
//! ```
//! use locus_sim::{SimConfig, SimPolicy, Workload, simulate};
//! use locus_trace::ZipfTraceSpec;
//!
//! let trace = Workload::synthetic(ZipfTraceSpec { requests: 2000, documents: 200, ..Default::default() })?;
//! let config = SimConfig { policy: SimPolicy::from_name("lard-r")?, nodes: 4, ..SimConfig::lard98() };
//! let report = simulate(&trace, &config)?;
//! assert_eq!(report.measured_requests, 2000);
//! assert!(report.rps > 0.0 && report.miss_ratio <= 1.0);
//! # Ok::<(), locus_sim::SimError>(())
//! ```

pub mod apache;
pub mod berkeley_like;
pub mod cli;
mod config;
mod cost_model;
pub mod dc;
mod directory;
mod engine;
mod error;
mod event_queue;
mod frontend;
mod lb_gc;
mod network;
mod node_model;
mod plot;
mod queues;
mod report;
pub mod reproduce;
mod sim_policy;
mod sweep;
mod trace_classes;
mod wc98_like;
mod workload;

pub use config::{ApacheModel, Arrivals, Backend, CacheModel, CpuModel, NodeEvent, Preset, SimConfig};
pub use cost_model::{ClassCost, CostModel, GmsCost, RttModel};
pub use directory::{BuildIdHasher, CacheDirectory, IdHasher, MAX_DIRECTORY_NODES};
pub use engine::{SimRun, Simulation, simulate};
pub use error::SimError;
pub use event_queue::EventQueue;
pub use frontend::{FrontEnd, FrontEndEvent, FrontEndLimit, build_policy, build_policy_with};
pub use lb_gc::GlobalCachePolicy;
pub use network::{CloneCost, FileServer, FileServerModel, LinkModel, NodeLink, Storage};
pub use node_model::{LoadMeter, NodeCounters, NodeModel};
pub use plot::{Axes, PlotMetric, Series, plot_lines, write_plots};
pub use queues::{CpuQueue, DiskQueue, LinkQueue};
pub use report::{FileServerUse, LinkUse, NodeReport, ServerMetrics, SimReport, to_csv};
pub use reproduce::study::{Durations, StudyPoint, find_point, run_jobs, write_study};
pub use sim_policy::SimPolicy;
pub use sweep::{SweepSpec, run_each, run_points, run_sweep, write_results};
pub use trace_classes::{apply_class_table, class_costs, read_class_file};
pub use wc98_like::{WC98_IMS_SHARE, WC98_INV_SHARE, Wc98LikeSpec, wc98_like_sizes};
pub use workload::{RequestKind, TargetMeta, Workload, WorkloadBuilder};
