//! The crate's top-level error: one variant per layer.

/// Any error this crate returns. Each layer has its own enum with the
/// context of the failure; this one wraps them so `?` works across layers.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Bytes that are not a valid frame.
    #[error(transparent)]
    Frame(#[from] crate::wire::FrameError),
    /// A frame error or the IO error under it.
    #[error(transparent)]
    Codec(#[from] crate::codec::CodecError),
    /// A batch payload that does not hold what its metadata says.
    #[error(transparent)]
    Batch(#[from] crate::wire::batch::BatchError),
    /// A payload that cannot be (de)compressed as its metadata says.
    #[error(transparent)]
    Compression(#[from] crate::compression::CompressionError),
    /// Text that is not a message id.
    #[error(transparent)]
    MessageId(#[from] crate::message_id::ParseMessageIdError),
    /// Text that is not a topic name.
    #[error(transparent)]
    TopicName(#[from] crate::client::InvalidTopicName),
    /// A broker connection failed, or a request on it did.
    #[error(transparent)]
    Connection(#[from] crate::connection::ConnectionError),
    /// Creating a producer or one of its sends failed.
    #[error(transparent)]
    Producer(#[from] crate::producer::ProducerError),
    /// The client layer failed: URL, lookup, connecting to a broker.
    #[error(transparent)]
    Client(#[from] crate::client::ClientError),
    /// A consumer call failed: a setting or call the caller got wrong, or
    /// what the broker answered.
    #[error(transparent)]
    Consumer(#[from] crate::consumer::ConsumerError),
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Whether this is an authentication or authorization failure, and
    /// which: an expired token ([`AuthFailure::Expired`](crate::auth::AuthFailure::Expired)), credentials the
    /// broker does not accept ([`AuthFailure::Rejected`](crate::auth::AuthFailure::Rejected)), or a role without
    /// permission for the topic ([`AuthFailure::Unauthorized`](crate::auth::AuthFailure::Unauthorized)). Found at
    /// whatever layer the broker's refusal arrived (CONNECT, LOOKUP,
    /// PRODUCER, SUBSCRIBE, …); `None` for every other error.
    ///
    /// # Examples
    /// ```no_run
    /// use pulsar_wire::Client;
    /// use pulsar_wire::auth::{AuthFailure, TokenAuthentication};
    /// # async fn demo() -> Result<(), pulsar_wire::Error> {
    /// let built = Client::builder()
    ///     .service_url("pulsar://broker.example.com:6650")
    ///     .authentication(TokenAuthentication::from_file("/run/secrets/pulsar-token"))
    ///     .build()
    ///     .await;
    /// match built {
    ///     Err(e) if e.auth_failure() == Some(AuthFailure::Expired) => {
    ///         eprintln!("the token has expired: renew it");
    ///     }
    ///     other => { other?; }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn auth_failure(&self) -> Option<crate::auth::AuthFailure> {
        let layer: &(dyn std::error::Error + 'static) = match self {
            Self::Connection(e) => e,
            Self::Client(e) => e,
            Self::Producer(e) => e,
            Self::Consumer(e) => e,
            _ => return None,
        };
        crate::auth::failure_in(layer)
    }
}
