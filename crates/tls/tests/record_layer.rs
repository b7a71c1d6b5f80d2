//! The record layer continues a session rustls began: with the traffic secrets from rustls's
//! key log and the sequence numbers from `dangerous_extract_secrets`, it opens what a rustls
//! client sends and seals what the client reads, for each TLS 1.3 suite; it follows the
//! client's KeyUpdate (answering the update asked for) and its close_notify, and refuses a
//! record whose tag does not verify.

use std::sync::{Arc, Mutex};

use locus_test_support::write_pair;
use locus_tls::{
    ALPN_HTTP1, Direction, RecordError, RecordLayer, SniCertificates, Suite, UnknownName, load_certificate,
    server_config,
};
use rustls::{ClientConnection, ServerConnection};

/// The secrets rustls logs, by label.
#[derive(Debug, Default)]
struct Secrets(Mutex<Vec<(String, Vec<u8>)>>);

impl rustls::KeyLog for Secrets {
    fn log(&self, label: &str, _client_random: &[u8], secret: &[u8]) {
        self.0.lock().unwrap().push((label.to_string(), secret.to_vec()));
    }
}

impl Secrets {
    fn get(&self, label: &str) -> Vec<u8> {
        self.0.lock().unwrap().iter().find(|(l, _)| l == label).map(|(_, s)| s.clone()).unwrap()
    }
}

/// Move TLS bytes from `from` to `to` until neither has more.
fn send(from: &mut rustls::Connection, to: &mut rustls::Connection) {
    let mut bytes = Vec::new();
    while from.wants_write() {
        from.write_tls(&mut bytes).unwrap();
    }
    let mut slice = bytes.as_slice();
    while !slice.is_empty() {
        to.read_tls(&mut slice).unwrap();
    }
    to.process_new_packets().unwrap();
}

fn read_all(conn: &mut rustls::Connection) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = conn.reader().read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    out
}

/// A finished handshake under `suite` after one request from the client, the server's state
/// handed to a record layer; the client connection.
fn continued_session(suite: rustls::SupportedCipherSuite) -> (RecordLayer, rustls::Connection) {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let (crt, key, pem) = write_pair(dir.path(), "a", &["a.example"], (2020, 2090));
    let loaded = load_certificate(&crt, &key, std::time::SystemTime::now()).unwrap();
    let sni = SniCertificates::new(&[loaded], UnknownName::Default).unwrap();
    let secrets = Arc::new(Secrets::default());
    let mut config = (*server_config(sni, &[ALPN_HTTP1], None).unwrap()).clone();
    config.key_log = secrets.clone();
    config.enable_secret_extraction = true;
    let mut roots = rustls::RootCertStore::empty();
    use rustls::pki_types::pem::PemObject;
    roots.add(rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()).unwrap();
    let mut provider = rustls::crypto::ring::default_provider();
    provider.cipher_suites = vec![suite];
    let client_cfg = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let mut client: rustls::Connection =
        ClientConnection::new(Arc::new(client_cfg), "a.example".try_into().unwrap()).unwrap().into();
    let mut server: rustls::Connection = ServerConnection::new(Arc::new(config)).unwrap().into();
    for _ in 0..4 {
        send(&mut client, &mut server);
        send(&mut server, &mut client);
    }
    assert!(!client.is_handshaking() && !server.is_handshaking());
    client.writer().write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    send(&mut client, &mut server);
    assert_eq!(read_all(&mut server), b"GET / HTTP/1.1\r\n\r\n");
    let negotiated = Suite::of(server.negotiated_cipher_suite().unwrap().suite()).unwrap();
    let rustls::Connection::Server(server) = server else { unreachable!() };
    let extracted = server.dangerous_extract_secrets().unwrap();
    let tx = Direction::new(negotiated, &secrets.get("SERVER_TRAFFIC_SECRET_0"), extracted.tx.0).unwrap();
    let rx = Direction::new(negotiated, &secrets.get("CLIENT_TRAFFIC_SECRET_0"), extracted.rx.0).unwrap();
    (RecordLayer::new(tx, rx), client)
}

/// What the client sends, as TLS bytes.
fn from_client(client: &mut rustls::Connection, data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    client.writer().write_all(data).unwrap();
    let mut bytes = Vec::new();
    while client.wants_write() {
        client.write_tls(&mut bytes).unwrap();
    }
    bytes
}

/// Give `bytes` to the client and read what it decrypts.
fn to_client(client: &mut rustls::Connection, bytes: &[u8]) -> Vec<u8> {
    let (mut slice, mut out) = (bytes, Vec::new());
    while !slice.is_empty() {
        client.read_tls(&mut slice).unwrap();
        client.process_new_packets().unwrap();
        out.extend(read_all(client));
    }
    out
}

#[test]
fn every_tls13_suite_continues_both_ways_through_a_key_update_to_close_notify() {
    let suites = rustls::crypto::ring::DEFAULT_CIPHER_SUITES.iter().filter(|s| s.tls13().is_some());
    for &suite in suites {
        let (mut layer, mut client) = continued_session(suite);
        let (mut plain, mut replies) = (Vec::new(), Vec::new());
        let mut input = from_client(&mut client, b"second request");
        // Given a byte short first: nothing opens until the record is whole.
        let last = input.pop().unwrap();
        assert_eq!(layer.open(&mut input, &mut plain, &mut replies).unwrap(), Default::default());
        input.push(last);
        layer.open(&mut input, &mut plain, &mut replies).unwrap();
        assert!(input.is_empty() && plain == b"second request", "{suite:?}");

        let mut out = Vec::new();
        let body = vec![7u8; 40_000];
        layer.seal(&body, &mut out).unwrap();
        assert_eq!(to_client(&mut client, &out), body, "{suite:?}: three records");

        // The client updates its keys and asks for ours.
        client.refresh_traffic_keys().unwrap();
        let mut input = from_client(&mut client, b"after the update");
        plain.clear();
        let opened = layer.open(&mut input, &mut plain, &mut replies).unwrap();
        assert_eq!((opened.key_updates, plain.as_slice()), (1, &b"after the update"[..]));
        let mut out = std::mem::take(&mut replies);
        layer.seal(b"answered with new keys", &mut out).unwrap();
        assert_eq!(to_client(&mut client, &out), b"answered with new keys", "{suite:?}");

        client.send_close_notify();
        let mut input = from_client(&mut client, b"");
        assert!(layer.open(&mut input, &mut plain, &mut replies).unwrap().closed);
    }
}

#[test]
fn a_record_whose_tag_does_not_verify_is_refused() {
    let suite = rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256;
    let (mut layer, mut client) = continued_session(suite);
    let mut input = from_client(&mut client, b"tampered");
    let last = input.len() - 1;
    input[last] ^= 1;
    let e = layer.open(&mut input, &mut Vec::new(), &mut Vec::new()).unwrap_err();
    assert_eq!(e, RecordError::BadRecordMac);
    let e = layer.open(&mut vec![23, 3, 3, 0xff, 0xff], &mut Vec::new(), &mut Vec::new()).unwrap_err();
    assert_eq!(e, RecordError::RecordOverflow(0xffff));
}

#[test]
fn the_sending_key_is_updated_before_its_record_limit_and_the_client_follows() {
    let suite = rustls::crypto::ring::cipher_suite::TLS13_CHACHA20_POLY1305_SHA256;
    let (layer, mut client) = continued_session(suite);
    let mut layer = layer.with_records_per_key(3);
    let mut out = Vec::new();
    let body: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
    layer.seal(&body, &mut out).unwrap();
    assert!(layer.tx().sequence() < 3, "a fresh key after the updates");
    assert_eq!(to_client(&mut client, &out), body, "13 records across several keys");
}
