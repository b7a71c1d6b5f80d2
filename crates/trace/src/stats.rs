//! Trace characterisation: `StatsAccumulator` takes records one at a time (memory grows with
//! distinct targets and clients, not with requests) and gives `TraceStats` — working set,
//! the LARD paper's "memory needed to cover X% of requests", one-timers, sizes, clients.

use std::collections::HashMap;
use std::fmt;

use serde::Serialize;

use crate::record::TraceRecord;

/// The shares of requests `TraceStats::coverage` reports by default.
pub const DEFAULT_COVERAGE_SHARES: [f64; 4] = [0.90, 0.95, 0.98, 0.99];

/// Memory needed to cover a share of the requests: the most requested targets (ties: the
/// smaller first) whose requests add up to at least `share` of all requests.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Coverage {
    /// Share of requests to cover (0.9 = 90%).
    pub share: f64,
    /// Requests the chosen targets receive (at least `share` of all).
    pub requests: u64,
    /// How many targets that takes.
    pub targets: u64,
    /// Their total size in bytes: the cache memory needed.
    pub bytes: u64,
}

/// Targets requested exactly once.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OneTimers {
    /// How many.
    pub targets: u64,
    /// Their share of all requests.
    pub request_share: f64,
    /// Their bytes.
    pub bytes: u64,
    /// Their share of all bytes requested.
    pub byte_share: f64,
    /// Their share of the unique bytes (the working set).
    pub unique_byte_share: f64,
}

/// Summary of a size distribution (nearest-rank percentiles).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SizeSummary {
    /// Mean in bytes.
    pub mean: f64,
    /// Median in bytes.
    pub median: u64,
    /// 90th percentile in bytes.
    pub p90: u64,
    /// Largest.
    pub max: u64,
}

/// Requests per client.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ClientSummary {
    /// Distinct clients.
    pub clients: u64,
    /// Mean requests per client.
    pub mean_requests: f64,
    /// Median requests per client.
    pub median_requests: u64,
    /// Most requests of one client.
    pub max_requests: u64,
}

/// The characterisation of a trace.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TraceStats {
    /// Requests.
    pub requests: u64,
    /// Distinct targets.
    pub unique_targets: u64,
    /// Sum of the sizes of all requests.
    pub total_bytes: u64,
    /// Sum of the sizes of the distinct targets (each at the largest size it was logged
    /// with): the working set.
    pub unique_bytes: u64,
    /// Memory needed to cover each requested share of the requests.
    pub coverage: Vec<Coverage>,
    /// Targets requested once.
    pub one_timers: OneTimers,
    /// Share of requests that go to the most requested target.
    pub top_target_share: f64,
    /// Sizes of the distinct targets.
    pub target_sizes: SizeSummary,
    /// Sizes over requests (each request counted at its target's size).
    pub request_sizes: SizeSummary,
    /// Requests per client.
    pub clients: ClientSummary,
    /// Requests with a dynamic cost class.
    pub dynamic_requests: u64,
    /// Their share of all requests.
    pub dynamic_share: f64,
    /// Time from the earliest to the latest request, if the trace has times.
    pub duration_seconds: Option<f64>,
    /// Requests per second over that time.
    pub request_rate: Option<f64>,
}

#[derive(Clone, Copy, Debug, Default)]
struct TargetTally {
    count: u64,
    size: u64,
}

/// Accumulates records into `TraceStats`.
#[derive(Debug, Default)]
pub struct StatsAccumulator {
    targets: HashMap<String, TargetTally>,
    clients: HashMap<u32, u64>,
    requests: u64,
    total_bytes: u64,
    dynamic: u64,
    time_range: Option<(f64, f64)>,
}

impl StatsAccumulator {
    /// An empty accumulator.
    pub fn new() -> StatsAccumulator {
        StatsAccumulator::default()
    }

    /// Count one record (taking its target string).
    pub fn add(&mut self, r: TraceRecord) {
        let tally = match self.targets.get_mut(r.target.as_str()) {
            Some(t) => t,
            None => self.targets.entry(r.target).or_default(),
        };
        tally.count += 1;
        tally.size = tally.size.max(r.size);
        *self.clients.entry(r.client).or_insert(0) += 1;
        self.requests += 1;
        self.total_bytes += r.size;
        if r.class.is_some() {
            self.dynamic += 1;
        }
        if let Some(t) = r.time {
            self.time_range = Some(match self.time_range {
                None => (t, t),
                Some((lo, hi)) => (lo.min(t), hi.max(t)),
            });
        }
    }

    /// Requests counted so far.
    pub fn requests(&self) -> u64 {
        self.requests
    }

    /// The statistics, with coverage for each of `coverage_shares` (each within 0..=1).
    pub fn finish(self, coverage_shares: &[f64]) -> TraceStats {
        let requests = self.requests;
        let share = |part: f64, whole: f64| if whole > 0.0 { part / whole } else { 0.0 };
        let mut tallies: Vec<TargetTally> = self.targets.into_values().collect();
        tallies.sort_unstable_by(|a, b| b.count.cmp(&a.count).then(a.size.cmp(&b.size)));
        let unique_bytes: u64 = tallies.iter().map(|t| t.size).sum();

        let mut shares: Vec<f64> = coverage_shares.iter().map(|s| s.clamp(0.0, 1.0)).collect();
        shares.sort_by(f64::total_cmp);
        let mut coverage = Vec::with_capacity(shares.len());
        let (mut covered, mut bytes, mut taken) = (0u64, 0u64, 0usize);
        for s in shares {
            // Requests to cover, exact for shares like 0.9 of 10 despite binary fractions.
            let needed = ((s * requests as f64) - 1e-9).ceil().max(0.0) as u64;
            while covered < needed && taken < tallies.len() {
                covered += tallies[taken].count;
                bytes += tallies[taken].size;
                taken += 1;
            }
            coverage.push(Coverage { share: s, requests: covered, targets: taken as u64, bytes });
        }

        let once: Vec<&TargetTally> = tallies.iter().filter(|t| t.count == 1).collect();
        let once_bytes: u64 = once.iter().map(|t| t.size).sum();
        let one_timers = OneTimers {
            targets: once.len() as u64,
            request_share: share(once.len() as f64, requests as f64),
            bytes: once_bytes,
            byte_share: share(once_bytes as f64, self.total_bytes as f64),
            unique_byte_share: share(once_bytes as f64, unique_bytes as f64),
        };

        let mut by_size: Vec<(u64, u64)> = tallies.iter().map(|t| (t.size, t.count)).collect();
        by_size.sort_unstable();
        let target_sizes = weighted_summary(&by_size, |_| 1);
        let request_sizes = weighted_summary(&by_size, |count| count);

        let mut per_client: Vec<u64> = self.clients.into_values().collect();
        per_client.sort_unstable();
        let clients = ClientSummary {
            clients: per_client.len() as u64,
            mean_requests: share(requests as f64, per_client.len() as f64),
            median_requests: nearest_rank(&per_client, 0.5),
            max_requests: per_client.last().copied().unwrap_or(0),
        };
        let duration_seconds = self.time_range.map(|(lo, hi)| hi - lo);
        TraceStats {
            requests,
            unique_targets: tallies.len() as u64,
            total_bytes: self.total_bytes,
            unique_bytes,
            coverage,
            one_timers,
            top_target_share: share(tallies.first().map_or(0, |t| t.count) as f64, requests as f64),
            target_sizes,
            request_sizes,
            clients,
            dynamic_requests: self.dynamic,
            dynamic_share: share(self.dynamic as f64, requests as f64),
            duration_seconds,
            request_rate: duration_seconds.filter(|d| *d > 0.0).map(|d| requests as f64 / d),
        }
    }
}

impl TraceStats {
    /// Statistics of `records` with the default coverage shares.
    pub fn from_records(records: impl IntoIterator<Item = TraceRecord>) -> TraceStats {
        let mut acc = StatsAccumulator::new();
        for r in records {
            acc.add(r);
        }
        acc.finish(&DEFAULT_COVERAGE_SHARES)
    }
}

fn nearest_rank(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Mean and nearest-rank percentiles of sizes sorted ascending, each with weight `weight(count)`.
fn weighted_summary(by_size: &[(u64, u64)], weight: impl Fn(u64) -> u64) -> SizeSummary {
    let total: u64 = by_size.iter().map(|&(_, c)| weight(c)).sum();
    if total == 0 {
        return SizeSummary::default();
    }
    let sum: f64 = by_size.iter().map(|&(s, c)| s as f64 * weight(c) as f64).sum();
    let at = |p: f64| {
        let rank = ((p * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        for &(s, c) in by_size {
            seen += weight(c);
            if seen >= rank {
                return s;
            }
        }
        by_size.last().map_or(0, |&(s, _)| s)
    };
    SizeSummary {
        mean: sum / total as f64,
        median: at(0.5),
        p90: at(0.9),
        max: by_size.last().map_or(0, |&(s, _)| s),
    }
}

/// `1536` → `1.5 KiB`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{bytes} B") } else { format!("{value:.1} {}", UNITS[unit]) }
}

fn percent(share: f64) -> String {
    format!("{:.2}%", share * 100.0)
}

impl fmt::Display for TraceStats {
    /// A two-column human-readable table.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rows: Vec<(String, String)> = vec![
            ("requests".into(), self.requests.to_string()),
            ("unique targets".into(), self.unique_targets.to_string()),
            ("bytes requested".into(), format!("{} ({} B)", human_bytes(self.total_bytes), self.total_bytes)),
            (
                "unique bytes (working set)".into(),
                format!("{} ({} B)", human_bytes(self.unique_bytes), self.unique_bytes),
            ),
        ];
        for c in &self.coverage {
            rows.push((
                format!("memory to cover {} of requests", percent(c.share)),
                format!("{} ({} targets)", human_bytes(c.bytes), c.targets),
            ));
        }
        let o = &self.one_timers;
        rows.push((
            "one-timers".into(),
            format!(
                "{} targets, {} of requests, {} of bytes requested, {} of unique bytes",
                o.targets,
                percent(o.request_share),
                percent(o.byte_share),
                percent(o.unique_byte_share)
            ),
        ));
        rows.push((
            "most requested target".into(),
            format!("{} of requests", percent(self.top_target_share)),
        ));
        for (name, s) in [("target sizes", &self.target_sizes), ("request sizes", &self.request_sizes)] {
            rows.push((
                name.into(),
                format!(
                    "mean {}, median {}, p90 {}, max {}",
                    human_bytes(s.mean.round() as u64),
                    human_bytes(s.median),
                    human_bytes(s.p90),
                    human_bytes(s.max)
                ),
            ));
        }
        let c = &self.clients;
        rows.push((
            "clients".into(),
            format!(
                "{}, requests per client: mean {:.1}, median {}, max {}",
                c.clients, c.mean_requests, c.median_requests, c.max_requests
            ),
        ));
        rows.push((
            "dynamic requests".into(),
            format!("{} ({})", self.dynamic_requests, percent(self.dynamic_share)),
        ));
        if let Some(d) = self.duration_seconds {
            let rate = self.request_rate.map_or("-".to_string(), |r| format!("{r:.1}"));
            rows.push(("duration".into(), format!("{d:.3} s, {rate} requests/s")));
        }
        let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        for (k, v) in rows {
            writeln!(f, "{k:<width$}  {v}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(counts_and_sizes: &[(u64, u64)]) -> Vec<TraceRecord> {
        let mut out = Vec::new();
        for (i, &(count, size)) in counts_and_sizes.iter().enumerate() {
            for k in 0..count {
                out.push(TraceRecord { client: k as u32 % 2, ..TraceRecord::get(format!("/t{i}"), size) });
            }
        }
        out
    }

    #[test]
    fn coverage_takes_the_most_requested_targets_until_the_share_is_reached() {
        // Counts 5,3,1,1 and sizes 10,20,30,40 over 10 requests.
        let stats = TraceStats::from_records(trace(&[(5, 10), (3, 20), (1, 30), (1, 40)]));
        assert_eq!(stats.requests, 10);
        assert_eq!(stats.unique_targets, 4);
        assert_eq!(stats.unique_bytes, 100);
        assert_eq!(stats.total_bytes, 5 * 10 + 3 * 20 + 30 + 40);
        // 90% of 10 = 9 requests: 5 + 3 + 1 → 10 + 20 + 30 bytes (the smaller of the tied
        // one-request targets first).
        assert_eq!(stats.coverage[0], Coverage { share: 0.9, requests: 9, targets: 3, bytes: 60 });
        // 95%, 98% and 99% of 10 need all 10 requests.
        for c in &stats.coverage[1..] {
            assert_eq!((c.requests, c.targets, c.bytes), (10, 4, 100), "{c:?}");
        }
        assert_eq!(stats.one_timers.targets, 2);
        assert!((stats.one_timers.request_share - 0.2).abs() < 1e-12);
        assert_eq!(stats.one_timers.bytes, 70);
        assert!((stats.one_timers.unique_byte_share - 0.7).abs() < 1e-12);
        assert!((stats.top_target_share - 0.5).abs() < 1e-12);
    }

    #[test]
    fn coverage_at_an_exact_share_boundary_does_not_take_an_extra_target() {
        let mut stats = StatsAccumulator::new();
        for r in trace(&[(8, 1), (1, 2), (1, 4)]) {
            stats.add(r);
        }
        let s = stats.finish(&[0.8, 0.5, 0.0]);
        assert_eq!(
            s.coverage.iter().map(|c| (c.share, c.bytes)).collect::<Vec<_>>(),
            [(0.0, 0), (0.5, 1), (0.8, 1)]
        );
    }

    #[test]
    fn size_and_client_summaries_are_nearest_rank_and_request_weighted() {
        let stats = TraceStats::from_records(trace(&[(5, 10), (3, 20), (1, 30), (1, 40)]));
        assert_eq!(stats.target_sizes, SizeSummary { mean: 25.0, median: 20, p90: 40, max: 40 });
        // Request sizes: 10×5, 20×3, 30, 40 → median 10 (5th of 10), p90 30 (9th).
        assert_eq!(stats.request_sizes.median, 10);
        assert_eq!(stats.request_sizes.p90, 30);
        assert!((stats.request_sizes.mean - 18.0).abs() < 1e-12);
        // Clients alternate 0, 1, 0, … within each target: client 0 gets 3+2+1+1 = 7, client 1 gets 3.
        assert_eq!(stats.clients.clients, 2);
        assert_eq!(stats.clients.max_requests, 7);
        assert_eq!(stats.clients.median_requests, 3);
        assert!((stats.clients.mean_requests - 5.0).abs() < 1e-12);
    }

    #[test]
    fn dynamic_share_duration_and_rate_come_from_classes_and_times() {
        let mut recs = trace(&[(4, 1)]);
        recs[0].class = Some(2);
        for (i, r) in recs.iter_mut().enumerate() {
            r.time = Some(10.0 - i as f64);
        }
        let stats = TraceStats::from_records(recs);
        assert_eq!(stats.dynamic_requests, 1);
        assert!((stats.dynamic_share - 0.25).abs() < 1e-12);
        assert_eq!(stats.duration_seconds, Some(3.0));
        assert!((stats.request_rate.unwrap() - 4.0 / 3.0).abs() < 1e-12);
        let table = stats.to_string();
        assert!(table.contains("memory to cover 90.00% of requests"), "{table}");
        assert!(table.contains("dynamic requests"), "{table}");
    }

    #[test]
    fn empty_trace_gives_zeros_not_nans() {
        let stats = TraceStats::from_records(Vec::new());
        assert_eq!(stats.requests, 0);
        assert_eq!(stats.coverage[0].bytes, 0);
        assert_eq!(stats.one_timers.request_share, 0.0);
        assert_eq!(stats.duration_seconds, None);
        assert!(serde_json::to_string(&stats).is_ok());
    }

    #[test]
    fn human_bytes_uses_binary_units() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(32 << 20), "32.0 MiB");
    }
}
