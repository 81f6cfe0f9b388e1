//! Chunked messages in the driver: each chunk goes to its sub's
//! [`ChunkAssembler`](crate::consumer::core::chunks::ChunkAssembler); what that
//! releases goes to the core, to be acked as the core's other acks are, or
//! held.

use super::*;
use crate::consumer::core::chunks::{Chunk, Released};
use crate::wire::{Checksum, Payload};
use futures::future::Either;

/// What to unpack: a delivery as it came, or a chunked message made whole.
pub(super) struct Whole {
    /// The delivery's id; a chunked message's first chunk's.
    pub(super) id: MessageId,
    /// For a chunked message, the id of the chunk that completed it.
    pub(super) last_chunk: Option<MessageId>,
    pub(super) payload: Box<Payload>,
}

impl Driver {
    /// Takes a delivery that may be a chunk. Returns what to unpack: the
    /// delivery itself, or once a chunk completes its message, the whole
    /// message under its first chunk's id. `None` for a chunk that
    /// completes nothing (its permit went back to the broker).
    ///
    /// Every delivery passes here: the work is done when this is called,
    /// and only a chunk that completes nothing gets a future that waits
    /// (for the network), so neither the payload nor a waiting future
    /// sits in the task's future twice.
    pub(super) fn assemble(
        &mut self,
        index: usize,
        message_id: MessageId,
        consumer_epoch: Option<u64>,
        payload: Box<Payload>,
    ) -> impl Future<Output = Option<Whole>> + Send + '_ {
        match self.take_chunk(index, message_id, consumer_epoch, payload) {
            Some(whole) => Either::Left(std::future::ready(Some(whole))),
            None => Either::Right(async move {
                self.run_actions(index).await;
                let sub = &self.subs[index];
                let _ = sub.conn.give_back_permits(sub.id, 1).await;
                None
            }),
        }
    }

    /// The work of [`Driver::assemble`] up to the network.
    fn take_chunk(
        &mut self,
        index: usize,
        message_id: MessageId,
        consumer_epoch: Option<u64>,
        mut payload: Box<Payload>,
    ) -> Option<Whole> {
        let sub = &mut self.subs[index];
        let id = message_id.with_partition(sub.partition).entry();
        // A corrupt chunk is reported as any corrupt entry (unpack.rs).
        let readable = !matches!(payload.checksum, Checksum::Mismatch { .. });
        let chunk = readable
            .then(|| Chunk::of(id, &payload.metadata, payload.data.clone()))
            .flatten();
        let Some(chunk) = chunk else {
            return Some(Whole {
                id: message_id,
                last_chunk: None,
                payload,
            });
        };
        let stale = !self.settings.core.subscription_type.redelivers_by_id()
            && consumer_epoch
                .is_some_and(|e| e < self.shelf.lock().slots[index].core.consumer_epoch());
        let now = clock::now();
        let assembled = if stale {
            None // from before a rewind: it comes again
        } else {
            sub.chunks.on_chunk(now, clock::unix_millis(), chunk)
        };
        self.release_chunks(index, now, assembled.as_ref().map(|m| m.first));
        let message = assembled?;
        payload.checksum = Checksum::Valid;
        payload.data = message.data;
        Some(Whole {
            id: message.first,
            last_chunk: Some(id),
            payload,
        })
    }

    /// Drops the incomplete chunked messages of sub `index` that expired
    /// (their acks go with the sub's next actions).
    pub(super) fn expire_chunks(&mut self, index: usize, now: std::time::Instant) {
        self.subs[index].chunks.on_tick(now);
        self.release_chunks(index, now, None);
    }

    /// Hands the chunks the assembler gave up to the core: to ack (sent
    /// with the next actions) or to hold; and tells it which messages are
    /// being assembled, and the one just `completed` (its first chunk).
    fn release_chunks(
        &mut self,
        index: usize,
        now: std::time::Instant,
        completed: Option<MessageId>,
    ) {
        let sub = &mut self.subs[index];
        let mut shelved = self.shelf.lock();
        let core = &mut shelved.slots[index].core;
        for released in sub.chunks.take_released() {
            match released {
                Released::Ack(ids) => {
                    debug!(topic = %sub.name, ?ids, "acking chunks of a dropped chunked message");
                    core.ack_never_handed(&ids);
                }
                Released::Hold(ids) => core.hold(now, &ids),
            }
        }
        core.chunks_taken(sub.chunks.first_pending(), completed);
    }
}
