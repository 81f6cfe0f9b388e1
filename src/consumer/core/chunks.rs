//! Chunked messages: reassembling the chunks of a message too large for one
//! entry (pure: takes `now`, never reads the clock).
//!
//! A producer with chunking on splits such a payload (after compression)
//! into entries that share `uuid`, `num_chunks_from_msg` and
//! `total_chunk_msg_size` and count `chunk_id` up from 0. Chunks of
//! different messages may interleave. [`ChunkAssembler`] collects them per
//! uuid and, on the last one, hands back the whole payload under the id of
//! the first chunk, by which the consumer knows it inside (the
//! application sees the last chunk's, the first beside it, as the Java
//! client's `ChunkMessageId`); it remembers
//! every chunk id of that message so that [`expand`](ChunkAssembler::expand)
//! turns an ack or redelivery of the message into one of all its chunks,
//! on this connection or the next (a reconnect or rewind drops only what
//! is being assembled), until it is acked; at most
//! [`MAX_REMEMBERED_CHUNKED_MESSAGES`](remembered::MAX_REMEMBERED_CHUNKED_MESSAGES)
//! messages and [`MAX_REMEMBERED_CHUNK_IDS`](remembered::MAX_REMEMBERED_CHUNK_IDS)
//! chunk ids are remembered, oldest forgotten first (see
//! `chunks_remembered.rs`).
//!
//! As the Java client (`ConsumerImpl.processMessageChunk`):
//! - at most `max_pending` messages are being assembled; a new first chunk
//!   beyond that drops the oldest, whose chunks are acked if
//!   `auto_ack_oldest_on_full`, else left unacked (held: the ack timeout,
//!   if set, or a reconnect brings them back), and so are its later chunks,
//!   so the message can come whole again;
//! - a message still incomplete `expiry` after its first chunk arrived is
//!   dropped and its chunks acked (its producer is presumed gone);
//! - a chunk seen before under the same id is ignored; one with a new id
//!   for a chunk already received (a producer's resend) is acked;
//! - a chunk that does not follow the previous one of its message (a
//!   chunk was lost, or the first is missing) drops the message: its chunks
//!   are left unacked, and so is this one, unless its message was published
//!   longer than `expiry` ago, when it is acked. Beyond the Java client,
//!   such chunks are acked once `expiry` passes after they were dropped,
//!   as an incomplete message's are, unless the subscription starts over
//!   first: else a chunk left by a producer's refused send would stay in
//!   the backlog for ever where no ack timeout or reconnect brings it back.
//!
//! Beyond the Java client, the bytes held are bounded, since a chunk's
//! permit goes back at once and its metadata comes from the network: the
//! messages being assembled hold at most `max_pending_bytes` (each chunk
//! counts its payload and [`CHUNK_OVERHEAD`]).
//! - A chunk that does not fit drops the oldest other messages being
//!   assembled until it does, each as `max_pending` drops one (acked if
//!   `auto_ack_oldest_on_full`, else held).
//! - A message that cannot be assembled within the bound, or within the
//!   size its chunks announce (`total_chunk_msg_size`, left out for
//!   encrypted chunks: the Java producer encrypts each chunk after
//!   splitting), is given up: its chunks so far and this one are held,
//!   never acked. So is a first chunk whose message could never be: more
//!   chunks than announced bytes, or an announced size or chunk count whose
//!   bytes pass the bound. Its later chunks find no first chunk: held, or
//!   acked if the message is older than `expiry` (the rule above).
//!
//! Every chunk but the one completing a message gives its permit back.

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use tracing::warn;

use crate::message_id::MessageId;
use crate::proto::MessageMetadata;

#[path = "chunks_limits.rs"]
mod limits;
#[path = "chunks_remembered.rs"]
mod remembered;

pub(crate) use limits::{CHUNK_OVERHEAD, ChunkLimits, decompress_limit};
pub use limits::{
    DEFAULT_INCOMPLETE_CHUNK_EXPIRY, DEFAULT_MAX_PENDING_CHUNKED_BYTES,
    DEFAULT_MAX_PENDING_CHUNKED_MESSAGES,
};
use remembered::RememberedChunks;

/// One chunk, as it arrived.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Chunk {
    pub(crate) id: MessageId,
    pub(crate) uuid: String,
    pub(crate) chunk_id: u32,
    pub(crate) num_chunks: u32,
    /// When its message was published (ms since the Unix epoch).
    pub(crate) publish_time: u64,
    /// The size of the whole message as its chunks announce it
    /// (`total_chunk_msg_size`); `None` if they announce none, or are
    /// encrypted (the size is the payload's before each chunk was).
    pub(crate) total_size: Option<u64>,
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
            total_size: metadata
                .total_chunk_msg_size
                .filter(|_| metadata.encryption_keys.is_empty())
                .map(|size| u64::try_from(size).unwrap_or(0)),
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
    /// The size its first chunk announced.
    total_size: Option<u64>,
    /// The payload bytes of `parts`.
    size: u64,
    /// What it counts against `max_pending_bytes`.
    held: usize,
    started: Instant,
}

/// Collects chunks into messages; see the module documentation.
#[derive(Debug)]
pub(crate) struct ChunkAssembler {
    limits: ChunkLimits,
    pending: HashMap<String, Pending>,
    /// Uuids being assembled, oldest first chunk first.
    order: VecDeque<String>,
    /// What the messages being assembled count against `max_pending_bytes`.
    held: usize,
    /// Every chunk id of each assembled message until it is acked (or
    /// forgotten past the bounds).
    assembled: RememberedChunks,
    /// Whether `assembled` is kept (off for a reader, which never acks).
    remember: bool,
    /// Chunks of no message (out of order), held until the expiry after
    /// they were dropped, oldest first.
    strays: VecDeque<(Instant, Vec<MessageId>)>,
    /// Messages dropped for room with their chunks held: their later
    /// chunks are held too (not strays), since the message comes whole
    /// again once the held chunks are redelivered. Bounded, oldest
    /// forgotten first (its later chunks then count as strays).
    evicted: VecDeque<String>,
    released: Vec<Released>,
}

/// Messages dropped for room remembered at most, per partition.
pub(super) const MAX_EVICTED: usize = 1024;

impl ChunkAssembler {
    pub(crate) fn new(limits: ChunkLimits) -> Self {
        Self {
            limits,
            pending: HashMap::new(),
            order: VecDeque::new(),
            held: 0,
            assembled: RememberedChunks::new(),
            remember: true,
            strays: VecDeque::new(),
            evicted: VecDeque::new(),
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
        if chunk.chunk_id == 0 && !self.start(now, &chunk) {
            return None;
        }
        let Some(pending) = self.pending.get_mut(&chunk.uuid) else {
            if self.evicted.contains(&chunk.uuid) {
                // Its message's first chunks are held: it comes whole again.
                self.released.push(Released::Hold(vec![chunk.id]));
            } else {
                self.out_of_order(now, wall_ms, &chunk, None);
            }
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
            self.out_of_order(now, wall_ms, &chunk, dropped);
            return None;
        }
        let cost = chunk.data.len().saturating_add(CHUNK_OVERHEAD);
        let size = pending.size.saturating_add(chunk.data.len() as u64);
        let announced = pending.total_size;
        if announced.is_some_and(|total| size > total)
            || pending.held.saturating_add(cost) > self.max_bytes()
        {
            self.give_up(chunk, size, announced);
            return None;
        }
        self.make_room(&chunk.uuid, cost);
        let pending = self.pending.get_mut(&chunk.uuid)?;
        pending.size = size;
        pending.held += cost;
        self.held += cost;
        pending.ids.push(chunk.id);
        pending.parts.push(chunk.data);
        if chunk.chunk_id + 1 < chunk.num_chunks {
            return None;
        }
        let done = self.remove(&chunk.uuid)?;
        let whole = done.parts.iter().map(Bytes::len).sum();
        let mut data = BytesMut::with_capacity(whole);
        for part in &done.parts {
            data.extend_from_slice(part);
        }
        let first = done.ids[0];
        if self.remember {
            self.assembled.remember(first, done.ids);
        }
        Some(Assembled {
            first,
            data: data.freeze(),
        })
    }

    /// A first chunk: a new message, or the producer sending it again.
    /// False if its message is refused at once (the chunk is held).
    fn start(&mut self, now: Instant, chunk: &Chunk) -> bool {
        if let Some(pending) = self.pending.get(&chunk.uuid) {
            if pending.ids.first() == Some(&chunk.id) {
                return true; // a redelivery of the first chunk: ignored
            }
            // The producer began the message again: the chunks of the
            // earlier attempt are duplicates of what comes now.
            if let Some(earlier) = self.remove(&chunk.uuid) {
                self.released.push(Released::Ack(earlier.ids));
            }
        }
        self.evicted.retain(|uuid| *uuid != chunk.uuid);
        if !self.could_fit(chunk) {
            warn!(
                uuid = %chunk.uuid,
                chunks = chunk.num_chunks,
                announced = ?chunk.total_size,
                max_bytes = self.max_bytes(),
                "chunked message refused: it could never be assembled within its size or the bound; its chunks stay unacked"
            );
            self.released.push(Released::Hold(vec![chunk.id]));
            return false;
        }
        if self.limits.max_pending > 0 && self.pending.len() >= self.limits.max_pending {
            if let Some(oldest) = self.order.front().cloned() {
                self.drop_for_room(&oldest);
            }
        }
        self.order.push_back(chunk.uuid.clone());
        self.pending.insert(
            chunk.uuid.clone(),
            Pending {
                ids: Vec::new(),
                parts: Vec::new(),
                num_chunks: chunk.num_chunks,
                total_size: chunk.total_size,
                size: 0,
                held: 0,
                started: now,
            },
        );
        true
    }

    /// `chunk` does not follow what came of its message (`dropped`, now
    /// given up): the chunks stay unacked until the expiry, this one too
    /// unless its message is older than the expiry.
    fn out_of_order(
        &mut self,
        now: Instant,
        wall_ms: u64,
        chunk: &Chunk,
        dropped: Option<Pending>,
    ) {
        let mut strays = Vec::new();
        if let Some(dropped) = dropped {
            self.released.push(Released::Hold(dropped.ids.clone()));
            strays.extend(dropped.ids);
        }
        let expired = self.limits.expiry.is_some_and(|expiry| {
            let expiry = u64::try_from(expiry.as_millis()).unwrap_or(u64::MAX);
            wall_ms > chunk.publish_time.saturating_add(expiry)
        });
        if expired {
            self.released.push(Released::Ack(vec![chunk.id]));
        } else {
            self.released.push(Released::Hold(vec![chunk.id]));
            strays.push(chunk.id);
        }
        if self.limits.expiry.is_some() && !strays.is_empty() {
            self.strays.push_back((now, strays));
        }
    }

    fn remove(&mut self, uuid: &str) -> Option<Pending> {
        let pending = self.pending.remove(uuid)?;
        self.order.retain(|u| u != uuid);
        self.held -= pending.held;
        Some(pending)
    }

    /// Drops, and acks the chunks of, every message still incomplete
    /// `expiry` after its first chunk; acks the chunks of no message held
    /// `expiry` since they were dropped.
    pub(crate) fn on_tick(&mut self, now: Instant) {
        let Some(expiry) = self.limits.expiry else {
            return;
        };
        while let Some((since, _)) = self.strays.front() {
            if crate::clock::after(*since, expiry) > now {
                break;
            }
            if let Some((_, ids)) = self.strays.pop_front() {
                self.released.push(Released::Ack(ids));
            }
        }
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
    /// message's or held stray's expiry.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        let expiry = self.limits.expiry?;
        let oldest = self
            .order
            .front()
            .and_then(|uuid| self.pending.get(uuid))
            .map(|p| p.started);
        let stray = self.strays.front().map(|(since, _)| *since);
        let first = match (oldest, stray) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b)?,
        };
        Some(crate::clock::after(first, expiry))
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
        self.strays.clear();
        self.evicted.clear();
        self.held = 0;
    }

    /// The first chunk of the oldest message being assembled (the
    /// earliest in the topic).
    pub(crate) fn first_pending(&self) -> Option<MessageId> {
        self.pending_firsts()
            .min_by_key(|id| (id.ledger_id, id.entry_id))
    }

    /// The first chunk of each message being assembled.
    pub(crate) fn pending_firsts(&self) -> impl Iterator<Item = MessageId> + '_ {
        self.pending.values().filter_map(|p| p.ids.first().copied())
    }

    /// Messages being assembled.
    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.pending.len()
    }

    /// What the messages being assembled count against the byte bound.
    #[cfg(test)]
    pub(crate) fn held_bytes(&self) -> usize {
        debug_assert_eq!(
            self.held,
            self.pending.values().map(|p| p.held).sum::<usize>()
        );
        self.held
    }
}

#[cfg(test)]
#[path = "chunks_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "chunks_limits_tests.rs"]
mod limits_tests;
