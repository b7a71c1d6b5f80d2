//! Session-ticket keys shared by a cluster: the key file's format and its refusals, the
//! rotation rule (the next-to-last of the last three keys seals, all three open), tickets
//! refused when tampered with, and a client that resumes on a second server sharing the file.

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

use base64::Engine as _;
use locus_test_support::write_pair;
use locus_tls::{ALPN_HTTP1, SniCertificates, TicketKeys, UnknownName, load_certificate, server_config};
use rustls::server::ProducesTickets;

/// A key line: `len` bytes whose name (first 16) is all `n`.
fn line(n: u8, len: usize) -> String {
    let mut raw = vec![n; 16];
    raw.extend((0..len - 16).map(|i| (i as u8).wrapping_mul(31).wrapping_add(n)));
    base64::engine::general_purpose::STANDARD.encode(raw)
}

#[test]
fn a_key_file_takes_48_or_80_byte_keys_and_comments_and_names_a_bad_line() {
    let text = format!("# keys\n\n{}\n{}\n", line(1, 48), line(2, 80));
    let keys = TicketKeys::from_text(&text, 3600).unwrap();
    assert_eq!(keys.sealing_name(), [1; 16], "of two keys the first (the next-to-last) seals");
    let e = TicketKeys::from_text(&format!("{}\nnot base64!\n", line(1, 48)), 60).unwrap_err();
    assert!(e.contains("line 2") && e.contains("base64"), "{e}");
    let e = TicketKeys::from_text(&line(1, 32), 60).unwrap_err();
    assert!(e.contains("line 1") && e.contains("48 or 80") && e.contains("32"), "{e}");
    assert!(TicketKeys::from_text("# nothing\n", 60).unwrap_err().contains("no key"));
    assert_eq!(TicketKeys::from_text(&line(1, 48), 60).unwrap().sealing_name(), [1; 16], "one key seals");
    let shown = format!("{:?}", TicketKeys::from_text(&line(7, 80), 60).unwrap());
    assert!(!shown.contains("7, 7") && shown.contains("keys: 1"), "Debug shows no key material: {shown}");
}

#[test]
fn a_key_file_open_to_others_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tickets.key");
    std::fs::write(&path, line(1, 80)).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o604)).unwrap();
    let e = TicketKeys::from_file(&path, 60).unwrap_err().to_string();
    assert!(e.contains("tickets.key") && e.contains("open to others"), "{e}");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    TicketKeys::from_file(&path, 60).unwrap();
}

#[test]
fn rotating_is_appending_a_line_and_a_ticket_opens_until_its_key_leaves_the_last_three() {
    let file = |n: u8| (1..=n).map(|i| line(i, 80)).collect::<Vec<_>>().join("\n");
    let a = TicketKeys::from_text(&file(3), 60).unwrap();
    assert_eq!(a.sealing_name(), [2; 16], "keys 1 2 3: key 2 seals");
    let ticket = a.encrypt(b"session state").unwrap();
    assert_eq!(&ticket[..16], &[2; 16]);
    // Another server with the same file opens it.
    let b = TicketKeys::from_text(&file(3), 60).unwrap();
    assert_eq!(b.decrypt(&ticket).as_deref(), Some(&b"session state"[..]));
    // One rotation later (keys 2 3 4) key 2 is the oldest of the last three: still opened, and
    // key 3 seals.
    let rotated = TicketKeys::from_text(&file(4), 60).unwrap();
    assert_eq!(rotated.decrypt(&ticket).as_deref(), Some(&b"session state"[..]));
    assert_eq!(rotated.sealing_name(), [3; 16]);
    // A second rotation (keys 3 4 5): key 2 is gone, so are its tickets.
    assert!(TicketKeys::from_text(&file(5), 60).unwrap().decrypt(&ticket).is_none());
}

#[test]
fn a_tampered_short_or_foreign_ticket_is_refused() {
    let keys = TicketKeys::from_text(&line(1, 80), 60).unwrap();
    let ticket = keys.encrypt(b"state").unwrap();
    for i in [0, 16, 30, ticket.len() - 1] {
        let mut t = ticket.clone();
        t[i] ^= 1;
        assert!(keys.decrypt(&t).is_none(), "a flipped bit at {i} is refused");
    }
    assert!(keys.decrypt(&ticket[..20]).is_none());
    assert!(keys.decrypt(&[]).is_none());
    let other = TicketKeys::from_text(&line(9, 80), 60).unwrap();
    assert!(other.decrypt(&ticket).is_none(), "another cluster's key");
    assert_ne!(keys.encrypt(b"state").unwrap(), ticket, "a fresh nonce every time");
}

/// Move every pending record each way until neither side has more to send.
fn pump(client: &mut rustls::ClientConnection, server: &mut rustls::ServerConnection) {
    for _ in 0..10 {
        let mut to_server = Vec::new();
        client.write_tls(&mut to_server).unwrap();
        server.read_tls(&mut to_server.as_slice()).unwrap();
        server.process_new_packets().unwrap();
        let mut to_client = Vec::new();
        server.write_tls(&mut to_client).unwrap();
        client.read_tls(&mut to_client.as_slice()).unwrap();
        client.process_new_packets().unwrap();
        if to_server.is_empty() && to_client.is_empty() {
            return;
        }
    }
    panic!("still talking after 10 round trips");
}

#[test]
fn a_client_resumes_on_a_second_server_that_shares_the_key_file() {
    let dir = tempfile::tempdir().unwrap();
    let (crt, k, pem) = write_pair(dir.path(), "a", &["a.example"], (2020, 2090));
    let loaded = load_certificate(&crt, &k, std::time::SystemTime::now()).unwrap();
    let tickets = format!("{}\n{}\n", line(1, 80), line(2, 80));
    let server = |tickets: &str| {
        let t = Arc::new(TicketKeys::from_text(tickets, 3600).unwrap());
        let sni = SniCertificates::new(std::slice::from_ref(&loaded), UnknownName::Default).unwrap();
        server_config(sni, &[ALPN_HTTP1], Some(t)).unwrap()
    };
    let client_config = locus_test_support::client_config(&pem);
    let connect = |config: Arc<rustls::ServerConfig>| {
        let mut c =
            rustls::ClientConnection::new(client_config.clone(), "a.example".try_into().unwrap()).unwrap();
        let mut s = rustls::ServerConnection::new(config).unwrap();
        pump(&mut c, &mut s);
        assert!(!c.is_handshaking());
        c.handshake_kind()
    };
    assert_eq!(connect(server(&tickets)), Some(rustls::HandshakeKind::Full));
    // A second server (another process of the cluster) with the same file: resumed.
    assert_eq!(connect(server(&tickets)), Some(rustls::HandshakeKind::Resumed));
    // A server with other keys cannot open the ticket: a full handshake.
    assert_eq!(connect(server(&line(9, 80))), Some(rustls::HandshakeKind::Full));
}
