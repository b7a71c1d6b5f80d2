//! The cooperative-caching background task (its own thread and event loop): first a
//! connection check of every peer (an unreachable one is warned about, one line naming it
//! and the OS error, and shown in status, but the node runs on: peers start in any order),
//! then the sender of insert/evict notices, batched per home — whatever queued while the
//! last batch was being sent goes in the next — over its own keep-alive connections, each
//! notice's home taken from the view in force when it is sent; the peers a reload adds are
//! checked as they come. Best effort: notices for a home that is down are dropped and counted.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::coop::node::{CoopNode, Notice};
use crate::coop::stats::{PeerFailure, add};
use crate::coop::view::CoopView;
use crate::coop::wire::notice_targets;
use crate::origin::{OriginPool, OriginReply};

/// Notices taken from the queue for one batch, at most.
const MAX_BATCH: usize = 4096;
/// Length of one notice request's target, about.
const MAX_TARGET: usize = 4096;
/// Time a peer gets to accept the start-up check's connection (at least; `timeout_ms` if longer).
const START_CHECK_TIMEOUT: Duration = Duration::from_secs(1);

/// Check the peers, then send notices until shutdown; check the peers a reload adds.
pub async fn run_coop_background(coop: Arc<CoopNode>, mut shutdown: watch::Receiver<bool>) {
    let mut views = coop.watch_views();
    tokio::select! {
        biased;
        _ = shutdown.changed() => return,
        () = check_peers(&coop, coop.view()) => {}
    }
    let Some(mut queue) = coop.take_notice_queue() else { return };
    let mut view = coop.view();
    let mut pools = coop.pools(&view, &[]);
    loop {
        let first = tokio::select! {
            biased;
            _ = shutdown.changed() => break,
            changed = views.changed() => {
                if changed.is_err() {
                    break;
                }
                tokio::select! {
                    biased;
                    _ = shutdown.changed() => break,
                    () = check_peers(&coop, coop.view()) => continue,
                }
            }
            notice = queue.recv() => match notice {
                Some(n) => n,
                None => break,
            },
        };
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(n) => batch.push(n),
                Err(_) => break,
            }
        }
        let now = coop.view();
        if !Arc::ptr_eq(&now, &view) {
            pools = coop.pools(&now, &pools);
            view = now;
        }
        tokio::select! {
            biased;
            _ = shutdown.changed() => break,
            () = send_batch(&coop, &view, &pools, batch) => {}
        }
    }
}

/// Connect to every peer of `view` not checked yet, at the same time; warn about each one
/// that does not accept.
async fn check_peers(coop: &Arc<CoopNode>, view: Arc<CoopView>) {
    let limit = START_CHECK_TIMEOUT.max(view.timeout);
    let mut checks = tokio::task::JoinSet::new();
    for (i, peer) in view.peers.iter().enumerate().filter(|(_, p)| !p.checked()) {
        let (host, port, link) = (peer.addr.host.clone(), peer.addr.port, coop.link());
        checks.spawn(async move {
            let result = match tokio::time::timeout(limit, link.connect(&host, port)).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err(format!("no answer within {} ms", limit.as_millis())),
            };
            (i, result)
        });
    }
    while let Some(Ok((i, result))) = checks.join_next().await {
        if let Err(e) = &result {
            tracing::warn!(
                "coop peer {} is unreachable: {e} (the node runs on and tries it again on demand)",
                view.peers[i].url
            );
        }
        coop.set_start_check(&view, i, result);
    }
}

/// Send `batch`, grouped by home under `view`, in queue order within each home; notices for
/// documents this node is home for now are applied here.
async fn send_batch(coop: &CoopNode, view: &CoopView, pools: &[Option<Arc<OriginPool>>], batch: Vec<Notice>) {
    let m = &view.membership;
    let mut per_home: BTreeMap<usize, Vec<Notice>> = BTreeMap::new();
    for n in batch {
        match m.home(&n.key) {
            home if home == m.me() => CoopNode::apply_notice(view, home, n.insert, &n.key),
            home => per_home.entry(home).or_default().push(n),
        }
    }
    for (home, notices) in per_home {
        let count = notices.len() as u64;
        let Some(pool) = pools.get(home).and_then(Option::as_ref) else { continue };
        if view.peer(home).is_none_or(|p| view.avoided(p, coop.now_ms())) {
            add(&coop.stats.notices_dropped, count);
            continue;
        }
        let notices = notices.iter().map(|n| (n.insert, n.key.as_str()));
        let targets = notice_targets(&view.authority, notices, MAX_TARGET);
        let mut unsent = count;
        for target in &targets {
            let carried = target.matches('&').count() as u64;
            match send_one(view, pool, target).await {
                Ok(()) => {
                    add(&coop.stats.notices_sent, carried);
                    unsent -= carried.min(unsent);
                }
                Err(why) => {
                    coop.failed(view, home, why);
                    break;
                }
            }
        }
        add(&coop.stats.notices_dropped, unsent);
    }
}

async fn send_one(view: &CoopView, pool: &OriginPool, target: &str) -> Result<(), PeerFailure> {
    match tokio::time::timeout(view.timeout, pool.fetch_with(target, b"", 0)).await {
        Err(_) => Err(PeerFailure::Timeout),
        Ok(Ok(OriginReply::Buffered { headers, .. })) if headers.status == 200 => Ok(()),
        Ok(Ok(OriginReply::Buffered { headers, .. })) if headers.peer_refused.is_some() => {
            Err(PeerFailure::Unauthorized)
        }
        Ok(Ok(_)) => Err(PeerFailure::BadReply),
        Ok(Err(crate::origin::OriginError::Timeout)) => Err(PeerFailure::Timeout),
        Ok(Err(_)) => Err(PeerFailure::Refused),
    }
}
