//! The control channel between the switch and the node agents: the messages (`message`) and
//! the encoding of a TLS session that moves with a connection (`tls_state`), the key,
//! handshake and frame encryption (`auth`), the async channel over TCP that puts them
//! together (`channel`), and its blocking form for a thread of its own (`blocking`).

pub(crate) mod auth;
pub(crate) mod blocking;
pub(crate) mod channel;
pub(crate) mod message;
pub(crate) mod tls_state;
