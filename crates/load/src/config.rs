//! `LoadConfig`: everything a load run needs — where to send (`TargetUrl`s), what to send
//! (`Workload`), how (closed or open loop, keep-alive, pipelining or HTTP/2 streams, think
//! time, sessions), for how long, and what to check responses against (`Verification`) — with
//! its validation.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use locus_trace::{TraceFormat, TraceRecord};

use crate::error::LoadError;
use crate::mix::{check_dynamic, check_hot_spot};
use crate::target_url::TargetUrl;
use crate::think_time::ThinkTime;
use crate::verifier::Expectation;

/// How often each document is chosen by a synthetic workload.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Popularity {
    /// Zipf with this exponent over a seeded popularity order (locus-trace's generator).
    Zipf { alpha: f64 },
    /// Every document equally often.
    Uniform,
}

/// The documents a synthetic workload chooses from.
#[derive(Clone, Debug, PartialEq)]
pub enum DocumentSet {
    /// `/doc/0` … `/doc/N-1`, as locus-trace's Zipf generator names model documents.
    Model { documents: u64 },
    /// The files under a directory (pages and embeds read from its HTML for sessions).
    Docroot(PathBuf),
    /// The files of a site manifest (`site.json`, or a site directory holding one).
    Manifest(PathBuf),
}

/// A moving hot set over a synthetic workload's documents (a flash crowd): `documents`
/// documents, drawn afresh (uniformly, seeded by the run's seed and the phase) from the whole
/// set at the start of every phase of `shift`, get `share` of the static requests (those not
/// sent to dynamic targets), each hot document equally often; the rest follow the workload's
/// popularity. Every connection sees the same hot set at the same moment (phases count from
/// the run's start, warm-up included). Not with sessions or traces.
#[derive(Clone, Debug, PartialEq)]
pub struct HotSpot {
    /// Documents in the hot set (at most the document set's size).
    pub documents: u32,
    /// Share of requests that go to the hot set, in (0, 1].
    pub share: f64,
    /// How long a hot set lasts before another takes its place; `None`: it never moves.
    pub shift: Option<Duration>,
}

/// Requests for dynamic content mixed into a synthetic workload: `share` of the requests go
/// to `{path}?id={k}`, `k` uniform in `0..variants`; each answer must be status 200 with
/// `locus_classify::dynamic_body(target, size)` when responses are verified (any
/// verification but `Off`). Not with sessions or traces.
#[derive(Clone, Debug, PartialEq)]
pub struct DynamicTarget {
    /// Path (a node class's prefix), starting with `/`.
    pub path: String,
    /// Share of all requests, in (0, 1]; the shares of all targets sum to at most 1.
    pub share: f64,
    /// Distinct `id` values (at least 1).
    pub variants: u32,
    /// The response body's size (at most 64 MiB).
    pub size: u64,
}

/// Where a trace comes from.
#[derive(Clone, Debug)]
pub enum TraceSource {
    /// A file in any format locus-trace reads (`-` for standard input).
    File { path: PathBuf, format: Option<TraceFormat> },
    /// Records already in memory.
    Records(Arc<Vec<TraceRecord>>),
}

/// What requests to send.
#[derive(Clone, Debug)]
pub enum Workload {
    /// The path of the first URL, over and over (like wrk).
    SingleUrl,
    /// Replay a trace's requests in order (`repeat`: start again at the end).
    Trace { source: TraceSource, repeat: bool },
    /// Documents drawn at random.
    Synthetic { popularity: Popularity, documents: DocumentSet },
    /// A live surfer of a DC cluster (closed loop, one session after another per client):
    /// a session starts at `entry`, fetches each page's embedded objects, then follows one
    /// random link of the page as the server wrote it (back to the last page after a leaf),
    /// `session_requests` requests in all. Only `entry`'s server and `hosts` (their paths
    /// unused) are contacted; `LoadConfig::targets` is not used.
    Surf { entry: TargetUrl, hosts: Vec<TargetUrl>, session_requests: u32 },
}

/// What responses are checked against.
#[derive(Clone, Debug, Default)]
pub enum Verification {
    /// Nothing checked.
    #[default]
    Off,
    /// The files under a directory: 200 with their exact bytes, 404 for missing files.
    Root(PathBuf),
    /// A site manifest's sizes and checksums.
    Manifest(PathBuf),
    /// One expectation for every request.
    Pinned(Expectation),
}

/// A load run.
#[derive(Clone, Debug)]
pub struct LoadConfig {
    /// Servers, used round-robin by connection.
    pub targets: Vec<TargetUrl>,
    pub workload: Workload,
    /// Connections (closed loop: concurrent clients; open loop: most connections in use).
    pub clients: usize,
    /// Open loop at this many arrivals per second (Poisson); `None`: closed loop.
    pub rate: Option<f64>,
    pub keepalive: bool,
    /// Requests sent on a connection before reading responses (1: no pipelining).
    pub pipeline: usize,
    /// Closed loop: pause between jobs.
    pub think: ThinkTime,
    /// Send sessions (a page then its embedded objects, or one trace client's requests) on
    /// one connection.
    pub sessions: bool,
    /// Measured time (after the warm-up). Neither this nor `requests`: 10 s.
    pub duration: Option<Duration>,
    /// Measured requests (after the warm-up).
    pub requests: Option<u64>,
    /// Time at the start whose requests are not counted.
    pub warmup: Duration,
    /// Worker threads (0: one per CPU), each with its own event loop.
    pub threads: usize,
    /// Longest wait for a connection or a complete response (default 10 s). With a measured
    /// window it is an upper bound: the run uses at most half the window
    /// (`effective_timeout`), unless `timeout_fixed`.
    pub timeout: Duration,
    /// The timeout was asked for by name (`--timeout`): used as given, and a run whose
    /// measured window it does not undercut is refused.
    pub timeout_fixed: bool,
    pub verification: Verification,
    /// Seed of every random draw.
    pub seed: u64,
    /// A switch's admin listener, read before and after.
    pub switch_admin: Option<TargetUrl>,
    /// Nodes' admin listeners, read before and after.
    pub node_admins: Vec<TargetUrl>,
    /// Print a progress line on standard error.
    pub progress: bool,
    /// Synthetic workloads: a moving hot set.
    pub hot_spot: Option<HotSpot>,
    /// Synthetic workloads: dynamic requests mixed in.
    pub dynamic: Vec<DynamicTarget>,
    /// Mismatches kept for the report.
    pub mismatch_samples: usize,
    /// `https://` targets: the certificates to trust (PEM).
    pub tls_ca: Option<std::path::PathBuf>,
    /// `https://` targets: resume sessions with tickets (otherwise every connection makes a
    /// full handshake).
    pub tls_resume: bool,
    /// `https://` targets: the name asked for (SNI) and checked, instead of the URL's host.
    pub tls_name: Option<String>,
    /// `https://` targets: offer only this cipher suite (rustls's name, e.g.
    /// `TLS13_AES_128_GCM_SHA256`).
    pub tls_suite: Option<String>,
    /// Speak HTTP/2 on every connection: `h2` chosen by ALPN for `https://` targets, cleartext
    /// `h2c` with prior knowledge for `http://` ones. Not with pipelining, a connection per
    /// request or the surfer.
    pub h2: bool,
    /// HTTP/2: requests each connection keeps in flight, each on a stream of its own (like
    /// h2load's `-m`); every stream runs the client's loop of jobs, think times and arrivals.
    /// Must be 1 without `h2`.
    pub streams: usize,
}

impl Default for LoadConfig {
    fn default() -> Self {
        LoadConfig {
            targets: Vec::new(),
            workload: Workload::SingleUrl,
            clients: 32,
            rate: None,
            keepalive: true,
            pipeline: 1,
            think: ThinkTime::None,
            sessions: false,
            duration: None,
            requests: None,
            warmup: Duration::ZERO,
            threads: 0,
            timeout: DEFAULT_TIMEOUT,
            timeout_fixed: false,
            verification: Verification::Off,
            seed: 1,
            switch_admin: None,
            node_admins: Vec::new(),
            progress: false,
            mismatch_samples: 10,
            tls_ca: None,
            tls_resume: false,
            tls_name: None,
            tls_suite: None,
            hot_spot: None,
            dynamic: Vec::new(),
            h2: false,
            streams: 1,
        }
    }
}

/// Default measured time when neither a duration nor a request count is given.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);
/// The timeout when nothing shorter is asked for or implied by the window.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_TIMEOUT: Duration = Duration::from_secs(86_400);
const MAX_RUN_TIME: Duration = Duration::from_secs(365 * 86_400);
const MAX_THINK: Duration = Duration::from_secs(3600);
/// Most `/doc/N` model documents (each is rendered once before the run).
const MAX_MODEL_DOCUMENTS: u64 = 10_000_000;
/// Most HTTP/2 streams one connection keeps in flight.
pub const MAX_STREAMS: usize = 1024;

impl LoadConfig {
    /// A closed-loop run of the first URL's path against `targets`, other settings default.
    pub fn new(targets: Vec<TargetUrl>) -> LoadConfig {
        LoadConfig { targets, ..LoadConfig::default() }
    }

    /// Worker threads actually used: `threads` (or the CPU count), at most one per client.
    pub fn worker_threads(&self) -> usize {
        let wanted = if self.threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            self.threads
        };
        wanted.clamp(1, self.clients.max(1))
    }

    /// The measured time: `duration`, or the default when no request count bounds the run.
    pub fn measured_duration(&self) -> Option<Duration> {
        match (self.duration, self.requests) {
            (Some(d), _) => Some(d),
            (None, Some(_)) => None,
            (None, None) => Some(DEFAULT_DURATION),
        }
    }

    /// The timeout the run uses: `timeout`, and with a measured window (unless
    /// `timeout_fixed`) at most half the window, so a request that hangs times out within it.
    pub fn effective_timeout(&self) -> Duration {
        match self.measured_duration() {
            Some(window) if !self.timeout_fixed => self.timeout.min(window / 2),
            _ => self.timeout,
        }
    }

    /// A fixed timeout must be shorter than the measured window: a request unanswered at the
    /// window's end would otherwise never have timed out.
    fn validate_timeout(&self) -> Result<(), LoadError> {
        if self.timeout.is_zero() || self.timeout > MAX_TIMEOUT {
            return Err(LoadError::config("timeout must be positive and at most a day"));
        }
        match self.measured_duration() {
            Some(window) if self.timeout_fixed && self.timeout >= window => Err(LoadError::config(format!(
                "timeout {:?} is not shorter than the measured window {:?}: a request unanswered \
                 at the window's end could never time out; give a shorter --timeout, or leave it \
                 out (default: the smaller of {:?} and half the window)",
                self.timeout, window, DEFAULT_TIMEOUT
            ))),
            _ => Ok(()),
        }
    }

    /// Check that the settings make sense together.
    pub fn validate(&self) -> Result<(), LoadError> {
        let fail = |m: &str| Err(LoadError::config(m));
        let tls = self.targets.iter().any(|t| t.tls);
        if tls && self.tls_ca.is_none() {
            return fail("https:// targets need --tls-ca FILE: the certificate (or CA) to trust, in PEM");
        }
        if tls && matches!(self.workload, Workload::Surf { .. }) {
            return fail("the surfer speaks HTTP only: give http:// URLs with --surf");
        }
        let tls_options =
            self.tls_ca.is_some() || self.tls_resume || self.tls_name.is_some() || self.tls_suite.is_some();
        if !tls && tls_options {
            return fail(
                "--tls-ca, --resume, --tls-name and --tls-suite are for https:// targets (or --tls)",
            );
        }
        if self.switch_admin.iter().chain(&self.node_admins).any(|a| a.tls) {
            return fail("admin listeners are read over http://");
        }
        self.validate_h2()?;
        if let Workload::Surf { session_requests, .. } = self.workload {
            if session_requests == 0 {
                return fail("a surf session needs at least one request");
            }
            if self.rate.is_some() || self.pipeline > 1 {
                return fail("the surfer is closed loop without pipelining (drop --rate and --pipeline)");
            }
        } else if self.targets.is_empty() {
            return fail("at least one target URL is needed");
        }
        if self.clients == 0 {
            return fail("clients must be at least 1");
        }
        if self.pipeline == 0 || self.pipeline > 1024 {
            return fail("pipeline depth must be within 1..=1024");
        }
        if self.pipeline > 1 && !self.keepalive {
            return fail("pipelining needs keep-alive connections");
        }
        if let Some(rate) = self.rate
            && !(rate.is_finite() && rate > 0.0)
        {
            return fail("rate must be a positive number of requests per second");
        }
        if self.rate.is_some() && self.think != ThinkTime::None {
            return fail("think time applies to the closed loop only (drop --rate or --think-ms)");
        }
        if [self.duration.unwrap_or_default(), self.warmup].iter().any(|d| *d > MAX_RUN_TIME) {
            return fail("duration and warm-up must each be at most a year");
        }
        let think = match self.think {
            ThinkTime::None => Duration::ZERO,
            ThinkTime::Fixed(d) | ThinkTime::Exponential(d) => d,
        };
        if think > MAX_THINK {
            return fail("think time must be at most an hour");
        }
        if self.duration.is_some_and(|d| d.is_zero()) {
            return fail("duration must be positive");
        }
        if self.requests == Some(0) {
            return fail("requests must be at least 1");
        }
        self.validate_timeout()?;
        if self.sessions {
            match &self.workload {
                Workload::SingleUrl => return fail("sessions need a trace, a manifest or a document root"),
                Workload::Surf { .. } => {}
                Workload::Synthetic { documents: DocumentSet::Model { .. }, .. } => {
                    return fail(
                        "sessions of a synthetic workload need --manifest or --docroot (pages and their embeds)",
                    );
                }
                _ => {}
            }
        }
        if let Workload::Synthetic { popularity: Popularity::Zipf { alpha }, .. } = self.workload
            && !(alpha.is_finite() && alpha >= 0.0)
        {
            return fail("alpha must be a finite number >= 0");
        }
        if let Workload::Synthetic { documents: DocumentSet::Model { documents }, .. } = self.workload
            && !(1..=MAX_MODEL_DOCUMENTS).contains(&documents)
        {
            return fail("model documents must be within 1..=10000000");
        }
        self.validate_mix()
    }

    /// HTTP/2 (`h2`) and its streams: what HTTP/2 cannot do is refused here, never ignored.
    fn validate_h2(&self) -> Result<(), LoadError> {
        let fail = |m: &str| Err(LoadError::config(m));
        if !self.h2 {
            if self.streams != 1 {
                return fail(
                    "--streams is for HTTP/2 (--h2); HTTP/1.1 keeps several requests in flight with --pipeline",
                );
            }
            return Ok(());
        }
        if !(1..=MAX_STREAMS).contains(&self.streams) {
            return fail("streams per HTTP/2 connection must be within 1..=1024");
        }
        if matches!(self.workload, Workload::Surf { .. }) {
            return fail("the surfer speaks HTTP/1.1 only: drop --h2 or --surf");
        }
        if self.pipeline > 1 {
            return fail(
                "HTTP/2 has no pipelining: it multiplexes requests on streams (give --streams N, not --pipeline)",
            );
        }
        if !self.keepalive {
            return fail(
                "an HTTP/2 connection carries many requests: a connection per request (--no-keepalive) \
                 is HTTP/1.1's; drop --h2 or --no-keepalive",
            );
        }
        Ok(())
    }

    /// The hot spot and the dynamic targets: their ranges, on a synthetic workload without sessions.
    pub(crate) fn validate_mix(&self) -> Result<(), LoadError> {
        if self.hot_spot.is_none() && self.dynamic.is_empty() {
            return Ok(());
        }
        let field = if self.hot_spot.is_some() { "hot_spot" } else { "dynamic" };
        if !matches!(self.workload, Workload::Synthetic { .. }) {
            return Err(LoadError::config(format!(
                "{field} needs a synthetic workload (not a trace or one URL)"
            )));
        }
        if self.sessions {
            return Err(LoadError::config(format!("{field} cannot be used with sessions")));
        }
        if let Some(hot) = &self.hot_spot {
            check_hot_spot(hot)?;
        }
        check_dynamic(&self.dynamic, !matches!(self.verification, Verification::Off))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> LoadConfig {
        LoadConfig::new(vec!["http://127.0.0.1:1/".parse().unwrap()])
    }

    #[test]
    fn contradictory_settings_are_refused() {
        assert!(config().validate().is_ok());
        assert!(LoadConfig::default().validate().is_err(), "no target");
        assert!(LoadConfig { pipeline: 4, keepalive: false, ..config() }.validate().is_err());
        assert!(LoadConfig { pipeline: 0, ..config() }.validate().is_err());
        assert!(LoadConfig { clients: 0, ..config() }.validate().is_err());
        assert!(LoadConfig { rate: Some(-1.0), ..config() }.validate().is_err());
        let think = ThinkTime::Fixed(Duration::from_millis(1));
        assert!(LoadConfig { rate: Some(10.0), think, ..config() }.validate().is_err());
        assert!(LoadConfig { sessions: true, ..config() }.validate().is_err());
        assert!(LoadConfig { requests: Some(0), ..config() }.validate().is_err());
        assert!(LoadConfig { timeout: Duration::from_secs(1 << 40), ..config() }.validate().is_err());
        assert!(LoadConfig { duration: Some(Duration::from_secs(1 << 40)), ..config() }.validate().is_err());
        assert!(LoadConfig { warmup: Duration::MAX, ..config() }.validate().is_err());
        let model = Workload::Synthetic {
            popularity: Popularity::Zipf { alpha: 0.8 },
            documents: DocumentSet::Model { documents: 10 },
        };
        assert!(LoadConfig { workload: model.clone(), ..config() }.validate().is_ok());
        assert!(LoadConfig { workload: model, sessions: true, ..config() }.validate().is_err());
    }

    #[test]
    fn what_http2_cannot_do_is_refused_with_h2_and_streams_need_h2() {
        let h2 = || LoadConfig { h2: true, streams: 10, ..config() };
        assert!(h2().validate().is_ok());
        let think = ThinkTime::Fixed(Duration::from_millis(1));
        let open = LoadConfig { rate: Some(100.0), ..h2() };
        assert!(open.validate().is_ok(), "open loop: every stream takes arrivals");
        assert!(LoadConfig { think, sessions: false, ..h2() }.validate().is_ok());
        let refused = |c: LoadConfig, words: &[&str]| {
            let e = c.validate().unwrap_err().to_string();
            assert!(words.iter().all(|w| e.contains(w)), "{e}");
        };
        refused(LoadConfig { pipeline: 4, ..h2() }, &["pipelining", "--streams"]);
        refused(LoadConfig { keepalive: false, ..h2() }, &["--no-keepalive"]);
        refused(LoadConfig { streams: 0, ..h2() }, &["1..=1024"]);
        refused(LoadConfig { streams: MAX_STREAMS + 1, ..h2() }, &["1..=1024"]);
        refused(LoadConfig { streams: 2, ..config() }, &["--h2", "--pipeline"]);
        let surf = Workload::Surf {
            entry: "http://127.0.0.1:1/".parse().unwrap(),
            hosts: Vec::new(),
            session_requests: 3,
        };
        refused(LoadConfig { workload: surf, streams: 1, ..h2() }, &["surfer", "--h2"]);
        let trace = Workload::Trace { source: TraceSource::Records(Arc::new(Vec::new())), repeat: true };
        assert!(LoadConfig { workload: trace, sessions: true, ..h2() }.validate().is_ok());
    }

    #[test]
    fn default_timeout_is_the_smaller_of_ten_seconds_and_half_the_window() {
        let window = |d: u64| LoadConfig { duration: Some(Duration::from_secs(d)), ..config() };
        assert_eq!(window(60).effective_timeout(), DEFAULT_TIMEOUT);
        assert_eq!(window(8).effective_timeout(), Duration::from_secs(4));
        assert_eq!(config().effective_timeout(), DEFAULT_DURATION / 2, "the default 10 s window");
        assert_eq!(LoadConfig { requests: Some(5), ..config() }.effective_timeout(), DEFAULT_TIMEOUT);
        // A timeout not fixed by name is only an upper bound: never refused, capped.
        let capped = LoadConfig { timeout: Duration::from_secs(30), ..window(5) };
        assert!(capped.validate().is_ok());
        assert_eq!(capped.effective_timeout(), Duration::from_millis(2500));
    }

    #[test]
    fn a_fixed_timeout_not_shorter_than_the_window_is_refused_naming_both() {
        let fixed = |t: u64, d: u64| LoadConfig {
            timeout: Duration::from_millis(t),
            timeout_fixed: true,
            duration: Some(Duration::from_millis(d)),
            ..config()
        };
        for (t, d) in [(5000, 5000), (10_000, 5000)] {
            let e = fixed(t, d).validate().unwrap_err().to_string();
            assert!(e.contains(&format!("{:?}", Duration::from_millis(t))), "{e}");
            assert!(e.contains(&format!("{:?}", Duration::from_millis(d))), "{e}");
        }
        assert!(fixed(4999, 5000).validate().is_ok());
        assert_eq!(fixed(4999, 5000).effective_timeout(), Duration::from_millis(4999), "used as given");
        let no_window = LoadConfig { requests: Some(5), duration: None, ..fixed(60_000, 1) };
        assert!(no_window.validate().is_ok(), "no window: nothing to undercut");
        assert!(
            LoadConfig { timeout_fixed: true, ..config() }.validate().is_err(),
            "10 s in the 10 s default window"
        );
    }

    #[test]
    fn duration_defaults_only_without_a_request_count() {
        assert_eq!(config().measured_duration(), Some(DEFAULT_DURATION));
        assert_eq!(LoadConfig { requests: Some(5), ..config() }.measured_duration(), None);
        let d = Duration::from_secs(2);
        assert_eq!(
            LoadConfig { requests: Some(5), duration: Some(d), ..config() }.measured_duration(),
            Some(d)
        );
        assert_eq!(LoadConfig { threads: 8, clients: 3, ..config() }.worker_threads(), 3);
    }
}
