//! `[dc]`: DC mode (every node the home of its own documents and a co-op for replicas of the
//! others') — the full membership `servers` (`name=host:port`, identical on every node), this
//! node's name `self`, the replica store quota, the quota and consistency methods and the
//! periods; `DcArgs` are the `--dc-*` flags that make or override the table. Checked entry by
//! entry, so an error names the entry it is about.

use std::net::{SocketAddr, ToSocketAddrs};

use locus_classify::ByteSize;
use locus_dc::balancer::QuotaMethod;
use locus_dc::consistency::ConsistencyMethod;
use locus_dc::{Membership, Server};
use serde::{Deserialize, Serialize};

use crate::origin::OriginAddr;

/// DC mode (`[dc]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DcConfig {
    /// Every server of the cluster as `name=host:port` (this node included); the authority is
    /// what links name, so it must be how clients and peers reach the server.
    pub servers: Vec<String>,
    /// This node's name in `servers`.
    #[serde(rename = "self")]
    pub self_name: String,
    /// Bytes of replicas this node keeps for other homes; 0 keeps none (a replica request is
    /// then fetched from the home and passed through).
    pub quota: ByteSize,
    pub method: QuotaMethod,
    pub consistency: ConsistencyMethod,
    /// Co-op validation: a copy checked longer ago than this is revalidated with its home.
    pub validate_s: u64,
    /// EWMA weight of the previous load at each 1-s tick.
    pub alpha: f64,
    /// Length of a balancing round.
    pub balance_ms: u64,
    /// The pinger's period (a peer whose load is older than 2 s is pinged).
    pub ping_ms: u64,
    /// Seed of the replica choices.
    pub seed: u64,
    /// False: serve as a DC node but never replicate (overhead measurement).
    pub replicate: bool,
    /// Load threshold theta of the balancer and the selector (overloaded above (1+theta)·mean).
    pub theta: f64,
}

impl Default for DcConfig {
    fn default() -> DcConfig {
        DcConfig {
            servers: Vec::new(),
            self_name: String::new(),
            quota: ByteSize::mib(64),
            method: QuotaMethod::ResourceAware,
            consistency: ConsistencyMethod::CoopValidation,
            validate_s: 60,
            alpha: 0.5,
            balance_ms: 5000,
            ping_ms: 1000,
            seed: 0,
            replicate: true,
            theta: locus_dc::balancer::BalancerConfig::default().theta,
        }
    }
}

/// One server entry, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DcServerEntry {
    pub name: String,
    pub addr: OriginAddr,
}

impl DcConfig {
    /// The entries of `servers`, parsed; a malformed entry is refused naming it.
    pub fn entries(&self) -> Result<Vec<DcServerEntry>, String> {
        let mut entries = Vec::with_capacity(self.servers.len());
        for (i, entry) in self.servers.iter().enumerate() {
            let bad = |why: String| format!("dc.servers[{i}] {entry:?}: {why} (expected name=host:port)");
            let (name, authority) = entry.split_once('=').ok_or_else(|| bad("no '='".into()))?;
            let addr = format!("http://{}", authority.trim()).parse::<OriginAddr>().map_err(bad)?;
            if !authority.contains(':') {
                return Err(bad("no port".into()));
            }
            entries.push(DcServerEntry { name: name.trim().to_string(), addr });
        }
        Ok(entries)
    }

    /// The membership and this node's id in it.
    pub fn membership(&self) -> Result<(Membership, locus_dc::ServerId), String> {
        let entries = self.entries()?;
        if entries.is_empty() {
            return Err("dc.servers is empty: list every server as name=host:port, this one included".into());
        }
        let servers =
            entries.iter().map(|e| Server { name: e.name.clone(), authority: e.addr.authority() }).collect();
        let membership = Membership::new(servers).map_err(|e| format!("dc.servers: {e}"))?;
        let me = membership
            .by_name(&self.self_name)
            .ok_or_else(|| format!("dc.self {:?} is not one of the names in dc.servers", self.self_name))?;
        Ok((membership, me))
    }

    /// `validate`, and refuse DC mode beside cooperative caching or an origin.
    pub fn validate_beside(&self, listen: SocketAddr, coop: bool, origin: bool) -> Result<(), String> {
        if coop || origin {
            return Err("dc excludes coop and origin: a DC node serves its own document root and \
                        fetches only replicas, from their homes; configure one of them"
                .into());
        }
        self.validate(listen)
    }

    /// Check what can be checked before the listener is bound (`listen` as configured).
    pub fn validate(&self, listen: SocketAddr) -> Result<(), String> {
        if !(0.0..=1.0).contains(&self.alpha) {
            return Err(format!("dc.alpha must be within 0..=1, not {}", self.alpha));
        }
        if !(0.0..1.0).contains(&self.theta) {
            return Err(format!("dc.theta must be within 0..1, not {}", self.theta));
        }
        for (key, v, max) in [
            ("balance_ms", self.balance_ms, 3_600_000),
            ("ping_ms", self.ping_ms, 3_600_000),
            ("validate_s", self.validate_s.max(1), 31_536_000),
        ] {
            if v == 0 || v > max {
                return Err(format!("dc.{key} must be in 1..={max}, not {v}"));
            }
        }
        let (membership, me) = self.membership()?;
        if listen.port() != 0 {
            check_self(&membership, me, listen)?;
        }
        Ok(())
    }
}

/// Refuse a `self` entry whose authority is not one this node answers on (`listen`, the bound
/// address): its port must be the listen port and, unless the node listens on a wildcard,
/// its host must resolve to the listen address.
pub fn check_self(membership: &Membership, me: locus_dc::ServerId, listen: SocketAddr) -> Result<(), String> {
    let Some(server) = membership.get(me) else { return Err("dc.self is not a member".into()) };
    let addr = format!("http://{}", server.authority).parse::<OriginAddr>()?;
    let why = |what: &str| {
        Err(format!(
            "dc.self {:?} is reached at {}, but this node listens on {listen}: {what}",
            server.name, server.authority
        ))
    };
    if addr.port != listen.port() {
        return why("the ports differ");
    }
    if listen.ip().is_unspecified() {
        return Ok(());
    }
    let resolved: Vec<SocketAddr> =
        (addr.host.as_str(), addr.port).to_socket_addrs().map(Iterator::collect).unwrap_or_default();
    if resolved.is_empty() {
        return why("the host does not resolve");
    }
    if !resolved.contains(&listen) {
        return why("the host resolves to other addresses");
    }
    Ok(())
}

/// The `--dc-*` flags of `locus node`.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct DcArgs {
    /// DC mode: every server of the cluster, this one included (s1=HOST:PORT,s2=HOST:PORT).
    #[arg(long, value_name = "NAME=HOST:PORT,...", value_delimiter = ',')]
    pub dc_servers: Option<Vec<String>>,
    /// This node's name in --dc-servers.
    #[arg(long, value_name = "NAME")]
    pub dc_self: Option<String>,
    /// Replica store size, e.g. 64MiB (0: keep no replicas, pass fetched copies through).
    #[arg(long, value_name = "SIZE")]
    pub dc_quota: Option<ByteSize>,
    /// naive | deletion-aware | resource-aware | migration (default resource-aware).
    #[arg(long, value_name = "METHOD")]
    pub dc_method: Option<QuotaMethod>,
    /// coop-validation | active-update | explicit-notification | implicit-notification.
    #[arg(long, value_name = "METHOD")]
    pub dc_consistency: Option<ConsistencyMethod>,
    /// Co-op validation interval (default 60).
    #[arg(long, value_name = "S")]
    pub dc_validate_s: Option<u64>,
    /// EWMA weight of the previous load (default 0.5).
    #[arg(long, value_name = "A")]
    pub dc_alpha: Option<f64>,
    /// Balancing round length (default 5000).
    #[arg(long, value_name = "MS")]
    pub dc_balance_ms: Option<u64>,
    /// Pinger period (default 1000).
    #[arg(long, value_name = "MS")]
    pub dc_ping_ms: Option<u64>,
    /// Seed of the replica choices.
    #[arg(long, value_name = "N")]
    pub dc_seed: Option<u64>,
    /// false: serve as DC but never replicate (default true).
    #[arg(long, value_name = "BOOL")]
    pub dc_replicate: Option<bool>,
    /// Balancer threshold theta (default 0.2).
    #[arg(long, value_name = "T")]
    pub dc_theta: Option<f64>,
}

impl DcArgs {
    /// Make or override the `[dc]` table with the flags given.
    pub fn apply(&self, dc: &mut Option<DcConfig>) {
        let any = self.dc_servers.is_some()
            || self.dc_self.is_some()
            || self.dc_quota.is_some()
            || self.dc_method.is_some()
            || self.dc_consistency.is_some()
            || self.dc_validate_s.is_some()
            || self.dc_alpha.is_some()
            || self.dc_balance_ms.is_some()
            || self.dc_ping_ms.is_some()
            || self.dc_seed.is_some()
            || self.dc_replicate.is_some()
            || self.dc_theta.is_some();
        if !any {
            return;
        }
        let c = dc.get_or_insert_with(Default::default);
        macro_rules! set {
            ($flag:expr => $field:expr) => {
                if let Some(v) = $flag.clone() {
                    $field = v;
                }
            };
        }
        set!(self.dc_servers => c.servers);
        set!(self.dc_self => c.self_name);
        set!(self.dc_quota => c.quota);
        set!(self.dc_method => c.method);
        set!(self.dc_consistency => c.consistency);
        set!(self.dc_validate_s => c.validate_s);
        set!(self.dc_alpha => c.alpha);
        set!(self.dc_balance_ms => c.balance_ms);
        set!(self.dc_ping_ms => c.ping_ms);
        set!(self.dc_seed => c.seed);
        set!(self.dc_replicate => c.replicate);
        set!(self.dc_theta => c.theta);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(servers: &[&str], me: &str) -> DcConfig {
        DcConfig {
            servers: servers.iter().map(|s| s.to_string()).collect(),
            self_name: me.into(),
            ..DcConfig::default()
        }
    }

    #[test]
    fn bad_server_entries_are_refused_naming_the_entry() {
        let listen: SocketAddr = "127.0.0.1:8000".parse().unwrap();
        let e = config(&["s1=127.0.0.1:8000", "s2"], "s1").validate(listen).unwrap_err();
        assert!(e.contains("dc.servers[1]") && e.contains("\"s2\""), "{e}");
        let e = config(&["s1=127.0.0.1:8000", "s2=127.0.0.1"], "s1").validate(listen).unwrap_err();
        assert!(e.contains("dc.servers[1]") && e.contains("port"), "{e}");
        let e = config(&["s1=127.0.0.1:8000", "s1=127.0.0.1:8001"], "s1").validate(listen).unwrap_err();
        assert!(e.contains("twice"), "{e}");
        let e = config(&["s 1=127.0.0.1:8000"], "s 1").validate(listen).unwrap_err();
        assert!(e.contains("name"), "{e}");
        config(&["s1=127.0.0.1:8000", "s2=127.0.0.1:8001"], "s1").validate(listen).unwrap();
    }

    #[test]
    fn the_dc_table_parses_with_defaults_and_refuses_unknown_keys_and_coop() {
        use crate::config::NodeConfig;
        let toml = "listen = \"127.0.0.1:8000\"\n[dc]\nservers = [\"s1=127.0.0.1:8000\", \"s2=127.0.0.1:8001\"]\n\
                    self = \"s1\"\nquota = \"1MiB\"\nmethod = \"deletion-aware\"\n";
        let dc = NodeConfig::from_toml_str(toml).unwrap().dc.unwrap();
        assert_eq!((dc.quota, dc.method), (ByteSize::mib(1), QuotaMethod::DeletionAware));
        assert_eq!(
            (dc.consistency, dc.validate_s, dc.balance_ms),
            (ConsistencyMethod::CoopValidation, 60, 5000)
        );
        assert_eq!((dc.alpha, dc.ping_ms, dc.replicate), (0.5, 1000, true));
        let e = NodeConfig::from_toml_str(&format!("{toml}quotas = 1\n")).unwrap_err().to_string();
        assert!(e.contains("quotas"), "{e}");
        let e = NodeConfig::from_toml_str(&format!("{toml}method = \"smart\"\n")).unwrap_err().to_string();
        assert!(e.contains("method") || e.contains("smart"), "{e}");
        let with_coop = format!("{toml}[coop]\npeers = [\"http://127.0.0.1:8001\"]\n");
        let e = NodeConfig::from_toml_str(&with_coop).unwrap_err().to_string();
        assert!(e.contains("dc excludes coop"), "{e}");
    }

    #[test]
    fn dc_flags_make_the_dc_table() {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: crate::cli::NodeArgs,
        }
        let cli = Cli::try_parse_from([
            "node",
            "--listen",
            "127.0.0.1:8000",
            "--dc-servers",
            "s1=127.0.0.1:8000,s2=127.0.0.1:8001",
            "--dc-self",
            "s1",
            "--dc-quota",
            "0",
            "--dc-method",
            "migration",
            "--dc-consistency",
            "implicit-notification",
            "--dc-replicate",
            "false",
        ])
        .unwrap();
        let dc = cli.args.to_config().unwrap().dc.unwrap();
        assert_eq!(dc.servers, vec!["s1=127.0.0.1:8000", "s2=127.0.0.1:8001"]);
        assert_eq!((dc.quota, dc.method, dc.replicate), (ByteSize(0), QuotaMethod::MigrationOnly, false));
        assert_eq!(dc.consistency, ConsistencyMethod::ImplicitNotification);
        assert!(Cli::try_parse_from(["node", "--dc-method", "smart"]).is_err());
        let e = Cli::try_parse_from(["node", "--dc-servers", "s1=127.0.0.1:8000", "--dc-self", "s2"])
            .unwrap()
            .args
            .to_config()
            .unwrap_err()
            .to_string();
        assert!(e.contains("dc.self"), "{e}");
    }

    #[test]
    fn self_must_be_a_member_reached_at_the_listen_address() {
        let listen: SocketAddr = "127.0.0.1:8000".parse().unwrap();
        let e = config(&["s1=127.0.0.1:8000"], "s9").validate(listen).unwrap_err();
        assert!(e.contains("dc.self") && e.contains("s9"), "{e}");
        let e = config(&["s1=127.0.0.1:8001", "s2=127.0.0.1:8000"], "s1").validate(listen).unwrap_err();
        assert!(e.contains("ports differ"), "{e}");
        config(&["s1=10.9.9.9:8000"], "s1").validate("0.0.0.0:8000".parse().unwrap()).unwrap();
        // Port 0 is chosen when binding: checked at start instead.
        config(&["s1=127.0.0.1:8001"], "s1").validate("127.0.0.1:0".parse().unwrap()).unwrap();
        let e = config(&["s1=127.0.0.1:8000"], "s1")
            .validate(listen)
            .and_then(|()| DcConfig { alpha: 1.5, ..config(&["s1=127.0.0.1:8000"], "s1") }.validate(listen))
            .unwrap_err();
        assert!(e.contains("dc.alpha"), "{e}");
    }
}
