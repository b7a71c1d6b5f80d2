//! Cooperative caching (`[coop]`): misses fetched from peers' memory before storage — its
//! configuration, the holder directory, the view of the cluster a reload swaps (`CoopView`),
//! the shared state (`CoopNode`), the requesting and answering sides, the wire format, the
//! background notices and counters.

pub mod config;
pub mod directory;
pub mod fetch;
pub mod node;
pub mod notices;
pub mod serve;
pub mod stats;
pub mod view;
pub mod wire;

pub use config::CoopConfig;
