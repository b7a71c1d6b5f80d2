//! Shared vocabulary of Locus: node ids, a caller-supplied clock value, the description of a
//! request that a policy sees, and the status of a back-end node. This crate does no I/O and
//! reads no clock: every `Time` is passed in, so the simulator and the live switch agree.

mod node;
mod request;
mod time;

pub use node::{NodeId, NodeStatus};
pub use request::{Method, RequestInfo, target_hash};
pub use time::Time;
