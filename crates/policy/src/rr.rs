//! `rr`: plain round robin over the nodes that are up, ignoring weights and load.

use crate::Policy;
use locus_core::{NodeId, NodeStatus, RequestInfo, Time};

/// Round robin: each pick takes the next up node after the previous pick.
#[derive(Debug, Default)]
pub struct RoundRobinPolicy {
    /// Index where the next scan for an up node starts.
    next: usize,
}

impl RoundRobinPolicy {
    /// A round robin that starts at node 0.
    pub fn new() -> RoundRobinPolicy {
        RoundRobinPolicy { next: 0 }
    }
}

impl Policy for RoundRobinPolicy {
    /// Reads the nodes' status afresh at every pick: nothing to adapt.
    fn adapt_to_nodes(&mut self, _nodes: &[NodeStatus], _now: Time) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        "rr"
    }

    fn pick(&mut self, _req: &RequestInfo<'_>, nodes: &[NodeStatus], _now: Time) -> Option<NodeId> {
        let n = nodes.len();
        for step in 0..n {
            let i = (self.next + step) % n;
            if nodes[i].up {
                self.next = (i + 1) % n;
                return Some(NodeId(i as u32));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(n: u32) -> Vec<NodeStatus> {
        (0..n).map(|i| NodeStatus::new(NodeId(i))).collect()
    }

    #[test]
    fn rr_cycles_through_up_nodes_and_skips_down() {
        let mut p = RoundRobinPolicy::new();
        let mut ns = nodes(4);
        let req = RequestInfo::get("/x");
        let picks: Vec<u32> = (0..8).map(|_| p.pick(&req, &ns, Time::ZERO).unwrap().0).collect();
        assert_eq!(picks, [0, 1, 2, 3, 0, 1, 2, 3]);
        ns[1].up = false;
        ns[2].up = false;
        let picks: Vec<u32> = (0..4).map(|_| p.pick(&req, &ns, Time::ZERO).unwrap().0).collect();
        assert_eq!(picks, [0, 3, 0, 3]);
        for n in &mut ns {
            n.up = false;
        }
        assert_eq!(p.pick(&req, &ns, Time::ZERO), None);
        assert_eq!(p.pick(&req, &[], Time::ZERO), None);
    }
}
