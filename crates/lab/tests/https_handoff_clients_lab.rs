//! One-way HTTPS with real clients, as root in network namespaces (`#[ignore]`d; `./quickstart
//! test` runs it as root): two nodes behind the switch in handoff mode, its TLS listener on the
//! virtual IP. curl fetches documents of both nodes on one keep-alive connection (the session
//! moves from node to node), `openssl s_client` sends a request, asks for a KeyUpdate both
//! ways (its `K` command) and sends more, and headless Chromium loads a page and every object
//! on it: every body as the files hold it, every status 200, and the switch counts the TLS
//! sessions it handed off and moved on.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use locus_lab::browser::{chromium, load_page_with};
use locus_lab::{ClusterSpec, LabCluster, LabSite, SwitchKind, WorkloadSpec};
use locus_rig::servers::{CertKind, TlsFiles, write_tls_files};
use locus_rig::{LabNetwork, Net, find_program};
use locus_test_support::{locus_binary, require_namespaces, watchdog};

const NODES: usize = 2;
/// The name on the certificate (the lab's).
const NAME: &str = locus_lab::TLS_NAME;

fn site(dir: &Path) -> LabSite {
    let w = WorkloadSpec {
        preset: Some("mapug".into()),
        scale: Some(0.02),
        seed: 5,
        ..WorkloadSpec::new("mapug", 0)
    };
    LabSite::generate(&w, dir).unwrap()
}

fn cluster<'n>(net: &'n Net, site: &LabSite, scratch: &Path, tls: &TlsFiles) -> LabCluster<'n> {
    let spec = ClusterSpec {
        tls: Some(tls.clone()),
        ..ClusterSpec::new(NODES, site.root.clone(), SwitchKind::Locus, "hash", "handoff")
    };
    LabCluster::start(net, &locus_binary(), scratch, &spec).unwrap()
}

/// Up to `n` files of the site (their paths under the root), pages and images alike.
fn some_files(root: &Path, n: usize) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "html" || e == "gif") && found.len() < n {
                found.push(path.strip_prefix(root).unwrap().to_path_buf());
            }
        }
    }
    found
}

/// The switch's `/locus/status`, read from the client host.
fn switch_status(cluster: &LabCluster<'_>) -> serde_json::Value {
    let url: locus_load::TargetUrl =
        format!("http://{}/locus/status", cluster.switch_admin().unwrap()).parse().unwrap();
    cluster
        .net()
        .on_host("client", || {
            locus_load::fetch_status(&url, Duration::from_secs(5))
                .map_err(|e| locus_lab::LabError::Point { point: "switch".into(), message: e })
        })
        .unwrap()
}

/// Run `cmd` (on the client host), feeding `input` in steps with a pause after each, and give
/// its standard output and error once it exits (killed after 30 s).
fn run_fed(mut cmd: Command, input: &[(&[u8], Duration)]) -> String {
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for (bytes, pause) in input {
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
        std::thread::sleep(*pause);
    }
    drop(stdin);
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn curl_fetches_documents_of_both_nodes_on_one_connection(
    cluster: &LabCluster<'_>,
    site: &LabSite,
    tls: &TlsFiles,
    out: &Path,
) {
    let vip = cluster.switch_addr().ip();
    let files = some_files(&site.root, 8);
    let mut cmd = cluster.net().command("client", &find_program("curl").expect("curl")).unwrap();
    cmd.args(["-sS", "--fail", "--http1.1", "-w", "%{num_connects}\\n", "--cacert"])
        .arg(&tls.cert)
        .arg("--resolve")
        .arg(format!("{NAME}:443:{vip}"));
    for (i, f) in files.iter().enumerate() {
        cmd.arg(format!("https://{NAME}/{}", f.display())).arg("-o").arg(out.join(format!("curl-{i}")));
    }
    let output = cmd.output().unwrap();
    assert!(output.status.success(), "curl: {}", String::from_utf8_lossy(&output.stderr));
    let connects: u32 =
        String::from_utf8_lossy(&output.stdout).lines().map(|l| l.trim().parse::<u32>().unwrap()).sum();
    assert_eq!(connects, 1, "one keep-alive connection for every document");
    for (i, f) in files.iter().enumerate() {
        let got = std::fs::read(out.join(format!("curl-{i}"))).unwrap();
        assert!(got == std::fs::read(site.root.join(f)).unwrap(), "{}: the body differs", f.display());
    }
}

fn openssl_updates_keys_both_ways_between_requests(cluster: &LabCluster<'_>, site: &LabSite, tls: &TlsFiles) {
    let vip = cluster.switch_addr().ip();
    let files = some_files(&site.root, 5);
    let request = |f: &PathBuf| format!("GET /{} HTTP/1.1\nHost: {NAME}\n\n", f.display());
    let after: String = files[1..].iter().map(request).collect();
    let mut cmd = cluster.net().command("client", &find_program("openssl").expect("openssl")).unwrap();
    cmd.args(["s_client", "-connect", &format!("{vip}:443"), "-servername", NAME, "-crlf", "-CAfile"])
        .arg(&tls.cert);
    let pause = Duration::from_millis(700);
    let first = request(&files[0]);
    let text = run_fed(cmd, &[(first.as_bytes(), pause), (b"K\n", pause), (after.as_bytes(), pause * 2)]);
    // s_client says KEYUPDATE (on its standard error) when it sends the KeyUpdate.
    assert!(text.contains("KEYUPDATE"), "s_client did not update its keys:\n{text}");
    assert_eq!(text.matches("HTTP/1.1 200 OK").count(), files.len(), "every request answered:\n{text}");
}

#[test]
#[ignore = "needs root: network namespaces (./quickstart test runs it as root)"]
fn curl_openssl_and_chromium_keep_their_https_sessions_through_handoff_and_rehandoff() {
    require_namespaces("the lab's hosts are network namespaces");
    chromium().expect("Chromium is needed for this test (./quickstart installs the `chromium` package)");
    watchdog("https handoff clients lab", Duration::from_secs(240), locus_rig::tear_down_everything);
    let dir = tempfile::tempdir().unwrap();
    let site = site(&dir.path().join("site"));
    let scratch = dir.path().join("logs");
    let tls = write_tls_files(&scratch.join("tls"), CertKind::EcdsaP256, NAME).unwrap();
    let net = Net::Namespaces(LabNetwork::create(NODES).unwrap());
    let cluster = cluster(&net, &site, &scratch, &tls);

    curl_fetches_documents_of_both_nodes_on_one_connection(&cluster, &site, &tls, dir.path());
    let s = switch_status(&cluster);
    assert_eq!(s["handoff"]["tls"]["handoffs"], 1, "{}", s["handoff"]);
    assert!(s["handoff"]["rehandoffs"].as_u64().unwrap() >= 1, "{}", s["handoff"]);

    let moved = |s: &serde_json::Value| s["handoff"]["rehandoffs"].as_u64().unwrap();
    let before = moved(&s);
    openssl_updates_keys_both_ways_between_requests(&cluster, &site, &tls);
    let s = switch_status(&cluster);
    assert!(moved(&s) > before, "the session moved on after its KeyUpdate: {}", s["handoff"]);

    let vip = cluster.switch_addr().ip();
    let url = format!("https://{vip}{}", site.entry);
    let load = load_page_with(
        &net,
        "client",
        &url,
        &dir.path().join("browser"),
        None,
        &["--ignore-certificate-errors"],
    )
    .unwrap();
    let ours = [format!("{vip}:443")];
    assert!(!load.requests_to(&ours).is_empty(), "{url}: the browser made no request: {:?}", load.requests);
    assert!(load.failures(&ours).is_empty(), "{url}: the browser did not get {:?}", load.failures(&ours));
    let embeds = load.requests_to(&ours).iter().filter(|r| r.url.ends_with(".gif")).count();
    assert!(embeds > 0, "{url}: no image loaded: {:?}", load.requests);
    let s = switch_status(&cluster);
    assert_eq!(s["handoff"]["served_here"], 0, "{}", s["handoff"]);
    assert!(s["handoff"]["tls"]["handoffs"].as_u64().unwrap() >= 3, "{}", s["handoff"]);
}
