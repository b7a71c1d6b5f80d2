//! The lab end to end, as root in real network namespaces (`#[ignore]`d; `./quickstart test`
//! runs them as root): a 2-node cluster serves a few hundred verified requests byte for byte
//! through Locus (and HAProxy and NGINX when installed), LARD keeps a target on one node while
//! WRR spreads it, a run's report folder holds results.json, report.md and plots, Ctrl-C tears
//! everything down with a non-zero exit, and `clean` removes what a killed run left behind.
//! Nodes and switches run the `locus` binary of this build (`cargo build -p locus` first when
//! the tests of this package run alone).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use locus_lab::{
    ClusterSpec, Experiment, LabCluster, LabOptions, NodeSettings, SwitchKind, WorkloadSpec, measure,
    run_experiment,
};
use locus_load::{DocumentSet, LoadConfig, Popularity, Verification, Workload};
use locus_rig::{LabNetwork, Net, find_program, namespace_owner, tear_down_everything};
use locus_test_support::{locus_binary, require_namespaces, wait_until, watchdog};

fn small_workload(files: u32, clients: usize) -> WorkloadSpec {
    WorkloadSpec { clients, load_threads: 1, seed: 7, ..WorkloadSpec::new("small", files) }
}

/// The Locus switch's own default relay (splice(2) for large body runs).
const SPLICE_DEFAULT: Option<u64> = None;

/// A small site, a 2-node lab and the load configuration over it.
struct SmallLab {
    dir: tempfile::TempDir,
    site: locus_lab::LabSite,
    net: Net,
    locus: PathBuf,
}

impl SmallLab {
    fn new() -> SmallLab {
        let locus = locus_binary();
        let dir = tempfile::tempdir().unwrap();
        let site = locus_lab::LabSite::generate(&small_workload(150, 8), dir.path()).unwrap();
        let net = Net::Namespaces(LabNetwork::create(2).unwrap());
        SmallLab { dir, site, net, locus }
    }

    fn cluster(&self, policy: &str, splice_min_bytes: Option<u64>) -> LabCluster<'_> {
        let spec = ClusterSpec {
            node: NodeSettings {
                cache: "2MiB".into(),
                storage: Some("seek_ms=1,mb_s=100,disks=1".into()),
                ..NodeSettings::default()
            },
            splice_min_bytes,
            ..ClusterSpec::new(2, self.site.root.clone(), SwitchKind::Locus, policy, "proxy")
        };
        let scratch = self.dir.path().join(format!("logs-{policy}-{splice_min_bytes:?}"));
        LabCluster::start(&self.net, &self.locus, &scratch, &spec).unwrap()
    }

    /// 300 requests, 8 clients, Zipf over the site, every response checked.
    fn load(&self, cluster: &LabCluster<'_>) -> LoadConfig {
        LoadConfig {
            targets: vec![cluster.switch_url().parse().unwrap()],
            workload: Workload::Synthetic {
                popularity: Popularity::Zipf { alpha: 0.9 },
                documents: DocumentSet::Manifest(self.site.manifest()),
            },
            clients: 8,
            threads: 1,
            requests: Some(300),
            duration: Some(Duration::from_secs(60)),
            verification: Verification::Manifest(self.site.manifest()),
            seed: 3,
            ..LoadConfig::default()
        }
    }
}

#[test]
#[ignore = "needs root: network namespaces (./quickstart test runs it as root)"]
fn lard_keeps_a_target_on_one_node_while_wrr_spreads_it_and_every_byte_is_right() {
    require_namespaces("the lab's network namespaces");
    watchdog("lard_keeps_a_target_on_one_node", Duration::from_secs(300), tear_down_everything);
    let lab = SmallLab::new();
    let target = "/index.html";
    for policy in ["lard", "wrr"] {
        let cluster = lab.cluster(policy, SPLICE_DEFAULT);
        let served = cluster.serving_nodes(target, 12).unwrap();
        assert!(served.iter().all(|(status, _)| *status == 200), "{policy}: {served:?}");
        let mut nodes: Vec<&str> = served.iter().map(|(_, n)| n.as_str()).collect();
        nodes.sort_unstable();
        nodes.dedup();
        match policy {
            "lard" => assert_eq!(nodes.len(), 1, "LARD keeps {target} on one node: {served:?}"),
            _ => assert_eq!(nodes, ["node1", "node2"], "WRR spreads {target} over both nodes: {served:?}"),
        }
        let (report, before, after) = measure(&cluster, &lab.load(&cluster)).unwrap();
        assert!(report.requests >= 290, "{policy}: {} responses", report.requests);
        assert_eq!(report.mismatches, 0, "{policy}: {:?}", report.mismatch_samples);
        assert_eq!(report.errors, 0, "{policy}: {:?}", report.errors_by_kind);
        assert!(report.verified >= report.requests, "every response checked against the manifest");
        let delta = locus_lab::ClusterDelta::between(&before, &after);
        assert!(delta.forwarded() >= report.requests, "{policy}: the switch counted {}", delta.forwarded());
        // The nodes also count the switch's health checks (a few per second).
        let served: u64 = delta.node_requests.iter().sum();
        assert!(
            (delta.forwarded()..delta.forwarded() + 50).contains(&served),
            "nodes {served}, switch {}",
            delta.forwarded()
        );
        assert!(delta.hit_ratio.is_some_and(|h| (0.0..=1.0).contains(&h)));
        assert!(delta.switch_cpu > Duration::ZERO, "the switch used some CPU");
    }
}

/// Regression test: the splice relay once took a full pipe's EAGAIN for a drained node socket
/// and stalled on responses spread over many MTU-1500 segments (1 run in 2 failed).
#[test]
#[ignore = "needs root: network namespaces (./quickstart test runs it as root)"]
fn the_switch_relays_every_response_with_splice_on_across_veth() {
    require_namespaces("the lab's network namespaces");
    watchdog(
        "the_switch_relays_every_response_with_splice_on",
        Duration::from_secs(300),
        tear_down_everything,
    );
    let lab = SmallLab::new();
    let cluster = lab.cluster("wrr", None);
    // The stall is intermittent: a few runs of 300 requests show it most of the time.
    for _ in 0..4 {
        let (report, _, _) = measure(&cluster, &lab.load(&cluster)).unwrap();
        assert_eq!(report.errors, 0, "{:?} after {} responses", report.errors_by_kind, report.requests);
    }
}

fn small_experiment(measure_s: f64, measure_requests: Option<u64>, externals: bool) -> Experiment {
    let mut text = format!(
        "name = \"integration\"\nnodes = [2]\nwarmup_s = 0.5\nmeasure_s = {measure_s}\n{}\
         [node]\ncache = \"2MiB\"\nstorage = \"seek_ms=1,mb_s=100,disks=1\"\n\
         [[switch]]\nkind = \"locus\"\npolicies = [\"lard\", \"wrr\"]\nworkers = 1\n\
         [[switch]]\nkind = \"locus\"\npolicies = [\"lard\"]\nmodes = [\"handoff\"]\nworkers = 1\n\
         [[switch]]\nkind = \"locus\"\npolicies = [\"rr\"]\ncoop = \"lru\"\nworkers = 1\n",
        measure_requests.map_or(String::new(), |r| format!("measure_requests = {r}\n"))
    );
    if externals && find_program("haproxy").is_some() {
        text.push_str("[[switch]]\nkind = \"haproxy\"\npolicies = [\"uri-chash-bounded\"]\nworkers = 1\n");
    }
    if externals && find_program("nginx").is_some() {
        text.push_str("[[switch]]\nkind = \"nginx\"\npolicies = [\"uri-chash\"]\nworkers = 1\n");
    }
    text.push_str("[[workload]]\nname = \"small\"\nfiles = 120\nclients = 8\nload_threads = 1\n");
    Experiment::from_toml(&text, "integration").unwrap()
}

/// `path` (absolute) as seen from the working directory, e.g. `../../target/tmp/x`.
fn relative_to_cwd(path: &Path) -> PathBuf {
    let cwd = std::env::current_dir().unwrap();
    let common = cwd.components().zip(path.components()).take_while(|(a, b)| a == b).count();
    let mut rel: PathBuf = cwd.components().skip(common).map(|_| "..").collect();
    rel.extend(path.components().skip(common));
    rel
}

#[test]
#[ignore = "needs root: network namespaces (./quickstart test runs it as root)"]
fn a_run_measures_every_point_and_writes_results_json_and_the_report() {
    require_namespaces("the lab's network namespaces");
    watchdog("a_run_measures_every_point", Duration::from_secs(300), tear_down_everything);
    let locus = locus_binary();
    let out = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let experiment = small_experiment(20.0, Some(250), true);
    // Named relative to the working directory, as `locus lab demo` names `lab-out/<time>`:
    // NGINX once read such a path from its own prefix and did not start.
    let out_dir = relative_to_cwd(out.path());
    assert!(out_dir.is_relative() && !out_dir.starts_with("../../../../.."), "{out_dir:?}");
    let options = LabOptions { locus, out_dir, site_dir: None };
    let run = run_experiment(&experiment, &options, &mut |line| eprintln!("{line}")).unwrap();
    assert!(run.error.is_none(), "{:?}", run.error);
    let report = run.report;
    assert_eq!(report.points.len(), experiment.points().len());
    assert!(report.points.iter().any(|p| p.mode == "handoff"), "a one-way row is measured too");
    assert!(report.points.iter().any(|p| p.policy == "rr+cf-lru"), "nodes caching cooperatively too");
    let twin = report.notes.iter().find(|n| n.contains("simulator's twin of `small`"));
    assert!(
        twin.is_some_and(|t| t.contains("| rr+cf-lru |") && t.contains("| lard |")),
        "{:?}",
        report.notes
    );
    for p in &report.points {
        assert_eq!((p.errors, p.mismatches), (0, 0), "{p:?}");
        assert!(p.requests >= 250 && p.rps > 0.0, "{p:?}");
        assert!(p.node_requests.iter().sum::<u64>() > 0 && p.imbalance >= 1.0, "{p:?}");
        // CPU time is read in clock ticks (10 ms): a 250-request interval of an efficient
        // switch can round to none, so each point must measure it and the run must see some.
        assert!(p.switch_cpu_us_per_request.is_some_and(|c| c >= 0.0), "{p:?}");
    }
    let cpu: f64 = report.points.iter().filter_map(|p| p.switch_cpu_us_per_request).sum();
    assert!(cpu > 0.0, "no switch CPU time measured in any point: {:?}", report.points);
    report.write(out.path()).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("results.json")).unwrap()).unwrap();
    assert_eq!(json.as_array().unwrap().len(), report.points.len());
    assert_eq!(json[0]["switch"], "locus");
    assert!(json[0]["rps"].is_f64() && json[0]["nodes"].is_u64());
    assert_eq!(json[0]["congestion_control"], "cubic", "set per route, whatever the machine allows");
    assert_eq!(json[0]["attempts"], 1);
    let md = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    assert!(md.contains("**TCP congestion control**: cubic on every lab connection"), "{md}");
    assert!(md.contains("### Throughput (requests/s)") && md.contains("small-throughput.svg"), "{md}");
    assert!(out.path().join("small-hit-ratio.svg").is_file());
}

#[test]
#[ignore = "needs root: network namespaces (./quickstart test runs it as root)"]
fn a_tls_workload_runs_over_https_through_each_balancer_with_every_byte_checked() {
    require_namespaces("the lab's network namespaces");
    watchdog("a_tls_workload_runs_over_https", Duration::from_secs(300), tear_down_everything);
    let mut text = String::from(
        "name = \"https\"\nnodes = [2]\nwarmup_s = 0.5\nmeasure_s = 20\nmeasure_requests = 200\n\
         [node]\ncache = \"2MiB\"\n\
         [[switch]]\nkind = \"locus\"\npolicies = [\"lard\"]\nmodes = [\"proxy\", \"splice\"]\nworkers = 1\n",
    );
    for (program, kind, policy) in
        [("haproxy", "haproxy", "uri-chash-bounded"), ("nginx", "nginx", "uri-chash")]
    {
        if find_program(program).is_some() {
            text.push_str(&format!(
                "[[switch]]\nkind = \"{kind}\"\npolicies = [\"{policy}\"]\nworkers = 1\n"
            ));
        }
    }
    text.push_str("[[workload]]\nname = \"small\"\nfiles = 80\nclients = 4\nload_threads = 1\ntls = true\n");
    let experiment = Experiment::from_toml(&text, "https").unwrap();
    let out = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let options = LabOptions { locus: locus_binary(), out_dir: out.path().to_path_buf(), site_dir: None };
    let run = run_experiment(&experiment, &options, &mut |line| eprintln!("{line}")).unwrap();
    assert!(run.error.is_none(), "{:?}", run.error);
    assert_eq!(run.report.points.len(), experiment.points().len());
    for p in &run.report.points {
        assert_eq!((p.errors, p.mismatches), (0, 0), "{p:?}");
        assert!(p.requests >= 200, "{p:?}");
    }
    // Every balancer was configured to terminate TLS (the load spoke HTTPS to each).
    let configs: Vec<String> = std::fs::read_dir(out.path().join("logs"))
        .unwrap()
        .flat_map(|d| std::fs::read_dir(d.unwrap().path()).unwrap())
        .map(|f| f.unwrap().path())
        .filter(|f| f.extension().is_some_and(|e| e == "toml" || e == "cfg"))
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();
    assert!(configs.iter().filter(|c| c.contains("listen_tls")).count() == 2, "{configs:?}");
    if find_program("haproxy").is_some() {
        assert!(configs.iter().any(|c| c.contains(" ssl crt ")), "{configs:?}");
    }
}

/// A `locus` stand-in for the lab: `locus switch` (not `--check`) fails at once for policy
/// `wrr`, and for `lard` only the first time; everything else is the real executable.
fn failing_switch_locus(dir: &Path) -> PathBuf {
    let script = dir.join("locus");
    let once = dir.join("lard-failed-once");
    let text = format!(
        "#!/bin/sh\ncase \" $* \" in *\" --check \"*) exec '{real}' \"$@\";; esac\n\
         if [ \"$1\" = switch ]; then\n  case \" $* \" in\n\
         \x20   *\" --policy wrr \"*) echo 'injected: this switch never starts' >&2; exit 3;;\n\
         \x20   *\" --policy lard \"*) if [ ! -e '{once}' ]; then touch '{once}'; echo 'injected: first start' >&2; exit 3; fi;;\n\
         \x20 esac\nfi\nexec '{real}' \"$@\"\n",
        real = locus_binary().display(),
        once = once.display()
    );
    std::fs::write(&script, text).unwrap();
    let mut perms = std::fs::metadata(&script).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&script, perms).unwrap();
    script
}

#[test]
#[ignore = "needs root: network namespaces (./quickstart test runs it as root)"]
fn a_failed_point_is_tried_once_more_and_one_that_fails_twice_is_reported_while_the_run_goes_on() {
    require_namespaces("the lab's network namespaces");
    watchdog("a_failed_point_is_tried_once_more", Duration::from_secs(240), tear_down_everything);
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let experiment = Experiment::from_toml(
        "name = \"retries\"\nnodes = [1]\nwarmup_s = 0.2\nmeasure_s = 10\nmeasure_requests = 100\n\
         [[switch]]\nkind = \"locus\"\npolicies = [\"wrr\", \"lard\"]\nworkers = 1\n\
         [[workload]]\nname = \"small\"\nfiles = 40\nclients = 4\nload_threads = 1\n",
        "retries",
    )
    .unwrap();
    let options = LabOptions {
        locus: failing_switch_locus(dir.path()),
        out_dir: dir.path().join("out"),
        site_dir: None,
    };
    let run = run_experiment(&experiment, &options, &mut |line| eprintln!("{line}")).unwrap();
    let report = run.report;
    assert_eq!(report.points.len(), 1, "lard is measured on its second try: {:?}", report.failed_points);
    assert_eq!((report.points[0].policy.as_str(), report.points[0].attempts), ("lard", 2));
    assert_eq!(report.points[0].mismatches, 0);
    assert_eq!(report.failed_points.len(), 1);
    let failed = &report.failed_points[0];
    assert_eq!((failed.policy.as_str(), failed.attempts), ("wrr", 2));
    assert!(failed.failed.contains("injected: this switch never starts"), "{}", failed.failed);
    let err = run.error.expect("a failed point makes the run an error").to_string();
    assert!(err.contains("1 of 2 points failed"), "{err}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("out/results.json")).unwrap()).unwrap();
    let entries = json.as_array().unwrap();
    assert_eq!(entries.len(), 2, "{json}");
    assert!(
        entries.iter().any(|e| e["policy"] == "wrr" && e["failed"].is_string() && e.get("rps").is_none())
    );
    assert!(entries.iter().any(|e| e["policy"] == "lard" && e["attempts"] == 2 && e["rps"].is_f64()));
    let md = report.render_markdown(&[]);
    assert!(md.contains("**1 points failed on both tries**") && md.contains("locus wrr, 1 nodes"), "{md}");
}

#[test]
#[ignore = "needs root: network namespaces (./quickstart test runs it as root)"]
fn a_server_waits_until_its_address_is_free_in_its_host() {
    require_namespaces("the lab's network namespaces");
    watchdog("a_server_waits_until_its_address_is_free", Duration::from_secs(60), tear_down_everything);
    let net = Net::Namespaces(LabNetwork::create(1).unwrap());
    let vip: std::net::SocketAddr = (net.lab().unwrap().vip(), 80).into();
    // The previous point's server, still listening on the virtual IP in the switch host.
    let stale = net
        .on_host("switch", || {
            std::net::TcpListener::bind(vip).map_err(|e| locus_rig::RigError::system("bind", e))
        })
        .unwrap();
    let started = Instant::now();
    std::thread::scope(|s| {
        s.spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            drop(stale);
        });
        net.wait_until_free("switch", &[vip]).unwrap();
    });
    assert!(started.elapsed() >= Duration::from_millis(300), "returned while the address was still held");
    // Free now: a server can bind it, and the wait returns at once.
    let fresh = net
        .on_host("switch", || {
            std::net::TcpListener::bind(vip).map_err(|e| locus_rig::RigError::system("bind", e))
        })
        .unwrap();
    drop(fresh);
    net.wait_until_free("switch", &[vip]).unwrap();
}

/// Lab namespaces owned by `pid`.
fn namespaces_of(pid: u32) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/run/netns") else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| namespace_owner(n) == Some(pid))
        .collect()
}

/// Held by the tests that run `locus lab` processes: one cleans up after a killed run, and
/// another's clean-up must not race it.
static LAB_PROCESSES: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A `locus lab run` process: killed on drop, and whatever it left removed.
struct LabProcess {
    child: Child,
}

impl Drop for LabProcess {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        let _ = locus_rig::clean_stale_labs();
    }
}

/// How many `locus` processes (nodes and switch) run under `pid`.
fn locus_processes(pid: u32) -> usize {
    let comm = |p: &u32| std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
    locus_rig::descendants(pid).iter().filter(|p| comm(p).trim() == "locus").count()
}

/// Start `locus lab run` on a long small experiment and wait until its namespaces exist and
/// its nodes run.
fn start_lab_process(dir: &Path) -> LabProcess {
    let locus = locus_binary();
    let experiment = dir.join("long.toml");
    std::fs::write(&experiment, small_experiment(60.0, None, false).to_toml()).unwrap();
    let child = Command::new(&locus)
        .args(["lab", "run"])
        .arg(&experiment)
        .arg("--out")
        .arg(dir.join("out"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let lab = LabProcess { child };
    let pid = lab.child.id();
    let start = Instant::now();
    loop {
        let nodes = locus_processes(pid);
        // client, switch, two nodes and the lan namespace holding the bridge.
        if namespaces_of(pid).len() == 5 && nodes >= 2 {
            return lab;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "the lab did not come up");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wait_exit(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(start.elapsed() < limit, "no exit within {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
#[ignore = "needs root: network namespaces (./quickstart test runs it as root)"]
fn ctrl_c_tears_the_whole_lab_down_and_exits_non_zero() {
    require_namespaces("the lab's network namespaces");
    let _one_at_a_time = LAB_PROCESSES.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut lab = start_lab_process(dir.path());
    let pid = lab.child.id();
    // The first point's switch (a third `locus`, after the two nodes) is up: every server the
    // point starts is then among the descendants.
    wait_until("the first point's switch runs beside its two nodes", || locus_processes(pid) >= 3);
    let servers = locus_rig::descendants(pid);
    // SAFETY: kill with the pid of our own child.
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let status = wait_exit(&mut lab.child, Duration::from_secs(30));
    assert_eq!(status.code(), Some(130), "exit status after SIGINT: {status}");
    assert!(namespaces_of(pid).is_empty(), "namespaces left: {:?}", namespaces_of(pid));
    let bridges: Vec<String> = std::fs::read_dir("/sys/class/net")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| locus_rig::bridge_owner(n) == Some(pid))
        .collect();
    assert!(bridges.is_empty(), "bridges left: {bridges:?}");
    // The servers were killed by the lab; init reaps them once the lab has exited.
    let state = |s: &u32| std::fs::read_to_string(format!("/proc/{s}/stat")).unwrap_or_default();
    let gone = |s: &u32| {
        let st = state(s);
        st.is_empty() || st.contains(") Z")
    };
    wait_until("every server of the lab has exited", || servers.iter().all(gone));
}

#[test]
#[ignore = "needs root: network namespaces (./quickstart test runs it as root)"]
fn clean_removes_what_a_killed_run_left_behind() {
    require_namespaces("the lab's network namespaces");
    let _one_at_a_time = LAB_PROCESSES.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut lab = start_lab_process(dir.path());
    let pid = lab.child.id();
    lab.child.kill().unwrap();
    lab.child.wait().unwrap();
    let left = namespaces_of(pid);
    assert_eq!(left.len(), 5, "SIGKILL leaves the namespaces: {left:?}");
    assert!(left.iter().any(|ns| ns.ends_with("-lan")), "the bridge's namespace is among them: {left:?}");
    let out = Command::new(locus_binary()).args(["lab", "clean"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for ns in &left {
        assert!(text.contains(ns.as_str()), "{ns} not reported removed: {text}");
    }
    assert!(namespaces_of(pid).is_empty(), "still there: {:?}", namespaces_of(pid));
    let scratch: Vec<String> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| locus_rig::scratch_folder_owner(n) == Some(pid))
        .collect();
    assert!(scratch.is_empty(), "scratch folders left: {scratch:?}");
}
