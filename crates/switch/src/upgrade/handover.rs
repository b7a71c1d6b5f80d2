//! The running switch's side of a binary upgrade: offer its listening sockets to the process
//! that asked on the control socket, send them, and once the new switch says it serves, stop
//! accepting and drain. Refused while this switch's own predecessor is still draining (two
//! generations at most), and after it has handed its sockets over once.

use super::{MAX_FDS, TAKEOVER};
use crate::state::Shared;
use sendfd::SendWithFd;
use serde_json::json;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

/// How long the new switch may take to start once it has the sockets.
const START_LIMIT: Duration = Duration::from_secs(120);

/// Answer a `takeover` asked on `stream` (blocking: run it off the event loop).
pub fn hand_over(shared: &Arc<Shared>, mut stream: UnixStream) {
    match offer(shared, &mut stream) {
        Ok(()) => {}
        Err(Refusal::Before(why)) => {
            shared.counters.ctl_refused.fetch_add(1, Relaxed);
            tracing::warn!("upgrade: {TAKEOVER} refused: {why}");
            let _ = stream.write_all(format!("{}\n", json!({"ok": false, "error": why})).as_bytes());
        }
        Err(Refusal::After(why)) => {
            tracing::warn!("upgrade: the new switch did not take over ({why}); this switch serves on");
        }
    }
}

/// Why a handover did not happen: before the sockets were offered (told to the asker), or
/// after (the new switch failed to start; the sockets were only shared, this switch serves on).
enum Refusal {
    Before(String),
    After(String),
}

fn offer(shared: &Arc<Shared>, stream: &mut UnixStream) -> Result<(), Refusal> {
    // Held to the end: a second takeover asked meanwhile (the control socket is shared with
    // the new switch now, so either may take the connection) waits here, then is refused.
    let guard = shared.upgrade_sockets.lock();
    if shared.handed_over.load(Relaxed) {
        return Err(Refusal::Before(
            "this switch has handed its sockets over already; ask again (the new switch serves the socket)"
                .into(),
        ));
    }
    if let Some(pid) = shared.predecessor_draining() {
        return Err(Refusal::Before(format!(
            "busy: the previous generation (pid {pid}) is still draining; at most two generations run at once"
        )));
    }
    let Some(sockets) = guard.as_ref() else { return Err(Refusal::Before("no sockets to hand over".into())) };
    let counts = sockets.counts();
    if counts.total() > MAX_FDS {
        return Err(Refusal::Before(format!(
            "{} sockets are more than one handover carries ({MAX_FDS})",
            counts.total()
        )));
    }
    let vip = shared.handoff.as_ref().and_then(|p| p.vip());
    let offer = json!({"ok": true, "pid": std::process::id(), "counts": counts, "handoff_vip": vip});
    let io = |e: std::io::Error| Refusal::After(e.to_string());
    stream.write_all(format!("{offer}\n").as_bytes()).map_err(io)?;
    let mut reader = BufReader::new(stream.try_clone().map_err(io)?);
    let mut line = String::new();
    reader.read_line(&mut line).map_err(io)?;
    if line.trim() != "fds" {
        return Err(Refusal::After(format!("expected `fds`, read {line:?}")));
    }
    stream.send_with_fd(b"F", &sockets.raw_fds()).map_err(io)?;
    stream.set_read_timeout(Some(START_LIMIT)).map_err(io)?;
    line.clear();
    reader.read_line(&mut line).map_err(io)?;
    if line.trim() != "ready" {
        return Err(Refusal::After(format!("no `ready` within {} s", START_LIMIT.as_secs())));
    }
    let successor = stream.try_clone().map_err(io)?;
    shared.handed_over.store(true, Relaxed);
    drop(guard);
    step_down(shared, successor);
    Ok(())
}

/// The new switch serves on the sockets: stop accepting, drain, keep `successor` open until
/// this process is gone, and leave the control socket's file to the new switch.
fn step_down(shared: &Arc<Shared>, successor: UnixStream) {
    *shared.successor.lock() = Some(successor);
    tracing::info!("upgrade: the new switch serves; this one stops accepting and drains");
    shared.shutting_down.store(true, Relaxed);
    shared.shutdown_tx.send_replace(true);
    if let Some(exit) = shared.on_handed_over.get() {
        exit();
    }
}
