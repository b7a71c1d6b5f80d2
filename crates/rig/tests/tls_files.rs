//! The lab's TLS material: an ECDSA and an RSA certificate made with `openssl` that HAProxy
//! (`haproxy -c`), NGINX (`nginx -t`) and Locus (`locus_tls`) all load, and ticket keys that
//! HAProxy and Locus read from one file.

use std::net::SocketAddr;
use std::process::Command;

use locus_rig::servers::{CertKind, Listen, haproxy_config, nginx_proxy_config, write_tls_files};
use locus_rig::{HaproxyBalance, HaproxyTuning, NginxBalance};

fn check(mut cmd: Command, what: &str) {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{what}: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn both_certificate_kinds_load_in_haproxy_nginx_and_locus() {
    let dir = tempfile::tempdir().unwrap();
    let listen: SocketAddr = "127.0.0.1:2".parse().unwrap();
    let nodes = [("node1".to_string(), "127.0.0.1:1".parse().unwrap())];
    for kind in [CertKind::EcdsaP256, CertKind::Rsa2048] {
        let files = write_tls_files(&dir.path().join(kind.name()), kind, "locus.test").unwrap();
        let loaded = locus_tls::load_certificate(&files.cert, &files.key, std::time::SystemTime::now())
            .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        assert_eq!(loaded.names, ["locus.test"]);
        locus_tls::TicketKeys::from_file(&files.ticket_keys, 3600).unwrap();
        assert_eq!(std::fs::read(&files.ticket_key_nginx).unwrap().len(), 80);

        let haproxy = dir.path().join(format!("{}-haproxy.cfg", kind.name()));
        let t = HaproxyTuning::default();
        let text = haproxy_config(
            Listen { addr: listen, tls: Some(&files) },
            &nodes,
            HaproxyBalance::UriChashBounded,
            &t,
            1,
        );
        assert!(text.contains(" ssl crt ") && text.contains("tls-ticket-keys"), "{text}");
        assert!(text.contains(" alpn h2,http/1.1 "), "HTTP/2 offered first: {text}");
        std::fs::write(&haproxy, text).unwrap();
        let mut cmd = Command::new("haproxy");
        cmd.arg("-c").arg("-f").arg(&haproxy);
        check(cmd, &format!("haproxy -c with {kind:?}"));

        let prefix = dir.path().join(format!("{}-nginx", kind.name()));
        std::fs::create_dir_all(&prefix).unwrap();
        let text = nginx_proxy_config(
            &prefix,
            Listen { addr: listen, tls: Some(&files) },
            &nodes,
            NginxBalance::UriChash,
            1,
        );
        assert!(
            text.contains("listen 127.0.0.1:2 ssl http2;") && text.contains("ssl_session_ticket_key"),
            "{text}"
        );
        let conf = prefix.join("nginx.conf");
        std::fs::write(&conf, text).unwrap();
        let mut cmd = Command::new("nginx");
        cmd.arg("-t").arg("-c").arg(&conf).arg("-p").arg(&prefix);
        check(cmd, &format!("nginx -t with {kind:?}"));
    }
}

#[test]
fn a_rustls_client_accepts_the_certificate_as_a_servers_own() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_tls_files(dir.path(), CertKind::EcdsaP256, "locus.test").unwrap();
    let loaded = locus_tls::load_certificate(&files.cert, &files.key, std::time::SystemTime::now()).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(loaded.certified.cert[0].clone()).unwrap();
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
        std::sync::Arc::new(roots),
        std::sync::Arc::new(rustls::crypto::ring::default_provider()),
    )
    .build()
    .unwrap();
    let name = rustls::pki_types::ServerName::try_from("locus.test").unwrap();
    let now = rustls::pki_types::UnixTime::now();
    use rustls::client::danger::ServerCertVerifier;
    verifier
        .verify_server_cert(&loaded.certified.cert[0], &[], &name, &[], now)
        .expect("an end-entity certificate for locus.test");
}
