//! Acks of batch members: which members of each batched entry are acked,
//! and when the entry itself may be acked (pure).
//!
//! An individual ack of a member id acks the whole entry on the broker
//! (unless it carries an `ack_set`), so a member ack must not go out as is.
//! The entry ack is sent when every member is acked; with batch index ack,
//! each member ack sends the entry with an `ack_set` instead. The acked bits
//! also filter a redelivered entry: members already acked never reach the
//! application again.
//!
//! State exists only for entries with a member in the consumer (queued,
//! held by the application, or being forwarded to the dead-letter topic) or
//! with an acked member; it is dropped when the entry is fully acked, or
//! when no member is left and none was acked.

use std::collections::HashMap;

use crate::MessageId;

#[derive(Debug)]
struct Entry {
    size: u32,
    acked_count: u32,
    /// Members queued or held by the application.
    live: u32,
    /// Members being forwarded to the dead-letter topic.
    forwarding: u32,
    acked: Box<[u64]>,
}

impl Entry {
    fn is_acked(&self, index: u32) -> bool {
        self.acked
            .get((index / 64) as usize)
            .is_some_and(|word| word & (1 << (index % 64)) != 0)
    }

    /// Marks member `index` acked (an index past the batch is ignored).
    fn set_acked(&mut self, index: u32) {
        if index < self.size && !self.is_acked(index) {
            self.acked[(index / 64) as usize] |= 1 << (index % 64);
            self.acked_count += 1;
        }
    }

    fn is_complete(&self) -> bool {
        self.acked_count >= self.size
    }

    fn is_idle(&self) -> bool {
        self.live == 0 && self.forwarding == 0 && self.acked_count == 0
    }

    /// The protocol's `ack_set`: bit `i` set while member `i` is unacked.
    fn ack_set(&self) -> Vec<i64> {
        let mut words: Vec<i64> = self.acked.iter().map(|w| !w as i64).collect();
        if let (Some(last), tail @ 1..) = (words.last_mut(), self.size % 64) {
            // In u64: for a tail of 63, `1_i64 << 63` is i64::MIN and
            // subtracting 1 would overflow.
            *last &= ((1_u64 << tail) - 1) as i64;
        }
        words
    }
}

/// What acking a member leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MemberAck {
    /// Every member is acked: ack the entry (its state is gone).
    Entry(MessageId),
    /// Members remain: with batch index ack, ack the entry with this set.
    Partial(MessageId, Vec<i64>),
    /// No state for this entry (a cumulative ack covered it already).
    Untracked,
}

/// Per-entry member bookkeeping, keyed by the entry's id.
#[derive(Debug, Default)]
pub(crate) struct BatchAcks {
    entries: HashMap<MessageId, Entry>,
}

impl BatchAcks {
    /// Whether `id` is a batch member already acked.
    pub(crate) fn is_acked(&self, id: MessageId) -> bool {
        id.is_batch_member()
            && self
                .entries
                .get(&id.entry())
                .is_some_and(|e| e.is_acked(id.batch_index as u32))
    }

    /// Member `id` of a batch of `size` arrived and is queued
    /// (`forwarding == false`) or being forwarded.
    pub(crate) fn arrive(&mut self, id: MessageId, size: u32, forwarding: bool) {
        let entry = self.entries.entry(id.entry()).or_insert_with(|| Entry {
            size,
            acked_count: 0,
            live: 0,
            forwarding: 0,
            acked: vec![0; size.div_ceil(64) as usize].into_boxed_slice(),
        });
        if forwarding {
            entry.forwarding += 1;
        } else {
            entry.live += 1;
        }
    }

    /// A queued or held member left without an ack (dropped, nacked,
    /// timed out, or cleared by a rewind).
    pub(crate) fn leave(&mut self, id: MessageId) {
        self.update(id, |e| e.live = e.live.saturating_sub(1));
    }

    /// A held member is being forwarded to the dead-letter topic.
    pub(crate) fn start_forward(&mut self, id: MessageId) {
        self.update(id, |e| {
            e.live = e.live.saturating_sub(1);
            e.forwarding += 1;
        });
    }

    /// A forward to the dead-letter topic failed: the member will come back.
    pub(crate) fn forward_failed(&mut self, id: MessageId) {
        self.update(id, |e| e.forwarding = e.forwarding.saturating_sub(1));
    }

    /// Member `id` is acked: by the application (`forwarded == false`) or by
    /// a confirmed dead-letter forward.
    pub(crate) fn ack(&mut self, id: MessageId, forwarded: bool) -> MemberAck {
        let key = id.entry();
        let Some(entry) = self.entries.get_mut(&key) else {
            return MemberAck::Untracked;
        };
        if forwarded {
            entry.forwarding = entry.forwarding.saturating_sub(1);
        } else {
            entry.live = entry.live.saturating_sub(1);
        }
        entry.set_acked(id.batch_index as u32);
        Self::outcome(&mut self.entries, key)
    }

    /// A cumulative ack of `upto`: entries before it are done, and so are
    /// the members of its own entry up to it (take its held members out
    /// with [`leave`](Self::leave) afterwards). Returns the cumulative ack
    /// to send: `upto` itself for a plain message; for a member, its entry
    /// once complete, or with its `ack_set` under batch index ack, or else
    /// the entry before (none before entry 0).
    pub(crate) fn ack_cumulative(
        &mut self,
        upto: MessageId,
        batch_index_ack: bool,
    ) -> Option<(MessageId, Option<Vec<i64>>)> {
        let key = upto.entry();
        self.entries.retain(|entry, _| *entry >= key);
        if !upto.is_batch_member() {
            return Some((upto, None));
        }
        if let Some(entry) = self.entries.get_mut(&key) {
            for index in 0..=(upto.batch_index as u32).min(entry.size.saturating_sub(1)) {
                entry.set_acked(index);
            }
        }
        match Self::outcome(&mut self.entries, key) {
            MemberAck::Entry(entry) => Some((entry, None)),
            MemberAck::Partial(entry, set) if batch_index_ack => Some((entry, Some(set))),
            MemberAck::Partial(..) | MemberAck::Untracked => {
                let entry_id = upto.entry_id.checked_sub(1)?;
                Some((MessageId { entry_id, ..key }, None))
            }
        }
    }

    /// Every queued and held member is gone (a rewind or reconnect); keeps
    /// the acked bits of partly acked entries and the forwards in flight.
    pub(crate) fn clear_live(&mut self) {
        self.entries.retain(|_, e| {
            e.live = 0;
            !e.is_idle()
        });
    }

    /// How many entries have state.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    fn update(&mut self, id: MessageId, change: impl FnOnce(&mut Entry)) {
        let key = id.entry();
        if let Some(entry) = self.entries.get_mut(&key) {
            change(entry);
            if entry.is_idle() {
                self.entries.remove(&key);
            }
        }
    }

    fn outcome(entries: &mut HashMap<MessageId, Entry>, key: MessageId) -> MemberAck {
        match entries.get(&key) {
            Some(entry) if entry.is_complete() => {
                entries.remove(&key);
                MemberAck::Entry(key)
            }
            Some(entry) => MemberAck::Partial(key, entry.ack_set()),
            None => MemberAck::Untracked,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(entry: u64, index: i32) -> MessageId {
        MessageId::new(2, entry).with_batch_index(index)
    }

    #[test]
    fn the_entry_is_acked_when_the_last_member_is() {
        let mut acks = BatchAcks::default();
        for i in 0..3 {
            acks.arrive(member(1, i), 3, false);
        }
        assert_eq!(
            acks.ack(member(1, 1), false),
            MemberAck::Partial(MessageId::new(2, 1), vec![0b101])
        );
        assert!(acks.is_acked(member(1, 1)) && !acks.is_acked(member(1, 0)));
        assert_eq!(
            acks.ack(member(1, 0), false),
            MemberAck::Partial(MessageId::new(2, 1), vec![0b100])
        );
        assert_eq!(
            acks.ack(member(1, 2), false),
            MemberAck::Entry(MessageId::new(2, 1))
        );
        assert_eq!(acks.len(), 0, "state dropped once fully acked");
    }

    #[test]
    fn ack_set_spans_words_and_masks_the_tail() {
        let mut acks = BatchAcks::default();
        for i in 0..70 {
            acks.arrive(member(1, i), 70, false);
        }
        let MemberAck::Partial(_, set) = acks.ack(member(1, 65), false) else {
            panic!("partial")
        };
        assert_eq!(set, vec![-1, 0b11_1101]);
    }

    #[test]
    fn a_batch_of_63_masks_its_tail_without_overflow() {
        let mut acks = BatchAcks::default();
        for i in 0..63 {
            acks.arrive(member(1, i), 63, false);
        }
        let MemberAck::Partial(_, set) = acks.ack(member(1, 0), false) else {
            panic!("partial")
        };
        assert_eq!(set, vec![i64::MAX - 1]);
    }

    #[test]
    fn an_index_past_the_known_batch_size_is_not_acked_and_does_not_panic() {
        let mut acks = BatchAcks::default();
        acks.arrive(member(1, 0), 2, false);
        acks.arrive(member(1, 1), 2, false);
        assert!(!acks.is_acked(member(1, 500)));
        assert!(matches!(
            acks.ack(member(1, 500), false),
            MemberAck::Partial(..)
        ));
        assert_eq!(
            acks.ack(member(1, 0), false),
            MemberAck::Partial(MessageId::new(2, 1), vec![0b10])
        );
    }

    #[test]
    fn a_batch_that_leaves_unacked_leaves_no_state() {
        let mut acks = BatchAcks::default();
        acks.arrive(member(1, 0), 2, false);
        acks.arrive(member(1, 1), 2, false);
        acks.leave(member(1, 0));
        acks.leave(member(1, 1));
        assert_eq!(acks.len(), 0);
    }

    #[test]
    fn acked_bits_outlive_a_rewind_until_the_entry_is_done() {
        let mut acks = BatchAcks::default();
        acks.arrive(member(1, 0), 2, false);
        acks.arrive(member(1, 1), 2, false);
        acks.ack(member(1, 0), false);
        acks.clear_live();
        assert!(
            acks.is_acked(member(1, 0)),
            "filters the redelivered member"
        );
        acks.arrive(member(1, 1), 2, false);
        assert_eq!(
            acks.ack(member(1, 1), false),
            MemberAck::Entry(MessageId::new(2, 1))
        );
    }

    #[test]
    fn forwards_hold_state_until_their_result() {
        let mut acks = BatchAcks::default();
        acks.arrive(member(1, 0), 1, true);
        acks.clear_live();
        assert_eq!(acks.len(), 1);
        acks.forward_failed(member(1, 0));
        assert_eq!(acks.len(), 0);
        acks.arrive(member(1, 0), 1, true);
        assert_eq!(
            acks.ack(member(1, 0), true),
            MemberAck::Entry(MessageId::new(2, 1))
        );
    }

    #[test]
    fn cumulative_acks_earlier_entries_and_members_up_to_the_id() {
        let mut acks = BatchAcks::default();
        for i in 0..3 {
            acks.arrive(member(1, i), 3, false);
            acks.arrive(member(2, i), 3, false);
        }
        let before = MessageId::new(2, 1);
        assert_eq!(
            acks.ack_cumulative(member(2, 1), false),
            Some((before, None))
        );
        assert_eq!(acks.len(), 1, "entry 1 is covered");
        let partial = Some((MessageId::new(2, 2), Some(vec![0b100])));
        assert_eq!(acks.ack_cumulative(member(2, 1), true), partial);
        acks.leave(member(2, 0));
        acks.leave(member(2, 1));
        let whole = Some((MessageId::new(2, 2), None));
        assert_eq!(acks.ack_cumulative(member(2, 2), false), whole);
        assert_eq!(
            (acks.len(), acks.ack(member(2, 2), false)),
            (0, MemberAck::Untracked)
        );
        let plain = MessageId::new(2, 9);
        assert_eq!(acks.ack_cumulative(plain, false), Some((plain, None)));
        let first = MessageId::new(2, 0).with_batch_index(0);
        acks.arrive(first, 2, false);
        assert_eq!(acks.ack_cumulative(first, false), None, "no entry before 0");
    }
}
