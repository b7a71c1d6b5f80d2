//! DC mode in a real browser, as root in network namespaces (`#[ignore]`d; `./quickstart test`
//! runs it as root): a 3-node DC cluster (node1 the home, the others co-ops) serves a MAPUG-like
//! site while surfers load it and the home replicates; headless Chromium then loads the entry
//! page, pages it links to and a page served from a replica — every request the browser made
//! got its document (no 404, no broken relative link), checked from the browser's own network
//! log. `LOCUS_DC_SCREENSHOT=FILE` keeps the screenshot of the replica page.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, UNIX_EPOCH};

use locus_lab::browser::{PageLoad, chromium, load_page};
use locus_lab::{ClusterSpec, LabCluster, LabSite, NodeSettings, SwitchKind, WorkloadSpec, measure};
use locus_load::{LoadConfig, Verification, Workload};
use locus_rig::{LabNetwork, Net, get_header};
use locus_test_support::{locus_binary, require_namespaces, watchdog};

const NODES: usize = 3;

fn mapug_site(dir: &Path) -> LabSite {
    let w = WorkloadSpec {
        preset: Some("mapug".into()),
        scale: Some(0.05),
        seed: 3,
        ..WorkloadSpec::new("mapug", 0)
    };
    LabSite::generate(&w, dir).unwrap()
}

fn dc_cluster<'n>(net: &'n Net, site: &LabSite, scratch: &Path) -> LabCluster<'n> {
    let spec = ClusterSpec {
        // Each node a modelled CPU of its own, so the home is the loaded one and replicates.
        node: NodeSettings {
            cpu: Some("conn_us=1000,request_us=450,kb_us=4".into()),
            ..NodeSettings::default()
        },
        dc_balance_ms: Some(500),
        ..ClusterSpec::new(NODES, site.root.clone(), SwitchKind::Dc, "resource-aware", "proxy")
    };
    LabCluster::start(net, &locus_binary(), scratch, &spec).unwrap()
}

/// Surfers from node1's entry page until `stop`, every response verified.
fn surf_config(cluster: &LabCluster<'_>, site: &LabSite, seconds: u64) -> LoadConfig {
    let hosts = cluster.node_addrs().iter().map(|a| format!("http://{a}/").parse().unwrap()).collect();
    LoadConfig {
        workload: Workload::Surf {
            entry: format!("http://{}{}", cluster.switch_addr(), site.entry).parse().unwrap(),
            hosts,
            session_requests: 20,
        },
        clients: 16,
        threads: 1,
        keepalive: false,
        duration: Some(Duration::from_secs(seconds)),
        verification: Verification::Manifest(site.manifest()),
        mismatch_samples: 5,
        ..LoadConfig::default()
    }
}

/// The `/~migrate/…` page URLs among the links of `html`.
fn replica_page_links(html: &str) -> Vec<String> {
    html.split("href=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .filter(|u| u.contains("/~migrate/") && u.ends_with(".html"))
        .map(str::to_string)
        .collect()
}

/// The home's own page URLs among the links of `html` (relative ones made absolute).
fn page_links(html: &str, home: std::net::SocketAddr) -> Vec<String> {
    html.split("href=\"")
        .skip(1)
        .filter_map(|r| r.split('"').next())
        .filter(|u| u.ends_with(".html") && !u.contains("/~migrate/"))
        .map(|u| if u.starts_with("http://") { u.to_string() } else { format!("http://{home}/{u}") })
        .collect()
}

/// `GET url` from the client host: the body.
fn fetch_body(net: &Net, url: &str) -> String {
    let url = url.to_string();
    net.on_host("client", move || {
        let rest = url.strip_prefix("http://").unwrap();
        let (authority, path) = rest.split_at(rest.find('/').unwrap());
        let mut client = locus_test_support::Client::connect(authority.parse().unwrap());
        Ok::<_, locus_lab::LabError>(client.get(path).text())
    })
    .unwrap()
}

fn assert_loaded(load: &PageLoad, cluster: &LabCluster<'_>) {
    assert!(!load.requests.is_empty(), "{}: the browser made no request", load.url);
    let hosts: Vec<String> = cluster.node_addrs().iter().map(ToString::to_string).collect();
    let failed = load.failures(&hosts);
    assert!(failed.is_empty(), "{}: the browser did not get {failed:?}", load.url);
    let ours = load.requests_to(&hosts);
    assert!(
        ours.iter().any(|r| r.url == load.url || r.url == load.url.replace(":80/", "/")),
        "{}: the page itself is not among {ours:?}",
        load.url
    );
    let embeds = ours.iter().filter(|r| r.url.ends_with(".gif") || r.url.ends_with(".css")).count();
    assert!(embeds > 0, "{}: no image or style sheet loaded: {:?}", load.url, load.requests);
}

#[test]
#[ignore = "needs root: network namespaces (./quickstart test runs it as root)"]
fn a_browser_loads_every_page_and_object_of_a_dc_cluster_while_it_replicates() {
    require_namespaces("the lab's hosts are network namespaces");
    chromium().expect("Chromium is needed for this test (./quickstart installs the `chromium` package)");
    watchdog("dc browser lab", Duration::from_secs(240), locus_rig::tear_down_everything);
    let dir = tempfile::tempdir().unwrap();
    let site = mapug_site(dir.path());
    let net = Net::Namespaces(LabNetwork::create(NODES).unwrap());
    let cluster = dc_cluster(&net, &site, &dir.path().join("logs"));
    let home = cluster.node_addrs()[0];
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let load = s.spawn(|| {
            let out = measure(&cluster, &surf_config(&cluster, &site, 40));
            done.store(true, Ordering::Relaxed);
            out
        });
        // Replication under way: a rewritten link names a co-op.
        let entry = format!("http://{home}{}", site.entry);
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut entry_html = fetch_body(&net, &entry);
        while !entry_html.contains("/~migrate/") && Instant::now() < deadline && !done.load(Ordering::Relaxed)
        {
            std::thread::sleep(Duration::from_millis(500));
            entry_html = fetch_body(&net, &entry);
        }
        assert!(
            entry_html.contains("/~migrate/"),
            "no link of the entry page was rewritten to a replica in 30 s"
        );
        let work = dir.path().join("browser");
        let first = load_page(&net, "client", &entry, &work, None).unwrap();
        assert_loaded(&first, &cluster);
        // Pages linked from the entry page, as the home wrote them, then a page from a replica.
        let mut replica_pages = replica_page_links(&entry_html);
        let linked: Vec<String> = page_links(&entry_html, home).into_iter().take(2).collect();
        for url in &linked {
            assert_loaded(&load_page(&net, "client", url, &work, None).unwrap(), &cluster);
        }
        // A page linked through a replica: walk the site as the nodes write it (at most 40 pages).
        let mut queue: Vec<String> = linked.clone();
        let mut seen = 0;
        while replica_pages.is_empty() && seen < queue.len().min(40) {
            let html = fetch_body(&net, &queue[seen]);
            seen += 1;
            replica_pages.extend(replica_page_links(&html));
            for url in page_links(&html, home) {
                if !queue.contains(&url) {
                    queue.push(url);
                }
            }
        }
        let from_links = !replica_pages.is_empty();
        let replica_page = replica_pages.first().cloned().unwrap_or_else(|| {
            // No page replicated yet: any co-op serves any page of the home lazily.
            let page = linked
                .first()
                .map_or(site.entry.clone(), |u| u.trim_start_matches(&format!("http://{home}")).to_string());
            let mtime =
                std::fs::metadata(site.root.join(page.trim_start_matches('/'))).unwrap().modified().unwrap();
            let version = mtime.duration_since(UNIX_EPOCH).unwrap().as_secs();
            format!("http://{}/~migrate/{version}/node1{page}", cluster.node_addrs()[1])
        });
        let shot =
            std::env::var_os("LOCUS_DC_SCREENSHOT").map_or_else(|| work.join("replica.png"), Into::into);
        let replica = load_page(&net, "client", &replica_page, &work, Some(&shot)).unwrap();
        assert_loaded(&replica, &cluster);
        assert!(replica.screenshot.is_some(), "no screenshot of {replica_page}");
        let (status, served) = net
            .on_host("client", || {
                let rest = replica_page.strip_prefix("http://").unwrap();
                let (authority, path) = rest.split_at(rest.find('/').unwrap());
                get_header(authority.parse().unwrap(), path, "x-locus-dc")
            })
            .unwrap();
        assert_eq!((status, served.as_str()), (200, "replica"), "{replica_page} was not served as a replica");
        let (report, _, _) = load.join().unwrap().unwrap();
        assert_eq!((report.errors, report.mismatches), (0, 0), "surfers: {:?}", report.mismatch_samples);
        let surf = report.surf.expect("a surf report");
        assert!(surf.counts.replica_responses > 0, "surfers never got a replica: {surf:?}");
        eprintln!(
            "browser: entry page ({} requests), {} linked pages, {replica_page} ({} requests, {}); surfers: {} \
             requests, {} from replicas",
            first.requests.len(),
            linked.len(),
            replica.requests.len(),
            if from_links {
                "a link a node wrote"
            } else {
                "no page replicated yet: the URL made by the test"
            },
            report.requests,
            surf.counts.replica_responses
        );
    });
}
