//! `PeerRequests`: which requests of the cluster's other nodes this node answers on its main
//! listener, apart from clients' (never counted as client requests), decided once at start by
//! its mode — cooperative caching's under `/locus/coop/`, DC mode's control requests under
//! `/~dc/`, or none — and the one place such a request is recognised and handed to its mode.

use std::net::IpAddr;

use locus_http::RequestHead;

use crate::context::WorkerContext;
use crate::coop::wire::PREFIX as COOP_PREFIX;
use crate::dc::control::CONTROL_PREFIX as DC_CONTROL_PREFIX;
use crate::out_queue::OutQueue;

/// The peers' requests a node answers; see the module documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerRequests {
    /// Every request is a client's.
    None,
    /// Cooperative caching's lookups, fetches and notices (`[coop]`).
    Coop,
    /// DC mode's control requests (`[dc]`).
    DcControl,
}

impl PeerRequests {
    /// The peers' requests of a node with cooperative caching (`coop`) or DC mode (`dc`); the
    /// configuration allows one of them at most.
    pub fn new(coop: bool, dc: bool) -> PeerRequests {
        match (coop, dc) {
            (_, true) => PeerRequests::DcControl,
            (true, false) => PeerRequests::Coop,
            (false, false) => PeerRequests::None,
        }
    }

    /// Whether a request for `path` (the target as sent) is a peer's request answered apart.
    pub fn claims(self, path: &str) -> bool {
        match self {
            PeerRequests::None => false,
            PeerRequests::Coop => path.starts_with(COOP_PREFIX),
            PeerRequests::DcControl => path.starts_with(DC_CONTROL_PREFIX),
        }
    }

    /// Queue the answer to a claimed request from `ip`; false if the connection closes after it.
    pub async fn answer(
        self,
        w: &WorkerContext,
        ip: IpAddr,
        head: &RequestHead,
        buf: &[u8],
        out: &mut OutQueue,
    ) -> bool {
        match self {
            PeerRequests::None => false,
            PeerRequests::Coop => crate::coop::serve::answer(w, ip, head, buf, out),
            PeerRequests::DcControl => crate::dc::control::answer(w, ip, head, buf, out).await,
        }
    }
}
