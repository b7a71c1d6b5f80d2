//! `PolicyConfig`: the policies by name with their parameters (as in the switch's TOML
//! `[policy]` table and on the command line), its strict deserialization (unknown or
//! inapplicable keys are errors), and `build`, which validates and makes the policy.

use crate::csld::CsldParams;
use crate::wrr_variant::WrrVariant;
use crate::{
    BoundedLoadPolicy, LardPolicy, LardRPolicy, LeastConnectionsPolicy, MaglevPolicy, Policy, PolicyInputs,
    PowerOfTwoPolicy, RingPolicy, RoundRobinPolicy, StaticHashPolicy, WeightedRoundRobinPolicy,
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
#[serde(tag = "name", rename_all = "kebab-case", try_from = "RawPolicyConfig")]
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

/// A `name` that `from_name` accepts. Checked as the value is read, so the deserializer
/// (toml) places an unknown name's error at the `name` key's line, not at the table.
struct KnownPolicyName(String);

impl<'de> Deserialize<'de> for KnownPolicyName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<KnownPolicyName, D::Error> {
        let name = String::deserialize(d)?;
        PolicyConfig::from_name(&name).map_err(serde::de::Error::custom)?;
        Ok(KnownPolicyName(name))
    }
}

/// Every key a `[policy]` table may hold; which ones apply depends on `name`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicyConfig {
    name: KnownPolicyName,
    seed: Option<u64>,
    kind: Option<ChashKind>,
    vnodes: Option<u32>,
    table_size: Option<u32>,
    balance_factor: Option<u32>,
    t_low: Option<u32>,
    t_high: Option<u32>,
    k_secs: Option<f64>,
    admission_limit: Option<usize>,
    max_targets: Option<usize>,
}

/// Why a `[policy]` table does not describe a policy.
#[derive(Debug, thiserror::Error)]
enum RawPolicyConfigError {
    #[error(transparent)]
    Name(#[from] PolicyConfigError),
    #[error("policy `{policy}` has no parameter `{key}`")]
    Inapplicable { policy: String, key: &'static str },
}

impl TryFrom<RawPolicyConfig> for PolicyConfig {
    type Error = RawPolicyConfigError;

    fn try_from(raw: RawPolicyConfig) -> Result<PolicyConfig, RawPolicyConfigError> {
        let mut config = PolicyConfig::from_name(&raw.name.0)?;
        // Each parameter given is moved into the variant that has it; what is left over
        // does not apply to this policy.
        let RawPolicyConfig {
            name: KnownPolicyName(name),
            mut seed,
            mut kind,
            mut vnodes,
            mut table_size,
            mut balance_factor,
            mut t_low,
            mut t_high,
            mut k_secs,
            mut admission_limit,
            mut max_targets,
        } = raw;
        fn take<T>(slot: &mut T, given: &mut Option<T>) {
            if let Some(v) = given.take() {
                *slot = v;
            }
        }
        match &mut config {
            PolicyConfig::Rr
            | PolicyConfig::Wrr
            | PolicyConfig::Lc
            | PolicyConfig::Wlc
            | PolicyConfig::Hash
            | PolicyConfig::Csld(_)
            | PolicyConfig::WrrMetrics { .. }
            | PolicyConfig::Cap => {}
            PolicyConfig::P2c { seed: s } => take(s, &mut seed),
            PolicyConfig::Chash { kind: k, vnodes: v, table_size: t } => {
                // `name = "maglev"` fixes the kind; only `name = "chash"` may choose it.
                if name == "chash" {
                    take(k, &mut kind);
                }
                take(v, &mut vnodes);
                take(t, &mut table_size);
            }
            PolicyConfig::ChashBounded { vnodes: v, balance_factor: b } => {
                take(v, &mut vnodes);
                take(b, &mut balance_factor);
            }
            PolicyConfig::Lard { t_low: lo, t_high: hi, max_targets: m } => {
                take(lo, &mut t_low);
                take(hi, &mut t_high);
                take(m, &mut max_targets);
            }
            PolicyConfig::LardR { t_low: lo, t_high: hi, k_secs: k, admission_limit: a, max_targets: m } => {
                take(lo, &mut t_low);
                take(hi, &mut t_high);
                take(k, &mut k_secs);
                if let Some(v) = admission_limit.take() {
                    *a = Some(v);
                }
                take(m, &mut max_targets);
            }
        }
        let leftovers = [
            ("seed", seed.is_some()),
            ("kind", kind.is_some()),
            ("vnodes", vnodes.is_some()),
            ("table_size", table_size.is_some()),
            ("balance_factor", balance_factor.is_some()),
            ("t_low", t_low.is_some()),
            ("t_high", t_high.is_some()),
            ("k_secs", k_secs.is_some()),
            ("admission_limit", admission_limit.is_some()),
            ("max_targets", max_targets.is_some()),
        ];
        if let Some((key, _)) = leftovers.iter().find(|(_, left)| *left) {
            return Err(RawPolicyConfigError::Inapplicable { policy: name, key });
        }
        Ok(config)
    }
}

/// Most ring points `chash` and `chash-bounded` will build (vnodes × total weight).
const MAX_RING_POINTS: u64 = 10_000_000;
/// Maglev tables need many more entries than nodes to stay balanced (the paper uses
/// M ≥ 100·N for under 1% imbalance).
const MAGLEV_ENTRIES_PER_NODE: u64 = 100;
/// Largest Maglev table accepted.
const MAX_MAGLEV_TABLE: u32 = 1 << 26;

fn is_prime(n: u32) -> bool {
    if n < 2 {
        return false;
    }
    let n = n as u64;
    let mut d = 2u64;
    while d * d <= n {
        if n.is_multiple_of(d) {
            return false;
        }
        d += 1;
    }
    true
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
    _inputs: &PolicyInputs,
) -> Result<Box<dyn Policy>, PolicyConfigError> {
    check(config, weights)
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
        PolicyConfig::Csld(_) | PolicyConfig::WrrMetrics { .. } | PolicyConfig::Cap => {
            return Err(PolicyConfigError::Invalid {
                policy: config.name(),
                message: "not available yet".into(),
            });
        }
    })
}

/// Why `config` cannot run on nodes of these `weights`, if it cannot.
fn check(config: &PolicyConfig, weights: &[u32]) -> Result<(), String> {
    if weights.is_empty() {
        return Err("the cluster has no nodes (empty weight list)".into());
    }
    if let Some(i) = weights.iter().position(|&w| w == 0) {
        return Err(format!("node {i} has weight 0; weights must be at least 1"));
    }
    if weights.len() > u32::MAX as usize {
        return Err(format!("{} nodes is too many", weights.len()));
    }
    let total_weight: u64 = weights.iter().map(|&w| w as u64).sum();
    match *config {
        PolicyConfig::Rr
        | PolicyConfig::Wrr
        | PolicyConfig::Lc
        | PolicyConfig::Wlc
        | PolicyConfig::P2c { .. }
        | PolicyConfig::Hash
        | PolicyConfig::Csld(_)
        | PolicyConfig::WrrMetrics { .. }
        | PolicyConfig::Cap => Ok(()),
        PolicyConfig::Chash { kind: ChashKind::Ring, vnodes, .. } => check_vnodes(vnodes, total_weight),
        PolicyConfig::Chash { kind: ChashKind::Maglev, table_size, .. } => {
            check_maglev_table(table_size, weights.len())
        }
        PolicyConfig::ChashBounded { vnodes, balance_factor } => {
            check_vnodes(vnodes, total_weight)?;
            if balance_factor < 100 {
                return Err(format!(
                    "balance_factor is in percent and must be at least 100 (got {balance_factor})"
                ));
            }
            Ok(())
        }
        PolicyConfig::Lard { t_low, t_high, max_targets } => check_lard(t_low, t_high, max_targets),
        PolicyConfig::LardR { t_low, t_high, k_secs, max_targets, .. } => {
            check_lard(t_low, t_high, max_targets)?;
            if !(0.0..=1e9).contains(&k_secs) {
                return Err(format!("k_secs must be a number of seconds from 0 to 1e9 (got {k_secs})"));
            }
            if weights.len() > u16::MAX as usize + 1 {
                return Err(format!("at most 65536 nodes (got {})", weights.len()));
            }
            Ok(())
        }
    }
}

fn check_vnodes(vnodes: u32, total_weight: u64) -> Result<(), String> {
    if vnodes == 0 {
        return Err("vnodes must be at least 1".into());
    }
    if vnodes as u64 * total_weight > MAX_RING_POINTS {
        return Err(format!(
            "vnodes × total weight = {} × {total_weight} ring points exceeds {MAX_RING_POINTS}",
            vnodes
        ));
    }
    Ok(())
}

fn check_maglev_table(table_size: u32, nodes: usize) -> Result<(), String> {
    if !is_prime(table_size) {
        return Err(format!("table_size {table_size} is not a prime (65537 is)"));
    }
    let min = MAGLEV_ENTRIES_PER_NODE * nodes as u64;
    if (table_size as u64) < min {
        return Err(format!(
            "table_size {table_size} is too small for {nodes} nodes: use a prime of at least {min}"
        ));
    }
    if table_size > MAX_MAGLEV_TABLE {
        return Err(format!("table_size {table_size} exceeds {MAX_MAGLEV_TABLE}"));
    }
    Ok(())
}

fn check_lard(t_low: u32, t_high: u32, max_targets: usize) -> Result<(), String> {
    if t_high == 0 {
        return Err("t_high must be greater than 0".into());
    }
    if t_low >= t_high {
        return Err(format!("t_low ({t_low}) must be less than t_high ({t_high})"));
    }
    if t_high > u32::MAX / 2 {
        return Err(format!("t_high ({t_high}) is too large"));
    }
    if max_targets == 0 {
        return Err("max_targets must be at least 1".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<PolicyConfig, String> {
        toml::from_str::<PolicyConfig>(s).map_err(|e| e.to_string())
    }

    #[test]
    fn policy_config_deserializes_from_toml_with_defaults() {
        let c = parse("name = \"lard-r\"\nt_low = 10").unwrap();
        assert_eq!(
            c,
            PolicyConfig::LardR {
                t_low: 10,
                t_high: 65,
                k_secs: 20.0,
                admission_limit: None,
                max_targets: 1_000_000
            }
        );
        assert_eq!(parse("name = \"rr\"").unwrap(), PolicyConfig::Rr);
        assert_eq!(parse("name = \"p2c\"\nseed = 9").unwrap(), PolicyConfig::P2c { seed: 9 });
        let maglev = parse("name = \"maglev\"\ntable_size = 251").unwrap();
        assert_eq!(maglev, PolicyConfig::Chash { kind: ChashKind::Maglev, vnodes: 160, table_size: 251 });
        assert_eq!(parse("name = \"chash\"\nkind = \"maglev\"\ntable_size = 251").unwrap(), maglev);
        assert_eq!(maglev.name(), "maglev");
        assert_eq!(
            parse("name = \"lard-r\"\nadmission_limit = 0").unwrap(),
            PolicyConfig::LardR {
                t_low: 25,
                t_high: 65,
                k_secs: 20.0,
                admission_limit: Some(0),
                max_targets: 1_000_000
            }
        );
    }

    #[test]
    fn policy_config_rejects_unknown_and_inapplicable_keys_by_name() {
        let e = parse("name = \"lard-r\"\nt_lo = 10").unwrap_err();
        assert!(e.contains("t_lo"), "{e}");
        let e = parse("name = \"rr\"\nt_low = 10").unwrap_err();
        assert!(e.contains("t_low") && e.contains("rr"), "{e}");
        let e = parse("name = \"lard\"\nk_secs = 3.0").unwrap_err();
        assert!(e.contains("k_secs"), "{e}");
        let e = parse("name = \"maglev\"\nkind = \"ring\"").unwrap_err();
        assert!(e.contains("kind"), "{e}");
        let e = parse("name = \"nope\"").unwrap_err();
        assert!(e.contains("nope"), "{e}");
        assert!(parse("t_low = 3").is_err());
    }

    #[test]
    fn policy_config_round_trips_through_toml() {
        for name in PolicyConfig::canonical_names() {
            let c = PolicyConfig::from_name(name).unwrap();
            let text = toml::to_string(&c).unwrap();
            assert_eq!(toml::from_str::<PolicyConfig>(&text).unwrap(), c, "{text}");
            assert_eq!(PolicyConfig::from_name(c.name()).unwrap(), c);
        }
        let c = PolicyConfig::LardR {
            t_low: 1,
            t_high: 2,
            k_secs: 0.5,
            admission_limit: Some(9),
            max_targets: 3,
        };
        assert_eq!(toml::from_str::<PolicyConfig>(&toml::to_string(&c).unwrap()).unwrap(), c);
    }

    #[test]
    fn build_makes_every_named_policy() {
        for name in PolicyConfig::canonical_names() {
            let c = PolicyConfig::from_name(name).unwrap();
            let p = build(&c, &[1, 2, 1]).unwrap();
            assert_eq!(p.name(), name);
        }
    }

    fn invalid(config: PolicyConfig, weights: &[u32], needle: &str) {
        match build(&config, weights) {
            Err(PolicyConfigError::Invalid { message, .. }) => {
                assert!(message.contains(needle), "{message:?} lacks {needle:?}")
            }
            Err(e) => panic!("unexpected error {e}"),
            Ok(p) => panic!("{} built from an invalid configuration", p.name()),
        }
    }

    #[test]
    fn build_rejects_invalid_parameters() {
        let lard = |t_low, t_high, max_targets| PolicyConfig::Lard { t_low, t_high, max_targets };
        invalid(PolicyConfig::Rr, &[], "no nodes");
        invalid(PolicyConfig::Rr, &[1, 0], "weight 0");
        invalid(lard(65, 65, 10), &[1], "t_low");
        invalid(lard(0, 0, 10), &[1], "t_high");
        invalid(lard(25, 65, 0), &[1], "max_targets");
        let lard_r = |k_secs| PolicyConfig::LardR {
            t_low: 25,
            t_high: 65,
            k_secs,
            admission_limit: None,
            max_targets: 10,
        };
        invalid(lard_r(-1.0), &[1], "k_secs");
        invalid(lard_r(f64::NAN), &[1], "k_secs");
        let chash = |kind, vnodes, table_size| PolicyConfig::Chash { kind, vnodes, table_size };
        invalid(chash(ChashKind::Ring, 0, 65537), &[1], "vnodes");
        invalid(chash(ChashKind::Maglev, 160, 65536), &[1], "prime");
        invalid(chash(ChashKind::Maglev, 160, 251), &[1, 1, 1], "too small");
        invalid(PolicyConfig::ChashBounded { vnodes: 10, balance_factor: 99 }, &[1], "at least 100");
        invalid(PolicyConfig::ChashBounded { vnodes: 0, balance_factor: 150 }, &[1], "vnodes");
        assert!(build(&chash(ChashKind::Maglev, 160, 251), &[1, 1]).is_ok());
        assert!(build(&lard(0, 1, 1), &[1]).is_ok());
        assert!(is_prime(65537) && is_prime(2) && !is_prime(1) && !is_prime(65535));
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
    fn unknown_name_in_toml_points_at_the_name_keys_line() {
        let e = parse("t_low = 3\nname = \"lard_r\"\nt_high = 9").unwrap_err();
        assert!(e.contains("line 2") && e.contains("lard_r") && e.contains("lardr"), "{e}");
    }

    #[test]
    fn from_name_rejects_unknown_names() {
        assert_eq!(PolicyConfig::from_name("x"), Err(PolicyConfigError::UnknownName("x".into())));
        assert_eq!(PolicyConfig::from_name("lb").unwrap(), PolicyConfig::Hash);
    }
}
