//! `NodeContext`: everything the connections of a running node share (configuration limits,
//! document root, document store, storage model, origin, class table, CPU pool, counters);
//! `WorkerContext`: what belongs to one worker thread (its counters, origin and peer
//! connections, the handoff agent, shutdown signal).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use locus_http::Limits;
use locus_io::ConnectionSlot;
use tokio::sync::watch;

use crate::backend_forward::PeerConnections;
use crate::class_table::ClassTable;
use crate::config::NodeLimits;
use crate::cpu_pool::CpuPool;
use crate::doc_store::DocStore;
use crate::document_root::DocumentRoot;
use crate::handoff_agent::HandoffAgent;
use crate::node_metrics::{NodeMetrics, WorkerCounters};
use crate::origin::{OriginAddr, OriginPool};
use crate::storage_model::StorageModel;

/// Shared state of a node.
pub struct NodeContext {
    pub name: String,
    /// `Server: locus` and `X-Locus-Node: <name>` lines, sent on every response.
    pub node_headers: Bytes,
    pub limits: NodeLimits,
    pub parse_limits: Limits,
    pub header_timeout: Duration,
    pub keepalive_timeout: Duration,
    /// The document root; `None` when misses go to an origin.
    pub root: Option<DocumentRoot>,
    pub origin: Option<OriginAddr>,
    pub store: DocStore,
    pub storage: Option<StorageModel>,
    pub classes: ClassTable,
    pub cpu: CpuPool,
    pub metrics: NodeMetrics,
    /// Hosts accepted in absolute-form targets besides the request's own Host.
    pub server_names: Vec<String>,
    pub shutting_down: AtomicBool,
}

impl NodeContext {
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Relaxed)
    }

    /// A place for one more client connection (accepted, or restored after a handoff),
    /// counted in `active_connections` until the slot is dropped; `None` when
    /// `max_connections` are open already.
    pub fn claim_connection(&self) -> Option<ConnectionSlot> {
        self.metrics.connections.claim()
    }

    /// Miss cost handed to GDS/GDSF for an object of `len` bytes: the modelled disk time in
    /// ms with a storage model, otherwise 1 (so GDS aims at hit ratio).
    pub fn miss_cost(&self, len: u64) -> f64 {
        self.storage.as_ref().map_or(1.0, |s| s.service_time(len).as_secs_f64() * 1000.0)
    }
}

/// State of one worker thread.
pub struct WorkerContext {
    pub index: usize,
    pub node: Arc<NodeContext>,
    /// Connections to the origin, owned by this worker's event loop.
    pub origin_pool: Option<OriginPool>,
    /// Connections to other nodes for back-end forwarding, owned by this worker.
    pub peer_pool: PeerConnections,
    /// The handoff agent, when the node runs one.
    pub handoff: Option<Arc<HandoffAgent>>,
    /// Turns true when the node shuts down.
    pub shutdown: watch::Receiver<bool>,
}

impl WorkerContext {
    pub fn counters(&self) -> &WorkerCounters {
        self.node.metrics.worker(self.index)
    }
}

/// Add one to a node-wide counter.
pub fn count(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}
