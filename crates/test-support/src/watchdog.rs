//! A watchdog for tests that must not hang: past its limit it runs the test's clean-up and
//! ends the whole test process with a failure.

use std::time::Duration;

/// Start a thread that, if the test process still runs `limit` from now, prints that `name`
/// overran, runs `clean_up` (say, tearing down what the test made outside the process) and
/// exits with status 101, the status of a failed test run. What `clean_up` returns is
/// dropped.
pub fn watchdog<T>(name: &'static str, limit: Duration, clean_up: impl FnOnce() -> T + Send + 'static) {
    std::thread::spawn(move || {
        std::thread::sleep(limit);
        eprintln!("{name}: still running after {limit:?}: cleaning up and exiting");
        clean_up();
        std::process::exit(101);
    });
}
