//! The simulator's DC-Apache peer mode (no front-end): S servers, all documents on the home
//! `s0`, closed-loop surfers talking to the servers their rewritten pages name, lazy fetches
//! of copies from the home, load piggybacked on fetches plus a pinger, and the home's balancer
//! every 5 s — all decisions made by `locus_dc`. `DcPeerConfig` is one run; `simulate_dc`
//! runs it and returns a `DcRun` (CPS and mean response time after the warm-up).

use locus_dc::ServerId;
use locus_dc::balancer::{BalancerConfig, QuotaMethod};
use locus_dc::consistency::Consistency;
use locus_dc::selector::SelectorConfig;
use serde::Serialize;

use crate::cost_model::CostModel;
use crate::dc::engine::PeerEngine;
use crate::dc::site::DcSite;
use crate::error::SimError;
use crate::network::LinkModel;

pub const NS_PER_S: u64 = 1_000_000_000;

/// The clock ratio that scales the LARD model's CPU costs (a 300 MHz Pentium II) to the
/// paper's 200 MHz Pentium: every CPU cost × 1.5.
pub const PENTIUM_200_SLOWDOWN: f64 = 1.5;

/// An unlimited replica quota (larger than any data set).
pub const UNLIMITED_QUOTA: u64 = 1 << 50;

/// One peer-mode run.
#[derive(Clone, Debug)]
pub struct DcPeerConfig {
    pub servers: u16,
    pub clients: u32,
    pub method: QuotaMethod,
    /// Bytes each co-op may hold in replicas (`UNLIMITED_QUOTA`: no limit).
    pub quota_bytes: u64,
    pub seed: u64,
    pub warmup_s: f64,
    pub measure_s: f64,
    pub session_requests: u32,
    pub costs: CostModel,
    pub page_cache_bytes: u64,
    pub link: LinkModel,
    /// CPU a ping costs each side (the short HEAD and its reply).
    pub ping_cpu_ns: u64,
    pub ping_period_ns: u64,
    /// A peer's load entry older than this is refreshed by a ping.
    pub ping_stale_ns: u64,
    pub balancer: BalancerConfig,
    pub selector: SelectorConfig,
    pub consistency: Consistency,
}

impl DcPeerConfig {
    /// The paper's testbed: 256 clients, 20 requests a session, LARD costs × 1.5, 64 MB page
    /// cache, 100 Mbps NICs, pinger every 1 s for entries older than 2 s, and the `locus_dc`
    /// default balancer (every 5 s) and selector.
    pub fn paper(servers: u16, method: QuotaMethod, quota_bytes: u64) -> DcPeerConfig {
        let costs = CostModel::lard98().with_cpu_speed(1.0 / PENTIUM_200_SLOWDOWN);
        DcPeerConfig {
            servers,
            clients: 256,
            method,
            quota_bytes,
            seed: 1,
            warmup_s: 60.0,
            measure_s: 60.0,
            session_requests: 20,
            ping_cpu_ns: costs.reply_ns,
            costs,
            page_cache_bytes: 64 << 20,
            link: LinkModel { bits_per_s: 100_000_000, efficiency: 0.95 },
            ping_period_ns: NS_PER_S,
            ping_stale_ns: 2 * NS_PER_S,
            balancer: BalancerConfig::default(),
            selector: SelectorConfig::default(),
            consistency: Consistency::default(),
        }
    }

    /// The balancer's configuration with this run's method and co-op quota.
    pub fn balancer_config(&self) -> BalancerConfig {
        let max_age_ns = self.load_max_age_ns();
        BalancerConfig { method: self.method, coop_quota: self.store_quota(), max_age_ns, ..self.balancer }
    }

    /// How long a peer's load stays fresh for the balancer and the selector (see
    /// `locus_dc::load_table::fresh_for`).
    pub fn load_max_age_ns(&self) -> u64 {
        locus_dc::load_table::fresh_for(self.ping_period_ns, self.ping_stale_ns)
    }

    /// The selector's configuration with the balancer's threshold θ (one notion of overloaded).
    pub fn selector_config(&self) -> SelectorConfig {
        SelectorConfig { theta: self.balancer.theta, max_age_ns: self.load_max_age_ns(), ..self.selector }
    }

    /// The replica store's byte quota on each co-op.
    pub fn store_quota(&self) -> u64 {
        self.quota_bytes.min(UNLIMITED_QUOTA)
    }

    pub fn warmup_ns(&self) -> u64 {
        (self.warmup_s * 1e9).round() as u64
    }

    pub fn end_ns(&self) -> u64 {
        ((self.warmup_s + self.measure_s) * 1e9).round() as u64
    }

    pub fn validate(&self) -> Result<(), SimError> {
        let bad = |m: String| Err(SimError::Config(m));
        if self.servers == 0 || self.clients == 0 {
            return bad(format!(
                "dc peer run needs servers and clients, not {} and {}",
                self.servers, self.clients
            ));
        }
        if !(self.warmup_s >= 0.0 && self.measure_s > 0.0 && (self.warmup_s + self.measure_s).is_finite()) {
            return bad(format!(
                "dc peer run: warm-up {} s and measurement {} s",
                self.warmup_s, self.measure_s
            ));
        }
        if self.clients >= 1 << 29 || self.ping_period_ns == 0 {
            return bad("dc peer run: too many clients or a zero ping period".into());
        }
        self.balancer_config().check().map_err(|e| SimError::Config(e.to_string()))?;
        crate::network::validate_link("dc links", self.link.bits_per_s, self.link.efficiency)
    }
}

/// What one run measured.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct DcRun {
    pub servers: u16,
    pub clients: u32,
    pub method: String,
    pub quota_bytes: u64,
    /// Responses per second completed in the measurement window.
    pub cps: f64,
    /// Bytes per second of those responses.
    pub bps: f64,
    /// Mean response time (request sent to last byte) of those responses, ms.
    pub mean_ms: f64,
    pub responses: u64,
    /// Share of the measured responses the home served.
    pub home_share: f64,
    /// Copies fetched from the home (first use, or after an eviction), whole run.
    pub fetches: u64,
    pub validations: u64,
    /// Requests a co-op sent back to the home because the copy does not fit its quota.
    pub redirects: u64,
    pub deletion_notices: u64,
    pub balancer_actions: u64,
    pub copies_evicted: u64,
    /// Most replica bytes any co-op held at any time.
    pub max_store_bytes: u64,
    /// Documents with more than one server (or moved) in the home's map at the end.
    pub replicated_docs: u64,
    /// Copies the home's map places on co-ops at the end.
    pub placed_copies: u64,
    /// CPU utilisation in the measured window: the home, the co-ops' mean and the busiest
    /// co-op.
    pub home_cpu: f64,
    pub coop_cpu: f64,
    pub busiest_coop_cpu: f64,
    /// Disk utilisation in the measured window: the home and the co-ops' mean.
    pub home_disk: f64,
    pub coop_disk: f64,
    /// Mean over the measured seconds of the busiest server's CPU share in that second, and the
    /// share of server-seconds at or above 95% CPU (see `dc_cpu_peaks`).
    pub peak_cpu: f64,
    pub saturated_share: f64,
    pub warmup_s: f64,
    pub measure_s: f64,
    pub events: u64,
}

/// Run `config` over `site`.
pub fn simulate_dc(site: &DcSite, config: &DcPeerConfig) -> Result<DcRun, SimError> {
    config.validate()?;
    if site.docs.is_empty() {
        return Err(SimError::Config(format!("data set {} has no documents", site.name)));
    }
    let mut engine = PeerEngine::new(site, config)?;
    engine.run();
    Ok(engine.result())
}

/// Server ids `0..n`.
pub fn server_ids(n: u16) -> impl Iterator<Item = ServerId> {
    (0..n).map(ServerId)
}
