//! The guard of the tests that need root. Such a test is marked
//! `#[ignore = "needs root: ..."]`, so that without root cargo lists it as ignored by name;
//! `./quickstart test` runs it with `--include-ignored` when it is root. Run without root
//! anyway, it calls one of these first and fails with why instead of passing silently.

use std::process::Command;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    (unsafe { libc::geteuid() }) == 0
}

/// Panics unless this process runs as root; `needs` says what for (say, "TCP_REPAIR needs
/// CAP_NET_ADMIN").
pub fn require_root(needs: &str) {
    assert!(
        is_root(),
        "this test needs root ({needs}): run it as root, as `./quickstart test` does (or `cargo test -- \
         --ignored` as root)"
    );
}

/// Panics unless this process may make network namespaces: root, and `ip` (iproute2) to run.
/// `needs` says what for.
pub fn require_namespaces(needs: &str) {
    require_root(needs);
    let ip_runs = Command::new("ip").arg("-V").output().is_ok_and(|o| o.status.success());
    assert!(ip_runs, "this test needs `ip` ({needs}): apt-get install iproute2");
}
