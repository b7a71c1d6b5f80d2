//! `try_read_drained` and `try_read_buf_drained`: non-blocking reads of a tokio `TcpStream`
//! that, when the read came back short, tell the reactor the socket is drained — as tokio's
//! own `poll_read` does, but which its `try_read` does not — so the next wait sleeps until new
//! bytes come instead of costing a read that fails with EAGAIN (one system call per request
//! saved on each keep-alive socket); `mark_read_drained` for a caller that knows it.

use std::io;
use std::os::fd::AsRawFd;

use bytes::BufMut;
use tokio::io::Interest;
use tokio::net::TcpStream;

/// Read into `buf` without waiting: `Ok(n)` with the bytes read (0: end of stream, or `buf`
/// is empty), `WouldBlock` when nothing is there. A read shorter than `buf` also clears the
/// stream's read readiness: with edge-triggered epoll, a stream socket that returned less
/// than asked has nothing more queued, and bytes that come later raise a new edge.
pub fn try_read_drained(stream: &TcpStream, buf: &mut [u8]) -> io::Result<usize> {
    let len = buf.len();
    let fd = stream.as_raw_fd();
    // SAFETY: `buf` is a live, writable slice of `len` bytes.
    read_then_mark(stream, len, || unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), len, 0) })
}

/// [`try_read_drained`] into the spare capacity of `buf` (which must have some for a read to
/// tell data from end of stream), advancing it by the bytes read.
pub fn try_read_buf_drained<B: BufMut>(stream: &TcpStream, buf: &mut B) -> io::Result<usize> {
    let dst = buf.chunk_mut();
    let len = dst.len();
    let fd = stream.as_raw_fd();
    let ptr = dst.as_mut_ptr();
    // SAFETY: `ptr` points at `len` writable (possibly uninitialised) bytes of `buf`'s spare
    // capacity, which recv only writes.
    let n = read_then_mark(stream, len, || unsafe { libc::recv(fd, ptr.cast(), len, 0) })?;
    // SAFETY: recv initialised the first `n` (≤ `len`) bytes of the spare capacity.
    unsafe { buf.advance_mut(n) };
    Ok(n)
}

/// Tell the reactor that `stream` has nothing queued to read, without a system call: for a
/// caller that took every byte the peer sent some other way (splice(2) leaves the readiness
/// set) and knows the peer sends nothing more until asked (a node between a response and the
/// next request). Nothing is lost if more came anyway: bytes that arrived after the reactor
/// last saw the socket keep their readiness (tokio clears only the readiness of the event it
/// handed out), and an end of stream or reset stays visible (tokio never clears those). Bytes
/// that were already queued are not noticed until the next event.
pub fn mark_read_drained(stream: &TcpStream) {
    let _ = stream.try_io(Interest::READABLE, || Err::<(), _>(io::ErrorKind::WouldBlock.into()));
}

/// Run `recv` (returning bytes read or -1) under the stream's read readiness; a short read
/// clears the readiness. tokio clears it only when the closure fails with `WouldBlock`, so a
/// short read is reported to it that way and its count handed back here.
fn read_then_mark(stream: &TcpStream, len: usize, mut recv: impl FnMut() -> isize) -> io::Result<usize> {
    if len == 0 {
        return Ok(0);
    }
    let mut short = None;
    let result = stream.try_io(Interest::READABLE, || {
        let n = recv();
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = n as usize;
        if n > 0 && n < len {
            short = Some(n);
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(n)
    });
    match (result, short) {
        (Err(e), Some(n)) if e.kind() == io::ErrorKind::WouldBlock => Ok(n),
        (result, _) => result,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use locus_test_support::tcp_pair as pair;
    use std::future::poll_fn;
    use std::task::Poll;
    use std::time::Duration;
    use tokio::io::AsyncWriteExt;

    /// Whether the stream's read readiness is set now (one poll, no waiting).
    async fn read_ready_now(stream: &TcpStream) -> bool {
        poll_fn(|cx| Poll::Ready(stream.poll_read_ready(cx).is_ready())).await
    }

    async fn wait_readable(stream: &TcpStream) {
        tokio::time::timeout(Duration::from_secs(5), stream.readable()).await.unwrap().unwrap();
    }

    #[tokio::test(flavor = "current_thread")]
    async fn short_read_returns_the_bytes_and_clears_readiness_until_new_bytes_come() {
        let (mut writer, reader) = pair().await;
        writer.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        wait_readable(&reader).await;
        let mut buf = [0u8; 4096];
        assert_eq!(try_read_drained(&reader, &mut buf).unwrap(), 18);
        assert_eq!(&buf[..18], b"GET / HTTP/1.1\r\n\r\n");
        assert!(!read_ready_now(&reader).await, "a short read drained the socket");
        writer.write_all(b"next").await.unwrap();
        wait_readable(&reader).await;
        assert_eq!(try_read_drained(&reader, &mut buf).unwrap(), 4);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn full_read_keeps_readiness_for_the_bytes_left() {
        let (mut writer, reader) = pair().await;
        writer.write_all(&[7u8; 100]).await.unwrap();
        wait_readable(&reader).await;
        let mut buf = [0u8; 60];
        assert_eq!(try_read_drained(&reader, &mut buf).unwrap(), 60);
        assert!(read_ready_now(&reader).await, "40 bytes are still queued");
        assert_eq!(try_read_drained(&reader, &mut buf).unwrap(), 40);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn empty_socket_is_would_block_and_end_of_stream_is_zero() {
        let (writer, reader) = pair().await;
        let mut buf = [0u8; 16];
        let e = try_read_drained(&reader, &mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        drop(writer);
        wait_readable(&reader).await;
        assert_eq!(try_read_drained(&reader, &mut buf).unwrap(), 0);
        assert_eq!(try_read_drained(&reader, &mut []).unwrap(), 0, "an empty buffer reads nothing");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn marking_drained_clears_readiness_and_later_bytes_and_end_of_stream_still_wake() {
        let (mut writer, reader) = pair().await;
        writer.write_all(b"body").await.unwrap();
        wait_readable(&reader).await;
        // Take the bytes behind tokio's back, as splice(2) does: the readiness stays set.
        let mut buf = [0u8; 16];
        // SAFETY: `buf` is a live, writable slice of 16 bytes.
        let n = unsafe { libc::recv(reader.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        assert_eq!(n, 4);
        assert!(read_ready_now(&reader).await, "tokio still takes the socket for readable");
        mark_read_drained(&reader);
        assert!(!read_ready_now(&reader).await, "marked drained: the next wait sleeps");
        writer.write_all(b"next").await.unwrap();
        wait_readable(&reader).await;
        assert_eq!(try_read_drained(&reader, &mut buf).unwrap(), 4, "new bytes woke the wait");
        mark_read_drained(&reader);
        drop(writer);
        wait_readable(&reader).await;
        mark_read_drained(&reader);
        assert!(read_ready_now(&reader).await, "an end of stream is never cleared");
        assert_eq!(try_read_drained(&reader, &mut buf).unwrap(), 0);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn buf_read_appends_to_the_spare_capacity() {
        let (mut writer, reader) = pair().await;
        writer.write_all(b"abc").await.unwrap();
        wait_readable(&reader).await;
        let mut buf = Vec::with_capacity(64);
        buf.extend_from_slice(b"xy");
        assert_eq!(try_read_buf_drained(&reader, &mut buf).unwrap(), 3);
        assert_eq!(buf, b"xyabc");
        assert!(!read_ready_now(&reader).await);
    }
}
