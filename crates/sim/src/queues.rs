//! `CpuQueue`, `DiskQueue` and `LinkQueue`: single FIFO servers (a node's CPU, one of its
//! disks, one direction of a network link). Service times are known when a job is submitted,
//! so a queue is just the time it next falls idle: a job starts when it arrives or when the
//! job before it ends, whichever is later.

use crate::cost_model::CostModel;

/// A non-preemptive FIFO server with known service times.
#[derive(Clone, Debug, Default)]
struct FifoServer {
    /// When the last job submitted ends.
    free_at: u64,
    /// Total service time submitted.
    busy_ns: u64,
    jobs: u64,
}

impl FifoServer {
    #[inline]
    fn submit(&mut self, now: u64, service: u64) -> u64 {
        let start = self.free_at.max(now);
        self.free_at = start + service;
        self.busy_ns += service;
        self.jobs += 1;
        self.free_at
    }
}

/// A node's CPU: one FIFO queue of CPU work.
#[derive(Clone, Debug, Default)]
pub struct CpuQueue {
    server: FifoServer,
}

impl CpuQueue {
    /// Queue `service` ns of CPU work at `now`; returns when it is done.
    #[inline]
    pub fn submit(&mut self, now: u64, service: u64) -> u64 {
        self.server.submit(now, service)
    }

    /// When the CPU next falls idle (≤ now: idle).
    pub fn free_at(&self) -> u64 {
        self.server.free_at
    }

    /// CPU time used (submitted) so far.
    pub fn busy_ns(&self) -> u64 {
        self.server.busy_ns
    }

    /// Jobs submitted so far.
    pub fn jobs(&self) -> u64 {
        self.server.jobs
    }
}

/// One disk: a FIFO queue of whole-file reads, each costing `CostModel::disk_read_ns`.
#[derive(Clone, Debug, Default)]
pub struct DiskQueue {
    server: FifoServer,
}

impl DiskQueue {
    /// Queue a read of a file of `size` bytes at `now`; returns when the data is in memory.
    #[inline]
    pub fn submit_read(&mut self, now: u64, size: u64, costs: &CostModel) -> u64 {
        self.server.submit(now, costs.disk_read_ns(size))
    }

    /// Queue a job of `service` ns (a read whose time is known, e.g. a disk-bound dynamic
    /// request's) at `now`; returns when it is done.
    #[inline]
    pub fn submit(&mut self, now: u64, service: u64) -> u64 {
        self.server.submit(now, service)
    }

    /// When the disk next falls idle.
    pub fn free_at(&self) -> u64 {
        self.server.free_at
    }

    /// Disk time used so far.
    pub fn busy_ns(&self) -> u64 {
        self.server.busy_ns
    }

    /// Reads submitted so far.
    pub fn reads(&self) -> u64 {
        self.server.jobs
    }
}

/// One direction of a full-duplex network link (a NIC's TX or RX): a FIFO byte server that
/// moves `bits_per_s × efficiency` bits of payload per second.
#[derive(Clone, Debug)]
pub struct LinkQueue {
    server: FifoServer,
    /// Payload nanoseconds per byte, times 2^16 (fixed point: no float per transfer).
    ns_per_byte_q16: u64,
    bytes: u64,
}

impl LinkQueue {
    /// A link of `bits_per_s` whose payload gets `efficiency` of it (protocol overhead).
    pub fn new(bits_per_s: u64, efficiency: f64) -> LinkQueue {
        let payload_bps = (bits_per_s as f64 * efficiency).max(1.0);
        let ns_per_byte = 8e9 / payload_bps;
        LinkQueue {
            server: FifoServer::default(),
            ns_per_byte_q16: (ns_per_byte * 65536.0).round() as u64,
            bytes: 0,
        }
    }

    /// Time to move `bytes` over the idle link, ns (rounded up).
    #[inline]
    pub fn transfer_ns(&self, bytes: u64) -> u64 {
        ((bytes as u128 * self.ns_per_byte_q16 as u128).div_ceil(65536)) as u64
    }

    /// Queue `bytes` at `now`; returns when the last byte has passed.
    #[inline]
    pub fn submit(&mut self, now: u64, bytes: u64) -> u64 {
        self.bytes += bytes;
        let service = self.transfer_ns(bytes);
        self.server.submit(now, service)
    }

    /// When the link next falls idle.
    pub fn free_at(&self) -> u64 {
        self.server.free_at
    }

    /// Time the link has been busy (submitted) so far.
    pub fn busy_ns(&self) -> u64 {
        self.server.busy_ns
    }

    /// Bytes submitted so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_queue_serves_reads_in_fifo_order() {
        let costs = CostModel::lard98();
        let mut disk = DiskQueue::default();
        let r1k = costs.disk_read_ns(1024);
        let r100k = costs.disk_read_ns(100 * 1024);
        // Three reads arrive together: each waits for the ones before it.
        assert_eq!(disk.submit_read(0, 1024, &costs), r1k);
        assert_eq!(disk.submit_read(0, 100 * 1024, &costs), r1k + r100k);
        assert_eq!(disk.submit_read(10, 1024, &costs), 2 * r1k + r100k);
        // A read arriving after the disk went idle starts at once.
        let later = 10 * r100k;
        assert_eq!(disk.submit_read(later, 1024, &costs), later + r1k);
        assert_eq!(disk.reads(), 4);
        assert_eq!(disk.busy_ns(), 3 * r1k + r100k);
    }

    #[test]
    fn cpu_queue_starts_each_job_when_the_previous_ends_or_at_arrival() {
        let mut cpu = CpuQueue::default();
        assert_eq!(cpu.submit(100, 50), 150);
        assert_eq!(cpu.submit(120, 10), 160);
        assert_eq!(cpu.submit(500, 10), 510);
        assert_eq!(cpu.free_at(), 510);
        assert_eq!(cpu.busy_ns(), 70);
    }

    #[test]
    fn link_queue_moves_bytes_at_the_payload_rate_in_fifo_order() {
        // 100 Mbps at 95%: 11.875 MB/s, 84.2 ns per byte.
        let mut link = LinkQueue::new(100_000_000, 0.95);
        let one_mb = link.transfer_ns(1_000_000);
        assert!((one_mb as f64 / 1e6 - 1e3 / 11.875).abs() < 0.01, "{one_mb}");
        // Two transfers submitted together: the second waits for the first.
        assert_eq!(link.submit(0, 1_000_000), one_mb);
        assert_eq!(link.submit(0, 1_000_000), 2 * one_mb);
        // After the link fell idle a transfer starts at once.
        let later = 10 * one_mb;
        assert_eq!(link.submit(later, 1_000_000), later + one_mb);
        assert_eq!(link.bytes(), 3_000_000);
        assert_eq!(link.busy_ns(), 3 * one_mb);
        // Zero bytes take no time; a faster link takes proportionally less.
        assert_eq!(link.transfer_ns(0), 0);
        let fast = LinkQueue::new(1_000_000_000, 0.95);
        assert!(fast.transfer_ns(1_000_000) * 10 <= one_mb + 10);
    }
}
