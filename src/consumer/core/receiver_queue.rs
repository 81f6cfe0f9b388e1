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
//! So, with `B` = permits the broker holds (negative after it sent a whole
//! batch on too few permits), `Q` = messages queued and `R` = permits given
//! back but not yet sent, `B + Q + R == receiver_queue_size` between a
//! subscribe and the next reconnect, and the queue never holds more than the
//! queue size plus one batch.

use std::collections::{HashSet, VecDeque};

use crate::message_id::MessageId;

use super::actions::Incoming;
use super::unacked::id_hash::IdBuildHasher;

/// Messages received and not yet taken by the application, each id once,
/// with the permits they give back.
#[derive(Debug)]
pub(crate) struct ReceiverQueue<M> {
    queue: VecDeque<Incoming<M>>,
    ids: HashSet<MessageId, IdBuildHasher>,
    permits: Permits,
    subscribed: bool,
}

impl<M> ReceiverQueue<M> {
    /// An empty queue of `size` messages (at least 1), not yet subscribed.
    pub(crate) fn new(size: u32) -> Self {
        Self {
            queue: VecDeque::new(),
            ids: HashSet::default(),
            permits: Permits::new(size),
            subscribed: false,
        }
    }

    /// The subscribe succeeded: the first `Flow`, for the whole queue, once
    /// per connection.
    pub(crate) fn subscribe(&mut self) -> Option<u32> {
        (!std::mem::replace(&mut self.subscribed, true)).then(|| self.permits.initial())
    }

    /// Whether a message with this id is queued.
    pub(crate) fn contains(&self, id: MessageId) -> bool {
        self.ids.contains(&id)
    }

    /// Queues a message (whose id is not queued yet).
    pub(crate) fn push(&mut self, incoming: Incoming<M>) {
        self.ids.insert(incoming.id);
        self.queue.push_back(incoming);
    }

    /// A message that arrived and is not queued gives its permit back;
    /// returns a `Flow` that is due.
    pub(crate) fn skip(&mut self) -> Option<u32> {
        self.give_back(1)
    }

    /// Takes the oldest message, with a `Flow` that is due.
    pub(crate) fn pop(&mut self) -> Option<(Incoming<M>, Option<u32>)> {
        let incoming = self.queue.pop_front()?;
        self.ids.remove(&incoming.id);
        Some((incoming, self.give_back(1)))
    }

    /// A rewind: the broker sends everything again, so the queue is dropped
    /// and its permits given back; returns a `Flow` that is due.
    pub(crate) fn rewind(&mut self) -> Option<u32> {
        let cleared = u32::try_from(self.queue.len()).unwrap_or(u32::MAX);
        self.queue.clear();
        self.ids.clear();
        self.give_back(cleared)
    }

    /// A new connection: the queue is dropped and the next subscribe
    /// grants the whole queue afresh.
    pub(crate) fn reset(&mut self) {
        self.queue.clear();
        self.ids.clear();
        self.subscribed = false;
    }

    /// The id of the oldest queued message.
    pub(crate) fn front_id(&self) -> Option<MessageId> {
        self.queue.front().map(|m| m.id)
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
    /// Accounting for a receiver queue of `queue_size` messages (at least 1).
    fn new(queue_size: u32) -> Self {
        let queue_size = queue_size.max(1);
        Self {
            queue_size,
            refill_at: (queue_size / 2).max(1),
            returned: 0,
        }
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
        assert_eq!(zero.initial(), 1, "a zero queue is treated as one");
    }

    fn incoming(entry: u64) -> Incoming<()> {
        Incoming {
            id: MessageId::new(1, entry),
            redelivery_count: 0,
            consumer_epoch: None,
            batch_size: None,
            message: (),
        }
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
