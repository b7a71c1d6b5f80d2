//! CSLD: a content sniffer that estimates each node's CPU and disk load from the requests
//! forwarded to it (no feedback from the nodes) and splits new connections by smooth WRR
//! over weights derived from those estimates.

mod params;

pub use params::CsldParams;
