//! [`ConnectionOptions`]: the settings of one broker connection.

use std::sync::Arc;
use std::time::Duration;

use crate::auth::Authentication;
use crate::wire::commands::AuthPayload;

/// How a [`Connection`](super::Connection) behaves. The
/// [`Client`](crate::client::Client) fills these in from its builder; they matter
/// directly only to code that calls [`Connection::connect`](super::Connection::connect).
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use pulsar_wire::connection::ConnectionOptions;
/// let options = ConnectionOptions::default()
///     .operation_timeout(Duration::from_secs(10))
///     .keepalive_interval(Duration::from_secs(15));
/// assert_eq!(options.get_operation_timeout(), Duration::from_secs(10));
/// ```
#[derive(Debug, Clone)]
pub struct ConnectionOptions {
    pub(crate) operation_timeout: Duration,
    pub(crate) keepalive_interval: Duration,
    pub(crate) auth: Option<Arc<dyn Authentication>>,
    pub(crate) proxy_to_broker_url: Option<String>,
    pub(crate) data_lane_capacity: usize,
    /// The largest message accepted from the broker, whatever it announces.
    pub(crate) max_message_size: usize,
    /// The peer's address, for logs only.
    pub(crate) peer: String,
}

impl Default for ConnectionOptions {
    fn default() -> Self {
        Self {
            operation_timeout: Duration::from_secs(30),
            keepalive_interval: Duration::from_secs(30),
            auth: None,
            proxy_to_broker_url: None,
            data_lane_capacity: 1000,
            max_message_size: crate::wire::DEFAULT_MAX_MESSAGE_SIZE,
            peer: String::from("unnamed"),
        }
    }
}

impl ConnectionOptions {
    /// How long a request (and the CONNECT handshake) may wait for its
    /// answer before it fails with [`ConnectionError::Timeout`](super::ConnectionError::Timeout).
    /// Default 30 s.
    #[must_use]
    pub const fn operation_timeout(mut self, timeout: Duration) -> Self {
        self.operation_timeout = timeout;
        self
    }

    /// How often the connection checks that the broker is alive. Every
    /// interval it sends a PING, unless no frame at all (PONG or any other)
    /// has come from the broker since the PING of the previous interval:
    /// then the connection is declared dead
    /// ([`ConnectionError::KeepaliveExpired`](super::ConnectionError::KeepaliveExpired)).
    /// A silent broker is so found between one and two intervals after its
    /// last frame. Default 30 s.
    #[must_use]
    pub const fn keepalive_interval(mut self, interval: Duration) -> Self {
        self.keepalive_interval = interval;
        self
    }

    /// Fixed credentials for CONNECT (and for answering AUTH_CHALLENGE).
    /// Never logged. See [`authentication`](Self::authentication) for
    /// credentials that change.
    #[must_use]
    pub fn auth(self, auth: AuthPayload) -> Self {
        self.authentication(auth)
    }

    /// Where CONNECT and AUTH_CHALLENGE answers get fresh credentials from
    /// (e.g. a [`TokenAuthentication`](crate::auth::TokenAuthentication)).
    #[must_use]
    pub fn authentication(mut self, auth: impl Authentication) -> Self {
        self.auth = Some(Arc::new(auth));
        self
    }

    /// Like [`authentication`](Self::authentication), for a provider
    /// already shared (the client hands its own to every connection).
    #[must_use]
    pub fn shared_authentication(mut self, auth: Arc<dyn Authentication>) -> Self {
        self.auth = Some(auth);
        self
    }

    /// Asks a Pulsar proxy at the other end to forward to this broker
    /// (`host:port`, as a lookup with `proxy_through_service_url` names it).
    #[must_use]
    pub fn proxy_to_broker_url(mut self, url: impl Into<String>) -> Self {
        self.proxy_to_broker_url = Some(url.into());
        self
    }

    /// How many SEND frames may wait for the socket before
    /// [`Connection::send_payload`](super::Connection::send_payload) waits
    /// too (producer backpressure). Default 1000; at least 1.
    #[must_use]
    pub fn data_lane_capacity(mut self, frames: usize) -> Self {
        self.data_lane_capacity = frames.max(1);
        self
    }

    /// The largest message this side accepts from the broker. Frames
    /// longer than the smaller of this and the broker's CONNECTED
    /// `max_message_size`, plus 10 KiB for command and metadata, end the
    /// connection before their bytes are read (a compressed payload may be
    /// larger once decompressed, as the broker allows). A broker cannot
    /// raise it. Default
    /// 5 MiB (the broker's default); at least 1 KiB.
    #[must_use]
    pub fn max_message_size(mut self, bytes: usize) -> Self {
        self.max_message_size = bytes.max(1024);
        self
    }

    /// A name for the peer in logs (the client sets the broker address).
    #[must_use]
    pub fn peer_name(mut self, name: impl Into<String>) -> Self {
        self.peer = name.into();
        self
    }

    /// The operation timeout in force.
    pub const fn get_operation_timeout(&self) -> Duration {
        self.operation_timeout
    }

    /// The largest message accepted from the broker, before CONNECTED
    /// lowers it (see [`max_message_size`](Self::max_message_size)).
    pub const fn get_max_message_size(&self) -> usize {
        self.max_message_size
    }

    /// The keepalive interval in force.
    pub const fn get_keepalive_interval(&self) -> Duration {
        self.keepalive_interval
    }
}
