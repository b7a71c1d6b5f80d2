//! A TLS connection on a tokio `TcpStream`, driven by hand over rustls's buffered API: the
//! handshake (`accept` for a server, with a deadline, telling cleartext HTTP from a
//! ClientHello; `connect` for a client such as the load generator), then
//! readiness-style `try_read`/`try_write`/`try_flush` for loops that wait on the socket
//! themselves, and `AsyncRead`/`AsyncWrite` for the rest. On the server side bytes come off
//! the socket into a buffer of its own and reach rustls a whole record at a time, so what was
//! read and not yet decrypted is always known, never inside rustls (a handoff needs that).
//! A TLS 1.3 session can leave rustls for the record layer (`take_over`, then `session_state`
//! to hand it on) and be continued on another host's socket (`continued`); the stream reads
//! and writes the same either way.

use std::io::{self, BufRead, Read, Write};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, Connection, HandshakeKind, ServerConfig, ServerConnection};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout_at};

use crate::continued::ContinuedSession;
use crate::export::{ExportError, SessionExport};
use crate::record_layer::RecordError;

/// The first byte of a TLS handshake record.
const HANDSHAKE_RECORD: u8 = 0x16;
/// A record header's length.
const RECORD_HEADER: usize = 5;
/// The longest record payload TLS 1.2 allows (TLS 1.3's is shorter); a header announcing
/// more goes to rustls at once, which refuses it.
const MAX_RECORD_PAYLOAD: usize = 16_384 + 2_048;
/// Bytes asked of the socket per read.
const SOCKET_READ: usize = 16 * 1024;

/// What protects the records: rustls from the handshake on, or the record layer once the
/// session was taken over from rustls or received with a handed-off connection.
#[expect(
    clippy::large_enum_variant,
    reason = "rustls is the common engine, kept inline; the stream itself is boxed by its holders"
)]
enum Engine {
    Rustls(Connection),
    Continued(Box<ContinuedSession>),
    /// Between `take_over` taking rustls's keys and the record layer's start: seen only when
    /// that failed, and the session is then unusable.
    Gone,
}

fn gone() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "the TLS session was taken apart")
}

/// A TLS connection over `tcp`, server side or client side.
pub struct TlsStream {
    tcp: TcpStream,
    engine: Engine,
    /// Bytes read from the socket and not yet given to rustls: the start of a record.
    incoming: Vec<u8>,
    /// Server side: records reach rustls whole, so a session can be handed over with what
    /// was read. Client side (the load generator): rustls reads the socket itself, one copy
    /// fewer on every response byte.
    whole_records: bool,
    /// This connection's traffic secrets, when it was accepted to be handed over.
    secrets: Option<Arc<crate::export::SessionSecrets>>,
    /// Plaintext decrypted and not yet read.
    plaintext: usize,
    /// The peer closed (close_notify or end of stream): reads return 0 once `plaintext` is.
    peer_closed: bool,
    /// Our close_notify is queued or sent.
    closing: bool,
}

/// Why receiving failed: the socket, or the records (rustls's or the record layer's).
enum Received {
    Io(io::Error),
    Tls(rustls::Error),
    Record(RecordError),
}

/// The length of the whole record at the front of `bytes` (header included), if it is all
/// there; a header announcing more than TLS allows counts as whole, for rustls to refuse.
fn whole_record(bytes: &[u8]) -> Option<usize> {
    let header = bytes.get(..RECORD_HEADER)?;
    let payload = usize::from(u16::from_be_bytes([header[3], header[4]]));
    if payload > MAX_RECORD_PAYLOAD {
        return Some(bytes.len());
    }
    (bytes.len() >= RECORD_HEADER + payload).then_some(RECORD_HEADER + payload)
}

/// Why a handshake did not complete.
#[derive(Debug)]
pub enum HandshakeFailure {
    /// The client spoke cleartext HTTP to the TLS port; the socket is handed back, nothing
    /// read from it, so it can be answered in cleartext.
    Cleartext(TcpStream),
    /// The handshake did not finish by its deadline.
    TimedOut,
    /// The client closed before finishing.
    Closed,
    /// The client broke the protocol or shares nothing with us (an alert was sent).
    Protocol(rustls::Error),
    /// The socket failed.
    Io(io::Error),
    /// Too many handshakes were in progress: closed before reading anything.
    Shed,
}

impl HandshakeFailure {
    /// A short label for counting failures by reason.
    pub fn reason(&self) -> &'static str {
        match self {
            HandshakeFailure::Cleartext(_) => "cleartext",
            HandshakeFailure::TimedOut => "timeout",
            HandshakeFailure::Closed => "closed",
            HandshakeFailure::Io(_) => "io",
            HandshakeFailure::Shed => "shed",
            HandshakeFailure::Protocol(e) => protocol_reason(e),
        }
    }
}

/// The label for a protocol error: what an operator can act on.
fn protocol_reason(e: &rustls::Error) -> &'static str {
    use rustls::Error;
    match e {
        Error::InvalidMessage(_)
        | Error::InappropriateMessage { .. }
        | Error::InappropriateHandshakeMessage { .. } => "malformed",
        Error::PeerIncompatible(_) => "incompatible",
        Error::AlertReceived(_) => "client_alert",
        Error::General(m) if m.contains("certificate") => "no_certificate",
        Error::PeerMisbehaved(_) => "misbehaved",
        _ => "other",
    }
}

impl std::fmt::Display for HandshakeFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HandshakeFailure::Cleartext(_) => write!(f, "cleartext HTTP on a TLS port"),
            HandshakeFailure::TimedOut => write!(f, "handshake timed out"),
            HandshakeFailure::Closed => write!(f, "client closed during the handshake"),
            HandshakeFailure::Protocol(e) => write!(f, "handshake failed: {e}"),
            HandshakeFailure::Io(e) => write!(f, "handshake failed: {e}"),
            HandshakeFailure::Shed => write!(f, "too many handshakes in progress"),
        }
    }
}

/// What a finished handshake agreed, for status and metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Negotiated {
    pub version: &'static str,
    pub suite: &'static str,
    pub resumed: bool,
}

/// Take a TLS connection on `tcp`: handshake under `config` until done or `deadline`.
pub async fn accept(
    tcp: TcpStream,
    config: Arc<ServerConfig>,
    deadline: Instant,
) -> Result<TlsStream, HandshakeFailure> {
    let mut first = [0u8; 1];
    match timeout_at(deadline, tcp.peek(&mut first)).await {
        Err(_) => return Err(HandshakeFailure::TimedOut),
        Ok(Err(e)) => return Err(HandshakeFailure::Io(e)),
        Ok(Ok(0)) => return Err(HandshakeFailure::Closed),
        Ok(Ok(_)) if first[0] != HANDSHAKE_RECORD && first[0].is_ascii_uppercase() => {
            return Err(HandshakeFailure::Cleartext(tcp));
        }
        Ok(Ok(_)) => {}
    }
    let tls = ServerConnection::new(config).map_err(HandshakeFailure::Protocol)?;
    TlsStream::handshake_within(tcp, tls.into(), deadline).await
}

/// Open a client session to `name` on `tcp`: handshake under `config` until done or
/// `deadline`.
pub async fn connect(
    tcp: TcpStream,
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
    deadline: Instant,
) -> Result<TlsStream, HandshakeFailure> {
    let tls = ClientConnection::new(config, name).map_err(HandshakeFailure::Protocol)?;
    TlsStream::handshake_within(tcp, tls.into(), deadline).await
}

/// `Read` and `Write` on a tokio socket without waiting: `WouldBlock` when it is not ready
/// (which also clears tokio's readiness, so the next wait is a real one).
struct TryIo<'a>(&'a TcpStream);

impl Read for TryIo<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.try_read(buf)
    }
}

impl Write for TryIo<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.try_write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn would_block(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::WouldBlock
}

impl TlsStream {
    async fn handshake_within(
        tcp: TcpStream,
        tls: Connection,
        deadline: Instant,
    ) -> Result<TlsStream, HandshakeFailure> {
        let mut stream = TlsStream {
            tcp,
            whole_records: matches!(tls, Connection::Server(_)),
            secrets: None,
            engine: Engine::Rustls(tls),
            incoming: Vec::new(),
            plaintext: 0,
            peer_closed: false,
            closing: false,
        };
        match timeout_at(deadline, stream.handshake()).await {
            Err(_) => Err(HandshakeFailure::TimedOut),
            Ok(Err(e)) => Err(e),
            Ok(Ok(())) => Ok(stream),
        }
    }

    /// A session another process began, continued on `tcp` (its connection, handed over) from
    /// `export`: reads and writes go through the record layer.
    pub fn continued(tcp: TcpStream, export: SessionExport) -> Result<TlsStream, RecordError> {
        let (session, incoming) = ContinuedSession::new(export)?;
        Ok(TlsStream {
            tcp,
            engine: Engine::Continued(Box::new(session)),
            incoming,
            whole_records: true,
            secrets: None,
            plaintext: 0,
            peer_closed: false,
            closing: false,
        })
    }

    fn is_handshaking(&self) -> bool {
        matches!(&self.engine, Engine::Rustls(tls) if tls.is_handshaking())
    }

    /// Drive the handshake to its end, then send what it left queued (TLS 1.3 tickets).
    async fn handshake(&mut self) -> Result<(), HandshakeFailure> {
        while self.is_handshaking() {
            self.flush().await.map_err(HandshakeFailure::Io)?;
            if !self.is_handshaking() {
                break;
            }
            self.tcp.readable().await.map_err(HandshakeFailure::Io)?;
            match self.receive() {
                Ok(0) => return Err(HandshakeFailure::Closed),
                Ok(_) => {}
                Err(Received::Io(e)) if would_block(&e) => {}
                Err(Received::Io(e)) => return Err(HandshakeFailure::Io(e)),
                Err(Received::Tls(e)) => return Err(HandshakeFailure::Protocol(e)),
                Err(Received::Record(e)) => return Err(HandshakeFailure::Io(io::Error::other(e))),
            }
        }
        self.flush().await.map_err(HandshakeFailure::Io)
    }

    /// Give rustls the next whole records in `incoming`, or else read the socket and do so: a
    /// byte count (0 at the socket's end, which rustls is told of). Records go one at a time
    /// and stop while decrypted bytes wait to be read, so rustls never holds more than one
    /// record's plaintext and never part of a record.
    fn receive(&mut self) -> Result<usize, Received> {
        let tls = match &mut self.engine {
            Engine::Rustls(tls) => tls,
            Engine::Continued(_) => return self.receive_continued(),
            Engine::Gone => return Err(Received::Io(gone())),
        };
        if !self.whole_records {
            let n = tls.read_tls(&mut TryIo(&self.tcp)).map_err(Received::Io)?;
            self.process_packets().map_err(Received::Tls)?;
            return Ok(n);
        }
        let fed = self.feed()?;
        if fed > 0 {
            return Ok(fed);
        }
        self.incoming.reserve(SOCKET_READ);
        let n = self.tcp.try_read_buf(&mut self.incoming).map_err(Received::Io)?;
        if n == 0 {
            if let Engine::Rustls(tls) = &mut self.engine {
                tls.read_tls(&mut &[][..]).map_err(Received::Io)?;
            }
            self.process_packets().map_err(Received::Tls)?;
            return Ok(0);
        }
        self.feed()?;
        Ok(n)
    }

    /// `receive` for a continued session: open the whole records read already, or else read
    /// the socket and open what came. A record that fails sends its alert.
    fn receive_continued(&mut self) -> Result<usize, Received> {
        let Engine::Continued(session) = &mut self.engine else { return Err(Received::Io(gone())) };
        let before = self.incoming.len();
        let mut opened = session.open(&mut self.incoming);
        if opened.is_ok() && !session.has_input() && self.incoming.len() == before {
            self.incoming.reserve(SOCKET_READ);
            let n = self.tcp.try_read_buf(&mut self.incoming).map_err(Received::Io)?;
            if n == 0 {
                return Ok(0);
            }
            opened = session.open(&mut self.incoming);
        }
        if let Err(e) = opened {
            let _ = session.flush(&self.tcp);
            return Err(Received::Record(e));
        }
        Ok((before.abs_diff(self.incoming.len())).max(1))
    }

    /// Give rustls whole records from `incoming`, processing each, until one yields plaintext
    /// or none is whole: the bytes given.
    fn feed(&mut self) -> Result<usize, Received> {
        let mut at = 0;
        while self.plaintext == 0
            && let Some(len) = whole_record(&self.incoming[at..])
        {
            let Engine::Rustls(tls) = &mut self.engine else { break };
            let mut record = &self.incoming[at..at + len];
            while !record.is_empty() {
                // rustls takes nothing more after the peer's close_notify: the rest is dropped.
                if tls.read_tls(&mut record).map_err(Received::Io)? == 0 {
                    break;
                }
            }
            at += len;
            self.process_packets().map_err(Received::Tls)?;
        }
        self.incoming.drain(..at);
        Ok(at)
    }

    /// Give back the buffers an idle connection need not hold (input read and used, output
    /// sent; 16 KiB and more each, a page or more touched): call it when waiting for the next
    /// request, so thousands of idle connections keep none of it resident.
    pub fn release_idle_buffers(&mut self) {
        if self.incoming.is_empty() && self.incoming.capacity() > 0 {
            self.incoming = Vec::new();
        }
        if let Engine::Continued(session) = &mut self.engine {
            session.release_idle_buffers();
        }
    }

    /// Keep `secrets` (this connection's key log) for `export`.
    pub(crate) fn keep_secrets(&mut self, secrets: Arc<crate::export::SessionSecrets>) {
        self.secrets = Some(secrets);
    }

    /// Whether the session can be handed on now (TLS 1.3, a suite the record layer continues,
    /// nothing queued for the client, accepted with `accept_exportable` or continued here):
    /// ask before `take_over`, since a failed one has consumed the session.
    pub fn exportable(&self) -> Result<(), ExportError> {
        match &self.engine {
            Engine::Rustls(tls) => crate::export::check_exportable(tls, self.secrets.is_some()).map(|_| ()),
            Engine::Continued(session) if session.movable() => Ok(()),
            Engine::Continued(session) if session.is_pinned() => Err(ExportError::KeyUpdated),
            Engine::Continued(_) => Err(ExportError::OutputPending),
            Engine::Gone => Err(ExportError::Ended),
        }
    }

    /// Move the session from rustls to the record layer, on the same socket (nothing to do
    /// when it is there already): from now on it can be handed on (`session_state`) and, if
    /// it is not, still be served here. Fails as `exportable` says, the session then intact;
    /// or with `KeyUpdated` (keys changed before: it is served here, not moved); any other
    /// failure after rustls gave its keys up ends the session.
    pub fn take_over(&mut self) -> Result<(), ExportError> {
        if matches!(self.engine, Engine::Continued(_)) {
            return Ok(());
        }
        if let Engine::Rustls(tls) = &mut self.engine {
            // A KeyUpdate rustls owes the client waits for the next write: queue it now (an
            // empty write does), so it is sent before the session leaves rustls.
            let _ = tls.writer().write(&[]);
            let _ = self.try_flush();
        }
        self.exportable()?;
        let mut plaintext = Vec::new();
        while self.plaintext > 0 && self.try_read_append(&mut plaintext, usize::MAX).is_ok_and(|n| n > 0) {}
        let Engine::Rustls(tls) = std::mem::replace(&mut self.engine, Engine::Gone) else {
            return Err(ExportError::Ended);
        };
        self.plaintext = 0;
        let extracted = crate::export::export_secrets(tls, self.secrets.take(), plaintext)?;
        let pinned = extracted.pinned;
        let session = ContinuedSession::from_layer(extracted.layer, extracted.plaintext, pinned);
        self.engine = Engine::Continued(Box::new(session));
        if pinned { Err(ExportError::KeyUpdated) } else { Ok(()) }
    }

    /// What another process needs to continue the session taken over (`take_over`): `before`
    /// (bytes already read from the stream, to be read again there) first. The stream stays
    /// usable, for when the other process does not take it.
    pub fn session_state(&self, before: &[u8]) -> Result<SessionExport, ExportError> {
        self.exportable()?;
        match &self.engine {
            Engine::Continued(session) => Ok(session.state(before, &self.incoming)),
            _ => Err(ExportError::NotTakenOver),
        }
    }

    /// Take the session apart for another process to continue: the socket, and the suite,
    /// secrets, sequence numbers and unused bytes (`SessionExport`). Fails as `exportable`
    /// says, the session then lost: check `exportable` first.
    pub fn export(self) -> Result<(TcpStream, SessionExport), ExportError> {
        self.into_parts(&[])
    }

    /// `export` with `before` (bytes already read from the stream) first in the plaintext.
    pub fn into_parts(mut self, before: &[u8]) -> Result<(TcpStream, SessionExport), ExportError> {
        self.take_over()?;
        let state = self.session_state(before)?;
        Ok((self.tcp, state))
    }

    /// Put the session on another socket (its connection restored there after a handoff
    /// that was not taken); the old socket is given back.
    pub fn replace_tcp(&mut self, tcp: TcpStream) -> TcpStream {
        std::mem::replace(&mut self.tcp, tcp)
    }

    /// Bytes read from the socket that rustls has not been given: the start of a record.
    pub fn undecrypted(&self) -> &[u8] {
        &self.incoming
    }

    /// Decrypt what `read_tls` took in. A protocol error sends its alert (as far as the
    /// socket takes it).
    fn process_packets(&mut self) -> Result<(), rustls::Error> {
        let Engine::Rustls(tls) = &mut self.engine else { return Ok(()) };
        match tls.process_new_packets() {
            Ok(state) => {
                self.plaintext = state.plaintext_bytes_to_read();
                self.peer_closed |= state.peer_has_closed();
                Ok(())
            }
            Err(e) => {
                let _ = self.try_flush();
                Err(e)
            }
        }
    }

    /// The TCP socket under the session (addresses, options; never read or write it).
    pub fn tcp(&self) -> &TcpStream {
        &self.tcp
    }

    /// What the handshake agreed.
    pub fn negotiated(&self) -> Negotiated {
        let tls = match &self.engine {
            Engine::Rustls(tls) => tls,
            Engine::Continued(session) => {
                return Negotiated { version: "TLSv1.3", suite: session.suite().name(), resumed: false };
            }
            Engine::Gone => return Negotiated { version: "other", suite: "other", resumed: false },
        };
        let version = match tls.protocol_version() {
            Some(rustls::ProtocolVersion::TLSv1_3) => "TLSv1.3",
            Some(rustls::ProtocolVersion::TLSv1_2) => "TLSv1.2",
            _ => "other",
        };
        let suite = tls.negotiated_cipher_suite().and_then(|s| s.suite().as_str()).unwrap_or("other");
        let resumed = tls.handshake_kind() == Some(HandshakeKind::Resumed);
        Negotiated { version, suite, resumed }
    }

    /// Whether the session is continued by the record layer (taken over, or received).
    pub fn is_continued(&self) -> bool {
        matches!(self.engine, Engine::Continued(_))
    }

    /// The server name the client asked for, if any (server side, in rustls).
    pub fn server_name(&self) -> Option<&str> {
        match &self.engine {
            Engine::Rustls(Connection::Server(s)) => s.server_name(),
            _ => None,
        }
    }

    /// The application protocol ALPN agreed on, if any (either side, in rustls; a continued
    /// session was HTTP/1.1 when it moved).
    pub fn alpn(&self) -> Option<&[u8]> {
        match &self.engine {
            Engine::Rustls(tls) => tls.alpn_protocol(),
            _ => None,
        }
    }

    /// Whether decrypted bytes wait to be read, or the peer's close does: a read will not
    /// block even if the socket has nothing.
    pub fn has_buffered_input(&self) -> bool {
        self.plaintext > 0
            || self.peer_closed
            || whole_record(&self.incoming).is_some()
            || matches!(&self.engine, Engine::Continued(session) if session.has_input())
    }

    /// Read decrypted bytes without waiting: `Ok(0)` when the client closed (with or
    /// without close_notify), `WouldBlock` when nothing can be read yet.
    pub fn try_read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.try_read_with(|chunk| {
            let n = chunk.len().min(buf.len());
            buf[..n].copy_from_slice(&chunk[..n]);
            n
        })
    }

    /// `try_read` appending at most `max` bytes to `out` (no zeroed room to read into).
    pub fn try_read_append(&mut self, out: &mut Vec<u8>, max: usize) -> io::Result<usize> {
        self.try_read_with(|chunk| {
            let n = chunk.len().min(max);
            out.extend_from_slice(&chunk[..n]);
            n
        })
    }

    /// Read without waiting: `take` is given decrypted bytes (one record's worth at most) and
    /// says how many it took; `Ok(0)` at the end of the stream.
    fn try_read_with(&mut self, mut take: impl FnMut(&[u8]) -> usize) -> io::Result<usize> {
        loop {
            if let Some(n) = self.take_plaintext(&mut take)? {
                return Ok(n);
            }
            match self.receive() {
                Ok(0) => self.peer_closed = true,
                Ok(_) => {}
                Err(Received::Io(e)) => return Err(e),
                Err(Received::Tls(e)) => return Err(io::Error::new(io::ErrorKind::InvalidData, e)),
                Err(Received::Record(e)) => return Err(io::Error::new(io::ErrorKind::InvalidData, e)),
            }
            // Post-handshake messages may need an answer (a key update); send what fits.
            match self.try_flush() {
                Err(e) if !would_block(&e) => return Err(e),
                _ => {}
            }
        }
    }

    /// Give `take` decrypted bytes waiting here: `Some(n)` taken, `Some(0)` at the end of the
    /// stream, `None` when none wait.
    fn take_plaintext(&mut self, take: &mut impl FnMut(&[u8]) -> usize) -> io::Result<Option<usize>> {
        match &mut self.engine {
            Engine::Rustls(tls) => {
                let mut reader = tls.reader();
                match reader.fill_buf() {
                    Ok(chunk) => {
                        // Empty: the peer's close_notify.
                        let n = if chunk.is_empty() { 0 } else { take(chunk) };
                        reader.consume(n);
                        self.plaintext = self.plaintext.saturating_sub(n);
                        Ok(Some(n))
                    }
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(Some(0)),
                    Err(e) if would_block(&e) => Ok(None),
                    Err(e) => Err(e),
                }
            }
            Engine::Continued(session) => Ok(session.read_with(take).or(self.peer_closed.then_some(0))),
            Engine::Gone => Err(gone()),
        }
    }

    /// Encrypt and send from `data` without waiting: how many bytes were taken (some may
    /// still be queued here; `try_flush` sends them), `WouldBlock` when none could be.
    pub fn try_write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.try_write_vectored(&[io::IoSlice::new(data)])
    }

    /// `try_write` from several buffers in order.
    pub fn try_write_vectored(&mut self, data: &[io::IoSlice<'_>]) -> io::Result<usize> {
        if data.iter().all(|d| d.is_empty()) {
            return Ok(0);
        }
        loop {
            let taken = match &mut self.engine {
                Engine::Rustls(tls) => tls.writer().write_vectored(data)?,
                Engine::Continued(session) => session.seal(data)?,
                Engine::Gone => return Err(gone()),
            };
            let flushed = self.try_flush();
            if taken > 0 {
                return match flushed {
                    Err(e) if !would_block(&e) => Err(e),
                    _ => Ok(taken),
                };
            }
            // The queue was full: it has been sent now, or the socket is full.
            flushed?;
        }
    }

    /// Send queued TLS records without waiting: `WouldBlock` while some remain.
    pub fn try_flush(&mut self) -> io::Result<()> {
        match &mut self.engine {
            Engine::Rustls(tls) => {
                while tls.wants_write() {
                    tls.write_tls(&mut TryIo(&self.tcp))?;
                }
                Ok(())
            }
            Engine::Continued(session) => session.flush(&self.tcp),
            Engine::Gone => Ok(()),
        }
    }

    /// Whether TLS records are queued, not yet sent.
    pub fn has_queued_output(&self) -> bool {
        match &self.engine {
            Engine::Rustls(tls) => tls.wants_write(),
            Engine::Continued(session) => session.wants_write(),
            Engine::Gone => false,
        }
    }

    /// Wait until a read may make progress.
    pub async fn readable(&self) -> io::Result<()> {
        if self.has_buffered_input() {
            return Ok(());
        }
        self.tcp.readable().await
    }

    /// Wait until the socket takes more.
    pub async fn writable(&self) -> io::Result<()> {
        self.tcp.writable().await
    }

    /// Send everything queued, waiting for the socket as needed.
    pub async fn flush(&mut self) -> io::Result<()> {
        loop {
            match self.try_flush() {
                Err(e) if would_block(&e) => self.tcp.writable().await?,
                r => return r,
            }
        }
    }

    /// Queue close_notify (sent by the next flush).
    pub fn send_close_notify(&mut self) {
        if !self.closing {
            self.closing = true;
            match &mut self.engine {
                Engine::Rustls(tls) => tls.send_close_notify(),
                Engine::Continued(session) => session.close_notify(),
                Engine::Gone => {}
            }
        }
    }
}

impl AsyncRead for TlsStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            let read = this.try_read_with(|chunk| {
                let n = chunk.len().min(buf.remaining());
                buf.put_slice(&chunk[..n]);
                n
            });
            match read {
                Ok(_) => return Poll::Ready(Ok(())),
                Err(e) if would_block(&e) => ready!(this.tcp.poll_read_ready(cx))?,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for TlsStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        loop {
            match this.try_write(data) {
                Err(e) if would_block(&e) => ready!(this.tcp.poll_write_ready(cx))?,
                r => return Poll::Ready(r),
            }
        }
    }

    /// Several buffers sealed together: as few records as they fit in, one send (HTTP/2 writes a
    /// frame's header and its payload so).
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        loop {
            match this.try_write_vectored(data) {
                Err(e) if would_block(&e) => ready!(this.tcp.poll_write_ready(cx))?,
                r => return Poll::Ready(r),
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            match this.try_flush() {
                Err(e) if would_block(&e) => ready!(this.tcp.poll_write_ready(cx))?,
                r => return Poll::Ready(r),
            }
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.send_close_notify();
        ready!(Pin::new(&mut *this).poll_flush(cx))?;
        Pin::new(&mut this.tcp).poll_shutdown(cx)
    }
}
