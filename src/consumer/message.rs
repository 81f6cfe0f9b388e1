//! The public [`Message`]: what the application receives.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;

use super::crypto::{EncryptionContext, Unreadable};
use crate::message_id::MessageId;

/// One message as the application receives it: a plain message, or one
/// member of a batch with its own id (`batch_index`), key and properties.
///
/// Cloning is cheap: the payload is a [`Bytes`] view into the received
/// frame (or the decompressed batch), never a copy.
///
/// The fields live in one shared allocation, so a `Message` is a pointer
/// wide: it moves through the receiver queue and the hand-over to
/// `receive()` without copying its ~250 bytes at every step, and a clone
/// (`Consumer::run` keeps one while the handler has the message) shares
/// them.
#[derive(Clone, PartialEq)]
pub struct Message(pub(crate) std::sync::Arc<MessageFields>);

impl std::fmt::Debug for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// What a [`Message`] holds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MessageFields {
    pub(crate) id: MessageId,
    pub(crate) topic: Arc<str>,
    pub(crate) payload: Bytes,
    pub(crate) key: Option<String>,
    pub(crate) key_is_base64: bool,
    pub(crate) ordering_key: Option<Bytes>,
    pub(crate) properties: HashMap<String, String>,
    pub(crate) event_time: Option<u64>,
    pub(crate) publish_time: u64,
    pub(crate) producer_name: Arc<str>,
    pub(crate) sequence_id: u64,
    pub(crate) redelivery_count: u32,
    pub(crate) null_value: bool,
    /// For a batch member, the size of its batch (an ack of it after a
    /// reconnect needs it to leave the siblings unacked).
    pub(crate) batch_size: Option<u32>,
    /// Set when the payload is handed over as it came (encrypted, or with
    /// an unknown codec).
    pub(crate) undecoded: Option<Box<Undecoded>>,
    /// The version of the schema the producer wrote it with.
    pub(crate) schema_version: Option<Bytes>,
    /// For a chunked message, its last chunk's id: where the message ends
    /// in the topic (`id` holds its first chunk's, by which the consumer
    /// knows it inside).
    pub(crate) last_chunk: Option<MessageId>,
}

/// A message whose payload was not decoded.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Undecoded {
    /// How the payload is encoded.
    pub(crate) context: EncryptionContext,
    /// Set when the message must not reach the application.
    pub(crate) unreadable: Option<Unreadable>,
}

impl Message {
    /// The message id; a batch member's carries its `batch_index`, a
    /// partition's message its partition. A chunked message's is its last
    /// chunk's, with its first chunk beside it
    /// ([`MessageId::first_chunk`]), as the Java client's: ids rise in
    /// the order messages are handed out on an Exclusive or Failover
    /// subscription.
    pub fn id(&self) -> MessageId {
        match self.0.last_chunk {
            Some(last) => last.with_first_chunk(self.0.id),
            None => self.0.id,
        }
    }

    /// Where the message ends in its topic: its id, or a chunked
    /// message's last chunk (as the Java client orders chunked ids).
    pub(crate) fn position(&self) -> MessageId {
        self.0.last_chunk.unwrap_or(self.0.id)
    }

    /// The full name of the topic it came from (for a partitioned topic,
    /// the partition, e.g. `persistent://public/default/t-partition-2`).
    pub fn topic(&self) -> &str {
        &self.0.topic
    }

    /// The message bytes, uncompressed; a view, not a copy. For a message
    /// handed out undecrypted (see
    /// [`encryption_context`](Self::encryption_context)), the ciphertext.
    pub fn payload(&self) -> &Bytes {
        &self.0.payload
    }

    /// Takes the payload out of the message (no copy: a `Bytes` shares
    /// the frame's bytes).
    pub fn into_payload(self) -> Bytes {
        match std::sync::Arc::try_unwrap(self.0) {
            Ok(fields) => fields.payload,
            Err(shared) => shared.payload.clone(),
        }
    }

    /// The partition key, if the producer set one.
    pub fn key(&self) -> Option<&str> {
        self.0.key.as_deref()
    }

    /// Whether [`key`](Self::key) is base64 text of a binary key (the
    /// producer's `partition_key_b64_encoded`).
    pub fn key_is_base64(&self) -> bool {
        self.0.key_is_base64
    }

    /// The ordering key (Key_Shared dispatch uses it before the key).
    pub fn ordering_key(&self) -> Option<&Bytes> {
        self.0.ordering_key.as_ref()
    }

    /// The application properties.
    pub fn properties(&self) -> &HashMap<String, String> {
        &self.0.properties
    }

    /// The event time the producer set, in ms since the Unix epoch; `None`
    /// when it set none.
    pub fn event_time(&self) -> Option<u64> {
        self.0.event_time
    }

    /// When the broker received it, in ms since the Unix epoch (for a batch,
    /// the batch's publish time).
    pub fn publish_time(&self) -> u64 {
        self.0.publish_time
    }

    /// The name of the producer that sent it.
    pub fn producer_name(&self) -> &str {
        &self.0.producer_name
    }

    /// The producer's sequence id for it (a batch member's own, when the
    /// producer set one; otherwise the batch's plus the member's index).
    pub fn sequence_id(&self) -> u64 {
        self.0.sequence_id
    }

    /// How often the broker delivered it before (Shared and Key_Shared
    /// only; always 0 on Exclusive and Failover).
    pub fn redelivery_count(&self) -> u32 {
        self.0.redelivery_count
    }

    /// The version of the schema it was written with (for a batch member,
    /// its batch's); `None` from a producer without a schema (or with an
    /// empty version, as pulsar-lite gives producers).
    pub fn schema_version(&self) -> Option<crate::schema::SchemaVersion> {
        self.0
            .schema_version
            .clone()
            .filter(|v| !v.is_empty())
            .map(crate::schema::SchemaVersion)
    }

    /// Whether the producer sent a null value (a tombstone on a compacted
    /// topic); the payload is then empty.
    pub fn is_null_value(&self) -> bool {
        self.0.null_value
    }

    /// For an encrypted message handed out undecrypted (the consumer's
    /// [`CryptoFailureAction::Consume`](super::CryptoFailureAction::Consume)):
    /// its encryption keys, algorithm and parameter, and the compression
    /// and batch size under the encryption. `None` for a decoded message.
    pub fn encryption_context(&self) -> Option<&EncryptionContext> {
        self.0
            .undecoded
            .as_ref()
            .map(|u| &u.context)
            .filter(|c| c.is_encrypted())
    }

    /// Why the application must not get this message, if so.
    pub(crate) fn unreadable(&self) -> Option<Unreadable> {
        self.0.undecoded.as_ref().and_then(|u| u.unreadable)
    }
}

/// What a queued message holds beyond its payload: its shared fields (with
/// the reference counts of their allocation), its slot in the receiver
/// queue, and its entry in the queue's id set (the id, with room for the
/// table's control bytes and spare capacity). Its key and properties are
/// not counted: they come from its entry, which the broker's max message
/// size bounds.
pub(crate) const MESSAGE_OVERHEAD: usize = std::mem::size_of::<MessageFields>()
    + 2 * std::mem::size_of::<usize>()
    + std::mem::size_of::<crate::consumer::core::actions::Incoming<Message>>()
    + std::mem::size_of::<MessageId>()
    + std::mem::size_of::<u64>();

impl crate::consumer::core::receiver_queue::QueuedBytes for Message {
    /// The payload and [`MESSAGE_OVERHEAD`]: what the receiver queue holds
    /// of it against the client's memory limit (a batch receive's byte
    /// bound takes the overhead off again, see `batch_receive.rs`).
    fn queued_bytes(&self) -> usize {
        self.0.payload.len() + MESSAGE_OVERHEAD
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consumer::core::receiver_queue::QueuedBytes as _;

    fn with_payload(payload: Bytes) -> Message {
        Message(std::sync::Arc::new(MessageFields {
            id: MessageId::new(3, 4),
            topic: "persistent://public/default/t".into(),
            payload,
            key: None,
            key_is_base64: false,
            ordering_key: None,
            properties: HashMap::new(),
            event_time: None,
            publish_time: 8,
            producer_name: "p".into(),
            sequence_id: 9,
            redelivery_count: 0,
            null_value: false,
            batch_size: None,
            undecoded: None,
            schema_version: None,
            last_chunk: None,
        }))
    }

    #[test]
    fn a_queued_message_counts_its_bookkeeping_with_its_payload() {
        let empty = with_payload(Bytes::new());
        assert_eq!(empty.queued_bytes(), MESSAGE_OVERHEAD);
        assert!(MESSAGE_OVERHEAD > std::mem::size_of::<MessageFields>());
        let five = with_payload(Bytes::from_static(b"hello"));
        assert_eq!(five.queued_bytes(), 5 + MESSAGE_OVERHEAD);
    }

    #[test]
    fn accessors_return_what_was_stored_without_copying_the_payload() {
        let payload = Bytes::from_static(b"hello");
        let m = Message(std::sync::Arc::new(MessageFields {
            id: MessageId::new(3, 4).with_batch_index(1),
            topic: "persistent://public/default/t".into(),
            payload: payload.clone(),
            key: Some("k".into()),
            key_is_base64: false,
            ordering_key: Some(Bytes::from_static(b"o")),
            properties: HashMap::from([("a".to_owned(), "b".to_owned())]),
            event_time: Some(7),
            publish_time: 8,
            producer_name: "p".into(),
            sequence_id: 9,
            redelivery_count: 2,
            null_value: false,
            batch_size: None,
            undecoded: None,
            schema_version: None,
            last_chunk: None,
        }));
        assert_eq!(m.id().batch_index, 1);
        assert_eq!(m.topic(), "persistent://public/default/t");
        assert_eq!(m.key(), Some("k"));
        assert_eq!(m.properties()["a"], "b");
        assert_eq!((m.event_time(), m.publish_time()), (Some(7), 8));
        assert_eq!((m.sequence_id(), m.redelivery_count()), (9, 2));
        assert_eq!(m.producer_name(), "p");
        assert_eq!(m.payload().as_ptr(), payload.as_ptr());
    }
}
