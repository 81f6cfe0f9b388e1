//! Chunked messages: reassembling the chunks of a message too large for one
//! entry (pure: takes `now`, never reads the clock).
//!
//! A producer with chunking on splits such a payload (after compression)
//! into entries that share `uuid`, `num_chunks_from_msg` and
//! `total_chunk_msg_size` and count `chunk_id` up from 0. Chunks of
//! different messages may interleave. [`ChunkAssembler`] collects them per
//! uuid and, on the last one, hands back the whole payload under the id of
//! the first chunk, as the Java client's `ChunkMessageId`; it remembers
//! every chunk id of that message so that [`expand`](ChunkAssembler::expand)
//! turns an ack or redelivery of the message into one of all its chunks,
//! on this connection or the next (a reconnect or rewind drops only what
//! is being assembled), until it is acked; at most
//! [`MAX_REMEMBERED_CHUNKED_MESSAGES`] are remembered, oldest forgotten first.
//!
//! As the Java client (`ConsumerImpl.processMessageChunk`):
//! - at most `max_pending` messages are being assembled; a new first chunk
//!   beyond that drops the oldest, whose chunks are acked if
//!   `auto_ack_oldest_on_full`, else left unacked (held: the ack timeout,
//!   if set, or a reconnect brings them back);
//! - a message still incomplete `expiry` after its first chunk arrived is
//!   dropped and its chunks acked (its producer is presumed gone);
//! - a chunk seen before under the same id is ignored; one with a new id
//!   for a chunk already received (a producer's resend) is acked;
//! - a chunk that does not follow the previous one of its message (a
//!   chunk was lost, or the first is missing) drops the message: its chunks
//!   are left unacked, and so is this one, unless its message was published
//!   longer than `expiry` ago, when it is acked.
//!
//! Every chunk but the one completing a message gives its permit back.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use super::actions::Action;
use crate::message_id::MessageId;
use crate::proto::MessageMetadata;
use crate::wire::Payload;

/// The Java client's `maxPendingChunkedMessage` default.
pub const DEFAULT_MAX_PENDING_CHUNKED_MESSAGES: usize = 10;

/// The Java client's `expireTimeOfIncompleteChunkedMessage` default.
pub const DEFAULT_INCOMPLETE_CHUNK_EXPIRY: Duration = Duration::from_secs(60);

/// At most this many assembled messages have their chunk ids remembered
/// for an ack: handed out or queued and not acked yet, or asked for again
/// and gone to another consumer. Past it the oldest assembled is forgotten;
/// an ack of that one names its first chunk only, and its other chunks
/// come back as chunks of no message, acked once the message is older than
/// the incomplete-message expiry (held for the ack timeout without one).
pub(crate) const MAX_REMEMBERED_CHUNKED_MESSAGES: usize = 10_000;

/// How much larger than its (compressed) bytes an assembled message may
/// decompress: an entry is limited by the broker's `max_message_size`, a
/// chunked message only by this ratio to what arrived.
const CHUNKED_DECOMPRESSION_RATIO: usize = 32;

/// The largest uncompressed size to accept for `payload`: `max_message_size`
/// for an entry, and for an assembled chunked message also
/// [`CHUNKED_DECOMPRESSION_RATIO`] times its bytes.
pub(crate) fn decompress_limit(max_message_size: usize, payload: &Payload) -> usize {
    if payload.metadata.num_chunks_from_msg.unwrap_or(0) > 1 {
        max_message_size.max(
            payload
                .data
                .len()
                .saturating_mul(CHUNKED_DECOMPRESSION_RATIO),
        )
    } else {
        max_message_size
    }
}

/// Bounds on the messages being assembled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChunkLimits {
    /// At most this many messages assembled at once (0: no bound).
    pub(crate) max_pending: usize,
    /// Drop (and ack) a message still incomplete this long after its first
    /// chunk; `None`: never.
    pub(crate) expiry: Option<Duration>,
    /// Ack the chunks of the oldest message dropped for `max_pending`
    /// (otherwise they stay unacked).
    pub(crate) auto_ack_oldest_on_full: bool,
}

impl Default for ChunkLimits {
    fn default() -> Self {
        Self {
            max_pending: DEFAULT_MAX_PENDING_CHUNKED_MESSAGES,
            expiry: Some(DEFAULT_INCOMPLETE_CHUNK_EXPIRY),
            auto_ack_oldest_on_full: false,
        }
    }
}

/// One chunk, as it arrived.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Chunk {
    pub(crate) id: MessageId,
    pub(crate) uuid: String,
    pub(crate) chunk_id: u32,
    pub(crate) num_chunks: u32,
    /// When its message was published (ms since the Unix epoch).
    pub(crate) publish_time: u64,
    pub(crate) data: Bytes,
}

impl Chunk {
    /// The chunk an entry is, or `None` for an entry that is no chunk.
    pub(crate) fn of(id: MessageId, metadata: &MessageMetadata, data: Bytes) -> Option<Self> {
        let num_chunks = u32::try_from(metadata.num_chunks_from_msg?).ok()?;
        if num_chunks < 2 {
            return None;
        }
        Some(Self {
            id,
            uuid: metadata.uuid.clone().unwrap_or_default(),
            // A negative id never follows anything: dropped as out of order.
            chunk_id: u32::try_from(metadata.chunk_id.unwrap_or(0)).unwrap_or(u32::MAX),
            num_chunks,
            publish_time: metadata.publish_time,
            data,
        })
    }
}

/// A message whose last chunk arrived.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Assembled {
    /// The id of its first chunk: the message's id.
    pub(crate) first: MessageId,
    /// The payload of every chunk, in order.
    pub(crate) data: Bytes,
}

/// Chunk ids the driver must act on outside the consumer core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Released {
    /// Ack these chunks individually.
    Ack(Vec<MessageId>),
    /// Keep these chunks unacked, held like handed-out messages (so the
    /// ack timeout asks for them again).
    Hold(Vec<MessageId>),
}

#[derive(Debug)]
struct Pending {
    ids: Vec<MessageId>,
    parts: Vec<Bytes>,
    num_chunks: u32,
    started: Instant,
}

/// Collects chunks into messages; see the module documentation.
#[derive(Debug)]
pub(crate) struct ChunkAssembler {
    limits: ChunkLimits,
    pending: HashMap<String, Pending>,
    /// Uuids being assembled, oldest first chunk first.
    order: VecDeque<String>,
    /// Every chunk id of each assembled message, by its first chunk's id,
    /// until it is acked (or forgotten past the bound, see
    /// [`MAX_REMEMBERED_CHUNKED_MESSAGES`]), with its place in `assembly`.
    assembled: HashMap<MessageId, (u64, Vec<MessageId>)>,
    /// The first chunk ids of `assembled`, in the order of assembly.
    assembly: BTreeMap<u64, MessageId>,
    next_assembly: u64,
    remembered_max: usize,
    /// Whether `assembled` is kept (off for a reader, which never acks).
    remember: bool,
    released: Vec<Released>,
}

impl ChunkAssembler {
    pub(crate) fn new(limits: ChunkLimits) -> Self {
        Self {
            limits,
            pending: HashMap::new(),
            order: VecDeque::new(),
            assembled: HashMap::new(),
            assembly: BTreeMap::new(),
            next_assembly: 0,
            remembered_max: MAX_REMEMBERED_CHUNKED_MESSAGES,
            remember: true,
            released: Vec::new(),
        }
    }

    /// An assembler that forgets a message's chunk ids once it is
    /// assembled: for a reader, which acks nothing, so nothing per message
    /// outlives its hand-over.
    pub(crate) fn forgetting(limits: ChunkLimits) -> Self {
        Self {
            remember: false,
            ..Self::new(limits)
        }
    }

    /// Takes `chunk`, arrived at `now` (`wall_ms`: the wall time, ms since
    /// the Unix epoch); returns its message once this chunk completes it.
    pub(crate) fn on_chunk(
        &mut self,
        now: Instant,
        wall_ms: u64,
        chunk: Chunk,
    ) -> Option<Assembled> {
        if chunk.chunk_id == 0 {
            self.start(now, &chunk);
        }
        let Some(pending) = self.pending.get_mut(&chunk.uuid) else {
            self.out_of_order(wall_ms, &chunk, None);
            return None;
        };
        let next = pending.ids.len();
        let index = chunk.chunk_id as usize;
        if index < next {
            // Seen under this id: a redelivery, ignored; under a new one: a
            // producer's resend, a duplicate the broker stored.
            if pending.ids[index] != chunk.id {
                self.released.push(Released::Ack(vec![chunk.id]));
            }
            return None;
        }
        if index > next || chunk.num_chunks != pending.num_chunks {
            let dropped = self.remove(&chunk.uuid);
            self.out_of_order(wall_ms, &chunk, dropped);
            return None;
        }
        pending.ids.push(chunk.id);
        pending.parts.push(chunk.data);
        if chunk.chunk_id + 1 < chunk.num_chunks {
            return None;
        }
        let done = self.remove(&chunk.uuid)?;
        let size = done.parts.iter().map(Bytes::len).sum();
        let mut data = BytesMut::with_capacity(size);
        for part in &done.parts {
            data.extend_from_slice(part);
        }
        let first = done.ids[0];
        if self.remember {
            self.remember_chunks(first, done.ids);
        }
        Some(Assembled {
            first,
            data: data.freeze(),
        })
    }

    /// Keeps the chunk ids of the message `first` names, forgetting the
    /// oldest assembled past the bound.
    fn remember_chunks(&mut self, first: MessageId, ids: Vec<MessageId>) {
        self.forget(first);
        let place = self.next_assembly;
        self.next_assembly += 1;
        self.assembled.insert(first, (place, ids));
        self.assembly.insert(place, first);
        while self.assembled.len() > self.remembered_max {
            let Some((_, oldest)) = self.assembly.pop_first() else {
                break;
            };
            self.assembled.remove(&oldest);
        }
    }

    /// Forgets the chunk ids of the message `first` names.
    fn forget(&mut self, first: MessageId) -> Option<Vec<MessageId>> {
        let (place, ids) = self.assembled.remove(&first)?;
        self.assembly.remove(&place);
        Some(ids)
    }

    /// A first chunk: a new message, or the producer sending it again.
    fn start(&mut self, now: Instant, chunk: &Chunk) {
        if let Some(pending) = self.pending.get(&chunk.uuid) {
            if pending.ids[0] == chunk.id {
                return; // a redelivery of the first chunk: ignored
            }
            // The producer began the message again: the chunks of the
            // earlier attempt are duplicates of what comes now.
            if let Some(earlier) = self.remove(&chunk.uuid) {
                self.released.push(Released::Ack(earlier.ids));
            }
        }
        if self.limits.max_pending > 0 && self.pending.len() >= self.limits.max_pending {
            if let Some(oldest) = self.order.front().cloned() {
                let dropped = self.remove(&oldest).map(|p| p.ids).unwrap_or_default();
                self.released.push(if self.limits.auto_ack_oldest_on_full {
                    Released::Ack(dropped)
                } else {
                    Released::Hold(dropped)
                });
            }
        }
        self.order.push_back(chunk.uuid.clone());
        self.pending.insert(
            chunk.uuid.clone(),
            Pending {
                ids: Vec::new(),
                parts: Vec::new(),
                num_chunks: chunk.num_chunks,
                started: now,
            },
        );
    }

    /// `chunk` does not follow what came of its message (`dropped`, now
    /// given up): the chunks stay unacked, this one too unless its message
    /// is older than the expiry.
    fn out_of_order(&mut self, wall_ms: u64, chunk: &Chunk, dropped: Option<Pending>) {
        if let Some(dropped) = dropped {
            self.released.push(Released::Hold(dropped.ids));
        }
        let expired = self.limits.expiry.is_some_and(|expiry| {
            let expiry = u64::try_from(expiry.as_millis()).unwrap_or(u64::MAX);
            wall_ms > chunk.publish_time.saturating_add(expiry)
        });
        self.released.push(if expired {
            Released::Ack(vec![chunk.id])
        } else {
            Released::Hold(vec![chunk.id])
        });
    }

    fn remove(&mut self, uuid: &str) -> Option<Pending> {
        let pending = self.pending.remove(uuid)?;
        self.order.retain(|u| u != uuid);
        Some(pending)
    }

    /// Drops, and acks the chunks of, every message still incomplete
    /// `expiry` after its first chunk.
    pub(crate) fn on_tick(&mut self, now: Instant) {
        let Some(expiry) = self.limits.expiry else {
            return;
        };
        while let Some(uuid) = self.order.front().cloned() {
            match self.pending.get(&uuid) {
                Some(p) if crate::clock::after(p.started, expiry) > now => return,
                Some(_) => {
                    if let Some(expired) = self.remove(&uuid) {
                        self.released.push(Released::Ack(expired.ids));
                    }
                }
                None => {
                    self.order.pop_front();
                }
            }
        }
    }

    /// When [`on_tick`](Self::on_tick) has work: the oldest incomplete
    /// message's expiry.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        let expiry = self.limits.expiry?;
        let oldest = self.pending.get(self.order.front()?)?;
        Some(crate::clock::after(oldest.started, expiry))
    }

    /// What the driver must ack or hold, oldest first.
    pub(crate) fn take_released(&mut self) -> Vec<Released> {
        std::mem::take(&mut self.released)
    }

    /// The subscription starts over (a reconnect, or a rewind on Exclusive
    /// or Failover): every unacked chunk comes again, so what was being
    /// assembled is dropped, and nothing is acked. The chunk ids of the
    /// messages assembled before stay: an application may ack those it
    /// holds on any connection, and the ack must name every chunk.
    pub(crate) fn restart(&mut self) {
        self.pending.clear();
        self.order.clear();
    }

    /// The core's action in terms of chunks: an ack or redelivery naming
    /// an assembled message names all its chunks; a cumulative ack of one
    /// goes up to its last chunk. A rewind restarts the assembly. An acked
    /// message's chunk ids are forgotten.
    pub(crate) fn expand<M>(&mut self, action: Action<M>) -> Action<M> {
        if self.assembled.is_empty() {
            if matches!(action, Action::RedeliverAll { .. }) {
                self.restart();
            }
            return action;
        }
        match action {
            Action::Ack {
                ids,
                cumulative: false,
                ack_set,
            } => Action::Ack {
                ids: self.chunks_of(ids, true),
                cumulative: false,
                ack_set,
            },
            Action::Ack {
                ids,
                cumulative: true,
                ack_set,
            } => {
                let upto = ids.iter().copied().max();
                let last = upto.and_then(|u| self.assembled.get(&u)?.1.last().copied());
                if let Some(upto) = upto {
                    let covered: Vec<_> = self
                        .assembled
                        .keys()
                        .filter(|f| **f <= upto)
                        .copied()
                        .collect();
                    for first in covered {
                        self.forget(first);
                    }
                }
                let ids = match last {
                    Some(last) => vec![last],
                    None => ids,
                };
                Action::Ack {
                    ids,
                    cumulative: true,
                    ack_set,
                }
            }
            Action::Redeliver(ids) => Action::Redeliver(self.chunks_of(ids, false)),
            Action::RedeliverAll { consumer_epoch } => {
                self.restart();
                Action::RedeliverAll { consumer_epoch }
            }
            other => other,
        }
    }

    fn chunks_of(&mut self, ids: Vec<MessageId>, forget: bool) -> Vec<MessageId> {
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let chunks = if forget {
                self.forget(id)
            } else {
                self.assembled.get(&id).map(|(_, ids)| ids.clone())
            };
            match chunks {
                Some(chunks) => out.extend(chunks),
                None => out.push(id),
            }
        }
        out
    }

    /// The first chunk of the oldest message being assembled (the
    /// earliest in the topic).
    pub(crate) fn first_pending(&self) -> Option<MessageId> {
        self.pending
            .values()
            .filter_map(|p| p.ids.first().copied())
            .min_by_key(|id| (id.ledger_id, id.entry_id))
    }

    /// Messages being assembled.
    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Assembled messages whose chunk ids are remembered.
    #[cfg(test)]
    pub(crate) fn assembled(&self) -> usize {
        debug_assert_eq!(self.assembled.len(), self.assembly.len());
        self.assembled.len()
    }

    /// The same, remembering at most `max` assembled messages.
    #[cfg(test)]
    pub(crate) fn remembering_at_most(mut self, max: usize) -> Self {
        self.remembered_max = max;
        self
    }
}

#[cfg(test)]
#[path = "chunks_tests.rs"]
mod tests;
