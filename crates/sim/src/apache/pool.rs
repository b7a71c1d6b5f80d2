//! `Pool`: Apache 1.3's process pool on one node — processes are busy (serving a
//! connection), idle, or being forked; once a second `maintain` applies Apache's rule
//! (`perform_idle_server_maintenance`): more idle than MaxSpare ⇒ kill one; fewer idle
//! (forking counts as idle) than MinSpare ⇒ fork `rate` more, up to MaxClients, and double
//! `rate` up to 32; otherwise reset `rate` to 1.

use crate::config::ApacheModel;

/// The process pool of one node.
#[derive(Clone, Debug)]
pub struct Pool {
    busy: u32,
    idle: u32,
    forking: u32,
    rate: u32,
    max_clients: u32,
    min_spare: u32,
    max_spare: u32,
    max_rate: u32,
    /// Most processes alive at once.
    pub max_seen: u32,
    /// Forks started.
    pub forks: u64,
}

impl Pool {
    /// A pool with StartServers idle processes.
    pub fn new(m: &ApacheModel) -> Pool {
        let start = m.start_servers.min(m.max_clients);
        Pool {
            busy: 0,
            idle: start,
            forking: 0,
            rate: 1,
            max_clients: m.max_clients,
            min_spare: m.min_spare,
            max_spare: m.max_spare,
            max_rate: m.max_spawn_rate.max(1),
            max_seen: start,
            forks: 0,
        }
    }

    /// Take an idle process for a connection; false if none is idle.
    pub fn acquire(&mut self) -> bool {
        if self.idle == 0 {
            return false;
        }
        self.idle -= 1;
        self.busy += 1;
        true
    }

    /// A busy process finished its connection and is idle again.
    pub fn release(&mut self) {
        debug_assert!(self.busy > 0);
        self.busy -= 1;
        self.idle += 1;
    }

    /// A fork finished: one more idle process.
    pub fn forked(&mut self) {
        debug_assert!(self.forking > 0);
        self.forking -= 1;
        self.idle += 1;
    }

    /// Processes alive or being forked.
    pub fn total(&self) -> u32 {
        self.busy + self.idle + self.forking
    }

    pub fn busy(&self) -> u32 {
        self.busy
    }

    pub fn idle(&self) -> u32 {
        self.idle
    }

    /// The once-a-second maintenance; returns how many forks to start now (the caller
    /// charges each its CPU and calls `forked` when it is done).
    pub fn maintain(&mut self) -> u32 {
        let idle_count = self.idle + self.forking;
        if idle_count > self.max_spare && self.idle > 0 {
            self.idle -= 1;
            self.rate = 1;
            return 0;
        }
        if idle_count >= self.min_spare {
            self.rate = 1;
            return 0;
        }
        let room = self.max_clients.saturating_sub(self.total());
        let spawn = self.rate.min(room);
        if self.rate < self.max_rate {
            self.rate *= 2;
        }
        self.forking += spawn;
        self.forks += spawn as u64;
        self.max_seen = self.max_seen.max(self.total());
        spawn
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_spawns_1_2_4_to_32_per_second_and_never_exceeds_max_clients() {
        let m = ApacheModel::default();
        let mut p = Pool::new(&m);
        let mut spawned = Vec::new();
        for _ in 0..12 {
            // Every process is busy at each maintenance: the pool keeps growing.
            while p.acquire() {}
            let n = p.maintain();
            for _ in 0..n {
                p.forked();
            }
            spawned.push(n);
            assert!(p.total() <= m.max_clients, "{} processes", p.total());
        }
        // 5 + 1 + 2 + 4 + 8 + 16 + 32 + 32 + 32 = 132, then 18 more reach 150.
        assert_eq!(spawned, [1, 2, 4, 8, 16, 32, 32, 32, 18, 0, 0, 0]);
        assert_eq!(p.total(), 150);
        assert_eq!(p.max_seen, 150);
        assert_eq!(p.forks, 145);
    }

    #[test]
    fn pool_kills_one_idle_process_a_second_above_max_spare_and_resets_the_rate() {
        let m = ApacheModel { start_servers: 13, ..ApacheModel::default() };
        let mut p = Pool::new(&m);
        assert_eq!(p.maintain(), 0);
        assert_eq!(p.total(), 12);
        assert_eq!(p.maintain(), 0);
        assert_eq!(p.maintain(), 0);
        assert_eq!(p.total(), 10, "down to MaxSpare, no further");
        assert_eq!(p.maintain(), 0);
        assert_eq!(p.total(), 10);
        // Busy all but 4 (below MinSpare): spawn 1; the forking one counts as idle.
        for _ in 0..6 {
            assert!(p.acquire());
        }
        assert_eq!(p.maintain(), 1);
        assert_eq!(p.maintain(), 0, "4 idle + 1 forking = MinSpare");
        p.forked();
        for _ in 0..5 {
            assert!(p.acquire());
        }
        assert_eq!(p.maintain(), 1, "the rate was reset to 1");
        assert_eq!(p.maintain(), 2, "and doubles while short");
    }
}
