//! State shared by every worker of one switch: configuration, the dispatcher, the node table
//! with per-node counters and health, global counters, and the shutdown signal.

use crate::config::SwitchConfig;
use crate::dispatch::Dispatcher;
use crate::node_table::{NodeInfo, NodeTable};
use locus_classify::RequestClassifier;
use locus_core::NodeId;
use locus_io::ConnectionLimit;
use locus_policy::Cluster;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Duration;
use tokio::sync::watch;

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
    /// Reloads put in force, and refused (the running configuration stayed).
    pub reloads: AtomicU64,
    pub reloads_refused: AtomicU64,
    /// Runtime-API commands carried out, and refused (malformed, unknown node, not allowed).
    pub ctl_commands: AtomicU64,
    pub ctl_refused: AtomicU64,
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

/// Reads the configuration again, for a reload the runtime API asks for.
pub type ConfigSource = Box<dyn Fn() -> Result<SwitchConfig, String> + Send + Sync>;

/// Everything the workers, health checker and admin server share.
pub struct Shared {
    /// The configuration in force: the one started with, then each reload's.
    pub(crate) config: parking_lot::RwLock<Arc<SwitchConfig>>,
    /// The class table every request is classified by (empty without classes).
    pub(crate) classifier: parking_lot::RwLock<Arc<RequestClassifier>>,
    /// What the policy reads of the site (class costs, the file table), for rebuilding it.
    pub(crate) policy_inputs: parking_lot::RwLock<locus_policy::PolicyInputs>,
    /// Where `reload` (the runtime API's) reads the configuration again: the file and flags
    /// the switch started with (`cli` sets it).
    pub config_source: std::sync::OnceLock<ConfigSource>,
    /// A binary upgrade's state: second descriptors of the listening sockets (handed over on
    /// `takeover`), the connection to the switch this one took over from (open while it
    /// drains), the one to the switch that took over from this one (kept until exit), and
    /// what to do once handed over (`cli`: end the process gracefully).
    pub(crate) upgrade_sockets: parking_lot::Mutex<Option<crate::listeners::Listeners>>,
    pub(crate) predecessor: parking_lot::Mutex<Option<(u32, std::os::unix::net::UnixStream)>>,
    pub(crate) successor: parking_lot::Mutex<Option<std::os::unix::net::UnixStream>>,
    pub handed_over: AtomicBool,
    pub on_handed_over: std::sync::OnceLock<Box<dyn Fn() + Send + Sync>>,
    /// Reloads run one at a time.
    pub(crate) reload_lock: parking_lot::Mutex<()>,
    /// The configuration's own nodes and each discovery source's list, merged by every reload.
    pub(crate) discovery: crate::discovery::Registry,
    /// Reloads that changed the node table, so far: health checks and metrics polls start
    /// for the slots added or back in service.
    pub nodes_changed: watch::Sender<u64>,
    pub dispatcher: Dispatcher,
    pub nodes: NodeTable,
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
        // The discovery sources' first lists: the switch starts with their nodes.
        let (config, discovery) = crate::discovery::first_lists(config)?;
        let weights = config.weights();
        let site = crate::site::SiteInputs::load(&config)?;
        let policy = locus_policy::build_with(&config.policy, &weights, &site.inputs)
            .map_err(|e| crate::ConfigError::Invalid(format!("policy: {e}")))?;
        let cluster = Cluster::new(policy, &weights, Duration::from_millis(config.health.slow_start_ms));
        let nodes = config
            .node_names()
            .into_iter()
            .zip(&config.nodes)
            .map(|(name, n)| NodeInfo::new(name, n))
            .collect();
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
            config: parking_lot::RwLock::new(Arc::new(config)),
            classifier: parking_lot::RwLock::new(Arc::new(site.classifier)),
            policy_inputs: parking_lot::RwLock::new(site.inputs.clone()),
            config_source: std::sync::OnceLock::new(),
            upgrade_sockets: parking_lot::Mutex::new(None),
            predecessor: parking_lot::Mutex::new(None),
            successor: parking_lot::Mutex::new(None),
            handed_over: AtomicBool::new(false),
            on_handed_over: std::sync::OnceLock::new(),
            reload_lock: parking_lot::Mutex::new(()),
            discovery,
            nodes_changed: watch::channel(0).0,
            dispatcher: Dispatcher::new(cluster),
            nodes: NodeTable::new(nodes),
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
        let info = self.nodes.get(node);
        info.failures.fetch_add(1, Relaxed);
        info.check_passes.store(0, Relaxed);
        if self.config().health.passive && self.set_node_up(node, false) {
            tracing::warn!(node = %info.name, addr = %info.addr, "node out of the view: {why}");
        }
    }

    /// Put a node in or out of the view; returns whether that changed anything. A retired,
    /// drained or disabled node does not come back.
    pub fn set_node_up(&self, node: NodeId, up: bool) -> bool {
        if up && !self.nodes.get(node).in_service() {
            return false;
        }
        let changed = self.dispatcher.set_up(node, up);
        if changed && !up {
            self.nodes.get(node).generation.fetch_add(1, Relaxed);
        }
        changed
    }

    /// The configuration in force now (a reload swaps it; parts that cannot change live
    /// keep their start-up values in it).
    pub fn config(&self) -> Arc<SwitchConfig> {
        self.config.read().clone()
    }

    /// The class table in force now.
    pub fn classifier(&self) -> Arc<RequestClassifier> {
        self.classifier.read().clone()
    }

    /// The request-head limits in force now.
    pub fn limits(&self) -> locus_http::Limits {
        let c = self.config();
        locus_http::Limits { max_head_bytes: c.limits.max_head_bytes, max_headers: c.limits.max_headers }
    }

    /// The pid of the switch this one took over from, while it is still draining (its
    /// connection open); `None` once it has exited or when there was none.
    pub fn predecessor_draining(&self) -> Option<u32> {
        let mut slot = self.predecessor.lock();
        let (pid, stream) = slot.as_ref()?;
        let mut byte = [std::mem::MaybeUninit::<u8>::uninit(); 1];
        // The stream is non-blocking: WouldBlock while the predecessor is alive and silent.
        match socket2::SockRef::from(stream).peek(&mut byte) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Some(*pid),
            _ => {
                *slot = None;
                None
            }
        }
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Relaxed)
    }
}
