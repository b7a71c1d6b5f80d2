//! Static files over real connections: byte-exact GET and HEAD for cached and streamed
//! files, keep-alive and pipelining, conditional and range requests, errors, redirects,
//! every refusal of a path outside the root, and the cache's hit, eviction and freshness.

mod common;

use std::time::Duration;

use common::{Client, TestNode, pattern};
use locus_test_support::wait_until;

#[test]
fn get_and_head_are_byte_exact_for_small_cached_and_large_streamed_files() {
    let node = TestNode::start(|_, _| {});
    let small = b"hello, locus\n".to_vec();
    let cached = pattern(64 * 1024, 1);
    let large = pattern(1024 * 1024 + 12_345, 2);
    node.write("small.txt", &small);
    node.write("cached.bin", &cached);
    node.write("large.bin", &large);
    for (path, body) in [("/small.txt", &small), ("/cached.bin", &cached), ("/large.bin", &large)] {
        for _ in 0..2 {
            let r = node.get(path);
            assert_eq!(r.status, 200, "{path}");
            assert!(r.body == *body, "{path}: body differs");
            assert_eq!(r.header("Content-Length"), Some(body.len().to_string().as_str()));
        }
        let mut c = node.client();
        c.send(format!("HEAD {path} HTTP/1.1\r\nHost: x\r\n\r\n"));
        let r = c.response(true);
        assert_eq!(r.status, 200);
        assert!(r.body.is_empty());
        assert_eq!(r.header("Content-Length"), Some(body.len().to_string().as_str()));
        // The connection is still usable: HEAD sent no body.
        c.send(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n"));
        assert!(c.response(false).body == *body);
    }
    assert_eq!(node.get("/large.bin").header("X-Locus-Cache"), Some("bypass"));
    assert_eq!(node.get("/small.txt").header("Content-Type"), Some("text/plain"));
}

#[test]
fn second_request_is_a_cache_hit() {
    let node = TestNode::start(|_, _| {});
    node.write("a.html", b"<h1>a</h1>");
    let first = node.get("/a.html");
    assert_eq!(first.header("X-Locus-Cache"), Some("miss"));
    assert_eq!(first.header("Content-Type"), Some("text/html"));
    let second = node.get("/a.html");
    assert_eq!(second.header("X-Locus-Cache"), Some("hit"));
    assert_eq!(second.body, b"<h1>a</h1>");
    let stats = node.server().stats();
    assert_eq!((stats.hits, stats.misses), (1, 1));
}

#[test]
fn every_response_carries_server_date_length_and_node_name() {
    let node = TestNode::start(|c, _| c.name = "alpha".into());
    node.write("a.txt", b"a");
    let mut c = node.client();
    for raw in [
        "GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n",
        "DELETE /a.txt HTTP/1.1\r\nHost: x\r\n\r\n",
    ] {
        c.send(raw);
        let r = c.response(false);
        assert_eq!(r.header("Server"), Some("locus"), "{raw}");
        assert_eq!(r.header("X-Locus-Node"), Some("alpha"));
        assert!(r.header("Date").is_some_and(|d| httpdate::parse_http_date(d).is_ok()));
        assert!(r.header("Content-Length").is_some());
    }
}

#[test]
fn keep_alive_and_pipelined_requests_are_answered_in_order() {
    let node = TestNode::start(|_, _| {});
    for i in 0..5 {
        node.write(&format!("f{i}.txt"), format!("file number {i}").as_bytes());
    }
    node.write("big.bin", &pattern(2 * 1024 * 1024, 3));
    let mut c = node.client();
    // Sequential keep-alive.
    for i in 0..5 {
        c.send(format!("GET /f{i}.txt HTTP/1.1\r\nHost: x\r\n\r\n"));
        let r = c.response(false);
        assert_eq!(r.text(), format!("file number {i}"));
        assert_eq!(r.header("Connection"), None);
    }
    // Pipelined in one write, mixing hits, misses, a streamed file, HEAD and an error.
    let mut batch = String::new();
    for i in (0..5).rev() {
        batch.push_str(&format!("GET /f{i}.txt HTTP/1.1\r\nHost: x\r\n\r\n"));
    }
    batch.push_str("GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n");
    batch.push_str("HEAD /f1.txt HTTP/1.1\r\nHost: x\r\n\r\n");
    batch.push_str("GET /missing HTTP/1.1\r\nHost: x\r\n\r\n");
    batch.push_str("GET /f2.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    c.send(&batch);
    for i in (0..5).rev() {
        assert_eq!(c.response(false).text(), format!("file number {i}"));
    }
    assert!(c.response(false).body == pattern(2 * 1024 * 1024, 3));
    let head = c.response(true);
    assert_eq!((head.status, head.header("Content-Length")), (200, Some("13")));
    assert_eq!(c.response(false).status, 404);
    let last = c.response(false);
    assert_eq!((last.text().as_str(), last.header("Connection")), ("file number 2", Some("close")));
    assert!(c.closed());
}

#[test]
fn http10_keep_alive_is_answered_with_connection_keep_alive() {
    let node = TestNode::start(|_, _| {});
    node.write("a.txt", b"a");
    let mut c = node.client();
    c.send("GET /a.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    let r = c.response(false);
    assert_eq!(r.header("Connection"), Some("keep-alive"));
    c.send("GET /a.txt HTTP/1.0\r\n\r\n");
    let r = c.response(false);
    assert_eq!((r.status, r.header("Connection")), (200, Some("close")));
    assert!(c.closed());
}

#[test]
fn request_bodies_are_discarded_so_framing_stays_right() {
    let node = TestNode::start(|_, _| {});
    node.write("a.txt", b"aaa");
    let mut c = node.client();
    c.send("POST /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello worldGET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n");
    let r = c.response(false);
    assert_eq!((r.status, r.header("Allow")), (405, Some("GET, HEAD")));
    assert_eq!(c.response(false).text(), "aaa");
    c.send("GET /a.txt HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
    assert_eq!(c.response(false).text(), "aaa");
    // A body arriving in pieces after the head.
    c.send("PUT /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n");
    assert_eq!(c.response(false).status, 405);
    c.send(vec![b'z'; 100_000]);
    c.send("GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(c.response(false).text(), "aaa");
}

#[test]
fn if_modified_since_gives_304_and_an_older_date_gives_200() {
    let node = TestNode::start(|_, _| {});
    node.write("a.txt", b"abc");
    let first = node.get("/a.txt");
    let lm = first.header("Last-Modified").unwrap().to_string();
    for _ in 0..2 {
        let mut c = node.client();
        c.send(format!("GET /a.txt HTTP/1.1\r\nHost: x\r\nIf-Modified-Since: {lm}\r\n\r\n"));
        let r = c.response(true);
        assert_eq!(r.status, 304);
        assert!(r.body.is_empty());
        c.send("GET /a.txt HTTP/1.1\r\nHost: x\r\nIf-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n");
        assert_eq!(c.response(false).status, 200);
    }
}

#[test]
fn single_ranges_give_206_and_unsatisfiable_ones_416() {
    let node = TestNode::start(|_, _| {});
    // 100 KB: cached, in shared pages (long ranges go out with sendfile, short ones copied).
    let body = pattern(100_000, 4);
    let large = pattern(1_200_000, 5);
    node.write("r.bin", &body);
    node.write("large.bin", &large);
    for (path, data) in [("/r.bin", &body), ("/large.bin", &large)] {
        let len = data.len();
        let mut c = node.client();
        for (range, start, end) in
            [("0-99", 0, 99), ("9000-", 9000, len - 1), ("-500", len - 500, len - 1), ("1-70000", 1, 70_000)]
        {
            c.send(format!("GET {path} HTTP/1.1\r\nHost: x\r\nRange: bytes={range}\r\n\r\n"));
            let r = c.response(false);
            assert_eq!(r.status, 206, "{path} {range}");
            assert_eq!(r.header("Content-Range"), Some(format!("bytes {start}-{end}/{len}").as_str()));
            assert!(r.body == data[start..=end]);
        }
        c.send(format!("GET {path} HTTP/1.1\r\nHost: x\r\nRange: bytes={len}-\r\n\r\n"));
        let r = c.response(false);
        assert_eq!(r.status, 416);
        assert_eq!(r.header("Content-Range"), Some(format!("bytes */{len}").as_str()));
        c.send(format!("GET {path} HTTP/1.1\r\nHost: x\r\nRange: bytes=0-1,5-9\r\n\r\n"));
        let r = c.response(false);
        assert_eq!(r.status, 200);
        assert_eq!(r.body.len(), len);
    }
}

#[test]
fn missing_files_are_404_other_methods_405_and_directories_redirect() {
    let node = TestNode::start(|_, _| {});
    node.write("dir/index.html", b"<p>index</p>");
    std::fs::create_dir(node.root.path().join("noindex")).unwrap();
    assert_eq!(node.get("/nothing.html").status, 404);
    assert_eq!(node.get("/dir/nothing/deeper").status, 404);
    let r = node.get("/dir?x=1");
    assert_eq!((r.status, r.header("Location")), (301, Some("/dir/?x=1")));
    let r = node.get("/dir/");
    assert_eq!(
        (r.status, r.text().as_str(), r.header("Content-Type")),
        (200, "<p>index</p>", Some("text/html"))
    );
    assert_eq!(node.get("/noindex/").status, 403);
    let mut c = node.client();
    c.send("OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n");
    let r = c.response(false);
    assert_eq!((r.status, r.header("Allow")), (405, Some("GET, HEAD")));
}

#[test]
fn traversal_attempts_are_refused() {
    let node = TestNode::start(|_, _| {});
    node.write("a/b.txt", b"b");
    node.write("ok.txt", b"ok");
    for target in [
        "/../etc/passwd",
        "/%2e%2e/etc/passwd",
        "/%2e%2e/",
        "/a/%2F..",
        "/a/..%2F..%2Fetc/passwd",
        "/a%00.txt",
        "/a/../../etc/passwd",
    ] {
        let r = node.get(target);
        assert!(r.status == 400 || r.status == 403, "{target}: {}", r.status);
        assert!(!r.text().contains("root:"), "{target}");
    }
    assert_eq!(node.get("/a/./b.txt").text(), "b");
}

#[test]
fn symlinks_out_of_the_root_are_refused() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "secret").unwrap();
    let node = TestNode::start(|_, _| {});
    node.write("inside.txt", b"inside");
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), node.root.path().join("leak.txt")).unwrap();
    std::os::unix::fs::symlink(outside.path(), node.root.path().join("leakdir")).unwrap();
    std::os::unix::fs::symlink(node.root.path().join("inside.txt"), node.root.path().join("alias.txt"))
        .unwrap();
    for target in ["/leak.txt", "/leakdir/secret.txt", "/leakdir/"] {
        let r = node.get(target);
        assert_eq!(r.status, 403, "{target}");
        assert!(!r.text().contains("secret"));
    }
    assert_eq!(node.get("/alias.txt").text(), "inside");
}

#[test]
fn absolute_form_is_accepted_only_for_this_host() {
    let node = TestNode::start(|c, _| c.server_names = vec!["www.example.com".into()]);
    node.write("a.txt", b"a");
    let mut c = node.client();
    c.send("GET http://evil.example/a.txt HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert_eq!(c.response(false).status, 400);
    let mut c = node.client();
    c.send("GET http://localhost:8080/a.txt HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert_eq!(c.response(false).text(), "a");
    c.send("GET http://WWW.example.com/a.txt HTTP/1.1\r\nHost: other\r\n\r\n");
    assert_eq!(c.response(false).text(), "a");
}

#[test]
fn eviction_keeps_the_cache_within_its_capacity() {
    let node = TestNode::start(|c, _| {
        c.cache.capacity = locus_node::ByteSize(100_000);
        c.cache.max_object = locus_node::ByteSize(50_000);
        c.cache.replacement = locus_node::Replacement::Lru;
    });
    for i in 0..10 {
        node.write(&format!("f{i}.bin"), &pattern(30_000, i as u8));
    }
    for i in 0..10 {
        let r = node.get(&format!("/f{i}.bin"));
        assert!(r.body == pattern(30_000, i as u8));
        let status = node.server().status();
        assert!(status["cache_used_bytes"].as_u64().unwrap() <= 100_000, "{status}");
    }
    let status = node.server().status();
    assert_eq!(status["cache_objects"].as_u64(), Some(3));
    assert!(status["cache_evictions"].as_u64().unwrap() >= 7);
    // The most recent files are hits, the first ones were evicted.
    assert_eq!(node.get("/f9.bin").header("X-Locus-Cache"), Some("hit"));
    assert_eq!(node.get("/f0.bin").header("X-Locus-Cache"), Some("miss"));
}

#[test]
fn an_edited_file_is_served_fresh_after_the_revalidation_interval() {
    let node = TestNode::start(|c, _| c.cache.revalidate_ms = 50);
    node.write("e.txt", b"version one");
    assert_eq!(node.get("/e.txt").text(), "version one");
    assert_eq!(node.get("/e.txt").header("X-Locus-Cache"), Some("hit"));
    node.write("e.txt", b"version two, longer");
    // Until the interval is over the cached copy may still be served; the first fresh answer
    // is a miss.
    let mut fresh = None;
    wait_until("the edited file is served", || {
        let r = node.get("/e.txt");
        let edited = r.text() == "version two, longer";
        fresh = edited.then_some(r);
        edited
    });
    assert_eq!(fresh.expect("an answer").header("X-Locus-Cache"), Some("miss"));
    std::fs::remove_file(node.root.path().join("e.txt")).unwrap();
    wait_until("the removed file is gone", || node.get("/e.txt").status == 404);
}

#[test]
fn concurrent_misses_for_one_document_are_one_read() {
    let node = TestNode::start(|c, _| {
        c.storage = Some(locus_node::StorageConfig { seek_ms: 100.0, transfer_mb_s: 1000.0, disks: 1 });
    });
    node.write("shared.txt", b"shared");
    let addr = node.addr();
    let started = std::time::Instant::now();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                let mut c = Client::connect(addr);
                c.send("GET /shared.txt HTTP/1.1\r\nHost: x\r\n\r\n");
                c.response(false)
            })
        })
        .collect();
    // Four separate reads would queue on the one disk; one read never has company.
    let mut most_queued = 0;
    while !threads.iter().all(|t| t.is_finished()) {
        let queued = node.server().status()["disk_queue_lengths"][0].as_u64().unwrap_or(0);
        most_queued = most_queued.max(queued);
        std::thread::sleep(Duration::from_millis(2));
    }
    for t in threads {
        let r = t.join().unwrap();
        assert_eq!((r.text().as_str(), r.header("X-Locus-Cache")), ("shared", Some("miss")));
    }
    assert_eq!(most_queued, 1, "reads queued at once on the disk");
    // The one read took its modelled time.
    assert!(started.elapsed() >= Duration::from_millis(100), "{:?}", started.elapsed());
}
