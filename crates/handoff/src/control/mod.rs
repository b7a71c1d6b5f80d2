//! The control channel between the switch and the node agents: the messages
//! (`message`), the key, handshake and per-frame tags (`auth`), and the async channel over
//! TCP that puts them together (`channel`).

pub(crate) mod auth;
pub(crate) mod channel;
pub(crate) mod message;
