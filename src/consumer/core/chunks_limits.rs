//! The bounds on the chunked messages being assembled, and what happens to
//! a message at them (see the rules in `chunks.rs`).

use std::time::Duration;

use bytes::Bytes;
use tracing::warn;

use super::{Chunk, ChunkAssembler, MAX_EVICTED, Released};
use crate::message_id::MessageId;
use crate::wire::Payload;

/// The Java client's `maxPendingChunkedMessage` default.
pub const DEFAULT_MAX_PENDING_CHUNKED_MESSAGES: usize = 10;

/// The Java client's `expireTimeOfIncompleteChunkedMessage` default.
pub const DEFAULT_INCOMPLETE_CHUNK_EXPIRY: Duration = Duration::from_secs(60);

/// The default bound on the bytes held by the chunked messages being
/// assembled, per partition: 64 MiB, the client's default memory limit
/// (the Java client bounds only their number).
pub const DEFAULT_MAX_PENDING_CHUNKED_BYTES: usize = 64 * 1024 * 1024;

/// What a chunk held for assembly takes beyond its payload: its id and
/// its view of the payload.
pub(crate) const CHUNK_OVERHEAD: usize =
    std::mem::size_of::<MessageId>() + std::mem::size_of::<Bytes>();

/// How much larger than its (compressed) bytes an assembled message may
/// decompress beyond the memory limit (see [`decompress_limit`]).
const CHUNKED_DECOMPRESSION_RATIO: usize = 32;

/// The largest uncompressed size to accept for `payload`. The broker's
/// `max_message_size` bounds what crosses the wire, compressed: as in the
/// Java client, a message may be larger once decompressed. It may take up
/// to the client's `memory_limit` (a larger one could not be held), and an
/// assembled chunked message also up to [`CHUNKED_DECOMPRESSION_RATIO`]
/// times its bytes; never less than `max_message_size`.
pub(crate) fn decompress_limit(
    max_message_size: usize,
    memory_limit: usize,
    payload: &Payload,
) -> usize {
    let limit = max_message_size.max(memory_limit);
    if payload.metadata.num_chunks_from_msg.unwrap_or(0) > 1 {
        limit.max(
            payload
                .data
                .len()
                .saturating_mul(CHUNKED_DECOMPRESSION_RATIO),
        )
    } else {
        limit
    }
}

/// Bounds on the messages being assembled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChunkLimits {
    /// At most this many messages assembled at once (0: no bound).
    pub(crate) max_pending: usize,
    /// At most this many bytes held by the messages being assembled: each
    /// chunk's payload and [`CHUNK_OVERHEAD`] (at least 1).
    pub(crate) max_pending_bytes: usize,
    /// Drop (and ack) a message still incomplete this long after its first
    /// chunk; `None`: never.
    pub(crate) expiry: Option<Duration>,
    /// Ack the chunks of the oldest message dropped for `max_pending`, or
    /// to make room under `max_pending_bytes` (otherwise they stay unacked).
    pub(crate) auto_ack_oldest_on_full: bool,
}

impl Default for ChunkLimits {
    fn default() -> Self {
        Self {
            max_pending: DEFAULT_MAX_PENDING_CHUNKED_MESSAGES,
            max_pending_bytes: DEFAULT_MAX_PENDING_CHUNKED_BYTES,
            expiry: Some(DEFAULT_INCOMPLETE_CHUNK_EXPIRY),
            auto_ack_oldest_on_full: false,
        }
    }
}

impl ChunkAssembler {
    /// The bound on the bytes held by the messages being assembled.
    pub(super) fn max_bytes(&self) -> usize {
        self.limits.max_pending_bytes.max(1)
    }

    /// Whether the message of first chunk `chunk` could be assembled: no
    /// more chunks than announced bytes, and its announced bytes and chunks
    /// within the bound.
    pub(super) fn could_fit(&self, chunk: &Chunk) -> bool {
        let chunks = u64::from(chunk.num_chunks);
        let overhead = chunks.saturating_mul(CHUNK_OVERHEAD as u64);
        let bytes = overhead.saturating_add(chunk.total_size.unwrap_or(0));
        chunk.total_size.is_none_or(|total| chunks <= total)
            && bytes <= u64::try_from(self.max_bytes()).unwrap_or(u64::MAX)
    }

    /// Drops the message `uuid` being assembled to make room (for the
    /// message count or the bytes): its chunks are acked if
    /// `auto_ack_oldest_on_full`, else held.
    pub(super) fn drop_for_room(&mut self, uuid: &str) {
        let dropped = self.remove(uuid).map(|p| p.ids).unwrap_or_default();
        if self.limits.auto_ack_oldest_on_full {
            self.released.push(Released::Ack(dropped));
            return;
        }
        self.released.push(Released::Hold(dropped));
        if self.evicted.len() == MAX_EVICTED {
            self.evicted.pop_front();
        }
        self.evicted.push_back(uuid.to_owned());
    }

    /// Drops the oldest messages being assembled but `uuid` until `cost`
    /// more bytes fit the bound.
    pub(super) fn make_room(&mut self, uuid: &str, cost: usize) {
        while self.held.saturating_add(cost) > self.max_bytes() {
            let Some(oldest) = self.order.iter().find(|u| *u != uuid).cloned() else {
                return;
            };
            warn!(
                uuid = %oldest,
                max_bytes = self.max_bytes(),
                "incomplete chunked message dropped to keep the chunks being assembled within the bound"
            );
            self.drop_for_room(&oldest);
        }
    }

    /// `chunk` would take its message past its announced size or the bound
    /// (`size`: the payload bytes it would have): the message is given up,
    /// its chunks and this one held.
    pub(super) fn give_up(&mut self, chunk: Chunk, size: u64, announced: Option<u64>) {
        warn!(
            uuid = %chunk.uuid,
            size,
            announced = ?announced,
            max_bytes = self.max_bytes(),
            "chunked message given up: past its announced size or the bound; its chunks stay unacked"
        );
        let mut ids = self.remove(&chunk.uuid).map(|p| p.ids).unwrap_or_default();
        ids.push(chunk.id);
        self.released.push(Released::Hold(ids));
    }
}
