//! One simulated DC-Apache server of the peer mode: its CPU, disk and NIC queues, its 64 MB
//! page cache, and its `locus_dc` state — load meter and table, replica maps, selector,
//! replica store and (on a home) the balancer — plus the choice of a server for every link
//! slot of a page it serves, exactly as the live server's content handler makes it.

use locus_cache::{DocCache, Replacement};
use locus_dc::ServerId;
use locus_dc::balancer::Balancer;
use locus_dc::doc_graph::DocId;
use locus_dc::load_table::{LoadMeter, LoadTable};
use locus_dc::replica_map::ClusterMaps;
use locus_dc::replica_store::ReplicaStore;
use locus_dc::selector::Selector;

use crate::cost_model::CostModel;
use crate::dc::peer::DcPeerConfig;
use crate::dc::site::DcSite;
use crate::error::SimError;
use crate::network::NodeLink;
use crate::queues::{CpuQueue, DiskQueue};

/// The home of every document in the peer study (all documents start on one home).
pub const HOME: ServerId = ServerId(0);

/// A server's queues, caches and DC state.
pub struct DcServer {
    pub id: ServerId,
    pub cpu: CpuQueue,
    pub disk: DiskQueue,
    pub link: NodeLink,
    /// Files in memory (originals on the home, copies on a co-op), keyed by document id.
    pub page_cache: DocCache<u32, ()>,
    pub meter: LoadMeter,
    /// Connections accepted since the last meter tick.
    pub connections: u64,
    pub table: LoadTable,
    pub maps: ClusterMaps,
    pub selector: Selector,
    pub store: ReplicaStore<()>,
    pub balancer: Option<Balancer>,
}

impl DcServer {
    /// Server `id` of `servers`; `balancer` only on a home that has documents.
    pub fn new(id: ServerId, config: &DcPeerConfig) -> Result<DcServer, SimError> {
        let peers = (0..config.servers).map(ServerId).filter(|&s| s != id);
        let balancer = match id == HOME {
            true => Some(
                Balancer::new(id, config.balancer_config(), 0)
                    .map_err(|e| SimError::Config(e.to_string()))?,
            ),
            false => None,
        };
        let cache = config.page_cache_bytes;
        Ok(DcServer {
            id,
            cpu: CpuQueue::default(),
            disk: DiskQueue::default(),
            link: NodeLink::new(&config.link),
            page_cache: DocCache::new(cache, cache, Replacement::Lru),
            meter: LoadMeter::new(LoadMeter::DEFAULT_ALPHA, 0)
                .map_err(|e| SimError::Config(e.to_string()))?,
            connections: 0,
            table: LoadTable::new(peers),
            maps: ClusterMaps::new(id, 1, (0..config.servers).map(ServerId)),
            selector: Selector::new(config.selector_config(), config.seed ^ (u64::from(id.0) << 32) ^ 0x5eed),
            store: ReplicaStore::new(config.store_quota()),
            balancer,
        })
    }

    /// This server's load as it reports it (connections per second, EWMA).
    pub fn load(&self) -> f64 {
        self.meter.load()
    }

    /// Read `doc` through the page cache: the time the bytes are in memory.
    pub fn read(&mut self, now: u64, doc: DocId, size: u64, costs: &CostModel) -> u64 {
        if self.page_cache.touch(&doc.0).is_some() {
            return now;
        }
        let done = self.disk.submit_read(now, size, costs);
        self.page_cache.insert(doc.0, (), size, 1.0);
        done
    }

    /// The server chosen for each slot of `page` as this server renders it now: a target whose
    /// set is the home alone stays verbatim (it resolves to the home), any other goes through
    /// the selector with this server's replica maps and load table.
    pub fn choose_slots(&mut self, site: &DcSite, page: DocId, now: u64) -> Vec<ServerId> {
        let own = self.load();
        let Some(map) = self.maps.get(HOME) else { return Vec::new() };
        let slots = &site.doc(page).slots;
        let mut chosen = Vec::with_capacity(slots.len());
        for &(target, _) in slots {
            let set = map.servers(&site.doc(target).path);
            let server = match set {
                [only] if *only == HOME => HOME,
                _ => self.selector.choose(set, &self.table, self.id, own, now).unwrap_or(HOME),
            };
            chosen.push(server);
        }
        chosen
    }

    #[cfg(test)]
    /// The bytes this server would send for `page` with `chosen` servers per slot: the
    /// rewritten links and, on a co-op, the BASE naming the home copy.
    pub fn render_page(
        &self,
        site: &DcSite,
        page: DocId,
        html: &[u8],
        chosen: &[ServerId],
    ) -> Option<Vec<u8>> {
        let plan = &site.graph.plan(page)?.plan;
        let map = self.maps.get(HOME)?;
        use locus_dc::rewrite::SlotChoice;
        let choices: Vec<SlotChoice> = (plan.slots().iter().zip(chosen))
            .map(|(slot, &server)| match map.servers(&slot.target_path) {
                [only] if *only == HOME => SlotChoice::Verbatim,
                _ => slot_choice(site, &slot.target_path, &slot.suffix, server),
            })
            .collect();
        let base = if self.id == HOME {
            None
        } else {
            plan.base_for_copy(&crate::dc::site::server_authority(HOME.0))
        };
        plan.render_to_vec(html, &choices, base.as_deref()).ok()
    }
}

#[cfg(test)]
/// The URL a slot gets for `server`: verbatim for the home when it is the only server, the
/// original URL for the home otherwise, a replica URL for a co-op.
fn slot_choice(site: &DcSite, path: &str, suffix: &str, server: ServerId) -> locus_dc::rewrite::SlotChoice {
    use crate::dc::site::server_authority;
    use locus_dc::rewrite::SlotChoice;
    let Some(id) = site.graph.id(path) else { return SlotChoice::Verbatim };
    let url = if server == HOME {
        locus_dc::replica_url::original_url(&server_authority(HOME.0), path)
    } else {
        let home_name = format!("s{}", HOME.0);
        locus_dc::replica_url::replica_url(
            &server_authority(server.0),
            site.doc(id).version,
            &home_name,
            path,
        )
    };
    SlotChoice::Url(url + suffix)
}
