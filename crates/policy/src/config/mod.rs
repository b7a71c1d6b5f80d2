//! `PolicyConfig`: the policies by name with their parameters (as in the switch's TOML
//! `[policy]` table and on the command line) and `build`, which validates (`check`) and
//! makes the policy; the strict TOML form is read through `raw`.

mod check;
mod raw;

use crate::csld::CsldParams;
use crate::wrr_variant::WrrVariant;
use crate::{
    BoundedLoadPolicy, CapPolicy, CsldPolicy, LardPolicy, LardRPolicy, LeastConnectionsPolicy, MaglevPolicy,
    Policy, PolicyInputs, PowerOfTwoPolicy, RingPolicy, RoundRobinPolicy, StaticHashPolicy,
    WeightedRoundRobinPolicy, WrrMetricsPolicy,
};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Which consistent-hash construction `chash` uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ChashKind {
    /// A ring of virtual nodes (`vnodes` points per unit of weight).
    #[default]
    Ring,
    /// Maglev's lookup table (`table_size`, a prime).
    Maglev,
}

/// A policy and its parameters.
///
/// Deserializes from a table with a `name` key (any name `from_name` accepts, so also
/// `"maglev"`, `"lb"`, `"lardr"`) and the policy's parameters; missing parameters take their
/// defaults, and a key that no policy has, or that this policy does not have, is an error
/// naming the key.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "kebab-case", try_from = "raw::RawPolicyConfig")]
pub enum PolicyConfig {
    /// Round robin over the nodes that are up.
    Rr,
    /// Smooth weighted round robin.
    Wrr,
    /// Least connections (fewest active requests).
    Lc,
    /// Weighted least connections (load / weight).
    Wlc,
    /// Power of two random choices, seeded.
    P2c {
        #[serde(default)]
        seed: u64,
    },
    /// The LARD paper's LB: a static hash partition of targets over the nodes.
    Hash,
    /// Consistent hashing, ring or Maglev.
    Chash {
        #[serde(default)]
        kind: ChashKind,
        #[serde(default = "default_vnodes")]
        vnodes: u32,
        #[serde(default = "default_maglev_table")]
        table_size: u32,
    },
    /// Consistent hashing with bounded loads (HAProxy's hash-balance-factor, in percent).
    ChashBounded {
        #[serde(default = "default_vnodes")]
        vnodes: u32,
        #[serde(default = "default_balance_factor")]
        balance_factor: u32,
    },
    /// Locality-aware request distribution.
    Lard {
        #[serde(default = "default_t_low")]
        t_low: u32,
        #[serde(default = "default_t_high")]
        t_high: u32,
        #[serde(default = "default_max_targets")]
        max_targets: usize,
    },
    /// LARD with replication and the front-end admission limit S.
    LardR {
        #[serde(default = "default_t_low")]
        t_low: u32,
        #[serde(default = "default_t_high")]
        t_high: u32,
        /// Seconds a target's server set must stay unchanged before a replica is dropped.
        #[serde(default = "default_k_secs")]
        k_secs: f64,
        /// Admission limit S; `None` means the paper's `(n-1)·T_high + T_low - 1` for the
        /// nodes currently up; `Some(0)` disables the limit.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        admission_limit: Option<usize>,
        #[serde(default = "default_max_targets")]
        max_targets: usize,
    },
    /// CSLD: content-sniffer load estimation with smooth WRR over its weights.
    Csld(CsldParams),
    /// WRR over weights from node-reported metrics (one of the CSLD paper's baselines).
    WrrMetrics {
        #[serde(default)]
        variant: WrrVariant,
    },
    /// The client-aware policy: one round-robin pointer per resource class.
    Cap,
}

fn default_vnodes() -> u32 {
    160
}
fn default_maglev_table() -> u32 {
    65537
}
fn default_balance_factor() -> u32 {
    150
}
fn default_t_low() -> u32 {
    25
}
fn default_t_high() -> u32 {
    65
}
fn default_k_secs() -> f64 {
    20.0
}
fn default_max_targets() -> usize {
    1_000_000
}

/// A policy configuration that cannot be built.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PolicyConfigError {
    #[error("unknown policy `{0}` (expected one of: {names})", names = PolicyConfig::accepted_names().collect::<Vec<_>>().join(", "))]
    UnknownName(String),
    #[error("policy `{policy}`: {message}")]
    Invalid { policy: &'static str, message: String },
}

/// Makes a named policy at its default parameters.
type DefaultPolicy = fn() -> PolicyConfig;

/// Every name `from_name` accepts, with the policy it names at its default parameters: the
/// one list that lookups, error messages and help text read. Aliases (`lb`, `lardr`) name
/// the same policy as an earlier entry.
const NAMED_POLICIES: &[(&str, DefaultPolicy)] = &[
    ("rr", || PolicyConfig::Rr),
    ("wrr", || PolicyConfig::Wrr),
    ("lc", || PolicyConfig::Lc),
    ("wlc", || PolicyConfig::Wlc),
    ("p2c", || PolicyConfig::P2c { seed: 0 }),
    ("hash", || PolicyConfig::Hash),
    ("chash", || PolicyConfig::Chash {
        kind: ChashKind::Ring,
        vnodes: default_vnodes(),
        table_size: default_maglev_table(),
    }),
    ("maglev", || PolicyConfig::Chash {
        kind: ChashKind::Maglev,
        vnodes: default_vnodes(),
        table_size: default_maglev_table(),
    }),
    ("chash-bounded", || PolicyConfig::ChashBounded {
        vnodes: default_vnodes(),
        balance_factor: default_balance_factor(),
    }),
    ("lard", || PolicyConfig::Lard {
        t_low: default_t_low(),
        t_high: default_t_high(),
        max_targets: default_max_targets(),
    }),
    ("lard-r", default_lard_r),
    ("csld", || PolicyConfig::Csld(CsldParams::default())),
    ("wrr-metrics", || PolicyConfig::WrrMetrics { variant: WrrVariant::A }),
    ("cap", || PolicyConfig::Cap),
    ("lb", || PolicyConfig::Hash),
    ("lardr", default_lard_r),
];

fn default_lard_r() -> PolicyConfig {
    PolicyConfig::LardR {
        t_low: default_t_low(),
        t_high: default_t_high(),
        k_secs: default_k_secs(),
        admission_limit: None,
        max_targets: default_max_targets(),
    }
}

impl PolicyConfig {
    /// CSLD with these parameters.
    pub fn csld(params: CsldParams) -> PolicyConfig {
        PolicyConfig::Csld(params)
    }

    /// The metric-fed WRR baseline `variant`.
    pub fn wrr_metrics(variant: WrrVariant) -> PolicyConfig {
        PolicyConfig::WrrMetrics { variant }
    }

    /// Every policy name accepted in configuration, aliases included.
    pub fn accepted_names() -> impl Iterator<Item = &'static str> + Clone {
        NAMED_POLICIES.iter().map(|(name, _)| *name)
    }

    /// One name per distinct policy (no aliases): the name `name()` gives back.
    pub fn canonical_names() -> impl Iterator<Item = &'static str> + Clone {
        NAMED_POLICIES.iter().filter(|(name, make)| make().name() == *name).map(|(name, _)| *name)
    }

    /// The policy with this name and its default parameters.
    pub fn from_name(name: &str) -> Result<PolicyConfig, PolicyConfigError> {
        match NAMED_POLICIES.iter().find(|(n, _)| *n == name) {
            Some((_, make)) => Ok(make()),
            None => Err(PolicyConfigError::UnknownName(name.to_string())),
        }
    }

    /// The configuration name of this policy (`"maglev"` for `chash` with the Maglev kind,
    /// which `from_name` also accepts).
    pub fn name(&self) -> &'static str {
        match self {
            PolicyConfig::Rr => "rr",
            PolicyConfig::Wrr => "wrr",
            PolicyConfig::Lc => "lc",
            PolicyConfig::Wlc => "wlc",
            PolicyConfig::P2c { .. } => "p2c",
            PolicyConfig::Hash => "hash",
            PolicyConfig::Chash { kind: ChashKind::Maglev, .. } => "maglev",
            PolicyConfig::Chash { .. } => "chash",
            PolicyConfig::ChashBounded { .. } => "chash-bounded",
            PolicyConfig::Lard { .. } => "lard",
            PolicyConfig::LardR { .. } => "lard-r",
            PolicyConfig::Csld(_) => "csld",
            PolicyConfig::WrrMetrics { .. } => "wrr-metrics",
            PolicyConfig::Cap => "cap",
        }
    }
}

/// Build the policy for a cluster of `weights.len()` nodes with these weights, after
/// checking the parameters, knowing nothing of the site (see `build_with`).
pub fn build(config: &PolicyConfig, weights: &[u32]) -> Result<Box<dyn Policy>, PolicyConfigError> {
    build_with(config, weights, &PolicyInputs::default())
}

/// `build`, for a site whose class costs and documents are known (content-aware policies
/// estimate with them; the others ignore them).
pub fn build_with(
    config: &PolicyConfig,
    weights: &[u32],
    inputs: &PolicyInputs,
) -> Result<Box<dyn Policy>, PolicyConfigError> {
    check::check(config, weights)
        .map_err(|message| PolicyConfigError::Invalid { policy: config.name(), message })?;
    Ok(match *config {
        PolicyConfig::Rr => Box::new(RoundRobinPolicy::new()),
        PolicyConfig::Wrr => Box::new(WeightedRoundRobinPolicy::new(weights.len())),
        PolicyConfig::Lc => Box::new(LeastConnectionsPolicy::unweighted()),
        PolicyConfig::Wlc => Box::new(LeastConnectionsPolicy::weighted()),
        PolicyConfig::P2c { seed } => Box::new(PowerOfTwoPolicy::new(seed)),
        PolicyConfig::Hash => Box::new(StaticHashPolicy::new()),
        PolicyConfig::Chash { kind: ChashKind::Ring, vnodes, .. } => {
            Box::new(RingPolicy::new(weights, vnodes))
        }
        PolicyConfig::Chash { kind: ChashKind::Maglev, table_size, .. } => {
            Box::new(MaglevPolicy::new(weights, table_size))
        }
        PolicyConfig::ChashBounded { vnodes, balance_factor } => {
            Box::new(BoundedLoadPolicy::new(weights, vnodes, balance_factor))
        }
        PolicyConfig::Lard { t_low, t_high, max_targets } => {
            Box::new(LardPolicy::new(weights.len(), t_low, t_high, max_targets))
        }
        PolicyConfig::LardR { t_low, t_high, k_secs, admission_limit, max_targets } => {
            Box::new(LardRPolicy::new(
                weights.len(),
                t_low,
                t_high,
                Duration::from_secs_f64(k_secs),
                admission_limit,
                max_targets,
            ))
        }
        PolicyConfig::Csld(params) => Box::new(CsldPolicy::new(weights.len(), &params, inputs)),
        PolicyConfig::WrrMetrics { variant } => {
            Box::new(WrrMetricsPolicy::new(weights.len(), variant, inputs))
        }
        PolicyConfig::Cap => Box::new(CapPolicy::new(inputs)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_makes_every_named_policy() {
        for name in PolicyConfig::canonical_names() {
            let c = PolicyConfig::from_name(name).unwrap();
            let p = build(&c, &[1, 2, 1]).unwrap();
            assert_eq!(p.name(), name);
        }
    }

    #[test]
    fn unknown_name_error_lists_every_accepted_name_aliases_included() {
        let e = PolicyConfig::from_name("nope").unwrap_err().to_string();
        for name in PolicyConfig::accepted_names() {
            assert!(e.contains(&format!(" {name},")) || e.ends_with(&format!(" {name})")), "{name}: {e}");
        }
        for name in ["maglev", "lb", "lardr", "lard-r", "chash-bounded"] {
            assert!(PolicyConfig::accepted_names().any(|n| n == name), "{name}");
        }
        let canonical: Vec<&str> = PolicyConfig::canonical_names().collect();
        assert!(canonical.contains(&"maglev") && !canonical.contains(&"lb"), "{canonical:?}");
    }

    #[test]
    fn from_name_rejects_unknown_names() {
        assert_eq!(PolicyConfig::from_name("x"), Err(PolicyConfigError::UnknownName("x".into())));
        assert_eq!(PolicyConfig::from_name("lb").unwrap(), PolicyConfig::Hash);
    }
}
