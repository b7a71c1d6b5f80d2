//! `locus trace`: the `TraceCommand` subcommands (synth, site, surf, stats, convert), their
//! flags, and `run`, which writes traces and reports to a file (`--out`) or standard output.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::Serialize;

use crate::progress::ProgressLine;
use crate::reader::{ReadOptions, TraceFormat, TraceReader};
use crate::record::TraceRecord;
use crate::site::{SITE_MANIFEST_FILE, SiteGenerator, SiteSpec};
use crate::site_presets::SitePreset;
use crate::size_model::SizeModel;
use crate::stats::{StatsAccumulator, TraceStats};
use crate::surf::{SiteGraph, SurfSpec, Surfer};
use crate::synth::{
    Arrivals, DocumentSizes, DynamicClassSpec, HotTargetSpec, HotWindow, ZipfTraceGenerator, ZipfTraceSpec,
};
use crate::writer::TraceWriter;
use locus_site::DocumentTree;

/// `locus trace` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum TraceCommand {
    /// Make a synthetic trace: Zipf popularity over a document set, SURGE or on-disk sizes,
    /// one-timers, hot targets, dynamic classes, Poisson arrivals.
    Synth(SynthArgs),
    /// Write a synthetic web site: files of SURGE sizes, HTML pages that link and embed,
    /// subdirectories (or a preset: mapug, lod, specweb99, sequoia), and a site.json manifest.
    Site(SiteArgs),
    /// Make a random-surfer trace over a directory of HTML pages.
    Surf(SurfArgs),
    /// Characterise a trace: working set, memory to cover X% of requests, one-timers, sizes.
    Stats(StatsArgs),
    /// Convert a trace (CLF/Combined, WC98, Locus, JSON lines) to another format.
    Convert(ConvertArgs),
}

/// Where and how a trace is written.
#[derive(clap::Args, Debug, Clone)]
pub struct TraceOutputArgs {
    /// Output file (default: standard output; `-` also means standard output).
    #[arg(long, short)]
    pub out: Option<PathBuf>,
    /// Output format.
    #[arg(long, alias = "to", value_enum, default_value_t = TraceFormat::Locus)]
    pub format: TraceFormat,
}

/// How a trace is read.
#[derive(clap::Args, Debug, Clone)]
pub struct TraceInputArgs {
    /// Input trace (`-` for standard input); uncompressed (pipe `.gz` through `gunzip -c`).
    pub input: PathBuf,
    /// Input format (default: detected from the content).
    #[arg(long, value_enum)]
    pub from: Option<TraceFormat>,
    /// Malformed records to skip before giving up.
    #[arg(long, default_value_t = 1000)]
    pub max_malformed: u64,
}

/// SURGE size-model parameters (defaults: SURGE's).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct SizeModelArgs {
    /// Lognormal body: mean of ln(size) [default: 9.357].
    #[arg(long)]
    pub size_mu: Option<f64>,
    /// Lognormal body: standard deviation of ln(size) [default: 1.318].
    #[arg(long)]
    pub size_sigma: Option<f64>,
    /// Pareto tail shape [default: 1.1].
    #[arg(long)]
    pub tail_alpha: Option<f64>,
    /// Pareto tail scale and body/tail cut-off in bytes [default: 133000].
    #[arg(long)]
    pub tail_k: Option<f64>,
    /// Share of sizes drawn from the tail [default: 0.07].
    #[arg(long)]
    pub tail_share: Option<f64>,
    /// Smallest size in bytes [default: 1].
    #[arg(long)]
    pub min_size: Option<u64>,
    /// Largest size in bytes [default: 67108864].
    #[arg(long)]
    pub max_size: Option<u64>,
}

impl SizeModelArgs {
    /// SURGE with the given overrides.
    pub fn model(&self) -> SizeModel {
        let d = SizeModel::surge();
        SizeModel {
            body_mu: self.size_mu.unwrap_or(d.body_mu),
            body_sigma: self.size_sigma.unwrap_or(d.body_sigma),
            tail_alpha: self.tail_alpha.unwrap_or(d.tail_alpha),
            tail_k: self.tail_k.unwrap_or(d.tail_k),
            tail_share: self.tail_share.unwrap_or(d.tail_share),
            min_size: self.min_size.unwrap_or(d.min_size),
            max_size: self.max_size.unwrap_or(d.max_size),
        }
    }
}

/// Flags of `locus trace synth`.
#[derive(clap::Args, Debug, Clone)]
pub struct SynthArgs {
    /// RNG seed (same seed, same trace).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Number of requests.
    #[arg(long, default_value_t = 100_000)]
    pub requests: u64,
    /// Documents in the Zipf set (with --docroot: 0 = every file).
    #[arg(long, default_value_t = 10_000)]
    pub documents: u64,
    /// Zipf exponent.
    #[arg(long, default_value_t = 0.8)]
    pub alpha: f64,
    /// Take documents and sizes from the files under this directory (e.g. one made by
    /// `locus trace site`) instead of the size model.
    #[arg(long)]
    pub docroot: Option<PathBuf>,
    #[command(flatten)]
    pub sizes: SizeModelArgs,
    /// Share of requests to one-timers (targets requested once).
    #[arg(long, default_value_t = 0.0)]
    pub one_timers: f64,
    /// Number of hot targets (0 = none).
    #[arg(long, default_value_t = 0)]
    pub hot: u32,
    /// Share of requests in the hot window that go to hot targets.
    #[arg(long, default_value_t = 0.1)]
    pub hot_share: f64,
    /// Size of each hot target in bytes.
    #[arg(long, default_value_t = 65_536)]
    pub hot_size: u64,
    /// Hot window: `START..END` request indices, or `STARTs..ENDs` seconds (needs --rate);
    /// default: the whole trace.
    #[arg(long)]
    pub hot_window: Option<String>,
    /// Dynamic requests per cost class, `CLASS:SHARE`, comma-separated (e.g. `1:0.05,3:0.02`).
    #[arg(long, value_delimiter = ',')]
    pub dynamic: Vec<String>,
    /// Response size of dynamic requests in bytes.
    #[arg(long, default_value_t = 4096)]
    pub dynamic_size: u64,
    /// Poisson arrivals at this many requests per second (default: no times).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Clients (request client ids are uniform in 0..clients).
    #[arg(long, default_value_t = 100)]
    pub clients: u32,
    #[command(flatten)]
    pub output: TraceOutputArgs,
}

/// Flags of `locus trace site`.
#[derive(clap::Args, Debug, Clone)]
pub struct SiteArgs {
    /// Directory to write the site into (created; must be empty unless --overwrite).
    #[arg(long, short)]
    pub out: PathBuf,
    /// RNG seed (same seed, same bytes).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// A data set of the DC-Apache paper instead of a random site: mapug, lod, specweb99 or
    /// sequoia (the file, page, link, directory and size flags then do not apply).
    #[arg(long)]
    pub preset: Option<SitePreset>,
    /// With --preset: shrink its counts by this factor (0 < scale <= 1; 1 = the paper's).
    #[arg(long, default_value_t = 1.0, requires = "preset")]
    pub scale: f64,
    /// Number of files, index.html included.
    #[arg(long, default_value_t = 1000)]
    pub files: u32,
    /// Share of files that are HTML pages.
    #[arg(long, default_value_t = 0.3)]
    pub html_share: f64,
    /// Mean links per page.
    #[arg(long, default_value_t = 5)]
    pub links: u32,
    /// Mean embedded objects per page.
    #[arg(long, default_value_t = 4)]
    pub embeds: u32,
    /// Subdirectories.
    #[arg(long, default_value_t = 10)]
    pub dirs: u32,
    #[command(flatten)]
    pub sizes: SizeModelArgs,
    /// Write into a non-empty directory, replacing files of the same names.
    #[arg(long)]
    pub overwrite: bool,
}

/// Flags of `locus trace surf`.
#[derive(clap::Args, Debug, Clone)]
pub struct SurfArgs {
    /// Directory of HTML pages and the files they refer to.
    pub root: PathBuf,
    /// RNG seed (same site and seed, same trace).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Concurrent clients.
    #[arg(long, default_value_t = 10)]
    pub clients: u32,
    /// Total requests.
    #[arg(long, default_value_t = 10_000)]
    pub requests: u64,
    /// Probability of following a link after each page view.
    #[arg(long, default_value_t = 0.7)]
    pub follow: f64,
    /// Share of sessions entering at index.html (the others at a random page).
    #[arg(long, default_value_t = 0.5)]
    pub index_share: f64,
    /// Mean think time between page views in seconds (default: untimed, clients take turns).
    #[arg(long)]
    pub think: Option<f64>,
    #[command(flatten)]
    pub output: TraceOutputArgs,
}

/// Flags of `locus trace stats`.
#[derive(clap::Args, Debug, Clone)]
pub struct StatsArgs {
    #[command(flatten)]
    pub input: TraceInputArgs,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Shares of requests to report the covering memory for, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0.9,0.95,0.98,0.99")]
    pub coverage: Vec<f64>,
    /// Output file (default: standard output).
    #[arg(long, short)]
    pub out: Option<PathBuf>,
}

/// Flags of `locus trace convert`.
#[derive(clap::Args, Debug, Clone)]
pub struct ConvertArgs {
    #[command(flatten)]
    pub input: TraceInputArgs,
    #[command(flatten)]
    pub output: TraceOutputArgs,
}

/// What `stats --json` prints: the statistics and where they came from.
#[derive(Serialize)]
struct StatsReport<'a> {
    input: String,
    format: TraceFormat,
    malformed: u64,
    #[serde(flatten)]
    stats: &'a TraceStats,
}

/// Run a `locus trace` subcommand.
pub fn run(cmd: TraceCommand) -> anyhow::Result<()> {
    match cmd {
        TraceCommand::Synth(a) => run_synth(a),
        TraceCommand::Site(a) => run_site(a),
        TraceCommand::Surf(a) => run_surf(a),
        TraceCommand::Stats(a) => run_stats(a),
        TraceCommand::Convert(a) => run_convert(a),
    }
}

fn run_synth(a: SynthArgs) -> anyhow::Result<()> {
    let sizes = match &a.docroot {
        Some(root) => {
            let tree = DocumentTree::scan(root)?;
            if tree.files.is_empty() {
                bail!("{}: no files to take documents from", root.display());
            }
            DocumentSizes::Files(tree.files)
        }
        None => DocumentSizes::Model(a.sizes.model()),
    };
    let hot = if a.hot > 0 {
        let window = match &a.hot_window {
            Some(w) => parse_hot_window(w)?,
            None => HotWindow::Requests { start: 0, end: u64::MAX },
        };
        Some(HotTargetSpec { targets: a.hot, share: a.hot_share, size: a.hot_size, window })
    } else {
        None
    };
    let dynamic = a.dynamic.iter().map(|d| parse_dynamic_class(d)).collect::<anyhow::Result<Vec<_>>>()?;
    let spec = ZipfTraceSpec {
        seed: a.seed,
        requests: a.requests,
        documents: a.documents,
        alpha: a.alpha,
        sizes,
        one_timer_share: a.one_timers,
        hot,
        dynamic,
        dynamic_size: a.dynamic_size,
        arrivals: a.rate.map_or(Arrivals::None, |rate| Arrivals::Poisson { rate }),
        clients: a.clients,
    };
    let generator = ZipfTraceGenerator::new(spec)?;
    write_trace(generator.map(Ok), Some(a.requests), &a.output, "synth")
}

fn run_site(a: SiteArgs) -> anyhow::Result<()> {
    let (generator, files) = match a.preset {
        Some(preset) => (SiteGenerator::preset(preset, a.scale, a.seed)?, preset.targets(a.scale).documents),
        None => {
            let spec = SiteSpec {
                seed: a.seed,
                files: a.files,
                html_share: a.html_share,
                sizes: a.sizes.model(),
                links_per_page: a.links,
                embeds_per_page: a.embeds,
                directories: a.dirs,
            };
            (SiteGenerator::new(spec)?, u64::from(a.files))
        }
    };
    let mut progress = ProgressLine::new("site", Some(files), 1);
    let manifest = generator.write(&a.out, a.overwrite, &mut |done, _| progress.update(done as u64))?;
    progress.finish();
    eprintln!(
        "locus trace site: wrote {} files ({} pages, {} bytes) and {} to {}",
        manifest.files.len(),
        manifest.pages.len(),
        manifest.total_bytes,
        SITE_MANIFEST_FILE,
        a.out.display()
    );
    Ok(())
}

fn run_surf(a: SurfArgs) -> anyhow::Result<()> {
    let graph = SiteGraph::scan(&a.root)?;
    if graph.broken_references > 0 {
        eprintln!(
            "locus trace surf: {} references in {} name no file (not followed)",
            graph.broken_references,
            a.root.display()
        );
    }
    let spec = SurfSpec {
        seed: a.seed,
        clients: a.clients,
        requests: a.requests,
        follow: a.follow,
        index_share: a.index_share,
        think_time: a.think,
    };
    let surfer = Surfer::new(&graph, spec)?;
    write_trace(surfer.map(Ok), Some(a.requests), &a.output, "surf")
}

fn run_stats(a: StatsArgs) -> anyhow::Result<()> {
    if let Some(bad) = a.coverage.iter().find(|s| !(0.0..=1.0).contains(*s)) {
        bail!("coverage share {bad} is not within 0..=1");
    }
    let mut reader = open_reader(&a.input)?;
    let mut acc = StatsAccumulator::new();
    let mut progress = ProgressLine::new("stats", None, 1 << 14);
    for record in reader.by_ref() {
        acc.add(record?);
        progress.update(acc.requests());
    }
    progress.finish();
    report_malformed(&reader, &a.input.input);
    let stats = acc.finish(&a.coverage);
    let (mut out, name) = open_output(a.out.as_deref())?;
    let text = if a.json {
        let report = StatsReport {
            input: a.input.input.display().to_string(),
            format: reader.format(),
            malformed: reader.malformed(),
            stats: &stats,
        };
        serde_json::to_string_pretty(&report)? + "\n"
    } else {
        format!(
            "input  {} ({}, {} malformed records skipped)\n{stats}",
            a.input.input.display(),
            reader.format(),
            reader.malformed()
        )
    };
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).with_context(|| format!("writing {name}"))?;
    Ok(())
}

fn run_convert(a: ConvertArgs) -> anyhow::Result<()> {
    let mut reader = open_reader(&a.input)?;
    write_trace(reader.by_ref(), None, &a.output, "convert")?;
    report_malformed(&reader, &a.input.input);
    Ok(())
}

fn open_reader(input: &TraceInputArgs) -> anyhow::Result<TraceReader> {
    let options =
        ReadOptions { format: input.from, max_malformed: input.max_malformed, ..ReadOptions::default() };
    Ok(TraceReader::open(&input.input, &options)?)
}

fn report_malformed(reader: &TraceReader, input: &Path) {
    if reader.malformed() == 0 {
        return;
    }
    eprintln!("locus trace: skipped {} malformed records of {}:", reader.malformed(), input.display());
    for e in reader.malformed_samples() {
        eprintln!("  {e}");
    }
}

/// Standard output (for `None` or `-`) or a new file, buffered; and its name for errors.
fn open_output(out: Option<&Path>) -> anyhow::Result<(Box<dyn Write>, String)> {
    match out {
        None => Ok((Box::new(BufWriter::with_capacity(1 << 16, io::stdout().lock())), "-".into())),
        Some(p) if p == Path::new("-") => {
            Ok((Box::new(BufWriter::with_capacity(1 << 16, io::stdout().lock())), "-".into()))
        }
        Some(p) => {
            let file = File::create(p).with_context(|| format!("creating {}", p.display()))?;
            Ok((Box::new(BufWriter::with_capacity(1 << 20, file)), p.display().to_string()))
        }
    }
}

fn write_trace(
    records: impl Iterator<Item = Result<TraceRecord, crate::error::TraceError>>,
    total: Option<u64>,
    output: &TraceOutputArgs,
    label: &'static str,
) -> anyhow::Result<()> {
    let (out, name) = open_output(output.out.as_deref())?;
    let mut writer = TraceWriter::new(out, output.format, name)?;
    let mut progress = ProgressLine::new(label, total, 1 << 14);
    let mut n = 0u64;
    for record in records {
        writer.write(&record?)?;
        n += 1;
        progress.update(n);
    }
    progress.finish();
    writer.finish()?;
    Ok(())
}

/// `1000..5000` (request indices) or `10s..20s` / `10.5s..20s` (seconds).
fn parse_hot_window(s: &str) -> anyhow::Result<HotWindow> {
    let Some((start, end)) = s.split_once("..") else {
        bail!("hot window `{s}` is not START..END (requests) or STARTs..ENDs (seconds)");
    };
    match (start.strip_suffix('s'), end.strip_suffix('s')) {
        (Some(a), Some(b)) => Ok(HotWindow::Seconds {
            start: a.trim().parse().with_context(|| format!("hot window start `{start}`"))?,
            end: b.trim().parse().with_context(|| format!("hot window end `{end}`"))?,
        }),
        (None, None) => Ok(HotWindow::Requests {
            start: start.trim().parse().with_context(|| format!("hot window start `{start}`"))?,
            end: end.trim().parse().with_context(|| format!("hot window end `{end}`"))?,
        }),
        _ => bail!("hot window `{s}` mixes seconds and request indices"),
    }
}

/// `CLASS:SHARE`.
fn parse_dynamic_class(s: &str) -> anyhow::Result<DynamicClassSpec> {
    let (class, share) =
        s.split_once(':').with_context(|| format!("dynamic class `{s}` is not CLASS:SHARE"))?;
    Ok(DynamicClassSpec {
        class: class.trim().parse().with_context(|| format!("dynamic class number `{class}`"))?,
        share: share.trim().parse().with_context(|| format!("dynamic class share `{share}`"))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(subcommand)]
        command: TraceCommand,
    }

    fn parse(args: &[&str]) -> TraceCommand {
        Cli::try_parse_from(std::iter::once("trace").chain(args.iter().copied())).unwrap().command
    }

    #[test]
    fn cli_synth_writes_a_deterministic_trace_file_and_stats_reads_it() {
        let dir = tempfile::tempdir().unwrap();
        let out = |name: &str| dir.path().join(name).display().to_string();
        for name in ["a.trace", "b.trace"] {
            run(parse(&[
                "synth",
                "--requests",
                "2000",
                "--documents",
                "100",
                "--seed",
                "5",
                "--one-timers",
                "0.1",
                "--hot",
                "2",
                "--hot-window",
                "100..200",
                "--dynamic",
                "1:0.05,2:0.01",
                "--rate",
                "50",
                "--out",
                &out(name),
            ]))
            .unwrap();
        }
        let a = std::fs::read(out("a.trace")).unwrap();
        assert_eq!(a, std::fs::read(out("b.trace")).unwrap());
        assert!(a.starts_with(b"#locus-trace v1\n"));
        run(parse(&["stats", &out("a.trace"), "--json", "--out", &out("stats.json")])).unwrap();
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out("stats.json")).unwrap()).unwrap();
        assert_eq!(json["requests"], 2000);
        assert_eq!(json["format"], "locus");
        assert_eq!(json["coverage"].as_array().unwrap().len(), 4);
        run(parse(&["stats", &out("a.trace"), "--coverage", "0.5", "--out", &out("stats.txt")])).unwrap();
        let table = std::fs::read_to_string(out("stats.txt")).unwrap();
        assert!(table.contains("memory to cover 50.00% of requests"), "{table}");
    }

    #[test]
    fn cli_site_surf_and_convert_chain_together() {
        let dir = tempfile::tempdir().unwrap();
        let site = dir.path().join("site");
        let p = |name: &str| dir.path().join(name).display().to_string();
        run(parse(&["site", "--out", site.to_str().unwrap(), "--files", "40", "--max-size", "20000"]))
            .unwrap();
        run(parse(&[
            "surf",
            site.to_str().unwrap(),
            "--requests",
            "300",
            "--think",
            "1",
            "--out",
            &p("surf.trace"),
        ]))
        .unwrap();
        run(parse(&["convert", &p("surf.trace"), "--to", "jsonl", "--out", &p("surf.jsonl")])).unwrap();
        run(parse(&["convert", &p("surf.jsonl"), "--format", "locus", "--out", &p("again.trace")])).unwrap();
        assert_eq!(std::fs::read(p("surf.trace")).unwrap(), std::fs::read(p("again.trace")).unwrap());
        run(parse(&[
            "synth",
            "--docroot",
            site.to_str().unwrap(),
            "--documents",
            "0",
            "--requests",
            "100",
            "--out",
            &p("docs.trace"),
        ]))
        .unwrap();
        let recs = TraceReader::open(Path::new(&p("docs.trace")), &ReadOptions::default())
            .unwrap()
            .read_all()
            .unwrap();
        assert!(recs.iter().all(|r| site.join(&r.target[1..]).is_file()));
    }

    #[test]
    fn cli_rejects_bad_windows_classes_and_shares_with_a_reason() {
        assert!(parse_hot_window("5..").is_err());
        assert!(parse_hot_window("1s..5").is_err());
        assert_eq!(parse_hot_window("1.5s..3s").unwrap(), HotWindow::Seconds { start: 1.5, end: 3.0 });
        assert_eq!(parse_hot_window("10..20").unwrap(), HotWindow::Requests { start: 10, end: 20 });
        assert!(parse_dynamic_class("3").is_err());
        assert_eq!(parse_dynamic_class("3:0.5").unwrap(), DynamicClassSpec { class: 3, share: 0.5 });
        let err = run(parse(&["stats", "-", "--coverage", "1.5"])).unwrap_err();
        assert!(err.to_string().contains("1.5"));
    }

    #[test]
    fn cli_site_preset_writes_the_scaled_preset_and_scale_needs_a_preset() {
        let dir = tempfile::tempdir().unwrap();
        let site = dir.path().join("site");
        let out = site.to_str().unwrap();
        run(parse(&["site", "--preset", "lod", "--scale", "0.1", "--seed", "3", "--out", out])).unwrap();
        let manifest = crate::site::SiteManifest::load(&site).unwrap();
        let preset = manifest.preset.unwrap();
        assert_eq!((preset.name, preset.scale), (SitePreset::Lod, 0.1));
        assert_eq!(manifest.files.len() as u64, SitePreset::Lod.targets(0.1).documents);
        assert!(Cli::try_parse_from(["trace", "site", "--scale", "0.5", "--out", out]).is_err());
        assert!(Cli::try_parse_from(["trace", "site", "--preset", "specweb", "--out", out]).is_err());
        let err = run(parse(&["site", "--preset", "mapug", "--scale", "2", "--out", out])).unwrap_err();
        assert!(err.to_string().contains("scale 2"), "{err}");
    }
}
