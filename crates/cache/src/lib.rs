//! Byte-bounded in-memory document cache with LRU, LFU, GDS and GDSF replacement, used by
//! the back-end node (values are document bodies) and the trace-driven simulator (values are
//! `()`). Pure: no I/O, no clock reads, no randomness; recency is a logical access counter.

mod doc_cache;
mod eviction_heap;
mod eviction_order;
mod key_index;
mod recency_list;
mod replacement;
mod stats;

pub use doc_cache::{DocCache, InsertOutcome};
pub use replacement::{Replacement, UnknownReplacement};
pub use stats::CacheStats;
