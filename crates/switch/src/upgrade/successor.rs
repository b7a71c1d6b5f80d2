//! SIGUSR2: start the next switch generation from the binary on disk (a package upgrade has
//! replaced it), with this process's arguments and `--upgrade-from` its control socket, as
//! NGINX's USR2 does. The new process takes the sockets over; this one then drains and exits.
//! Started by the running switch, it is in the same service (cgroup) and tells the service
//! manager it is the main process now (`MAINPID=`, the unit's `NotifyAccess=all`).

use std::ffi::OsString;
use std::path::Path;

/// Start the successor; it is waited for on a thread of its own, so a successor that fails to
/// start is reported (and reaped) while this switch serves on.
pub fn start_successor(control_socket: Option<&Path>) {
    let Some(socket) = control_socket else {
        tracing::error!(
            "upgrade (SIGUSR2) refused: it needs control_socket, where the new switch asks for the sockets"
        );
        return;
    };
    let mut args: Vec<OsString> = std::env::args_os().collect();
    if args.is_empty() {
        tracing::error!("upgrade (SIGUSR2) refused: this process's command line is unknown");
        return;
    }
    let program = args.remove(0);
    let mut args = without_upgrade_from(args);
    args.push("--upgrade-from".into());
    args.push(socket.as_os_str().to_owned());
    match std::process::Command::new(&program).args(&args).spawn() {
        Ok(mut child) => {
            let pid = child.id();
            tracing::info!(pid, program = %Path::new(&program).display(), "upgrade: the next switch started");
            let _ = std::thread::Builder::new().name("locus-successor".into()).spawn(move || {
                if let Ok(status) = child.wait() {
                    tracing::warn!(pid, %status, "upgrade: the next switch exited");
                }
            });
        }
        Err(e) => {
            tracing::error!(program = %Path::new(&program).display(), "upgrade: cannot start the next switch: {e}")
        }
    }
}

/// `args` without an earlier `--upgrade-from` (this process's own takeover) and its value.
fn without_upgrade_from(args: Vec<OsString>) -> Vec<OsString> {
    let mut kept = Vec::with_capacity(args.len());
    let mut skip_value = false;
    for arg in args {
        if std::mem::take(&mut skip_value) {
            continue;
        }
        match arg.to_str() {
            Some("--upgrade-from") => skip_value = true,
            Some(a) if a.starts_with("--upgrade-from=") => {}
            _ => kept.push(arg),
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_earlier_upgrade_from_is_dropped_in_either_form_and_the_rest_kept_in_order() {
        let args = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        let got = without_upgrade_from(args(&[
            "switch",
            "-c",
            "a.toml",
            "--upgrade-from",
            "/run/s",
            "--workers",
            "2",
        ]));
        assert_eq!(got, args(&["switch", "-c", "a.toml", "--workers", "2"]));
        let got = without_upgrade_from(args(&["switch", "--upgrade-from=/run/s", "-c", "a.toml"]));
        assert_eq!(got, args(&["switch", "-c", "a.toml"]));
    }
}
