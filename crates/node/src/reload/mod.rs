//! Applying a new configuration to a running node in place (SIGHUP): check it whole first —
//! it validates, its class file loads and its class table builds, its TLS files and peer key
//! read, its coop peers resolve, its DC tuning builds — then put it in force: the settings
//! requests read (`LiveSettings`), the cache's size (shrinking evicts down to it), TLS,
//! cooperative caching's view and DC mode's tuning, and the peer key. What needs new sockets,
//! threads or state built at start keeps its running value and is named in the report (`diff`).
//! A refused reload changes nothing; a request under way finishes with the settings it began
//! with.

mod diff;

use std::net::SocketAddr;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::class_table::ClassTable;
use crate::config::{ConfigError, NodeConfig};
use crate::context::{NodeContext, count};
use crate::coop::view::CoopView;
use crate::dc::tuning::PreparedTuning;
use crate::doc_store::Resized;
use crate::live_settings::LiveSettings;
use crate::peer_link::PeerKey;

/// Why a reload was refused (the running configuration stays).
#[derive(Debug, thiserror::Error)]
pub enum NodeReloadError {
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error("[tls]: {0}")]
    Tls(#[from] locus_tls::TlsError),
    #[error("the node is shutting down")]
    ShuttingDown,
}

/// What a reload changed.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct NodeReloadReport {
    /// Settings whose new value is in force now.
    pub applied: Vec<&'static str>,
    /// Settings that changed in the configuration but keep their running value until a restart.
    pub needs_restart: Vec<&'static str>,
    /// Documents (and their bytes) evicted because the cache shrank or its object limit fell.
    pub cache_evicted: Resized,
    /// Whether the TLS certificates and ticket keys were read again.
    pub tls_reloaded: bool,
}

/// What becomes of cooperative caching's view.
enum CoopChange {
    /// `[coop]` as it was: the view stays, the key is put in again.
    Rekey,
    /// A new view, built and checked.
    Install(Box<CoopView>),
}

/// A checked configuration, ready to put in force.
struct Plan {
    config: NodeConfig,
    settings: LiveSettings,
    tls: Option<locus_tls::PreparedTls>,
    peer_key: Option<PeerKey>,
    coop: Option<CoopChange>,
    dc: Option<PreparedTuning>,
    report: NodeReloadReport,
}

/// The configuration a node runs with, and what reloads it.
pub struct Reloader {
    node: Arc<NodeContext>,
    /// The address the node listens on (bound: a port of 0 is the one chosen).
    addr: SocketAddr,
    /// The configuration in force (its class file loaded, `max_connections` as configured,
    /// not as fitted to the open-file limit) with its peer key; locked for a whole reload.
    running: Mutex<(NodeConfig, Option<PeerKey>)>,
}

impl Reloader {
    /// The reloader of `node` listening on `addr`, started with `config` and `peer_key`.
    pub fn new(
        node: Arc<NodeContext>,
        addr: SocketAddr,
        config: NodeConfig,
        peer_key: Option<PeerKey>,
    ) -> Reloader {
        Reloader { node, addr, running: Mutex::new((config, peer_key)) }
    }

    /// Check `new` and put it in force; on any error nothing changes. Counted either way.
    pub fn reload(&self, new: NodeConfig) -> Result<NodeReloadReport, NodeReloadError> {
        let mut running = self.running.lock();
        let metrics = &self.node.metrics;
        if self.node.is_shutting_down() {
            count(&metrics.reloads_refused);
            return Err(NodeReloadError::ShuttingDown);
        }
        let plan = match self.plan(&running.0, running.1.as_ref(), new) {
            Ok(plan) => plan,
            Err(e) => {
                count(&metrics.reloads_refused);
                tracing::error!("reload refused, the running configuration stays: {e}");
                return Err(e);
            }
        };
        let report = self.apply(&mut running, plan);
        count(&metrics.reloads);
        Ok(report)
    }

    /// Count a reload refused before a configuration came of it (the file did not parse or
    /// check), and log why.
    pub fn refuse(&self, why: &dyn std::fmt::Display) {
        count(&self.node.metrics.reloads_refused);
        tracing::error!("reload refused, the running configuration stays: {why}");
    }

    /// Everything `new` needs, read and checked; nothing changes yet.
    fn plan(
        &self,
        running: &NodeConfig,
        running_key: Option<&PeerKey>,
        mut new: NodeConfig,
    ) -> Result<Plan, NodeReloadError> {
        new.load_class_file()?;
        let needs_restart = diff::keep_fixed_settings(running, &mut new);
        new.validate()?;
        let node = &self.node;
        let classes = if new.classes == running.classes && new.seed == running.seed {
            node.settings().classes.clone()
        } else {
            Arc::new(ClassTable::new(&new.classes, new.seed)?)
        };
        let tls = match (&node.tls, &new.tls) {
            (Some(service), Some(settings)) => {
                Some(service.prepare(settings.clone(), std::time::SystemTime::now())?)
            }
            _ => None,
        };
        let peers = new.coop.is_some() || new.dc.is_some();
        let peer_key = if peers { new.peer_key()? } else { None };
        let coop = match (&node.coop, &new.coop) {
            (Some(_), Some(c))
                if Some(c) == running.coop.as_ref() && new.cache.max_object == running.cache.max_object =>
            {
                Some(CoopChange::Rekey)
            }
            (Some(_), Some(c)) => {
                let view = CoopView::build(c, self.addr, new.cache.max_object.bytes())
                    .map_err(ConfigError::Invalid)?;
                Some(CoopChange::Install(Box::new(view)))
            }
            _ => None,
        };
        let dc = match (&node.dc, &new.dc) {
            (Some(dc), Some(c)) => Some(dc.prepare_tuning(c).map_err(ConfigError::Invalid)?),
            _ => None,
        };
        let mut applied = diff::live_changes(running, &new);
        let key_changed = match (running_key, peer_key.as_ref()) {
            (Some(a), Some(b)) => !a.same_as(b),
            (a, b) => a.is_some() != b.is_some(),
        };
        if peers && key_changed {
            applied.push("peer_key");
        }
        if tls.is_some() {
            applied.push("tls (certificates and ticket keys read again)");
        }
        let report =
            NodeReloadReport { applied, needs_restart, tls_reloaded: tls.is_some(), ..Default::default() };
        let settings = LiveSettings::new(&new, classes);
        Ok(Plan { config: new, settings, tls, peer_key, coop, dc, report })
    }

    /// Put `plan` in force (nothing here can fail) and log what it did.
    fn apply(&self, running: &mut (NodeConfig, Option<PeerKey>), plan: Plan) -> NodeReloadReport {
        let Plan { config, settings, tls, peer_key, coop, dc, mut report } = plan;
        let node = &self.node;
        node.put_settings(settings);
        let cache = &config.cache;
        report.cache_evicted =
            node.store.resize(cache.capacity.bytes(), cache.max_object.bytes(), cache.revalidate_ms);
        if let (Some(service), Some(prepared)) = (&node.tls, tls) {
            service.install(prepared);
        }
        if let (Some(node_coop), Some(change)) = (&node.coop, coop) {
            match change {
                CoopChange::Rekey => node_coop.rekey(peer_key.clone()),
                CoopChange::Install(view) => node_coop.install(*view, peer_key.clone(), || node.store.keys()),
            }
        }
        if let (Some(node_dc), Some(tuning)) = (&node.dc, dc) {
            node_dc.retune(tuning);
            node_dc.rekey(peer_key.clone());
        }
        *running = (config, peer_key);
        log_report(&report);
        report
    }
}

/// One line for what a reload put in force, and a warning for each setting that waits for a
/// restart.
fn log_report(report: &NodeReloadReport) {
    tracing::info!(
        applied = ?report.applied,
        cache_evicted = report.cache_evicted.documents,
        cache_evicted_bytes = report.cache_evicted.bytes,
        tls = report.tls_reloaded,
        "configuration reloaded"
    );
    for setting in &report.needs_restart {
        tracing::warn!(setting, "reload: this setting changed but keeps its running value until a restart");
    }
}
