//! Telling a service manager (systemd's `Type=notify`) how the server is doing: `ready` once
//! the listeners are bound, `reloading` around a SIGHUP's reload, `stopping` at shutdown. Each
//! is one datagram to `$NOTIFY_SOCKET` (the `sd-notify` crate) and nothing when the variable
//! is unset, as it is outside systemd.

use sd_notify::NotifyState;

/// Tell the service manager the server is up: its listeners are bound and it accepts.
pub fn ready() {
    send("ready", &[NotifyState::Ready]);
}

/// Run `reload` between `RELOADING=1` (with the `MONOTONIC_USEC` that systemd 253's
/// `Type=notify-reload` requires) and `READY=1`, so `systemctl status` shows the unit
/// reloading meanwhile.
pub fn reloading<T>(reload: impl FnOnce() -> T) -> T {
    match NotifyState::monotonic_usec_now() {
        Ok(now) => send("reloading", &[NotifyState::Reloading, now]),
        Err(error) => tracing::warn!(%error, "service manager: no monotonic clock for RELOADING=1"),
    }
    let result = reload();
    send("ready", &[NotifyState::Ready]);
    result
}

/// Tell the service manager this process is the service's main process now and is up (a
/// switch that took over from the one the manager started: the unit needs
/// `NotifyAccess=all`).
pub fn took_over() {
    send("main pid", &[NotifyState::MainPid(std::process::id()), NotifyState::Ready]);
}

/// Tell the service manager the server is shutting down (it drains, then exits).
pub fn stopping() {
    send("stopping", &[NotifyState::Stopping]);
}

/// One notification; a failure is logged and otherwise ignored: the server serves either way,
/// and a manager that missed `READY=1` times the start out and says so itself.
fn send(what: &str, states: &[NotifyState]) {
    if let Err(error) = sd_notify::notify(states) {
        tracing::warn!(%error, "service manager: could not send {what} to $NOTIFY_SOCKET");
    }
}
