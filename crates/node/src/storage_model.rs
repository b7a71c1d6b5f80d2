//! `StorageModel`: charges each cache miss the time a modelled disk would take — a seek plus
//! size over transfer rate — on one of several disks chosen by hashing the path. Each disk
//! is a FIFO queue (`DiskQueue`: the time it is busy until; `DiskSet`: the disks and the
//! reads pending on each), so concurrent misses really queue; the current queue lengths are
//! reported. Dynamic classes' disk reads (`read_for`) wait in the same queues.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use locus_node_config::StorageConfig;

/// One disk's FIFO queue, on a clock measured from the model's epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskQueue {
    /// When the disk finishes the last read queued on it.
    pub busy_until: Duration,
}

impl DiskQueue {
    /// Queue a read of `service` time arriving at `now`; returns when it completes.
    pub fn schedule(&mut self, now: Duration, service: Duration) -> Duration {
        let start = self.busy_until.max(now);
        self.busy_until = start + service;
        self.busy_until
    }
}

struct Disk {
    queue: Mutex<DiskQueue>,
    /// Reads queued or in service.
    pending: AtomicUsize,
}

/// Decrements a disk's pending count however the read ends (including cancellation).
struct PendingRead<'a>(&'a AtomicUsize);

impl Drop for PendingRead<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A set of FIFO disks on a clock from their epoch, each counting the reads queued on it.
pub struct DiskSet {
    epoch: Instant,
    disks: Vec<Disk>,
}

impl DiskSet {
    /// `n` idle disks (at least one).
    pub fn new(n: usize) -> DiskSet {
        let disks = (0..n.max(1))
            .map(|_| Disk { queue: Mutex::new(DiskQueue::default()), pending: AtomicUsize::new(0) })
            .collect();
        DiskSet { epoch: Instant::now(), disks }
    }

    /// The disk that holds `path`.
    pub fn disk_of(&self, path: &str) -> usize {
        (locus_core::target_hash(path) % self.disks.len() as u64) as usize
    }

    /// Wait as a read of `service` time on the disk holding `path` would: queued behind
    /// earlier reads on that disk, then served. Returns the time charged (queue plus service).
    pub async fn read(&self, path: &str, service: Duration) -> Duration {
        let disk = &self.disks[self.disk_of(path)];
        let now = Instant::now();
        disk.pending.fetch_add(1, Ordering::Relaxed);
        let _pending = PendingRead(&disk.pending);
        let done = disk.queue.lock().schedule(now.duration_since(self.epoch), service);
        let done_at = self.epoch + done;
        tokio::time::sleep_until(done_at).await;
        done_at.duration_since(now)
    }

    /// Reads queued or in service, per disk.
    pub fn queue_lengths(&self) -> Vec<usize> {
        self.disks.iter().map(|d| d.pending.load(Ordering::Relaxed)).collect()
    }

    /// Reads queued or in service on all disks.
    pub fn waiting(&self) -> usize {
        self.disks.iter().map(|d| d.pending.load(Ordering::Relaxed)).sum()
    }
}

/// The modelled disks of a node.
pub struct StorageModel {
    config: StorageConfig,
    disks: DiskSet,
}

impl StorageModel {
    pub fn new(config: StorageConfig) -> StorageModel {
        StorageModel { disks: DiskSet::new(config.disks), config }
    }

    pub fn config(&self) -> &StorageConfig {
        &self.config
    }

    /// Seek plus transfer time of reading `bytes`.
    pub fn service_time(&self, bytes: u64) -> Duration {
        let secs = self.config.seek_ms / 1000.0 + bytes as f64 / (self.config.transfer_mb_s * 1e6);
        Duration::from_secs_f64(secs.max(0.0))
    }

    /// The disk that holds `path`.
    pub fn disk_of(&self, path: &str) -> usize {
        self.disks.disk_of(path)
    }

    /// Wait as a read of `bytes` of `path` would: queued behind earlier reads on its disk,
    /// then served for `service_time(bytes)`. Returns the total time charged.
    pub async fn read(&self, path: &str, bytes: u64) -> Duration {
        self.disks.read(path, self.service_time(bytes)).await
    }

    /// Wait for a read of `service` time (not derived from a size: a dynamic class's disk
    /// cost) on the disk holding `path`, in the same FIFO queue as the misses.
    pub async fn read_for(&self, path: &str, service: Duration) -> Duration {
        self.disks.read(path, service).await
    }

    /// Reads queued or in service, per disk.
    pub fn queue_lengths(&self) -> Vec<usize> {
        self.disks.queue_lengths()
    }

    /// Reads queued or in service on all disks.
    pub fn waiting(&self) -> usize {
        self.disks.waiting()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: f64) -> Duration {
        Duration::from_secs_f64(n / 1000.0)
    }

    #[test]
    fn two_misses_on_one_disk_finish_at_one_and_two_service_times() {
        let model = StorageModel::new(StorageConfig::lard98());
        // 28 ms + 100 KB at 10 MB/s = 38 ms.
        let service = model.service_time(100_000);
        assert!((service.as_secs_f64() - 0.038).abs() < 1e-9, "{service:?}");
        let mut disk = DiskQueue::default();
        assert_eq!(disk.schedule(Duration::ZERO, service), service);
        assert_eq!(disk.schedule(Duration::ZERO, service), service * 2);
        // A read arriving after the disk went idle starts at once.
        let later = ms(1000.0);
        assert_eq!(disk.schedule(later, service), later + service);
        // One arriving while busy waits for the queue.
        assert_eq!(disk.schedule(later + ms(10.0), service), later + service * 2);
    }

    #[test]
    fn paths_spread_over_disks_deterministically() {
        let model = StorageModel::new(StorageConfig { disks: 4, ..StorageConfig::lard98() });
        let disks: std::collections::HashSet<usize> =
            (0..64).map(|i| model.disk_of(&format!("/f{i}"))).collect();
        assert_eq!(disks.len(), 4);
        assert_eq!(model.disk_of("/a"), model.disk_of("/a"));
    }

    #[test]
    fn concurrent_reads_on_one_disk_queue_and_are_counted() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let model = StorageModel::new(StorageConfig { seek_ms: 20.0, transfer_mb_s: 1000.0, disks: 1 });
            let start = Instant::now();
            let (a, b, lengths) = tokio::join!(model.read("/x", 0), model.read("/y", 0), async {
                tokio::time::sleep(ms(5.0)).await;
                model.queue_lengths()
            });
            assert_eq!(lengths, vec![2]);
            // The second read arrived a hair after the first and waited for it to finish.
            assert!(a >= ms(20.0) && b >= ms(39.0) && b > a, "{a:?} {b:?}");
            assert!(start.elapsed() >= ms(40.0));
            assert_eq!(model.queue_lengths(), vec![0]);
        });
    }
}
