//! HTTP/2 to clients: over TLS when ALPN agreed on `h2`, in cleartext when a connection opens
//! with the HTTP/2 preface (h2c with prior knowledge; `Upgrade: h2c` stays refused). The h2
//! crate speaks the protocol; every stream is a request of its own, dispatched by the policy
//! and exchanged with its node over the worker's pooled HTTP/1.1 connections. A one-way mode
//! serves HTTP/2 two-way: multiplexed streams cannot move with their connection one by one.

mod client_io;
mod connection;
mod counters;
mod frame_meter;
mod request;
mod response;
mod settings;
mod stream;

pub use connection::serve;
pub use counters::H2Counters;
pub use frame_meter::PREFACE;
pub use settings::Http2Settings;

/// Whether `buf` (a connection's first bytes) could be, or is, the HTTP/2 preface: `None`
/// when more bytes are needed to tell.
pub fn starts_with_preface(buf: &[u8]) -> Option<bool> {
    let n = buf.len().min(PREFACE.len());
    if buf[..n] != PREFACE[..n] {
        Some(false)
    } else if n == PREFACE.len() {
        Some(true)
    } else {
        None
    }
}
