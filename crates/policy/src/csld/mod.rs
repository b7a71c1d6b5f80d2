//! CSLD: a content sniffer that estimates each node's CPU and disk load from the requests
//! forwarded to it (no feedback from the nodes) and splits new connections by smooth WRR
//! over weights derived from those estimates — or, where the switch sees each request end,
//! picks per request by the work the sniffer expects each node to hold.

mod board;
mod estimator;
mod history;
mod inflight;
mod params;
mod policy;
mod stats;
mod tables;
mod task;
pub(crate) mod weights;

pub use params::{CsldParams, CsldPick};
pub use policy::CsldPolicy;
pub(crate) use policy::effective_weights;
