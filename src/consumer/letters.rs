//! Publishing copies of messages: dead-letter forwards (from the driver,
//! when the core says so) and retry letters (from
//! [`Consumer::reconsume_later`](super::Consumer::reconsume_later)).
//!
//! One producer per target topic, created on first use and shared by every
//! forward and retry of the consumer (batching off, as the Java client's
//! dead-letter and retry producers). Before the first forward to a
//! dead-letter topic, the policy's `initial_subscription_name` is created
//! there (a Shared consumer subscribes at Earliest and closes), so the
//! copies are retained even before anyone reads them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::OnceCell;
use tracing::debug;

use super::SubscriptionType;
use super::consumer_error::ConsumerError;
use super::dead_letter::{self, Reconsume};
use super::letter_copy::{LetterTopics, copy_of, failure_backoff, sorted};
use super::message::Message;
use super::subscribe::InitialPosition;
use crate::MessageId;
use crate::client::Client;
use crate::producer::{Producer, ProducerMessage};

/// Where a consumer's copies go, and the producers that take them there.
#[derive(Debug)]
pub(crate) struct Letters {
    client: Client,
    topics: LetterTopics,
    producers: Mutex<HashMap<String, Arc<OnceCell<Producer>>>>,
    /// Dead-letter forwards that failed in a row (reset by a success).
    failures: AtomicU32,
}

impl Letters {
    /// Copies to `topics`, published through `client`.
    pub(crate) fn new(client: Client, topics: LetterTopics) -> Self {
        Self {
            client,
            topics,
            producers: Mutex::new(HashMap::new()),
            failures: AtomicU32::new(0),
        }
    }

    /// Which topics the copies go to.
    pub(crate) fn topics(&self) -> &LetterTopics {
        &self.topics
    }

    /// Publishes the dead-letter copy of `message` and waits for the
    /// broker's receipt.
    ///
    /// # Errors
    /// [`ConsumerError::InitialSubscription`] or [`ConsumerError::Letter`];
    /// the caller must not ack the original then. A failure returns after
    /// [`failure_backoff`], so the redelivery it leads to does not come
    /// back at once.
    pub(crate) async fn forward(&self, message: &Message) -> Result<MessageId, ConsumerError> {
        let properties =
            dead_letter::dead_letter_properties(sorted(message), message.topic(), message.id());
        let topic = self.topics.dead_letter_topic(message.topic());
        let result = self
            .publish(&topic, true, copy_of(message, properties))
            .await;
        if result.is_ok() {
            self.failures.store(0, Ordering::Relaxed);
        } else {
            let failures = self
                .failures
                .fetch_add(1, Ordering::Relaxed)
                .saturating_add(1);
            tokio::time::sleep(failure_backoff(failures)).await;
        }
        result
    }

    /// Publishes `message` to the retry topic with `delay` and `custom`
    /// properties, or to the dead-letter topic once `RECONSUMETIMES` would
    /// pass the limit; the caller acks the original afterwards.
    ///
    /// # Errors
    /// [`ConsumerError::RetryNotEnabled`] without `enable_retry`, else as
    /// [`forward`](Self::forward).
    pub(crate) async fn reconsume(
        &self,
        message: &Message,
        delay: Duration,
        custom: Vec<(String, String)>,
    ) -> Result<MessageId, ConsumerError> {
        let retry_topic = self
            .topics
            .retry_topic()
            .map(str::to_owned)
            .ok_or(ConsumerError::RetryNotEnabled)?;
        let decision = dead_letter::reconsume_later(
            self.topics.policy(),
            sorted(message),
            custom,
            message.topic(),
            message.id(),
            delay,
        );
        match decision {
            Reconsume::Retry { properties, delay } => {
                let copy = copy_of(message, properties).deliver_after(delay);
                self.publish(&retry_topic, false, copy).await
            }
            Reconsume::DeadLetter { properties } => {
                let topic = self.topics.dead_letter_topic(message.topic());
                self.publish(&topic, true, copy_of(message, properties))
                    .await
            }
        }
    }

    async fn publish(
        &self,
        topic: &str,
        dead_letter: bool,
        copy: ProducerMessage,
    ) -> Result<MessageId, ConsumerError> {
        let failed = |source| ConsumerError::Letter {
            topic: topic.to_owned(),
            source: Box::new(source),
        };
        let producer = self.producer(topic, dead_letter).await?;
        let id = producer
            .send(copy)
            .await
            .map_err(failed)?
            .await
            .map_err(failed)?;
        debug!(topic, %id, "copy published");
        Ok(id)
    }

    /// The producer on `topic`, created on first use (after the initial
    /// subscription, on a dead-letter topic). A failed creation is tried
    /// again by the next publish.
    async fn producer(&self, topic: &str, dead_letter: bool) -> Result<Producer, ConsumerError> {
        let cell = {
            let mut producers = self.producers.lock().unwrap_or_else(|e| e.into_inner());
            producers.entry(topic.to_owned()).or_default().clone()
        };
        let producer = cell
            .get_or_try_init(|| async {
                if let Some(name) = self
                    .topics
                    .policy()
                    .initial_subscription_name
                    .as_deref()
                    .filter(|_| dead_letter)
                {
                    self.create_subscription(topic, name).await?;
                }
                // Chunking: a copy of a reassembled chunked message is
                // larger than one entry, as Java's dead-letter producer.
                self.client
                    .producer(topic)
                    .batching(false)
                    .chunking(true)
                    .create()
                    .await
                    .map_err(|source| ConsumerError::Letter {
                        topic: topic.to_owned(),
                        source: Box::new(source),
                    })
            })
            .await?;
        Ok(producer.clone())
    }

    async fn create_subscription(&self, topic: &str, name: &str) -> Result<(), ConsumerError> {
        let failed = |source| ConsumerError::InitialSubscription {
            topic: topic.to_owned(),
            subscription: name.to_owned(),
            source: Box::new(source),
        };
        let consumer = self
            .client
            .consumer(topic, name)
            .subscription_type(SubscriptionType::Shared)
            .initial_position(InitialPosition::Earliest)
            .subscribe()
            .await
            .map_err(failed)?;
        consumer.close().await.map_err(failed)
    }

    /// Closes the producers (what they hold is sent first).
    pub(crate) async fn close(&self) {
        let cells: Vec<_> = {
            let producers = self.producers.lock().unwrap_or_else(|e| e.into_inner());
            producers.values().cloned().collect()
        };
        for cell in cells {
            if let Some(producer) = cell.get() {
                let _ = producer.close().await;
            }
        }
    }
}
