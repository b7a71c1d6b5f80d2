//! The peer mode's event loop: every client's request walks its stages through FIFO queues
//! (connect CPU; on a co-op the `locus_dc` consistency decision and, if needed, a fetch from
//! the home — home CPU, page cache or disk, home TX and co-op RX; the page cache or disk;
//! transmit CPU; the NIC), while load meters tick every second, pingers refresh stale load
//! entries and the home's balancer edits the replica map every 5 s.

use locus_dc::ServerId;
use locus_dc::balancer::QuotaMethod;
use locus_dc::consistency::CopyDecision;
use locus_dc::doc_graph::DocId;
use locus_dc::replica_map::DocKey;
use locus_dc::replica_store::Insertion;

use crate::dc::cpu_peaks::CpuPeaks;
use crate::dc::peer::{DcPeerConfig, DcRun, NS_PER_S, server_ids};
use crate::dc::server::{DcServer, HOME};
use crate::dc::site::DcSite;
use crate::dc::surfer::{Next, Purpose, Surfer};
use crate::error::SimError;
use crate::event_queue::EventQueue;

/// Bytes of a short reply (a redirect, a 304).
const SHORT_REPLY_BYTES: u64 = 300;

const KIND_SHIFT: u32 = 30;
const INDEX_MASK: u32 = (1 << KIND_SHIFT) - 1;

/// Events as 32-bit codes: two bits of kind, thirty of index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Event {
    Stage(u32),
    Tick,
    Ping(u32),
    Balance,
}

impl crate::event_queue::EventCode for Event {
    fn encode(self) -> u32 {
        match self {
            Event::Stage(c) => c & INDEX_MASK,
            Event::Tick => 1 << KIND_SHIFT,
            Event::Ping(s) => 2 << KIND_SHIFT | (s & INDEX_MASK),
            Event::Balance => 3 << KIND_SHIFT,
        }
    }
    fn decode(code: u32) -> Event {
        let index = code & INDEX_MASK;
        match code >> KIND_SHIFT {
            0 => Event::Stage(index),
            1 => Event::Tick,
            2 => Event::Ping(index),
            _ => Event::Balance,
        }
    }
}

/// Where a request is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Connected,
    FetchConnected,
    FetchRead,
    FetchSent,
    Fetched,
    Validated,
    Read,
    Sent,
    Delivered,
    Redirected,
}

#[derive(Clone, Debug)]
struct Request {
    next: Next,
    started: u64,
    stage: Stage,
    chosen: Vec<ServerId>,
}

#[derive(Clone, Debug, Default)]
struct Counters {
    responses: u64,
    bytes: u64,
    latency_ns: u128,
    home_responses: u64,
    fetches: u64,
    validations: u64,
    redirects: u64,
    notices: u64,
    actions: u64,
    evicted: u64,
    max_store: u64,
    events: u64,
}

pub(crate) struct PeerEngine<'a> {
    site: &'a DcSite,
    config: &'a DcPeerConfig,
    keys: Vec<DocKey>,
    servers: Vec<DcServer>,
    surfers: Vec<Surfer>,
    requests: Vec<Request>,
    queue: EventQueue<Event>,
    counters: Counters,
    /// Each server's CPU and disk busy time when the measurement began.
    busy_at_warmup: Option<Vec<(u64, u64)>>,
    peaks: CpuPeaks,
    last_tick: u64,
}

impl<'a> PeerEngine<'a> {
    pub(crate) fn new(site: &'a DcSite, config: &'a DcPeerConfig) -> Result<PeerEngine<'a>, SimError> {
        let servers =
            server_ids(config.servers).map(|s| DcServer::new(s, config)).collect::<Result<_, _>>()?;
        let keys = site.docs.iter().map(|d| DocKey::new(HOME, &d.path)).collect();
        let seed = config.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let surfers =
            (0..config.clients).map(|c| Surfer::new(config.session_requests, seed ^ u64::from(c))).collect();
        let mut engine = PeerEngine {
            site,
            config,
            keys,
            servers,
            surfers,
            requests: Vec::with_capacity(config.clients as usize),
            queue: EventQueue::with_capacity(4 * config.clients as usize + 64),
            counters: Counters::default(),
            busy_at_warmup: None,
            peaks: CpuPeaks::default(),
            last_tick: 0,
        };
        for c in 0..config.clients {
            let next = engine.surfers[c as usize].start(site);
            let at = u64::from(c) * 10_000;
            engine.requests.push(Request { next, started: at, stage: Stage::Connected, chosen: Vec::new() });
            engine.arrive(c, at);
        }
        engine.queue.push(NS_PER_S, Event::Tick);
        for s in 0..u32::from(config.servers) {
            engine.queue.push(NS_PER_S / 2 + u64::from(s) * 1_000_000, Event::Ping(s));
        }
        engine.queue.push(config.balancer.period_ns + NS_PER_S / 4, Event::Balance);
        Ok(engine)
    }

    pub(crate) fn run(&mut self) {
        let end = self.config.end_ns();
        while let Some((now, event)) = self.queue.pop() {
            if now >= end {
                break;
            }
            self.counters.events += 1;
            match event {
                Event::Stage(c) => self.advance(c, now),
                Event::Tick => self.tick(now),
                Event::Ping(s) => self.ping(s as usize, now),
                Event::Balance => self.balance(now),
            }
        }
    }

    /// A client's request reaches its server: one connection, the connect CPU.
    fn arrive(&mut self, c: u32, now: u64) {
        let req = &mut self.requests[c as usize];
        req.started = req.started.min(now);
        let next = req.next;
        req.stage = Stage::Connected;
        let server = &mut self.servers[next.server.0 as usize];
        server.connections += 1;
        if next.server == HOME
            && let Some(b) = server.balancer.as_mut()
        {
            b.record_request(&self.site.doc(next.doc).path);
        }
        let done = server.cpu.submit(now, self.config.costs.conn_setup_ns + self.config.costs.request_cpu_ns);
        self.queue.push(done, Event::Stage(c));
    }

    fn advance(&mut self, c: u32, now: u64) {
        let req = &self.requests[c as usize];
        let (next, stage) = (req.next, req.stage);
        match stage {
            Stage::Connected if next.server == HOME => self.read(c, now),
            Stage::Connected => self.on_coop(c, now),
            Stage::FetchConnected => {
                let size = self.site.doc(next.doc).size;
                let done = self.servers[0].read(now, next.doc, size, &self.config.costs);
                self.set(c, Stage::FetchRead, done);
            }
            Stage::FetchRead => {
                let cost = self.send_cost(next.doc);
                let done = self.servers[0].cpu.submit(now, cost);
                self.set(c, Stage::FetchSent, done);
            }
            Stage::FetchSent => {
                let size = self.site.doc(next.doc).size;
                let done = self.transfer(HOME, next.server, size, now);
                self.set(c, Stage::Fetched, done);
            }
            Stage::Fetched => self.store_copy(c, now),
            Stage::Validated => {
                let coop = &mut self.servers[next.server.0 as usize];
                coop.store.mark_checked(&self.keys[next.doc.0 as usize], now);
                let home_load = self.servers[0].load();
                self.servers[next.server.0 as usize].table.update(HOME, home_load, now);
                self.read(c, now);
            }
            Stage::Read => self.send(c, now),
            Stage::Sent => {
                let size = self.site.doc(next.doc).size;
                let done = self.servers[next.server.0 as usize].link.tx.submit(now, size);
                self.set(c, Stage::Delivered, done);
            }
            Stage::Delivered => self.deliver(c, now),
            Stage::Redirected => {
                self.requests[c as usize].next.server = HOME;
                self.arrive(c, now);
            }
        }
    }

    fn set(&mut self, c: u32, stage: Stage, at: u64) {
        self.requests[c as usize].stage = stage;
        self.queue.push(at, Event::Stage(c));
    }

    fn send_cost(&self, doc: DocId) -> u64 {
        let costs = &self.config.costs;
        costs.transmit_ns(self.site.doc(doc).size) + costs.conn_teardown_ns
    }

    /// `from`'s TX and `to`'s RX carry `bytes` (pipelined): the later end.
    fn transfer(&mut self, from: ServerId, to: ServerId, bytes: u64, now: u64) -> u64 {
        let sent = self.servers[from.0 as usize].link.tx.submit(now, bytes);
        let received = self.servers[to.0 as usize].link.rx.submit(now, bytes);
        sent.max(received)
    }

    /// A co-op's request for a copy: serve it, validate it with the home, fetch it, or — if it
    /// cannot fit the quota — send the client to the home.
    fn on_coop(&mut self, c: u32, now: u64) {
        let next = self.requests[c as usize].next;
        let (s, doc) = (next.server.0 as usize, self.site.doc(next.doc));
        let key = &self.keys[next.doc.0 as usize];
        let decision = self.config.consistency.decide(self.servers[s].store.meta(key), doc.version, now);
        let costs = &self.config.costs;
        match decision {
            CopyDecision::Serve => {
                self.servers[s].store.get(key, now);
                self.read(c, now);
            }
            CopyDecision::Fetch if doc.size > self.servers[s].store.quota() => {
                self.counters.redirects += 1;
                self.notice(next.server, next.doc, now);
                let cpu = self.servers[s].cpu.submit(now, costs.reply_ns + costs.conn_teardown_ns);
                let sent = self.servers[s].link.tx.submit(cpu, SHORT_REPLY_BYTES);
                self.set(c, Stage::Redirected, sent);
            }
            CopyDecision::Fetch | CopyDecision::Validate => {
                let coop_load = self.servers[s].load();
                let home = &mut self.servers[0];
                home.connections += 1;
                home.table.update(next.server, coop_load, now);
                if decision == CopyDecision::Fetch {
                    self.counters.fetches += 1;
                    let done = home.cpu.submit(now, costs.conn_setup_ns + costs.request_cpu_ns);
                    self.set(c, Stage::FetchConnected, done);
                } else {
                    self.counters.validations += 1;
                    let cpu = costs.conn_setup_ns + costs.reply_ns + costs.conn_teardown_ns;
                    let done = home.cpu.submit(now, cpu);
                    let done = self.transfer(HOME, next.server, SHORT_REPLY_BYTES, done);
                    self.set(c, Stage::Validated, done);
                }
            }
        }
    }

    /// The copy arrived at the co-op: store it (evictions may send deletion notices), keep it
    /// in memory, then serve it.
    fn store_copy(&mut self, c: u32, now: u64) {
        let next = self.requests[c as usize].next;
        let (s, doc) = (next.server.0 as usize, self.site.doc(next.doc));
        let home_load = self.servers[0].load();
        let coop = &mut self.servers[s];
        coop.table.update(HOME, home_load, now);
        let key = self.keys[next.doc.0 as usize].clone();
        let evicted = match coop.store.insert(key, doc.version, doc.size, (), now) {
            Insertion::Stored { evicted } => evicted,
            Insertion::TooLarge { .. } => Vec::new(),
        };
        coop.page_cache.insert(next.doc.0, (), doc.size, 1.0);
        self.counters.max_store = self.counters.max_store.max(coop.store.used_bytes());
        for gone in evicted {
            self.counters.evicted += 1;
            if let Some(id) = self.site.graph.id(&gone.path) {
                self.servers[s].page_cache.remove(&id.0);
                self.notice(next.server, id, now);
            }
        }
        self.send(c, now);
    }

    /// Deletion-Aware: the co-op tells the home it no longer holds `doc`.
    fn notice(&mut self, coop: ServerId, doc: DocId, _now: u64) {
        if self.config.method != QuotaMethod::DeletionAware {
            return;
        }
        self.counters.notices += 1;
        let home = &mut self.servers[0];
        let Some(balancer) = home.balancer.as_mut() else { return };
        if balancer.on_deletion_notice(&self.site.doc(doc).path, coop, home.maps.own_mut()) {
            self.publish_map();
        }
    }

    /// The home's map changes reach every other server (the UDP change messages).
    fn publish_map(&mut self) {
        let (home, others) = self.servers.split_at_mut(1);
        let own = home[0].maps.own();
        for server in others {
            let since = server.maps.get(HOME).map_or(0, |m| m.seq());
            if since < own.seq() {
                server.maps.apply(&own.changes_since(since));
            }
        }
    }

    fn read(&mut self, c: u32, now: u64) {
        let next = self.requests[c as usize].next;
        let size = self.site.doc(next.doc).size;
        let done = self.servers[next.server.0 as usize].read(now, next.doc, size, &self.config.costs);
        self.set(c, Stage::Read, done);
    }

    /// The server renders (a page's slots get their servers now) and transmits.
    fn send(&mut self, c: u32, now: u64) {
        let next = self.requests[c as usize].next;
        let cost = self.send_cost(next.doc);
        let server = &mut self.servers[next.server.0 as usize];
        let chosen = match next.purpose == Purpose::Navigate && self.site.doc(next.doc).is_page {
            true => server.choose_slots(self.site, next.doc, now),
            false => Vec::new(),
        };
        let done = server.cpu.submit(now, cost);
        self.requests[c as usize].chosen = chosen;
        self.set(c, Stage::Sent, done);
    }

    fn deliver(&mut self, c: u32, now: u64) {
        let req = &mut self.requests[c as usize];
        let next = req.next;
        if now >= self.config.warmup_ns() {
            let k = &mut self.counters;
            k.responses += 1;
            k.bytes += self.site.doc(next.doc).size;
            k.latency_ns += u128::from(now - req.started);
            k.home_responses += u64::from(next.server == HOME);
        }
        let chosen = std::mem::take(&mut req.chosen);
        req.next = self.surfers[c as usize].on_response(self.site, next.doc, next.purpose, chosen);
        req.started = now;
        self.arrive(c, now);
    }

    fn tick(&mut self, now: u64) {
        if self.busy_at_warmup.is_none() && now >= self.config.warmup_ns() {
            let busy = self.servers.iter().map(|s| (s.cpu.busy_ns(), s.disk.busy_ns())).collect();
            self.busy_at_warmup = Some(busy);
        }
        let measured = self.busy_at_warmup.is_some() && now > self.config.warmup_ns();
        let busy = self.servers.iter().map(|s| s.cpu.busy_ns());
        self.peaks.tick(busy, now - self.last_tick, measured);
        self.last_tick = now;
        for server in &mut self.servers {
            let connections = std::mem::take(&mut server.connections);
            server.meter.tick(now, connections);
        }
        self.queue.push(now + NS_PER_S, Event::Tick);
    }

    /// Server `s`'s pinger: every peer whose load entry is stale gets a ping; both sides pay a
    /// short reply's CPU and learn each other's load.
    fn ping(&mut self, s: usize, now: u64) {
        let stale = self.servers[s].table.stale(now, self.config.ping_stale_ns);
        let cost = self.config.ping_cpu_ns;
        for peer in stale {
            let p = peer.0 as usize;
            self.servers[s].cpu.submit(now, cost);
            self.servers[p].cpu.submit(now, cost);
            let (mine, theirs) = (self.servers[s].load(), self.servers[p].load());
            let me = self.servers[s].id;
            self.servers[s].table.update(peer, theirs, now);
            self.servers[p].table.update(me, mine, now);
        }
        self.queue.push(now + self.config.ping_period_ns, Event::Ping(s as u32));
    }

    /// The home's balancing round; its map changes go to every server.
    fn balance(&mut self, now: u64) {
        let site = self.site;
        let home = &mut self.servers[0];
        let own = home.load();
        if let Some(balancer) = home.balancer.as_mut() {
            let actions = balancer.round(now, own, &home.table, home.maps.own_mut(), |p| site.size_of(p));
            self.counters.actions += actions.len() as u64;
        }
        self.publish_map();
        self.queue.push(now + self.config.balancer.period_ns, Event::Balance);
    }

    pub(crate) fn result(&self) -> DcRun {
        let k = &self.counters;
        let measure = self.config.measure_s;
        let home_map = self.servers[0].maps.own();
        let busy = self.measured_busy();
        let (home, coops) = busy.split_first().map_or(((0.0, 0.0), &[][..]), |(h, c)| (*h, c));
        DcRun {
            servers: self.config.servers,
            clients: self.config.clients,
            method: self.config.method.to_string(),
            quota_bytes: self.config.quota_bytes,
            cps: k.responses as f64 / measure,
            bps: k.bytes as f64 / measure,
            mean_ms: if k.responses > 0 { k.latency_ns as f64 / k.responses as f64 / 1e6 } else { 0.0 },
            responses: k.responses,
            home_share: if k.responses > 0 { k.home_responses as f64 / k.responses as f64 } else { 0.0 },
            fetches: k.fetches,
            validations: k.validations,
            redirects: k.redirects,
            deletion_notices: k.notices,
            balancer_actions: k.actions,
            copies_evicted: k.evicted,
            max_store_bytes: k.max_store,
            replicated_docs: home_map.replicated().count() as u64,
            placed_copies: home_map.summary(|p| self.site.size_of(p)).placed_copies,
            home_cpu: home.0,
            coop_cpu: mean(coops.iter().map(|b| b.0)),
            busiest_coop_cpu: coops.iter().map(|b| b.0).fold(0.0, f64::max),
            home_disk: home.1,
            coop_disk: mean(coops.iter().map(|b| b.1)),
            peak_cpu: self.peaks.mean_peak(),
            saturated_share: self.peaks.saturated_share(),
            warmup_s: self.config.warmup_s,
            measure_s: measure,
            events: k.events,
        }
    }

    /// CPU and disk busy shares of the measured window for every server, the home first. Work
    /// queued at the end counts as done: a queue's busy time is booked when it is submitted.
    fn measured_busy(&self) -> Vec<(f64, f64)> {
        let span = (self.config.end_ns() - self.config.warmup_ns()).max(1) as f64;
        let start = self.busy_at_warmup.as_deref().unwrap_or(&[]);
        (self.servers.iter().enumerate())
            .map(|(i, s)| {
                let (cpu0, disk0) = start.get(i).copied().unwrap_or((0, 0));
                let share = |now: u64, then: u64| (now.saturating_sub(then) as f64 / span).min(1.0);
                (share(s.cpu.busy_ns(), cpu0), share(s.disk.busy_ns(), disk0))
            })
            .collect()
    }

    /// Server `s` renders `page` (whose bytes are `html`) now, as it would for a client.
    #[cfg(test)]
    fn render_at(&mut self, s: ServerId, page: DocId, html: &[u8], now: u64) -> Option<Vec<u8>> {
        let server = &mut self.servers[s.0 as usize];
        let chosen = server.choose_slots(self.site, page, now);
        server.render_page(self.site, page, html, &chosen)
    }
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 { 0.0 } else { sum / n as f64 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use locus_dc::html_links::scan_page;
    use locus_dc::replica_url::ReplicaTarget;
    use locus_dc::site_path::{PageBase, Resolved};
    use locus_trace::{SiteGenerator, SitePreset};

    use crate::dc::peer::{UNLIMITED_QUOTA, simulate_dc};
    use crate::dc::site::server_authority;

    fn site(preset: SitePreset, scale: f64) -> (tempfile::TempDir, DcSite) {
        let dir = tempfile::tempdir().unwrap();
        SiteGenerator::preset(preset, scale, 5).unwrap().write(dir.path(), false, &mut |_, _| {}).unwrap();
        let site = DcSite::read(preset.name(), dir.path()).unwrap();
        (dir, site)
    }

    fn config(servers: u16, method: QuotaMethod, quota: u64) -> DcPeerConfig {
        let mut c = DcPeerConfig::paper(servers, method, quota);
        (c.clients, c.warmup_s, c.measure_s) = (48, 20.0, 20.0);
        c
    }

    #[test]
    fn same_seed_gives_the_same_run_and_another_seed_a_different_one() {
        let (_d, s) = site(SitePreset::Lod, 0.2);
        let c = config(4, QuotaMethod::ResourceAware, UNLIMITED_QUOTA);
        let a = simulate_dc(&s, &c).unwrap();
        assert_eq!(a, simulate_dc(&s, &c).unwrap());
        assert!(a.responses > 1000 && a.fetches > 0, "{a:?}");
        let b = simulate_dc(&s, &DcPeerConfig { seed: 9, ..c }).unwrap();
        assert_ne!(a.responses, b.responses);
    }

    #[test]
    fn one_server_run_fetches_nothing_and_serves_everything_itself() {
        let (_d, s) = site(SitePreset::Mapug, 0.05);
        let r = simulate_dc(&s, &config(1, QuotaMethod::Naive, UNLIMITED_QUOTA)).unwrap();
        assert_eq!((r.fetches, r.validations, r.placed_copies), (0, 0, 0));
        assert!(r.responses > 0 && r.home_share == 1.0, "{r:?}");
        // A closed loop with no think time keeps the only server's CPU busy all the time.
        assert!(r.home_cpu > 0.95 && r.home_cpu <= 1.0, "{r:?}");
        assert_eq!((r.coop_cpu, r.busiest_coop_cpu, r.coop_disk), (0.0, 0.0, 0.0));
    }

    #[test]
    fn busiest_coop_is_at_least_the_coop_mean_and_every_share_is_within_zero_and_one() {
        let (_d, s) = site(SitePreset::Specweb99, 0.5);
        let r = simulate_dc(&s, &config(4, QuotaMethod::ResourceAware, UNLIMITED_QUOTA)).unwrap();
        assert!(r.coop_cpu > 0.0 && r.busiest_coop_cpu >= r.coop_cpu, "{r:?}");
        for share in [r.home_cpu, r.coop_cpu, r.busiest_coop_cpu, r.home_disk, r.coop_disk] {
            assert!((0.0..=1.0).contains(&share), "{r:?}");
        }
    }

    #[test]
    fn replica_quota_is_never_exceeded_under_any_method() {
        let (_d, s) = site(SitePreset::Specweb99, 1.0);
        let quota = s.total_bytes / 3;
        for method in [QuotaMethod::Naive, QuotaMethod::DeletionAware, QuotaMethod::ResourceAware] {
            let r = simulate_dc(&s, &config(4, method, quota)).unwrap();
            assert!(r.fetches > 0 && r.max_store_bytes > 0, "{method}: {r:?}");
            assert!(r.max_store_bytes <= quota, "{method}: {} > {quota}", r.max_store_bytes);
        }
    }

    #[test]
    fn a_page_served_by_a_coop_names_only_existing_documents_and_servers() {
        let (dir, s) = site(SitePreset::Lod, 0.2);
        let c = config(4, QuotaMethod::ResourceAware, UNLIMITED_QUOTA);
        let mut engine = PeerEngine::new(&s, &c).unwrap();
        engine.run();
        assert!(engine.result().placed_copies > 0);
        let coop = ServerId(2);
        let mut rewritten = 0;
        for (id, doc) in s.docs.iter().enumerate().filter(|(_, d)| d.is_page) {
            let html = std::fs::read(dir.path().join(&doc.path[1..])).unwrap();
            let page = engine.render_at(coop, DocId(id as u32), &html, c.end_ns()).unwrap();
            let links = scan_page(&page).unwrap();
            let base = links.base.as_ref().map(|b| b.value.clone());
            assert_eq!(base.as_deref(), Some(format!("http://{}{}", server_authority(0), doc.path).as_str()));
            let resolver = PageBase::new(&doc.path, base.as_deref(), &server_authority(0));
            for slot in &links.slots {
                let value = &slot.value;
                if let Some(rest) = value.strip_prefix("http://").filter(|r| r.contains("/~migrate/")) {
                    let (authority, target) = rest.split_at(rest.find('/').unwrap());
                    let n: u16 = authority.trim_start_matches('s').trim_end_matches(":80").parse().unwrap();
                    assert!(n > 0 && n < c.servers, "{value}");
                    let t = ReplicaTarget::parse(target).unwrap().unwrap();
                    assert!(s.graph.id(&t.path).is_some() && t.home == "s0", "{value}");
                    rewritten += 1;
                } else if let Resolved::Local { path, .. } = resolver.resolve(value) {
                    assert!(s.graph.id(&path).is_some(), "{value} resolves outside the site");
                }
            }
        }
        assert!(rewritten > 0, "no link was rewritten to a co-op");
    }
}
