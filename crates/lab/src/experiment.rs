//! An experiment file (TOML): node counts, repetitions, timing, node settings, switch rows
//! (Locus with its policies and modes, HAProxy, NGINX) and workloads; parsed strictly (an
//! unknown key is an error naming it and its line), validated, and expanded into the matrix of
//! `ExperimentPoint`s: repetitions × workloads × switches × policies × modes × node counts.

use std::path::Path;

use locus_node::{ByteSize, Replacement, StorageConfig};
use serde::{Deserialize, Serialize};

use crate::error::LabError;
use crate::servers::{HaproxyBalance, NginxBalance};
use crate::topology::MAX_NODES;

/// A switch implementation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SwitchKind {
    /// `locus switch`.
    Locus,
    /// HAProxy from the Debian package.
    Haproxy,
    /// NGINX from the Debian package, as a reverse proxy.
    Nginx,
}

impl SwitchKind {
    /// The name in results and reports.
    pub fn name(self) -> &'static str {
        match self {
            SwitchKind::Locus => "locus",
            SwitchKind::Haproxy => "haproxy",
            SwitchKind::Nginx => "nginx",
        }
    }
}

/// HAProxy policy names and what they mean.
pub const HAPROXY_POLICIES: &[(&str, HaproxyBalance)] =
    &[("uri-chash-bounded", HaproxyBalance::UriChashBounded), ("roundrobin", HaproxyBalance::RoundRobin)];
/// NGINX policy names and what they mean.
pub const NGINX_POLICIES: &[(&str, NginxBalance)] =
    &[("uri-chash", NginxBalance::UriChash), ("roundrobin", NginxBalance::RoundRobin)];

/// The HAProxy balance of a policy name.
pub fn haproxy_balance(policy: &str) -> Option<HaproxyBalance> {
    HAPROXY_POLICIES.iter().find(|(n, _)| *n == policy).map(|(_, b)| *b)
}

/// The NGINX balance of a policy name.
pub fn nginx_balance(policy: &str) -> Option<NginxBalance> {
    NGINX_POLICIES.iter().find(|(n, _)| *n == policy).map(|(_, b)| *b)
}

fn default_name() -> String {
    "experiment".into()
}
fn one() -> u32 {
    1
}
fn two() -> u32 {
    2
}
fn default_warmup() -> f64 {
    3.0
}
fn default_measure() -> f64 {
    6.0
}
fn default_modes() -> Vec<String> {
    vec!["proxy".into()]
}
fn default_cache() -> String {
    "8MiB".into()
}
fn default_cache_policy() -> String {
    "gds".into()
}
fn default_max_object() -> String {
    "1MiB".into()
}
fn default_alpha() -> f64 {
    0.9
}
fn default_clients() -> usize {
    64
}
fn default_seed() -> u64 {
    1
}
fn default_html_share() -> f64 {
    0.1
}

/// A whole experiment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Experiment {
    /// Title of the report.
    #[serde(default = "default_name")]
    pub name: String,
    /// A paragraph for the report.
    #[serde(default)]
    pub description: String,
    /// Node counts to run.
    pub nodes: Vec<usize>,
    /// Runs of every point.
    #[serde(default = "one")]
    pub repeat: u32,
    /// Seconds of load before the measured interval (caches start cold at every point).
    #[serde(default = "default_warmup")]
    pub warmup_s: f64,
    /// Seconds measured.
    #[serde(default = "default_measure")]
    pub measure_s: f64,
    /// End the measured interval after this many responses instead (still at most `measure_s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measure_requests: Option<u64>,
    /// Every node's settings.
    #[serde(default)]
    pub node: NodeSettings,
    /// Switch rows (`[[switch]]`).
    #[serde(rename = "switch")]
    pub switches: Vec<SwitchRow>,
    /// Workloads (`[[workload]]`).
    #[serde(rename = "workload")]
    pub workloads: Vec<WorkloadSpec>,
}

/// Settings of every `locus node`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSettings {
    /// Cache capacity, e.g. `8MiB`.
    #[serde(default = "default_cache")]
    pub cache: String,
    /// lru, lfu, gds or gdsf.
    #[serde(default = "default_cache_policy")]
    pub cache_policy: String,
    /// Largest cached file.
    #[serde(default = "default_max_object")]
    pub max_object: String,
    /// Storage model charged on every miss: `seek_ms=8,mb_s=30,disks=1`, `lard98`, `csld`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<String>,
    /// Worker threads per node.
    #[serde(default = "one")]
    pub workers: u32,
}

impl Default for NodeSettings {
    fn default() -> Self {
        NodeSettings {
            cache: default_cache(),
            cache_policy: default_cache_policy(),
            max_object: default_max_object(),
            storage: None,
            workers: 1,
        }
    }
}

impl NodeSettings {
    /// Cache capacity in bytes.
    pub fn cache_bytes(&self) -> Option<u64> {
        self.cache.parse::<ByteSize>().ok().map(|b| b.0)
    }
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
}

/// A synthetic workload: a generated site and a Zipf request stream over it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// Name in results and file names (letters, digits, `-`, `_`).
    pub name: String,
    /// Files in the generated site.
    pub files: u32,
    /// Zipf exponent of document popularity.
    #[serde(default = "default_alpha")]
    pub alpha: f64,
    /// Closed-loop clients (connections).
    #[serde(default = "default_clients")]
    pub clients: usize,
    /// Load generator threads (0: one per CPU).
    #[serde(default)]
    pub load_threads: usize,
    /// Seed of the site and the request stream.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Share of files that are HTML pages.
    #[serde(default = "default_html_share")]
    pub html_share: f64,
    /// File sizes.
    #[serde(default)]
    pub sizes: FileSizes,
}

/// File sizes of a generated site: a lognormal body and a Pareto tail (SURGE's shape).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FileSizes {
    /// Median size of the lognormal body.
    pub median_bytes: u64,
    /// Standard deviation of ln(size) in the body.
    pub sigma: f64,
    /// Share of files in the Pareto tail.
    pub tail_share: f64,
    /// Where the tail starts.
    pub tail_bytes: u64,
    /// Pareto shape of the tail.
    pub tail_alpha: f64,
    pub min_bytes: u64,
    pub max_bytes: u64,
}

impl Default for FileSizes {
    fn default() -> Self {
        FileSizes {
            median_bytes: 8192,
            sigma: 1.0,
            tail_share: 0.03,
            tail_bytes: 96 * 1024,
            tail_alpha: 1.1,
            min_bytes: 128,
            max_bytes: 512 * 1024,
        }
    }
}

/// One point of the matrix: a fresh cluster, a warm-up and a measured interval.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ExperimentPoint {
    /// Position in the run order (0-based).
    pub index: usize,
    /// Which run of the point (1-based).
    pub repetition: u32,
    /// Index into `Experiment::workloads`.
    pub workload: usize,
    pub switch: SwitchKind,
    pub policy: String,
    pub mode: String,
    pub nodes: usize,
    /// Switch workers.
    pub workers: u32,
    /// Locus switch `splice_min_bytes`, if the row sets it.
    pub splice_min_bytes: Option<u64>,
}

impl ExperimentPoint {
    /// `locus lard-r proxy, 4 nodes` for messages.
    pub fn label(&self) -> String {
        format!(
            "{} {} {}, {} node{}",
            self.switch.name(),
            self.policy,
            self.mode,
            self.nodes,
            if self.nodes == 1 { "" } else { "s" }
        )
    }
}

impl Experiment {
    /// Parse and validate an experiment; `source_name` names it in errors.
    pub fn from_toml(text: &str, source_name: &str) -> Result<Experiment, LabError> {
        let fail = |message: String| LabError::Experiment { source_name: source_name.to_string(), message };
        let experiment: Experiment =
            toml::from_str(text).map_err(|e| fail(e.to_string().trim().to_string()))?;
        experiment.validate().map_err(fail)?;
        Ok(experiment)
    }

    /// Read, parse and validate an experiment file.
    pub fn from_file(path: &Path) -> Result<Experiment, LabError> {
        let text = std::fs::read_to_string(path).map_err(|e| LabError::io(path, e))?;
        Experiment::from_toml(&text, &path.display().to_string())
    }

    /// The experiment as TOML (what the report folder keeps).
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).unwrap_or_default()
    }

    /// Check values that parse but make no sense; the message names the key.
    pub fn validate(&self) -> Result<(), String> {
        if self.nodes.is_empty() {
            return Err("`nodes` must list at least one node count".into());
        }
        for (i, &n) in self.nodes.iter().enumerate() {
            if n == 0 || n > MAX_NODES {
                return Err(format!("nodes[{i}] = {n}: node counts must be within 1..={MAX_NODES}"));
            }
        }
        if self.repeat == 0 || self.repeat > 100 {
            return Err(format!("repeat = {}: must be within 1..=100", self.repeat));
        }
        if !(self.warmup_s.is_finite() && (0.0..=3600.0).contains(&self.warmup_s)) {
            return Err(format!("warmup_s = {}: must be within 0..=3600 seconds", self.warmup_s));
        }
        if !(self.measure_s.is_finite() && self.measure_s > 0.0 && self.measure_s <= 3600.0) {
            return Err(format!("measure_s = {}: must be within (0, 3600] seconds", self.measure_s));
        }
        if self.measure_requests == Some(0) {
            return Err("measure_requests must be at least 1".into());
        }
        self.validate_node().map_err(|m| format!("node.{m}"))?;
        if self.switches.is_empty() {
            return Err("at least one [[switch]] row is needed".into());
        }
        for (i, row) in self.switches.iter().enumerate() {
            row.validate().map_err(|m| format!("switch[{i}] ({}).{m}", row.kind.name()))?;
        }
        if self.workloads.is_empty() {
            return Err("at least one [[workload]] is needed".into());
        }
        for (i, w) in self.workloads.iter().enumerate() {
            w.validate().map_err(|m| format!("workload[{i}].{m}"))?;
            if self.workloads[..i].iter().any(|o| o.name == w.name) {
                return Err(format!("workload[{i}].name: `{}` is used twice", w.name));
            }
        }
        Ok(())
    }

    fn validate_node(&self) -> Result<(), String> {
        let n = &self.node;
        n.cache.parse::<ByteSize>().map_err(|e| format!("cache: {e}"))?;
        n.max_object.parse::<ByteSize>().map_err(|e| format!("max_object: {e}"))?;
        n.cache_policy.parse::<Replacement>().map_err(|e| format!("cache_policy: {e}"))?;
        if let Some(s) = &n.storage {
            s.parse::<StorageConfig>().map_err(|e| format!("storage: {e}"))?;
        }
        if n.workers == 0 || n.workers > 64 {
            return Err(format!("workers = {}: must be within 1..=64", n.workers));
        }
        Ok(())
    }

    /// The matrix in run order: repetitions outermost (so repeated runs are spread over the
    /// run), then workloads, switch rows, policies, modes, node counts.
    pub fn points(&self) -> Vec<ExperimentPoint> {
        let mut out = Vec::new();
        for repetition in 1..=self.repeat {
            for workload in 0..self.workloads.len() {
                for row in &self.switches {
                    for policy in &row.policies {
                        for mode in &row.modes {
                            for &nodes in &self.nodes {
                                out.push(ExperimentPoint {
                                    index: out.len(),
                                    repetition,
                                    workload,
                                    switch: row.kind,
                                    policy: policy.clone(),
                                    mode: mode.clone(),
                                    nodes,
                                    workers: row.workers,
                                    splice_min_bytes: row.splice_min_bytes,
                                });
                            }
                        }
                    }
                }
            }
        }
        out
    }

    /// The largest node count.
    pub fn max_nodes(&self) -> usize {
        self.nodes.iter().copied().max().unwrap_or(1)
    }

    /// Whether any row uses this switch.
    pub fn uses(&self, kind: SwitchKind) -> bool {
        self.switches.iter().any(|r| r.kind == kind)
    }
}

impl SwitchRow {
    fn validate(&self) -> Result<(), String> {
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

impl WorkloadSpec {
    fn validate(&self) -> Result<(), String> {
        let n = &self.name;
        if n.is_empty() || !n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
            return Err(format!("name: `{n}` must be letters, digits, `-` or `_`"));
        }
        if self.files == 0 || self.files > 1_000_000 {
            return Err(format!("files = {}: must be within 1..=1000000", self.files));
        }
        if !(self.alpha.is_finite() && (0.0..=4.0).contains(&self.alpha)) {
            return Err(format!("alpha = {}: must be within 0..=4", self.alpha));
        }
        if self.clients == 0 || self.clients > 8000 {
            return Err(format!("clients = {}: must be within 1..=8000", self.clients));
        }
        if self.load_threads > 64 {
            return Err(format!("load_threads = {}: at most 64", self.load_threads));
        }
        if !(0.0..=1.0).contains(&self.html_share) {
            return Err(format!("html_share = {}: must be within 0..=1", self.html_share));
        }
        let s = &self.sizes;
        if s.median_bytes == 0 || s.min_bytes > s.max_bytes || s.max_bytes > 64 << 20 {
            return Err("sizes: need median_bytes > 0 and min_bytes <= max_bytes <= 64 MiB".into());
        }
        self.size_model().sampler().map_err(|e| format!("sizes: {e}"))?;
        Ok(())
    }

    /// The size model handed to the site generator.
    pub fn size_model(&self) -> locus_trace::SizeModel {
        let s = &self.sizes;
        locus_trace::SizeModel {
            body_mu: (s.median_bytes.max(1) as f64).ln(),
            body_sigma: s.sigma,
            tail_alpha: s.tail_alpha,
            tail_k: s.tail_bytes.max(1) as f64,
            tail_share: s.tail_share,
            min_size: s.min_bytes,
            max_size: s.max_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = r#"
name = "small"
nodes = [1, 2]
repeat = 2

[node]
cache = "4MiB"
storage = "seek_ms=2,mb_s=40,disks=1"

[[switch]]
kind = "locus"
policies = ["wrr", "lard"]

[[switch]]
kind = "haproxy"
policies = ["uri-chash-bounded"]

[[workload]]
name = "zipf"
files = 100
"#;

    #[test]
    fn the_matrix_is_repetitions_by_workloads_by_switches_by_policies_by_modes_by_nodes() {
        let e = Experiment::from_toml(SMALL, "small.toml").unwrap();
        let points = e.points();
        assert_eq!(points.len(), 2 * (2 + 1) * 2);
        assert_eq!(points.iter().map(|p| p.index).collect::<Vec<_>>(), (0..12).collect::<Vec<_>>());
        let first: Vec<String> = points[..6].iter().map(|p| p.label()).collect();
        assert_eq!(
            first,
            [
                "locus wrr proxy, 1 node",
                "locus wrr proxy, 2 nodes",
                "locus lard proxy, 1 node",
                "locus lard proxy, 2 nodes",
                "haproxy uri-chash-bounded proxy, 1 node",
                "haproxy uri-chash-bounded proxy, 2 nodes",
            ]
        );
        assert!(points[..6].iter().all(|p| p.repetition == 1));
        assert!(points[6..].iter().all(|p| p.repetition == 2));
        // Defaults filled in.
        assert_eq!(e.switches[0].modes, ["proxy"]);
        assert_eq!(e.switches[0].workers, 2);
        assert_eq!(e.workloads[0].alpha, 0.9);
        assert_eq!(e.node.cache_bytes(), Some(4 << 20));
        assert_eq!((e.warmup_s, e.measure_s), (3.0, 6.0));
        assert_eq!(e.max_nodes(), 2);
        assert!(e.uses(SwitchKind::Haproxy) && !e.uses(SwitchKind::Nginx));
    }

    #[test]
    fn an_unknown_key_is_an_error_naming_the_key_and_its_line() {
        let line_of = |text: &str, key: &str| text.lines().position(|l| l.starts_with(key)).unwrap() + 1;
        let cases = [
            ("files = 100", "files = 100\nfiels = 3", "fiels"),
            ("cache = \"4MiB\"", "cache = \"4MiB\"\ncahce_policy = \"lru\"", "cahce_policy"),
            ("name = \"small\"", "colour = 1\nname = \"small\"", "colour"),
            ("files = 100", "files = 100\n[workload.sizes]\nmedian = 4", "median"),
            ("kind = \"haproxy\"", "kind = \"haproxy\"\nthreads = 2", "threads"),
        ];
        for (from, to, key) in cases {
            let bad = SMALL.replace(from, to);
            let line = line_of(&bad, key);
            let err = Experiment::from_toml(&bad, "bad.toml").unwrap_err().to_string();
            assert!(
                err.contains("bad.toml") && err.contains(key) && err.contains(&format!("line {line},")),
                "{key} on line {line}: {err}"
            );
        }
    }

    #[test]
    fn bad_values_are_errors_naming_the_key() {
        let cases = [
            ("nodes = [1, 2]", "nodes = []", "nodes"),
            ("nodes = [1, 2]", "nodes = [0]", "nodes[0]"),
            ("repeat = 2", "repeat = 0", "repeat"),
            ("\"wrr\", \"lard\"", "\"wrr\", \"lardd\"", "switch[0] (locus).policies[1]"),
            ("\"uri-chash-bounded\"", "\"uri\"", "switch[1] (haproxy).policies[0]"),
            ("cache = \"4MiB\"", "cache = \"4 parsecs\"", "node.cache"),
            ("seek_ms=2", "seek_ms=x", "node.storage"),
            ("files = 100", "files = 0", "workload[0].files"),
            ("name = \"zipf\"", "name = \"a b\"", "workload[0].name"),
            ("files = 100", "files = 100\nalpha = -1", "workload[0].alpha"),
            ("\"wrr\", \"lard\"", "\"wrr\", \"wrr\"", "twice"),
            (
                "policies = [\"uri-chash-bounded\"]",
                "policies = [\"roundrobin\"]\nsplice_min_bytes = 0",
                "switch[1] (haproxy).splice_min_bytes",
            ),
        ];
        for (from, to, key) in cases {
            let text = SMALL.replace(from, to);
            assert_ne!(text, SMALL, "{from} not found");
            let err = Experiment::from_toml(&text, "x").unwrap_err().to_string();
            assert!(err.contains(key), "{to}: {err}");
        }
        let modes = SMALL
            .replace("policies = [\"uri-chash-bounded\"]", "policies = [\"roundrobin\"]\nmodes = [\"l4\"]");
        let err = Experiment::from_toml(&modes, "x").unwrap_err().to_string();
        assert!(err.contains("modes[0]"), "{err}");
        let err = Experiment::from_toml("nodes = [1]\n", "x").unwrap_err().to_string();
        assert!(err.contains("switch"), "missing rows are named: {err}");
        assert!(Experiment::from_toml("not toml at all [", "x").is_err());
    }

    #[test]
    fn an_experiment_survives_a_round_trip_through_toml() {
        let e = Experiment::from_toml(SMALL, "small.toml").unwrap();
        let again = Experiment::from_toml(&e.to_toml(), "again").unwrap();
        assert_eq!(e, again);
    }

    #[test]
    fn sizes_map_to_a_surge_shaped_model() {
        let e = Experiment::from_toml(SMALL, "small.toml").unwrap();
        let m = e.workloads[0].size_model();
        assert!((m.body_mu - 8192f64.ln()).abs() < 1e-9);
        assert_eq!((m.min_size, m.max_size), (128, 512 * 1024));
        assert!(m.sampler().is_ok());
    }
}
