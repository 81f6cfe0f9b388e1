//! From one broker delivery to the application's messages (pure).
//!
//! A `MESSAGE` carries one entry: a plain message or a batch, maybe
//! compressed. [`unpack`] checks it, decompresses it (refusing announced
//! sizes over the limit before allocating), splits a batch into its
//! members, each with its own id (`batch_index`), key, properties and event
//! time, and skips the members the broker's `ack_set` marks as acked.
//!
//! # A bad entry is reported, not redelivered
//!
//! An entry whose checksum does not match, that does not decompress, or
//! whose batch does not parse (or announces more than
//! [`MAX_BATCH_MEMBERS`] members) is never handed to the application. The
//! driver reports it with `CommandAck` carrying the
//! [`ValidationError`] of [`UnpackError::validation_error`], as the Java
//! client does. We chose reporting over redelivery because the broker
//! verifies a producer's checksum when it stores an entry and then serves
//! the stored bytes, so a mismatch at the consumer almost always means the
//! stored entry (or a codec's output) is bad: a redelivery would bring the
//! same bytes back, forever, stalling an Exclusive or Failover subscription
//! on it. The broker logs the validation error, so the loss is visible to
//! operators, and the connection stays up.
//!
//! # An entry we cannot decode is not deleted
//!
//! An encrypted entry (this client holds no keys) or one compressed with a
//! codec it does not know becomes one message carrying its payload as it
//! came and its [`EncryptionContext`] (see `crypto.rs`). Only
//! [`CryptoFailureAction::Discard`] reports an encrypted entry to the
//! broker as above (which deletes it); otherwise it goes through the
//! consumer core like any message, and the driver hands it out
//! ([`CryptoFailureAction::Consume`]) or, in its place, an error naming it.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;

use super::crypto::{CryptoFailureAction, EncryptionContext, Unreadable};
use super::message::{Message, MessageFields, Undecoded};
use crate::compression::{Compression, CompressionError};
use crate::message_id::MessageId;
use crate::proto::command_ack::ValidationError;
use crate::proto::{KeyValue, MessageMetadata};
use crate::wire::batch::{self, BatchError};
use crate::wire::{Checksum, Payload};

/// The most members a consumer takes from one batched entry; a batch that
/// announces more is refused as a batch that does not parse, before any
/// member is read.
///
/// Each member becomes a [`Message`] of its own, with its queue slot and
/// ack bookkeeping: several hundred bytes whatever its payload, so an entry
/// of up to the broker's `max_message_size` (5 MiB) of empty members would
/// otherwise make more than a million at once. 100,000 is a hundred times
/// the Java producer's default batch (`batchingMaxMessages`, 1000) and twice
/// the broker's default `maxUnackedMessagesPerConsumer` (50,000); the broker
/// itself puts no bound on the members of an entry.
pub const MAX_BATCH_MEMBERS: u32 = 100_000;

/// An entry that cannot be handed to the application.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum UnpackError {
    /// The payload's checksum did not match its bytes.
    #[error("entry {id}: checksum mismatch (carried {carried:#010x}, computed {computed:#010x})")]
    Checksum {
        /// The entry.
        id: MessageId,
        /// The checksum the frame carried.
        carried: u32,
        /// The checksum of the bytes that arrived.
        computed: u32,
    },
    /// The payload did not decompress as its metadata says.
    #[error("entry {id}: {source}")]
    Decompression {
        /// The entry.
        id: MessageId,
        /// What went wrong.
        #[source]
        source: CompressionError,
    },
    /// The batch did not split into the members its metadata announces.
    #[error("entry {id}: {source}")]
    Batch {
        /// The entry.
        id: MessageId,
        /// What went wrong.
        #[source]
        source: BatchError,
    },
    /// The entry is encrypted, this client cannot decrypt, and the crypto
    /// failure action is [`CryptoFailureAction::Discard`].
    #[error("entry {id} is encrypted; discarded as configured")]
    Encrypted {
        /// The entry.
        id: MessageId,
    },
}

impl UnpackError {
    /// The validation error to report to the broker with the ack.
    pub(crate) fn validation_error(&self) -> ValidationError {
        match self {
            Self::Checksum { .. } => ValidationError::ChecksumMismatch,
            Self::Decompression {
                source:
                    CompressionError::TooLarge { .. }
                    | CompressionError::SizeMismatch { .. }
                    | CompressionError::Implausible { .. },
                ..
            } => ValidationError::UncompressedSizeCorruption,
            Self::Decompression { .. } => ValidationError::DecompressionError,
            Self::Batch { .. } => ValidationError::BatchDeSerializeError,
            Self::Encrypted { .. } => ValidationError::DecryptionError,
        }
    }

    /// The entry's id.
    pub(crate) fn id(&self) -> MessageId {
        match self {
            Self::Checksum { id, .. }
            | Self::Decompression { id, .. }
            | Self::Batch { id, .. }
            | Self::Encrypted { id } => *id,
        }
    }
}

/// One delivery, as the connection routed it to the consumer.
#[derive(Debug)]
pub(crate) struct Delivery<'a> {
    /// The full topic (partition) name the consumer subscribed to.
    pub(crate) topic: &'a Arc<str>,
    /// The partition of that topic (-1 when not partitioned); set on every
    /// id, since brokers may leave it out.
    pub(crate) partition: i32,
    pub(crate) message_id: MessageId,
    /// For a chunked message assembled whole, its last chunk's id.
    pub(crate) last_chunk: Option<MessageId>,
    pub(crate) redelivery_count: u32,
    /// Bit `i` set: member `i` is still unacked (empty: all are).
    pub(crate) ack_set: &'a [i64],
    pub(crate) payload: Box<Payload>,
    /// The largest uncompressed size accepted (the broker's max message size).
    pub(crate) max_size: usize,
    /// What to do with an encrypted entry.
    pub(crate) crypto: CryptoFailureAction,
}

/// The application's messages from one entry.
#[derive(Debug, PartialEq)]
pub(crate) struct Unpacked {
    /// The entry's id (with the partition, without a batch index).
    pub(crate) entry: MessageId,
    /// The messages to hand out, in order.
    pub(crate) messages: Vec<Message>,
    /// The number of members, for a batch; `None` for a plain message.
    pub(crate) batch_size: Option<u32>,
    /// Indexes of batch members not handed out (acked per `ack_set`, or
    /// compacted out).
    pub(crate) skipped: Vec<i32>,
}

/// Turns one delivery into the application's messages.
///
/// # Errors
/// An [`UnpackError`] for a checksum mismatch, an encrypted entry to
/// discard, a payload that does not decompress to its announced size (or announces
/// more than `max_size`), or a batch that does not split or announces more
/// than [`MAX_BATCH_MEMBERS`].
pub(crate) fn unpack(d: Delivery<'_>) -> Result<Unpacked, UnpackError> {
    let id = d.message_id.with_partition(d.partition).entry();
    // Read where it was decoded: the payload stays in its box.
    let payload = d.payload;
    let (checksum, data, metadata) = (payload.checksum, payload.data, &payload.metadata);
    if let Checksum::Mismatch { carried, computed } = checksum {
        return Err(UnpackError::Checksum {
            id,
            carried,
            computed,
        });
    }
    let encrypted = !metadata.encryption_keys.is_empty();
    if encrypted && d.crypto == CryptoFailureAction::Discard {
        return Err(UnpackError::Encrypted { id });
    }
    let entry = Entry {
        topic: d.topic.clone(),
        producer_name: metadata.producer_name.as_str().into(),
        redelivery_count: d.redelivery_count,
        last_chunk: d.last_chunk,
        metadata,
    };
    let codec = metadata.compression.unwrap_or_default();
    let known = Compression::from_proto(codec);
    if encrypted || known.is_err() {
        let unreadable = match (encrypted, d.crypto) {
            (true, CryptoFailureAction::Consume) => None,
            (true, _) => Some(Unreadable::Encrypted),
            (false, _) => Some(Unreadable::UnknownCompression(codec)),
        };
        let mut message = entry.plain(id, data);
        Arc::make_mut(&mut message.0).undecoded = Some(Box::new(Undecoded {
            context: EncryptionContext::of(metadata),
            unreadable,
        }));
        return Ok(Unpacked {
            entry: id,
            messages: vec![message],
            batch_size: None,
            skipped: Vec::new(),
        });
    }
    let too_many = metadata
        .num_messages_in_batch
        .filter(|count| i64::from(*count) > i64::from(MAX_BATCH_MEMBERS));
    if let Some(count) = too_many {
        let source = BatchError::TooManyMembers {
            count,
            max: MAX_BATCH_MEMBERS,
        };
        return Err(UnpackError::Batch { id, source });
    }
    let data = known
        .and_then(|codec| {
            codec.decompress(data, metadata.uncompressed_size.unwrap_or(0), d.max_size)
        })
        .map_err(|source| UnpackError::Decompression { id, source })?;
    let Some(count) = metadata.num_messages_in_batch else {
        return Ok(Unpacked {
            entry: id,
            messages: vec![entry.plain(id, data)],
            batch_size: None,
            skipped: Vec::new(),
        });
    };
    let mut messages = Vec::with_capacity(count.clamp(0, 1024) as usize);
    let mut skipped = Vec::new();
    for member in batch::members(data, count) {
        let member = member.map_err(|source| UnpackError::Batch { id, source })?;
        if member.metadata.compacted_out() || !still_unacked(d.ack_set, member.index) {
            skipped.push(member.index);
            continue;
        }
        messages.push(entry.member(id, member));
    }
    Ok(Unpacked {
        entry: id,
        messages,
        batch_size: Some(count.max(0) as u32),
        skipped,
    })
}

/// Whether `ack_set` (bit set = unacked, as Java's `BitSet.toLongArray`)
/// leaves member `index` to deliver. An empty set means every member.
pub(crate) fn still_unacked(ack_set: &[i64], index: i32) -> bool {
    if ack_set.is_empty() {
        return true;
    }
    let index = index as usize;
    ack_set
        .get(index / 64)
        .is_some_and(|word| (*word as u64) & (1 << (index % 64)) != 0)
}

/// What every message of one entry shares.
struct Entry<'a> {
    topic: Arc<str>,
    producer_name: Arc<str>,
    redelivery_count: u32,
    last_chunk: Option<MessageId>,
    metadata: &'a MessageMetadata,
}

impl Entry<'_> {
    fn plain(&self, id: MessageId, payload: Bytes) -> Message {
        let m = self.metadata;
        Message(Arc::new(MessageFields {
            id,
            topic: self.topic.clone(),
            payload,
            key: m.partition_key.clone(),
            key_is_base64: m.partition_key_b64_encoded(),
            ordering_key: m.ordering_key.clone(),
            properties: properties(&m.properties),
            event_time: nonzero(m.event_time),
            publish_time: m.publish_time,
            producer_name: self.producer_name.clone(),
            sequence_id: m.sequence_id,
            redelivery_count: self.redelivery_count,
            null_value: m.null_value(),
            batch_size: None,
            undecoded: None,
            schema_version: m.schema_version.clone(),
            last_chunk: self.last_chunk,
        }))
    }

    fn member(&self, entry: MessageId, member: batch::Member) -> Message {
        let s = member.metadata;
        let index = member.index;
        Message(Arc::new(MessageFields {
            id: entry.with_batch_index(index),
            topic: self.topic.clone(),
            payload: member.payload,
            key: s.partition_key,
            key_is_base64: s.partition_key_b64_encoded.unwrap_or(false),
            ordering_key: s.ordering_key,
            properties: properties(&s.properties),
            event_time: nonzero(s.event_time),
            publish_time: self.metadata.publish_time,
            producer_name: self.producer_name.clone(),
            sequence_id: s.sequence_id.unwrap_or(
                self.metadata
                    .sequence_id
                    .saturating_add(u64::from(index.unsigned_abs())),
            ),
            redelivery_count: self.redelivery_count,
            null_value: s.null_value.unwrap_or(false),
            batch_size: self.metadata.num_messages_in_batch.map(|n| n.max(0) as u32),
            undecoded: None,
            schema_version: self.metadata.schema_version.clone(),
            last_chunk: None,
        }))
    }
}

fn nonzero(time: Option<u64>) -> Option<u64> {
    time.filter(|t| *t != 0)
}

fn properties(kv: &[KeyValue]) -> HashMap<String, String> {
    kv.iter()
        .map(|p| (p.key.clone(), p.value.clone()))
        .collect()
}

#[cfg(test)]
#[path = "unpack_tests.rs"]
mod tests;
