//! The receiver queue and its accounting: when to send `CommandFlow`, and
//! for how many permits (pure).
//!
//! The broker sends a consumer at most as many messages as it holds permits
//! for, one permit per message (a batched entry of `n` members costs `n`).
//! The consumer grants the whole receiver queue when it subscribes, then
//! gives permits back as messages leave its queue, in one `Flow` once half
//! the queue has been given back (Java's `receiverQueueRefillThreshold`).
//!
//! Every message that arrives is given back exactly once:
//! - when the application takes it from the queue;
//! - at once, when the consumer drops it without queueing it (a duplicate,
//!   a message of a stale consumer epoch, an acked batch member, one
//!   forwarded to the dead-letter topic);
//! - when a rewind (`RedeliverAll` on Exclusive/Failover) clears the queue:
//!   the cleared messages' permits are given back, as Java's
//!   `increaseAvailablePermits(currentSize)` does.
//!
//! A queue of size 0 (Java's zero-queue consumer) grants nothing ahead:
//! [`ReceiverQueue::request`] grants one permit per waiting receiver not
//! yet covered by a queued message or a permit granted before, and taking
//! a message gives nothing back.
//!
//! The queue also counts the bytes it holds (see [`QueuedBytes`]: a
//! message's payload and its fixed bookkeeping), for the client's memory
//! limit and for batch receives.
//!
//! So, with `B` = permits the broker holds (negative after it sent a whole
//! batch on too few permits), `Q` = messages queued and `R` = permits given
//! back but not yet sent, `B + Q + R == receiver_queue_size` between a
//! subscribe and the next reconnect, and the queue never holds more than the
//! queue size plus one batch.

use std::collections::{HashSet, VecDeque};

use crate::message_id::MessageId;

use super::actions::Incoming;
use super::unacked::id_hash::IdBuildHasher;

/// How many bytes a queued message holds (its payload, and for the
/// driver's messages a fixed overhead for the message itself), as counted
/// against the client's memory limit and a batch receive's byte bound. A
/// message's count must not change while it is queued.
pub(crate) trait QueuedBytes {
    /// The bytes this message holds.
    fn queued_bytes(&self) -> usize;
}

/// Test and fuzzing messages are plain numbers that hold no payload.
#[cfg(any(test, feature = "fuzzing"))]
impl QueuedBytes for u64 {
    fn queued_bytes(&self) -> usize {
        0
    }
}

#[cfg(any(test, feature = "fuzzing"))]
impl QueuedBytes for u32 {
    fn queued_bytes(&self) -> usize {
        0
    }
}

#[cfg(test)]
impl QueuedBytes for () {
    fn queued_bytes(&self) -> usize {
        0
    }
}

/// A test message's text is its payload.
#[cfg(test)]
impl QueuedBytes for &str {
    fn queued_bytes(&self) -> usize {
        self.len()
    }
}

/// Messages received and not yet taken by the application, each id once,
/// with the permits they give back and the bytes they hold.
#[derive(Debug)]
pub(crate) struct ReceiverQueue<M> {
    queue: VecDeque<Incoming<M>>,
    ids: HashSet<MessageId, IdBuildHasher>,
    permits: Permits,
    subscribed: bool,
    /// The bytes the queued messages hold (see [`QueuedBytes`]).
    bytes: usize,
    /// Zero queue: permits granted for waiting receivers and not used yet.
    requested: u32,
    /// How many queued messages are chunked.
    chunked: usize,
}

impl<M: QueuedBytes> ReceiverQueue<M> {
    /// An empty queue of `size` messages (0: nothing prefetched), not yet
    /// subscribed.
    pub(crate) fn new(size: u32) -> Self {
        Self {
            queue: VecDeque::new(),
            ids: HashSet::default(),
            permits: Permits::new(size),
            subscribed: false,
            bytes: 0,
            requested: 0,
            chunked: 0,
        }
    }

    /// The subscribe succeeded: the first `Flow`, for the whole queue, once
    /// per connection (none for a zero queue).
    pub(crate) fn subscribe(&mut self) -> Option<u32> {
        (!std::mem::replace(&mut self.subscribed, true))
            .then(|| self.permits.initial())
            .filter(|permits| *permits > 0)
    }

    /// Zero queue: permits for `waiting` receivers, one each, less those
    /// covered by queued messages or permits granted before; `None` when
    /// nothing more is due (or the queue is not zero, or not subscribed).
    pub(crate) fn request(&mut self, waiting: usize) -> Option<u32> {
        if !self.permits.is_zero() || !self.subscribed {
            return None;
        }
        let covered = self.queue.len() + self.requested as usize;
        let missing = u32::try_from(waiting.saturating_sub(covered)).unwrap_or(u32::MAX);
        (missing > 0).then(|| {
            self.requested += missing;
            missing
        })
    }

    /// An arrival used one of the permits [`request`](Self::request) granted.
    fn arrived(&mut self) {
        self.requested = self.requested.saturating_sub(1);
    }

    /// Whether a message with this id is queued.
    pub(crate) fn contains(&self, id: MessageId) -> bool {
        self.ids.contains(&id)
    }

    /// Queues a message (whose id is not queued yet).
    pub(crate) fn push(&mut self, incoming: Incoming<M>) {
        self.arrived();
        self.ids.insert(incoming.id);
        self.bytes += incoming.message.queued_bytes();
        self.chunked += usize::from(incoming.position != incoming.id);
        self.queue.push_back(incoming);
    }

    /// A message that arrived and is not queued gives its permit back;
    /// returns a `Flow` that is due.
    pub(crate) fn skip(&mut self) -> Option<u32> {
        self.arrived();
        self.give_back(1)
    }

    /// Takes the oldest message, with a `Flow` that is due.
    pub(crate) fn pop(&mut self) -> Option<(Incoming<M>, Option<u32>)> {
        let incoming = self.queue.pop_front()?;
        self.ids.remove(&incoming.id);
        self.bytes -= incoming.message.queued_bytes();
        self.chunked -= usize::from(incoming.position != incoming.id);
        Some((incoming, self.give_back(1)))
    }

    /// A rewind: the broker sends everything again, so the queue is dropped
    /// and its permits given back; returns a `Flow` that is due.
    pub(crate) fn rewind(&mut self) -> Option<u32> {
        let cleared = u32::try_from(self.queue.len()).unwrap_or(u32::MAX);
        self.clear();
        self.give_back(cleared)
    }

    /// A new connection: the queue is dropped and the next subscribe
    /// grants the whole queue afresh.
    pub(crate) fn reset(&mut self) {
        self.clear();
        self.requested = 0;
        self.subscribed = false;
    }

    fn clear(&mut self) {
        self.queue.clear();
        self.ids.clear();
        self.bytes = 0;
        self.chunked = 0;
    }

    /// The oldest queued message.
    pub(crate) fn front(&self) -> Option<&Incoming<M>> {
        self.queue.front()
    }

    /// The earliest id among the queued messages (a chunked message's is
    /// its first chunk, which may come before messages queued ahead of it).
    pub(crate) fn earliest_id(&self) -> Option<MessageId> {
        self.queue.iter().map(|m| m.id).min()
    }

    /// The first chunk of the earliest chunked message queued.
    pub(crate) fn earliest_chunked(&self) -> Option<MessageId> {
        if self.chunked == 0 {
            return None;
        }
        self.chunked_firsts().min()
    }

    /// The first chunks of the chunked messages queued.
    pub(crate) fn chunked_firsts(&self) -> impl Iterator<Item = MessageId> + '_ {
        self.queue
            .iter()
            .filter(|m| m.position != m.id)
            .map(|m| m.id)
    }

    /// The bytes the oldest queued message holds.
    pub(crate) fn front_bytes(&self) -> Option<usize> {
        self.queue.front().map(|m| m.message.queued_bytes())
    }

    /// The bytes every queued message holds.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// How many messages are queued.
    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }

    /// Permits given back but not sent yet.
    #[cfg(test)]
    pub(crate) fn returned(&self) -> u32 {
        self.permits.returned
    }

    /// Permits go out only on a subscribed connection; a new subscribe
    /// grants the whole queue anyway.
    fn give_back(&mut self, n: u32) -> Option<u32> {
        self.permits.give_back(n).filter(|_| self.subscribed)
    }
}

/// Permits given back to the broker, one `Flow` at a time.
#[derive(Debug, Clone)]
struct Permits {
    queue_size: u32,
    refill_at: u32,
    returned: u32,
}

impl Permits {
    /// Accounting for a receiver queue of `queue_size` messages (0: none
    /// ahead, nothing given back).
    fn new(queue_size: u32) -> Self {
        Self {
            queue_size,
            refill_at: (queue_size / 2).max(1),
            returned: 0,
        }
    }

    /// Whether the queue holds nothing ahead (permits go by request only).
    fn is_zero(&self) -> bool {
        self.queue_size == 0
    }

    /// The permits of the first `Flow` after a subscribe: the whole queue.
    /// Anything given back before is forgotten (it belonged to an older
    /// subscription).
    fn initial(&mut self) -> u32 {
        self.returned = 0;
        self.queue_size
    }

    /// Gives back `n` permits (messages that left the queue or never entered
    /// it); returns the permits of a `Flow` to send once half the queue has
    /// been given back.
    fn give_back(&mut self, n: u32) -> Option<u32> {
        if self.is_zero() {
            return None;
        }
        self.returned = self.returned.saturating_add(n);
        (self.returned >= self.refill_at).then(|| std::mem::take(&mut self.returned))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_the_whole_queue_then_refills_at_half() {
        let mut permits = Permits::new(1000);
        assert_eq!(permits.initial(), 1000);
        for _ in 0..499 {
            assert_eq!(permits.give_back(1), None);
        }
        assert_eq!(permits.give_back(1), Some(500));
        assert_eq!(permits.returned, 0);
    }

    #[test]
    fn a_rewind_gives_back_the_cleared_queue_at_once() {
        let mut permits = Permits::new(10);
        permits.initial();
        assert_eq!(permits.give_back(2), None);
        assert_eq!(permits.give_back(7), Some(9), "all given back so far");
    }

    #[test]
    fn a_new_subscription_forgets_what_the_old_one_gave_back() {
        let mut permits = Permits::new(10);
        permits.initial();
        permits.give_back(3);
        assert_eq!(permits.initial(), 10);
        assert_eq!(permits.returned, 0);
    }

    #[test]
    fn tiny_queues_refill_after_every_message() {
        let mut permits = Permits::new(1);
        assert_eq!(permits.initial(), 1);
        assert_eq!(permits.give_back(1), Some(1));
        let mut zero = Permits::new(0);
        assert_eq!(zero.initial(), 0, "a zero queue grants nothing ahead");
        assert_eq!(zero.give_back(5), None, "nor gives back what is taken");
    }

    /// A test message: its payload size.
    #[derive(Debug, Clone, PartialEq)]
    struct Payload(usize);

    impl QueuedBytes for Payload {
        fn queued_bytes(&self) -> usize {
            self.0
        }
    }

    fn incoming(entry: u64) -> Incoming<Payload> {
        sized(entry, 0)
    }

    fn sized(entry: u64, bytes: usize) -> Incoming<Payload> {
        Incoming {
            id: MessageId::new(1, entry),
            position: MessageId::new(1, entry),
            redelivery_count: 0,
            consumer_epoch: None,
            batch_size: None,
            message: Payload(bytes),
        }
    }

    #[test]
    fn the_queue_counts_the_bytes_it_holds() {
        let mut queue = ReceiverQueue::new(10);
        queue.subscribe();
        queue.push(sized(1, 100));
        queue.push(sized(2, 50));
        assert_eq!((queue.bytes(), queue.front_bytes()), (150, Some(100)));
        queue.pop();
        assert_eq!((queue.bytes(), queue.front_bytes()), (50, Some(50)));
        queue.push(sized(3, 7));
        queue.rewind();
        assert_eq!((queue.bytes(), queue.front_bytes()), (0, None));
        queue.push(sized(4, 9));
        queue.reset();
        assert_eq!(queue.bytes(), 0);
    }

    #[test]
    fn a_zero_queue_grants_one_permit_per_uncovered_receiver() {
        let mut queue = ReceiverQueue::new(0);
        assert_eq!(queue.request(1), None, "not subscribed yet");
        assert_eq!(queue.subscribe(), None, "nothing ahead");
        assert_eq!(queue.request(0), None);
        assert_eq!(queue.request(1), Some(1));
        assert_eq!(queue.request(1), None, "already asked for");
        assert_eq!(queue.request(3), Some(2), "two more receivers");
        queue.push(incoming(1));
        assert_eq!(queue.request(3), None, "one queued, two on the way");
        assert_eq!(
            queue.pop().map(|(m, flow)| (m.id.entry_id, flow)),
            Some((1, None))
        );
        assert_eq!(queue.skip(), None, "a dropped arrival gives nothing back");
        assert_eq!(queue.request(2), Some(1), "one permit left out there");
        queue.reset();
        assert_eq!(queue.subscribe(), None);
        assert_eq!(queue.request(1), Some(1), "a new connection starts over");
    }

    #[test]
    fn the_queue_grants_once_per_connection_and_only_while_subscribed() {
        let mut queue = ReceiverQueue::new(2);
        assert_eq!(queue.skip(), None, "not subscribed: nothing to refill");
        assert_eq!(queue.subscribe(), Some(2));
        assert_eq!(queue.subscribe(), None);
        queue.push(incoming(1));
        queue.push(incoming(2));
        assert!(queue.contains(MessageId::new(1, 1)));
        assert_eq!(
            queue.pop().map(|(m, flow)| (m.id.entry_id, flow)),
            Some((1, Some(1)))
        );
        assert!(!queue.contains(MessageId::new(1, 1)));
        assert_eq!(queue.rewind(), Some(1), "the cleared message's permit");
        assert_eq!(queue.len(), 0);
        queue.push(incoming(3));
        queue.reset();
        assert_eq!((queue.len(), queue.skip()), (0, None));
        assert_eq!(queue.subscribe(), Some(2));
    }

    #[test]
    fn conservation_holds_over_a_long_run() {
        // B + Q + R == size, with a broker that may overshoot by a batch.
        let size = 100_i64;
        let mut permits = Permits::new(100);
        let mut broker = i64::from(permits.initial());
        let mut queued = 0_i64;
        for step in 0..10_000_u32 {
            if broker > 0 {
                let batch = i64::from(step % 7 + 1);
                broker -= batch;
                queued += batch;
            }
            if queued > 0 {
                queued -= 1;
                if let Some(flow) = permits.give_back(1) {
                    broker += i64::from(flow);
                }
            }
            assert_eq!(broker + queued + i64::from(permits.returned), size);
            assert!(queued <= size + 7);
        }
    }
}
