//! Fuzz `ReplicaTarget::parse`, which reads `/~migrate/<version>/<home>/<path>` targets a
//! co-op serves from its replica store: an accepted target's path is canonical (re-parsing
//! its own target gives it back, as does the URL `replica_url` writes for it), never climbs
//! above the root, and was written only with well-formed `%XX` escapes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use locus_dc::replica_url::{MIGRATE_PREFIX, ReplicaTarget, replica_url};
use locus_http::climbs_above_root;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    // Half the inputs are taken as written; the other half get the prefix, so the fuzzer
    // spends its time past it.
    let target = if text.starts_with('/') { text.to_string() } else { format!("{MIGRATE_PREFIX}{text}") };
    let Ok(Some(parsed)) = ReplicaTarget::parse(&target) else { return };

    let path = &parsed.path;
    assert!(path.len() > 1 && path.starts_with('/'), "{path:?}");
    assert!(!path.contains(['\\', '\0', '?', '#']), "{path:?}");
    assert!(!climbs_above_root(path.as_bytes()), "{path:?} climbs above the root");
    for segment in path[1..].split('/') {
        assert!(!matches!(segment, "." | ".."), "{path:?}");
    }

    let again = ReplicaTarget::parse(&parsed.request_target());
    assert_eq!(again, Ok(Some(parsed.clone())), "its own target reads back");
    let url = replica_url("coop:8080", parsed.version, &parsed.home, &parsed.path);
    let from_url = ReplicaTarget::parse(url.strip_prefix("http://coop:8080").unwrap());
    assert_eq!(from_url, Ok(Some(parsed.clone())), "the URL written for it reads back");

    let written = target.split('?').next().unwrap_or_default();
    assert!(well_formed_escapes(written), "accepted malformed escape in {written:?}");
});

/// Every `%` is followed by two hexadecimal digits (RFC 3986 `pct-encoded`).
fn well_formed_escapes(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'%')
        .all(|(i, _)| bytes.get(i + 1..i + 3).is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit)))
}
