//! Authentication and encryption of the control channel: the shared `ControlKey`, the mutual
//! challenge–response handshake (HMAC-SHA256 over both nonces and each side's role), and the
//! frames, sealed with AES-256-GCM under a key per direction that HKDF-SHA256 derives from the
//! control key and both nonces (ring's HKDF and AEAD), the sequence number as nonce and the
//! header (length, sequence number) as associated data: frames are secret (they carry TLS
//! traffic secrets), unforgeable, unreplayable and ordered.

use std::fmt;

use hmac::{Hmac, Mac};
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN as AEAD_NONCE_LEN, Nonce, UnboundKey};
use ring::hkdf;
use sha2::Sha256;
use zeroize::Zeroizing;

use crate::error::ControlError;

type HmacSha256 = Hmac<Sha256>;

/// The greeting that opens both sides' first handshake message: protocol name and version.
pub(crate) const GREETING: &[u8; 8] = b"LOCUSHO2";
/// Bytes of a handshake nonce.
pub(crate) const NONCE_LEN: usize = 32;
/// Bytes of a handshake proof (a full HMAC-SHA256).
pub(crate) const PROOF_LEN: usize = 32;
/// Bytes of a frame header: payload length u32 LE, sequence number u64 LE.
pub(crate) const FRAME_HEADER_LEN: usize = 12;
/// Bytes of a frame tag (AES-256-GCM's).
pub(crate) const TAG_LEN: usize = 16;

const LABEL_INITIATOR: &[u8] = b"locus-handoff/1 initiator proof";
const LABEL_RESPONDER: &[u8] = b"locus-handoff/1 responder proof";
const LABEL_FROM_INITIATOR: &[u8] = b"locus-handoff/2 initiator frames";
const LABEL_FROM_RESPONDER: &[u8] = b"locus-handoff/2 responder frames";

/// The shared secret of the switch and its nodes, from configuration. At least 16 bytes;
/// 32 random bytes (64 hex digits) are recommended. Never printed.
#[derive(Clone)]
pub struct ControlKey {
    /// HMAC-SHA256 already keyed (cloned per use, which saves re-keying).
    mac: HmacSha256,
    /// The key itself, input to HKDF for each session's frame keys; zeroized when dropped.
    secret: Zeroizing<Vec<u8>>,
}

impl ControlKey {
    /// The shortest key accepted, in bytes.
    pub const MIN_LEN: usize = 16;

    /// A key from raw bytes.
    pub fn new(key: &[u8]) -> Result<ControlKey, ControlError> {
        if key.len() < ControlKey::MIN_LEN {
            return Err(ControlError::Key("shorter than 16 bytes"));
        }
        let mac = HmacSha256::new_from_slice(key).map_err(|_| ControlError::Key("rejected by HMAC"))?;
        Ok(ControlKey { mac, secret: Zeroizing::new(key.to_vec()) })
    }

    /// A key from hex digits (as written in a configuration file).
    pub fn from_hex(text: &str) -> Result<ControlKey, ControlError> {
        let text = text.trim();
        if !text.len().is_multiple_of(2) {
            return Err(ControlError::Key("odd number of hex digits"));
        }
        let bytes = text
            .as_bytes()
            .chunks(2)
            .map(|pair| {
                let digits = std::str::from_utf8(pair).map_err(|_| ControlError::Key("not hex"))?;
                u8::from_str_radix(digits, 16).map_err(|_| ControlError::Key("not hex"))
            })
            .collect::<Result<Vec<u8>, ControlError>>()
            .map(Zeroizing::new)?;
        ControlKey::new(&bytes)
    }

    /// A new random 32-byte key and its hex form (to write into a configuration).
    pub fn generate() -> (ControlKey, String) {
        let bytes = Zeroizing::new(rand::random::<[u8; 32]>());
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        (ControlKey::new(&*bytes).unwrap_or_else(|_| unreachable!("32 bytes is long enough")), hex)
    }

    /// HMAC over the concatenation of `parts`.
    fn mac_over(&self, parts: &[&[u8]]) -> HmacSha256 {
        let mut mac = self.mac.clone();
        for part in parts {
            mac.update(part);
        }
        mac
    }
}

impl fmt::Debug for ControlKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ControlKey(<secret>)")
    }
}

/// One handshake in progress: both nonces known.
pub(crate) struct Handshake<'k> {
    key: &'k ControlKey,
    initiator_nonce: [u8; NONCE_LEN],
    responder_nonce: [u8; NONCE_LEN],
}

impl<'k> Handshake<'k> {
    pub(crate) fn new(
        key: &'k ControlKey,
        initiator_nonce: [u8; NONCE_LEN],
        responder_nonce: [u8; NONCE_LEN],
    ) -> Handshake<'k> {
        Handshake { key, initiator_nonce, responder_nonce }
    }

    fn proof_mac(&self, label: &[u8]) -> HmacSha256 {
        self.key.mac_over(&[label, &self.initiator_nonce, &self.responder_nonce])
    }

    /// The proof the initiator sends.
    pub(crate) fn initiator_proof(&self) -> [u8; PROOF_LEN] {
        self.proof_mac(LABEL_INITIATOR).finalize().into_bytes().into()
    }

    /// The proof the responder sends.
    pub(crate) fn responder_proof(&self) -> [u8; PROOF_LEN] {
        self.proof_mac(LABEL_RESPONDER).finalize().into_bytes().into()
    }

    /// Check (in constant time) the initiator's proof.
    pub(crate) fn verify_initiator(&self, proof: &[u8]) -> Result<(), ControlError> {
        self.proof_mac(LABEL_INITIATOR)
            .verify_slice(proof)
            .map_err(|_| ControlError::AuthenticationFailed { role: "initiator" })
    }

    /// Check (in constant time) the responder's proof.
    pub(crate) fn verify_responder(&self, proof: &[u8]) -> Result<(), ControlError> {
        self.proof_mac(LABEL_RESPONDER)
            .verify_slice(proof)
            .map_err(|_| ControlError::AuthenticationFailed { role: "responder" })
    }

    /// The frame keys of the session, one per direction: (what this side seals with, what it
    /// opens with).
    pub(crate) fn session(&self, initiator: bool) -> (FrameSealer, FrameOpener) {
        let nonces = [&self.initiator_nonce[..], &self.responder_nonce[..]].concat();
        let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, &nonces).extract(&self.key.secret);
        let key = |label: &[u8]| {
            let info = [label];
            let okm = prk.expand(&info, &AES_256_GCM).unwrap_or_else(|_| unreachable!("32 bytes fit HKDF"));
            LessSafeKey::new(UnboundKey::from(okm))
        };
        let (mine, theirs) = if initiator {
            (LABEL_FROM_INITIATOR, LABEL_FROM_RESPONDER)
        } else {
            (LABEL_FROM_RESPONDER, LABEL_FROM_INITIATOR)
        };
        (FrameSealer { key: key(mine), next_seq: 0 }, FrameOpener { key: key(theirs), expected_seq: 0 })
    }
}

/// A frame's nonce: its sequence number (never repeated under one direction's key).
fn nonce(seq: u64) -> Nonce {
    let mut bytes = [0u8; AEAD_NONCE_LEN];
    bytes[AEAD_NONCE_LEN - 8..].copy_from_slice(&seq.to_be_bytes());
    Nonce::assume_unique_for_key(bytes)
}

/// Seals outgoing frames: numbers them, encrypts their payloads and appends their tags.
pub(crate) struct FrameSealer {
    key: LessSafeKey,
    next_seq: u64,
}

impl FrameSealer {
    /// `frame` holds `FRAME_HEADER_LEN` bytes of room followed by the payload: fill the
    /// header (length, next sequence number), encrypt the payload in place, append the tag.
    pub(crate) fn seal(&mut self, frame: &mut Vec<u8>) {
        let payload_len = (frame.len() - FRAME_HEADER_LEN) as u32;
        let seq = self.next_seq;
        self.next_seq += 1;
        let mut header = [0u8; FRAME_HEADER_LEN];
        header[..4].copy_from_slice(&payload_len.to_le_bytes());
        header[4..].copy_from_slice(&seq.to_le_bytes());
        frame[..FRAME_HEADER_LEN].copy_from_slice(&header);
        let tag = self
            .key
            .seal_in_place_separate_tag(nonce(seq), Aad::from(header), &mut frame[FRAME_HEADER_LEN..])
            .unwrap_or_else(|_| unreachable!("a frame is far shorter than AES-GCM's limit"));
        frame.extend_from_slice(tag.as_ref());
    }
}

/// Opens incoming frames: checks tags and sequence numbers, decrypts payloads.
pub(crate) struct FrameOpener {
    key: LessSafeKey,
    expected_seq: u64,
}

impl FrameOpener {
    /// Check and decrypt a whole frame (header, payload, tag) in place: its payload.
    pub(crate) fn open<'f>(&mut self, frame: &'f mut [u8]) -> Result<&'f [u8], ControlError> {
        if frame.len() < FRAME_HEADER_LEN + TAG_LEN {
            return Err(ControlError::BadTag { seq: self.expected_seq });
        }
        let mut header = [0u8; FRAME_HEADER_LEN];
        header.copy_from_slice(&frame[..FRAME_HEADER_LEN]);
        let seq = u64::from_le_bytes(header[4..].try_into().expect("eight bytes"));
        let declared = u32::from_le_bytes(header[..4].try_into().expect("four bytes")) as usize;
        if declared != frame.len() - FRAME_HEADER_LEN - TAG_LEN {
            return Err(ControlError::BadTag { seq });
        }
        let payload = self
            .key
            .open_in_place(nonce(seq), Aad::from(header), &mut frame[FRAME_HEADER_LEN..])
            .map_err(|_| ControlError::BadTag { seq })?;
        if seq != self.expected_seq {
            return Err(ControlError::OutOfSequence { got: seq, expected: self.expected_seq });
        }
        self.expected_seq += 1;
        Ok(payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> ((FrameSealer, FrameOpener), (FrameSealer, FrameOpener)) {
        let key = ControlKey::new(&[7u8; 32]).unwrap();
        let h = Handshake::new(&key, [1; 32], [2; 32]);
        (h.session(true), h.session(false))
    }

    fn frame(sealer: &mut FrameSealer, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; FRAME_HEADER_LEN];
        f.extend_from_slice(payload);
        sealer.seal(&mut f);
        f
    }

    /// Open a copy of `frame` (opening decrypts in place).
    fn open(opener: &mut FrameOpener, frame: &[u8]) -> Result<Vec<u8>, ControlError> {
        opener.open(&mut frame.to_vec()).map(<[u8]>::to_vec)
    }

    #[test]
    fn frames_open_in_order_only() {
        let ((mut i_seal, _), (_, mut r_open)) = pair();
        let f0 = frame(&mut i_seal, b"zero");
        let f1 = frame(&mut i_seal, b"one");
        assert!(matches!(open(&mut r_open, &f1), Err(ControlError::OutOfSequence { got: 1, expected: 0 })));
        assert_eq!(open(&mut r_open, &f0).unwrap(), b"zero");
        assert!(matches!(open(&mut r_open, &f0), Err(ControlError::OutOfSequence { got: 0, expected: 1 })));
        assert_eq!(open(&mut r_open, &f1).unwrap(), b"one");
    }

    #[test]
    fn a_frame_reflected_to_its_sender_or_altered_is_refused() {
        let ((mut i_seal, mut i_open), _) = pair();
        let f0 = frame(&mut i_seal, b"payload");
        assert!(matches!(open(&mut i_open, &f0), Err(ControlError::BadTag { .. })), "reflected");
        let ((mut i_seal, _), (_, mut r_open)) = pair();
        let f0 = frame(&mut i_seal, b"payload");
        for bit in 0..f0.len() * 8 {
            let mut bad = f0.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            assert!(open(&mut r_open, &bad).is_err(), "bit {bit} flipped went unnoticed");
        }
        assert_eq!(open(&mut r_open, &f0).unwrap(), b"payload");
    }

    #[test]
    fn a_sealed_payload_is_not_readable_on_the_wire_and_differs_per_session() {
        let secret = b"TRAFFIC SECRET 0123456789abcdef";
        let ((mut i_seal, _), _) = pair();
        let sealed = frame(&mut i_seal, secret);
        assert!(!sealed.windows(8).any(|w| secret.windows(8).any(|s| s == w)), "plaintext on the wire");
        let key = ControlKey::new(&[7u8; 32]).unwrap();
        let (mut other, _) = Handshake::new(&key, [1; 32], [3; 32]).session(true);
        assert_ne!(frame(&mut other, secret), sealed, "two sessions share a key");
    }

    proptest::proptest! {
        #[test]
        fn any_change_to_a_sealed_frame_is_refused_never_a_panic(
            payload in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
            flips in proptest::collection::vec((proptest::prelude::any::<proptest::sample::Index>(), 1u8..=255), 0..4),
            cut in proptest::prelude::any::<proptest::sample::Index>(),
            extra in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..4),
        ) {
            let ((mut seal, _), (_, mut opener)) = pair();
            let good = frame(&mut seal, &payload);
            let mut bad = good.clone();
            for (at, mask) in &flips {
                let i = at.index(bad.len());
                bad[i] ^= mask;
            }
            bad.truncate(cut.index(bad.len() + 1));
            bad.extend_from_slice(&extra);
            if bad != good {
                proptest::prop_assert!(super::tests::open(&mut opener, &bad).is_err());
            }
            // The genuine frame still opens afterwards: a refused frame consumes nothing.
            proptest::prop_assert_eq!(super::tests::open(&mut opener, &good).unwrap(), payload);
        }
    }

    #[test]
    fn proofs_depend_on_role_key_and_nonces() {
        let key = ControlKey::new(&[7u8; 32]).unwrap();
        let other = ControlKey::new(&[8u8; 32]).unwrap();
        let h = Handshake::new(&key, [1; 32], [2; 32]);
        assert!(h.verify_initiator(&h.initiator_proof()).is_ok());
        assert!(h.verify_responder(&h.initiator_proof()).is_err(), "a proof cannot be reflected");
        assert!(Handshake::new(&other, [1; 32], [2; 32]).verify_initiator(&h.initiator_proof()).is_err());
        assert!(Handshake::new(&key, [1; 32], [3; 32]).verify_initiator(&h.initiator_proof()).is_err());
    }

    #[test]
    fn keys_are_checked_and_never_printed() {
        assert!(ControlKey::new(&[0u8; 15]).is_err());
        assert!(ControlKey::from_hex("00112233445566778899aabbccddeeff").is_ok());
        assert!(ControlKey::from_hex("0011223344556677889").is_err());
        assert!(ControlKey::from_hex("zz112233445566778899aabbccddeeff").is_err());
        let (key, hex) = ControlKey::generate();
        assert_eq!(hex.len(), 64);
        assert_eq!(format!("{key:?}"), "ControlKey(<secret>)");
    }
}
