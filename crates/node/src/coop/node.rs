//! `CoopNode`: what every thread of a node doing cooperative caching shares — the membership
//! and this node's part of the holder directory, the peers (address, when a failed peer may
//! be tried again, the start-up reachability check), the gate its peers' requests pass and
//! the link its own go out by (`peer_link`), the counters, and the queue of insert/evict
//! notices for other homes. As the
//! document store's `CacheObserver` it turns this node's inserts and evictions into notices
//! (applied at once when this node is the document's home).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::mpsc;

use crate::coop::config::{CoopConfig, refuse_self, resolve};
use crate::coop::directory::{HolderDirectory, Membership};
use crate::coop::stats::{CoopStats, PeerFailure, add};
use crate::doc_store::CacheObserver;
use crate::origin::{OriginAddr, OriginPool};
use crate::peer_link::{PeerGate, PeerKey, PeerLink};

/// Notices waiting to be sent; beyond it they are dropped (and counted).
const NOTICE_QUEUE: usize = 64 * 1024;

/// One peer.
pub struct CoopPeer {
    /// The entry as configured.
    pub url: String,
    pub addr: OriginAddr,
    /// Its index in the membership.
    pub member: usize,
    /// Not tried before this time (ms since the node's coop epoch).
    avoid_until_ms: AtomicU64,
    failures: AtomicU64,
    /// The start-up connection check: `None` until it ran, then the OS error if it failed.
    start_check: Mutex<Option<Result<(), String>>>,
}

/// An insert or evict notice for the home of `key`.
#[derive(Debug)]
pub struct Notice {
    pub home: usize,
    pub insert: bool,
    pub key: String,
}

/// Shared cooperative-caching state of a node.
pub struct CoopNode {
    pub membership: Membership,
    pub directory: HolderDirectory,
    pub peers: Vec<CoopPeer>,
    /// Member index → index in `peers` (`None` for this node).
    member_peer: Vec<Option<usize>>,
    /// Which coop requests are the peers' (by the peer key, or by address without one).
    pub gate: PeerGate,
    /// How this node's own coop requests go out (from its address, signed).
    link: Arc<PeerLink>,
    pub timeout: Duration,
    /// A failed peer is not tried again for this long (ms).
    backoff_ms: u64,
    pub keep_copy: bool,
    /// Largest document fetched from peers (the cache's object limit, even with the cache off).
    pub max_object: u64,
    pub stats: CoopStats,
    notices: mpsc::Sender<Notice>,
    notice_queue: Mutex<Option<mpsc::Receiver<Notice>>>,
    epoch: Instant,
}

impl CoopNode {
    /// The state for `config` on a node listening on `listen` (the bound address) whose
    /// cache objects are at most `max_object` bytes, with the cluster's peer `key` if any.
    /// Refuses a peer that is this node, or whose host does not resolve, naming the entry.
    pub fn new(
        config: &CoopConfig,
        listen: SocketAddr,
        max_object: u64,
        key: Option<PeerKey>,
    ) -> Result<CoopNode, String> {
        let entries = config.peer_entries()?;
        let me = config.self_addr(listen)?;
        refuse_self(&entries, &me, listen)?;
        let authorities: Vec<String> = entries.iter().map(|p| p.addr.authority()).collect();
        let membership = Membership::new(&me.authority(), &authorities);
        let mut allowed_ips = Vec::new();
        let mut peers = Vec::with_capacity(entries.len());
        let mut member_peer = vec![None; membership.len()];
        for (i, entry) in entries.into_iter().enumerate() {
            let addrs = resolve(&entry.addr);
            if addrs.is_empty() {
                return Err(format!("coop.peers[{i}] {:?}: the host does not resolve", entry.url));
            }
            allowed_ips.extend(addrs.iter().map(SocketAddr::ip));
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
        let (notices, queue) = mpsc::channel(NOTICE_QUEUE);
        let link = Arc::new(PeerLink::new(listen, key.clone(), me.authority()));
        let gate = PeerGate::new(key, me.authority(), authorities, allowed_ips);
        Ok(CoopNode {
            membership,
            directory: HolderDirectory::default(),
            peers,
            member_peer,
            gate,
            link,
            timeout: Duration::from_millis(config.timeout_ms),
            backoff_ms: config.backoff_ms,
            keep_copy: config.keep_copy,
            max_object,
            stats: CoopStats::default(),
            notices,
            notice_queue: Mutex::new(Some(queue)),
            epoch: Instant::now(),
        })
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// The peer that is member `member`.
    pub fn peer(&self, member: usize) -> Option<&CoopPeer> {
        self.member_peer.get(member).copied().flatten().map(|i| &self.peers[i])
    }

    /// Whether member `member` may be tried now (a peer not failed within the backoff);
    /// a skip is counted.
    pub fn usable(&self, member: usize) -> bool {
        let Some(peer) = self.peer(member) else { return false };
        let avoided = self.avoided(peer);
        if avoided {
            add(&self.stats.peers_skipped, 1);
        }
        !avoided
    }

    /// Whether `peer` failed within the backoff.
    pub fn avoided(&self, peer: &CoopPeer) -> bool {
        peer.avoid_until_ms.load(Ordering::Relaxed) > self.now_ms()
    }

    /// A try at member `member` failed for `why`: count it, and avoid the peer for a while
    /// if it is down, slow or broken.
    pub fn failed(&self, member: usize, why: PeerFailure) {
        self.stats.failed(why);
        if let Some(peer) = self.peer(member) {
            add(&peer.failures, 1);
            if why.backs_off() {
                let until = self.now_ms() + self.backoff_ms;
                peer.avoid_until_ms.store(until, Ordering::Relaxed);
            }
        }
    }

    /// One connection pool per peer (indexed by member), for one worker thread.
    pub fn pools(&self) -> Vec<Option<OriginPool>> {
        let pool = |p: &CoopPeer| OriginPool::to_peer(p.addr.clone(), self.link.clone());
        (0..self.membership.len()).map(|m| self.peer(m).map(pool)).collect()
    }

    /// How this node's coop requests go out (from its address, signed).
    pub fn link(&self) -> Arc<PeerLink> {
        self.link.clone()
    }

    /// The notice queue, for the one task that sends notices (`None` after the first call).
    pub fn take_notice_queue(&self) -> Option<mpsc::Receiver<Notice>> {
        self.notice_queue.lock().take()
    }

    /// Record the start-up check of `peer` (index in `peers`).
    pub fn set_start_check(&self, peer: usize, result: Result<(), String>) {
        *self.peers[peer].start_check.lock() = Some(result);
    }

    /// Apply a notice from member `from` to this node's directory.
    pub fn apply_notice(&self, from: usize, insert: bool, key: &str) {
        if insert {
            self.directory.insert(key, from);
        } else {
            self.directory.remove(key, from);
        }
    }

    fn notify(&self, key: &str, insert: bool) {
        let home = self.membership.home(key);
        if home == self.membership.me() {
            self.apply_notice(home, insert, key);
            return;
        }
        if self.notices.try_send(Notice { home, insert, key: key.to_string() }).is_err() {
            add(&self.stats.notices_dropped, 1);
        }
    }

    /// The `coop` object of `/locus/status`; `local_hits` is the node's cache hits.
    pub fn status_json(&self, local_hits: u64) -> serde_json::Value {
        let now = self.now_ms();
        let peers: Vec<serde_json::Value> = self
            .peers
            .iter()
            .map(|p| {
                let start = match &*p.start_check.lock() {
                    None => serde_json::Value::from("pending"),
                    Some(Ok(())) => "reachable".into(),
                    Some(Err(e)) => format!("unreachable: {e}").into(),
                };
                serde_json::json!({
                    "url": p.url,
                    "member": p.member,
                    "start_check": start,
                    "failures": p.failures.load(Ordering::Relaxed),
                    "avoided": p.avoid_until_ms.load(Ordering::Relaxed) > now,
                })
            })
            .collect();
        let snapshot = self.stats.snapshot(self.directory.size());
        let mut v = serde_json::to_value(&snapshot).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.insert("local_hits".into(), local_hits.into());
            o.insert("self".into(), self.membership.authority(self.membership.me()).into());
            o.insert("members".into(), self.membership.len().into());
            o.insert("timeout_ms".into(), (self.timeout.as_millis() as u64).into());
            o.insert("keep_copy".into(), self.keep_copy.into());
            o.insert("peers".into(), peers.into());
            let failures: serde_json::Map<String, serde_json::Value> =
                snapshot.peer_failures.iter().map(|(k, n)| (k.clone(), (*n).into())).collect();
            o.insert("peer_failures".into(), failures.into());
            o.insert("peer_auth".into(), self.gate.status_json());
            o.insert("source_address".into(), self.link.source().map(|ip| ip.to_string()).into());
        }
        v
    }
}

impl CacheObserver for CoopNode {
    fn inserted(&self, key: &str) {
        self.notify(key, true);
    }

    fn removed(&self, key: &str) {
        self.notify(key, false);
    }
}

/// Shared handle, as the document store keeps it.
pub fn observer(coop: &Arc<CoopNode>) -> Arc<dyn CacheObserver> {
    coop.clone()
}
