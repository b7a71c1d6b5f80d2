//! `TerminationSignals`: SIGTERM and SIGINT (and, for a server, SIGHUP: reload) held pending
//! from start-up until the main thread waits for them with sigwait, so a signal that comes
//! before any event loop runs is not lost (nor, with its default action, kills the process
//! uncleanly).

/// SIGTERM and SIGINT, blocked in the calling thread (and so in every thread it starts
/// afterwards) so that they stay pending until `wait` takes them: no signal is lost however
/// early it comes, and no event loop has to be running to see it. Block them first thing in
/// `main`'s thread, before starting threads and before telling anyone the address.
pub struct TerminationSignals {
    set: libc::sigset_t,
}

impl TerminationSignals {
    /// Block SIGTERM and SIGINT in the calling thread.
    pub fn block() -> std::io::Result<TerminationSignals> {
        TerminationSignals::block_set(&[libc::SIGTERM, libc::SIGINT])
    }

    /// Block SIGTERM, SIGINT and SIGHUP: a server's `wait` then also returns SIGHUP, which
    /// asks it to reload what it can (certificates, keys) and go on.
    pub fn block_with_reload() -> std::io::Result<TerminationSignals> {
        TerminationSignals::block_set(&[libc::SIGTERM, libc::SIGINT, libc::SIGHUP])
    }

    /// `block_with_reload` and SIGUSR2: a switch's `wait_serving` also returns it, which asks
    /// it to start its successor (a binary upgrade, as NGINX's USR2).
    pub fn block_with_reload_and_upgrade() -> std::io::Result<TerminationSignals> {
        TerminationSignals::block_set(&[libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGUSR2])
    }

    fn block_set(signals: &[i32]) -> std::io::Result<TerminationSignals> {
        // SAFETY: an all-zero sigset_t is valid storage; sigemptyset initialises it.
        let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: `set` is valid and the signal numbers are constants.
        unsafe {
            libc::sigemptyset(&mut set);
            for &s in signals {
                libc::sigaddset(&mut set, s);
            }
        }
        // SAFETY: `set` is initialised; the old mask is not wanted.
        let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
        if rc != 0 {
            return Err(std::io::Error::from_raw_os_error(rc));
        }
        Ok(TerminationSignals { set })
    }

    /// Block until one of the blocked signals arrives; returns its number.
    pub fn wait(&self) -> std::io::Result<i32> {
        loop {
            let mut signal = 0;
            // SAFETY: `self.set` is initialised and `signal` is writable.
            let rc = unsafe { libc::sigwait(&self.set, &mut signal) };
            match rc {
                0 => return Ok(signal),
                libc::EINTR => continue,
                e => return Err(std::io::Error::from_raw_os_error(e)),
            }
        }
    }
}

impl TerminationSignals {
    /// Wait for SIGTERM or SIGINT (returned), calling `reload` at each SIGHUP meanwhile.
    pub fn wait_reloading(&self, reload: impl FnMut()) -> std::io::Result<i32> {
        self.wait_serving(reload, || {})
    }

    /// `wait_reloading`, calling `upgrade` at each SIGUSR2 as well (when it is blocked).
    pub fn wait_serving(&self, mut reload: impl FnMut(), mut upgrade: impl FnMut()) -> std::io::Result<i32> {
        loop {
            match self.wait()? {
                libc::SIGHUP => reload(),
                libc::SIGUSR2 => upgrade(),
                signal => return Ok(signal),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_sent_before_the_wait_is_held_and_then_taken() {
        let signals = TerminationSignals::block().unwrap();
        // SAFETY: raise a signal at this very thread, where it is blocked.
        unsafe { libc::pthread_kill(libc::pthread_self(), libc::SIGTERM) };
        assert_eq!(signals.wait().unwrap(), libc::SIGTERM, "pending, not delivered");
    }

    #[test]
    fn each_sighup_reloads_and_the_wait_ends_at_a_termination_signal() {
        let signals = TerminationSignals::block_with_reload().unwrap();
        // SAFETY: raise signals at this very thread, where they are blocked (SIGHUP twice is
        // one pending SIGHUP, so it is sent, taken, and sent again).
        let raise = |s| unsafe { libc::pthread_kill(libc::pthread_self(), s) };
        let mut reloads = 0;
        raise(libc::SIGHUP);
        let got = signals.wait_reloading(|| {
            reloads += 1;
            if reloads == 1 {
                raise(libc::SIGHUP);
            } else {
                raise(libc::SIGINT);
            }
        });
        assert_eq!((got.unwrap(), reloads), (libc::SIGINT, 2));
    }
}
