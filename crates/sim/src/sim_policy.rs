//! `SimPolicy`: the request distribution a simulation runs — any policy of the switch (built
//! by `locus_policy::build`, the same code the switch runs), one of the LARD paper's
//! idealised baselines (LB/GC, WRR/GMS), cooperative caching (CF-LRU, CF-LFU) or Socket
//! Cloning (SC) — with its name and the label the paper uses.

use std::fmt;
use std::str::FromStr;

use locus_cache::Replacement;
use locus_policy::{PolicyConfig, WrrVariant};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::SimError;

/// A request distribution strategy.
#[derive(Clone, Debug, PartialEq)]
pub enum SimPolicy {
    /// A policy of the switch, with its parameters.
    Switch(PolicyConfig),
    /// LB/GC: the front-end knows every cache (see `GlobalCachePolicy`).
    LbGc,
    /// WRR/GMS: the switch's `wrr` in front of nodes with a global memory system.
    WrrGms,
    /// Cooperative caching (cache forwarding): round robin in front; a node's miss is fetched
    /// from another node's memory if one holds the file (exact directory), else from
    /// storage. `keep_copy`: the requester caches the copy it fetched.
    CoopCache { replacement: Replacement, keep_copy: bool },
    /// Socket Cloning: round robin picks the entry node, which clones the connection to the
    /// owner (hash of the target mod n); the owner serves from its cache or storage and the
    /// entry forwards the client's ACKs.
    SocketCloning,
}

impl SimPolicy {
    /// Names accepted besides the switch's.
    pub const BASELINES: [&'static str; 7] =
        ["lb-gc", "wrr-gms", "cf-lru", "cf-lfu", "cf-lru-single", "cf-lfu-single", "sc"];

    /// Parse a name: `lb-gc` (`lbgc`), `wrr-gms` (`wrrgms`), `wrr-<variant>` for a
    /// metric-fed WRR of the CSLD paper (`wrr-i`, `wrr-a`, `wrr-a-prime`, ...), or any switch
    /// policy name (with its default parameters).
    pub fn from_name(name: &str) -> Result<SimPolicy, SimError> {
        let name = name.to_ascii_lowercase().replace(['/', '_'], "-");
        if let Some(v) = name.strip_prefix("wrr-").map(|v| v.replace('\'', "-prime"))
            && let Some(variant) = WrrVariant::ALL.into_iter().find(|x| x.name() == v)
        {
            return Ok(SimPolicy::Switch(PolicyConfig::wrr_metrics(variant)));
        }
        match name.as_str() {
            "lb-gc" | "lbgc" => Ok(SimPolicy::LbGc),
            "wrr-gms" | "wrrgms" => Ok(SimPolicy::WrrGms),
            "cf-lru" => Ok(SimPolicy::CoopCache { replacement: Replacement::Lru, keep_copy: true }),
            "cf-lfu" => Ok(SimPolicy::CoopCache { replacement: Replacement::Lfu, keep_copy: true }),
            "cf-lru-single" => Ok(SimPolicy::CoopCache { replacement: Replacement::Lru, keep_copy: false }),
            "cf-lfu-single" => Ok(SimPolicy::CoopCache { replacement: Replacement::Lfu, keep_copy: false }),
            "sc" | "socket-cloning" => Ok(SimPolicy::SocketCloning),
            other => PolicyConfig::from_name(other).map(SimPolicy::Switch).map_err(SimError::from),
        }
    }

    /// The configuration name (`lard-r`, `lb-gc`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            SimPolicy::Switch(c) => c.name(),
            SimPolicy::LbGc => "lb-gc",
            SimPolicy::WrrGms => "wrr-gms",
            SimPolicy::CoopCache { replacement, keep_copy } => match (replacement, keep_copy) {
                (Replacement::Lfu, true) => "cf-lfu",
                (Replacement::Lfu, false) => "cf-lfu-single",
                (_, true) => "cf-lru",
                (_, false) => "cf-lru-single",
            },
            SimPolicy::SocketCloning => "sc",
        }
    }

    /// The label in reports and plots: the paper's names where it has one.
    pub fn label(&self) -> String {
        if let SimPolicy::Switch(PolicyConfig::WrrMetrics { variant }) = self {
            return variant.label().to_string();
        }
        match self.name() {
            "wrr" => "WRR".into(),
            "rr" => "RR".into(),
            "cf-lru" => "CF-LRU".into(),
            "cf-lfu" => "CF-LFU".into(),
            "cf-lru-single" => "CF-LRU/1".into(),
            "cf-lfu-single" => "CF-LFU/1".into(),
            "sc" => "SC".into(),
            "hash" => "LB".into(),
            "lb-gc" => "LB/GC".into(),
            "lard" => "LARD".into(),
            "lard-r" => "LARD/R".into(),
            "wrr-gms" => "WRR/GMS".into(),
            "lc" => "LC".into(),
            "csld" => "CSLD".into(),
            "cap" => "CAP".into(),
            other => other.to_string(),
        }
    }

    /// Whether the strategy needs the global cache directory.
    pub fn needs_directory(&self) -> bool {
        matches!(self, SimPolicy::LbGc | SimPolicy::WrrGms | SimPolicy::CoopCache { .. })
    }

    /// The replacement this strategy imposes on the nodes' caches, if any (CF's variants).
    pub fn replacement(&self) -> Option<Replacement> {
        match self {
            SimPolicy::CoopCache { replacement, .. } => Some(*replacement),
            _ => None,
        }
    }

    /// The policy the front-end runs, with LARD's thresholds set to `t_low`/`t_high`.
    pub fn front_end_config(&self, t_low: u32, t_high: u32) -> Option<PolicyConfig> {
        match self {
            SimPolicy::Switch(PolicyConfig::Lard { max_targets, .. }) => {
                Some(PolicyConfig::Lard { t_low, t_high, max_targets: *max_targets })
            }
            SimPolicy::Switch(PolicyConfig::LardR { k_secs, admission_limit, max_targets, .. }) => {
                Some(PolicyConfig::LardR {
                    t_low,
                    t_high,
                    k_secs: *k_secs,
                    admission_limit: *admission_limit,
                    max_targets: *max_targets,
                })
            }
            SimPolicy::Switch(c) => Some(c.clone()),
            SimPolicy::WrrGms => Some(PolicyConfig::Wrr),
            SimPolicy::CoopCache { .. } | SimPolicy::SocketCloning => Some(PolicyConfig::Rr),
            SimPolicy::LbGc => None,
        }
    }
}

impl fmt::Display for SimPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SimPolicy {
    type Err = SimError;
    fn from_str(s: &str) -> Result<SimPolicy, SimError> {
        SimPolicy::from_name(s)
    }
}

/// In TOML: a name (`policy = "lard-r"`) or the switch's `[policy]` table.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum SimPolicyRepr {
    Name(String),
    Table(PolicyConfig),
}

impl Serialize for SimPolicy {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            SimPolicy::Switch(c) if *c != PolicyConfig::from_name(c.name()).expect("own name") => {
                SimPolicyRepr::Table(c.clone()).serialize(s)
            }
            other => SimPolicyRepr::Name(other.name().to_string()).serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for SimPolicy {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<SimPolicy, D::Error> {
        match SimPolicyRepr::deserialize(d)? {
            SimPolicyRepr::Name(n) => SimPolicy::from_name(&n).map_err(serde::de::Error::custom),
            SimPolicyRepr::Table(c) => Ok(SimPolicy::Switch(c)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sim_policy_parses_switch_names_and_baselines() {
        assert_eq!(SimPolicy::from_name("lb-gc").unwrap(), SimPolicy::LbGc);
        assert_eq!(SimPolicy::from_name("WRR/GMS").unwrap(), SimPolicy::WrrGms);
        assert_eq!(SimPolicy::from_name("lb").unwrap().label(), "LB");
        assert_eq!(SimPolicy::from_name("lard-r").unwrap().label(), "LARD/R");
        assert!(SimPolicy::from_name("nope").is_err());
        assert_eq!(SimPolicy::from_name("WRR_a'").unwrap().label(), "WRR_a'");
        assert_eq!(SimPolicy::from_name("wrr-p").unwrap().label(), "WRR_p");
        assert_eq!(SimPolicy::from_name("csld").unwrap().label(), "CSLD");
        let cf = SimPolicy::from_name("CF_LFU").unwrap();
        assert_eq!(cf, SimPolicy::CoopCache { replacement: Replacement::Lfu, keep_copy: true });
        assert_eq!((cf.name(), cf.label().as_str()), ("cf-lfu", "CF-LFU"));
        assert!(cf.needs_directory());
        for name in SimPolicy::BASELINES {
            assert_eq!(SimPolicy::from_name(name).unwrap().name(), name, "names round-trip");
        }
        assert_eq!(SimPolicy::from_name("sc").unwrap().front_end_config(1, 2), Some(PolicyConfig::Rr));
        assert_eq!(SimPolicy::from_name("rr").unwrap().label(), "RR");
        let c = SimPolicy::from_name("lard").unwrap().front_end_config(10, 30).unwrap();
        assert_eq!(c, PolicyConfig::Lard { t_low: 10, t_high: 30, max_targets: 1_000_000 });
    }
}
