//! `SharedPages`: a cached body kept in a sealed memfd and mapped read-only, so the same
//! pages back the document's `Bytes` and can be handed to a socket with sendfile(2) without
//! copying them (what a server sending from the page cache gets). Used for bodies of at
//! least `SharedPages::MIN_LEN` bytes, and at most `MAX_LIVE` at once per process so file
//! descriptors stay bounded; anything else stays an ordinary heap buffer.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;

/// Memfd-backed bodies alive in this process.
static LIVE: AtomicUsize = AtomicUsize::new(0);
const MAX_LIVE: usize = 4096;

/// A read-only, sealed, shared mapping of a document body.
pub struct SharedPages {
    file: File,
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is read-only and its memfd is sealed against writes, shrinking and
// growing, so the bytes never change while mapped and may be read from any thread.
unsafe impl Send for SharedPages {}
// SAFETY: as above: shared references only ever read immutable bytes.
unsafe impl Sync for SharedPages {}

impl std::fmt::Debug for SharedPages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedPages").field("fd", &self.file.as_raw_fd()).field("len", &self.len).finish()
    }
}

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(rc) }
}

impl SharedPages {
    /// Bodies smaller than this are cheaper to copy than to send with an extra syscall.
    pub const MIN_LEN: usize = 16 * 1024;

    /// Copy `data` (non-empty) into a new sealed memfd and map it.
    pub fn new(data: &[u8]) -> io::Result<SharedPages> {
        if data.is_empty() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty body"));
        }
        if LIVE.fetch_add(1, Ordering::Relaxed) >= MAX_LIVE {
            LIVE.fetch_sub(1, Ordering::Relaxed);
            return Err(io::Error::other("too many shared bodies"));
        }
        let made = Self::map(data);
        if made.is_err() {
            LIVE.fetch_sub(1, Ordering::Relaxed);
        }
        made
    }

    fn map(data: &[u8]) -> io::Result<SharedPages> {
        // SAFETY: the name is a valid NUL-terminated string; the flags are constants.
        let fd = check(unsafe {
            libc::memfd_create(c"locus-doc".as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING)
        })?;
        // SAFETY: `fd` was just created and is owned by nothing else.
        let mut file = unsafe { File::from_raw_fd(fd) };
        file.write_all(data)?;
        let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE | libc::F_SEAL_SEAL;
        // SAFETY: F_ADD_SEALS on a memfd we own, with an integer argument.
        check(unsafe { libc::fcntl(fd, libc::F_ADD_SEALS, seals) })?;
        // SAFETY: a fresh read-only shared mapping of `data.len()` bytes of a file that long.
        let ptr =
            unsafe { libc::mmap(std::ptr::null_mut(), data.len(), libc::PROT_READ, libc::MAP_SHARED, fd, 0) };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(ptr.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        Ok(SharedPages { file, ptr, len: data.len() })
    }

    /// The memfd, for sendfile.
    pub fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }
}

impl AsRef<[u8]> for SharedPages {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `ptr` maps `len` readable bytes that stay mapped and unchanged until drop.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for SharedPages {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping made in `map`; no reference outlives `self`
        // (the `Bytes` views hold an `Arc` to it).
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
        LIVE.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Keeps the pages alive for the `Bytes` that view them.
struct PagesOwner(Arc<SharedPages>);

impl AsRef<[u8]> for PagesOwner {
    fn as_ref(&self) -> &[u8] {
        (*self.0).as_ref()
    }
}

/// A cached body: in shared pages when it is large enough (and a memfd is available),
/// otherwise on the heap. The `Bytes` views the same memory as the pages.
pub fn cached_body(data: Vec<u8>) -> (Bytes, Option<Arc<SharedPages>>) {
    if data.len() >= SharedPages::MIN_LEN
        && let Ok(pages) = SharedPages::new(&data)
    {
        let pages = Arc::new(pages);
        return (Bytes::from_owner(PagesOwner(pages.clone())), Some(pages));
    }
    (Bytes::from(data), None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_bodies_live_in_sealed_shared_pages_with_the_same_bytes() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 253) as u8).collect();
        let (bytes, pages) = cached_body(data.clone());
        let pages = pages.expect("shared pages for a large body");
        assert_eq!(&bytes[..], &data[..]);
        assert_eq!((*pages).as_ref().len(), data.len());
        assert_eq!(bytes.as_ptr(), (*pages).as_ref().as_ptr(), "one copy, viewed twice");
        // Sealed: the memfd cannot be written or resized.
        let mut f = &pages.file;
        assert!(f.write_all(b"x").is_err());
        assert!(pages.file.set_len(10).is_err());
        let (small, none) = cached_body(vec![1, 2, 3]);
        assert!(none.is_none());
        assert_eq!(&small[..], &[1, 2, 3]);
    }
}
