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
    /// A URL whose scheme this client cannot speak (yet): only `pulsar://`
    /// is supported; `pulsar+ssl://` (TLS) comes with a later release.
    #[error("URL {url:?} uses scheme {scheme:?}; this client supports only pulsar:// for now")]
    UnsupportedScheme {
        /// The URL as given.
        url: String,
        /// Its scheme, e.g. `pulsar+ssl`.
        scheme: String,
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
    /// A lookup answer named no `pulsar://` broker URL (e.g. a TLS-only broker).
    #[error("lookup of {topic} named no pulsar:// broker URL")]
    NoBrokerUrl {
        /// The topic.
        topic: String,
    },
    /// A lookup answer named a broker URL that cannot be used.
    #[error("lookup of {topic} named an unusable broker URL: {source}")]
    BadBrokerUrl {
        /// The topic.
        topic: String,
        /// Why the URL is unusable (carries the URL).
        source: Box<Self>,
    },
    /// The client was closed.
    #[error("the client is closed")]
    Closed,
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
    /// Several comma-separated hosts (not supported yet).
    #[error("several hosts are not supported yet; give one")]
    MultipleHosts,
    /// A path after the host and port.
    #[error("unexpected path after host:port")]
    UnexpectedPath,
}
