//! TLS for Locus's switch and node: a certificate and its key read from PEM files and refused
//! when they cannot be trusted to serve (`certificate`), certificates chosen by SNI with a
//! default (`sni`), and the rustls server configuration (TLS 1.3 and 1.2, ALPN, no 0-RTT)
//! built from them (`server_config`), session-ticket keys a cluster shares (`tickets`), a
//! listener's settings as configuration files give them (`settings`), the connection
//! itself, driven by hand over rustls (`stream`), and a listener's live state: reloadable
//! configuration, handshake bound and counters (`service`).

mod certificate;
mod cleartext;
mod continued;
mod error;
mod export;
mod record_layer;
mod server_config;
mod service;
mod settings;
mod sni;
mod stream;
mod tickets;

pub use certificate::{LoadedCertificate, load_certificate};
pub use cleartext::{answer_cleartext, cleartext_answer};
pub use error::TlsError;
pub use export::{ExportError, SessionExport, SessionSecrets, accept_exportable};
pub use record_layer::{
    Direction, KEY_UPDATES_IN_A_ROW, MAX_PLAINTEXT, Opened, RecordError, RecordLayer, Suite,
};
pub use server_config::{ALPN_H2, ALPN_HTTP1, server_config};
pub use service::{CertificateSummary, PreparedTls, TlsService, TlsStatus, counter_family};
pub use settings::{CertificateFiles, TlsSettings, UnknownSni};
pub use sni::{SniCertificates, UnknownName};
pub use stream::{HandshakeFailure, Negotiated, TlsStream, accept, connect};
pub use tickets::{KEYS_USED, TicketKeys};
