//! `PolicyConfig`: the policies by name with their parameters (as in the switch's TOML
//! `[policy]` table and on the command line), and `build`, which makes the policy.

use crate::Policy;
use serde::{Deserialize, Serialize};

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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "kebab-case")]
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
        #[serde(default)]
        admission_limit: Option<usize>,
        #[serde(default = "default_max_targets")]
        max_targets: usize,
    },
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
    #[error("unknown policy `{0}` (expected one of: {names})", names = PolicyConfig::NAMES.join(", "))]
    UnknownName(String),
    #[error("policy `{policy}`: {message}")]
    Invalid { policy: &'static str, message: String },
}

impl PolicyConfig {
    /// Every policy name accepted in configuration.
    pub const NAMES: &'static [&'static str] =
        &["rr", "wrr", "lc", "wlc", "p2c", "hash", "chash", "chash-bounded", "lard", "lard-r"];

    /// The policy with this name and its default parameters.
    pub fn from_name(name: &str) -> Result<PolicyConfig, PolicyConfigError> {
        Ok(match name {
            "rr" => PolicyConfig::Rr,
            "wrr" => PolicyConfig::Wrr,
            "lc" => PolicyConfig::Lc,
            "wlc" => PolicyConfig::Wlc,
            "p2c" => PolicyConfig::P2c { seed: 0 },
            "hash" | "lb" => PolicyConfig::Hash,
            "chash" => PolicyConfig::Chash {
                kind: ChashKind::Ring,
                vnodes: default_vnodes(),
                table_size: default_maglev_table(),
            },
            "maglev" => PolicyConfig::Chash {
                kind: ChashKind::Maglev,
                vnodes: default_vnodes(),
                table_size: default_maglev_table(),
            },
            "chash-bounded" => PolicyConfig::ChashBounded {
                vnodes: default_vnodes(),
                balance_factor: default_balance_factor(),
            },
            "lard" => PolicyConfig::Lard {
                t_low: default_t_low(),
                t_high: default_t_high(),
                max_targets: default_max_targets(),
            },
            "lard-r" | "lardr" => PolicyConfig::LardR {
                t_low: default_t_low(),
                t_high: default_t_high(),
                k_secs: default_k_secs(),
                admission_limit: None,
                max_targets: default_max_targets(),
            },
            other => return Err(PolicyConfigError::UnknownName(other.to_string())),
        })
    }

    /// The configuration name of this policy.
    pub fn name(&self) -> &'static str {
        match self {
            PolicyConfig::Rr => "rr",
            PolicyConfig::Wrr => "wrr",
            PolicyConfig::Lc => "lc",
            PolicyConfig::Wlc => "wlc",
            PolicyConfig::P2c { .. } => "p2c",
            PolicyConfig::Hash => "hash",
            PolicyConfig::Chash { .. } => "chash",
            PolicyConfig::ChashBounded { .. } => "chash-bounded",
            PolicyConfig::Lard { .. } => "lard",
            PolicyConfig::LardR { .. } => "lard-r",
        }
    }
}

/// Build the policy for a cluster of `weights.len()` nodes with these weights.
pub fn build(config: &PolicyConfig, weights: &[u32]) -> Result<Box<dyn Policy>, PolicyConfigError> {
    let _ = (config, weights);
    Err(PolicyConfigError::Invalid { policy: "none", message: "not built yet".into() })
}
