//! `NodeContext`: everything the connections of a running node share (the settings a reload
//! swaps — limits, class table and the rest of `LiveSettings` —, document root, document
//! store, storage model, origin, CPU pool or model, counters, listeners' accept queues) and the
//! load it reports (`NodeReport`);
//! `WorkerContext`: what belongs to one worker thread (its counters, its miss source with the
//! origin's or peers' connections, back-end forwarding's and DC mode's peer connections, the
//! handoff agent, shutdown signal).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use locus_core::NodeReport;
use locus_io::ConnectionSlot;
use parking_lot::RwLock;
use tokio::sync::watch;

use crate::coop::node::CoopNode;
use crate::cpu::model::CpuModel;
use crate::cpu::pool::CpuPool;
use crate::dc::fetch::DcWorker;
use crate::dc::node::DcNode;
use crate::doc_store::DocStore;
use crate::document_root::DocumentRoot;
use crate::handoff::agent::HandoffAgent;
use crate::handoff::backend_forward::PeerConnections;
use crate::listen_queue::ListenQueue;
use crate::live_settings::LiveSettings;
use crate::miss::MissSource;
use crate::node_metrics::{NodeMetrics, WorkerCounters};
use crate::origin::OriginAddr;
use crate::peer_requests::PeerRequests;
use crate::storage_model::{DiskSet, StorageModel};

/// Shared state of a node.
pub struct NodeContext {
    pub name: String,
    /// `Server: locus` and `X-Locus-Node: <name>` lines, sent on every response.
    pub node_headers: Bytes,
    /// Limits, timeouts, classes and the rest a reload changes: read with `settings`.
    pub live: RwLock<Arc<LiveSettings>>,
    /// The document root; `None` when misses go to an origin.
    pub root: Option<DocumentRoot>,
    pub origin: Option<OriginAddr>,
    pub store: DocStore,
    pub storage: Option<StorageModel>,
    /// One node-local FIFO disk that dynamic classes' disk reads queue on when the node has
    /// no storage model (with one, they queue on its disks and this stays idle).
    pub class_disk: DiskSet,
    pub cpu: CpuPool,
    /// The modelled CPUs (`[cpu]`): with them every request's CPU cost, dynamic ones
    /// included, is waited in a processor-sharing queue instead of burnt on `cpu`.
    pub cpu_model: Option<CpuModel>,
    pub metrics: NodeMetrics,
    /// The HTTP listeners accepting now, for the accept-queue length.
    pub listen_queue: ListenQueue,
    /// Cooperative caching's shared state, when `[coop]` is on.
    pub coop: Option<Arc<CoopNode>>,
    /// DC mode's shared state, when `[dc]` is on.
    pub dc: Option<Arc<DcNode>>,
    pub shutting_down: AtomicBool,
    /// HTTPS on the client listener, when configured.
    pub tls: Option<Arc<locus_tls::TlsService>>,
}

impl NodeContext {
    /// The settings in force now (one request reads them once: a reload in between does not
    /// change them under it).
    pub fn settings(&self) -> Arc<LiveSettings> {
        self.live.read().clone()
    }

    /// Put `settings` in force for the requests that start from now on.
    pub fn put_settings(&self, settings: LiveSettings) {
        *self.live.write() = Arc::new(settings);
    }

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

    /// Wait for a dynamic class's disk read of `service` time for `path`: on the storage
    /// model's disk holding `path` if the node models storage, otherwise on the node-local
    /// class disk. Returns the time charged (queue plus service).
    pub async fn read_class_disk(&self, path: &str, service: Duration) -> Duration {
        match &self.storage {
            Some(model) => model.read_for(path, service).await,
            None => self.class_disk.read(path, service).await,
        }
    }

    /// Requests waiting for a (modelled) disk or reading from it now.
    pub fn disk_waiting(&self) -> usize {
        self.storage.as_ref().map_or(0, StorageModel::waiting) + self.class_disk.waiting()
    }

    /// The node's load now, as the switch polls it (`probe` is the switch's to measure).
    pub fn load_report(&self) -> NodeReport {
        let s = self.metrics.snapshot();
        let clamp = |n: u64| n.min(u32::MAX as u64) as u32;
        NodeReport {
            listen_queue: self.listen_queue.queued(),
            disk_wait: clamp(self.disk_waiting() as u64),
            static_active: clamp(s.static_active),
            dynamic_active: clamp(s.dynamic_active),
            probe: None,
        }
    }
}

/// State of one worker thread.
pub struct WorkerContext {
    pub index: usize,
    pub node: Arc<NodeContext>,
    /// Where this worker's misses come from (document root, peers, origin), with the
    /// connections that takes, owned by this worker's event loop.
    pub miss: MissSource,
    /// Connections to other nodes for back-end forwarding, owned by this worker.
    pub peer_pool: PeerConnections,
    /// The other nodes' requests this worker answers apart from clients'.
    pub peer_requests: PeerRequests,
    /// DC mode's connections to the other members, owned by this worker.
    pub dc: Option<DcWorker>,
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
