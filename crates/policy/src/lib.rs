//! Request distribution policies behind one pure trait, shared by the live switch and the
//! simulator. A `Policy` sees the request and the nodes' status, is told when a request is
//! assigned and completed, and never reads a clock, a global RNG or does I/O: time comes in
//! as `Time`, randomness from a seed given at construction. `Cluster` keeps the load counts.

mod cluster;
mod config;

pub use cluster::Cluster;
pub use config::{ChashKind, PolicyConfig, PolicyConfigError, build};
pub use locus_core::{Method, NodeId, NodeStatus, RequestInfo, Time};

/// A request-distribution policy.
///
/// The caller (the switch or the simulator, through [`Cluster`]) keeps `NodeStatus::load`
/// current: it increments the chosen node's load right after `pick` returns it and before
/// `on_assign`, and decrements it before `on_complete`. `nodes[i].id == NodeId(i)`.
pub trait Policy: Send {
    /// The policy's name as used in configuration (`"lard-r"`, `"chash"`, ...).
    fn name(&self) -> &'static str;

    /// Choose a node for `req` among the nodes that are `up`; `None` when none is up.
    fn pick(&mut self, req: &RequestInfo<'_>, nodes: &[NodeStatus], now: Time) -> Option<NodeId>;

    /// The request was dispatched to `node` (its load already counts it).
    fn on_assign(&mut self, _node: NodeId, _req: &RequestInfo<'_>, _nodes: &[NodeStatus], _now: Time) {}

    /// A request for the target with hash `target_hash` completed on `node` (its load no
    /// longer counts it).
    fn on_complete(&mut self, _node: NodeId, _target_hash: u64, _nodes: &[NodeStatus], _now: Time) {}

    /// `node` left the view (failed or drained); its state (e.g. LARD targets) must go.
    fn on_node_down(&mut self, _node: NodeId, _nodes: &[NodeStatus], _now: Time) {}

    /// `node` came back into the view.
    fn on_node_up(&mut self, _node: NodeId, _nodes: &[NodeStatus], _now: Time) {}

    /// Most requests the front-end may have outstanding at once given the nodes' status,
    /// or `None` for no limit (LARD/R's admission limit S; the rest wait in a FIFO queue).
    fn admission_limit(&self, _nodes: &[NodeStatus]) -> Option<usize> {
        None
    }

    /// Entries in the policy's target-to-node mapping (0 for mapping-free policies).
    fn mapping_len(&self) -> usize {
        0
    }
}
