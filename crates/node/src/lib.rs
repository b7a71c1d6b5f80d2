//! The Locus back-end web server (`locus node`): static files from a document root through a
//! byte-bounded document cache (LRU/LFU/GDS/GDSF), an optional storage model or origin for
//! misses, dynamic endpoints with real CPU cost from a class table (or an optional CPU model
//! that charges every request's CPU cost as modelled time), an admin listener, and an
//! optional handoff agent for the one-way switch (`[handoff]`), and optional cooperative
//! caching (`[coop]`: misses fetched from peers' memory before storage), or DC mode (`[dc]`:
//! each node the home of its documents and a co-op for replicas of the others'), whose requests
//! between nodes are signed with the cluster's peer key (`peer_key_file`). Start one in-process
//! with `NodeServer::start(NodeConfig)`; `NodeServer::reload` puts a new configuration in force
//! in place (SIGHUP).

mod admin;
mod class_table;
pub mod cli;
mod config;
mod connection;
mod context;
mod coop;
mod cpu;
mod dc;
mod doc_store;
mod document_root;
mod dynamic;
mod error;
mod handoff;
mod listen_queue;
mod live_settings;
mod miss;
mod node_metrics;
mod open_files;
mod origin;
mod out_queue;
mod peer_link;
mod peer_requests;
mod reload;
mod request_view;
mod response;
mod server;
mod shared_pages;
mod static_files;
mod storage_model;
mod tls_accept;

pub use class_table::{ClassTable, DynamicClass, dynamic_body};
pub use config::{
    CacheConfig, ConfigError, HandoffConfig, NodeConfig, NodeLimits, RehandoffPolicy, available_cpus,
};
pub use coop::CoopConfig;
pub use cpu::{CpuJob, CpuModel, CpuModelClosed, CpuModelConfig, CpuModelStats, burn_cpu, thread_cpu_time};
pub use dc::{DcArgs, DcConfig};
pub use doc_store::Resized;
pub use document_root::{DocumentRoot, PathError, Resolved, decode_request_path};
pub use error::NodeError;
pub use locus_classify::{ClassConfig, CostDistribution};
/// The configuration vocabulary, at home in `locus-node-config`; re-exported for the crates
/// that still name it through the node.
pub use locus_node_config::{ByteSize, InvalidByteSize, Replacement, StorageConfig};
pub use node_metrics::NodeStats;
pub use origin::OriginAddr;
pub use peer_link::{PeerKey, PeerKeyError, SecretText, peer_auth_value};
pub use reload::{NodeReloadError, NodeReloadReport};
pub use response::{RangeOutcome, evaluate_range};
pub use server::NodeServer;
pub use storage_model::{DiskQueue, StorageModel};
