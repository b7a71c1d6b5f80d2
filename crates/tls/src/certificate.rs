//! One certificate chain and its private key, read from PEM files and checked before they are
//! served: the key file not open to others, the key matching the certificate, and the
//! certificate within its validity dates at `now` (passed in, so a test sets the clock).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use x509_parser::extensions::GeneralName;
use x509_parser::time::ASN1Time;

use crate::error::TlsError;

/// A certificate ready to serve, with what the status reports of it.
#[derive(Clone, Debug)]
pub struct LoadedCertificate {
    pub certified: Arc<CertifiedKey>,
    /// The DNS names of its subjectAltName (lower case; `*.example.com` for a wildcard): what
    /// SNI selects it by.
    pub names: Vec<String>,
    /// The end of its validity, in seconds since the epoch.
    pub not_after_unix: i64,
    pub cert_path: PathBuf,
}

/// Read and check the chain in `cert_path` (end-entity certificate first) and the key in
/// `key_path` at time `now`. Refused, naming the file: a key file that others can read or write,
/// an unreadable file, no certificate, a key that does not parse or does not match, a
/// certificate not yet valid or expired.
pub fn load_certificate(
    cert_path: &Path,
    key_path: &Path,
    now: SystemTime,
) -> Result<LoadedCertificate, TlsError> {
    check_key_permissions(key_path)?;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert_path)
        .map_err(|e| read_error(cert_path, e))?
        .collect::<Result<_, _>>()
        .map_err(|e| read_error(cert_path, e))?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate { path: cert_path.to_path_buf() });
    }
    let key = PrivateKeyDer::from_pem_file(key_path)
        .map_err(|e| TlsError::BadKey { path: key_path.to_path_buf(), message: e.to_string() })?;
    let (names, not_before, not_after) = inspect(cert_path, &chain[0])?;
    check_dates(cert_path, now, not_before, not_after)?;
    let provider = rustls::crypto::ring::default_provider();
    let certified = CertifiedKey::from_der(chain, key, &provider).map_err(|e| match e {
        rustls::Error::InconsistentKeys(_) => {
            TlsError::KeyMismatch { cert: cert_path.to_path_buf(), key: key_path.to_path_buf() }
        }
        other => TlsError::BadKey { path: key_path.to_path_buf(), message: other.to_string() },
    })?;
    Ok(LoadedCertificate {
        certified: Arc::new(certified),
        names,
        not_after_unix: not_after.timestamp(),
        cert_path: cert_path.to_path_buf(),
    })
}

fn read_error(path: &Path, e: rustls::pki_types::pem::Error) -> TlsError {
    TlsError::Read { path: path.to_path_buf(), message: e.to_string() }
}

/// A private key must not be open to others (group access is allowed: Debian's `ssl-cert`
/// group reads `/etc/ssl/private`).
pub(crate) fn check_key_permissions(key_path: &Path) -> Result<(), TlsError> {
    let meta = std::fs::metadata(key_path)
        .map_err(|e| TlsError::Read { path: key_path.to_path_buf(), message: e.to_string() })?;
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o007 != 0 {
        return Err(TlsError::KeyReadableByOthers { path: key_path.to_path_buf(), mode });
    }
    Ok(())
}

/// The subjectAltName DNS names and the validity of a certificate.
fn inspect(path: &Path, cert: &CertificateDer<'_>) -> Result<(Vec<String>, ASN1Time, ASN1Time), TlsError> {
    let bad = |message: String| TlsError::BadCertificate { path: path.to_path_buf(), message };
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).map_err(|e| bad(e.to_string()))?;
    let validity = parsed.validity();
    let names = match parsed.subject_alternative_name().map_err(|e| bad(e.to_string()))? {
        Some(san) => san
            .value
            .general_names
            .iter()
            .filter_map(|n| match n {
                GeneralName::DNSName(d) => Some(d.to_ascii_lowercase()),
                _ => None,
            })
            .collect(),
        None => Vec::new(),
    };
    Ok((names, validity.not_before, validity.not_after))
}

fn check_dates(
    path: &Path,
    now: SystemTime,
    not_before: ASN1Time,
    not_after: ASN1Time,
) -> Result<(), TlsError> {
    let now = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    let when = if now < not_before.timestamp() {
        "is not valid yet"
    } else if now > not_after.timestamp() {
        "has expired"
    } else {
        return Ok(());
    };
    Err(TlsError::OutOfDate {
        path: path.to_path_buf(),
        when,
        not_before: not_before.to_string(),
        not_after: not_after.to_string(),
    })
}
