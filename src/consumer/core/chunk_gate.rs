//! Cumulative acks that stop short of a chunked message not handed out yet
//! (pure).
//!
//! A chunked message is delivered where its last chunk is, so on Exclusive
//! and Failover the application may ack cumulatively a message stored
//! between its first and last chunk before the message reaches it. The
//! Java client sends that ack as it is: it covers the first chunk, and if
//! the connection is lost before the message is handed out (its last chunk
//! not come yet, or the message still queued), the broker sends only the
//! chunks after the ack again and the message can never be assembled.
//!
//! Here a cumulative ACK on the wire never covers the first chunk of a
//! message that is being assembled, was just assembled, is queued, or was
//! handed out and is not acked yet (an ack short of its last chunk does not
//! cover it, and a reconnect would bring its later chunks alone): it goes
//! up to the entry before that chunk (nothing, when the chunk is the first
//! entry of its ledger), and the whole ack is kept and sent once no such
//! message stands in the way. A reconnect or a rewind keeps every message
//! it dropped in the way until its first chunk comes again (the broker
//! sends everything after the ACK, in order), whatever the assembler says
//! meanwhile: an earlier one may come whole before a later one's first
//! chunk comes. A seek forgets it all, since the SEEK moves the cursor.

use crate::message_id::MessageId;

use super::batch_acks::AckSet;

/// A cumulative ack: up to an id, with the `ack_set` of its entry's
/// members when it is a batch member under batch index ack.
pub(crate) type CumulativeAck = (MessageId, Option<AckSet>);

/// What stands in the way of cumulative acks, and the ack held back.
#[derive(Debug, Default)]
pub(crate) struct ChunkGate {
    /// The first chunk of the earliest message being assembled, as the
    /// assembler said at its last chunk.
    assembling: Option<MessageId>,
    /// The first chunks of the messages a reconnect or a rewind dropped
    /// (being assembled, or queued), in topic order, each until the
    /// assembler takes that chunk again, or one after it.
    returning: Vec<MessageId>,
    /// The first chunk of a message the last chunk completed, until it
    /// reaches the core (queued, or dropped there).
    arriving: Option<MessageId>,
    /// Chunked messages handed out and not acked yet: (first chunk,
    /// position).
    handed: Vec<(MessageId, MessageId)>,
    /// The cumulative ack held back, the highest one asked for.
    held_back: Option<CumulativeAck>,
    /// The short ACK sent last in its place.
    short: Option<MessageId>,
}

/// The ledger and entry of `id`, the order chunks and acks compare in.
fn entry_of(id: MessageId) -> (u64, u64) {
    (id.ledger_id, id.entry_id)
}

/// The entry before `first`, if its ledger has one.
fn before(first: MessageId) -> Option<MessageId> {
    let entry = first.entry_id.checked_sub(1)?;
    Some(MessageId::new(first.ledger_id, entry).with_partition(first.partition))
}

impl ChunkGate {
    /// The ACK to send for a cumulative ack up to `ack.0`, `queued` being
    /// the first chunk of the earliest chunked message queued: the ack
    /// itself, or, when a chunked message not handed out starts at or
    /// before it, an ack up to the entry before that message's first chunk
    /// (`None` when there is no such entry), and the ack is held back until
    /// [`release`](Self::release) lets it go. The short ack goes each time,
    /// as the ack would have: with ack receipts, its answer is the call's.
    pub(crate) fn admit(
        &mut self,
        ack: CumulativeAck,
        queued: Option<MessageId>,
    ) -> Option<CumulativeAck> {
        let ack = match self.held_back.take() {
            Some(held) if held.0 > ack.0 => held,
            _ => ack,
        };
        // The ack covers the messages handed out up to it.
        self.handed
            .retain(|(_, position)| entry_of(*position) > entry_of(ack.0));
        match self.in_the_way(ack.0, queued) {
            Some(first) => {
                self.held_back = Some(ack);
                let short = before(first)?;
                self.short = Some(short);
                Some((short, None))
            }
            None => Some(ack),
        }
    }

    /// How far a cumulative ACK up to `upto` may reach on the wire now,
    /// holding nothing back: `upto` itself, or the entry before the first
    /// chunk in its way (`None` when that chunk starts its ledger). For an
    /// ack that cannot wait, a transaction's: what it leaves goes later,
    /// through [`admit`](Self::admit).
    pub(crate) fn reach(&self, upto: MessageId, queued: Option<MessageId>) -> Option<MessageId> {
        match self.in_the_way(upto, queued) {
            Some(first) => before(first),
            None => Some(upto),
        }
    }

    /// The first chunk, at or before `upto`, of the earliest chunked
    /// message not handed out yet, or handed out and not covered by an ack
    /// up to `upto`.
    fn in_the_way(&self, upto: MessageId, queued: Option<MessageId>) -> Option<MessageId> {
        let handed = self
            .handed
            .iter()
            .filter(|(_, position)| entry_of(*position) > entry_of(upto))
            .map(|(first, _)| *first);
        let returning = self.returning.first().copied();
        [self.assembling, returning, self.arriving, queued]
            .into_iter()
            .flatten()
            .chain(handed)
            .min_by_key(|id| entry_of(*id))
            .filter(|first| entry_of(upto) >= entry_of(*first))
    }

    /// The held-back ack, if nothing stands in its way any more, or a
    /// short one further on than the last (see [`admit`](Self::admit)).
    pub(crate) fn release(&mut self, queued: Option<MessageId>) -> Option<CumulativeAck> {
        let held = self.held_back.take()?;
        let before = self.short;
        let admitted = self.admit(held, queued)?;
        let again = self.held_back.is_some() && before == Some(admitted.0);
        (!again).then_some(admitted)
    }

    /// The assembler took a chunk or dropped messages: `assembling` is the
    /// first chunk of the earliest message it still assembles, `completed`
    /// that of the message the chunk completed.
    pub(crate) fn chunks_taken(
        &mut self,
        assembling: Option<MessageId>,
        completed: Option<MessageId>,
    ) {
        let reached = assembling.into_iter().chain(completed).map(entry_of).max();
        if let Some(reached) = reached {
            self.returning.retain(|first| entry_of(*first) > reached);
        }
        self.assembling = assembling;
        self.arriving = completed;
    }

    /// The chunked message whose first chunk is `first`, delivered at
    /// `position` (its last chunk), was handed out: it stands in the way
    /// of acks short of `position` until one covers it, or it is acked.
    pub(crate) fn handed_out(&mut self, first: MessageId, position: MessageId) {
        // A copy handed out again (after a reconnect) is the same message.
        if !self.handed.iter().any(|(handed, _)| *handed == first) {
            self.handed.push((first, position));
        }
    }

    /// The chunked message whose first chunk is `first` was acked alone.
    pub(crate) fn acked(&mut self, first: MessageId) {
        self.handed
            .retain(|(handed, _)| entry_of(*handed) != entry_of(first));
    }

    /// The chunked message whose first chunk is `first` reached the core.
    pub(crate) fn arrived(&mut self, first: MessageId) {
        if self.arriving == Some(first) {
            self.arriving = None;
        }
    }

    /// The queue and the assembler are dropped (a reconnect or a rewind);
    /// `dropped` are the first chunks of the chunked messages they held:
    /// each comes again from its first chunk, and stands in the way until
    /// then. Those handed out and not acked stay in the way until acked.
    pub(crate) fn starting_over(&mut self, dropped: impl IntoIterator<Item = MessageId>) {
        let returning = &mut self.returning;
        returning.extend(self.assembling.take());
        returning.extend(self.arriving.take());
        returning.extend(dropped);
        returning.sort_unstable_by_key(|id| entry_of(*id));
        returning.dedup_by_key(|id| entry_of(*id));
        self.short = None;
    }

    /// A seek moved the cursor: nothing stands in the way, nothing is held.
    pub(crate) fn forget(&mut self) {
        *self = Self::default();
    }

    /// Whether an ack is held back.
    pub(crate) fn holds(&self) -> bool {
        self.held_back.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(entry: u64) -> MessageId {
        MessageId::new(1, entry)
    }

    #[test]
    fn an_ack_past_a_first_chunk_goes_short_of_it_until_the_message_is_handed_out() {
        let mut gate = ChunkGate::default();
        gate.chunks_taken(Some(at(4)), None);
        assert_eq!(gate.admit((at(5), None), None), Some((at(3), None)));
        assert_eq!(gate.admit((at(6), None), None), Some((at(3), None)));
        assert!(gate.holds());
        // The last chunk completes the message; it is queued.
        gate.chunks_taken(None, Some(at(4)));
        assert_eq!(gate.release(None), None);
        gate.arrived(at(4));
        assert_eq!(gate.release(Some(at(4))), None, "queued");
        assert_eq!(gate.release(None), Some((at(6), None)), "handed out");
        assert!(!gate.holds());
    }

    #[test]
    fn a_message_handed_out_stays_in_the_way_until_an_ack_covers_it() {
        let mut gate = ChunkGate::default();
        gate.handed_out(at(4), at(7));
        assert_eq!(gate.admit((at(5), None), None), Some((at(3), None)));
        assert_eq!(gate.reach(at(6), None), Some(at(3)));
        assert_eq!(gate.reach(at(7), None), Some(at(7)), "covered");
        assert_eq!(gate.release(None), None, "still held by the application");
        assert_eq!(gate.admit((at(7), None), None), Some((at(7), None)));
        assert!(!gate.holds());
        gate.handed_out(at(8), at(10));
        gate.acked(at(8));
        assert_eq!(gate.admit((at(9), None), None), Some((at(9), None)));
    }

    #[test]
    fn a_message_handed_out_comes_again_after_a_reconnect_and_stays_in_the_way() {
        let mut gate = ChunkGate::default();
        gate.handed_out(at(4), at(7));
        gate.starting_over([]);
        assert_eq!(gate.admit((at(5), None), None), Some((at(3), None)));
        // The assembler, empty after the reconnect, says so (expiring
        // chunks): the message still comes again.
        gate.chunks_taken(None, None);
        assert_eq!(gate.release(None), None);
        // Its first chunk came again: the assembler holds it.
        gate.chunks_taken(Some(at(4)), None);
        assert_eq!(gate.release(None), None);
        // Assembled and handed out again, then acked.
        gate.chunks_taken(None, Some(at(4)));
        gate.arrived(at(4));
        gate.handed_out(at(4), at(7));
        assert_eq!(gate.admit((at(7), None), None), Some((at(7), None)));
    }

    #[test]
    fn a_message_being_assembled_at_a_reconnect_stays_in_the_way_until_its_first_chunk_comes_again()
    {
        let mut gate = ChunkGate::default();
        gate.chunks_taken(Some(at(4)), None);
        assert_eq!(gate.admit((at(5), None), None), Some((at(3), None)));
        gate.starting_over([]);
        gate.chunks_taken(None, None);
        assert_eq!(
            gate.release(None),
            Some((at(3), None)),
            "short again, under the next subscription"
        );
        assert_eq!(gate.release(None), None, "though the assembler forgot it");
        gate.chunks_taken(Some(at(4)), None);
        gate.chunks_taken(None, Some(at(4)));
        gate.arrived(at(4));
        assert_eq!(gate.release(None), Some((at(5), None)), "out of the way");
    }

    #[test]
    fn an_ack_before_the_first_chunk_goes_as_it_is() {
        let mut gate = ChunkGate::default();
        gate.chunks_taken(Some(at(4)), None);
        assert_eq!(gate.admit((at(3), None), None), Some((at(3), None)));
        assert!(!gate.holds());
        let other_ledger = MessageId::new(0, 90);
        assert_eq!(
            gate.admit((other_ledger, None), None),
            Some((other_ledger, None))
        );
    }

    #[test]
    fn a_first_chunk_at_the_start_of_its_ledger_holds_the_whole_ack() {
        let mut gate = ChunkGate::default();
        gate.chunks_taken(Some(MessageId::new(2, 0)), None);
        assert_eq!(gate.admit((MessageId::new(2, 3), None), None), None);
        assert!(gate.holds());
    }

    #[test]
    fn a_reconnect_keeps_the_message_in_the_way_until_its_chunks_come_again() {
        let mut gate = ChunkGate::default();
        gate.chunks_taken(None, None);
        assert_eq!(gate.admit((at(5), None), Some(at(4))), Some((at(3), None)));
        // The queue holding the message is dropped.
        gate.starting_over([at(4)]);
        assert_eq!(
            gate.release(None),
            Some((at(3), None)),
            "short again, on the new connection"
        );
        gate.chunks_taken(Some(at(4)), None);
        assert_eq!(gate.release(None), None, "once");
        gate.chunks_taken(None, Some(at(4)));
        gate.arrived(at(4));
        assert_eq!(gate.release(None), Some((at(5), None)));
    }

    #[test]
    fn a_reconnect_keeps_every_message_it_dropped_in_the_way() {
        let mut gate = ChunkGate::default();
        gate.chunks_taken(Some(at(1)), None);
        assert_eq!(gate.admit((at(9), None), Some(at(5))), Some((at(0), None)));
        // Dropped: one being assembled, two queued.
        gate.starting_over([at(7), at(5)]);
        assert_eq!(gate.release(None), Some((at(0), None)));
        // The first comes whole and is handed out before the others come.
        gate.chunks_taken(Some(at(1)), None);
        gate.chunks_taken(None, Some(at(1)));
        gate.arrived(at(1));
        gate.handed_out(at(1), at(2));
        assert_eq!(gate.release(None), Some((at(4), None)), "up to the next");
        gate.chunks_taken(Some(at(5)), None);
        gate.chunks_taken(None, Some(at(5)));
        gate.arrived(at(5));
        gate.handed_out(at(5), at(6));
        assert_eq!(gate.release(None), Some((at(6), None)), "up to the last");
        gate.chunks_taken(Some(at(7)), None);
        gate.chunks_taken(None, Some(at(7)));
        gate.arrived(at(7));
        gate.handed_out(at(7), at(8));
        assert_eq!(gate.release(None), Some((at(9), None)), "all of it");
    }

    #[test]
    fn the_reach_of_an_ack_that_cannot_wait_stops_short_and_holds_nothing() {
        let mut gate = ChunkGate::default();
        gate.chunks_taken(Some(at(4)), None);
        assert_eq!(gate.reach(at(3), None), Some(at(3)));
        assert_eq!(gate.reach(at(5), None), Some(at(3)));
        assert_eq!(gate.reach(at(9), Some(at(2))), Some(at(1)), "queued");
        assert!(!gate.holds());
        gate.chunks_taken(Some(MessageId::new(2, 0)), None);
        assert_eq!(gate.reach(MessageId::new(2, 3), None), None);
    }

    #[test]
    fn a_seek_forgets_the_held_ack() {
        let mut gate = ChunkGate::default();
        gate.chunks_taken(Some(at(4)), None);
        gate.admit((at(5), None), None);
        gate.forget();
        assert!(!gate.holds());
        assert_eq!(gate.admit((at(7), None), None), Some((at(7), None)));
    }
}
