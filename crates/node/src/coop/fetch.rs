//! The requesting side of cooperative caching: `CoopWorker`, one per worker thread with a
//! keep-alive connection pool per peer, finds a document missed here in a peer's memory —
//! one round trip to the home (which answers with the document when it holds it, else with
//! its holders), or none when this node is the home — and fetches it from a holder, all under
//! the view in force when the miss began (the pools follow a reload's new view). Every
//! answer is verified (status, validator, length) before use; a peer that times out, is
//! down or answers garbage is avoided for a while; whatever goes wrong the caller reads
//! storage, so a cooperative miss never fails a client request.

use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

use crate::coop::node::CoopNode;
use crate::coop::stats::{PeerFailure, add};
use crate::coop::view::CoopView;
use crate::coop::wire::{CoopAsk, Validator, document_target};
use crate::origin::{OriginError, OriginHeaders, OriginPool, OriginReply};

/// Holders tried after the home, at most (each try is bounded by the timeout).
const MAX_HOLDER_TRIES: usize = 2;

/// What one try at a peer gave.
#[derive(Debug)]
enum PeerAnswer {
    /// The document, verified.
    Document(Bytes),
    /// The home does not hold it; these members do.
    Holders(Vec<usize>),
    /// Nothing usable (the failure is counted).
    Nothing,
}

/// One pool per member of a view (`None` for this node).
type Pools = Arc<Vec<Option<Arc<OriginPool>>>>;

/// A view and this worker's pools to its members.
struct ViewPools {
    view: Arc<CoopView>,
    pools: Pools,
}

/// Cooperative caching for one worker thread.
pub struct CoopWorker {
    pub coop: Arc<CoopNode>,
    /// The pools of the view last used (made again, keeping the peers' that stay, when a
    /// reload put in another).
    pools: Mutex<ViewPools>,
}

impl CoopWorker {
    pub fn new(coop: Arc<CoopNode>) -> CoopWorker {
        let view = coop.view();
        let pools = Arc::new(coop.pools(&view, &[]));
        CoopWorker { coop, pools: Mutex::new(ViewPools { view, pools }) }
    }

    /// The view in force and this worker's pools to its members.
    fn current(&self) -> (Arc<CoopView>, Pools) {
        let view = self.coop.view();
        let mut held = self.pools.lock();
        if !Arc::ptr_eq(&held.view, &view) {
            let pools = Arc::new(self.coop.pools(&view, &held.pools));
            *held = ViewPools { view: view.clone(), pools };
        }
        (view, held.pools.clone())
    }

    /// The version `v` of `key` from a peer's memory, or `None`: read storage.
    pub async fn fetch_remote(&self, key: &str, v: Validator) -> Option<Bytes> {
        let c = &*self.coop;
        let (view, pools) = self.current();
        if v.len > view.max_object || view.peers.is_empty() {
            return None;
        }
        let at = Ask { view: &view, pools: &pools, key, v };
        let m = &view.membership;
        let home = m.home(key);
        let holders = if home == m.me() {
            view.directory.holders(key)
        } else {
            if !c.usable(&view, home) {
                return None;
            }
            match self.ask(&at, home, CoopAsk::Lookup).await {
                PeerAnswer::Document(body) => return Some(body),
                PeerAnswer::Holders(holders) => holders,
                PeerAnswer::Nothing => return None,
            }
        };
        let candidates = m.try_order(holders).into_iter().filter(|&h| h != home);
        for holder in candidates.take(MAX_HOLDER_TRIES) {
            if !c.usable(&view, holder) {
                continue;
            }
            if let PeerAnswer::Document(body) = self.ask(&at, holder, CoopAsk::Fetch).await {
                return Some(body);
            }
        }
        None
    }

    /// One request to member `member`, within the timeout.
    async fn ask(&self, at: &Ask<'_>, member: usize, ask: CoopAsk) -> PeerAnswer {
        let (c, view, v) = (&*self.coop, at.view, at.v);
        let Some(pool) = at.pools.get(member).and_then(Option::as_ref) else {
            return PeerAnswer::Nothing;
        };
        let target = document_target(ask, at.key, v, &view.authority);
        let reply = tokio::time::timeout(view.timeout, pool.fetch_with(&target, b"", v.len)).await;
        let failure = match reply {
            Err(_) | Ok(Err(OriginError::Timeout)) => PeerFailure::Timeout,
            Ok(Err(OriginError::Connect(_) | OriginError::Io(_) | OriginError::ClosedEarly)) => {
                PeerFailure::Refused
            }
            Ok(Err(OriginError::Malformed(_) | OriginError::TooLarge(_) | OriginError::Truncated)) => {
                PeerFailure::BadReply
            }
            // Longer than the document: not what was asked for.
            Ok(Ok(OriginReply::Streaming { .. })) => PeerFailure::BadReply,
            Ok(Ok(OriginReply::Buffered { headers, body })) => match headers.status {
                200 => match verify(&headers, &body, v) {
                    Ok(()) => {
                        add(&c.stats.documents_from_peers, 1);
                        add(&c.stats.bytes_from_peers, body.len() as u64);
                        return PeerAnswer::Document(body);
                    }
                    Err(why) => why,
                },
                404 if ask == CoopAsk::Lookup => return PeerAnswer::Holders(holders(view, &headers)),
                404 => PeerFailure::NotHeld,
                403 if headers.peer_refused.is_some() => PeerFailure::Unauthorized,
                _ => PeerFailure::BadReply,
            },
        };
        let peer = view.membership.authority(member);
        tracing::debug!(peer, key = at.key, why = failure.label(), "coop try failed");
        c.failed(view, member, failure);
        PeerAnswer::Nothing
    }
}

/// What one miss asks its peers, under which view.
struct Ask<'a> {
    view: &'a CoopView,
    pools: &'a [Option<Arc<OriginPool>>],
    key: &'a str,
    v: Validator,
}

/// The members of `view` named in a lookup's holder list (unknown names are left out).
fn holders(view: &CoopView, headers: &OriginHeaders) -> Vec<usize> {
    let list = headers.coop_holders.as_deref().unwrap_or("");
    list.split(',').filter_map(|a| view.membership.index_of(a.trim())).collect()
}

/// Whether a 200 answer carries version `v`, completely.
fn verify(headers: &OriginHeaders, body: &Bytes, v: Validator) -> Result<(), PeerFailure> {
    let Some(answered) = headers.coop_validator.as_deref() else { return Err(PeerFailure::BadReply) };
    match answered.parse::<Validator>() {
        Ok(a) if a != v => Err(PeerFailure::Stale),
        Ok(_) if body.len() as u64 != v.len => Err(PeerFailure::BadReply),
        Ok(_) => Ok(()),
        Err(()) => Err(PeerFailure::BadReply),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(validator: Option<&str>) -> OriginHeaders {
        OriginHeaders { status: 200, coop_validator: validator.map(str::to_string), ..Default::default() }
    }

    #[test]
    fn answers_are_used_only_with_the_same_validator_and_length() {
        let v = Validator { len: 3, mtime_ns: 9 };
        let body = Bytes::from_static(b"abc");
        assert_eq!(verify(&headers(Some("3-9")), &body, v), Ok(()));
        assert_eq!(verify(&headers(Some("3-8")), &body, v), Err(PeerFailure::Stale));
        assert_eq!(verify(&headers(Some("3-9")), &Bytes::from_static(b"ab"), v), Err(PeerFailure::BadReply));
        assert_eq!(verify(&headers(None), &body, v), Err(PeerFailure::BadReply));
        assert_eq!(verify(&headers(Some("x")), &body, v), Err(PeerFailure::BadReply));
    }
}
