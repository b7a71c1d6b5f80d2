//! Property tests of the cluster side: balancing rounds under every quota method keep their
//! promises (Resource-Aware books within quota and matching the map, Deletion-Aware honours
//! notices, the home stays in every replicated set, migration keeps one copy), and replica map
//! batches delivered lost, duplicated or out of order still converge.

use locus_dc::ServerId;
use locus_dc::balancer::{Action, Balancer, BalancerConfig, QuotaMethod};
use locus_dc::load_table::LoadTable;
use locus_dc::replica_map::{MapChanges, ReplicaMap};
use proptest::prelude::*;

const S: u64 = 1_000_000_000;
const HOME: ServerId = ServerId(0);
const COOPS: [ServerId; 3] = [ServerId(1), ServerId(2), ServerId(3)];
const DOCS: [&str; 8] = ["/0", "/1", "/2", "/3", "/4", "/5", "/6", "/7"];

#[derive(Debug, Clone)]
enum Op {
    Requests { doc: usize, count: u64 },
    Round { own: f64, coops: [f64; 3], seconds: u64 },
    Notice { doc: usize, coop: usize },
    Quota { coop: usize, quota: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..DOCS.len(), 0..300u64).prop_map(|(doc, count)| Op::Requests { doc, count }),
        2 => (0.0..300.0f64, [0.0..300.0f64, 0.0..300.0, 0.0..300.0], 1..10u64)
            .prop_map(|(own, coops, seconds)| Op::Round { own, coops, seconds }),
        1 => (0..DOCS.len(), 0..COOPS.len()).prop_map(|(doc, coop)| Op::Notice { doc, coop }),
        1 => (0..COOPS.len(), 0..600u64).prop_map(|(coop, quota)| Op::Quota { coop, quota }),
    ]
}

fn method() -> impl Strategy<Value = QuotaMethod> {
    prop::sample::select(QuotaMethod::ALL.to_vec())
}

/// Checks the invariants every method keeps after any operation.
fn check_sets(method: QuotaMethod, map: &ReplicaMap) -> Result<(), TestCaseError> {
    for doc in DOCS {
        let set = map.servers(doc);
        let mut sorted = set.to_vec();
        sorted.sort();
        sorted.dedup();
        prop_assert_eq!(sorted.len(), set.len(), "duplicate server in {}: {:?}", doc, set);
        if method == QuotaMethod::MigrationOnly {
            prop_assert_eq!(set.len(), 1, "migrated {} has {:?}", doc, set);
        } else {
            prop_assert_eq!(set[0], HOME, "home missing from {}: {:?}", doc, set);
        }
    }
    Ok(())
}

fn check_books(balancer: &Balancer, map: &ReplicaMap, sizes: &[u64]) -> Result<(), TestCaseError> {
    for coop in COOPS {
        let books = balancer.books();
        prop_assert!(
            books.used(coop) <= books.quota(coop),
            "{:?}: A {} > Q {}",
            coop,
            books.used(coop),
            books.quota(coop)
        );
        let mut booked = 0;
        for (i, doc) in DOCS.iter().enumerate() {
            let on_map = map.servers(doc).contains(&coop);
            prop_assert_eq!(
                books.contains(coop, doc),
                on_map,
                "books and map differ on {} at {:?}",
                doc,
                coop
            );
            booked += if on_map { sizes[i] } else { 0 };
        }
        prop_assert_eq!(booked, books.used(coop));
    }
    Ok(())
}

proptest! {
    #[test]
    fn balancing_rounds_keep_every_method_invariant(
        method in method(),
        quota in 0..600u64,
        sizes in prop::collection::vec(1..250u64, DOCS.len()),
        ops in prop::collection::vec(op(), 1..60),
    ) {
        let config = BalancerConfig { method, coop_quota: quota, ..Default::default() };
        let mut balancer = Balancer::new(HOME, config, 0).unwrap();
        let mut map = ReplicaMap::new(HOME, 1);
        let mut table = LoadTable::new(COOPS);
        let mut now = 0;
        let size_of = |path: &str| DOCS.iter().position(|d| *d == path).map(|i| sizes[i]);
        for op in ops {
            match op {
                Op::Requests { doc, count } => (0..count).for_each(|_| balancer.record_request(DOCS[doc])),
                Op::Round { own, coops, seconds } => {
                    now += seconds * S;
                    for (coop, load) in COOPS.iter().zip(coops) {
                        table.update(*coop, load, now);
                    }
                    let actions = balancer.round(now, own, &table, &mut map, size_of);
                    let placed = actions.iter().filter(|a| !matches!(a, Action::Revoke { .. })).count();
                    let limit = config.max_placements.max(config.placements_per_coop * COOPS.len());
                    prop_assert!(placed <= limit, "{} placements in one round (limit {})", placed, limit);
                    if method == QuotaMethod::ResourceAware {
                        check_books(&balancer, &map, &sizes)?;
                    }
                }
                Op::Notice { doc, coop } => {
                    let acted = balancer.on_deletion_notice(DOCS[doc], COOPS[coop], &mut map);
                    if method == QuotaMethod::DeletionAware {
                        prop_assert!(!map.servers(DOCS[doc]).contains(&COOPS[coop]));
                    } else {
                        prop_assert!(!acted);
                    }
                }
                Op::Quota { coop, quota } => balancer.set_coop_quota(COOPS[coop], quota),
            }
            check_sets(method, &map)?;
        }
    }

    #[test]
    fn map_batches_lost_duplicated_or_reordered_converge_after_catch_up(
        edits in prop::collection::vec((0..DOCS.len(), 0..COOPS.len(), any::<bool>()), 1..40),
        deliveries in prop::collection::vec((any::<prop::sample::Index>(), any::<bool>()), 0..40),
    ) {
        let mut home = ReplicaMap::new(HOME, 7);
        let mut peer = ReplicaMap::new(HOME, 0);
        let mut sent: Vec<MapChanges> = Vec::new();
        let mut last = 0;
        for (doc, coop, add) in edits {
            if add { home.add(DOCS[doc], COOPS[coop]); } else { home.remove(DOCS[doc], COOPS[coop]); }
            let batch = home.changes_since(last);
            last = batch.upto;
            sent.push(batch);
        }
        for (index, twice) in deliveries {
            let batch = index.get(&sent);
            peer.apply(batch);
            if twice {
                peer.apply(batch);
            }
        }
        peer.apply(&home.changes_since(peer.seq()));
        for doc in DOCS {
            prop_assert_eq!(peer.servers(doc), home.servers(doc), "{} differs", doc);
        }
        prop_assert_eq!(peer.seq(), home.seq());
    }
}
