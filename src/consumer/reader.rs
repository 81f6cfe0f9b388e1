//! [`Reader`]: reads a topic from a given message id on a non-durable
//! subscription of its own; nothing to acknowledge.

use std::cmp::Ordering;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::Stream;

use super::builder::ConsumerBuilder;
use super::consumer_error::ConsumerError;
use super::message::Message;
use super::subscribe::InitialPosition;
use super::{Consumer, SubscriptionType};
use crate::MessageId;
use crate::client::Client;

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

    /// Whether the message at the start id is read too (default false).
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
    /// The broker is asked to start at the start id's entry (a batch-member
    /// id makes Apache Pulsar include the entry); messages before the start
    /// (or at it, when not inclusive) are dropped here, as the Java client
    /// does for batch members.
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
            .initial_position(if self.start == MessageId::EARLIEST {
                InitialPosition::Earliest
            } else {
                InitialPosition::Latest
            });
        consumer.options.start_message_id = Some(if boundary {
            self.start.with_batch_index(self.start.batch_index.max(0))
        } else {
            self.start
        });
        let consumer = consumer.subscribe().await?;
        if boundary && consumer.topics().len() > 1 {
            let count = consumer.topics().len();
            let _ = consumer.close().await;
            return Err(ConsumerError::MultipleTopics { count });
        }
        Ok(Reader {
            consumer,
            start: boundary.then_some((self.start, self.inclusive)),
            last: None,
        })
    }
}

/// Reads a topic from a message id on; a non-durable, Exclusive
/// subscription that disappears when the reader closes.
#[derive(Debug)]
pub struct Reader {
    consumer: Consumer,
    start: Option<(MessageId, bool)>,
    last: Option<MessageId>,
}

/// Orders ids of one partition by ledger, entry, batch index.
fn position(id: MessageId) -> (u64, u64, i32) {
    (id.ledger_id, id.entry_id, id.batch_index)
}

/// Whether `id` is at or after `start` (after it only, unless
/// `inclusive`). A whole-entry start covers the entry's batch members.
fn from_start(start: MessageId, inclusive: bool, id: MessageId) -> bool {
    let ord = if start.is_batch_member() {
        position(id).cmp(&position(start))
    } else {
        (id.ledger_id, id.entry_id).cmp(&(start.ledger_id, start.entry_id))
    };
    ord == Ordering::Greater || (inclusive && ord == Ordering::Equal)
}

impl Reader {
    fn wanted(&self, id: MessageId) -> bool {
        if self.last.is_some_and(|last| position(id) <= position(last)) {
            return false; // read already (the broker may resend after a reconnect)
        }
        self.start
            .is_none_or(|(start, inclusive)| from_start(start, inclusive, id))
    }

    fn poll_read(&mut self, cx: &mut Context<'_>) -> Poll<Result<Message, ConsumerError>> {
        loop {
            let message = ready!(Pin::new(&mut self.consumer).poll_next(cx))
                .unwrap_or(Err(ConsumerError::Closed))?;
            if self.wanted(message.0.id) {
                self.last = Some(message.0.id);
                return Poll::Ready(Ok(message));
            }
        }
    }

    /// Waits for the next message.
    ///
    /// # Errors
    /// [`ConsumerError::Closed`] once the reader is closed.
    pub async fn read_next(&mut self) -> Result<Message, ConsumerError> {
        std::future::poll_fn(|cx| self.poll_read(cx)).await
    }

    /// The topics (partitions) read.
    pub fn topics(&self) -> &[String] {
        self.consumer.topics()
    }

    /// Closes the reader (its subscription disappears).
    ///
    /// # Errors
    /// [`ConsumerError::Closed`] if it was closed already.
    pub async fn close(&self) -> Result<(), ConsumerError> {
        self.consumer.close().await
    }
}

impl Stream for Reader {
    type Item = Result<Message, ConsumerError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match ready!(self.poll_read(cx)) {
            Err(ConsumerError::Closed) => Poll::Ready(None),
            other => Poll::Ready(Some(other)),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    use super::from_start as wanted;

    #[test]
    fn the_start_is_kept_only_when_inclusive() {
        let e = MessageId::new(1, 5);
        assert!(wanted(e, true, e));
        assert!(!wanted(e, false, e));
        assert!(
            !wanted(e, false, e.with_batch_index(2)),
            "an entry start covers its members"
        );
        assert!(wanted(e, false, MessageId::new(1, 6)));
        let m = e.with_batch_index(1);
        assert!(!wanted(m, true, e.with_batch_index(0)));
        assert!(wanted(m, true, m));
        assert!(!wanted(m, false, m));
        assert!(wanted(m, false, e.with_batch_index(2)));
    }
}
