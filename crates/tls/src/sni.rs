//! `SniCertificates`: which certificate a handshake gets, by the name the client asked for
//! (SNI): an exact name, then a wildcard one label deep (`*.example.com`), then the default
//! (the first certificate configured) or, if so configured, none (the handshake fails with an
//! alert). A client that sends no name gets the default.

use std::collections::HashMap;
use std::sync::Arc;

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::certificate::LoadedCertificate;
use crate::error::TlsError;

/// What a handshake naming no configured certificate gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum UnknownName {
    /// The default certificate (NGINX's and HAProxy's behaviour).
    #[default]
    Default,
    /// No certificate: the handshake fails with an alert.
    Refuse,
}

/// The configured certificates, by name.
#[derive(Debug)]
pub struct SniCertificates {
    by_name: HashMap<String, Arc<CertifiedKey>>,
    default: Arc<CertifiedKey>,
    unknown: UnknownName,
}

impl SniCertificates {
    /// The certificates in configuration order (the first is the default); a name two
    /// certificates carry goes to the first.
    pub fn new(certs: &[LoadedCertificate], unknown: UnknownName) -> Result<SniCertificates, TlsError> {
        let default = certs.first().ok_or(TlsError::NoCertificates)?.certified.clone();
        let mut by_name = HashMap::new();
        for c in certs {
            for n in &c.names {
                by_name.entry(n.clone()).or_insert_with(|| c.certified.clone());
            }
        }
        Ok(SniCertificates { by_name, default, unknown })
    }

    /// The certificate for `server_name` (as the client sent it, any case).
    pub fn choose(&self, server_name: Option<&str>) -> Option<Arc<CertifiedKey>> {
        let Some(name) = server_name else { return Some(self.default.clone()) };
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        let wildcard = name.split_once('.').map(|(_, rest)| format!("*.{rest}"));
        self.by_name
            .get(&name)
            .or_else(|| wildcard.and_then(|w| self.by_name.get(&w)))
            .cloned()
            .or_else(|| (self.unknown == UnknownName::Default).then(|| self.default.clone()))
    }
}

impl ResolvesServerCert for SniCertificates {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.choose(hello.server_name())
    }
}
