//! [`ConnectionError`]: what can go wrong on one broker connection.

use std::sync::Arc;
use std::time::Duration;

use crate::auth::AuthError;
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
    /// No credentials could be had for CONNECT or for answering the
    /// broker's AUTH_CHALLENGE (the connection is closed then).
    #[error("authentication failed: {0}")]
    Auth(#[from] AuthError),
    /// This client closed the connection (or every handle to it was dropped).
    #[error("connection closed by the client")]
    Closed,
}

impl From<std::io::Error> for ConnectionError {
    fn from(e: std::io::Error) -> Self {
        Self::Io(Arc::new(e))
    }
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

impl ConnectionError {
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
                | Self::Auth(_)
                | Self::Closed
        )
    }
}
