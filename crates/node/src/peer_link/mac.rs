//! The signature of a request between nodes, `X-Locus-Peer-Auth: v1 <from> <time> <nonce>
//! <mac>`: HMAC-SHA256 under the peer key over a protocol label, the method, the request
//! target as sent, the receiver's authority, the sender's member identity, the sender's
//! wall-clock time (ms since the epoch) and a 128-bit random nonce, every field
//! length-prefixed. `sign` makes the value; `Signature::parse` reads one and `verify` checks
//! it in constant time and refuses a time more than `MAX_SKEW_MS` from the receiver's clock.
//! Pure: times and nonces are arguments.

use hmac::Mac;
use percent_encoding::{AsciiSet, CONTROLS, percent_decode_str, utf8_percent_encode};

use super::key::{HmacSha256, PeerKey};

/// The request header that carries the signature.
pub const AUTH_HEADER: &str = "X-Locus-Peer-Auth";
/// The most a signature's time may differ from the receiver's clock, either way.
pub const MAX_SKEW_MS: u64 = 10_000;

const VERSION: &str = "v1";
/// Sets this protocol's MACs apart from any other made under the same key (the handoff
/// channel's proofs, should a cluster use one key for both).
const LABEL: &[u8] = b"locus-peer/1 request";
const MAC_LEN: usize = 32;
/// Characters of an identity escaped in the header (it is one space-separated field).
const IDENTITY_ESCAPED: &AsciiSet = &CONTROLS.add(b' ').add(b'%');

/// What a signature is about besides its sender, time and nonce: the request as the sender
/// writes it and the receiver reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SignedRequest<'a> {
    pub method: &'a str,
    /// The request target as sent (path and query).
    pub target: &'a str,
    /// The receiver's authority (`host:port`) as the cluster's configuration spells it.
    pub to: &'a str,
}

/// Why a signature was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Invalid {
    /// Not a `v1` value of five fields.
    Malformed,
    /// Not made under this key for this request, sender, time and nonce.
    BadMac,
    /// Made more than `MAX_SKEW_MS` from the receiver's clock.
    Stale,
}

/// A parsed `X-Locus-Peer-Auth` value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    /// The sender's member identity (coop: its `host:port`; DC: its name).
    pub from: String,
    pub time_ms: u64,
    pub nonce: u128,
    mac: [u8; MAC_LEN],
}

fn mac_over(key: &PeerKey, request: SignedRequest<'_>, from: &str, time_ms: u64, nonce: u128) -> HmacSha256 {
    let mut mac = key.keyed();
    let fields = [LABEL, request.method.as_bytes(), request.target.as_bytes(), request.to.as_bytes()];
    for field in fields.into_iter().chain([from.as_bytes()]) {
        mac.update(&(field.len() as u64).to_be_bytes());
        mac.update(field);
    }
    mac.update(&time_ms.to_be_bytes());
    mac.update(&nonce.to_be_bytes());
    mac
}

/// The `X-Locus-Peer-Auth` value for `request` from `from` at `time_ms` with `nonce`.
pub fn sign(key: &PeerKey, request: SignedRequest<'_>, from: &str, time_ms: u64, nonce: u128) -> String {
    let tag = mac_over(key, request, from, time_ms, nonce).finalize().into_bytes();
    let hex: String = tag.iter().map(|b| format!("{b:02x}")).collect();
    format!("{VERSION} {} {time_ms} {nonce:032x} {hex}", utf8_percent_encode(from, IDENTITY_ESCAPED))
}

impl Signature {
    /// Read a header value (any bytes: a stranger's).
    pub fn parse(value: &[u8]) -> Result<Signature, Invalid> {
        let text = std::str::from_utf8(value).map_err(|_| Invalid::Malformed)?;
        let fields: Vec<&str> = text.split_ascii_whitespace().collect();
        let [VERSION, from, time, nonce, mac] = fields[..] else { return Err(Invalid::Malformed) };
        let from = percent_decode_str(from).decode_utf8().map_err(|_| Invalid::Malformed)?.into_owned();
        let all_digits =
            |s: &str, radix: u32, len: usize| s.len() == len && s.chars().all(|c| c.is_digit(radix));
        if from.is_empty() || !all_digits(nonce, 16, 32) || !all_digits(mac, 16, 2 * MAC_LEN) {
            return Err(Invalid::Malformed);
        }
        let time_ms = time.parse::<u64>().map_err(|_| Invalid::Malformed)?;
        let nonce = u128::from_str_radix(nonce, 16).map_err(|_| Invalid::Malformed)?;
        let mut tag = [0u8; MAC_LEN];
        for (byte, pair) in tag.iter_mut().zip(mac.as_bytes().chunks(2)) {
            let digits = std::str::from_utf8(pair).map_err(|_| Invalid::Malformed)?;
            *byte = u8::from_str_radix(digits, 16).map_err(|_| Invalid::Malformed)?;
        }
        Ok(Signature { from, time_ms, nonce, mac: tag })
    }

    /// Whether this signature was made under `key` for `request`, at a time within
    /// `MAX_SKEW_MS` of `now_ms`. The MAC is compared in constant time, and checked first,
    /// so `Stale` is said only of a genuine signature (a clock out of step, or a replay
    /// from long ago).
    pub fn verify(&self, key: &PeerKey, request: SignedRequest<'_>, now_ms: u64) -> Result<(), Invalid> {
        mac_over(key, request, &self.from, self.time_ms, self.nonce)
            .verify_slice(&self.mac)
            .map_err(|_| Invalid::BadMac)?;
        if self.time_ms.abs_diff(now_ms) > MAX_SKEW_MS {
            return Err(Invalid::Stale);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NOW: u64 = 1_790_000_000_000;

    fn key(byte: u8) -> PeerKey {
        PeerKey::new(&[byte; 32]).unwrap()
    }

    fn request<'a>(target: &'a str) -> SignedRequest<'a> {
        SignedRequest { method: "GET", target, to: "127.0.0.3:8080" }
    }

    fn check(value: &str, key: &PeerKey, req: SignedRequest<'_>, now: u64) -> Result<(), Invalid> {
        Signature::parse(value.as_bytes())?.verify(key, req, now)
    }

    #[test]
    fn a_signature_verifies_for_its_own_request_and_reads_back_its_fields() {
        let value = sign(&key(1), request("/locus/coop/fetch?k=/a&v=1-2"), "127.0.0.2:8080", NOW, 7);
        assert_eq!(check(&value, &key(1), request("/locus/coop/fetch?k=/a&v=1-2"), NOW), Ok(()));
        let s = Signature::parse(value.as_bytes()).unwrap();
        assert_eq!((s.from.as_str(), s.time_ms, s.nonce), ("127.0.0.2:8080", NOW, 7));
        let odd = sign(&key(1), request("/"), "a b%c\u{e9}", NOW, 1);
        assert_eq!(Signature::parse(odd.as_bytes()).unwrap().from, "a b%c\u{e9}");
    }

    #[test]
    fn a_signature_under_another_key_never_verifies() {
        let value = sign(&key(1), request("/~dc/ping"), "s0", NOW, 9);
        assert_eq!(check(&value, &key(2), request("/~dc/ping"), NOW), Err(Invalid::BadMac));
    }

    #[test]
    fn a_signature_verifies_only_within_the_clock_skew_window() {
        for (made, ok) in [(NOW, true), (NOW - MAX_SKEW_MS, true), (NOW + MAX_SKEW_MS, true)] {
            let value = sign(&key(1), request("/"), "s0", made, 1);
            assert_eq!(check(&value, &key(1), request("/"), NOW).is_ok(), ok);
        }
        for made in [NOW - MAX_SKEW_MS - 1, NOW + MAX_SKEW_MS + 1, 0] {
            let value = sign(&key(1), request("/"), "s0", made, 1);
            assert_eq!(check(&value, &key(1), request("/"), NOW), Err(Invalid::Stale));
        }
    }

    #[test]
    fn values_that_are_not_five_well_formed_fields_are_malformed() {
        let good = sign(&key(1), request("/"), "s0", NOW, 1);
        let fields: Vec<&str> = good.split(' ').collect();
        for bad in [
            String::new(),
            "v1".to_string(),
            good.replacen("v1", "v2", 1),
            fields[..4].join(" "),
            format!("{good} extra"),
            good.replace(fields[2], "-1"),
            good.replace(fields[3], &fields[3][1..]),
            good.replace(fields[4], &fields[4].replace(|c: char| c.is_ascii_digit(), "g")),
        ] {
            assert_eq!(Signature::parse(bad.as_bytes()), Err(Invalid::Malformed), "{bad:?}");
        }
        assert_eq!(Signature::parse(&[0xff, b' ', 0xfe]), Err(Invalid::Malformed));
    }

    proptest! {
        #[test]
        fn any_change_to_a_signed_field_makes_the_signature_fail(
            which in 0usize..7,
            other in "[ -~]{0,40}",
            other_number in any::<u64>(),
        ) {
            let (target, to, from, nonce) = ("/locus/coop/lookup?k=/x&v=3-4&from=h:1", "h:2", "h:1", 42u128);
            let value = sign(&key(1), SignedRequest { method: "GET", target, to }, from, NOW, nonce);
            let mut s = Signature::parse(value.as_bytes()).unwrap();
            let mut req = SignedRequest { method: "GET", target, to };
            let changed = match which {
                0 => { req.method = "HEAD"; true }
                1 => { req.target = &other; other != target }
                2 => { req.to = &other; other != to }
                3 => { s.from = other.clone(); other != from }
                4 => { s.time_ms = NOW.wrapping_add(other_number % 5_000 + 1); true }
                5 => { s.nonce ^= u128::from(other_number | 1); true }
                _ => { s.mac[(other_number % 32) as usize] ^= 1 << (other_number % 8); true }
            };
            prop_assume!(changed);
            prop_assert_eq!(s.verify(&key(1), req, NOW), Err(Invalid::BadMac));
        }

        #[test]
        fn parsing_any_header_value_never_panics(value in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = Signature::parse(&value);
        }

        #[test]
        fn a_signature_made_for_any_request_verifies_exactly_for_it(
            target in "/[!-~]{0,80}",
            from in "[!-~]{1,20}",
            skew in 0u64..=MAX_SKEW_MS,
            nonce in any::<u128>(),
        ) {
            let req = SignedRequest { method: "GET", target: &target, to: "h:2" };
            let value = sign(&key(3), req, &from, NOW - skew, nonce);
            prop_assert_eq!(check(&value, &key(3), req, NOW), Ok(()));
        }
    }
}
