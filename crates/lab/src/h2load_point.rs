//! A point measured by h2load: each client connection's Zipf stream written as a URL list (the
//! requests that connection of `locus load` would have drawn, `locus_load::request_targets`),
//! an h2load process per connection run on the client host with the point's streams, warm-up
//! and measured time, and the cluster snapshotted when the warm-up ends and when the run does.

use std::path::Path;
use std::time::Duration;

use locus_load::LoadConfig;

use crate::cluster::{ClusterSnapshot, LabCluster};
use crate::error::LabError;
use crate::experiment::{Experiment, ExperimentPoint};
use crate::h2load::{H2loadRun, run_h2load};
use crate::measured_load::MeasuredLoad;

/// URLs in each connection's list: more than a connection fetches in a point at this machine's
/// rates (h2load would start the list again). The lists are removed after the run.
const LIST_LENGTH: usize = 10_000;

/// The h2load run of `point`: a URL list per client connection written into `scratch`, each
/// the requests that connection of `config` (the load `locus load` would run, whose first
/// target is the switch's URL) would draw.
pub fn h2load_run(
    experiment: &Experiment,
    point: &ExperimentPoint,
    config: &LoadConfig,
    scratch: &Path,
) -> Result<H2loadRun, LabError> {
    let w = &experiment.workloads[point.workload];
    let base = config.targets.first().map(|t| t.to_string()).unwrap_or_default();
    let base = base.trim_end_matches('/');
    std::fs::create_dir_all(scratch).map_err(|e| LabError::io(scratch, e))?;
    let mut lists = Vec::with_capacity(w.clients);
    for slot in 0..w.clients {
        let mut list = String::with_capacity(LIST_LENGTH * 64);
        for target in locus_load::request_targets(config, slot, LIST_LENGTH)? {
            list.push_str(base);
            list.push_str(&target);
            list.push('\n');
        }
        let path = scratch.join(format!("h2load-urls-{slot}.txt"));
        std::fs::write(&path, list).map_err(|e| LabError::io(&path, e))?;
        lists.push(path);
    }
    Ok(H2loadRun {
        urls: lists,
        streams: w.streams,
        warmup: Duration::from_secs_f64(experiment.warmup_of(point.workload)),
        measure: Duration::from_secs_f64(experiment.measure_of(point.workload)),
        h2: w.h2,
        log_dir: scratch.to_path_buf(),
    })
}

/// Run h2load on the client host; a second thread there snapshots the cluster when the
/// warm-up ends, and the first snapshots it again when h2load is done.
pub fn measure_h2load(
    cluster: &LabCluster<'_>,
    run: &H2loadRun,
    warmup: Duration,
) -> Result<(MeasuredLoad, ClusterSnapshot, ClusterSnapshot), LabError> {
    cluster.net().on_host("client", || {
        std::thread::scope(|s| {
            let before = s.spawn(move || {
                std::thread::sleep(warmup);
                cluster.snapshot_here()
            });
            let figures = run_h2load(run);
            let after = cluster.snapshot_here();
            for list in &run.urls {
                let _ = std::fs::remove_file(list);
            }
            let before = before.join().unwrap_or_else(|_| {
                Err(LabError::system("snapshot thread", std::io::Error::other("panicked")))
            });
            Ok((MeasuredLoad::from(&figures?), before?, after?))
        })
    })
}
