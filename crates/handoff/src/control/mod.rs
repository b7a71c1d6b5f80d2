//! The control channel between the switch and the node agents: the messages
//! (`message`), the key, handshake and per-frame tags (`auth`), the async channel over TCP
//! that puts them together (`channel`), and its blocking form for a thread of its own
//! (`blocking`).

pub(crate) mod auth;
pub(crate) mod blocking;
pub(crate) mod channel;
pub(crate) mod message;
