//! What the tests of several crates share (a dev-dependency only, never a library's own
//! dependency): the `locus` binary of this build, a watchdog for tests that must not hang, a
//! raw HTTP/1.1 client that reads responses with `locus-http`, a bounded wait for a condition,
//! loopback ports never handed out twice, a connected pair of loopback sockets, the guard of the tests that need root, and TLS
//! material (a self-signed certificate, a client trusting it).

mod http_client;
mod locus_binary;
mod ports;
mod root_guard;
mod socket_pair;
mod tls_fixture;
mod wait;
mod watchdog;

pub use http_client::{Client, ClientStream, READ_TIMEOUT, Response, TlsClientStream, get};
pub use locus_binary::{LOCUS_BIN_VAR, locus_binary};
pub use ports::free_port;
pub use root_guard::{require_namespaces, require_root};
pub use socket_pair::tcp_pair;
pub use tls_fixture::{client_config, client_config_with, write_pair};
pub use wait::{WAIT_LIMIT, wait_until};
pub use watchdog::watchdog;
