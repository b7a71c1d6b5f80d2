//! `Scheme`: whether a DC site is served to clients over `http` or `https` — the scheme of the
//! URLs a node writes (replica links, redirects to the original, BASE) and the default port of
//! an authority written without one. Traffic between nodes is cleartext HTTP either way.

/// The scheme a site is served with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// Cleartext HTTP (port 80 by default).
    #[default]
    Http,
    /// HTTP over TLS (port 443 by default).
    Https,
}

impl Scheme {
    /// `Https` for a server that serves TLS to clients, else `Http`.
    pub fn for_tls(serves_tls: bool) -> Scheme {
        if serves_tls { Scheme::Https } else { Scheme::Http }
    }

    /// The scheme as written in a URL (`http`, `https`).
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    /// The port an authority without one means.
    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }

    /// The scheme named `name` (ASCII case-insensitively), if it is one of the two.
    pub fn parse(name: &str) -> Option<Scheme> {
        [Scheme::Http, Scheme::Https].into_iter().find(|s| s.as_str().eq_ignore_ascii_case(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scheme_parses_case_insensitively_back_from_its_name() {
        for scheme in [Scheme::Http, Scheme::Https] {
            assert_eq!(Scheme::parse(scheme.as_str()), Some(scheme));
            assert_eq!(Scheme::parse(&scheme.as_str().to_ascii_uppercase()), Some(scheme));
        }
        assert_eq!(Scheme::parse("ftp"), None);
        assert_eq!(Scheme::parse("http+s"), None);
    }

    #[test]
    fn tls_means_https_on_port_443() {
        assert_eq!(Scheme::for_tls(true), Scheme::Https);
        assert_eq!(Scheme::for_tls(false), Scheme::Http);
        assert_eq!((Scheme::Http.default_port(), Scheme::Https.default_port()), (80, 443));
        assert_eq!(Scheme::default(), Scheme::Http);
    }
}
