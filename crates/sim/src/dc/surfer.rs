//! The peer study's closed-loop client: a surfer session starts at the entry page on the
//! home, fetches the embeds of each page from the servers the rewritten page names, then
//! follows a random link of the page as rewritten; at a leaf (image, download) it goes back to
//! the last page it holds without refetching it; after a fixed number of requests a new
//! session starts. No think time.

use locus_dc::ServerId;
use locus_dc::doc_graph::DocId;
use locus_dc::html_links::SlotKind;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::dc::server::HOME;
use crate::dc::site::DcSite;

/// What a request is for: a page or file reached by a link (or the entry), or a page's embed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    Navigate,
    Embed,
}

/// The next request a surfer makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Next {
    pub server: ServerId,
    pub doc: DocId,
    pub purpose: Purpose,
}

/// A page as the surfer received it: which server each slot names.
#[derive(Clone, Debug)]
struct HeldPage {
    page: DocId,
    chosen: Vec<ServerId>,
}

/// One client.
#[derive(Clone, Debug)]
pub struct Surfer {
    session_requests: u32,
    left: u32,
    held: Option<HeldPage>,
    embeds: Vec<(ServerId, DocId)>,
    rng: SmallRng,
    pub sessions: u64,
}

impl Surfer {
    pub fn new(session_requests: u32, seed: u64) -> Surfer {
        Surfer {
            session_requests: session_requests.max(1),
            left: 0,
            held: None,
            embeds: Vec::new(),
            rng: SmallRng::seed_from_u64(seed),
            sessions: 0,
        }
    }

    /// A new session: the entry page on the home.
    pub fn start(&mut self, site: &DcSite) -> Next {
        self.sessions += 1;
        self.left = self.session_requests;
        self.held = None;
        self.embeds.clear();
        Next { server: HOME, doc: site.entry, purpose: Purpose::Navigate }
    }

    /// The response to `doc` arrived (`chosen`: the servers its rewritten slots name, for a
    /// page); the next request.
    pub fn on_response(
        &mut self,
        site: &DcSite,
        doc: DocId,
        purpose: Purpose,
        chosen: Vec<ServerId>,
    ) -> Next {
        let page = site.doc(doc);
        if purpose == Purpose::Navigate && page.is_page && chosen.len() == page.slots.len() {
            self.embeds.clear();
            for (&(target, kind), &server) in page.slots.iter().zip(&chosen).rev() {
                if kind == SlotKind::Embed && !self.embeds.iter().any(|&(_, d)| d == target) {
                    self.embeds.push((server, target));
                }
            }
            self.held = Some(HeldPage { page: doc, chosen });
        }
        self.left = self.left.saturating_sub(1);
        if self.left == 0 {
            return self.start(site);
        }
        if let Some((server, doc)) = self.embeds.pop() {
            return Next { server, doc, purpose: Purpose::Embed };
        }
        self.follow_link(site).unwrap_or_else(|| self.start(site))
    }

    /// A random link slot of the held page, to the server the page named for it.
    fn follow_link(&mut self, site: &DcSite) -> Option<Next> {
        let held = self.held.as_ref()?;
        let slots = &site.doc(held.page).slots;
        let links = slots.iter().filter(|(_, k)| *k == SlotKind::Link).count();
        if links == 0 {
            return None;
        }
        let pick = self.rng.random_range(0..links);
        let (index, &(doc, _)) =
            slots.iter().enumerate().filter(|(_, (_, k))| *k == SlotKind::Link).nth(pick)?;
        Some(Next { server: held.chosen[index], doc, purpose: Purpose::Navigate })
    }
}
