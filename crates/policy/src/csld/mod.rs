//! CSLD: a content sniffer that estimates each node's CPU and disk load from the requests
//! forwarded to it (no feedback from the nodes) and splits new connections by smooth WRR
//! over weights derived from those estimates.

mod board;
mod estimator;
mod history;
mod params;
mod policy;
mod stats;
mod tables;
mod task;
pub(crate) mod weights;

pub use params::CsldParams;
pub use policy::CsldPolicy;
pub(crate) use policy::effective_weights;
