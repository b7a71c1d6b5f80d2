//! `NodeLink`: one worker's authenticated control channel to one node's agent, with the
//! HandOver replies (Ready or Refused) waiting on it; `WorkerLinks`: a worker's links to
//! every agent, with the switch state they serve.

use crate::state::Shared;
use locus_core::NodeId;
use locus_handoff::{ConnectionId, ControlSender, HandoffMessage};
use std::cell::RefCell;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use tokio::sync::oneshot;

/// A node's answer to a HandOver.
pub(super) enum Reply {
    Ready,
    Refused(String),
}

/// One worker's control channel to one node's agent.
pub struct NodeLink {
    pub(super) node: NodeId,
    pub(super) addr: SocketAddr,
    pub(super) sender: RefCell<Option<Rc<tokio::sync::Mutex<ControlSender>>>>,
    pub(super) waiting: RefCell<HashMap<ConnectionId, oneshot::Sender<Reply>>>,
}

impl NodeLink {
    pub fn is_up(&self) -> bool {
        self.sender.borrow().is_some()
    }

    pub(super) async fn send(&self, message: &HandoffMessage) -> Result<(), String> {
        let sender = self.sender.borrow().clone().ok_or("no control channel to the node")?;
        let mut sender = sender.lock().await;
        sender.send(message).await.map_err(|e| e.to_string())
    }
}

/// The links of one worker, by node slot (none for a node without an agent), and the switch
/// state they serve. A reload that adds nodes adds their links (`add_missing`).
pub struct WorkerLinks {
    pub(super) shared: Arc<Shared>,
    links: RefCell<Vec<Option<Rc<NodeLink>>>>,
}

impl WorkerLinks {
    /// The links for `shared`'s nodes (none unless in handoff mode).
    pub fn new(shared: &Arc<Shared>) -> Option<WorkerLinks> {
        shared.handoff.as_ref()?;
        let links = WorkerLinks { shared: shared.clone(), links: RefCell::new(Vec::new()) };
        links.add_missing();
        Some(links)
    }

    /// Links for the node slots that have none yet (a reload added them); the new ones, to
    /// start. A retired node gets none.
    pub fn add_missing(&self) -> Vec<Rc<NodeLink>> {
        let table = self.shared.nodes.all();
        let mut links = self.links.borrow_mut();
        let mut added = Vec::new();
        for (i, info) in table.iter().enumerate().skip(links.len()) {
            let link = info.handoff.filter(|_| !info.is_retired()).map(|addr| {
                Rc::new(NodeLink {
                    node: NodeId(i as u32),
                    addr,
                    sender: RefCell::new(None),
                    waiting: RefCell::new(HashMap::new()),
                })
            });
            added.extend(link.clone());
            links.push(link);
        }
        added
    }

    /// The link to `node`.
    pub fn get(&self, node: NodeId) -> Option<Rc<NodeLink>> {
        self.links.borrow().get(node.index()).cloned().flatten()
    }

    /// Whether the control channel to `node` is up.
    pub fn is_up(&self, node: NodeId) -> bool {
        self.get(node).is_some_and(|l| l.is_up())
    }
}
