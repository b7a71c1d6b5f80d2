//! The node's CPU: real CPU burnt by dynamic requests on a thread pool (`pool`), or the
//! modelled CPUs (`model`, configured by `locus_node_config::CpuModelConfig`) that charge each connection's and
//! request's cost as time in a processor-sharing queue (`charge`).

pub mod charge;
pub mod model;
pub mod pool;

pub use locus_node_config::CpuModelConfig;
pub use model::{CpuJob, CpuModel, CpuModelClosed, CpuModelStats};
pub use pool::{burn_cpu, thread_cpu_time};
