//! Counting a run: `ErrorKind` and `ErrorCounts` (errors by kind), `LatencyReport` (an HDR
//! histogram of latencies in microseconds with its percentiles), `ThreadStats` (everything
//! one worker thread counted — with the fate of each measured request, `RequestAccounting` —
//! merged across threads at the end) and `LiveCounters` (what the progress line reads while
//! the run goes on).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use hdrhistogram::Histogram;
use serde::{Serialize, Serializer};

use crate::accounting::RequestAccounting;
use crate::verifier::{Mismatch, MismatchKind};

/// Kinds of error counted in a report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The connection could not be opened.
    Connect,
    /// The connection was reset or closed before the response ended, or a write failed.
    Closed,
    /// No complete response within the timeout.
    Timeout,
    /// A response head or body that breaks HTTP/1.1 framing, or an HTTP/2 stream the client
    /// reset because its response broke the protocol (a bad header, a wrong Content-Length).
    Framing,
    /// A response with a 4xx status.
    Status4xx,
    /// A response with a 5xx status.
    Status5xx,
    /// Open loop: every connection was busy at the request's scheduled time.
    Late,
    /// HTTP/2: the server reset the request's stream (RST_STREAM).
    Reset,
    /// HTTP/2: the server's GOAWAY ended the connection before the request was answered.
    GoAway,
    /// HTTP/2 could not be spoken: the server did not select `h2` by ALPN, or broke the
    /// protocol on the connection as a whole (the client's own GOAWAY: e.g. an HTTP/1.1 answer
    /// to the connection preface).
    Protocol,
}

impl ErrorKind {
    /// All kinds, in report order.
    pub const ALL: [ErrorKind; 10] = [
        ErrorKind::Connect,
        ErrorKind::Closed,
        ErrorKind::Timeout,
        ErrorKind::Framing,
        ErrorKind::Status4xx,
        ErrorKind::Status5xx,
        ErrorKind::Late,
        ErrorKind::Reset,
        ErrorKind::GoAway,
        ErrorKind::Protocol,
    ];

    /// The key used in reports.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Connect => "connect",
            ErrorKind::Closed => "closed",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Framing => "framing",
            ErrorKind::Status4xx => "status_4xx",
            ErrorKind::Status5xx => "status_5xx",
            ErrorKind::Late => "late",
            ErrorKind::Reset => "reset",
            ErrorKind::GoAway => "goaway",
            ErrorKind::Protocol => "protocol",
        }
    }

    /// Whether the request got no usable response (as opposed to an error status or lateness).
    pub fn is_failure(self) -> bool {
        !matches!(self, ErrorKind::Status4xx | ErrorKind::Status5xx | ErrorKind::Late)
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Errors counted by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ErrorCounts([u64; ErrorKind::ALL.len()]);

impl ErrorCounts {
    /// Count `n` errors of `kind`.
    pub fn add(&mut self, kind: ErrorKind, n: u64) {
        self.0[kind.index()] += n;
    }

    /// Errors of `kind`.
    pub fn get(&self, kind: ErrorKind) -> u64 {
        self.0[kind.index()]
    }

    /// All errors.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// Add another set of counts.
    pub fn merge(&mut self, other: &ErrorCounts) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a += b;
        }
    }
}

impl Serialize for ErrorCounts {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(ErrorKind::ALL.iter().map(|k| (k.name(), self.get(*k))))
    }
}

/// Mismatches counted by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MismatchCounts([u64; 4]);

impl MismatchCounts {
    /// Count one mismatch of `kind`.
    pub fn add(&mut self, kind: MismatchKind) {
        self.0[kind as usize] += 1;
    }

    /// Mismatches of `kind`.
    pub fn get(&self, kind: MismatchKind) -> u64 {
        self.0[kind as usize]
    }

    /// All mismatches.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    fn merge(&mut self, other: &MismatchCounts) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a += b;
        }
    }
}

impl Serialize for MismatchCounts {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(MismatchKind::ALL.iter().map(|k| (k.name(), self.get(*k))))
    }
}

/// Highest latency the histogram holds exactly (an hour, in microseconds); longer ones are
/// recorded as this.
const MAX_LATENCY_US: u64 = 3_600_000_000;

/// Latencies in microseconds (3 significant digits) and their summary.
#[derive(Clone, Debug)]
pub struct LatencyReport {
    histogram: Histogram<u64>,
}

impl Default for LatencyReport {
    fn default() -> Self {
        LatencyReport::new()
    }
}

impl LatencyReport {
    /// An empty report.
    pub fn new() -> LatencyReport {
        let histogram = Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("valid histogram bounds");
        LatencyReport { histogram }
    }

    /// Record one latency.
    pub fn record_us(&mut self, us: u64) {
        self.histogram.saturating_record(us.clamp(1, MAX_LATENCY_US));
    }

    /// Add every sample of `other`.
    pub fn merge(&mut self, other: &LatencyReport) {
        // Same bounds on both sides, so adding cannot fail; saturate if it ever did.
        if self.histogram.add(&other.histogram).is_err() {
            for v in other.histogram.iter_recorded() {
                self.histogram.saturating_record_n(v.value_iterated_to(), v.count_at_value());
            }
        }
    }

    /// Samples recorded.
    pub fn count(&self) -> u64 {
        self.histogram.len()
    }

    /// The latency at quantile `q` (0..=1) in milliseconds; 0 when empty.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        if self.histogram.is_empty() {
            return 0.0;
        }
        self.histogram.value_at_quantile(q) as f64 / 1000.0
    }

    /// Mean latency in milliseconds; 0 when empty.
    pub fn mean_ms(&self) -> f64 {
        if self.histogram.is_empty() { 0.0 } else { self.histogram.mean() / 1000.0 }
    }

    /// Largest latency in milliseconds; 0 when empty.
    pub fn max_ms(&self) -> f64 {
        if self.histogram.is_empty() { 0.0 } else { self.histogram.max() as f64 / 1000.0 }
    }
}

/// The TLS handshakes a run's connections made: full or resumed, and how long each took
/// from the end of the TCP connect to the handshake's end.
#[derive(Clone, Debug, Default)]
pub struct HandshakeStats {
    pub full: u64,
    pub resumed: u64,
    pub latency: LatencyReport,
}

impl HandshakeStats {
    /// Count one handshake of `us` microseconds.
    pub fn record(&mut self, resumed: bool, us: u64) {
        if resumed {
            self.resumed += 1;
        } else {
            self.full += 1;
        }
        self.latency.record_us(us);
    }

    fn merge(&mut self, other: &HandshakeStats) {
        self.full += other.full;
        self.resumed += other.resumed;
        self.latency.merge(&other.latency);
    }
}

/// What the live surfer counted (measured requests only, except `sessions` started).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SurfCounts {
    /// Sessions started in the measured time.
    pub sessions: u64,
    /// HTML pages received (the entry and links followed).
    pub pages: u64,
    /// Embedded objects requested.
    pub embeds: u64,
    /// Links followed to something other than a page (the client went back).
    pub leaves: u64,
    /// Links and embeds to hosts outside the allow-list (not followed).
    pub external_links: u64,
    /// Responses from a co-op's replica (a `/~migrate/` URL or `X-Locus-DC: replica`).
    pub replica_responses: u64,
    /// Connections opened in the measured time.
    pub connections: u64,
    /// Responses by the server (`host:port`) that sent them.
    pub requests_by_server: BTreeMap<String, u64>,
}

impl SurfCounts {
    /// One more response from `authority`.
    pub fn count_server(&mut self, authority: &str) {
        match self.requests_by_server.get_mut(authority) {
            Some(n) => *n += 1,
            None => {
                self.requests_by_server.insert(authority.to_string(), 1);
            }
        }
    }

    fn merge(&mut self, other: &SurfCounts) {
        self.sessions += other.sessions;
        self.pages += other.pages;
        self.embeds += other.embeds;
        self.leaves += other.leaves;
        self.external_links += other.external_links;
        self.replica_responses += other.replica_responses;
        self.connections += other.connections;
        for (k, n) in &other.requests_by_server {
            *self.requests_by_server.entry(k.clone()).or_default() += n;
        }
    }
}

/// Everything one worker thread counted over the measured part of a run.
#[derive(Clone, Debug, Default)]
pub struct ThreadStats {
    pub latency: LatencyReport,
    /// Responses received (any status).
    pub requests: u64,
    /// Those of them to dynamic targets of the mix.
    pub dynamic_requests: u64,
    /// Bytes of those responses on the wire.
    pub bytes: u64,
    pub errors: ErrorCounts,
    /// Responses by status class: `1xx` … `5xx`, and `other`.
    pub status_classes: [u64; 6],
    /// Responses checked against an expectation (warm-up included).
    pub verified: u64,
    pub mismatches: MismatchCounts,
    /// The first few mismatches.
    pub mismatch_samples: Vec<Mismatch>,
    /// Connections opened (warm-up included).
    pub connections: u64,
    /// When the last measured response arrived.
    pub last_response: Option<Instant>,
    /// The live surfer's counts.
    pub surf: SurfCounts,
    /// TLS handshakes (warm-up included).
    pub handshakes: HandshakeStats,
    /// Where each measured request ended.
    pub accounting: RequestAccounting,
}

impl ThreadStats {
    /// Count a response's status class.
    pub fn count_status(&mut self, status: u16) {
        let class = match status {
            100..=599 => (status / 100 - 1) as usize,
            _ => 5,
        };
        self.status_classes[class] += 1;
    }

    /// A measured request failed with `kind` (its error is counted apart, by the caller).
    pub fn count_failure(&mut self, kind: ErrorKind, n: u64) {
        self.accounting.failed += n;
        if kind == ErrorKind::Timeout {
            self.accounting.timeouts += n;
        }
    }

    /// A measured request still unanswered when the window ended, after waiting `waited_us`:
    /// counted outstanding, its latency censored at that wait (a lower bound).
    pub fn count_outstanding(&mut self, waited_us: u64) {
        self.accounting.outstanding += 1;
        self.latency.record_us(waited_us);
    }

    /// Add another thread's counts; keeps at most `max_samples` mismatch samples.
    pub fn merge(&mut self, other: &ThreadStats, max_samples: usize) {
        self.latency.merge(&other.latency);
        self.requests += other.requests;
        self.dynamic_requests += other.dynamic_requests;
        self.bytes += other.bytes;
        self.errors.merge(&other.errors);
        for (a, b) in self.status_classes.iter_mut().zip(other.status_classes) {
            *a += b;
        }
        self.verified += other.verified;
        self.mismatches.merge(&other.mismatches);
        let room = max_samples.saturating_sub(self.mismatch_samples.len());
        self.mismatch_samples.extend(other.mismatch_samples.iter().take(room).cloned());
        self.connections += other.connections;
        self.last_response = self.last_response.max(other.last_response);
        self.surf.merge(&other.surf);
        self.handshakes.merge(&other.handshakes);
        self.accounting.merge(&other.accounting);
    }

    /// Status classes as a map (`"2xx": n`), classes never seen left out.
    pub fn status_map(&self) -> BTreeMap<String, u64> {
        let names = ["1xx", "2xx", "3xx", "4xx", "5xx", "other"];
        names
            .iter()
            .zip(self.status_classes)
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| (k.to_string(), n))
            .collect()
    }
}

/// Running totals of one worker thread, written only by it and read by the progress line.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct LiveCounters {
    requests: AtomicU64,
    errors: AtomicU64,
}

impl LiveCounters {
    /// One more measured response (single writer: a load and a store, no locked instruction).
    pub fn add_request(&self) {
        self.requests.store(self.requests.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    /// More measured errors.
    pub fn add_errors(&self, n: u64) {
        self.errors.store(self.errors.load(Ordering::Relaxed) + n, Ordering::Relaxed);
    }

    /// (requests, errors) so far.
    pub fn read(&self) -> (u64, u64) {
        (self.requests.load(Ordering::Relaxed), self.errors.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_uniform_samples_are_within_hdr_precision() {
        let mut r = LatencyReport::new();
        for us in 1..=100_000u64 {
            r.record_us(us);
        }
        for (q, expect_ms) in [(0.5, 50.0), (0.9, 90.0), (0.99, 99.0), (0.999, 99.9), (1.0, 100.0)] {
            let got = r.quantile_ms(q);
            assert!((got / expect_ms - 1.0).abs() < 0.002, "q{q}: {got} ms, expected {expect_ms}");
        }
        assert!((r.mean_ms() - 50.0005).abs() < 0.05, "{}", r.mean_ms());
        assert!((r.max_ms() - 100.0).abs() < 0.1);
        assert_eq!(r.count(), 100_000);
        let empty = LatencyReport::new();
        assert_eq!((empty.quantile_ms(0.5), empty.mean_ms(), empty.max_ms()), (0.0, 0.0, 0.0));
    }

    #[test]
    fn a_single_outlier_shows_in_max_and_p999_but_not_p99() {
        let mut r = LatencyReport::new();
        for _ in 0..999 {
            r.record_us(1000);
        }
        r.record_us(2_000_000);
        assert!((r.quantile_ms(0.99) - 1.0).abs() < 0.01);
        assert!((r.max_ms() - 2000.0).abs() < 2.0);
        assert!(r.quantile_ms(1.0) > 1900.0);
        r.record_us(10 * MAX_LATENCY_US);
        assert!(r.max_ms() >= 3_600_000.0 * 0.999, "saturated, not dropped");
    }

    #[test]
    fn merged_thread_stats_and_their_accounting_equal_one_thread_that_saw_everything() {
        let mut parts = vec![ThreadStats::default(), ThreadStats::default(), ThreadStats::default()];
        let mut all = ThreadStats::default();
        for i in 0..30_000u64 {
            let us = 50 + (i * 7919) % 20_000;
            let p = &mut parts[(i % 3) as usize];
            p.latency.record_us(us);
            p.requests += 1;
            p.bytes += 100;
            p.count_status(200 + (i % 2) as u16 * 300);
            all.latency.record_us(us);
            all.requests += 1;
            all.bytes += 100;
            all.count_status(200 + (i % 2) as u16 * 300);
        }
        parts[1].errors.add(ErrorKind::Timeout, 3);
        parts[1].count_failure(ErrorKind::Timeout, 3);
        parts[0].count_failure(ErrorKind::Closed, 1);
        parts[2].count_outstanding(25_000);
        parts[0].count_outstanding(30_000);
        all.latency.record_us(25_000);
        all.latency.record_us(30_000);
        for p in &mut parts {
            p.accounting.sent = p.requests + p.accounting.failed + p.accounting.outstanding;
        }
        parts[2].errors.add(ErrorKind::Late, 2);
        parts[2].mismatches.add(MismatchKind::Checksum);
        let mut merged = ThreadStats::default();
        for p in &parts {
            merged.merge(p, 5);
        }
        for q in [0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(merged.latency.quantile_ms(q), all.latency.quantile_ms(q), "q{q}");
        }
        assert_eq!(merged.latency.mean_ms(), all.latency.mean_ms());
        assert_eq!((merged.requests, merged.bytes), (30_000, 3_000_000));
        assert_eq!(merged.status_classes, all.status_classes);
        assert_eq!(merged.errors.total(), 5);
        assert_eq!(merged.errors.get(ErrorKind::Timeout), 3);
        assert_eq!(merged.mismatches.total(), 1);
        assert_eq!(merged.status_map().get("5xx"), Some(&15_000));
        let books = merged.accounting;
        assert_eq!((books.sent, books.failed, books.timeouts, books.outstanding), (30_006, 4, 3, 2));
        assert_eq!(books.unaccounted_sent(merged.requests), 0, "per-thread balances add up");
        assert_eq!(merged.latency.count(), 30_002, "censored latencies are in the histogram");
    }

    #[test]
    fn mismatch_samples_are_capped_when_merging() {
        let sample = Mismatch {
            request: "GET /x".into(),
            kind: MismatchKind::Length,
            expected: "1".into(),
            actual: "2".into(),
        };
        let part = ThreadStats { mismatch_samples: vec![sample; 4], ..ThreadStats::default() };
        let mut merged = ThreadStats::default();
        merged.merge(&part, 5);
        merged.merge(&part, 5);
        assert_eq!(merged.mismatch_samples.len(), 5);
    }

    #[test]
    fn error_counts_serialize_every_kind_by_name() {
        let mut e = ErrorCounts::default();
        e.add(ErrorKind::Status5xx, 2);
        let json = serde_json::to_value(e).unwrap();
        let keys: Vec<&str> = json.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys.len(), ErrorKind::ALL.len());
        for (i, k) in ErrorKind::ALL.into_iter().enumerate() {
            assert!(keys.contains(&k.name()));
            assert_eq!(k.index(), i, "{} counts in its own place", k.name());
        }
        assert!(ErrorKind::Reset.is_failure() && ErrorKind::GoAway.is_failure());
        assert!(ErrorKind::Protocol.is_failure() && !ErrorKind::Late.is_failure());
        assert_eq!(json["status_5xx"], 2);
    }
}
