//! The cluster's shared peer key: `PeerKey` (HMAC-SHA256 keyed once, the key's bytes zeroized
//! as soon as it is keyed, never printed), read from hex in `peer_key_file` or `peer_key`;
//! `SecretText`, a key as configuration text, never printed or serialized and zeroized when
//! dropped.

use std::fmt;
use std::path::Path;

use hmac::{Hmac, Mac};
use serde::{Deserialize, Deserializer};
use sha2::Sha256;
use zeroize::Zeroizing;

use crate::config::{ConfigError, read_file};

pub(crate) type HmacSha256 = Hmac<Sha256>;

/// Why key text is not a usable key (never says what the text was).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PeerKeyError {
    #[error("shorter than 16 bytes (32 hex digits); 32 random bytes are recommended")]
    TooShort,
    #[error("an odd number of hex digits")]
    OddLength,
    #[error("not hex")]
    NotHex,
}

/// The shared secret of a cluster's nodes, which signs and checks their requests to each
/// other. At least 16 bytes; 32 random bytes (64 hex digits) are recommended.
#[derive(Clone)]
pub struct PeerKey {
    /// HMAC-SHA256 already keyed (cloned per use, which saves re-keying).
    mac: HmacSha256,
}

impl PeerKey {
    /// The shortest key accepted, in bytes.
    pub const MIN_LEN: usize = 16;

    /// A key from raw bytes.
    pub fn new(key: &[u8]) -> Result<PeerKey, PeerKeyError> {
        if key.len() < PeerKey::MIN_LEN {
            return Err(PeerKeyError::TooShort);
        }
        let mac =
            HmacSha256::new_from_slice(key).unwrap_or_else(|_| unreachable!("HMAC takes any key length"));
        Ok(PeerKey { mac })
    }

    /// A key from hex digits (as written in a key file; surrounding white space ignored).
    pub fn from_hex(text: &str) -> Result<PeerKey, PeerKeyError> {
        let digits = text.trim().as_bytes();
        if !digits.len().is_multiple_of(2) {
            return Err(PeerKeyError::OddLength);
        }
        let mut bytes = Zeroizing::new(Vec::with_capacity(digits.len() / 2));
        for pair in digits.chunks(2) {
            bytes.push(hex_digit(pair[0])? << 4 | hex_digit(pair[1])?);
        }
        PeerKey::new(&bytes)
    }

    /// The keyed MAC, ready for one message.
    pub(crate) fn keyed(&self) -> HmacSha256 {
        self.mac.clone()
    }

    /// Whether `other` is the same key (told by a MAC of a fixed message under each, so
    /// neither key is kept or compared itself): a reload says whether the key changed.
    pub fn same_as(&self, other: &PeerKey) -> bool {
        let fingerprint = |k: &PeerKey| k.keyed().chain_update(b"locus peer key fingerprint").finalize();
        fingerprint(self) == fingerprint(other)
    }
}

impl fmt::Debug for PeerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PeerKey(<secret>)")
    }
}

fn hex_digit(d: u8) -> Result<u8, PeerKeyError> {
    (d as char).to_digit(16).map(|v| v as u8).ok_or(PeerKeyError::NotHex)
}

/// A secret as written in the configuration: never printed (`<redacted>`), never serialized
/// (its field is `skip_serializing`), zeroized when dropped.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretText(Zeroizing<String>);

impl SecretText {
    pub fn new(text: impl Into<String>) -> SecretText {
        SecretText(Zeroizing::new(text.into()))
    }

    /// The text itself, to make a key of.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl<'de> Deserialize<'de> for SecretText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<SecretText, D::Error> {
        String::deserialize(d).map(SecretText::new)
    }
}

/// The peer key a node is configured with: `file` first, else `inline`; `None` without
/// either. An error names the file or the key's setting, never the key.
pub fn configured_peer_key(
    file: Option<&Path>,
    inline: Option<&SecretText>,
) -> Result<Option<PeerKey>, ConfigError> {
    let key = match (file, inline) {
        (Some(path), _) => {
            let text = Zeroizing::new(read_file(path)?);
            PeerKey::from_hex(&text).map_err(|e| format!("peer_key_file {}: {e}", path.display()))
        }
        (None, Some(text)) => PeerKey::from_hex(text.expose()).map_err(|e| format!("peer_key: {e}")),
        (None, None) => return Ok(None),
    };
    key.map(Some).map_err(ConfigError::Invalid)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "00112233445566778899aabbccddeeff";

    #[test]
    fn keys_are_hex_of_at_least_16_bytes_and_errors_never_show_the_text() {
        assert!(PeerKey::from_hex(HEX).is_ok());
        assert!(PeerKey::from_hex(&format!("  {HEX}{HEX}\n")).is_ok());
        assert_eq!(PeerKey::from_hex(&HEX[..30]).unwrap_err(), PeerKeyError::TooShort);
        assert_eq!(PeerKey::from_hex(&HEX[..31]).unwrap_err(), PeerKeyError::OddLength);
        assert_eq!(PeerKey::from_hex(&HEX.replace('a', "g")).unwrap_err(), PeerKeyError::NotHex);
        let e = configured_peer_key(None, Some(&SecretText::new("zz112233"))).unwrap_err().to_string();
        assert!(e.contains("peer_key") && !e.contains("zz11"), "{e}");
    }

    #[test]
    fn the_same_key_is_told_from_another() {
        let a = PeerKey::from_hex(HEX).unwrap();
        assert!(a.same_as(&PeerKey::from_hex(&format!("{HEX}\n")).unwrap()));
        assert!(!a.same_as(&PeerKey::from_hex(&HEX.replace('0', "1")).unwrap()));
    }

    #[test]
    fn secrets_are_never_printed() {
        let text = SecretText::new(HEX);
        let key = PeerKey::from_hex(text.expose()).unwrap();
        assert_eq!(format!("{text:?} {key:?}"), "<redacted> PeerKey(<secret>)");
    }

    #[test]
    fn a_key_file_wins_over_the_inline_key_and_a_missing_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("peer.key");
        std::fs::write(&path, format!("{HEX}\n")).unwrap();
        let bad_inline = SecretText::new("nothex");
        assert!(configured_peer_key(Some(&path), Some(&bad_inline)).unwrap().is_some());
        assert!(configured_peer_key(None, None).unwrap().is_none());
        let missing = dir.path().join("none.key");
        let e = configured_peer_key(Some(&missing), None).unwrap_err().to_string();
        assert!(e.contains("none.key"), "{e}");
    }
}
