//! `FrontEnd`: the simulated switch's decision logic — a `locus_policy::Cluster` (the very
//! type the live switch's dispatcher wraps) driven exactly as the switch drives it (assign →
//! load + 1, complete → load − 1, node up/down), plus the front-end admission limit S. The
//! queue of requests waiting for admission lives in the engine.

use std::sync::Arc;
use std::time::Duration;

use locus_core::{NodeId, NodeReport, NodeStatus, RequestInfo, Time};
use locus_policy::{Cluster, Policy, PolicyInputs, build_with};
use serde::{Deserialize, Serialize};

use crate::directory::CacheDirectory;
use crate::error::SimError;
use crate::lb_gc::GlobalCachePolicy;
use crate::sim_policy::SimPolicy;

/// How many requests the front-end lets into the cluster at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FrontEndLimit {
    /// The policy's own admission limit (LARD/R's S) if it has one, else the LARD paper's
    /// S = (n − 1)·T_high + T_low − 1 for the n nodes up: the paper's front-end limits
    /// outstanding requests under every strategy.
    #[default]
    Auto,
    /// Only the policy's own limit, as the live switch does (none for most policies).
    Policy,
    /// No limit.
    None,
    /// At most this many.
    Fixed(usize),
}

impl Serialize for FrontEndLimit {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            FrontEndLimit::Auto => s.serialize_str("auto"),
            FrontEndLimit::Policy => s.serialize_str("policy"),
            FrontEndLimit::None => s.serialize_str("none"),
            FrontEndLimit::Fixed(n) => s.serialize_u64(*n as u64),
        }
    }
}

impl<'de> Deserialize<'de> for FrontEndLimit {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<FrontEndLimit, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Name(String),
            Fixed(u64),
        }
        match Repr::deserialize(d)? {
            Repr::Fixed(n) => Ok(FrontEndLimit::Fixed(n as usize)),
            Repr::Name(n) => n.parse().map_err(serde::de::Error::custom),
        }
    }
}

impl std::str::FromStr for FrontEndLimit {
    type Err = String;
    fn from_str(s: &str) -> Result<FrontEndLimit, String> {
        match s {
            "auto" => Ok(FrontEndLimit::Auto),
            "policy" => Ok(FrontEndLimit::Policy),
            "none" => Ok(FrontEndLimit::None),
            n => n
                .parse()
                .map(FrontEndLimit::Fixed)
                .map_err(|_| format!("front-end limit `{s}` is not auto, policy, none or a number")),
        }
    }
}

/// The simulated front-end's decisions: which node, and whether one more may enter.
pub struct FrontEnd {
    cluster: Cluster,
    limit: FrontEndLimit,
    t_low: u32,
    t_high: u32,
    max_in_flight: usize,
}

/// The policy object for `policy` on `nodes` nodes of weight 1.
pub fn build_policy(
    policy: &SimPolicy,
    nodes: usize,
    t_low: u32,
    t_high: u32,
    directory: Option<Arc<CacheDirectory>>,
) -> Result<Box<dyn Policy>, SimError> {
    build_policy_with(policy, nodes, t_low, t_high, directory, &PolicyInputs::default())
}

/// `build_policy` for a site whose class costs and files are known (`Workload::policy_inputs`).
pub fn build_policy_with(
    policy: &SimPolicy,
    nodes: usize,
    t_low: u32,
    t_high: u32,
    directory: Option<Arc<CacheDirectory>>,
    inputs: &PolicyInputs,
) -> Result<Box<dyn Policy>, SimError> {
    let weights = vec![1u32; nodes];
    match policy.front_end_config(t_low, t_high) {
        Some(config) => Ok(build_with(&config, &weights, inputs)?),
        None => {
            let dir = directory
                .ok_or_else(|| SimError::Config(format!("{} needs the cache directory", policy.name())))?;
            Ok(Box::new(GlobalCachePolicy::new(dir)))
        }
    }
}

impl FrontEnd {
    /// A front-end for `nodes` nodes of weight 1 running `policy` (LARD thresholds
    /// `t_low`/`t_high`), slow start as in the switch's `Cluster`.
    pub fn new(
        policy: &SimPolicy,
        nodes: usize,
        t_low: u32,
        t_high: u32,
        limit: FrontEndLimit,
        slow_start: Duration,
        directory: Option<Arc<CacheDirectory>>,
    ) -> Result<FrontEnd, SimError> {
        let boxed = build_policy(policy, nodes, t_low, t_high, directory)?;
        Ok(FrontEnd::around(boxed, nodes, t_low, t_high, limit, slow_start))
    }

    /// A front-end around a policy already built (e.g. with `build_policy_with`).
    pub fn around(
        boxed: Box<dyn Policy>,
        nodes: usize,
        t_low: u32,
        t_high: u32,
        limit: FrontEndLimit,
        slow_start: Duration,
    ) -> FrontEnd {
        let weights = vec![1u32; nodes];
        FrontEnd {
            cluster: Cluster::new(boxed, &weights, slow_start),
            limit,
            t_low,
            t_high,
            max_in_flight: 0,
        }
    }

    /// The admission limit now: see `FrontEndLimit`.
    pub fn admission_limit(&self) -> Option<usize> {
        match self.limit {
            FrontEndLimit::None => None,
            FrontEndLimit::Fixed(n) => Some(n),
            FrontEndLimit::Policy => self.cluster.admission_limit(),
            FrontEndLimit::Auto => self.cluster.admission_limit().or_else(|| {
                let up = self.cluster.nodes().iter().filter(|n| n.up).count() as i64;
                let s = (up - 1) * self.t_high as i64 + self.t_low as i64 - 1;
                Some(s.max(1) as usize)
            }),
        }
    }

    /// Whether one more request may be dispatched now.
    #[inline]
    pub fn has_room(&self) -> bool {
        self.admission_limit().is_none_or(|limit| self.cluster.in_flight() < limit)
    }

    /// Pick a node for `req` and count it (the switch's `Cluster::assign`); `None` when no
    /// node is up.
    #[inline]
    pub fn assign(&mut self, req: &RequestInfo<'_>, now: u64) -> Option<NodeId> {
        let node = self.cluster.assign(req, Time(now))?;
        self.max_in_flight = self.max_in_flight.max(self.cluster.in_flight());
        Some(node)
    }

    /// A request for `target_hash` completed on `node`.
    #[inline]
    pub fn complete(&mut self, node: NodeId, target_hash: u64, now: u64) {
        self.cluster.complete(node, target_hash, Time(now));
    }

    /// The request `req` reached `node` over a connection with round-trip time `rtt` (the
    /// sniffer's view, `Cluster::observe`).
    #[inline]
    pub fn observe(&mut self, node: NodeId, req: &RequestInfo<'_>, rtt: Duration, now: u64) {
        self.cluster.observe(node, req, rtt, Time(now));
    }

    /// `node` reported its load (`Cluster::report`).
    pub fn report(&mut self, node: NodeId, report: &NodeReport, now: u64) {
        self.cluster.report(node, report, Time(now));
    }

    /// The policy's load estimates and miss-prediction counts, if it keeps them.
    pub fn load_estimates(&self) -> Option<locus_policy::LoadEstimates> {
        self.cluster.policy().load_estimates()
    }

    /// How often the policy wants node reports, if it reads them.
    pub fn report_period(&self) -> Option<Duration> {
        self.cluster.report_period()
    }

    /// Put `node` in or out of the view.
    pub fn set_up(&mut self, node: NodeId, up: bool, now: u64) {
        self.cluster.set_up(node, up, Time(now));
    }

    /// The nodes' status (load = requests assigned and not completed).
    #[inline]
    pub fn nodes(&self) -> &[NodeStatus] {
        self.cluster.nodes()
    }

    /// Requests in the cluster now.
    pub fn in_flight(&self) -> usize {
        self.cluster.in_flight()
    }

    /// Most requests that were ever in the cluster at once.
    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight
    }

    /// The policy's name and mapping size.
    pub fn policy(&self) -> &dyn Policy {
        self.cluster.policy()
    }
}

/// One thing that happened at the front-end, as the switch's dispatcher would see it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum FrontEndEvent {
    /// Request number `request` (its position in the trace) for target id `target` was
    /// assigned to `node` at `at` ns.
    Assign { at: u64, request: u64, target: u32, node: u32 },
    /// A request for `target_hash` completed on `node`.
    Complete { at: u64, node: u32, target_hash: u64 },
    /// `node` went out of (`up == false`) or into the view.
    SetUp { at: u64, node: u32, up: bool },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_limit_is_the_policy_limit_or_the_paper_s() {
        let zero = Duration::ZERO;
        let wrr = SimPolicy::from_name("wrr").unwrap();
        let fe = FrontEnd::new(&wrr, 4, 25, 65, FrontEndLimit::Auto, zero, None).unwrap();
        assert_eq!(fe.admission_limit(), Some(3 * 65 + 25 - 1));
        let fe = FrontEnd::new(&wrr, 4, 25, 65, FrontEndLimit::Policy, zero, None).unwrap();
        assert_eq!(fe.admission_limit(), None);
        let lard_r = SimPolicy::from_name("lard-r").unwrap();
        let mut fe = FrontEnd::new(&lard_r, 3, 10, 20, FrontEndLimit::Policy, zero, None).unwrap();
        assert_eq!(fe.admission_limit(), Some(2 * 20 + 10 - 1));
        fe.set_up(NodeId(2), false, 0);
        assert_eq!(fe.admission_limit(), Some(20 + 10 - 1));
        let fe = FrontEnd::new(&lard_r, 3, 10, 20, FrontEndLimit::Fixed(7), zero, None).unwrap();
        assert_eq!(fe.admission_limit(), Some(7));
        assert_eq!("12".parse::<FrontEndLimit>(), Ok(FrontEndLimit::Fixed(12)));
    }
}
