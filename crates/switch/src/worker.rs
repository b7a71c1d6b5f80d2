//! `Worker`: the state one worker thread's client sessions share (the node connection pool,
//! relay and read buffers, splice pipes, the access log, the tracker of its sessions, and in
//! handoff mode the worker's control channels to the node agents).

use crate::access_log::AccessLog;
use crate::handoff::WorkerLinks;
use crate::pool::{BufferPool, NodePool};
use crate::state::Shared;
use locus_io::{PipePool, TaskTracker};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

/// Per-worker-thread state shared by the worker's client sessions.
pub struct Worker {
    pub shared: Arc<Shared>,
    pub pool: RefCell<NodePool>,
    pub relay_buffers: RefCell<BufferPool>,
    pub read_buffers: RefCell<BufferPool>,
    pub pipes: RefCell<PipePool>,
    pub log: Option<RefCell<AccessLog>>,
    /// The client sessions of this worker, accepted or restored after a failed re-handoff:
    /// waited for at shutdown (`locus_io::drain`).
    pub sessions: TaskTracker,
    /// Handoff mode: this worker's control channels to the node agents.
    pub links: Option<Rc<WorkerLinks>>,
}

/// Size of a pooled read buffer (a request head and the start of its body).
const READ_BUFFER: usize = 8 * 1024;

impl Worker {
    pub fn new(shared: Arc<Shared>, log: Option<AccessLog>) -> Worker {
        let l = &shared.config().limits;
        let pool = NodePool::new(shared.nodes.len(), l.pool_per_node, l.pool_idle());
        let relay = BufferPool::new(l.buffer_bytes, 256);
        Worker {
            pool: RefCell::new(pool),
            relay_buffers: RefCell::new(relay),
            read_buffers: RefCell::new(BufferPool::new(READ_BUFFER, 1024)),
            pipes: RefCell::new(PipePool::new(crate::open_files::PIPES_KEPT)),
            log: log.map(RefCell::new),
            sessions: TaskTracker::new(),
            links: WorkerLinks::new(&shared).map(Rc::new),
            shared,
        }
    }
}
