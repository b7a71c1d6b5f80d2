//! `locus load`: the command-line arguments (`LoadArgs`), their translation into a
//! `LoadConfig`, the run with its text or JSON report and exit status, and `pin_response`,
//! the one expectation a run verifies when it has nothing else to check against.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use locus_classify::ByteSize;
use locus_trace::TraceFormat;

use crate::admin_status::fetch_document;
use crate::config::{
    DEFAULT_TIMEOUT, DocumentSet, DynamicTarget, HotSpot, LoadConfig, Popularity, TraceSource, Verification,
    Workload,
};
use crate::run::run_load;
use crate::target_url::TargetUrl;
use crate::think_time::ThinkTime;
use crate::verifier::Expectation;

/// A synthetic popularity distribution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SyntheticKind {
    /// Zipf popularity (`--alpha`).
    Zipf,
    /// Every document equally often.
    Uniform,
}

/// Parse `10s`, `500ms`, `2m`, `1h` or a plain number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, scale) = if let Some(v) = s.strip_suffix("ms") {
        (v, 0.001)
    } else if let Some(v) = s.strip_suffix('s') {
        (v, 1.0)
    } else if let Some(v) = s.strip_suffix('m') {
        (v, 60.0)
    } else if let Some(v) = s.strip_suffix('h') {
        (v, 3600.0)
    } else {
        (s, 1.0)
    };
    let n: f64 = num.trim().parse().map_err(|_| format!("`{s}` is not a duration (like 10s, 500ms, 2m)"))?;
    if !(n.is_finite() && n >= 0.0) {
        return Err(format!("`{s}` must be a non-negative duration"));
    }
    Duration::try_from_secs_f64(n * scale).map_err(|_| format!("`{s}` is too long"))
}

/// The `key=value` fields of a comma-separated spec, each key known and given once.
fn spec_fields<'a>(
    flag: &str,
    fields: impl Iterator<Item = &'a str>,
    known: &[&str],
) -> Result<Vec<(&'a str, &'a str)>, String> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for field in fields {
        let (key, value) =
            field.split_once('=').ok_or_else(|| format!("{flag}: `{field}` is not key=value"))?;
        let key = key.trim();
        if !known.contains(&key) {
            return Err(format!("{flag}: unknown key `{key}` (known: {})", known.join(", ")));
        }
        if out.iter().any(|(k, _)| *k == key) {
            return Err(format!("{flag}: `{key}` given twice"));
        }
        out.push((key, value.trim()));
    }
    Ok(out)
}

fn spec_number<T: std::str::FromStr>(flag: &str, key: &str, value: &str) -> Result<T, String> {
    value.parse().map_err(|_| format!("{flag}: `{key}={value}` is not a valid number"))
}

/// Parse `--hot-spot docs=N,share=S[,shift_s=T]` (T in seconds, or with a unit like `500ms`).
pub fn parse_hot_spot(s: &str) -> Result<HotSpot, String> {
    const FLAG: &str = "--hot-spot";
    let (mut documents, mut share, mut shift) = (None, None, None);
    for (key, value) in spec_fields(FLAG, s.split(','), &["docs", "share", "shift_s"])? {
        match key {
            "docs" => documents = Some(spec_number(FLAG, key, value)?),
            "share" => share = Some(spec_number(FLAG, key, value)?),
            _ => shift = Some(parse_duration(value).map_err(|e| format!("{FLAG}: shift_s: {e}"))?),
        }
    }
    let missing = |key: &str| format!("{FLAG}: `{key}=` is required (docs=N,share=S[,shift_s=T])");
    Ok(HotSpot {
        documents: documents.ok_or_else(|| missing("docs"))?,
        share: share.ok_or_else(|| missing("share"))?,
        shift,
    })
}

/// Parse `--dynamic PATH,share=S[,variants=V][,size=BYTES]` (defaults: 100 variants, 1 KiB).
pub fn parse_dynamic(s: &str) -> Result<DynamicTarget, String> {
    const FLAG: &str = "--dynamic";
    let mut parts = s.split(',');
    let path = parts.next().unwrap_or_default().trim();
    if path.is_empty() || path.contains('=') {
        return Err(format!(
            "{FLAG}: starts with the path, then share=S (`/cgi/search,share=0.1`), not `{s}`"
        ));
    }
    let mut target = DynamicTarget { path: path.into(), share: f64::NAN, variants: 100, size: 1024 };
    let mut has_share = false;
    for (key, value) in spec_fields(FLAG, parts, &["share", "variants", "size"])? {
        match key {
            "share" => {
                target.share = spec_number(FLAG, key, value)?;
                has_share = true;
            }
            "variants" => target.variants = spec_number(FLAG, key, value)?,
            _ => target.size = value.parse::<ByteSize>().map_err(|e| format!("{FLAG}: size: {e}"))?.bytes(),
        }
    }
    if !has_share {
        return Err(format!("{FLAG}: `share=` is required (PATH,share=S[,variants=V][,size=BYTES])"));
    }
    Ok(target)
}

/// Send HTTP load to one or more servers and report throughput, latency, errors and
/// byte-exact verification.
#[derive(clap::Args, Debug, Clone)]
pub struct LoadArgs {
    /// Target URLs (`http://host:port[/path]`); several are used round-robin by connection.
    /// Without --trace or --synthetic the first URL's path is requested over and over.
    #[arg(required = true, value_name = "URL")]
    pub urls: Vec<String>,
    /// Replay this trace (CLF/Combined, WC98 binary, Locus or JSON lines; `-`: stdin).
    #[arg(long, value_name = "FILE", conflicts_with = "synthetic")]
    pub trace: Option<PathBuf>,
    /// Format of --trace (detected from its first bytes when not given).
    #[arg(long, value_enum, requires = "trace")]
    pub trace_format: Option<TraceFormat>,
    /// Start the trace again when it ends (with --duration).
    #[arg(long, requires = "trace")]
    pub loop_trace: bool,
    /// Draw documents at random: from --docroot or --manifest, or `/doc/N` model documents.
    #[arg(long, value_enum)]
    pub synthetic: Option<SyntheticKind>,
    /// Browse a DC cluster like a user: the one URL is the entry page; each page's embedded
    /// objects are fetched, then a random link is followed as the server wrote it.
    #[arg(long, conflicts_with_all = ["trace", "synthetic"])]
    pub surf: bool,
    /// Surf: other servers the surfer may contact (`host:port,host:port`); links to any
    /// other host are counted as external and not followed.
    #[arg(long, value_name = "HOSTS", value_delimiter = ',', requires = "surf")]
    pub surf_hosts: Vec<String>,
    /// Surf: requests per session (pages, embedded objects and leaves).
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub session_requests: u32,
    /// Directory whose files a synthetic workload requests.
    #[arg(long, value_name = "DIR", conflicts_with = "manifest")]
    pub docroot: Option<PathBuf>,
    /// Site manifest (`site.json` or its directory): documents, pages and embeds for a
    /// synthetic workload, and expected sizes and checksums for verification.
    #[arg(long, value_name = "FILE")]
    pub manifest: Option<PathBuf>,
    /// Zipf exponent of --synthetic zipf.
    #[arg(long, default_value_t = 0.8)]
    pub alpha: f64,
    /// Model documents of --synthetic without --docroot or --manifest.
    #[arg(long, default_value_t = 10_000)]
    pub documents: u64,
    /// Concurrent connections (closed loop: clients; open loop: most connections in use).
    #[arg(long, short = 'c', default_value_t = 32)]
    pub clients: usize,
    /// Open loop: Poisson arrivals at this many requests (sessions) per second.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Keep connections open between requests (the default).
    #[arg(long, overrides_with = "no_keepalive")]
    pub keepalive: bool,
    /// Open a new connection for every request.
    #[arg(long, overrides_with = "keepalive")]
    pub no_keepalive: bool,
    /// Send up to D requests on a connection before reading the responses.
    #[arg(long, value_name = "D", default_value_t = 1)]
    pub pipeline: usize,
    /// Closed-loop think time between jobs in ms: `50` fixed, `exp:50` exponential.
    #[arg(long, value_name = "MS")]
    pub think_ms: Option<ThinkTime>,
    /// Sessions: a page then its embedded objects (synthetic), or one trace client's
    /// requests in order (trace), on one connection.
    #[arg(long)]
    pub sessions: bool,
    /// Measured time (after --warmup), e.g. 30s. Default 10s unless --requests is given.
    #[arg(long, short = 'd', value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Measured requests (after --warmup).
    #[arg(long, short = 'n')]
    pub requests: Option<u64>,
    /// Warm-up whose requests are not counted, e.g. 2s.
    #[arg(long, value_parser = parse_duration, default_value = "0s")]
    pub warmup: Duration,
    /// Worker threads, each with its own event loop (0: one per CPU).
    #[arg(long, short = 't', default_value_t = 0)]
    pub threads: usize,
    /// Longest wait for a connection or a complete response; must be shorter than the measured
    /// window. Default: the smaller of 10s and half the window.
    #[arg(long, value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// Check every response against the files of this directory (status, length, XXH3).
    #[arg(long, value_name = "DIR")]
    pub verify_root: Option<PathBuf>,
    /// Synthetic: a moving hot set, `docs=N,share=S[,shift_s=T]`: N documents drawn at random
    /// get S of the requests, and a new set is drawn every T seconds (never without shift_s).
    #[arg(long, value_name = "SPEC", value_parser = parse_hot_spot)]
    pub hot_spot: Option<HotSpot>,
    /// Synthetic: dynamic requests (repeatable), `PATH,share=S[,variants=V][,size=BYTES]`: S of
    /// the requests go to `PATH?id=k`, k < V (default 100), answered with SIZE bytes (default
    /// 1KiB; verified as locus-classify's dynamic body).
    #[arg(long, value_name = "SPEC", value_parser = parse_dynamic)]
    pub dynamic: Vec<DynamicTarget>,
    /// Do not check responses, even with --manifest.
    #[arg(long, conflicts_with = "verify_root")]
    pub no_verify: bool,
    /// Seed of every random draw (arrivals, think times, document choices).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// The switch's admin URL: policy, mode and requests per node during the run.
    #[arg(long, value_name = "URL")]
    pub switch_admin: Option<String>,
    /// A node's admin URL (repeatable): cache hit ratio during the run.
    #[arg(long, value_name = "URL")]
    pub node_admin: Vec<String>,
    /// Speak TLS to every target (as if its URL said https://).
    #[arg(long)]
    pub tls: bool,
    /// The certificate (or CA) to trust for https:// targets, in PEM.
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<std::path::PathBuf>,
    /// Resume TLS sessions with tickets (a full handshake only on a connection's first visit).
    #[arg(long)]
    pub resume: bool,
    /// The TLS server name to ask for and check (default: the URL's host).
    #[arg(long, value_name = "NAME")]
    pub tls_name: Option<String>,
    /// Offer only this TLS cipher suite (e.g. TLS13_AES_128_GCM_SHA256).
    #[arg(long, value_name = "SUITE")]
    pub tls_suite: Option<String>,
    /// Speak HTTP/2: h2 chosen by ALPN for https:// targets, cleartext h2c (prior knowledge)
    /// for http:// ones. Not with --pipeline, --no-keepalive or --surf.
    #[arg(long)]
    pub h2: bool,
    /// With --h2: requests each connection keeps in flight, each on a stream of its own (like
    /// h2load's -m); each stream runs its own loop of requests (or sessions), think times and
    /// open-loop arrivals.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub streams: usize,
}

impl LoadArgs {
    /// The run these arguments describe.
    pub fn to_config(&self) -> anyhow::Result<LoadConfig> {
        let mut targets = self.urls.iter().map(|u| u.parse::<TargetUrl>()).collect::<Result<Vec<_>, _>>()?;
        if self.tls {
            for t in &mut targets {
                t.tls = true;
            }
        }
        let workload = if self.surf {
            if targets.len() != 1 {
                bail!("--surf takes one URL, the entry page (other servers go in --surf-hosts)");
            }
            let hosts =
                self.surf_hosts.iter().map(|h| h.parse::<TargetUrl>()).collect::<Result<Vec<_>, _>>()?;
            Workload::Surf { entry: targets[0].clone(), hosts, session_requests: self.session_requests }
        } else if let Some(path) = &self.trace {
            Workload::Trace {
                source: TraceSource::File { path: path.clone(), format: self.trace_format },
                repeat: self.loop_trace,
            }
        } else if let Some(kind) = self.synthetic {
            let popularity = match kind {
                SyntheticKind::Zipf => Popularity::Zipf { alpha: self.alpha },
                SyntheticKind::Uniform => Popularity::Uniform,
            };
            let documents = match (&self.docroot, &self.manifest) {
                (Some(root), _) => DocumentSet::Docroot(root.clone()),
                (None, Some(m)) => DocumentSet::Manifest(m.clone()),
                (None, None) => DocumentSet::Model { documents: self.documents },
            };
            Workload::Synthetic { popularity, documents }
        } else {
            if self.docroot.is_some() {
                bail!("--docroot chooses the documents of --synthetic; give --synthetic zipf|uniform too");
            }
            Workload::SingleUrl
        };
        let verification = match (&self.verify_root, &self.manifest, self.no_verify) {
            (_, _, true) => Verification::Off,
            (Some(root), _, _) => Verification::Root(root.clone()),
            (None, Some(m), _) => Verification::Manifest(m.clone()),
            (None, None, _) => Verification::Off,
        };
        let admin = |u: &String| u.parse::<TargetUrl>().with_context(|| format!("admin URL {u}"));
        Ok(LoadConfig {
            targets,
            workload,
            clients: self.clients,
            rate: self.rate,
            keepalive: !self.no_keepalive,
            pipeline: self.pipeline,
            think: self.think_ms.unwrap_or_default(),
            sessions: self.sessions,
            duration: self.duration,
            requests: self.requests,
            warmup: self.warmup,
            threads: self.threads,
            timeout: self.timeout.unwrap_or(DEFAULT_TIMEOUT),
            timeout_fixed: self.timeout.is_some(),
            verification,
            seed: self.seed,
            switch_admin: self.switch_admin.as_ref().map(admin).transpose()?,
            node_admins: self.node_admin.iter().map(admin).collect::<Result<_, _>>()?,
            progress: std::io::stderr().is_terminal(),
            mismatch_samples: 10,
            hot_spot: self.hot_spot.clone(),
            dynamic: self.dynamic.clone(),
            tls_ca: self.tls_ca.clone(),
            tls_resume: self.resume,
            tls_name: self.tls_name.clone(),
            tls_suite: self.tls_suite.clone(),
            h2: self.h2,
            streams: self.streams,
        })
    }
}

/// `locus load`: run, print the report (text, or JSON with `--json`), and fail when any
/// response did not match what was expected, or when no request got a response at all.
pub fn run(args: LoadArgs) -> anyhow::Result<()> {
    let config = args.to_config()?;
    let report = run_load(&config)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report.to_json())?);
    } else {
        print!("{}", report.render_text());
    }
    if report.mismatches > 0 {
        bail!("{} of {} checked responses did not match", report.mismatches, report.verified);
    }
    if report.requests == 0 && report.errors > 0 {
        bail!("no request got a response ({} errors)", report.errors);
    }
    Ok(())
}

/// What `target` serves now, as the one expectation every later response must meet
/// (`Verification::Pinned`): its length and checksum for a 200, its status otherwise.
pub fn pin_response(target: &TargetUrl, timeout: Duration) -> anyhow::Result<Expectation> {
    let (status, body) = fetch_document(target, &target.path, timeout).map_err(anyhow::Error::msg)?;
    Ok(if status == 200 { Expectation::of_body(&body) } else { Expectation::Status(status) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        load: LoadArgs,
    }

    fn parse(args: &[&str]) -> LoadArgs {
        Cli::try_parse_from(std::iter::once("load").chain(args.iter().copied())).unwrap().load
    }

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("x").is_err() && parse_duration("-1s").is_err());
        assert!(parse_duration("1e300h").is_err() && parse_duration("inf").is_err());
    }

    #[test]
    fn arguments_become_the_config_they_describe() {
        let a = parse(&[
            "http://127.0.0.1:1",
            "http://127.0.0.1:2/x",
            "--synthetic",
            "zipf",
            "--alpha",
            "1.1",
            "--manifest",
            "/site",
            "-c",
            "4",
            "--rate",
            "100",
            "--no-keepalive",
            "--sessions",
            "-n",
            "50",
            "--warmup",
            "1s",
            "--node-admin",
            "http://127.0.0.1:3",
            "--node-admin",
            "http://127.0.0.1:4",
        ]);
        let c = a.to_config().unwrap();
        assert_eq!(c.targets.len(), 2);
        assert!(matches!(
            c.workload,
            Workload::Synthetic { popularity: Popularity::Zipf { alpha }, documents: DocumentSet::Manifest(_) } if alpha == 1.1
        ));
        assert!(matches!(c.verification, Verification::Manifest(_)), "a manifest turns verification on");
        assert_eq!(
            (c.clients, c.rate, c.keepalive, c.sessions, c.requests),
            (4, Some(100.0), false, true, Some(50))
        );
        assert_eq!(c.warmup, Duration::from_secs(1));
        assert_eq!(c.node_admins.len(), 2);
        let c = parse(&[
            "http://h:1/a",
            "--manifest",
            "/s",
            "--synthetic",
            "uniform",
            "--no-verify",
            "--think-ms",
            "exp:5",
        ])
        .to_config()
        .unwrap();
        assert!(matches!(c.verification, Verification::Off));
        assert_eq!(c.think, ThinkTime::Exponential(Duration::from_millis(5)));
        let c = parse(&["http://h:1/a"]).to_config().unwrap();
        assert!(c.keepalive && matches!(c.workload, Workload::SingleUrl));
        assert_eq!((c.h2, c.streams), (false, 1), "HTTP/1.1 unless asked");
        let c =
            parse(&["https://h:1/a", "--h2", "--streams", "8", "--tls-ca", "/ca.pem"]).to_config().unwrap();
        assert_eq!((c.h2, c.streams), (true, 8));
        assert!(c.validate().is_ok());
        let e = parse(&["http://h:1/a", "--streams", "8"]).to_config().unwrap().validate().unwrap_err();
        assert!(e.to_string().contains("--h2"), "{e}");
        let e =
            parse(&["http://h:1/a", "--h2", "--pipeline", "4"]).to_config().unwrap().validate().unwrap_err();
        assert!(e.to_string().contains("pipelining"), "{e}");
        assert!(parse(&["ftp://h/"]).to_config().is_err());
    }

    #[test]
    fn hot_spot_and_dynamic_specs_parse_with_defaults_and_refusals_name_the_key() {
        let a = parse(&[
            "http://h:1/",
            "--synthetic",
            "zipf",
            "--hot-spot",
            "docs=10,share=0.6,shift_s=30",
            "--dynamic",
            "/cgi/search,share=0.1",
            "--dynamic",
            "/cgi/cart,share=0.05,variants=7,size=2KiB",
        ]);
        let c = a.to_config().unwrap();
        assert_eq!(
            c.hot_spot,
            Some(HotSpot { documents: 10, share: 0.6, shift: Some(Duration::from_secs(30)) })
        );
        assert_eq!(
            c.dynamic,
            [
                DynamicTarget { path: "/cgi/search".into(), share: 0.1, variants: 100, size: 1024 },
                DynamicTarget { path: "/cgi/cart".into(), share: 0.05, variants: 7, size: 2048 },
            ]
        );
        assert!(c.validate().is_ok());
        assert_eq!(parse_hot_spot("share=1,docs=1").unwrap().shift, None);
        assert_eq!(
            parse_hot_spot("docs=1,share=1,shift_s=500ms").unwrap().shift,
            Some(Duration::from_millis(500))
        );
        let err = |r: Result<(), String>| r.unwrap_err();
        assert!(err(parse_hot_spot("docs=1").map(drop)).contains("share"));
        assert!(err(parse_hot_spot("docs=x,share=1").map(drop)).contains("docs=x"));
        assert!(err(parse_hot_spot("docs=1,share=1,shift=3").map(drop)).contains("shift"));
        assert!(err(parse_hot_spot("docs=1,docs=2,share=1").map(drop)).contains("twice"));
        assert!(err(parse_dynamic("/a").map(drop)).contains("share"));
        assert!(err(parse_dynamic("share=0.1").map(drop)).contains("path"));
        assert!(err(parse_dynamic("/a,share=0.1,size=lots").map(drop)).contains("size"));
        assert!(err(parse_dynamic("/a,share=0.1,variants=-1").map(drop)).contains("variants"));
        // Out-of-range values parse, and validation names the field.
        let bad = parse(&["http://h:1/", "--synthetic", "uniform", "--hot-spot", "docs=1,share=2"]);
        assert!(bad.to_config().unwrap().validate().unwrap_err().to_string().contains("hot_spot.share"));
        let trace = parse(&["http://h:1/", "--trace", "t.log", "--dynamic", "/a,share=0.5"]);
        assert!(trace.to_config().unwrap().validate().unwrap_err().to_string().contains("synthetic"));
    }

    #[test]
    fn surf_arguments_name_the_entry_the_allowed_hosts_and_the_session_length() {
        let a = parse(&[
            "http://127.0.0.1:8001/index.html",
            "--surf",
            "--surf-hosts",
            "127.0.0.1:8002,127.0.0.1:8003",
            "--session-requests",
            "7",
            "--manifest",
            "/site",
        ]);
        let c = a.to_config().unwrap();
        let Workload::Surf { entry, hosts, session_requests } = &c.workload else { panic!("surf workload") };
        assert_eq!((entry.port, entry.path.as_str(), *session_requests), (8001, "/index.html", 7));
        assert_eq!(hosts.iter().map(|h| h.port).collect::<Vec<_>>(), [8002, 8003]);
        assert!(matches!(c.verification, Verification::Manifest(_)));
        assert!(c.validate().is_ok());
        let two = parse(&["http://h:1/", "http://h:2/", "--surf"]);
        assert!(two.to_config().unwrap_err().to_string().contains("one URL"));
        let open = parse(&["http://h:1/", "--surf", "--rate", "10"]);
        assert!(open.to_config().unwrap().validate().is_err());
        let zero = parse(&["http://h:1/", "--surf", "--session-requests", "0"]);
        assert!(zero.to_config().unwrap().validate().is_err());
    }
}
