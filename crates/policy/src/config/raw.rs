//! The `[policy]` table as written: every key any policy has, read strictly (an unknown key
//! or one the named policy does not have is an error naming the key), then moved into the
//! `PolicyConfig` variant the name selects.

use super::{ChashKind, PolicyConfig, PolicyConfigError};
use crate::csld::CsldParams;
use crate::wrr_variant::WrrVariant;
use serde::Deserialize;
use serde::de::IgnoredAny;
use std::collections::BTreeMap;

/// Declares `RawCsldKeys`, one optional key per `CsldParams` field, with the moves into a
/// `CsldParams` and the check that none is left over.
macro_rules! csld_keys {
    ($($key:ident: $ty:ty),* $(,)?) => {
        /// The `CsldParams` keys of a `[policy]` table.
        #[derive(Default, Deserialize)]
        pub(crate) struct RawCsldKeys {
            $($key: Option<$ty>,)*
        }

        impl RawCsldKeys {
            /// Move every key given into `params`.
            fn apply_to(&mut self, params: &mut CsldParams) {
                $(if let Some(v) = self.$key.take() {
                    params.$key = v;
                })*
            }

            /// The first key given and not moved, if any.
            fn leftover(&self) -> Option<&'static str> {
                $(if self.$key.is_some() {
                    return Some(stringify!($key));
                })*
                None
            }
        }

        #[cfg(test)]
        const CSLD_KEYS: &[&str] = &[$(stringify!($key)),*];
    };
}

csld_keys! {
    pick: crate::csld::CsldPick,
    period_ms: u64,
    slot_ms: u64,
    slots: u32,
    cache_bytes: u64,
    history_secs: u64,
    stats_periods: u32,
    send_buffer: u64,
    mss: u64,
    initial_cwnd: u64,
    miss_l: f64,
    miss_m: f64,
    miss_h: f64,
    load_l: f64,
    load_m: f64,
    load_h: f64,
    conn_ns: u64,
    basic_ns: u64,
    reply_ns: u64,
    send_ns_per_512: u64,
    disk_ns: u64,
    disk_ns_per_block: u64,
    default_size: u64,
    max_files: usize,
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

/// Every key a `[policy]` table may hold; which ones apply depends on `name`. (Keys no
/// policy has are collected in `unknown` rather than refused by serde, which cannot deny
/// unknown fields next to a flattened table.)
#[derive(Deserialize)]
pub(crate) struct RawPolicyConfig {
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
    variant: Option<WrrVariant>,
    #[serde(flatten)]
    csld: RawCsldKeys,
    #[serde(flatten)]
    unknown: BTreeMap<String, IgnoredAny>,
}

/// Why a `[policy]` table does not describe a policy.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RawPolicyConfigError {
    #[error(transparent)]
    Name(#[from] PolicyConfigError),
    #[error("unknown policy parameter `{0}`")]
    Unknown(String),
    #[error("policy `{policy}` has no parameter `{key}`")]
    Inapplicable { policy: String, key: &'static str },
    #[error("policy `{policy}`: {message}")]
    Invalid { policy: String, message: String },
}

impl TryFrom<RawPolicyConfig> for PolicyConfig {
    type Error = RawPolicyConfigError;

    fn try_from(mut raw: RawPolicyConfig) -> Result<PolicyConfig, RawPolicyConfigError> {
        let mut config = PolicyConfig::from_name(&raw.name.0)?;
        if let Some(key) = std::mem::take(&mut raw.unknown).into_keys().next() {
            return Err(RawPolicyConfigError::Unknown(key));
        }
        // Each parameter given is moved into the variant that has it; what is left over
        // does not apply to this policy.
        raw.move_into(&mut config);
        if let Some(key) = raw.leftover() {
            return Err(RawPolicyConfigError::Inapplicable { policy: raw.name.0, key });
        }
        super::check::check_params(&config)
            .map_err(|message| RawPolicyConfigError::Invalid { policy: raw.name.0, message })?;
        Ok(config)
    }
}

impl RawPolicyConfig {
    /// Move every parameter given into `config`'s variant if it has it (taking it out of
    /// `self`), so that what stays in `self` does not apply.
    fn move_into(&mut self, config: &mut PolicyConfig) {
        fn take<T>(slot: &mut T, given: &mut Option<T>) {
            if let Some(v) = given.take() {
                *slot = v;
            }
        }
        match config {
            PolicyConfig::Rr
            | PolicyConfig::Wrr
            | PolicyConfig::Lc
            | PolicyConfig::Wlc
            | PolicyConfig::Hash
            | PolicyConfig::Cap => {}
            PolicyConfig::Csld(params) => self.csld.apply_to(params),
            PolicyConfig::WrrMetrics { variant: v } => take(v, &mut self.variant),
            PolicyConfig::P2c { seed: s } => take(s, &mut self.seed),
            PolicyConfig::Chash { kind: k, vnodes: v, table_size: t } => {
                // `name = "maglev"` fixes the kind; only `name = "chash"` may choose it.
                if self.name.0 == "chash" {
                    take(k, &mut self.kind);
                }
                take(v, &mut self.vnodes);
                take(t, &mut self.table_size);
            }
            PolicyConfig::ChashBounded { vnodes: v, balance_factor: b } => {
                take(v, &mut self.vnodes);
                take(b, &mut self.balance_factor);
            }
            PolicyConfig::Lard { t_low: lo, t_high: hi, max_targets: m } => {
                take(lo, &mut self.t_low);
                take(hi, &mut self.t_high);
                take(m, &mut self.max_targets);
            }
            PolicyConfig::LardR { t_low: lo, t_high: hi, k_secs: k, admission_limit: a, max_targets: m } => {
                take(lo, &mut self.t_low);
                take(hi, &mut self.t_high);
                take(k, &mut self.k_secs);
                if let Some(v) = self.admission_limit.take() {
                    *a = Some(v);
                }
                take(m, &mut self.max_targets);
            }
        }
    }

    /// The first parameter given that the policy did not take, if any.
    fn leftover(&self) -> Option<&'static str> {
        let leftovers = [
            ("seed", self.seed.is_some()),
            ("kind", self.kind.is_some()),
            ("vnodes", self.vnodes.is_some()),
            ("table_size", self.table_size.is_some()),
            ("balance_factor", self.balance_factor.is_some()),
            ("t_low", self.t_low.is_some()),
            ("t_high", self.t_high.is_some()),
            ("k_secs", self.k_secs.is_some()),
            ("admission_limit", self.admission_limit.is_some()),
            ("max_targets", self.max_targets.is_some()),
            ("variant", self.variant.is_some()),
        ];
        let leftover = leftovers.iter().find(|(_, left)| *left).map(|(key, _)| *key);
        leftover.or_else(|| self.csld.leftover())
    }
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
    fn unknown_name_in_toml_points_at_the_name_keys_line() {
        let e = parse("t_low = 3\nname = \"lard_r\"\nt_high = 9").unwrap_err();
        assert!(e.contains("line 2") && e.contains("lard_r") && e.contains("lardr"), "{e}");
    }

    #[test]
    fn nonsense_parameters_are_refused_as_the_policy_table_is_read_with_its_line() {
        #[derive(Debug, serde::Deserialize)]
        struct File {
            #[allow(dead_code)]
            policy: PolicyConfig,
        }
        let cases = [
            ("name = \"csld\"\nperiod_ms = 0", "period_ms must be at least 1"),
            ("name = \"csld\"\nmiss_l = 0.5\nmiss_m = 0.1", "miss_l < miss_m < miss_h"),
            ("name = \"lard\"\nt_low = 9\nt_high = 3", "t_low"),
        ];
        for (table, what) in cases {
            let text = format!("# a comment\n[policy]\n{table}\n");
            let e = toml::from_str::<File>(&text).unwrap_err().to_string();
            assert!(e.contains("line 2") && e.contains(what), "expected line 2 and {what:?} in:\n{e}");
        }
    }

    #[test]
    fn every_csld_parameter_is_configurable_and_round_trips_through_toml() {
        let p = CsldParams {
            pick: crate::csld::CsldPick::Wrr,
            period_ms: 400,
            slot_ms: 100,
            slots: 40,
            cache_bytes: 1 << 30,
            history_secs: 60,
            stats_periods: 9,
            send_buffer: 1,
            mss: 1000,
            initial_cwnd: 4,
            miss_l: 0.1,
            miss_m: 0.2,
            miss_h: 0.3,
            load_l: 0.4,
            load_m: 0.5,
            load_h: 0.7,
            conn_ns: 1,
            basic_ns: 2,
            reply_ns: 3,
            send_ns_per_512: 4,
            disk_ns: 5,
            disk_ns_per_block: 6,
            default_size: 7,
            max_files: 8,
        };
        let text = toml::to_string(&PolicyConfig::csld(p)).unwrap();
        for key in CSLD_KEYS {
            assert!(text.contains(&format!("{key} = ")), "{key} missing from {text}");
        }
        let back = parse(&text).unwrap();
        assert_eq!(back, PolicyConfig::Csld(p));
        assert_ne!(p, CsldParams::default(), "every field was changed");
        let partial = parse("name = \"csld\"\nmiss_h = 0.5\nslots = 10").unwrap();
        let expected = CsldParams { miss_h: 0.5, slots: 10, ..CsldParams::default() };
        assert_eq!(partial, PolicyConfig::Csld(expected));
        assert_eq!(
            parse("name = \"wrr-metrics\"\nvariant = \"a-prime\"").unwrap(),
            PolicyConfig::wrr_metrics(WrrVariant::APrime)
        );
        assert_eq!(parse("name = \"wrr-metrics\"").unwrap(), PolicyConfig::wrr_metrics(WrrVariant::A));
        assert_eq!(parse("name = \"cap\"").unwrap(), PolicyConfig::Cap);
    }

    #[test]
    fn csld_and_wrr_metrics_keys_are_refused_where_they_do_not_apply() {
        let e = parse("name = \"rr\"\nperiod_ms = 100").unwrap_err();
        assert!(e.contains("period_ms") && e.contains("rr"), "{e}");
        let e = parse("name = \"csld\"\nperiod = 100").unwrap_err();
        assert!(e.contains("`period`"), "{e}");
        let e = parse("name = \"csld\"\nvariant = \"a\"").unwrap_err();
        assert!(e.contains("variant"), "{e}");
        let e = parse("name = \"csld\"\nt_low = 3").unwrap_err();
        assert!(e.contains("t_low"), "{e}");
        let e = parse("name = \"csld\"\nslots = \"many\"").unwrap_err();
        assert!(e.contains("slots") || e.contains("many"), "{e}");
    }
}
