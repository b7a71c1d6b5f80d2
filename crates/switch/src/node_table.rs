//! The switch's node table: one slot per node it has known (`NodeInfo`: address, counters,
//! health), indexed by `NodeId`. Slots only grow: a reload that adds a node appends one, a
//! node removed keeps its slot, retired and out of the view, so the ids in flight stay valid
//! and its requests finish. Readers take a cheap snapshot; a reload swaps the whole list.

use crate::config::NodeEntry;
use locus_core::{NodeId, NodeReport};
use parking_lot::RwLock;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// A back-end node as the switch knows it.
pub struct NodeInfo {
    pub name: String,
    pub addr: SocketAddr,
    /// Value for a Host header when the client sent none.
    pub host_header: String,
    /// Address of the node's handoff agent, if it has one.
    pub handoff: Option<SocketAddr>,
    /// A reload removed the node: out of the view for good, its requests in flight finish.
    retired: AtomicBool,
    /// What the operator set (`locus ctl`): in service, draining or disabled.
    admin_state: AtomicU8,
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

impl NodeInfo {
    /// A node named `name` at `entry`'s addresses, with nothing counted yet.
    pub fn new(name: String, entry: &NodeEntry) -> NodeInfo {
        NodeInfo {
            name,
            addr: entry.addr,
            host_header: entry.addr.to_string(),
            handoff: entry.handoff,
            retired: AtomicBool::new(false),
            admin_state: AtomicU8::new(AdminState::Enabled as u8),
            generation: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            bytes_from: AtomicU64::new(0),
            check_passes: AtomicU64::new(0),
            check_fails: AtomicU64::new(0),
            last_check: Default::default(),
            admin: entry.admin,
            last_report: Default::default(),
        }
    }

    /// Whether a reload removed this node: it stays out of the view for good.
    pub fn is_retired(&self) -> bool {
        self.retired.load(Relaxed)
    }

    /// What the operator set.
    pub fn admin_state(&self) -> AdminState {
        match self.admin_state.load(Relaxed) {
            1 => AdminState::Draining,
            2 => AdminState::Disabled,
            _ => AdminState::Enabled,
        }
    }

    pub fn set_admin_state(&self, state: AdminState) {
        self.admin_state.store(state as u8, Relaxed);
    }

    /// Whether the node may be in the view: not retired, not drained or disabled.
    pub fn in_service(&self) -> bool {
        !self.is_retired() && self.admin_state() == AdminState::Enabled
    }

    /// Mark the node removed by a reload (`true`) or back in service (`false`).
    pub fn set_retired(&self, retired: bool) {
        self.retired.store(retired, Relaxed);
    }

    /// Whether `entry` names this same node (the same addresses): a reload keeps its slot,
    /// and with it what the policy learned of it.
    pub fn is_same_node(&self, entry: &NodeEntry) -> bool {
        self.addr == entry.addr && self.admin == entry.admin && self.handoff == entry.handoff
    }
}

/// A node's state as the operator set it with `locus ctl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminState {
    /// In service (the view as health checks say).
    Enabled = 0,
    /// Out of the view, its requests in flight finishing; health checks go on.
    Draining = 1,
    /// Out of the view, health checks paused (maintenance).
    Disabled = 2,
}

impl AdminState {
    pub fn as_str(self) -> &'static str {
        match self {
            AdminState::Enabled => "enabled",
            AdminState::Draining => "draining",
            AdminState::Disabled => "disabled",
        }
    }
}

/// Every node slot, behind a lock held only to copy one `Arc`.
pub struct NodeTable {
    slots: RwLock<Arc<Vec<Arc<NodeInfo>>>>,
}

impl NodeTable {
    pub fn new(nodes: Vec<NodeInfo>) -> NodeTable {
        NodeTable { slots: RwLock::new(Arc::new(nodes.into_iter().map(Arc::new).collect())) }
    }

    /// The slot of `node` (ids come from the dispatcher, which only knows slots that exist).
    pub fn get(&self, node: NodeId) -> Arc<NodeInfo> {
        self.slots.read()[node.index()].clone()
    }

    /// Every slot now, retired ones included, in id order.
    pub fn all(&self) -> Arc<Vec<Arc<NodeInfo>>> {
        self.slots.read().clone()
    }

    /// How many slots there are.
    pub fn len(&self) -> usize {
        self.slots.read().len()
    }

    /// The slot of the node named `name` that is not retired.
    pub fn find(&self, name: &str) -> Option<NodeId> {
        let slots = self.slots.read();
        slots.iter().position(|n| n.name == name && !n.is_retired()).map(|i| NodeId(i as u32))
    }

    /// Append `info` as a new slot; its id.
    pub fn push(&self, info: NodeInfo) -> NodeId {
        let mut slots = self.slots.write();
        let mut next = Vec::with_capacity(slots.len() + 1);
        next.extend(slots.iter().cloned());
        next.push(Arc::new(info));
        *slots = Arc::new(next);
        NodeId(slots.len() as u32 - 1)
    }
}
