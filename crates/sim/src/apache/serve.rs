//! A connection on its node: when its request arrives a process accepts it (or it waits in
//! the backlog), does the basic processing (with the 304/404 reply, or the dynamic page's CPU), reads a missed
//! file (or a disk-bound class's data) from the FIFO disk, transmits — blocked until the
//! rest of a large response fits in the send buffer — and tears down; then it takes the
//! next connection from the backlog. CPU work runs on the node's processor-sharing CPU.

use std::collections::hash_map::Entry;
use std::time::Duration;

use locus_core::NodeId;

use super::engine::{Conn, Engine, Event, FORK_JOB, KERNEL_JOB, Stage};
use crate::workload::{DEFAULT_DYNAMIC_SIZE, RequestKind};

/// RTTs a process stays blocked after writing a response of `size` bytes: the kernel
/// takes `send_buffer` bytes at once, the rest leaves at a congestion window of
/// `initial_cwnd` segments of `mss` bytes doubling every RTT (slow start).
pub fn drain_rounds(size: u64, send_buffer: u64, mss: u64, initial_cwnd: u64) -> u64 {
    let mut rounds = 0;
    let mut sent = 0u64;
    let mut window = mss.saturating_mul(initial_cwnd.max(1));
    while size.saturating_sub(sent) > send_buffer {
        sent = sent.saturating_add(window);
        window = window.saturating_mul(2);
        rounds += 1;
    }
    rounds
}

impl Engine<'_> {
    /// Queue `work` ns of CPU for job `job` on node `n`.
    pub(super) fn run_cpu(&mut self, n: usize, now: u64, work: u64, job: u32) {
        self.nodes[n].cpu.add(now, work, job);
        self.reschedule_cpu(n);
    }

    fn reschedule_cpu(&mut self, n: usize) {
        let node = &mut self.nodes[n];
        match node.cpu.next_completion() {
            Some(t) if t != node.cpu_event => {
                node.cpu_event = t;
                self.events.push(t, Event::CpuDone(n as u32));
            }
            Some(_) => {}
            None => node.cpu_event = u64::MAX,
        }
    }

    /// The node's scheduled CPU completion (stale ones are ignored).
    pub(super) fn cpu_done(&mut self, n: usize, now: u64) {
        if self.nodes[n].cpu_event != now {
            return;
        }
        self.nodes[n].cpu_event = u64::MAX;
        let mut done = std::mem::take(&mut self.done);
        self.nodes[n].cpu.complete_due(now, &mut done);
        for &job in &done {
            match job {
                FORK_JOB => {
                    self.nodes[n].pool.forked();
                    self.next_from_backlog(n, now);
                }
                KERNEL_JOB => {}
                c => self.job_done(c, now),
            }
        }
        done.clear();
        self.done = done;
        self.reschedule_cpu(n);
    }

    fn job_done(&mut self, c: u32, now: u64) {
        let conn = self.conns[c as usize];
        match conn.stage {
            Stage::Pre => self.after_pre(c, now),
            Stage::Transmit => {
                let a = &self.cfg.apache;
                let rounds = drain_rounds(self.response_size(&conn), a.send_buffer, a.mss, a.initial_cwnd);
                self.conns[c as usize].stage = Stage::Drain;
                self.events.push(now + rounds * conn.rtt, Event::SendDrained(c));
            }
            Stage::Teardown => self.finish_conn(c, now),
            Stage::Handshake | Stage::Backlog | Stage::Disk | Stage::Drain => {
                unreachable!("connection {c} has no CPU job in {:?}", conn.stage)
            }
        }
    }

    /// The request reaches the node (the front-end's sniffer sees it pass) with the end of
    /// the handshake: an idle process accepts the connection, or it joins the backlog.
    pub(super) fn request_arrives(&mut self, c: u32, now: u64) {
        let conn = self.conns[c as usize];
        if !conn.is_probe() {
            let info = self.w.request_info_at(conn.request as usize);
            self.fe.observe(NodeId(conn.node), &info, Duration::from_nanos(conn.rtt), now);
        }
        let n = conn.node as usize;
        if self.nodes[n].pool.acquire() {
            self.start_request(c, now);
        } else {
            self.conns[c as usize].stage = Stage::Backlog;
            self.nodes[n].backlog.push(c);
        }
    }

    fn start_request(&mut self, c: u32, now: u64) {
        let conn = self.conns[c as usize];
        self.conns[c as usize].stage = Stage::Pre;
        let n = conn.node as usize;
        let measured = self.m.counts(conn.request);
        let node = &mut self.nodes[n];
        if measured {
            node.counts.requests += 1;
        }
        let extra = match conn.kind {
            RequestKind::Static => 0,
            RequestKind::Ims | RequestKind::Inv => self.costs.reply_ns,
            RequestKind::Dynamic => {
                node.dynamic_active += 1;
                let class = self.w.targets()[conn.target as usize].class.unwrap_or(0);
                self.costs.class_cpu_ns(class, &mut self.rng)
            }
        };
        if conn.kind != RequestKind::Dynamic {
            self.nodes[n].static_active += 1;
        }
        self.run_cpu(n, now, self.costs.request_cpu_ns + extra, c);
    }

    /// Basic processing done: reply, read from the disk, or transmit.
    fn after_pre(&mut self, c: u32, now: u64) {
        let conn = self.conns[c as usize];
        let n = conn.node as usize;
        match conn.kind {
            RequestKind::Ims | RequestKind::Inv => self.first_byte(c, now),
            RequestKind::Dynamic => {
                let class = self.w.targets()[conn.target as usize].class.unwrap_or(0);
                let disk = self.costs.class_disk_ns(class);
                if disk > 0 {
                    self.conns[c as usize].stage = Stage::Disk;
                    let node = &mut self.nodes[n];
                    node.disk_wait += 1;
                    let done = node.disk.submit(now, disk);
                    self.events.push(done, Event::ReadDone(c));
                } else {
                    self.first_byte(c, now);
                }
            }
            RequestKind::Static if conn.is_probe() => self.first_byte(c, now),
            RequestKind::Static => {
                let measured = self.m.counts(conn.request);
                let node = &mut self.nodes[n];
                if node.cache.get(&conn.target).is_some() {
                    if measured {
                        node.counts.hits += 1;
                    }
                    self.first_byte(c, now);
                    return;
                }
                self.conns[c as usize].stage = Stage::Disk;
                node.disk_wait += 1;
                match node.reads.entry(conn.target) {
                    Entry::Occupied(mut e) => e.get_mut().push(c),
                    Entry::Vacant(e) => {
                        e.insert(vec![c]);
                        let size = self.w.targets()[conn.target as usize].size;
                        let done = node.disk.submit_read(now, size, &self.costs);
                        if measured {
                            node.counts.disk_reads += 1;
                        }
                        self.events.push(done, Event::ReadDone(c));
                    }
                }
            }
        }
    }

    /// The disk read `c` started is done: it (and, for a file, every process waiting for
    /// the same file) goes on to transmit.
    pub(super) fn read_done(&mut self, c: u32, now: u64) {
        let conn = self.conns[c as usize];
        let n = conn.node as usize;
        if conn.kind == RequestKind::Dynamic {
            self.nodes[n].disk_wait -= 1;
            self.first_byte(c, now);
            return;
        }
        let size = self.w.targets()[conn.target as usize].size;
        let node = &mut self.nodes[n];
        node.cache.insert(conn.target, (), size, 1.0);
        let waiters = node.reads.remove(&conn.target).unwrap_or_default();
        for w in waiters {
            self.nodes[n].disk_wait -= 1;
            if self.m.counts(self.conns[w as usize].request) {
                self.nodes[n].counts.misses += 1;
            }
            self.first_byte(w, now);
        }
    }

    /// The response starts: server latency ends here (a probe's time is reported).
    fn first_byte(&mut self, c: u32, now: u64) {
        let conn = self.conns[c as usize];
        let n = conn.node as usize;
        if conn.is_probe() {
            self.nodes[n].last_probe = Some(Duration::from_nanos(now - conn.issued));
            let report = self.nodes[n].snapshot();
            self.fe.report(NodeId(conn.node), &report, now);
        } else if self.m.counts(conn.request) {
            self.m.latencies.push(now - conn.arrive_at);
        }
        let size = self.response_size(&conn);
        let a = &self.cfg.apache;
        let tx = self.costs.transmit_ns(size);
        if drain_rounds(size, a.send_buffer, a.mss, a.initial_cwnd) == 0 {
            self.conns[c as usize].stage = Stage::Teardown;
            self.run_cpu(n, now, tx + self.costs.conn_teardown_ns, c);
        } else {
            self.conns[c as usize].stage = Stage::Transmit;
            self.run_cpu(n, now, tx, c);
        }
    }

    fn response_size(&self, conn: &Conn) -> u64 {
        match conn.kind {
            _ if conn.is_probe() => self.cfg.apache.probe_size,
            RequestKind::Ims | RequestKind::Inv => 0,
            RequestKind::Static => self.w.targets()[conn.target as usize].size,
            RequestKind::Dynamic => match self.w.targets()[conn.target as usize].size {
                0 => DEFAULT_DYNAMIC_SIZE,
                s => s,
            },
        }
    }

    /// The rest of a large response fits in the send buffer: teardown.
    pub(super) fn send_drained(&mut self, c: u32, now: u64) {
        self.conns[c as usize].stage = Stage::Teardown;
        let n = self.conns[c as usize].node as usize;
        self.run_cpu(n, now, self.costs.conn_teardown_ns, c);
    }

    /// Teardown done: the connection is over and its process takes the next one.
    fn finish_conn(&mut self, c: u32, now: u64) {
        let conn = self.conns[c as usize];
        let n = conn.node as usize;
        if conn.kind == RequestKind::Dynamic {
            self.nodes[n].dynamic_active -= 1;
        } else {
            self.nodes[n].static_active -= 1;
        }
        if conn.is_probe() {
            self.nodes[n].probe_out = false;
        } else {
            self.complete_at_front_end(&conn, now);
            if self.m.counts(conn.request) {
                self.m.delays.push(now - conn.issued);
            }
        }
        self.free_conn(c);
        self.nodes[n].pool.release();
        self.next_from_backlog(n, now);
    }

    /// Idle processes take connections from the backlog.
    pub(super) fn next_from_backlog(&mut self, n: usize, now: u64) {
        while self.nodes[n].pool.idle() > 0 {
            let Some(c) = self.nodes[n].backlog.take() else { break };
            self.nodes[n].pool.acquire();
            self.start_request(c, now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_up_to_the_send_buffer_never_block_and_larger_ones_block_per_slow_start_round() {
        assert_eq!(drain_rounds(0, 16384, 1460, 2), 0);
        assert_eq!(drain_rounds(16384, 16384, 1460, 2), 0);
        // 1 byte over: the first round (2 segments) drains it.
        assert_eq!(drain_rounds(16385, 16384, 1460, 2), 1);
        // 100 KiB: 86 016 bytes to drain; rounds send 2920, 5840, 11680, 23360, 46720 bytes.
        assert_eq!(drain_rounds(100 << 10, 16384, 1460, 2), 5);
    }
}
