//! [`ProducerError`]: what can go wrong creating a producer or sending.

use std::sync::Arc;
use std::time::Duration;

use crate::client::ClientError;
use crate::compression::CompressionError;
use crate::connection::{ConnectionError, is_final_code};
use crate::proto::ServerError;

use super::LimitExceeded;

/// An error of a producer: creating it, or one of its sends.
///
/// `Clone`, because one failure (a lost connection, a timeout) reaches every
/// send waiting at that moment. Converts into [`crate::error::Error`] with `?`.
///
/// # Examples
/// ```no_run
/// use pulsar_wire::producer::ProducerError;
/// # async fn demo(producer: pulsar_wire::producer::Producer) -> Result<(), pulsar_wire::Error> {
/// match producer.send(vec![0u8; 10 << 20]).await?.await {
///     Ok(id) => println!("stored as {id}"),
///     Err(ProducerError::MessageTooLarge { size, max }) => println!("{size} > {max}: not sent"),
///     Err(other) => return Err(other.into()),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ProducerError {
    /// A builder setting is out of range (caller misuse, found before any IO).
    #[error("invalid producer option {option}: {reason}")]
    InvalidOption {
        /// The setting.
        option: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// [`chunking`](super::ProducerBuilder::chunking) and
    /// [`batching`](super::ProducerBuilder::batching) were both turned on:
    /// a chunked message is never batched (as in the Java client).
    #[error("chunking and batching cannot both be on; turn batching off")]
    ChunkingWithBatching,
    /// Looking up the topic or reaching its broker failed.
    #[error("producer on {topic}: {source}")]
    Client {
        /// The topic.
        topic: String,
        /// The client layer's error.
        #[source]
        source: ClientError,
    },
    /// The broker refused PRODUCER, or it got no answer.
    #[error("creating producer on {topic}: {source}")]
    Create {
        /// The topic (the partition, for a partitioned topic).
        topic: String,
        /// The connection's error.
        #[source]
        source: ConnectionError,
    },
    /// The message is larger than the broker accepts; it was not sent.
    #[error("message of {size} bytes exceeds the broker's max message size of {max}")]
    MessageTooLarge {
        /// Bytes the message (or its compressed entry) takes.
        size: usize,
        /// The broker's `max_message_size`.
        max: usize,
    },
    /// The broker answered the send with SEND_ERROR.
    #[error("broker refused send {sequence_id} on {topic}: {code:?} ({message})")]
    Send {
        /// The topic (partition) sent to.
        topic: String,
        /// The sequence id of the refused entry.
        sequence_id: u64,
        /// The broker's error code.
        code: ServerError,
        /// The broker's explanation.
        message: String,
    },
    /// No receipt came within the send timeout.
    #[error("no receipt within the send timeout of {after:?}")]
    Timeout {
        /// The send timeout.
        after: Duration,
    },
    /// The pending-message bound or the memory limit is reached and the
    /// producer is set to fail rather than wait, or the memory limit stayed
    /// reached for the whole send timeout.
    #[error(transparent)]
    Full(#[from] LimitExceeded),
    /// The payload could not be compressed.
    #[error("compressing the entry failed: {0}")]
    Compression(#[source] Arc<CompressionError>),
    /// The connection to the broker ended; sends in flight are failed.
    #[error("connection to the broker lost: {0}")]
    ConnectionLost(#[source] ConnectionError),
    /// The broker closed the producer (topic unloaded, deleted, or moved).
    #[error("the broker closed the producer on {topic}")]
    ClosedByBroker {
        /// The topic (partition).
        topic: String,
    },
    /// The broker's receipts do not match what was sent; the producer stops.
    #[error("receipt for sequence id {got} while {expected} was the oldest in flight")]
    OutOfOrderReceipt {
        /// The oldest in-flight sequence id.
        expected: u64,
        /// The sequence id the receipt named.
        got: u64,
    },
    /// The broker answered PRODUCER with something else.
    #[error("broker answered PRODUCER with {got}")]
    UnexpectedResponse {
        /// The kind of answer.
        got: &'static str,
    },
    /// [`send_in`](super::Producer::send_in) could not add the topic
    /// partition to the transaction, or the transaction is not open.
    #[error(transparent)]
    Transaction(#[from] crate::transaction::TransactionError),
    /// The broker refused the producer's schema: it is not compatible with
    /// the topic's (its compatibility strategy), or the topic takes no new
    /// schemas.
    #[error("the broker refused the schema of the producer on {topic}: {message}")]
    IncompatibleSchema {
        /// The topic (the partition, for a partitioned topic).
        topic: String,
        /// What the broker said.
        message: String,
    },
    /// The producer's schema could not encode the value; nothing was sent.
    #[error("encoding a value for {topic}: {source}")]
    Encode {
        /// The topic.
        topic: String,
        /// The schema's error.
        #[source]
        source: crate::schema::SchemaError,
    },
    /// The producer was closed (by [`close`](super::Producer::close) or
    /// because every handle was dropped).
    #[error("producer closed")]
    Closed,
    /// The producer's task stopped without being closed: it panicked (a
    /// bug; the panic is in the log). The send's outcome is unknown; no
    /// receipt will come.
    #[error("the producer's task stopped unexpectedly (it panicked)")]
    TaskFailed,
}

impl ProducerError {
    /// Whether this is an authentication or authorization failure, and
    /// which (see [`Error::auth_failure`](crate::error::Error::auth_failure)).
    pub fn auth_failure(&self) -> Option<crate::auth::AuthFailure> {
        crate::auth::failure_in(self)
    }

    /// Whether the same call may succeed if made again later: the broker
    /// could not be reached or refused for a passing reason (see
    /// [`ConnectionError::is_retryable`]), the send timed out, the producer
    /// was full, the connection was lost or the broker closed the producer
    /// (it is being re-created), or the broker refused the send for a
    /// reason that is not final. False for misuse (an option that cannot
    /// work, a message too large), a final refusal, and once the producer
    /// is [closed](Self::is_closed).
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Client { source, .. } => source.is_retryable(),
            Self::Create { source, .. } | Self::ConnectionLost(source) => source.is_retryable(),
            Self::Send { code, .. } => !is_final_code(*code),
            Self::Timeout { .. }
            | Self::Full(_)
            | Self::ClosedByBroker { .. }
            | Self::UnexpectedResponse { .. } => true,
            _ => false,
        }
    }

    /// Whether the producer (or the client under it) is closed, or its task
    /// is gone: every later send fails.
    pub fn is_closed(&self) -> bool {
        match self {
            Self::Closed | Self::TaskFailed => true,
            Self::Client { source, .. } => source.is_closed(),
            _ => false,
        }
    }

    /// Whether the producer's creation tries again after this (until the
    /// operation timeout): reaching the broker or creating the producer
    /// failed in a way that may pass.
    pub(crate) fn is_passing_at_creation(&self) -> bool {
        match self {
            Self::Create { source, .. } => source.is_passing_at_creation(),
            Self::Client { source, .. } => source.is_passing_at_creation(),
            _ => false,
        }
    }

    /// Whether re-creating the producer gives up on this: anything but a
    /// failed attempt to reach the broker or create the producer whose
    /// cause is not [final](ConnectionError::is_final).
    pub(crate) fn is_final(&self) -> bool {
        match self {
            Self::Create { source, .. } => source.is_final(),
            Self::Client { source, .. } => source.is_final(),
            Self::UnexpectedResponse { .. } => false,
            _ => true,
        }
    }
}
