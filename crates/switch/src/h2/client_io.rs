//! `H2Io`: the byte stream an HTTP/2 connection runs on — the client's stream (TCP or TLS),
//! first giving back the bytes the switch read before it knew the connection was HTTP/2 (the
//! h2c preface), with every byte the client sends followed by a `FrameMeter`. Once the meter
//! finds a flood, it is posted to the connection's `FloodFlag`, reads stop (the client's bytes
//! are no longer processed) and the task is woken so the connection can send GOAWAY.

use super::frame_meter::{Flood, FrameMeter};
use crate::client_stream::ClientStream;
use std::cell::Cell;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Where the connection task learns of a flood its `H2Io` found.
pub type FloodFlag = Rc<Cell<Option<Flood>>>;

/// A client connection's stream as the h2 crate reads and writes it.
pub struct H2Io {
    stream: ClientStream,
    /// Bytes read before the connection was known to be HTTP/2, still to be given to h2.
    preread: Vec<u8>,
    preread_at: usize,
    meter: FrameMeter,
    flood: FloodFlag,
}

impl H2Io {
    /// The stream, the bytes already read from it, and the flag its floods are posted to.
    pub fn new(stream: ClientStream, preread: Vec<u8>, meter: FrameMeter) -> (H2Io, FloodFlag) {
        let flood = FloodFlag::default();
        (H2Io { stream, preread, preread_at: 0, meter, flood: flood.clone() }, flood)
    }
}

impl AsyncRead for H2Io {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.meter.flood().is_some() {
            if this.flood.get().is_some() {
                // Posted and not yet taken: the connection task takes it when it runs again.
                cx.waker().wake_by_ref();
            }
            return Poll::Pending;
        }
        let before = buf.filled().len();
        if this.preread_at < this.preread.len() {
            let rest = &this.preread[this.preread_at..];
            let n = rest.len().min(buf.remaining());
            buf.put_slice(&rest[..n]);
            this.preread_at += n;
            if this.preread_at == this.preread.len() {
                this.preread = Vec::new();
                this.preread_at = 0;
            }
        } else {
            std::task::ready!(Pin::new(&mut this.stream).poll_read(cx, buf))?;
        }
        this.meter.feed(&buf.filled()[before..], Instant::now());
        if let Some(flood) = this.meter.flood() {
            this.flood.set(Some(flood));
        }
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
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
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
