//! Binary upgrade: a new switch process takes the running one's listening sockets over its
//! control socket (SCM_RIGHTS) instead of binding its own, so no connection is refused or
//! reset in between; the old one then stops accepting and drains under its drain timeout.
//! At most two generations run at once: a switch hands its sockets on only once its own
//! predecessor has exited. `handover` is the old side, `takeover` the new, `successor` what
//! SIGUSR2 starts.
//!
//! The exchange, on one control-socket connection: `takeover` → a JSON line (`ok`, the old
//! pid, the `ListenerCounts`) → `fds` → one byte carrying every descriptor → the new switch
//! starts on them → `ready` → the old one stops accepting; it keeps the connection open until
//! it exits, which is how the new one knows it is gone.

mod handover;
mod successor;
mod takeover;

pub use handover::hand_over;
pub use successor::start_successor;
pub use takeover::{Takeover, TakeoverError};

/// The line that asks for the sockets.
pub const TAKEOVER: &str = "takeover";

/// Most descriptors one handover carries (the kernel's SCM_MAX_FD is 253).
pub const MAX_FDS: usize = 253;
