//! A workload of an experiment (`[[workload]]`): a generated site and the request stream over
//! it — Zipf popularity, optionally a moving hot set (`[workload.hot_spot]`, a flash crowd)
//! and dynamic classes mixed in (`[[workload.dynamic]]`, each a node class with a share) —
//! closed or open loop, with its own node counts, timing and node settings if it needs them.

use locus_classify::ClassConfig;
use serde::{Deserialize, Serialize};

use crate::experiment::NodeSettings;

fn default_alpha() -> f64 {
    0.9
}
fn default_clients() -> usize {
    64
}
fn default_seed() -> u64 {
    1
}
fn default_html_share() -> f64 {
    0.1
}
fn default_variants() -> u32 {
    100
}

/// A synthetic workload: a generated site and a Zipf request stream over it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// Name in results and file names (letters, digits, `-`, `_`).
    pub name: String,
    /// Files in the generated site (0 with a `preset`, which sets its own).
    #[serde(default)]
    pub files: u32,
    /// A site shaped like one of the DC-Apache paper's data sets (`mapug`, `lod`, `specweb99`,
    /// `sequoia`) in place of `files`, `sizes` and `html_share`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    /// The preset's scale (0 < scale <= 1; absent: 1): fewer files of the same sizes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<f64>,
    /// Clients surf the site (`[workload.surf]`) instead of drawing documents by popularity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub surf: Option<SurfSpec>,
    /// Zipf exponent of document popularity.
    #[serde(default = "default_alpha")]
    pub alpha: f64,
    /// Closed loop: concurrent clients (connections); open loop: the most connections in use.
    #[serde(default = "default_clients")]
    pub clients: usize,
    /// Open loop: Poisson arrivals per second; absent: closed loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Load generator threads (0: one per CPU).
    #[serde(default)]
    pub load_threads: usize,
    /// Seed of the site and the request stream.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Share of files that are HTML pages.
    #[serde(default = "default_html_share")]
    pub html_share: f64,
    /// File sizes.
    #[serde(default)]
    pub sizes: FileSizes,
    /// Node counts of this workload's points (absent: the experiment's `nodes`; `--full`
    /// runs the experiment's for every workload).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<usize>>,
    /// Runs of this workload's points, each with its own seed of the request stream (absent:
    /// the experiment's `repeat`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<u32>,
    /// Warm-up of this workload's points (absent: the experiment's `warmup_s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_s: Option<f64>,
    /// Measured time of this workload's points (absent: the experiment's `measure_s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measure_s: Option<f64>,
    /// Node settings of this workload's points (absent: the experiment's `[node]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<NodeSettings>,
    /// A moving hot set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hot_spot: Option<HotSpotSpec>,
    /// Dynamic classes mixed into the stream (the nodes serve them; Locus switches classify
    /// with them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dynamic: Vec<DynamicSpec>,
    /// Clients speak HTTPS to the balancer, which terminates TLS (the Locus switch in proxy or
    /// splice mode, HAProxy, NGINX) before cleartext nodes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tls: bool,
    /// Clients speak HTTP/2 (ALPN `h2`; needs `tls`): every balancer terminates it and speaks
    /// HTTP/1.1 to the nodes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub h2: bool,
    /// HTTP/2: requests each client connection keeps in flight, a stream each (h2load's `-m`).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub streams: usize,
    /// The load generator: `locus` (`locus load`, every byte verified) or `h2load` (nghttp2's
    /// client fetching the same Zipf stream as a URL list; status codes checked only).
    #[serde(default, skip_serializing_if = "LoadClient::is_default")]
    pub client: LoadClient,
}

/// Which program is the lab's client.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LoadClient {
    #[default]
    Locus,
    H2load,
}

impl LoadClient {
    fn is_default(&self) -> bool {
        *self == LoadClient::Locus
    }
}

fn one() -> usize {
    1
}

fn is_one(v: &usize) -> bool {
    *v == 1
}

fn default_session_requests() -> u32 {
    20
}

/// `[workload.surf]`: every client runs sessions that start at the site's entry page, fetch a
/// page's embedded objects, then follow one of its links as the server wrote it (to whichever
/// server it names); at an image or download the client goes back to the last page it holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SurfSpec {
    /// Requests per session (the entry page included).
    #[serde(default = "default_session_requests")]
    pub session_requests: u32,
    /// Keep connections open between requests (absent: a connection per request, as HTTP/1.0
    /// browsers did, so requests/s are connections/s).
    #[serde(default)]
    pub keepalive: bool,
}

/// `[workload.hot_spot]`: `documents` documents, drawn afresh every `shift_s`, get `share` of
/// the static requests.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HotSpotSpec {
    pub documents: u32,
    pub share: f64,
    /// Seconds a hot set lasts (absent: it never moves).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shift_s: Option<f64>,
}

/// `[[workload.dynamic]]`: a node class and the share of all requests sent to it, as
/// `{prefix}?id={k}` with `k` in `0..variants`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DynamicSpec {
    pub share: f64,
    #[serde(default = "default_variants")]
    pub variants: u32,
    /// The class, in the `[[classes]]` schema of nodes and switches.
    pub class: ClassConfig,
}

/// File sizes of a generated site: a lognormal body and a Pareto tail (SURGE's shape).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FileSizes {
    /// Median size of the lognormal body.
    pub median_bytes: u64,
    /// Standard deviation of ln(size) in the body.
    pub sigma: f64,
    /// Share of files in the Pareto tail.
    pub tail_share: f64,
    /// Where the tail starts.
    pub tail_bytes: u64,
    /// Pareto shape of the tail.
    pub tail_alpha: f64,
    pub min_bytes: u64,
    pub max_bytes: u64,
}

impl Default for FileSizes {
    fn default() -> Self {
        FileSizes {
            median_bytes: 8192,
            sigma: 1.0,
            tail_share: 0.03,
            tail_bytes: 96 * 1024,
            tail_alpha: 1.1,
            min_bytes: 128,
            max_bytes: 512 * 1024,
        }
    }
}

fn share_in_unit(v: f64) -> bool {
    v.is_finite() && v > 0.0 && v <= 1.0
}

impl WorkloadSpec {
    /// A workload with this name and site size and every other setting at its default.
    pub fn new(name: &str, files: u32) -> WorkloadSpec {
        WorkloadSpec {
            name: name.into(),
            files,
            preset: None,
            scale: None,
            surf: None,
            alpha: default_alpha(),
            clients: default_clients(),
            rate: None,
            load_threads: 0,
            seed: default_seed(),
            html_share: default_html_share(),
            sizes: FileSizes::default(),
            nodes: None,
            repeat: None,
            warmup_s: None,
            measure_s: None,
            node: None,
            hot_spot: None,
            dynamic: Vec::new(),
            tls: false,
            h2: false,
            streams: 1,
            client: LoadClient::Locus,
        }
    }

    /// Check values that parse but make no sense; the message starts with the key.
    pub(crate) fn validate(&self) -> Result<(), String> {
        let n = &self.name;
        if n.is_empty() || !n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
            return Err(format!("name: `{n}` must be letters, digits, `-` or `_`"));
        }
        self.validate_site()?;
        if !(self.alpha.is_finite() && (0.0..=4.0).contains(&self.alpha)) {
            return Err(format!("alpha = {}: must be within 0..=4", self.alpha));
        }
        if self.clients == 0 || self.clients > 8000 {
            return Err(format!("clients = {}: must be within 1..=8000", self.clients));
        }
        if let Some(r) = self.rate
            && !(r.is_finite() && r > 0.0 && r <= 1_000_000.0)
        {
            return Err(format!("rate = {r}: must be within (0, 1000000] requests/s"));
        }
        if self.load_threads > 64 {
            return Err(format!("load_threads = {}: at most 64", self.load_threads));
        }
        if !(0.0..=1.0).contains(&self.html_share) {
            return Err(format!("html_share = {}: must be within 0..=1", self.html_share));
        }
        let s = &self.sizes;
        if s.median_bytes == 0 || s.min_bytes > s.max_bytes || s.max_bytes > 64 << 20 {
            return Err("sizes: need median_bytes > 0 and min_bytes <= max_bytes <= 64 MiB".into());
        }
        self.size_model().sampler().map_err(|e| format!("sizes: {e}"))?;
        self.validate_timing()?;
        if self.tls && self.surf.is_some() {
            return Err("tls: the surfer speaks HTTP only; drop tls or [workload.surf]".into());
        }
        if self.h2 && !self.tls {
            return Err("h2: HTTP/2 is measured over TLS (ALPN h2); set tls = true".into());
        }
        if self.streams == 0 || self.streams > 1024 || (self.streams > 1 && !self.h2) {
            return Err(format!("streams = {}: 1 without h2, within 1..=1024 with it", self.streams));
        }
        if self.client == LoadClient::H2load {
            self.validate_h2load()?;
        }
        if let Some(node) = &self.node {
            node.validate().map_err(|m| format!("node.{m}"))?;
        }
        self.validate_mix()
    }

    fn validate_site(&self) -> Result<(), String> {
        match &self.preset {
            Some(p) => {
                p.parse::<locus_trace::SitePreset>().map_err(|e| format!("preset: {e}"))?;
                if self.files != 0 {
                    return Err(format!(
                        "files = {}: a preset sets its own files; leave files out",
                        self.files
                    ));
                }
                if let Some(s) = self.scale
                    && !(s.is_finite() && s > 0.0 && s <= 1.0)
                {
                    return Err(format!("scale = {s}: must be within (0, 1]"));
                }
            }
            None if self.scale.is_some() => return Err("scale: a setting of preset sites only".into()),
            None if self.files == 0 || self.files > 1_000_000 => {
                return Err(format!("files = {}: must be within 1..=1000000", self.files));
            }
            None => {}
        }
        if let Some(surf) = &self.surf {
            if surf.session_requests == 0 || surf.session_requests > 10_000 {
                return Err(format!(
                    "surf.session_requests = {}: must be within 1..=10000",
                    surf.session_requests
                ));
            }
            if self.hot_spot.is_some() || !self.dynamic.is_empty() || self.rate.is_some() {
                return Err(
                    "surf: surfers follow links in a closed loop; no hot_spot, dynamic or rate".into()
                );
            }
        }
        Ok(())
    }

    /// What h2load cannot do: arrivals (it is a closed loop), surfing, and a hot spot that moves
    /// (its URL list has no clock).
    fn validate_h2load(&self) -> Result<(), String> {
        if self.rate.is_some() || self.surf.is_some() {
            return Err(
                "client = \"h2load\": a closed loop over a URL list; drop rate and [workload.surf]".into()
            );
        }
        if self.hot_spot.as_ref().is_some_and(|h| h.shift_s.is_some()) {
            return Err(
                "client = \"h2load\": its URL list cannot follow a moving hot spot; drop hot_spot.shift_s"
                    .into(),
            );
        }
        Ok(())
    }

    fn validate_timing(&self) -> Result<(), String> {
        if let Some(nodes) = &self.nodes {
            crate::experiment::validate_node_counts(nodes).map_err(|m| format!("nodes{m}"))?;
        }
        if let Some(r) = self.repeat
            && !(1..=100).contains(&r)
        {
            return Err(format!("repeat = {r}: must be within 1..=100"));
        }
        if let Some(w) = self.warmup_s
            && !(w.is_finite() && (0.0..=3600.0).contains(&w))
        {
            return Err(format!("warmup_s = {w}: must be within 0..=3600 seconds"));
        }
        if let Some(m) = self.measure_s
            && !(m.is_finite() && m > 0.0 && m <= 3600.0)
        {
            return Err(format!("measure_s = {m}: must be within (0, 3600] seconds"));
        }
        Ok(())
    }

    fn validate_mix(&self) -> Result<(), String> {
        if let Some(h) = &self.hot_spot {
            if h.documents == 0 || h.documents > self.files {
                return Err(format!(
                    "hot_spot.documents = {}: the hot set must be within 1..={} (the site's files)",
                    h.documents, self.files
                ));
            }
            if !share_in_unit(h.share) {
                return Err(format!("hot_spot.share = {}: must be within (0, 1]", h.share));
            }
            if let Some(t) = h.shift_s
                && !(t.is_finite() && t > 0.0 && t <= 3600.0)
            {
                return Err(format!("hot_spot.shift_s = {t}: must be within (0, 3600] seconds"));
            }
        }
        let mut total = 0.0;
        for (i, d) in self.dynamic.iter().enumerate() {
            if !share_in_unit(d.share) {
                return Err(format!("dynamic[{i}].share = {}: must be within (0, 1]", d.share));
            }
            if d.variants == 0 || d.variants > 1_000_000 {
                return Err(format!("dynamic[{i}].variants = {}: must be within 1..=1000000", d.variants));
            }
            if d.class.prefix.contains('?') {
                return Err(format!(
                    "dynamic[{i}].class.prefix: `{}` must be a path without `?`",
                    d.class.prefix
                ));
            }
            if self.dynamic[..i].iter().any(|o| o.class.name == d.class.name) {
                return Err(format!("dynamic[{i}].class.name: `{}` is used twice", d.class.name));
            }
            total += d.share;
        }
        if total > 1.0 + 1e-9 {
            return Err(format!("dynamic: the shares add up to {total}, more than 1"));
        }
        if !self.dynamic.is_empty() {
            let classes: Vec<ClassConfig> = self.dynamic.iter().map(|d| d.class.clone()).collect();
            locus_classify::RequestClassifier::new(&classes).map_err(|e| format!("dynamic: {e}"))?;
        }
        Ok(())
    }

    /// The dynamic classes, in the `[[classes]]` file schema.
    pub fn class_file_text(&self) -> String {
        self.class_file_text_scaled(1.0)
    }

    /// The class file with every class's cost multiplied by `factor` (what a switch is told
    /// when its class table is wrong by that factor; the nodes keep the true costs).
    pub fn class_file_text_scaled(&self, factor: f64) -> String {
        #[derive(Serialize)]
        struct File {
            classes: Vec<ClassConfig>,
        }
        let classes = self
            .dynamic
            .iter()
            .map(|d| ClassConfig { cost: d.class.cost.scaled(factor), ..d.class.clone() })
            .collect();
        toml::to_string_pretty(&File { classes }).unwrap_or_default()
    }

    /// The size model handed to the site generator.
    pub fn size_model(&self) -> locus_trace::SizeModel {
        let s = &self.sizes;
        locus_trace::SizeModel {
            body_mu: (s.median_bytes.max(1) as f64).ln(),
            body_sigma: s.sigma,
            tail_alpha: s.tail_alpha,
            tail_k: s.tail_bytes.max(1) as f64,
            tail_share: s.tail_share,
            min_size: s.min_bytes,
            max_size: s.max_bytes,
        }
    }
}
