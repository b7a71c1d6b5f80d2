//! A switch row of an experiment (`[[switch]]`): Locus with its policies and modes, HAProxy
//! or NGINX with theirs, the workloads it runs on; the HAProxy and NGINX policy names and the
//! balance each stands for.

use serde::{Deserialize, Serialize};

use crate::experiment::SwitchKind;
use locus_rig::{HaproxyBalance, HaproxyTuning, NginxBalance};

fn default_modes() -> Vec<String> {
    vec!["proxy".into()]
}
fn two() -> u32 {
    2
}

/// HAProxy policy names and what they mean.
pub const HAPROXY_POLICIES: &[(&str, HaproxyBalance)] = &[
    ("uri-chash-bounded", HaproxyBalance::UriChashBounded),
    ("roundrobin", HaproxyBalance::RoundRobin),
    ("leastconn", HaproxyBalance::LeastConn),
    ("random-2", HaproxyBalance::Random2),
];
/// NGINX policy names and what they mean.
pub const NGINX_POLICIES: &[(&str, NginxBalance)] = &[
    ("uri-chash", NginxBalance::UriChash),
    ("roundrobin", NginxBalance::RoundRobin),
    ("least-conn", NginxBalance::LeastConn),
    ("random-two-least-conn", NginxBalance::RandomTwoLeastConn),
];

/// DC row policy names: how homes place replicas under the co-ops' quotas (`naive`,
/// `deletion-aware`, `resource-aware`), `migration` (a document moves, never more than one copy)
/// `no-replication` (DC mode on, nothing ever placed) and `off` (plain nodes, no DC mode; with
/// `no-replication`, the module's own cost on one node).
pub const DC_POLICIES: &[&str] =
    &["naive", "deletion-aware", "resource-aware", "migration", "no-replication", "off"];

/// The HAProxy balance of a policy name.
pub fn haproxy_balance(policy: &str) -> Option<HaproxyBalance> {
    HAPROXY_POLICIES.iter().find(|(n, _)| *n == policy).map(|(_, b)| *b)
}

/// The NGINX balance of a policy name.
pub fn nginx_balance(policy: &str) -> Option<NginxBalance> {
    NGINX_POLICIES.iter().find(|(n, _)| *n == policy).map(|(_, b)| *b)
}

/// One switch implementation and the policies and modes to run it with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchRow {
    pub kind: SwitchKind,
    /// Locus: policy names (`wrr`, `hash`, `lard-r`, …); HAProxy: `uri-chash-bounded`,
    /// `roundrobin`; NGINX: `uri-chash`, `roundrobin`.
    pub policies: Vec<String>,
    /// Forwarding modes (Locus); HAProxy and NGINX are `proxy` only.
    #[serde(default = "default_modes")]
    pub modes: Vec<String>,
    /// Locus worker threads, HAProxy threads, NGINX worker processes.
    #[serde(default = "two")]
    pub workers: u32,
    /// Locus only: the switch's `[limits] splice_min_bytes` (0 relays every body through user
    /// space instead of splice(2)); absent: the switch's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub splice_min_bytes: Option<u64>,
    /// The workloads (by name) this row runs on; empty: every workload.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workloads: Vec<String>,
    /// Locus handoff rows only: what a node does with a keep-alive request the switch routes to
    /// another node: `handoff` (hand the connection on, the default) or `forward` (fetch the
    /// response from that node itself; the connection stays).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rehandoff: Option<String>,
    /// Locus only: parameters of the row's policies (keys of the switch's `[policy]` table,
    /// e.g. `{ t_low = 8, t_high = 24 }`); absent: their defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_params: Option<toml::Table>,
    /// The nodes cache cooperatively (a miss is fetched from a peer's memory before storage)
    /// with this replacement (`lru`, `lfu`, …) in place of the workload's; absent: they do not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coop: Option<String>,
    /// DC rows only: every co-op's replica quota (`64MiB`); absent: the node's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dc_quota: Option<String>,
    /// DC rows only: how often homes run their balancing round, in ms; absent: the node's
    /// default (5000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dc_balance_ms: Option<u64>,
    /// Locus only: the switch's class table has every dynamic class's cost multiplied by this
    /// (the nodes keep the true costs): CSLD tested against costs it does not know.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class_cost_scale: Option<f64>,
    /// HAProxy rows only: the backend's knobs beyond its balance; absent: HAProxy's defaults
    /// (and the lab's bounded-load factor, 150).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub haproxy: Option<HaproxyParams>,
}

/// An HAProxy row's tuning (`haproxy = { hash_balance_factor = 125, avalanche = true }`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HaproxyParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash_balance_factor: Option<u32>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub avalanche: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maxconn: Option<u32>,
}

impl HaproxyParams {
    /// The rig's tuning: these values over the defaults.
    pub fn tuning(&self) -> HaproxyTuning {
        let d = HaproxyTuning::default();
        HaproxyTuning {
            hash_balance_factor: self.hash_balance_factor.unwrap_or(d.hash_balance_factor),
            avalanche: self.avalanche,
            weight: self.weight,
            maxconn: self.maxconn,
        }
    }

    fn validate(&self) -> Result<(), String> {
        if let Some(f) = self.hash_balance_factor
            && !(101..=1000).contains(&f)
        {
            return Err(format!(
                "hash_balance_factor = {f}: must be within 101..=1000 (percent of the mean load)"
            ));
        }
        if let Some(w) = self.weight
            && !(1..=256).contains(&w)
        {
            return Err(format!("weight = {w}: must be within 1..=256"));
        }
        if self.maxconn == Some(0) {
            return Err("maxconn must be at least 1".into());
        }
        Ok(())
    }
}

/// The switch's `[policy]` table, as the row's parameters are checked against it.
#[derive(Deserialize)]
struct PolicyTable {
    #[allow(dead_code)]
    policy: locus_policy::PolicyConfig,
}

impl SwitchRow {
    /// The switch's `[policy]` table for `policy` with the row's parameters (TOML), if the
    /// row sets any.
    pub fn policy_table(&self, policy: &str) -> Option<String> {
        let mut table = self.policy_params.clone()?;
        table.insert("name".into(), toml::Value::String(policy.to_string()));
        let mut file = toml::Table::new();
        file.insert("policy".into(), toml::Value::Table(table));
        toml::to_string(&file).ok()
    }

    /// The row's HAProxy tuning (the defaults for other rows and when it sets none).
    pub fn haproxy_tuning(&self) -> HaproxyTuning {
        self.haproxy.unwrap_or_default().tuning()
    }

    /// What the point of `policy` runs, as results name its configuration: the policy and
    /// whatever the row sets beyond the defaults (`lard-r t_high=16 t_low=4`,
    /// `uri-chash-bounded factor=125 avalanche`, `rr+cf-lfu`).
    pub fn config(&self, policy: &str) -> String {
        let mut parts = vec![match &self.coop {
            Some(c) => format!("{policy}+cf-{c}"),
            None => policy.to_string(),
        }];
        if let Some(params) = &self.policy_params {
            parts.extend(params.iter().map(|(k, v)| format!("{k}={v}")));
        }
        if let Some(balance) = haproxy_balance(policy).filter(|_| self.kind == SwitchKind::Haproxy) {
            let tuned = self.haproxy_tuning().describe(balance);
            if !tuned.is_empty() {
                parts.push(tuned);
            }
        }
        if let Some(q) = &self.dc_quota {
            parts.push(format!("quota={q}"));
        }
        if let Some(b) = self.dc_balance_ms {
            parts.push(format!("balance_ms={b}"));
        }
        if let Some(s) = self.splice_min_bytes {
            parts.push(format!("splice_min_bytes={s}"));
        }
        if let Some(r) = &self.rehandoff {
            parts.push(format!("rehandoff={r}"));
        }
        if let Some(f) = self.class_cost_scale {
            parts.push(format!("costs×{f}"));
        }
        parts.join(" ")
    }

    /// Whether the row runs on the workload named `name`.
    pub fn runs_on(&self, name: &str) -> bool {
        self.workloads.is_empty() || self.workloads.iter().any(|w| w == name)
    }

    /// Why this row cannot terminate TLS for a `tls = true` workload, if it cannot: DC nodes
    /// face the clients without a balancer, and the one-way modes hand connections to nodes.
    pub fn cannot_terminate_tls(&self) -> Option<String> {
        if self.kind == SwitchKind::Dc {
            return Some("a DC row has no balancer to terminate TLS".into());
        }
        // Handoff mode terminates TLS and moves the session with the connection (one-way
        // HTTPS); l4 never reads a request, so it has nothing to terminate TLS with.
        self.modes
            .iter()
            .find(|m| m.as_str() == "l4")
            .map(|_| "mode `l4` places connections at the SYN and cannot terminate TLS".to_string())
    }
}

impl SwitchRow {
    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.policies.is_empty() {
            return Err("policies: list at least one policy".into());
        }
        if self.modes.is_empty() {
            return Err("modes: list at least one mode".into());
        }
        if self.workers == 0 || self.workers > 64 {
            return Err(format!("workers = {}: must be within 1..=64", self.workers));
        }
        if self.splice_min_bytes.is_some() && self.kind != SwitchKind::Locus {
            return Err("splice_min_bytes: a setting of the Locus switch only".into());
        }
        if let Some(r) = &self.rehandoff {
            if self.kind != SwitchKind::Locus || self.modes.iter().any(|m| m != "handoff") {
                return Err("rehandoff: a setting of Locus rows in mode `handoff` only".into());
            }
            if r != "handoff" && r != "forward" {
                return Err(format!("rehandoff = {r:?}: `handoff` or `forward`"));
            }
        }
        if self.policy_params.is_some() && self.kind != SwitchKind::Locus {
            return Err("policy_params: a setting of the Locus switch only".into());
        }
        if let Some(f) = self.class_cost_scale {
            if self.kind != SwitchKind::Locus {
                return Err("class_cost_scale: a setting of the Locus switch only".into());
            }
            if !(f.is_finite() && f > 0.0 && f <= 100.0) {
                return Err(format!("class_cost_scale = {f}: must be within (0, 100]"));
            }
        }
        if let Some(h) = &self.haproxy {
            if self.kind != SwitchKind::Haproxy {
                return Err("haproxy: a setting of HAProxy rows only".into());
            }
            h.validate().map_err(|m| format!("haproxy.{m}"))?;
        }
        if let Some(c) = &self.coop {
            c.parse::<locus_node_config::Replacement>().map_err(|e| format!("coop: {e}"))?;
        }
        if let Some(q) = &self.dc_quota {
            if self.kind != SwitchKind::Dc {
                return Err("dc_quota: a setting of DC rows only".into());
            }
            q.parse::<locus_node_config::ByteSize>().map_err(|e| format!("dc_quota: {e}"))?;
        }
        if let Some(b) = self.dc_balance_ms {
            if self.kind != SwitchKind::Dc {
                return Err("dc_balance_ms: a setting of DC rows only".into());
            }
            if !(100..=600_000).contains(&b) {
                return Err(format!("dc_balance_ms = {b}: must be within 100..=600000"));
            }
        }
        if self.kind == SwitchKind::Dc && self.coop.is_some() {
            return Err("coop: DC nodes do not also cache cooperatively".into());
        }
        for p in &self.policies {
            if let Some(text) = self.policy_table(p) {
                toml::from_str::<PolicyTable>(&text)
                    .map_err(|e| format!("policy_params ({p}): {}", e.message().trim()))?;
            }
        }
        for (i, p) in self.policies.iter().enumerate() {
            let known = match self.kind {
                SwitchKind::Locus => {
                    locus_policy::PolicyConfig::from_name(p).map(|_| ()).map_err(|e| e.to_string())
                }
                SwitchKind::Haproxy => haproxy_balance(p).map(|_| ()).ok_or_else(|| {
                    let names: Vec<&str> = HAPROXY_POLICIES.iter().map(|(n, _)| *n).collect();
                    format!("unknown HAProxy policy `{p}` (expected one of: {})", names.join(", "))
                }),
                SwitchKind::Nginx => nginx_balance(p).map(|_| ()).ok_or_else(|| {
                    let names: Vec<&str> = NGINX_POLICIES.iter().map(|(n, _)| *n).collect();
                    format!("unknown NGINX policy `{p}` (expected one of: {})", names.join(", "))
                }),
                SwitchKind::Dc => DC_POLICIES.contains(&p.as_str()).then_some(()).ok_or_else(|| {
                    format!("unknown DC policy `{p}` (expected one of: {})", DC_POLICIES.join(", "))
                }),
            };
            known.map_err(|m| format!("policies[{i}]: {m}"))?;
            if self.policies[..i].contains(p) {
                return Err(format!("policies[{i}]: `{p}` is listed twice"));
            }
        }
        for (i, m) in self.modes.iter().enumerate() {
            if m.is_empty() || !m.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
                return Err(format!("modes[{i}]: `{m}` is not a mode name"));
            }
            if self.kind != SwitchKind::Locus && m != "proxy" {
                return Err(format!(
                    "modes[{i}]: {} is a two-way proxy: mode `proxy` only",
                    self.kind.name()
                ));
            }
        }
        Ok(())
    }
}
