//! A quick loopback measurement (ignored by default; run with
//! `cargo test --release -p locus-node --test coop_latency -- --ignored --nocapture`):
//! the latency of one keep-alive GET answered by a local hit, a remote hit (fetched from a
//! peer's memory, no copy kept) and a storage read (cache off, file in the page cache), for
//! 1 KiB and 256 KiB documents. Prints median and mean per case; asserts only the bodies.

mod coop_support;

use std::time::{Duration, Instant};

use coop_support::*;
use locus_node::ByteSize;
use locus_test_support::{Client, get};

const ROUNDS: usize = 2000;

fn measure(client: &mut Client, key: &str, body: &[u8], expect: &str) -> (Duration, Duration) {
    let mut times = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let t = Instant::now();
        let r = client.get(key);
        times.push(t.elapsed());
        assert_eq!((r.header("x-locus-cache"), r.body.as_slice()), (Some(expect), body));
    }
    times.sort();
    let mean = times.iter().sum::<Duration>() / ROUNDS as u32;
    (times[ROUNDS / 2], mean)
}

#[test]
#[ignore = "a measurement, not a check"]
fn latency_of_local_hits_remote_hits_and_storage_reads() {
    let roots = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let ports = [free_port(), free_port()];
    // A keeps no copy (every request is a remote hit); B holds everything; C reads storage.
    let a = start_node("a", ports[0], roots[0].path(), &[ports[1]], |c| {
        c.coop.as_mut().unwrap().keep_copy = false;
        c.workers = 1;
    });
    let b = start_node("b", ports[1], roots[1].path(), &[ports[0]], |c| c.workers = 1);
    let c = start_node("c", free_port(), roots[0].path(), &[], |c| {
        c.cache.capacity = ByteSize(0);
        c.coop = None;
        c.workers = 1;
    });
    for (len, name) in [(1024, "/1k.bin"), (256 * 1024, "/256k.bin")] {
        let body: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        for r in &roots {
            write_doc(r.path(), name, &body);
        }
        assert_eq!(get(b.addr(), name).status, 200);
        wait_until("the home knows B holds it", || {
            coop_figure(&a, "directory_entries") + coop_figure(&b, "directory_entries") >= 1
        });
        let local = measure(&mut Client::connect(b.addr()), name, &body, "hit");
        let remote = measure(&mut Client::connect(a.addr()), name, &body, "remote");
        let storage = measure(&mut Client::connect(c.addr()), name, &body, "bypass");
        for (what, (median, mean)) in
            [("local hit", local), ("remote hit", remote), ("storage read", storage)]
        {
            println!("{name:>10} {what:>12}: median {median:>10.1?} mean {mean:>10.1?}");
        }
        let _ = (&a, &b, &c);
    }
}
