//! Certificates and keys as an operator gives them: a good pair loads and serves a TLS 1.3
//! handshake with ALPN, chosen by SNI; a mismatched key, an expired or future certificate, a
//! key file open to others, a missing file and a file with no certificate are refused, each
//! naming the file.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use locus_tls::{
    ALPN_HTTP1, LoadedCertificate, SniCertificates, TlsError, UnknownName, load_certificate, server_config,
};

use locus_test_support::write_pair;

fn now() -> SystemTime {
    SystemTime::now()
}

#[test]
fn a_good_pair_loads_with_its_names_and_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let (crt, key, _) = write_pair(dir.path(), "a", &["A.example", "*.b.example"], (2020, 2090));
    let c = load_certificate(&crt, &key, now()).unwrap();
    assert_eq!(c.names, ["a.example", "*.b.example"]);
    assert_eq!(c.not_after_unix, 3_786_912_000, "2090-01-01 00:00:00 UTC");
    assert_eq!(c.cert_path, crt);
}

#[test]
fn a_key_that_does_not_match_its_certificate_is_refused_naming_both_files() {
    let dir = tempfile::tempdir().unwrap();
    let (crt, _, _) = write_pair(dir.path(), "a", &["a.example"], (2020, 2090));
    let (_, other_key, _) = write_pair(dir.path(), "b", &["a.example"], (2020, 2090));
    let e = load_certificate(&crt, &other_key, now()).unwrap_err();
    assert!(matches!(e, TlsError::KeyMismatch { .. }), "{e}");
    let text = e.to_string();
    assert!(text.contains("b.key") && text.contains("a.crt"), "{text}");
}

#[test]
fn a_certificate_outside_its_dates_is_refused_saying_which_way() {
    let dir = tempfile::tempdir().unwrap();
    let (crt, key, _) = write_pair(dir.path(), "old", &["a.example"], (2010, 2020));
    let e = load_certificate(&crt, &key, now()).unwrap_err().to_string();
    assert!(e.contains("old.crt") && e.contains("has expired") && e.contains("2020"), "{e}");
    let (crt, key, _) = write_pair(dir.path(), "new", &["a.example"], (2090, 2095));
    let e = load_certificate(&crt, &key, now()).unwrap_err().to_string();
    assert!(e.contains("new.crt") && e.contains("is not valid yet"), "{e}");
}

#[test]
fn a_key_file_open_to_others_is_refused_and_group_access_is_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let (crt, key, _) = write_pair(dir.path(), "a", &["a.example"], (2020, 2090));
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = load_certificate(&crt, &key, now()).unwrap_err();
    assert!(matches!(e, TlsError::KeyReadableByOthers { mode: 0o644, .. }), "{e}");
    assert!(e.to_string().contains("a.key") && e.to_string().contains("chmod 600"), "{e}");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
    load_certificate(&crt, &key, now()).unwrap();
}

#[test]
fn a_missing_file_or_one_without_a_certificate_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let (crt, key, _) = write_pair(dir.path(), "a", &["a.example"], (2020, 2090));
    let missing = dir.path().join("missing.key");
    let e = load_certificate(&crt, &missing, now()).unwrap_err().to_string();
    assert!(e.contains("missing.key"), "{e}");
    let empty = dir.path().join("empty.crt");
    std::fs::write(&empty, "not a PEM file\n").unwrap();
    let e = load_certificate(&empty, &key, now()).unwrap_err();
    assert!(matches!(e, TlsError::NoCertificate { .. }), "{e}");
    assert!(e.to_string().contains("empty.crt"), "{e}");
}

fn two_certificates(dir: &Path) -> (Vec<LoadedCertificate>, Vec<String>) {
    let (c1, k1, p1) = write_pair(dir, "a", &["a.example"], (2020, 2090));
    let (c2, k2, p2) = write_pair(dir, "b", &["*.b.example", "b.example"], (2020, 2090));
    (
        vec![load_certificate(&c1, &k1, now()).unwrap(), load_certificate(&c2, &k2, now()).unwrap()],
        vec![p1, p2],
    )
}

#[test]
fn sni_picks_the_exact_name_then_a_wildcard_then_the_default_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (certs, _) = two_certificates(dir.path());
    let (a, b) = (&certs[0].certified, &certs[1].certified);
    let sni = SniCertificates::new(&certs, UnknownName::Default).unwrap();
    let is = |got: Option<Arc<rustls::sign::CertifiedKey>>, want: &Arc<rustls::sign::CertifiedKey>| {
        got.is_some_and(|g| Arc::ptr_eq(&g, want))
    };
    assert!(is(sni.choose(Some("A.Example.")), a), "exact, any case, trailing dot");
    assert!(is(sni.choose(Some("www.b.example")), b), "wildcard one label deep");
    assert!(is(sni.choose(Some("b.example")), b));
    assert!(is(sni.choose(Some("x.www.b.example")), a), "a wildcard covers one label only: the default");
    assert!(is(sni.choose(None), a), "no SNI: the default");
    let strict = SniCertificates::new(&certs, UnknownName::Refuse).unwrap();
    assert!(strict.choose(Some("unknown.example")).is_none());
    assert!(is(strict.choose(None), a), "no SNI still gets the default");
    assert!(matches!(SniCertificates::new(&[], UnknownName::Default), Err(TlsError::NoCertificates)));
}

/// Run a handshake between a rustls client trusting `roots` and `server` in memory; the
/// negotiated protocol version and ALPN, or the error.
fn handshake(
    server: Arc<rustls::ServerConfig>,
    roots: &[String],
    name: &str,
) -> Result<(rustls::ProtocolVersion, Option<Vec<u8>>), rustls::Error> {
    handshake_with(server, roots, name, &[&rustls::version::TLS13, &rustls::version::TLS12])
}

fn handshake_with(
    server: Arc<rustls::ServerConfig>,
    roots: &[String],
    name: &str,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Result<(rustls::ProtocolVersion, Option<Vec<u8>>), rustls::Error> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut store = rustls::RootCertStore::empty();
    for pem in roots {
        store.add(CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut client_config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(store)
        .with_no_client_auth();
    client_config.alpn_protocols = vec![b"h2".to_vec(), ALPN_HTTP1.to_vec()];
    let mut client =
        rustls::ClientConnection::new(Arc::new(client_config), name.to_string().try_into().unwrap()).unwrap();
    let mut server = rustls::ServerConnection::new(server).unwrap();
    for _ in 0..10 {
        let mut buf = Vec::new();
        client.write_tls(&mut buf).unwrap();
        server.read_tls(&mut buf.as_slice()).unwrap();
        if let Err(e) = server.process_new_packets() {
            // Send the server's alert to the client, as a socket would.
            let mut alert = Vec::new();
            let _ = server.write_tls(&mut alert);
            let _ = client.read_tls(&mut alert.as_slice());
            let _ = client.process_new_packets();
            return Err(e);
        }
        let mut buf = Vec::new();
        server.write_tls(&mut buf).unwrap();
        client.read_tls(&mut buf.as_slice()).unwrap();
        client.process_new_packets()?;
        if !client.is_handshaking() && !server.is_handshaking() {
            return Ok((client.protocol_version().unwrap(), server.alpn_protocol().map(|p| p.to_vec())));
        }
    }
    panic!("the handshake did not finish in 10 round trips");
}

#[test]
fn a_client_completes_tls_1_3_with_http_1_1_by_alpn_and_the_certificate_its_name_selects() {
    let dir = tempfile::tempdir().unwrap();
    let (certs, pems) = two_certificates(dir.path());
    let config =
        server_config(SniCertificates::new(&certs, UnknownName::Default).unwrap(), &[ALPN_HTTP1], None)
            .unwrap();
    assert_eq!(config.max_early_data_size, 0, "no 0-RTT");
    // Trusting only b's certificate: the handshake for www.b.example must have been served it.
    let (version, alpn) = handshake(config.clone(), &pems[1..], "www.b.example").unwrap();
    assert_eq!(version, rustls::ProtocolVersion::TLSv1_3);
    assert_eq!(alpn.as_deref(), Some(ALPN_HTTP1), "h2 is not offered yet");
    let (version, _) =
        handshake_with(config.clone(), &pems, "a.example", &[&rustls::version::TLS12]).unwrap();
    assert_eq!(version, rustls::ProtocolVersion::TLSv1_2, "TLS 1.2 clients are served too");
    let e = handshake(config, &pems[1..], "a.example").unwrap_err();
    assert!(e.to_string().contains("certificate"), "a's certificate is not trusted by this client: {e}");
    let strict =
        server_config(SniCertificates::new(&certs, UnknownName::Refuse).unwrap(), &[ALPN_HTTP1], None)
            .unwrap();
    assert!(handshake(strict, &pems, "unknown.example").is_err(), "an unknown name gets no certificate");
}
