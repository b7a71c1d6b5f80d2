//! TLS material for tests: a self-signed certificate and its key written as an operator would
//! give them (key mode 600), and a client configuration that trusts exactly that certificate.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{CertificateParams, KeyPair, date_time_ymd};

/// A self-signed ECDSA P-256 certificate for `names`, valid from the first of January of
/// `years.0` to that of `years.1`, written as `<stem>.crt` and `<stem>.key` (mode 600) under
/// `dir`: the two paths and the certificate's PEM.
pub fn write_pair(dir: &Path, stem: &str, names: &[&str], years: (i32, i32)) -> (PathBuf, PathBuf, String) {
    let mut params = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
    params.not_before = date_time_ymd(years.0, 1, 1);
    params.not_after = date_time_ymd(years.1, 1, 1);
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    let (crt, k) = (dir.join(format!("{stem}.crt")), dir.join(format!("{stem}.key")));
    std::fs::write(&crt, cert.pem()).unwrap();
    std::fs::write(&k, key.serialize_pem()).unwrap();
    std::fs::set_permissions(&k, std::fs::Permissions::from_mode(0o600)).unwrap();
    (crt, k, cert.pem())
}

/// A rustls client configuration trusting only the certificate `pem`, offering HTTP/1.1.
pub fn client_config(pem: &str) -> Arc<rustls::ClientConfig> {
    client_config_with(pem, rustls::DEFAULT_VERSIONS)
}

/// `client_config` offering only `versions` (TLS 1.2 alone, say).
pub fn client_config_with(
    pem: &str,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Arc<rustls::ClientConfig> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(config)
}
