//! `DcNode`: what every thread of a DC node shares — the membership, this node's id and the
//! scheme of the URLs it writes, the gate its peers' control requests pass and the link its
//! own go out by (`peer_link`), its own documents (`HomeSite`), every home's replica map with
//! the versions of the others' replicated documents, the load table with the replica selector,
//! this node's load, the balancer, the replica store, the outbox for the background task, the
//! settings a reload changes (`tuning`), and the counters. Times given to `locus_dc` are ns
//! since start.

use std::collections::HashMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use locus_dc::balancer::Balancer;
use locus_dc::load_table::{LoadTable, format_load_header, parse_load_header};
use locus_dc::replica_map::{ClusterMaps, DocKey};
use locus_dc::replica_store::ReplicaStore;
use locus_dc::replica_url::replica_url_for;
use locus_dc::rewrite::{PlanSlot, RewritePlan, SlotChoice};
use locus_dc::selector::Selector;
use locus_dc::{Membership, Scheme, ServerId};
use parking_lot::{Mutex, RwLock};
use tokio::sync::mpsc;

use crate::config::NodeConfig;
use crate::dc::config::{DcConfig, check_self};
use crate::dc::fetch::FetchFlights;
use crate::dc::site::HomeSite;
use crate::dc::stats::{DcGauges, DcStats};
use crate::dc::tuning::{DcTuning, balancer_for, selector_for};
use crate::origin::{OriginAddr, OriginPool};
use crate::peer_link::{PeerGate, PeerKey, PeerLink};

/// Messages waiting for the background task; beyond it they are dropped.
const OUTBOX: usize = 16 * 1024;

/// The pinger asks a peer whose load is older than this (ns): two ping periods.
pub(crate) fn ping_stale_ns(ping_ms: u64) -> u64 {
    2 * ping_ms * 1_000_000
}

/// A copy of another home's document held by this co-op.
#[derive(Debug)]
pub struct ReplicaCopy {
    pub body: Bytes,
    pub content_type: String,
    /// The page's plan (HTML that parsed), made once when the copy arrived.
    pub plan: Option<RewritePlan>,
    /// HTML that could not be parsed: served unmodified.
    pub unmodifiable: bool,
}

/// What the background task sends or does for the serving threads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outgoing {
    /// Tell `home` this co-op evicted its copy of `path` (Deletion-Aware).
    Deletion { home: ServerId, path: String },
    /// Tell `coop` to drop its copy of `path` (explicit notification).
    Invalidate { coop: ServerId, path: String },
    /// Tell `coop` to fetch `path` anew (active update).
    Update { coop: ServerId, path: String },
    /// Fetch `home`'s `path` into the store now (an update received).
    Refetch { home: ServerId, path: String },
}

/// The load table and the selector that reads it, locked together.
pub struct Choosing {
    pub table: LoadTable,
    pub selector: Selector,
}

/// Shared DC state of a node.
pub struct DcNode {
    pub membership: Membership,
    pub me: ServerId,
    /// The table the node started with (see `tuning` for what a reload changed since).
    pub config: DcConfig,
    /// How clients reach every member (this node's scheme: `https` when it serves TLS): the
    /// scheme of replica links, redirects and BASE hrefs, and of the links read as local.
    pub scheme: Scheme,
    /// What a reload changes: the threshold, replication, the consistency method.
    pub(super) tuning: RwLock<DcTuning>,
    pub site: HomeSite,
    addrs: Vec<OriginAddr>,
    /// Which control requests are the members' (by the peer key, or by address without one).
    pub gate: PeerGate,
    /// How this node's own control requests and fetches go out (from its address, signed).
    pub(super) link: Arc<PeerLink>,
    pub maps: RwLock<ClusterMaps>,
    /// Versions of other homes' replicated documents, from their map replies.
    pub versions: RwLock<HashMap<DocKey, u64>>,
    /// The `X-DC-Map-Seq` last seen from each home, and whether its map needs a pull.
    map_seen: Mutex<Vec<(String, bool)>>,
    /// Moves whenever a document of this home changes version (so peers pull versions).
    version_gen: AtomicU64,
    pub choosing: Mutex<Choosing>,
    own_load: AtomicU64,
    pub balancer: Mutex<Balancer>,
    pub store: Mutex<ReplicaStore<Arc<ReplicaCopy>>>,
    /// Fetches of copies in progress (concurrent misses join one).
    pub flights: FetchFlights,
    outbox: mpsc::Sender<Outgoing>,
    outbox_rx: Mutex<Option<mpsc::Receiver<Outgoing>>>,
    pub stats: DcStats,
    /// `Server` and `X-Locus-Node` lines without `X-Locus-DC` (DC responses add their own).
    pub plain_headers: Bytes,
    epoch: Instant,
}

impl DcNode {
    /// The state for `config` on the node `node` listening on `listen` (bound), with the
    /// cluster's peer `key` if any: its root is walked now (blocking), its scheme is `https`
    /// if it serves TLS.
    pub fn new(
        config: &DcConfig,
        listen: SocketAddr,
        node: &NodeConfig,
        key: Option<PeerKey>,
    ) -> Result<DcNode, String> {
        let (root, name) = (&node.root, &node.name);
        let scheme = Scheme::for_tls(node.tls.is_some());
        let (membership, me) = config.membership()?;
        check_self(&membership, me, listen)?;
        let mut addrs = Vec::with_capacity(membership.len());
        let mut allowed_ips = Vec::new();
        for (id, server) in membership.iter() {
            let addr = format!("http://{}", server.authority).parse::<OriginAddr>()?;
            if id != me {
                let resolved: Vec<SocketAddr> = (addr.host.as_str(), addr.port)
                    .to_socket_addrs()
                    .map(Iterator::collect)
                    .map_err(|e| format!("dc server {} ({}): {e}", server.name, server.authority))?;
                allowed_ips.extend(resolved.iter().map(SocketAddr::ip));
            }
            addrs.push(addr);
        }
        let authority = membership.get(me).map(|s| s.authority.clone()).unwrap_or_default();
        let own_name = membership.get(me).map(|s| s.name.clone()).unwrap_or_default();
        let others = membership.iter().filter(|&(id, _)| id != me).map(|(_, s)| s.name.clone()).collect();
        let link = Arc::new(PeerLink::new(listen, key.clone(), own_name));
        let gate = PeerGate::new(key, authority.clone(), others, allowed_ips);
        let site = HomeSite::load(root, scheme, &authority)
            .map_err(|e| format!("dc: reading the document root {}: {e}", root.display()))?;
        let epoch_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(1, |d| d.as_millis() as u64);
        let maps = ClusterMaps::new(me, epoch_ms, membership.ids());
        let peers: Vec<ServerId> = membership.ids().filter(|&id| id != me).collect();
        let selector = selector_for(config);
        let balancer = balancer_for(me, config, 0)?;
        let (outbox, outbox_rx) = mpsc::channel(OUTBOX);
        Ok(DcNode {
            map_seen: Mutex::new(vec![(String::new(), false); membership.len()]),
            membership,
            me,
            config: config.clone(),
            scheme,
            tuning: RwLock::new(DcTuning::of(config)),
            site,
            addrs,
            gate,
            link,
            maps: RwLock::new(maps),
            versions: RwLock::new(HashMap::new()),
            version_gen: AtomicU64::new(0),
            choosing: Mutex::new(Choosing { table: LoadTable::new(peers), selector }),
            own_load: AtomicU64::new(0f64.to_bits()),
            balancer: Mutex::new(balancer),
            store: Mutex::new(ReplicaStore::new(config.quota.bytes())),
            flights: FetchFlights::default(),
            outbox,
            outbox_rx: Mutex::new(Some(outbox_rx)),
            stats: DcStats::default(),
            plain_headers: Bytes::from(format!("Server: locus\r\nX-Locus-Node: {name}\r\n")),
            epoch: Instant::now(),
        })
    }

    /// ns since the node started: the clock handed to `locus_dc`.
    pub fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    pub fn own_load(&self) -> f64 {
        f64::from_bits(self.own_load.load(Ordering::Relaxed))
    }

    pub fn set_own_load(&self, load: f64) {
        self.own_load.store(load.to_bits(), Ordering::Relaxed);
    }

    pub fn name(&self, id: ServerId) -> &str {
        self.membership.get(id).map_or("", |s| s.name.as_str())
    }

    pub fn authority(&self, id: ServerId) -> &str {
        self.membership.get(id).map_or("", |s| s.authority.as_str())
    }

    /// Add server `name` to the set of this home's document `path` (an operator's placement;
    /// tests use it to place copies without waiting for the balancer). False if either is
    /// unknown or the server holds it already.
    pub fn place(&self, path: &str, name: &str) -> bool {
        let Some(server) = self.membership.by_name(name) else { return false };
        self.site.by_path(path).is_some() && self.maps.write().own_mut().add(path, server)
    }

    /// One connection pool per member (none for this node), for one thread.
    pub fn pools(&self) -> Vec<Option<OriginPool>> {
        (self.membership.ids())
            .map(|id| {
                (id != self.me)
                    .then(|| OriginPool::to_peer(self.addrs[id.0 as usize].clone(), self.link.clone()))
            })
            .collect()
    }

    /// This node's `X-DC-Load` value (with the store's free bytes).
    pub fn load_header(&self) -> String {
        let free = self.store.lock().free_bytes();
        format_load_header(self.name(self.me), self.own_load(), Some(free))
    }

    /// Record an `X-DC-Load` value received from a peer (its `free` room books its quota under
    /// Resource-Aware); false if it is malformed or names no peer.
    pub fn note_load(&self, value: &str) -> bool {
        let Ok(report) = parse_load_header(value) else { return false };
        let Some(id) = self.membership.by_name(&report.name).filter(|&id| id != self.me) else {
            return false;
        };
        let now = self.now_ns();
        if let Some(free) = report.free {
            self.balancer.lock().note_coop_free(id, free);
        }
        self.choosing.lock().table.update(id, report.load, now)
    }

    /// This home's `X-DC-Map-Seq`: epoch, map sequence and version generation.
    pub fn map_seq(&self) -> String {
        let maps = self.maps.read();
        let own = maps.own();
        format!("{}.{}.{}", own.epoch(), own.seq(), self.version_gen.load(Ordering::Relaxed))
    }

    /// A document of this home changed version: peers must pull the versions again.
    pub fn bump_versions(&self) {
        self.version_gen.fetch_add(1, Ordering::Relaxed);
    }

    /// Record `home`'s `X-DC-Map-Seq`; a new value marks its map for a pull.
    pub fn note_map_seq(&self, home: ServerId, seq: &str) {
        if home == self.me {
            return;
        }
        if let Some(entry) = self.map_seen.lock().get_mut(home.0 as usize)
            && entry.0 != seq
        {
            *entry = (seq.to_string(), true);
        }
    }

    /// Homes whose maps need a pull (the flags are cleared; `pull_failed` sets one again).
    pub fn maps_to_pull(&self) -> Vec<ServerId> {
        let mut seen = self.map_seen.lock();
        (seen.iter_mut().enumerate())
            .filter_map(|(i, e)| std::mem::replace(&mut e.1, false).then_some(ServerId(i as u16)))
            .collect()
    }

    /// A pull from `home` failed: try again next time.
    pub fn pull_failed(&self, home: ServerId) {
        if let Some(e) = self.map_seen.lock().get_mut(home.0 as usize) {
            e.0.clear();
            e.1 = true;
        }
    }

    /// Queue a message for the background task (dropped when the queue is full).
    pub fn queue(&self, message: Outgoing) {
        if self.outbox.try_send(message).is_err() {
            tracing::debug!("DC outbox full; a message is dropped");
        }
    }

    /// The outbox, for the background task (`None` after the first call).
    pub fn take_outbox(&self) -> Option<mpsc::Receiver<Outgoing>> {
        self.outbox_rx.lock().take()
    }

    /// The version of `home`'s document `path` as this node knows it.
    fn version_of(&self, key: &DocKey) -> u64 {
        if key.home == self.me {
            return self.site.by_path(&key.path).map_or(0, |(_, d)| d.state().version);
        }
        self.versions.read().get(key).copied().unwrap_or(0)
    }

    /// One choice per slot of a page of `home`: a slot whose target is held by more than one
    /// server (or only by a co-op) gets the chosen server's URL, or stays verbatim when the
    /// home is chosen. The flag says whether any slot had a choice to make.
    pub fn choose_slots(&self, home: ServerId, slots: &[PlanSlot]) -> (Vec<SlotChoice>, bool) {
        let now = self.now_ns();
        let own = self.own_load();
        let maps = self.maps.read();
        let mut choosing = self.choosing.lock();
        let Choosing { table, selector } = &mut *choosing;
        let mut any = false;
        let choices = slots
            .iter()
            .map(|slot| {
                let key = DocKey::new(home, &slot.target_path);
                let servers = maps.servers(&key);
                if servers == [home] {
                    return SlotChoice::Verbatim;
                }
                any = true;
                match selector.choose(servers, table, self.me, own, now) {
                    Some(s) if s != home => {
                        let version = self.version_of(&key);
                        let (coop, home_name) = (self.authority(s), self.name(home));
                        let mut url = replica_url_for(self.scheme, coop, version, home_name, &key.path);
                        url.push_str(&slot.suffix);
                        SlotChoice::Url(url)
                    }
                    _ => SlotChoice::Verbatim,
                }
            })
            .collect();
        (choices, any)
    }

    /// Figures for status and metrics.
    pub fn gauges(&self) -> DcGauges {
        let now = self.now_ns();
        let loads = (self.choosing.lock().table.iter())
            .filter_map(|(id, e)| {
                e.map(|e| (self.name(id).to_string(), e.load, now.saturating_sub(e.received_at) / 1_000_000))
            })
            .collect();
        let maps = self.maps.read();
        let summary = maps.own().summary(|p| self.site.by_path(p).map(|(_, d)| d.state().size));
        let map_entries = maps.iter().map(|(_, m)| m.replicated().count() as u64).sum();
        let store = self.store.lock();
        DcGauges {
            own_load: self.own_load(),
            loads,
            replicated_docs: summary.replicated_docs,
            map_entries,
            store_bytes: store.used_bytes(),
            store_quota: store.quota(),
            store_copies: store.len() as u64,
            unmodifiable_pages: self.site.unmodifiable,
        }
    }

    /// Resource-Aware's books for status: each peer's booked bytes and quota Q_s (null when
    /// unlimited).
    fn books_json(&self) -> Vec<serde_json::Value> {
        let balancer = self.balancer.lock();
        let books = balancer.books();
        (self.membership.ids().filter(|&id| id != self.me))
            .map(|id| {
                let quota = Some(books.quota(id)).filter(|&q| q != u64::MAX);
                serde_json::json!({"server": self.name(id), "booked_bytes": books.used(id), "quota_bytes": quota})
            })
            .collect()
    }

    /// The `dc` object of `/locus/status`.
    pub fn status_json(&self) -> serde_json::Value {
        let g = self.gauges();
        let loads: Vec<serde_json::Value> = (g.loads.iter())
            .map(|(name, load, age)| serde_json::json!({"server": name, "load": load, "age_ms": age}))
            .collect();
        let snapshot = self.stats.snapshot();
        let failures: serde_json::Map<String, serde_json::Value> =
            snapshot.fetch_failures.iter().map(|(k, n)| (k.clone(), (*n).into())).collect();
        let mut v = serde_json::to_value(&snapshot).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.insert("fetch_failures".into(), failures.into());
            o.insert("peer_auth".into(), self.gate.status_json());
            o.insert("source_address".into(), self.link.source().map(|ip| ip.to_string()).into());
            o.insert("self".into(), self.name(self.me).into());
            o.insert("members".into(), self.membership.len().into());
            o.insert("method".into(), self.config.method.as_str().into());
            let tuning = self.tuning();
            o.insert("consistency".into(), tuning.consistency.method.as_str().into());
            o.insert("replicate".into(), tuning.replicate.into());
            o.insert("theta".into(), tuning.theta.into());
            o.insert("own_load".into(), g.own_load.into());
            o.insert("loads".into(), loads.into());
            if self.config.method == locus_dc::balancer::QuotaMethod::ResourceAware {
                o.insert("books".into(), self.books_json().into());
            }
            o.insert("replicated_docs".into(), g.replicated_docs.into());
            o.insert("map_entries".into(), g.map_entries.into());
            o.insert("store_bytes".into(), g.store_bytes.into());
            o.insert("store_quota".into(), g.store_quota.into());
            o.insert("store_copies".into(), g.store_copies.into());
            o.insert("documents".into(), self.site.len().into());
            o.insert("unmodifiable_pages".into(), g.unmodifiable_pages.into());
            o.insert("skipped_files".into(), self.site.skipped.into());
        }
        v
    }
}
