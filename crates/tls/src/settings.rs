//! `TlsSettings`: a TLS listener's configuration as the switch's and the node's TOML (and
//! flags) give it — certificate and key files, what an unknown SNI gets, the shared ticket-key
//! file — and `TlsSettings::load`, which reads and checks every file and builds the rustls
//! server configuration, or names the file that is wrong.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::certificate::{LoadedCertificate, load_certificate};
use crate::error::TlsError;
use crate::server_config::server_config;
use crate::sni::{SniCertificates, UnknownName};
use crate::tickets::TicketKeys;

fn default_ticket_lifetime() -> u32 {
    // NGINX's and HAProxy's session timeout is shorter; rustls's own ticketer uses 6 hours.
    6 * 3600
}

/// One certificate chain (PEM, end-entity first) and its private key (PEM).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CertificateFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// A TLS listener's settings (`[tls]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsSettings {
    /// The certificates, the first the default (`[[tls.certificates]]`).
    pub certificates: Vec<CertificateFiles>,
    /// What a client naming no configured certificate gets: `default` or `refuse`.
    #[serde(default)]
    pub unknown_sni: UnknownSni,
    /// The cluster's shared session-ticket keys; absent: resumption through this process's
    /// session cache only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ticket_keys: Option<PathBuf>,
    /// The lifetime a ticket announces, in seconds.
    #[serde(default = "default_ticket_lifetime")]
    pub ticket_lifetime_s: u32,
    /// Handshakes in progress at once; past this, new connections are closed unanswered
    /// (a handshake flood costs CPU, never the connections already established).
    #[serde(default = "default_max_handshakes")]
    pub max_handshakes: usize,
}

fn default_max_handshakes() -> usize {
    1024
}

/// `unknown_sni` as written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UnknownSni {
    #[default]
    Default,
    Refuse,
}

impl TlsSettings {
    /// One certificate and key, the rest at their defaults (the node's `--tls-cert`/`--tls-key`).
    pub fn single(cert: PathBuf, key: PathBuf) -> TlsSettings {
        TlsSettings {
            certificates: vec![CertificateFiles { cert, key }],
            unknown_sni: UnknownSni::Default,
            ticket_keys: None,
            ticket_lifetime_s: default_ticket_lifetime(),
            max_handshakes: default_max_handshakes(),
        }
    }

    /// Read and check every file at time `now` and build the server configuration offering
    /// `alpn`; the error names the file that is wrong.
    pub fn load(&self, alpn: &[&[u8]], now: SystemTime) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        self.load_with_certificates(alpn, now).map(|(config, _)| config)
    }

    /// `load`, with the certificates as read.
    pub fn load_with_certificates(
        &self,
        alpn: &[&[u8]],
        now: SystemTime,
    ) -> Result<(Arc<rustls::ServerConfig>, Vec<LoadedCertificate>), TlsError> {
        let certs = self
            .certificates
            .iter()
            .map(|c| load_certificate(&c.cert, &c.key, now))
            .collect::<Result<Vec<_>, _>>()?;
        let unknown = match self.unknown_sni {
            UnknownSni::Default => UnknownName::Default,
            UnknownSni::Refuse => UnknownName::Refuse,
        };
        let tickets = match &self.ticket_keys {
            Some(path) => Some(Arc::new(TicketKeys::from_file(path, self.ticket_lifetime_s)?)),
            None => None,
        };
        let config = server_config(SniCertificates::new(&certs, unknown)?, alpn, tickets)?;
        Ok((config, certs))
    }
}
