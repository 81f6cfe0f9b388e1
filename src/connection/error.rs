//! [`ConnectionError`]: what can go wrong on one broker connection.

use std::sync::Arc;
use std::time::Duration;

use crate::auth::{AuthError, AuthFailure};
use crate::codec::CodecError;
use crate::proto::ServerError;
use crate::wire::FrameError;

/// An error of one broker connection: a request the broker refused or never
/// answered, or the connection itself failing.
///
/// It is `Clone` because one failure reaches many parties at once: when the
/// socket dies, every waiting request and every registered producer and
/// consumer gets the same error (the IO and frame errors are shared behind an
/// [`Arc`]).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectionError {
    /// The broker answered the request with an error (`ERROR`, or a response
    /// that carries an error code, such as a failed LOOKUP).
    #[error("broker rejected {op}: {code:?} ({message})")]
    Server {
        /// The request that failed, e.g. `"LOOKUP"`.
        op: &'static str,
        /// The broker's error code.
        code: ServerError,
        /// The broker's explanation.
        message: String,
    },
    /// The broker did not answer within the operation timeout. A late answer
    /// is dropped: request ids are never reused on a connection.
    #[error("{op} got no answer within {after:?}")]
    Timeout {
        /// The request that timed out, e.g. `"LOOKUP"`, or `"CONNECT"` for the handshake.
        op: &'static str,
        /// The timeout that expired.
        after: Duration,
    },
    /// The broker closed the socket.
    #[error("the broker closed the connection")]
    Disconnected,
    /// Reading or writing the socket failed.
    #[error("connection IO failed: {0}")]
    Io(#[source] Arc<std::io::Error>),
    /// The broker sent bytes that are not a valid frame; the stream cannot be trusted after that.
    #[error("broker sent an invalid frame: {0}")]
    Frame(#[source] Arc<FrameError>),
    /// The broker stayed silent for a whole keepalive interval after our PING.
    #[error("no answer to keepalive PING within {interval:?}; connection declared dead")]
    KeepaliveExpired {
        /// The keepalive interval in force.
        interval: Duration,
    },
    /// The broker took none of the bytes queued for it for a whole
    /// operation timeout (it keeps sending, say, but stopped reading).
    #[error("the broker took no bytes for {after:?}; connection declared dead")]
    WriteStalled {
        /// The operation timeout in force.
        after: Duration,
    },
    /// The broker sent a consumer more entries than it granted permits
    /// (FLOW): it ignores flow control, so the connection is dropped before
    /// the consumer's buffer grows without bound.
    #[error("broker sent consumer {consumer} an entry beyond its permits; connection dropped")]
    PermitsExceeded {
        /// The consumer id on this connection.
        consumer: u64,
    },
    /// The broker answered with a command that does not fit the request
    /// (during the handshake, or a response of the wrong kind).
    #[error("broker answered {op} with an unexpected {got}")]
    UnexpectedResponse {
        /// The request, e.g. `"CONNECT"`.
        op: &'static str,
        /// The command type that came back, e.g. `"AUTH_CHALLENGE"`.
        got: &'static str,
    },
    /// An outgoing frame is larger than the broker accepts (`max_message_size` from CONNECTED).
    #[error("frame of {size} bytes exceeds the broker's limit of {max} bytes")]
    TooLarge {
        /// The encoded frame size.
        size: usize,
        /// The limit in force on this connection.
        max: usize,
    },
    /// The broker refused the credentials sent in CONNECT (or in answer to
    /// its AUTH_CHALLENGE during the handshake). `failure` is
    /// [`AuthFailure::Expired`] when the token's `exp` had passed, else
    /// [`AuthFailure::Rejected`].
    #[error("broker refused the {method:?} credentials ({failure}): {message}")]
    AuthenticationRefused {
        /// The method of the refused credentials, `"none"` if none were sent.
        method: Box<str>,
        /// Why, as far as the client can tell.
        failure: AuthFailure,
        /// The broker's explanation (Apache Pulsar: "Failed to authenticate").
        message: String,
    },
    /// No credentials could be had for CONNECT or for answering the
    /// broker's AUTH_CHALLENGE (the connection is closed then).
    #[error("authentication failed: {0}")]
    Auth(#[from] AuthError),
    /// TLS failed: the handshake (certificate not trusted, wrong name,
    /// expired; a server that does not speak TLS) or, later, an alert from
    /// the server (e.g. refusing our client certificate).
    #[error("TLS failed: {problem}")]
    Tls {
        /// What went wrong.
        problem: TlsProblem,
        /// The underlying error (from rustls).
        source: Arc<std::io::Error>,
    },
    /// This client closed the connection (or every handle to it was dropped).
    #[error("connection closed by the client")]
    Closed,
}

/// Why TLS failed, in terms a caller can act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TlsProblem {
    /// The certificate does not name the host connected to.
    #[error("the server certificate is not valid for this host name")]
    HostnameMismatch,
    /// The certificate is not signed by a trusted CA.
    #[error("the server certificate is signed by an unknown CA")]
    UnknownIssuer,
    /// The certificate has expired.
    #[error("the server certificate has expired")]
    Expired,
    /// The certificate is not valid yet.
    #[error("the server certificate is not valid yet")]
    NotYetValid,
    /// Another problem with the server certificate (bad signature, revoked, …).
    #[error("the server certificate is invalid")]
    InvalidCertificate,
    /// The server sent a fatal alert: typically it refused our client
    /// certificate (mutual TLS) or had none to accept.
    #[error("the server rejected the TLS session (client certificate missing or refused?)")]
    RejectedByServer,
    /// The server answered with something that is not TLS (a plaintext port?).
    #[error("the server does not speak TLS (a plaintext port?)")]
    NotTls,
    /// The server closed the connection in the middle of the handshake (a plaintext port?).
    #[error("the server closed the connection during the TLS handshake (a plaintext port?)")]
    ClosedDuringHandshake,
    /// The host is neither a DNS name nor an IP address TLS can verify.
    #[error("the host is not a valid TLS server name")]
    InvalidServerName,
    /// Anything else rustls reports.
    #[error("TLS error")]
    Other,
}

impl From<std::io::Error> for ConnectionError {
    fn from(e: std::io::Error) -> Self {
        #[cfg(feature = "tls")]
        if let Some(problem) = tls_problem(&e) {
            return Self::Tls {
                problem,
                source: Arc::new(e),
            };
        }
        Self::Io(Arc::new(e))
    }
}

/// Recognises the rustls error inside an IO error from a TLS stream.
#[cfg(feature = "tls")]
fn tls_problem(e: &std::io::Error) -> Option<TlsProblem> {
    use rustls::{CertificateError as C, Error as E};
    let tls = e.get_ref()?.downcast_ref::<E>()?;
    Some(match tls {
        E::InvalidCertificate(C::NotValidForName | C::NotValidForNameContext { .. }) => {
            TlsProblem::HostnameMismatch
        }
        E::InvalidCertificate(C::UnknownIssuer) => TlsProblem::UnknownIssuer,
        E::InvalidCertificate(C::Expired | C::ExpiredContext { .. }) => TlsProblem::Expired,
        E::InvalidCertificate(C::NotValidYet | C::NotValidYetContext { .. }) => {
            TlsProblem::NotYetValid
        }
        E::InvalidCertificate(_) => TlsProblem::InvalidCertificate,
        E::AlertReceived(_) => TlsProblem::RejectedByServer,
        E::InvalidMessage(_)
        | E::InappropriateMessage { .. }
        | E::InappropriateHandshakeMessage { .. } => TlsProblem::NotTls,
        _ => TlsProblem::Other,
    })
}

impl From<FrameError> for ConnectionError {
    fn from(e: FrameError) -> Self {
        Self::Frame(Arc::new(e))
    }
}

impl From<CodecError> for ConnectionError {
    fn from(e: CodecError) -> Self {
        match e {
            CodecError::Frame(e) => e.into(),
            CodecError::Io(e) => e.into(),
        }
    }
}

/// Broker refusals no later attempt can change: the topic or subscription
/// is gone or terminated, the producer was fenced, the operation is not
/// allowed, the schema is incompatible, the topic name is invalid, or the
/// protocol version is unsupported. Every other code is passing trouble (a
/// busy or unready broker, a producer or consumer name still in use) or
/// may change with time: refused credentials count as passing, because a
/// rotated token may reach the client seconds later.
pub(crate) const fn is_final_code(code: ServerError) -> bool {
    matches!(
        code,
        ServerError::TopicNotFound
            | ServerError::SubscriptionNotFound
            | ServerError::TopicTerminatedError
            | ServerError::ProducerFenced
            | ServerError::NotAllowedError
            | ServerError::IncompatibleSchema
            | ServerError::InvalidTopicName
            | ServerError::UnsupportedVersionError
    )
}

impl ConnectionError {
    /// Whether trying again can never help: the broker refused for good (the
    /// topic or subscription is gone or terminated, the producer fenced,
    /// the operation not allowed, the schema incompatible, the name invalid,
    /// the protocol version unsupported), or the frame is larger than the
    /// broker takes. Producers and
    /// consumers that lost their broker keep reconnecting, with backoff,
    /// until an attempt fails with one of these.
    ///
    /// # Examples
    /// ```
    /// use pulsar_wire::connection::ConnectionError;
    /// use pulsar_wire::proto::ServerError;
    /// let gone = ConnectionError::Server { op: "SUBSCRIBE", code: ServerError::TopicNotFound, message: String::new() };
    /// assert!(gone.is_final() && !gone.is_retryable());
    /// let busy = ConnectionError::Server { op: "SUBSCRIBE", code: ServerError::ServiceNotReady, message: String::new() };
    /// assert!(!busy.is_final() && busy.is_retryable());
    /// assert!(ConnectionError::Disconnected.is_retryable());
    /// ```
    pub const fn is_final(&self) -> bool {
        match self {
            Self::Server { code, .. } => is_final_code(*code),
            Self::TooLarge { .. } => true,
            _ => false,
        }
    }

    /// Whether the same call may succeed if made again later (on this
    /// connection or, once it is gone or [closed](Self::is_closed), a new
    /// one): the connection was lost, a request timed out, the broker was
    /// busy or not ready, credentials were refused (a rotated token may
    /// arrive). Exactly the errors that are not [`is_final`](Self::is_final).
    pub const fn is_retryable(&self) -> bool {
        !self.is_final()
    }

    /// Whether a producer's or consumer's creation tries again after this,
    /// until the operation timeout: a [retryable](Self::is_retryable)
    /// failure (a lost connection, a broker not ready), except refusals the
    /// caller must hear of at once, as from the Java client: the name or
    /// exclusive access is in use, credentials or permissions are refused,
    /// the producer is over its quota, or no consumer could be assigned.
    pub(crate) const fn is_passing_at_creation(&self) -> bool {
        match self {
            Self::Server { code, .. } => {
                !matches!(
                    code,
                    ServerError::ProducerBusy
                        | ServerError::ConsumerBusy
                        | ServerError::AuthenticationError
                        | ServerError::AuthorizationError
                        | ServerError::ProducerBlockedQuotaExceededError
                        | ServerError::ProducerBlockedQuotaExceededException
                        | ServerError::ConsumerAssignError
                ) && self.is_retryable()
            }
            Self::Closed => false,
            _ => self.is_retryable(),
        }
    }

    /// Whether the client closed this connection
    /// ([`Connection::close`](super::Connection::close), or the client
    /// closing): nothing more goes through it. A connection the broker or
    /// the network ended is [`is_connection_lost`](Self::is_connection_lost)
    /// but not closed.
    pub const fn is_closed(&self) -> bool {
        matches!(self, Self::Closed)
    }

    /// Whether this is an authentication or authorization failure, and which.
    ///
    /// # Examples
    /// ```
    /// use pulsar_wire::auth::AuthFailure;
    /// use pulsar_wire::connection::ConnectionError;
    /// use pulsar_wire::proto::ServerError;
    /// let refused = ConnectionError::Server {
    ///     op: "PRODUCER",
    ///     code: ServerError::AuthorizationError,
    ///     message: "Client is not authorized to Publish".into(),
    /// };
    /// assert_eq!(refused.auth_failure(), Some(AuthFailure::Unauthorized));
    /// assert_eq!(ConnectionError::Disconnected.auth_failure(), None);
    /// ```
    pub fn auth_failure(&self) -> Option<AuthFailure> {
        match self {
            Self::AuthenticationRefused { failure, .. } => Some(*failure),
            Self::Server {
                code: ServerError::AuthorizationError,
                ..
            } => Some(AuthFailure::Unauthorized),
            Self::Server {
                code: ServerError::AuthenticationError,
                ..
            } => Some(AuthFailure::Rejected),
            _ => None,
        }
    }

    /// Whether the connection itself is gone (as opposed to one request
    /// failing on a connection that still works).
    ///
    /// # Examples
    /// ```
    /// use pulsar_wire::connection::ConnectionError;
    /// assert!(ConnectionError::Disconnected.is_connection_lost());
    /// let timeout = ConnectionError::Timeout { op: "LOOKUP", after: std::time::Duration::from_secs(30) };
    /// assert!(!timeout.is_connection_lost());
    /// ```
    pub const fn is_connection_lost(&self) -> bool {
        matches!(
            self,
            Self::Disconnected
                | Self::Io(_)
                | Self::Frame(_)
                | Self::KeepaliveExpired { .. }
                | Self::WriteStalled { .. }
                | Self::PermitsExceeded { .. }
                | Self::Auth(_)
                | Self::Tls { .. }
                | Self::Closed
        )
    }
}
