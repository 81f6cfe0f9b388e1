//! [`ProducerMessage`]: what an application hands to `send`.

use std::time::Duration;

use bytes::Bytes;

use crate::consumer::EncryptionContext;
use crate::ids::TxnId;
use crate::proto::{KeyValue, MessageMetadata, SingleMessageMetadata};

/// When the broker may deliver a message to consumers.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use pulsar_wire::producer::{DeliverAt, ProducerMessage};
/// let msg = ProducerMessage::new("x").deliver_after(Duration::from_secs(5));
/// assert_eq!(msg.get_deliver(), Some(DeliverAt::After(Duration::from_secs(5))));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliverAt {
    /// At this wall-clock time, in milliseconds since the Unix epoch.
    Time(u64),
    /// This long after the message is sent (resolved against the wall clock
    /// when the producer takes the message).
    After(Duration),
}

/// An outgoing message: payload plus the optional metadata Pulsar carries.
///
/// Cheap to build and to clone: the payload is a [`Bytes`] and is never
/// copied on the way to the socket (unless compressed or batched).
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use pulsar_wire::producer::ProducerMessage;
///
/// let msg = ProducerMessage::new("hello")
///     .key("user-42")
///     .ordering_key(&b"order-7"[..])
///     .property("origin", "docs")
///     .event_time(1_700_000_000_000)
///     .deliver_after(Duration::from_secs(30));
/// assert_eq!(msg.payload(), &b"hello"[..]);
/// assert_eq!(msg.get_key(), Some("user-42"));
/// // `deliver_after` is resolved against the wall time the producer passes in.
/// assert_eq!(msg.deliver_at_time(1_000), Some(31_000));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[must_use = "a message does nothing until it is sent"]
pub struct ProducerMessage {
    payload: Bytes,
    key: Option<String>,
    /// The key is base64 text of a binary key (set when copying a received
    /// message whose key was, e.g. for a dead-letter copy).
    key_is_base64: bool,
    ordering_key: Option<Bytes>,
    properties: Vec<(String, String)>,
    event_time: Option<u64>,
    deliver: Option<DeliverAt>,
    sequence_id: Option<u64>,
    /// The payload is already encoded (encrypted, or compressed with a
    /// codec named here): it goes as it is, alone, with these fields.
    encoded: Option<Box<EncryptionContext>>,
    /// The transaction the message is produced in (set by `send_in`).
    txn: Option<TxnId>,
}

impl ProducerMessage {
    /// A message carrying `payload` and nothing else.
    pub fn new(payload: impl Into<Bytes>) -> Self {
        Self {
            payload: payload.into(),
            ..Self::default()
        }
    }

    /// Sets the partition key: it chooses the partition of a partitioned
    /// topic and the consumer on a Key_Shared subscription (unless an
    /// ordering key is set), and it is what compaction keeps the latest of.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Replaces the payload (a typed producer's encoded value).
    pub(crate) fn with_payload(mut self, payload: Bytes) -> Self {
        self.payload = payload;
        self
    }

    /// Marks the key as base64 text of a binary key (the protocol's
    /// `partition_key_b64_encoded`), as a copy of a received message keeps it.
    pub(crate) fn key_is_base64(mut self, yes: bool) -> Self {
        self.key_is_base64 = yes;
        self
    }

    /// Marks the payload as already encoded as `context` says (a copy of a
    /// message received undecoded): it is sent alone, not compressed again,
    /// with the context's encryption and compression fields.
    pub(crate) fn encoded(mut self, context: EncryptionContext) -> Self {
        self.encoded = Some(Box::new(context));
        self
    }

    /// Produces the message in transaction `txn`.
    pub(crate) const fn in_txn(mut self, txn: TxnId) -> Self {
        self.txn = Some(txn);
        self
    }

    /// The transaction the message is produced in, if any.
    pub(crate) const fn txn(&self) -> Option<TxnId> {
        self.txn
    }

    /// Whether the payload is already encoded and must go alone, as it is.
    pub(crate) fn is_encoded(&self) -> bool {
        self.encoded.is_some()
    }

    /// Sets the ordering key: on a Key_Shared subscription it takes the
    /// key's place in choosing the consumer.
    pub fn ordering_key(mut self, key: impl Into<Bytes>) -> Self {
        self.ordering_key = Some(key.into());
        self
    }

    /// Adds a property; a later value for the same name is sent too (the
    /// protocol carries a list, and consumers see the last one).
    pub fn property(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.properties.push((name.into(), value.into()));
        self
    }

    /// Sets the application's event time (ms since the Unix epoch).
    pub fn event_time(mut self, unix_millis: u64) -> Self {
        self.event_time = Some(unix_millis);
        self
    }

    /// Asks the broker to deliver the message no earlier than `unix_millis`.
    ///
    /// Only Shared and Key_Shared subscriptions honour it. A delayed message
    /// is never batched (as in the Java client).
    pub fn deliver_at(mut self, unix_millis: u64) -> Self {
        self.deliver = Some(DeliverAt::Time(unix_millis));
        self
    }

    /// Asks the broker to deliver the message no earlier than `delay` after
    /// it is sent. See [`deliver_at`](Self::deliver_at).
    pub fn deliver_after(mut self, delay: Duration) -> Self {
        self.deliver = Some(DeliverAt::After(delay));
        self
    }

    /// Sets this message's sequence id instead of the producer's next one.
    ///
    /// The broker's deduplication drops a message whose sequence id is not
    /// above the last one it stored for this producer name.
    pub fn sequence_id(mut self, sequence_id: u64) -> Self {
        self.sequence_id = Some(sequence_id);
        self
    }

    /// The payload.
    pub fn payload(&self) -> &Bytes {
        &self.payload
    }

    /// The partition key, if set.
    pub fn get_key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// The explicit sequence id, if set.
    pub fn get_sequence_id(&self) -> Option<u64> {
        self.sequence_id
    }

    /// The requested delivery time, as given.
    pub fn get_deliver(&self) -> Option<DeliverAt> {
        self.deliver
    }

    /// The delivery time in wall ms, with `deliver_after` resolved against
    /// `now_unix_millis`.
    pub fn deliver_at_time(&self, now_unix_millis: u64) -> Option<u64> {
        self.deliver.map(|d| match d {
            DeliverAt::Time(t) => t,
            DeliverAt::After(delay) => {
                now_unix_millis.saturating_add(u64::try_from(delay.as_millis()).unwrap_or(u64::MAX))
            }
        })
    }

    /// The metadata bytes this message adds besides its payload, roughly:
    /// what the batch and memory limits count on top of the payload.
    pub(crate) fn size_hint(&self) -> usize {
        self.payload.len()
            + self.key.as_ref().map_or(0, String::len)
            + self.ordering_key.as_ref().map_or(0, Bytes::len)
            + self
                .properties
                .iter()
                .map(|(k, v)| k.len() + v.len())
                .sum::<usize>()
    }

    fn proto_properties(&self) -> Vec<KeyValue> {
        self.properties
            .iter()
            .map(|(key, value)| KeyValue {
                key: key.clone(),
                value: value.clone(),
            })
            .collect()
    }

    /// The entry metadata for this message sent alone (not batched). The
    /// caller sets compression and `uncompressed_size` if it compresses.
    pub(crate) fn entry_metadata(
        &self,
        producer_name: &str,
        sequence_id: u64,
        publish_time: u64,
    ) -> MessageMetadata {
        let mut metadata = MessageMetadata {
            producer_name: producer_name.to_owned(),
            sequence_id,
            publish_time,
            properties: self.proto_properties(),
            partition_key: self.key.clone(),
            partition_key_b64_encoded: self.key_is_base64.then_some(true),
            event_time: self.event_time,
            ordering_key: self.ordering_key.clone(),
            deliver_at_time: self
                .deliver_at_time(publish_time)
                .map(|t| i64::try_from(t).unwrap_or(i64::MAX)),
            ..MessageMetadata::default()
        };
        if let Some(context) = &self.encoded {
            context.write_to(&mut metadata);
        }
        if let Some(txn) = self.txn {
            txn.write_to(&mut metadata);
        }
        metadata
    }

    /// The member metadata for this message inside a batch.
    pub(crate) fn member_metadata(&self, sequence_id: u64) -> SingleMessageMetadata {
        SingleMessageMetadata {
            properties: self.proto_properties(),
            partition_key: self.key.clone(),
            partition_key_b64_encoded: self.key_is_base64.then_some(true),
            payload_size: i32::try_from(self.payload.len()).unwrap_or(i32::MAX),
            event_time: self.event_time,
            ordering_key: self.ordering_key.clone(),
            sequence_id: Some(sequence_id),
            ..SingleMessageMetadata::default()
        }
    }
}

impl From<Bytes> for ProducerMessage {
    fn from(payload: Bytes) -> Self {
        Self::new(payload)
    }
}

impl From<Vec<u8>> for ProducerMessage {
    fn from(payload: Vec<u8>) -> Self {
        Self::new(payload)
    }
}

impl From<&'static [u8]> for ProducerMessage {
    fn from(payload: &'static [u8]) -> Self {
        Self::new(payload)
    }
}

impl From<&'static str> for ProducerMessage {
    fn from(payload: &'static str) -> Self {
        Self::new(payload)
    }
}

impl From<String> for ProducerMessage {
    fn from(payload: String) -> Self {
        Self::new(payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_metadata_carries_everything_set() {
        let msg = ProducerMessage::new("p")
            .key("k")
            .ordering_key(&b"o"[..])
            .property("a", "1")
            .property("b", "2")
            .event_time(42)
            .deliver_after(Duration::from_millis(500));
        let meta = msg.entry_metadata("prod", 9, 1_000);
        assert_eq!(meta.producer_name, "prod");
        assert_eq!((meta.sequence_id, meta.publish_time), (9, 1_000));
        assert_eq!(meta.partition_key.as_deref(), Some("k"));
        assert_eq!(meta.ordering_key.as_deref(), Some(&b"o"[..]));
        assert_eq!(meta.event_time, Some(42));
        assert_eq!(meta.deliver_at_time, Some(1_500));
        let props: Vec<_> = meta
            .properties
            .iter()
            .map(|kv| (kv.key.as_str(), kv.value.as_str()))
            .collect();
        assert_eq!(props, [("a", "1"), ("b", "2")]);
        assert_eq!(meta.num_messages_in_batch, None);
    }

    #[test]
    fn a_plain_message_sets_no_optional_field() {
        let meta = ProducerMessage::from("x").entry_metadata("p", 0, 5);
        assert_eq!(meta.partition_key, None);
        assert_eq!(meta.ordering_key, None);
        assert_eq!(meta.event_time, None);
        assert_eq!(meta.deliver_at_time, None);
        assert!(meta.properties.is_empty());
    }

    #[test]
    fn member_metadata_has_size_and_sequence() {
        let m = ProducerMessage::new(vec![0u8; 12]).key("k").event_time(7);
        let meta = m.member_metadata(33);
        assert_eq!(meta.payload_size, 12);
        assert_eq!(meta.sequence_id, Some(33));
        assert_eq!(meta.partition_key.as_deref(), Some("k"));
        assert_eq!(meta.event_time, Some(7));
    }

    #[test]
    fn deliver_at_wins_as_given_and_after_saturates() {
        let at = ProducerMessage::new("x").deliver_at(123);
        assert_eq!(at.deliver_at_time(999), Some(123));
        let far = ProducerMessage::new("x").deliver_after(Duration::MAX);
        assert_eq!(far.deliver_at_time(1), Some(u64::MAX));
        assert_eq!(ProducerMessage::new("x").deliver_at_time(1), None);
    }

    #[test]
    fn explicit_sequence_id_and_size_hint() {
        let m = ProducerMessage::new("abc")
            .sequence_id(77)
            .property("kk", "v");
        assert_eq!(m.get_sequence_id(), Some(77));
        assert_eq!(m.size_hint(), 3 + 3);
    }
}
