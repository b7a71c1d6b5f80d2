//! What the benches' one-way paths share: nodes running the handoff agent (one key file for
//! them and the switch), and the wait for a switch's control channels to come up, without
//! which its first connections would be served by the proxy path.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::bail;
use locus_rig::{Net, NodeSpec, Server, servers};

/// HTTP port of the one-way paths' nodes, which is also the l4 service port.
pub const ONE_WAY_NODE_PORT: u16 = 86;

/// Nodes running the handoff agent, and the key file they share with the switch.
pub struct AgentNodes {
    pub servers: Vec<Server>,
    pub key: PathBuf,
}

impl AgentNodes {
    /// A node with the agent on each of `roles`' hosts, serving `root` with `workers` workers,
    /// listening on every address at [`ONE_WAY_NODE_PORT`] (a handed-off connection is
    /// restored on the virtual IP, which they carry); with `clone`, they clone connections the
    /// l4 forwarder brings them.
    pub fn start(
        net: &Net,
        locus: &Path,
        scratch: &Path,
        root: &Path,
        roles: &[String],
        workers: u32,
        clone: bool,
    ) -> anyhow::Result<AgentNodes> {
        std::fs::create_dir_all(scratch)?;
        let key = scratch.join("handoff.key");
        servers::write_handoff_key(&key)?;
        let mut nodes = Vec::new();
        for role in roles {
            let spec = NodeSpec {
                workers,
                handoff_key_file: Some(key.clone()),
                handoff_clone: clone,
                handoff_clone_service: if clone { Some(net.switch_addr(ONE_WAY_NODE_PORT)?) } else { None },
                listen_any: true,
                port: Some(ONE_WAY_NODE_PORT),
                agent_port: Some(ONE_WAY_NODE_PORT + 7000),
                ..NodeSpec::new(role, root)
            };
            nodes.push(servers::locus_node(net, locus, scratch, &spec)?);
        }
        Ok(AgentNodes { servers: nodes, key })
    }

    /// Each node's name and HTTP address, for the switch's configuration.
    pub fn addrs(&self) -> Vec<(String, SocketAddr)> {
        self.servers.iter().map(|n| (n.name.clone(), n.addr)).collect()
    }

    /// Each node's agent address, in node order.
    pub fn agents(&self) -> Vec<SocketAddr> {
        self.servers.iter().filter_map(|n| n.agent).collect()
    }
}

/// Wait (at most 10 s) until `switch` (in `mode`, with an admin listener) has `want` control
/// channels up; an error naming its log when it does not.
pub fn await_control_channels(net: &Net, switch: &Server, want: u64, mode: &str) -> anyhow::Result<()> {
    let Some(admin) = switch.admin else { bail!("{mode} switch: no admin listener to ask") };
    let url: locus_load::TargetUrl = format!("http://{admin}/").parse()?;
    let up = net.on_host("client", || {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let status = locus_load::fetch_status(&url, Duration::from_secs(2));
            let channels = status.ok().and_then(|s| s["handoff"]["channels_up"].as_u64()).unwrap_or(0);
            if channels >= want || Instant::now() > deadline {
                return Ok::<u64, locus_rig::RigError>(channels);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    })?;
    if up < want {
        bail!(
            "{mode} switch: {up} of {want} control channels to the agents came up (see {})",
            switch.log.display()
        );
    }
    Ok(())
}
