//! The process-driven back end (`Backend::Apache`): Apache 1.3 on Linux as the CSLD paper
//! models it — a listen backlog, a pool of processes (one per connection), a
//! processor-sharing CPU, a FIFO disk, a whole-file LRU cache, clients that retry dropped
//! SYNs — driven by the production policies through the simulated front-end.

mod backlog;
mod cpu;
mod credit;
mod engine;
mod node;
mod pool;
mod serve;
mod stats;

pub use backlog::Backlog;
pub use credit::CreditCpu;
pub(crate) use engine::run;
pub use pool::Pool;
pub use serve::drain_rounds;
