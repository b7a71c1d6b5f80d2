//! `CapPolicy`: the client-aware policy (CAP) — requests are classed by the resource they
//! mostly use (none, CPU, disk, both; from the class table's `resource`, unknown or
//! unclassed requests counting as none) and each class has its own round-robin pointer
//! over the up nodes, so no node gets a skewed share of any resource-intensive class.

use crate::{Policy, PolicyInputs};
use locus_core::{NodeId, NodeStatus, RequestInfo, ResourceKind, Time};

/// One round robin per resource class.
#[derive(Debug)]
pub struct CapPolicy {
    /// The resource of each class of the class table (`RequestInfo::class` indexes it).
    resource_of_class: Vec<ResourceKind>,
    /// Where each class's next scan for an up node starts, by `ResourceKind::index`.
    next: [usize; ResourceKind::ALL.len()],
}

impl CapPolicy {
    /// CAP over the classes of `inputs`.
    pub fn new(inputs: &PolicyInputs) -> CapPolicy {
        CapPolicy {
            resource_of_class: inputs.classes.iter().map(|c| c.resource).collect(),
            next: [0; ResourceKind::ALL.len()],
        }
    }

    /// The resource class of `req` (`None` for a request of no known class).
    pub fn resource_of(&self, req: &RequestInfo<'_>) -> ResourceKind {
        req.class.and_then(|c| self.resource_of_class.get(c as usize).copied()).unwrap_or_default()
    }
}

impl Policy for CapPolicy {
    fn name(&self) -> &'static str {
        "cap"
    }

    fn pick(&mut self, req: &RequestInfo<'_>, nodes: &[NodeStatus], _now: Time) -> Option<NodeId> {
        let next = &mut self.next[self.resource_of(req).index()];
        let n = nodes.len();
        for step in 0..n {
            let i = (*next + step) % n;
            if nodes[i].up {
                *next = (i + 1) % n;
                return Some(NodeId(i as u32));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use locus_core::ClassCost;
    use proptest::prelude::*;

    fn cap() -> CapPolicy {
        let class = |resource| ClassCost { cpu_ns: 1, disk_ns: 1, size: 1, resource };
        let classes = vec![class(ResourceKind::Cpu), class(ResourceKind::Disk), class(ResourceKind::CpuDisk)];
        CapPolicy::new(&PolicyInputs { classes: classes.into(), files: None })
    }

    fn nodes(n: u32) -> Vec<NodeStatus> {
        (0..n).map(|i| NodeStatus::new(NodeId(i))).collect()
    }

    fn request(class: Option<u16>) -> RequestInfo<'static> {
        let mut r = RequestInfo::get("/x");
        r.class = class;
        r
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 64,
            rng_seed: proptest::test_runner::RngSeed::Fixed(0xCA9),
            ..ProptestConfig::default()
        })]
        #[test]
        fn cap_spreads_each_class_evenly(
            n in 1u32..9,
            classes in prop::collection::vec(prop::option::of(0u16..5), 1..300),
        ) {
            let mut p = cap();
            let ns = nodes(n);
            let mut counts = [[0u32; 8]; 4];
            for &c in &classes {
                let req = request(c);
                let node = p.pick(&req, &ns, Time::ZERO).unwrap();
                counts[p.resource_of(&req).index()][node.index()] += 1;
            }
            for per_class in &counts {
                let used = &per_class[..n as usize];
                let (lo, hi) = (used.iter().min().unwrap(), used.iter().max().unwrap());
                prop_assert!(hi - lo <= 1, "{counts:?}");
            }
        }
    }

    #[test]
    fn cap_classes_requests_by_resource_and_unknown_as_none() {
        let p = cap();
        assert_eq!(p.resource_of(&request(Some(0))), ResourceKind::Cpu);
        assert_eq!(p.resource_of(&request(Some(2))), ResourceKind::CpuDisk);
        assert_eq!(p.resource_of(&request(Some(3))), ResourceKind::None);
        assert_eq!(p.resource_of(&request(None)), ResourceKind::None);
    }

    #[test]
    fn cap_skips_down_nodes() {
        let mut p = cap();
        let mut ns = nodes(4);
        ns[1].up = false;
        ns[2].up = false;
        for class in [None, Some(0), Some(1)] {
            let picks: Vec<u32> =
                (0..4).map(|_| p.pick(&request(class), &ns, Time::ZERO).unwrap().0).collect();
            assert_eq!(picks, [0, 3, 0, 3], "class {class:?}");
        }
        ns.iter_mut().for_each(|n| n.up = false);
        assert_eq!(p.pick(&request(None), &ns, Time::ZERO), None);
        assert_eq!(p.pick(&request(None), &[], Time::ZERO), None);
    }
}
