//! One-way TCP handoff for Locus: moving a live, established TCP connection from the switch to
//! a node (or from node to node) with Linux TCP_REPAIR, and the authenticated control channel
//! over which the switch and the node agents coordinate it.
//!
//! # What is here
//! - [`TcpRepairState`]: a connection's full state, with a compact binary encoding.
//! - [`dump_connection`] / [`restore_connection`]: the holder's and the receiver's halves,
//!   in the orders verified on kernel 6.18. For the critical path: [`dump_connection_in_place`]
//!   (close later, or [`resume_connection`] if the node refuses; [`disconnect_dumped`] on one
//!   host; [`dump_connection_in_place_at`] when the addresses are known) and
//!   [`restore_prepared`] onto a [`PreparedSocket`] made (and bound, [`PreparedSocket::bound`])
//!   ahead.
//! - [`ControlChannel`] / [`ControlListener`]: framed [`HandoffMessage`]s over TCP, after a
//!   mutual HMAC-SHA256 challenge–response on a shared [`ControlKey`]; every frame is sealed
//!   with AES-256-GCM under a per-session, per-direction key (HKDF from the control key and
//!   both nonces) with its sequence number as nonce, so frames are secret (a TLS session's
//!   traffic secrets travel in them) and cannot be forged, replayed or reordered. [`ControlChannel::into_blocking`] moves one onto a blocking
//!   socket for a thread of its own, optionally busy-polling ([`BlockingControlChannel`]).
//!
//! What a handoff costs (dump, restore, the whole exchange) is measured by `locus bench
//! handoff`; the figures are in `docs/performance.md`.
//!
//! # The protocol of one handoff
//! `HandOver` → `Ready` | `Refused` → (the switch forwards the client's packets) → `Go`; later
//! `Route` → `RouteTo`, `Rehandoff`, `Closed`. The whole sequence, message by message, with
//! who holds the connection at each step, is in `docs/modes.md`.
//!
//! # Why raw libc
//! This is the product's data path, and TCP_REPAIR has no safe wrapper in std, socket2 or
//! tokio: the repair socket options, the queue ioctls and the exact order of the calls are
//! written by hand on libc. Every `unsafe` block wraps exactly one libc call and says why it
//! is sound; everything else is safe Rust.

mod control;
mod dump;
mod error;
mod repair_state;
mod restore;
mod sockopt;

pub use control::auth::ControlKey;
pub use control::blocking::BlockingControlChannel;
pub use control::channel::{ControlChannel, ControlConfig, ControlListener, ControlReceiver, ControlSender};
pub use control::message::{ConnectionId, HandoffHint, HandoffMessage};
pub use dump::{
    disconnect_dumped, dump_connection, dump_connection_in_place, dump_connection_in_place_at,
    resume_connection,
};
pub use error::{ControlError, DecodeError, DumpError, Errno, RepairError, TcpStateName};
pub use repair_state::{STATE_HEADER_LEN, TcpRepairState, TcpRepairWindow};
pub use restore::{PreparedSocket, RestoreOptions, restore_connection, restore_prepared, sending_mss};
