//! An experiment: its TOML file parsed strictly and expanded into a matrix of points (`file`),
//! each point of that matrix (`point`), its switch rows (`switch_row`) and workloads
//! (`workload`), and where a key of the file is (`toml_lines`).

mod file;
mod point;
mod switch_row;
mod toml_lines;
mod workload;

pub(crate) use file::validate_node_counts;
pub use file::{Experiment, NodeSettings, SwitchKind};
pub use point::{ExperimentPoint, seed_of_run};
pub use switch_row::{HAPROXY_POLICIES, NGINX_POLICIES, SwitchRow, haproxy_balance, nginx_balance};
pub use workload::{DynamicSpec, FileSizes, HotSpotSpec, LoadClient, WorkloadSpec};
