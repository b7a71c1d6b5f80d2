//! A TLS 1.3 session continued outside rustls (one-way HTTPS): the `RecordLayer` and the
//! buffers around it — plaintext opened and not yet read, records sealed and not yet sent.
//! `TlsStream` drives it over its socket once a session was taken over from rustls
//! (`TlsStream::take_over`, on the switch) or received with a handed-off connection
//! (`TlsStream::continued`, on a node).

use std::io::{self, IoSlice};

use tokio::net::TcpStream;
use zeroize::Zeroizing;

use crate::export::SessionExport;
use crate::record_layer::{RecordError, RecordLayer, Suite};

/// Sealed bytes queued before a write takes no more plaintext (as rustls's default buffer).
const QUEUED_OUTPUT_LIMIT: usize = 64 * 1024;

/// The record layer of a continued session and its buffers.
pub(crate) struct ContinuedSession {
    layer: RecordLayer,
    /// Opened application data; `plain[plain_at..]` is not yet read.
    plain: Vec<u8>,
    plain_at: usize,
    /// Sealed records; `out[out_at..]` is not yet sent.
    out: Vec<u8>,
    out_at: usize,
    /// The peer's close_notify came.
    closed: bool,
    /// Our close_notify is queued.
    closing: bool,
    /// The session failed (an alert is queued): nothing more is read or sealed.
    failed: bool,
    /// Known by its keys only (no traffic secrets): served where it is, never moved.
    pinned: bool,
}

impl ContinuedSession {
    /// The session `export` describes, with its decrypted bytes first to read; its
    /// undecrypted bytes come back, for the caller to open before the socket's.
    pub(crate) fn new(export: SessionExport) -> Result<(ContinuedSession, Vec<u8>), RecordError> {
        let layer = export.record_layer()?;
        let SessionExport { plaintext, undecrypted, .. } = export;
        Ok((ContinuedSession::from_layer(layer, plaintext, false), undecrypted))
    }

    /// The session `layer` continues, with `plaintext` to read first; `pinned`: known by its
    /// keys only, so served where it is and never moved.
    pub(crate) fn from_layer(layer: RecordLayer, plaintext: Vec<u8>, pinned: bool) -> ContinuedSession {
        ContinuedSession {
            layer,
            plain: plaintext,
            plain_at: 0,
            out: Vec::new(),
            out_at: 0,
            closed: false,
            closing: false,
            failed: false,
            pinned,
        }
    }

    pub(crate) fn is_pinned(&self) -> bool {
        self.pinned
    }

    pub(crate) fn suite(&self) -> Suite {
        self.layer.tx().suite()
    }

    /// Whether opened bytes wait to be read, or the peer's close does.
    pub(crate) fn has_input(&self) -> bool {
        self.plain_at < self.plain.len() || self.closed
    }

    /// Give `take` the opened bytes not yet read (one call): `Some(n)` taken, `Some(0)` after
    /// the peer's close_notify, `None` when there is nothing to read yet.
    pub(crate) fn read_with(&mut self, take: &mut impl FnMut(&[u8]) -> usize) -> Option<usize> {
        if self.plain_at < self.plain.len() {
            let n = take(&self.plain[self.plain_at..]);
            self.plain_at += n;
            if self.plain_at == self.plain.len() {
                self.plain.clear();
                self.plain_at = 0;
            }
            return Some(n);
        }
        self.closed.then_some(0)
    }

    /// Open the whole records at the front of `incoming` once everything opened before has
    /// been read (so at most one read's worth of plaintext waits here). Answers to KeyUpdates
    /// are queued; on an error, the fatal alert that says why.
    pub(crate) fn open(&mut self, incoming: &mut Vec<u8>) -> Result<(), RecordError> {
        if self.failed || self.closed || self.plain_at < self.plain.len() {
            return Ok(());
        }
        match self.layer.open(incoming, &mut self.plain, &mut self.out) {
            Ok(opened) => {
                self.closed = opened.closed;
                Ok(())
            }
            Err(e) => {
                self.fail(&e);
                Err(e)
            }
        }
    }

    /// Queue the alert for `e` and refuse everything after it.
    fn fail(&mut self, e: &RecordError) {
        self.failed = true;
        if let Some(alert) = e.alert() {
            let _ = self.layer.seal_alert(alert, &mut self.out);
        }
    }

    /// Seal as much of `data` as the output queue takes: the bytes taken.
    pub(crate) fn seal(&mut self, data: &[IoSlice<'_>]) -> io::Result<usize> {
        if self.failed || self.closing {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, "the TLS session has ended"));
        }
        let mut taken = 0;
        for slice in data {
            let room = QUEUED_OUTPUT_LIMIT.saturating_sub(self.out.len() - self.out_at);
            if room == 0 {
                break;
            }
            let part = &slice[..slice.len().min(room)];
            if let Err(e) = self.layer.seal(part, &mut self.out) {
                self.fail(&e);
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
            taken += part.len();
            if part.len() < slice.len() {
                break;
            }
        }
        Ok(taken)
    }

    /// Send queued records without waiting: `WouldBlock` while some remain.
    pub(crate) fn flush(&mut self, tcp: &TcpStream) -> io::Result<()> {
        while self.out_at < self.out.len() {
            self.out_at += tcp.try_write(&self.out[self.out_at..])?;
        }
        self.out.clear();
        self.out_at = 0;
        Ok(())
    }

    /// Give back the buffers that hold nothing now (see `TlsStream::release_idle_buffers`).
    pub(crate) fn release_idle_buffers(&mut self) {
        if self.plain_at == self.plain.len() && self.plain.capacity() > 0 {
            self.plain = Vec::new();
            self.plain_at = 0;
        }
        if self.out_at == self.out.len() && self.out.capacity() > 0 {
            self.out = Vec::new();
            self.out_at = 0;
        }
    }

    pub(crate) fn wants_write(&self) -> bool {
        self.out_at < self.out.len()
    }

    /// Queue close_notify.
    pub(crate) fn close_notify(&mut self) {
        if !self.closing && !self.failed {
            self.closing = true;
            let _ = self.layer.seal_close_notify(&mut self.out);
        }
    }

    /// What continues this session elsewhere: `before` (bytes the caller already read and
    /// did not use) then what was opened and not read, and `undecrypted`.
    pub(crate) fn state(&self, before: &[u8], undecrypted: &[u8]) -> SessionExport {
        let (tx, rx) = (self.layer.tx(), self.layer.rx());
        let mut plaintext = Vec::with_capacity(before.len() + self.plain.len() - self.plain_at);
        plaintext.extend_from_slice(before);
        plaintext.extend_from_slice(&self.plain[self.plain_at..]);
        SessionExport {
            suite: tx.suite(),
            tx_secret: Zeroizing::new(tx.secret().to_vec()),
            tx_seq: tx.sequence(),
            rx_secret: Zeroizing::new(rx.secret().to_vec()),
            rx_seq: rx.sequence(),
            plaintext,
            undecrypted: undecrypted.to_vec(),
        }
    }

    /// Whether the session can be handed on now: nothing queued, not ended.
    pub(crate) fn movable(&self) -> bool {
        !self.wants_write() && !self.failed && !self.closing && !self.closed && !self.pinned
    }
}
