//! The one-way switch's packet forwarder: a tc eBPF program (`bpf/forward.c`, compiled by
//! `build.rs`, loaded with aya) on clsact ingress of the switch's interface, and `Forwarder`, its
//! user-space handle. It sends a client's packets of a handed-off connection (handoff mode) or of
//! a connection it directed itself at SYN time (l4 mode, LVS-DR style) straight to the node by
//! rewriting both MACs and redirecting; the node answers the client directly.
//!
//! # Handoff mode: what the switch does per connection
//! With `key = ConnKey::new(client, vip)` and `node = NodeSlot { mac, ifindex }` (the node's MAC
//! from [`resolve_neighbour`], the switch's interface from [`interface`]):
//! 1. `hold(key, node)` **before** the switch dumps the socket: from now on the client's packets
//!    are dropped (the client retransmits) instead of reaching the switch's stack, which would
//!    answer RST once the socket is gone.
//! 2. Dump, send the state to the node, wait for the node's *Ready* (socket restored).
//! 3. `forward(key)`: the client's packets now go to the node. Only then send *Go*: a node that
//!    wrote before the flip could miss the client's ACKs and FINs.
//! 4. Re-handoff (the node hands the connection on): `hold(key, next_node)` before the current
//!    holder dumps, `forward(key)` after the next node is Ready, then Go. `repoint(key, node)`
//!    does both in one step when no packet can be in flight (client idle between requests).
//! 5. After the node reports *Closed*: `remove(key)` a little later (a second or so: the last
//!    ACK of the close still has to reach the node). A pure SYN on a key still in the map means
//!    the client reused its port: the program deletes the entry itself and passes the SYN.
//! 6. Periodically `expire(idle)` for entries whose close was never reported.
//!
//! `forward`/`repoint` fail with `ForwarderError::NoEntry` if the entry vanished meanwhile (port
//! reuse or expiry): abort that handoff.
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
