//! `SpareDescriptor` with the process out of descriptors: a connection waiting on the listen
//! queue is taken with the spare and refused with the answer, and the spare is held again;
//! once descriptors are plentiful again, a connection so taken is admitted instead.
//! This file is its own test binary (one test), so lowering its descriptor limit affects
//! nothing else.

use locus_io::{Refusal, SpareDescriptor, is_out_of_descriptors, open_file_limit};
use socket2::{Domain, Socket, Type};
use std::io::Read;
use tokio::net::TcpListener;

/// The lowest descriptor number not in use (asked of the kernel, which needs none itself).
fn lowest_free_descriptor() -> i32 {
    // SAFETY: F_GETFD only reads the flags of a descriptor number, open or not.
    (0..).find(|&fd| unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0).unwrap()
}

fn set_soft_limit(soft: u64) {
    let hard = open_file_limit().unwrap().hard;
    let lim = libc::rlimit { rlim_cur: soft as libc::rlim_t, rlim_max: hard as libc::rlim_t };
    // SAFETY: a valid rlimit with soft ≤ hard, for this process.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
}

/// Puts the soft limit back when dropped, even when the test fails.
struct RestoreLimit(u64);

impl Drop for RestoreLimit {
    fn drop(&mut self) {
        set_soft_limit(self.0);
    }
}

#[tokio::test(flavor = "current_thread")]
async fn out_of_descriptors_a_waiting_connection_is_taken_with_the_spare_and_refused() {
    const ANSWER: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n";
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut spare = SpareDescriptor::open();
    assert!(spare.is_held());
    // The client's descriptor exists before the limit drops; connecting needs no other.
    let client = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    let restore = RestoreLimit(open_file_limit().unwrap().soft);
    set_soft_limit(lowest_free_descriptor() as u64);
    client.connect(&addr.into()).unwrap();
    let err = listener.accept().await.expect_err("accepting with no descriptor left");
    assert!(is_out_of_descriptors(&err), "{err}");

    let refusal = spare.refuse_waiting(&listener, ANSWER).await;
    assert!(matches!(refusal, Refusal::Refused), "{refusal:?}");
    assert!(spare.is_held(), "the spare is taken again after the refusal");
    let refusal = spare.refuse_waiting(&listener, ANSWER).await;
    assert!(matches!(refusal, Refusal::NoneWaiting), "{refusal:?}");
    drop(restore);

    // The limit is back (as if raised while the accept loop was refusing): admitted.
    let _second = std::net::TcpStream::connect(addr).unwrap();
    // Parks the runtime, so its reactor sees the connection already waiting.
    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    let refusal = spare.refuse_waiting(&listener, ANSWER).await;
    assert!(matches!(refusal, Refusal::Admitted(..)), "{refusal:?}");
    assert!(spare.is_held());

    let mut client: std::net::TcpStream = client.into();
    client.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
    let mut answer = Vec::new();
    client.read_to_end(&mut answer).unwrap();
    assert_eq!(answer, ANSWER);
}
