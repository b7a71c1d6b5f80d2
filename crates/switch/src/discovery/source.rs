//! One configured source at work: a DNS lookup or a watched file behind one `refresh`, which
//! says what it found (a new list, nothing new, or an error) and when to look again — a DNS
//! answer's TTL clamped to `[min_ttl_s, max_ttl_s]` (`min_ttl_s` after a failure), a file's
//! `poll_ms`.

use super::dns::DnsSource;
use super::error::DiscoveryError;
use super::file::{FileStamp, read_nodes, stamp};
use super::settings::{DiscoveryEntry, SourceKind};
use crate::config::NodeEntry;
use std::path::PathBuf;
use std::time::Duration;

/// What one refresh found.
#[derive(Debug)]
pub enum Outcome {
    /// A list read or resolved now (it may be the one in force already).
    Nodes(Vec<NodeEntry>),
    /// The file has not changed since it was last read.
    Unchanged,
    /// Nothing usable: the last good list stays.
    Failed(DiscoveryError),
}

/// One refresh's outcome and the time until the next.
#[derive(Debug)]
pub struct Refresh {
    pub outcome: Outcome,
    pub next: Duration,
}

/// A source ready to refresh.
pub enum Source {
    Dns { lookup: Box<DnsSource>, min_ttl: Duration, max_ttl: Duration },
    File(WatchedFile),
}

/// A node file and the version of it last read.
pub struct WatchedFile {
    path: PathBuf,
    poll: Duration,
    max_nodes: usize,
    /// The stamp last seen (`Some(None)`: seen missing); none before the first look.
    seen: Option<Option<FileStamp>>,
}

impl Source {
    /// The source `entry` describes; an error when its resolver cannot be set up (the system's
    /// configuration unreadable).
    pub fn new(entry: &DiscoveryEntry) -> Result<Source, DiscoveryError> {
        Ok(match entry.kind() {
            SourceKind::Dns | SourceKind::Srv => Source::Dns {
                lookup: Box::new(DnsSource::new(entry)?),
                min_ttl: entry.min_ttl(),
                max_ttl: entry.max_ttl(),
            },
            SourceKind::File => Source::File(WatchedFile {
                path: entry.file.clone().unwrap_or_default(),
                poll: entry.poll(),
                max_nodes: entry.max_nodes(),
                seen: None,
            }),
        })
    }

    /// Resolve or look at the file once.
    pub async fn refresh(&mut self) -> Refresh {
        match self {
            Source::Dns { lookup, min_ttl, max_ttl } => match lookup.resolve().await {
                Ok(answer) => Refresh {
                    outcome: Outcome::Nodes(answer.nodes),
                    next: answer.valid_for.unwrap_or(*min_ttl).clamp(*min_ttl, *max_ttl),
                },
                Err(e) => Refresh { outcome: Outcome::Failed(e), next: *min_ttl },
            },
            Source::File(file) => Refresh { outcome: file.look().await, next: file.poll },
        }
    }
}

impl WatchedFile {
    /// Read the file if its stamp changed since the last look (a missing file is a change
    /// too, reported once).
    async fn look(&mut self) -> Outcome {
        let (path, max_nodes, seen) = (self.path.clone(), self.max_nodes, self.seen);
        // Stat and read off the runtime: a slow disk or a HOST:PORT address blocks.
        let looked = tokio::task::spawn_blocking(move || {
            let now = stamp(&path);
            if seen == Some(now) {
                return (now, Outcome::Unchanged);
            }
            (now, read_nodes(&path, max_nodes).map_or_else(Outcome::Failed, Outcome::Nodes))
        })
        .await;
        match looked {
            Ok((now, outcome)) => {
                self.seen = Some(now);
                outcome
            }
            Err(e) => Outcome::Failed(DiscoveryError::File {
                path: self.path.display().to_string(),
                why: format!("reading stopped: {e}"),
            }),
        }
    }
}
