//! Per-second CPU peaks of the peer study: at each one-second tick of the measured window, the
//! CPU work each server took on in that second. An average over the run hides a load that
//! moves between servers; these show how often some server was saturated, and which share of
//! server-seconds were.

/// Work at or above this share of a second counts as a saturated second.
const SATURATED: f64 = 0.95;

/// The running tally.
#[derive(Clone, Debug, Default)]
pub struct CpuPeaks {
    last_busy: Vec<u64>,
    seconds: u64,
    peak_sum: f64,
    saturated: u64,
    server_seconds: u64,
}

impl CpuPeaks {
    /// A tick at which the servers' CPU busy times (booked work, ns) are `busy`, `elapsed_ns`
    /// after the previous one; `measured` is false in the warm-up, which only sets the baseline.
    pub fn tick(&mut self, busy: impl Iterator<Item = u64>, elapsed_ns: u64, measured: bool) {
        let busy: Vec<u64> = busy.collect();
        if measured && self.last_busy.len() == busy.len() && elapsed_ns > 0 {
            let shares = (busy.iter().zip(&self.last_busy))
                .map(|(&now, &then)| (now.saturating_sub(then) as f64 / elapsed_ns as f64).min(1.0));
            let mut peak: f64 = 0.0;
            for share in shares {
                peak = peak.max(share);
                self.saturated += u64::from(share >= SATURATED);
                self.server_seconds += 1;
            }
            self.peak_sum += peak;
            self.seconds += 1;
        }
        self.last_busy = busy;
    }

    /// Mean over the measured seconds of the busiest server's share.
    pub fn mean_peak(&self) -> f64 {
        if self.seconds == 0 { 0.0 } else { self.peak_sum / self.seconds as f64 }
    }

    /// Share of measured server-seconds at or above 95% CPU.
    pub fn saturated_share(&self) -> f64 {
        if self.server_seconds == 0 { 0.0 } else { self.saturated as f64 / self.server_seconds as f64 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn a_load_moving_between_servers_shows_as_peaks_that_the_average_hides() {
        let mut p = CpuPeaks::default();
        p.tick([0, 0].into_iter(), S, false);
        // Server 0 saturated in the first second, server 1 in the second: each averages 50%.
        p.tick([S, 0].into_iter(), S, true);
        p.tick([S, S].into_iter(), S, true);
        assert_eq!(p.mean_peak(), 1.0);
        assert_eq!(p.saturated_share(), 0.5);
    }

    #[test]
    fn warm_up_ticks_only_set_the_baseline_and_booked_backlog_caps_at_one() {
        let mut p = CpuPeaks::default();
        p.tick([5 * S].into_iter(), S, false);
        assert_eq!((p.mean_peak(), p.saturated_share()), (0.0, 0.0));
        p.tick([8 * S].into_iter(), S, true);
        p.tick([8 * S + S / 2].into_iter(), S, true);
        assert_eq!(p.mean_peak(), 0.75);
        assert_eq!(p.saturated_share(), 0.5);
    }
}
