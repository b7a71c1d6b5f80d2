//! The live surfer against two in-process servers playing a DC cluster: the home serves a
//! generated site with its pages' links rewritten to its own original URLs, to replica URLs
//! on a co-op, and to a co-op that is not in the allow-list; the co-op serves the replicas
//! (pages with a `<base href>` inserted). The surfer must follow them, verify every answer
//! and count both servers — and report a co-op that corrupts a page.

mod common;

use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use common::{Reply, Responder, ScriptedServer, SeenRequest};
use locus_dc::replica_url::{ReplicaTarget, original_url, replica_url};
use locus_dc::rewrite::{RewritePlan, SlotChoice};
use locus_load::{LoadConfig, MismatchKind, TargetUrl, Verification, Workload, run_load};

const HOME_NAME: &str = "s1";
/// A co-op no client may contact.
const FORBIDDEN: &str = "127.0.0.1:1";

fn site(dir: &Path) -> locus_trace::SiteManifest {
    let spec = locus_trace::SiteSpec { files: 80, ..locus_trace::SiteSpec::default() };
    locus_trace::SiteGenerator::new(spec).unwrap().write(dir, false, &mut |_, _| {}).unwrap()
}

fn read(root: &Path, path: &str) -> Option<Vec<u8>> {
    std::fs::read(root.join(path.trim_start_matches('/'))).ok()
}

/// The home: pages rewritten slot by slot (embeds to the co-op, links in turn to the home,
/// the co-op and the forbidden co-op), everything else verbatim.
fn home(root: &Path, own: Arc<OnceLock<String>>, coop: Arc<OnceLock<String>>) -> Responder {
    let root = root.to_path_buf();
    Arc::new(move |req: &SeenRequest| {
        let path = req.target.split('?').next().unwrap_or("/").to_string();
        let Some(bytes) = read(&root, &path) else { return Reply::status(404) };
        let (own, coop) = (own.get().unwrap(), coop.get().unwrap());
        if !path.ends_with(".html") {
            return Reply::ok(bytes);
        }
        let Ok(plan) = RewritePlan::for_copy(&bytes, &path, own) else { return Reply::ok(bytes) };
        let choices: Vec<SlotChoice> = plan
            .slots()
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let url = match (s.kind, i % 4) {
                    (locus_dc::html_links::SlotKind::Embed, _) | (_, 1) => {
                        replica_url(coop, 1, HOME_NAME, &s.target_path)
                    }
                    (_, 2) => original_url(own, &s.target_path),
                    (_, 3) => replica_url(FORBIDDEN, 1, HOME_NAME, &s.target_path),
                    _ => return SlotChoice::Verbatim,
                };
                SlotChoice::Url(format!("{url}{}", s.suffix))
            })
            .collect();
        Reply::ok(plan.render_to_vec(&bytes, &choices, None).unwrap())
    })
}

/// The co-op: `/~migrate/` targets only; a page gets a BASE naming its home, and with
/// `corrupt` one byte of it changed.
fn coop(root: &Path, home: Arc<OnceLock<String>>, corrupt: bool) -> Responder {
    let root = root.to_path_buf();
    Arc::new(move |req: &SeenRequest| {
        let Ok(Some(replica)) = ReplicaTarget::parse(&req.target) else { return Reply::status(404) };
        let Some(bytes) = read(&root, &replica.path) else { return Reply::status(404) };
        let home = home.get().unwrap();
        if !replica.path.ends_with(".html") {
            return Reply::ok(bytes);
        }
        let Ok(plan) = RewritePlan::for_copy(&bytes, &replica.path, home) else { return Reply::ok(bytes) };
        let verbatim = vec![SlotChoice::Verbatim; plan.slots().len()];
        let mut page = plan.render_to_vec(&bytes, &verbatim, plan.base_for_copy(home).as_deref()).unwrap();
        if corrupt && let Some(last) = page.iter().rposition(|&b| b == b'>') {
            page[last] = b']';
        }
        Reply::ok(page)
    })
}

struct Cluster {
    home: ScriptedServer,
    coop: ScriptedServer,
}

fn cluster(root: &Path, corrupt: bool) -> Cluster {
    let (home_at, coop_at) = (Arc::new(OnceLock::new()), Arc::new(OnceLock::new()));
    let home_server = ScriptedServer::start(home(root, home_at.clone(), coop_at.clone()), 1);
    let coop_server = ScriptedServer::start(coop(root, home_at.clone(), corrupt), 1);
    home_at.set(home_server.addr.to_string()).unwrap();
    coop_at.set(coop_server.addr.to_string()).unwrap();
    Cluster { home: home_server, coop: coop_server }
}

fn surf_config(c: &Cluster, root: &Path, entry: &str, requests: u64) -> LoadConfig {
    let entry: TargetUrl = format!("{}{entry}", c.home.url()).parse().unwrap();
    LoadConfig {
        workload: Workload::Surf { entry, hosts: vec![c.coop.url().parse().unwrap()], session_requests: 12 },
        clients: 4,
        threads: 1,
        requests: Some(requests),
        timeout: Duration::from_secs(20),
        verification: Verification::Manifest(root.to_path_buf()),
        seed: 7,
        ..LoadConfig::default()
    }
}

#[test]
fn surfer_follows_rewritten_links_across_servers_and_verifies_every_page() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = site(dir.path());
    let c = cluster(dir.path(), false);
    let report = run_load(&surf_config(&c, dir.path(), &manifest.entry, 300)).unwrap();
    let surf = report.surf.as_ref().expect("surf counts");
    let counts = &surf.counts;
    assert_eq!(report.errors, 0, "{}", report.render_text());
    assert_eq!(report.mismatches, 0, "{:?}", report.mismatch_samples);
    assert_eq!(report.requests, 300);
    assert!(report.verified >= 300);
    let (home, coop) = (c.home.addr.to_string(), c.coop.addr.to_string());
    let by_server = &counts.requests_by_server;
    assert_eq!(by_server.values().sum::<u64>(), 300, "{by_server:?}");
    assert!(by_server.get(&home).is_some_and(|&n| n > 0), "{by_server:?}");
    assert!(by_server.get(&coop).is_some_and(|&n| n > 0), "{by_server:?}");
    assert!(counts.pages > 0 && counts.embeds > 0 && counts.sessions > 0, "{counts:?}");
    assert_eq!(counts.replica_responses, by_server[&coop], "the co-op serves replicas only");
    assert!(counts.external_links > 0, "links to the forbidden co-op are counted: {counts:?}");
    assert!(surf.connections_per_s > 0.0);
    // Pages came from the co-op too (their links resolve against the inserted BASE).
    let coop_seen = c.coop.all_requests();
    assert!(coop_seen.iter().all(|r| r.target.starts_with("/~migrate/1/s1/")));
    assert!(coop_seen.iter().any(|r| r.target.ends_with(".html")), "no page was followed to the co-op");
    // One connection per host per client at most (keep-alive, nothing closed).
    assert!(c.home.connections().len() <= 4 && c.coop.connections().len() <= 4);
    let json = report.to_json();
    assert_eq!(json["surf"]["requests_by_server"][&home], by_server[&home]);
    assert!(json["surf"]["pages"].is_u64() && json["surf"]["connections_per_s"].is_f64());
}

#[test]
fn a_corrupted_replica_page_is_a_rewrite_mismatch_naming_the_page_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = site(dir.path());
    let c = cluster(dir.path(), true);
    let report = run_load(&surf_config(&c, dir.path(), &manifest.entry, 200)).unwrap();
    assert!(report.mismatches_by_kind.get(MismatchKind::Rewrite) > 0, "{}", report.render_text());
    let sample = report.mismatch_samples.iter().find(|m| m.kind == MismatchKind::Rewrite).unwrap();
    assert!(sample.request.contains("/~migrate/1/s1/") && sample.request.ends_with(".html"), "{sample:?}");
    assert!(sample.actual.contains("at byte "), "{sample:?}");
}

#[test]
fn without_keepalive_every_request_opens_a_connection_and_leaves_go_back() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = site(dir.path());
    let c = cluster(dir.path(), false);
    let config = LoadConfig { keepalive: false, ..surf_config(&c, dir.path(), &manifest.entry, 120) };
    let report = run_load(&config).unwrap();
    assert_eq!((report.errors, report.mismatches), (0, 0), "{}", report.render_text());
    let seen = c.home.connections().len() + c.coop.connections().len();
    assert_eq!(seen as u64, report.connections);
    assert!(report.connections >= 120);
    assert!(c.home.all_requests().iter().chain(&c.coop.all_requests()).all(|r| r.connection_close));
}
