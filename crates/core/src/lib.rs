//! Shared vocabulary of Locus: node ids, a caller-supplied clock value, the description of a
//! request that a policy sees, request-class costs, the status of a back-end node, what a
//! node reports of its own load, and a processor-sharing queue (a node's modelled CPUs). This
//! crate does no I/O and reads no clock: every `Time` is passed in, so the simulator and the
//! live switch agree.

mod class;
mod node;
mod processor_sharing;
mod report;
mod request;
mod time;

pub use class::{ClassCost, ResourceKind};
pub use node::{NodeId, NodeStatus};
pub use processor_sharing::{JobId, ProcessorSharing};
pub use report::NodeReport;
pub use request::{Method, RequestInfo, target_hash};
pub use time::Time;
