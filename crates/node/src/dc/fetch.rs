//! The co-op's side of lazy replication: `fetch_from_home` asks a home for one document
//! (`GET /~dc/fetch/<path>` over a pooled keep-alive connection, `X-DC-Load` both ways,
//! `If-Modified-Since` to validate) and checks the answer — a 200 with a Content-Length and
//! exactly that many bytes (a truncated or oversized copy is refused, never stored), a 304,
//! or a definite answer about the document (404 and the like, passed on to the client);
//! `fetch_joined` makes concurrent misses for one copy share one fetch and stores the copy
//! (evictions become deletion notices under Deletion-Aware).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use bytes::Bytes;
use locus_dc::ServerId;
use locus_dc::balancer::QuotaMethod;
use locus_dc::replica_map::DocKey;
use locus_dc::replica_store::Insertion;
use locus_dc::rewrite::RewritePlan;
use parking_lot::Mutex;
use tokio::sync::watch;

use crate::dc::node::{DcNode, Outgoing, ReplicaCopy};
use crate::dc::stats::{FetchFailure, add};
use crate::origin::{OriginError, OriginPool, OriginReply};

/// Time a home gets to send a whole copy.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest copy fetched.
pub const MAX_COPY: u64 = 256 * 1024 * 1024;

/// What a home answered.
#[derive(Debug)]
pub enum Fetched {
    /// 200: the document at `version`.
    Fresh { body: Bytes, version: u64, content_type: String },
    /// 304: the copy's version is current.
    NotModified,
    /// A definite answer about the document (`is_definite_answer`: 404 when the home has no
    /// such document), which the co-op passes on to its client.
    Answered(u16),
}

/// Whether a home's answer `status` to a fetch is one about the document itself, passed on
/// to the client as it is: it does not exist (404), is gone (410), is not to be served
/// (403 but for a refused peer request, 451). Any other status is a failure (502).
pub fn is_definite_answer(status: u16) -> bool {
    matches!(status, 403 | 404 | 410 | 451)
}

/// What a joined fetch gave.
#[derive(Clone, Debug)]
pub enum Copied {
    /// The stored (or passed-through) copy.
    Copy(Arc<ReplicaCopy>),
    /// The home's definite answer instead (`Fetched::Answered`).
    Answered(u16),
}

/// A joined fetch's result.
pub type FetchOutcome = Result<Copied, FetchFailure>;

/// Fetches in progress, by copy.
#[derive(Default)]
pub struct FetchFlights {
    flights: Mutex<HashMap<DocKey, watch::Receiver<Option<FetchOutcome>>>>,
}

/// One thread's connections to the other members, by server id.
pub struct DcWorker {
    pub dc: Arc<DcNode>,
    pub pools: Vec<Option<OriginPool>>,
}

impl DcWorker {
    pub fn new(dc: Arc<DcNode>) -> DcWorker {
        let pools = dc.pools();
        DcWorker { dc, pools }
    }

    pub fn pool(&self, id: ServerId) -> Option<&OriginPool> {
        self.pools.get(id.0 as usize).and_then(Option::as_ref)
    }
}

fn failure(e: &OriginError) -> FetchFailure {
    match e {
        OriginError::Timeout => FetchFailure::Timeout,
        OriginError::Connect(_) | OriginError::Io(_) | OriginError::ClosedEarly => FetchFailure::Refused,
        OriginError::Truncated => FetchFailure::Truncated,
        OriginError::TooLarge(_) => FetchFailure::Oversized,
        OriginError::Malformed(_) => FetchFailure::BadReply,
    }
}

/// Ask `home` for `path`; with `since` (a version), conditionally.
pub async fn fetch_from_home(
    dc: &DcNode,
    pool: &OriginPool,
    home: ServerId,
    path: &str,
    since: Option<u64>,
) -> Result<Fetched, FetchFailure> {
    let mut extra = format!("X-DC-Load: {}\r\n", dc.load_header());
    if let Some(v) = since {
        let date = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(v));
        extra.push_str(&format!("If-Modified-Since: {date}\r\n"));
    }
    let target = format!("/~dc/fetch{path}");
    let reply =
        match tokio::time::timeout(FETCH_TIMEOUT, pool.fetch_with(&target, extra.as_bytes(), MAX_COPY)).await
        {
            Err(_) => return Err(FetchFailure::Timeout),
            Ok(Err(e)) => return Err(failure(&e)),
            Ok(Ok(OriginReply::Streaming { .. })) => return Err(FetchFailure::Oversized),
            Ok(Ok(OriginReply::Buffered { headers, body })) => (headers, body),
        };
    let (headers, body) = reply;
    if let Some(load) = &headers.dc_load {
        dc.note_load(load);
    }
    if let Some(seq) = &headers.dc_map_seq {
        dc.note_map_seq(home, seq);
    }
    match headers.status {
        200 => {}
        304 => return Ok(Fetched::NotModified),
        403 if headers.peer_refused.is_some() => return Err(FetchFailure::Unauthorized),
        status if is_definite_answer(status) => return Ok(Fetched::Answered(status)),
        _ => return Err(FetchFailure::BadReply),
    }
    let Some(length) = headers.content_length else { return Err(FetchFailure::BadReply) };
    if headers.overran || body.len() as u64 > length {
        return Err(FetchFailure::Oversized);
    }
    if (body.len() as u64) < length {
        return Err(FetchFailure::Truncated);
    }
    let Some(version) = headers.dc_version.and_then(|v| v.trim().parse().ok()) else {
        return Err(FetchFailure::BadReply);
    };
    let content_type = headers.content_type.unwrap_or_else(|| "application/octet-stream".into());
    Ok(Fetched::Fresh { body, version, content_type })
}

/// A copy of `home`'s `path` as received: HTML is planned here, once per copy.
pub fn make_copy(dc: &DcNode, home: ServerId, path: &str, body: Bytes, content_type: String) -> ReplicaCopy {
    let html = content_type.to_ascii_lowercase().starts_with("text/html");
    let (plan, unmodifiable) = if html {
        match RewritePlan::for_copy_with_scheme(dc.scheme, &body, path, dc.authority(home)) {
            Ok(plan) => (Some(plan), false),
            Err(e) => {
                tracing::debug!(path, error = %e, "DC: copy served unmodified");
                (None, true)
            }
        }
    } else {
        (None, false)
    };
    ReplicaCopy { body, content_type, plan, unmodifiable }
}

/// Keep `copy` in the store (unless the quota is 0); evictions become deletion notices
/// under Deletion-Aware.
pub fn store_copy(dc: &DcNode, key: &DocKey, version: u64, copy: Arc<ReplicaCopy>) {
    if dc.config.quota.bytes() == 0 {
        return;
    }
    let size = copy.body.len() as u64;
    let insertion = dc.store.lock().insert(key.clone(), version, size, copy, dc.now_ns());
    let gone: Vec<DocKey> = match insertion {
        Insertion::Stored { evicted } => evicted,
        Insertion::TooLarge { dropped_older: true, .. } => vec![key.clone()],
        Insertion::TooLarge { .. } => Vec::new(),
    };
    if dc.config.method == QuotaMethod::DeletionAware {
        for k in gone {
            dc.queue(Outgoing::Deletion { home: k.home, path: k.path.to_string() });
        }
    }
}

/// Fetch `key` from its home and store it; concurrent callers for one key share one fetch.
pub async fn fetch_joined(
    dc: &DcNode,
    pool: &OriginPool,
    flights: &FetchFlights,
    key: &DocKey,
) -> FetchOutcome {
    loop {
        let joined = {
            let mut map = flights.flights.lock();
            match map.get(key) {
                Some(rx) => Err(rx.clone()),
                None => {
                    let (tx, rx) = watch::channel(None);
                    map.insert(key.clone(), rx);
                    Ok(tx)
                }
            }
        };
        match joined {
            Err(mut rx) => {
                if let Ok(v) = rx.wait_for(Option::is_some).await
                    && let Some(outcome) = v.clone()
                {
                    return outcome;
                }
                // The fetching request went away before finishing: try again.
            }
            Ok(tx) => {
                let guard = FlightGuard { flights, key };
                let outcome = fetch_and_store(dc, pool, key).await;
                drop(guard);
                let _ = tx.send(Some(outcome.clone()));
                return outcome;
            }
        }
    }
}

async fn fetch_and_store(dc: &DcNode, pool: &OriginPool, key: &DocKey) -> FetchOutcome {
    match fetch_from_home(dc, pool, key.home, &key.path, None).await {
        Ok(Fetched::Fresh { body, version, content_type }) => {
            add(&dc.stats.fetches_ok, 1);
            let copy = Arc::new(make_copy(dc, key.home, &key.path, body, content_type));
            store_copy(dc, key, version, copy.clone());
            Ok(Copied::Copy(copy))
        }
        Ok(Fetched::Answered(status)) => Ok(Copied::Answered(status)),
        Ok(Fetched::NotModified) => {
            dc.stats.failed(FetchFailure::BadReply);
            Err(FetchFailure::BadReply)
        }
        Err(why) => {
            tracing::debug!(home = dc.name(key.home), path = %key.path, reason = why.label(), "DC fetch failed");
            dc.stats.failed(why);
            Err(why)
        }
    }
}

/// Removes a flight from the table however its fetch ends.
struct FlightGuard<'a> {
    flights: &'a FetchFlights,
    key: &'a DocKey,
}

impl Drop for FlightGuard<'_> {
    fn drop(&mut self) {
        self.flights.flights.lock().remove(self.key);
    }
}
