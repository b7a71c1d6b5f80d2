//! Session-ticket keys shared by every switch and node of a cluster, so a client resumes its
//! session wherever its next connection lands. The key file has HAProxy's `tls-ticket-keys`
//! layout: one base64 key per line (48 or 80 bytes: a 16-byte name, then the key material),
//! `#` comments and blank lines ignored. The last three keys are used: the next-to-last seals
//! new tickets and all three open them, so rotating is appending a line and reloading. A
//! ticket is `name ‖ nonce ‖ AES-256-GCM(plain)` (ring), under a key derived from the line with
//! HKDF-SHA256; the material read from the file is zeroized when dropped.

use std::path::Path;

use base64::Engine as _;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::hkdf::{HKDF_SHA256, Salt};
use ring::rand::{SecureRandom, SystemRandom};
use zeroize::Zeroizing;

use crate::error::TlsError;

/// Keys used from the end of the file.
pub const KEYS_USED: usize = 3;
const NAME_LEN: usize = 16;
const HKDF_INFO: &[u8] = b"locus session ticket key";

/// One line's key.
struct TicketKey {
    name: [u8; NAME_LEN],
    aead: LessSafeKey,
}

/// The keys of a ticket-key file, ready to seal and open tickets.
pub struct TicketKeys {
    /// The last [`KEYS_USED`] keys of the file, oldest first.
    keys: Vec<TicketKey>,
    /// Which of `keys` seals.
    sealing: usize,
    lifetime_s: u32,
    random: SystemRandom,
}

impl std::fmt::Debug for TicketKeys {
    /// Names only: never the key material.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TicketKeys")
            .field("keys", &self.keys.len())
            .field("lifetime_s", &self.lifetime_s)
            .finish()
    }
}

impl TicketKeys {
    /// Read a key file; refused, naming the file and line, when it is open to others, a line is
    /// not base64 of 48 or 80 bytes, or it has no key.
    pub fn from_file(path: &Path, lifetime_s: u32) -> Result<TicketKeys, TlsError> {
        crate::certificate::check_key_permissions(path)?;
        let text = Zeroizing::new(
            std::fs::read_to_string(path)
                .map_err(|e| TlsError::Read { path: path.to_path_buf(), message: e.to_string() })?,
        );
        TicketKeys::from_text(&text, lifetime_s)
            .map_err(|message| TlsError::Read { path: path.to_path_buf(), message })
    }

    /// Parse the file's text (the message names the line).
    pub fn from_text(text: &str, lifetime_s: u32) -> Result<TicketKeys, String> {
        let mut lines = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let raw = Zeroizing::new(
                base64::engine::general_purpose::STANDARD
                    .decode(line)
                    .map_err(|_| format!("line {}: not base64", i + 1))?,
            );
            if raw.len() != 48 && raw.len() != 80 {
                return Err(format!("line {}: a key is 48 or 80 bytes, not {}", i + 1, raw.len()));
            }
            lines.push(raw);
        }
        if lines.is_empty() {
            return Err("no key (one base64 key of 48 or 80 bytes per line)".into());
        }
        let used = &lines[lines.len().saturating_sub(KEYS_USED)..];
        let keys = used.iter().map(|raw| derive(raw)).collect::<Vec<_>>();
        let sealing = keys.len().saturating_sub(2);
        Ok(TicketKeys { keys, sealing, lifetime_s, random: SystemRandom::new() })
    }

    /// The name of the key that seals new tickets.
    pub fn sealing_name(&self) -> [u8; NAME_LEN] {
        self.keys[self.sealing].name
    }
}

/// A line's name and its AEAD key (HKDF-SHA256 over the material, salted with the name).
fn derive(raw: &[u8]) -> TicketKey {
    let mut name = [0u8; NAME_LEN];
    name.copy_from_slice(&raw[..NAME_LEN]);
    let prk = Salt::new(HKDF_SHA256, &name).extract(&raw[NAME_LEN..]);
    let mut bytes = Zeroizing::new([0u8; 32]);
    // Both only fail on a wrong output length, which is fixed here.
    prk.expand(&[HKDF_INFO], &AES_256_GCM)
        .and_then(|okm| okm.fill(bytes.as_mut()))
        .expect("32-byte HKDF output");
    let key = UnboundKey::new(&AES_256_GCM, bytes.as_ref()).expect("an AES-256 key is 32 bytes");
    TicketKey { name, aead: LessSafeKey::new(key) }
}

impl rustls::server::ProducesTickets for TicketKeys {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        self.lifetime_s
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        let key = &self.keys[self.sealing];
        let mut nonce = [0u8; NONCE_LEN];
        self.random.fill(&mut nonce).ok()?;
        let mut sealed = plain.to_vec();
        key.aead
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(&key.name), &mut sealed)
            .ok()?;
        let mut ticket = Vec::with_capacity(NAME_LEN + NONCE_LEN + sealed.len());
        ticket.extend_from_slice(&key.name);
        ticket.extend_from_slice(&nonce);
        ticket.extend_from_slice(&sealed);
        Some(ticket)
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        if cipher.len() < NAME_LEN + NONCE_LEN + AES_256_GCM.tag_len() {
            return None;
        }
        let (name, rest) = cipher.split_at(NAME_LEN);
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let key = self.keys.iter().find(|k| k.name == name)?;
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        // The opened session secrets are erased from this buffer when it drops.
        let mut buf = Zeroizing::new(sealed.to_vec());
        let plain = key.aead.open_in_place(nonce, Aad::from(&key.name), buf.as_mut_slice()).ok()?;
        Some(plain.to_vec())
    }
}
