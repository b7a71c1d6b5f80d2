//! DNS sources, resolved with hickory-resolver on tokio: a name's A and AAAA records (every
//! address a node at the entry's port, named `<name>-<ip>`), or its SRV records (the lowest
//! priority only, as RFC 2782 clients do; each target's A and AAAA addresses a node at the
//! record's port with the record's weight, named `<target>-<ip>:<port>`). Only an answer the
//! server gave as valid counts: NXDOMAIN, a timeout or a server failure is an error.

use super::error::DiscoveryError;
use super::settings::{DiscoveryEntry, SourceKind};
use crate::config::NodeEntry;
use hickory_resolver::config::{NameServerConfig, ResolverConfig};
use hickory_resolver::lookup::Lookup;
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::net::{DnsError, NetError};
use hickory_resolver::proto::op::ResponseCode;
use hickory_resolver::proto::rr::{Name, RData, RecordType, rdata::SRV};
use hickory_resolver::{Resolver, TokioResolver};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// A usable answer: the nodes (sorted by name), and how long its records are valid (none for
/// an empty answer without a negative TTL).
#[derive(Debug)]
pub struct Answer {
    pub nodes: Vec<NodeEntry>,
    pub valid_for: Option<Duration>,
}

/// One `dns` or `srv` entry and the resolver that answers it.
pub struct DnsSource {
    entry: DiscoveryEntry,
    name: Name,
    resolver: TokioResolver,
}

/// One query's outcome that is not an error: records, or a valid empty answer.
enum Reply {
    Records(Lookup),
    Empty { negative_ttl: Option<u32> },
}

/// Addresses of one name, and how long they are valid.
struct Addresses {
    ips: Vec<IpAddr>,
    valid_for: Option<Duration>,
}

impl DnsSource {
    /// The resolver for `entry`: its `resolver` address, or /etc/resolv.conf's servers, search
    /// list and options; `timeout_ms` over either.
    pub fn new(entry: &DiscoveryEntry) -> Result<DnsSource, DiscoveryError> {
        let failed = |why: String| DiscoveryError::Resolver { name: entry.target(), why };
        let name = Name::from_utf8(entry.target()).map_err(|e| failed(e.to_string()))?;
        let mut builder = match entry.resolver {
            Some(server) => {
                let mut ns = NameServerConfig::udp_and_tcp(server.ip());
                for connection in &mut ns.connections {
                    connection.port = server.port();
                }
                let config = ResolverConfig::from_name_servers(vec![ns]);
                Resolver::builder_with_config(config, TokioRuntimeProvider::default())
            }
            None => TokioResolver::builder_tokio()
                .map_err(|e| failed(format!("cannot read the system's resolver configuration: {e}")))?,
        };
        if let Some(ms) = entry.timeout_ms {
            builder.options_mut().timeout = Duration::from_millis(ms);
        }
        let resolver = builder.build().map_err(|e| failed(format!("cannot build a resolver: {e}")))?;
        Ok(DnsSource { entry: entry.clone(), name, resolver })
    }

    /// Ask the server again (nothing from the resolver's cache) and make the nodes.
    pub async fn resolve(&self) -> Result<Answer, DiscoveryError> {
        self.resolver.clear_cache();
        let answer = match self.entry.kind() {
            SourceKind::Srv => self.resolve_srv().await?,
            _ => self.resolve_dns().await?,
        };
        let max = self.entry.max_nodes();
        if answer.nodes.len() > max {
            return Err(DiscoveryError::TooMany { found: answer.nodes.len(), max });
        }
        Ok(answer)
    }

    /// `dns`: every address of the name at `port`.
    async fn resolve_dns(&self) -> Result<Answer, DiscoveryError> {
        let found = self.addresses(&self.name).await?;
        let prefix = match &self.entry.name {
            Some(prefix) => prefix.clone(),
            None => display(&self.name),
        };
        let (port, weight) = (self.entry.port.unwrap_or_default(), self.entry.weight.unwrap_or(1));
        let nodes = usable(&self.name, &found.ips)?
            .into_iter()
            .map(|ip| self.node(format!("{prefix}-{ip}"), SocketAddr::new(ip, port), weight))
            .collect();
        Ok(Answer { nodes: sorted(nodes), valid_for: found.valid_for })
    }

    /// `srv`: the lowest-priority records' targets, each address at the record's port.
    async fn resolve_srv(&self) -> Result<Answer, DiscoveryError> {
        let lookup = match self.query(&self.name, RecordType::SRV).await? {
            Reply::Empty { negative_ttl } => return Ok(empty(negative_ttl)),
            Reply::Records(lookup) => lookup,
        };
        let records: Vec<&SRV> = lookup
            .answers()
            .iter()
            .filter_map(|r| match &r.data {
                RData::SRV(srv) => Some(srv),
                _ => None,
            })
            .collect();
        // RFC 2782: a lone record whose target is "." says the service is decidedly not here.
        if let [only] = records[..]
            && only.target.is_root()
        {
            return Ok(Answer { nodes: Vec::new(), valid_for: valid_for(&lookup) });
        }
        let served: Vec<&SRV> = records.into_iter().filter(|s| s.port != 0 && !s.target.is_root()).collect();
        let Some(lowest) = served.iter().map(|s| s.priority).min() else {
            let why = "no SRV record with a target and a port".to_string();
            return Err(DiscoveryError::Unusable { name: display(&self.name), why });
        };
        let chosen: Vec<&SRV> = served.into_iter().filter(|s| s.priority == lowest).collect();
        let mut targets: Vec<&Name> = chosen.iter().map(|s| &s.target).collect();
        targets.sort();
        targets.dedup();
        let resolved = futures::future::join_all(targets.iter().map(|t| self.addresses(t))).await;
        let mut valid = valid_for(&lookup);
        let mut nodes = Vec::new();
        for (target, found) in targets.iter().zip(resolved) {
            // Any target that fails fails the round: only valid answers remove nodes.
            let found = found?;
            valid = earliest(valid, found.valid_for);
            let ips = usable(target, &found.ips)?;
            for srv in chosen.iter().filter(|s| &&s.target == target) {
                for &ip in &ips {
                    let addr = SocketAddr::new(ip, srv.port);
                    nodes.push(self.node(
                        format!("{}-{addr}", display(target)),
                        addr,
                        u32::from(srv.weight).max(1),
                    ));
                }
            }
        }
        Ok(Answer { nodes: sorted(nodes), valid_for: valid })
    }

    /// A name's A and AAAA addresses (either may be validly empty; both empty is a valid empty
    /// answer). NXDOMAIN or a failure of either query is an error.
    async fn addresses(&self, name: &Name) -> Result<Addresses, DiscoveryError> {
        let (v4, v6) = tokio::join!(self.query(name, RecordType::A), self.query(name, RecordType::AAAA));
        let mut found = Addresses { ips: Vec::new(), valid_for: None };
        for reply in [v4?, v6?] {
            match reply {
                Reply::Records(lookup) => {
                    found.valid_for = earliest(found.valid_for, valid_for(&lookup));
                    found.ips.extend(lookup.answers().iter().filter_map(|r| match &r.data {
                        RData::A(a) => Some(IpAddr::V4(a.0)),
                        RData::AAAA(a) => Some(IpAddr::V6(a.0)),
                        _ => None,
                    }));
                }
                Reply::Empty { negative_ttl } => {
                    found.valid_for = earliest(found.valid_for, negative_ttl.map(secs));
                }
            }
        }
        Ok(found)
    }

    /// One query: records, a valid empty answer (NOERROR without records of the type), or the
    /// error (NXDOMAIN, timeout, server failure, malformed answer).
    async fn query(&self, name: &Name, record_type: RecordType) -> Result<Reply, DiscoveryError> {
        match self.resolver.lookup(name.clone(), record_type).await {
            Ok(lookup) => Ok(Reply::Records(lookup)),
            Err(NetError::Dns(DnsError::NoRecordsFound(none)))
                if none.response_code == ResponseCode::NoError =>
            {
                Ok(Reply::Empty { negative_ttl: none.negative_ttl })
            }
            Err(NetError::Dns(DnsError::NoRecordsFound(none)))
                if none.response_code == ResponseCode::NXDomain =>
            {
                Err(DiscoveryError::NoSuchName { name: display(name) })
            }
            Err(e) => {
                Err(DiscoveryError::Resolver { name: display(name), why: format!("{record_type}: {e}") })
            }
        }
    }

    /// A node at `addr`, with its agent and admin listener at the entry's ports of its address.
    fn node(&self, name: String, addr: SocketAddr, weight: u32) -> NodeEntry {
        let at = |port: Option<u16>| port.map(|p| SocketAddr::new(addr.ip(), p));
        NodeEntry {
            name: Some(name),
            addr,
            weight,
            handoff: at(self.entry.handoff_port),
            admin: at(self.entry.admin_port),
        }
    }
}

/// The addresses a node can be reached at; an answer with only unusable ones is an error.
fn usable(name: &Name, ips: &[IpAddr]) -> Result<Vec<IpAddr>, DiscoveryError> {
    let ok: Vec<IpAddr> = ips
        .iter()
        .copied()
        .filter(|ip| !ip.is_unspecified() && !ip.is_multicast() && *ip != IpAddr::from([255, 255, 255, 255]))
        .collect();
    if ok.is_empty() && !ips.is_empty() {
        let why = format!("no usable address among {ips:?}");
        return Err(DiscoveryError::Unusable { name: display(name), why });
    }
    Ok(ok)
}

/// A valid empty answer.
fn empty(negative_ttl: Option<u32>) -> Answer {
    Answer { nodes: Vec::new(), valid_for: negative_ttl.map(secs) }
}

fn valid_for(lookup: &Lookup) -> Option<Duration> {
    Some(lookup.valid_until().saturating_duration_since(Instant::now()))
}

fn secs(ttl: u32) -> Duration {
    Duration::from_secs(u64::from(ttl))
}

fn earliest(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A name without its final dot.
fn display(name: &Name) -> String {
    name.to_utf8().trim_end_matches('.').to_string()
}

/// Nodes by name, each name once.
fn sorted(mut nodes: Vec<NodeEntry>) -> Vec<NodeEntry> {
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    nodes.dedup_by(|a, b| a.name == b.name);
    nodes
}
