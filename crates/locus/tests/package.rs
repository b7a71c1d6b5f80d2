//! The Debian package end to end (root: `dpkg -i`): `packaging/build-deb` packages this build's
//! `locus`, dpkg installs it, `systemd-analyze` verifies the units and rates their hardening,
//! the installed units' commands run the installed configuration as the `locus` user (a node,
//! a second node from the template, the switch) and serve, and `dpkg --purge` leaves the
//! machine as it was, also when the test fails or hangs.

use locus_test_support::{get, require_root, wait_until, watchdog};
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const LOCUS: &str = env!("CARGO_BIN_EXE_locus");
const UNITS: &str = "/usr/lib/systemd/system";
/// What the default configuration listens on: the switch, its admin, the node, its admin.
const DEFAULT_PORTS: [u16; 4] = [8080, 9090, 8001, 9091];

fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program).args(args).output().unwrap_or_else(|e| panic!("{program}: {e}"))
}

fn succeeded(what: &str, out: &Output) -> String {
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{what} failed ({}):\n{text}", out.status);
    text
}

fn installed() -> bool {
    let out = run("dpkg-query", &["-W", "-f", "${Status}", "locus"]);
    String::from_utf8_lossy(&out.stdout).contains("installed")
}

fn exists(database: &str, name: &str) -> bool {
    run("getent", &[database, name]).status.success()
}

/// Kill what the test started, purge the package, and remove what a failed purge may have
/// left (the test checked that none of it was there before).
fn clean_up(pids: &Mutex<Vec<u32>>) {
    for pid in pids.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
        // SAFETY: kill with the pid of a child this test started.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    }
    let _ = run("dpkg", &["--purge", "locus"]);
    if exists("passwd", "locus") {
        let _ = run("userdel", &["locus"]);
    }
    if exists("group", "locus") {
        let _ = run("groupdel", &["locus"]);
    }
    let _ = std::fs::remove_dir("/sys/fs/bpf/locus");
    let _ = std::fs::remove_dir_all("/run/locus");
    let _ = std::fs::remove_dir_all("/etc/locus");
    let _ = std::fs::remove_dir_all("/var/log/locus");
}

/// Cleans up when dropped: at the end and at a panic, when it first shows the servers' logs.
struct Guard {
    pids: Arc<Mutex<Vec<u32>>>,
    logs: PathBuf,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for entry in std::fs::read_dir(&self.logs).into_iter().flatten().flatten() {
                let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
                eprintln!("--- {}:\n{text}", entry.path().display());
            }
        }
        clean_up(&self.pids);
    }
}

/// The lines `key=` of a unit file, with `%i` replaced by `instance`.
fn unit_values(unit: &str, key: &str, instance: &str) -> Vec<String> {
    let text = std::fs::read_to_string(Path::new(UNITS).join(unit)).unwrap();
    let prefix = format!("{key}=");
    text.lines().filter_map(|l| l.strip_prefix(&prefix)).map(|v| v.replace("%i", instance)).collect()
}

fn unit_value(unit: &str, key: &str) -> String {
    let values = unit_values(unit, key, "");
    assert_eq!(values.len(), 1, "{unit}: one {key}= expected: {values:?}");
    values[0].clone()
}

/// The unit's `LimitNOFILE`, or this process's hard limit where that is lower: a root without
/// CAP_SYS_RESOURCE (a container's, as on this project's machines) cannot raise it.
fn open_file_limit(unit_limit: &str) -> u64 {
    let wanted: u64 = unit_limit.parse().unwrap_or_else(|_| panic!("LimitNOFILE={unit_limit} is a number"));
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the rlimit it is given.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) }, 0);
    static SAID: std::sync::Once = std::sync::Once::new();
    if limit.rlim_max < wanted {
        SAID.call_once(|| {
            eprintln!(
                "package: LimitNOFILE={wanted}, but this process may not raise its limit past {}",
                limit.rlim_max
            )
        });
    }
    wanted.min(limit.rlim_max)
}

/// A command line of a unit (`ExecStart=`, `ExecStartPre=`: words, no quoting in ours) run as
/// the unit would: its user and group, its open-file limit.
fn as_unit(unit: &str, command_line: &str) -> Command {
    let user = unit_value(unit, "User");
    let group = unit_value(unit, "Group");
    let nofile = open_file_limit(&unit_value(unit, "LimitNOFILE"));
    let mut command = Command::new("prlimit");
    command
        .arg(format!("--nofile={nofile}:{nofile}"))
        .args(["setpriv", "--reuid", &user, "--regid", &group, "--init-groups", "--"])
        .args(command_line.split_whitespace());
    command
}

/// A service manager's notification socket, writable by the `locus` user.
struct NotifySocket {
    socket: UnixDatagram,
    path: PathBuf,
}

impl NotifySocket {
    fn new(dir: &Path, name: &str) -> NotifySocket {
        let path = dir.join(format!("{name}.sock"));
        let socket = UnixDatagram::bind(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
        socket.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        NotifySocket { socket, path }
    }

    fn expect(&self, state: &str, who: &str) {
        let mut buf = [0u8; 4096];
        let n = self.socket.recv(&mut buf).unwrap_or_else(|e| panic!("{who}: no {state} within 20 s: {e}"));
        let got = String::from_utf8_lossy(&buf[..n]);
        assert!(got.lines().any(|l| l == state), "{who}: {state} expected, got {got:?}");
    }
}

/// Start a unit's `ExecStart` (after its `ExecStartPre`, which must say the configuration is
/// OK) as the unit would, notifying `notify`, its standard error into a file in `logs`;
/// returns it and the first address it prints.
fn start_unit(
    unit: &str,
    instance: &str,
    notify: &NotifySocket,
    pids: &Mutex<Vec<u32>>,
    logs: &Path,
) -> (Child, SocketAddr) {
    let mut checked = false;
    for pre in unit_values(unit, "ExecStartPre", instance) {
        // systemd's prefixes: `+` runs with full privileges, `-` may fail.
        let prefixes: String = pre.chars().take_while(|c| "+-".contains(*c)).collect();
        let line = &pre[prefixes.len()..];
        let mut command = if prefixes.contains('+') {
            let mut words = line.split_whitespace();
            let mut command = Command::new(words.next().unwrap());
            command.args(words);
            command
        } else {
            as_unit(unit, line)
        };
        let out = command.output().unwrap();
        if prefixes.contains('-') {
            continue;
        }
        let text = succeeded(line, &out);
        checked |= line.ends_with(" --check") && text.contains("configuration OK");
    }
    assert!(checked, "{unit}: an ExecStartPre checks the configuration");
    // What systemd makes before it starts the service: RuntimeDirectory= under /run, the user's.
    for name in unit_values(unit, "RuntimeDirectory", instance) {
        let dir = Path::new("/run").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let owner = format!("{}:{}", unit_value(unit, "User"), unit_value(unit, "Group"));
        succeeded("chown", &run("chown", &[&owner, dir.to_str().unwrap()]));
    }
    let start = unit_values(unit, "ExecStart", instance);
    assert_eq!(start.len(), 1, "{unit}: {start:?}");
    let mut child = as_unit(unit, &start[0])
        .env("NOTIFY_SOCKET", &notify.path)
        .stdout(Stdio::piped())
        .stderr(
            std::fs::File::create(logs.join(format!("{}.log", unit.replace('@', &format!("@{instance}")))))
                .unwrap(),
        )
        .spawn()
        .unwrap();
    pids.lock().unwrap().push(child.id());
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    // Keep reading: a closed pipe would fail the server's next line (its admin address).
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    let addr = line
        .split_whitespace()
        .find_map(|w| w.trim_start_matches("http://").parse::<SocketAddr>().ok())
        .unwrap_or_else(|| panic!("{unit}: no address in {line:?}"));
    notify.expect("READY=1", unit);
    (child, addr)
}

/// Run a unit's `ExecReload` lines as the unit would (`$MAINPID` is `child`): the service
/// says RELOADING=1, then READY=1.
fn reload_unit(unit: &str, instance: &str, child: &Child, notify: &NotifySocket) {
    for line in unit_values(unit, "ExecReload", instance) {
        let line = line.replace("$MAINPID", &child.id().to_string());
        succeeded(&line, &as_unit(unit, &line).output().unwrap());
    }
    notify.expect("RELOADING=1", unit);
    notify.expect("READY=1", unit);
}

fn stop(mut child: Child, notify: &NotifySocket, who: &str) {
    // SAFETY: kill with the pid of our own child (prlimit and setpriv exec, so it is locus).
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    notify.expect("STOPPING=1", who);
    let status = child.wait().unwrap();
    assert!(status.success(), "{who} exits 0 after SIGTERM: {status}");
}

/// `systemd-analyze verify` on the installed units, and `security` no worse than 3.0 of 10
/// for each; skipped, saying why, where systemd-analyze is missing (it needs no running
/// systemd: on this project's machines PID 1 is not systemd, and it verifies all the same).
fn verify_units() {
    if Command::new("systemd-analyze").arg("--version").output().is_err() {
        eprintln!("package: systemd-analyze is missing (apt-get install systemd): units not verified");
        return;
    }
    let pid1 = std::fs::read_to_string("/proc/1/comm").unwrap_or_default();
    eprintln!("package: PID 1 is {}; verifying the unit files offline", pid1.trim());
    let man = if Command::new("man").arg("--version").output().is_ok() { "--man=yes" } else { "--man=no" };
    let units = ["locus-switch.service", "locus-node.service", "locus-node@2.service"];
    let out = Command::new("systemd-analyze").args(["verify", man]).args(units).current_dir("/").output();
    let text = succeeded("systemd-analyze verify", &out.unwrap());
    assert!(text.trim().is_empty(), "systemd-analyze verify has warnings:\n{text}");
    for unit in ["locus-switch.service", "locus-node.service", "locus-node@.service"] {
        let path = format!("{UNITS}/{unit}");
        let out =
            run("systemd-analyze", &["security", "--offline=yes", "--threshold=30", "--no-pager", &path]);
        let text = String::from_utf8_lossy(&out.stdout);
        let overall = text.lines().find(|l| l.contains("Overall exposure")).unwrap_or("no overall line");
        eprintln!("package: {overall}");
        assert!(out.status.success(), "{unit}: exposure above 3.0:\n{text}");
    }
}

#[test]
#[ignore = "needs root: dpkg -i"]
fn the_package_installs_serves_with_its_configuration_and_purges_clean() {
    require_root("dpkg -i, a system user, files in /etc and /usr");
    assert!(
        !installed()
            && !Path::new("/etc/locus").exists()
            && !Path::new("/sys/fs/bpf/locus").exists()
            && !Path::new("/run/locus").exists()
            && !exists("passwd", "locus")
            && !exists("group", "locus"),
        "this machine already has a locus package, /etc/locus, /run/locus, /sys/fs/bpf/locus or a locus user: \
         the test would remove them"
    );
    for port in DEFAULT_PORTS {
        assert!(
            TcpListener::bind(("0.0.0.0", port)).is_ok(),
            "port {port}, which the default configuration listens on, is taken: free it and rerun"
        );
    }
    let pids = Arc::new(Mutex::new(Vec::new()));
    let logs = tempfile::tempdir().unwrap();
    let guard = Guard { pids: pids.clone(), logs: logs.path().to_path_buf() };
    let for_watchdog = pids.clone();
    watchdog("package", Duration::from_secs(150), move || clean_up(&for_watchdog));

    // Package this build's binary (the script's default builds the production one).
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/build-deb");
    let out =
        Command::new(&script).args(["--binary", LOCUS, "--fast", "--out"]).arg(dir.path()).output().unwrap();
    succeeded("packaging/build-deb", &out);
    let deb = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(deb.ends_with(".deb") && Path::new(&deb).is_file(), "build-deb printed {deb:?}");

    succeeded("dpkg -i", &run("dpkg", &["-i", &deb]));
    assert!(installed());
    assert!(exists("passwd", "locus") && exists("group", "locus"), "postinst made the locus user");
    let conffiles = std::fs::read_to_string("/var/lib/dpkg/info/locus.conffiles").unwrap();
    assert_eq!(conffiles.lines().collect::<Vec<_>>(), ["/etc/locus/switch.toml", "/etc/locus/node.toml"]);
    let pages = ["locus", "locus-switch", "locus-node", "locus-ctl"];
    let man = pages.map(|page| format!("/usr/share/man/man1/{page}.1.gz"));
    for file in std::iter::once("/usr/bin/locus").chain(man.iter().map(String::as_str)) {
        assert!(Path::new(file).is_file(), "{file} installed");
    }
    verify_units();

    // A second node from the template: /etc/locus/node-2.toml, on a port of its own.
    let node_2 = std::fs::read_to_string("/etc/locus/node.toml")
        .unwrap()
        .replace("listen = \"127.0.0.1:8001\"", "listen = \"127.0.0.1:0\"")
        .replace("admin = \"127.0.0.1:9091\"", "# no admin")
        .replace("name = \"node1\"", "name = \"node2\"");
    std::fs::write("/etc/locus/node-2.toml", node_2).unwrap();

    let sockets = tempfile::tempdir().unwrap();
    std::fs::set_permissions(sockets.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let (node_notify, node_2_notify, switch_notify) = (
        NotifySocket::new(sockets.path(), "node"),
        NotifySocket::new(sockets.path(), "node-2"),
        NotifySocket::new(sockets.path(), "switch"),
    );
    let (node, node_addr) = start_unit("locus-node.service", "", &node_notify, &pids, logs.path());
    let (node_2, node_2_addr) = start_unit("locus-node@.service", "2", &node_2_notify, &pids, logs.path());
    let (switch, switch_addr) = start_unit("locus-switch.service", "", &switch_notify, &pids, logs.path());
    assert_eq!((switch_addr.port(), node_addr.port()), (8080, 8001), "the default configuration's ports");

    let front = SocketAddr::from(([127, 0, 0, 1], 8080));
    wait_until("the switch serves / from node1", || get(front, "/").status == 200);
    let page = get(front, "/");
    assert_eq!(page.served_by(), Some("node1"));
    assert!(page.text().contains("Locus is serving"), "the packaged index page: {}", page.text());
    let direct = get(node_2_addr, "/");
    assert_eq!((direct.status, direct.served_by()), (200, Some("node2")));
    for admin in [9090, 9091] {
        let status = get(SocketAddr::from(([127, 0, 0, 1], admin)), "/locus/status");
        assert_eq!(status.status, 200, "admin status on port {admin}");
        let json: serde_json::Value = serde_json::from_str(&status.text()).expect("status is JSON");
        assert!(json.is_object(), "{json}");
    }

    // `locus ctl` over the packaged configuration's control socket.
    let ctl = succeeded("locus ctl status", &run("/usr/bin/locus", &["ctl", "status"]));
    assert!(ctl.contains("node1"), "locus ctl status names the node: {ctl}");

    reload_unit("locus-switch.service", "", &switch, &switch_notify);
    reload_unit("locus-node.service", "", &node, &node_notify);
    assert_eq!(get(front, "/").status, 200, "the switch serves after its reload");

    stop(switch, &switch_notify, "switch");
    stop(node_2, &node_2_notify, "node 2");
    stop(node, &node_notify, "node");
    pids.lock().unwrap().clear();

    drop(guard);
    assert!(!installed(), "purged");
    assert!(!exists("passwd", "locus") && !exists("group", "locus"), "postrm removed the locus user");
    for path in [
        "/usr/bin/locus",
        "/etc/locus",
        "/var/log/locus",
        "/usr/share/locus",
        "/usr/lib/systemd/system/locus-switch.service",
    ] {
        assert!(!Path::new(path).exists(), "{path} is gone after the purge");
    }
}
