//! `request_targets`: the targets one connection of a run of `config` would request, in order
//! (the same popularity ranking, the connection's own seed and the same mix as `run_load`), for
//! another client to replay — h2load's `-i` URL lists in the lab's HTTP/2 comparisons.

use std::sync::Arc;
use std::time::Instant;

use crate::config::LoadConfig;
use crate::connection::mix;
use crate::error::LoadError;
use crate::workload::{JobFeed, WorkloadPlan};

/// Up to `count` request targets that connection `slot` of `config`'s run would draw (fewer
/// when the workload is used up, as a trace without repeat is). A moving hot spot is drawn at
/// its first phase: a list has no clock.
pub fn request_targets(config: &LoadConfig, slot: usize, count: usize) -> Result<Vec<String>, LoadError> {
    config.validate()?;
    let plan = Arc::new(WorkloadPlan::build(config, 1)?);
    let mut feed = JobFeed::new(plan.clone(), mix(config.seed, slot), Instant::now());
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        let Some(t) = feed.next_request() else { break };
        out.push(plan.templates[t as usize].target.to_string());
    }
    if out.is_empty() {
        return Err(LoadError::config("the workload gives no request a list can hold"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{DocumentSet, Popularity, Workload};

    fn zipf(seed: u64) -> LoadConfig {
        LoadConfig {
            workload: Workload::Synthetic {
                popularity: Popularity::Zipf { alpha: 1.0 },
                documents: DocumentSet::Model { documents: 100 },
            },
            seed,
            ..LoadConfig::new(vec!["http://127.0.0.1:1/".parse().unwrap()])
        }
    }

    #[test]
    fn the_list_is_the_seeded_zipf_stream_with_popular_documents_repeated() {
        let a = request_targets(&zipf(7), 0, 5000).unwrap();
        assert_eq!(a.len(), 5000);
        assert_eq!(a, request_targets(&zipf(7), 0, 5000).unwrap(), "the same seed, the same list");
        assert_ne!(a, request_targets(&zipf(8), 0, 5000).unwrap());
        assert_ne!(a, request_targets(&zipf(7), 1, 5000).unwrap(), "each connection its own draws");
        let mut counts = std::collections::HashMap::new();
        for t in &a {
            *counts.entry(t).or_insert(0u32) += 1;
        }
        let top = counts.values().max().copied().unwrap();
        assert!(counts.len() > 50 && top > 400, "zipf: many documents, one far ahead ({top})");
        assert!(a.iter().all(|t| t.starts_with("/doc/")));
    }
}
