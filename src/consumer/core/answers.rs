//! The application's answers to the messages it was handed (ack,
//! cumulative ack, nack), the ack timeout and dead-letter results, and the
//! redeliveries and rewinds they lead to.

use std::time::Instant;

use crate::message_id::MessageId;

use super::ConsumerCore;
use super::batch_acks::MemberAck;
use super::nack::Nacked;
use super::receiver_queue::QueuedBytes;
use crate::consumer::error::CumulativeAckNotAllowed;

/// What became of an application's ack ([`ConsumerCore::ack`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Acked {
    /// An [`Action::Ack`] that covers it is queued (it is the last one).
    Queued,
    /// A batch member whose ack waits for the rest of its batch: it goes
    /// out with the ack of `entry` (the entry's id), once every member is
    /// acked. Nothing is queued yet.
    AwaitingBatch {
        /// The id of the member's entry.
        entry: MessageId,
    },
    /// A cumulative ack held back whole, since a chunked message not handed
    /// out yet starts at the first entry of a ledger before it (see
    /// `chunk_gate`): it goes once that message is handed out.
    HeldBack,
    /// Nothing can be sent for it: a batch member of an entry the core has
    /// no state for, acked without its batch size, or any ack on a core
    /// that does not track messages (a reader's).
    Unrecorded,
}

impl<M: Clone + QueuedBytes> ConsumerCore<M> {
    #[cfg(any(test, feature = "fuzzing"))]
    /// The application acked `id`: stops its clock and sends the ack (for a
    /// batch member, once its entry is complete, or at once with an
    /// `ack_set` under batch index ack). Acking a message with a delayed
    /// nack withdraws the nack.
    ///
    /// A message id is a position, valid on every connection: an id the
    /// core no longer holds (acked after a reconnect, a rewind, an
    /// ack-timeout expiry or a nack) is acked all the same, and a copy of it
    /// that is queued or arrives later is dropped. For a batch member of an
    /// entry the core has no state for, use
    /// [`ack_with_batch_size`](Self::ack_with_batch_size), so the member can
    /// be recorded without acking its siblings.
    pub(crate) fn ack(&mut self, now: Instant, id: MessageId) -> Acked {
        self.ack_with_batch_size(now, id, None)
    }

    /// As [`ack`](Self::ack), with the batch size of a batch member's entry
    /// (`None` for a plain message).
    pub(crate) fn ack_with_batch_size(
        &mut self,
        now: Instant,
        id: MessageId,
        batch_size: Option<u32>,
    ) -> Acked {
        self.anchor(now);
        if !self.config.track_messages {
            return Acked::Unrecorded; // a reader's core: nothing to ack
        }
        if self.held.remove(id) || self.nacks.cancel(id) {
            self.leases.end(id);
            // Hashing the id for an empty map cost ~1% of a consume run.
            if !self.last_chance.is_empty() {
                self.last_chance.remove(&id);
            }
            // A batch member is remembered by its entry, once the whole
            // batch is acked (see `member_acked`); until then the batch's
            // own state drops the copies of its acked members (see
            // `settle` for batch index ack).
            if !id.is_batch_member() {
                self.acked.acked_held(id);
            }
            return self.settle(id, false);
        }
        if !id.is_batch_member() {
            self.acked.acked_unheld(id);
            self.chunk_gate.acked(id);
            self.actions.ack(id);
            return Acked::Queued;
        }
        // Without batch index ack, a member's ack stays in the consumer
        // until its whole batch is acked: the batch's state drops its
        // copies until the broker closes the consumer, whose next copy
        // comes whole.
        if self.config.batch_index_ack_enabled {
            self.acked.acked_unheld(id);
        }
        let outcome = self.batches.ack_untracked(id, batch_size);
        self.member_acked(outcome)
    }

    #[cfg(any(test, feature = "fuzzing"))]
    /// The application acked everything up to and including `upto`: stops
    /// the clocks and withdraws the delayed nacks it covers, and drops
    /// copies of what it covers that are queued or arrive later. Sent
    /// whatever the core holds, as [`ack`](Self::ack).
    ///
    /// # Errors
    /// [`CumulativeAckNotAllowed`] on Shared and Key_Shared.
    pub(crate) fn ack_cumulative(
        &mut self,
        now: Instant,
        upto: MessageId,
    ) -> Result<Acked, CumulativeAckNotAllowed> {
        self.ack_cumulative_with_batch_size(now, upto, None)
    }

    /// As [`ack_cumulative`](Self::ack_cumulative), with the batch size of
    /// `upto`'s entry when it is a batch member.
    ///
    /// # Errors
    /// As [`ack_cumulative`](Self::ack_cumulative).
    pub(crate) fn ack_cumulative_with_batch_size(
        &mut self,
        now: Instant,
        upto: MessageId,
        batch_size: Option<u32>,
    ) -> Result<Acked, CumulativeAckNotAllowed> {
        self.anchor(now);
        let subscription = self.config.subscription_type;
        if !subscription.allows_cumulative_ack() {
            return Err(CumulativeAckNotAllowed { subscription });
        }
        if !self.config.track_messages {
            return Ok(Acked::Unrecorded);
        }
        let mut covered = self.held.remove_up_to(upto);
        self.leases.end_up_to(upto);
        covered.extend(self.nacks.cancel_up_to(upto));
        if !self.last_chance.is_empty() {
            self.last_chance.retain(|id, _| *id > upto);
        }
        self.acked.acked_cumulative(upto);
        let ack =
            self.batches
                .ack_cumulative(upto, batch_size, self.config.batch_index_ack_enabled);
        for id in covered.into_iter().filter(MessageId::is_batch_member) {
            self.batches.leave(id);
        }
        let sent = ack.as_ref().map(|(id, _)| *id);
        let mut held_back = false;
        if let Some((id, ack_set)) = ack {
            held_back = !self.ack_cumulative_on_wire(id, ack_set);
        }
        // A member whose entry is not complete is covered only once it is.
        Ok(match sent {
            _ if held_back => Acked::HeldBack,
            Some(id) if id >= upto.entry() => Acked::Queued,
            _ if !upto.is_batch_member() => Acked::Queued,
            _ => Acked::AwaitingBatch {
                entry: upto.entry(),
            },
        })
    }

    /// The application nacked `id` (delivered `redelivery_count` times
    /// before): stops its clock and asks for it again, now or after the nack
    /// policy's delay. An id the application does not hold is ignored.
    ///
    /// On Exclusive and Failover, where the broker can only rewind to the
    /// first unacked message ([`Action::RedeliverAll`]), the rewind is
    /// coalesced: messages already received keep reaching the application,
    /// permits are withheld so the queue drains, and the rewind goes out
    /// once the application asks for a message with none queued, and no
    /// sooner than [`CoreConfig::rewind_min_delay`] after the nack. Nacks
    /// meanwhile join it. So every message makes progress, and the nacked
    /// one comes back after the others.
    pub(crate) fn nack(&mut self, now: Instant, id: MessageId, redelivery_count: u32) {
        self.anchor(now);
        self.leases.end(id);
        if self.held.remove(id) && self.nacks.nack(now, id, redelivery_count) == Nacked::Now {
            self.request_redelivery(&[id], Some(now));
        }
    }

    /// Time passed: requests again, in one command, every message whose
    /// ack timeout expired and every delayed nack now due (a due nack on
    /// Exclusive or Failover joins a coalesced rewind, see
    /// [`nack`](Self::nack)); sends a coalesced rewind that is due. The
    /// messages whose ack timeout expired are then
    /// [`timed_out`](Self::timed_out).
    pub(crate) fn on_tick(&mut self, now: Instant) {
        self.anchor(now);
        let expired = self.held.expire(now);
        let mut expired = self.renew_leases(now, expired);
        let nacked = self.nacks.expire(now);
        if !expired.is_empty() {
            self.request_redelivery(&expired, None);
        }
        for id in &mut expired {
            *id = self.chunk_ends.shown(*id);
        }
        self.timed_out = expired;
        if !nacked.is_empty() {
            self.request_redelivery(&nacked, Some(now));
        }
        self.rewind_if_due(now);
    }

    /// The messages whose ack timeout expired in the last
    /// [`on_tick`](Self::on_tick), under the ids the application holds (a
    /// chunked message's last chunk, with its first beside it).
    pub(crate) fn timed_out(&self) -> &[MessageId] {
        &self.timed_out
    }

    /// The dead-letter publish of `origin` finished. On success the original
    /// is acked; on failure it is requested again and never acked, so it
    /// comes back (a duplicate in the dead-letter topic is acceptable, a
    /// loss is not). Unknown origins are ignored.
    pub(crate) fn on_dead_letter_result(&mut self, origin: MessageId, result: Result<(), ()>) {
        if !self.forwarding.remove(&origin) {
            return;
        }
        match result {
            Ok(()) => {
                self.settle(origin, true);
            }
            Err(()) => {
                if origin.is_batch_member() {
                    self.batches.forward_failed(origin);
                }
                self.redeliver(vec![origin.entry()], None);
            }
        }
    }

    /// An acked message or member (`forwarded`: by a confirmed forward).
    pub(super) fn settle(&mut self, id: MessageId, forwarded: bool) -> Acked {
        if !id.is_batch_member() {
            self.chunk_gate.acked(id);
            self.actions.ack(id);
            return Acked::Queued;
        }
        if self.config.batch_index_ack_enabled {
            // The member's ack goes out at once: remembered as any other,
            // so after a reconnect its copies are dropped only while the
            // broker has not confirmed it.
            self.acked.acked_held(id);
        }
        let outcome = self.batches.ack(id, forwarded);
        self.member_acked(outcome)
    }

    /// Queues what acking a batch member led to.
    pub(super) fn member_acked(&mut self, outcome: MemberAck) -> Acked {
        match outcome {
            MemberAck::Last(entry, _, alone) if self.config.batch_index_ack_enabled => {
                // Each member's ack is remembered on its own, confirmed
                // or not by its own ACK: one id for the entry would drop
                // the members of a rewind's copy whose acks the broker
                // confirmed, with the last member's. (A copy a nack asked
                // for, still on its way, may then bring acked members
                // again: a duplicate, never a loss.)
                self.actions.ack_members(entry, alone);
            }
            MemberAck::Entry(entry, asked_again) | MemberAck::Last(entry, asked_again, _) => {
                // One id for the whole batch: copies of every member are
                // dropped, however large the batch. A copy asked for by a
                // nack or a timeout may still be on its way: settled now,
                // not only at the next reconnect or rewind.
                if asked_again {
                    self.acked.acked_unheld(entry);
                } else {
                    self.acked.acked_held(entry);
                }
                self.actions.ack(entry);
            }
            MemberAck::Partial(entry, set) if self.config.batch_index_ack_enabled => {
                self.actions.ack_members(entry, set);
            }
            MemberAck::Partial(entry, _) => return Acked::AwaitingBatch { entry },
            MemberAck::Untracked => return Acked::Unrecorded,
        }
        Acked::Queued
    }

    /// Held messages to request again: a last-chance message goes to the
    /// dead-letter topic, the rest are redelivered. `nacked_at`: asked for
    /// by a nack at that instant (a rewind is then coalesced).
    pub(super) fn request_redelivery(&mut self, ids: &[MessageId], nacked_at: Option<Instant>) {
        let mut entries = Vec::with_capacity(ids.len());
        for &id in ids {
            if let Some((count, message)) = self.last_chance.remove(&id) {
                if id.is_batch_member() {
                    self.batches.start_forward(id);
                }
                self.forward(id, count, message);
            } else {
                if id.is_batch_member() {
                    self.batches.ask_again(id);
                }
                entries.push(id.entry());
            }
        }
        if !entries.is_empty() {
            self.redeliver(entries, nacked_at);
        }
    }

    pub(super) fn redeliver(&mut self, entries: Vec<MessageId>, nacked_at: Option<Instant>) {
        if self.config.subscription_type.redelivers_by_id() {
            self.actions.redeliver(entries);
        } else if let Some(now) = nacked_at {
            self.rewind.request(now, self.config.rewind_min_delay);
            self.rewind_if_due(now);
        } else {
            self.rewind();
        }
    }

    /// Sends a coalesced rewind if it is due at `now`.
    pub(super) fn rewind_if_due(&mut self, now: Instant) {
        if self.rewind.is_due(now, self.queue.len()) {
            self.rewind();
        }
    }

    /// Exclusive/Failover: the broker redelivers everything unacked, so
    /// drop what is local, move to a new epoch, and give back the cleared
    /// queue's permits.
    pub(super) fn rewind(&mut self) {
        let withheld = self.rewind.take();
        self.chunk_gate.starting_over(self.queue.chunked_firsts());
        let flow = self.queue.rewind();
        self.acked.on_rewind();
        self.clear_held(true);
        self.epoch += 1;
        self.actions.rewind(self.epoch);
        let permits = flow.unwrap_or(0).saturating_add(withheld);
        self.flow((permits > 0).then_some(permits));
    }
}
