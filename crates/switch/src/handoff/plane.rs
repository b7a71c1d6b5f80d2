//! `HandoffPlane`: the state of handoff and l4 modes that every worker shares: the control
//! key, the tc forwarder (hold, forward, unforward, expire, l4's selection table), the nodes'
//! MACs, the table of connections living on nodes with their detached assignments, and the
//! counters.

use crate::config::{ConfigError, HandoffSettings, SwitchConfig};
use crate::dispatch::{DetachedAssignment, Dispatcher};
use crate::mode::{L4Selection, Mode};
use locus_bpf::{ConnEntry, ConnKey, Forwarder, ForwarderOptions, NodeSlot, NodeTable, SelectionMode};
use locus_core::{NodeId, RequestInfo};
use locus_handoff::{ConnectionId, ControlKey};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// Slots of the l4 least-connections selection table.
const LC_TABLE: usize = 64;

/// Why the handoff plane could not start.
#[derive(Debug, thiserror::Error)]
pub enum HandoffSetupError {
    #[error("handoff: {0}")]
    Config(ConfigError),
    #[error("handoff: cannot attach the forwarder to {interface}: {error}")]
    Forwarder { interface: String, error: Box<locus_bpf::ForwarderError> },
    #[error("l4: {0}")]
    L4(String),
}

// By hand, not `#[from]`: the message already carries the cause, so it is no `source()`
// (which would print it twice in a `{:#}` chain).
impl From<ConfigError> for HandoffSetupError {
    fn from(e: ConfigError) -> HandoffSetupError {
        HandoffSetupError::Config(e)
    }
}

/// Handoff counters (in `/locus/status` and `/metrics`).
#[derive(Default)]
pub struct HandoffCounters {
    /// Connections handed to a node (first handoffs).
    pub handoffs: AtomicU64,
    /// Connections moved from node to node (re-handoffs).
    pub rehandoffs: AtomicU64,
    /// Handoffs a node refused.
    pub refused: AtomicU64,
    /// Handoffs that failed otherwise (no answer in time, channel lost, dump failed).
    pub failed: AtomicU64,
    /// Connections the switch restored and served itself after a refusal or failure.
    pub served_here: AtomicU64,
    /// Route questions answered.
    pub routes: AtomicU64,
    /// Closes reported by nodes.
    pub closed: AtomicU64,
    /// Control channels up now (every worker keeps one per node).
    pub channels_up: AtomicU64,
    /// Attempts to open a control channel that failed (agent unreachable, key refused).
    pub channel_failures: AtomicU64,
    /// First handoffs that moved a TLS session with the connection (one-way HTTPS).
    pub tls_handoffs: AtomicU64,
    /// TLS connections the switch served two-way instead, by why (`tls12`, `suite`,
    /// `key_updated`, ...).
    pub tls_two_way: Mutex<BTreeMap<&'static str, u64>>,
}

impl HandoffCounters {
    /// A TLS connection is served two-way for `reason`.
    pub fn count_two_way(&self, reason: &'static str) {
        *self.tls_two_way.lock().entry(reason).or_default() += 1;
    }
}

/// A connection living on a node.
pub(super) struct HandedOff {
    pub(super) node: NodeId,
    pub(super) key: ConnKey,
    /// The node's load for the connection's current request, released at the next Route or
    /// at Closed.
    pub(super) assignment: Option<DetachedAssignment>,
    /// The node the connection moves to next (answered to a Route, awaiting its Rehandoff).
    pub(super) next: Option<NodeId>,
    /// Target of the latest request routed, for the next HandOver's hint.
    pub(super) target: String,
    /// The client connection's round-trip time as the switch read it before the first
    /// handoff (zero for a connection the switch never held: l4's cloned connections).
    pub(super) rtt: Duration,
}

/// State of handoff mode shared by every worker.
pub struct HandoffPlane {
    pub key: ControlKey,
    pub settings: HandoffSettings,
    forwarder: Mutex<Option<Forwarder>>,
    /// Each node's MAC and egress interface (forwarder only), resolved at start and retried.
    pub(super) slots: Mutex<Vec<Option<NodeSlot>>>,
    node_ips: Mutex<Vec<Option<Ipv4Addr>>>,
    pub(super) conns: Mutex<HashMap<ConnectionId, HandedOff>>,
    /// l4 without cloning: the connections the forwarder placed, counted on their nodes.
    l4_connections: Mutex<HashMap<ConnKey, DetachedAssignment>>,
    /// The virtual IP clients connect to (from the listen address, or learnt).
    vip: Mutex<Option<Ipv4Addr>>,
    pub counters: HandoffCounters,
}

impl HandoffPlane {
    /// Load the key, attach the forwarder (if an interface is configured) and resolve the
    /// nodes' MACs. Call it on a thread in the switch's network namespace.
    pub fn start(config: &SwitchConfig) -> Result<HandoffPlane, HandoffSetupError> {
        let settings = config.handoff.clone();
        let key = if config.mode == Mode::L4 && config.nodes.iter().all(|n| n.handoff.is_none()) {
            // Plain l4 without cloning: no control channels, no key needed.
            ControlKey::new(&[0u8; 32]).map_err(|e| ConfigError::Invalid(e.to_string()))?
        } else {
            settings.load_key()?
        };
        let forwarder =
            settings.interface.as_deref().map(|iface| attach_forwarder(iface, &settings)).transpose()?;
        let node_ips = config
            .nodes
            .iter()
            .map(|n| match n.addr {
                SocketAddr::V4(a) => Some(*a.ip()),
                SocketAddr::V6(_) => None,
            })
            .collect::<Vec<_>>();
        let vip = match config.listen {
            SocketAddr::V4(a) if !a.ip().is_unspecified() => Some(*a.ip()),
            _ => None,
        };
        let plane = HandoffPlane {
            key,
            settings,
            slots: Mutex::new(vec![None; node_ips.len()]),
            node_ips: Mutex::new(node_ips),
            forwarder: Mutex::new(forwarder),
            conns: Mutex::new(HashMap::new()),
            l4_connections: Mutex::new(HashMap::new()),
            vip: Mutex::new(vip),
            counters: HandoffCounters::default(),
        };
        let missing = plane.resolve_slots(Duration::from_millis(1000));
        if config.mode == Mode::L4 {
            if missing > 0 {
                return Err(HandoffSetupError::L4(format!(
                    "{missing} node(s) without a known MAC (see above)"
                )));
            }
            plane.direct(config)?;
        }
        Ok(plane)
    }

    /// l4 mode: fill the forwarder's node slots (node `i` is slot `i`), the service (the
    /// virtual IP and port) and the selection table.
    fn direct(&self, config: &SwitchConfig) -> Result<(), HandoffSetupError> {
        let forwarder = self.forwarder.lock();
        let f = forwarder.as_ref().ok_or_else(|| HandoffSetupError::L4("no forwarder".into()))?;
        let slots: Vec<NodeSlot> = self.slots.lock().iter().map(|s| s.expect("all resolved")).collect();
        let fail = |what: &str, e: locus_bpf::ForwarderError| HandoffSetupError::L4(format!("{what}: {e}"));
        f.set_nodes(&slots).map_err(|e| fail("node slots", e))?;
        let SocketAddr::V4(service) = config.listen else {
            return Err(HandoffSetupError::L4("the listen address must be IPv4".into()));
        };
        f.set_services(&[(*service.ip(), service.port())]).map_err(|e| fail("services", e))?;
        let weights = config.weights();
        let (table, mode) = match config.handoff.l4_selection {
            L4Selection::Wrr => (NodeTable::weighted(&weights), SelectionMode::RoundRobin),
            L4Selection::Lc => (
                NodeTable::least_connections(&vec![0; weights.len()], &weights, LC_TABLE),
                SelectionMode::RoundRobin,
            ),
            L4Selection::Hash => (NodeTable::round_robin(slots.len()), SelectionMode::Hash),
            L4Selection::Rr => (NodeTable::round_robin(slots.len()), SelectionMode::RoundRobin),
        };
        f.set_selection(table.slots()).map_err(|e| fail("selection table", e))?;
        f.set_selection_mode(mode).map_err(|e| fail("selection mode", e))?;
        tracing::info!(service = %service, selection = %config.handoff.l4_selection, nodes = slots.len(), "l4 forwarding on");
        Ok(())
    }

    /// l4 with least connections: rewrite the selection table from the connections the
    /// forwarder directs to each node now.
    pub fn rebalance_least_connections(&self, weights: &[u32]) {
        let forwarder = self.forwarder.lock();
        let Some(f) = forwarder.as_ref() else { return };
        let Ok(entries) = f.entries() else { return };
        let mut counts = vec![0u64; weights.len()];
        for (_, e) in entries {
            if e.is_l4()
                && let Some(c) = counts.get_mut(usize::from(e.node))
            {
                *c += 1;
            }
        }
        let table = NodeTable::least_connections(&counts, weights, LC_TABLE);
        if let Err(e) = f.set_selection(table.slots()) {
            tracing::warn!("l4: cannot rewrite the least-connections table: {e}");
        }
    }

    /// l4 with a policy that computes weights (CSLD, wrr-metrics): rewrite the selection
    /// table as `NodeTable::weighted(round(W))`. With `count_connections` (no node clones, so
    /// no Route tells the policy of requests) the forwarder's l4 entries are first matched
    /// against the last call's: the policy is told of each new connection on its node
    /// (`assign_to`) and of each gone one (its release). Returns whether the policy gave
    /// weights (false: it computes none, stop calling).
    pub fn rebalance_by_policy(&self, dispatcher: &Dispatcher, count_connections: bool) -> bool {
        let forwarder = self.forwarder.lock();
        let Some(f) = forwarder.as_ref() else { return false };
        if count_connections {
            match f.entries() {
                Ok(entries) => self.track_l4_connections(dispatcher, &entries),
                Err(e) => tracing::debug!("l4: cannot read the forwarding entries: {e}"),
            }
        }
        let Some(weights) = dispatcher.l4_weights() else { return false };
        let table = NodeTable::weighted(&table_weights(&weights));
        if table.slots().is_empty() {
            return true;
        }
        if let Err(e) = f.set_selection(table.slots()) {
            tracing::warn!("l4: cannot rewrite the selection table from the policy's weights: {e}");
        }
        true
    }

    /// Count the forwarder's l4 connections against their nodes in `dispatcher`: new entries
    /// are assigned, vanished ones released.
    fn track_l4_connections(&self, dispatcher: &Dispatcher, entries: &[(ConnKey, ConnEntry)]) {
        let mut known = self.l4_connections.lock();
        let live: HashMap<ConnKey, usize> =
            entries.iter().filter(|(_, e)| e.is_l4()).map(|(k, e)| (*k, usize::from(e.node))).collect();
        known.retain(|key, assignment| {
            let keep = live.get(key) == Some(&assignment.node.index());
            if !keep {
                dispatcher.release(*assignment);
            }
            keep
        });
        let connection = RequestInfo::get("");
        for (key, node) in live {
            if node < self.node_ips.lock().len() && !known.contains_key(&key) {
                known.insert(key, dispatcher.assign_to(NodeId(node as u32), &connection));
            }
        }
    }

    /// Whether packets are steered by the tc forwarder (else nodes share the switch's host).
    pub fn has_forwarder(&self) -> bool {
        self.forwarder.lock().is_some()
    }

    /// Resolve the MACs of nodes that have none yet; returns how many are still missing.
    pub fn resolve_slots(&self, timeout: Duration) -> usize {
        let forwarder = self.forwarder.lock();
        let Some(f) = forwarder.as_ref() else { return 0 };
        let Some(iface) = f.interface().map(str::to_string) else { return 0 };
        drop(forwarder);
        let ifindex = match locus_bpf::interface(&iface) {
            Ok(i) => i.index,
            Err(e) => {
                tracing::warn!(interface = %iface, "handoff: {e}");
                return self.node_ips.lock().len();
            }
        };
        let mut missing = 0;
        let node_ips = self.node_ips.lock().clone();
        for (i, ip) in node_ips.iter().enumerate() {
            if self.slots.lock()[i].is_some() {
                continue;
            }
            let Some(ip) = ip else {
                missing += 1;
                continue;
            };
            match locus_bpf::resolve_neighbour(*ip, timeout) {
                Ok(n) => self.slots.lock()[i] = Some(NodeSlot { mac: n.mac, ifindex }),
                Err(e) => {
                    tracing::warn!(node = %ip, "handoff: cannot resolve the node's MAC: {e}");
                    missing += 1;
                }
            }
        }
        missing
    }

    /// Nodes a reload added (their slots follow the others'): their MACs are resolved now
    /// (with a forwarder; until then connections to them are served by proxy).
    pub fn add_nodes(&self, addrs: &[SocketAddr]) {
        let ips = addrs.iter().map(|a| match a {
            SocketAddr::V4(a) => Some(*a.ip()),
            SocketAddr::V6(_) => None,
        });
        let mut node_ips = self.node_ips.lock();
        node_ips.extend(ips);
        self.slots.lock().resize(node_ips.len(), None);
        drop(node_ips);
        self.resolve_slots(Duration::from_millis(200));
    }

    /// Whether a connection can be steered to `node` now.
    pub fn can_steer_to(&self, node: NodeId) -> bool {
        !self.has_forwarder() || self.slots.lock().get(node.index()).is_some_and(Option::is_some)
    }

    /// Put the client's packets of `key` on hold, pointing at `node` (no-op without forwarder).
    pub fn hold(&self, key: ConnKey, node: NodeId) -> Result<(), String> {
        let forwarder = self.forwarder.lock();
        let Some(f) = forwarder.as_ref() else { return Ok(()) };
        let slot = self.slots.lock().get(node.index()).copied().flatten();
        let slot = slot.ok_or_else(|| format!("no MAC known for node {}", node.0))?;
        f.hold(key, slot).map_err(|e| e.to_string())
    }

    /// Let the held packets of `key` through to the node it points at.
    pub(super) fn forward(&self, key: ConnKey) -> Result<(), String> {
        let forwarder = self.forwarder.lock();
        let Some(f) = forwarder.as_ref() else { return Ok(()) };
        f.forward(key).map_err(|e| e.to_string())
    }

    /// Delete the forwarding entry of `key` (its packets reach this host's stack again).
    pub fn unforward(&self, key: ConnKey) {
        if let Some(f) = self.forwarder.lock().as_ref()
            && let Err(e) = f.remove(key)
        {
            tracing::warn!(?key, "handoff: cannot remove a forwarding entry: {e}");
        }
    }

    /// Delete forwarding entries idle past `handoff.expire_idle_s`; returns how many.
    pub fn expire(&self) -> usize {
        let idle = Duration::from_secs(self.settings.expire_idle_s);
        match self.forwarder.lock().as_ref().map(|f| f.expire(idle)) {
            Some(Ok(n)) => n,
            Some(Err(e)) => {
                tracing::warn!("handoff: expiring forwarding entries failed: {e}");
                0
            }
            None => 0,
        }
    }

    /// On shutdown: with pinned maps, leave the forwarder running for the next switch; after
    /// a binary upgrade (`handed_over`) leave the filter alone — it is the new switch's now.
    pub fn release_forwarder(&self, handed_over: bool) {
        let Some(f) = self.forwarder.lock().take() else { return };
        if handed_over {
            f.leave_attached();
            tracing::info!("forwarder left to the switch that took over");
            return;
        }
        if f.pin_dir().is_some() {
            match f.keep_running() {
                Ok(()) => tracing::info!("forwarder left running for the next switch (pinned maps)"),
                Err(e) => tracing::warn!("handoff: cannot leave the forwarder running: {e}"),
            }
        }
    }

    /// Connections living on nodes now.
    pub fn handed_off_now(&self) -> usize {
        self.conns.lock().len()
    }

    /// Up to `max` of the connections on nodes now: id, node, latest target.
    pub fn sessions(&self, max: usize) -> Vec<(ConnectionId, NodeId, String)> {
        let conns = self.conns.lock();
        conns.iter().take(max).map(|(id, c)| (*id, c.node, c.target.clone())).collect()
    }

    /// Number of forwarding entries (0 without forwarder).
    pub fn forwarding_entries(&self) -> usize {
        self.forwarder.lock().as_ref().and_then(|f| f.entries().ok()).map_or(0, |e| e.len())
    }

    pub(super) fn key_of(&self, id: ConnectionId) -> Option<ConnKey> {
        let vip = (*self.vip.lock())?;
        Some(ConnKey::new(id.client(), SocketAddrV4::new(vip, id.service_port())))
    }

    /// The address clients connect to, as learned from the connections handed off (a binary
    /// upgrade hands it to the next switch, so it can route connections handed off before it).
    pub fn vip(&self) -> Option<std::net::Ipv4Addr> {
        *self.vip.lock()
    }

    /// Take the address clients connect to from the switch this one took over from.
    pub fn adopt_vip(&self, vip: std::net::Ipv4Addr) {
        self.learn_vip(SocketAddrV4::new(vip, 0));
    }

    fn learn_vip(&self, local: SocketAddrV4) {
        let mut vip = self.vip.lock();
        if vip.is_none() {
            *vip = Some(*local.ip());
        }
    }

    /// Forget a connection and give back its node's load to `dispatcher`.
    pub(super) fn forget(&self, dispatcher: &Dispatcher, id: ConnectionId) -> Option<HandedOff> {
        let mut gone = self.conns.lock().remove(&id)?;
        if let Some(a) = gone.assignment.take() {
            dispatcher.release(a);
        }
        Some(gone)
    }

    /// Drop a connection the switch serves again (restored here), keeping its request's
    /// dispatch: the session serving the restored connection completes it (the policy is
    /// not asked twice for one request).
    pub(super) fn withdraw(&self, id: ConnectionId) -> Option<DetachedAssignment> {
        self.conns.lock().remove(&id)?.assignment
    }

    /// Register a connection about to be handed off (before HandOver, so a Closed racing the
    /// registration finds it).
    pub(super) fn register(
        &self,
        id: ConnectionId,
        key: ConnKey,
        node: NodeId,
        assignment: DetachedAssignment,
        target: String,
        rtt: Duration,
    ) {
        self.learn_vip(key.server());
        self.conns
            .lock()
            .insert(id, HandedOff { node, key, assignment: Some(assignment), next: None, target, rtt });
    }
}

/// A selection table's weights from a policy's: `round(W)`; when every weight rounds to 0
/// but some is positive (little traffic in the period), the weights scaled so the largest
/// is 100.
pub(super) fn table_weights(weights: &[f64]) -> Vec<u32> {
    let clean = |w: f64| if w.is_finite() && w > 0.0 { w } else { 0.0 };
    let rounded: Vec<u32> = weights.iter().map(|&w| clean(w).round().min(u32::MAX as f64) as u32).collect();
    let max = weights.iter().copied().map(clean).fold(0.0, f64::max);
    if rounded.iter().any(|&w| w > 0) || max == 0.0 {
        return rounded;
    }
    weights.iter().map(|&w| (clean(w) * 100.0 / max).round() as u32).collect()
}

/// Attach the tc forwarder to `iface` (adopting maps an earlier switch pinned) and say what
/// it found there.
fn attach_forwarder(iface: &str, settings: &HandoffSettings) -> Result<Forwarder, HandoffSetupError> {
    let options = ForwarderOptions { pin_dir: settings.pin_dir.clone(), ..Default::default() };
    let f = Forwarder::attach(iface, options).map_err(|source| HandoffSetupError::Forwarder {
        interface: iface.to_string(),
        error: Box::new(source),
    })?;
    if f.adopted() {
        tracing::info!(interface = %iface, "forwarder adopted the pinned maps of an earlier switch");
    }
    if !f.replaced_pins().is_empty() {
        tracing::info!(
            maps = ?f.replaced_pins(),
            "forwarder: pinned maps of another layout (an older switch) replaced by fresh ones; \
             the connections were kept"
        );
    }
    // Decided once per interface and cached; an error here would fail every hold.
    match f.interface_index().map(|index| f.redirects_into_peer(index)).unwrap_or(Ok(false)) {
        Ok(true) => tracing::info!(
            interface = %iface,
            "forwarder: a veth whose peer is in another namespace; frames for the nodes go \
             straight into the peer"
        ),
        Ok(false) => {}
        Err(e) => tracing::warn!(interface = %iface, "forwarder: {e}"),
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_weights_round_and_scale_up_only_when_everything_rounds_to_zero() {
        assert_eq!(table_weights(&[3.4, 0.6, 0.0]), vec![3, 1, 0]);
        assert_eq!(table_weights(&[0.2, 0.4, 0.0]), vec![50, 100, 0]);
        assert_eq!(table_weights(&[0.0, f64::NAN, -1.0]), vec![0, 0, 0]);
        assert_eq!(table_weights(&[1e12]), vec![1_000_000_000_000f64.min(u32::MAX as f64) as u32]);
    }
}
