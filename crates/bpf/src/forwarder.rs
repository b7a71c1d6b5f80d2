//! `Forwarder`: loads the embedded tc program with aya, adopts or pins its maps, attaches it to
//! clsact ingress (direct-action) of the switch's interface, and gives the switch `&self` methods
//! over the maps — handoff entries (hold, forward, repoint, remove, expire), l4 configuration
//! (nodes, services, selection table), counters, and frame test runs (`BPF_PROG_TEST_RUN`).

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use aya::maps::{Map, MapData};
use aya::programs::tc::{NlOptions, SchedClassifierLink, TcAttachOptions, TcError, TcHandle};
use aya::programs::{ProgramError, SchedClassifier, TcAttachType, TestRun, TestRunOptions};
use aya::{Ebpf, EbpfLoader};
use serde::Serialize;

use crate::error::{ForwarderError, Result};
use crate::maps::*;
use crate::net::{MacAddr, interface, interface_by_index, peer_in_other_namespace};
use crate::sys::{self, Netns};

/// The compiled program (see `build.rs`).
static OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/forward.o"));

/// Priority of the forwarder's tc filter on clsact ingress (its handle is 1). A later attach
/// replaces a filter at this spot in place, so a restarted switch takes over without a gap.
pub const TC_PRIORITY: u16 = 0x4c;
const TC_HANDLE: TcHandle = TcHandle::new(0, 1);

/// How to load the forwarder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForwarderOptions {
    /// A directory on a bpf filesystem to pin the maps in. Maps already pinned there are adopted
    /// instead of created, so entries survive a restart of the switch process. A pinned map the
    /// switch fills afresh anyway (everything but the connections) whose shape an older program
    /// laid out differently is replaced by a fresh one (`Forwarder::replaced_pins`); a
    /// connection map of another shape is refused.
    pub pin_dir: Option<PathBuf>,
    /// Capacity of the connection map (ignored for an adopted map, which keeps its own).
    pub max_entries: u32,
    /// Source MAC of forwarded frames; by default the MAC of the node's egress interface.
    pub switch_mac: Option<MacAddr>,
    /// When a node's egress interface is a veth (or netkit) whose peer is in another network
    /// namespace — a container's or a lab host's uplink — hand its frames straight to the
    /// peer's ingress ([`FLAG_PEER`], `bpf_redirect_peer`) instead of transmitting them out of
    /// the interface: the same frame on the same wire, without the interface's transmit path
    /// and a second pass through the CPU's backlog queue. `false` always transmits. Deciding
    /// asks the kernel about the interface, which must then exist.
    pub peer_redirect: bool,
}

impl Default for ForwarderOptions {
    fn default() -> Self {
        ForwarderOptions {
            pin_dir: None,
            max_entries: DEFAULT_MAX_ENTRIES,
            switch_mac: None,
            peer_redirect: true,
        }
    }
}

/// How frames leave through one egress interface: the source MAC they get and whether they go
/// into the interface's peer (`FLAG_PEER`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Egress {
    switch_mac: MacAddr,
    into_peer: bool,
}

impl Egress {
    fn flags(self) -> u8 {
        if self.into_peer { FLAG_PEER } else { 0 }
    }
}

/// Where a node is reached: its MAC and the switch's interface to send its frames out of (on a
/// one-armed switch, the interface the forwarder is attached to).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NodeSlot {
    /// The node's MAC on the switch's LAN.
    pub mac: MacAddr,
    /// The switch's egress interface index.
    pub ifindex: u32,
}

/// How the l4 path picks a table slot for a new connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SelectionMode {
    /// A per-CPU index rotating through the table: round robin, weighted round robin with a
    /// weighted table, least connections with a table rewritten from connection counts.
    #[default]
    RoundRobin,
    /// `ConnKey::flow_hash` modulo the table length: the same 4-tuple always takes the same slot.
    Hash,
}

/// The program's counters, summed over CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// Unfragmented IPv4/TCP packets looked up.
    pub handled: u64,
    /// Packets redirected to a node.
    pub forwarded: u64,
    /// Packets dropped because their entry is on hold.
    pub held: u64,
    /// Packets dropped for another reason (l4: no node in the table, full connection map).
    pub dropped: u64,
    /// Pure SYNs on a handoff entry (port reuse): entry deleted, SYN passed on.
    pub syn_resets: u64,
    /// Entries created by the l4 path.
    pub l4_new: u64,
}

/// What the program returned for a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// `TC_ACT_OK`: on to the switch's stack.
    Pass,
    /// `TC_ACT_SHOT`: dropped.
    Drop,
    /// `TC_ACT_REDIRECT`: sent out of an interface.
    Redirect,
    /// Anything else.
    Other(u32),
}

impl Verdict {
    fn from_raw(code: u32) -> Verdict {
        match code {
            0 => Verdict::Pass,
            2 => Verdict::Drop,
            7 => Verdict::Redirect,
            other => Verdict::Other(other),
        }
    }
}

/// The outcome of `Forwarder::run_frame`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameRun {
    /// The program's return code.
    pub verdict: Verdict,
    /// The frame as the program left it.
    pub frame: Vec<u8>,
}

/// Where the program is attached.
struct Attachment {
    iface: String,
    ifindex: u32,
    link: SchedClassifierLink,
}

/// The file descriptors of the maps.
struct Maps {
    conns: MapData,
    nodes: MapData,
    services: MapData,
    selection: MapData,
    config: MapData,
    rr_cursor: MapData,
    stats: MapData,
}

/// The loaded forwarder: program, maps and (after `attach`) the tc filter. Every method takes
/// `&self`; map writes are single `bpf(2)` commands, so it can be shared between threads.
pub struct Forwarder {
    // Field order is drop order: the attachment is removed in `Drop::drop` before these go.
    attachment: Option<Attachment>,
    maps: Maps,
    ebpf: Ebpf,
    netns: Netns,
    pin_dir: Option<PathBuf>,
    adopted: bool,
    replaced_pins: Vec<&'static str>,
    capacity: u32,
    switch_mac: Option<MacAddr>,
    peer_redirect: bool,
    egress: Mutex<HashMap<u32, Egress>>,
}

fn map_error(op: &'static str, map: &'static str) -> impl FnOnce(std::io::Error) -> ForwarderError {
    move |source| ForwarderError::Map { op, map, error: source }
}

fn take_map(ebpf: &mut Ebpf, name: &'static str) -> Result<MapData> {
    let map = ebpf.take_map(name).ok_or_else(|| ForwarderError::Invalid {
        what: "the embedded BPF object",
        detail: format!("has no map `{name}`"),
    })?;
    match map {
        Map::HashMap(m) | Map::Array(m) | Map::PerCpuArray(m) => Ok(m),
        other => Err(ForwarderError::Invalid {
            what: "the embedded BPF object",
            detail: format!("map `{name}` has an unexpected type: {other:?}"),
        }),
    }
}

impl Forwarder {
    /// Load the program and its maps without attaching them (for test runs, or to fill the maps
    /// before `attach_loaded`). With `pin_dir`, maps pinned there are adopted (and checked), the
    /// others created and pinned.
    pub fn load(options: ForwarderOptions) -> Result<Forwarder> {
        let netns = Netns::current().map_err(ForwarderError::Namespace)?;
        let mut adopted = false;
        let mut replaced_pins = Vec::new();
        if let Some(dir) = &options.pin_dir {
            prepare_pin_dir(dir)?;
            replaced_pins = unpin_stale_refilled_maps(dir)?;
            adopted = ALL_MAPS.iter().any(|m| dir.join(m).exists());
        }
        if options.max_entries == 0 {
            return Err(ForwarderError::Invalid { what: "max_entries", detail: "must be at least 1".into() });
        }
        let mut loader = EbpfLoader::new();
        loader.btf(None).map_max_entries(CONNS, options.max_entries);
        if let Some(dir) = &options.pin_dir {
            for name in ALL_MAPS {
                loader.map_pin_path(name, dir.join(name));
            }
        }
        let mut ebpf = loader.load(OBJECT).map_err(ForwarderError::Load)?;
        let mut capacity = options.max_entries;
        if let Some(dir) = &options.pin_dir {
            capacity = check_shapes(&ebpf, dir)?;
        }
        let program: &mut SchedClassifier = program_mut(&mut ebpf)?;
        program.load().map_err(ForwarderError::Verify)?;
        let maps = Maps {
            conns: take_map(&mut ebpf, CONNS)?,
            nodes: take_map(&mut ebpf, NODES)?,
            services: take_map(&mut ebpf, SERVICES)?,
            selection: take_map(&mut ebpf, SELECTION)?,
            config: take_map(&mut ebpf, CONFIG)?,
            rr_cursor: take_map(&mut ebpf, RR_CURSOR)?,
            stats: take_map(&mut ebpf, STATS)?,
        };
        Ok(Forwarder {
            attachment: None,
            maps,
            ebpf,
            netns,
            pin_dir: options.pin_dir,
            adopted,
            replaced_pins,
            capacity,
            switch_mac: options.switch_mac,
            peer_redirect: options.peer_redirect,
            egress: Mutex::new(HashMap::new()),
        })
    }

    /// Load the program and attach it to clsact ingress of `iface` (direct-action), adding the
    /// clsact qdisc if the interface has none. Call it on a thread inside the switch's network
    /// namespace; the namespace is remembered, so later calls and `Drop` work from any thread.
    pub fn attach(iface: &str, options: ForwarderOptions) -> Result<Forwarder> {
        let mut forwarder = Forwarder::load(options)?;
        forwarder.attach_loaded(iface)?;
        Ok(forwarder)
    }

    /// Attach a loaded forwarder to clsact ingress of `iface` in the namespace it was loaded in.
    /// A filter left at the forwarder's spot ([`TC_PRIORITY`], handle 1) by an earlier switch
    /// process is replaced in place.
    pub fn attach_loaded(&mut self, iface: &str) -> Result<()> {
        if self.attachment.is_some() {
            return Err(ForwarderError::Invalid {
                what: "attach",
                detail: "the forwarder is already attached".into(),
            });
        }
        let _inside = self.netns.enter().map_err(ForwarderError::Namespace)?;
        let ifindex = interface(iface)?.index;
        let created_qdisc = match aya::programs::tc::qdisc_add_clsact(iface) {
            Ok(()) => true,
            Err(TcError::NetlinkError(e)) if e.raw_os_error() == Some(libc::EEXIST) => false,
            Err(source) => return Err(ForwarderError::Qdisc { iface: iface.to_string(), error: source }),
        };
        match attach_filter(&mut self.ebpf, iface) {
            Ok(link) => {
                self.attachment = Some(Attachment { iface: iface.to_string(), ifindex, link });
                Ok(())
            }
            Err(e) => {
                if created_qdisc {
                    let _ = sys::delete_clsact(ifindex);
                }
                Err(e)
            }
        }
    }

    /// The interface the program is attached to.
    pub fn interface(&self) -> Option<&str> {
        self.attachment.as_ref().map(|a| a.iface.as_str())
    }

    /// The index of the interface the program is attached to (in the forwarder's namespace).
    pub fn interface_index(&self) -> Option<u32> {
        self.attachment.as_ref().map(|a| a.ifindex)
    }

    /// Whether the maps were adopted from pins left by an earlier forwarder.
    pub fn adopted(&self) -> bool {
        self.adopted
    }

    /// The maps whose pins had another shape (left by a switch whose program laid them out
    /// differently) and were replaced by fresh, empty ones; see [`ForwarderOptions::pin_dir`].
    pub fn replaced_pins(&self) -> &[&'static str] {
        &self.replaced_pins
    }

    /// Capacity of the connection map.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// The pin directory.
    pub fn pin_dir(&self) -> Option<&Path> {
        self.pin_dir.as_deref()
    }

    fn fd(map: &MapData) -> BorrowedFd<'_> {
        map.fd().as_fd()
    }

    /// How frames leave through `ifindex` (looked up once per interface).
    fn egress(&self, ifindex: u32) -> Result<Egress> {
        let mut cache = self.egress.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(egress) = cache.get(&ifindex) {
            return Ok(*egress);
        }
        let egress = {
            // The kernel is asked only what the options leave open.
            let _inside = if self.switch_mac.is_none() || self.peer_redirect {
                Some(self.netns.enter().map_err(ForwarderError::Namespace)?)
            } else {
                None
            };
            let switch_mac = match self.switch_mac {
                Some(mac) => mac,
                None => interface_by_index(ifindex)?.mac,
            };
            Egress { switch_mac, into_peer: self.peer_redirect && peer_in_other_namespace(ifindex)? }
        };
        cache.insert(ifindex, egress);
        Ok(egress)
    }

    /// Whether frames for nodes behind `ifindex` go straight into the interface's peer
    /// (`ForwarderOptions::peer_redirect`).
    pub fn redirects_into_peer(&self, ifindex: u32) -> Result<bool> {
        Ok(self.egress(ifindex)?.into_peer)
    }

    fn entry_for(&self, node: NodeSlot, action: Action) -> Result<ConnEntry> {
        if node.ifindex == 0 {
            return Err(ForwarderError::Invalid {
                what: "node slot",
                detail: "ifindex 0 is no interface".into(),
            });
        }
        let egress = self.egress(node.ifindex)?;
        Ok(ConnEntry {
            node_mac: node.mac,
            switch_mac: egress.switch_mac,
            ifindex: node.ifindex,
            action: action as u8,
            flags: egress.flags(),
            node: NODE_NONE,
            reserved: 0,
            last_seen_ns: sys::monotonic_ns(),
            packets: 0,
            bytes: 0,
        })
    }

    fn write_entry(&self, key: ConnKey, entry: &ConnEntry, flags: u64) -> Result<()> {
        sys::map_update(Self::fd(&self.maps.conns), key.as_bytes(), entry.as_bytes(), flags).map_err(|e| {
            if e.raw_os_error() == Some(libc::ENOENT) {
                ForwarderError::NoEntry(key)
            } else {
                map_error("update", CONNS)(e)
            }
        })
    }

    /// Make (or overwrite) the entry of `key` in the hold state, pointing at `node`: the client's
    /// packets are dropped until `forward`. Call it before the holder dumps the connection.
    pub fn hold(&self, key: ConnKey, node: NodeSlot) -> Result<()> {
        let entry = self.entry_for(node, Action::Hold)?;
        self.write_entry(key, &entry, sys::BPF_ANY)
    }

    /// Flip the entry of `key` to forward (after the node has restored the socket, before it may
    /// write). Fails with `NoEntry` if the entry is gone (e.g. a SYN reset it: abort the handoff).
    pub fn forward(&self, key: ConnKey) -> Result<()> {
        let mut entry = self.get(key)?.ok_or(ForwarderError::NoEntry(key))?;
        entry.action = Action::Forward as u8;
        entry.last_seen_ns = sys::monotonic_ns();
        self.write_entry(key, &entry, sys::BPF_EXIST)
    }

    /// Point the existing entry of `key` at another node and forward to it (re-handoff, or a
    /// node cloning an l4 connection to another node).
    pub fn repoint(&self, key: ConnKey, node: NodeSlot) -> Result<()> {
        let old = self.get(key)?.ok_or(ForwarderError::NoEntry(key))?;
        let mut entry = self.entry_for(node, Action::Forward)?;
        entry.flags |= old.flags & FLAG_L4;
        entry.packets = old.packets;
        entry.bytes = old.bytes;
        self.write_entry(key, &entry, sys::BPF_EXIST)
    }

    /// Delete the entry of `key`; whether there was one.
    pub fn remove(&self, key: ConnKey) -> Result<bool> {
        sys::map_delete(Self::fd(&self.maps.conns), key.as_bytes()).map_err(map_error("delete", CONNS))
    }

    /// The entry of `key`.
    pub fn get(&self, key: ConnKey) -> Result<Option<ConnEntry>> {
        let mut value = [0u8; size_of::<ConnEntry>()];
        let found = sys::map_lookup(Self::fd(&self.maps.conns), key.as_bytes(), &mut value)
            .map_err(map_error("lookup", CONNS))?;
        Ok(found.then(|| ConnEntry::from_bytes(&value)))
    }

    /// Every key of a map (a snapshot).
    fn keys<K: Plain>(&self, map: &MapData, name: &'static str) -> Result<Vec<K>> {
        let fd = Self::fd(map);
        let mut keys: Vec<K> = Vec::new();
        let mut buf = vec![0u8; size_of::<K>()];
        loop {
            let prev = keys.last().map(|k| k.as_bytes());
            if !sys::map_next_key(fd, prev, &mut buf).map_err(map_error("iterate", name))? {
                return Ok(keys);
            }
            keys.push(K::from_bytes(&buf));
            if keys.len() > self.capacity as usize + MAX_SERVICES {
                // A key deleted under the iteration restarts it from the first key; give up
                // rather than loop while the map churns.
                return Ok(keys);
            }
        }
    }

    /// Every entry (a snapshot; entries change under it).
    pub fn entries(&self) -> Result<Vec<(ConnKey, ConnEntry)>> {
        let mut out = Vec::new();
        for key in self.keys::<ConnKey>(&self.maps.conns, CONNS)? {
            if let Some(entry) = self.get(key)? {
                out.push((key, entry));
            }
        }
        Ok(out)
    }

    /// Delete the entries no packet has matched (and user space has not written) for `idle` —
    /// closed connections never reported, l4 connections, holds whose handoff never finished;
    /// returns how many. Call it periodically. An entry refreshed between the scan and the
    /// delete can still go: choose `idle` well above the connections' quiet times.
    pub fn expire(&self, idle: Duration) -> Result<usize> {
        let now = sys::monotonic_ns();
        let idle = u64::try_from(idle.as_nanos()).unwrap_or(u64::MAX);
        let mut removed = 0;
        for key in self.keys::<ConnKey>(&self.maps.conns, CONNS)? {
            let Some(entry) = self.get(key)? else { continue };
            if now.saturating_sub(entry.last_seen_ns) > idle && self.remove(key)? {
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Fill the node slots the selection table refers to: slot `i` is `nodes[i]`; the other
    /// slots are emptied (a table slot pointing at an empty node slot drops the SYN).
    pub fn set_nodes(&self, nodes: &[NodeSlot]) -> Result<()> {
        if nodes.len() > MAX_NODES {
            return Err(ForwarderError::Invalid {
                what: "node slots",
                detail: format!("{} nodes; at most {MAX_NODES}", nodes.len()),
            });
        }
        let fd = Self::fd(&self.maps.nodes);
        for i in 0..MAX_NODES {
            let value = match nodes.get(i) {
                Some(n) => {
                    if n.ifindex == 0 {
                        return Err(ForwarderError::Invalid {
                            what: "node slots",
                            detail: format!("node {i} has ifindex 0"),
                        });
                    }
                    let egress = self.egress(n.ifindex)?;
                    NodeValue {
                        mac: n.mac,
                        switch_mac: egress.switch_mac,
                        ifindex: n.ifindex,
                        flags: u32::from(egress.flags()),
                    }
                }
                None => NodeValue::default(),
            };
            sys::map_update(fd, (i as u32).as_bytes(), value.as_bytes(), sys::BPF_ANY)
                .map_err(map_error("update", NODES))?;
        }
        Ok(())
    }

    /// The services the l4 path directs: a pure SYN to one of these (VIP, port) pairs with no
    /// entry gets a node from the selection table. Replaces the previous set; empty = handoff
    /// mode only.
    pub fn set_services(&self, services: &[(Ipv4Addr, u16)]) -> Result<()> {
        if services.len() > MAX_SERVICES {
            return Err(ForwarderError::Invalid {
                what: "services",
                detail: format!("{} services; at most {MAX_SERVICES}", services.len()),
            });
        }
        let fd = Self::fd(&self.maps.services);
        let wanted: Vec<ServiceKey> =
            services.iter().map(|&(vip, port)| ServiceKey::new(vip, port)).collect();
        for old in self.keys::<ServiceKey>(&self.maps.services, SERVICES)? {
            if !wanted.contains(&old) {
                sys::map_delete(fd, old.as_bytes()).map_err(map_error("delete", SERVICES))?;
            }
        }
        for key in &wanted {
            sys::map_update(fd, key.as_bytes(), 0u32.as_bytes(), sys::BPF_ANY)
                .map_err(map_error("update", SERVICES))?;
        }
        Ok(())
    }

    fn config(&self) -> Result<FwdConfig> {
        let mut value = [0u8; size_of::<FwdConfig>()];
        sys::map_lookup(Self::fd(&self.maps.config), 0u32.as_bytes(), &mut value)
            .map_err(map_error("lookup", CONFIG))?;
        Ok(FwdConfig::from_bytes(&value))
    }

    fn write_config(&self, config: FwdConfig) -> Result<()> {
        sys::map_update(Self::fd(&self.maps.config), 0u32.as_bytes(), config.as_bytes(), sys::BPF_ANY)
            .map_err(map_error("update", CONFIG))
    }

    /// Load the selection table (node slot per table slot, see [`crate::NodeTable`]). The program
    /// never reads a slot beyond the length it sees: a growing table is written before its new
    /// length, a shrinking one after. Each CPU's rotating index restarts at its CPU number, so
    /// the first connections spread over the nodes whichever CPUs they arrive on.
    pub fn set_selection(&self, table: &[u32]) -> Result<()> {
        if table.len() > MAX_SELECTION {
            return Err(ForwarderError::Invalid {
                what: "selection table",
                detail: format!("{} slots; at most {MAX_SELECTION}", table.len()),
            });
        }
        if let Some(bad) = table.iter().find(|&&n| n as usize >= MAX_NODES) {
            return Err(ForwarderError::Invalid {
                what: "selection table",
                detail: format!("node slot {bad}; slots are 0..{MAX_NODES}"),
            });
        }
        let mut config = self.config()?;
        let shrinking = (table.len() as u32) < config.selection_len;
        if shrinking {
            config.selection_len = table.len() as u32;
            self.write_config(config)?;
        }
        let fd = Self::fd(&self.maps.selection);
        for (i, node) in table.iter().enumerate() {
            sys::map_update(fd, (i as u32).as_bytes(), node.as_bytes(), sys::BPF_ANY)
                .map_err(map_error("update", SELECTION))?;
        }
        self.reset_cursors()?;
        if !shrinking {
            config.selection_len = table.len() as u32;
            self.write_config(config)?;
        }
        Ok(())
    }

    /// Choose how the l4 path indexes the selection table.
    pub fn set_selection_mode(&self, mode: SelectionMode) -> Result<()> {
        let mut config = self.config()?;
        config.selection_mode = match mode {
            SelectionMode::RoundRobin => SELECT_ROUND_ROBIN,
            SelectionMode::Hash => SELECT_HASH,
        };
        self.write_config(config)
    }

    fn possible_cpus() -> Result<usize> {
        aya::util::nr_cpus().map_err(|(path, e)| ForwarderError::Invalid {
            what: "possible CPUs (for the per-CPU maps)",
            detail: format!("read {path}: {e}"),
        })
    }

    fn reset_cursors(&self) -> Result<()> {
        let cpus = Self::possible_cpus()?;
        let mut value = vec![0u8; 8 * cpus];
        for cpu in 0..cpus {
            value[cpu * 8..cpu * 8 + 4].copy_from_slice(&(cpu as u32).to_ne_bytes());
        }
        sys::map_update(Self::fd(&self.maps.rr_cursor), 0u32.as_bytes(), &value, sys::BPF_ANY)
            .map_err(map_error("update", RR_CURSOR))
    }

    /// The counters, summed over CPUs.
    pub fn stats(&self) -> Result<Stats> {
        let cpus = Self::possible_cpus()?;
        let mut sums = [0u64; STAT_SLOTS];
        let mut value = vec![0u8; 8 * cpus];
        for (slot, sum) in sums.iter_mut().enumerate() {
            sys::map_lookup(Self::fd(&self.maps.stats), (slot as u32).as_bytes(), &mut value)
                .map_err(map_error("lookup", STATS))?;
            *sum = value.chunks_exact(8).map(|c| u64::from_ne_bytes(c.try_into().unwrap())).sum();
        }
        Ok(Stats {
            handled: sums[0],
            forwarded: sums[1],
            held: sums[2],
            dropped: sums[3],
            syn_resets: sums[4],
            l4_new: sums[5],
        })
    }

    /// Run one Ethernet frame through the program with `BPF_PROG_TEST_RUN` (nothing is sent; the
    /// maps are the live ones): the verdict and the frame as the program left it.
    pub fn run_frame(&self, frame: &[u8]) -> Result<FrameRun> {
        let program: &SchedClassifier = self
            .ebpf
            .program(PROGRAM)
            .ok_or_else(|| ForwarderError::Invalid {
                what: "the embedded BPF object",
                detail: format!("has no program `{PROGRAM}`"),
            })?
            .try_into()
            .map_err(ForwarderError::TestRun)?;
        let mut out = vec![0u8; frame.len() + 256];
        let result = program
            .test_run(TestRunOptions {
                data_in: Some(frame),
                data_out: Some(&mut out),
                ..TestRunOptions::new()
            })
            .map_err(ForwarderError::TestRun)?;
        out.truncate(result.data_size_out as usize);
        Ok(FrameRun { verdict: Verdict::from_raw(result.return_value), frame: out })
    }

    /// Remove the pin files (the maps live on until this forwarder is dropped): for a switch
    /// that shuts down for good.
    pub fn unpin(&self) -> Result<()> {
        let Some(dir) = &self.pin_dir else { return Ok(()) };
        for name in ALL_MAPS {
            let path = dir.join(name);
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(ForwarderError::PinDir { path, message: format!("remove pin: {e}") }),
            }
        }
        let _ = std::fs::remove_dir(dir);
        Ok(())
    }

    /// End this process's hold on the forwarder but leave the program attached and its maps
    /// pinned: packets keep being forwarded while the switch restarts, and the next `attach`
    /// with the same pin directory adopts the maps and replaces the program in place.
    pub fn keep_running(mut self) -> Result<()> {
        if self.pin_dir.is_none() {
            return Err(ForwarderError::NotPinned);
        }
        if let Some(attachment) = self.attachment.take() {
            // A netlink tc filter is not tied to a descriptor: forgetting the link (plain
            // numbers, no resources) keeps the filter, which holds its own program reference.
            std::mem::forget(attachment.link);
        }
        Ok(())
    }

    /// End this process's hold on the forwarder without touching the filter at its spot: a
    /// newer switch (a binary upgrade) has attached its own program there, in place, and
    /// serves with it; detaching would delete the newer switch's filter.
    pub fn leave_attached(mut self) {
        if let Some(attachment) = self.attachment.take() {
            // As in `keep_running`: forgetting the link keeps the filter.
            std::mem::forget(attachment.link);
        }
    }

    fn detach(&mut self) -> Result<()> {
        let Some(attachment) = self.attachment.take() else { return Ok(()) };
        let _inside = self.netns.enter().map_err(ForwarderError::Namespace)?;
        let Attachment { iface, ifindex, link } = attachment;
        drop(link); // deletes the tc filter
        // Remove the clsact qdisc when nothing else is attached to it any more.
        let ingress = sys::clsact_filters(ifindex, sys::CLSACT_INGRESS);
        let egress = sys::clsact_filters(ifindex, sys::CLSACT_EGRESS);
        if let (Ok(0), Ok(0)) = (ingress, egress) {
            sys::delete_clsact(ifindex)
                .map_err(|e| ForwarderError::Qdisc { iface: iface.clone(), error: TcError::IoError(e) })?;
        }
        Ok(())
    }
}

impl Drop for Forwarder {
    /// Detach the program (and remove a clsact qdisc left empty). Pinned maps stay pinned.
    fn drop(&mut self) {
        let _ = self.detach();
    }
}

/// Attach the program at the forwarder's spot of clsact ingress of `iface` (calling thread's
/// namespace), replacing a filter an earlier process left there.
fn attach_filter(ebpf: &mut Ebpf, iface: &str) -> Result<SchedClassifierLink> {
    let attach_error = |source| ForwarderError::Attach { iface: iface.to_string(), error: source };
    let program = program_mut(ebpf)?;
    let options = NlOptions { priority: TC_PRIORITY, handle: TC_HANDLE, classid: None };
    let link_id =
        match program.attach_with_options(iface, TcAttachType::Ingress, TcAttachOptions::Netlink(options)) {
            Ok(id) => id,
            Err(ProgramError::TcError(TcError::NetlinkError(e)))
                if e.raw_os_error() == Some(libc::EEXIST) =>
            {
                let old =
                    SchedClassifierLink::attached(iface, TcAttachType::Ingress, TC_PRIORITY, TC_HANDLE, None)
                        .map_err(|e| attach_error(ProgramError::IOError(e)))?;
                program.attach_to_link(old).map_err(attach_error)?
            }
            Err(e) => return Err(attach_error(e)),
        };
    program.take_link(link_id).map_err(attach_error)
}

fn program_mut(ebpf: &mut Ebpf) -> Result<&mut SchedClassifier> {
    ebpf.program_mut(PROGRAM)
        .ok_or_else(|| ForwarderError::Invalid {
            what: "the embedded BPF object",
            detail: format!("has no program `{PROGRAM}`"),
        })?
        .try_into()
        .map_err(ForwarderError::Verify)
}

/// Make the pin directory and check that it is on a bpf filesystem.
fn prepare_pin_dir(dir: &Path) -> Result<()> {
    let error = |message: String| ForwarderError::PinDir { path: dir.to_path_buf(), message };
    std::fs::create_dir_all(dir).map_err(|e| error(format!("create: {e}")))?;
    if !sys::is_bpffs(dir).map_err(|e| error(format!("statfs: {e}")))? {
        return Err(error("not on a bpf filesystem (mount one: `mount -t bpf bpf /sys/fs/bpf`)".into()));
    }
    Ok(())
}

/// Unpin the maps in `dir` that the switch fills afresh at every start (l4 node slots, services,
/// selection table, configuration, round-robin cursor, counters) when their pin has another
/// shape than this program needs — as an older switch, whose program laid them out differently,
/// leaves them: the loader then makes and pins a fresh map instead of the whole load failing, and
/// an upgrade keeps the live connections. The connection map, which holds them, is never
/// replaced: a `conns` pin of another shape is refused by `check_shapes`. Returns the maps
/// unpinned.
fn unpin_stale_refilled_maps(dir: &Path) -> Result<Vec<&'static str>> {
    let mut replaced = Vec::new();
    for shape in MAP_SHAPES.iter().filter(|shape| shape.name != CONNS) {
        let path = dir.join(shape.name);
        if !path.exists() {
            continue;
        }
        let mismatch = |detail: String| ForwarderError::PinnedMismatch {
            path: path.clone(),
            dir: dir.to_path_buf(),
            detail,
        };
        let map = MapData::from_pin(&path).map_err(|e| mismatch(format!("open it: {e}")))?;
        let (found, _) = map_dims(&map).map_err(mismatch)?;
        if found != shape.dims() {
            std::fs::remove_file(&path).map_err(|e| mismatch(format!("unpin it: {e}")))?;
            replaced.push(shape.name);
        }
    }
    Ok(replaced)
}

/// A map's (type, key size, value size) and its capacity; the error says which read failed.
fn map_dims(map: &MapData) -> std::result::Result<((u32, u32, u32), u32), String> {
    let info = map.info().map_err(|e| format!("read its info: {e}"))?;
    let kind = info.map_type().map_err(|e| format!("read its type: {e}"))? as u32;
    Ok(((kind, info.key_size(), info.value_size()), info.max_entries()))
}

/// Check every (possibly adopted) map against the shape the program needs; returns the
/// connection map's capacity.
fn check_shapes(ebpf: &Ebpf, dir: &Path) -> Result<u32> {
    let mut capacity = 0;
    for shape in &MAP_SHAPES {
        let path = dir.join(shape.name);
        let mismatch = |detail: String| ForwarderError::PinnedMismatch {
            path: path.clone(),
            dir: dir.to_path_buf(),
            detail,
        };
        let map = ebpf.map(shape.name).ok_or_else(|| mismatch("missing from the object".into()))?;
        let data = match map {
            Map::HashMap(m) | Map::Array(m) | Map::PerCpuArray(m) => m,
            other => return Err(mismatch(format!("unexpected map kind {other:?}"))),
        };
        let (found, max_entries) = map_dims(data).map_err(mismatch)?;
        let wanted = shape.dims();
        if found != wanted {
            return Err(mismatch(format!(
                "(type, key size, value size) is {found:?}, the program needs {wanted:?}"
            )));
        }
        if shape.name == CONNS {
            capacity = max_entries;
        }
    }
    Ok(capacity)
}
