//! `TlsError`: what went wrong reading or checking TLS material, naming the file.

use std::path::PathBuf;

/// Why TLS material was refused.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{path}: {message}")]
    Read { path: PathBuf, message: String },
    #[error("{path}: no certificate in the file (expected PEM `BEGIN CERTIFICATE` blocks)")]
    NoCertificate { path: PathBuf },
    #[error("{path}: not a private key this server can use: {message}")]
    BadKey { path: PathBuf, message: String },
    #[error("{key}: the key does not match the certificate in {cert}")]
    KeyMismatch { cert: PathBuf, key: PathBuf },
    #[error("{path}: the certificate {when} (valid from {not_before} to {not_after})")]
    OutOfDate { path: PathBuf, when: &'static str, not_before: String, not_after: String },
    #[error(
        "{path}: the private key is open to others (mode {mode:o}); make it readable by its owner (chmod 600) or group (chmod 640) only"
    )]
    KeyReadableByOthers { path: PathBuf, mode: u32 },
    #[error("{path}: the certificate cannot be parsed: {message}")]
    BadCertificate { path: PathBuf, message: String },
    #[error("no certificate: configure at least one certificate and key")]
    NoCertificates,
    #[error("TLS configuration: {0}")]
    Config(String),
}
