//! A listener's `[tls]` table: parsed strictly, loaded into a server configuration, and a
//! wrong file named in the error.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::SystemTime;

use locus_tls::{ALPN_HTTP1, TlsSettings, UnknownSni};

fn write_pair(dir: &Path) {
    locus_test_support::write_pair(dir, "a", &["a.example"], (2020, 2090));
}

#[derive(serde::Deserialize)]
struct File {
    tls: TlsSettings,
}

#[test]
fn a_tls_table_loads_into_a_server_configuration_with_its_ticket_keys() {
    let dir = tempfile::tempdir().unwrap();
    write_pair(dir.path());
    let keys = dir.path().join("tickets.key");
    std::fs::write(&keys, "# one key\nAQEBAQEBAQEBAQEBAQEBAQICAgICAgICAgICAgICAgIDAwMDAwMDAwMDAwMDAwMD\n")
        .unwrap();
    std::fs::set_permissions(&keys, std::fs::Permissions::from_mode(0o600)).unwrap();
    let d = dir.path().display();
    let text = format!(
        "[tls]\nunknown_sni = \"refuse\"\nticket_keys = \"{d}/tickets.key\"\n\n[[tls.certificates]]\ncert = \"{d}/a.crt\"\nkey = \"{d}/a.key\"\n"
    );
    let settings = toml::from_str::<File>(&text).unwrap().tls;
    assert_eq!(settings.unknown_sni, UnknownSni::Refuse);
    assert_eq!(settings.ticket_lifetime_s, 6 * 3600);
    let config = settings.load(&[ALPN_HTTP1], SystemTime::now()).unwrap();
    assert!(config.ticketer.enabled(), "tickets sealed with the shared keys");
    assert_eq!(config.alpn_protocols, [b"http/1.1".to_vec()]);
    let single = TlsSettings::single(dir.path().join("a.crt"), dir.path().join("a.key"));
    assert!(
        !single.load(&[ALPN_HTTP1], SystemTime::now()).unwrap().ticketer.enabled(),
        "no key file, no tickets"
    );
}

#[test]
fn an_unknown_key_or_a_wrong_file_is_an_error_naming_it() {
    let e =
        toml::from_str::<File>("[tls]\ncertificates = []\nsession_cache = 10\n").err().unwrap().to_string();
    assert!(e.contains("session_cache"), "{e}");
    let dir = tempfile::tempdir().unwrap();
    write_pair(dir.path());
    let mut s = TlsSettings::single(dir.path().join("a.crt"), dir.path().join("a.key"));
    s.ticket_keys = Some(dir.path().join("missing.key"));
    let e = s.load(&[ALPN_HTTP1], SystemTime::now()).unwrap_err().to_string();
    assert!(e.contains("missing.key"), "{e}");
    s.ticket_keys = None;
    s.certificates.clear();
    assert!(s.load(&[ALPN_HTTP1], SystemTime::now()).unwrap_err().to_string().contains("no certificate"));
}
