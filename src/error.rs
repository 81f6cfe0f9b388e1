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
    /// A transaction failed or could not begin, commit or abort.
    #[error(transparent)]
    Transaction(#[from] crate::transaction::TransactionError),
    /// A consumer call failed: a setting or call the caller got wrong, or
    /// what the broker answered.
    #[error(transparent)]
    Consumer(#[from] crate::consumer::ConsumerError),
    /// A dead-letter redrive stopped.
    #[error(transparent)]
    Redrive(#[from] crate::consumer::RedriveError),
    /// A value that cannot be encoded or decoded with its schema.
    #[error(transparent)]
    Schema(#[from] crate::schema::SchemaError),
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

    /// Whether the same call may succeed if made again later (a lost
    /// connection, a timeout, a busy broker, refused credentials that may
    /// be renewed): the layer's own `is_retryable` ([`ConnectionError`],
    /// [`ClientError`], [`ProducerError`], [`ConsumerError`]). False for
    /// bytes, names and ids that are not valid, misuse, and final refusals.
    ///
    /// [`ConnectionError`]: crate::connection::ConnectionError::is_retryable
    /// [`ClientError`]: crate::client::ClientError::is_retryable
    /// [`ProducerError`]: crate::producer::ProducerError::is_retryable
    /// [`ConsumerError`]: crate::consumer::ConsumerError::is_retryable
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Connection(e) => e.is_retryable(),
            Self::Client(e) => e.is_retryable(),
            Self::Producer(e) => e.is_retryable(),
            Self::Consumer(e) => e.is_retryable(),
            _ => false,
        }
    }

    /// Whether what failed (a connection, the client, a producer or a
    /// consumer) is closed: every later call on it fails the same way.
    pub fn is_closed(&self) -> bool {
        match self {
            Self::Connection(e) => e.is_closed(),
            Self::Client(e) => e.is_closed(),
            Self::Producer(e) => e.is_closed(),
            Self::Consumer(e) => e.is_closed(),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::client::ClientError;
    use crate::connection::ConnectionError;
    use crate::consumer::ConsumerError;
    use crate::producer::ProducerError;
    use crate::proto::ServerError;

    fn refused(code: ServerError) -> ConnectionError {
        ConnectionError::Server {
            op: "SUBSCRIBE",
            code,
            message: String::new(),
        }
    }

    #[test]
    fn every_layer_defers_to_the_connection_for_what_is_retryable() {
        let passing = [
            ConnectionError::Disconnected,
            ConnectionError::Timeout {
                op: "LOOKUP",
                after: Duration::from_secs(30),
            },
            refused(ServerError::ServiceNotReady),
            refused(ServerError::AuthenticationError),
        ];
        let final_ = [
            refused(ServerError::TopicNotFound),
            refused(ServerError::ProducerFenced),
            ConnectionError::TooLarge { size: 9, max: 8 },
        ];
        for (source, retryable) in passing
            .into_iter()
            .map(|e| (e, true))
            .chain(final_.into_iter().map(|e| (e, false)))
        {
            let client = ClientError::Request {
                op: "LOOKUP",
                topic: "t".into(),
                source: source.clone(),
            };
            let producer = ProducerError::Create {
                topic: "t".into(),
                source: source.clone(),
            };
            let consumer = ConsumerError::Request {
                op: "SUBSCRIBE",
                topic: "t".into(),
                source: source.clone(),
            };
            assert_eq!(source.is_retryable(), retryable, "{source}");
            assert_eq!(source.is_final(), !retryable, "{source}");
            assert_eq!(client.is_retryable(), retryable, "{client}");
            assert_eq!(producer.is_retryable(), retryable, "{producer}");
            assert_eq!(consumer.is_retryable(), retryable, "{consumer}");
            assert_eq!(Error::from(consumer).is_retryable(), retryable);
            assert_eq!(Error::from(producer).is_retryable(), retryable);
        }
    }

    #[test]
    fn closed_handles_are_closed_and_not_retryable_and_misuse_is_neither() {
        let closed = [
            Error::from(ClientError::Closed),
            Error::from(ProducerError::Closed),
            Error::from(ProducerError::TaskFailed),
            Error::from(ConsumerError::Closed),
            Error::from(ConsumerError::Client {
                topic: "t".into(),
                source: ClientError::Closed,
            }),
            Error::from(ConnectionError::Closed),
        ];
        for e in &closed {
            assert!(e.is_closed(), "{e}");
        }
        for e in &closed[..5] {
            assert!(!e.is_retryable(), "{e}");
        }
        let misuse = [
            Error::from(ConsumerError::NoTopic),
            Error::from(ProducerError::ChunkingWithBatching),
            Error::from(ProducerError::MessageTooLarge { size: 9, max: 8 }),
        ];
        for e in &misuse {
            assert!(!e.is_closed() && !e.is_retryable(), "{e}");
        }
        let passing = [
            Error::from(ProducerError::Timeout {
                after: Duration::from_secs(30),
            }),
            Error::from(ConsumerError::UnexpectedResponse {
                op: "SEEK",
                topic: "t".into(),
                got: "PONG",
            }),
        ];
        for e in &passing {
            assert!(e.is_retryable() && !e.is_closed(), "{e}");
        }
    }
}
