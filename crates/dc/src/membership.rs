//! The servers of a DC cluster: `ServerId` (a dense index), `Server` (its name, used in replica
//! URLs, and the authority `host:port` clients reach it at) and `Membership`, the list every
//! server is configured with, identical and in the same order on every server.

use serde::{Deserialize, Serialize};

/// A server's index in the `Membership`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ServerId(pub u16);

/// One server of the cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Server {
    /// Short name (`s1`), the `<home>` part of replica URLs: letters, digits, `-` and `_`.
    pub name: String,
    /// `host:port` clients use to reach it (`10.0.0.2:80`); links name it in `http://…/`.
    pub authority: String,
}

/// Every server of the cluster, in configuration order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Membership {
    servers: Vec<Server>,
}

/// Why a membership is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MembershipError {
    /// A name with characters other than letters, digits, `-` and `_`, or empty.
    #[error("server name `{0}` must be 1-32 letters, digits, `-` or `_`")]
    BadName(String),
    /// Two servers with one name or one authority.
    #[error("server `{0}` is listed twice")]
    Duplicate(String),
    /// More servers than ids.
    #[error("{0} servers; at most 65535")]
    TooMany(usize),
}

impl Membership {
    /// Check and build a membership.
    pub fn new(servers: Vec<Server>) -> Result<Membership, MembershipError> {
        if servers.len() > usize::from(u16::MAX) {
            return Err(MembershipError::TooMany(servers.len()));
        }
        for (i, s) in servers.iter().enumerate() {
            let ok = !s.name.is_empty()
                && s.name.len() <= 32
                && s.name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
            if !ok {
                return Err(MembershipError::BadName(s.name.clone()));
            }
            if servers[..i].iter().any(|o| o.name == s.name || o.authority == s.authority) {
                return Err(MembershipError::Duplicate(s.name.clone()));
            }
        }
        Ok(Membership { servers })
    }

    /// Number of servers.
    pub fn len(&self) -> usize {
        self.servers.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// The server with `id`, if any.
    pub fn get(&self, id: ServerId) -> Option<&Server> {
        self.servers.get(usize::from(id.0))
    }

    /// The id of the server named `name`.
    pub fn by_name(&self, name: &str) -> Option<ServerId> {
        self.servers.iter().position(|s| s.name == name).map(|i| ServerId(i as u16))
    }

    /// The id of the server reached at `authority` (compared ASCII case-insensitively).
    pub fn by_authority(&self, authority: &str) -> Option<ServerId> {
        self.servers
            .iter()
            .position(|s| s.authority.eq_ignore_ascii_case(authority))
            .map(|i| ServerId(i as u16))
    }

    /// All ids, in order.
    pub fn ids(&self) -> impl Iterator<Item = ServerId> + '_ {
        (0..self.servers.len()).map(|i| ServerId(i as u16))
    }

    /// All servers with their ids.
    pub fn iter(&self) -> impl Iterator<Item = (ServerId, &Server)> + '_ {
        self.servers.iter().enumerate().map(|(i, s)| (ServerId(i as u16), s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(name: &str, authority: &str) -> Server {
        Server { name: name.into(), authority: authority.into() }
    }

    #[test]
    fn membership_refuses_bad_names_and_duplicates() {
        assert!(matches!(Membership::new(vec![server("a/b", "h:1")]), Err(MembershipError::BadName(_))));
        assert!(matches!(Membership::new(vec![server("", "h:1")]), Err(MembershipError::BadName(_))));
        let dup = Membership::new(vec![server("a", "h:1"), server("b", "h:1")]);
        assert_eq!(dup, Err(MembershipError::Duplicate("b".into())));
    }

    #[test]
    fn membership_finds_servers_by_name_and_authority() {
        let m = Membership::new(vec![server("s1", "10.0.0.1:80"), server("s2", "10.0.0.2:80")]).unwrap();
        assert_eq!(m.by_name("s2"), Some(ServerId(1)));
        assert_eq!(m.by_authority("10.0.0.1:80"), Some(ServerId(0)));
        assert_eq!(m.by_name("s3"), None);
        assert_eq!(m.ids().count(), 2);
    }
}
