//! [`ClientError`]: what can go wrong in the client layer (URLs, topic
//! names, connecting, lookup).

use crate::client::InvalidTopicName;
use crate::connection::ConnectionError;

/// An error of the client layer. Every variant carries what it concerns (the
/// URL, topic or address) and, where a connection failed, its
/// [`ConnectionError`] as the source.
///
/// It is `Clone` because concurrent callers waiting for the same connection
/// attempt all receive its outcome.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// A URL that is not `pulsar://host[:port]`.
    #[error("invalid URL {url:?}: {problem}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        problem: UrlProblem,
    },
    /// A URL whose scheme this client cannot speak: only `pulsar://` and
    /// `pulsar+ssl://` are supported.
    #[error("URL {url:?} uses scheme {scheme:?}; this client supports pulsar:// and pulsar+ssl://")]
    UnsupportedScheme {
        /// The URL as given.
        url: String,
        /// Its scheme, e.g. `pulsar+ssl`.
        scheme: String,
    },
    /// A `pulsar+ssl://` URL, but this build of pulsar-wire has no TLS.
    /// It never falls back to plaintext.
    #[error(
        "URL {url:?} needs TLS, which this build lacks: enable the `tls` cargo feature of pulsar-wire"
    )]
    TlsNotEnabled {
        /// The URL (or `host:port`) that needs TLS.
        url: String,
    },
    /// The TLS settings cannot be used (unreadable or invalid CA file,
    /// client certificate or key; no system roots).
    #[error("TLS configuration: {problem}")]
    TlsConfig {
        /// What is wrong.
        problem: TlsConfigProblem,
    },
    /// A string that is not a topic name.
    #[error(transparent)]
    InvalidTopic(#[from] InvalidTopicName),
    /// A builder setting that cannot work.
    #[error("invalid {option}: {reason}")]
    InvalidOption {
        /// The builder method, e.g. `"connections_per_broker"`.
        option: &'static str,
        /// Why the value is refused.
        reason: &'static str,
    },
    /// Opening a connection to a broker failed (TCP connect or handshake).
    #[error("cannot connect to {address}: {source}")]
    Connect {
        /// The broker address, `host:port` (for a proxied connection, the proxy's).
        address: String,
        /// Why.
        source: ConnectionError,
    },
    /// The task opening a connection to a broker ended without an
    /// outcome: it panicked (a bug in pulsar-wire or in a custom
    /// [`Connector`](super::Connector) or
    /// [`Authentication`](crate::auth::Authentication)), or the runtime is
    /// shutting down. The attempt is forgotten: the next request connects
    /// afresh.
    #[error("the task connecting to {address} panicked or was cancelled")]
    ConnectTaskFailed {
        /// The broker address, `host:port` (for a proxied connection, the proxy's).
        address: String,
    },
    /// A lookup-service request for a topic failed.
    #[error("{op} for {topic} failed: {source}")]
    Request {
        /// The request, e.g. `"LOOKUP"` or `"PARTITIONED_METADATA"`.
        op: &'static str,
        /// The topic it was for.
        topic: String,
        /// Why: a broker error code, a timeout, a lost connection.
        source: ConnectionError,
    },
    /// The broker answered with a command that does not answer the request.
    #[error("{op} for {topic} was answered with {got}")]
    UnexpectedResponse {
        /// The request.
        op: &'static str,
        /// The topic it was for.
        topic: String,
        /// The command type that came back.
        got: &'static str,
    },
    /// Lookup kept being redirected (a loop, or a cluster in flux).
    #[error("lookup of {topic} gave up after {redirects} redirects (last to {last})")]
    TooManyRedirects {
        /// The topic.
        topic: String,
        /// Redirects followed.
        redirects: u32,
        /// The last broker redirected to.
        last: String,
    },
    /// A lookup answer named no broker URL of the scheme the client uses
    /// (`broker_service_url` for `pulsar://`, `broker_service_url_tls` for
    /// `pulsar+ssl://`; a TLS client never follows a plaintext URL).
    #[error("lookup of {topic} named no {scheme} broker URL")]
    NoBrokerUrl {
        /// The topic.
        topic: String,
        /// The scheme wanted: `"pulsar://"` or `"pulsar+ssl://"`.
        scheme: &'static str,
    },
    /// A lookup answer named a broker URL that cannot be used.
    #[error("lookup of {topic} named an unusable broker URL: {source}")]
    BadBrokerUrl {
        /// The topic.
        topic: String,
        /// Why the URL is unusable (carries the URL).
        source: Box<Self>,
    },
    /// A plaintext (`pulsar://`) broker address for a client whose service
    /// URL is `pulsar+ssl://`: refused before any byte is sent, so neither
    /// credentials nor messages ever travel in the clear.
    #[error(
        "refused a plaintext connection to {url}: the service URL is pulsar+ssl:// and TLS never downgrades"
    )]
    PlaintextRefused {
        /// The plaintext URL that was refused.
        url: String,
    },
    /// The client was closed.
    #[error("the client is closed")]
    Closed,
}

impl ClientError {
    /// Whether this is an authentication or authorization failure, and
    /// which (see [`Error::auth_failure`](crate::error::Error::auth_failure)).
    pub fn auth_failure(&self) -> Option<crate::auth::AuthFailure> {
        crate::auth::failure_in(self)
    }

    /// Whether the same call may succeed if made again later: reaching the
    /// broker or a request failed with a retryable
    /// [`ConnectionError`](crate::connection::ConnectionError::is_retryable),
    /// the task connecting to it failed, or the broker's lookup answers
    /// did not settle (an unexpected answer,
    /// too many redirects, no usable broker URL). False for a setting that
    /// cannot work (URL, scheme, TLS, topic name, option) and once the
    /// client is [closed](Self::is_closed).
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Connect { source, .. } | Self::Request { source, .. } => source.is_retryable(),
            Self::ConnectTaskFailed { .. }
            | Self::UnexpectedResponse { .. }
            | Self::TooManyRedirects { .. }
            | Self::NoBrokerUrl { .. }
            | Self::BadBrokerUrl { .. } => true,
            _ => false,
        }
    }

    /// Whether a producer's or consumer's creation tries again after this
    /// (see `ConnectionError::is_passing_at_creation`).
    pub(crate) fn is_passing_at_creation(&self) -> bool {
        match self {
            Self::Connect { source, .. } | Self::Request { source, .. } => {
                source.is_passing_at_creation()
            }
            _ => self.is_retryable(),
        }
    }

    /// Whether the client was closed: every later call fails the same way.
    pub fn is_closed(&self) -> bool {
        matches!(self, Self::Closed)
    }

    /// Whether a reconnect (of a producer or a consumer) gives up on this:
    /// the client is closed, or the broker's refusal is
    /// [final](crate::connection::ConnectionError::is_final).
    pub(crate) fn is_final(&self) -> bool {
        match self {
            Self::Connect { source, .. } | Self::Request { source, .. } => source.is_final(),
            Self::Closed => true,
            _ => false,
        }
    }
}

/// What is wrong with a URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UrlProblem {
    /// No `scheme://` prefix.
    #[error("no scheme (expected pulsar://host:port)")]
    MissingScheme,
    /// The host is empty or malformed.
    #[error("missing or malformed host")]
    InvalidHost,
    /// The port is not a number in 1..=65535.
    #[error("the port is not a number between 1 and 65535")]
    InvalidPort,
    /// Several comma-separated hosts where one broker address is expected
    /// (a service URL may name several; a broker URL names one).
    #[error("several hosts where one broker address is expected")]
    MultipleHosts,
    /// A path after the host and port.
    #[error("unexpected path after host:port")]
    UnexpectedPath,
    /// A lookup answer's URL whose scheme differs from the service URL's
    /// (a plaintext broker for a TLS client, or the reverse).
    #[error("its scheme differs from the service URL's (pulsar:// vs pulsar+ssl://)")]
    SchemeMismatch,
}

/// What is wrong with the TLS settings. Names files, never their content.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum TlsConfigProblem {
    /// A PEM file could not be read or parsed.
    #[error("cannot use {what} {path:?}: {reason}")]
    File {
        /// Which setting: `"CA file"`, `"client certificate"`, `"client key"`.
        what: &'static str,
        /// The file.
        path: std::path::PathBuf,
        /// Why (IO or PEM error, as text: these carry no secrets).
        reason: String,
    },
    /// PEM data held no certificate, or no private key.
    #[error("{what} holds no usable {expected}")]
    Empty {
        /// Which setting.
        what: &'static str,
        /// What was looked for: `"certificate"` or `"private key"`.
        expected: &'static str,
    },
    /// The client certificate and key do not fit together, or a CA
    /// certificate is malformed.
    #[error("{what} rejected: {reason}")]
    Rejected {
        /// Which setting.
        what: &'static str,
        /// rustls's reason.
        reason: String,
    },
    /// No trusted roots could be loaded from the operating system.
    #[error("no system root certificates found; give a CA file")]
    NoSystemRoots,
}
