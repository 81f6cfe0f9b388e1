//! What the dead-letter and retry copies are, and where they go (pure):
//! the copy of a received message, the topics it is published to, and
//! the backoff after a failed forward. `letters.rs` does the publishing.

use std::time::Duration;

use crate::client::TopicName;
use crate::consumer::core::dead_letter::{DeadLetterPolicy, ReadFrom};
use crate::consumer::message::Message;
use crate::producer::ProducerMessage;

/// The Java client's `MAX_RECONSUMETIMES`: the dead-letter limit of a
/// consumer with [`enable_retry`](crate::consumer::ConsumerBuilder::enable_retry)
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

    /// The dead-letter policy.
    pub(crate) fn policy(&self) -> &DeadLetterPolicy {
        &self.policy
    }

    /// The consumer's subscription.
    pub(crate) fn subscription(&self) -> &str {
        &self.subscription
    }

    /// The retry-letter topic the consumer also subscribes to, if enabled.
    pub(crate) fn retry_topic(&self) -> Option<&str> {
        self.retry_topic.as_deref()
    }

    /// The dead-letter topic of a message from `topic` (a partition's is its
    /// partitioned topic's, as in Java; a retry letter's is the first
    /// topic's).
    pub(crate) fn dead_letter_topic(&self, topic: &str) -> String {
        let base = base_of(topic);
        let origin = match self.read_from(&base) {
            ReadFrom::RetryTopic => &self.first_topic,
            ReadFrom::Topic => &base,
        };
        self.policy.dead_letter_topic(origin, &self.subscription)
    }

    /// Whether a message from `topic` (a partition, or a partitioned
    /// topic) comes from one of the consumer's topics or from its own
    /// retry-letter topic.
    pub(crate) fn read_from(&self, topic: &str) -> ReadFrom {
        match &self.retry_topic {
            Some(retry) if *retry == base_of(topic) => ReadFrom::RetryTopic,
            _ => ReadFrom::Topic,
        }
    }
}

/// The partitioned topic's full name of `topic` (a partition, or any
/// topic name); `topic` itself if it does not parse.
fn base_of(topic: &str) -> String {
    TopicName::parse(topic).map_or_else(|_| topic.to_owned(), |t| t.base().as_str().to_owned())
}

/// How long a failed forward waits before its original is redelivered:
/// 100 ms, doubling with each failure in a row, at most 10 s. Without it a
/// dead-letter topic that cannot be written would make the broker and the
/// consumer pass the message back and forth as fast as they can.
pub(crate) fn failure_backoff(failures_in_a_row: u32) -> Duration {
    let doublings = failures_in_a_row.saturating_sub(1).min(7);
    (Duration::from_millis(100) * (1 << doublings)).min(Duration::from_secs(10))
}

/// The message's properties, sorted by name (a `HashMap` has no order).
pub(crate) fn sorted(message: &Message) -> Vec<(String, String)> {
    let mut properties: Vec<_> = message
        .properties()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    properties.sort();
    properties
}

/// The copy of `message` with `properties`: same payload, key, ordering
/// key and event time. A message handed out undecoded (encrypted, or
/// with an unknown codec) keeps its encoding, so the copy stays readable
/// by a consumer with the key.
pub(crate) fn copy_of(message: &Message, properties: Vec<(String, String)>) -> ProducerMessage {
    let mut copy = ProducerMessage::new(message.payload().clone());
    if let Some(undecoded) = &message.0.undecoded {
        copy = copy.encoded(undecoded.context.clone());
    }
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
    use crate::consumer::dead_letter;
    use crate::consumer::message::MessageFields;
    use crate::message_id::MessageId;
    use crate::proto::KeyValue;

    fn message() -> Message {
        Message(std::sync::Arc::new(MessageFields {
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
            batch_size: None,
            undecoded: None,
            schema_version: None,
            last_chunk: None,
        }))
    }

    #[test]
    fn the_copy_keeps_payload_key_ordering_key_event_time_and_properties() {
        let m = message();
        let props =
            dead_letter::dead_letter_properties(sorted(&m), ReadFrom::Topic, m.topic(), m.id());
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
        let read_from = |topic| retry.read_from(topic);
        assert_eq!(
            read_from("persistent://public/default/t-s-RETRY-partition-1"),
            ReadFrom::RetryTopic
        );
        assert_eq!(
            read_from("persistent://public/default/t-partition-0"),
            ReadFrom::Topic
        );
        assert_eq!(
            plain.read_from("persistent://public/default/t-s-RETRY"),
            ReadFrom::Topic,
            "no retry topic of its own"
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
        let m = Message(std::sync::Arc::new(MessageFields {
            key: Some("AAEC".into()),
            key_is_base64: true,
            ..(*message().0).clone()
        }));
        let meta = copy_of(&m, Vec::new()).entry_metadata("p", 0, 1);
        assert_eq!(meta.partition_key.as_deref(), Some("AAEC"));
        assert_eq!(meta.partition_key_b64_encoded, Some(true));
    }

    #[test]
    fn a_copy_of_an_encrypted_message_keeps_its_encryption() {
        use crate::consumer::crypto::EncryptionContext;
        use crate::consumer::message::Undecoded;
        use crate::proto::{EncryptionKeys, MessageMetadata};
        let encoding = MessageMetadata {
            encryption_keys: vec![EncryptionKeys {
                key: "k1".into(),
                value: Bytes::from_static(b"data key"),
                metadata: Vec::new(),
            }],
            encryption_param: Some(Bytes::from_static(b"iv")),
            compression: Some(1),
            uncompressed_size: Some(10),
            ..MessageMetadata::default()
        };
        let m = Message(std::sync::Arc::new(MessageFields {
            undecoded: Some(Box::new(Undecoded {
                context: EncryptionContext::of(&encoding),
                unreadable: None,
            })),
            ..(*message().0).clone()
        }));
        let meta = copy_of(&m, Vec::new()).entry_metadata("p", 0, 1);
        assert_eq!(meta.encryption_keys, encoding.encryption_keys);
        assert_eq!(meta.encryption_param, encoding.encryption_param);
        assert_eq!(
            (meta.compression, meta.uncompressed_size),
            (Some(1), Some(10))
        );
    }

    #[test]
    fn a_copy_without_optional_fields_adds_none() {
        let m = Message(std::sync::Arc::new(MessageFields {
            key: None,
            ordering_key: None,
            event_time: None,
            properties: HashMap::new(),
            ..(*message().0).clone()
        }));
        let meta = copy_of(&m, Vec::new()).entry_metadata("p", 0, 1);
        assert_eq!(
            (meta.partition_key, meta.ordering_key, meta.event_time),
            (None, None, None)
        );
        assert!(meta.properties.is_empty());
    }
}
