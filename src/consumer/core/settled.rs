//! Acks of messages the consumer no longer tracks (pure).
//!
//! A message id is a position in the topic, valid on every connection: the
//! application may ack a message after a reconnect, a rewind, an ack-timeout
//! expiry or a nack, when the consumer has already forgotten it. Such an ack
//! is sent all the same, and remembered here so that a copy the broker
//! dispatched before it saw the ack (a redelivery after the reconnect, say)
//! is dropped instead of handed out again:
//! - the highest cumulative ack, below which everything is settled;
//! - the last individually acked ids that were not held (a bounded FIFO:
//!   forgetting the oldest only risks a duplicate, never a loss), and, from
//!   a reconnect or rewind on, the last ones acked while held: the broker
//!   applies acks asynchronously, so it may dispatch a copy of a message
//!   acked just before it closed the consumer. A batch acked whole is one
//!   id there, its entry's, which covers every member: one lost ACK of a
//!   batch brings back all its members.

use std::collections::{HashSet, VecDeque};

use crate::message_id::MessageId;

use super::unacked::id_hash::IdBuildHasher;

/// The last ids acked while held, without hashing them (a ring): at a
/// reconnect or rewind they join [`Settled`], since the broker may dispatch
/// a copy before it applied the ack (it applies acks asynchronously).
#[derive(Debug)]
pub(crate) struct RecentAcks {
    ids: VecDeque<MessageId>,
    capacity: usize,
}

impl RecentAcks {
    /// Keeps the last `capacity` ids (at least 1).
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            ids: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    /// `id` was acked.
    pub(crate) fn push(&mut self, id: MessageId) {
        if self.ids.len() == self.capacity {
            self.ids.pop_front();
        }
        self.ids.push_back(id);
    }

    /// Moves every id into `settled`.
    pub(crate) fn settle_into(&mut self, settled: &mut Settled) {
        for id in self.ids.drain(..) {
            settled.insert(id);
        }
    }
}

/// Ids the application settled outside the held set.
#[derive(Debug)]
pub(crate) struct Settled {
    /// Everything at or before it is acked (the highest cumulative ack).
    floor: Option<MessageId>,
    order: VecDeque<MessageId>,
    ids: HashSet<MessageId, IdBuildHasher>,
    capacity: usize,
}

impl Settled {
    /// Remembers at most `capacity` individually acked ids (at least 1).
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            floor: None,
            order: VecDeque::new(),
            ids: HashSet::default(),
            capacity: capacity.max(1),
        }
    }

    /// `id` was acked while not held; forgets the oldest such id past the
    /// capacity.
    pub(crate) fn insert(&mut self, id: MessageId) {
        if !self.ids.insert(id) {
            return;
        }
        self.order.push_back(id);
        if self.order.len() > self.capacity {
            if let Some(oldest) = self.order.pop_front() {
                self.ids.remove(&oldest);
            }
        }
    }

    /// Everything up to and including `upto` is acked (for a chunked
    /// message, `upto` is its last chunk).
    pub(crate) fn cumulative(&mut self, upto: MessageId) {
        if self.floor.is_none_or(|floor| floor < upto) {
            self.floor = Some(upto);
        }
    }

    /// Whether the message `id`, which ends at `position` (its last chunk,
    /// if chunked), is known to be acked: the cumulative floor covers it
    /// only from its position on, since it is delivered there.
    pub(crate) fn covers(&self, id: MessageId, position: MessageId) -> bool {
        self.floor.is_some_and(|floor| position <= floor)
            || (!self.ids.is_empty()
                && (self.ids.contains(&id)
                    || (id.is_batch_member() && self.ids.contains(&id.entry()))))
    }

    /// Whether `id`, a message of one entry (or a member of one), is known
    /// to be acked.
    #[cfg(test)]
    pub(crate) fn contains(&self, id: MessageId) -> bool {
        self.covers(id, id)
    }

    /// How many individual ids are remembered.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.ids.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(entry: u64) -> MessageId {
        MessageId::new(1, entry)
    }

    #[test]
    fn remembers_a_bounded_number_of_ids_oldest_forgotten_first() {
        let mut settled = Settled::new(2);
        settled.insert(id(1));
        settled.insert(id(2));
        settled.insert(id(2));
        assert!(settled.contains(id(1)) && settled.contains(id(2)));
        settled.insert(id(3));
        assert!(!settled.contains(id(1)), "the oldest is forgotten");
        assert!(settled.contains(id(2)) && settled.contains(id(3)));
        assert_eq!(settled.len(), 2);
    }

    #[test]
    fn recent_acks_join_the_settled_ids_when_asked() {
        let mut recent = RecentAcks::new(2);
        let mut settled = Settled::new(4);
        for n in 1..=3 {
            recent.push(id(n));
        }
        recent.settle_into(&mut settled);
        assert!(!settled.contains(id(1)), "only the last two are kept");
        assert!(settled.contains(id(2)) && settled.contains(id(3)));
        recent.settle_into(&mut settled);
        assert_eq!(settled.len(), 2);
    }

    #[test]
    fn a_cumulative_ack_settles_everything_before_it_and_never_moves_back() {
        let mut settled = Settled::new(1);
        settled.cumulative(id(5).with_batch_index(1));
        assert!(settled.contains(id(4)));
        assert!(settled.contains(id(5).with_batch_index(0)));
        assert!(!settled.contains(id(5).with_batch_index(2)));
        settled.cumulative(id(2));
        assert!(
            settled.contains(id(4)),
            "an older cumulative ack changes nothing"
        );
        assert!(!settled.contains(id(6)));
    }
}
