//! The peer back end (`locus sim reproduce dc`): DC-Apache servers without a front-end — the
//! run's configuration and result (`peer`), the data set (`site`), the event loop (`engine`),
//! one server (`server`), the closed-loop surfer (`surfer`) and the per-second CPU peaks.

mod cpu_peaks;
mod engine;
pub mod peer;
mod server;
pub mod site;
mod surfer;

pub use peer::{DcPeerConfig, DcRun, simulate_dc};
pub use site::DcSite;
