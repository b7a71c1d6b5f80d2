//! `H2Link`: the one HTTP/2 connection a simulated client's streams share — opened on first
//! need (TCP; then TLS offering ALPN `h2`, or cleartext h2c with prior knowledge; then the
//! HTTP/2 preface and settings), driven by a task of its own, and opened afresh once it can
//! take no new stream (a GOAWAY, a failure). `H2Io` is its byte stream, counting the bytes read.

use std::cell::{Cell, RefCell};
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::client::SendRequest;
use locus_tls::HandshakeFailure;
use rustls::AlertDescription;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Sleep;

use crate::connection::WorkerShared;
use crate::exchange::{Fault, connect_within};
use crate::h2_stream::{H2Origin, error_kind};
use crate::load_stream::{LoadStream, TlsTarget};
use crate::stats::ErrorKind;

/// Each stream's receive window: large enough that flow control does not bound a stream's
/// rate on a fast network (the body is hashed and its capacity released as it arrives).
const STREAM_WINDOW: u32 = 1 << 20;
/// The connection's receive window is this many streams' windows at most.
const CONNECTION_WINDOW_STREAMS: u32 = 64;

/// A handle on the open connection: what a stream is sent with, and which connection it is.
#[derive(Clone)]
pub(crate) struct H2Handle {
    pub send: SendRequest<Bytes>,
    /// Counts connections opened by this link: names the connection for `retire`.
    pub generation: u64,
    /// The server it is open to (an index into the run's servers).
    pub server: usize,
}

/// The connection and whether its task has ended.
struct Live {
    handle: H2Handle,
    ended: Rc<Cell<bool>>,
}

/// One client's HTTP/2 connection; see the module documentation.
pub(crate) struct H2Link {
    slot: usize,
    shared: Rc<WorkerShared>,
    /// Each server's TLS settings as this client holds them (its own session store).
    tls: Vec<Option<TlsTarget>>,
    live: RefCell<Option<Live>>,
    /// Held while a connection is being opened, so the streams open one, not one each.
    opening: tokio::sync::Mutex<()>,
    connects: Cell<usize>,
    /// Bytes read on this client's connections and not yet charged to a response.
    read: Rc<Cell<u64>>,
}

impl H2Link {
    /// Client number `slot`'s link, not connected yet.
    pub fn new(slot: usize, shared: Rc<WorkerShared>) -> H2Link {
        let tls =
            shared.settings.servers.iter().map(|s| s.tls.as_ref().map(TlsTarget::for_one_client)).collect();
        H2Link {
            slot,
            shared,
            tls,
            live: RefCell::new(None),
            opening: tokio::sync::Mutex::new(()),
            connects: Cell::new(0),
            read: Rc::new(Cell::new(0)),
        }
    }

    /// The `:scheme` and `:authority` of `server`'s requests.
    pub fn origin(&self, server: usize) -> &H2Origin {
        &self.shared.settings.origins[server]
    }

    /// Bytes read since the last call: what the response completing now is charged.
    pub fn take_read_bytes(&self) -> u64 {
        self.read.replace(0)
    }

    /// A handle on the open connection, opening one first when there is none that can take a
    /// stream (`timer`: the asking stream's, for the connect timeout).
    pub async fn handle(&self, timer: Pin<&mut Sleep>) -> Result<H2Handle, Fault> {
        if let Some(handle) = self.current() {
            return Ok(handle);
        }
        let _opening = self.opening.lock().await;
        if let Some(handle) = self.current() {
            return Ok(handle);
        }
        self.open(timer).await
    }

    fn current(&self) -> Option<H2Handle> {
        let live = self.live.borrow();
        live.as_ref().filter(|l| !l.ended.get()).map(|l| l.handle.clone())
    }

    /// The connection `generation` takes no new stream (a GOAWAY came, or it failed): the
    /// next stream opens another. Its streams in flight go on to their ends.
    pub fn retire(&self, generation: u64) {
        let mut live = self.live.borrow_mut();
        if live.as_ref().is_some_and(|l| l.handle.generation == generation) {
            *live = None;
        }
    }

    /// Let the connection go: once its streams are gone its task closes it.
    pub fn close(&self) {
        self.live.borrow_mut().take();
    }

    async fn open(&self, mut timer: Pin<&mut Sleep>) -> Result<H2Handle, Fault> {
        let settings = &self.shared.settings;
        let n = self.connects.get();
        self.connects.set(n + 1);
        let server = (self.slot + n) % settings.servers.len();
        let (timeout, run_end) = (settings.timeout, self.shared.timing.run_end);
        let tcp = connect_within(settings.servers[server].addr, timer.as_mut(), timeout, run_end).await?;
        let stream = match &self.tls[server] {
            None => LoadStream::Plain(tcp),
            Some(tls) => self.handshake(tcp, tls, timeout).await?,
        };
        let io = H2Io { stream, read: self.read.clone() };
        let deadline = tokio::time::Instant::now() + timeout;
        let handshake = builder(settings.streams).handshake::<_, Bytes>(io);
        let (send, connection) = match tokio::time::timeout_at(deadline, handshake).await {
            Ok(Ok(pair)) => pair,
            Ok(Err(e)) => return Err(Fault::Error(connect_error_kind(&e))),
            Err(_) if self.shared.run_over(Instant::now()) => return Err(Fault::Stop),
            Err(_) => return Err(Fault::Error(ErrorKind::Connect)),
        };
        let ended = Rc::new(Cell::new(false));
        let flag = ended.clone();
        tokio::task::spawn_local(async move {
            let _ = connection.await;
            flag.set(true);
        });
        self.shared.stats.borrow_mut().connections += 1;
        let handle = H2Handle { send, generation: n as u64, server };
        *self.live.borrow_mut() = Some(Live { handle: handle.clone(), ended });
        Ok(handle)
    }

    /// The TLS handshake on a new connection (within the connect timeout), counted with its
    /// duration: a failed one is a connect error, one that does not agree on `h2` (no ALPN
    /// protocol selected, or the server's no_application_protocol alert) a protocol error.
    async fn handshake(
        &self,
        tcp: TcpStream,
        tls: &TlsTarget,
        timeout: Duration,
    ) -> Result<LoadStream, Fault> {
        let started = Instant::now();
        let deadline = tokio::time::Instant::now() + timeout;
        let session = match locus_tls::connect(tcp, tls.config.clone(), tls.name.clone(), deadline).await {
            Ok(session) => session,
            Err(HandshakeFailure::Protocol(rustls::Error::AlertReceived(
                AlertDescription::NoApplicationProtocol,
            ))) => {
                return Err(Fault::Error(ErrorKind::Protocol));
            }
            Err(_) if self.shared.run_over(Instant::now()) => return Err(Fault::Stop),
            Err(_) => return Err(Fault::Error(ErrorKind::Connect)),
        };
        let us = started.elapsed().as_micros().try_into().unwrap_or(u64::MAX);
        self.shared.stats.borrow_mut().handshakes.record(session.negotiated().resumed, us);
        if session.alpn() != Some(locus_tls::ALPN_H2) {
            return Err(Fault::Error(ErrorKind::Protocol));
        }
        Ok(LoadStream::Tls(Box::new(session)))
    }
}

/// The client's HTTP/2 settings: no server push, receive windows for `streams` streams.
fn builder(streams: usize) -> h2::client::Builder {
    let streams = u32::try_from(streams).unwrap_or(u32::MAX).clamp(1, CONNECTION_WINDOW_STREAMS);
    let mut builder = h2::client::Builder::new();
    builder
        .enable_push(false)
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(STREAM_WINDOW * streams);
    builder
}

/// A failed HTTP/2 handshake (writing the preface): the socket's failure is a connect error.
fn connect_error_kind(e: &h2::Error) -> ErrorKind {
    match error_kind(e) {
        ErrorKind::Closed => ErrorKind::Connect,
        kind => kind,
    }
}

/// An HTTP/2 connection's byte stream (TCP, or TLS on it) counting the bytes read into `read`.
pub(crate) struct H2Io {
    stream: LoadStream,
    read: Rc<Cell<u64>>,
}

impl AsyncRead for H2Io {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.stream).poll_read(cx, buf))?;
        let n = (buf.filled().len() - before) as u64;
        this.read.set(this.read.get() + n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for H2Io {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, data)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, data)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}
