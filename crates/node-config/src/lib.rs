//! The vocabulary a node is configured in, shared by the node and the tools that write its
//! configuration (the lab, the benches) without depending on the node: the storage and CPU
//! models' settings with their presets and spec strings, and (re-exported from the crates
//! they size and name) `ByteSize` and `Replacement`. Pure: no I/O, no clock.

mod cpu_model;
mod preset_spec;
mod storage;

pub use cpu_model::CpuModelConfig;
pub use locus_cache::Replacement;
pub use locus_classify::{ByteSize, InvalidByteSize};
pub use storage::StorageConfig;
