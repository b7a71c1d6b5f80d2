//! The DC background task (its own thread and event loop): the 1-s load tick (connections
//! accepted per second, smoothed), the pinger (every `ping_ms`, `GET /~dc/ping` to each peer
//! whose load is older than two ping periods, and map pulls from homes whose
//! `X-DC-Map-Seq` moved), the balancing round every `balance_ms` (stat this home's pages and
//! replicated documents, re-read changed ones and apply the consistency method, then run the
//! balancer over the requests counted), and the sender of queued messages (deletion notices,
//! invalidations, updates, refetches). Stops when the node shuts down.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use locus_dc::ServerId;
use locus_dc::balancer::Action;
use locus_dc::consistency::{HomeAction, on_document_changed};
use locus_dc::load_table::LoadMeter;
use locus_dc::replica_map::{ApplyOutcome, DocKey};
use tokio::sync::watch;
use tokio::time::{MissedTickBehavior, interval};

use crate::context::NodeContext;
use crate::dc::control::MapReply;
use crate::dc::fetch::{Fetched, fetch_from_home, make_copy, store_copy};
use crate::dc::node::{DcNode, Outgoing};
use crate::dc::stats::{FetchFailure, add};
use crate::origin::{OriginHeaders, OriginPool, OriginReply};

/// Time a peer gets to answer a ping, a notice or a map pull.
const CONTROL_TIMEOUT: Duration = Duration::from_secs(2);
/// Largest map reply read.
const MAX_MAP: u64 = 16 * 1024 * 1024;

/// Run until shutdown.
pub async fn run_dc_background(node: Arc<NodeContext>, dc: Arc<DcNode>, mut shutdown: watch::Receiver<bool>) {
    let Some(mut outbox) = dc.take_outbox() else { return };
    let pools = dc.pools();
    let mut meter = LoadMeter::new(dc.config.alpha, dc.now_ns()).unwrap_or_else(|_| {
        LoadMeter::new(LoadMeter::DEFAULT_ALPHA, dc.now_ns()).expect("the default weight is valid")
    });
    let mut last_conns = node.metrics.connections_total.load(Ordering::Relaxed);
    let mut tick = interval(Duration::from_secs(1));
    let mut ping = interval(Duration::from_millis(dc.config.ping_ms));
    let mut balance = interval(Duration::from_millis(dc.config.balance_ms));
    for t in [&mut tick, &mut ping, &mut balance] {
        t.set_missed_tick_behavior(MissedTickBehavior::Delay);
    }
    loop {
        tokio::select! {
            biased;
            _ = shutdown.changed() => break,
            _ = tick.tick() => {
                let total = node.metrics.connections_total.load(Ordering::Relaxed);
                let load = meter.tick(dc.now_ns(), total.wrapping_sub(last_conns));
                last_conns = total;
                dc.set_own_load(load);
            }
            _ = ping.tick() => {
                tokio::select! {
                    biased;
                    _ = shutdown.changed() => break,
                    () = ping_and_pull(&dc, &pools) => {}
                }
            }
            _ = balance.tick() => {
                tokio::select! {
                    biased;
                    _ = shutdown.changed() => break,
                    () = balancing_round(&dc, &pools) => {}
                }
            }
            message = outbox.recv() => {
                let Some(message) = message else { break };
                tokio::select! {
                    biased;
                    _ = shutdown.changed() => break,
                    () = send(&dc, &pools, message) => {}
                }
            }
        }
    }
}

/// `GET target` to `to` with this node's load; the reply's load and map sequence are noted.
async fn control(
    dc: &DcNode,
    pools: &[Option<OriginPool>],
    to: ServerId,
    target: &str,
) -> Option<(OriginHeaders, bytes::Bytes)> {
    let pool = pools.get(to.0 as usize)?.as_ref()?;
    let extra = format!("X-DC-Load: {}\r\n", dc.load_header());
    let fetch = pool.fetch_with(target, extra.as_bytes(), MAX_MAP);
    let (headers, body) = match tokio::time::timeout(CONTROL_TIMEOUT, fetch).await {
        Ok(Ok(OriginReply::Buffered { headers, body })) => (headers, body),
        _ => return None,
    };
    if let Some(load) = &headers.dc_load {
        dc.note_load(load);
    }
    if let Some(seq) = &headers.dc_map_seq {
        dc.note_map_seq(to, seq);
    }
    if headers.peer_refused.is_some() {
        dc.stats.failed(FetchFailure::Unauthorized);
    }
    (headers.status == 200).then_some((headers, body))
}

/// Ping peers with old loads, then pull the maps that moved.
async fn ping_and_pull(dc: &DcNode, pools: &[Option<OriginPool>]) {
    let stale_ns = crate::dc::node::ping_stale_ns(dc.config.ping_ms);
    let stale = dc.choosing.lock().table.stale(dc.now_ns(), stale_ns);
    for peer in stale {
        add(&dc.stats.pings_sent, 1);
        control(dc, pools, peer, "/~dc/ping").await;
    }
    for home in dc.maps_to_pull() {
        let since = dc.maps.read().get(home).map_or(0, |m| m.seq());
        add(&dc.stats.map_pulls, 1);
        let reply = control(dc, pools, home, &format!("/~dc/map?since={since}")).await;
        let Some(map) = reply.and_then(|(_, body)| serde_json::from_slice::<MapReply>(&body).ok()) else {
            dc.pull_failed(home);
            continue;
        };
        if map.changes.home != home {
            continue;
        }
        if let ApplyOutcome::Gap { .. } = dc.maps.write().apply(&map.changes) {
            dc.pull_failed(home);
        }
        let mut versions = dc.versions.write();
        versions.retain(|k, _| k.home != home);
        versions.extend(map.versions.into_iter().map(|(p, v)| (DocKey::new(home, &p), v)));
    }
}

/// Stat this home's pages and replicated documents (re-reading changed ones), then balance.
async fn balancing_round(dc: &DcNode, pools: &[Option<OriginPool>]) {
    for doc in dc.site.docs() {
        let servers = dc.maps.read().own().servers(&doc.path).to_vec();
        if !doc.html && servers.len() <= 1 {
            continue;
        }
        if dc.site.refresh(doc).is_none() {
            continue;
        }
        add(&dc.stats.documents_changed, 1);
        dc.bump_versions();
        let messages: Vec<Outgoing> =
            match on_document_changed(dc.tuning().consistency.method, dc.me, &servers) {
                HomeAction::Push(coops) => {
                    coops.into_iter().map(|coop| Outgoing::Update { coop, path: doc.path.clone() }).collect()
                }
                HomeAction::Notify(coops) => coops
                    .into_iter()
                    .map(|coop| Outgoing::Invalidate { coop, path: doc.path.clone() })
                    .collect(),
                HomeAction::Nothing => Vec::new(),
            };
        for m in messages {
            send(dc, pools, m).await;
        }
    }
    {
        let mut balancer = dc.balancer.lock();
        for doc in dc.site.docs() {
            for _ in 0..doc.take_requests() {
                balancer.record_request(&doc.path);
            }
        }
    }
    if !dc.tuning().replicate {
        return;
    }
    let now = dc.now_ns();
    // Lock order everywhere: maps, then the load table, then the balancer.
    let mut maps = dc.maps.write();
    let choosing = dc.choosing.lock();
    let mut balancer = dc.balancer.lock();
    let size = |p: &str| dc.site.by_path(p).map(|(_, d)| d.state().size);
    let actions = balancer.round(now, dc.own_load(), &choosing.table, maps.own_mut(), size);
    for action in &actions {
        tracing::debug!(?action, "DC balancing");
        match action {
            Action::Place { .. } | Action::Move { .. } => add(&dc.stats.placements, 1),
            Action::Revoke { .. } => add(&dc.stats.revocations, 1),
        }
    }
}

/// Deliver one queued message.
async fn send(dc: &DcNode, pools: &[Option<OriginPool>], message: Outgoing) {
    let me = dc.name(dc.me).to_string();
    match message {
        Outgoing::Deletion { home, path } => {
            if control(dc, pools, home, &format!("/~dc/notice{path}?from={me}")).await.is_some() {
                add(&dc.stats.notices_sent, 1);
            }
        }
        Outgoing::Invalidate { coop, path } => {
            if control(dc, pools, coop, &format!("/~dc/invalidate{path}?from={me}")).await.is_some() {
                add(&dc.stats.invalidations_sent, 1);
            }
        }
        Outgoing::Update { coop, path } => {
            if control(dc, pools, coop, &format!("/~dc/update{path}?from={me}")).await.is_some() {
                add(&dc.stats.invalidations_sent, 1);
            }
        }
        Outgoing::Refetch { home, path } => {
            let Some(pool) = pools.get(home.0 as usize).and_then(Option::as_ref) else { return };
            match fetch_from_home(dc, pool, home, &path, None).await {
                Ok(Fetched::Fresh { body, version, content_type }) => {
                    add(&dc.stats.fetches_ok, 1);
                    let copy = Arc::new(make_copy(dc, home, &path, body, content_type));
                    store_copy(dc, &DocKey::new(home, &path), version, copy);
                }
                Ok(_) => {}
                Err(why) => dc.stats.failed(why),
            }
        }
    }
}
