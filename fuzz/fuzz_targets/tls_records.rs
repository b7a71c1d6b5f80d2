//! Fuzz the TLS 1.3 record layer a node continues a handed-off session with (the one piece of
//! TLS framing Locus writes by hand): any bytes from a client give records opened, "need more"
//! or an error, never a panic, and nothing after an error; records a peer's layer sealed, with
//! KeyUpdates between them, fed in pieces cut anywhere, open to exactly the bytes sealed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use locus_tls::{Direction, KEY_UPDATES_IN_A_ROW, RecordLayer, Suite};

const SUITES: [Suite; 3] = [Suite::Aes128GcmSha256, Suite::Aes256GcmSha384, Suite::Chacha20Poly1305Sha256];

/// The node's layer and the client's, for `suite`, with fixed traffic secrets.
fn layers(suite: Suite) -> (RecordLayer, RecordLayer) {
    let len = if suite == Suite::Aes256GcmSha384 { 48 } else { 32 };
    let (client, server) = (vec![7u8; len], vec![9u8; len]);
    let dir = |secret: &[u8]| Direction::new(suite, secret, 0).unwrap();
    (RecordLayer::new(dir(&server), dir(&client)), RecordLayer::new(dir(&client), dir(&server)))
}

/// Feed `bytes` to `node` in pieces whose lengths come from `cuts`: the plaintext opened, or
/// the first error.
fn feed(node: &mut RecordLayer, bytes: &[u8], cuts: &[u8]) -> Result<Vec<u8>, locus_tls::RecordError> {
    let (mut input, mut plain, mut replies) = (Vec::new(), Vec::new(), Vec::new());
    let mut at = 0;
    let mut cut = cuts.iter().cycle();
    while at < bytes.len() {
        let n = (usize::from(*cut.next().unwrap_or(&255)) * 67 + 1).min(bytes.len() - at);
        input.extend_from_slice(&bytes[at..at + n]);
        at += n;
        let opened = node.open(&mut input, &mut plain, &mut replies)?;
        assert!(input.len() <= 5 + 16_384 + 256, "more than one partial record kept");
        if opened.closed {
            break;
        }
    }
    Ok(plain)
}

fuzz_target!(|input: &[u8]| {
    let Some((&flags, data)) = input.split_first() else { return };
    let suite = SUITES[usize::from(flags >> 1) % SUITES.len()];
    let (mut node, mut client) = layers(suite);
    if flags & 1 == 0 {
        // Anything a client may send: never a panic.
        let _ = feed(&mut node, data, &[3, 250, 1]);
        return;
    }
    // A client's records: plaintext pieces and KeyUpdates, as `data` says.
    let (ops, cuts) = data.split_at(data.len() / 2);
    let (mut wire, mut sent) = (Vec::new(), Vec::new());
    let mut updates_in_a_row = 0;
    for (i, op) in ops.chunks(2).enumerate() {
        if op[0] == 0 && updates_in_a_row < KEY_UPDATES_IN_A_ROW {
            client.update_tx(&mut wire).unwrap();
            updates_in_a_row += 1;
            continue;
        }
        let len = usize::from(*op.get(1).unwrap_or(&1)) * 97;
        let piece: Vec<u8> = (0..len).map(|j| (i + j) as u8).collect();
        client.seal(&piece, &mut wire).unwrap();
        sent.extend_from_slice(&piece);
        updates_in_a_row = if piece.is_empty() { updates_in_a_row } else { 0 };
    }
    let opened = feed(&mut node, &wire, cuts).expect("a peer's records open");
    assert!(opened == sent, "opened {} bytes, sealed {}", opened.len(), sent.len());
});
