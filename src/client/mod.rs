//! The [`Client`]: connections to a Pulsar cluster, topic lookup and topic names.
//!
//! A client holds a pool of broker connections (one per broker by default)
//! and finds, for a topic, the broker that serves it. Producers and
//! consumers are built on top of it.

mod address;
mod connector;
mod error;
mod lookup;
pub(crate) mod memory;
mod namespace;
mod pool;
mod service;
#[cfg(feature = "tls")]
pub(crate) mod tls;
mod topic;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub use address::{BrokerAddress, DEFAULT_PORT, DEFAULT_TLS_PORT};
pub use connector::{BrokerStream, Connector, TcpConnector};
pub use error::{ClientError, TlsConfigProblem, UrlProblem};
pub(crate) use namespace::TopicListing;
pub use topic::{InvalidTopicName, TopicDomain, TopicName, TopicNameProblem};

use crate::auth::Authentication;
use crate::connection::{Connection, ConnectionOptions};
use crate::error::Error;
use pool::{Pool, PoolConfig};
use service::ServiceHosts;

/// A Pulsar client: cheap to clone (all clones share one connection pool).
///
/// # Examples
/// ```no_run
/// use pulsar_wire::{Client, TopicName};
/// # async fn demo() -> Result<(), pulsar_wire::Error> {
/// let client = Client::builder()
///     .service_url("pulsar://127.0.0.1:6650")
///     .build()
///     .await?;
/// let topic: TopicName = "orders".parse()?;
/// let partitions = client.partitioned_topic_metadata(&topic).await?;
/// let connection = client.lookup(&topic).await?; // to the broker that owns it
/// println!("{partitions} partitions, owner max message size {}", connection.max_message_size());
/// client.close().await;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    service_url: String,
    service: ServiceHosts,
    pool: Pool,
    operation_timeout: Duration,
    /// Payload bytes all producers of this client may hold unanswered.
    memory: Arc<tokio::sync::Semaphore>,
    memory_limit: usize,
    /// The part of the memory limit receiver queues may hold.
    queue_memory: Arc<memory::QueueBudget>,
    /// The last lookup said to reach the owner through the service URL:
    /// the service is a Pulsar proxy.
    behind_proxy: AtomicBool,
    /// The transaction coordinators, with transactions enabled.
    coordinators: Option<crate::transaction::coordinator::Coordinators>,
    /// The stats interval and the metrics exporter.
    stats: crate::stats::StatsSettings,
}

impl Client {
    /// A builder with the defaults: operation timeout 30 s, keepalive 30 s,
    /// connection timeout 10 s, one connection per broker.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// The service URL the client was built with.
    pub fn service_url(&self) -> &str {
        &self.inner.service_url
    }

    /// How long a request waits for its answer.
    pub fn operation_timeout(&self) -> Duration {
        self.inner.operation_timeout
    }

    /// Finds the broker that serves `topic` (following redirects) and
    /// returns the pooled connection to it.
    ///
    /// # Errors
    /// [`ClientError::Request`] if a LOOKUP failed (broker error code,
    /// timeout, lost connection), [`ClientError::TooManyRedirects`] after
    /// 20 redirects, [`ClientError::Connect`] if the broker cannot be
    /// reached, [`ClientError::Closed`] after [`close`](Self::close).
    pub async fn lookup(&self, topic: &TopicName) -> Result<Connection, ClientError> {
        let owner = lookup::lookup(&self.inner.pool, &self.inner.service, topic).await?;
        self.inner
            .behind_proxy
            .store(owner.through_proxy, Ordering::Relaxed);
        Ok(owner.conn)
    }

    /// The connection a producer or consumer of `topic` reconnects on: to
    /// the broker the broker named (CLOSE_PRODUCER / CLOSE_CONSUMER /
    /// TOPIC_MIGRATED carry its URLs; the one of this client's scheme is
    /// used, and only if it has that scheme), or found by a fresh lookup
    /// when it named none. Behind a Pulsar proxy the named broker is
    /// reached through the proxy, as lookups reach owners, since the client
    /// may not reach it otherwise.
    pub(crate) async fn reconnect_to(
        &self,
        topic: &TopicName,
        hint: Option<&crate::connection::BrokerHint>,
    ) -> Result<Connection, ClientError> {
        match hint.and_then(|h| h.url_for(self.inner.service.is_tls())) {
            Some(url) => {
                let broker = BrokerAddress::from_url(url)?;
                if self.inner.behind_proxy.load(Ordering::Relaxed) {
                    let (pool, service) = (&self.inner.pool, &self.inner.service);
                    return service.connect_through(pool, &broker).await;
                }
                self.inner.pool.get(&broker, &broker).await
            }
            None => self.lookup(topic).await,
        }
    }

    /// Configures a transaction; [`begin`](crate::transaction::TransactionBuilder::begin)
    /// starts it. Needs [`ClientBuilder::enable_transaction`].
    ///
    /// # Examples
    /// ```no_run
    /// use std::time::Duration;
    /// # async fn demo(client: pulsar_wire::Client) -> Result<(), pulsar_wire::Error> {
    /// let txn = client.transaction().timeout(Duration::from_secs(30)).begin().await?;
    /// txn.commit().await?;
    /// # Ok(()) }
    /// ```
    pub fn transaction(&self) -> crate::transaction::TransactionBuilder {
        crate::transaction::TransactionBuilder::new(self.clone())
    }

    /// The transaction coordinators, if transactions are enabled.
    pub(crate) fn coordinators(&self) -> Option<&crate::transaction::coordinator::Coordinators> {
        self.inner.coordinators.as_ref()
    }

    /// How many partitions `topic` has; 0 for a topic that is not partitioned.
    ///
    /// # Errors
    /// [`ClientError::Request`] if PARTITIONED_METADATA failed, or the
    /// errors of reaching the service URL (see [`lookup`](Self::lookup)):
    /// at once when final, after the operation timeout when
    /// [retryable](ClientError::is_retryable).
    pub async fn partitioned_topic_metadata(&self, topic: &TopicName) -> Result<u32, ClientError> {
        self.retry_passing(
            topic,
            "partitioned metadata",
            || lookup::partitioned_metadata(&self.inner.pool, &self.inner.service, topic),
            ClientError::is_retryable,
        )
        .await
    }

    /// Runs `attempt` again, with backoff, while it fails in a way that
    /// `passing` says may pass (a lost connection, a broker not ready),
    /// until the operation timeout has gone by since the first try: as the
    /// Java client does for metadata and for a producer's or consumer's
    /// creation. The last failure is returned.
    pub(crate) async fn retry_passing<T, E, F>(
        &self,
        topic: &TopicName,
        what: &'static str,
        mut attempt: impl FnMut() -> F,
        passing: impl Fn(&E) -> bool,
    ) -> Result<T, E>
    where
        F: std::future::Future<Output = Result<T, E>>,
        E: std::fmt::Display,
    {
        let deadline = tokio::time::Instant::now().checked_add(self.inner.operation_timeout);
        let mut backoff = crate::backoff::Backoff::default();
        loop {
            match attempt().await {
                Err(e) if passing(&e) => {
                    let delay = backoff.next_delay();
                    let next = tokio::time::Instant::now().checked_add(delay);
                    if matches!((next, deadline), (Some(next), Some(end)) if next >= end) {
                        return Err(e);
                    }
                    tracing::debug!(topic = %topic, error = %e, ?delay, "{what} tried again");
                    tokio::time::sleep(delay).await;
                }
                answer => return answer,
            }
        }
    }

    /// The client-wide memory budget producers take from before queuing a
    /// message, and its size in bytes.
    pub(crate) fn memory(&self) -> (&Arc<tokio::sync::Semaphore>, usize) {
        (&self.inner.memory, self.inner.memory_limit)
    }

    /// The part of the memory limit receiver queues may hold (see
    /// `client/memory.rs`).
    pub(crate) fn queue_memory(&self) -> &Arc<memory::QueueBudget> {
        &self.inner.queue_memory
    }

    /// What producers and consumers record beyond their counters.
    pub(crate) fn stats_settings(&self) -> &crate::stats::StatsSettings {
        &self.inner.stats
    }

    /// Closes every connection (flushing what is queued on them); requests
    /// still waiting fail with [`ConnectionError::Closed`](crate::connection::ConnectionError::Closed),
    /// and later calls with [`ClientError::Closed`]. Affects all clones.
    pub async fn close(&self) {
        self.inner.pool.close().await;
    }
}

/// Configures and builds a [`Client`].
#[derive(Debug, Clone)]
#[must_use]
pub struct ClientBuilder {
    service_url: Option<String>,
    operation_timeout: Duration,
    keepalive_interval: Duration,
    connection_timeout: Duration,
    connections_per_broker: usize,
    connector: Option<Arc<dyn Connector>>,
    memory_limit: usize,
    max_message_size: usize,
    auth: Option<Arc<dyn Authentication>>,
    transactions: bool,
    #[cfg(feature = "tls")]
    tls: tls::TlsOptions,
    /// Set by the methods in `crate::stats`.
    pub(crate) stats: crate::stats::StatsSettings,
}

impl Default for ClientBuilder {
    fn default() -> Self {
        Self {
            service_url: None,
            operation_timeout: Duration::from_secs(30),
            keepalive_interval: Duration::from_secs(30),
            connection_timeout: Duration::from_secs(10),
            connections_per_broker: 1,
            connector: None,
            memory_limit: crate::producer::DEFAULT_MEMORY_LIMIT,
            max_message_size: crate::wire::DEFAULT_MAX_MESSAGE_SIZE,
            auth: None,
            transactions: false,
            #[cfg(feature = "tls")]
            tls: tls::TlsOptions::default(),
            stats: crate::stats::StatsSettings::default(),
        }
    }
}

impl ClientBuilder {
    /// The cluster to talk to: `pulsar://host[:port]` (port 6650 by
    /// default) or, with the `tls` cargo feature, `pulsar+ssl://host[:port]`
    /// (port 6651 by default; lookups then follow the brokers' TLS URLs and
    /// never fall back to plaintext). Required.
    ///
    /// Several hosts, `pulsar://h1:6650,h2:6650`, share the scheme: each
    /// lookup starts at the next host in turn and tries the others when
    /// that one cannot be reached.
    pub fn service_url(mut self, url: impl Into<String>) -> Self {
        self.service_url = Some(url.into());
        self
    }

    /// How long a request (lookup, producer creation, subscribe, …) waits
    /// for its answer. Default 30 s.
    pub const fn operation_timeout(mut self, timeout: Duration) -> Self {
        self.operation_timeout = timeout;
        self
    }

    /// How often connections check that their broker is alive. Every
    /// interval a connection sends a PING, unless no frame at all (PONG or
    /// any other) has come from the broker since the PING of the previous
    /// interval: then it is declared dead (`KeepaliveExpired`) and what was
    /// on it reconnects. A silent broker is so found between one and two
    /// intervals after its last frame. Default 30 s.
    pub const fn keepalive_interval(mut self, interval: Duration) -> Self {
        self.keepalive_interval = interval;
        self
    }

    /// How long opening a socket to a broker may take. Default 10 s.
    pub const fn connection_timeout(mut self, timeout: Duration) -> Self {
        self.connection_timeout = timeout;
        self
    }

    /// How many connections to open to each broker (requests spread over
    /// them round-robin). Default 1.
    pub const fn connections_per_broker(mut self, n: usize) -> Self {
        self.connections_per_broker = n;
        self
    }

    /// How many payload bytes all producers of the client may hold before
    /// their receipts (batched or in flight), together with what the
    /// consumers' receiver queues hold, which is at most half of it (so a
    /// loop that receives, sends and waits for the receipt before it
    /// receives again is slowed by the limit, never stopped). When it is
    /// used up, `send` waits (at most its send timeout, then fails with
    /// [`ProducerError::Full`](crate::producer::ProducerError::Full)) or
    /// fails at once, as each producer's
    /// [`when_full`](crate::producer::ProducerBuilder::when_full) says; when
    /// the queues' half is used up, a consumer whose queue holds messages
    /// grants the broker no more permits until bytes are released. It is
    /// also the largest a compressed message may be once decompressed
    /// (when more than [`max_message_size`](Self::max_message_size)): a
    /// larger one could not be held, and is reported to the broker as
    /// corrupt. Default 64 MiB.
    pub const fn memory_limit(mut self, bytes: usize) -> Self {
        self.memory_limit = bytes;
        self
    }

    /// The largest message the client accepts from a broker: a frame over
    /// the smaller of this and the broker's own `max_message_size` (plus
    /// 10 KiB for command and metadata) ends the connection before its
    /// bytes are read. It bounds what crosses the wire: a compressed
    /// message may be larger once decompressed, up to the
    /// [memory limit](Self::memory_limit), as the broker and the Java
    /// client allow.
    /// A broker cannot raise it. Default 5 MiB (the broker's default):
    /// raise it for brokers configured to take larger messages.
    pub const fn max_message_size(mut self, bytes: usize) -> Self {
        self.max_message_size = bytes;
        self
    }

    /// Enables transactions ([`Client::transaction`]), as the Java client's
    /// `enableTransaction`: the client finds the cluster's transaction
    /// coordinators on its first transaction, and its producers tell the
    /// broker they may send in transactions. The broker must run its
    /// coordinator (`transactionCoordinatorEnabled=true`). Default off.
    pub const fn enable_transaction(mut self, enabled: bool) -> Self {
        self.transactions = enabled;
        self
    }

    /// Opens broker streams with `connector` instead of plain TCP (custom
    /// transports, in-memory brokers in tests).
    pub fn connector(mut self, connector: impl Connector) -> Self {
        self.connector = Some(Arc::new(connector));
        self
    }

    /// Authenticates every connection with `auth`: its credentials go in
    /// CONNECT, and fresh ones answer each AUTH_CHALLENGE (so connections
    /// survive token rotation). Credentials are never logged.
    ///
    /// # Examples
    /// ```no_run
    /// use pulsar_wire::{Client, auth::TokenAuthentication};
    /// # async fn demo() -> Result<(), pulsar_wire::Error> {
    /// let client = Client::builder()
    ///     .service_url("pulsar://broker.example.com:6650")
    ///     .authentication(TokenAuthentication::from_file("/run/secrets/pulsar-token"))
    ///     .build()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn authentication(mut self, auth: impl Authentication) -> Self {
        self.auth = Some(Arc::new(auth));
        self
    }

    /// Trusts the CA certificates in this PEM file for `pulsar+ssl://`
    /// instead of the operating system's roots. Read when the client is built.
    #[cfg(feature = "tls")]
    pub fn tls_trust_certs_file(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.tls.trust = Some(tls::Pem::File(path.into()));
        self
    }

    /// Trusts the CA certificates in these PEM bytes for `pulsar+ssl://`
    /// instead of the operating system's roots.
    #[cfg(feature = "tls")]
    pub fn tls_trust_certs_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls.trust = Some(tls::Pem::Bytes(pem.into()));
        self
    }

    /// Presents this client certificate (chain) and private key, both PEM
    /// files, to brokers that require mutual TLS. Read when the client is built.
    #[cfg(feature = "tls")]
    pub fn tls_client_auth_files(
        mut self,
        certificate: impl Into<std::path::PathBuf>,
        key: impl Into<std::path::PathBuf>,
    ) -> Self {
        self.tls.client_auth = Some((
            tls::Pem::File(certificate.into()),
            tls::Pem::File(key.into()),
        ));
        self
    }

    /// Like [`tls_client_auth_files`](Self::tls_client_auth_files), from
    /// PEM bytes (the key is never printed, not even by `Debug`).
    #[cfg(feature = "tls")]
    pub fn tls_client_auth_pem(
        mut self,
        certificate: impl Into<Vec<u8>>,
        key: impl Into<Vec<u8>>,
    ) -> Self {
        self.tls.client_auth = Some((
            tls::Pem::Bytes(certificate.into()),
            tls::Pem::Bytes(key.into()),
        ));
        self
    }

    /// **Dangerous**: accepts any broker certificate for any host name, so
    /// anyone on the network path can impersonate the broker and read the
    /// credentials. For throw-away test clusters only. Building the client
    /// logs a warning.
    #[cfg(feature = "tls")]
    pub fn danger_accept_invalid_certs(mut self) -> Self {
        self.tls.danger_accept_invalid_certs = true;
        self
    }

    /// Checks the settings and connects to the service URL.
    ///
    /// # Errors
    /// [`ClientError::InvalidOption`] for a missing service URL or a zero
    /// count or duration, [`ClientError::TlsNotEnabled`] for
    /// `pulsar+ssl://` without the `tls` feature, [`ClientError::TlsConfig`]
    /// for unusable TLS files, [`ClientError::UnsupportedScheme`] /
    /// [`ClientError::InvalidUrl`] for the URL, [`ClientError::Connect`] if
    /// the service URL cannot be reached. All wrapped in [`Error::Client`].
    pub async fn build(self) -> Result<Client, Error> {
        let invalid = |option, reason| ClientError::InvalidOption { option, reason };
        let service_url = self
            .service_url
            .ok_or_else(|| invalid("service_url", "is required"))?;
        let service = ServiceHosts::parse(&service_url)?;
        if self.memory_limit == 0 || self.memory_limit > tokio::sync::Semaphore::MAX_PERMITS {
            return Err(invalid(
                "memory_limit",
                "must be at least 1 byte and fit a semaphore",
            )
            .into());
        }
        if self.connections_per_broker == 0 {
            return Err(invalid("connections_per_broker", "must be at least 1").into());
        }
        for (option, value) in [
            ("operation_timeout", self.operation_timeout),
            ("keepalive_interval", self.keepalive_interval),
            ("connection_timeout", self.connection_timeout),
        ] {
            if value.is_zero() {
                return Err(invalid(option, "must be longer than zero").into());
            }
        }
        if self.max_message_size < 1024 {
            return Err(invalid("max_message_size", "must be at least 1 KiB").into());
        }
        let mut options = ConnectionOptions::default()
            .operation_timeout(self.operation_timeout)
            .keepalive_interval(self.keepalive_interval)
            .max_message_size(self.max_message_size);
        if let Some(auth) = self.auth {
            options = options.shared_authentication(auth);
        }
        #[cfg(feature = "tls")]
        let tls = match service.is_tls() {
            true => Some(self.tls.build()?),
            false => None,
        };
        #[cfg(not(feature = "tls"))]
        if service.is_tls() {
            return Err(ClientError::TlsNotEnabled { url: service_url }.into());
        }
        let pool = Pool::new(PoolConfig {
            connector: self.connector.unwrap_or_else(|| Arc::new(TcpConnector)),
            options,
            connection_timeout: self.connection_timeout,
            connections_per_broker: self.connections_per_broker,
            require_tls: service.is_tls(),
            #[cfg(feature = "tls")]
            tls,
        });
        // Fail fast on an unreachable cluster (no host answers); the
        // connection stays pooled.
        service.connect(&pool).await?;
        let memory = Arc::new(tokio::sync::Semaphore::new(self.memory_limit));
        let queue_memory = Arc::new(memory::QueueBudget::new(memory.clone(), self.memory_limit));
        Ok(Client {
            inner: Arc::new(Inner {
                service_url,
                service,
                pool,
                operation_timeout: self.operation_timeout,
                memory,
                memory_limit: self.memory_limit,
                queue_memory,
                behind_proxy: AtomicBool::new(false),
                coordinators: self.transactions.then(Default::default),
                stats: self.stats,
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(not(feature = "tls"))]
    #[test]
    fn pulsar_ssl_without_the_feature_says_to_enable_it() {
        let err = build_error(Client::builder().service_url("pulsar+ssl://b:6651"));
        assert!(matches!(err, ClientError::TlsNotEnabled { .. }), "{err:?}");
        assert!(err.to_string().contains("`tls` cargo feature"), "{err}");
    }

    fn build_error(builder: ClientBuilder) -> ClientError {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        match rt.block_on(builder.build()) {
            Err(Error::Client(e)) => e,
            other => panic!("expected a client error, got {other:?}"),
        }
    }

    #[test]
    fn builder_validates_before_connecting() {
        assert!(matches!(
            build_error(Client::builder()),
            ClientError::InvalidOption {
                option: "service_url",
                ..
            }
        ));
        assert!(matches!(
            build_error(Client::builder().service_url("pulsar+tls://b:6651")),
            ClientError::UnsupportedScheme { ref scheme, .. } if scheme == "pulsar+tls"
        ));
        assert!(matches!(
            build_error(
                Client::builder()
                    .service_url("pulsar://b")
                    .connections_per_broker(0)
            ),
            ClientError::InvalidOption {
                option: "connections_per_broker",
                ..
            }
        ));
        assert!(matches!(
            build_error(
                Client::builder()
                    .service_url("pulsar://b")
                    .operation_timeout(Duration::ZERO)
            ),
            ClientError::InvalidOption {
                option: "operation_timeout",
                ..
            }
        ));
    }
}
