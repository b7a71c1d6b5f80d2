//! `wait_until`: poll a condition until it holds, failing the test with what it waited for
//! after a bound generous enough for a loaded 2-CPU machine.

use std::time::{Duration, Instant};

/// How long `wait_until` waits before it fails the test.
pub const WAIT_LIMIT: Duration = Duration::from_secs(20);

/// Wait (at most [`WAIT_LIMIT`], polling every 5 ms) until `ok` holds; panic naming `what`.
pub fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT_LIMIT;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}
