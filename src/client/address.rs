//! [`BrokerAddress`]: a `pulsar://host:port` or `pulsar+ssl://host:port` URL, parsed.

use std::fmt;

use super::{ClientError, UrlProblem};

/// The port of `pulsar://` when a URL names none.
pub const DEFAULT_PORT: u16 = 6650;

/// The port of `pulsar+ssl://` when a URL names none.
pub const DEFAULT_TLS_PORT: u16 = 6651;

/// Where a broker (or proxy) listens: host and port of a `pulsar://` URL,
/// and whether it speaks TLS (`pulsar+ssl://`).
///
/// # Examples
/// ```
/// use pulsar_wire::client::BrokerAddress;
/// let a = BrokerAddress::from_url("pulsar://broker-1.example.com")?;
/// assert_eq!((a.host(), a.port()), ("broker-1.example.com", 6650));
/// assert_eq!(a.url(), "pulsar://broker-1.example.com:6650");
/// let tls = BrokerAddress::from_url("pulsar+ssl://b")?;
/// assert!(tls.is_tls() && tls.port() == 6651);
/// assert!(BrokerAddress::from_url("http://b:8080").is_err());
/// # Ok::<(), pulsar_wire::client::ClientError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BrokerAddress {
    host: String,
    port: u16,
    tls: bool,
}

impl BrokerAddress {
    /// A plaintext (`pulsar://`) address from its parts.
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        Self {
            host: host.into(),
            port,
            tls: false,
        }
    }

    /// The same host and port, over TLS (`true`) or plaintext.
    #[must_use]
    pub const fn with_tls(mut self, tls: bool) -> Self {
        self.tls = tls;
        self
    }

    /// Parses `pulsar://host[:port][/]` (default port 6650) or
    /// `pulsar+ssl://host[:port][/]` (default port 6651); IPv6 hosts in brackets.
    ///
    /// Parsing a `pulsar+ssl://` URL works without the `tls` cargo feature;
    /// connecting to one then fails with [`ClientError::TlsNotEnabled`].
    ///
    /// # Errors
    /// [`ClientError::UnsupportedScheme`] for any other scheme,
    /// [`ClientError::InvalidUrl`] for a malformed URL. Both carry the URL.
    pub fn from_url(url: &str) -> Result<Self, ClientError> {
        let invalid = |problem| ClientError::InvalidUrl {
            url: url.to_owned(),
            problem,
        };
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| invalid(UrlProblem::MissingScheme))?;
        let tls = match scheme {
            "pulsar" => false,
            "pulsar+ssl" => true,
            _ => {
                return Err(ClientError::UnsupportedScheme {
                    url: url.to_owned(),
                    scheme: scheme.to_owned(),
                });
            }
        };
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        if authority.contains(',') {
            return Err(invalid(UrlProblem::MultipleHosts));
        }
        if authority.contains('/') {
            return Err(invalid(UrlProblem::UnexpectedPath));
        }
        let bracketed = authority.starts_with('[');
        let (host, port) = if bracketed {
            let (host, after) = authority[1..]
                .split_once(']')
                .ok_or_else(|| invalid(UrlProblem::InvalidHost))?;
            match after {
                "" => (host, None),
                _ => (
                    host,
                    Some(
                        after
                            .strip_prefix(':')
                            .ok_or_else(|| invalid(UrlProblem::InvalidHost))?,
                    ),
                ),
            }
        } else {
            match authority.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (authority, None),
            }
        };
        let bad_char = |c: char| c.is_whitespace() || "[]@".contains(c) || (!bracketed && c == ':');
        if host.is_empty() || host.contains(bad_char) {
            return Err(invalid(UrlProblem::InvalidHost));
        }
        let port = match port {
            None if tls => DEFAULT_TLS_PORT,
            None => DEFAULT_PORT,
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|&p| p != 0)
                .ok_or_else(|| invalid(UrlProblem::InvalidPort))?,
        };
        Ok(Self::new(host, port).with_tls(tls))
    }

    /// Whether the broker is reached over TLS (`pulsar+ssl://`).
    pub const fn is_tls(&self) -> bool {
        self.tls
    }

    /// The host name or IP address.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The port.
    pub const fn port(&self) -> u16 {
        self.port
    }

    /// The `pulsar://host:port` (or `pulsar+ssl://host:port`) URL.
    pub fn url(&self) -> String {
        let scheme = if self.tls { "pulsar+ssl" } else { "pulsar" };
        format!("{scheme}://{self}")
    }
}

impl fmt::Display for BrokerAddress {
    /// `host:port`, with an IPv6 host in brackets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(url: &str) -> (String, u16) {
        let a = BrokerAddress::from_url(url).expect(url);
        (a.host().to_owned(), a.port())
    }

    fn problem(url: &str) -> UrlProblem {
        match BrokerAddress::from_url(url) {
            Err(ClientError::InvalidUrl { url: u, problem }) if u == url => problem,
            other => panic!("{url}: {other:?}"),
        }
    }

    #[test]
    fn parses_host_port_and_defaults() {
        assert_eq!(addr("pulsar://127.0.0.1:6650"), ("127.0.0.1".into(), 6650));
        assert_eq!(addr("pulsar://localhost"), ("localhost".into(), 6650));
        assert_eq!(addr("pulsar://localhost:7000/"), ("localhost".into(), 7000));
        assert_eq!(addr("pulsar://[::1]:6651"), ("::1".into(), 6651));
        assert_eq!(addr("pulsar://[::1]"), ("::1".into(), 6650));
        assert_eq!(BrokerAddress::new("::1", 1).to_string(), "[::1]:1");
    }

    #[test]
    fn pulsar_ssl_is_tls_with_its_own_default_port() {
        let a = BrokerAddress::from_url("pulsar+ssl://b").expect("tls url");
        assert!(a.is_tls());
        assert_eq!((a.host(), a.port()), ("b", 6651));
        assert_eq!(a.url(), "pulsar+ssl://b:6651");
        assert_ne!(
            a,
            BrokerAddress::new("b", 6651),
            "TLS and plaintext never share a pool entry"
        );
    }

    #[test]
    fn other_schemes_are_a_typed_error_naming_the_url() {
        for url in ["pulsar+tls://b:6651", "http://b:8080"] {
            assert!(
                matches!(BrokerAddress::from_url(url),
                    Err(ClientError::UnsupportedScheme { url: ref u, .. }) if u == url),
                "{url}"
            );
        }
    }

    #[test]
    fn malformed_urls_say_what_is_wrong() {
        assert_eq!(problem("localhost:6650"), UrlProblem::MissingScheme);
        assert_eq!(problem("pulsar://"), UrlProblem::InvalidHost);
        assert_eq!(problem("pulsar://:6650"), UrlProblem::InvalidHost);
        assert_eq!(problem("pulsar://h:notaport"), UrlProblem::InvalidPort);
        assert_eq!(problem("pulsar://h:0"), UrlProblem::InvalidPort);
        assert_eq!(problem("pulsar://h:70000"), UrlProblem::InvalidPort);
        assert_eq!(problem("pulsar://a:1,b:2"), UrlProblem::MultipleHosts);
        assert_eq!(problem("pulsar://h:1/path"), UrlProblem::UnexpectedPath);
        assert_eq!(problem("pulsar://[::1"), UrlProblem::InvalidHost);
    }
}
