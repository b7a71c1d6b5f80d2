//! Taking a server session apart so that another process continues it (one-way HTTPS): a
//! per-connection key log keeping this connection's TLS 1.3 traffic secrets, `accept_exportable`
//! which handshakes with it, and `TlsStream::export`, which returns the socket and what a
//! `RecordLayer` needs — the suite, each direction's traffic secret and sequence number — with
//! the decrypted bytes not yet read and the bytes of a record not yet whole. Secrets are
//! zeroized when dropped and never printed.

use std::sync::{Arc, Mutex};

use rustls::ServerConfig;
use tokio::net::TcpStream;
use tokio::time::Instant;
use zeroize::Zeroizing;

use crate::record_layer::{Direction, RecordError, RecordLayer, Suite, next_secret};
use crate::stream::{HandshakeFailure, TlsStream, accept};

const CLIENT_SECRET: &str = "CLIENT_TRAFFIC_SECRET_0";
const SERVER_SECRET: &str = "SERVER_TRAFFIC_SECRET_0";

/// The first application traffic secrets of one connection, as rustls's key log gives them.
#[derive(Default)]
pub struct SessionSecrets {
    client: Mutex<Option<Zeroizing<Vec<u8>>>>,
    server: Mutex<Option<Zeroizing<Vec<u8>>>>,
}

impl std::fmt::Debug for SessionSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionSecrets { .. }")
    }
}

impl rustls::KeyLog for SessionSecrets {
    fn will_log(&self, label: &str) -> bool {
        label == CLIENT_SECRET || label == SERVER_SECRET
    }

    fn log(&self, label: &str, _client_random: &[u8], secret: &[u8]) {
        let slot = match label {
            CLIENT_SECRET => &self.client,
            SERVER_SECRET => &self.server,
            _ => return,
        };
        *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(Zeroizing::new(secret.to_vec()));
    }
}

impl SessionSecrets {
    fn take(slot: &Mutex<Option<Zeroizing<Vec<u8>>>>) -> Option<Zeroizing<Vec<u8>>> {
        slot.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// Why a session could not be taken apart; it is still the caller's to serve (or close).
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("only TLS 1.3 sessions are handed over (this one is {0})")]
    NotTls13(&'static str),
    #[error("the suite {0} is not one the record layer continues")]
    Suite(&'static str),
    #[error("records are still queued for the client")]
    OutputPending,
    #[error("the session was not accepted to be handed over (no secrets kept)")]
    NoSecrets,
    #[error("rustls would not give the keys up: {0}")]
    Extract(rustls::Error),
    #[error("the keys were updated before the handoff (the key log has only the first)")]
    KeyUpdated,
    #[error("the record layer could not take the keys: {0}")]
    Record(RecordError),
    #[error("the session was not taken over from rustls first")]
    NotTakenOver,
    #[error("the session has ended")]
    Ended,
}

impl ExportError {
    /// A short label for counting sessions served two-way by why.
    pub fn reason(&self) -> &'static str {
        match self {
            ExportError::NotTls13(_) => "tls12",
            ExportError::Suite(_) => "suite",
            ExportError::OutputPending => "output_pending",
            ExportError::NoSecrets | ExportError::NotTakenOver => "no_secrets",
            ExportError::KeyUpdated => "key_updated",
            ExportError::Extract(_) | ExportError::Record(_) => "keys",
            ExportError::Ended => "ended",
        }
    }
}

/// What continues a session elsewhere.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionExport {
    pub suite: Suite,
    /// Our (server) direction: its traffic secret and next sequence number.
    pub tx_secret: Zeroizing<Vec<u8>>,
    pub tx_seq: u64,
    /// The client's direction.
    pub rx_secret: Zeroizing<Vec<u8>>,
    pub rx_seq: u64,
    /// Decrypted bytes the switch read from the socket and did not use (pipelined requests).
    pub plaintext: Vec<u8>,
    /// Bytes of records not yet whole, still encrypted.
    pub undecrypted: Vec<u8>,
}

impl std::fmt::Debug for SessionExport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionExport")
            .field("suite", &self.suite)
            .field("tx_seq", &self.tx_seq)
            .field("rx_seq", &self.rx_seq)
            .field("plaintext", &self.plaintext.len())
            .field("undecrypted", &self.undecrypted.len())
            .finish_non_exhaustive()
    }
}

impl SessionExport {
    /// The record layer that continues the session.
    pub fn record_layer(&self) -> Result<RecordLayer, RecordError> {
        let tx = Direction::new(self.suite, &self.tx_secret, self.tx_seq)?;
        let rx = Direction::new(self.suite, &self.rx_secret, self.rx_seq)?;
        Ok(RecordLayer::new(tx, rx))
    }
}

/// `accept` under `config`, keeping what `TlsStream::export` needs to hand the session over.
pub async fn accept_exportable(
    tcp: TcpStream,
    config: &ServerConfig,
    deadline: Instant,
) -> Result<TlsStream, HandshakeFailure> {
    let secrets = Arc::new(SessionSecrets::default());
    let mut config = config.clone();
    config.key_log = secrets.clone();
    config.enable_secret_extraction = true;
    let mut stream = accept(tcp, Arc::new(config), deadline).await?;
    stream.keep_secrets(secrets);
    Ok(stream)
}

/// Whether a session on `tls` can be taken apart (`has_secrets`: its key log was kept): the
/// suite to continue it with.
pub(crate) fn check_exportable(tls: &rustls::Connection, has_secrets: bool) -> Result<Suite, ExportError> {
    match tls.protocol_version() {
        Some(rustls::ProtocolVersion::TLSv1_3) => {}
        Some(rustls::ProtocolVersion::TLSv1_2) => return Err(ExportError::NotTls13("TLSv1.2")),
        _ => return Err(ExportError::NotTls13("unknown")),
    }
    let negotiated = tls.negotiated_cipher_suite().map(|s| s.suite());
    let suite = negotiated
        .and_then(Suite::of)
        .ok_or_else(|| ExportError::Suite(negotiated.and_then(|s| s.as_str()).unwrap_or("unknown")))?;
    if tls.wants_write() {
        return Err(ExportError::OutputPending);
    }
    if !has_secrets {
        return Err(ExportError::NoSecrets);
    }
    Ok(suite)
}

/// What rustls gave up: the record layer that continues the session, known by its traffic
/// secrets or, `pinned`, by its keys alone (updated past following since the key log's
/// secrets: served where it is, to its next KeyUpdate), and the plaintext not yet read.
pub(crate) struct Extracted {
    pub layer: RecordLayer,
    pub plaintext: Vec<u8>,
    pub pinned: bool,
}

/// The keys of the session `tls` (its key log `secrets`), with `plaintext` (decrypted bytes
/// not yet read): rustls is done with it.
pub(crate) fn export_secrets(
    tls: rustls::Connection,
    secrets: Option<Arc<SessionSecrets>>,
    plaintext: Vec<u8>,
) -> Result<Extracted, ExportError> {
    let suite = check_exportable(&tls, secrets.is_some())?;
    let secrets = secrets.ok_or(ExportError::NoSecrets)?;
    let (Some(rx_secret), Some(tx_secret)) =
        (SessionSecrets::take(&secrets.client), SessionSecrets::take(&secrets.server))
    else {
        return Err(ExportError::NoSecrets);
    };
    let extracted = tls.dangerous_extract_secrets().map_err(ExportError::Extract)?;
    // The key log gives the first secrets only: after KeyUpdates the secrets in use are found
    // by following them a few generations; past that the session is served where it is.
    let tx = current_direction(suite, tx_secret, &extracted.tx)?;
    let rx = current_direction(suite, rx_secret, &extracted.rx)?;
    let (layer, pinned) = match (tx, rx) {
        (Some(tx), Some(rx)) => (RecordLayer::new(tx, rx), false),
        _ => (RecordLayer::new(keys_only(suite, &extracted.tx)?, keys_only(suite, &extracted.rx)?), true),
    };
    Ok(Extracted { layer, plaintext, pinned })
}

/// The record key and IV rustls gave for one direction.
fn key_and_iv(keys: &rustls::ConnectionTrafficSecrets) -> Option<(&[u8], &[u8])> {
    use rustls::ConnectionTrafficSecrets as Keys;
    match keys {
        Keys::Aes128Gcm { key, iv } | Keys::Aes256Gcm { key, iv } | Keys::Chacha20Poly1305 { key, iv } => {
            Some((key.as_ref(), iv.as_ref()))
        }
        _ => None,
    }
}

/// KeyUpdates followed from the key log's secret to find the one in use.
const SECRET_GENERATIONS: usize = 8;

/// The direction rustls gave as `(seq, keys)`, with its traffic secret: `secret` (the first)
/// or one of the next `SECRET_GENERATIONS` after it, whichever has those keys; `None` past
/// those.
fn current_direction(
    suite: Suite,
    secret: Zeroizing<Vec<u8>>,
    (seq, keys): &(u64, rustls::ConnectionTrafficSecrets),
) -> Result<Option<Direction>, ExportError> {
    let Some((key, iv)) = key_and_iv(keys) else { return Ok(None) };
    let mut secret = secret;
    for _ in 0..=SECRET_GENERATIONS {
        if let Some(direction) =
            Direction::matching(suite, &secret, *seq, key, iv).map_err(ExportError::Record)?
        {
            return Ok(Some(direction));
        }
        secret = next_secret(suite, &secret).map_err(ExportError::Record)?;
    }
    Ok(None)
}

/// The direction rustls gave as `(seq, keys)`, known by its keys alone.
fn keys_only(
    suite: Suite,
    (seq, keys): &(u64, rustls::ConnectionTrafficSecrets),
) -> Result<Direction, ExportError> {
    let (key, iv) = key_and_iv(keys).ok_or(ExportError::Suite("unknown"))?;
    Direction::from_key(suite, key, iv, *seq).map_err(ExportError::Record)
}
