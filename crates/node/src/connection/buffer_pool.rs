//! A connection's buffers (read buffer, parsed head, output queue, request keys) and the
//! per-worker-thread pool they come from: held only while a request is being read or answered,
//! so an idle keep-alive connection costs no buffer.

use std::cell::RefCell;

use locus_http::RequestHead;

use crate::out_queue::OutQueue;

/// First size of a connection's read buffer; it grows up to the head limit when needed.
const READ_BUFFER: usize = 4096;
/// Buffers kept per worker thread for reuse.
const POOL_MAX: usize = 256;

/// The buffers of a connection that is reading or answering a request.
#[derive(Default)]
pub(super) struct ConnBuffers {
    pub(super) read: Vec<u8>,
    /// Unconsumed input is `read[start..end]`.
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) head: RequestHead,
    pub(super) out: OutQueue,
    pub(super) keys: RequestKeys,
}

impl ConnBuffers {
    /// Make room at the end of `read` for more input: start over when everything was
    /// consumed, move the unconsumed bytes to the front, or grow up to `max_read` bytes.
    /// False when the buffer is full at `max_read` already.
    pub(super) fn make_room(&mut self, max_read: usize) -> bool {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        if self.end == self.read.len() {
            if self.start > 0 {
                self.read.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else if self.read.len() < max_read {
                let len = (self.read.len() * 2).min(max_read);
                self.read.resize(len, 0);
            } else {
                return false;
            }
        }
        true
    }
}

/// Scratch strings a request's path and cache key are decoded into.
#[derive(Default)]
pub(super) struct RequestKeys {
    /// Decoded request path.
    pub(super) path: String,
    /// Cache key when it differs from `path` (origin mode with a query).
    cache_key: String,
}

impl RequestKeys {
    /// The decoded path and the cache key: the path, followed by `?query` if one is given.
    pub(super) fn path_and_key(&mut self, query: Option<&str>) -> (&str, &str) {
        match query {
            Some(q) => {
                self.cache_key.clear();
                self.cache_key.push_str(&self.path);
                self.cache_key.push('?');
                self.cache_key.push_str(q);
                (&self.path, &self.cache_key)
            }
            None => (&self.path, &self.path),
        }
    }
}

thread_local! {
    // Boxed so that a connection holds one pointer (none while idle), not the whole set.
    #[allow(clippy::vec_box)]
    static BUFFER_POOL: RefCell<Vec<Box<ConnBuffers>>> = const { RefCell::new(Vec::new()) };
}

/// A set of buffers from this thread's pool (a new one when the pool is empty).
pub(super) fn take_buffers() -> Box<ConnBuffers> {
    let mut b = BUFFER_POOL.with(|p| p.borrow_mut().pop()).unwrap_or_default();
    if b.read.is_empty() {
        b.read = vec![0; READ_BUFFER];
    }
    b
}

/// Give a set of buffers back to this thread's pool, emptied (and shrunk if it grew).
pub(super) fn give_back(mut b: Box<ConnBuffers>) {
    b.start = 0;
    b.end = 0;
    b.out.clear();
    if b.read.len() > READ_BUFFER {
        b.read = vec![0; READ_BUFFER];
    }
    // `try_with`: a connection dropped while its thread shuts down just frees its buffers.
    let _ = BUFFER_POOL.try_with(|p| {
        let mut p = p.borrow_mut();
        if p.len() < POOL_MAX {
            p.push(b);
        }
    });
}

/// A connection's buffers, given back to the pool however the connection ends.
pub(super) struct BufferSlot(pub(super) Option<Box<ConnBuffers>>);

impl Drop for BufferSlot {
    fn drop(&mut self) {
        if let Some(b) = self.0.take() {
            give_back(b);
        }
    }
}
