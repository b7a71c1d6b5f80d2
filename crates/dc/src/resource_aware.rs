//! One Resource-Aware balancing round: revoke until every co-op's books fit its quota, revoke
//! the most popular copy from each co-op heavily loaded at two rounds in a row, then place
//! the most popular candidates on lightly loaded co-ops where they fit, replacing less
//! popular copies to make room.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::ServerId;
use crate::balancer::{Action, Candidate, RoundLoads, order_by_rate};
use crate::quota_books::QuotaBooks;
use crate::replica_map::ReplicaMap;
use crate::request_rates::RequestRates;

/// The state one round works on, borrowed from the `Balancer` and the caller.
pub(crate) struct ResourceRound<'a> {
    pub(crate) books: &'a mut QuotaBooks,
    pub(crate) heavy_before: &'a mut BTreeSet<ServerId>,
    pub(crate) rates: &'a RequestRates,
    pub(crate) map: &'a mut ReplicaMap,
    pub(crate) loads: &'a mut RoundLoads,
    pub(crate) actions: &'a mut Vec<Action>,
    pub(crate) max_placements: usize,
}

/// A placement chosen for a co-op: the candidate's index and the copies to revoke first.
struct Choice {
    index: usize,
    victims: Vec<Arc<str>>,
}

impl ResourceRound<'_> {
    pub(crate) fn run(&mut self, candidates: &mut [Candidate], size: &impl Fn(&str) -> Option<u64>) {
        self.enforce_quotas();
        self.revoke_from_heavy();
        self.place(candidates, size);
    }

    /// The documents booked on `coop` with their rates, least popular first (ties: path).
    fn by_popularity(&self, coop: ServerId) -> Vec<(Arc<str>, f64, u64)> {
        let mut docs: Vec<_> =
            self.books.docs(coop).map(|(p, s)| (p.clone(), self.rates.rate(p), s)).collect();
        docs.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        docs
    }

    fn revoke(&mut self, coop: ServerId, path: Arc<str>) {
        let before = self.map.servers(&path).len() as f64;
        self.map.remove(&path, coop);
        self.books.unbook(coop, &path);
        let rate = self.rates.rate(&path);
        let to_home = if before > 1.0 { rate / (before - 1.0) } else { rate };
        self.loads.shift(coop, -to_home, -rate);
        self.actions.push(Action::Revoke { path, coop });
    }

    /// A co-op whose quota was lowered below its bookings loses its least popular copies.
    fn enforce_quotas(&mut self) {
        let coops: Vec<ServerId> = self.books.coops().collect();
        for coop in coops {
            let mut docs = self.by_popularity(coop).into_iter();
            while self.books.used(coop) > self.books.quota(coop) {
                let Some((path, _, _)) = docs.next() else { break };
                self.revoke(coop, path);
            }
        }
    }

    /// Each co-op heavily loaded at this round and the previous one loses its most popular
    /// copy of this home's documents. One heavy sample is not enough: a co-op's smoothed load
    /// swings from round to round when many links name it at once, and revoking on every
    /// swing sheds copies that the next round must place again.
    fn revoke_from_heavy(&mut self) {
        let heavy: BTreeSet<ServerId> =
            (self.loads.coops.iter()).filter(|&&(_, l)| self.loads.heavy(l)).map(|&(s, _)| s).collect();
        let coops: Vec<ServerId> =
            self.books.coops().filter(|c| heavy.contains(c) && self.heavy_before.contains(c)).collect();
        for coop in coops {
            if let Some((path, _, _)) = self.by_popularity(coop).pop() {
                self.revoke(coop, path);
            }
        }
        *self.heavy_before = heavy;
    }

    /// While the home is overloaded: the least loaded lightly loaded co-op gets the most
    /// popular candidate it can take (by room or by replacement); a co-op that can take none
    /// is skipped for the rest of the round.
    fn place(&mut self, candidates: &mut [Candidate], size: &impl Fn(&str) -> Option<u64>) {
        let mut exhausted = BTreeSet::new();
        let mut placements = 0;
        while placements < self.max_placements && self.loads.home_overloaded() {
            let Some(coop) = self.loads.least_light(|s| !exhausted.contains(&s)) else { break };
            let Some(choice) = self.choose(coop, candidates, size) else {
                exhausted.insert(coop);
                continue;
            };
            for victim in choice.victims {
                self.revoke(coop, victim);
            }
            let (path, rate) = candidates[choice.index].clone();
            let bytes = size(&path).unwrap_or(0);
            if !self.books.book(coop, path.clone(), bytes) {
                exhausted.insert(coop);
                continue;
            }
            let before = self.map.servers(&path).len() as f64;
            self.map.add(&path, coop);
            let share = rate * before / (before + 1.0);
            self.loads.shift(coop, rate / (before + 1.0), share);
            candidates[choice.index].1 = share;
            self.actions.push(Action::Place { path, coop });
            placements += 1;
        }
    }

    /// The most popular candidate `coop` does not hold whose size is known and fits: in the
    /// free room, or after revoking less popular copies (least popular first).
    fn choose(
        &self,
        coop: ServerId,
        candidates: &[Candidate],
        size: &impl Fn(&str) -> Option<u64>,
    ) -> Option<Choice> {
        for index in order_by_rate(candidates) {
            let (path, rate) = &candidates[index];
            let Some(bytes) = size(path) else { continue };
            if self.map.servers(path).contains(&coop) || bytes > self.books.quota(coop) {
                continue;
            }
            let mut room = self.books.room(coop);
            let mut victims = Vec::new();
            for (victim, victim_rate, victim_bytes) in self.by_popularity(coop) {
                if room >= bytes || victim_rate >= *rate {
                    break;
                }
                room += victim_bytes;
                victims.push(victim);
            }
            if room >= bytes {
                return Some(Choice { index, victims });
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use crate::ServerId;
    use crate::balancer::{Action, Balancer, BalancerConfig, QuotaMethod};
    use crate::load_table::LoadTable;
    use crate::replica_map::ReplicaMap;

    const S: u64 = 1_000_000_000;
    const H: ServerId = ServerId(0);
    const C: ServerId = ServerId(1);

    fn setup(quota: u64) -> (Balancer, ReplicaMap) {
        let config =
            BalancerConfig { method: QuotaMethod::ResourceAware, coop_quota: quota, ..Default::default() };
        (Balancer::new(H, config, 0).unwrap(), ReplicaMap::new(H, 1))
    }

    fn one_coop(load: f64, now: u64) -> LoadTable {
        let mut t = LoadTable::new([C]);
        t.update(C, load, now);
        t
    }

    fn requests(b: &mut Balancer, counts: &[(&str, u64)]) {
        for &(p, n) in counts {
            (0..n).for_each(|_| b.record_request(p));
        }
    }

    #[test]
    fn places_only_what_fits_the_coop_quota() {
        let (mut b, mut map) = setup(100);
        requests(&mut b, &[("/big", 500), ("/a", 300), ("/b", 200)]);
        let acts = b.round(5 * S, 100.0, &one_coop(0.0, 5 * S), &mut map, |p| {
            Some(if p == "/big" { 150 } else { 60 })
        });
        assert_eq!(acts, [Action::Place { path: "/a".into(), coop: C }]);
        assert_eq!(b.books().used(C), 60);
    }

    #[test]
    fn replacement_revokes_less_popular_copies_to_make_room() {
        let (mut b, mut map) = setup(100);
        requests(&mut b, &[("/cold", 100)]);
        b.round(5 * S, 100.0, &one_coop(0.0, 5 * S), &mut map, |_| Some(80));
        assert_eq!(map.servers("/cold"), [H, C]);
        requests(&mut b, &[("/hot", 2000)]);
        let acts = b.round(10 * S, 100.0, &one_coop(0.0, 10 * S), &mut map, |_| Some(80));
        assert_eq!(
            acts,
            [
                Action::Revoke { path: "/cold".into(), coop: C },
                Action::Place { path: "/hot".into(), coop: C }
            ]
        );
        assert_eq!(b.books().used(C), 80);
    }

    #[test]
    fn coop_heavily_loaded_at_two_rounds_in_a_row_loses_its_most_popular_copy() {
        let (mut b, mut map) = setup(1000);
        requests(&mut b, &[("/a", 300), ("/b", 200)]);
        b.round(5 * S, 100.0, &one_coop(0.0, 5 * S), &mut map, |_| Some(10));
        assert_eq!(map.servers("/a"), [H, C]);
        assert_eq!(map.servers("/b"), [H, C]);
        requests(&mut b, &[("/a", 300), ("/b", 200)]);
        let acts = b.round(10 * S, 10.0, &one_coop(100.0, 10 * S), &mut map, |_| Some(10));
        assert_eq!(acts, [], "one heavy round is a swing, not an overload");
        requests(&mut b, &[("/a", 300), ("/b", 200)]);
        let acts = b.round(15 * S, 10.0, &one_coop(100.0, 15 * S), &mut map, |_| Some(10));
        assert_eq!(acts, [Action::Revoke { path: "/a".into(), coop: C }]);
        assert_eq!(map.servers("/a"), [H]);
    }

    #[test]
    fn coop_heavy_then_light_then_heavy_keeps_its_copies() {
        let (mut b, mut map) = setup(1000);
        requests(&mut b, &[("/a", 300)]);
        b.round(5 * S, 100.0, &one_coop(0.0, 5 * S), &mut map, |_| Some(10));
        for (round, load) in [(2, 100.0), (3, 5.0), (4, 100.0)] {
            let acts = b.round(round * 5 * S, 10.0, &one_coop(load, round * 5 * S), &mut map, |_| Some(10));
            assert!(!acts.iter().any(|a| matches!(a, Action::Revoke { .. })), "round {round}: {acts:?}");
        }
        assert_eq!(map.servers("/a"), [H, C]);
    }

    #[test]
    fn reported_free_room_bounds_the_next_placements() {
        let (mut b, mut map) = setup(u64::MAX);
        requests(&mut b, &[("/a", 300), ("/b", 200), ("/c", 100)]);
        b.note_coop_free(C, 150);
        let acts = b.round(5 * S, 100.0, &one_coop(0.0, 5 * S), &mut map, |_| Some(100));
        assert_eq!(acts, [Action::Place { path: "/a".into(), coop: C }]);
        assert_eq!((b.books().used(C), b.books().quota(C)), (100, 150));
        b.note_coop_free(C, 0);
        assert_eq!(b.books().quota(C), 100, "booked copies keep their room");
    }

    #[test]
    fn other_methods_ignore_reported_free_room() {
        let config = BalancerConfig { method: QuotaMethod::DeletionAware, ..Default::default() };
        let mut b = Balancer::new(H, config, 0).unwrap();
        b.note_coop_free(C, 10);
        assert_eq!(b.books().quota(C), u64::MAX);
    }

    #[test]
    fn lowered_quota_revokes_until_the_books_fit() {
        let (mut b, mut map) = setup(1000);
        requests(&mut b, &[("/a", 300), ("/b", 200)]);
        b.round(5 * S, 100.0, &one_coop(0.0, 5 * S), &mut map, |_| Some(100));
        assert_eq!(b.books().used(C), 200);
        b.set_coop_quota(C, 150);
        let acts = b.round(10 * S, 10.0, &one_coop(10.0, 10 * S), &mut map, |_| Some(100));
        assert_eq!(acts, [Action::Revoke { path: "/b".into(), coop: C }]);
        assert_eq!(b.books().used(C), 100);
    }
}
