//! The shelf: each partition's core (its receiver queue, its unacked
//! messages) and position, under one lock the task and the handles share.
//!
//! A `receive()` takes the next message from the shelf itself, and an
//! `ack()`, a `nack()` or an `extend()` records itself in the core,
//! without a round trip to the task (and without a command queued per
//! call):
//! the core runs the same code as when the task takes for a waiting
//! receiver, at the moment the application asks, so the ack-timeout clock
//! and the permit refill start there. What needs the network (a FLOW due,
//! an ACK to send, a redelivery) waits in the core as an action; the
//! handle marks the sub and wakes the task, which carries the actions out.
//! A `receive()` that finds nothing leaves its waker here; the task wakes
//! it once a turn of its loop has queued a message, or when the handles
//! must go to the task, or when the task ends.
//!
//! The handles go to the task instead (a command, answered when a message
//! is there) whenever taking directly could reorder what the application
//! asked for: while a command of theirs is not done yet, while receivers
//! or batch receives wait in the task, while a report (a partition lost)
//! waits for the next receiver, and on a zero receiver queue, where each
//! receiver asks the broker for its message.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::Waker;

use tokio::sync::Notify;

use crate::client::memory::QueueBudget;

use super::*;

/// One sub's part of the shelf.
pub(super) struct Slot {
    pub(super) name: Arc<str>,
    pub(super) core: ConsumerCore<Message>,
    pub(super) position: Position,
    /// Its topic is gone: nothing to take or ack there.
    pub(super) removed: bool,
}

/// What is under the lock.
pub(super) struct Shelved {
    /// The subs' slots, in the task's order.
    pub(super) slots: Vec<Slot>,
    /// Round-robin start for taking across partitions.
    pub(super) next_sub: usize,
    /// Whether the task allows direct takes now (no receivers waiting in
    /// it, no report due, a receiver queue).
    open: bool,
    /// The consumer closed: never open again.
    closed: bool,
    /// Commands sent by handles and not yet done by the task.
    pub(super) in_flight: usize,
    /// Subs a handle left work in for the task (see [`Shelved::take`]).
    pub(super) touched: Vec<usize>,
    /// Handles that found the shelf open and empty, waiting for a message
    /// (or for the shelf to close) to try again.
    waiters: Vec<Waker>,
    /// Whether FLOWs wait for the memory budget: a take may release them.
    pub(super) flows_withheld: bool,
    /// The bytes each sub's queue takes from the client's memory budget.
    pub(super) held: HeldBytes,
}

impl Shelved {
    /// The sub reading `topic` now (not one whose topic is gone).
    pub(super) fn find(&self, topic: &str) -> Option<usize> {
        self.slots
            .iter()
            .position(|s| &*s.name == topic && !s.removed)
    }

    /// Takes the next queued message, partitions in turn: the sub it came
    /// from and the message (see [`ConsumerCore::pop_for_application`]).
    /// Brings the sub's share of the memory budget in line, and marks the
    /// sub when the task has work: actions, FLOWs held back that may go
    /// now, or its timer to move (an ack timeout started, or, on an empty
    /// take, a rewind that waits its delay).
    pub(super) fn take(&mut self, now: std::time::Instant) -> Option<(usize, Incoming<Message>)> {
        let n = self.slots.len();
        for k in 0..n {
            let index = (self.next_sub + k) % n;
            let slot = &mut self.slots[index];
            let deadline = slot.core.next_deadline();
            let Some(incoming) = slot.core.pop_for_application(now) else {
                // An empty take may start a rewind's wait (Exclusive,
                // Failover) or let one go out: the task times or sends it.
                if slot.core.has_actions() || earlier(slot.core.next_deadline(), deadline) {
                    self.touch(index);
                }
                continue;
            };
            slot.position
                .handed_out(incoming.message.position(), incoming.batch_size);
            let work = slot.core.has_actions()
                || self.flows_withheld
                || earlier(slot.core.next_deadline(), deadline);
            self.held.sync(index, slot.core.queued_bytes());
            self.next_sub = (index + 1) % n;
            if work {
                self.touch(index);
            }
            return Some((index, incoming));
        }
        None
    }

    /// Marks sub `index` as having work for the task.
    fn touch(&mut self, index: usize) {
        if !self.touched.contains(&index) {
            self.touched.push(index);
        }
    }

    /// Allows direct takes, or not (never once closed); the waiting
    /// handles to wake (see [`Shelved::ready_waiters`]).
    #[must_use]
    pub(super) fn set_open(&mut self, open: bool) -> Vec<Waker> {
        self.open = open && !self.closed;
        self.ready_waiters()
    }

    /// The consumer closes: nothing is taken or acked here any more (the
    /// handles go to the task, and find it gone); every waiting handle is
    /// returned, to be woken.
    #[must_use]
    pub(super) fn close(&mut self) -> Vec<Waker> {
        self.closed = true;
        self.open = false;
        std::mem::take(&mut self.waiters)
    }

    /// The waiting handles that would find something now: a message
    /// queued, or the shelf closed to direct takes (they go to the task).
    /// Empty, without allocating, when none waits.
    fn ready_waiters(&mut self) -> Vec<Waker> {
        if self.waiters.is_empty() {
            return Vec::new();
        }
        let queued = self.slots.iter().any(|s| s.core.queued() > 0);
        if self.open && !queued {
            return Vec::new();
        }
        std::mem::take(&mut self.waiters)
    }

    /// Keeps `waker` to wake when there is something to take (once per
    /// handle: a handle polled again replaces nothing).
    fn wait(&mut self, waker: &Waker) {
        if !self.waiters.iter().any(|w| w.will_wake(waker)) {
            self.waiters.push(waker.clone());
        }
    }

    /// Frees the slots of removed subs, and moves every index kept here
    /// to its sub's new one (`moved(old)`, `None` for a slot freed): the
    /// work handles left, the round-robin start, the memory shares (a
    /// freed slot's go back to the budget).
    pub(super) fn free(&mut self, moved: impl Fn(usize) -> Option<usize>) {
        let n = self.slots.len();
        self.next_sub = (self.next_sub..n)
            .chain(0..self.next_sub)
            .find_map(&moved)
            .unwrap_or(0);
        self.touched = std::mem::take(&mut self.touched)
            .into_iter()
            .filter_map(&moved)
            .collect();
        self.held.remap(&moved);
        self.slots = std::mem::take(&mut self.slots)
            .into_iter()
            .enumerate()
            .filter_map(|(old, slot)| moved(old).map(|_| slot))
            .collect();
        super::leave::shrink_if_mostly_empty(&mut self.slots);
    }

    /// Brings sub `index`'s share of the memory budget in line with its queue.
    pub(super) fn sync_memory(&mut self, index: usize) {
        let bytes = self.slots[index].core.queued_bytes();
        self.held.sync(index, bytes);
    }
}

/// Whether deadline `now` comes before deadline `before` (or is new).
fn earlier(now: Option<std::time::Instant>, before: Option<std::time::Instant>) -> bool {
    match (now, before) {
        (Some(now), Some(before)) => now < before,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

/// The shelf, shared by the task and every handle.
pub(crate) struct Shelf {
    state: Mutex<Shelved>,
    /// Whether the cores use the clock (the same settings made them all).
    uses_clock: bool,
    /// When the task started: the instant the cores get when they do not
    /// use the clock (see [`Shelf::core_now`]).
    started: std::time::Instant,
    /// Wakes the task when a handle left work for it in a core.
    pub(super) work: Notify,
    /// The consumer is closing, as asked: a handle whose call finds the
    /// task gone or going reports a close, not a failure.
    closing: std::sync::atomic::AtomicBool,
    /// Told of every message handed out and every ack.
    pub(super) observers: Observers,
}

impl std::fmt::Debug for Shelf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shelf").finish_non_exhaustive()
    }
}

/// What a direct take found.
#[derive(Debug)]
pub(crate) enum Taken {
    /// A message, or in its place the error naming one the application
    /// must not get (see [`ConsumerError::Unreadable`]).
    Message(Result<Message, ConsumerError>),
    /// Nothing queued now.
    Empty,
    /// The task must answer (see the module documentation).
    AskTheTask,
}

impl Shelf {
    /// An empty shelf for cores made with `config`, their queues' bytes
    /// counted against `budget`. Direct takes start allowed unless the
    /// receiver queue is zero.
    pub(super) fn new(budget: Arc<QueueBudget>, observers: Observers, config: &CoreConfig) -> Self {
        Self {
            state: Mutex::new(Shelved {
                slots: Vec::new(),
                next_sub: 0,
                open: config.receiver_queue_size > 0,
                closed: false,
                in_flight: 0,
                touched: Vec::new(),
                waiters: Vec::new(),
                flows_withheld: false,
                held: HeldBytes::new(budget),
            }),
            uses_clock: config.uses_clock(),
            started: clock::now(),
            work: Notify::new(),
            closing: std::sync::atomic::AtomicBool::new(false),
            observers,
        }
    }

    /// A shelf that sends every request to the task (handle tests).
    #[cfg(test)]
    pub(crate) fn closed() -> Self {
        let zero_queue = CoreConfig {
            receiver_queue_size: 0,
            ..CoreConfig::default()
        };
        Self::for_tests(&zero_queue)
    }

    /// An empty shelf for cores made with `config`, without observers.
    #[cfg(test)]
    pub(super) fn for_tests(config: &CoreConfig) -> Self {
        let observers = Observers {
            stats: Arc::new(ConsumerRecorder::new(Duration::from_secs(60), clock::now())),
            letters: None,
            interceptors: Chain::new(Vec::new()),
        };
        let total = Arc::new(tokio::sync::Semaphore::new(1 << 20));
        Self::new(
            Arc::new(QueueBudget::new(total, 1 << 20)),
            observers,
            config,
        )
    }

    /// The instant for the cores' calls: the clock when they use it (see
    /// `CoreConfig::uses_clock`), else the task's start, which they
    /// ignore; reading the clock per message cost ~3% of a consume run.
    pub(super) fn core_now(&self) -> std::time::Instant {
        if self.uses_clock {
            clock::now()
        } else {
            self.started
        }
    }

    /// The shelf, locked. A panic elsewhere never leaves it unusable: the
    /// cores stay consistent between calls.
    pub(super) fn lock(&self) -> MutexGuard<'_, Shelved> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A handle sends the task a command: no direct take until it is done.
    pub(crate) fn command_sent(&self) {
        self.lock().in_flight += 1;
    }

    /// The task is done with a handle's command.
    pub(super) fn command_done(&self) {
        let mut shelved = self.lock();
        shelved.in_flight = shelved.in_flight.saturating_sub(1);
    }

    /// A handle's `try_receive()`: the next queued message, taken now, if
    /// the task allows it.
    pub(crate) fn take(&self) -> Taken {
        self.take_or_wait(None)
    }

    /// A handle's `receive()`: as [`take`](Self::take), and when it finds
    /// nothing, `waker` is woken once a message is queued or the task must
    /// answer instead. It is registered under the lock the task queues
    /// messages under, so no message slips in between.
    pub(crate) fn take_or_wake(&self, waker: &Waker) -> Taken {
        self.take_or_wait(Some(waker))
    }

    fn take_or_wait(&self, waker: Option<&Waker>) -> Taken {
        let mut shelved = self.lock();
        if !shelved.open || shelved.in_flight > 0 {
            return Taken::AskTheTask;
        }
        // Read under the lock: the cores see the instants in order.
        let now = self.core_now();
        let taken = shelved.take(now);
        if taken.is_none() {
            if let Some(waker) = waker {
                shelved.wait(waker);
            }
        }
        let wake = !shelved.touched.is_empty();
        drop(shelved);
        if wake {
            self.work.notify_one();
        }
        match taken {
            Some((_, incoming)) => Taken::Message(self.observers.hand_out(incoming.message)),
            None => Taken::Empty,
        }
    }

    /// A handle's `ack()` without receipts of the message the application
    /// holds as `id`, recorded in the core now; false if the task must do
    /// it (an unknown topic: the task answers).
    pub(crate) fn ack(&self, topic: &str, id: MessageId, batch_size: Option<u32>) -> bool {
        let recorded = self.record(topic, |core, now| {
            core.ack_with_batch_size(now, held_at(id, false), batch_size);
        });
        if recorded {
            self.observers.acked(topic, id, false);
        }
        recorded
    }

    /// A handle's `nack()` of the message the application holds as `id`,
    /// recorded in the core now (see [`ConsumerCore::nack`]: an id the
    /// application does not hold is ignored, and so is one of a topic no
    /// longer read).
    ///
    /// # Errors
    /// [`ConsumerError::Closed`] once the shelf is closed.
    pub(crate) fn nack(
        &self,
        topic: &str,
        id: MessageId,
        redelivery_count: u32,
    ) -> Result<(), ConsumerError> {
        let recorded = self.record(topic, |core, now| {
            core.nack(now, held_at(id, false), redelivery_count);
        });
        self.unless_closed(recorded)?;
        self.observers.nacked(topic, id);
        Ok(())
    }

    /// A handle's `extend()`, recorded in the core now (see
    /// [`ConsumerCore::extend`]).
    ///
    /// # Errors
    /// [`ConsumerError::Closed`] once the shelf is closed.
    pub(crate) fn extend(
        &self,
        topic: &str,
        id: MessageId,
        by: std::time::Duration,
    ) -> Result<(), ConsumerError> {
        let recorded = self.record(topic, |core, now| {
            core.extend(now, id, by);
        });
        self.unless_closed(recorded)
    }

    /// Runs a handle's call on the core of the sub reading `topic`, at
    /// once and under the lock, and wakes the task if the core now has
    /// actions for it or its timer to move earlier (a nack's delay);
    /// false if the shelf is closed or no sub reads `topic`. Such calls leave nothing queued per call: a loop that makes
    /// them over and over without yielding holds no memory for them.
    fn record(
        &self,
        topic: &str,
        call: impl FnOnce(&mut ConsumerCore<Message>, std::time::Instant),
    ) -> bool {
        let mut shelved = self.lock();
        let Some(index) = shelved.find(topic).filter(|_| !shelved.closed) else {
            return false;
        };
        // Read under the lock: the cores see the instants in order.
        let now = self.core_now();
        let core = &mut shelved.slots[index].core;
        let deadline = core.next_deadline();
        call(core, now);
        if core.has_actions() || earlier(core.next_deadline(), deadline) {
            shelved.touch(index);
        }
        let wake = !shelved.touched.is_empty();
        drop(shelved);
        if wake {
            self.work.notify_one();
        }
        true
    }

    /// Ok for a call [`record`](Self::record)ed, or made for a topic no
    /// longer read (its message left with it); `Closed` once the shelf is.
    fn unless_closed(&self, recorded: bool) -> Result<(), ConsumerError> {
        if recorded || !self.lock().closed {
            Ok(())
        } else {
            Err(ConsumerError::Closed)
        }
    }

    /// The subs handles left actions in, since the last call.
    pub(super) fn touched(&self) -> Vec<usize> {
        std::mem::take(&mut self.lock().touched)
    }

    /// Allows direct takes, or not, and wakes the handles waiting here
    /// that would now find a message, or must go to the task.
    pub(super) fn set_open(&self, open: bool) {
        let ready = self.lock().set_open(open);
        wake_all(ready);
    }

    /// The consumer closes, as asked: [`close`](Self::close), and the
    /// handles learn it is a close.
    pub(super) fn closing(&self) {
        self.closing
            .store(true, std::sync::atomic::Ordering::Release);
        self.close();
    }

    /// Whether the consumer is closing or closed, as asked.
    pub(crate) fn is_closing(&self) -> bool {
        self.closing.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Closes the shelf for good (see [`Shelved::close`]) and wakes every
    /// waiting handle: it goes to the task and finds it gone.
    pub(super) fn close(&self) {
        let waiters = self.lock().close();
        wake_all(waiters);
    }
}

/// Wakes `wakers` (after the lock is released: a woken handle on another
/// thread takes it at once).
fn wake_all(wakers: Vec<Waker>) {
    for waker in wakers {
        waker.wake();
    }
}

/// Closes the shelf when the consumer's task ends, also by a panic: a
/// handle waiting on the shelf then asks the task and learns it is gone.
pub(super) struct CloseOnDrop(pub(super) Arc<Shelf>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// Where deliveries and answers are told: the consumer's statistics, its
/// dead-letter history and its interceptors.
pub(crate) struct Observers {
    pub(super) stats: Arc<ConsumerRecorder>,
    pub(super) letters: Option<Arc<crate::consumer::letters::Letters>>,
    pub(super) interceptors: Chain<dyn ConsumerInterceptor>,
}

impl Observers {
    /// A message leaves the core for the application: counted and told,
    /// or, for one the application must not get, the error naming it
    /// (the core holds it as handed out: unacked, under the ack timeout).
    pub(super) fn hand_out(&self, message: Message) -> Result<Message, ConsumerError> {
        match message.unreadable() {
            None => {
                self.stats.received(message.payload().len());
                if let Some(letters) = &self.letters {
                    letters.delivered(&message);
                }
                for interceptor in self.interceptors.iter() {
                    interceptor.before_consume(&message);
                }
                Ok(message)
            }
            Some(reason) => {
                warn!(topic = %message.topic(), id = %message.id(), %reason, "message not handed out; left unacked");
                Err(ConsumerError::Unreadable {
                    topic: message.topic().to_owned(),
                    id: message.id(),
                    reason,
                })
            }
        }
    }

    /// The application acked `id` of `topic`; the core recorded it.
    pub(super) fn acked(&self, topic: &str, id: MessageId, cumulative: bool) {
        self.stats.acked();
        if let Some(letters) = &self.letters {
            letters.settled(id);
        }
        for interceptor in self.interceptors.iter() {
            interceptor.on_acknowledge(topic, id, cumulative);
        }
    }

    /// The application nacked `id` of `topic`.
    pub(super) fn nacked(&self, topic: &str, id: MessageId) {
        self.stats.nacked();
        for interceptor in self.interceptors.iter() {
            interceptor.on_negative_acknowledge(topic, id);
        }
    }
}

/// The bytes each sub's queue takes from the receiver queues' part of the
/// client's memory limit (at most what it holds); all given back when
/// dropped.
pub(super) struct HeldBytes {
    budget: Arc<QueueBudget>,
    held: Vec<usize>,
}

impl HeldBytes {
    pub(super) fn new(budget: Arc<QueueBudget>) -> Self {
        Self {
            budget,
            held: Vec::new(),
        }
    }

    /// Sub `index` now queues `bytes`: takes what it gained from the
    /// budget (as far as it has room) or gives back what it lost. Bytes
    /// go back in steps of an eighth of what the queue holds (or all of
    /// them once it is empty): giving back takes the budget's lock, which
    /// per message cost about 2% of a consume run's CPU.
    pub(super) fn sync(&mut self, index: usize, bytes: usize) {
        if self.held.len() <= index {
            self.held.resize(index + 1, 0);
        }
        let held = &mut self.held[index];
        if bytes < *held {
            let freed = *held - bytes;
            if bytes == 0 || freed >= *held / 8 {
                self.budget.give(freed);
                *held = bytes;
            }
        } else if bytes > *held {
            *held += self.budget.take(bytes - *held);
        }
    }

    /// Moves each sub's bytes to its new index (`moved(old)`); those of a
    /// sub freed (`None`) go back to the budget.
    pub(super) fn remap(&mut self, moved: impl Fn(usize) -> Option<usize>) {
        let mut held = Vec::new();
        for (old, bytes) in std::mem::take(&mut self.held).into_iter().enumerate() {
            match moved(old) {
                Some(new) => {
                    if held.len() <= new {
                        held.resize(new + 1, 0);
                    }
                    held[new] = bytes;
                }
                None => self.budget.give(bytes),
            }
        }
        self.held = held;
    }

    /// Gives everything back (the consumer ended).
    pub(super) fn release_all(&mut self) {
        self.budget.give(self.held.drain(..).sum());
    }

    /// Bytes taken from the budget, for tests.
    #[cfg(test)]
    pub(super) fn total(&self) -> usize {
        self.held.iter().sum()
    }
}

impl Drop for HeldBytes {
    fn drop(&mut self) {
        self.release_all();
    }
}

#[cfg(test)]
#[path = "shelf_tests.rs"]
mod tests;
