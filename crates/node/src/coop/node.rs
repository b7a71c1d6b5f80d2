//! `CoopNode`: what every thread of a node doing cooperative caching shares — the view of the
//! cluster in force (`CoopView`: membership, holder directory, peers, timeouts; swapped whole
//! by a reload, `install`), the gate its peers' requests pass and the link its own go out by
//! (`peer_link`, reconfigured in place), the counters, and the queue of insert/evict notices
//! for other homes. As the document store's `CacheObserver` it turns this node's inserts and
//! evictions into notices (applied at once when this node is the document's home; a notice's
//! home is worked out again when it is sent, under the view in force then).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Mutex, RwLock};
use tokio::sync::{mpsc, watch};

use crate::coop::config::CoopConfig;
use crate::coop::stats::{CoopStats, PeerFailure, add};
use crate::coop::view::CoopView;
use crate::doc_store::CacheObserver;
use crate::origin::OriginPool;
use crate::peer_link::{PeerGate, PeerKey, PeerLink};

/// Notices waiting to be sent; beyond it they are dropped (and counted).
const NOTICE_QUEUE: usize = 64 * 1024;

/// An insert or evict notice for the home of `key`.
#[derive(Debug)]
pub struct Notice {
    pub insert: bool,
    pub key: String,
}

/// Shared cooperative-caching state of a node.
pub struct CoopNode {
    view: RwLock<Arc<CoopView>>,
    /// Which coop requests are the peers' (by the peer key, or by address without one).
    pub gate: PeerGate,
    /// How this node's own coop requests go out (from its address, signed).
    link: Arc<PeerLink>,
    pub stats: CoopStats,
    notices: mpsc::Sender<Notice>,
    notice_queue: Mutex<Option<mpsc::Receiver<Notice>>>,
    /// Counts the views installed after the first: the background task checks new peers.
    views: watch::Sender<u64>,
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
        let view = CoopView::build(config, listen, max_object)?;
        let (notices, queue) = mpsc::channel(NOTICE_QUEUE);
        let link = Arc::new(PeerLink::new(listen, key.clone(), view.authority.clone()));
        let gate =
            PeerGate::new(key, view.authority.clone(), view.peer_authorities.clone(), view.peer_ips.clone());
        Ok(CoopNode {
            view: RwLock::new(Arc::new(view)),
            gate,
            link,
            stats: CoopStats::default(),
            notices,
            notice_queue: Mutex::new(Some(queue)),
            views: watch::Sender::new(0),
            epoch: Instant::now(),
        })
    }

    /// The view in force now.
    pub fn view(&self) -> Arc<CoopView> {
        self.view.read().clone()
    }

    /// Put `view` (built by `CoopView::build` from a reloaded configuration) in force with
    /// the peer `key`: it takes over what the old view knew, the gate and the link follow it,
    /// and when the members changed, `cached` (this node's cached keys) are announced again to
    /// their homes under the new membership. Requests under way finish with the old view.
    pub fn install(&self, view: CoopView, key: Option<PeerKey>, cached: impl FnOnce() -> Vec<String>) {
        let old = self.view();
        view.carry_over(&old);
        self.gate.reconfigure(
            key.clone(),
            view.authority.clone(),
            view.peer_authorities.clone(),
            view.peer_ips.clone(),
        );
        self.link.set_signer(key, view.authority.clone());
        let members_changed = !view.same_members(&old);
        *self.view.write() = Arc::new(view);
        self.views.send_modify(|n| *n += 1);
        if members_changed {
            for key in cached() {
                self.notify(&key, true);
            }
        }
    }

    /// Told when a view is installed (a reload).
    pub fn watch_views(&self) -> watch::Receiver<u64> {
        self.views.subscribe()
    }

    /// Sign with `key` from now on, the view kept (a reload that changed only the key).
    pub fn rekey(&self, key: Option<PeerKey>) {
        self.gate.rekey(key.clone());
        self.link.set_signer(key, self.view().authority.clone());
    }

    pub fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Whether member `member` of `view` may be tried now (a peer not failed within the
    /// backoff); a skip is counted.
    pub fn usable(&self, view: &CoopView, member: usize) -> bool {
        let Some(peer) = view.peer(member) else { return false };
        let avoided = view.avoided(peer, self.now_ms());
        if avoided {
            add(&self.stats.peers_skipped, 1);
        }
        !avoided
    }

    /// A try at member `member` of `view` failed for `why`: count it, and avoid the peer for
    /// a while if it is down, slow or broken.
    pub fn failed(&self, view: &CoopView, member: usize, why: PeerFailure) {
        self.stats.failed(why);
        if let Some(peer) = view.peer(member) {
            add(&peer.failures, 1);
            if why.backs_off() {
                let until = self.now_ms() + view.backoff_ms;
                peer.avoid_until_ms.store(until, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }

    /// One connection pool per member of `view` (`None` for this node), for one thread;
    /// pools in `reuse` to a member of `view` (by `host:port`) are kept, idle connections and all.
    pub fn pools(&self, view: &CoopView, reuse: &[Option<Arc<OriginPool>>]) -> Vec<Option<Arc<OriginPool>>> {
        (0..view.membership.len())
            .map(|m| {
                let peer = view.peer(m)?;
                let authority = peer.addr.authority();
                let kept = reuse.iter().flatten().find(|p| p.authority() == authority);
                Some(match kept {
                    Some(pool) => pool.clone(),
                    None => Arc::new(OriginPool::to_peer(peer.addr.clone(), self.link.clone())),
                })
            })
            .collect()
    }

    /// How this node's coop requests go out (from its address, signed).
    pub fn link(&self) -> Arc<PeerLink> {
        self.link.clone()
    }

    /// The notice queue, for the one task that sends notices (`None` after the first call).
    pub fn take_notice_queue(&self) -> Option<mpsc::Receiver<Notice>> {
        self.notice_queue.lock().take()
    }

    /// Record the connection check of `view`'s `peer` (index in `peers`).
    pub fn set_start_check(&self, view: &CoopView, peer: usize, result: Result<(), String>) {
        *view.peers[peer].start_check.lock() = Some(result);
    }

    /// Apply a notice from member `from` of `view` to its directory.
    pub fn apply_notice(view: &CoopView, from: usize, insert: bool, key: &str) {
        if insert {
            view.directory.insert(key, from);
        } else {
            view.directory.remove(key, from);
        }
    }

    fn notify(&self, key: &str, insert: bool) {
        let view = self.view();
        let m = &view.membership;
        if m.home(key) == m.me() {
            CoopNode::apply_notice(&view, m.me(), insert, key);
            return;
        }
        if self.notices.try_send(Notice { insert, key: key.to_string() }).is_err() {
            add(&self.stats.notices_dropped, 1);
        }
    }

    /// The `coop` object of `/locus/status`; `local_hits` is the node's cache hits.
    pub fn status_json(&self, local_hits: u64) -> serde_json::Value {
        let view = self.view();
        let now = self.now_ms();
        let peers: Vec<serde_json::Value> = (view.peers.iter())
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
                    "failures": p.failures.load(std::sync::atomic::Ordering::Relaxed),
                    "avoided": view.avoided(p, now),
                })
            })
            .collect();
        let snapshot = self.stats.snapshot(view.directory.size());
        let mut v = serde_json::to_value(&snapshot).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.insert("local_hits".into(), local_hits.into());
            o.insert("self".into(), view.authority.clone().into());
            o.insert("members".into(), view.membership.len().into());
            o.insert("timeout_ms".into(), (view.timeout.as_millis() as u64).into());
            o.insert("keep_copy".into(), view.keep_copy.into());
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
