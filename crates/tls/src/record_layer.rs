//! TLS 1.3 record protection for a session continued outside rustls (one-way HTTPS: the node
//! takes over a session the switch's rustls began). From each direction's traffic secret and
//! sequence number it derives the record key and IV (HKDF-Expand-Label with ring's HKDF),
//! seals and opens records with ring's AEAD, and follows KeyUpdate both ways, close_notify and
//! alerts. Only the record framing is written here; every cryptographic operation is ring's.

use ring::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey};
use ring::hkdf;
use zeroize::Zeroizing;

/// Largest plaintext in one record.
pub const MAX_PLAINTEXT: usize = 16_384;
/// Largest ciphertext a record may carry (plaintext, content type, padding, tag).
const MAX_CIPHERTEXT: usize = MAX_PLAINTEXT + 256;
const HEADER_LEN: usize = 5;
const TAG_LEN: usize = 16;

const APPLICATION_DATA: u8 = 23;
const ALERT: u8 = 21;
const HANDSHAKE: u8 = 22;
const KEY_UPDATE: u8 = 24;
const CLOSE_NOTIFY: u8 = 0;
const FATAL: u8 = 2;
/// KeyUpdates a peer may send with no application data between them before the session is
/// ended as a storm (each one costs a key derivation, and one asking for ours a record).
pub const KEY_UPDATES_IN_A_ROW: u32 = 32;
/// Records sealed under one key before the layer updates it: RFC 8446 §5.5 puts AES-GCM's
/// limit at 2^24.5 full records; the same bound is kept for every suite.
pub const RECORDS_PER_KEY: u64 = 1 << 24;

/// A TLS 1.3 cipher suite the record layer can continue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Suite {
    Aes128GcmSha256,
    Aes256GcmSha384,
    Chacha20Poly1305Sha256,
}

impl Suite {
    /// The suite rustls negotiated, if it is one this layer continues.
    pub fn of(suite: rustls::CipherSuite) -> Option<Suite> {
        match suite {
            rustls::CipherSuite::TLS13_AES_128_GCM_SHA256 => Some(Suite::Aes128GcmSha256),
            rustls::CipherSuite::TLS13_AES_256_GCM_SHA384 => Some(Suite::Aes256GcmSha384),
            rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256 => Some(Suite::Chacha20Poly1305Sha256),
            _ => None,
        }
    }

    fn aead(self) -> &'static aead::Algorithm {
        match self {
            Suite::Aes128GcmSha256 => &aead::AES_128_GCM,
            Suite::Aes256GcmSha384 => &aead::AES_256_GCM,
            Suite::Chacha20Poly1305Sha256 => &aead::CHACHA20_POLY1305,
        }
    }

    fn hkdf(self) -> hkdf::Algorithm {
        match self {
            Suite::Aes256GcmSha384 => hkdf::HKDF_SHA384,
            _ => hkdf::HKDF_SHA256,
        }
    }

    fn hash_len(self) -> usize {
        hkdf::KeyType::len(&self.hkdf())
    }

    /// The suite's IANA code point (as it travels on a handoff's control channel).
    pub fn code(self) -> u16 {
        match self {
            Suite::Aes128GcmSha256 => 0x1301,
            Suite::Aes256GcmSha384 => 0x1302,
            Suite::Chacha20Poly1305Sha256 => 0x1303,
        }
    }

    /// The suite of an IANA code point, if the record layer continues it.
    pub fn from_code(code: u16) -> Option<Suite> {
        [Suite::Aes128GcmSha256, Suite::Aes256GcmSha384, Suite::Chacha20Poly1305Sha256]
            .into_iter()
            .find(|s| s.code() == code)
    }

    /// The suite's name as rustls and the status print it.
    pub fn name(self) -> &'static str {
        match self {
            Suite::Aes128GcmSha256 => "TLS13_AES_128_GCM_SHA256",
            Suite::Aes256GcmSha384 => "TLS13_AES_256_GCM_SHA384",
            Suite::Chacha20Poly1305Sha256 => "TLS13_CHACHA20_POLY1305_SHA256",
        }
    }
}

/// Why a record could not be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RecordError {
    #[error("a record's tag did not verify")]
    BadRecordMac,
    #[error("a record longer than TLS allows ({0} bytes)")]
    RecordOverflow(usize),
    #[error("an unexpected record or message (content type {0})")]
    Unexpected(u8),
    #[error("the peer sent alert {0}")]
    Alert(u8),
    #[error("the sequence number would wrap: the session must end")]
    SequenceExhausted,
    #[error("a key could not be derived")]
    KeyDerivation,
    #[error("more than {KEY_UPDATES_IN_A_ROW} KeyUpdates with no data between them")]
    KeyUpdateStorm,
}

impl RecordError {
    /// The fatal alert that tells the peer why the session ends (none when the peer ended it,
    /// or when no record can be sealed any more).
    pub fn alert(&self) -> Option<u8> {
        match self {
            RecordError::BadRecordMac => Some(20),
            RecordError::RecordOverflow(_) => Some(22),
            RecordError::Unexpected(_) | RecordError::KeyUpdateStorm => Some(10),
            RecordError::KeyDerivation => Some(80),
            RecordError::Alert(_) | RecordError::SequenceExhausted => None,
        }
    }
}

/// `HKDF-Expand-Label(secret, label, "", len)` of RFC 8446 §7.1.
fn expand_label(
    suite: Suite,
    secret: &[u8],
    label: &[u8],
    len: usize,
) -> Result<Zeroizing<Vec<u8>>, RecordError> {
    struct Len(usize);
    impl hkdf::KeyType for Len {
        fn len(&self) -> usize {
            self.0
        }
    }
    let prk = hkdf::Prk::new_less_safe(suite.hkdf(), secret);
    let length = (len as u16).to_be_bytes();
    let label_len = [(6 + label.len()) as u8];
    let info: [&[u8]; 5] = [&length, &label_len, b"tls13 ", label, &[0]];
    let okm = prk.expand(&info, Len(len)).map_err(|_| RecordError::KeyDerivation)?;
    let mut out = Zeroizing::new(vec![0u8; len]);
    okm.fill(&mut out).map_err(|_| RecordError::KeyDerivation)?;
    Ok(out)
}

/// The traffic secret after a KeyUpdate (RFC 8446 §7.2).
pub(crate) fn next_secret(suite: Suite, secret: &[u8]) -> Result<Zeroizing<Vec<u8>>, RecordError> {
    expand_label(suite, secret, b"traffic upd", suite.hash_len())
}

/// A record key and its IV.
type KeyAndIv = (Zeroizing<Vec<u8>>, Zeroizing<Vec<u8>>);

/// The record key and IV of the traffic secret `secret` (RFC 8446 §7.3).
fn traffic_key(suite: Suite, secret: &[u8]) -> Result<KeyAndIv, RecordError> {
    Ok((
        expand_label(suite, secret, b"key", suite.aead().key_len())?,
        expand_label(suite, secret, b"iv", 12)?,
    ))
}

/// One direction of a session: its traffic secret, the key and IV derived from it, and the
/// next record's sequence number.
pub struct Direction {
    suite: Suite,
    secret: Zeroizing<Vec<u8>>,
    key: LessSafeKey,
    iv: Zeroizing<[u8; 12]>,
    seq: u64,
}

impl Direction {
    /// The direction whose traffic secret is `secret`, at sequence number `seq`.
    pub fn new(suite: Suite, secret: &[u8], seq: u64) -> Result<Direction, RecordError> {
        let (key, iv) = traffic_key(suite, secret)?;
        Direction::with_keys(suite, secret, &key, &iv, seq)
    }

    /// The direction whose traffic secret is `secret`, if that secret's key and IV are `key`
    /// and `iv` (the keys a session uses, checked against a secret believed to be theirs).
    pub(crate) fn matching(
        suite: Suite,
        secret: &[u8],
        seq: u64,
        key: &[u8],
        iv: &[u8],
    ) -> Result<Option<Direction>, RecordError> {
        let (derived_key, derived_iv) = traffic_key(suite, secret)?;
        if derived_key.as_slice() != key || derived_iv.as_slice() != iv {
            return Ok(None);
        }
        Direction::with_keys(suite, secret, key, iv, seq).map(Some)
    }

    /// A direction known by its record key and IV only (rustls's after a KeyUpdate, whose
    /// secret the key log does not give): it cannot follow another KeyUpdate.
    pub(crate) fn from_key(suite: Suite, key: &[u8], iv: &[u8], seq: u64) -> Result<Direction, RecordError> {
        Direction::with_keys(suite, &[], key, iv, seq)
    }

    /// The direction of `secret` (empty: unknown) with its record `key` and `iv`.
    fn with_keys(
        suite: Suite,
        secret: &[u8],
        key: &[u8],
        iv: &[u8],
        seq: u64,
    ) -> Result<Direction, RecordError> {
        let key = UnboundKey::new(suite.aead(), key).map_err(|_| RecordError::KeyDerivation)?;
        let iv: [u8; 12] = iv.try_into().map_err(|_| RecordError::KeyDerivation)?;
        Ok(Direction {
            suite,
            secret: Zeroizing::new(secret.to_vec()),
            key: LessSafeKey::new(key),
            iv: Zeroizing::new(iv),
            seq,
        })
    }

    /// After a KeyUpdate: the next traffic secret, sequence number 0.
    fn updated(&self) -> Result<Direction, RecordError> {
        if self.secret.is_empty() {
            return Err(RecordError::KeyDerivation);
        }
        Direction::new(self.suite, &next_secret(self.suite, &self.secret)?, 0)
    }

    /// The nonce of the next record, and the sequence number moved on.
    fn next_nonce(&mut self) -> Result<Nonce, RecordError> {
        if self.seq == u64::MAX {
            return Err(RecordError::SequenceExhausted);
        }
        let mut nonce = *self.iv;
        for (n, s) in nonce[4..].iter_mut().zip(self.seq.to_be_bytes()) {
            *n ^= s;
        }
        self.seq += 1;
        Ok(Nonce::assume_unique_for_key(nonce))
    }

    /// The next record's sequence number.
    pub fn sequence(&self) -> u64 {
        self.seq
    }

    /// The current traffic secret (to hand the session on; never printed).
    pub(crate) fn secret(&self) -> &Zeroizing<Vec<u8>> {
        &self.secret
    }

    pub fn suite(&self) -> Suite {
        self.suite
    }
}

/// What opening the buffered records gave.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Opened {
    /// The peer's close_notify came.
    pub closed: bool,
    /// KeyUpdates answered: records to send before any more data (our own KeyUpdate).
    pub key_updates: usize,
}

/// Both directions of a continued session.
pub struct RecordLayer {
    tx: Direction,
    rx: Direction,
    /// Records sealed under one key before it is updated (`RECORDS_PER_KEY`).
    records_per_key: u64,
    /// KeyUpdates received since the last application data.
    updates_in_a_row: u32,
}

impl RecordLayer {
    pub fn new(tx: Direction, rx: Direction) -> RecordLayer {
        RecordLayer { tx, rx, records_per_key: RECORDS_PER_KEY, updates_in_a_row: 0 }
    }

    /// The layer updating its sending key every `n` records instead (tests).
    pub fn with_records_per_key(self, n: u64) -> RecordLayer {
        RecordLayer { records_per_key: n.max(2), ..self }
    }

    pub fn tx(&self) -> &Direction {
        &self.tx
    }

    pub fn rx(&self) -> &Direction {
        &self.rx
    }

    /// Seal `plaintext` of `content_type` into records appended to `out`.
    fn seal_typed(
        &mut self,
        content_type: u8,
        plaintext: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), RecordError> {
        for chunk in plaintext.chunks(MAX_PLAINTEXT).chain(plaintext.is_empty().then_some(&[][..])) {
            let len = chunk.len() + 1 + TAG_LEN;
            let header = [APPLICATION_DATA, 3, 3, (len >> 8) as u8, len as u8];
            let start = out.len();
            out.extend_from_slice(&header);
            out.extend_from_slice(chunk);
            out.push(content_type);
            let nonce = self.tx.next_nonce()?;
            let tag = self
                .tx
                .key
                .seal_in_place_separate_tag(nonce, Aad::from(header), &mut out[start + HEADER_LEN..])
                .map_err(|_| RecordError::KeyDerivation)?;
            out.extend_from_slice(tag.as_ref());
        }
        Ok(())
    }

    /// Seal application data into records appended to `out`, updating the sending key first
    /// whenever it has sealed its share of records.
    pub fn seal(&mut self, plaintext: &[u8], out: &mut Vec<u8>) -> Result<(), RecordError> {
        for chunk in plaintext.chunks(MAX_PLAINTEXT) {
            // The KeyUpdate itself is the last record under the old key.
            if self.tx.seq + 1 >= self.records_per_key {
                self.update_tx(out)?;
            }
            self.seal_typed(APPLICATION_DATA, chunk, out)?;
        }
        Ok(())
    }

    /// Append a close_notify alert to `out`.
    pub fn seal_close_notify(&mut self, out: &mut Vec<u8>) -> Result<(), RecordError> {
        self.seal_typed(ALERT, &[1, CLOSE_NOTIFY], out)
    }

    /// Append a fatal alert of `description` to `out` (the session ends after it).
    pub fn seal_alert(&mut self, description: u8, out: &mut Vec<u8>) -> Result<(), RecordError> {
        self.seal_typed(ALERT, &[FATAL, description], out)
    }

    /// Open every whole record at the front of `input` (removing them), appending application
    /// data to `plaintext` and answering a KeyUpdate that asks for one into `replies`; a
    /// partial record stays in `input` for more bytes.
    pub fn open(
        &mut self,
        input: &mut Vec<u8>,
        plaintext: &mut Vec<u8>,
        replies: &mut Vec<u8>,
    ) -> Result<Opened, RecordError> {
        let mut opened = Opened::default();
        let mut at = 0;
        while input.len() - at >= HEADER_LEN && !opened.closed {
            let header: [u8; HEADER_LEN] = input[at..at + HEADER_LEN].try_into().expect("five bytes");
            let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
            if len > MAX_CIPHERTEXT {
                return Err(RecordError::RecordOverflow(len));
            }
            if header[0] != APPLICATION_DATA {
                return Err(RecordError::Unexpected(header[0]));
            }
            if input.len() - at < HEADER_LEN + len {
                break;
            }
            let body = &mut input[at + HEADER_LEN..at + HEADER_LEN + len];
            let nonce = self.rx.next_nonce()?;
            let inner = self
                .rx
                .key
                .open_in_place(nonce, Aad::from(header), body)
                .map_err(|_| RecordError::BadRecordMac)?;
            let Some(end) = inner.iter().rposition(|&b| b != 0) else {
                return Err(RecordError::Unexpected(0));
            };
            let (content, typ) = (&inner[..end], inner[end]);
            match typ {
                APPLICATION_DATA => {
                    if !content.is_empty() {
                        self.updates_in_a_row = 0;
                    }
                    plaintext.extend_from_slice(content);
                }
                ALERT if content == [1, CLOSE_NOTIFY] => opened.closed = true,
                ALERT => return Err(RecordError::Alert(*content.get(1).unwrap_or(&0))),
                HANDSHAKE => {
                    let requested = key_update_request(content)?;
                    self.updates_in_a_row += 1;
                    if self.updates_in_a_row > KEY_UPDATES_IN_A_ROW {
                        return Err(RecordError::KeyUpdateStorm);
                    }
                    self.rx = self.rx.updated()?;
                    if requested {
                        self.seal_typed(HANDSHAKE, &[KEY_UPDATE, 0, 0, 1, 0], replies)?;
                        self.tx = self.tx.updated()?;
                        opened.key_updates += 1;
                    }
                }
                other => return Err(RecordError::Unexpected(other)),
            }
            at += HEADER_LEN + len;
        }
        input.drain(..at);
        Ok(opened)
    }

    /// Update our sending keys (sending a KeyUpdate that does not ask the peer for one).
    pub fn update_tx(&mut self, out: &mut Vec<u8>) -> Result<(), RecordError> {
        self.seal_typed(HANDSHAKE, &[KEY_UPDATE, 0, 0, 1, 0], out)?;
        self.tx = self.tx.updated()?;
        Ok(())
    }
}

/// A handshake record after the handshake may only be one KeyUpdate: whether it asks for ours.
fn key_update_request(content: &[u8]) -> Result<bool, RecordError> {
    match content {
        [KEY_UPDATE, 0, 0, 1, 0] => Ok(false),
        [KEY_UPDATE, 0, 0, 1, 1] => Ok(true),
        _ => Err(RecordError::Unexpected(HANDSHAKE)),
    }
}
