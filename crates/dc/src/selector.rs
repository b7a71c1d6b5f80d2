//! Replica selection for one emitted link: `Selector` picks a lightly loaded server of the
//! target's set — one not overloaded (load <= (1+theta) x the mean of fresh loads) if any is —
//! either weighted random with P(s) proportional to 1/(1+L_s) from a seeded RNG, or the least
//! loaded with a local bump per emitted link that lasts until that server's next load update.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::ServerId;
use crate::load_table::LoadTable;

/// How a link's server is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SelectionRule {
    /// Random, P(s) proportional to 1/(1+L_s).
    Weighted,
    /// The lowest load plus local bumps; ties go to the earlier server of the set.
    LeastLoaded,
}

impl SelectionRule {
    pub const ALL: [SelectionRule; 2] = [SelectionRule::Weighted, SelectionRule::LeastLoaded];

    pub const fn as_str(self) -> &'static str {
        match self {
            SelectionRule::Weighted => "weighted",
            SelectionRule::LeastLoaded => "least-loaded",
        }
    }
}

impl fmt::Display for SelectionRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A selection rule name that is none of the known ones.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown replica selection rule {0:?}; valid names are weighted, least-loaded")]
pub struct UnknownSelectionRule(pub String);

impl FromStr for SelectionRule {
    type Err = UnknownSelectionRule;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        (SelectionRule::ALL.into_iter())
            .find(|r| r.as_str().eq_ignore_ascii_case(name.trim()))
            .ok_or_else(|| UnknownSelectionRule(name.into()))
    }
}

/// Selector settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SelectorConfig {
    pub rule: SelectionRule,
    /// A peer's load older than this (ns) is unknown and counts as the mean of fresh loads.
    pub max_age_ns: u64,
    /// Least-loaded: connections per second added to a server's estimate per emitted link
    /// (1/T_sample with 1-s ticks).
    pub bump: f64,
    /// A server whose load is above (1+theta) x the mean of fresh loads (this server's
    /// included) is overloaded and only chosen when every server of the set is; the
    /// balancer's threshold.
    #[serde(default = "default_theta")]
    pub theta: f64,
}

fn default_theta() -> f64 {
    crate::balancer::BalancerConfig::default().theta
}

impl Default for SelectorConfig {
    fn default() -> Self {
        SelectorConfig {
            rule: SelectionRule::Weighted,
            max_age_ns: 2_000_000_000,
            bump: 1.0,
            theta: default_theta(),
        }
    }
}

/// A local bump and the load report it sits on (received_at for peers, the load's bits for
/// this server): a newer report clears it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Bump {
    amount: f64,
    basis: u64,
}

/// Chooses servers for links; deterministic for a seed and a sequence of calls.
#[derive(Debug, Clone)]
pub struct Selector {
    config: SelectorConfig,
    rng: SmallRng,
    bumps: BTreeMap<ServerId, Bump>,
    /// Per server of the current set: its estimate and whether it may be chosen.
    loads: Vec<f64>,
    eligible: Vec<bool>,
}

impl Selector {
    pub fn new(config: SelectorConfig, seed: u64) -> Selector {
        Selector {
            config,
            rng: SmallRng::seed_from_u64(seed),
            bumps: BTreeMap::new(),
            loads: Vec::new(),
            eligible: Vec::new(),
        }
    }

    pub fn config(&self) -> &SelectorConfig {
        &self.config
    }

    /// One server of `servers` for a link, by the configured rule among the servers that are
    /// not overloaded (among all if every one is); `None` for an empty set. `self_id`'s load is
    /// `self_load`; a peer without a fresh load counts as the mean of the fresh ones.
    pub fn choose(
        &mut self,
        servers: &[ServerId],
        table: &LoadTable,
        self_id: ServerId,
        self_load: f64,
        now: u64,
    ) -> Option<ServerId> {
        match servers {
            [] => None,
            [only] => {
                self.note_emitted(*only, table, self_id, self_load);
                Some(*only)
            }
            _ => {
                self.estimate(servers, table, self_id, self_load, now);
                let index = match self.config.rule {
                    SelectionRule::Weighted => self.weighted_index(),
                    SelectionRule::LeastLoaded => least_index(&self.loads, &self.eligible),
                };
                let chosen = servers[index];
                self.note_emitted(chosen, table, self_id, self_load);
                Some(chosen)
            }
        }
    }

    /// Fills `self.loads` with each server's estimate (load, plus bumps under least-loaded) and
    /// `self.eligible` with whether it is not overloaded (every server if all are).
    fn estimate(&mut self, servers: &[ServerId], table: &LoadTable, self_id: ServerId, own: f64, now: u64) {
        let max_age = self.config.max_age_ns;
        let own = if own.is_finite() && own > 0.0 { own } else { 0.0 };
        let mean = table.mean_fresh(now, max_age, self_id, own);
        let limit = (1.0 + self.config.theta) * mean;
        self.loads.clear();
        self.eligible.clear();
        for &s in servers {
            let load = if s == self_id { own } else { table.fresh_load(s, now, max_age).unwrap_or(mean) };
            let load = if load.is_finite() && load > 0.0 { load } else { 0.0 };
            let bump = match self.config.rule {
                SelectionRule::LeastLoaded => self.current_bump(s, table, self_id, own),
                SelectionRule::Weighted => 0.0,
            };
            self.loads.push(load + bump);
            self.eligible.push(load <= limit);
        }
        if !self.eligible.contains(&true) {
            self.eligible.fill(true);
        }
    }

    fn basis(s: ServerId, table: &LoadTable, self_id: ServerId, own: f64) -> u64 {
        if s == self_id { own.to_bits() } else { table.get(s).map_or(u64::MAX, |e| e.received_at) }
    }

    fn current_bump(&self, s: ServerId, table: &LoadTable, self_id: ServerId, own: f64) -> f64 {
        let basis = Self::basis(s, table, self_id, own);
        self.bumps.get(&s).filter(|b| b.basis == basis).map_or(0.0, |b| b.amount)
    }

    fn note_emitted(&mut self, s: ServerId, table: &LoadTable, self_id: ServerId, own: f64) {
        if self.config.rule != SelectionRule::LeastLoaded {
            return;
        }
        let amount = self.current_bump(s, table, self_id, own) + self.config.bump;
        self.bumps.insert(s, Bump { amount, basis: Self::basis(s, table, self_id, own) });
    }

    /// Weighted random among the eligible servers; one draw per call whatever the set.
    fn weighted_index(&mut self) -> usize {
        let weight = |i: usize, loads: &[f64], eligible: &[bool]| match eligible[i] {
            true => 1.0 / (1.0 + loads[i]),
            false => 0.0,
        };
        let n = self.loads.len();
        let total: f64 = (0..n).map(|i| weight(i, &self.loads, &self.eligible)).sum();
        let mut point = self.rng.random::<f64>() * total;
        let mut last = 0;
        for i in (0..n).filter(|&i| self.eligible[i]) {
            point -= weight(i, &self.loads, &self.eligible);
            last = i;
            if point < 0.0 {
                return i;
            }
        }
        last
    }
}

/// The eligible server with the lowest estimate (ties: the earlier one); `eligible` has at
/// least one true entry.
fn least_index(loads: &[f64], eligible: &[bool]) -> usize {
    let mut best: Option<usize> = None;
    for i in (0..loads.len()).filter(|&i| eligible[i]) {
        if best.is_none_or(|b| loads[i] < loads[b]) {
            best = Some(i);
        }
    }
    best.unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn table(loads: &[(u16, f64)]) -> LoadTable {
        let mut t = LoadTable::new(loads.iter().map(|&(id, _)| ServerId(id)));
        for &(id, l) in loads {
            t.update(ServerId(id), l, 10 * S);
        }
        t
    }

    fn counts(sel: &mut Selector, set: &[ServerId], t: &LoadTable, own: f64, n: usize) -> Vec<usize> {
        let mut c = vec![0; set.len()];
        for _ in 0..n {
            let s = sel.choose(set, t, ServerId(0), own, 10 * S).unwrap();
            c[set.iter().position(|&x| x == s).unwrap()] += 1;
        }
        c
    }

    #[test]
    fn weighted_choice_is_proportional_to_inverse_one_plus_load() {
        let t = table(&[(1, 3.0)]);
        let set = [ServerId(0), ServerId(1)];
        // theta 0.9: neither load is above 1.9 x the mean 2, so both may be chosen.
        let mut sel = Selector::new(SelectorConfig { theta: 0.9, ..Default::default() }, 7);
        // Weights 1/(1+1) = 0.5 and 1/(1+3) = 0.25: server 0 twice as likely.
        let c = counts(&mut sel, &set, &t, 1.0, 30_000);
        let ratio = c[0] as f64 / c[1] as f64;
        assert!((1.8..2.2).contains(&ratio), "{c:?}");
    }

    #[test]
    fn weighted_choice_is_deterministic_for_a_seed() {
        let t = table(&[(1, 3.0), (2, 0.0)]);
        let set = [ServerId(0), ServerId(1), ServerId(2)];
        let run = |seed| counts(&mut Selector::new(SelectorConfig::default(), seed), &set, &t, 1.0, 200);
        assert_eq!(run(5), run(5));
        let seq = |seed| {
            let mut sel = Selector::new(SelectorConfig::default(), seed);
            (0..50).map(|_| sel.choose(&set, &t, ServerId(0), 1.0, 10 * S)).collect::<Vec<_>>()
        };
        assert_eq!(seq(9), seq(9));
        assert_ne!(seq(9), seq(10));
    }

    #[test]
    fn overloaded_server_is_never_chosen_when_another_of_the_set_is_not() {
        // Own 10, peers 90, 20, 0: mean 30, limit 1.2 x 30 = 36; server 1 is overloaded.
        let t = table(&[(1, 90.0), (2, 20.0), (3, 0.0)]);
        let set = [ServerId(1), ServerId(2)];
        for rule in SelectionRule::ALL {
            let mut sel = Selector::new(SelectorConfig { rule, bump: 0.0, ..Default::default() }, 3);
            assert_eq!(counts(&mut sel, &set, &t, 10.0, 2000), [0, 2000], "{rule}");
        }
        // This server itself overloaded: a loaded home sends its links elsewhere.
        let set = [ServerId(0), ServerId(2)];
        let mut sel = Selector::new(SelectorConfig::default(), 3);
        assert_eq!(counts(&mut sel, &set, &t, 60.0, 2000), [0, 2000]);
    }

    #[test]
    fn when_every_server_of_the_set_is_overloaded_all_of_them_are_candidates() {
        // Own 0, peers 10, 10, 0: mean 5, limit 6; servers 1 and 2 both overloaded.
        let t = table(&[(1, 10.0), (2, 10.0), (3, 0.0)]);
        let set = [ServerId(1), ServerId(2)];
        let mut sel = Selector::new(SelectorConfig::default(), 4);
        let c = counts(&mut sel, &set, &t, 0.0, 4000);
        assert!(c[0] > 1500 && c[1] > 1500, "{c:?}");
    }

    #[test]
    fn selector_theta_defaults_to_the_balancers() {
        assert_eq!(SelectorConfig::default().theta, crate::balancer::BalancerConfig::default().theta);
        let old: SelectorConfig =
            serde_json::from_str(r#"{"rule":"weighted","max_age_ns":1,"bump":1.0}"#).unwrap();
        assert_eq!(old.theta, SelectorConfig::default().theta);
    }

    fn overloaded(load: f64, loads: &[f64], own: f64, theta: f64) -> bool {
        let mean = (own + loads.iter().sum::<f64>()) / (loads.len() + 1) as f64;
        load > (1.0 + theta) * mean
    }

    proptest::proptest! {
        #[test]
        fn never_overloaded_when_another_qualifies_and_deterministic_per_seed(
            loads in proptest::collection::vec(0.0f64..200.0, 1..8),
            own in 0.0f64..200.0,
            members in proptest::collection::vec(0usize..9, 1..6),
            least in proptest::bool::ANY,
            seed in 0u64..1000,
        ) {
            let ids: Vec<(u16, f64)> = loads.iter().enumerate().map(|(i, &l)| (i as u16 + 1, l)).collect();
            let t = table(&ids);
            let mut set: Vec<ServerId> = members.iter().map(|&m| ServerId((m % (loads.len() + 1)) as u16)).collect();
            set.dedup();
            let load_of = |s: ServerId| if s.0 == 0 { own } else { loads[s.0 as usize - 1] };
            let rule = if least { SelectionRule::LeastLoaded } else { SelectionRule::Weighted };
            let config = SelectorConfig { rule, ..Default::default() };
            let any_ok = set.iter().any(|&s| !overloaded(load_of(s), &loads, own, config.theta));
            let run = |seed| {
                let mut sel = Selector::new(config, seed);
                (0..40).map(|_| sel.choose(&set, &t, ServerId(0), own, 10 * S).unwrap()).collect::<Vec<_>>()
            };
            let picks = run(seed);
            for &p in &picks {
                proptest::prop_assert!(set.contains(&p));
                proptest::prop_assert!(!(any_ok && overloaded(load_of(p), &loads, own, config.theta)),
                    "chose overloaded {p:?} from {set:?}");
            }
            proptest::prop_assert_eq!(picks, run(seed));
        }
    }

    #[test]
    fn stale_peer_counts_as_the_mean_of_fresh_loads() {
        let mut t = table(&[(1, 9.0)]);
        t.update(ServerId(2), 0.0, 0); // stale at 10 s: counts as mean(1, 9) = 5
        let set = [ServerId(2), ServerId(0)];
        let config = SelectorConfig { rule: SelectionRule::LeastLoaded, bump: 0.0, ..Default::default() };
        let mut sel = Selector::new(config, 1);
        assert_eq!(sel.choose(&set, &t, ServerId(0), 1.0, 10 * S), Some(ServerId(0)));
        // Own 11: the stale peer counts as mean(11, 9) = 10.
        assert_eq!(sel.choose(&set, &t, ServerId(0), 11.0, 10 * S), Some(ServerId(2)));
    }

    #[test]
    fn least_loaded_bumps_spread_links_until_the_next_load_update() {
        let mut t = table(&[(1, 0.0), (2, 0.0)]);
        let set = [ServerId(1), ServerId(2)];
        let config = SelectorConfig { rule: SelectionRule::LeastLoaded, bump: 1.0, ..Default::default() };
        let mut sel = Selector::new(config, 1);
        let picks: Vec<_> = (0..4).map(|_| sel.choose(&set, &t, ServerId(0), 5.0, 10 * S).unwrap()).collect();
        assert_eq!(picks, [ServerId(1), ServerId(2), ServerId(1), ServerId(2)]);
        // A new report from server 2 clears its bump (2.0) but not server 1's.
        t.update(ServerId(2), 0.5, 11 * S);
        assert_eq!(sel.choose(&set, &t, ServerId(0), 5.0, 11 * S), Some(ServerId(2)));
        assert_eq!(sel.choose(&set, &t, ServerId(0), 5.0, 11 * S), Some(ServerId(2)));
        assert_eq!(sel.choose(&set, &t, ServerId(0), 5.0, 11 * S), Some(ServerId(1)));
    }

    #[test]
    fn empty_set_gives_none_and_single_set_its_server() {
        let t = LoadTable::default();
        let mut sel = Selector::new(SelectorConfig::default(), 1);
        assert_eq!(sel.choose(&[], &t, ServerId(0), 0.0, 0), None);
        assert_eq!(sel.choose(&[ServerId(3)], &t, ServerId(0), 0.0, 0), Some(ServerId(3)));
    }

    #[test]
    fn rule_names_parse_display_and_refuse_unknown() {
        for r in SelectionRule::ALL {
            assert_eq!(r.to_string().parse::<SelectionRule>(), Ok(r));
        }
        let err = "fastest".parse::<SelectionRule>().unwrap_err().to_string();
        assert!(err.contains("weighted") && err.contains("least-loaded"), "{err}");
    }
}
