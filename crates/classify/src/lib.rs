//! The request classifier shared by the node (which charges a class's cost), the switch and
//! the simulator (whose policies estimate with it): URI patterns — a path prefix plus required
//! query parameters — mapped to a class with a CPU-cost distribution, a disk cost, a response
//! size and a resource kind; and the deterministic body of a class's response. Pure: no I/O,
//! no clock; cost draws take the caller's generator.

mod byte_size;
mod class_config;
mod classifier;
mod cost;
mod dynamic_body;

pub use byte_size::{ByteSize, InvalidByteSize};
pub use class_config::{ClassConfig, ClassFile};
pub use classifier::{ClassError, ClassSpec, RequestClassifier};
pub use cost::CostDistribution;
pub use dynamic_body::dynamic_body;
pub use locus_core::{ClassCost, ResourceKind};
