//! Response bodies that do not fit in the output queue, streamed on a connection: a cached
//! body's shared pages with sendfile (from memory over TLS), a large file read from disk chunk by chunk, and the rest
//! of an origin response relayed as it comes.

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, Interest};

use super::Connection;
use crate::doc_store::LargeFile;
use crate::origin::OriginBody;
use crate::out_queue::OutQueue;
use crate::shared_pages::SharedPages;

/// Bytes read from disk per step when streaming a large file.
const FILE_CHUNK: u64 = 256 * 1024;
const ORIGIN_CHUNK: usize = 64 * 1024;
const ORIGIN_READ_TIMEOUT: Duration = Duration::from_secs(30);

impl Connection<'_> {
    /// Send what is queued marked as "more to come", then `len` bytes of `pages` from
    /// `offset` with sendfile, so head and body leave together and the body is not copied.
    pub(super) async fn send_pages(
        &mut self,
        out: &mut OutQueue,
        pages: &SharedPages,
        offset: u64,
        len: u64,
    ) -> io::Result<()> {
        if self.stream.is_tls() {
            // Encrypted in user space: the pages are mapped, so they are written from memory.
            let body = &pages.as_ref()[offset as usize..(offset + len) as usize];
            return self.send_copied(out, body).await;
        }
        self.flush_with(out, true).await?;
        let counters = self.w.counters();
        let socket = self.stream.tcp().as_raw_fd();
        let end = (offset + len) as libc::off_t;
        let mut pos = offset as libc::off_t;
        let mut deadline = None;
        while pos < end {
            let count = (end - pos) as usize;
            let sent = self.stream.tcp().try_io(Interest::WRITABLE, || {
                // SAFETY: both descriptors are open for the duration of the call and `pos`
                // is a valid offset variable that sendfile advances.
                let n = unsafe { libc::sendfile(socket, pages.fd(), &mut pos, count) };
                if n < 0 { Err(io::Error::last_os_error()) } else { Ok(n as usize) }
            });
            match sent {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => counters.sent(n as u64),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wait_for_room(&mut deadline).await?,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Send what is queued, then `body` from memory through the transport.
    async fn send_copied(&mut self, out: &mut OutQueue, body: &[u8]) -> io::Result<()> {
        self.flush_with(out, true).await?;
        let counters = self.w.counters();
        let mut deadline = None;
        let mut sent = 0;
        while sent < body.len() {
            match self.stream.try_write_vectored(&[io::IoSlice::new(&body[sent..])], false) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    counters.sent(n as u64);
                    sent += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wait_for_room(&mut deadline).await?,
                Err(e) => return Err(e),
            }
        }
        self.drain_transport(&mut deadline).await
    }

    /// Stream `len` bytes of a large file from `offset`, reading the next chunk from disk
    /// while the current one is being sent.
    pub(super) async fn send_file(
        &mut self,
        out: &mut OutQueue,
        file: Arc<LargeFile>,
        offset: u64,
        len: u64,
    ) -> io::Result<()> {
        let read_chunk = |file: Arc<LargeFile>, at: u64, n: u64| {
            tokio::task::spawn_blocking(move || -> io::Result<Bytes> {
                let mut chunk = vec![0u8; n as usize];
                file.file.read_exact_at(&mut chunk, at)?;
                Ok(Bytes::from(chunk))
            })
        };
        let end = offset + len;
        let mut pos = offset;
        let mut next = Some(read_chunk(file.clone(), pos, FILE_CHUNK.min(len)));
        while let Some(task) = next.take() {
            let chunk = task.await.map_err(io::Error::other)??;
            pos += chunk.len() as u64;
            if pos < end {
                next = Some(read_chunk(file.clone(), pos, FILE_CHUNK.min(end - pos)));
            }
            out.push_body(chunk);
            self.flush(out).await?;
        }
        Ok(())
    }

    /// Relay the rest of an origin response body.
    pub(super) async fn send_origin(&mut self, out: &mut OutQueue, mut body: OriginBody) -> io::Result<()> {
        if !body.leftover.is_empty() {
            out.push_body(Bytes::from(std::mem::take(&mut body.leftover)));
        }
        self.flush(out).await?;
        let mut chunk = vec![0u8; ORIGIN_CHUNK];
        while body.remaining > 0 {
            let want = body.remaining.min(chunk.len() as u64) as usize;
            let n =
                match tokio::time::timeout(ORIGIN_READ_TIMEOUT, body.stream.read(&mut chunk[..want])).await {
                    Ok(Ok(0)) => return Err(io::ErrorKind::UnexpectedEof.into()),
                    Ok(Ok(n)) => n,
                    Ok(Err(e)) => return Err(e),
                    Err(_) => return Err(io::ErrorKind::TimedOut.into()),
                };
            body.remaining -= n as u64;
            out.extend(&chunk[..n]);
            self.flush(out).await?;
        }
        if body.reusable
            && let Some(pool) = self.w.miss.origin_pool()
        {
            pool.put(body.stream);
        }
        Ok(())
    }
}
