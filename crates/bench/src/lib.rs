//! System benchmarks: `locus bench proxy` puts the Locus switch in front of two Locus nodes
//! (in the lab's namespaces, or on loopback) and measures keep-alive throughput with wrk, in
//! the same run, directly to one node, through Locus, through HAProxy and from NGINX directly;
//! and the switch's resident memory while it holds thousands of idle keep-alive client
//! connections; the load generator beside wrk; the handoff's latency; ClubWeb and multiple
//! handoff in the lab's namespaces; the node's CPU cost per connection, request and KiB
//! (`node-cost`), the calibration of its CPU model; and HTTP/2 through each balancer (`h2`, the
//! lab's `experiments/h2.toml`); and reloads and binary upgrades under load (`reload`).

mod bench_files;
pub mod cli;
pub mod clubweb;
pub mod h2_bench;
pub mod handoff;
pub mod handoff_latency;
mod idle;
mod idle_tls;
mod lab_rig;
pub mod load_vs_wrk;
pub mod node_cost;
mod one_way_rig;
mod proxy;
pub mod rehandoff;
pub mod reload_bench;
pub mod tls_bench;
pub mod wrk;

pub use proxy::{ProxyBenchOptions, ProxyRow, run_proxy_bench};
pub use wrk::{WrkResult, parse_wrk_output};
