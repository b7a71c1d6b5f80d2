//! The one-way switch's packet forwarder: a tc eBPF program (`bpf/forward.c`, compiled by
//! `build.rs`, loaded with aya) on clsact ingress of the switch's interface, and `Forwarder`, its
//! user-space handle. It sends a client's packets of a handed-off connection (handoff mode) or of
//! a connection it directed itself at SYN time (l4 mode, LVS-DR style) straight to the node by
//! rewriting both MACs and redirecting; the node answers the client directly.
//!
//! # Handoff mode
//! Per handed-off connection (`key = ConnKey::new(client, vip)`, `node = NodeSlot { mac,
//! ifindex }`): `hold(key, node)` before the dump, `forward(key)` once the node is Ready and
//! before Go, `repoint` for a re-handoff of an idle connection, `remove(key)` a second or so
//! after `Closed`, `expire(idle)` for closes never reported; a pure SYN on a held key deletes
//! the entry (port reuse). `forward`/`repoint` fail with `ForwarderError::NoEntry` when the
//! entry vanished: abort that handoff. Why each step comes when it does: `docs/modes.md`.
//!
//! # l4 mode
//! `set_nodes`, `set_selection` (a [`NodeTable`]: rr, wrr, lc), `set_selection_mode` and
//! `set_services`: a pure SYN to a service with no entry gets a node from the table and a FORWARD
//! entry made by the program; later packets follow it. A non-SYN with no entry goes to the
//! switch's stack, which answers RST (no socket): a client whose entry expired or was lost
//! learns so at once. Entries are deleted by `expire`.
//!
//! # Threads and namespaces
//! Every method takes `&self` (map writes are single `bpf(2)` commands), so one `Forwarder` can
//! be shared by the switch's tasks. `attach` runs in the calling thread's network namespace; the
//! forwarder keeps a handle on it (which also keeps the namespace alive while the forwarder
//! lives) and does later netlink work there, whichever thread calls or drops it.
//!
//! # Restarts
//! With `ForwarderOptions::pin_dir` the maps are pinned there and adopted by the next
//! `Forwarder` with the same directory. Dropping a forwarder detaches the program (entries stay
//! pinned); `keep_running` leaves it attached so forwarding continues while the switch restarts.

mod error;
mod forwarder;
mod maps;
mod net;
mod sys;
mod table;

pub use error::{ForwarderError, Result};
pub use forwarder::{
    Forwarder, ForwarderOptions, FrameRun, NodeSlot, SelectionMode, Stats, TC_PRIORITY, Verdict,
};
pub use maps::{
    Action, ConnEntry, ConnKey, DEFAULT_MAX_ENTRIES, FLAG_L4, MAX_NODES, MAX_SELECTION, MAX_SERVICES,
    NODE_NONE,
};
pub use net::{
    Interface, MacAddr, Neighbour, interface, interface_by_index, neighbour, peer_in_other_namespace,
    resolve_neighbour,
};
pub use table::NodeTable;
