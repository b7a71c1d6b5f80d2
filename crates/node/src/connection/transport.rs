//! What a client connection runs over: the TCP socket itself, or a TLS session on it. The
//! connection loop reads, writes and waits through `Transport` alone; cleartext keeps its
//! zero-copy paths (MSG_MORE, sendfile), TLS encrypts in user space (no kernel TLS here).

use std::io::{self, IoSlice};
use std::net::SocketAddr;

use locus_io::try_read_drained;
use locus_tls::TlsStream;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::out_queue::send_more;

/// A client connection's byte stream.
pub enum Transport {
    Plain(TcpStream),
    Tls(Box<TlsStream>),
}

impl Transport {
    /// The TCP socket under the stream.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Transport::Plain(s) => s,
            Transport::Tls(t) => t.tcp(),
        }
    }

    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.tcp().peer_addr()
    }

    /// Whether the bytes are encrypted here (so the kernel cannot send file pages itself).
    pub fn is_tls(&self) -> bool {
        matches!(self, Transport::Tls(_))
    }

    /// Read without waiting: `Ok(0)` at the end of the stream, `WouldBlock` when nothing is
    /// there yet.
    pub fn try_read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(s) => try_read_drained(s, buf),
            Transport::Tls(t) => t.try_read(buf),
        }
    }

    /// Write `iov` in order without waiting (`more`: more follows at once, a hint cleartext
    /// passes to the kernel): the bytes taken, `WouldBlock` when none were.
    pub fn try_write_vectored(&mut self, iov: &[IoSlice<'_>], more: bool) -> io::Result<usize> {
        match self {
            Transport::Plain(s) if more => send_more(s, iov),
            Transport::Plain(s) => s.try_write_vectored(iov),
            Transport::Tls(t) => t.try_write_vectored(iov),
        }
    }

    /// Send what the stream itself still holds (TLS records): `WouldBlock` while some remain.
    pub fn try_flush(&mut self) -> io::Result<()> {
        match self {
            Transport::Plain(_) => Ok(()),
            Transport::Tls(t) => t.try_flush(),
        }
    }

    /// Give back what an idle connection need not hold (TLS's input and output buffers).
    pub fn release_idle_buffers(&mut self) {
        if let Transport::Tls(t) = self {
            t.release_idle_buffers();
        }
    }

    /// Whether the stream holds bytes taken by a write and not yet sent.
    pub fn has_queued_output(&self) -> bool {
        match self {
            Transport::Plain(_) => false,
            Transport::Tls(t) => t.has_queued_output(),
        }
    }

    /// Wait until a read may make progress (at once when TLS has decrypted bytes waiting).
    pub async fn readable(&self) -> io::Result<()> {
        match self {
            Transport::Plain(s) => s.readable().await,
            Transport::Tls(t) => t.readable().await,
        }
    }

    pub async fn writable(&self) -> io::Result<()> {
        self.tcp().writable().await
    }

    /// End our side: TLS sends close_notify first.
    pub async fn shutdown(&mut self) -> io::Result<()> {
        match self {
            Transport::Plain(s) => s.shutdown().await,
            Transport::Tls(t) => t.shutdown().await,
        }
    }

    /// Read (waiting), for draining after a close.
    pub async fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            self.readable().await?;
            match self.try_read(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                r => return r,
            }
        }
    }
}
