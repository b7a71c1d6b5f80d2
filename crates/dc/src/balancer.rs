//! The home's balancing round (every B seconds): from its request rates and the load table it
//! decides which of its documents to place on, revoke from or move to which co-ops, by the
//! configured `QuotaMethod`, and applies those decisions to its replica map (lazily: nothing is
//! copied, co-ops fetch on the first request). Resource-Aware's bookkeeping is in
//! `resource_aware`.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::ServerId;
use crate::load_table::LoadTable;
use crate::quota_books::QuotaBooks;
use crate::replica_map::ReplicaMap;
use crate::request_rates::RequestRates;

/// How a home replicates and how it treats co-ops' limited replica space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum QuotaMethod {
    /// Place copies while overloaded; co-ops evict silently.
    #[serde(rename = "naive")]
    Naive,
    /// Naive, and a co-op's eviction notice removes it from the document's set.
    #[serde(rename = "deletion-aware")]
    DeletionAware,
    /// The home books each co-op's quota: places only what fits, revokes from heavily loaded
    /// co-ops, replaces less popular copies to make room.
    #[serde(rename = "resource-aware")]
    ResourceAware,
    /// No replication: a document moves to the least loaded server and keeps one copy.
    #[serde(rename = "migration")]
    MigrationOnly,
}

impl QuotaMethod {
    pub const ALL: [QuotaMethod; 4] = [
        QuotaMethod::Naive,
        QuotaMethod::DeletionAware,
        QuotaMethod::ResourceAware,
        QuotaMethod::MigrationOnly,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            QuotaMethod::Naive => "naive",
            QuotaMethod::DeletionAware => "deletion-aware",
            QuotaMethod::ResourceAware => "resource-aware",
            QuotaMethod::MigrationOnly => "migration",
        }
    }
}

impl fmt::Display for QuotaMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A quota method name that is none of the known ones.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown quota method {0:?}; valid names are naive, deletion-aware, resource-aware, migration")]
pub struct UnknownQuotaMethod(pub String);

impl FromStr for QuotaMethod {
    type Err = UnknownQuotaMethod;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        (QuotaMethod::ALL.into_iter())
            .find(|m| m.as_str().eq_ignore_ascii_case(name.trim()))
            .ok_or_else(|| UnknownQuotaMethod(name.into()))
    }
}

/// Balancing settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BalancerConfig {
    pub method: QuotaMethod,
    /// Load threshold: a server is overloaded (the home) or heavily loaded (a co-op) above
    /// (1+theta) x the mean of fresh loads. A co-op is lightly loaded below the mean: a
    /// (1-theta) x mean threshold stalls with many servers, since one overloaded home barely
    /// lifts the mean (at N servers the home could stay at 1+theta(N-1) times it).
    pub theta: f64,
    /// Round length B (ns); the caller runs `round` this often.
    pub period_ns: u64,
    /// Share of recent requests the candidates cover.
    pub coverage: f64,
    pub max_candidates: usize,
    /// Placements (or moves) per round: at least this many ...
    pub max_placements: usize,
    /// ... or this many per co-op with a fresh load, whichever is more (a round can reach
    /// every co-op of a large cluster).
    #[serde(default = "default_placements_per_coop")]
    pub placements_per_coop: usize,
    /// EWMA weight of the previous rate at each round.
    pub rate_alpha: f64,
    /// A peer's load older than this (ns) is unknown: left out of the mean, never a target.
    pub max_age_ns: u64,
    /// Resource-Aware: each co-op's quota Q_s unless set per co-op.
    pub coop_quota: u64,
}

impl Default for BalancerConfig {
    fn default() -> Self {
        BalancerConfig {
            method: QuotaMethod::Naive,
            theta: 0.2,
            period_ns: 5_000_000_000,
            coverage: 0.9,
            max_candidates: 100,
            max_placements: 4,
            placements_per_coop: default_placements_per_coop(),
            rate_alpha: 0.5,
            max_age_ns: 3_000_000_000,
            coop_quota: u64::MAX,
        }
    }
}

fn default_placements_per_coop() -> usize {
    2
}

/// Why balancing settings are refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BalancerConfigError {
    #[error("balancer theta {0} must be within 0..1")]
    Theta(f64),
    #[error("balancer coverage {0} must be within 0..=1")]
    Coverage(f64),
    #[error("balancer rate weight {0} must be within 0..=1")]
    RateAlpha(f64),
    #[error("balancer period must be over 0 ns")]
    Period,
}

impl BalancerConfig {
    /// Checks the ranges.
    pub fn check(&self) -> Result<(), BalancerConfigError> {
        if !(0.0..1.0).contains(&self.theta) {
            return Err(BalancerConfigError::Theta(self.theta));
        }
        if !(0.0..=1.0).contains(&self.coverage) {
            return Err(BalancerConfigError::Coverage(self.coverage));
        }
        if !(0.0..=1.0).contains(&self.rate_alpha) {
            return Err(BalancerConfigError::RateAlpha(self.rate_alpha));
        }
        if self.period_ns == 0 {
            return Err(BalancerConfigError::Period);
        }
        Ok(())
    }
}

/// One decision of a round, already applied to the replica map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `coop` was added to `path`'s set.
    Place { path: Arc<str>, coop: ServerId },
    /// `coop` was removed from `path`'s set (Resource-Aware; the co-op is not told).
    Revoke { path: Arc<str>, coop: ServerId },
    /// `path`'s only copy moved from `from` to `to` (migration only).
    Move { path: Arc<str>, from: ServerId, to: ServerId },
}

/// The loads a round works with: the mean, this home's and each fresh co-op's, updated by the
/// round's own decisions (a placement shifts the document's requests).
#[derive(Debug, Clone)]
pub(crate) struct RoundLoads {
    pub(crate) mean: f64,
    pub(crate) theta: f64,
    pub(crate) home: f64,
    pub(crate) coops: Vec<(ServerId, f64)>,
}

impl RoundLoads {
    fn new(config: &BalancerConfig, home: ServerId, own: f64, table: &LoadTable, now: u64) -> RoundLoads {
        let own = if own.is_finite() && own > 0.0 { own } else { 0.0 };
        let coops = (table.peers())
            .filter(|&s| s != home)
            .filter_map(|s| Some((s, table.fresh_load(s, now, config.max_age_ns)?)))
            .collect();
        let mean = table.mean_fresh(now, config.max_age_ns, home, own);
        RoundLoads { mean, theta: config.theta, home: own, coops }
    }

    pub(crate) fn home_overloaded(&self) -> bool {
        self.home > (1.0 + self.theta) * self.mean
    }

    /// Lightly loaded: below the mean (see `BalancerConfig::theta`).
    pub(crate) fn light(&self, load: f64) -> bool {
        load < self.mean
    }

    pub(crate) fn heavy(&self, load: f64) -> bool {
        load > (1.0 + self.theta) * self.mean
    }

    /// The least loaded lightly loaded co-op for which `allowed` holds (ties: lower id).
    pub(crate) fn least_light(&self, allowed: impl Fn(ServerId) -> bool) -> Option<ServerId> {
        (self.coops.iter())
            .filter(|&&(s, l)| self.light(l) && allowed(s))
            .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)))
            .map(|&(s, _)| s)
    }

    /// Moves `from_home` requests per second off the home and `to_coop` onto `coop`.
    pub(crate) fn shift(&mut self, coop: ServerId, from_home: f64, to_coop: f64) {
        self.home -= from_home;
        if let Some(entry) = self.coops.iter_mut().find(|(id, _)| *id == coop) {
            entry.1 += to_coop;
        }
    }
}

/// A candidate document and the request rate the home sees for it.
pub(crate) type Candidate = (Arc<str>, f64);

/// One home's balancer.
#[derive(Debug, Clone)]
pub struct Balancer {
    home: ServerId,
    config: BalancerConfig,
    rates: RequestRates,
    books: QuotaBooks,
    /// Co-ops that were heavily loaded at the previous round (Resource-Aware revokes only
    /// from a co-op heavy at two rounds in a row).
    heavy_before: BTreeSet<ServerId>,
    last_round: u64,
}

impl Balancer {
    /// The balancer of `home`, whose first window starts at `now` (ns).
    pub fn new(home: ServerId, config: BalancerConfig, now: u64) -> Result<Balancer, BalancerConfigError> {
        config.check()?;
        let rates = RequestRates::new(config.rate_alpha);
        let books = QuotaBooks::new(config.coop_quota);
        Ok(Balancer { home, config, rates, books, heavy_before: BTreeSet::new(), last_round: now })
    }

    pub fn config(&self) -> &BalancerConfig {
        &self.config
    }

    /// Counts a request this home served for its document `path`.
    pub fn record_request(&mut self, path: &str) {
        self.rates.record(path);
    }

    /// The request rates (for status and tests).
    pub fn rates(&self) -> &RequestRates {
        &self.rates
    }

    /// Resource-Aware's books (A_s, Q_s per co-op).
    pub fn books(&self) -> &QuotaBooks {
        &self.books
    }

    /// Sets a co-op's quota Q_s for Resource-Aware.
    pub fn set_coop_quota(&mut self, coop: ServerId, quota: u64) {
        self.books.set_quota(coop, quota);
    }

    /// A co-op reported `free` bytes of replica space: Resource-Aware books its quota as what
    /// this home placed there plus that room, so copies the co-op still keeps after a
    /// revocation (or for other homes) count against the room until they are evicted.
    pub fn note_coop_free(&mut self, coop: ServerId, free: u64) {
        if self.config.method == QuotaMethod::ResourceAware && coop != self.home {
            self.books.set_quota(coop, self.books.used(coop).saturating_add(free));
        }
    }

    /// A co-op evicted its copy of `path`: under Deletion-Aware it leaves the set (true);
    /// other methods ignore notices.
    pub fn on_deletion_notice(&mut self, path: &str, coop: ServerId, map: &mut ReplicaMap) -> bool {
        self.config.method == QuotaMethod::DeletionAware && map.remove(path, coop)
    }

    /// Ends the request window and runs one balancing round at `now` with this home's load
    /// `own_load`; the returned actions are already applied to `map` (this home's). `size`
    /// gives a document's bytes (Resource-Aware skips documents of unknown size).
    pub fn round(
        &mut self,
        now: u64,
        own_load: f64,
        table: &LoadTable,
        map: &mut ReplicaMap,
        size: impl Fn(&str) -> Option<u64>,
    ) -> Vec<Action> {
        let elapsed = now.saturating_sub(self.last_round);
        let elapsed = if elapsed == 0 { self.config.period_ns } else { elapsed };
        self.last_round = now;
        self.rates.end_window(elapsed as f64 / 1e9);
        let mut loads = RoundLoads::new(&self.config, self.home, own_load, table, now);
        let mut candidates = self.rates.candidates(self.config.coverage, self.config.max_candidates);
        let mut actions = Vec::new();
        match self.config.method {
            QuotaMethod::Naive | QuotaMethod::DeletionAware => {
                self.replicate(&mut loads, &mut candidates, map, &mut actions);
            }
            QuotaMethod::MigrationOnly => self.migrate(&mut loads, &candidates, map, &mut actions),
            QuotaMethod::ResourceAware => {
                let max_placements = self.placement_limit(&loads);
                let mut round = crate::resource_aware::ResourceRound {
                    books: &mut self.books,
                    heavy_before: &mut self.heavy_before,
                    rates: &self.rates,
                    map,
                    loads: &mut loads,
                    actions: &mut actions,
                    max_placements,
                };
                round.run(&mut candidates, &size);
            }
        }
        actions
    }

    /// Placements a round may make: `max_placements`, or `placements_per_coop` per co-op with
    /// a fresh load if that is more.
    fn placement_limit(&self, loads: &RoundLoads) -> usize {
        let per_coop = self.config.placements_per_coop.saturating_mul(loads.coops.len());
        self.config.max_placements.max(per_coop)
    }

    /// Naive and Deletion-Aware: while the home is overloaded, add the least loaded lightly
    /// loaded co-op to the candidate with the highest per-copy rate that it does not hold yet.
    fn replicate(
        &self,
        loads: &mut RoundLoads,
        candidates: &mut [Candidate],
        map: &mut ReplicaMap,
        actions: &mut Vec<Action>,
    ) {
        let limit = self.placement_limit(loads);
        while actions.len() < limit && loads.home_overloaded() {
            let pick = order_by_rate(candidates).into_iter().find_map(|i| {
                let path = &candidates[i].0;
                let coop = loads.least_light(|s| !map.servers(path).contains(&s))?;
                Some((i, coop))
            });
            let Some((i, coop)) = pick else { break };
            let (path, rate) = candidates[i].clone();
            let before = map.servers(&path).len() as f64;
            map.add(&path, coop);
            loads.shift(coop, rate / (before + 1.0), rate * before / (before + 1.0));
            candidates[i].1 = rate * before / (before + 1.0);
            actions.push(Action::Place { path, coop });
        }
    }

    /// Migration only: while the home is overloaded, move its most requested document still at
    /// home to the least loaded lightly loaded co-op.
    fn migrate(
        &self,
        loads: &mut RoundLoads,
        candidates: &[Candidate],
        map: &mut ReplicaMap,
        actions: &mut Vec<Action>,
    ) {
        let at_home: Vec<Candidate> =
            candidates.iter().filter(|(p, _)| map.servers(p) == [self.home]).cloned().collect();
        let mut at_home = at_home.into_iter();
        let limit = self.placement_limit(loads);
        while actions.len() < limit && loads.home_overloaded() {
            let Some(to) = loads.least_light(|_| true) else { break };
            let Some((path, rate)) = at_home.next() else { break };
            map.move_to(&path, to);
            loads.shift(to, rate, rate);
            actions.push(Action::Move { path, from: self.home, to });
        }
    }
}

/// Indices of `candidates`, highest rate first (ties: path order).
pub(crate) fn order_by_rate(candidates: &[Candidate]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..candidates.len()).collect();
    order.sort_by(|&a, &b| {
        (candidates[b].1.total_cmp(&candidates[a].1)).then_with(|| candidates[a].0.cmp(&candidates[b].0))
    });
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;
    const H: ServerId = ServerId(0);

    fn table(loads: &[f64], now: u64) -> LoadTable {
        let mut t = LoadTable::new((1..=loads.len()).map(|i| ServerId(i as u16)));
        for (i, &l) in loads.iter().enumerate() {
            t.update(ServerId(i as u16 + 1), l, now);
        }
        t
    }

    fn balancer(method: QuotaMethod) -> Balancer {
        Balancer::new(H, BalancerConfig { method, ..Default::default() }, 0).unwrap()
    }

    fn requests(b: &mut Balancer, counts: &[(&str, u64)]) {
        for &(p, n) in counts {
            (0..n).for_each(|_| b.record_request(p));
        }
    }

    #[test]
    fn naive_places_the_hottest_document_on_the_least_loaded_coop() {
        let mut b = balancer(QuotaMethod::Naive);
        let mut map = ReplicaMap::new(H, 1);
        requests(&mut b, &[("/hot", 400), ("/warm", 100)]);
        let acts = b.round(5 * S, 100.0, &table(&[10.0, 0.0], 5 * S), &mut map, |_| Some(1));
        assert_eq!(acts[0], Action::Place { path: "/hot".into(), coop: ServerId(2) });
        assert!(map.servers("/hot").starts_with(&[H, ServerId(2)]));
        assert!(acts.len() <= 4);
    }

    #[test]
    fn overloaded_home_of_a_large_cluster_still_places_when_coops_sit_just_below_the_mean() {
        // Home 40, 15 co-ops at 10: mean 11.9. Under a (1-theta) x mean rule no co-op would be
        // light (10 > 0.8 x 11.9) and the home would stay at 3.4 x the mean.
        let mut b = balancer(QuotaMethod::Naive);
        let mut map = ReplicaMap::new(H, 1);
        requests(&mut b, &[("/a", 100), ("/b", 100)]);
        let acts = b.round(5 * S, 40.0, &table(&[10.0; 15], 5 * S), &mut map, |_| Some(1));
        assert!(!acts.is_empty());
    }

    #[test]
    fn placements_per_round_scale_with_the_coops() {
        let docs: Vec<String> = (0..40).map(|i| format!("/d{i:02}")).collect();
        let counts: Vec<(&str, u64)> = docs.iter().map(|d| (d.as_str(), 100)).collect();
        for (coops, limit) in [(1, 4), (3, 6), (15, 30)] {
            let mut b = balancer(QuotaMethod::Naive);
            let mut map = ReplicaMap::new(H, 1);
            requests(&mut b, &counts);
            let acts = b.round(5 * S, 10_000.0, &table(&vec![0.0; coops], 5 * S), &mut map, |_| Some(1));
            assert_eq!(acts.len(), limit, "{coops} co-ops");
        }
    }

    #[test]
    fn balanced_home_places_nothing() {
        let mut b = balancer(QuotaMethod::Naive);
        let mut map = ReplicaMap::new(H, 1);
        requests(&mut b, &[("/hot", 400)]);
        let acts = b.round(5 * S, 10.0, &table(&[10.0, 10.0], 5 * S), &mut map, |_| Some(1));
        assert!(acts.is_empty());
    }

    #[test]
    fn stale_coops_are_never_targets() {
        let mut b = balancer(QuotaMethod::Naive);
        let mut map = ReplicaMap::new(H, 1);
        requests(&mut b, &[("/hot", 400)]);
        let acts = b.round(10 * S, 100.0, &table(&[0.0], 0), &mut map, |_| Some(1));
        assert!(acts.is_empty());
    }

    #[test]
    fn deletion_notice_removes_the_coop_only_under_deletion_aware() {
        let mut map = ReplicaMap::new(H, 1);
        map.add("/x", ServerId(1));
        assert!(!balancer(QuotaMethod::Naive).on_deletion_notice("/x", ServerId(1), &mut map));
        assert!(balancer(QuotaMethod::DeletionAware).on_deletion_notice("/x", ServerId(1), &mut map));
        assert_eq!(map.servers("/x"), [H]);
    }

    #[test]
    fn migration_moves_documents_and_keeps_one_copy() {
        let mut b = balancer(QuotaMethod::MigrationOnly);
        let mut map = ReplicaMap::new(H, 1);
        requests(&mut b, &[("/a", 300), ("/b", 200)]);
        let acts = b.round(5 * S, 100.0, &table(&[0.0, 0.0], 5 * S), &mut map, |_| Some(1));
        assert_eq!(acts[0], Action::Move { path: "/a".into(), from: H, to: ServerId(1) });
        assert_eq!(map.servers("/a"), [ServerId(1)]);
        assert!(map.replicated().all(|(_, set)| set.len() == 1));
    }

    #[test]
    fn method_names_parse_display_serde_and_refuse_unknown() {
        for m in QuotaMethod::ALL {
            assert_eq!(m.to_string().parse::<QuotaMethod>(), Ok(m));
            assert_eq!(serde_json::to_string(&m).unwrap(), format!("\"{m}\""));
        }
        let err = "lru".parse::<QuotaMethod>().unwrap_err().to_string();
        assert!(err.contains("resource-aware") && err.contains("migration"), "{err}");
    }

    #[test]
    fn config_check_refuses_out_of_range_settings() {
        let bad = BalancerConfig { theta: 1.0, ..Default::default() };
        assert_eq!(Balancer::new(H, bad, 0).unwrap_err(), BalancerConfigError::Theta(1.0));
        let bad = BalancerConfig { coverage: f64::NAN, ..Default::default() };
        assert!(bad.check().is_err());
        assert!(BalancerConfig::default().check().is_ok());
    }
}
