//! The service URL's hosts: `pulsar://h1:6650,h2:6650` names several
//! brokers (or proxies) that can all answer lookups. Each request to the
//! service starts at the next host in turn (round-robin, as the Java
//! client's `PulsarServiceNameResolver`) and, when that host cannot be
//! reached, tries the others once each (failover).

use std::sync::atomic::{AtomicUsize, Ordering};

use super::pool::Pool;
use super::{BrokerAddress, ClientError, UrlProblem};
use crate::connection::Connection;

/// The hosts of a service URL, all of one scheme.
#[derive(Debug)]
pub(crate) struct ServiceHosts {
    hosts: Vec<BrokerAddress>,
    next: AtomicUsize,
}

impl ServiceHosts {
    /// Parses `scheme://host[:port][,host[:port]...][/]`; every host takes
    /// the scheme's default port when it names none.
    pub(crate) fn parse(url: &str) -> Result<Self, ClientError> {
        let Some((scheme, rest)) = url.split_once("://") else {
            // Let the single-address parser name the problem.
            return Self::one(BrokerAddress::from_url(url)?);
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let hosts = rest
            .split(',')
            .map(|host| {
                BrokerAddress::from_url(&format!("{scheme}://{host}")).map_err(|e| match e {
                    // Name the whole service URL, and the host's problem.
                    ClientError::InvalidUrl { problem, .. } => ClientError::InvalidUrl {
                        url: url.to_owned(),
                        problem,
                    },
                    other => other,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        match hosts.len() {
            0 => Err(ClientError::InvalidUrl {
                url: url.to_owned(),
                problem: UrlProblem::InvalidHost,
            }),
            _ => Ok(Self {
                hosts,
                next: AtomicUsize::new(0),
            }),
        }
    }

    fn one(host: BrokerAddress) -> Result<Self, ClientError> {
        Ok(Self {
            hosts: vec![host],
            next: AtomicUsize::new(0),
        })
    }

    /// Whether the hosts are reached over TLS (`pulsar+ssl://`).
    pub(crate) fn is_tls(&self) -> bool {
        self.hosts[0].is_tls()
    }

    /// The hosts, in the order the URL names them.
    #[cfg(test)]
    pub(crate) fn hosts(&self) -> &[BrokerAddress] {
        &self.hosts
    }

    /// The hosts to try for one request: all of them, starting at the next
    /// in turn.
    pub(crate) fn in_turn(&self) -> impl Iterator<Item = &BrokerAddress> {
        let n = self.hosts.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed) % n;
        (0..n).map(move |i| &self.hosts[(start + i) % n])
    }

    /// A pooled connection to one of the hosts: the next in turn, or the
    /// first after it that can be reached. Fails with the last host's error
    /// when none can.
    pub(crate) async fn connect(
        &self,
        pool: &Pool,
    ) -> Result<(BrokerAddress, Connection), ClientError> {
        self.connect_as(pool, None).await
    }

    /// A pooled connection to broker `logical` through one of the hosts (a
    /// Pulsar proxy), tried in turn as [`connect`](Self::connect) does.
    pub(crate) async fn connect_through(
        &self,
        pool: &Pool,
        logical: &BrokerAddress,
    ) -> Result<Connection, ClientError> {
        Ok(self.connect_as(pool, Some(logical)).await?.1)
    }

    /// To `logical` through a host, or to a host itself when `None`.
    async fn connect_as(
        &self,
        pool: &Pool,
        logical: Option<&BrokerAddress>,
    ) -> Result<(BrokerAddress, Connection), ClientError> {
        let mut last = None;
        for host in self.in_turn() {
            match pool.get(logical.unwrap_or(host), host).await {
                Ok(conn) => return Ok((host.clone(), conn)),
                // The pool is closed: no other host will do better.
                Err(ClientError::Closed) => return Err(ClientError::Closed),
                Err(e) => {
                    tracing::debug!(host = %host, error = %e, "service host unreachable; trying the next");
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or(ClientError::Closed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(url: &str) -> Vec<String> {
        ServiceHosts::parse(url)
            .expect(url)
            .hosts()
            .iter()
            .map(BrokerAddress::url)
            .collect()
    }

    #[test]
    fn several_hosts_share_the_scheme_and_its_default_port() {
        assert_eq!(
            hosts("pulsar://h1:6650,h2,[::1]:7000/"),
            [
                "pulsar://h1:6650",
                "pulsar://h2:6650",
                "pulsar://[::1]:7000"
            ]
        );
        assert_eq!(
            hosts("pulsar+ssl://a,b:7001"),
            ["pulsar+ssl://a:6651", "pulsar+ssl://b:7001"]
        );
        assert_eq!(hosts("pulsar://one"), ["pulsar://one:6650"]);
    }

    #[test]
    fn a_bad_host_names_the_whole_url() {
        for (url, want) in [
            ("pulsar://a:1,,b:2", UrlProblem::InvalidHost),
            ("pulsar://a:1,b:x", UrlProblem::InvalidPort),
            ("pulsar://a:1,b:2/path", UrlProblem::UnexpectedPath),
            ("localhost:6650", UrlProblem::MissingScheme),
        ] {
            match ServiceHosts::parse(url) {
                Err(ClientError::InvalidUrl { url: u, problem }) => {
                    assert_eq!((u.as_str(), problem), (url, want));
                }
                other => panic!("{url}: {other:?}"),
            }
        }
        assert!(matches!(
            ServiceHosts::parse("http://a,b"),
            Err(ClientError::UnsupportedScheme { .. })
        ));
    }

    #[test]
    fn each_request_starts_at_the_next_host_and_tries_them_all() {
        let s = ServiceHosts::parse("pulsar://a,b,c").expect("url");
        let order = |s: &ServiceHosts| s.in_turn().map(|h| h.host().to_owned()).collect::<Vec<_>>();
        assert_eq!(order(&s), ["a", "b", "c"]);
        assert_eq!(order(&s), ["b", "c", "a"]);
        assert_eq!(order(&s), ["c", "a", "b"]);
        assert_eq!(order(&s), ["a", "b", "c"]);
    }
}
