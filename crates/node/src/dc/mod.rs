//! DC mode (`[dc]`): every node the home of its own documents and a co-op for replicas of the
//! others' — its configuration, the shared state (`DcNode`) and what a reload changes of it
//! (`tuning`), serving clients, the control requests between members, lazy replication from
//! homes, the background task and counters.

pub mod background;
pub mod config;
pub mod control;
pub mod fetch;
pub mod node;
pub mod serve;
pub mod site;
pub mod stats;
pub mod tuning;

pub use config::{DcArgs, DcConfig};
