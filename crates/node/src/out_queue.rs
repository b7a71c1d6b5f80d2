//! `OutQueue`: the responses a connection has produced and not yet written — heads and small
//! bodies copied into one growing buffer, large cached bodies kept as shared `Bytes` — written
//! with vectored writes, so consecutive pipelined responses leave in as few syscalls as
//! possible and a cache hit goes out as head + body in one `writev`.

use std::io::{self, IoSlice};

use std::os::fd::AsRawFd;

use bytes::Bytes;
use tokio::io::Interest;
use tokio::net::TcpStream;

/// Bodies up to this size are copied next to their head rather than referenced.
const COPY_LIMIT: usize = 4096;
/// Most slices passed to one `writev`.
const MAX_IOVECS: usize = 64;
/// Buffer capacity kept when the queue is recycled.
const KEEP_CAPACITY: usize = 64 * 1024;

#[derive(Debug)]
enum Segment {
    /// `buf[start..end]`.
    Buffered {
        start: usize,
        end: usize,
    },
    Shared(Bytes),
}

impl Segment {
    fn bytes<'a>(&'a self, buf: &'a [u8]) -> &'a [u8] {
        match self {
            Segment::Buffered { start, end } => &buf[*start..*end],
            Segment::Shared(b) => b,
        }
    }
}

/// Output waiting to be written to one connection.
#[derive(Debug, Default)]
pub struct OutQueue {
    buf: Vec<u8>,
    segments: Vec<Segment>,
    /// Bytes of `buf` already covered by `segments`.
    sealed: usize,
    /// First segment not completely written, and how much of it was.
    first: usize,
    offset: usize,
    pending: usize,
    /// Body bytes ever queued (`push_body`, `extend_body`); never reset, so the body of one
    /// response is the difference of two readings.
    bodies_queued: u64,
}

impl OutQueue {
    /// The buffer to append head bytes to; they are queued at the next `seal`, `push_body`
    /// or write.
    pub fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// Append bytes.
    pub fn extend(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Queue everything appended to `buf` so far.
    fn seal(&mut self) {
        let end = self.buf.len();
        if end == self.sealed {
            return;
        }
        self.pending += end - self.sealed;
        match self.segments.last_mut() {
            Some(Segment::Buffered { end: last_end, .. }) if *last_end == self.sealed => *last_end = end,
            _ => self.segments.push(Segment::Buffered { start: self.sealed, end }),
        }
        self.sealed = end;
    }

    /// Append body bytes (copied), counted in `bodies_queued`.
    pub fn extend_body(&mut self, bytes: &[u8]) {
        self.bodies_queued = self.bodies_queued.wrapping_add(bytes.len() as u64);
        self.buf.extend_from_slice(bytes);
    }

    /// Body bytes queued since the queue was made (wrapping).
    pub fn bodies_queued(&self) -> u64 {
        self.bodies_queued
    }

    /// Append a body: copied if small, referenced if large.
    pub fn push_body(&mut self, body: Bytes) {
        self.bodies_queued = self.bodies_queued.wrapping_add(body.len() as u64);
        if body.len() <= COPY_LIMIT {
            self.buf.extend_from_slice(&body);
            return;
        }
        self.seal();
        self.pending += body.len();
        self.segments.push(Segment::Shared(body));
    }

    /// Bytes queued and not yet written (including unsealed head bytes).
    pub fn len(&self) -> usize {
        self.pending + (self.buf.len() - self.sealed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Write as much as `write` takes without blocking: it is given the queued slices in order
    /// and says how many bytes it took (`WouldBlock` when none). Returns the bytes written;
    /// `WouldBlock` when nothing was.
    pub fn try_write(
        &mut self,
        mut write: impl FnMut(&[IoSlice<'_>]) -> io::Result<usize>,
    ) -> io::Result<usize> {
        self.seal();
        let mut total = 0;
        while self.pending > 0 {
            let mut iov = [IoSlice::new(&[]); MAX_IOVECS];
            let mut n_iov = 0;
            for (i, seg) in self.segments[self.first..].iter().enumerate().take(MAX_IOVECS) {
                let bytes = seg.bytes(&self.buf);
                iov[i] = IoSlice::new(if i == 0 { &bytes[self.offset..] } else { bytes });
                n_iov = i + 1;
            }
            match write(&iov[..n_iov]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    total += n;
                    self.advance(n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && total > 0 => return Ok(total),
                Err(e) => return Err(e),
            }
        }
        Ok(total)
    }

    fn advance(&mut self, mut n: usize) {
        self.pending -= n;
        while n > 0 {
            let seg_len = self.segments[self.first].bytes(&self.buf).len() - self.offset;
            if n >= seg_len {
                n -= seg_len;
                self.first += 1;
                self.offset = 0;
            } else {
                self.offset += n;
                n = 0;
            }
        }
        if self.pending == 0 {
            self.clear();
        }
    }

    /// Drop everything queued; shrink a buffer grown by a burst.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.segments.clear();
        self.sealed = 0;
        self.first = 0;
        self.offset = 0;
        self.pending = 0;
        if self.buf.capacity() > KEEP_CAPACITY {
            self.buf.shrink_to(KEEP_CAPACITY);
        }
    }
}

/// `sendmsg(MSG_MORE)` of `iov` on a non-blocking socket, through tokio's readiness: more
/// data follows at once, so a head and the body sent after it share segments.
pub fn send_more(stream: &TcpStream, iov: &[IoSlice<'_>]) -> io::Result<usize> {
    let fd = stream.as_raw_fd();
    stream.try_io(Interest::WRITABLE, || {
        // SAFETY: an all-zero msghdr is valid; IoSlice is ABI-compatible with iovec on Unix,
        // and `iov` outlives the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = iov.as_ptr() as *mut libc::iovec;
        msg.msg_iovlen = iov.len() as _;
        // SAFETY: `fd` is an open socket and `msg` points at valid buffers.
        let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_MORE | libc::MSG_NOSIGNAL) };
        if n < 0 { Err(io::Error::last_os_error()) } else { Ok(n as usize) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[test]
    fn queued_heads_and_bodies_are_written_in_order_across_partial_writes() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let client = tokio::spawn(async move {
                let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
                let mut all = Vec::new();
                s.read_to_end(&mut all).await.unwrap();
                all
            });
            let (server, _) = listener.accept().await.unwrap();
            let big = Bytes::from((0..3_000_000u32).map(|i| (i % 251) as u8).collect::<Vec<u8>>());
            let mut q = OutQueue::default();
            let mut expect = Vec::new();
            for i in 0..5 {
                let head = format!("head{i}\r\n");
                q.extend(head.as_bytes());
                expect.extend_from_slice(head.as_bytes());
                let body = if i % 2 == 0 { Bytes::from_static(b"small") } else { big.clone() };
                expect.extend_from_slice(&body);
                q.push_body(body);
            }
            assert_eq!(q.len(), expect.len());
            let mut written = 0;
            let mut i_round = 0;
            while !q.is_empty() {
                i_round += 1;
                match q.try_write(|iov| {
                    if i_round % 2 == 1 { send_more(&server, iov) } else { server.try_write_vectored(iov) }
                }) {
                    Ok(n) => written += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => server.writable().await.unwrap(),
                    Err(e) => panic!("{e}"),
                }
            }
            assert_eq!(written, expect.len());
            drop(server);
            assert!(client.await.unwrap() == expect);
        });
    }
}
