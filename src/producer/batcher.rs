//! The batch container: messages in, SEND-ready entries out.
//!
//! Pure (C1): it takes `now` and the wall time as arguments and queues what
//! is ready; the driver polls [`Batcher::poll_ready`] and arms one timer at
//! [`Batcher::next_deadline`]. Each message carries a token `T` (the driver's
//! reply channel; a number in tests) that comes back in the entry it lands in.
//!
//! As in the Java client: a batch is sealed when the next message would take
//! it over `max_bytes` or it holds `max_messages`, when its first message is
//! `max_delay` old, or on flush. A message with a delivery time is never
//! batched (Java's `canAddToBatch`), and the open batch is sealed before it
//! so entries stay in sequence order.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use super::ProducerMessage;
use crate::compression::{Compression, CompressionError};
use crate::ids::TxnId;
use crate::proto::MessageMetadata;
use crate::wire::batch;

/// Batching and compression settings for one producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchConfig {
    /// Whether messages are batched at all.
    pub(crate) enabled: bool,
    /// At most this many messages per batch (default 1000).
    pub(crate) max_messages: usize,
    /// At most this many payload bytes per batch (default 128 KiB); a single
    /// larger message still goes, alone.
    pub(crate) max_bytes: usize,
    /// A batch is sent at the latest this long after its first message (default 10 ms).
    pub(crate) max_delay: Duration,
    /// The codec applied to each entry's payload.
    pub(crate) compression: Compression,
}

impl Default for BatchConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            max_messages: 1000,
            max_bytes: 128 * 1024,
            max_delay: Duration::from_millis(10),
            compression: Compression::None,
        }
    }
}

/// One SEND's worth: a single message or a sealed batch.
#[derive(Debug)]
pub(crate) struct Entry<T> {
    /// Complete entry metadata (sequence ids, batch count, compression).
    pub(crate) metadata: MessageMetadata,
    /// The payload as it travels: compressed and/or a batch.
    pub(crate) payload: Bytes,
    /// Sequence id of the first message (the SEND's `sequence_id`).
    pub(crate) first: u64,
    /// Sequence id of the last message (`highest_sequence_id`).
    pub(crate) last: u64,
    /// Whether members are batch members (ids get a `batch_index`).
    pub(crate) batched: bool,
    /// Bytes the messages held before batching and compression.
    pub(crate) uncompressed: usize,
    /// One token per message, in batch order.
    pub(crate) tokens: Vec<T>,
}

impl<T> Entry<T> {
    /// How many messages the entry holds.
    #[cfg(test)]
    pub(crate) fn num_messages(&self) -> i32 {
        i32::try_from(self.tokens.len()).unwrap_or(i32::MAX)
    }
}

/// An entry that could not be built; its messages fail with `error`.
#[derive(Debug)]
pub(crate) struct SealError<T> {
    pub(crate) tokens: Vec<T>,
    pub(crate) error: CompressionError,
}

/// What [`Batcher::poll_ready`] yields, in send order.
pub(crate) type Sealed<T> = Result<Entry<T>, SealError<T>>;

/// The batch container of one producer.
#[derive(Debug)]
pub(crate) struct Batcher<T> {
    config: BatchConfig,
    producer_name: String,
    /// The schema version every entry carries (a producer with a schema).
    schema_version: Option<Bytes>,
    buf: BytesMut,
    payload_bytes: usize,
    first: u64,
    last: u64,
    publish_time: u64,
    opened_at: Option<Instant>,
    /// The transaction of the open batch's messages (a batch never mixes
    /// transactions, nor transactional and plain messages).
    txn: Option<TxnId>,
    tokens: Vec<T>,
    ready: VecDeque<Sealed<T>>,
}

impl<T> Batcher<T> {
    pub(crate) fn new(config: BatchConfig, producer_name: impl Into<String>) -> Self {
        Self {
            config,
            producer_name: producer_name.into(),
            schema_version: None,
            buf: BytesMut::new(),
            payload_bytes: 0,
            first: 0,
            last: 0,
            publish_time: 0,
            opened_at: None,
            txn: None,
            tokens: Vec::new(),
            ready: VecDeque::new(),
        }
    }

    /// Stamps every entry with `version`, the producer's schema version.
    pub(crate) fn with_schema_version(mut self, version: Option<Bytes>) -> Self {
        self.schema_version = version;
        self
    }

    /// Takes `msg` with its resolved `sequence_id`, at `now` / `wall_ms`.
    pub(crate) fn push(
        &mut self,
        now: Instant,
        wall_ms: u64,
        sequence_id: u64,
        msg: &ProducerMessage,
        token: T,
    ) {
        if !self.config.enabled || msg.get_deliver().is_some() || msg.is_encoded() {
            self.flush();
            let mut metadata = msg.entry_metadata(&self.producer_name, sequence_id, wall_ms);
            metadata.schema_version.clone_from(&self.schema_version);
            let sealed = if msg.is_encoded() {
                Ok(self.entry(metadata, msg.payload().clone(), false, vec![token]))
            } else {
                self.seal(metadata, msg.payload().clone(), false, vec![token])
            };
            self.ready.push_back(sealed);
            return;
        }
        let size = msg.payload().len();
        let fits = self.payload_bytes + size <= self.config.max_bytes
            && self.tokens.len() < self.config.max_messages;
        if !self.tokens.is_empty() && (!fits || self.txn != msg.txn()) {
            self.flush();
        }
        if self.tokens.is_empty() {
            self.txn = msg.txn();
            self.first = sequence_id;
            self.publish_time = wall_ms;
            self.opened_at = Some(now);
        }
        self.last = sequence_id;
        batch::write_member(
            &msg.member_metadata(sequence_id),
            msg.payload(),
            &mut self.buf,
        );
        self.payload_bytes += size;
        self.tokens.push(token);
        if self.payload_bytes >= self.config.max_bytes
            || self.tokens.len() >= self.config.max_messages
        {
            self.flush();
        }
    }

    /// Seals the open batch, if any, so it is ready to send.
    pub(crate) fn flush(&mut self) {
        if self.tokens.is_empty() {
            return;
        }
        let tokens = std::mem::take(&mut self.tokens);
        let mut metadata = MessageMetadata {
            producer_name: self.producer_name.clone(),
            sequence_id: self.first,
            publish_time: self.publish_time,
            num_messages_in_batch: Some(i32::try_from(tokens.len()).unwrap_or(i32::MAX)),
            highest_sequence_id: Some(self.last),
            schema_version: self.schema_version.clone(),
            ..MessageMetadata::default()
        };
        if let Some(txn) = self.txn.take() {
            txn.write_to(&mut metadata);
        }
        let payload = self.buf.split().freeze();
        self.payload_bytes = 0;
        self.opened_at = None;
        let sealed = self.seal(metadata, payload, true, tokens);
        self.ready.push_back(sealed);
    }

    /// When the open batch must go at the latest (arm one timer for it).
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.opened_at
            .map(|t| crate::clock::after(t, self.config.max_delay))
    }

    /// Seals the open batch if its deadline has passed.
    pub(crate) fn on_tick(&mut self, now: Instant) {
        if self.next_deadline().is_some_and(|d| d <= now) {
            self.flush();
        }
    }

    /// The next entry to send, oldest first.
    pub(crate) fn poll_ready(&mut self) -> Option<Sealed<T>> {
        self.ready.pop_front()
    }

    /// Messages held (open batch and sealed entries not yet polled).
    pub(crate) fn len(&self) -> usize {
        self.tokens.len()
            + self
                .ready
                .iter()
                .map(|r| {
                    r.as_ref()
                        .map_or_else(|e| e.tokens.len(), |e| e.tokens.len())
                })
                .sum::<usize>()
    }

    /// Takes every held token back (the producer is failing or closing).
    pub(crate) fn drain(&mut self) -> Vec<T> {
        let mut out = Vec::new();
        for sealed in self.ready.drain(..) {
            out.extend(match sealed {
                Ok(entry) => entry.tokens,
                Err(e) => e.tokens,
            });
        }
        out.append(&mut self.tokens);
        self.buf.clear();
        self.payload_bytes = 0;
        self.opened_at = None;
        out
    }

    fn seal(
        &self,
        mut metadata: MessageMetadata,
        raw: Bytes,
        batched: bool,
        tokens: Vec<T>,
    ) -> Sealed<T> {
        let uncompressed = raw.len();
        let codec = self.config.compression;
        let payload = if codec == Compression::None {
            raw
        } else {
            match codec.compress(&raw) {
                Ok(packed) => {
                    metadata.compression = Some(codec.to_proto() as i32);
                    metadata.uncompressed_size =
                        Some(u32::try_from(uncompressed).unwrap_or(u32::MAX));
                    packed
                }
                Err(error) => return Err(SealError { tokens, error }),
            }
        };
        let mut entry = self.entry(metadata, payload, batched, tokens);
        entry.uncompressed = uncompressed;
        Ok(entry)
    }

    /// The entry of `payload`, encoded as `metadata` says.
    fn entry(
        &self,
        metadata: MessageMetadata,
        payload: Bytes,
        batched: bool,
        tokens: Vec<T>,
    ) -> Entry<T> {
        let first = metadata.sequence_id;
        let last = metadata.highest_sequence_id.unwrap_or(first);
        Entry {
            metadata,
            uncompressed: payload.len(),
            payload,
            first,
            last,
            batched,
            tokens,
        }
    }
}

#[cfg(test)]
#[path = "batcher_tests.rs"]
mod tests;
