//! DC mode between in-process nodes on 127.0.0.1 (members named by their real authorities):
//! a loaded home's pages rewritten to co-ops, replicas with the original bytes and a BASE,
//! bad replica requests and broken homes answered without a crash, the quota, deletion
//! notices, co-op validation, home invalidation and update, control requests refused to
//! strangers, and `https://` links, redirects and BASE from members serving TLS.

mod dc_support;

use std::net::SocketAddr;

use dc_support::*;
use locus_dc::balancer::QuotaMethod;
use locus_test_support::{Client, client_config, get, write_pair};
use locus_tls::TlsSettings;

const INDEX: &str = "<!DOCTYPE html><html><head><title>t</title></head><body>\
    <img src=\"a.gif\"><img src=\"/img/b.gif\"><a href=\"page2.html\">next</a>\
    <a href=\"http://example.com/x.gif\">out</a></body></html>";
const PAGE2: &str = "<html><head><title>2</title></head><body><img src=\"a.gif\">\
    <a href=\"index.html\">home</a><a href=\"img/b.gif?x=1#f\">b</a></body></html>";

fn site() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("/index.html", INDEX.as_bytes().to_vec()),
        ("/page2.html", PAGE2.as_bytes().to_vec()),
        ("/a.gif", pattern(3000, 1)),
        ("/img/b.gif", pattern(5000, 2)),
        ("/broken.html", b"<html><body><img src=\"a.gif\">\xff\xfe</body></html>".to_vec()),
    ]
}

fn replica_target(home: &str, path: &str) -> String {
    format!("/~migrate/{VERSION}/{home}{path}")
}

/// Every link of `html` fetched (resolved against `base` when relative) answers 200.
fn assert_links_resolve(html: &str, base: &str) {
    for link in links(html) {
        if link.starts_with("http://example.com") {
            continue;
        }
        // A client never sends the fragment; a relative link resolves without its query too.
        let absolute = if link.starts_with("http://") {
            link.split('#').next().unwrap().to_string()
        } else {
            let dir = &base[..base.rfind('/').unwrap() + 1];
            format!("{dir}{}", link.split(['?', '#']).next().unwrap())
        };
        let (addr, target) = split_url(&absolute);
        let r = get(addr, &target);
        assert_eq!(r.status, 200, "link {link} ({absolute}) of a page based at {base}");
    }
}

#[test]
fn a_loaded_home_rewrites_its_embeds_and_replicas_carry_the_original_bytes() {
    let c = cluster(3, &site(), |_, _| {});
    let home = c.addr(0);
    // Load the home: many connections for its page and images; the co-ops get none.
    let mut rewritten = None;
    wait_until("the home's page links a replica", || {
        for target in ["/index.html", "/a.gif", "/img/b.gif"] {
            assert_eq!(get(home, target).status, 200);
        }
        let r = get(home, "/index.html");
        assert_eq!(r.header("x-locus-dc"), Some("home"));
        let text = r.text();
        if text.contains("/~migrate/") {
            assert_eq!(r.header("cache-control"), Some("no-store"));
            assert_eq!(r.header("content-length").unwrap().parse::<usize>().unwrap(), r.body.len());
            rewritten = Some(text);
        }
        rewritten.is_some()
    });
    let page = rewritten.unwrap();
    assert!(page.contains("href=\"http://example.com/x.gif\""), "external links stay: {page}");
    assert!(dc_figure(&c.nodes[0], "replicated_docs") >= 1.0);
    assert!(dc_figure(&c.nodes[0], "rewritten_pages") >= 1.0);
    // Each replica URL on the page, at its co-op: the original bytes, fetched then held.
    for link in links(&page).into_iter().filter(|l| l.contains("/~migrate/")) {
        let (addr, target) = split_url(&link);
        assert_ne!(addr, home, "a replica URL names a co-op");
        let path = target.split_once("/s0").unwrap().1;
        let original = &site().into_iter().find(|(p, _)| *p == path).unwrap().1;
        let r = get(addr, &target);
        assert_eq!(r.status, 200, "{link}");
        assert!(matches!(r.header("x-locus-dc"), Some("fetched" | "replica")), "{link}");
        assert_eq!(&r.body, original, "{link}");
        assert_eq!(r.header("content-length").unwrap().parse::<usize>().unwrap(), original.len());
        let again = get(addr, &target);
        assert_eq!((again.header("x-locus-dc"), &again.body), (Some("replica"), original));
    }
    // A page copy at a co-op: BASE to the home, and every link leads to a document.
    let r = get(c.addr(1), &replica_target("s0", "/page2.html"));
    assert_eq!((r.status, r.header("x-locus-dc")), (200, Some("fetched")));
    assert_eq!(r.header("content-length").unwrap().parse::<usize>().unwrap(), r.body.len());
    let text = r.text();
    let base = format!("http://{home}/page2.html");
    assert!(text.contains(&format!("<base href=\"{base}\">")), "{text}");
    assert_links_resolve(&text, &base);
    // Peer traffic is not counted as client requests on the co-ops (only the test's GETs).
    assert!(dc_figure(&c.nodes[1], "fetches_ok") >= 1.0);
    assert!(dc_figure(&c.nodes[0], "fetches_served") >= 1.0);
}

#[test]
fn bad_replica_requests_are_answered_and_unparseable_pages_are_served_unmodified() {
    let c = cluster(2, &site(), |_, _| {});
    let coop = c.addr(1);
    for (target, status) in [
        (replica_target("s9", "/a.gif"), 404),
        (format!("/~migrate/{VERSION}/s0/../../etc/passwd"), 400),
        (format!("/~migrate/{VERSION}/s0/%2e%2e/x"), 400),
        (format!("/~migrate/{VERSION}/s0/a%2fb"), 400),
        ("/~migrate/abc/s0/a.gif".to_string(), 400),
        ("/~migrate/1/s0".to_string(), 400),
        (replica_target("s0", "/missing.gif"), 404),
        (replica_target("s1", "/a.gif"), 301),
    ] {
        let r = get(coop, &target);
        assert_eq!(r.status, status, "{target}");
        assert!(r.header("x-locus-dc").is_some(), "{target}");
    }
    assert_eq!(dc_figure(&c.nodes[1], "store_copies"), 0.0);
    // Unknown homes and unsafe paths never reach a home.
    assert_eq!(dc_figure(&c.nodes[0], "fetches_served"), 0.0);
    let original = &site()[4].1;
    assert_eq!(dc_figure(&c.nodes[0], "unmodifiable_pages"), 1.0);
    assert_eq!(&get(c.addr(0), "/broken.html").body, original);
    let r = get(coop, &replica_target("s0", "/broken.html"));
    assert_eq!((r.status, &r.body), (200, original));
    assert_eq!(dc_figure(&c.nodes[1], "unmodifiable_copies"), 1.0);
}

fn broken_answers(path: &str) -> Vec<u8> {
    let head = |len: usize| format!("HTTP/1.1 200 OK\r\nContent-Length: {len}\r\nX-DC-Version: 5\r\n\r\n");
    match path {
        "/truncated.gif" => [head(100).as_bytes(), &[7u8; 50]].concat(),
        "/oversized.gif" => [head(10).as_bytes(), &[7u8; 30]].concat(),
        "/garbage.gif" => b"hello, this is no HTTP\r\n\r\n".to_vec(),
        "/ok.gif" => [head(4).as_bytes(), b"good"].concat(),
        _ => b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_vec(),
    }
}

#[test]
fn a_home_sending_a_truncated_or_oversized_copy_gets_it_refused() {
    let fake = fake_home(broken_answers);
    let root = tempfile::tempdir().unwrap();
    let port = free_port();
    let members = vec![format!("s0=127.0.0.1:{port}"), format!("f=127.0.0.1:{fake}")];
    let node = start_dc("s0", port, root.path(), members, |_| {});
    for (path, status) in
        [("/truncated.gif", 502), ("/oversized.gif", 502), ("/garbage.gif", 502), ("/nope.gif", 404)]
    {
        let r = get(node.addr(), &replica_target("f", path));
        assert_eq!(r.status, status, "{path}");
    }
    assert_eq!(dc_figure(&node, "store_copies"), 0.0);
    assert_eq!(dc_figure(&node, "fetch_failures.truncated"), 1.0);
    assert_eq!(dc_figure(&node, "fetch_failures.oversized"), 1.0);
    assert_eq!(dc_figure(&node, "fetch_failures.bad_reply"), 1.0);
    let r = get(node.addr(), &replica_target("f", "/ok.gif"));
    assert_eq!((r.status, r.body.as_slice(), r.header("x-locus-dc")), (200, &b"good"[..], Some("fetched")));
    assert_eq!((dc_figure(&node, "store_copies"), dc_figure(&node, "store_bytes")), (1.0, 4.0));
}

#[test]
fn control_requests_from_strangers_are_refused_and_not_counted_as_requests() {
    let c = cluster(2, &site(), |_, _| {});
    let r = get(c.addr(0), "/~dc/ping");
    assert_eq!(r.status, 200);
    assert!(r.header("x-dc-load").unwrap().starts_with("s0="), "{:?}", r.headers);
    assert!(r.header("x-dc-map-seq").is_some());
    assert_eq!(get(c.addr(0), "/~dc/nothing").status, 404);
    assert_eq!(get(c.addr(0), "/~dc/fetch/../x").status, 400);
    assert_eq!(get(c.addr(0), "/~dc/fetch/a.gif").body, pattern(3000, 1));
    // From 127.0.0.2, an address no member has.
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.bind(&SocketAddr::from(([127, 0, 0, 2], 0)).into()).unwrap();
    socket.connect(&c.addr(0).into()).unwrap();
    let r = Client::from_stream(socket.into()).get("/~dc/fetch/a.gif");
    assert_eq!(r.status, 403);
    assert_eq!(c.nodes[0].stats().requests, 0);
    assert!(dc_figure(&c.nodes[0], "control_refused") >= 2.0);
}

#[test]
fn a_coop_never_holds_more_replica_bytes_than_its_quota() {
    let docs: Vec<(String, Vec<u8>)> =
        (0..8).map(|i| (format!("/i{i}.gif"), pattern(3000, i as u8))).collect();
    let refs: Vec<(&str, Vec<u8>)> = docs.iter().map(|(p, d)| (p.as_str(), d.clone())).collect();
    let c = cluster(2, &refs, |i, dc| {
        dc.quota = locus_node::ByteSize(10_000);
        dc.replicate = i != 0;
    });
    for (path, data) in &docs {
        let r = get(c.addr(1), &replica_target("s0", path));
        assert_eq!((r.status, &r.body), (200, data), "{path}");
        assert!(dc_figure(&c.nodes[1], "store_bytes") <= 10_000.0);
    }
    assert_eq!(dc_figure(&c.nodes[1], "store_quota"), 10_000.0);
    assert_eq!(dc_figure(&c.nodes[1], "store_copies"), 3.0);
}

#[test]
fn a_resource_aware_home_books_a_coops_reported_free_room_as_its_quota() {
    let c = cluster(2, &site(), |i, dc| {
        dc.method = QuotaMethod::ResourceAware;
        if i == 1 {
            dc.quota = locus_node::ByteSize(5000);
        }
    });
    let books = |c: &Cluster| c.nodes[0].status()["dc"]["books"][0].clone();
    assert_eq!(books(&c)["server"], "s1");
    // The home's own quota (64 MiB) until s1's free room arrives on a ping or a fetch.
    wait_until("the home books s1's reported room", || books(&c)["quota_bytes"] == 5000);
    assert_eq!(books(&c)["booked_bytes"], 0);
    assert!(c.nodes[0].status()["dc"]["books"].as_array().unwrap().len() == 1);
}

#[test]
fn deletion_notices_reach_the_home_which_stops_linking_there() {
    let page: String = (0..3).map(|i| format!("<img src=\"i{i}.gif\">")).collect();
    let mut docs = vec![("/p.html", format!("<html><head></head><body>{page}</body></html>").into_bytes())];
    for (i, p) in ["/i0.gif", "/i1.gif", "/i2.gif"].into_iter().enumerate() {
        docs.push((p, pattern(3000, i as u8)));
    }
    let c = cluster(2, &docs, |_, dc| {
        dc.method = QuotaMethod::DeletionAware;
        dc.quota = locus_node::ByteSize(5000);
        dc.replicate = false;
    });
    for p in ["/i0.gif", "/i1.gif", "/i2.gif"] {
        assert!(c.nodes[0].dc_place(p, "s1"));
    }
    let i0_at_s1 = format!("{}/~migrate/{VERSION}/s0/i0.gif", c.addr(1));
    // Until then the co-op may look overloaded for a second or two (tests share the CPUs), and
    // an overloaded server is not linked.
    wait_until("the home links i0 to the co-op while placed there", || {
        get(c.addr(0), "/p.html").text().contains(&i0_at_s1)
    });
    // The co-op's quota holds one copy: fetching i1 evicts i0.
    for p in ["/i0.gif", "/i1.gif"] {
        assert_eq!(get(c.addr(1), &replica_target("s0", p)).status, 200);
    }
    wait_until("the notice was sent and received", || {
        dc_figure(&c.nodes[1], "notices_sent") >= 1.0 && dc_figure(&c.nodes[0], "notices_received") >= 1.0
    });
    for _ in 0..40 {
        let text = get(c.addr(0), "/p.html").text();
        assert!(!text.contains(&i0_at_s1), "{text}");
    }
}

#[test]
fn coop_validation_refetches_a_changed_original_after_the_interval() {
    let c = cluster(2, &site(), |_, dc| {
        dc.validate_s = 1;
        dc.replicate = false;
    });
    assert!(c.nodes[0].dc_place("/a.gif", "s1"));
    let target = replica_target("s0", "/a.gif");
    assert_eq!(get(c.addr(1), &target).header("x-locus-dc"), Some("fetched"));
    assert_eq!(get(c.addr(1), &target).header("x-locus-dc"), Some("replica"));
    // Once the interval is over, the next request validates the copy (304: still current).
    wait_until("the co-op validated its copy with the home", || {
        let r = get(c.addr(1), &target);
        assert_eq!((r.header("x-locus-dc"), r.body == pattern(3000, 1)), (Some("replica"), true));
        dc_figure(&c.nodes[1], "validations_304") >= 1.0
    });
    assert_eq!(dc_figure(&c.nodes[1], "validations_304"), 1.0);
    // The original changes; the home notices at its next round.
    write_doc(c.roots[0].path(), "/a.gif", &pattern(2000, 9), VERSION + 100);
    wait_until("the home saw the change", || dc_figure(&c.nodes[0], "documents_changed") >= 1.0);
    // The copy is served as it is until the next validation, which fetches the new original.
    let mut last = None;
    wait_until("the co-op refetched the changed original", || {
        let r = get(c.addr(1), &target);
        let fetched = r.header("x-locus-dc") == Some("fetched");
        last = Some(r);
        fetched
    });
    let r = last.expect("one request at least");
    assert_eq!((r.header("x-locus-dc"), r.body == pattern(2000, 9)), (Some("fetched"), true));
    assert_eq!(dc_figure(&c.nodes[1], "validations_200"), 1.0);
}

#[test]
fn home_invalidation_drops_or_refreshes_the_coops_copy() {
    use locus_dc::consistency::ConsistencyMethod;
    for method in [ConsistencyMethod::ExplicitNotification, ConsistencyMethod::ActiveUpdate] {
        let c = cluster(2, &site(), |_, dc| {
            dc.consistency = method;
            dc.replicate = false;
        });
        assert!(c.nodes[0].dc_place("/a.gif", "s1"));
        assert_eq!(get(c.addr(1), &replica_target("s0", "/a.gif")).status, 200);
        assert_eq!(dc_figure(&c.nodes[1], "store_copies"), 1.0);
        write_doc(c.roots[0].path(), "/a.gif", &pattern(2000, 9), VERSION + 100);
        wait_until("the co-op heard of the change", || {
            dc_figure(&c.nodes[1], "invalidations_received") >= 1.0
        });
        if method == ConsistencyMethod::ActiveUpdate {
            wait_until("the co-op fetched the new copy", || dc_figure(&c.nodes[1], "store_bytes") == 2000.0);
            let r = get(c.addr(1), &replica_target("s0", "/a.gif"));
            assert_eq!(
                (r.header("x-locus-dc"), r.body == pattern(2000, 9)),
                (Some("replica"), true),
                "{method}"
            );
        } else {
            assert_eq!(dc_figure(&c.nodes[1], "store_copies"), 0.0);
            let r = get(c.addr(1), &replica_target("s0", "/a.gif"));
            assert_eq!(
                (r.header("x-locus-dc"), r.body == pattern(2000, 9)),
                (Some("fetched"), true),
                "{method}"
            );
        }
        wait_until("the home counted it sent", || dc_figure(&c.nodes[0], "invalidations_sent") >= 1.0);
    }
}

#[test]
fn members_serving_https_write_https_replica_links_redirects_and_base() {
    let keys = tempfile::tempdir().unwrap();
    let (crt, key, pem) = write_pair(keys.path(), "node", &["localhost"], (2020, 2090));
    let tls = TlsSettings::single(crt, key);
    let c =
        cluster_of_nodes(2, &site(), |_, dc| dc.replicate = false, |_, node| node.tls = Some(tls.clone()));
    // A client speaks TLS; the members fetch from each other in cleartext.
    let get_tls =
        |i: usize, target: &str| Client::connect_tls(c.addr(i), client_config(&pem), "localhost").get(target);
    let (home, coop) = (c.addr(0), c.addr(1));
    assert!(c.nodes[0].dc_place("/a.gif", "s1"));
    let replica = format!("\"https://{coop}/~migrate/{VERSION}/s0/a.gif\"");
    wait_until("the home links a.gif to the co-op over https", || {
        get_tls(0, "/index.html").text().contains(&replica)
    });
    let page = get_tls(0, "/index.html").text();
    assert!(!page.contains("\"http://127.0.0.1"), "{page}");
    let r = get_tls(1, &replica_target("s0", "/a.gif"));
    assert_eq!((r.status, r.body), (200, pattern(3000, 1)));
    let copy = get_tls(1, &replica_target("s0", "/page2.html")).text();
    assert!(copy.contains(&format!("<base href=\"https://{home}/page2.html\">")), "{copy}");
    let r = get_tls(1, &replica_target("s1", "/a.gif"));
    assert_eq!((r.status, r.header("location")), (301, Some(format!("https://{coop}/a.gif").as_str())));
}
