//! What goes into and out of the consumer core: the [`Incoming`] message,
//! the [`Action`]s for the driver, and the queue that merges them (pure).
//!
//! Merging happens only at the queue's tail, so order is kept: a `Flow`
//! adds to a `Flow` just queued, an individual ack joins the ids of an
//! individual ack just queued, a redelivery joins a redelivery, a rewind
//! replaces a rewind, and a cumulative ack replaces an earlier one it
//! covers. A driver that polls after every input sees the same commands
//! as one that polls once in a while, only fewer of them.

use std::collections::VecDeque;

use crate::message_id::MessageId;

use super::batch_acks::AckSet;

/// A message from the broker, as the driver hands it to the core (one per
/// batch member), and as the core hands it to the application.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Incoming<M> {
    /// Its id; a batch member's id carries its `batch_index`.
    pub id: MessageId,
    /// Where it ends in the topic: its id, or a chunked message's last
    /// chunk. It is delivered there, so a cumulative ack covers it only
    /// from there on (as in the Java client).
    pub position: MessageId,
    /// How often the broker delivered it before (Shared and Key_Shared
    /// only; 0 on Exclusive and Failover).
    pub redelivery_count: u32,
    /// The consumer epoch the broker tagged it with, if any. On Exclusive
    /// and Failover, a message of an epoch older than the core's is from
    /// before a rewind and is dropped.
    pub consumer_epoch: Option<u64>,
    /// For a batch member, the number of messages in its batch
    /// (`id.batch_index < batch_size`); `None` for an unbatched message.
    pub batch_size: Option<u32>,
    /// The driver's message.
    pub message: M,
}

/// What the driver must do, in order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Action<M> {
    /// Send `CommandFlow` granting this many permits.
    Flow(u32),
    /// Send `CommandAck`. The ids carry no batch index: a batch is acked
    /// through its entry's id, once all its members are acked, or with an
    /// `ack_set` (batch index ack: bit `i` set = member `i` still unacked),
    /// which then belongs to the single id in `ids`.
    Ack {
        /// The ids to ack.
        ids: Vec<MessageId>,
        /// Cumulative (everything up to the single id in `ids`) or individual.
        cumulative: bool,
        /// The entry's member set, for batch index ack.
        ack_set: Option<AckSet>,
    },
    /// Send `CommandRedeliverUnacknowledgedMessages` naming these entries
    /// (Shared and Key_Shared, where the broker honours ids).
    Redeliver(Vec<MessageId>),
    /// Send `CommandRedeliverUnacknowledgedMessages` without ids and with
    /// this consumer epoch (Exclusive and Failover: the broker rewinds to the
    /// first unacked message). The core already cleared its queue.
    RedeliverAll {
        /// The new epoch; messages tagged with an older one are dropped.
        consumer_epoch: u64,
    },
    /// Publish a copy of `message` to the dead-letter topic without
    /// stalling the consumer, then report the result with
    /// [`ConsumerCore::on_dead_letter_result`](super::ConsumerCore::on_dead_letter_result).
    ForwardToDeadLetter {
        /// The original id (for `ORIGIN_MESSAGE_ID` and the result).
        origin: MessageId,
        /// Its redelivery count.
        redelivery_count: u32,
        /// The message to copy.
        message: M,
    },
}

/// The core's outgoing actions, merged at the tail.
#[derive(Debug)]
pub(crate) struct Actions<M> {
    queue: VecDeque<Action<M>>,
}

impl<M> Default for Actions<M> {
    fn default() -> Self {
        Self {
            queue: VecDeque::new(),
        }
    }
}

impl<M> Actions<M> {
    /// The oldest action.
    pub(crate) fn pop(&mut self) -> Option<Action<M>> {
        self.queue.pop_front()
    }

    /// Whether nothing is queued.
    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Whether an ack is queued.
    pub(crate) fn has_acks(&self) -> bool {
        self.queue.iter().any(|a| matches!(a, Action::Ack { .. }))
    }

    /// Grant `permits` more.
    pub(crate) fn flow(&mut self, permits: u32) {
        match self.queue.back_mut() {
            Some(Action::Flow(pending)) => *pending = pending.saturating_add(permits),
            _ => self.queue.push_back(Action::Flow(permits)),
        }
    }

    /// Ack `id` individually (replacing an ack of some of its members
    /// just queued).
    pub(crate) fn ack(&mut self, id: MessageId) {
        if let Some(Action::Ack {
            ids,
            cumulative: false,
            ack_set,
        }) = self.queue.back_mut()
        {
            if ack_set.is_some() && ids[..] == [id] {
                *ack_set = None;
                return;
            }
        }
        match self.queue.back_mut() {
            Some(Action::Ack {
                ids,
                cumulative: false,
                ack_set: None,
            }) => ids.push(id),
            _ => self.queue.push_back(Action::Ack {
                ids: vec![id],
                cumulative: false,
                ack_set: None,
            }),
        }
    }

    /// Ack the members of `entry` that `ack_set` leaves clear. It replaces
    /// an ack of fewer members of the same entry just queued (members only
    /// become acked, so the newer set covers the older).
    pub(crate) fn ack_members(&mut self, entry: MessageId, ack_set: AckSet) {
        if let Some(Action::Ack {
            ids,
            cumulative: false,
            ack_set: pending,
        }) = self.queue.back_mut()
        {
            let same = ids[..] == [entry];
            if let Some(set) = pending
                .as_mut()
                .filter(|set| same && set.size == ack_set.size)
            {
                // Both acks in one: a member is unacked if unacked in both.
                for (word, other) in set.words.iter_mut().zip(&ack_set.words) {
                    *word &= other;
                }
                if set.words.iter().all(|word| *word == 0) {
                    // Every member acked by the acks of this one pass.
                    *pending = None;
                }
                return;
            }
        }
        self.queue.push_back(Action::Ack {
            ids: vec![entry],
            cumulative: false,
            ack_set: Some(ack_set),
        });
    }

    /// Ack everything up to `id` (and, with `ack_set`, those members of it).
    pub(crate) fn ack_cumulative(&mut self, id: MessageId, ack_set: Option<AckSet>) {
        if let Some(Action::Ack {
            ids,
            cumulative: true,
            ack_set: None,
        }) = self.queue.back()
        {
            if ids.iter().all(|pending| *pending <= id) {
                self.queue.pop_back();
            }
        }
        self.queue.push_back(Action::Ack {
            ids: vec![id],
            cumulative: true,
            ack_set,
        });
    }

    /// Redeliver `entries` (sorted and deduplicated with a pending request).
    pub(crate) fn redeliver(&mut self, mut entries: Vec<MessageId>) {
        if let Some(Action::Redeliver(pending)) = self.queue.back_mut() {
            entries.append(pending);
            self.queue.pop_back();
        }
        entries.sort_unstable();
        entries.dedup();
        self.queue.push_back(Action::Redeliver(entries));
    }

    /// Rewind with `consumer_epoch`.
    pub(crate) fn rewind(&mut self, consumer_epoch: u64) {
        match self.queue.back_mut() {
            Some(Action::RedeliverAll {
                consumer_epoch: pending,
            }) => *pending = consumer_epoch,
            _ => self
                .queue
                .push_back(Action::RedeliverAll { consumer_epoch }),
        }
    }

    /// Forward `message` to the dead-letter topic.
    pub(crate) fn forward(&mut self, origin: MessageId, redelivery_count: u32, message: M) {
        self.queue.push_back(Action::ForwardToDeadLetter {
            origin,
            redelivery_count,
            message,
        });
    }

    /// Drops what was meant for a connection that is gone (flow,
    /// redelivery); acks and forwards stay.
    pub(crate) fn keep_across_reconnect(&mut self) {
        self.queue
            .retain(|a| matches!(a, Action::Ack { .. } | Action::ForwardToDeadLetter { .. }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(entry: u64) -> MessageId {
        MessageId::new(1, entry)
    }

    fn drain(actions: &mut Actions<()>) -> Vec<Action<()>> {
        std::iter::from_fn(|| actions.pop()).collect()
    }

    #[test]
    fn like_actions_merge_at_the_tail_only() {
        let mut actions = Actions::default();
        actions.flow(2);
        actions.flow(3);
        actions.ack(id(1));
        actions.ack(id(2));
        actions.redeliver(vec![id(4), id(3)]);
        actions.redeliver(vec![id(3)]);
        actions.flow(1);
        let ack = Action::Ack {
            ids: vec![id(1), id(2)],
            cumulative: false,
            ack_set: None,
        };
        let expected = [
            Action::Flow(5),
            ack,
            Action::Redeliver(vec![id(3), id(4)]),
            Action::Flow(1),
        ];
        assert_eq!(drain(&mut actions), expected);
    }

    #[test]
    fn member_acks_of_one_entry_merge_into_the_latest_set() {
        let mut actions = Actions::default();
        let set = |words| AckSet::new(vec![words], 3);
        actions.ack_members(id(1), set(0b110));
        actions.ack_members(id(1), set(0b100));
        actions.ack_members(id(2), set(0b10));
        actions.ack(id(2));
        actions.ack_members(id(3), set(0b1));
        actions.ack(id(4));
        let ack = |entry, ack_set| Action::Ack {
            ids: vec![id(entry)],
            cumulative: false,
            ack_set,
        };
        let expected = [
            ack(1, Some(set(0b100))),
            ack(2, None),
            ack(3, Some(set(0b1))),
            ack(4, None),
        ];
        assert_eq!(drain(&mut actions), expected);
    }

    #[test]
    fn a_later_cumulative_ack_or_rewind_replaces_the_pending_one() {
        let mut actions = Actions::default();
        actions.ack_cumulative(id(1), None);
        actions.ack_cumulative(id(4), None);
        actions.rewind(1);
        actions.rewind(2);
        let cumulative = Action::Ack {
            ids: vec![id(4)],
            cumulative: true,
            ack_set: None,
        };
        assert_eq!(
            drain(&mut actions),
            [cumulative, Action::RedeliverAll { consumer_epoch: 2 }]
        );
    }

    #[test]
    fn a_member_ack_is_never_merged() {
        let mut actions = Actions::default();
        actions.ack(id(1));
        actions.ack_members(id(2), AckSet::new(vec![0b10], 2));
        actions.ack(id(3));
        assert_eq!(drain(&mut actions).len(), 3);
    }

    #[test]
    fn a_reconnect_keeps_acks_and_forwards_only() {
        let mut actions = Actions::default();
        actions.flow(1);
        actions.ack(id(1));
        actions.redeliver(vec![id(2)]);
        actions.forward(id(3), 5, ());
        actions.rewind(1);
        actions.keep_across_reconnect();
        let kept = drain(&mut actions);
        assert!(matches!(
            kept[..],
            [Action::Ack { .. }, Action::ForwardToDeadLetter { .. }]
        ));
    }
}
