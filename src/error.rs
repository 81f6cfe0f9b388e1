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
