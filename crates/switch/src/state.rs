//! State shared by every worker of one switch: configuration, the dispatcher, the node table
//! with per-node counters and health, global counters, and the shutdown signal.

use crate::config::SwitchConfig;
use crate::dispatch::Dispatcher;
use locus_classify::RequestClassifier;
use locus_core::{NodeId, NodeReport};
use locus_io::ConnectionLimit;
use locus_policy::Cluster;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Duration;
use tokio::sync::watch;

/// A back-end node as the switch knows it.
pub struct NodeInfo {
    pub name: String,
    pub addr: SocketAddr,
    /// Value for a Host header when the client sent none.
    pub host_header: String,
    /// Bumped each time the node leaves the view, so pooled connections from before are dropped.
    pub generation: AtomicU64,
    pub requests: AtomicU64,
    pub failures: AtomicU64,
    pub bytes_from: AtomicU64,
    /// Health-check streaks (kept here so passive failures reset them).
    pub check_passes: AtomicU64,
    pub check_fails: AtomicU64,
    /// The newest active check's outcome (none before the first), for `/locus/status`.
    pub last_check: parking_lot::Mutex<Option<CheckRecord>>,
    /// Address of the node's admin listener (metrics polls), if configured.
    pub admin: Option<SocketAddr>,
    /// The newest load report polled from the node (with the probe's time), if any.
    pub last_report: parking_lot::Mutex<Option<NodeReport>>,
}

/// What the newest active check of a node found, and how long it took (up to the limit).
#[derive(Clone, Debug)]
pub struct CheckRecord {
    /// The status a passing check got.
    pub status: Option<u16>,
    /// Why a failing check failed (timed out, refused, answered 5xx).
    pub failure: Option<String>,
    pub took: Duration,
}

impl CheckRecord {
    pub fn new(outcome: &Result<u16, String>, took: Duration) -> CheckRecord {
        match outcome {
            Ok(status) => CheckRecord { status: Some(*status), failure: None, took },
            Err(why) => CheckRecord { status: None, failure: Some(why.clone()), took },
        }
    }

    /// The record in `/locus/status`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "passed": self.failure.is_none(),
            "status": self.status,
            "failure": self.failure,
            "took_ms": self.took.as_millis() as u64,
        })
    }
}

/// Counters for the whole switch.
#[derive(Default)]
pub struct SwitchCounters {
    pub accepted: AtomicU64,
    pub rejected_over_limit: AtomicU64,
    /// Client connections and requests answered 503 because the switch was short of
    /// descriptors (none or too few left to reach a node).
    pub shed_no_descriptors: AtomicU64,
    pub requests: AtomicU64,
    /// Responses to clients by status class: 1xx..5xx.
    pub responses: [AtomicU64; 5],
    pub client_errors: AtomicU64,
    pub retries: AtomicU64,
    pub queue_timeouts: AtomicU64,
    pub no_node: AtomicU64,
    pub node_timeouts: AtomicU64,
    pub bad_responses: AtomicU64,
    pub bytes_to_clients: AtomicU64,
    pub bytes_to_nodes: AtomicU64,
}

impl SwitchCounters {
    /// A request no node could take: why (no node up, or the admission queue's timeout).
    pub fn dispatch_failed(&self, e: &crate::dispatch::DispatchError) {
        match e {
            crate::dispatch::DispatchError::NoNodeUp => self.no_node.fetch_add(1, Relaxed),
            crate::dispatch::DispatchError::QueueTimeout => self.queue_timeouts.fetch_add(1, Relaxed),
        };
    }

    pub fn response(&self, status: u16) {
        let class = (status / 100).clamp(1, 5) as usize - 1;
        self.responses[class].fetch_add(1, Relaxed);
    }
}

/// Everything the workers, health checker and admin server share.
pub struct Shared {
    pub config: SwitchConfig,
    /// The class table every request is classified by (empty without classes).
    pub classifier: RequestClassifier,
    pub limits: locus_http::Limits,
    pub dispatcher: Dispatcher,
    pub nodes: Vec<NodeInfo>,
    pub counters: SwitchCounters,
    /// HTTP/2 connections, streams, resets and GOAWAYs.
    pub h2: crate::h2::H2Counters,
    /// Client connections open, against `limits.max_connections`: each session holds a slot.
    pub connections: Arc<ConnectionLimit>,
    pub shutting_down: AtomicBool,
    pub shutdown_tx: watch::Sender<bool>,
    /// Handoff mode's plane (None in the other modes).
    pub handoff: Option<crate::handoff::HandoffPlane>,
    /// The TLS listener's configuration, bound and counters, when `listen_tls` is set.
    pub tls: Option<Arc<locus_tls::TlsService>>,
    /// The TLS listener's port, once bound (`redirect_to_https` sends clients there).
    pub https_port: std::sync::OnceLock<u16>,
}

impl Shared {
    /// The state of a switch whose `config` `SwitchServer::start` has validated.
    pub fn new(config: SwitchConfig) -> Result<Shared, crate::ConfigError> {
        let weights = config.weights();
        let site = crate::site::SiteInputs::load(&config)?;
        let policy = locus_policy::build_with(&config.policy, &weights, &site.inputs)
            .map_err(|e| crate::ConfigError::Invalid(format!("policy: {e}")))?;
        let cluster = Cluster::new(policy, &weights, Duration::from_millis(config.health.slow_start_ms));
        let nodes = config
            .node_names()
            .into_iter()
            .zip(&config.nodes)
            .map(|(name, n)| NodeInfo {
                name,
                addr: n.addr,
                host_header: n.addr.to_string(),
                generation: AtomicU64::new(0),
                requests: AtomicU64::new(0),
                failures: AtomicU64::new(0),
                bytes_from: AtomicU64::new(0),
                check_passes: AtomicU64::new(0),
                check_fails: AtomicU64::new(0),
                last_check: Default::default(),
                admin: n.admin,
                last_report: Default::default(),
            })
            .collect();
        let limits = locus_http::Limits {
            max_head_bytes: config.limits.max_head_bytes,
            max_headers: config.limits.max_headers,
        };
        let (shutdown_tx, _) = watch::channel(false);
        let connections = ConnectionLimit::new(config.limits.max_connections);
        let tls = match &config.tls {
            Some(t) => {
                let alpn: &[&[u8]] = if config.http2.enabled_in(config.mode) {
                    &[locus_tls::ALPN_H2, locus_tls::ALPN_HTTP1]
                } else {
                    &[locus_tls::ALPN_HTTP1]
                };
                Some(Arc::new(locus_tls::TlsService::new(t.clone(), alpn, std::time::SystemTime::now())?))
            }
            None => None,
        };
        Ok(Shared {
            config,
            classifier: site.classifier,
            limits,
            dispatcher: Dispatcher::new(cluster),
            nodes,
            counters: SwitchCounters::default(),
            h2: crate::h2::H2Counters::default(),
            connections,
            shutting_down: AtomicBool::new(false),
            shutdown_tx,
            handoff: None,
            tls,
            https_port: std::sync::OnceLock::new(),
        })
    }

    /// Take `node` out of the view after a failure seen by live traffic (passive check).
    pub fn node_failed(&self, node: NodeId, why: &str) {
        let info = &self.nodes[node.index()];
        info.failures.fetch_add(1, Relaxed);
        info.check_passes.store(0, Relaxed);
        if self.config.health.passive && self.set_node_up(node, false) {
            tracing::warn!(node = %info.name, addr = %info.addr, "node out of the view: {why}");
        }
    }

    /// Put a node in or out of the view; returns whether that changed anything.
    pub fn set_node_up(&self, node: NodeId, up: bool) -> bool {
        let changed = self.dispatcher.set_up(node, up);
        if changed && !up {
            self.nodes[node.index()].generation.fetch_add(1, Relaxed);
        }
        changed
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Relaxed)
    }
}
