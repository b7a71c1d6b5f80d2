//! The TLS connection driven by hand (`accept`, `TlsStream`) against a rustls client over
//! loopback: bytes both ways intact (small and larger than every buffer), a resumed second
//! handshake, and bad input — cleartext HTTP handed back unread, garbage and an oversized
//! record refused with a reason, a ClientHello in one-byte segments accepted, a handshake that
//! never completes timed out, an unknown name refused when so configured.

use std::io::{Read, Write};
use std::net::TcpStream as StdTcp;
use std::sync::Arc;
use std::time::Duration;

use locus_test_support::{client_config, write_pair};
use locus_tls::{
    ALPN_HTTP1, HandshakeFailure, SniCertificates, TlsStream, UnknownName, load_certificate, server_config,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::time::Instant;

struct Fixture {
    _dir: tempfile::TempDir,
    server: Arc<rustls::ServerConfig>,
    client: Arc<rustls::ClientConfig>,
}

fn fixture(unknown: UnknownName) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let (crt, key, pem) = write_pair(dir.path(), "a", &["a.example"], (2020, 2090));
    let loaded = load_certificate(&crt, &key, std::time::SystemTime::now()).unwrap();
    let sni = SniCertificates::new(&[loaded], unknown).unwrap();
    let server = server_config(sni, &[ALPN_HTTP1], None).unwrap();
    Fixture { _dir: dir, server, client: client_config(&pem) }
}

/// A listener and the outcome of one `accept` on it, run on this test's runtime.
async fn serve_one(
    config: Arc<rustls::ServerConfig>,
    within: Duration,
) -> (std::net::SocketAddr, tokio::task::JoinHandle<Result<TlsStream, HandshakeFailure>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        locus_tls::accept(tcp, config, Instant::now() + within).await
    });
    (addr, task)
}

/// A blocking rustls client connection to `addr` for `name`.
fn client(
    config: &Arc<rustls::ClientConfig>,
    addr: std::net::SocketAddr,
    name: &str,
) -> rustls::StreamOwned<rustls::ClientConnection, StdTcp> {
    let conn = rustls::ClientConnection::new(config.clone(), name.to_string().try_into().unwrap()).unwrap();
    let tcp = StdTcp::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    rustls::StreamOwned::new(conn, tcp)
}

#[tokio::test]
async fn bytes_cross_intact_both_ways_including_a_body_larger_than_every_buffer() {
    let f = fixture(UnknownName::Default);
    let (addr, task) = serve_one(f.server.clone(), Duration::from_secs(5)).await;
    let cfg = f.client.clone();
    let client = std::thread::spawn(move || {
        let mut c = client(&cfg, addr, "a.example");
        c.write_all(b"ping").unwrap();
        let mut big = vec![0u8; 3 << 20];
        c.read_exact(&mut big).unwrap();
        (big, c.conn.alpn_protocol().map(<[u8]>::to_vec))
    });
    let mut s = task.await.unwrap().unwrap();
    let n = s.negotiated();
    assert_eq!((n.version, n.suite, n.resumed), ("TLSv1.3", "TLS13_AES_256_GCM_SHA384", false));
    assert_eq!(s.server_name(), Some("a.example"));
    let mut ping = [0u8; 4];
    s.read_exact(&mut ping).await.unwrap();
    assert_eq!(&ping, b"ping");
    let body: Vec<u8> = (0..3u32 << 20).map(|i| (i % 251) as u8).collect();
    s.write_all(&body).await.unwrap();
    s.flush().await.unwrap();
    let (got, alpn) = client.join().unwrap();
    assert!(got == body, "the 3 MiB body arrives byte for byte");
    assert_eq!(alpn.as_deref(), Some(ALPN_HTTP1));
}

#[tokio::test]
async fn a_second_connection_with_the_first_ones_ticket_is_resumed() {
    let f = fixture(UnknownName::Default);
    for resumed in [false, true] {
        let n = one_exchange(&f.server, &f.client).await;
        assert_eq!(n.resumed, resumed);
    }
}

/// One connection from a blocking client under `client_config`: a byte each way; what the
/// server's handshake agreed.
async fn one_exchange(
    server: &Arc<rustls::ServerConfig>,
    client_config: &Arc<rustls::ClientConfig>,
) -> locus_tls::Negotiated {
    let (addr, task) = serve_one(server.clone(), Duration::from_secs(5)).await;
    let cfg = client_config.clone();
    let client = std::thread::spawn(move || {
        let mut c = client(&cfg, addr, "a.example");
        c.write_all(b"x").unwrap();
        let mut one = [0u8; 1];
        c.read_exact(&mut one).unwrap();
    });
    let mut s = task.await.unwrap().unwrap();
    let mut x = [0u8; 1];
    s.read_exact(&mut x).await.unwrap();
    s.write_all(b"y").await.unwrap();
    s.flush().await.unwrap();
    client.join().unwrap();
    s.negotiated()
}

#[tokio::test]
async fn cleartext_http_on_the_tls_port_is_handed_back_unread() {
    let f = fixture(UnknownName::Default);
    let (addr, task) = serve_one(f.server.clone(), Duration::from_secs(5)).await;
    let mut raw = StdTcp::connect(addr).unwrap();
    raw.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n").unwrap();
    match task.await.unwrap() {
        Err(e @ HandshakeFailure::Cleartext(_)) => {
            assert_eq!(e.reason(), "cleartext");
            let HandshakeFailure::Cleartext(tcp) = e else { unreachable!() };
            let mut head = [0u8; 3];
            tcp.try_read(&mut head).unwrap();
            assert_eq!(&head, b"GET", "nothing was consumed");
        }
        other => panic!("not cleartext: {:?}", other.map(|_| ())),
    }
}

/// What `accept` says of `bytes` sent instead of a handshake, and what the client got back.
async fn failure_for(bytes: &[u8]) -> (String, Vec<u8>) {
    let f = fixture(UnknownName::Default);
    let (addr, task) = serve_one(f.server.clone(), Duration::from_secs(5)).await;
    let mut raw = StdTcp::connect(addr).unwrap();
    raw.write_all(bytes).unwrap();
    let reason = match task.await.unwrap() {
        Err(e) => e.reason().to_string(),
        Ok(_) => "accepted".into(),
    };
    raw.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut reply = Vec::new();
    let _ = raw.read_to_end(&mut reply);
    (reason, reply)
}

#[tokio::test]
async fn garbage_instead_of_a_client_hello_is_refused_and_closed() {
    // A ClientHello claiming 197 KiB: refused at once, not waited for.
    let (reason, reply) = failure_for(&[0x16, 0x03, 0x01, 0x00, 0x05, 1, 2, 3, 4, 5]).await;
    assert_eq!(reason, "malformed");
    assert!(reply.is_empty() || reply[0] == 0x15, "closed, or an alert first: {reply:?}");
    let (reason, _) = failure_for(&[0x80; 64]).await;
    assert_eq!(reason, "malformed", "not even a record");
}

#[tokio::test]
async fn a_record_over_the_size_limit_is_refused() {
    let mut record = vec![0x16, 0x03, 0x03, 0xff, 0xff];
    record.extend(std::iter::repeat_n(0u8, 0xffff));
    let (reason, reply) = failure_for(&record).await;
    assert_eq!(reason, "malformed");
    assert_eq!(reply.first(), Some(&0x15), "an alert record: {reply:?}");
}

#[tokio::test]
async fn a_client_hello_in_one_byte_segments_completes() {
    let f = fixture(UnknownName::Default);
    let (addr, task) = serve_one(f.server.clone(), Duration::from_secs(5)).await;
    let cfg = f.client.clone();
    let client = std::thread::spawn(move || {
        let mut conn = rustls::ClientConnection::new(cfg, "a.example".try_into().unwrap()).unwrap();
        let mut hello = Vec::new();
        conn.write_tls(&mut hello).unwrap();
        let mut tcp = StdTcp::connect(addr).unwrap();
        tcp.set_nodelay(true).unwrap();
        for b in &hello {
            tcp.write_all(std::slice::from_ref(b)).unwrap();
            std::thread::sleep(Duration::from_micros(200));
        }
        tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut stream = rustls::StreamOwned::new(conn, tcp);
        stream.write_all(b"z").unwrap();
        stream.flush().unwrap();
        hello.len()
    });
    let mut s = task.await.unwrap().expect("the handshake completes");
    let mut z = [0u8; 1];
    s.read_exact(&mut z).await.unwrap();
    assert_eq!(&z, b"z");
    assert!(client.join().unwrap() > 100, "a real ClientHello was split");
}

#[tokio::test]
async fn a_handshake_that_never_completes_times_out() {
    let f = fixture(UnknownName::Default);
    let (addr, task) = serve_one(f.server.clone(), Duration::from_millis(300)).await;
    let mut raw = StdTcp::connect(addr).unwrap();
    raw.write_all(&[0x16, 0x03, 0x01]).unwrap();
    let started = std::time::Instant::now();
    let outcome = task.await.unwrap();
    assert_eq!(outcome.err().map(|e| e.reason()), Some("timeout"));
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn an_unknown_name_is_refused_when_so_configured_and_served_the_default_otherwise() {
    for (unknown, expect) in [(UnknownName::Refuse, Some("no_certificate")), (UnknownName::Default, None)] {
        let f = fixture(unknown);
        let (addr, task) = serve_one(f.server.clone(), Duration::from_secs(5)).await;
        let cfg = f.client.clone();
        // The client does not trust the default for another name; only the server's side counts.
        let client = std::thread::spawn(move || {
            let mut c = client(&cfg, addr, "b.example");
            let _ = c.write_all(b"x");
        });
        let outcome = task.await.unwrap();
        client.join().unwrap();
        match expect {
            Some(reason) => assert_eq!(outcome.err().map(|e| e.reason()), Some(reason)),
            None => assert!(
                !matches!(outcome, Err(HandshakeFailure::Protocol(ref e)) if e.to_string().contains("certificate chain"))
            ),
        }
    }
}

#[tokio::test]
async fn a_client_session_from_connect_resumes_with_a_ticket_against_accept() {
    let f = fixture(UnknownName::Default);
    for resumed in [false, true] {
        let (addr, task) = serve_one(f.server.clone(), Duration::from_secs(5)).await;
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let name = "a.example".try_into().unwrap();
        let mut client = locus_tls::connect(tcp, f.client.clone(), name, deadline).await.unwrap();
        let mut server = task.await.unwrap().unwrap();
        assert_eq!((client.negotiated().resumed, server.negotiated().resumed), (resumed, resumed));
        client.write_all(b"hello").await.unwrap();
        client.flush().await.unwrap();
        let mut got = [0u8; 5];
        server.read_exact(&mut got).await.unwrap();
        server.write_all(b"world").await.unwrap();
        server.flush().await.unwrap();
        client.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"world");
    }
}

#[tokio::test]
async fn a_tls_1_2_client_without_tickets_resumes_from_the_session_cache() {
    let f = fixture(UnknownName::Default);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let roots = {
        let mut r = rustls::RootCertStore::empty();
        let pem = std::fs::read_to_string(f._dir.path().join("a.crt")).unwrap();
        use rustls::pki_types::pem::PemObject;
        r.add(rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()).unwrap();
        r
    };
    let mut tls12 = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS12])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls12.resumption = rustls::client::Resumption::in_memory_sessions(4)
        .tls12_resumption(rustls::client::Tls12Resumption::SessionIdOnly);
    let tls12 = Arc::new(tls12);
    for resumed in [false, true] {
        let n = one_exchange(&f.server, &tls12).await;
        assert_eq!((n.version, n.resumed), ("TLSv1.2", resumed));
    }
}

#[tokio::test]
async fn bytes_of_a_record_not_yet_whole_stay_outside_rustls_and_are_known() {
    let f = fixture(UnknownName::Default);
    let (addr, task) = serve_one(f.server.clone(), Duration::from_secs(5)).await;
    let cfg = f.client.clone();
    let (half_tx, half_rx) = std::sync::mpsc::channel();
    let client = std::thread::spawn(move || {
        let mut c = client(&cfg, addr, "a.example");
        c.flush().unwrap();
        while c.conn.is_handshaking() {
            c.conn.complete_io(&mut c.sock).unwrap();
        }
        let record = |conn: &mut rustls::ClientConnection, data: &[u8]| {
            conn.writer().write_all(data).unwrap();
            let mut bytes = Vec::new();
            conn.write_tls(&mut bytes).unwrap();
            bytes
        };
        let first = record(&mut c.conn, b"first");
        let second = record(&mut c.conn, b"second request");
        let half = second[..second.len() / 2].to_vec();
        c.sock.write_all(&[first, half.clone()].concat()).unwrap();
        half_tx.send(half).unwrap();
        std::thread::sleep(Duration::from_millis(500));
    });
    let mut s = task.await.unwrap().unwrap();
    let mut first = [0u8; 5];
    s.read_exact(&mut first).await.unwrap();
    assert_eq!(&first, b"first");
    let half = half_rx.recv().unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut more = [0u8; 16];
    assert_eq!(s.try_read(&mut more).unwrap_err().kind(), std::io::ErrorKind::WouldBlock);
    assert_eq!(s.undecrypted(), half.as_slice(), "exactly the half record, nothing inside rustls");
    client.join().unwrap();
}
