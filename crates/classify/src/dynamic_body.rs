//! The deterministic body of a dynamic response: what a node sends for a class's request and
//! what a client recomputes to verify it, byte for byte.

const BODY_ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const BODY_BLOCK: usize = 64;

/// The body of a dynamic response for request target `target` (path and query as sent) and
/// `size` bytes: a 64-byte block of URL-safe characters drawn from an xorshift generator
/// seeded by `locus_core::target_hash(target)`, repeated.
pub fn dynamic_body(target: &str, size: usize) -> Vec<u8> {
    let mut state = locus_core::target_hash(target) | 1;
    let mut block = [0u8; BODY_BLOCK];
    for b in block.iter_mut() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        *b = BODY_ALPHABET[(state >> 58) as usize];
    }
    let mut body = Vec::with_capacity(size);
    while body.len() < size {
        let take = (size - body.len()).min(BODY_BLOCK);
        body.extend_from_slice(&block[..take]);
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_has_the_size_asked_and_depends_only_on_the_target() {
        for size in [0, 1, 63, 64, 65, 5000] {
            assert_eq!(dynamic_body("/cgi/a?id=1", size).len(), size);
        }
        assert_eq!(dynamic_body("/cgi/a?id=1", 300), dynamic_body("/cgi/a?id=1", 300));
        assert_ne!(dynamic_body("/cgi/a?id=1", 300), dynamic_body("/cgi/a?id=2", 300));
        let a = dynamic_body("/cgi/x?id=1", 1000);
        assert_eq!(&a[..64], &a[64..128], "one block, repeated");
        assert!(a.iter().all(|b| BODY_ALPHABET.contains(b)));
        assert_eq!(&dynamic_body("/cgi/x?id=1", 10)[..], &a[..10], "a shorter body is a prefix");
    }
}
