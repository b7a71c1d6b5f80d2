//! Request-target checks shared by the switch and the node: whether a path climbs above the
//! root once percent-decoded (`/../`, `/%2e%2e/`, `/a/../../b`), and the host part of an
//! authority (`host`, `host:port`, `[v6]:port`).

use percent_encoding::percent_decode;

/// Whether the path of `target` (the part before any `?`) leaves the root: some prefix of
/// its segments has more `..` than names, once percent escapes are decoded. Read the way
/// the most permissive back-end would: `%2e` is `.`, `%2f` and `\` separate segments.
pub fn climbs_above_root(target: &[u8]) -> bool {
    let path = target.split(|&b| b == b'?').next().unwrap_or_default();
    let decoded: Vec<u8> = percent_decode(path).collect();
    let mut depth = 0usize;
    for segment in decoded.split(|&b| b == b'/' || b == b'\\') {
        match segment {
            b"" | b"." => {}
            b".." => match depth.checked_sub(1) {
                Some(d) => depth = d,
                None => return true,
            },
            _ => depth += 1,
        }
    }
    false
}

/// The host of an authority: `host` of `host:port`, `[v6]` of `[v6]:port`.
pub fn authority_host(authority: &[u8]) -> &[u8] {
    if authority.first() == Some(&b'[') {
        return match authority.iter().position(|&b| b == b']') {
            Some(i) => &authority[..=i],
            None => authority,
        };
    }
    match authority.iter().rposition(|&b| b == b':') {
        Some(i) => &authority[..i],
        None => authority,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_that_climb_above_the_root_are_seen_through_escapes_and_case() {
        for t in [
            "/..",
            "/../",
            "/../etc/passwd",
            "/%2e%2e/x",
            "/%2E%2E/x",
            "/.%2e/x",
            "/a/../../b",
            "/a/%2E%2e/%2e%2E/b?x=1",
            "/a/..%2f..%2fb",
            "/a\\..\\..\\b",
            "/./../x",
        ] {
            assert!(climbs_above_root(t.as_bytes()), "{t}");
        }
    }

    #[test]
    fn paths_that_stay_under_the_root_pass() {
        for t in ["/", "/a/b", "/a/../b", "/a/./b/..", "/..a/b..", "/%2e%2ea", "/x?q=/../..", "/%zz/..", ""] {
            assert!(!climbs_above_root(t.as_bytes()), "{t}");
        }
    }

    #[test]
    fn the_host_of_an_authority_drops_the_port_and_keeps_v6_brackets() {
        assert_eq!(authority_host(b"Example.com:8080"), b"Example.com");
        assert_eq!(authority_host(b"example.com"), b"example.com");
        assert_eq!(authority_host(b"[::1]:80"), b"[::1]");
        assert_eq!(authority_host(b"[::1]"), b"[::1]");
        assert_eq!(authority_host(b"10.0.0.1"), b"10.0.0.1");
    }
}
