//! Replica maps: `DocKey` names a document (its home and site path); a `ReplicaMap` is one
//! home's doc -> server set with sequence numbers, so the home ships `changes_since` and peers
//! `apply` them idempotently; `ClusterMaps` holds every home's map on each server, since any
//! server rewriting a page must know the sets of all the documents it links to.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::ServerId;

/// A document: its home server and its normalised absolute site path (`/a/b.gif`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DocKey {
    pub home: ServerId,
    pub path: Arc<str>,
}

impl DocKey {
    pub fn new(home: ServerId, path: &str) -> DocKey {
        DocKey { home, path: path.into() }
    }
}

/// A path's server set and the map sequence number at which it was last set.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SetEntry {
    servers: Vec<ServerId>,
    seq: u64,
}

/// One home's replica map. A path's set holds the home first, then co-ops in placement order;
/// a path not listed is at the home only. The one exception is `move_to` (migration without
/// replication), which leaves a single server that may be a co-op.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaMap {
    home: ServerId,
    /// Set by the home (e.g. its start time): a peer seeing a newer epoch drops its old copy.
    epoch: u64,
    /// Sequence number of the last change (home) or the last change applied in order (peer).
    seq: u64,
    sets: HashMap<Arc<str>, SetEntry>,
    home_only: [ServerId; 1],
}

/// A batch of a home's map changes: every path set after sequence number `since`, each with its
/// full server set (an empty tail means home only), up to `upto`. Sent as a datagram or
/// piggybacked; serialisable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapChanges {
    pub home: ServerId,
    pub epoch: u64,
    pub since: u64,
    pub upto: u64,
    pub sets: Vec<MapSet>,
}

/// One path's full server set in a `MapChanges`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapSet {
    pub path: String,
    pub servers: Vec<ServerId>,
    pub seq: u64,
}

/// What `ReplicaMap::apply` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApplyOutcome {
    /// Changes applied; the map is now up to the batch's `upto`.
    Applied,
    /// Nothing new (older epoch, another home, or already seen).
    Stale,
    /// The batch starts after what this map has seen: its sets were applied, but the map stays
    /// at `have`, so the next `changes_since(have)` from the home fills the gap.
    Gap { have: u64 },
}

/// Sizes for a status page.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapSummary {
    /// Documents with more than one server (or moved away from their home).
    pub replicated_docs: u64,
    /// Copies outside the home, over all documents.
    pub placed_copies: u64,
    /// Bytes of those copies (documents of unknown size count 0).
    pub placed_bytes: u64,
}

impl ReplicaMap {
    /// An empty map of `home` at `epoch`.
    pub fn new(home: ServerId, epoch: u64) -> ReplicaMap {
        ReplicaMap { home, epoch, seq: 0, sets: HashMap::new(), home_only: [home] }
    }

    pub fn home(&self) -> ServerId {
        self.home
    }

    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The last sequence number (to ask the home for `changes_since` it).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The servers holding `path`, home first (the home alone if never placed).
    pub fn servers(&self, path: &str) -> &[ServerId] {
        self.sets.get(path).map_or(&self.home_only[..], |e| &e.servers[..])
    }

    /// Adds `server` to `path`'s set; false if it is already there.
    pub fn add(&mut self, path: &str, server: ServerId) -> bool {
        if self.servers(path).contains(&server) {
            return false;
        }
        let mut servers = self.servers(path).to_vec();
        servers.push(server);
        self.set(path, servers);
        true
    }

    /// Removes `server` from `path`'s set; false if it is not there or is the set's last
    /// server. The home is removed only by `move_to`.
    pub fn remove(&mut self, path: &str, server: ServerId) -> bool {
        let current = self.servers(path);
        if server == self.home || current.len() <= 1 || !current.contains(&server) {
            return false;
        }
        let servers = current.iter().copied().filter(|&s| s != server).collect();
        self.set(path, servers);
        true
    }

    /// Makes `server` the only holder of `path` (migration without replication).
    pub fn move_to(&mut self, path: &str, server: ServerId) {
        if self.servers(path) != [server] {
            self.set(path, vec![server]);
        }
    }

    fn set(&mut self, path: &str, servers: Vec<ServerId>) {
        self.seq += 1;
        let seq = self.seq;
        match self.sets.get_mut(path) {
            Some(entry) => *entry = SetEntry { servers, seq },
            None => {
                self.sets.insert(path.into(), SetEntry { servers, seq });
            }
        }
    }

    /// Paths whose set differs from the home alone, with their sets.
    pub fn replicated(&self) -> impl Iterator<Item = (&str, &[ServerId])> + '_ {
        let home = self.home_only;
        self.sets.iter().filter(move |(_, e)| e.servers != home).map(|(p, e)| (&**p, &e.servers[..]))
    }

    /// Every set changed after `since`, for a peer that has seen up to `since`.
    pub fn changes_since(&self, since: u64) -> MapChanges {
        let mut sets: Vec<MapSet> = (self.sets.iter())
            .filter(|(_, e)| e.seq > since)
            .map(|(p, e)| MapSet { path: p.to_string(), servers: e.servers.clone(), seq: e.seq })
            .collect();
        sets.sort_by_key(|s| s.seq);
        MapChanges { home: self.home, epoch: self.epoch, since, upto: self.seq, sets }
    }

    /// Applies a batch from this map's home. Applying a batch twice, or an older one, changes
    /// nothing; a newer epoch replaces the whole map; sets with no server are skipped.
    pub fn apply(&mut self, changes: &MapChanges) -> ApplyOutcome {
        if changes.home != self.home || changes.epoch < self.epoch {
            return ApplyOutcome::Stale;
        }
        if changes.epoch > self.epoch {
            self.epoch = changes.epoch;
            self.seq = 0;
            self.sets.clear();
        }
        let mut changed = false;
        for set in changes.sets.iter().filter(|s| !s.servers.is_empty()) {
            let newer = self.sets.get(set.path.as_str()).is_none_or(|e| set.seq > e.seq);
            if newer {
                let entry = SetEntry { servers: set.servers.clone(), seq: set.seq };
                self.sets.insert(set.path.as_str().into(), entry);
                changed = true;
            }
        }
        if changes.since > self.seq {
            return ApplyOutcome::Gap { have: self.seq };
        }
        if changes.upto > self.seq {
            self.seq = changes.upto;
            changed = true;
        }
        if changed { ApplyOutcome::Applied } else { ApplyOutcome::Stale }
    }

    /// Counts for a status page; `size` gives a path's bytes if known.
    pub fn summary(&self, size: impl Fn(&str) -> Option<u64>) -> MapSummary {
        let mut summary = MapSummary::default();
        for (path, servers) in self.replicated() {
            let copies = servers.iter().filter(|&&s| s != self.home).count() as u64;
            summary.replicated_docs += 1;
            summary.placed_copies += copies;
            summary.placed_bytes += copies * size(path).unwrap_or(0);
        }
        summary
    }
}

/// Every home's replica map, as held on one server: its own (which it edits) and its copies
/// of the others' (which it updates by `apply`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterMaps {
    own: ServerId,
    maps: BTreeMap<ServerId, ReplicaMap>,
}

impl ClusterMaps {
    /// Maps for `homes` (every server of the cluster) as held by `own`, whose map starts at
    /// `epoch`; the others start at epoch 0 and take the first batch they receive.
    pub fn new(own: ServerId, epoch: u64, homes: impl IntoIterator<Item = ServerId>) -> ClusterMaps {
        let mut maps: BTreeMap<_, _> =
            homes.into_iter().map(|home| (home, ReplicaMap::new(home, 0))).collect();
        maps.insert(own, ReplicaMap::new(own, epoch));
        ClusterMaps { own, maps }
    }

    /// This server's own map.
    pub fn own(&self) -> &ReplicaMap {
        &self.maps[&self.own]
    }

    /// This server's own map, to edit.
    pub fn own_mut(&mut self) -> &mut ReplicaMap {
        self.maps.get_mut(&self.own).expect("own map is created in new")
    }

    /// The map of `home`, if it is a member.
    pub fn get(&self, home: ServerId) -> Option<&ReplicaMap> {
        self.maps.get(&home)
    }

    /// The servers holding `doc` (its home alone if the home is unknown or never placed it).
    pub fn servers<'a>(&'a self, doc: &'a DocKey) -> &'a [ServerId] {
        match self.maps.get(&doc.home) {
            Some(map) => map.servers(&doc.path),
            None => std::slice::from_ref(&doc.home),
        }
    }

    /// Applies a batch from another home; batches claiming to be this server's own, or from a
    /// server that is not a member, are stale.
    pub fn apply(&mut self, changes: &MapChanges) -> ApplyOutcome {
        if changes.home == self.own {
            return ApplyOutcome::Stale;
        }
        match self.maps.get_mut(&changes.home) {
            Some(map) => map.apply(changes),
            None => ApplyOutcome::Stale,
        }
    }

    /// Every map, by home.
    pub fn iter(&self) -> impl Iterator<Item = (ServerId, &ReplicaMap)> + '_ {
        self.maps.iter().map(|(&id, map)| (id, map))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: ServerId = ServerId(0);
    const A: ServerId = ServerId(1);
    const B: ServerId = ServerId(2);

    #[test]
    fn map_keeps_home_first_and_never_removes_it() {
        let mut m = ReplicaMap::new(H, 1);
        assert_eq!(m.servers("/x"), [H]);
        assert!(m.add("/x", A));
        assert!(!m.add("/x", A));
        assert!(m.add("/x", B));
        assert_eq!(m.servers("/x"), [H, A, B]);
        assert!(!m.remove("/x", H));
        assert!(m.remove("/x", A));
        assert_eq!(m.servers("/x"), [H, B]);
        assert_eq!(m.seq(), 3);
    }

    #[test]
    fn move_to_leaves_exactly_one_server() {
        let mut m = ReplicaMap::new(H, 1);
        m.move_to("/x", A);
        assert_eq!(m.servers("/x"), [A]);
        assert!(!m.remove("/x", A));
        m.move_to("/x", H);
        assert_eq!(m.servers("/x"), [H]);
        assert_eq!(m.replicated().count(), 0);
    }

    #[test]
    fn apply_is_idempotent_and_ignores_stale_batches() {
        let mut home = ReplicaMap::new(H, 7);
        let mut peer = ReplicaMap::new(H, 0);
        home.add("/x", A);
        let first = home.changes_since(0);
        home.add("/y", B);
        home.remove("/x", A);
        let second = home.changes_since(first.upto);
        assert_eq!(peer.apply(&first), ApplyOutcome::Applied);
        assert_eq!(peer.apply(&second), ApplyOutcome::Applied);
        assert_eq!(peer.apply(&second), ApplyOutcome::Stale);
        assert_eq!(peer.apply(&first), ApplyOutcome::Stale);
        assert_eq!(peer.servers("/x"), [H]);
        assert_eq!(peer.servers("/y"), [H, B]);
        assert_eq!(peer.seq(), home.seq());
    }

    #[test]
    fn apply_with_a_gap_keeps_the_old_sequence_until_filled() {
        let mut home = ReplicaMap::new(H, 7);
        let mut peer = ReplicaMap::new(H, 0);
        home.add("/x", A);
        peer.apply(&home.changes_since(0));
        let seen = home.seq();
        home.add("/y", A);
        let lost = home.changes_since(seen);
        home.add("/z", B);
        let later = home.changes_since(lost.upto);
        assert_eq!(peer.apply(&later), ApplyOutcome::Gap { have: seen });
        assert_eq!(peer.servers("/z"), [H, B]);
        assert_eq!(peer.apply(&home.changes_since(peer.seq())), ApplyOutcome::Applied);
        assert_eq!(peer.servers("/y"), [H, A]);
        assert_eq!(peer.seq(), home.seq());
    }

    #[test]
    fn newer_epoch_replaces_the_peer_copy() {
        let mut old = ReplicaMap::new(H, 1);
        old.add("/x", A);
        let mut peer = ReplicaMap::new(H, 0);
        peer.apply(&old.changes_since(0));
        let mut restarted = ReplicaMap::new(H, 2);
        restarted.add("/y", B);
        assert_eq!(peer.apply(&restarted.changes_since(0)), ApplyOutcome::Applied);
        assert_eq!(peer.servers("/x"), [H]);
        assert_eq!(peer.epoch(), 2);
        assert_eq!(peer.apply(&old.changes_since(0)), ApplyOutcome::Stale);
    }

    #[test]
    fn changes_round_trip_through_json() {
        let mut m = ReplicaMap::new(H, 3);
        m.add("/a b", A);
        let c = m.changes_since(0);
        let back: MapChanges = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn cluster_maps_look_up_any_home_and_refuse_batches_about_their_own() {
        let mut here = ClusterMaps::new(A, 5, [H, A, B]);
        let mut home = ReplicaMap::new(H, 9);
        home.add("/x", B);
        assert_eq!(here.apply(&home.changes_since(0)), ApplyOutcome::Applied);
        assert_eq!(here.servers(&DocKey::new(H, "/x")), [H, B]);
        assert_eq!(here.servers(&DocKey::new(ServerId(9), "/x")), [ServerId(9)]);
        let forged = ReplicaMap::new(A, 99).changes_since(0);
        assert_eq!(here.apply(&forged), ApplyOutcome::Stale);
        here.own_mut().add("/o", H);
        assert_eq!(here.own().summary(|_| Some(10)).placed_bytes, 10);
    }
}
