//! The switch's forwarding modes (`Mode`) and l4 mode's choice of node at a client's SYN
//! (`L4Selection`): one list of names each, for the configuration file, the command line
//! and the error for a name that is not on it.

use serde::Deserialize;

/// A name that is not among a list's: says which names are.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UnknownName(String);

/// How the switch forwards a request once it has chosen a node. The variants are the one list
/// of modes: configuration, `--mode`, its help and the unknown-mode error all read it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
#[value(rename_all = "kebab-case")]
pub enum Mode {
    /// Two-way, user space: every request parsed and routed, relayed over pooled keep-alive
    /// node connections.
    #[default]
    Proxy,
    /// Two-way, in the kernel: the first request is parsed and routed, then the client and
    /// node sockets are joined with splice(2) for the rest of the connection (a TCP gateway,
    /// as ClubWeb's two-way kernel switch: later requests on it go to the same node).
    Splice,
    /// One-way: the first request is parsed and routed, then the client's TCP connection
    /// itself moves to the node (TCP_REPAIR, over the authenticated control channel; the tc
    /// forwarder sends the client's later packets to the node); the response never passes
    /// the switch. Needs `[handoff]` and an agent address on every node.
    Handoff,
    /// One-way, content-blind: the tc forwarder picks a node at each client's SYN
    /// (`handoff.l4_selection`) and forwards every packet of the connection to it without the
    /// switch terminating TCP (LVS-DR style). Nodes running the agent with cloning ask the
    /// switch's policy per request and hand connections on (Socket Cloning).
    L4,
}

impl Mode {
    /// The mode's name in configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Proxy => "proxy",
            Mode::Splice => "splice",
            Mode::Handoff => "handoff",
            Mode::L4 => "l4",
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Mode, UnknownName> {
        use clap::ValueEnum;
        let modes = Mode::value_variants();
        modes.iter().copied().find(|m| m.as_str() == s).ok_or_else(|| {
            let names: Vec<&str> = modes.iter().map(|m| m.as_str()).collect();
            UnknownName(format!("unknown mode `{s}`; available: {}", names.join(", ")))
        })
    }
}

/// l4 mode: how the tc forwarder picks a node at a client's SYN (`handoff.l4_selection`,
/// `--l4-selection`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(try_from = "String")]
#[value(rename_all = "lowercase")]
pub enum L4Selection {
    /// Round robin.
    #[default]
    Rr,
    /// Weighted round robin.
    Wrr,
    /// Least connections (weighted; the table is rewritten every second).
    Lc,
    /// A hash of the client's address and port.
    Hash,
}

impl L4Selection {
    /// The selection's name in configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            L4Selection::Rr => "rr",
            L4Selection::Wrr => "wrr",
            L4Selection::Lc => "lc",
            L4Selection::Hash => "hash",
        }
    }
}

impl std::fmt::Display for L4Selection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl TryFrom<String> for L4Selection {
    type Error = UnknownName;
    fn try_from(s: String) -> Result<L4Selection, UnknownName> {
        use clap::ValueEnum;
        L4Selection::value_variants()
            .iter()
            .copied()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| UnknownName(format!("handoff.l4_selection `{s}`: use rr, wrr, lc or hash")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    #[test]
    fn l4_selections_have_one_spelling_each_in_the_file_and_on_the_command_line() {
        for (name, selection) in [
            ("rr", L4Selection::Rr),
            ("wrr", L4Selection::Wrr),
            ("lc", L4Selection::Lc),
            ("hash", L4Selection::Hash),
        ] {
            assert_eq!(L4Selection::try_from(name.to_string()).unwrap(), selection);
            assert_eq!(L4Selection::from_str(name, false).unwrap(), selection);
            assert_eq!(selection.to_string(), name);
        }
        let e = L4Selection::try_from("LC".to_string()).unwrap_err().to_string();
        assert_eq!(e, "handoff.l4_selection `LC`: use rr, wrr, lc or hash");
        assert!(L4Selection::from_str("random", false).is_err());
    }
}
