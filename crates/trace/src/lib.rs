//! Request traces for Locus (`locus trace`): read and convert access logs and traces, make
//! synthetic ones (Zipf popularity, SURGE sizes, one-timers, hot targets, dynamic classes),
//! write a synthetic web site (random, or a preset like a paper's data set), make
//! random-surfer sessions over real HTML, and characterise a trace's locality the way the
//! LARD paper does (memory needed to cover X% of requests).

mod clf;
pub mod cli;
mod error;
mod fixed_records;
mod json_lines;
mod line_reader;
mod locus_format;
mod malformed;
mod page_references;
mod progress;
mod reader;
mod record;
mod record_reader;
mod record_sink;
mod site;
mod site_content;
mod site_plan;
mod site_presets;
mod size_model;
mod stats;
mod surf;
mod synth;
mod wc98;
mod writer;

pub use clf::{CLF_DEFAULT_BASE_UNIX, ClfReader, ClfWriter, format_clf_time, parse_clf_time};
pub use error::TraceError;
pub use json_lines::{JsonLinesReader, JsonLinesWriter};
pub use locus_format::{LOCUS_HEADER, LocusReader, LocusWriter, parse_locus_line};
pub use locus_site::{DocumentFile, DocumentTree, ScanLimits, decode_path, target_for};
pub use malformed::MALFORMED_SAMPLES_KEPT;
pub use reader::{ReadOptions, TraceFormat, TraceReader};
pub use record::{TraceRecord, target_from_bytes, wire_target};
pub use site::{
    SITE_MANIFEST_FILE, SITE_MANIFEST_FORMAT, SiteFile, SiteFileKind, SiteGenerator, SiteManifest,
    SiteManifestPreset, SiteSpec,
};
pub use site_presets::{SitePreset, SitePresetTargets};
pub use size_model::{SizeModel, SizeSampler};
pub use stats::{
    ClientSummary, Coverage, DEFAULT_COVERAGE_SHARES, OneTimers, SizeSummary, StatsAccumulator, TraceStats,
    human_bytes,
};
pub use surf::{PageReferences, SiteGraph, SurfSpec, Surfer};
pub use synth::{
    Arrivals, DocumentSizes, DynamicClassSpec, HotTargetSpec, HotWindow, ZipfTraceGenerator, ZipfTraceSpec,
};
pub use wc98::{WC98_RECORD_BYTES, Wc98Reader, Wc98Record};
pub use writer::TraceWriter;
