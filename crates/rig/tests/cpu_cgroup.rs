//! A real CPU limit through a cgroup: a busy loop under 0.25 CPU gets at most about a quarter
//! of the wall time while one beside it, unlimited, gets more; the cgroup is gone once its
//! guard drops (also when the test panics).

use std::process::Command;
use std::time::{Duration, Instant};

use locus_rig::{ChildGuard, CpuCgroup, detect_cpu_hierarchy, process_tree_cpu};

const NEEDS: &str = "makes a cgroup in the host's cpu controller";

/// A shell busy loop, started under `group` if given.
fn busy_loop(name: &str, group: Option<&CpuCgroup>, log: &std::path::Path) -> ChildGuard {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "while :; do :; done"]);
    if let Some(g) = group {
        g.enter_on_exec(&mut cmd).unwrap();
    }
    ChildGuard::spawn(name, cmd, log).unwrap()
}

#[test]
#[ignore = "needs root: makes a cgroup in the host's cpu controller"]
fn a_quarter_cpu_cgroup_holds_a_busy_loop_to_a_quarter_of_wall_time_and_is_removed() {
    locus_test_support::require_root(NEEDS);
    let hierarchy = detect_cpu_hierarchy().expect("this host has a cgroup cpu controller");
    eprintln!("mechanism: {}", hierarchy.mechanism.describe());
    let dir = tempfile::tempdir().unwrap();
    let group = CpuCgroup::create_in(&hierarchy, "busy", 0.25).unwrap();
    let path = group.path().to_path_buf();
    assert!(path.join("cgroup.procs").exists());
    {
        // Declared before the children: dropped after them, as `Server` drops its cgroup.
        let group = group;
        let limited = busy_loop("limited", Some(&group), &dir.path().join("limited.log"));
        let free = busy_loop("free", None, &dir.path().join("free.log"));
        let procs = std::fs::read_to_string(path.join("cgroup.procs")).unwrap();
        assert!(procs.split_whitespace().any(|p| p == limited.pid().to_string()), "joined: {procs}");
        let l0 = process_tree_cpu(limited.pid()).unwrap();
        let f0 = process_tree_cpu(free.pid()).unwrap();
        let start = Instant::now();
        // Measure until the unlimited loop has had a full CPU-second (observable, not a sleep).
        let mut free_cpu = Duration::ZERO;
        while free_cpu < Duration::from_secs(1) {
            assert!(start.elapsed() < Duration::from_secs(120), "the unlimited loop got no CPU");
            std::thread::sleep(Duration::from_millis(50));
            free_cpu = process_tree_cpu(free.pid()).unwrap() - f0;
        }
        let limited_cpu = process_tree_cpu(limited.pid()).unwrap() - l0;
        let wall = start.elapsed();
        eprintln!("wall {wall:?}: limited {limited_cpu:?}, unlimited {free_cpu:?}");
        // Tolerance: 20 % of the quota plus two 100 ms periods (CFS may run a period's quota at
        // either end of the interval, and /proc's CPU time is in 10 ms ticks).
        let bound = wall.mul_f64(0.25 * 1.2) + Duration::from_millis(200);
        assert!(limited_cpu <= bound, "limited used {limited_cpu:?} in {wall:?} (bound {bound:?})");
        assert!(free_cpu > limited_cpu, "unlimited {free_cpu:?} <= limited {limited_cpu:?}");
        drop(limited);
        drop(free);
    }
    assert!(!path.exists(), "{} remains after its guard dropped", path.display());
}

#[test]
#[ignore = "needs root: makes a cgroup in the host's cpu controller"]
fn a_cgroup_is_removed_when_the_test_holding_it_panics() {
    locus_test_support::require_root(NEEDS);
    let dir = tempfile::tempdir().unwrap();
    let mut seen = None;
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let group = CpuCgroup::create("panics", 0.5).unwrap();
        seen = Some(group.path().to_path_buf());
        let _child = busy_loop("doomed", Some(&group), &dir.path().join("doomed.log"));
        panic!("on purpose");
    }));
    assert!(result.is_err());
    let path = seen.expect("the cgroup was made");
    assert!(!path.exists(), "{} remains after a panic", path.display());
}

#[test]
#[ignore = "needs root: makes a cgroup in the host's cpu controller and sweeps stale labs"]
fn the_stale_lab_sweep_removes_cgroups_of_a_dead_run_and_keeps_this_runs() {
    locus_test_support::require_namespaces("sweeps stale labs (namespaces, bridges, cgroups)");
    let hierarchy = detect_cpu_hierarchy().expect("this host has a cgroup cpu controller");
    // A pid that has exited: a run that was killed.
    let mut done = Command::new("true").spawn().unwrap();
    let dead = done.id();
    done.wait().unwrap();
    let stale = hierarchy.base.join(format!("locus-{dead}-cpu"));
    std::fs::create_dir_all(stale.join("0-node1")).unwrap();
    let live = CpuCgroup::create_in(&hierarchy, "live", 0.5).unwrap();
    let report = locus_rig::clean_stale_labs().unwrap();
    let stale_left = stale.exists();
    let live_left = live.path().exists();
    drop(live);
    let _ = std::fs::remove_dir(stale.join("0-node1"));
    let _ = std::fs::remove_dir(&stale);
    assert!(!stale_left, "{} remains; report: {report:?}", stale.display());
    assert!(report.cgroups.contains(&stale), "{report:?}");
    assert!(live_left, "a live run's cgroup was removed");
}
