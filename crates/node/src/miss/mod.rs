//! Cache misses, loaded once per document (single flight) from the one source the node is
//! configured with, decided when a worker starts (`MissSource`): the document root, charged
//! to the storage model if there is one (`storage`); peers' memory before the document root,
//! with cooperative caching (`peers`); or the origin (`origin`).

mod origin;
mod peers;
mod storage;

use std::sync::Arc;

use crate::context::WorkerContext;
use crate::coop::fetch::CoopWorker;
use crate::coop::node::CoopNode;
use crate::origin::{OriginAddr, OriginPool};
use crate::out_queue::OutQueue;
use crate::request_view::{RequestView, Served};

/// Where one worker's misses come from, with the connections that source needs.
pub enum MissSource {
    /// The document root (through the storage model, if any).
    Storage,
    /// Peers' memory first, then the document root: cooperative caching's connections.
    Peers(CoopWorker),
    /// The origin: this worker's connections to it.
    Origin(OriginPool),
}

impl MissSource {
    /// The source a node with `origin` or cooperative caching (`coop`) uses; the
    /// configuration allows one of them at most.
    pub fn new(origin: Option<&OriginAddr>, coop: Option<&Arc<CoopNode>>) -> MissSource {
        match (origin, coop) {
            (Some(origin), _) => MissSource::Origin(OriginPool::new(origin.clone())),
            (None, Some(coop)) => MissSource::Peers(CoopWorker::new(coop.clone())),
            (None, None) => MissSource::Storage,
        }
    }

    /// The connections to the origin, when misses go there.
    pub fn origin_pool(&self) -> Option<&OriginPool> {
        match self {
            MissSource::Origin(pool) => Some(pool),
            MissSource::Storage | MissSource::Peers(_) => None,
        }
    }
}

/// Answer a miss from this worker's source and queue or stream the response.
pub async fn serve_miss(w: &WorkerContext, req: &RequestView<'_>, out: &mut OutQueue) -> Served {
    match &w.miss {
        MissSource::Storage => storage::serve_file_miss(w, req, None, out).await,
        MissSource::Peers(coop) => storage::serve_file_miss(w, req, Some(coop), out).await,
        MissSource::Origin(pool) => origin::serve_origin_miss(w, pool, req, out).await,
    }
}
