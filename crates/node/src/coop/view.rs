//! `CoopView`: cooperative caching's view of the cluster as one configuration gives it — the
//! membership and this node's part of the holder directory, the peers (address, when a failed
//! peer may be tried again, the reachability check), the time a peer gets, whether copies are
//! kept — built whole from `[coop]` (hosts resolved, a peer that is this node refused) and
//! swapped whole by a reload, which carries over what it knew of the peers that stay.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use crate::coop::config::{CoopConfig, refuse_self, resolve};
use crate::coop::directory::{HolderDirectory, Membership};

/// One peer.
pub struct CoopPeer {
    /// The entry as configured.
    pub url: String,
    pub addr: crate::origin::OriginAddr,
    /// Its index in the membership.
    pub member: usize,
    /// Not tried before this time (ms since the node's coop epoch).
    pub(super) avoid_until_ms: AtomicU64,
    pub(super) failures: AtomicU64,
    /// The connection check (at start, or when a reload added the peer): `None` until it
    /// ran, then the OS error if it failed.
    pub(super) start_check: Mutex<Option<Result<(), String>>>,
}

impl CoopPeer {
    /// Whether its connection check ran.
    pub fn checked(&self) -> bool {
        self.start_check.lock().is_some()
    }

    /// Take over what `old` (the same peer in the view before a reload) knew.
    fn carry_over(&self, old: &CoopPeer) {
        self.avoid_until_ms.store(old.avoid_until_ms.load(Ordering::Relaxed), Ordering::Relaxed);
        self.failures.store(old.failures.load(Ordering::Relaxed), Ordering::Relaxed);
        *self.start_check.lock() = old.start_check.lock().clone();
    }
}

/// The cluster as one `[coop]` table gives it; see the module documentation.
pub struct CoopView {
    pub membership: Membership,
    pub directory: HolderDirectory,
    pub peers: Vec<CoopPeer>,
    /// Member index → index in `peers` (`None` for this node).
    member_peer: Vec<Option<usize>>,
    /// This node's `host:port` as its peers reach it (what it signs as and is signed for).
    pub authority: String,
    /// The peers' `host:port`s and addresses, as the gate admits them.
    pub peer_authorities: Vec<String>,
    pub peer_ips: Vec<IpAddr>,
    pub timeout: Duration,
    /// A failed peer is not tried again for this long (ms).
    pub backoff_ms: u64,
    pub keep_copy: bool,
    /// Largest document fetched from peers (the cache's object limit, even with the cache off).
    pub max_object: u64,
}

impl CoopView {
    /// The view of `config` for a node listening on `listen` (the bound address) whose cache
    /// objects are at most `max_object` bytes. Refuses a peer that is this node, or whose host
    /// does not resolve, naming the entry.
    pub fn build(config: &CoopConfig, listen: SocketAddr, max_object: u64) -> Result<CoopView, String> {
        let entries = config.peer_entries()?;
        let me = config.self_addr(listen)?;
        refuse_self(&entries, &me, listen)?;
        let authorities: Vec<String> = entries.iter().map(|p| p.addr.authority()).collect();
        let membership = Membership::new(&me.authority(), &authorities);
        let mut peer_ips = Vec::new();
        let mut peers = Vec::with_capacity(entries.len());
        let mut member_peer = vec![None; membership.len()];
        for (i, entry) in entries.into_iter().enumerate() {
            let addrs = resolve(&entry.addr);
            if addrs.is_empty() {
                return Err(format!("coop.peers[{i}] {:?}: the host does not resolve", entry.url));
            }
            peer_ips.extend(addrs.iter().map(SocketAddr::ip));
            let member = membership.index_of(&entry.addr.authority()).unwrap_or(0);
            member_peer[member] = Some(peers.len());
            peers.push(CoopPeer {
                url: entry.url,
                addr: entry.addr,
                member,
                avoid_until_ms: AtomicU64::new(0),
                failures: AtomicU64::new(0),
                start_check: Mutex::new(None),
            });
        }
        Ok(CoopView {
            membership,
            directory: HolderDirectory::default(),
            peers,
            member_peer,
            authority: me.authority(),
            peer_authorities: authorities,
            peer_ips,
            timeout: Duration::from_millis(config.timeout_ms),
            backoff_ms: config.backoff_ms,
            keep_copy: config.keep_copy,
            max_object,
        })
    }

    /// Take over from `old`, the view in force until now: what it knew of the peers that stay
    /// (by `host:port`), and the holders it knew of the documents this node is still home for.
    pub fn carry_over(&self, old: &CoopView) {
        for peer in &self.peers {
            let authority = peer.addr.authority();
            if let Some(before) = old.peers.iter().find(|p| p.addr.authority() == authority) {
                peer.carry_over(before);
            }
        }
        self.directory.absorb(&old.directory, &old.membership, &self.membership);
    }

    /// The peer that is member `member`.
    pub fn peer(&self, member: usize) -> Option<&CoopPeer> {
        self.member_peer.get(member).copied().flatten().map(|i| &self.peers[i])
    }

    /// Whether `peer` failed within the backoff, at `now_ms`.
    pub fn avoided(&self, peer: &CoopPeer, now_ms: u64) -> bool {
        peer.avoid_until_ms.load(Ordering::Relaxed) > now_ms
    }

    /// Whether the membership (and so every document's home) differs from `other`'s.
    pub fn same_members(&self, other: &CoopView) -> bool {
        self.membership == other.membership
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(peers: &[u16]) -> CoopConfig {
        let peers = peers.iter().map(|p| format!("http://127.0.0.1:{p}")).collect();
        CoopConfig { peers, ..CoopConfig::default() }
    }

    fn listen() -> SocketAddr {
        "127.0.0.1:8000".parse().unwrap()
    }

    #[test]
    fn a_view_names_its_members_and_refuses_this_node_as_a_peer() {
        let v = CoopView::build(&config(&[8001, 8002]), listen(), 1000).unwrap();
        assert_eq!((v.membership.len(), v.peers.len(), v.authority.as_str()), (3, 2, "127.0.0.1:8000"));
        assert_eq!(v.peer_authorities, vec!["127.0.0.1:8001", "127.0.0.1:8002"]);
        assert!(v.peer(v.membership.me()).is_none());
        let e = CoopView::build(&config(&[8000]), listen(), 1000).err().unwrap();
        assert!(e.contains("itself"), "{e}");
    }

    #[test]
    fn a_new_view_keeps_what_the_old_knew_of_the_peers_that_stay() {
        let old = CoopView::build(&config(&[8001, 8002]), listen(), 1000).unwrap();
        let stays = old.peer(old.membership.index_of("127.0.0.1:8002").unwrap()).unwrap();
        stays.failures.store(3, Ordering::Relaxed);
        stays.avoid_until_ms.store(500, Ordering::Relaxed);
        *stays.start_check.lock() = Some(Ok(()));
        // A document homed at 8002 in both views, held by 8002.
        let key = (0..1000)
            .map(|i| format!("/k{i}"))
            .find(|k| {
                let home = |v: &CoopView| v.membership.authority(v.membership.home(k)).to_string();
                home(&old) == "127.0.0.1:8000"
                    && CoopView::build(&config(&[8002, 8003]), listen(), 1000)
                        .is_ok_and(|n| n.membership.authority(n.membership.home(k)) == "127.0.0.1:8000")
            })
            .unwrap();
        old.directory.insert(&key, old.membership.index_of("127.0.0.1:8002").unwrap());
        old.directory.insert(&key, old.membership.index_of("127.0.0.1:8001").unwrap());
        let new = CoopView::build(&config(&[8002, 8003]), listen(), 1000).unwrap();
        new.carry_over(&old);
        let kept = new.peer(new.membership.index_of("127.0.0.1:8002").unwrap()).unwrap();
        assert_eq!(kept.failures.load(Ordering::Relaxed), 3);
        assert!(new.avoided(kept, 499) && !new.avoided(kept, 500));
        assert_eq!(*kept.start_check.lock(), Some(Ok(())));
        let added = new.peer(new.membership.index_of("127.0.0.1:8003").unwrap()).unwrap();
        assert!(added.start_check.lock().is_none(), "a new peer is checked again");
        let holders: Vec<&str> =
            new.directory.holders(&key).into_iter().map(|m| new.membership.authority(m)).collect();
        assert_eq!(holders, vec!["127.0.0.1:8002"], "the peer that left is no holder");
        assert!(!new.same_members(&old));
    }
}
