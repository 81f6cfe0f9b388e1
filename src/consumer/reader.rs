//! [`Reader`]: reads a topic from a given message id on a non-durable
//! subscription of its own; nothing to acknowledge.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;

use super::Consumer;
use super::builder::ConsumerBuilder;
use super::core::config::SubscriptionType;
use super::error::ConsumerError;
use super::message::Message;
use super::subscribe::InitialPosition;
use crate::client::Client;
use crate::message_id::MessageId;

/// Configures a [`Reader`]; made by [`Client::reader`], finished by
/// [`create`](Self::create).
///
/// # Examples
/// ```no_run
/// use pulsar_wire::MessageId;
/// # async fn demo(client: pulsar_wire::Client, from: MessageId) -> Result<(), pulsar_wire::Error> {
/// let mut reader = client.reader("orders").start_message_id(from).start_inclusive(true).create().await?;
/// let first = reader.read_next().await?;
/// assert_eq!(first.id().entry(), from.entry());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `create().await`"]
pub struct ReaderBuilder {
    consumer: ConsumerBuilder,
    start: MessageId,
    inclusive: bool,
}

impl ReaderBuilder {
    /// Where to start: a message id, [`MessageId::EARLIEST`] or
    /// [`MessageId::LATEST`] (the default).
    pub fn start_message_id(mut self, id: MessageId) -> Self {
        self.start = id;
        self
    }

    /// Whether the message at the start id (and at a
    /// [`seek`](Reader::seek) target) is read too (default false).
    pub fn start_inclusive(mut self, inclusive: bool) -> Self {
        self.inclusive = inclusive;
        self
    }

    /// The receiver queue (default 1000).
    pub fn receiver_queue_size(mut self, size: u32) -> Self {
        self.consumer = self.consumer.receiver_queue_size(size);
        self
    }

    /// Subscribes and starts reading.
    ///
    /// The broker is asked to start at the start id's entry; messages
    /// before the start (or at it, when not inclusive) are dropped here, as
    /// the Java client does for batch members. The reader keeps no state
    /// per message: only, per partition, where it started and the last
    /// message it handed out (where it resumes after a reconnect).
    ///
    /// # Errors
    /// [`ConsumerError::MultipleTopics`] for a start id (other than earliest
    /// or latest) on a partitioned topic, and the errors of
    /// [`ConsumerBuilder::subscribe`].
    pub async fn create(self) -> Result<Reader, ConsumerError> {
        let boundary = self.start != MessageId::EARLIEST && self.start != MessageId::LATEST;
        let mut consumer = self
            .consumer
            .subscription_type(SubscriptionType::Exclusive)
            .durable(false)
            .seek_inclusive(self.inclusive)
            .initial_position(if self.start == MessageId::EARLIEST {
                InitialPosition::Earliest
            } else {
                InitialPosition::Latest
            });
        consumer.options.start_message_id = Some(self.start);
        consumer.delivery.track_messages = false;
        let consumer = consumer.subscribe().await?;
        if boundary && consumer.topics().len() > 1 {
            let count = consumer.topics().len();
            let _ = consumer.close().await;
            return Err(ConsumerError::MultipleTopics { count });
        }
        Ok(Reader { consumer })
    }
}

/// Reads a topic from a message id on; a non-durable, Exclusive
/// subscription that disappears when the reader closes.
#[derive(Debug)]
pub struct Reader {
    consumer: Consumer,
}

impl Reader {
    /// Waits for the next message.
    ///
    /// # Errors
    /// [`ConsumerError::Closed`] once the reader is closed.
    pub async fn read_next(&mut self) -> Result<Message, ConsumerError> {
        self.consumer.receive().await
    }

    /// Moves the reader to message `id`: the next message read is the one
    /// after it (or `id` itself, with
    /// [`start_inclusive`](ReaderBuilder::start_inclusive)), and nothing
    /// queued before the seek is read. [`MessageId::EARLIEST`] and
    /// [`MessageId::LATEST`] move every partition; another id moves the
    /// partition it names (on a partitioned topic, the others keep their
    /// place, as Java's multi-topic reader does).
    ///
    /// # Errors
    /// [`ConsumerError::Request`] if the broker refused, [`ConsumerError::Closed`].
    pub async fn seek(&self, id: MessageId) -> Result<(), ConsumerError> {
        self.consumer.seek(id).await
    }

    /// Moves every partition to its first message published at or after
    /// `publish_time_ms` (ms since the Unix epoch).
    ///
    /// # Errors
    /// As [`seek`](Self::seek).
    pub async fn seek_to_time(&self, publish_time_ms: u64) -> Result<(), ConsumerError> {
        self.consumer.seek_to_time(publish_time_ms).await
    }

    /// Whether a message is there to read: one is queued here, or the
    /// broker holds one (of any partition) after the last one read (at or
    /// after the start, before the first read). Asks the broker for each
    /// partition's last message id, as Java's `hasMessageAvailable` does.
    ///
    /// # Errors
    /// [`ConsumerError::Request`] if the broker refused, [`ConsumerError::Closed`].
    pub async fn has_message_available(&self) -> Result<bool, ConsumerError> {
        self.consumer.has_message_available().await
    }

    /// The topics (partitions) read.
    pub fn topics(&self) -> Vec<String> {
        self.consumer.topics()
    }

    /// Closes the reader (its subscription disappears).
    ///
    /// # Errors
    /// [`ConsumerError::TaskFailed`] if its task panicked (closing a
    /// closed reader does nothing).
    pub async fn close(&self) -> Result<(), ConsumerError> {
        self.consumer.close().await
    }
}

impl Stream for Reader {
    type Item = Result<Message, ConsumerError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Pin::new(&mut self.consumer).poll_next(cx)
    }
}

impl Client {
    /// A builder for a [`Reader`] of `topic`, starting at the latest message
    /// unless told otherwise.
    pub fn reader(&self, topic: impl Into<String>) -> ReaderBuilder {
        let name = format!(
            "reader-{:012x}",
            RandomState::new().build_hasher().finish() & 0xffff_ffff_ffff
        );
        ReaderBuilder {
            consumer: self.consumer(topic, name),
            start: MessageId::LATEST,
            inclusive: false,
        }
    }
}
