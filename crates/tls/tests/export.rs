//! A session accepted to be handed over is taken apart after its first request and continued
//! on the same socket by a `RecordLayer`, as a node would: the request pipelined behind the
//! first (decrypted already, or still a partial record) is not lost, the client reads the
//! answer and sends more under the continued keys; the export prints no secret; a session
//! accepted without its key log, or a TLS 1.2 one, is refused. A `TlsStream` taken over from
//! rustls keeps serving on its socket and is continued elsewhere (twice, across a KeyUpdate);
//! keys updated before the handoff are followed (past 8 updates the session stays in place);
//! a forged record or a KeyUpdate storm ends it with an alert.

use std::io::{Read, Write};
use std::net::TcpStream as StdTcp;
use std::sync::Arc;
use std::time::Duration;

use locus_test_support::{client_config, write_pair};
use locus_tls::{
    ALPN_HTTP1, ExportError, SniCertificates, UnknownName, accept, accept_exportable, load_certificate,
    server_config,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::time::Instant;

fn configs() -> (tempfile::TempDir, Arc<rustls::ServerConfig>, Arc<rustls::ClientConfig>) {
    let dir = tempfile::tempdir().unwrap();
    let (crt, key, pem) = write_pair(dir.path(), "a", &["a.example"], (2020, 2090));
    let loaded = load_certificate(&crt, &key, std::time::SystemTime::now()).unwrap();
    let sni = SniCertificates::new(&[loaded], UnknownName::Default).unwrap();
    (dir, server_config(sni, &[ALPN_HTTP1], None).unwrap(), client_config(&pem))
}

/// A blocking client: handshake, `first` and half of `second` in one write, the rest of
/// `second` later; then it reads `expect` and sends `third` and reads `expect_after`.
fn client_thread(
    config: Arc<rustls::ClientConfig>,
    addr: std::net::SocketAddr,
    expect: &'static [u8],
) -> std::thread::JoinHandle<()> {
    scripted_client(config, addr, move |s| {
        let mut record = |data: &[u8]| {
            s.conn.writer().write_all(data).unwrap();
            let mut bytes = Vec::new();
            s.conn.write_tls(&mut bytes).unwrap();
            bytes
        };
        let (first, second) = (record(b"first"), record(b"second"));
        let half = second.len() / 2;
        s.sock.write_all(&[&first[..], &second[..half]].concat()).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        s.sock.write_all(&second[half..]).unwrap();
        let mut got = vec![0u8; expect.len()];
        s.read_exact(&mut got).unwrap();
        assert_eq!(got, expect);
        s.write_all(b"third").unwrap();
        s.flush().unwrap();
        let mut got = [0u8; 4];
        s.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"done");
    })
}

/// A session continued by a `RecordLayer` on its socket, as a node would.
struct Continued {
    layer: locus_tls::RecordLayer,
    tcp: tokio::net::TcpStream,
    /// Bytes read and not yet opened, and plaintext opened and not yet taken.
    input: Vec<u8>,
    plain: Vec<u8>,
}

impl Continued {
    /// Open records (reading the socket as needed) until the plaintext is `want`; take it.
    async fn request(&mut self, want: &[u8]) {
        let mut chunk = [0u8; 4096];
        loop {
            self.layer.open(&mut self.input, &mut self.plain, &mut Vec::new()).unwrap();
            if self.plain == want {
                self.plain.clear();
                return;
            }
            let n = self.tcp.read(&mut chunk).await.unwrap();
            assert!(n > 0, "closed before {:?}", String::from_utf8_lossy(want));
            self.input.extend_from_slice(&chunk[..n]);
        }
    }

    async fn answer(&mut self, data: &[u8]) {
        let mut out = Vec::new();
        self.layer.seal(data, &mut out).unwrap();
        self.tcp.write_all(&out).await.unwrap();
    }
}

#[tokio::test]
async fn a_session_continues_on_its_socket_after_being_taken_apart() {
    let (_dir, server, client) = configs();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = client_thread(client, addr, b"answer to first and second");
    let (tcp, _) = listener.accept().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut s = accept_exportable(tcp, &server, deadline).await.unwrap();
    let mut first = [0u8; 5];
    s.read_exact(&mut first).await.unwrap();
    assert_eq!(&first, b"first");
    s.exportable().unwrap();
    let (tcp, export) = s.export().unwrap();
    let shown = format!("{export:?}");
    assert!(shown.contains("Aes256GcmSha384") && !shown.contains("secret:"), "{shown}");
    // The second request: decrypted already, half a record, or still on the socket.
    let mut node = Continued {
        layer: export.record_layer().unwrap(),
        input: export.undecrypted.clone(),
        plain: export.plaintext.clone(),
        tcp,
    };
    node.request(b"second").await;
    node.answer(b"answer to first and second").await;
    node.request(b"third").await;
    node.answer(b"done").await;
    tokio::task::spawn_blocking(move || peer.join().unwrap()).await.unwrap();
}

/// A client under `config` that sends one byte and stays a moment.
fn send_one_byte(
    config: Arc<rustls::ClientConfig>,
    addr: std::net::SocketAddr,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let tcp = StdTcp::connect(addr).unwrap();
        let conn = rustls::ClientConnection::new(config, "a.example".try_into().unwrap()).unwrap();
        let mut s = rustls::StreamOwned::new(conn, tcp);
        s.write_all(b"x").unwrap();
        s.flush().unwrap();
        std::thread::sleep(Duration::from_millis(300));
    })
}

#[tokio::test]
async fn a_session_without_its_key_log_or_on_tls_1_2_is_not_taken_apart() {
    let (dir, server, client) = configs();
    // Accepted the ordinary way: no secrets were kept.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = send_one_byte(client, addr);
    let (tcp, _) = listener.accept().await.unwrap();
    let mut s = accept(tcp, server.clone(), Instant::now() + Duration::from_secs(5)).await.unwrap();
    let mut x = [0u8; 1];
    s.read_exact(&mut x).await.unwrap();
    assert!(matches!(s.exportable(), Err(ExportError::NoSecrets)));
    assert!(matches!(s.export(), Err(ExportError::NoSecrets)));
    peer.join().unwrap();

    // TLS 1.2: served by the switch, never handed over.
    let pem = std::fs::read_to_string(dir.path().join("a.crt")).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    use rustls::pki_types::pem::PemObject;
    roots.add(rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()).unwrap();
    let tls12 = Arc::new(
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_protocol_versions(&[&rustls::version::TLS12])
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    );
    let peer = send_one_byte(tls12, addr);
    let (tcp, _) = listener.accept().await.unwrap();
    let mut s = accept_exportable(tcp, &server, Instant::now() + Duration::from_secs(5)).await.unwrap();
    s.read_exact(&mut x).await.unwrap();
    assert!(matches!(s.exportable(), Err(ExportError::NotTls13("TLSv1.2"))));
    peer.join().unwrap();
}

/// A blocking client on `addr` that handshakes, then runs `script` on its stream.
fn scripted_client(
    config: Arc<rustls::ClientConfig>,
    addr: std::net::SocketAddr,
    script: impl FnOnce(&mut rustls::StreamOwned<rustls::ClientConnection, StdTcp>) + Send + 'static,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let tcp = StdTcp::connect(addr).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let conn = rustls::ClientConnection::new(config, "a.example".try_into().unwrap()).unwrap();
        let mut s = rustls::StreamOwned::new(conn, tcp);
        while s.conn.is_handshaking() {
            s.conn.complete_io(&mut s.sock).unwrap();
        }
        script(&mut s);
    })
}

type Client = rustls::StreamOwned<rustls::ClientConnection, StdTcp>;

fn expect(s: &mut Client, want: &[u8]) {
    let mut got = vec![0u8; want.len()];
    s.read_exact(&mut got).unwrap();
    assert_eq!(got, want);
}

/// A server-side session on `listener`, accepted to be handed over.
async fn accepted(listener: &TcpListener, server: &rustls::ServerConfig) -> locus_tls::TlsStream {
    let (tcp, _) = listener.accept().await.unwrap();
    accept_exportable(tcp, server, Instant::now() + Duration::from_secs(5)).await.unwrap()
}

async fn read_exactly(s: &mut locus_tls::TlsStream, want: &[u8]) {
    let mut got = vec![0u8; want.len()];
    s.read_exact(&mut got).await.unwrap();
    assert_eq!(got, want);
}

#[tokio::test]
async fn a_session_taken_over_is_served_on_its_socket_then_continued_twice_across_key_updates() {
    let (_dir, server, client) = configs();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let peer = scripted_client(client, listener.local_addr().unwrap(), |s| {
        s.write_all(b"one").unwrap();
        expect(s, b"1");
        s.write_all(b"two").unwrap();
        expect(s, b"2");
        // The client updates its keys (asking for ours too) before the third request.
        s.conn.refresh_traffic_keys().unwrap();
        s.write_all(b"three").unwrap();
        expect(s, b"3");
        let mut rest = Vec::new();
        s.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty(), "after the close_notify: {rest:?}");
    });
    let mut s = accepted(&listener, &server).await;
    read_exactly(&mut s, b"one").await;
    // The switch takes the session over and, the handoff not taken, serves it itself.
    s.take_over().unwrap();
    assert!(s.is_continued());
    s.write_all(b"1").await.unwrap();
    read_exactly(&mut s, b"tw").await;
    // A node continues it, with the bytes the switch read and did not use.
    let state = s.session_state(b"tw").unwrap();
    let tcp = s.replace_tcp(tokio::net::TcpStream::connect(listener.local_addr().unwrap()).await.unwrap());
    let mut s = locus_tls::TlsStream::continued(tcp, state).unwrap();
    read_exactly(&mut s, b"two").await;
    s.write_all(b"2").await.unwrap();
    // And a second node after it.
    let (tcp, state) = s.export().unwrap();
    let mut s = locus_tls::TlsStream::continued(tcp, state).unwrap();
    read_exactly(&mut s, b"three").await;
    s.write_all(b"3").await.unwrap();
    s.shutdown().await.unwrap();
    tokio::task::spawn_blocking(move || peer.join().unwrap()).await.unwrap();
}

/// A session continued elsewhere (as a node would) after its first request, `one`, whose
/// client then runs `misbehave` and must get back an alert whose name contains `alert`: the
/// continued session and the error its next read gets.
async fn continued_read_error(
    misbehave: impl FnOnce(&mut Client) + Send + 'static,
    alert: &'static str,
) -> (locus_tls::TlsStream, std::io::Error) {
    let (_dir, server, client) = configs();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let peer = scripted_client(client, listener.local_addr().unwrap(), move |s| {
        s.write_all(b"one").unwrap();
        misbehave(s);
        let mut buf = [0u8; 16];
        let e = s.read(&mut buf).unwrap_err();
        assert!(e.to_string().contains(alert), "{e}");
    });
    let mut s = accepted(&listener, &server).await;
    read_exactly(&mut s, b"one").await;
    let (tcp, state) = s.export().unwrap();
    let mut s = locus_tls::TlsStream::continued(tcp, state).unwrap();
    let mut buf = [0u8; 16];
    let e = s.read(&mut buf).await.unwrap_err();
    tokio::task::spawn_blocking(move || peer.join().unwrap()).await.unwrap();
    (s, e)
}

#[tokio::test]
async fn a_record_with_a_bad_tag_after_the_handoff_ends_the_session_with_an_alert() {
    let forge = |s: &mut Client| {
        s.conn.writer().write_all(b"forged").unwrap();
        let mut record = Vec::new();
        s.conn.write_tls(&mut record).unwrap();
        *record.last_mut().unwrap() ^= 1;
        s.sock.write_all(&record).unwrap();
    };
    let (mut s, e) = continued_read_error(forge, "BadRecordMac").await;
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
    assert!(s.write_all(b"never").await.is_err(), "nothing is served after a bad record");
}

#[tokio::test]
async fn a_key_update_storm_ends_the_continued_session() {
    let storm = |s: &mut Client| {
        for _ in 0..=locus_tls::KEY_UPDATES_IN_A_ROW {
            s.conn.refresh_traffic_keys().unwrap();
            s.conn.complete_io(&mut s.sock).unwrap();
        }
    };
    let (_, e) = continued_read_error(storm, "UnexpectedMessage").await;
    assert!(e.to_string().contains("KeyUpdates"), "{e}");
}

#[tokio::test]
async fn a_session_whose_keys_were_updated_before_the_handoff_moves_with_the_keys_in_use() {
    let (_dir, server, client) = configs();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let peer = scripted_client(client, listener.local_addr().unwrap(), |s| {
        // Twice, each asking for the server's update too.
        s.conn.refresh_traffic_keys().unwrap();
        s.write_all(b"one").unwrap();
        expect(s, b"1");
        s.conn.refresh_traffic_keys().unwrap();
        s.write_all(b"two").unwrap();
        expect(s, b"2");
        s.write_all(b"three").unwrap();
        expect(s, b"3");
    });
    let mut s = accepted(&listener, &server).await;
    read_exactly(&mut s, b"one").await;
    s.write_all(b"1").await.unwrap();
    read_exactly(&mut s, b"two").await;
    // rustls owes the client a KeyUpdate: taking over sends it first.
    let (tcp, state) = s.export().unwrap();
    let mut s = locus_tls::TlsStream::continued(tcp, state).unwrap();
    s.write_all(b"2").await.unwrap();
    read_exactly(&mut s, b"three").await;
    s.write_all(b"3").await.unwrap();
    tokio::task::spawn_blocking(move || peer.join().unwrap()).await.unwrap();
}

#[tokio::test]
async fn a_session_whose_keys_changed_past_following_is_served_in_place_not_moved() {
    let (_dir, server, client) = configs();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let peer = scripted_client(client, listener.local_addr().unwrap(), |s| {
        for _ in 0..10 {
            s.conn.refresh_traffic_keys().unwrap();
            s.conn.complete_io(&mut s.sock).unwrap();
        }
        s.write_all(b"one").unwrap();
        expect(s, b"1");
        s.write_all(b"two").unwrap();
        expect(s, b"2");
    });
    let mut s = accepted(&listener, &server).await;
    read_exactly(&mut s, b"one").await;
    assert!(matches!(s.take_over(), Err(ExportError::KeyUpdated)));
    assert!(matches!(s.session_state(&[]), Err(ExportError::KeyUpdated)));
    s.write_all(b"1").await.unwrap();
    read_exactly(&mut s, b"two").await;
    s.write_all(b"2").await.unwrap();
    tokio::task::spawn_blocking(move || peer.join().unwrap()).await.unwrap();
}
