//! `LoadReport`: the result of a run — throughput, latency percentiles, errors by kind,
//! verification mismatches, where every measured request ended (answered, failed, timed out,
//! outstanding; open loop: against the arrivals scheduled), the protocol (HTTP/1.1 or HTTP/2
//! with its streams), and what the switch and nodes counted — as the JSON object scripts read
//! (`--json`) and as a short text for people.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::accounting::{NotSentCounts, NotSentReason};
use crate::admin_status::NodeRequests;
use crate::stats::{
    ErrorCounts, ErrorKind, HandshakeStats, LatencyReport, MismatchCounts, SurfCounts, ThreadStats,
};
use crate::verifier::Mismatch;

/// How the run was driven.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RunShape {
    /// `closed` or `open`.
    #[serde(rename = "loop")]
    pub loop_kind: &'static str,
    pub clients: usize,
    pub threads: usize,
    pub keepalive: bool,
    pub pipeline: usize,
    /// `http/1.1`, or `h2` (`--h2`: h2 by ALPN over TLS, h2c in cleartext).
    pub protocol: &'static str,
    /// HTTP/2: streams each connection keeps in flight (1 for HTTP/1.1).
    pub streams: usize,
    pub sessions: bool,
    /// Open loop arrivals per second.
    pub rate: Option<f64>,
    pub warmup_s: f64,
    pub targets: Vec<String>,
}

/// What the live surfer did (`Workload::Surf`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SurfReport {
    #[serde(flatten)]
    pub counts: SurfCounts,
    /// Connections opened per second of measured time.
    pub connections_per_s: f64,
}

/// The result of a load run.
#[derive(Clone, Debug, Serialize)]
pub struct LoadReport {
    /// Responses per second over the measured time.
    pub rps: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
    /// Responses received in the measured time (any status).
    pub requests: u64,
    /// Those of them to dynamic targets (`--dynamic`).
    pub dynamic_requests: u64,
    /// Bytes of those responses on the wire.
    pub bytes: u64,
    pub bytes_per_s: f64,
    /// Sum of `errors_by_kind` (failures, timeouts included, 4xx/5xx answers, late arrivals).
    pub errors: u64,
    pub errors_by_kind: ErrorCounts,
    /// Measured requests written (or whose connection failed).
    pub sent: u64,
    /// Of those, the ones that got no usable response (connect, closed, timeout, framing;
    /// over HTTP/2 also reset, goaway, protocol).
    pub failed: u64,
    /// Of the failed, those that timed out (also in `errors`).
    pub timeouts: u64,
    /// Sent and unanswered when the measured window ended (not in `errors`).
    pub outstanding: u64,
    /// Latencies in the percentiles that are lower bounds: the outstanding requests' waits at
    /// the window's end.
    pub censored_latencies: u64,
    /// Open loop: arrivals due in the measured window (with sessions, plus their sessions'
    /// later requests as sent); null in closed loop.
    pub scheduled: Option<u64>,
    /// Open loop: arrivals due in the window that never went out; null in closed loop.
    pub not_sent: Option<u64>,
    pub not_sent_by_reason: Option<NotSentCounts>,
    /// What the books miss (negative: counted twice): closed loop, `sent` − (`requests` +
    /// `failed` + `outstanding`); open loop, `scheduled` − (`requests` + `failed` +
    /// `outstanding` + `not_sent`). 0 when every request is accounted for exactly once.
    pub unaccounted: i64,
    /// Responses that differed from the expected one (warm-up included).
    pub mismatches: u64,
    pub mismatches_by_kind: MismatchCounts,
    /// The first few mismatches.
    pub mismatch_samples: Vec<Mismatch>,
    /// Responses checked against an expectation (warm-up included).
    pub verified: u64,
    /// Measured time in seconds.
    pub duration_s: f64,
    /// Responses by status class.
    pub statuses: BTreeMap<String, u64>,
    /// Connections opened (warm-up included).
    pub connections: u64,
    pub run: RunShape,
    /// Trace records that could not be replayed.
    pub trace_records_skipped: u64,
    /// The switch admin URL read (`--switch-admin`).
    pub switch: Option<String>,
    pub policy: Option<String>,
    pub mode: Option<String>,
    /// Requests each node got during the run, from the switch's counters.
    pub nodes: Option<Vec<NodeRequests>>,
    /// Max over mean of `nodes[].requests`.
    pub imbalance: Option<f64>,
    /// Cache hits over hits and misses on the nodes during the run (`--node-admin`).
    pub hit_ratio: Option<f64>,
    /// Things that went wrong around the run (an admin listener that did not answer).
    pub warnings: Vec<String>,
    /// The live surfer's counts (null for other workloads).
    pub surf: Option<SurfReport>,
    /// TLS handshakes (null without `https://` targets).
    pub tls: Option<TlsReport>,
    /// The merged latency histogram.
    #[serde(skip)]
    pub latency: LatencyReport,
}

/// What the report says when HTTP/2 could not be spoken (`protocol` errors), so that a server
/// without HTTP/2 is named as such rather than left as a count.
fn protocol_warning(errors: &ErrorCounts) -> Option<String> {
    let n = errors.get(ErrorKind::Protocol);
    (n > 0).then(|| {
        format!(
            "{n} requests failed because the server did not speak HTTP/2: it did not select h2 by \
             ALPN (https://), or answered the HTTP/2 preface with something else (http://)"
        )
    })
}

/// The TLS handshakes of a run (warm-up included).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TlsReport {
    pub handshakes_full: u64,
    pub handshakes_resumed: u64,
    /// From the end of the TCP connect to the end of the handshake.
    pub handshake_p50_ms: f64,
    pub handshake_p99_ms: f64,
    pub handshake_mean_ms: f64,
}

impl TlsReport {
    /// The report of `h`; `None` when no handshake was made.
    fn of(h: &HandshakeStats) -> Option<TlsReport> {
        (h.full + h.resumed > 0).then(|| TlsReport {
            handshakes_full: h.full,
            handshakes_resumed: h.resumed,
            handshake_p50_ms: h.latency.quantile_ms(0.5),
            handshake_p99_ms: h.latency.quantile_ms(0.99),
            handshake_mean_ms: h.latency.mean_ms(),
        })
    }
}

impl LoadReport {
    /// The report of merged `stats` over `duration_s` measured seconds; cluster fields empty.
    pub fn from_stats(stats: ThreadStats, duration_s: f64, run: RunShape) -> LoadReport {
        let per_s = |n: u64| if duration_s > 0.0 { n as f64 / duration_s } else { 0.0 };
        let l = &stats.latency;
        let books = stats.accounting;
        let open = run.loop_kind == "open";
        let unaccounted = if open {
            books.unaccounted_scheduled(stats.requests)
        } else {
            books.unaccounted_sent(stats.requests)
        };
        LoadReport {
            rps: per_s(stats.requests),
            p50_ms: l.quantile_ms(0.5),
            p90_ms: l.quantile_ms(0.9),
            p99_ms: l.quantile_ms(0.99),
            p999_ms: l.quantile_ms(0.999),
            max_ms: l.max_ms(),
            mean_ms: l.mean_ms(),
            requests: stats.requests,
            dynamic_requests: stats.dynamic_requests,
            bytes: stats.bytes,
            bytes_per_s: per_s(stats.bytes),
            errors: stats.errors.total(),
            errors_by_kind: stats.errors,
            sent: books.sent,
            failed: books.failed,
            timeouts: books.timeouts,
            outstanding: books.outstanding,
            censored_latencies: books.outstanding,
            scheduled: open.then_some(books.scheduled),
            not_sent: open.then_some(books.not_sent.total()),
            not_sent_by_reason: open.then_some(books.not_sent),
            unaccounted: i64::try_from(unaccounted).unwrap_or(if unaccounted < 0 {
                i64::MIN
            } else {
                i64::MAX
            }),
            mismatches: stats.mismatches.total(),
            mismatches_by_kind: stats.mismatches,
            mismatch_samples: stats.mismatch_samples.clone(),
            verified: stats.verified,
            duration_s,
            statuses: stats.status_map(),
            connections: stats.connections,
            run,
            trace_records_skipped: 0,
            switch: None,
            policy: None,
            mode: None,
            nodes: None,
            imbalance: None,
            hit_ratio: None,
            warnings: protocol_warning(&stats.errors).into_iter().collect(),
            surf: None,
            tls: TlsReport::of(&stats.handshakes),
            latency: stats.latency,
        }
    }

    /// The accounting line: sent (closed loop) or scheduled (open loop) against where each
    /// request ended.
    fn render_books(&self, out: &mut String) {
        let ended = format!(
            "completed {} + failed {} (timeouts {}) + outstanding {}",
            self.requests, self.failed, self.timeouts, self.outstanding
        );
        match (self.scheduled, self.not_sent_by_reason) {
            (Some(scheduled), Some(reasons)) => {
                let why: Vec<String> = NotSentReason::ALL
                    .iter()
                    .filter(|r| reasons.get(**r) > 0)
                    .map(|r| format!("{} {}", r.name().replace('_', " "), reasons.get(*r)))
                    .collect();
                let why = if why.is_empty() { String::new() } else { format!(" ({})", why.join(", ")) };
                let not_sent = reasons.total();
                let _ = writeln!(out, "  scheduled {scheduled:>12} = {ended} + not sent {not_sent}{why}");
                let _ = writeln!(out, "  sent      {:>12}", self.sent);
            }
            _ => {
                let _ = writeln!(out, "  sent      {:>12} = {ended}", self.sent);
            }
        }
        if self.unaccounted != 0 {
            let _ = writeln!(out, "  UNACCOUNTED {} (the books above do not balance)", self.unaccounted);
        }
    }

    /// Whether every checked response matched.
    pub fn verified_ok(&self) -> bool {
        self.mismatches == 0
    }

    /// The report as one JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// A few lines for a terminal.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        let r = &self.run;
        let rate = r.rate.map_or(String::new(), |rate| format!(" at {rate} req/s"));
        let protocol = match r.protocol {
            "h2" => format!("HTTP/2 with {} stream{} each", r.streams, if r.streams == 1 { "" } else { "s" }),
            _ if r.keepalive => "keep-alive".into(),
            _ => "connection per request".into(),
        };
        let _ = writeln!(
            out,
            "{} loop{rate}, {} connections on {} threads, {protocol}{}{}, {:.1} s measured{}",
            r.loop_kind,
            r.clients,
            r.threads,
            if r.pipeline > 1 { format!(", pipeline {}", r.pipeline) } else { String::new() },
            if r.sessions { ", sessions" } else { "" },
            self.duration_s,
            if r.warmup_s > 0.0 { format!(" after {:.1} s warm-up", r.warmup_s) } else { String::new() },
        );
        let _ = writeln!(out, "  requests  {:>12}   {:>10.1} req/s", self.requests, self.rps);
        if let Some(t) = &self.tls {
            let _ = writeln!(
                out,
                "  TLS       {:>12} full, {} resumed handshakes; handshake p50 {:.2} ms, p99 {:.2} ms",
                t.handshakes_full, t.handshakes_resumed, t.handshake_p50_ms, t.handshake_p99_ms
            );
        }
        if self.dynamic_requests > 0 {
            let _ = writeln!(out, "  dynamic   {:>12}", self.dynamic_requests);
        }
        let _ = writeln!(
            out,
            "  bytes     {:>12}   {:>10.2} MiB/s",
            self.bytes,
            self.bytes_per_s / (1 << 20) as f64
        );
        let _ = writeln!(
            out,
            "  latency   p50 {:.3}  p90 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}  mean {:.3} ms{}",
            self.p50_ms,
            self.p90_ms,
            self.p99_ms,
            self.p999_ms,
            self.max_ms,
            self.mean_ms,
            if self.censored_latencies > 0 {
                format!("   ({} censored at the window's end)", self.censored_latencies)
            } else {
                String::new()
            }
        );
        let kinds: Vec<String> = ErrorKind::ALL
            .iter()
            .filter(|k| self.errors_by_kind.get(**k) > 0)
            .map(|k| format!("{} {}", k.name(), self.errors_by_kind.get(*k)))
            .collect();
        let _ = writeln!(
            out,
            "  errors    {:>12}{}",
            self.errors,
            if kinds.is_empty() { String::new() } else { format!("   ({})", kinds.join(", ")) }
        );
        self.render_books(&mut out);
        if self.verified > 0 || self.mismatches > 0 {
            let _ = writeln!(out, "  verified  {:>12}   mismatches {}", self.verified, self.mismatches);
            for m in &self.mismatch_samples {
                let _ = writeln!(
                    out,
                    "    {} [{}]: expected {}, got {}",
                    m.request,
                    m.kind.name(),
                    m.expected,
                    m.actual
                );
            }
        }
        if let Some(surf) = &self.surf {
            let c = &surf.counts;
            let _ = writeln!(
                out,
                "  surf      sessions {}, pages {}, embeds {}, leaves {}, external links {}, replica responses {}, {:.1} conn/s",
                c.sessions,
                c.pages,
                c.embeds,
                c.leaves,
                c.external_links,
                c.replica_responses,
                surf.connections_per_s
            );
            let servers: Vec<String> = c.requests_by_server.iter().map(|(k, n)| format!("{k} {n}")).collect();
            let _ = writeln!(out, "  servers   {}", servers.join(", "));
        }
        if let Some(nodes) = &self.nodes {
            let shares: Vec<String> = nodes.iter().map(|n| format!("{} {}", n.name, n.requests)).collect();
            let _ = writeln!(
                out,
                "  switch    policy {}, requests per node: {}, imbalance {}",
                self.policy.as_deref().unwrap_or("?"),
                shares.join(", "),
                self.imbalance.map_or("n/a".into(), |i| format!("{i:.3}"))
            );
        }
        if let Some(h) = self.hit_ratio {
            let _ = writeln!(out, "  nodes     cache hit ratio {h:.3}");
        }
        for w in &self.warnings {
            let _ = writeln!(out, "  warning: {w}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verifier::MismatchKind;

    fn sample_report() -> LoadReport {
        let mut stats = ThreadStats::default();
        for us in [100, 200, 300, 400, 5000] {
            stats.latency.record_us(us);
            stats.requests += 1;
            stats.bytes += 1000;
            stats.count_status(200);
        }
        stats.errors.add(ErrorKind::Timeout, 2);
        stats.count_failure(ErrorKind::Timeout, 2);
        stats.accounting.sent = 7;
        stats.mismatches.add(MismatchKind::Length);
        stats.mismatch_samples.push(Mismatch {
            request: "GET http://127.0.0.1:1/x".into(),
            kind: MismatchKind::Length,
            expected: "5 bytes".into(),
            actual: "4 bytes".into(),
        });
        LoadReport::from_stats(stats, 2.0, RunShape { loop_kind: "closed", ..RunShape::default() })
    }

    #[test]
    fn json_has_the_documented_fields_with_their_types() {
        let json = sample_report().to_json();
        for key in
            ["rps", "p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms", "duration_s", "mean_ms", "bytes_per_s"]
        {
            assert!(json[key].is_f64(), "{key} is not a float: {}", json[key]);
        }
        for key in ["requests", "dynamic_requests", "bytes", "errors", "mismatches"] {
            assert!(json[key].is_u64(), "{key} is not an integer: {}", json[key]);
        }
        assert!(json["errors_by_kind"].is_object());
        assert_eq!(json["errors_by_kind"]["timeout"], 2);
        assert_eq!(json["errors"], 2);
        assert_eq!(json["requests"], 5);
        assert_eq!(json["rps"], 2.5);
        assert_eq!(json["bytes"], 5000);
        assert_eq!(json["mismatches"], 1);
        assert_eq!(json["mismatch_samples"][0]["kind"], "length");
        assert_eq!(json["run"]["loop"], "closed");
        // Cluster sources not given: present and null.
        for key in ["switch", "policy", "mode", "nodes", "imbalance", "hit_ratio"] {
            assert!(json.get(key).is_some_and(|v| v.is_null()), "{key}: {:?}", json.get(key));
        }
        assert!(json.get("latency").is_none(), "the histogram itself is not serialised");
        assert_eq!((json["sent"].as_u64(), json["failed"].as_u64()), (Some(7), Some(2)));
        assert_eq!((json["timeouts"].as_u64(), json["outstanding"].as_u64()), (Some(2), Some(0)));
        assert_eq!((json["censored_latencies"].as_u64(), json["unaccounted"].as_i64()), (Some(0), Some(0)));
        for key in ["scheduled", "not_sent", "not_sent_by_reason"] {
            assert!(json.get(key).is_some_and(|v| v.is_null()), "closed loop: {key} is null");
        }
    }

    #[test]
    fn open_loop_report_reconciles_scheduled_arrivals_in_json_and_text() {
        let mut stats = ThreadStats::default();
        for us in [1000, 2000, 3000] {
            stats.latency.record_us(us);
            stats.requests += 1;
            stats.count_status(200);
        }
        stats.count_outstanding(9000);
        stats.errors.add(ErrorKind::Closed, 1);
        stats.count_failure(ErrorKind::Closed, 1);
        stats.accounting.sent = 5;
        stats.accounting.scheduled = 8;
        stats.accounting.not_sent.add(NotSentReason::NoFreeConnection, 2);
        stats.accounting.not_sent.add(NotSentReason::WindowEnded, 1);
        let r = LoadReport::from_stats(stats, 1.0, RunShape { loop_kind: "open", ..RunShape::default() });
        let json = r.to_json();
        assert_eq!(json["scheduled"], 8);
        assert_eq!(json["not_sent"], 3);
        assert_eq!(json["not_sent_by_reason"]["no_free_connection"], 2);
        assert_eq!((json["outstanding"].as_u64(), json["censored_latencies"].as_u64()), (Some(1), Some(1)));
        assert_eq!(json["unaccounted"], 0);
        assert_eq!(json["requests"], 3, "outstanding requests are not responses");
        assert!((r.max_ms - 9.0).abs() < 0.01, "the censored wait is in the latencies");
        let text = r.render_text();
        assert!(
            text.contains("scheduled") && text.contains("not sent 3 (no free connection 2, window ended 1)"),
            "{text}"
        );
        assert!(text.contains("1 censored") && !text.contains("UNACCOUNTED"), "{text}");
        let mut lost = r.clone();
        lost.unaccounted = 1;
        assert!(lost.render_text().contains("UNACCOUNTED 1"));
    }

    #[test]
    fn percentiles_in_the_report_come_from_the_merged_histogram() {
        let r = sample_report();
        assert!((r.p50_ms - 0.3).abs() < 0.001, "{}", r.p50_ms);
        assert!((r.max_ms - 5.0).abs() < 0.01);
        assert!((r.mean_ms - 1.2).abs() < 0.01);
        assert!(r.p999_ms >= r.p99_ms && r.p99_ms >= r.p90_ms && r.p90_ms >= r.p50_ms);
        let text = r.render_text();
        assert!(text.contains("mismatches 1") && text.contains("GET http://127.0.0.1:1/x"), "{text}");
        assert!(!r.verified_ok());
    }

    #[test]
    fn the_protocol_and_streams_are_reported_and_protocol_errors_explained() {
        let shape = RunShape {
            loop_kind: "closed",
            protocol: "h2",
            streams: 10,
            keepalive: true,
            pipeline: 1,
            ..RunShape::default()
        };
        let mut stats = ThreadStats::default();
        stats.errors.add(ErrorKind::Protocol, 3);
        stats.count_failure(ErrorKind::Protocol, 3);
        stats.accounting.sent = 3;
        let r = LoadReport::from_stats(stats, 1.0, shape);
        let json = r.to_json();
        assert_eq!(
            (json["run"]["protocol"].as_str(), json["run"]["streams"].as_u64()),
            (Some("h2"), Some(10))
        );
        assert_eq!(json["errors_by_kind"]["protocol"], 3);
        assert_eq!((json["failed"].as_u64(), json["unaccounted"].as_i64()), (Some(3), Some(0)));
        let text = r.render_text();
        assert!(text.contains("HTTP/2 with 10 streams each") && text.contains("protocol 3"), "{text}");
        assert!(r.warnings.len() == 1 && r.warnings[0].contains("did not speak HTTP/2"), "{:?}", r.warnings);
        let shape = RunShape {
            loop_kind: "closed",
            protocol: "http/1.1",
            streams: 1,
            keepalive: true,
            ..RunShape::default()
        };
        let http1 = LoadReport::from_stats(ThreadStats::default(), 1.0, shape);
        assert!(http1.warnings.is_empty() && http1.render_text().contains("keep-alive"));
        assert_eq!(http1.to_json()["run"]["protocol"], "http/1.1");
    }

    #[test]
    fn an_empty_run_reports_zeros_not_nan() {
        let r = LoadReport::from_stats(ThreadStats::default(), 0.0, RunShape::default());
        let json = r.to_json();
        assert_eq!(json["rps"], 0.0);
        assert_eq!(json["p99_ms"], 0.0);
        assert!(r.verified_ok());
    }
}
