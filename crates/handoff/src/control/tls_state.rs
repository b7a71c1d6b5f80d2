//! The encoding of a TLS session handed over with its connection (one-way HTTPS): a presence
//! byte, then the suite's code point u16 LE, per direction (ours, then the client's) the
//! traffic secret (u8 length + bytes) and the next record's sequence number u64 LE, then the
//! decrypted bytes not yet used and the bytes of records not yet opened (each u32 LE length +
//! bytes). It travels only inside encrypted frames; secrets decode into zeroizing buffers.

use locus_tls::{SessionExport, Suite};
use zeroize::Zeroizing;

use crate::error::DecodeError;
use crate::repair_state::WireReader;

/// The longest traffic secret (SHA-384's output).
const MAX_SECRET_LEN: usize = 48;

/// Length of the encoding of `tls`.
pub(crate) fn tls_len(tls: Option<&SessionExport>) -> usize {
    1 + tls.map_or(0, |t| {
        2 + 1
            + t.tx_secret.len()
            + 8
            + 1
            + t.rx_secret.len()
            + 8
            + 4
            + t.plaintext.len()
            + 4
            + t.undecrypted.len()
    })
}

/// Append the encoding of `tls`.
pub(crate) fn put_tls(out: &mut Vec<u8>, tls: Option<&SessionExport>) {
    let Some(t) = tls else {
        out.push(0);
        return;
    };
    out.push(1);
    out.extend_from_slice(&t.suite.code().to_le_bytes());
    for (secret, seq) in [(&t.tx_secret, t.tx_seq), (&t.rx_secret, t.rx_seq)] {
        out.push(secret.len() as u8);
        out.extend_from_slice(secret);
        out.extend_from_slice(&seq.to_le_bytes());
    }
    for bytes in [&t.plaintext, &t.undecrypted] {
        out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        out.extend_from_slice(bytes);
    }
}

/// Read a TLS session's encoding.
pub(crate) fn get_tls(r: &mut WireReader<'_>) -> Result<Option<Box<SessionExport>>, DecodeError> {
    match r.u8("tls presence")? {
        0 => return Ok(None),
        1 => {}
        _ => return Err(DecodeError::Invalid("tls presence")),
    }
    let suite = Suite::from_code(r.u16("tls suite")?).ok_or(DecodeError::Invalid("tls suite"))?;
    let mut direction = |what: &'static str| -> Result<(Zeroizing<Vec<u8>>, u64), DecodeError> {
        let len = usize::from(r.u8(what)?);
        if len == 0 || len > MAX_SECRET_LEN {
            return Err(DecodeError::Invalid(what));
        }
        let secret = Zeroizing::new(r.bytes(len, what)?.to_vec());
        Ok((secret, r.u64("tls sequence number")?))
    };
    let (tx_secret, tx_seq) = direction("tls sending secret")?;
    let (rx_secret, rx_seq) = direction("tls receiving secret")?;
    let mut bytes = |what: &'static str| -> Result<Vec<u8>, DecodeError> {
        let len = r.u32(what)? as usize;
        Ok(r.bytes(len, what)?.to_vec())
    };
    let plaintext = bytes("tls plaintext")?;
    let undecrypted = bytes("tls undecrypted bytes")?;
    Ok(Some(Box::new(SessionExport { suite, tx_secret, tx_seq, rx_secret, rx_seq, plaintext, undecrypted })))
}
