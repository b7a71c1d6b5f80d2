//! `ClientStream`: what a client session reads and writes — the TCP socket, or a TLS session
//! terminated here (rustls, driven by `locus_tls::TlsStream`). Sessions use `AsyncRead` and
//! `AsyncWrite` on it and ask `tcp()` for the socket's addresses and options; what only a
//! cleartext socket can do (splice, handoff) asks `plain()` first.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use locus_io::try_read_buf_drained;
use locus_tls::TlsStream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// The most decrypted bytes one `try_read_buf` takes (a TLS record's plaintext).
const MAX_TLS_READ: usize = 16 * 1024;

/// A client connection's byte stream.
pub enum ClientStream {
    Plain(TcpStream),
    Tls(Box<TlsStream>),
}

impl ClientStream {
    /// The TCP socket under the stream (addresses, options, TCP_INFO; never its bytes).
    pub fn tcp(&self) -> &TcpStream {
        match self {
            ClientStream::Plain(s) => s,
            ClientStream::Tls(t) => t.tcp(),
        }
    }

    /// The socket when the bytes on it are the HTTP itself (splice and handoff need that).
    pub fn plain(&self) -> Option<&TcpStream> {
        match self {
            ClientStream::Plain(s) => Some(s),
            ClientStream::Tls(_) => None,
        }
    }

    /// `https` or `http`, for `X-Forwarded-Proto`.
    pub fn scheme(&self) -> &'static str {
        match self {
            ClientStream::Plain(_) => "http",
            ClientStream::Tls(_) => "https",
        }
    }

    /// Read whatever is ready into `buf`'s spare capacity without waiting.
    pub fn try_read_buf(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        match self {
            ClientStream::Plain(s) => try_read_buf_drained(s, buf),
            ClientStream::Tls(t) => {
                let room = (buf.capacity() - buf.len()).clamp(1, MAX_TLS_READ);
                t.try_read_append(buf, room)
            }
        }
    }

    /// Wait until a read may make progress (at once when TLS holds decrypted bytes).
    pub async fn readable(&self) -> io::Result<()> {
        match self {
            ClientStream::Plain(s) => s.readable().await,
            ClientStream::Tls(t) => t.readable().await,
        }
    }
}

impl AsyncRead for ClientStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ClientStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            ClientStream::Tls(t) => Pin::new(&mut **t).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for ClientStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ClientStream::Plain(s) => Pin::new(s).poll_write(cx, data),
            ClientStream::Tls(t) => Pin::new(&mut **t).poll_write(cx, data),
        }
    }

    /// Gathered into one `writev`, or sealed into as few TLS records as fit (HTTP/2 writes a
    /// frame's header and its data so).
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ClientStream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            ClientStream::Tls(t) => Pin::new(&mut **t).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ClientStream::Plain(s) => Pin::new(s).poll_flush(cx),
            ClientStream::Tls(t) => Pin::new(&mut **t).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ClientStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            ClientStream::Tls(t) => Pin::new(&mut **t).poll_shutdown(cx),
        }
    }
}
