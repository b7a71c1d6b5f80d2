//! `SurfClient`: one live surfer on a worker's event loop (closed loop). A session starts at
//! the entry page; after each page it fetches the page's embedded objects, then follows one
//! random link (seeded RNG) as the server wrote it; a leaf sends it back to the last page it
//! holds. It keeps one connection per allowed host, contacts no other host, checks every
//! answer against the site's originals (rewrite-aware for pages) and counts it: answered,
//! failed, or outstanding when the window ends (its latency censored there).

use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use locus_dc::html_links::{SlotKind, scan_page};
use locus_dc::replica_url::MIGRATE_PREFIX;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::time::Sleep;

use crate::connection::WorkerShared;
use crate::exchange::{Fault, connect_within, count_response, read_response};
use crate::response_reader::{BodyCapture, ResponseReader, ResponseSummary};
use crate::stats::{ErrorKind, ThreadStats};
use crate::surf_plan::{LinkTarget, MAX_PAGE_BYTES, PageUrl, SiteCheck, SurfPlan, site_path_of};
use crate::think_time::ThinkSampler;
use crate::verifier::{Mismatch, MismatchKind};

/// Links drawn from a page before the client gives up on finding one it may follow.
const MAX_LINK_DRAWS: usize = 8;

/// The run is over (its end passed, or the request budget is spent).
struct Stopped;

/// One allowed host's connection of a client.
struct HostConnection {
    stream: Option<TcpStream>,
    reader: ResponseReader,
    /// Responses completed on the current connection.
    served: u64,
}

/// A page the client holds: where its links lead and what it embeds.
struct HeldPage {
    links: Vec<LinkTarget>,
    embeds: Vec<LinkTarget>,
}

/// What a fetch gave.
enum Fetched {
    Page(HeldPage),
    /// Anything but a page (or a page that could not be parsed).
    Leaf,
    /// No usable answer (counted).
    Failed,
}

/// A simulated browsing user; see the module documentation.
pub struct SurfClient {
    shared: Rc<WorkerShared>,
    plan: Arc<SurfPlan>,
    conns: Vec<HostConnection>,
    rng: SmallRng,
    think: ThinkSampler,
    timer: Pin<Box<Sleep>>,
    capture: BodyCapture,
    wbuf: Vec<u8>,
    /// When the request of the current exchange started to be written.
    written_at: Option<Instant>,
}

fn mix(seed: u64, slot: usize) -> u64 {
    seed ^ (slot as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

impl SurfClient {
    /// Client number `slot` (must be created inside the worker's runtime).
    pub fn new(slot: usize, shared: Rc<WorkerShared>, plan: Arc<SurfPlan>) -> SurfClient {
        let settings = &shared.settings;
        let conns = plan
            .hosts
            .iter()
            .map(|_| HostConnection { stream: None, reader: ResponseReader::new(), served: 0 })
            .collect();
        let far = tokio::time::Instant::now() + Duration::from_secs(86_400 * 365);
        SurfClient {
            conns,
            rng: SmallRng::seed_from_u64(mix(settings.seed ^ 0x7375_7266, slot)),
            think: ThinkSampler::new(settings.think, mix(settings.seed ^ 0x0074_6869_6e6b, slot)),
            timer: Box::pin(tokio::time::sleep_until(far)),
            capture: BodyCapture::new(MAX_PAGE_BYTES),
            wbuf: Vec::with_capacity(512),
            written_at: None,
            plan,
            shared,
        }
    }

    fn run_over(&self, now: Instant) -> bool {
        self.shared.timing.run_end.is_some_and(|end| now >= end)
    }

    fn measured(&self) -> bool {
        Instant::now() >= self.shared.timing.warmup_end
    }

    fn count(&self, f: impl FnOnce(&mut ThreadStats)) {
        if self.measured() {
            f(&mut self.shared.stats.borrow_mut());
        }
    }

    /// Run sessions until the time or the request budget is used up.
    pub async fn run(mut self) {
        while !self.run_over(Instant::now()) {
            if self.session().await.is_err() {
                break;
            }
        }
        for c in &mut self.conns {
            c.stream = None;
        }
    }

    /// One session of `session_requests` requests.
    async fn session(&mut self) -> Result<(), Stopped> {
        self.count(|s| s.surf.sessions += 1);
        let mut left = self.plan.session_requests;
        let mut held: Option<HeldPage> = None;
        let (mut host, mut target) = (0, self.plan.entry_target.clone());
        loop {
            left -= 1;
            match self.fetch(host, &target, true).await? {
                Fetched::Page(page) => {
                    self.count(|s| s.surf.pages += 1);
                    for embed in &page.embeds {
                        if left == 0 {
                            return Ok(());
                        }
                        let Some(h) = self.plan.host_of(&embed.authority) else {
                            self.count(|s| s.surf.external_links += 1);
                            continue;
                        };
                        left -= 1;
                        self.count(|s| s.surf.embeds += 1);
                        self.fetch(h, &embed.target, false).await?;
                    }
                    held = Some(page);
                }
                Fetched::Leaf if held.is_some() => self.count(|s| s.surf.leaves += 1),
                Fetched::Leaf | Fetched::Failed => return Ok(()),
            }
            let Some(page) = held.as_ref() else { return Ok(()) };
            if left == 0 {
                return Ok(());
            }
            if !self.think.is_none() {
                let pause = self.think.next_pause();
                self.wait_until(Instant::now() + pause).await?;
            }
            let mut chosen = None;
            for _ in 0..MAX_LINK_DRAWS.min(page.links.len()) {
                let link = &page.links[self.rng.random_range(0..page.links.len())];
                match self.plan.host_of(&link.authority) {
                    Some(h) => {
                        chosen = Some((h, link.target.clone()));
                        break;
                    }
                    None => self.count(|s| s.surf.external_links += 1),
                }
            }
            let Some(next) = chosen else { return Ok(()) };
            (host, target) = next;
        }
    }

    /// Wait until `when`; `Stopped` if the run ends first.
    async fn wait_until(&mut self, when: Instant) -> Result<(), Stopped> {
        let end = self.shared.timing.run_end.map_or(when, |e| e.min(when));
        self.timer.as_mut().reset(end.into());
        (&mut self.timer).await;
        if self.run_over(Instant::now()) { Err(Stopped) } else { Ok(()) }
    }

    /// GET `target` from allowed host `host`; `follow`: a page is parsed for its links.
    async fn fetch(&mut self, host: usize, target: &str, follow: bool) -> Result<Fetched, Stopped> {
        let now = Instant::now();
        if self.run_over(now) {
            return Err(Stopped);
        }
        let measured = now >= self.shared.timing.warmup_end;
        if measured && !self.shared.budget.take() {
            return Err(Stopped);
        }
        let site_path = site_path_of(target);
        self.capture.force = self.plan.site.as_ref().is_some_and(|s| s.is_page(&site_path));
        let mut retried = false;
        let (summary, sent_at) = loop {
            let reused = self.conns[host].served > 0;
            match self.exchange(host, target).await {
                Ok(done) => break done,
                Err(Fault::Stop) => {
                    self.count_outstanding(measured);
                    return Err(Stopped);
                }
                Err(Fault::Error(ErrorKind::Closed)) if reused && !retried => {
                    // An idle keep-alive connection the server closed: send again, once.
                    retried = true;
                    self.close(host);
                }
                Err(Fault::Error(kind)) => {
                    self.close(host);
                    if measured {
                        let mut stats = self.shared.stats.borrow_mut();
                        stats.errors.add(kind, 1);
                        stats.accounting.sent += 1;
                        stats.count_failure(kind, 1);
                        self.shared.live.add_errors(1);
                    }
                    if kind == ErrorKind::Connect {
                        // Do not spin on a server that refuses connections.
                        self.wait_until(Instant::now() + Duration::from_millis(10)).await?;
                    }
                    return Ok(Fetched::Failed);
                }
            }
        };
        let conn = &mut self.conns[host];
        conn.served += 1;
        if !summary.keep_alive || !self.shared.settings.keepalive {
            self.close(host);
        } else if conn.reader.buffered() > 0 {
            // Bytes that answer no request: the server is out of step.
            self.close(host);
            self.count(|s| s.errors.add(ErrorKind::Framing, 1));
        }
        self.account(host, target, &summary, measured.then_some(sent_at));
        self.verify(host, target, &site_path, &summary);
        let page = summary.status == 200
            && follow
            && (self.capture.html || self.capture.force)
            && !self.capture.overflow;
        Ok(if page { self.hold(host, target) } else { Fetched::Leaf })
    }

    /// Send the request on `host`'s connection (opening it if needed) and read the answer.
    async fn exchange(&mut self, host: usize, target: &str) -> Result<(ResponseSummary, Instant), Fault> {
        self.written_at = None;
        if self.conns[host].stream.is_none() {
            self.connect(host).await?;
        }
        self.wbuf.clear();
        self.wbuf.extend_from_slice(b"GET ");
        self.wbuf.extend_from_slice(target.as_bytes());
        self.wbuf.extend_from_slice(b" HTTP/1.1\r\n");
        self.wbuf.extend_from_slice(&self.plan.hosts[host].head_tail);
        let sent_at = Instant::now();
        self.written_at = Some(sent_at);
        self.arm(sent_at);
        let Some(stream) = self.conns[host].stream.as_mut() else {
            return Err(Fault::Error(ErrorKind::Closed));
        };
        let written = tokio::select! {
            biased;
            r = stream.write_all(&self.wbuf) => Some(r),
            () = &mut self.timer => None,
        };
        match written {
            Some(Ok(())) => {}
            Some(Err(_)) => return Err(Fault::Error(ErrorKind::Closed)),
            None => return Err(self.expired()),
        }
        // Read the answer into the capture (the timer is armed for it).
        let conn = &mut self.conns[host];
        let capture = &mut self.capture;
        let timeout_at = sent_at + self.shared.settings.timeout;
        let summary = read_response(
            conn.stream.as_mut(),
            &mut conn.reader,
            self.timer.as_mut(),
            timeout_at,
            self.shared.timing.run_end,
            |r| r.poll_response_capturing(false, true, capture),
        )
        .await?;
        Ok((summary, sent_at))
    }

    /// Set the timer to the request's deadline (its timeout, or the run's end).
    fn arm(&mut self, from: Instant) {
        let timeout_at = from + self.shared.settings.timeout;
        let deadline = self.shared.timing.run_end.map_or(timeout_at, |e| e.min(timeout_at));
        self.timer.as_mut().reset(deadline.into());
    }

    /// The timer fired: the run ended, or the request timed out.
    fn expired(&self) -> Fault {
        if self.run_over(Instant::now()) { Fault::Stop } else { Fault::Error(ErrorKind::Timeout) }
    }

    async fn connect(&mut self, host: usize) -> Result<(), Fault> {
        let addr = self.plan.hosts[host].addr;
        let (timeout, run_end) = (self.shared.settings.timeout, self.shared.timing.run_end);
        let stream = connect_within(addr, self.timer.as_mut(), timeout, run_end).await?;
        let conn = &mut self.conns[host];
        conn.stream = Some(stream);
        conn.served = 0;
        conn.reader.reset();
        let measured = self.measured();
        let mut stats = self.shared.stats.borrow_mut();
        stats.connections += 1;
        stats.surf.connections += u64::from(measured);
        Ok(())
    }

    fn close(&mut self, host: usize) {
        let conn = &mut self.conns[host];
        conn.stream = None;
        conn.reader.reset();
        conn.served = 0;
    }

    /// The window ended during an exchange: a measured request written is outstanding, its
    /// latency censored at the window's end.
    fn count_outstanding(&self, measured: bool) {
        let Some(sent_at) = self.written_at.filter(|_| measured) else { return };
        let end = self.shared.timing.run_end.unwrap_or_else(Instant::now);
        let waited = end.saturating_duration_since(sent_at).as_micros();
        let mut stats = self.shared.stats.borrow_mut();
        stats.accounting.sent += 1;
        stats.count_outstanding(u64::try_from(waited).unwrap_or(u64::MAX));
    }

    /// Count a response (`sent_at`: a measured request sent then).
    fn account(&self, host: usize, target: &str, summary: &ResponseSummary, sent_at: Option<Instant>) {
        let Some(sent_at) = sent_at else { return };
        let now = Instant::now();
        let mut stats = self.shared.stats.borrow_mut();
        stats.surf.count_server(&self.plan.hosts[host].authority);
        if self.capture.replica || target.starts_with(MIGRATE_PREFIX) {
            stats.surf.replica_responses += 1;
        }
        stats.accounting.sent += 1;
        count_response(&mut stats, &self.shared.live, summary, sent_at, now);
    }

    /// Check a response against the site's originals (warm-up included).
    fn verify(&self, host: usize, target: &str, site_path: &str, summary: &ResponseSummary) {
        let Some(site) = &self.plan.site else { return };
        let failure = match site.check_for(site_path) {
            SiteCheck::Page(_) if summary.status != 200 => {
                Some((MismatchKind::Status, "200".to_string(), summary.status.to_string()))
            }
            SiteCheck::Page(original) if self.capture.overflow => Some((
                MismatchKind::Length,
                format!("a page of {} bytes (before rewriting)", original.len()),
                format!("more than {MAX_PAGE_BYTES} bytes"),
            )),
            SiteCheck::Page(original) => original.check(&self.capture.body).err().map(|m| {
                let expected = format!("{site_path} ({} bytes) after undoing the rewrite", original.len());
                (MismatchKind::Rewrite, expected, m.to_string())
            }),
            SiteCheck::Plain(expectation) => expectation.check(false, summary),
        };
        let mut stats = self.shared.stats.borrow_mut();
        stats.verified += 1;
        if let Some((kind, expected, actual)) = failure {
            stats.mismatches.add(kind);
            if stats.mismatch_samples.len() < self.shared.settings.max_samples {
                let request = format!("GET http://{}{target}", self.plan.hosts[host].authority);
                stats.mismatch_samples.push(Mismatch { request, kind, expected, actual });
            }
        }
    }

    /// The page just received (in the capture), parsed: its links and its embeds (each URL
    /// once), resolved against its BASE or its URL.
    fn hold(&self, host: usize, target: &str) -> Fetched {
        let Ok(links) = scan_page(&self.capture.body) else { return Fetched::Leaf };
        let base = links.base.as_ref().map(|b| b.value.as_str());
        let url = PageUrl::of_page(&self.plan.hosts[host].authority, target, base);
        let mut page = HeldPage { links: Vec::new(), embeds: Vec::new() };
        for slot in &links.slots {
            let Some(to) = url.resolve(&slot.value) else { continue };
            match slot.kind {
                SlotKind::Link => page.links.push(to),
                SlotKind::Embed if !page.embeds.contains(&to) => page.embeds.push(to),
                SlotKind::Embed => {}
            }
        }
        Fetched::Page(page)
    }
}
