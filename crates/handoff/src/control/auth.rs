//! Authentication of the control channel: the shared `ControlKey`, the mutual
//! challenge–response handshake (HMAC-SHA256 over both nonces and each side's role), and the
//! per-frame tags (HMAC-SHA256 truncated to 128 bits over session id, direction, sequence
//! number, length and payload) that make frames unforgeable, unreplayable and ordered.

use std::fmt;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::error::ControlError;

type HmacSha256 = Hmac<Sha256>;

/// The greeting that opens both sides' first handshake message: protocol name and version.
pub(crate) const GREETING: &[u8; 8] = b"LOCUSHO1";
/// Bytes of a handshake nonce.
pub(crate) const NONCE_LEN: usize = 32;
/// Bytes of a handshake proof (a full HMAC-SHA256).
pub(crate) const PROOF_LEN: usize = 32;
/// Bytes of a frame header: payload length u32 LE, sequence number u64 LE.
pub(crate) const FRAME_HEADER_LEN: usize = 12;
/// Bytes of a frame tag (HMAC-SHA256 truncated).
pub(crate) const TAG_LEN: usize = 16;

const LABEL_INITIATOR: &[u8] = b"locus-handoff/1 initiator proof";
const LABEL_RESPONDER: &[u8] = b"locus-handoff/1 responder proof";
const LABEL_SESSION_KEY: &[u8] = b"locus-handoff/1 session key";
const LABEL_SESSION_ID: &[u8] = b"locus-handoff/1 session id";

/// Direction bytes in the frame tag: a frame cannot be reflected back to its sender.
const FROM_INITIATOR: u8 = b'I';
const FROM_RESPONDER: u8 = b'R';

/// The shared secret of the switch and its nodes, from configuration. At least 16 bytes;
/// 32 random bytes (64 hex digits) are recommended. Never printed.
#[derive(Clone)]
pub struct ControlKey {
    /// HMAC-SHA256 already keyed (cloned per use, which saves re-keying).
    mac: HmacSha256,
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
        Ok(ControlKey { mac })
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
            .collect::<Result<Vec<u8>, ControlError>>()?;
        ControlKey::new(&bytes)
    }

    /// A new random 32-byte key and its hex form (to write into a configuration).
    pub fn generate() -> (ControlKey, String) {
        let bytes: [u8; 32] = rand::random();
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        (ControlKey::new(&bytes).unwrap_or_else(|_| unreachable!("32 bytes is long enough")), hex)
    }

    /// HMAC over the concatenation of `parts`.
    fn mac_over(&self, parts: &[&[u8]]) -> HmacSha256 {
        let mut mac = self.mac.clone();
        for part in parts {
            mac.update(part);
        }
        mac
    }

    fn tag(&self, parts: &[&[u8]]) -> [u8; 32] {
        self.mac_over(parts).finalize().into_bytes().into()
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

    /// The keys of the session: (what the initiator seals with, what it opens with).
    pub(crate) fn session(&self, initiator: bool) -> (FrameSealer, FrameOpener) {
        let nonces: [&[u8]; 2] = [&self.initiator_nonce, &self.responder_nonce];
        let session_key = self.key.tag(&[LABEL_SESSION_KEY, nonces[0], nonces[1]]);
        let id = self.key.tag(&[LABEL_SESSION_ID, nonces[0], nonces[1]]);
        let mut session_id = [0u8; 16];
        session_id.copy_from_slice(&id[..16]);
        let keys = FrameKeys {
            mac: HmacSha256::new_from_slice(&session_key)
                .unwrap_or_else(|_| unreachable!("HMAC takes any key")),
            session_id,
        };
        let (mine, theirs) =
            if initiator { (FROM_INITIATOR, FROM_RESPONDER) } else { (FROM_RESPONDER, FROM_INITIATOR) };
        (
            FrameSealer { keys: keys.clone(), direction: mine, next_seq: 0 },
            FrameOpener { keys, direction: theirs, expected_seq: 0 },
        )
    }
}

/// The session's frame key and id.
#[derive(Clone)]
struct FrameKeys {
    mac: HmacSha256,
    session_id: [u8; 16],
}

impl FrameKeys {
    fn tag(&self, direction: u8, header: &[u8], payload: &[u8]) -> HmacSha256 {
        let mut mac = self.mac.clone();
        mac.update(&self.session_id);
        mac.update(&[direction]);
        mac.update(header);
        mac.update(payload);
        mac
    }
}

/// Seals outgoing frames: numbers them and appends their tags.
pub(crate) struct FrameSealer {
    keys: FrameKeys,
    direction: u8,
    next_seq: u64,
}

impl FrameSealer {
    /// `frame` holds `FRAME_HEADER_LEN` bytes of room followed by the payload: fill the
    /// header (length, next sequence number) and append the tag.
    pub(crate) fn seal(&mut self, frame: &mut Vec<u8>) {
        let payload_len = (frame.len() - FRAME_HEADER_LEN) as u32;
        frame[..4].copy_from_slice(&payload_len.to_le_bytes());
        frame[4..FRAME_HEADER_LEN].copy_from_slice(&self.next_seq.to_le_bytes());
        self.next_seq += 1;
        let (header, payload) = frame.split_at(FRAME_HEADER_LEN);
        let tag = self.keys.tag(self.direction, header, payload).finalize().into_bytes();
        frame.extend_from_slice(&tag[..TAG_LEN]);
    }
}

/// Opens incoming frames: checks tags and sequence numbers.
pub(crate) struct FrameOpener {
    keys: FrameKeys,
    direction: u8,
    expected_seq: u64,
}

impl FrameOpener {
    /// Check a whole frame (header, payload, tag) and return its payload.
    pub(crate) fn open<'f>(&mut self, frame: &'f [u8]) -> Result<&'f [u8], ControlError> {
        if frame.len() < FRAME_HEADER_LEN + TAG_LEN {
            return Err(ControlError::BadTag { seq: self.expected_seq });
        }
        let (header, rest) = frame.split_at(FRAME_HEADER_LEN);
        let (payload, tag) = rest.split_at(rest.len() - TAG_LEN);
        let mut seq_bytes = [0u8; 8];
        seq_bytes.copy_from_slice(&header[4..]);
        let seq = u64::from_le_bytes(seq_bytes);
        let declared = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
        if declared != payload.len() {
            return Err(ControlError::BadTag { seq });
        }
        self.keys
            .tag(self.direction, header, payload)
            .verify_truncated_left(tag)
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

    #[test]
    fn frames_open_in_order_only() {
        let ((mut i_seal, _), (_, mut r_open)) = pair();
        let f0 = frame(&mut i_seal, b"zero");
        let f1 = frame(&mut i_seal, b"one");
        assert!(matches!(r_open.open(&f1), Err(ControlError::OutOfSequence { got: 1, expected: 0 })));
        assert_eq!(r_open.open(&f0).unwrap(), b"zero");
        assert!(matches!(r_open.open(&f0), Err(ControlError::OutOfSequence { got: 0, expected: 1 })));
        assert_eq!(r_open.open(&f1).unwrap(), b"one");
    }

    #[test]
    fn a_frame_reflected_to_its_sender_or_altered_is_refused() {
        let ((mut i_seal, mut i_open), _) = pair();
        let f0 = frame(&mut i_seal, b"payload");
        assert!(matches!(i_open.open(&f0), Err(ControlError::BadTag { .. })), "reflected");
        let ((mut i_seal, _), (_, mut r_open)) = pair();
        let f0 = frame(&mut i_seal, b"payload");
        for bit in 0..f0.len() * 8 {
            let mut bad = f0.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            assert!(r_open.open(&bad).is_err(), "bit {bit} flipped went unnoticed");
        }
        assert_eq!(r_open.open(&f0).unwrap(), b"payload");
    }

    proptest::proptest! {
        #[test]
        fn any_change_to_a_sealed_frame_is_refused_never_a_panic(
            payload in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
            flips in proptest::collection::vec((proptest::prelude::any::<proptest::sample::Index>(), 1u8..=255), 0..4),
            cut in proptest::prelude::any::<proptest::sample::Index>(),
            extra in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..4),
        ) {
            let ((mut seal, _), (_, mut open)) = pair();
            let good = frame(&mut seal, &payload);
            let mut bad = good.clone();
            for (at, mask) in &flips {
                let i = at.index(bad.len());
                bad[i] ^= mask;
            }
            bad.truncate(cut.index(bad.len() + 1));
            bad.extend_from_slice(&extra);
            if bad != good {
                proptest::prop_assert!(open.open(&bad).is_err());
            }
            // The genuine frame still opens afterwards: a refused frame consumes nothing.
            proptest::prop_assert_eq!(open.open(&good).unwrap(), &payload[..]);
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
