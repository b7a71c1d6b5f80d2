//! Node views the policies' unit tests start from: every node up, idle or with given loads.

use locus_core::{NodeId, NodeStatus};

/// A node per entry of `loads`, node `i` carrying `loads[i]` requests, otherwise as
/// `NodeStatus::new` makes it.
pub(crate) fn loaded(loads: &[u32]) -> Vec<NodeStatus> {
    loads
        .iter()
        .enumerate()
        .map(|(i, &l)| {
            let mut s = NodeStatus::new(NodeId(i as u32));
            s.load = l;
            s
        })
        .collect()
}
