//! `TlsService`: one TLS listener's live state — the server configuration new handshakes use
//! (replaced whole by `reload`, so connections already open keep theirs), what its
//! certificates say (names, expiry), the bound on handshakes in progress (a flood is shed at
//! once, established connections untouched), and the handshake counters status and metrics
//! show (full, resumed, failed by reason, versions, suites), in JSON and as Prometheus metrics.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde::Serialize;
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::error::TlsError;
use crate::settings::TlsSettings;
use crate::stream::{HandshakeFailure, TlsStream, accept};

/// What a loaded certificate says, for status.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CertificateSummary {
    pub file: String,
    pub names: Vec<String>,
    /// The end of its validity, in seconds since the Unix epoch.
    pub not_after_unix: i64,
}

struct Loaded {
    config: Arc<rustls::ServerConfig>,
    certificates: Vec<CertificateSummary>,
}

/// Handshake counts since start.
#[derive(Default)]
struct Counters {
    full: AtomicU64,
    resumed: AtomicU64,
    /// By `HandshakeFailure::reason`, and "shed" for those refused over the bound.
    failed: Mutex<BTreeMap<&'static str, u64>>,
    /// By version and by suite, of finished handshakes.
    versions: Mutex<BTreeMap<&'static str, u64>>,
    suites: Mutex<BTreeMap<&'static str, u64>>,
    reloads: AtomicU64,
}

fn bump(map: &Mutex<BTreeMap<&'static str, u64>>, key: &'static str) {
    *map.lock().unwrap_or_else(|p| p.into_inner()).entry(key).or_default() += 1;
}

fn copy(map: &Mutex<BTreeMap<&'static str, u64>>) -> BTreeMap<String, u64> {
    map.lock().unwrap_or_else(|p| p.into_inner()).iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

/// The `tls` object of a status document.
#[derive(Clone, Debug, Serialize)]
pub struct TlsStatus {
    pub handshakes_full: u64,
    pub handshakes_resumed: u64,
    pub handshakes_failed: BTreeMap<String, u64>,
    pub handshakes_in_progress: usize,
    pub versions: BTreeMap<String, u64>,
    pub suites: BTreeMap<String, u64>,
    pub certificates: Vec<CertificateSummary>,
    /// Days until the first certificate expires (negative once one has).
    pub days_to_first_expiry: Option<i64>,
    pub reloads: u64,
}

/// A configuration's TLS files, read and checked, waiting to be put in force.
pub struct PreparedTls {
    settings: TlsSettings,
    loaded: Loaded,
}

/// A TLS listener's configuration, bound and counters.
pub struct TlsService {
    settings: RwLock<TlsSettings>,
    alpn: Vec<Vec<u8>>,
    current: RwLock<Arc<Loaded>>,
    handshakes: Arc<Semaphore>,
    max_handshakes: usize,
    counters: Counters,
}

impl TlsService {
    /// Read every file `settings` names (checked at `now`) for a listener offering `alpn`.
    pub fn new(settings: TlsSettings, alpn: &[&[u8]], now: SystemTime) -> Result<TlsService, TlsError> {
        let loaded = load(&settings, alpn, now)?;
        let max = settings.max_handshakes.max(1);
        Ok(TlsService {
            alpn: alpn.iter().map(|p| p.to_vec()).collect(),
            settings: RwLock::new(settings),
            current: RwLock::new(Arc::new(loaded)),
            handshakes: Arc::new(Semaphore::new(max)),
            max_handshakes: max,
            counters: Counters::default(),
        })
    }

    /// Read the files again; on success new handshakes use them, on failure nothing changes
    /// and the error names the file.
    pub fn reload(&self, now: SystemTime) -> Result<(), TlsError> {
        let settings = self.settings.read().unwrap_or_else(|p| p.into_inner()).clone();
        let prepared = self.prepare(settings, now)?;
        self.install(prepared);
        Ok(())
    }

    /// Read every file `settings` names (a reloaded configuration's `[tls]`), for
    /// [`TlsService::install`]; nothing changes yet. The handshake bound stays the one
    /// started with.
    pub fn prepare(&self, settings: TlsSettings, now: SystemTime) -> Result<PreparedTls, TlsError> {
        let alpn: Vec<&[u8]> = self.alpn.iter().map(Vec::as_slice).collect();
        let loaded = load(&settings, &alpn, now)?;
        Ok(PreparedTls { settings, loaded })
    }

    /// Put prepared settings in force: new handshakes use them, open connections keep theirs.
    pub fn install(&self, prepared: PreparedTls) {
        *self.settings.write().unwrap_or_else(|p| p.into_inner()) = prepared.settings;
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(prepared.loaded);
        self.counters.reloads.fetch_add(1, Relaxed);
    }

    /// `reload` now, for a SIGHUP: the outcome is logged (a failure names the file and leaves
    /// the running configuration in place).
    pub fn reload_logged(&self) {
        match self.reload(SystemTime::now()) {
            Ok(()) => {
                let settings = self.settings.read().unwrap_or_else(|p| p.into_inner());
                let n = settings.certificates.len();
                let tickets = settings.ticket_keys.is_some();
                tracing::info!(certificates = n, ticket_keys = tickets, "TLS files reloaded");
            }
            Err(e) => tracing::error!("TLS reload refused, the files in use stay: {e}"),
        }
    }

    fn config(&self) -> Arc<rustls::ServerConfig> {
        self.current.read().unwrap_or_else(|p| p.into_inner()).config.clone()
    }

    /// Handshake on `tcp` until `deadline`, counting the outcome. Over the bound on
    /// handshakes in progress the connection is refused at once (`Protocol` is not sent:
    /// nothing has been read).
    pub async fn accept(&self, tcp: TcpStream, deadline: Instant) -> Result<TlsStream, HandshakeFailure> {
        self.accept_counted(tcp, deadline, false).await
    }

    /// `accept`, keeping what hands the session over with its connection (one-way HTTPS:
    /// `TlsStream::take_over`).
    pub async fn accept_exportable(
        &self,
        tcp: TcpStream,
        deadline: Instant,
    ) -> Result<TlsStream, HandshakeFailure> {
        self.accept_counted(tcp, deadline, true).await
    }

    async fn accept_counted(
        &self,
        tcp: TcpStream,
        deadline: Instant,
        exportable: bool,
    ) -> Result<TlsStream, HandshakeFailure> {
        let Ok(_permit) = self.handshakes.clone().try_acquire_owned() else {
            bump(&self.counters.failed, "shed");
            return Err(HandshakeFailure::Shed);
        };
        let outcome = if exportable {
            crate::export::accept_exportable(tcp, &self.config(), deadline).await
        } else {
            accept(tcp, self.config(), deadline).await
        };
        match &outcome {
            Ok(stream) => {
                let n = stream.negotiated();
                let c = &self.counters;
                if n.resumed { &c.resumed } else { &c.full }.fetch_add(1, Relaxed);
                bump(&c.versions, n.version);
                bump(&c.suites, n.suite);
            }
            Err(e) => bump(&self.counters.failed, e.reason()),
        }
        outcome
    }

    /// The counters and certificates at `now`.
    pub fn status(&self, now: SystemTime) -> TlsStatus {
        let c = &self.counters;
        let certificates = self.current.read().unwrap_or_else(|p| p.into_inner()).certificates.clone();
        let now_unix = now.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        let days_to_first_expiry =
            certificates.iter().map(|c| (c.not_after_unix - now_unix).div_euclid(86_400)).min();
        TlsStatus {
            handshakes_full: c.full.load(Relaxed),
            handshakes_resumed: c.resumed.load(Relaxed),
            handshakes_failed: copy(&c.failed),
            handshakes_in_progress: self.max_handshakes - self.handshakes.available_permits(),
            versions: copy(&c.versions),
            suites: copy(&c.suites),
            certificates,
            days_to_first_expiry,
            reloads: c.reloads.load(Relaxed),
        }
    }
}

type Labels = Vec<(String, String)>;

/// A counter family with one member per entry of `values`, labelled `label`.
pub fn counter_family(
    label: &str,
    values: &BTreeMap<String, u64>,
) -> Family<Labels, Counter<u64, AtomicU64>> {
    let family = Family::<Labels, Counter<u64, AtomicU64>>::default();
    for (k, v) in values {
        family.get_or_create(&vec![(label.to_string(), k.clone())]).inc_by(*v);
    }
    family
}

impl TlsStatus {
    /// Register these figures in `reg` (names prefixed `tls_` under the registry's prefix).
    pub fn register_metrics(&self, reg: &mut Registry) {
        let kinds = BTreeMap::from([
            ("full".to_string(), self.handshakes_full),
            ("resumed".to_string(), self.handshakes_resumed),
        ]);
        reg.register(
            "tls_handshakes",
            "TLS handshakes completed, full or resumed",
            counter_family("kind", &kinds),
        );
        reg.register(
            "tls_handshake_failures",
            "TLS handshakes that failed, by reason",
            counter_family("reason", &self.handshakes_failed),
        );
        reg.register(
            "tls_versions",
            "Completed handshakes by TLS version",
            counter_family("version", &self.versions),
        );
        reg.register(
            "tls_suites",
            "Completed handshakes by cipher suite",
            counter_family("suite", &self.suites),
        );
        let in_progress = Gauge::<i64>::default();
        in_progress.set(self.handshakes_in_progress as i64);
        reg.register("tls_handshakes_in_progress", "TLS handshakes in progress", in_progress);
        let expiry = Family::<Labels, Gauge>::default();
        for c in &self.certificates {
            expiry.get_or_create(&vec![("file".to_string(), c.file.clone())]).set(c.not_after_unix);
        }
        reg.register(
            "tls_certificate_not_after_seconds",
            "End of each certificate's validity (Unix time)",
            expiry,
        );
        let reloads = Counter::<u64>::default();
        reloads.inc_by(self.reloads);
        reg.register("tls_reloads", "Certificate and ticket-key reloads", reloads);
    }
}

fn load(settings: &TlsSettings, alpn: &[&[u8]], now: SystemTime) -> Result<Loaded, TlsError> {
    let (config, certs) = settings.load_with_certificates(alpn, now)?;
    let certificates = certs
        .iter()
        .map(|c| CertificateSummary {
            file: c.cert_path.display().to_string(),
            names: c.names.clone(),
            not_after_unix: c.not_after_unix,
        })
        .collect();
    Ok(Loaded { config, certificates })
}
