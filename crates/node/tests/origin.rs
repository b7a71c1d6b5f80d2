//! A node in front of an origin (another node): misses fetched over pooled connections and
//! cached, non-200 responses passed through uncached, large bodies relayed, and 502 when the
//! origin is unreachable.

mod common;

use common::{TestNode, pattern};
use locus_node::ByteSize;

#[test]
fn a_cache_node_fetches_misses_from_its_origin_and_caches_200s() {
    let origin = TestNode::start(|c, _| c.name = "origin".into());
    origin.write("doc.html", b"<p>from origin</p>");
    origin.write("big.bin", &pattern(3 * 1024 * 1024, 9));
    let origin_url = format!("http://{}", origin.addr());
    let cache = TestNode::start(|c, _| {
        c.name = "edge".into();
        c.origin = Some(origin_url.clone());
        c.cache.max_object = ByteSize::mib(1);
    });
    let r = cache.get("/doc.html");
    assert_eq!((r.status, r.text().as_str()), (200, "<p>from origin</p>"));
    assert_eq!(r.header("X-Locus-Node"), Some("edge"));
    assert_eq!(r.header("X-Locus-Cache"), Some("miss"));
    assert_eq!(r.header("Content-Type"), Some("text/html"));
    let r = cache.get("/doc.html");
    assert_eq!(r.header("X-Locus-Cache"), Some("hit"));
    assert_eq!(origin.server().stats().requests, 1, "the second request did not reach the origin");

    let r = cache.get("/missing.html");
    assert_eq!(r.status, 404);
    assert_eq!(cache.get("/missing.html").status, 404);
    assert_eq!(origin.server().stats().requests, 3, "404s are not cached");

    for _ in 0..2 {
        let r = cache.get("/big.bin");
        assert_eq!(r.status, 200);
        assert!(r.body == pattern(3 * 1024 * 1024, 9));
        assert_eq!(r.header("X-Locus-Cache"), Some("bypass"));
    }
    // Pooled keep-alive: far fewer origin connections than origin requests.
    let o = origin.server().stats();
    assert!(o.connections_total < o.requests, "{o:?}");
}

#[test]
fn an_unreachable_origin_gives_502() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = listener.local_addr().unwrap();
    drop(listener);
    let cache = TestNode::start(|c, _| c.origin = Some(format!("http://{dead}")));
    assert_eq!(cache.get("/x").status, 502);
}
