//! System calls aya does not offer with `&self`: `bpf(2)` map element commands on a map's file
//! descriptor (so the `Forwarder` can be shared between threads), a network-namespace handle that
//! can be entered temporarily, rtnetlink requests to list clsact filters and delete the qdisc,
//! the monotonic clock of `bpf_ktime_get_ns`, and the bpffs check.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::Path;

const BPF_MAP_LOOKUP_ELEM: libc::c_int = 1;
const BPF_MAP_UPDATE_ELEM: libc::c_int = 2;
const BPF_MAP_DELETE_ELEM: libc::c_int = 3;
const BPF_MAP_GET_NEXT_KEY: libc::c_int = 4;

/// `bpf_map_update_elem` flags.
pub(crate) const BPF_ANY: u64 = 0;
pub(crate) const BPF_EXIST: u64 = 2;

/// The `bpf_attr` of the map element commands.
#[repr(C)]
#[derive(Default)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

fn bpf(cmd: libc::c_int, attr: &mut MapElemAttr) -> io::Result<()> {
    // SAFETY: attr is a valid bpf_attr prefix for the map element commands; the pointers in it
    // refer to buffers the caller keeps alive and sized for the map's key and value.
    let r = unsafe {
        libc::syscall(libc::SYS_bpf, cmd, attr as *mut MapElemAttr, size_of::<MapElemAttr>() as libc::c_uint)
    };
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

fn attr(fd: BorrowedFd<'_>, key: Option<&[u8]>, value: u64, flags: u64) -> MapElemAttr {
    MapElemAttr {
        map_fd: fd.as_raw_fd() as u32,
        _pad: 0,
        key: key.map_or(0, |k| k.as_ptr() as u64),
        value,
        flags,
    }
}

/// Look `key` up into `value` (sized for the map's value; per-CPU maps: value size rounded up to
/// 8, times the possible CPUs). `Ok(false)`: no such key.
pub(crate) fn map_lookup(fd: BorrowedFd<'_>, key: &[u8], value: &mut [u8]) -> io::Result<bool> {
    let mut a = attr(fd, Some(key), value.as_mut_ptr() as u64, 0);
    match bpf(BPF_MAP_LOOKUP_ELEM, &mut a) {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Write `key` = `value` with `flags` (`BPF_ANY`, `BPF_EXIST`).
pub(crate) fn map_update(fd: BorrowedFd<'_>, key: &[u8], value: &[u8], flags: u64) -> io::Result<()> {
    let mut a = attr(fd, Some(key), value.as_ptr() as u64, flags);
    bpf(BPF_MAP_UPDATE_ELEM, &mut a)
}

/// Delete `key`; `Ok(false)`: it was not there.
pub(crate) fn map_delete(fd: BorrowedFd<'_>, key: &[u8]) -> io::Result<bool> {
    let mut a = attr(fd, Some(key), 0, 0);
    match bpf(BPF_MAP_DELETE_ELEM, &mut a) {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

/// The key after `key` (the first key for `None`) into `next`; `Ok(false)`: no more keys.
pub(crate) fn map_next_key(fd: BorrowedFd<'_>, key: Option<&[u8]>, next: &mut [u8]) -> io::Result<bool> {
    let mut a = attr(fd, key, next.as_mut_ptr() as u64, 0);
    match bpf(BPF_MAP_GET_NEXT_KEY, &mut a) {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds: the clock of `bpf_ktime_get_ns`.
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Whether `path` lies on a bpf filesystem.
pub(crate) fn is_bpffs(path: &Path) -> io::Result<bool> {
    const BPF_FS_MAGIC: i64 = 0xcafe_4a11;
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
    // SAFETY: an all-zero statfs is valid; statfs fills it.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is a NUL-terminated path, st a writable statfs.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st.f_type as i64 == BPF_FS_MAGIC)
}

/// A network namespace, remembered so that later netlink work happens where the forwarder was
/// attached, whatever thread does it.
pub(crate) struct Netns(OwnedFd);

/// Puts the thread back into the namespace it was in when dropped.
pub(crate) struct NetnsReturn(Option<OwnedFd>);

fn open_current_netns() -> io::Result<OwnedFd> {
    Ok(std::fs::File::open("/proc/thread-self/ns/net")?.into())
}

fn same_file(a: BorrowedFd<'_>, b: BorrowedFd<'_>) -> io::Result<bool> {
    let stat = |fd: BorrowedFd<'_>| -> io::Result<(u64, u64)> {
        // SAFETY: an all-zero stat is valid; fstat fills it.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fd is open for the duration of the call.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((st.st_dev, st.st_ino))
    };
    Ok(stat(a)? == stat(b)?)
}

fn setns(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: setns on a namespace descriptor; it changes only the calling thread.
    if unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl Netns {
    /// The calling thread's network namespace.
    pub(crate) fn current() -> io::Result<Netns> {
        open_current_netns().map(Netns)
    }

    /// Move the calling thread into this namespace until the returned guard is dropped (nothing
    /// happens when it already is there).
    pub(crate) fn enter(&self) -> io::Result<NetnsReturn> {
        let here = open_current_netns()?;
        if same_file(here.as_fd(), self.0.as_fd())? {
            return Ok(NetnsReturn(None));
        }
        setns(self.0.as_fd())?;
        Ok(NetnsReturn(Some(here)))
    }
}

impl Drop for NetnsReturn {
    fn drop(&mut self) {
        if let Some(home) = self.0.take() {
            // Failing to return would leave the thread in the wrong namespace: nothing sane is
            // left to do then.
            setns(home.as_fd()).expect("return to the thread's network namespace");
        }
    }
}

const RTM_DELQDISC: u16 = 37;
const RTM_NEWTFILTER: u16 = 44;
const RTM_GETTFILTER: u16 = 46;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLM_F_DUMP: u16 = 0x300;
const TCA_KIND: u16 = 1;
/// `TC_H_CLSACT`, and the clsact ingress and egress parents.
const TC_H_CLSACT: u32 = 0xffff_fff1;
pub(crate) const CLSACT_INGRESS: u32 = 0xffff_fff2;
pub(crate) const CLSACT_EGRESS: u32 = 0xffff_fff3;

/// Send one rtnetlink request (`nlmsghdr` + `tcmsg` + attributes) and collect the type of every
/// reply message up to the ack or the end of the dump.
fn tc_request(
    msg_type: u16,
    flags: u16,
    ifindex: u32,
    handle: u32,
    parent: u32,
    attrs: &[u8],
) -> io::Result<Vec<u16>> {
    // SAFETY: plain socket(2); the descriptor is owned right away.
    let fd =
        unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_ROUTE) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is fresh and ours.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let len = 16 + 20 + attrs.len();
    let mut msg = Vec::with_capacity(len);
    msg.extend_from_slice(&(len as u32).to_ne_bytes());
    msg.extend_from_slice(&msg_type.to_ne_bytes());
    msg.extend_from_slice(&(flags | NLM_F_REQUEST).to_ne_bytes());
    msg.extend_from_slice(&1u32.to_ne_bytes()); // seq
    msg.extend_from_slice(&0u32.to_ne_bytes()); // pid
    msg.extend_from_slice(&[libc::AF_UNSPEC as u8, 0, 0, 0]);
    msg.extend_from_slice(&(ifindex as i32).to_ne_bytes());
    msg.extend_from_slice(&handle.to_ne_bytes());
    msg.extend_from_slice(&parent.to_ne_bytes());
    msg.extend_from_slice(&0u32.to_ne_bytes()); // info
    msg.extend_from_slice(attrs);
    // SAFETY: an all-zero sockaddr_nl addresses the kernel once its family is set.
    let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    // SAFETY: msg and kernel are valid for the lengths given.
    let sent = unsafe {
        libc::sendto(
            sock.as_raw_fd(),
            msg.as_ptr().cast(),
            msg.len(),
            0,
            (&kernel as *const libc::sockaddr_nl).cast(),
            size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut types = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // SAFETY: buf is writable for its length.
        let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut rest = &buf[..n as usize];
        while rest.len() >= 16 {
            let len = u32::from_ne_bytes(rest[0..4].try_into().unwrap()) as usize;
            let kind = u16::from_ne_bytes(rest[4..6].try_into().unwrap());
            if len < 16 || len > rest.len() {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "truncated netlink reply"));
            }
            match kind {
                NLMSG_DONE => return Ok(types),
                NLMSG_ERROR => {
                    let code = i32::from_ne_bytes(rest[16..20].try_into().unwrap());
                    return if code == 0 { Ok(types) } else { Err(io::Error::from_raw_os_error(-code)) };
                }
                other => types.push(other),
            }
            rest = &rest[len.next_multiple_of(4).min(rest.len())..];
        }
    }
}

/// Number of tc filters under a clsact parent of an interface (in the calling thread's namespace).
pub(crate) fn clsact_filters(ifindex: u32, parent: u32) -> io::Result<usize> {
    let replies = tc_request(RTM_GETTFILTER, NLM_F_DUMP, ifindex, 0, parent, &[])?;
    Ok(replies.iter().filter(|&&t| t == RTM_NEWTFILTER).count())
}

/// Delete the clsact qdisc of an interface (in the calling thread's namespace).
pub(crate) fn delete_clsact(ifindex: u32) -> io::Result<()> {
    let kind = b"clsact\0";
    let mut attr = Vec::new();
    attr.extend_from_slice(&((4 + kind.len()) as u16).to_ne_bytes());
    attr.extend_from_slice(&TCA_KIND.to_ne_bytes());
    attr.extend_from_slice(kind);
    attr.resize(attr.len().next_multiple_of(4), 0);
    tc_request(RTM_DELQDISC, NLM_F_ACK, ifindex, 0xffff_0000, TC_H_CLSACT, &attr).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_clock_advances() {
        let a = monotonic_ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(monotonic_ns() >= a + 1_000_000);
    }

    #[test]
    fn entering_the_current_namespace_is_a_no_op() {
        let ns = Netns::current().unwrap();
        let guard = ns.enter().unwrap();
        assert!(guard.0.is_none());
    }

    #[test]
    fn tmp_is_not_bpffs() {
        assert!(!is_bpffs(&std::env::temp_dir()).unwrap());
    }
}
