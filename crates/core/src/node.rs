//! Node identity and the status of one back-end node as a policy sees it: whether it is in
//! the view, its configured weight, its slow-start ramp, and its load (requests assigned and
//! not yet completed), plus an optional load figure the node reported itself.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Index of a back-end node in the cluster's node list (0-based, stable for a run).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NodeId(pub u32);

impl NodeId {
    /// The index as a `usize`, for indexing node tables.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node{}", self.0)
    }
}

/// What a policy knows about one node.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeStatus {
    /// The node's id (equal to its position in the slice handed to policies).
    pub id: NodeId,
    /// In the view: healthy and accepting work. Policies never pick a node that is not up.
    pub up: bool,
    /// Configured weight, at least 1.
    pub weight: u32,
    /// Slow-start factor in (0, 1]: 1 when fully in service, smaller just after recovery.
    pub ramp: f64,
    /// Requests assigned to the node and not yet completed.
    pub load: u32,
    /// A load figure the node reported itself (for metric-driven policies), if any.
    pub reported_load: Option<f64>,
}

impl NodeStatus {
    /// A node that is up, weight 1, fully ramped, idle.
    pub fn new(id: NodeId) -> NodeStatus {
        NodeStatus { id, up: true, weight: 1, ramp: 1.0, load: 0, reported_load: None }
    }

    /// Load scaled by the slow-start ramp: a node that just came back looks busier than it
    /// is, so load-driven policies send it less until it has warmed up.
    pub fn ramped_load(&self) -> f64 {
        self.load as f64 / self.ramp.max(0.05)
    }

    /// Load per unit of weight, scaled by the ramp (for weighted least-connections).
    pub fn weighted_load(&self) -> f64 {
        self.ramped_load() / self.weight.max(1) as f64
    }

    /// Weight scaled by the slow-start ramp (for weighted round-robin).
    pub fn effective_weight(&self) -> f64 {
        self.weight.max(1) as f64 * self.ramp.clamp(0.0, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ramped_load_inflates_load_of_a_warming_node() {
        let mut n = NodeStatus::new(NodeId(0));
        n.load = 10;
        assert_eq!(n.ramped_load(), 10.0);
        n.ramp = 0.5;
        assert_eq!(n.ramped_load(), 20.0);
        n.weight = 4;
        assert_eq!(n.weighted_load(), 5.0);
        assert_eq!(n.effective_weight(), 2.0);
    }
}
