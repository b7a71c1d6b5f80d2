//! The Locus load generator (`locus load`): replays traces (CLF/Combined, WC98, Locus) or
//! synthetic Zipf/uniform workloads (with a moving hot spot and dynamic targets mixed in)
//! against servers, closed or open loop (seeded Poisson, no coordinated omission), with
//! keep-alive, pipelining, think time and sessions over HTTP/1.1, or over HTTP/2 (h2, h2c) with
//! several streams per connection; checks every response byte for byte (streamed XXH3-64);
//! reports HDR latency percentiles, throughput and errors by kind as text or JSON. A live
//! surfer (`Workload::Surf`) browses a DC-Apache cluster, following links as the servers
//! rewrote them and checking pages rewrite-aware. In-process entry: `run_load(&LoadConfig)`.

mod accounting;
mod admin_status;
pub mod cli;
mod config;
mod connection;
mod error;
mod exchange;
mod h2_connection;
mod h2_link;
mod h2_stream;
mod load_stream;
mod mix;
mod open_loop;
mod progress;
mod report;
mod request_list;
mod response_reader;
mod rewrite_check;
mod run;
mod stats;
mod surf_client;
mod surf_plan;
mod target_url;
mod think_time;
mod verifier;
mod worker;
mod workload;

pub use accounting::{NotSentCounts, NotSentReason, RequestAccounting};
pub use admin_status::{CacheSnapshot, NodeRequests, SwitchSnapshot, fetch_status, hit_ratio, imbalance};
pub use cli::{LoadArgs, pin_response};
pub use config::{
    DEFAULT_DURATION, DEFAULT_TIMEOUT, DocumentSet, DynamicTarget, HotSpot, LoadConfig, Popularity,
    TraceSource, Verification, Workload,
};
pub use error::LoadError;
pub use load_stream::client_config as tls_client_config;
pub use open_loop::{Arrival, ArrivalQueue, OpenLoopSchedule};
pub use report::{LoadReport, RunShape, SurfReport, TlsReport};
pub use request_list::request_targets;
pub use response_reader::{BodyCapture, FramingError, ResponseReader, ResponseSummary};
pub use rewrite_check::{OriginalPage, RewriteMismatch};
pub use run::run_load;
pub use stats::{ErrorCounts, ErrorKind, LatencyReport, MismatchCounts, SurfCounts, ThreadStats};
pub use surf_plan::{LinkTarget, PageUrl, SurfPlan};
pub use target_url::TargetUrl;
pub use think_time::{ThinkSampler, ThinkTime};
pub use verifier::{Expectation, Mismatch, MismatchKind, ResponseVerifier};
