//! `SimConfig`: one simulation point — policy, node count, preset costs (`lard98`,
//! `csld03`) with overrides, cache, CPU-speed/memory/disk scaling, closed or open loop, the
//! thresholds behind the admission limit and idle time, node up/down events, the seed —
//! read from TOML on top of a preset.

use std::path::Path;

use locus_cache::Replacement;
use serde::{Deserialize, Serialize};

use crate::cost_model::CostModel;
use crate::error::SimError;
use crate::frontend::FrontEndLimit;
use crate::network::{CloneCost, LinkModel, Storage, validate_link};
use crate::sim_policy::SimPolicy;

/// A set of defaults taken from a paper.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum, Default)]
#[serde(rename_all = "lowercase")]
pub enum Preset {
    /// The LARD paper (1998): its cost model, 32 MB GDS caches, one disk per node.
    #[default]
    Lard98,
    /// The CSLD paper (2003): its costs, 64 MB LRU caches, 16 nodes, Pareto RTTs.
    Csld03,
}

impl Preset {
    pub fn name(self) -> &'static str {
        match self {
            Preset::Lard98 => "lard98",
            Preset::Csld03 => "csld03",
        }
    }
}

/// How a node serves requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// The LARD model: one non-preemptive FIFO CPU and FIFO disks per node.
    #[default]
    Fifo,
    /// A process-driven server (Apache 1.3 on Linux): a process per connection from a pool
    /// with a listen backlog, processor sharing among runnable processes (see `ApacheModel`).
    /// Open-loop arrivals only; the front-end admits every connection (no admission limit)
    /// and node events are not supported.
    Apache,
}

/// How the process-driven back end's CPU shares itself among runnable jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum CpuModel {
    /// Processor sharing: every runnable job gets 1/n of the CPU.
    #[default]
    Ps,
    /// Linux 2.4's credit scheduler, simplified (see `apache::CreditCpu`).
    Credit,
}

/// Parameters of the process-driven back end (Apache 1.3.16 on Linux 2.4, as in the CSLD
/// paper).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApacheModel {
    /// CPU scheduling.
    pub cpu: CpuModel,
    /// Fresh time slice of the credit scheduler, ns.
    pub slice_ns: u64,
    /// Most server processes (MaxClients).
    pub max_clients: u32,
    /// Processes at start (StartServers).
    pub start_servers: u32,
    /// Spawn when fewer idle processes than this (MinSpareServers).
    pub min_spare: u32,
    /// Kill one idle process per second while more are idle than this (MaxSpareServers).
    pub max_spare: u32,
    /// Most processes spawned in one maintenance second (the rate doubles 1, 2, 4, ... to it).
    pub max_spawn_rate: u32,
    /// CPU of one fork, ns.
    pub fork_ns: u64,
    /// Connections the kernel holds for the server (listen backlog); a SYN beyond is dropped.
    pub backlog: u32,
    /// Client retry delays after a dropped SYN, seconds (one retry per entry).
    pub retry_delays_s: Vec<f64>,
    /// Socket send buffer, bytes: a process stays busy until the rest of a response fits.
    pub send_buffer: u64,
    /// Segment size, bytes.
    pub mss: u64,
    /// Initial congestion window, segments (doubling every RTT).
    pub initial_cwnd: u64,
    /// Size of the document `GET /` probes fetch, bytes.
    pub probe_size: u64,
    /// Start every node's cache warm: holding the most requested static documents that fit
    /// (the most requested most recently used) — the state a long warm-up reaches when the
    /// working set fits, without spending the simulated time. The policy hears of these
    /// documents at time 0 as requests its sniffer saw on that node (`Cluster::observe`).
    pub warm_caches: bool,
}

impl Default for ApacheModel {
    fn default() -> ApacheModel {
        ApacheModel {
            cpu: CpuModel::Ps,
            slice_ns: 100_000_000,
            max_clients: 150,
            start_servers: 5,
            min_spare: 5,
            max_spare: 10,
            max_spawn_rate: 32,
            fork_ns: 1_400_000,
            backlog: 128,
            retry_delays_s: vec![3.0, 6.0],
            send_buffer: 16 << 10,
            mss: 1460,
            initial_cwnd: 2,
            probe_size: 1024,
            warm_caches: true,
        }
    }
}

/// A node's document cache.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheModel {
    /// Bytes per node (before `memory_scale`).
    pub capacity_bytes: u64,
    /// Replacement policy (the node's own `DocCache`).
    pub replacement: Replacement,
    /// Larger files are never cached; absent: 500 KB under LRU (the LARD paper's LRU
    /// variant), else no limit but the capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_object_bytes: Option<u64>,
    /// The miss cost handed to GDS/GDSF: 1 aims them at hit ratio (the LARD paper's choice).
    pub gds_cost: f64,
}

/// Where requests come from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Arrivals {
    /// Closed loop: `clients` clients each send their next request when the last one
    /// completes (no think time). Absent: enough to saturate — the admission limit plus one
    /// per node, or 65 per node without a limit.
    Closed {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        clients: Option<u32>,
    },
    /// Open loop: Poisson arrivals at `rate` requests per second (seeded).
    Poisson { rate: f64 },
    /// Open loop at the trace's own times (every record must have one).
    Trace,
}

/// A node leaving or joining the view at a given time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeEvent {
    /// Seconds of simulated time.
    pub at_s: f64,
    /// Node index (0-based).
    pub node: u32,
    /// Into (`true`) or out of the view. A node out of the view gets no new requests and
    /// finishes those it has.
    pub up: bool,
}

/// Everything one simulation run needs besides the trace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimConfig {
    /// The preset this configuration started from (informational once resolved).
    pub preset: Preset,
    pub policy: SimPolicy,
    pub nodes: u32,
    /// Seeds every random draw of the run (Poisson gaps, RTTs, dynamic costs).
    pub seed: u64,
    pub costs: CostModel,
    pub cache: CacheModel,
    /// CPU speed multiplier: CPU costs are divided by it.
    pub cpu_speed: f64,
    /// Cache size multiplier.
    pub memory_scale: f64,
    /// Disks per node; files are striped over them by popularity rank.
    pub disks: u32,
    pub arrivals: Arrivals,
    /// LARD's T_low (also the base of the idle threshold and of the paper's S).
    pub t_low: u32,
    /// LARD's T_high.
    pub t_high: u32,
    /// A node is idle (under-utilised) while its load is below `idle_fraction × T_low`.
    pub idle_fraction: f64,
    pub frontend_limit: FrontEndLimit,
    /// Slow start of a node that comes back (the switch's `health.slow_start_ms`).
    pub slow_start_ms: u64,
    /// Completed requests before measurement starts (0: the whole trace, as in the paper).
    pub warmup_requests: u64,
    #[serde(default)]
    pub node_events: Vec<NodeEvent>,
    /// The back-end model (default: the LARD model's FIFO servers).
    #[serde(default)]
    pub backend: Backend,
    /// The process-driven back end's parameters (used with `backend = "apache"`).
    #[serde(default)]
    pub apache: ApacheModel,
    /// Every node's network link (absent: an infinitely fast network, as in the LARD model).
    /// Responses leave through the serving node's TX; remote-memory fetches cross the
    /// holder's TX and the requester's RX; file-server reads the node's RX.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub links: Option<LinkModel>,
    /// Where nodes read files they do not hold (default: their own disks).
    #[serde(default, skip_serializing_if = "Storage::is_local_disk")]
    pub storage: Storage,
    /// Socket Cloning's CPU costs (used by the `sc` strategy).
    #[serde(default, skip_serializing_if = "CloneCost::is_default")]
    pub cloning: CloneCost,
}

const KB: u64 = 1024;
const MB: u64 = 1024 * 1024;

impl SimConfig {
    /// The defaults of `preset`.
    pub fn preset(preset: Preset) -> SimConfig {
        match preset {
            Preset::Lard98 => SimConfig {
                preset,
                policy: SimPolicy::from_name("lard-r").expect("lard-r"),
                nodes: 8,
                seed: 1,
                costs: CostModel::lard98(),
                cache: CacheModel {
                    capacity_bytes: 32 * MB,
                    replacement: Replacement::Gds,
                    max_object_bytes: None,
                    gds_cost: 1.0,
                },
                cpu_speed: 1.0,
                memory_scale: 1.0,
                disks: 1,
                arrivals: Arrivals::Closed { clients: None },
                t_low: 25,
                t_high: 65,
                idle_fraction: 0.4,
                frontend_limit: FrontEndLimit::Auto,
                slow_start_ms: 5000,
                warmup_requests: 0,
                node_events: Vec::new(),
                backend: Backend::Fifo,
                apache: ApacheModel::default(),
                links: None,
                storage: Storage::LocalDisk,
                cloning: CloneCost::default(),
            },
            Preset::Csld03 => SimConfig {
                preset,
                nodes: 16,
                costs: CostModel::csld03(),
                cache: CacheModel {
                    capacity_bytes: 64 * MB,
                    replacement: Replacement::Lru,
                    max_object_bytes: Some(64 * MB),
                    gds_cost: 1.0,
                },
                ..SimConfig::preset(Preset::Lard98)
            },
        }
    }

    /// The LARD paper's defaults.
    pub fn lard98() -> SimConfig {
        SimConfig::preset(Preset::Lard98)
    }

    /// The CSLD paper's defaults.
    pub fn csld03() -> SimConfig {
        SimConfig::preset(Preset::Csld03)
    }

    /// The LARD paper's sensitivity settings: CPU `speed`× with memory `memory`× (the paper
    /// pairs 1.5× memory with 2× CPU, 2× with 3×, 3× with 4×) and `disks` disks per node.
    pub fn scaled(mut self, cpu_speed: f64, memory_scale: f64, disks: u32) -> SimConfig {
        self.cpu_speed = cpu_speed;
        self.memory_scale = memory_scale;
        self.disks = disks;
        self
    }

    /// Parse TOML: a `preset` key picks the base (default `lard98`), every other key
    /// overrides it; tables merge key by key, except tables with a `kind` or `name`
    /// (arrivals, RTT, policy), which replace.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<SimConfig, SimError> {
        let parse_err = |message: String| SimError::Parse { origin: origin.to_string(), message };
        let user: toml::Table = toml::from_str(text).map_err(|e| parse_err(e.to_string()))?;
        let preset = match user.get("preset") {
            None => Preset::Lard98,
            Some(toml::Value::String(s)) => match s.as_str() {
                "lard98" => Preset::Lard98,
                "csld03" => Preset::Csld03,
                other => {
                    return Err(parse_err(format!("unknown preset `{other}` (expected lard98 or csld03)")));
                }
            },
            Some(other) => return Err(parse_err(format!("preset must be a string, not {other}"))),
        };
        let base = toml::Table::try_from(SimConfig::preset(preset)).map_err(|e| parse_err(e.to_string()))?;
        let merged = merge(base, user);
        let config: SimConfig = merged.try_into().map_err(|e: toml::de::Error| parse_err(e.to_string()))?;
        config.validate()?;
        Ok(config)
    }

    /// Read a TOML file (see `from_toml_str`).
    pub fn from_file(path: &Path) -> Result<SimConfig, SimError> {
        let text = std::fs::read_to_string(path).map_err(|e| SimError::io(path, e))?;
        SimConfig::from_toml_str(&text, &path.display().to_string())
    }

    /// Check the values serde cannot.
    pub fn validate(&self) -> Result<(), SimError> {
        let bad = |m: String| Err(SimError::Config(m));
        if self.nodes == 0 {
            return bad("nodes must be at least 1".into());
        }
        if self.policy.needs_directory() && self.nodes as usize > crate::directory::MAX_DIRECTORY_NODES {
            return bad(format!("{} supports at most 64 nodes", self.policy.label()));
        }
        if let Some(l) = &self.links {
            validate_link("links", l.bits_per_s, l.efficiency)?;
        }
        if let Storage::FileServer(f) = &self.storage {
            validate_link("storage (file server)", f.link_bits_per_s, f.efficiency)?;
        }
        self.cloning.validate()?;
        if self.backend == Backend::Apache && (self.links.is_some() || !self.storage.is_local_disk()) {
            return bad("links and a file server are modelled only on the FIFO back end".into());
        }
        if self.backend == Backend::Apache
            && matches!(self.policy, SimPolicy::CoopCache { .. } | SimPolicy::SocketCloning)
        {
            return bad(format!("{} runs only on the FIFO back end", self.policy.label()));
        }
        if !(self.cpu_speed.is_finite() && self.cpu_speed > 0.0) {
            return bad(format!("cpu_speed must be > 0, not {}", self.cpu_speed));
        }
        if !(self.memory_scale.is_finite() && self.memory_scale >= 0.0) {
            return bad(format!("memory_scale must be >= 0, not {}", self.memory_scale));
        }
        if self.disks == 0 || self.disks > 1024 {
            return bad(format!("disks must be in 1..=1024, not {}", self.disks));
        }
        if !(self.idle_fraction.is_finite() && self.idle_fraction >= 0.0) {
            return bad(format!("idle_fraction must be >= 0, not {}", self.idle_fraction));
        }
        if self.t_low >= self.t_high {
            return bad(format!("t_low ({}) must be below t_high ({})", self.t_low, self.t_high));
        }
        let a = &self.apache;
        if a.max_clients == 0 || a.start_servers > a.max_clients || a.min_spare > a.max_spare || a.mss == 0 {
            return bad(format!("apache model is inconsistent: {a:?}"));
        }
        if a.retry_delays_s.iter().any(|d| !(d.is_finite() && *d >= 0.0)) {
            return bad(format!("apache retry delays must be >= 0, not {:?}", a.retry_delays_s));
        }
        if !(self.cache.gds_cost.is_finite() && self.cache.gds_cost >= 0.0) {
            return bad(format!("cache.gds_cost must be >= 0, not {}", self.cache.gds_cost));
        }
        match self.arrivals {
            Arrivals::Closed { clients: Some(0) } => return bad("clients must be at least 1".into()),
            Arrivals::Poisson { rate } if !(rate.is_finite() && rate > 0.0) => {
                return bad(format!("arrival rate must be > 0, not {rate}"));
            }
            _ => {}
        }
        for e in &self.node_events {
            if e.node >= self.nodes || !(e.at_s.is_finite() && e.at_s >= 0.0) {
                return bad(format!("node event {e:?} names no node or has a bad time"));
            }
        }
        self.costs.validate().map_err(SimError::Config)
    }

    /// The cost model with the CPU speed applied.
    pub fn effective_costs(&self) -> CostModel {
        if self.cpu_speed == 1.0 { self.costs.clone() } else { self.costs.with_cpu_speed(self.cpu_speed) }
    }

    /// Cache bytes per node with the memory scale applied.
    pub fn cache_capacity(&self) -> u64 {
        (self.cache.capacity_bytes as f64 * self.memory_scale).round() as u64
    }

    /// Largest cacheable object.
    pub fn max_object(&self) -> u64 {
        let cap = self.cache_capacity();
        match self.cache.max_object_bytes {
            Some(m) => m.min(cap),
            None if self.cache.replacement == Replacement::Lru => (500 * KB).min(cap),
            None => cap,
        }
    }

    /// Load below which a node counts as idle.
    pub fn idle_threshold(&self) -> f64 {
        self.idle_fraction * self.t_low as f64
    }

    /// Clients of a closed loop given the front-end's initial admission limit.
    pub fn clients(&self, admission_limit: Option<usize>) -> u32 {
        match self.arrivals {
            Arrivals::Closed { clients: Some(c) } => c,
            _ => match admission_limit {
                Some(limit) => (limit as u32).saturating_add(self.nodes),
                None => self.nodes.saturating_mul(self.t_high),
            },
        }
    }
}

/// `user` over `base`: nested tables merge, except those with a `kind` or `name` key.
fn merge(mut base: toml::Table, user: toml::Table) -> toml::Table {
    for (k, v) in user {
        match (base.remove(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(u))
                if !u.contains_key("kind") && !u.contains_key("name") =>
            {
                base.insert(k, toml::Value::Table(merge(b, u)));
            }
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
    base
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost_model::RttModel;

    #[test]
    fn toml_overrides_merge_over_the_preset() {
        let c = SimConfig::from_toml_str(
            "preset = \"csld03\"\npolicy = \"wrr-gms\"\nnodes = 4\n[costs]\nconn_setup_ns = 1000\n\
             [costs.rtt]\nkind = \"const\"\nns = 5\n[arrivals]\nkind = \"poisson\"\nrate = 100.0\n\
             [[node_events]]\nat_s = 1.5\nnode = 2\nup = false\n",
            "t.toml",
        )
        .unwrap();
        assert_eq!(c.preset, Preset::Csld03);
        assert_eq!(c.policy, SimPolicy::WrrGms);
        assert_eq!(c.nodes, 4);
        assert_eq!(c.costs.conn_setup_ns, 1000);
        assert_eq!(c.costs.conn_teardown_ns, 132_000, "untouched preset value");
        assert_eq!(c.costs.rtt, RttModel::Const { ns: 5 });
        assert_eq!(c.arrivals, Arrivals::Poisson { rate: 100.0 });
        assert_eq!(c.cache.replacement, Replacement::Lru);
        assert_eq!(c.node_events.len(), 1);
        let table = SimConfig::from_toml_str("[policy]\nname = \"lard-r\"\nk_secs = 5.0\n", "x").unwrap();
        assert!(
            matches!(table.policy, SimPolicy::Switch(locus_policy::PolicyConfig::LardR { k_secs, .. }) if k_secs == 5.0)
        );
    }

    #[test]
    fn toml_errors_name_the_key_and_bad_values_are_refused() {
        let e = SimConfig::from_toml_str("nodez = 3\n", "t.toml").unwrap_err().to_string();
        assert!(e.contains("nodez") && e.starts_with("t.toml"), "{e}");
        assert!(SimConfig::from_toml_str("nodes = 0\n", "t").is_err());
        assert!(SimConfig::from_toml_str("preset = \"x\"\n", "t").is_err());
        assert!(SimConfig::from_toml_str("policy = \"nope\"\n", "t").is_err());
        assert!(SimConfig::from_toml_str("frontend_limit = 40\n", "t").is_ok());
    }

    #[test]
    fn max_object_defaults_to_500k_under_lru_and_the_capacity_under_gds() {
        let mut c = SimConfig::lard98();
        assert_eq!(c.max_object(), 32 * MB);
        c.cache.replacement = Replacement::Lru;
        assert_eq!(c.max_object(), 500 * KB);
        c.memory_scale = 2.0;
        assert_eq!(c.cache_capacity(), 64 * MB);
        assert_eq!(c.idle_threshold(), 10.0);
    }
}
