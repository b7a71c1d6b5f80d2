//! `TerminationSignals`: SIGTERM and SIGINT held pending from start-up until the main thread
//! waits for them with sigwait, so a signal that comes before any event loop runs is not lost
//! (nor, with its default action, kills the process uncleanly).

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
        // SAFETY: an all-zero sigset_t is valid storage; sigemptyset initialises it.
        let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: `set` is valid and the signal numbers are constants.
        unsafe {
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGTERM);
            libc::sigaddset(&mut set, libc::SIGINT);
        }
        // SAFETY: `set` is initialised; the old mask is not wanted.
        let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
        if rc != 0 {
            return Err(std::io::Error::from_raw_os_error(rc));
        }
        Ok(TerminationSignals { set })
    }

    /// Block until SIGTERM or SIGINT arrives; returns the signal number.
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
}
