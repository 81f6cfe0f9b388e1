//! The consumer's delivery state machine (pure, sans-IO).
//!
//! [`ConsumerCore`] takes what happens — the subscribe succeeded, a message
//! arrived, the application took, acked or nacked one, a tick passed, a
//! dead-letter publish finished, the connection was replaced — and queues
//! the [`Action`]s a driver must carry out. It never does IO, never sleeps
//! and never reads the clock: every input that needs the time takes `now`,
//! and [`ConsumerCore::next_deadline`] says when to call
//! [`ConsumerCore::on_tick`] next.
//!
//! The life of a message: [`on_message`](ConsumerCore::on_message) drops it
//! (duplicate, stale epoch, acked batch member), forwards it to the
//! dead-letter topic, or queues it; [`pop_for_application`](ConsumerCore::pop_for_application)
//! hands it over and starts its ack-timeout clock; then an
//! [`ack`](ConsumerCore::ack), [`nack`](ConsumerCore::nack), cumulative ack,
//! ack timeout, or a rewind/reconnect ends its time with the application.

//!
//! Around it, each in its own file: the actions queue ([`actions`]), the
//! receiver queue and its permits ([`receiver_queue`]), the ack-timeout
//! tracker ([`unacked`]), delayed nacks ([`nack`]), batch member acks
//! ([`batch_acks`]), acks remembered to drop redelivered copies
//! ([`settled`]), leases and extensions of deadlines ([`lease`]),
//! coalesced rewinds ([`rewind`]), the dead-letter policy
//! ([`dead_letter`]), the settings ([`config`]), and the assembly of
//! chunked messages ([`chunks`], driven beside the core).

pub(crate) mod actions;
mod answers;
pub(crate) mod batch_acks;
mod chunk_ends;
pub(crate) mod chunk_gate;
pub(crate) mod chunks;
pub(crate) mod config;
pub mod dead_letter;
pub(crate) mod lease;
pub(crate) mod nack;
pub(crate) mod receiver_queue;
pub(crate) mod rewind;
pub(crate) mod settled;
pub(crate) mod tick;
pub(crate) mod unacked;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_batch_dlq;
#[cfg(test)]
mod tests_untracked;

pub(crate) use answers::Acked;

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use crate::consumer::error::{ConfigError, CoreError};
use crate::message_id::MessageId;

use actions::{Action, Actions, Incoming};
use batch_acks::{AckSet, BatchAcks, MemberAck};
use chunk_ends::ChunkEnds;
use chunk_gate::ChunkGate;
use config::CoreConfig;
use dead_letter::DeadLetterCutoff;
use lease::Leases;
use nack::NackTracker;
use receiver_queue::{QueuedBytes, ReceiverQueue};
use rewind::PendingRewind;
use settled::AckMemory;
use unacked::UnackedTracker;

/// The consumer's delivery state machine; `M` is the driver's message type.
///
/// `M` is cloned only with [`DeadLetterCutoff::JavaStyle`], to keep a copy
/// of a message at the redelivery limit while the application holds it; a
/// `Bytes`-backed message clones cheaply.
#[derive(Debug)]
pub(crate) struct ConsumerCore<M> {
    config: CoreConfig,
    queue: ReceiverQueue<M>,
    /// Handed to the application and not answered yet (timed with an ack timeout).
    held: UnackedTracker,
    /// Held messages whose deadline moves on while a handler runs.
    leases: Leases,
    nacks: NackTracker,
    batches: BatchAcks,
    /// Forwarded to the dead-letter topic, result not known yet.
    forwarding: HashSet<MessageId>,
    /// JavaStyle: held messages at the limit, forwarded on their next redelivery.
    last_chance: HashMap<MessageId, (u32, M)>,
    /// Acks remembered to drop the copies of acked messages.
    acked: AckMemory,
    /// Cumulative acks held short of chunked messages not handed out.
    chunk_gate: ChunkGate,
    /// Exclusive/Failover: a rewind a nack asked for, not sent yet.
    rewind: PendingRewind,
    epoch: u64,
    actions: Actions<M>,
    /// The messages whose ack timeout expired in the last tick, as the
    /// application holds them.
    timed_out: Vec<MessageId>,
    /// Under an ack timeout, where the chunked messages held end.
    chunk_ends: ChunkEnds,
}

impl<M: Clone + QueuedBytes> ConsumerCore<M> {
    /// A core for `config`.
    ///
    /// # Errors
    /// [`ConfigError`] if [`CoreConfig::validate`] refuses the config.
    pub(crate) fn new(config: CoreConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let mut held = match config.ack_timeout {
            Some(timeout) => UnackedTracker::new(timeout, config.tick),
            None => UnackedTracker::untimed(),
        };
        if let Some(backoff) = config.ack_timeout_backoff {
            held = held.with_backoff(backoff);
        }
        let remembered = config.receiver_queue_size.max(1000) as usize;
        Ok(Self {
            queue: ReceiverQueue::new(config.receiver_queue_size),
            nacks: NackTracker::new(config.nack, config.tick),
            config,
            held,
            leases: Leases::default(),
            batches: BatchAcks::default(),
            forwarding: HashSet::new(),
            last_chance: HashMap::new(),
            acked: AckMemory::new(remembered),
            chunk_gate: ChunkGate::default(),
            rewind: PendingRewind::default(),
            epoch: 0,
            actions: Actions::default(),
            timed_out: Vec::new(),
            chunk_ends: ChunkEnds::default(),
        })
    }

    /// The settings.
    pub(crate) fn config(&self) -> &CoreConfig {
        &self.config
    }

    /// The current consumer epoch (for `CommandSubscribe.consumer_epoch`).
    pub(crate) fn consumer_epoch(&self) -> u64 {
        self.epoch
    }

    /// Messages queued for the application.
    pub(crate) fn queued(&self) -> usize {
        self.queue.len()
    }

    #[cfg(test)]
    /// Messages the application holds without an answer yet.
    pub(crate) fn held(&self) -> usize {
        self.held.len()
    }

    /// The oldest message queued for the application.
    pub(crate) fn first_queued(&self) -> Option<&Incoming<M>> {
        self.queue.front()
    }

    /// The earliest id queued for the application: the first chunk of a
    /// chunked message queued behind messages stored after that chunk.
    pub(crate) fn earliest_queued_id(&self) -> Option<MessageId> {
        self.queue.earliest_id()
    }

    /// The bytes the messages queued for the application hold (payload
    /// and bookkeeping, see [`QueuedBytes`]).
    pub(crate) fn queued_bytes(&self) -> usize {
        self.queue.bytes()
    }

    /// The bytes the oldest message queued for the application holds.
    pub(crate) fn front_bytes(&self) -> Option<usize> {
        self.queue.front_bytes()
    }

    /// Zero receiver queue: `waiting` receivers wait for a message; grants
    /// the broker one permit for each not covered by a queued message or
    /// a permit granted before (nothing with a receiver queue).
    pub(crate) fn request_for_receivers(&mut self, waiting: usize) {
        let flow = self.queue.request(waiting);
        self.flow(flow);
    }

    /// The subscribe succeeded: grant the whole receiver queue (once per
    /// connection).
    pub(crate) fn on_subscribed(&mut self, now: Instant) {
        self.anchor(now);
        let flow = self.queue.subscribe();
        self.flow(flow);
    }

    /// A message arrived. It is dropped (its permit given back) if a copy
    /// is queued, held by the application, waiting for a delayed nack or
    /// being forwarded, if it belongs to a stale epoch, if it is an acked
    /// batch member, or if the application acked it while the core no
    /// longer held it (a copy redelivered after a reconnect or rewind) or
    /// acked it cumulatively; it is forwarded to the dead-letter topic if
    /// the policy says so on arrival; otherwise it is queued.
    ///
    /// A copy of a plain message that arrives after the message was acked
    /// while held is delivered again: held acks are not remembered (the
    /// broker does not send them again, so this only follows a broker-side
    /// duplicate).
    ///
    /// # Errors
    /// [`CoreError::InconsistentBatch`] if its batch index and batch size
    /// disagree; the message is dropped.
    pub(crate) fn on_message(
        &mut self,
        now: Instant,
        incoming: Incoming<M>,
    ) -> Result<(), CoreError> {
        self.anchor(now);
        let id = incoming.id;
        let chunked = incoming.position != id;
        let arrived = self.arrive(incoming);
        if chunked {
            self.chunk_gate.arrived(id);
            self.release_cumulative();
        }
        arrived
    }

    /// [`on_message`](Self::on_message) without the chunk gate.
    fn arrive(&mut self, incoming: Incoming<M>) -> Result<(), CoreError> {
        let id = incoming.id;
        let batch_size = match (id.is_batch_member(), incoming.batch_size) {
            (false, None) => None,
            (true, Some(size)) if (id.batch_index as u32) < size => Some(size),
            (_, batch_size) => {
                self.skip_arrival();
                return Err(CoreError::InconsistentBatch { id, batch_size });
            }
        };
        let stale = !self.config.subscription_type.redelivers_by_id()
            && incoming.consumer_epoch.is_some_and(|e| e < self.epoch);
        if stale
            || self.queue.contains(id)
            || self.held.contains(id)
            || self.nacks.contains(id)
            || (!self.forwarding.is_empty() && self.forwarding.contains(&id))
            || self.batches.is_acked(id)
        {
            self.skip_arrival();
            return Ok(());
        }
        if self.acked.covers(id, incoming.position) {
            // Acked by the application, yet the broker sends it again.
            self.skip_arrival();
            // Its ACK is on its way, or applied: nothing to send again. (A
            // member without batch index ack goes on below whatever: its
            // ack is recorded on its entry, whose ACK it completes.)
            if !self.acked.may_be_lost(id, incoming.position)
                && (!id.is_batch_member() || self.config.batch_index_ack_enabled)
            {
                return Ok(());
            }
            // Its ACK may have been lost with a connection: acked again (an
            // ack is idempotent), so it does not stay in the subscription.
            if id.is_batch_member() {
                if self.config.batch_index_ack_enabled {
                    // Its ack goes out again at once: remembered anew.
                    self.acked.acked_unheld(id);
                }
                let outcome = self.batches.ack_untracked(id, batch_size);
                self.member_acked(outcome);
            } else {
                // Remembered anew: once this ACK is confirmed, a later copy
                // is a rewind's.
                self.acked.acked_unheld(id);
                self.actions.ack(id);
            }
            return Ok(());
        }
        let forward = self
            .config
            .dead_letter
            .as_ref()
            .is_some_and(|p| p.forwards_on_arrival(incoming.redelivery_count));
        if let Some(size) = batch_size.filter(|_| self.config.track_messages) {
            self.batches.arrive(id, size, forward);
        }
        if forward {
            self.skip_arrival();
            self.forward(id, incoming.redelivery_count, incoming.message);
        } else {
            self.queue.push(incoming);
        }
        Ok(())
    }

    /// Members `skipped` of the batch entry `entry` (of `batch_size`
    /// members) will not be delivered: the broker's `ack_set` marks them
    /// acked (a redelivery after batch index acks), or compaction removed
    /// them. They count as acked, so the entry ack goes out once the
    /// delivered members are acked (or now, if that completes the entry).
    /// Call it after [`on_message`](Self::on_message) for the entry's
    /// delivered members.
    pub(crate) fn on_skipped_members(
        &mut self,
        entry: MessageId,
        batch_size: u32,
        skipped: &[i32],
    ) {
        if skipped.is_empty() || !self.config.track_messages {
            return;
        }
        if let MemberAck::Entry(entry, _) = self.batches.skip(entry, batch_size, skipped) {
            self.actions.ack(entry);
        }
    }

    /// Hands the next queued message to the application and starts its
    /// ack-timeout clock; `None` when the queue is empty. Gives its permit
    /// back (a `Flow` follows once half the queue has been taken).
    ///
    /// On Exclusive and Failover, finding the queue empty lets a rewind a
    /// nack asked for go out (see [`nack`](Self::nack)).
    pub(crate) fn pop_for_application(&mut self, now: Instant) -> Option<Incoming<M>> {
        self.anchor(now);
        let incoming = loop {
            let Some((incoming, flow)) = self.queue.pop() else {
                self.rewind.on_take(false);
                self.rewind_if_due(now);
                return None;
            };
            self.flow(flow);
            // Acked by the application since it was queued (a copy that
            // came before its ack after a reconnect): not handed out again.
            if self.acked.covers(incoming.id, incoming.position)
                || self.batches.is_acked(incoming.id)
            {
                if incoming.id.is_batch_member() {
                    self.batches.leave(incoming.id);
                }
                continue;
            }
            break incoming;
        };
        self.rewind.on_take(true);
        if incoming.position != incoming.id {
            if self.config.subscription_type.allows_cumulative_ack() {
                self.chunk_gate.handed_out(incoming.id, incoming.position);
            }
            self.release_cumulative();
        }
        if !self.config.track_messages {
            return Some(incoming);
        }
        let id = incoming.id;
        self.held
            .insert_redelivered(now, id, incoming.redelivery_count);
        if incoming.position != id && self.config.ack_timeout.is_some() {
            let held = &self.held;
            self.chunk_ends
                .handed_out(id, incoming.position, |id| held.contains(id));
        }
        if let Some(policy) = &self.config.dead_letter {
            if policy.cutoff == DeadLetterCutoff::JavaStyle
                && policy.reached(incoming.redelivery_count)
            {
                let copy = (incoming.redelivery_count, incoming.message.clone());
                self.last_chance.insert(id, copy);
            }
        }
        Some(incoming)
    }

    /// The connection was replaced: the broker will redeliver everything
    /// unacked, so the queue, the held messages' clocks and delayed nacks
    /// are dropped, the epoch moves on, and pending flow and redelivery
    /// actions (meant for the old connection) are discarded. Acks and
    /// dead-letter forwards stay. Call [`on_subscribed`](Self::on_subscribed)
    /// once subscribed again.
    pub(crate) fn on_reconnect(&mut self) {
        self.on_reconnect_unsent_after(self.acked.mark(), true, []);
    }

    /// As [`on_reconnect`](Self::on_reconnect), where the acks recorded
    /// after the mark `sent` (an [`ack_mark`](Self::ack_mark)) were not
    /// sent yet (still queued as actions, or grouped): they go out under
    /// the next subscription, whose answers confirm them. `closed`: the
    /// broker closed the consumer (an unload, an operator's reset, a seek),
    /// rather than the connection being lost. `assembling`: the first
    /// chunks of the messages the chunk assembler drops.
    pub(crate) fn on_reconnect_unsent_after(
        &mut self,
        sent: u64,
        closed: bool,
        assembling: impl IntoIterator<Item = MessageId>,
    ) {
        let dropped = self.queue.chunked_firsts().chain(assembling);
        self.chunk_gate.starting_over(dropped);
        self.queue.reset();
        // The new subscribe grants the whole queue: withheld permits are moot.
        self.rewind.take();
        self.acked
            .on_reconnect_unsent_after(self.config.lost_acks_resent, sent);
        self.clear_held(!closed);
        self.epoch += 1;
        self.actions.keep_across_reconnect();
    }

    /// The subscription was moved (seek): acked messages may come again on
    /// purpose, so the acks remembered to drop redelivered copies are
    /// forgotten.
    pub(crate) fn on_seek(&mut self) {
        self.acked.forget();
        self.chunk_gate.forget();
    }

    /// The stamp of the last ack recorded: once the broker has answered
    /// the ACKs sent after it on the current connection, pass it to
    /// [`acks_confirmed`](Self::acks_confirmed).
    pub(crate) fn ack_mark(&self) -> u64 {
        self.acked.mark()
    }

    /// The broker answered the ACKs sent on the current connection up to
    /// `mark` (an [`ack_mark`](Self::ack_mark)): those acks are applied,
    /// so after a reconnect their messages' copies are handed out (an
    /// outside rewind brings them on purpose) instead of dropped.
    pub(crate) fn acks_confirmed(&mut self, mark: u64) {
        self.acked.confirm(mark);
    }

    /// The broker answered the ACKs of one pass, which carried the acks
    /// recorded after the mark `after` up to the mark `upto`: those are
    /// applied, whether or not the ACKs of earlier passes were answered.
    pub(crate) fn acks_confirmed_between(&mut self, after: u64, upto: u64) {
        self.acked.confirm_range(after, upto);
    }

    /// Whether the broker applied an individual ack of `id` (see
    /// [`acks_confirmed`](Self::acks_confirmed)); known until the next
    /// [`on_reconnect`](Self::on_reconnect).
    pub(crate) fn ack_applied(&self, id: MessageId) -> bool {
        self.acked.applied(id)
    }

    /// The broker answered the ACK requests that acked `ids` individually
    /// (though not every request their mark covers): those acks are
    /// applied.
    pub(crate) fn acks_applied(&mut self, ids: impl IntoIterator<Item = MessageId>) {
        self.acked.mark_applied(ids);
    }

    /// ACK requests that acked `ids` individually went unanswered with
    /// their connection and will not be sent again: copies of their
    /// messages bring an ack again (see [`AckMemory::sent_unanswered`]).
    /// Call it before
    /// [`on_reconnect_unsent_after`](Self::on_reconnect_unsent_after).
    pub(crate) fn acks_sent_unanswered(&mut self, ids: impl IntoIterator<Item = MessageId>) {
        self.acked.sent_unanswered(ids);
    }

    /// Whether an [`Action::Ack`] waits to be polled.
    pub(crate) fn has_queued_acks(&self) -> bool {
        self.actions.has_acks()
    }

    /// Ids the driver keeps unacked without handing them out (the chunks
    /// of a chunked message it dropped incomplete): held like handed-out
    /// messages, so the ack timeout, if set, asks for them again. A core
    /// that tracks no messages (a reader's) keeps nothing.
    pub(crate) fn hold(&mut self, now: Instant, ids: &[MessageId]) {
        if !self.config.track_messages {
            return;
        }
        self.anchor(now);
        for id in ids {
            self.held.insert(now, *id);
        }
    }

    /// Ids the driver acks without handing them out (the chunks of a
    /// chunked message it gave up, held until then or not): queued as an
    /// individual ack, so they go out as the core's other acks do, kept
    /// across a reconnect and sent under the consumer id of the
    /// subscription of the moment; the ack timeout no longer asks for them.
    pub(crate) fn ack_never_handed(&mut self, ids: &[MessageId]) {
        for id in ids {
            self.held.remove(*id);
            self.actions.ack(*id);
        }
    }

    /// The next action to carry out, oldest first.
    pub(crate) fn poll_action(&mut self) -> Option<Action<M>> {
        self.actions.pop()
    }

    /// Whether actions wait for [`poll_action`](Self::poll_action).
    pub(crate) fn has_actions(&self) -> bool {
        !self.actions.is_empty()
    }

    /// When [`on_tick`](Self::on_tick) has work: the tick of the earliest
    /// ack-timeout expiry or delayed nack, or when a coalesced rewind
    /// becomes due while the application waits on an empty queue.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        [
            self.held.next_deadline(),
            self.nacks.next_deadline(),
            self.rewind.deadline(self.queue.len()),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Puts both timers on one tick grid, so their work leaves together.
    fn anchor(&mut self, now: Instant) {
        self.held.anchor(now);
        self.nacks.anchor(now);
    }

    /// The chunk assembler took a chunk, or dropped messages: `assembling`
    /// is the first chunk of the earliest message it still assembles,
    /// `completed` that of the message the chunk completed (it reaches
    /// [`on_message`](Self::on_message) next). A cumulative ACK never
    /// covers the first chunk of either (see [`chunk_gate`]).
    pub(crate) fn chunks_taken(
        &mut self,
        assembling: Option<MessageId>,
        completed: Option<MessageId>,
    ) {
        self.chunk_gate.chunks_taken(assembling, completed);
        self.release_cumulative();
    }

    /// Sends a cumulative ack, or as much of it as the chunk gate lets go;
    /// returns whether an ACK was queued.
    fn ack_cumulative_on_wire(&mut self, id: MessageId, ack_set: Option<AckSet>) -> bool {
        let queued = self.queue.earliest_chunked();
        let admitted = self.chunk_gate.admit((id, ack_set), queued);
        if let Some((id, ack_set)) = admitted {
            self.actions.ack_cumulative(id, ack_set);
            return true;
        }
        false
    }

    /// How far a cumulative ACK up to `upto` may reach on the wire now, for
    /// one that cannot be held back (a transaction's): `upto` itself, or
    /// short of a chunked message not handed out yet (`None`: nothing may
    /// go). See [`chunk_gate`].
    pub(crate) fn cumulative_reach(&self, upto: MessageId) -> Option<MessageId> {
        self.chunk_gate.reach(upto, self.queue.earliest_chunked())
    }

    /// Sends the cumulative ack the chunk gate held back, if it may go now.
    fn release_cumulative(&mut self) {
        if !self.chunk_gate.holds() {
            return; // the queue is not scanned for nothing
        }
        let queued = self.queue.earliest_chunked();
        if let Some((id, ack_set)) = self.chunk_gate.release(queued) {
            self.actions.ack_cumulative(id, ack_set);
        }
    }

    /// An arrival that is not queued gives its permit back.
    fn skip_arrival(&mut self) {
        let flow = self.queue.skip();
        self.flow(flow);
    }

    /// Grants `permits`, unless a coalesced rewind withholds them.
    fn flow(&mut self, permits: Option<u32>) {
        if let Some(permits) = permits.and_then(|p| self.rewind.withhold(p)) {
            self.actions.flow(permits);
        }
    }

    fn forward(&mut self, origin: MessageId, redelivery_count: u32, message: M) {
        self.forwarding.insert(origin);
        self.actions.forward(origin, redelivery_count, message);
    }

    /// Everything the application holds will come again (the caller has
    /// kept what it acked lately, which the broker may not have applied
    /// yet, in the ack memory). `same_cursor`: nothing but the consumer
    /// moved the subscription's cursor since (a rewind it asked for, a
    /// lost connection), as far as it can tell.
    fn clear_held(&mut self, same_cursor: bool) {
        self.held.clear();
        self.chunk_ends.clear();
        self.leases.clear();
        self.nacks.clear();
        self.last_chance.clear();
        // With batch index ack, the members' acks went to the broker and
        // are remembered with the other acks: a copy whose ack the broker
        // confirmed is an outside rewind's, and handed out. Without it, the
        // broker never heard of them: kept across a rewind the consumer
        // asked for, or a lost connection; after the broker closed the
        // consumer (an operator's reset, for all the consumer knows) a
        // copy comes whole, as with the Java client.
        self.batches
            .clear_live(same_cursor && !self.config.batch_index_ack_enabled);
    }

    /// Permits given back but not yet sent, for tests.
    #[cfg(test)]
    pub(crate) fn permits_returned(&self) -> u32 {
        self.queue.returned() + self.rewind.withheld()
    }

    /// Whether a coalesced rewind waits, for tests.
    #[cfg(test)]
    pub(crate) fn rewind_pending(&self) -> bool {
        self.rewind.is_pending()
    }

    /// Sizes of the per-message state, for tests: queue, held, delayed
    /// nacks, batch entries, forwards, last-chance copies.
    #[cfg(test)]
    pub(crate) fn footprint(&self) -> [usize; 6] {
        [
            self.queue.len(),
            self.held.len(),
            self.nacks.len(),
            self.batches.len(),
            self.forwarding.len(),
            self.last_chance.len(),
        ]
    }
}
