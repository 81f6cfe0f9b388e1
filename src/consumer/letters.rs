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
use super::dead_letter::{self, DeadLetterPolicy, Reconsume};
use super::message::Message;
use super::subscribe::InitialPosition;
use crate::MessageId;
use crate::client::{Client, TopicName};
use crate::producer::{Producer, ProducerMessage};

/// The Java client's `MAX_RECONSUMETIMES`: the dead-letter limit of a
/// consumer with [`enable_retry`](super::ConsumerBuilder::enable_retry)
/// and no dead-letter policy of its own.
pub const DEFAULT_MAX_RECONSUMETIMES: u32 = 16;

/// Which topics a consumer's copies go to (pure).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LetterTopics {
    policy: DeadLetterPolicy,
    subscription: String,
    /// The first topic's partitioned-topic name: names the retry topic, and
    /// the dead-letter topic of what comes from the retry topic.
    first_topic: String,
    /// The retry-letter topic, when retry is enabled.
    retry_topic: Option<String>,
}

impl LetterTopics {
    /// The topics for `subscription` of `first_topic` (and the other topics
    /// of the consumer); `retry`: whether `reconsume_later` is enabled.
    pub(crate) fn new(
        policy: DeadLetterPolicy,
        subscription: String,
        first_topic: &TopicName,
        retry: bool,
    ) -> Self {
        let first_topic = first_topic.base().as_str().to_owned();
        let retry_topic = retry.then(|| policy.retry_letter_topic(&first_topic, &subscription));
        Self {
            policy,
            subscription,
            first_topic,
            retry_topic,
        }
    }

    /// The retry-letter topic the consumer also subscribes to, if enabled.
    pub(crate) fn retry_topic(&self) -> Option<&str> {
        self.retry_topic.as_deref()
    }

    /// The dead-letter topic of a message from `topic` (a partition's is its
    /// partitioned topic's, as in Java; a retry letter's is the first
    /// topic's).
    pub(crate) fn dead_letter_topic(&self, topic: &str) -> String {
        let base = TopicName::parse(topic)
            .map_or_else(|_| topic.to_owned(), |t| t.base().as_str().to_owned());
        let origin = if self.retry_topic.as_deref() == Some(base.as_str()) {
            &self.first_topic
        } else {
            &base
        };
        self.policy.dead_letter_topic(origin, &self.subscription)
    }
}

/// Where a consumer's copies go, and the producers that take them there.
#[derive(Debug)]
pub(crate) struct Letters {
    client: Client,
    topics: LetterTopics,
    producers: Mutex<HashMap<String, Arc<OnceCell<Producer>>>>,
    /// Dead-letter forwards that failed in a row (reset by a success).
    failures: AtomicU32,
}

/// How long a failed forward waits before its original is redelivered:
/// 100 ms, doubling with each failure in a row, at most 10 s. Without it a
/// dead-letter topic that cannot be written would make the broker and the
/// consumer pass the message back and forth as fast as they can.
pub(crate) fn failure_backoff(failures_in_a_row: u32) -> Duration {
    let doublings = failures_in_a_row.saturating_sub(1).min(7);
    (Duration::from_millis(100) * (1 << doublings)).min(Duration::from_secs(10))
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
            .retry_topic
            .clone()
            .ok_or(ConsumerError::RetryNotEnabled)?;
        let decision = dead_letter::reconsume_later(
            &self.topics.policy,
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
                    .policy
                    .initial_subscription_name
                    .as_deref()
                    .filter(|_| dead_letter)
                {
                    self.create_subscription(topic, name).await?;
                }
                self.client
                    .producer(topic)
                    .batching(false)
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

/// The message's properties, sorted by name (a `HashMap` has no order).
fn sorted(message: &Message) -> Vec<(String, String)> {
    let mut properties: Vec<_> = message
        .properties()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    properties.sort();
    properties
}

/// The copy of `message` with `properties`: same payload, key, ordering
/// key and event time.
pub(crate) fn copy_of(message: &Message, properties: Vec<(String, String)>) -> ProducerMessage {
    let mut copy = ProducerMessage::new(message.payload().clone());
    if let Some(key) = message.key() {
        copy = copy.key(key).key_is_base64(message.key_is_base64());
    }
    if let Some(ordering_key) = message.ordering_key() {
        copy = copy.ordering_key(ordering_key.clone());
    }
    if let Some(time) = message.event_time() {
        copy = copy.event_time(time);
    }
    for (name, value) in properties {
        copy = copy.property(name, value);
    }
    copy
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use bytes::Bytes;

    use super::*;
    use crate::proto::KeyValue;

    fn message() -> Message {
        Message {
            id: MessageId::new(3, 4).with_partition(1).with_batch_index(2),
            topic: "persistent://public/default/t-partition-1".into(),
            payload: Bytes::from_static(b"body"),
            key: Some("k".into()),
            key_is_base64: false,
            ordering_key: Some(Bytes::from_static(b"ok")),
            properties: HashMap::from([("b".into(), "2".into()), ("a".into(), "1".into())]),
            event_time: Some(77),
            publish_time: 88,
            producer_name: "p".into(),
            sequence_id: 9,
            redelivery_count: 3,
            null_value: false,
        }
    }

    #[test]
    fn the_copy_keeps_payload_key_ordering_key_event_time_and_properties() {
        let m = message();
        let props = dead_letter::dead_letter_properties(sorted(&m), m.topic(), m.id());
        let copy = copy_of(&m, props);
        assert_eq!(copy.payload(), &Bytes::from_static(b"body"));
        let meta = copy.entry_metadata("dlq-producer", 0, 1000);
        assert_eq!(meta.partition_key.as_deref(), Some("k"));
        assert_eq!(meta.partition_key_b64_encoded, None);
        assert_eq!(meta.ordering_key.as_deref(), Some(&b"ok"[..]));
        assert_eq!(meta.event_time, Some(77));
        let kv = |k: &str, v: &str| KeyValue {
            key: k.into(),
            value: v.into(),
        };
        assert_eq!(
            meta.properties,
            [
                kv("a", "1"),
                kv("b", "2"),
                kv("REAL_TOPIC", "persistent://public/default/t-partition-1"),
                kv("ORIGIN_MESSAGE_ID", "3:4:1:2"),
            ]
        );
        assert_eq!(meta.deliver_at_time, None);
    }

    #[test]
    fn dead_letter_topics_name_the_partitioned_topic_and_the_first_one_for_retries() {
        let first = TopicName::parse("persistent://public/default/t").expect("topic");
        let policy = DeadLetterPolicy::after_redeliveries(3);
        let plain = LetterTopics::new(policy.clone(), "s".into(), &first, false);
        assert_eq!(plain.retry_topic(), None);
        assert_eq!(
            plain.dead_letter_topic("persistent://public/default/t-partition-3"),
            "persistent://public/default/t-s-DLQ"
        );
        assert_eq!(
            plain.dead_letter_topic("persistent://public/default/other"),
            "persistent://public/default/other-s-DLQ"
        );
        let retry = LetterTopics::new(policy.clone(), "s".into(), &first.partition(0), true);
        assert_eq!(
            retry.retry_topic(),
            Some("persistent://public/default/t-s-RETRY")
        );
        assert_eq!(
            retry.dead_letter_topic("persistent://public/default/t-s-RETRY"),
            "persistent://public/default/t-s-DLQ"
        );
        let named = DeadLetterPolicy {
            dead_letter_topic: Some("persistent://public/default/mine".into()),
            retry_letter_topic: Some("persistent://public/default/again".into()),
            ..policy
        };
        let named = LetterTopics::new(named, "s".into(), &first, true);
        assert_eq!(
            named.retry_topic(),
            Some("persistent://public/default/again")
        );
        assert_eq!(
            named.dead_letter_topic("persistent://public/default/t"),
            "persistent://public/default/mine"
        );
    }

    #[test]
    fn failed_forwards_back_off_from_100_ms_to_10_s() {
        let ms = |n| failure_backoff(n).as_millis();
        assert_eq!([ms(1), ms(2), ms(3), ms(7)], [100, 200, 400, 6400]);
        assert_eq!((ms(8), ms(9), ms(u32::MAX)), (10_000, 10_000, 10_000));
    }

    #[test]
    fn a_binary_key_stays_binary_in_the_copy() {
        let m = Message {
            key: Some("AAEC".into()),
            key_is_base64: true,
            ..message()
        };
        let meta = copy_of(&m, Vec::new()).entry_metadata("p", 0, 1);
        assert_eq!(meta.partition_key.as_deref(), Some("AAEC"));
        assert_eq!(meta.partition_key_b64_encoded, Some(true));
    }

    #[test]
    fn a_copy_without_optional_fields_adds_none() {
        let m = Message {
            key: None,
            ordering_key: None,
            event_time: None,
            properties: HashMap::new(),
            ..message()
        };
        let meta = copy_of(&m, Vec::new()).entry_metadata("p", 0, 1);
        assert_eq!(
            (meta.partition_key, meta.ordering_key, meta.event_time),
            (None, None, None)
        );
        assert!(meta.properties.is_empty());
    }
}
