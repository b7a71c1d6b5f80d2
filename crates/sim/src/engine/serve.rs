//! A request on its node: the cache lookup after setup (Socket Cloning: after the entry node
//! cloned the connection to the owner), a read from the node's disk or the shared file
//! server, a fetch from another node's memory (WRR/GMS; cooperative caching over the holder's
//! TX and the requester's RX links), the cache insertion that keeps the directory current,
//! and the response through the node's TX link.

use std::collections::hash_map::Entry;

use locus_cache::Replacement;

use super::{Engine, Event};
use crate::node_model::{NO_SLOT, WaitList};

/// Where a file that was not in memory came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Source {
    /// The node's disk or the file server.
    Storage,
    /// Another node's memory.
    Remote,
}

impl Engine<'_> {
    /// The request reaches its entry node. Under Socket Cloning a static request whose owner
    /// is another node is accepted and parsed here, then cloned to the owner; everything
    /// else is looked up on this node after setup.
    #[inline]
    pub(super) fn arrive(&mut self, slot: u32, now: u64) {
        let s = self.slots[slot as usize];
        let n = s.node as usize;
        let meta = self.w.targets()[s.target as usize];
        if let Some(class) = meta.class {
            let node = &mut self.nodes[n];
            node.counters.requests += 1;
            node.counters.dynamic += 1;
            let cpu = self.setup_cpu
                + self.costs.dynamic_fixed_ns
                + self.costs.class_cpu_ns(class, &mut self.rng)
                + self.costs.transmit_ns(meta.size)
                + self.costs.conn_teardown_ns;
            let done = node.cpu.submit(now, cpu);
            self.respond(slot, done);
            return;
        }
        if self.cloning {
            let owner = self.owner_of(meta.hash, n);
            if owner != n {
                let done = self.nodes[n].cpu.submit(now, self.setup_cpu + self.clone_entry_ns);
                self.slots[slot as usize].node = owner as u32;
                self.events.push(done, Event::Cloned(slot));
                return;
            }
        }
        self.lookup(slot, now, self.setup_cpu);
    }

    /// The clone is set up on the owner: it pays its share and looks in its cache.
    pub(super) fn cloned(&mut self, slot: u32, now: u64) {
        self.lookup(slot, now, self.clone_owner_ns);
    }

    /// Socket Cloning's owner of a target: its hash mod the nodes up (`fallback` if none).
    fn owner_of(&self, hash: u64, fallback: usize) -> usize {
        let n = self.nodes.len();
        if n > 64 {
            return (hash % n as u64) as usize;
        }
        let up = self.up_mask & if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
        let count = up.count_ones() as u64;
        if count == 0 {
            return fallback;
        }
        let mut k = hash % count;
        let mut mask = up;
        while k > 0 {
            mask &= mask - 1;
            k -= 1;
        }
        mask.trailing_zeros() as usize
    }

    /// The serving node looks in its cache after `pre_cpu` of work on its CPU (setup, or the
    /// owner's share of a clone): a hit runs that, transmit and teardown as one CPU job; a
    /// miss runs it and looks again.
    #[inline]
    fn lookup(&mut self, slot: u32, now: u64, pre_cpu: u64) {
        let s = self.slots[slot as usize];
        let n = s.node as usize;
        let size = self.w.targets()[s.target as usize].size;
        let node = &mut self.nodes[n];
        node.counters.requests += 1;
        if node.cache.get(&s.target).is_some() {
            self.local_hit(n, s.target, now);
            let cpu = pre_cpu + self.costs.transmit_ns(size) + self.costs.conn_teardown_ns;
            let done = self.nodes[n].cpu.submit(now, cpu);
            self.respond(slot, done);
        } else {
            let done = node.cpu.submit(now, pre_cpu);
            self.events.push(done, Event::SetupDone(slot));
        }
    }

    #[inline]
    fn local_hit(&mut self, n: usize, doc: u32, now: u64) {
        let node = &mut self.nodes[n];
        node.counters.local_hits += 1;
        if !node.last_use.is_empty() {
            node.last_use[doc as usize] = now;
        }
        if self.track_fetching
            && let Some(dir) = &self.dir
        {
            dir.set_fetching(doc, n, false);
        }
    }

    /// The node's CPU is done with the request at `done`: it completes then, or, with links
    /// or Socket Cloning, the response first crosses the node's TX link (`transmit`).
    #[inline]
    pub(super) fn respond(&mut self, slot: u32, done: u64) {
        if self.links || self.cloning {
            self.events.push(done, Event::Transmit(slot));
        } else {
            self.events.push(done, Event::Complete(slot));
        }
    }

    /// The response leaves through the serving node's TX link; under Socket Cloning the
    /// entry node's packet router forwards the client's ACKs meanwhile.
    pub(super) fn transmit(&mut self, slot: u32, now: u64) {
        let s = self.slots[slot as usize];
        let size = self.w.targets()[s.target as usize].size;
        let mut done = now;
        if let Some(link) = &mut self.nodes[s.node as usize].link {
            done = link.tx.submit(now, size);
        }
        if self.cloning && s.entry != s.node {
            let acks = self.cloning_cost.acks_ns(size);
            done = done.max(self.nodes[s.entry as usize].cpu.submit(now, acks));
        }
        self.events.push(done, Event::Complete(slot));
    }

    /// Setup done after a miss: hit now, join a read in progress, or start one (from another
    /// node's memory under WRR/GMS or cooperative caching, else from storage).
    pub(super) fn setup_done(&mut self, slot: u32, now: u64) {
        let s = self.slots[slot as usize];
        let n = s.node as usize;
        let doc = s.target;
        let size = self.w.targets()[doc as usize].size;
        if self.nodes[n].cache.get(&doc).is_some() {
            self.local_hit(n, doc, now);
            let done =
                self.nodes[n].cpu.submit(now, self.costs.transmit_ns(size) + self.costs.conn_teardown_ns);
            self.respond(slot, done);
            return;
        }
        match self.nodes[n].reads.entry(doc) {
            Entry::Occupied(mut e) => {
                let list = e.get_mut();
                self.slots[list.tail as usize].next = slot;
                list.tail = slot;
                return;
            }
            Entry::Vacant(e) => {
                e.insert(WaitList { head: slot, tail: slot });
            }
        }
        if (self.gms || self.coop.is_some())
            && let Some(holder) = self.remote_holder(n, doc)
        {
            self.fetch_remote(slot, holder, now);
            return;
        }
        let node = &mut self.nodes[n];
        node.counters.disk_reads += 1;
        let done = match &mut self.file_server {
            Some(fs) => fs.read(now, size, node.link.as_mut().map(|l| &mut l.rx)),
            None => {
                let disk = self.w.targets()[doc as usize].popularity_rank as u64 % self.disks;
                node.disks[disk as usize].submit_read(now, size, &self.costs)
            }
        };
        self.events.push(done, Event::ReadDone(slot));
    }

    /// Fetch the request's file from `holder`'s memory, touching the holder's copy. WRR/GMS:
    /// the holder's CPU sends it and it arrives a fixed latency later. Cooperative caching:
    /// the requester sends a request message and the holder receives it and sends the file
    /// (CPU on both), then the file crosses the holder's TX and the requester's RX links.
    fn fetch_remote(&mut self, slot: u32, holder: usize, now: u64) {
        let s = self.slots[slot as usize];
        let doc = s.target;
        let size = self.w.targets()[doc as usize].size;
        let h = &mut self.nodes[holder];
        h.counters.remote_sends += 1;
        h.cache.get(&doc);
        if !h.last_use.is_empty() {
            h.last_use[doc as usize] = now;
        }
        if self.gms {
            let sent = h.cpu.submit(now, self.costs.gms_sender_ns(size));
            self.events.push(sent + self.costs.gms.latency_ns, Event::FetchDone(slot));
            return;
        }
        let message = self.costs.conn_setup_ns;
        let sent = h.cpu.submit(now, message + self.costs.transmit_ns(size));
        let asked = self.nodes[s.node as usize].cpu.submit(now, message);
        self.slots[slot as usize].holder = holder as u32;
        if self.links {
            self.events.push(sent.max(asked), Event::FetchSend(slot));
        } else {
            self.events.push(sent.max(asked), Event::FetchDone(slot));
        }
    }

    /// The holder puts the file on the wire: its TX link and the requester's RX link.
    pub(super) fn fetch_send(&mut self, slot: u32, now: u64) {
        let s = self.slots[slot as usize];
        let size = self.w.targets()[s.target as usize].size;
        let mut done = now;
        if let Some(link) = &mut self.nodes[s.holder as usize].link {
            done = done.max(link.tx.submit(now, size));
        }
        if let Some(link) = &mut self.nodes[s.node as usize].link {
            done = done.max(link.rx.submit(now, size));
        }
        self.events.push(done, Event::FetchDone(slot));
    }

    /// Another up node whose memory holds `doc`, the first after `n`.
    fn remote_holder(&self, n: usize, doc: u32) -> Option<usize> {
        let dir = self.dir.as_ref()?;
        let mask = dir.holders(doc) & self.up_mask & !(1u64 << n);
        if mask == 0 {
            return None;
        }
        let start = (n + 1) % 64;
        let k = mask.rotate_right(start as u32).trailing_zeros() as usize;
        Some((start + k) % 64)
    }

    /// The file is in memory: cache it (unless it is a single-copy cooperative cache's remote
    /// copy), and every request waiting for it transmits. A cooperative fetch costs the
    /// requester the receive (the transmit cost of the file) first.
    pub(super) fn fetched(&mut self, slot: u32, now: u64, source: Source) {
        let s = self.slots[slot as usize];
        let n = s.node as usize;
        let doc = s.target;
        let size = self.w.targets()[doc as usize].size;
        let remote_coop = source == Source::Remote && self.coop.is_some();
        if !(remote_coop && self.coop == Some(false)) {
            self.store(n, doc, now, true);
        }
        if self.track_fetching
            && let Some(dir) = &self.dir
        {
            dir.set_fetching(doc, n, false);
        }
        let Some(list) = self.nodes[n].reads.remove(&doc) else { return };
        if remote_coop {
            self.nodes[n].cpu.submit(now, self.costs.transmit_ns(size));
        }
        let cpu = self.costs.transmit_ns(size) + self.costs.conn_teardown_ns;
        let mut waiter = list.head;
        while waiter != NO_SLOT {
            let node = &mut self.nodes[n];
            match source {
                Source::Storage => node.counters.misses += 1,
                Source::Remote => node.counters.remote_hits += 1,
            }
            let done = node.cpu.submit(now, cpu);
            self.respond(waiter, done);
            let next = self.slots[waiter as usize].next;
            self.slots[waiter as usize].next = NO_SLOT;
            waiter = next;
        }
    }

    /// Put `doc` in node `n`'s cache, keeping the directory current; under WRR/GMS a
    /// document evicted while no other node holds it moves to the node with the globally
    /// oldest content (`forward`; documents that leaves evicts are dropped).
    pub(super) fn store(&mut self, n: usize, doc: u32, now: u64, forward: bool) {
        let size = self.w.targets()[doc as usize].size;
        if size > self.max_object {
            return;
        }
        self.evicted.clear();
        let evicted = &mut self.evicted;
        let node = &mut self.nodes[n];
        node.cache.insert_with_evictions(doc, (), size, self.gds_cost, |k, ()| evicted.push(k));
        let Some(dir) = &self.dir else { return };
        dir.set_held(doc, n, true);
        if self.track_fetching {
            dir.set_fetching(doc, n, false);
        }
        let track = !node.last_use.is_empty();
        if track {
            node.last_use[doc as usize] = now;
        }
        let mut last_victim_use = None;
        for &v in evicted.iter() {
            dir.set_held(v, n, false);
            if track {
                last_victim_use = Some(node.last_use[v as usize]);
            }
        }
        match self.replacement {
            Replacement::Gds | Replacement::Gdsf => dir.set_age_floor(n, node.cache.inflation().to_bits()),
            Replacement::Lru | Replacement::Lfu => {
                if let Some(t) = last_victim_use {
                    dir.set_age_floor(n, t);
                }
            }
        }
        dir.set_free_bytes(n, self.capacity.saturating_sub(node.cache.used_bytes()));
        if !(forward && self.gms) {
            return;
        }
        let mut singles = std::mem::take(&mut self.forward);
        singles.clear();
        singles.extend(self.evicted.iter().copied().filter(|&v| dir.holders(v) == 0));
        if !singles.is_empty() {
            let others = self.up_mask & !(1u64 << n);
            let dir = dir.clone();
            for &v in &singles {
                if let Some(j) = dir.oldest_node(others, self.w.targets()[v as usize].size, None) {
                    self.store(j, v, now, false);
                }
            }
        }
        self.forward = singles;
    }
}
