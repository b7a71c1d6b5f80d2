//! An experiment file (TOML): node counts, repetitions, timing, node settings, switch rows
//! (Locus with its policies and modes, HAProxy, NGINX) and workloads; parsed strictly (an
//! unknown key is an error naming it and its line), validated, and expanded into the matrix of
//! `ExperimentPoint`s: repetitions × workloads × switches × policies × modes × node counts.

use std::path::Path;

use locus_node_config::{ByteSize, CpuModelConfig, Replacement, StorageConfig};
use serde::{Deserialize, Serialize};

use crate::error::LabError;
use crate::experiment::ExperimentPoint;
use crate::experiment::SwitchRow;
use crate::experiment::WorkloadSpec;
use locus_rig::MAX_NODES;

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
    /// No switch: the nodes cooperate in DC mode (documents spread by rewriting links to
    /// replicas) and clients talk to them directly.
    Dc,
}

impl SwitchKind {
    /// The name in results and reports.
    pub fn name(self) -> &'static str {
        match self {
            SwitchKind::Locus => "locus",
            SwitchKind::Haproxy => "haproxy",
            SwitchKind::Nginx => "nginx",
            SwitchKind::Dc => "dc",
        }
    }
}

fn default_name() -> String {
    "experiment".into()
}
fn one() -> u32 {
    1
}
fn default_warmup() -> f64 {
    3.0
}
fn default_measure() -> f64 {
    6.0
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
    /// CPU model through which every request's CPU cost is served (`lard98`,
    /// `lard98,request_us=145`): each node then has one modelled CPU of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
    /// A real CPU limit per node, in CPUs (e.g. 0.25): each node runs in a cgroup of its own
    /// with that quota, and its requests' CPU cost is really burnt. Not with `cpu`: a node is
    /// either modelled or limited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_limit: Option<f64>,
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
            cpu: None,
            cpu_limit: None,
            workers: 1,
        }
    }
}

impl NodeSettings {
    /// Cache capacity in bytes.
    pub fn cache_bytes(&self) -> Option<u64> {
        self.cache.parse::<ByteSize>().ok().map(|b| b.0)
    }

    /// Check values that parse but make no sense; the message starts with the key.
    pub(crate) fn validate(&self) -> Result<(), String> {
        self.cache.parse::<ByteSize>().map_err(|e| format!("cache: {e}"))?;
        self.max_object.parse::<ByteSize>().map_err(|e| format!("max_object: {e}"))?;
        self.cache_policy.parse::<Replacement>().map_err(|e| format!("cache_policy: {e}"))?;
        if let Some(s) = &self.storage {
            s.parse::<StorageConfig>().map_err(|e| format!("storage: {e}"))?;
        }
        if let Some(c) = &self.cpu {
            c.parse::<CpuModelConfig>().map_err(|e| format!("cpu: {e}"))?;
        }
        if self.workers == 0 || self.workers > 64 {
            return Err(format!("workers = {}: must be within 1..=64", self.workers));
        }
        let machine_cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        self.validate_cpu_limit(machine_cpus)
    }

    /// `cpu_limit` is a positive number of CPUs, at most `machine_cpus`, and not set with `cpu`.
    fn validate_cpu_limit(&self, machine_cpus: usize) -> Result<(), String> {
        let Some(limit) = self.cpu_limit else { return Ok(()) };
        if self.cpu.is_some() {
            return Err(format!(
                "cpu_limit = {limit}: not with `cpu` (a node's CPU is either modelled or limited)"
            ));
        }
        if !(limit.is_finite() && limit > 0.0 && limit <= machine_cpus as f64) {
            return Err(format!(
                "cpu_limit = {limit}: must be more than 0 and at most this machine's {machine_cpus} CPUs"
            ));
        }
        Ok(())
    }

    /// What the node's CPU is, for results rows: `"cgroup"` (a real limit), `"model"` (the
    /// modelled CPU of `cpu`) or `"host"` (the machine's CPUs, shared and unlimited).
    pub fn node_cpu(&self) -> &'static str {
        match (&self.cpu_limit, &self.cpu) {
            (Some(_), _) => "cgroup",
            (None, Some(_)) => "model",
            (None, None) => "host",
        }
    }
}

impl Experiment {
    /// Parse and validate an experiment; `source_name` names it in errors.
    pub fn from_toml(text: &str, source_name: &str) -> Result<Experiment, LabError> {
        let fail = |message: String| LabError::Experiment { source_name: source_name.to_string(), message };
        let experiment: Experiment =
            toml::from_str(text).map_err(|e| fail(e.to_string().trim().to_string()))?;
        experiment.validate().map_err(|message| {
            match crate::experiment::toml_lines::line_of_key(
                text,
                crate::experiment::toml_lines::key_path_of(&message),
            ) {
                Some(line) => fail(format!("line {line}: {message}")),
                None => fail(message),
            }
        })?;
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
        validate_node_counts(&self.nodes).map_err(|m| format!("nodes{m}"))?;
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
        self.node.validate().map_err(|m| format!("node.{m}"))?;
        if self.switches.is_empty() {
            return Err("at least one [[switch]] row is needed".into());
        }
        for (i, row) in self.switches.iter().enumerate() {
            row.validate().map_err(|m| format!("switch[{i}].{m} (a {} row)", row.kind.name()))?;
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
        for (i, row) in self.switches.iter().enumerate() {
            for (j, name) in row.workloads.iter().enumerate() {
                if !self.workloads.iter().any(|w| &w.name == name) {
                    return Err(format!("switch[{i}].workloads[{j}]: no workload is named `{name}`"));
                }
            }
        }
        for w in &self.workloads {
            if !self.switches.iter().any(|r| r.runs_on(&w.name)) {
                return Err(format!("workload: no [[switch]] row runs on `{}`", w.name));
            }
        }
        for (i, row) in self.switches.iter().enumerate() {
            if let Some(w) = self.workloads.iter().find(|w| w.tls && row.runs_on(&w.name))
                && let Some(why) = row.cannot_terminate_tls()
            {
                return Err(format!("switch[{i}] runs on `{}`, which has tls = true, but {why}", w.name));
            }
            if let Some(w) = self.workloads.iter().find(|w| w.h2 && row.runs_on(&w.name))
                && row.modes.iter().any(|m| m.as_str() == "handoff")
            {
                return Err(format!(
                    "switch[{i}] runs on `{}`, which has h2 = true, but mode `handoff` would serve \
                     HTTP/2 two-way (its streams cannot move): measure it in proxy mode",
                    w.name
                ));
            }
        }
        Ok(())
    }

    /// The matrix in run order: repetitions (seeds) outermost, so the rows a ratio compares run
    /// interleaved (A B C A B C …, each seed's rows close in time), then workloads, switch rows,
    /// policies, modes, node counts. A workload with fewer runs drops out of the later ones.
    pub fn points(&self) -> Vec<ExperimentPoint> {
        let mut out = Vec::new();
        let runs = (0..self.workloads.len()).map(|w| self.repeat_of(w)).max().unwrap_or(1);
        for repetition in 1..=runs {
            for (workload, spec) in self.workloads.iter().enumerate() {
                if repetition > self.repeat_of(workload) {
                    continue;
                }
                for row in self.switches.iter().filter(|r| r.runs_on(&spec.name)) {
                    for policy in &row.policies {
                        for mode in &row.modes {
                            for &nodes in self.nodes_of(workload) {
                                out.push(ExperimentPoint {
                                    index: out.len(),
                                    repetition,
                                    seed: crate::experiment::seed_of_run(spec.seed, repetition),
                                    config: row.config(policy),
                                    workload,
                                    switch: row.kind,
                                    policy: policy.clone(),
                                    mode: mode.clone(),
                                    nodes,
                                    workers: row.workers,
                                    splice_min_bytes: row.splice_min_bytes,
                                    rehandoff: row.rehandoff.clone(),
                                    policy_table: row.policy_table(policy),
                                    coop: row.coop.clone(),
                                    dc_quota: row.dc_quota.clone(),
                                    dc_balance_ms: row.dc_balance_ms,
                                    haproxy: row.haproxy_tuning(),
                                    class_cost_scale: row.class_cost_scale,
                                });
                            }
                        }
                    }
                }
            }
        }
        out
    }

    /// The largest node count of any workload.
    pub fn max_nodes(&self) -> usize {
        (0..self.workloads.len())
            .flat_map(|w| self.nodes_of(w))
            .chain(&self.nodes)
            .copied()
            .max()
            .unwrap_or(1)
    }

    /// The node counts of workload `w`.
    pub fn nodes_of(&self, w: usize) -> &[usize] {
        self.workloads.get(w).and_then(|s| s.nodes.as_deref()).unwrap_or(&self.nodes)
    }

    /// Runs (seeds) of workload `w`'s points.
    pub fn repeat_of(&self, w: usize) -> u32 {
        self.workloads.get(w).and_then(|s| s.repeat).unwrap_or(self.repeat)
    }

    /// Warm-up seconds of workload `w`'s points.
    pub fn warmup_of(&self, w: usize) -> f64 {
        self.workloads.get(w).and_then(|s| s.warmup_s).unwrap_or(self.warmup_s)
    }

    /// Measured seconds of workload `w`'s points.
    pub fn measure_of(&self, w: usize) -> f64 {
        self.workloads.get(w).and_then(|s| s.measure_s).unwrap_or(self.measure_s)
    }

    /// Node settings of workload `w`'s points.
    pub fn node_of(&self, w: usize) -> &NodeSettings {
        self.workloads.get(w).and_then(|s| s.node.as_ref()).unwrap_or(&self.node)
    }

    /// The experiment with every workload run at least `runs` times, each with its own seed
    /// (`locus lab demo --full`: 5).
    pub fn with_at_least_runs(mut self, runs: u32) -> Experiment {
        self.repeat = self.repeat.max(runs);
        for w in &mut self.workloads {
            w.repeat = w.repeat.map(|r| r.max(runs));
        }
        self
    }

    /// The experiment with every workload at the experiment's node counts
    /// (`--every-node-count`).
    pub fn with_every_node_count(mut self) -> Experiment {
        for w in &mut self.workloads {
            w.nodes = None;
        }
        self
    }

    /// Whether any row uses this switch.
    pub fn uses(&self, kind: SwitchKind) -> bool {
        self.switches.iter().any(|r| r.kind == kind)
    }
}

/// Check a list of node counts; the message starts with the index (`[2] = 0: …`).
pub(crate) fn validate_node_counts(nodes: &[usize]) -> Result<(), String> {
    if nodes.is_empty() {
        return Err(": list at least one node count".into());
    }
    for (i, &n) in nodes.iter().enumerate() {
        if n == 0 || n > MAX_NODES {
            return Err(format!("[{i}] = {n}: node counts must be within 1..={MAX_NODES}"));
        }
    }
    Ok(())
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
            ("\"wrr\", \"lard\"", "\"wrr\", \"lardd\"", "switch[0].policies[1]"),
            ("\"uri-chash-bounded\"", "\"uri\"", "switch[1].policies[0]"),
            ("cache = \"4MiB\"", "cache = \"4 parsecs\"", "node.cache"),
            ("seek_ms=2", "seek_ms=x", "node.storage"),
            ("files = 100", "files = 0", "workload[0].files"),
            ("name = \"zipf\"", "name = \"a b\"", "workload[0].name"),
            ("files = 100", "files = 100\nalpha = -1", "workload[0].alpha"),
            ("\"wrr\", \"lard\"", "\"wrr\", \"wrr\"", "twice"),
            (
                "policies = [\"uri-chash-bounded\"]",
                "policies = [\"roundrobin\"]\nsplice_min_bytes = 0",
                "switch[1].splice_min_bytes",
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
    fn rehandoff_is_a_setting_of_locus_handoff_rows_named_in_their_config() {
        let row = |extra: &str| {
            SMALL.replace("policies = [\"wrr\", \"lard\"]", &format!("policies = [\"lard\"]\n{extra}"))
        };
        let e = Experiment::from_toml(&row("modes = [\"handoff\"]\nrehandoff = \"forward\""), "x").unwrap();
        assert!(
            e.points()
                .iter()
                .any(|p| p.rehandoff.as_deref() == Some("forward") && p.config.contains("rehandoff=forward"))
        );
        let proxy = Experiment::from_toml(&row("rehandoff = \"forward\""), "x").unwrap_err().to_string();
        assert!(proxy.contains("rehandoff") && proxy.contains("handoff"), "{proxy}");
        let bogus = row("modes = [\"handoff\"]\nrehandoff = \"sideways\"");
        assert!(Experiment::from_toml(&bogus, "x").unwrap_err().to_string().contains("sideways"));
    }

    #[test]
    fn a_tls_workload_needs_rows_that_terminate_tls_and_no_surfers() {
        let tls = SMALL.replace("files = 100", "files = 100\ntls = true");
        let e = Experiment::from_toml(&tls, "x").unwrap();
        assert!(e.workloads[0].tls && e.to_toml().contains("tls = true"));
        let handoff =
            tls.replace("policies = [\"wrr\", \"lard\"]", "policies = [\"lard\"]\nmodes = [\"handoff\"]");
        assert!(Experiment::from_toml(&handoff, "x").is_ok(), "one-way HTTPS: handoff terminates TLS");
        let l4 = tls.replace("policies = [\"wrr\", \"lard\"]", "policies = [\"rr\"]\nmodes = [\"l4\"]");
        let err = Experiment::from_toml(&l4, "x").unwrap_err().to_string();
        assert!(err.contains("switch[0]") && err.contains("`l4`") && err.contains("tls = true"), "{err}");
        let dc = tls.replace(
            "kind = \"haproxy\"\npolicies = [\"uri-chash-bounded\"]",
            "kind = \"dc\"\npolicies = [\"off\"]",
        );
        let err = Experiment::from_toml(&dc, "x").unwrap_err().to_string();
        assert!(err.contains("switch[1]") && err.contains("DC"), "{err}");
        let surf = format!("{tls}[workload.surf]\n");
        let err = Experiment::from_toml(&surf, "x").unwrap_err().to_string();
        assert!(err.contains("workload[0].tls") && err.contains("surf"), "{err}");
        assert!(
            !SMALL.contains("tls") && !Experiment::from_toml(SMALL, "x").unwrap().to_toml().contains("tls")
        );
    }

    #[test]
    fn an_h2_workload_needs_tls_streams_within_bounds_and_no_handoff_rows() {
        let h2 = SMALL.replace("files = 100", "files = 100\ntls = true\nh2 = true\nstreams = 10");
        let e = Experiment::from_toml(&h2, "x").unwrap();
        assert!(e.workloads[0].h2 && e.workloads[0].streams == 10);
        let again = Experiment::from_toml(&e.to_toml(), "x").unwrap();
        assert_eq!(again.workloads[0], e.workloads[0], "h2 and streams survive the round trip");
        let err = Experiment::from_toml(&h2.replace("tls = true\n", ""), "x").unwrap_err().to_string();
        assert!(err.contains("h2") && err.contains("tls"), "{err}");
        let err = Experiment::from_toml(&h2.replace("h2 = true\n", ""), "x").unwrap_err().to_string();
        assert!(err.contains("streams = 10"), "{err}");
        let err =
            Experiment::from_toml(&h2.replace("streams = 10", "streams = 0"), "x").unwrap_err().to_string();
        assert!(err.contains("streams = 0"), "{err}");
        let handoff =
            h2.replace("policies = [\"wrr\", \"lard\"]", "policies = [\"lard\"]\nmodes = [\"handoff\"]");
        let err = Experiment::from_toml(&handoff, "x").unwrap_err().to_string();
        assert!(err.contains("switch[0]") && err.contains("handoff") && err.contains("h2 = true"), "{err}");
    }

    #[test]
    fn a_coop_row_names_its_points_by_policy_and_replacement_and_refuses_an_unknown_one() {
        let text = SMALL.replace("policies = [\"wrr\", \"lard\"]", "policies = [\"rr\"]\ncoop = \"lfu\"");
        let e = Experiment::from_toml(&text, "x").unwrap();
        let p = &e.points()[0];
        assert_eq!((p.policy.as_str(), p.coop.as_deref()), ("rr", Some("lfu")));
        assert_eq!(p.label(), "locus rr+cf-lfu proxy, 1 node");
        let bad = SMALL.replace("policies = [\"wrr\", \"lard\"]", "policies = [\"rr\"]\ncoop = \"fifo\"");
        let err = Experiment::from_toml(&bad, "x").unwrap_err().to_string();
        assert!(err.contains("switch[0].coop") && err.contains("line 13"), "{err}");
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

    const MIXED: &str = r#"
nodes = [1, 4]

[[switch]]
kind = "locus"
policies = ["lard-r"]
workloads = ["hot"]

[[switch]]
kind = "haproxy"
policies = ["leastconn"]

[[workload]]
name = "hot"
files = 100
nodes = [4]

[workload.hot_spot]
documents = 5
share = 0.5
shift_s = 2

[workload.node]
cpu = "lard98,request_us=145"

[[workload]]
name = "dyn"
files = 50
rate = 300

[[workload.dynamic]]
share = 0.1
[workload.dynamic.class]
name = "search"
prefix = "/cgi/search"
cost = { dist = "uniform", min_ms = 10, max_ms = 30 }
size = "2KiB"
"#;

    #[test]
    fn cpu_limit_parses_strictly_and_names_the_node_cpu() {
        let with = |value: &str| {
            let text = MIXED.replacen("[[switch]]", &format!("[node]\ncpu_limit = {value}\n\n[[switch]]"), 1);
            assert_ne!(text, MIXED);
            text
        };
        let e = Experiment::from_toml(&with("0.25"), "l.toml").unwrap();
        assert_eq!(e.node.cpu_limit, Some(0.25));
        assert_eq!(e.node.node_cpu(), "cgroup");
        assert_eq!(e.node_of(0).node_cpu(), "model", "the workload's own [node] has `cpu`");
        assert_eq!(NodeSettings::default().node_cpu(), "host");
        assert_eq!(Experiment::from_toml(&e.to_toml(), "again").unwrap(), e);
        let err = Experiment::from_toml(&with("\"0.25\""), "s.toml").unwrap_err().to_string();
        assert!(err.contains("cpu_limit"), "a string is refused: {err}");
    }

    #[test]
    fn cpu_limit_must_be_positive_within_the_machine_and_not_with_cpu() {
        let limited = |limit: f64| NodeSettings { cpu_limit: Some(limit), ..NodeSettings::default() };
        assert_eq!(limited(0.25).validate_cpu_limit(2), Ok(()));
        assert_eq!(limited(2.0).validate_cpu_limit(2), Ok(()));
        for bad in [0.0, -0.5, 2.5, f64::NAN, f64::INFINITY] {
            let err = limited(bad).validate_cpu_limit(2).unwrap_err();
            assert!(err.starts_with("cpu_limit = ") && err.contains("2 CPUs"), "{bad}: {err}");
        }
        let both = NodeSettings { cpu: Some("lard98".into()), ..limited(0.25) };
        assert!(both.validate_cpu_limit(2).unwrap_err().contains("not with `cpu`"));
        assert_eq!(both.node_cpu(), "cgroup");
    }

    #[test]
    fn cpu_limit_beside_cpu_is_refused_with_its_key_and_line() {
        let bad = MIXED
            .replace("cpu = \"lard98,request_us=145\"", "cpu = \"lard98,request_us=145\"\ncpu_limit = 0.5");
        assert_ne!(bad, MIXED);
        let line = bad.lines().position(|l| l.starts_with("cpu_limit")).unwrap() + 1;
        let err = Experiment::from_toml(&bad, "bad.toml").unwrap_err().to_string();
        assert!(
            err.contains("workload[0].node.cpu_limit") && err.contains(&format!("line {line}:")),
            "{err}"
        );
    }

    #[test]
    fn workloads_choose_their_rows_node_counts_and_node_settings() {
        let e = Experiment::from_toml(MIXED, "mixed.toml").unwrap();
        let labels: Vec<String> = e.points().iter().map(|p| p.label()).collect();
        assert_eq!(
            labels,
            [
                "locus lard-r proxy, 4 nodes",
                "haproxy leastconn proxy, 4 nodes",
                "haproxy leastconn proxy, 1 node",
                "haproxy leastconn proxy, 4 nodes",
            ]
        );
        assert_eq!(e.node_of(0).cpu.as_deref(), Some("lard98,request_us=145"));
        assert_eq!(e.node_of(1), &e.node);
        assert_eq!(e.workloads[1].rate, Some(300.0));
        assert_eq!(e.max_nodes(), 4);
        assert_eq!(Experiment::from_toml(&e.to_toml(), "again").unwrap(), e);
    }

    #[test]
    fn nonsense_in_a_workload_or_cpu_model_is_refused_with_its_key_and_line() {
        let line_of = |text: &str, key: &str| text.lines().position(|l| l.starts_with(key)).unwrap() + 1;
        let cases = [
            ("documents = 5", "documents = 500", "documents", "workload[0].hot_spot.documents"),
            ("share = 0.5", "share = 1.5", "share = 1.5", "workload[0].hot_spot.share"),
            ("shift_s = 2", "shift_s = 0", "shift_s", "workload[0].hot_spot.shift_s"),
            ("cpu = \"lard98,request_us=145\"", "cpu = \"kb_us=-3\"", "cpu", "workload[0].node.cpu"),
            ("rate = 300", "rate = -1", "rate", "workload[1].rate"),
            ("share = 0.1", "share = 2", "share = 2", "workload[1].dynamic[0].share"),
            ("workloads = [\"hot\"]", "workloads = [\"cold\"]", "workloads", "switch[0].workloads[0]"),
        ];
        for (from, to, key_line, key) in cases {
            let bad = MIXED.replacen(from, to, 1);
            assert_ne!(bad, MIXED, "{from}");
            let line = line_of(&bad, key_line);
            let err = Experiment::from_toml(&bad, "bad.toml").unwrap_err().to_string();
            assert!(
                err.contains(key) && err.contains(&format!("line {line}:")),
                "{key} on line {line}: {err}"
            );
        }
        // A class cost that makes no sense is refused as the file is read, also with its line.
        let bad = MIXED.replace("min_ms = 10", "min_ms = -10");
        let err = Experiment::from_toml(&bad, "bad.toml").unwrap_err().to_string();
        let line = line_of(&bad, "cost");
        assert!(err.contains(&format!("line {line}")) && err.contains("min_ms"), "{err}");
        // A workload no row runs on.
        let bad =
            MIXED.replace("policies = [\"leastconn\"]", "policies = [\"leastconn\"]\nworkloads = [\"hot\"]");
        let err = Experiment::from_toml(&bad, "bad.toml").unwrap_err().to_string();
        assert!(err.contains("no [[switch]] row runs on `dyn`"), "{err}");
    }

    #[test]
    fn policy_parameters_go_into_the_switchs_policy_table_and_nonsense_is_refused_with_its_line() {
        let text = SMALL.replace(
            "policies = [\"wrr\", \"lard\"]",
            "policies = [\"lard\", \"lard-r\"]\npolicy_params = { t_low = 4, t_high = 16 }",
        );
        let e = Experiment::from_toml(&text, "p.toml").unwrap();
        let point = e.points().into_iter().find(|p| p.policy == "lard-r").unwrap();
        let table = point.policy_table.expect("a [policy] table");
        let parsed: toml::Table = toml::from_str(&table).unwrap();
        assert_eq!(parsed["policy"]["name"].as_str(), Some("lard-r"));
        assert_eq!(parsed["policy"]["t_high"].as_integer(), Some(16));
        assert!(
            e.points().iter().filter(|p| p.switch == SwitchKind::Haproxy).all(|p| p.policy_table.is_none())
        );
        let line = text.lines().position(|l| l.starts_with("policy_params")).unwrap() + 1;
        for (params, what) in
            [("t_low = 20, t_high = 16", "t_low"), ("t_lo = 4", "t_lo"), ("variant = \"a\"", "variant")]
        {
            let bad = text.replace("t_low = 4, t_high = 16", params);
            let err = Experiment::from_toml(&bad, "p.toml").unwrap_err().to_string();
            assert!(
                err.contains("policy_params") && err.contains(what) && err.contains(&format!("line {line}:")),
                "{err}"
            );
        }
    }
}
