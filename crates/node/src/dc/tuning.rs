//! The DC settings a reload changes while the node runs (`DcTuning`: the load threshold
//! `theta` of the balancer and the replica selector, whether to replicate, the consistency
//! method and its validation interval), prepared whole from a reloaded `[dc]` table
//! (`DcNode::prepare_tuning`) and put in force at once (`DcNode::retune`). A new `theta`
//! takes a new selector and balancer, whose request rates and Resource-Aware's books start over
//! (they fill again within a balancing round or two, from the co-ops' next load reports); the
//! peer key is changed in place (`DcNode::rekey`). What needs the membership, the replica store
//! or the background task's periods to change (servers, self, quota, method, alpha, ping_ms,
//! balance_ms, seed) takes a restart.

use locus_dc::ServerId;
use locus_dc::balancer::{Balancer, BalancerConfig};
use locus_dc::consistency::Consistency;
use locus_dc::load_table::fresh_for;
use locus_dc::selector::{Selector, SelectorConfig};

use crate::dc::config::DcConfig;
use crate::dc::node::{DcNode, ping_stale_ns};
use crate::peer_link::PeerKey;

/// The DC settings that change live; see the module documentation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DcTuning {
    pub theta: f64,
    pub replicate: bool,
    pub consistency: Consistency,
}

impl DcTuning {
    pub fn of(config: &DcConfig) -> DcTuning {
        DcTuning {
            theta: config.theta,
            replicate: config.replicate,
            consistency: Consistency {
                method: config.consistency,
                validation_interval_ns: config.validate_s * 1_000_000_000,
            },
        }
    }
}

/// A reloaded `[dc]` table's tuning, checked, waiting to be put in force.
pub struct PreparedTuning {
    tuning: DcTuning,
    /// A new selector and balancer, when `theta` changed.
    chooser: Option<(Selector, Balancer)>,
}

/// A peer's load older than this (ns) is unknown to the selector and the balancer.
fn max_age_ns(config: &DcConfig) -> u64 {
    fresh_for(config.ping_ms * 1_000_000, ping_stale_ns(config.ping_ms))
}

/// The replica selector of `config`.
pub fn selector_for(config: &DcConfig) -> Selector {
    let selector_config =
        SelectorConfig { theta: config.theta, max_age_ns: max_age_ns(config), ..SelectorConfig::default() };
    Selector::new(selector_config, config.seed)
}

/// The balancer of home `me` under `config`, its first window starting at `now` (ns).
pub fn balancer_for(me: ServerId, config: &DcConfig, now: u64) -> Result<Balancer, String> {
    let balancer_config = BalancerConfig {
        method: config.method,
        theta: config.theta,
        period_ns: config.balance_ms * 1_000_000,
        coop_quota: config.quota.bytes(),
        max_age_ns: max_age_ns(config),
        ..BalancerConfig::default()
    };
    Balancer::new(me, balancer_config, now).map_err(|e| format!("dc: {e}"))
}

impl DcNode {
    /// The live settings in force.
    pub fn tuning(&self) -> DcTuning {
        *self.tuning.read()
    }

    /// Check `config` (the running table with a reload's live changes) and prepare what it
    /// needs; nothing changes yet.
    pub fn prepare_tuning(&self, config: &DcConfig) -> Result<PreparedTuning, String> {
        let tuning = DcTuning::of(config);
        let chooser = if tuning.theta == self.tuning().theta {
            None
        } else {
            Some((selector_for(config), balancer_for(self.me, config, self.now_ns())?))
        };
        Ok(PreparedTuning { tuning, chooser })
    }

    /// Put `prepared` in force: copies are decided, documents replicated and changes
    /// announced by it from now on.
    pub fn retune(&self, prepared: PreparedTuning) {
        if let Some((selector, balancer)) = prepared.chooser {
            self.choosing.lock().selector = selector;
            *self.balancer.lock() = balancer;
        }
        *self.tuning.write() = prepared.tuning;
    }

    /// Sign and check control requests with `key` from now on (`None`: by address).
    pub fn rekey(&self, key: Option<PeerKey>) {
        self.gate.rekey(key.clone());
        self.link.set_signer(key, self.name(self.me).to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use locus_dc::consistency::ConsistencyMethod;

    #[test]
    fn tuning_reads_the_live_settings_of_the_table() {
        let config = DcConfig {
            theta: 0.4,
            replicate: false,
            consistency: ConsistencyMethod::ActiveUpdate,
            validate_s: 3,
            ..DcConfig::default()
        };
        let t = DcTuning::of(&config);
        assert_eq!((t.theta, t.replicate), (0.4, false));
        assert_eq!(t.consistency.method, ConsistencyMethod::ActiveUpdate);
        assert_eq!(t.consistency.validation_interval_ns, 3_000_000_000);
        assert_eq!(selector_for(&config).config().theta, 0.4);
        assert_eq!(balancer_for(ServerId(0), &config, 0).unwrap().config().theta, 0.4);
        assert!(balancer_for(ServerId(0), &DcConfig { theta: 1.5, ..config }, 0).is_err());
    }
}
