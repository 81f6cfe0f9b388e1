//! Publishing copies of messages: dead-letter forwards (from the driver,
//! when the core says so) and retry letters (from
//! [`Consumer::reconsume_later`](super::Consumer::reconsume_later)).
//!
//! One producer per target topic, created on first use and shared by every
//! forward and retry of the consumer (batching off, as the Java client's
//! dead-letter and retry producers). A producer that failed for good (its
//! topic deleted, fenced, closed) is dropped, and the next copy creates a
//! new one. Before the first forward to a
//! dead-letter topic, the policy's `initial_subscription_name` is created
//! there (a Shared consumer subscribes at Earliest and closes), so the
//! copies are retained even before anyone reads them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::OnceCell;
use tracing::debug;

use super::copy::{LetterTopics, copy_of, failure_backoff, sorted};
use super::history::DeliveryHistory;
use crate::client::Client;
use crate::consumer::core::config::SubscriptionType;
use crate::consumer::core::dead_letter::{self, Reconsume};
use crate::consumer::error::ConsumerError;
use crate::consumer::message::Message;
use crate::consumer::subscribe::InitialPosition;
use crate::message_id::MessageId;
use crate::producer::{Producer, ProducerError, ProducerMessage};
use crate::stats::ConsumerRecorder;

/// Where a consumer's copies go, and the producers that take them there.
#[derive(Debug)]
pub(crate) struct Letters {
    client: Client,
    topics: LetterTopics,
    producers: Mutex<HashMap<String, Arc<OnceCell<Producer>>>>,
    /// Dead-letter forwards that failed in a row (reset by a success).
    failures: AtomicU32,
    /// Hand-outs and handler errors, for the dead-letter copies.
    history: Mutex<DeliveryHistory>,
    /// Where the copies the broker stored are counted.
    stats: Option<Arc<ConsumerRecorder>>,
}

impl Letters {
    /// Copies to `topics`, published through `client`.
    pub(crate) fn new(client: Client, topics: LetterTopics) -> Self {
        Self {
            client,
            topics,
            producers: Mutex::new(HashMap::new()),
            failures: AtomicU32::new(0),
            history: Mutex::new(DeliveryHistory::default()),
            stats: None,
        }
    }

    /// Counts the copies the broker stored in `stats`.
    pub(crate) fn counted_in(mut self, stats: Arc<ConsumerRecorder>) -> Self {
        self.stats = Some(stats);
        self
    }

    fn history(&self) -> std::sync::MutexGuard<'_, DeliveryHistory> {
        self.history.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `message` was handed to the application now.
    pub(crate) fn delivered(&self, message: &Message) {
        self.history()
            .delivered(message.0.id, crate::clock::unix_millis());
    }

    /// The handler failed on `message` with `error`.
    pub(crate) fn failed(&self, message: &Message, error: &str) {
        self.history().failed(message.0.id, error);
    }

    /// `id` was acked: its history goes.
    pub(crate) fn settled(&self, id: MessageId) {
        self.history().settled(id);
    }

    /// The `DLQ_*` properties of `message`'s dead-letter copy: its history
    /// here (taken), and `deliveries` if known.
    fn delivery_facts(
        &self,
        message: &Message,
        deliveries: Option<u32>,
        properties: &mut Vec<(String, String)>,
    ) {
        let record = self.history().take(message.0.id);
        let facts = dead_letter::DeliveryFacts {
            subscription: self.topics.subscription(),
            deliveries,
            first_and_last_ms: record
                .as_ref()
                .map(|r| (r.first_delivery_ms, r.last_delivery_ms)),
            last_error: record.as_ref().and_then(|r| r.last_error.as_deref()),
        };
        dead_letter::add_delivery_facts(properties, &facts);
    }

    /// How long closing may take: the client's operation timeout.
    pub(crate) fn timeout(&self) -> Duration {
        self.client.operation_timeout()
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
        let mut properties = dead_letter::dead_letter_properties(
            sorted(message),
            self.topics.read_from(message.topic()),
            message.topic(),
            message.id(),
        );
        // On arrival at the limit, the deliveries before it reached the
        // application; Java style hands the message at the limit out once more.
        let java_style = self.topics.policy().cutoff == dead_letter::DeadLetterCutoff::JavaStyle;
        let deliveries = message
            .redelivery_count()
            .saturating_add(u32::from(java_style));
        self.delivery_facts(message, Some(deliveries), &mut properties);
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
            self.topics.read_from(message.topic()),
            message.topic(),
            message.id(),
            delay,
        );
        match decision {
            Reconsume::Retry { properties, delay } => {
                let copy = copy_of(message, properties).deliver_after(delay);
                self.publish(&retry_topic, false, copy).await
            }
            Reconsume::DeadLetter { mut properties } => {
                self.delivery_facts(message, None, &mut properties);
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
        let sent = match producer.send(copy).await {
            Ok(receipt) => receipt.await,
            Err(e) => Err(e),
        };
        match sent {
            Ok(id) => {
                debug!(topic, %id, "copy published");
                if let Some(stats) = &self.stats {
                    stats.lettered(dead_letter);
                }
                Ok(id)
            }
            Err(e) => {
                if ended(&e) {
                    self.replace(topic, &producer);
                }
                Err(failed(e))
            }
        }
    }

    /// Forgets the cached producer of `topic` if it is still `dead` (closing
    /// it in the background), so the next copy creates a new one.
    fn replace(&self, topic: &str, dead: &Producer) {
        let mut producers = self.producers.lock().unwrap_or_else(|e| e.into_inner());
        let same = producers
            .get(topic)
            .and_then(|cell| cell.get())
            .is_some_and(|cached| cached.same_as(dead));
        if same {
            debug!(
                topic,
                "letter producer failed for good: a new one next time"
            );
            producers.remove(topic);
            let dead = dead.clone();
            tokio::spawn(async move {
                let _ = dead.close().await;
            });
        }
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

    /// Closes the producers (what they hold is sent first), all at once
    /// and for at most the operation timeout.
    pub(crate) async fn close(&self) {
        let producers: Vec<Producer> = {
            let producers = self.producers.lock().unwrap_or_else(|e| e.into_inner());
            producers
                .values()
                .filter_map(|cell| cell.get().cloned())
                .collect()
        };
        let closing = futures::future::join_all(producers.iter().map(Producer::close));
        if tokio::time::timeout(self.timeout(), closing).await.is_err() {
            debug!("letter producers not closed within the operation timeout");
        }
    }
}

/// Whether a send failed because its producer cannot send any more (as
/// opposed to this one message failing: a timeout, a broker's SEND_ERROR).
fn ended(err: &ProducerError) -> bool {
    !matches!(
        err,
        ProducerError::Timeout { .. }
            | ProducerError::Send { .. }
            | ProducerError::MessageTooLarge { .. }
            | ProducerError::Full(_)
            | ProducerError::Compression(_)
    )
}
