//! Acks of batch members: which members of each batched entry are acked,
//! and when the entry itself may be acked (pure).
//!
//! An individual ack of a member id acks the whole entry on the broker
//! (unless it carries an `ack_set`), so a member ack must not go out as is.
//! The entry ack is sent when every member is acked; with batch index ack,
//! each member ack sends the entry with an `ack_set` instead. The acked bits
//! also filter a copy of the entry asked for on the same subscription (a
//! nack, an ack timeout, a rewind): members already acked do not reach the
//! application again. A reconnect forgets them.
//!
//! State exists only for entries with a member in the consumer (queued,
//! held by the application, or being forwarded to the dead-letter topic) or
//! with an acked member; it is dropped when the entry is fully acked, or
//! when no member is left and none was acked.

use std::collections::HashMap;

use super::unacked::id_hash::IdBuildHasher;

use crate::message_id::MessageId;

/// Batch index ack: the members of an entry of `size` that an ACK acks,
/// as the protocol's `ack_set` (bit `i` set while member `i` stays unacked;
/// the bits past the batch are clear and name no member). The ACK carries
/// the size beside it, as the Java client's transactional acks do, so the
/// members it acks are known exactly.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct AckSet {
    /// The protocol's words.
    pub(crate) words: Vec<i64>,
    /// The entry's batch size.
    pub(crate) size: u32,
}

impl AckSet {
    /// The set `words` of an entry of `size` members.
    pub(crate) fn new(words: Vec<i64>, size: u32) -> Self {
        Self { words, size }
    }
}

#[derive(Debug)]
struct Entry {
    size: u32,
    acked_count: u32,
    /// Members queued or held by the application.
    live: u32,
    /// Members being forwarded to the dead-letter topic.
    forwarding: u32,
    /// Copies of the entry may still come after it is acked: a member was
    /// asked for again (nack, ack timeout; the broker sends the whole
    /// entry once per ask), or acked from a copy the consumer no longer
    /// holds (the next copy may be queued already). Kept until the entry
    /// is acked or the live members are cleared (a reconnect or rewind
    /// makes those copies moot).
    asked_again: bool,
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
        self.live == 0 && self.forwarding == 0 && self.acked_count == 0 && !self.asked_again
    }

    /// The `ack_set` that acks member `index` alone: every bit set but its.
    /// The broker keeps the members still unacked by and-ing the sets it
    /// gets, so an ACK sent again after a rewind made elsewhere (an
    /// operator's reset, which forgets the members acked before it) acks
    /// that member and no other.
    fn ack_set_of(&self, index: u32) -> AckSet {
        let mut words = vec![0_u64; self.size.div_ceil(64) as usize];
        for (i, word) in words.iter_mut().enumerate() {
            let bits = self.size.saturating_sub(i as u32 * 64).min(64);
            *word = if bits == 64 {
                u64::MAX
            } else {
                (1_u64 << bits) - 1
            };
        }
        if let Some(word) = words.get_mut((index / 64) as usize) {
            *word &= !(1_u64 << (index % 64));
        }
        AckSet::new(words.into_iter().map(|w| w as i64).collect(), self.size)
    }

    /// The protocol's `ack_set`: bit `i` set while member `i` is unacked.
    fn ack_set(&self) -> AckSet {
        let mut words: Vec<i64> = self.acked.iter().map(|w| !w as i64).collect();
        if let (Some(last), tail @ 1..) = (words.last_mut(), self.size % 64) {
            // In u64: for a tail of 63, `1_i64 << 63` is i64::MIN and
            // subtracting 1 would overflow.
            *last &= ((1_u64 << tail) - 1) as i64;
        }
        AckSet::new(words, self.size)
    }
}

/// What acking a member leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MemberAck {
    /// Every member is acked: ack the entry (its state is gone). The flag
    /// says whether a member was asked for again: copies of the entry may
    /// still come, and must be dropped.
    Entry(MessageId, bool),
    /// A member's own ack completed the entry: as `Entry`, and the set
    /// names that member alone. With batch index ack the ACK carries it,
    /// as the other members' did: the broker acks the entry once each
    /// member is acked there, and an ACK sent again after a rewind made
    /// elsewhere acks that member and no other.
    Last(MessageId, bool, AckSet),
    /// Members remain: with batch index ack, ack the entry with this set.
    Partial(MessageId, AckSet),
    /// No state for this entry (a cumulative ack covered it already).
    Untracked,
}

/// Per-entry member bookkeeping, keyed by the entry's id.
#[derive(Debug, Default)]
pub(crate) struct BatchAcks {
    entries: HashMap<MessageId, Entry, IdBuildHasher>,
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
        let entry = self.track(id, size);
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

    /// A held member is asked for again: it leaves, and a copy of the
    /// whole entry will come.
    pub(crate) fn ask_again(&mut self, id: MessageId) {
        self.update(id, |e| {
            e.live = e.live.saturating_sub(1);
            e.asked_again = true;
        });
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
        Self::member_outcome(&mut self.entries, id)
    }

    /// The application acked member `id`, which the consumer no longer
    /// holds (it was acked after a reconnect, a rewind, an ack-timeout expiry
    /// or a nack). Its entry keeps the acked bit: a redelivered copy of the
    /// member is dropped, and the entry ack goes out once every member is
    /// acked. An entry without state gets some if `size` (its batch size) is
    /// known; otherwise the ack cannot be recorded ([`MemberAck::Untracked`]).
    pub(crate) fn ack_untracked(&mut self, id: MessageId, size: Option<u32>) -> MemberAck {
        let key = id.entry();
        let entry = match (self.entries.get_mut(&key), size) {
            (Some(entry), _) => entry,
            (None, Some(size)) if (id.batch_index as u32) < size => self.track(id, size),
            (None, _) => return MemberAck::Untracked,
        };
        entry.set_acked(id.batch_index as u32);
        entry.asked_again = true;
        Self::member_outcome(&mut self.entries, id)
    }

    /// The outcome of acking member `id` alone: a partial ack names that
    /// member only.
    fn member_outcome(
        entries: &mut HashMap<MessageId, Entry, IdBuildHasher>,
        id: MessageId,
    ) -> MemberAck {
        let alone = entries
            .get(&id.entry())
            .map(|e| e.ack_set_of(id.batch_index as u32))
            .unwrap_or_default();
        match Self::outcome(entries, id.entry()) {
            MemberAck::Partial(key, _) => MemberAck::Partial(key, alone),
            MemberAck::Entry(key, asked_again) => MemberAck::Last(key, asked_again, alone),
            other => other,
        }
    }

    /// The state of `id`'s entry, made for a batch of `size` if it has none.
    fn track(&mut self, id: MessageId, size: u32) -> &mut Entry {
        self.entries.entry(id.entry()).or_insert_with(|| Entry {
            size,
            acked_count: 0,
            live: 0,
            forwarding: 0,
            asked_again: false,
            acked: vec![0; size.div_ceil(64) as usize].into_boxed_slice(),
        })
    }

    /// Members `indexes` of `entry` (a batch of `size`) will never be
    /// delivered: the broker's `ack_set` marks them acked, or compaction
    /// removed them. They count as acked, so the entry ack is not held back
    /// waiting for them. Call it after the delivered members arrived: only
    /// an entry with state is touched (members all dropped on arrival leave
    /// none behind), except that an entry with every member skipped is done
    /// at once. Indexes outside the batch are ignored.
    pub(crate) fn skip(&mut self, entry: MessageId, size: u32, indexes: &[i32]) -> MemberAck {
        let key = entry.entry();
        let Some(state) = self.entries.get_mut(&key) else {
            return if covers_all(size, indexes) {
                MemberAck::Entry(key, false)
            } else {
                MemberAck::Untracked
            };
        };
        for &index in indexes {
            if let Ok(index) = u32::try_from(index) {
                state.set_acked(index);
            }
        }
        Self::outcome(&mut self.entries, key)
    }

    /// A cumulative ack of `upto`: entries before it are done, and so are
    /// the members of its own entry up to it (take its held members out
    /// with [`leave`](Self::leave) afterwards). Returns the cumulative ack
    /// to send: `upto` itself for a plain message; for a member, its entry
    /// once complete, or with its `ack_set` under batch index ack, or else
    /// the entry before (none before entry 0).
    ///
    /// `size` (the batch size of `upto`'s entry) lets an entry without state
    /// get some, so its members up to `upto` stay acked when it comes back.
    pub(crate) fn ack_cumulative(
        &mut self,
        upto: MessageId,
        size: Option<u32>,
        batch_index_ack: bool,
    ) -> Option<(MessageId, Option<AckSet>)> {
        let key = upto.entry();
        self.entries.retain(|entry, _| *entry >= key);
        if !upto.is_batch_member() {
            return Some((upto, None));
        }
        if let Some(size) = size.filter(|s| (upto.batch_index as u32) < *s) {
            self.track(upto, size);
        }
        if let Some(entry) = self.entries.get_mut(&key) {
            for index in 0..=(upto.batch_index as u32).min(entry.size.saturating_sub(1)) {
                entry.set_acked(index);
            }
        }
        match Self::outcome(&mut self.entries, key) {
            MemberAck::Entry(entry, _) | MemberAck::Last(entry, ..) => Some((entry, None)),
            MemberAck::Partial(entry, set) if batch_index_ack => Some((entry, Some(set))),
            MemberAck::Partial(..) | MemberAck::Untracked => {
                let entry_id = upto.entry_id.checked_sub(1)?;
                Some((MessageId { entry_id, ..key }, None))
            }
        }
    }

    /// Every queued and held member is gone (a rewind or reconnect); keeps
    /// the forwards in flight and, if `keep_acked`, the acked bits of
    /// partly acked entries. Keep them across a rewind the consumer asked
    /// for on its subscription without batch index ack (the broker never
    /// heard of them); a reconnect may be an operator's reset, whose copy
    /// of the entry must come whole; with batch index ack, the broker's
    /// `ack_set` on the copy tells which members it applied acks for.
    pub(crate) fn clear_live(&mut self, keep_acked: bool) {
        self.entries.retain(|_, e| {
            e.live = 0;
            e.asked_again = false;
            if !keep_acked {
                e.acked.fill(0);
                e.acked_count = 0;
            }
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

    fn outcome(
        entries: &mut HashMap<MessageId, Entry, IdBuildHasher>,
        key: MessageId,
    ) -> MemberAck {
        match entries.get(&key) {
            Some(entry) if entry.is_complete() => {
                let asked_again = entry.asked_again;
                entries.remove(&key);
                MemberAck::Entry(key, asked_again)
            }
            Some(entry) => MemberAck::Partial(key, entry.ack_set()),
            None => MemberAck::Untracked,
        }
    }
}

/// Whether `indexes` names every member of a batch of `size` (duplicates
/// and indexes outside the batch do not count).
fn covers_all(size: u32, indexes: &[i32]) -> bool {
    if size == 0 || indexes.len() < size as usize {
        return false;
    }
    // `size <= indexes.len()` here, so this is bounded by the input.
    let mut seen = vec![0_u64; size.div_ceil(64) as usize];
    let mut distinct = 0;
    for &index in indexes {
        if let Ok(i) = u32::try_from(index) {
            if i < size && seen[(i / 64) as usize] & (1 << (i % 64)) == 0 {
                seen[(i / 64) as usize] |= 1 << (i % 64);
                distinct += 1;
            }
        }
    }
    distinct == size
}

#[cfg(test)]
#[path = "batch_acks_tests.rs"]
mod tests;
