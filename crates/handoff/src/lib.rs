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
//!   mutual HMAC-SHA256 challenge–response on a shared [`ControlKey`]; every frame carries a
//!   tag over (session, direction, sequence number, payload), so frames cannot be forged,
//!   replayed or reordered. [`ControlChannel::into_blocking`] moves one onto a blocking
//!   socket for a thread of its own, optionally busy-polling ([`BlockingControlChannel`]).
//!
//! Measured on the 2-vCPU VM this was written on (kernel 6.18; shared with other builds, so
//! the quietest of several runs): a syscall costs ~0.2 µs bare, ~0.4 µs for a repair
//! socket option, a loopback TCP send ~3.8 µs (the receiver's processing runs in it); the
//! dump ~7 µs (12 calls), the restore onto a socket made and bound ahead ~7.5 µs (10 calls).
//! The whole handoff (`locus bench handoff`), over 10,000 handoffs with the control channel on
//! blocking sockets ([`BlockingControlChannel`]): 30.2 µs median, 83 µs p99 with both threads
//! on one CPU (35.9 µs before, with tokio in the loop); about the same when the scheduler
//! places them (it keeps them together; 77–90 µs before); 25.1 µs median with a CPU per
//! thread, both busy-polling (p99 in the ms while other processes compete for the CPUs).
//!
//! # The protocol of one handoff
//! The switch sets the forwarder entry of the connection to *hold* (the client's packets are
//! dropped; it retransmits), dumps the connection ([`dump_connection`], with the request it
//! read put back in front), sends `HandOver`; the node restores it and answers `Ready` (or
//! `Refused`); the switch flips the entry to *forward* and sends `Go`; only then does the
//! node write (first the unsent part of the send queue, then its response). The node reports
//! `Closed` when the client connection ends. Between requests a node may ask `Route` (the
//! switch answers `RouteTo`) or give the connection back with `Rehandoff`.
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
