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

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use crate::MessageId;

use super::actions::{Action, Actions, Incoming};
use super::batch_acks::{BatchAcks, MemberAck};
use super::config::CoreConfig;
use super::dead_letter::DeadLetterCutoff;
use super::error::{ConfigError, CoreError};
use super::nack::{NackPolicy, NackTracker, Nacked};
use super::permits::ReceiverQueue;
use super::rewind::PendingRewind;
use super::settled::{RecentAcks, Settled};
use super::unacked::UnackedTracker;

/// What became of an application's ack ([`ConsumerCore::ack`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acked {
    /// An [`Action::Ack`] that covers it is queued (it is the last one).
    Queued,
    /// A batch member whose ack waits for the rest of its batch: it goes
    /// out with the ack of `entry` (the entry's id), once every member is
    /// acked. Nothing is queued yet.
    AwaitingBatch {
        /// The id of the member's entry.
        entry: MessageId,
    },
    /// Nothing can be sent for it: a batch member of an entry the core has
    /// no state for, acked without its batch size, or any ack on a core
    /// that does not track messages (a reader's).
    Unrecorded,
}

/// The consumer's delivery state machine; `M` is the driver's message type.
///
/// `M` is cloned only with [`DeadLetterCutoff::JavaStyle`], to keep a copy
/// of a message at the redelivery limit while the application holds it; a
/// `Bytes`-backed message clones cheaply.
///
/// # Examples
/// ```
/// use std::time::{Duration, Instant};
/// use pulsar_wire::MessageId;
/// use pulsar_wire::consumer::{Action, ConsumerCore, CoreConfig, Incoming};
///
/// let t0 = Instant::now();
/// let config = CoreConfig { ack_timeout: Some(Duration::from_secs(10)), ..CoreConfig::default() };
/// let mut core = ConsumerCore::new(config)?;
/// core.on_subscribed(t0);
/// assert_eq!(core.poll_action(), Some(Action::Flow(1000)));
///
/// let id = MessageId::new(7, 0);
/// let incoming = Incoming { id, redelivery_count: 0, consumer_epoch: None, batch_size: None, message: "hi" };
/// core.on_message(t0, incoming)?;
/// assert_eq!(core.pop_for_application(t0).map(|m| m.message), Some("hi"));
/// core.on_tick(t0 + Duration::from_secs(9));
/// assert_eq!(core.poll_action(), None);
/// core.ack(t0 + Duration::from_secs(9), id);
/// assert_eq!(core.poll_action(), Some(Action::Ack { ids: vec![id], cumulative: false, ack_set: None }));
/// assert_eq!(core.next_deadline(), None);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct ConsumerCore<M> {
    config: CoreConfig,
    queue: ReceiverQueue<M>,
    /// Handed to the application and not answered yet (timed with an ack timeout).
    held: UnackedTracker,
    nacks: NackTracker,
    batches: BatchAcks,
    /// Forwarded to the dead-letter topic, result not known yet.
    forwarding: HashSet<MessageId>,
    /// JavaStyle: held messages at the limit, forwarded on their next redelivery.
    last_chance: HashMap<MessageId, (u32, M)>,
    /// Acked while not held: their copies are dropped.
    settled: Settled,
    /// The last acks of held messages; they join `settled` at a reconnect
    /// or rewind.
    recent: RecentAcks,
    /// Exclusive/Failover: a rewind a nack asked for, not sent yet.
    rewind: PendingRewind,
    epoch: u64,
    actions: Actions<M>,
}

impl<M: Clone> ConsumerCore<M> {
    /// A core for `config`.
    ///
    /// # Errors
    /// [`ConfigError`] if [`CoreConfig::validate`] refuses the config.
    pub fn new(config: CoreConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let mut held = match config.ack_timeout {
            Some(timeout) => UnackedTracker::new(timeout, config.tick),
            None => UnackedTracker::untimed(),
        };
        if let Some(backoff) = config.ack_timeout_backoff {
            held = held.with_backoff(backoff);
        }
        let remembered = config.receiver_queue_size.max(1000) as usize;
        let settled = Settled::new(remembered);
        Ok(Self {
            queue: ReceiverQueue::new(config.receiver_queue_size),
            nacks: NackTracker::new(config.nack, config.tick),
            config,
            held,
            batches: BatchAcks::default(),
            forwarding: HashSet::new(),
            last_chance: HashMap::new(),
            settled,
            recent: RecentAcks::new(remembered),
            rewind: PendingRewind::default(),
            epoch: 0,
            actions: Actions::default(),
        })
    }

    /// The settings.
    pub fn config(&self) -> &CoreConfig {
        &self.config
    }

    /// The current consumer epoch (for `CommandSubscribe.consumer_epoch`).
    pub fn consumer_epoch(&self) -> u64 {
        self.epoch
    }

    /// Messages queued for the application.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Messages the application holds without an answer yet.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// The id of the oldest message queued for the application.
    pub(crate) fn first_queued(&self) -> Option<MessageId> {
        self.queue.front_id()
    }

    /// The subscribe succeeded: grant the whole receiver queue (once per
    /// connection).
    pub fn on_subscribed(&mut self, now: Instant) {
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
    pub fn on_message(&mut self, now: Instant, incoming: Incoming<M>) -> Result<(), CoreError> {
        self.anchor(now);
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
        if self.settled.contains(id) {
            // Acked by the application, yet the broker sends it again: its
            // ACK may have been lost with a connection. Acked again (an ack
            // is idempotent), so it does not stay in the subscription.
            self.skip_arrival();
            if id.is_batch_member() {
                let outcome = self.batches.ack_untracked(id, batch_size);
                self.member_acked(outcome);
            } else {
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
    ///
    /// # Examples
    /// ```
    /// use std::time::Instant;
    /// use pulsar_wire::MessageId;
    /// use pulsar_wire::consumer::{Action, ConsumerCore, CoreConfig, Incoming};
    ///
    /// let t0 = Instant::now();
    /// let mut core = ConsumerCore::new(CoreConfig::default())?;
    /// let entry = MessageId::new(7, 0);
    /// // Redelivered with ack_set 0b010: only member 1 of 3 comes.
    /// let id = entry.with_batch_index(1);
    /// let incoming = Incoming { id, redelivery_count: 1, consumer_epoch: None, batch_size: Some(3), message: () };
    /// core.on_message(t0, incoming)?;
    /// core.on_skipped_members(entry, 3, &[0, 2]);
    /// core.pop_for_application(t0);
    /// core.ack(t0, id);
    /// assert_eq!(core.poll_action(), Some(Action::Ack { ids: vec![entry], cumulative: false, ack_set: None }));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn on_skipped_members(&mut self, entry: MessageId, batch_size: u32, skipped: &[i32]) {
        if skipped.is_empty() || !self.config.track_messages {
            return;
        }
        if let MemberAck::Entry(entry) = self.batches.skip(entry, batch_size, skipped) {
            self.actions.ack(entry);
        }
    }

    /// Hands the next queued message to the application and starts its
    /// ack-timeout clock; `None` when the queue is empty. Gives its permit
    /// back (a `Flow` follows once half the queue has been taken).
    ///
    /// On Exclusive and Failover, finding the queue empty lets a rewind a
    /// nack asked for go out (see [`nack`](Self::nack)).
    pub fn pop_for_application(&mut self, now: Instant) -> Option<Incoming<M>> {
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
            if self.settled.contains(incoming.id) || self.batches.is_acked(incoming.id) {
                if incoming.id.is_batch_member() {
                    self.batches.leave(incoming.id);
                }
                continue;
            }
            break incoming;
        };
        self.rewind.on_take(true);
        if !self.config.track_messages {
            return Some(incoming);
        }
        let id = incoming.id;
        self.held
            .insert_redelivered(now, id, incoming.redelivery_count);
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
    pub fn ack(&mut self, now: Instant, id: MessageId) -> Acked {
        self.ack_with_batch_size(now, id, None)
    }

    /// As [`ack`](Self::ack), with the batch size of a batch member's entry
    /// (`None` for a plain message).
    pub fn ack_with_batch_size(
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
            // Hashing the id for an empty map cost ~1% of a consume run.
            if !self.last_chance.is_empty() {
                self.last_chance.remove(&id);
            }
            self.recent.push(id);
            return self.settle(id, false);
        }
        self.settled.insert(id);
        if !id.is_batch_member() {
            self.actions.ack(id);
            return Acked::Queued;
        }
        let outcome = self.batches.ack_untracked(id, batch_size);
        self.member_acked(outcome)
    }

    /// The application acked everything up to and including `upto`: stops
    /// the clocks and withdraws the delayed nacks it covers, and drops
    /// copies of what it covers that are queued or arrive later. Sent
    /// whatever the core holds, as [`ack`](Self::ack).
    ///
    /// # Errors
    /// [`CoreError::CumulativeAckNotAllowed`] on Shared and Key_Shared.
    pub fn ack_cumulative(&mut self, now: Instant, upto: MessageId) -> Result<Acked, CoreError> {
        self.ack_cumulative_with_batch_size(now, upto, None)
    }

    /// As [`ack_cumulative`](Self::ack_cumulative), with the batch size of
    /// `upto`'s entry when it is a batch member.
    ///
    /// # Errors
    /// As [`ack_cumulative`](Self::ack_cumulative).
    pub fn ack_cumulative_with_batch_size(
        &mut self,
        now: Instant,
        upto: MessageId,
        batch_size: Option<u32>,
    ) -> Result<Acked, CoreError> {
        self.anchor(now);
        let subscription = self.config.subscription_type;
        if !subscription.allows_cumulative_ack() {
            return Err(CoreError::CumulativeAckNotAllowed { subscription });
        }
        if !self.config.track_messages {
            return Ok(Acked::Unrecorded);
        }
        let mut covered = self.held.remove_up_to(upto);
        covered.extend(self.nacks.cancel_up_to(upto));
        if !self.last_chance.is_empty() {
            self.last_chance.retain(|id, _| *id > upto);
        }
        self.settled.cumulative(upto);
        let ack =
            self.batches
                .ack_cumulative(upto, batch_size, self.config.batch_index_ack_enabled);
        for id in covered.into_iter().filter(MessageId::is_batch_member) {
            self.batches.leave(id);
        }
        let sent = ack.as_ref().map(|(id, _)| *id);
        if let Some((id, ack_set)) = ack {
            self.actions.ack_cumulative(id, ack_set);
        }
        // A member whose entry is not complete is covered only once it is.
        Ok(match sent {
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
    pub fn nack(&mut self, now: Instant, id: MessageId, redelivery_count: u32) {
        self.anchor(now);
        if self.held.remove(id) && self.nacks.nack(now, id, redelivery_count) == Nacked::Now {
            self.request_redelivery(vec![id], Some(now));
        }
    }

    /// Time passed: requests again, in one command, every message whose
    /// ack timeout expired and every delayed nack now due (a due nack on
    /// Exclusive or Failover joins a coalesced rewind, see
    /// [`nack`](Self::nack)); sends a coalesced rewind that is due.
    pub fn on_tick(&mut self, now: Instant) {
        self.anchor(now);
        let expired = self.held.expire(now);
        let nacked = self.nacks.expire(now);
        if !expired.is_empty() {
            self.request_redelivery(expired, None);
        }
        if !nacked.is_empty() {
            self.request_redelivery(nacked, Some(now));
        }
        self.rewind_if_due(now);
    }

    /// The dead-letter publish of `origin` finished. On success the original
    /// is acked; on failure it is requested again and never acked, so it
    /// comes back (a duplicate in the dead-letter topic is acceptable, a
    /// loss is not). Unknown origins are ignored.
    pub fn on_dead_letter_result(&mut self, origin: MessageId, result: Result<(), ()>) {
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

    /// The connection was replaced: the broker will redeliver everything
    /// unacked, so the queue, the held messages' clocks and delayed nacks
    /// are dropped, the epoch moves on, and pending flow and redelivery
    /// actions (meant for the old connection) are discarded. Acks and
    /// dead-letter forwards stay. Call [`on_subscribed`](Self::on_subscribed)
    /// once subscribed again.
    pub fn on_reconnect(&mut self) {
        self.queue.reset();
        // The new subscribe grants the whole queue: withheld permits are moot.
        self.rewind.take();
        self.clear_held();
        self.epoch += 1;
        self.actions.keep_across_reconnect();
    }

    /// The subscription was moved (seek): acked messages may come again on
    /// purpose, so the acks remembered to drop redelivered copies are
    /// forgotten.
    pub fn on_seek(&mut self) {
        let capacity = self.config.receiver_queue_size.max(1000) as usize;
        self.settled = Settled::new(capacity);
        self.recent = RecentAcks::new(capacity);
    }

    /// Whether an [`Action::Ack`] waits to be polled.
    pub(crate) fn has_queued_acks(&self) -> bool {
        self.actions.has_acks()
    }

    /// Ids the driver keeps unacked without handing them out (the chunks
    /// of a chunked message it dropped incomplete): held like handed-out
    /// messages, so the ack timeout, if set, asks for them again.
    pub(crate) fn hold(&mut self, now: Instant, ids: &[MessageId]) {
        self.anchor(now);
        for id in ids {
            self.held.insert(now, *id);
        }
    }

    /// Ids the driver acks without handing them out (the chunks of a
    /// chunked message it gave up): queued as an individual ack, so they
    /// go out as the core's other acks do, kept across a reconnect and sent
    /// under the consumer id of the subscription of the moment.
    pub(crate) fn ack_unheld(&mut self, ids: &[MessageId]) {
        for id in ids {
            self.actions.ack(*id);
        }
    }

    /// The next action to carry out, oldest first.
    pub fn poll_action(&mut self) -> Option<Action<M>> {
        self.actions.pop()
    }

    /// When [`on_tick`](Self::on_tick) has work: the tick of the earliest
    /// ack-timeout expiry or delayed nack, or when a coalesced rewind
    /// becomes due while the application waits on an empty queue.
    pub fn next_deadline(&self) -> Option<Instant> {
        [
            self.held.next_deadline(),
            self.nacks.next_deadline(),
            self.rewind.deadline(self.queue.len()),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Whether the instants passed in matter: only with an ack timeout or
    /// a delayed nack. Without both, a driver may pass any instant and save
    /// reading the clock per message.
    pub(crate) fn uses_clock(&self) -> bool {
        self.config.ack_timeout.is_some() || self.config.nack != NackPolicy::Immediate
    }

    /// Puts both timers on one tick grid, so their work leaves together.
    fn anchor(&mut self, now: Instant) {
        self.held.anchor(now);
        self.nacks.anchor(now);
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

    /// An acked message or member (`forwarded`: by a confirmed forward).
    fn settle(&mut self, id: MessageId, forwarded: bool) -> Acked {
        if !id.is_batch_member() {
            self.actions.ack(id);
            return Acked::Queued;
        }
        let outcome = self.batches.ack(id, forwarded);
        self.member_acked(outcome)
    }

    /// Queues what acking a batch member led to.
    fn member_acked(&mut self, outcome: MemberAck) -> Acked {
        match outcome {
            MemberAck::Entry(entry) => self.actions.ack(entry),
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
    fn request_redelivery(&mut self, ids: Vec<MessageId>, nacked_at: Option<Instant>) {
        let mut entries = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some((count, message)) = self.last_chance.remove(&id) {
                if id.is_batch_member() {
                    self.batches.start_forward(id);
                }
                self.forward(id, count, message);
            } else {
                if id.is_batch_member() {
                    self.batches.leave(id);
                }
                entries.push(id.entry());
            }
        }
        if !entries.is_empty() {
            self.redeliver(entries, nacked_at);
        }
    }

    fn redeliver(&mut self, entries: Vec<MessageId>, nacked_at: Option<Instant>) {
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
    fn rewind_if_due(&mut self, now: Instant) {
        if self.rewind.is_due(now, self.queue.len()) {
            self.rewind();
        }
    }

    /// Exclusive/Failover: the broker redelivers everything unacked, so
    /// drop what is local, move to a new epoch, and give back the cleared
    /// queue's permits.
    fn rewind(&mut self) {
        let withheld = self.rewind.take();
        let flow = self.queue.rewind();
        self.clear_held();
        self.epoch += 1;
        self.actions.rewind(self.epoch);
        let permits = flow.unwrap_or(0).saturating_add(withheld);
        self.flow((permits > 0).then_some(permits));
    }

    /// Everything the application holds will come again (but not what it
    /// acked lately, which the broker may not have applied yet).
    fn clear_held(&mut self) {
        self.recent.settle_into(&mut self.settled);
        self.held.clear();
        self.nacks.clear();
        self.last_chance.clear();
        self.batches.clear_live();
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
