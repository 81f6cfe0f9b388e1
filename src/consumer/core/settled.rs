//! The acks the consumer remembers to drop copies of acked messages (pure).
//!
//! A message id is a position in the topic, valid on every connection: the
//! application may ack a message after a reconnect, a rewind, an ack-timeout
//! expiry or a nack, when the consumer has already forgotten it. Such an ack
//! is sent all the same, and remembered here so that a copy the broker
//! dispatched before it saw the ack (a redelivery after the reconnect, say)
//! is dropped instead of handed out again:
//! - the highest cumulative ack, below which everything is settled (a
//!   chunked message counts from its last chunk, where it is delivered);
//! - the last individually acked ids that were not held (a bounded FIFO:
//!   forgetting the oldest only risks a duplicate, never a loss), and, from
//!   a reconnect on, the last ones acked while held: the broker applies
//!   acks asynchronously, so it may dispatch a copy of a message acked just
//!   before it closed the consumer. A batch acked whole is one id there,
//!   its entry's, which covers every member.
//!
//! Only acks the broker may not have applied are kept across a reconnect.
//! Every ack is numbered as it is recorded; the driver tells which numbers
//! the broker confirmed (its answers to the ACKs sent up to a
//! [`mark`](AckMemory::mark)). A confirmed ack is applied, so a copy of its
//! message after the reconnect is a rewind made on purpose (an operator's
//! reset-cursor, another consumer's seek) and is handed out, as the Java
//! client does for acks it flushed. An ack not confirmed by then may have
//! been lost with the connection: its copies are still dropped, and acked
//! again only if nothing sends its ACK again ([`AckMemory::may_be_lost`]).

use std::collections::{HashMap, VecDeque};

use crate::message_id::MessageId;

use super::unacked::id_hash::IdBuildHasher;

/// The number of an ack in the order the core recorded it, from 1.
type Stamp = u64;

/// The stamp of an ack not confirmed when its connection was lost and
/// not sent again: no answer on a later connection confirms it, so it
/// stays until its copy comes and is acked again, or it is forgotten. (An
/// ACK sent again, with receipts, keeps its stamp: the answer on the new
/// connection confirms it.)
const UNCONFIRMED_AT_RECONNECT: Stamp = Stamp::MAX;

/// The stamp of an ack known applied (its own ACK answered, though not
/// every ACK sent beside it): confirmed whatever the marks say.
const APPLIED: Stamp = 0;

/// Acks remembered to drop the copies of acked messages.
#[derive(Debug)]
pub(crate) struct AckMemory {
    settled: Settled,
    /// The last acks of held messages; they join `settled` at a reconnect.
    recent: RecentAcks,
    /// The stamp of the last ack recorded.
    last: Stamp,
    /// The stamps the broker confirmed.
    confirmed: Confirmed,
}

impl AckMemory {
    /// Remembers at most `capacity` individual acks of each kind (at least 1).
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            settled: Settled::new(capacity),
            recent: RecentAcks::new(capacity),
            last: 0,
            confirmed: Confirmed::default(),
        }
    }

    fn stamp(&mut self) -> Stamp {
        self.last += 1;
        self.last
    }

    /// A held message `id` was acked: its copies are dropped once the
    /// connection is lost, unless the broker confirmed the ack by then.
    pub(crate) fn acked_held(&mut self, id: MessageId) {
        let stamp = self.stamp();
        self.recent.push(id, stamp);
    }

    /// `id`, not held, was acked (or its copy acked again): its copies are
    /// dropped from now on.
    pub(crate) fn acked_unheld(&mut self, id: MessageId) {
        let stamp = self.stamp();
        self.settled.insert(id, stamp);
    }

    /// Everything up to and including `upto` was acked (for a chunked
    /// message, `upto` is its last chunk).
    pub(crate) fn acked_cumulative(&mut self, upto: MessageId) {
        let stamp = self.stamp();
        self.settled.cumulative(upto, stamp);
    }

    /// Whether the message `id`, which ends at `position` (its last chunk,
    /// if chunked), is known to be acked.
    pub(crate) fn covers(&self, id: MessageId, position: MessageId) -> bool {
        self.settled.covers(id, position)
    }

    /// Whether every ack that covers the message `id` (ending at
    /// `position`) may have been lost with a connection and will not be
    /// sent again: only then does a copy of it need an ack again. An ack
    /// on its way (answered on this connection, or sent again under the
    /// next subscription) or applied needs none: sent again anyway, it
    /// could still be on its way when an operator resets the cursor, and
    /// ack the reset's copy unseen.
    pub(crate) fn may_be_lost(&self, id: MessageId, position: MessageId) -> bool {
        self.settled.may_be_lost(id, position)
    }

    /// Whether the broker applied an ack of `id` (acked individually):
    /// the ACK that carried it was answered. Known until the next
    /// reconnect, which forgets applied acks.
    pub(crate) fn applied(&self, id: MessageId) -> bool {
        let confirmed = |stamp| self.confirmed.contains(stamp);
        self.settled
            .ids
            .get(&id)
            .is_some_and(|s| confirmed(s.first) || confirmed(s.latest))
            || self
                .recent
                .ids
                .iter()
                .any(|&(held, stamp)| held == id && confirmed(stamp))
    }

    /// The broker answered ACKs that acked `ids` individually: those acks
    /// are applied, whatever becomes of the ACKs sent beside them.
    pub(crate) fn mark_applied(&mut self, ids: impl IntoIterator<Item = MessageId>) {
        // Sorted once, searched per entry: no set built per answer.
        let mut ids: Vec<MessageId> = ids.into_iter().collect();
        if ids.is_empty() {
            return;
        }
        ids.sort_unstable();
        if !self.settled.ids.is_empty() {
            for id in &ids {
                if let Some(stamps) = self.settled.ids.get_mut(id) {
                    stamps.first = APPLIED;
                }
            }
        }
        // The recent acks are in stamp order, and those every answer up to
        // a mark confirmed need nothing: only the tail past them is read.
        for (id, stamp) in self.recent.ids.iter_mut().rev() {
            if *stamp != APPLIED && *stamp <= self.confirmed.upto {
                break;
            }
            if ids.binary_search(id).is_ok() {
                *stamp = APPLIED;
            }
        }
    }

    /// ACK requests that acked `ids` individually were not answered when
    /// their connection or consumer was lost, and will not be sent again:
    /// the acks of those ids not confirmed may have been lost, whatever
    /// [`on_reconnect_unsent_after`](Self::on_reconnect_unsent_after)
    /// supposes of the acks past its mark (a member's ACK goes at once
    /// while a group of plain acks waits). Call it before that.
    pub(crate) fn sent_unanswered(&mut self, ids: impl IntoIterator<Item = MessageId>) {
        let mut ids: Vec<MessageId> = ids.into_iter().collect();
        if ids.is_empty() {
            return;
        }
        ids.sort_unstable();
        let confirmed = &self.confirmed;
        let lose = |stamp: &mut Stamp| {
            if !confirmed.contains(*stamp) {
                *stamp = UNCONFIRMED_AT_RECONNECT;
            }
        };
        for id in &ids {
            if let Some(stamps) = self.settled.ids.get_mut(id) {
                lose(&mut stamps.first);
                lose(&mut stamps.latest);
            }
        }
        for (id, stamp) in &mut self.recent.ids {
            if ids.binary_search(id).is_ok() {
                lose(stamp);
            }
        }
    }

    /// The stamp of the last ack recorded: once the broker answered the
    /// ACKs sent after it, [`confirm`](Self::confirm) it.
    pub(crate) fn mark(&self) -> Stamp {
        self.last
    }

    /// The broker answered the ACKs sent on the current connection up to
    /// `mark` (from [`mark`](Self::mark)): every ack stamped at or below it
    /// is applied.
    pub(crate) fn confirm(&mut self, mark: Stamp) {
        self.confirmed.add(0, mark.min(self.last));
        self.settled.prune_floors(&self.confirmed);
    }

    /// The broker answered the ACKs that carried the acks stamped after
    /// `after` up to `upto` (the acks of one pass, sent together): those
    /// are applied, whatever became of the ACKs sent before them.
    pub(crate) fn confirm_range(&mut self, after: Stamp, upto: Stamp) {
        self.confirmed.add(after, upto.min(self.last));
        self.settled.prune_floors(&self.confirmed);
    }

    /// The connection was lost: the confirmed acks are forgotten (a copy of
    /// theirs comes only from a rewind, and is handed out); the others,
    /// and the recent acks of held messages, drop their copies from now on.
    /// If the lost ACKs are `resent` on the next connection, their acks
    /// keep their stamps, so its answers confirm them; else nothing will.
    pub(crate) fn on_reconnect(&mut self, resent: bool) {
        self.on_reconnect_unsent_after(resent, self.last);
    }

    /// As [`on_reconnect`](Self::on_reconnect), where the acks stamped
    /// after `sent` were not sent yet: they go out under the next
    /// subscription, whose answers confirm them, so they keep their
    /// stamps.
    pub(crate) fn on_reconnect_unsent_after(&mut self, resent: bool, sent: Stamp) {
        let lost = |stamp: Stamp| {
            if resent || stamp > sent {
                stamp
            } else {
                UNCONFIRMED_AT_RECONNECT
            }
        };
        self.settled.keep_unconfirmed(&self.confirmed, lost);
        self.recent
            .settle_into(&mut self.settled, &self.confirmed, lost);
    }

    /// The consumer asked the broker to send everything unacked again (a
    /// rewind on Exclusive or Failover), on the same connection: as
    /// [`on_reconnect`](Self::on_reconnect), but the ACKs in flight are
    /// still answered there, so their acks keep their stamps.
    pub(crate) fn on_rewind(&mut self) {
        self.on_reconnect(true);
    }

    /// The subscription was moved (a seek): acked messages may come again
    /// on purpose, so nothing is remembered.
    pub(crate) fn forget(&mut self) {
        self.settled.clear();
        self.recent.ids.clear();
    }
}

/// The stamps the broker confirmed: every one up to `upto`, and ranges
/// past it whose answers came before those of earlier ACKs.
#[derive(Debug, Default)]
struct Confirmed {
    upto: Stamp,
    /// `(after, upto]` ranges past `upto`, at most [`MAX_RANGES`].
    ranges: Vec<(Stamp, Stamp)>,
}

/// Cumulative acks remembered per connection (those in flight, in effect:
/// the confirmed ones before the last are forgotten); past it the oldest
/// is forgotten, which can only drop a rewind's copy.
const MAX_FLOORS: usize = 1024;

/// Confirmed ranges kept past a gap (an ACK never answered); the oldest
/// is forgotten first, which can only bring a duplicate.
const MAX_RANGES: usize = 64;

impl Confirmed {
    /// The stamps after `after` up to `upto` are confirmed.
    fn add(&mut self, after: Stamp, upto: Stamp) {
        if upto <= self.upto {
            return;
        }
        if after > self.upto {
            if self.ranges.len() == MAX_RANGES {
                self.ranges.remove(0);
            }
            self.ranges.push((after, upto));
            return;
        }
        self.upto = upto;
        // Ranges that now join the contiguous part.
        loop {
            let mut joined = self.upto;
            self.ranges.retain(|&(a, b)| {
                if a <= joined {
                    joined = joined.max(b);
                    false
                } else {
                    true
                }
            });
            if joined == self.upto {
                return;
            }
            self.upto = joined;
        }
    }

    fn contains(&self, stamp: Stamp) -> bool {
        stamp <= self.upto || self.ranges.iter().any(|&(a, b)| a < stamp && stamp <= b)
    }
}

/// The last ids acked while held, without hashing them (a ring): at a
/// reconnect the unconfirmed ones join [`Settled`], since the broker may
/// dispatch a copy before it applied the ack.
#[derive(Debug)]
struct RecentAcks {
    ids: VecDeque<(MessageId, Stamp)>,
    capacity: usize,
}

impl RecentAcks {
    /// Keeps the last `capacity` ids (at least 1).
    fn new(capacity: usize) -> Self {
        Self {
            ids: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    /// `id` was acked.
    fn push(&mut self, id: MessageId, stamp: Stamp) {
        if self.ids.len() == self.capacity {
            self.ids.pop_front();
        }
        self.ids.push_back((id, stamp));
    }

    /// Moves every id not confirmed into `settled`, under the stamp `lost`
    /// gives it at a reconnect; forgets the others.
    fn settle_into(
        &mut self,
        settled: &mut Settled,
        confirmed: &Confirmed,
        lost: impl Fn(Stamp) -> Stamp,
    ) {
        for (id, stamp) in self.ids.drain(..) {
            if !confirmed.contains(stamp) {
                settled.insert(id, lost(stamp));
            }
        }
    }
}

/// A cumulative ack unconfirmed when its connection was lost (several, if
/// lost again before confirmed, as one range).
#[derive(Debug)]
struct LostFloor {
    after: Option<MessageId>,
    upto: MessageId,
    /// The stamps of the ACKs that carried it: all confirmed (sent again
    /// and answered), it is applied.
    stamps: Vec<Stamp>,
}

/// The stamps of the acks of one id: its first, and its latest (a copy
/// dropped and acked again, say). The broker applied the id once either is
/// confirmed, whatever became of the other's ACK.
#[derive(Debug, Clone, Copy)]
struct AckStamps {
    first: Stamp,
    latest: Stamp,
}

/// Ids the application settled outside the held set, with their stamps.
#[derive(Debug)]
struct Settled {
    /// The cumulative acks of this connection, rising, from the last one
    /// the broker confirmed on: everything at or before the last is acked.
    floors: VecDeque<(MessageId, Stamp)>,
    /// Unconfirmed when a connection was lost: the messages after `after`
    /// (if any) up to `upto` are acked, and their ACK may have been lost
    /// with it.
    unconfirmed_floor: Option<LostFloor>,
    order: VecDeque<MessageId>,
    /// Each id with the stamps of its first and its latest ack: either
    /// confirmed, the broker applied an ack of it.
    ids: HashMap<MessageId, AckStamps, IdBuildHasher>,
    capacity: usize,
}

impl Settled {
    /// Remembers at most `capacity` individually acked ids (at least 1).
    fn new(capacity: usize) -> Self {
        Self {
            floors: VecDeque::new(),
            unconfirmed_floor: None,
            order: VecDeque::new(),
            ids: HashMap::default(),
            capacity: capacity.max(1),
        }
    }

    /// `id` was acked while not held (again: its first ack's stamp is
    /// kept beside the new one); forgets the oldest such id past the
    /// capacity.
    fn insert(&mut self, id: MessageId, stamp: Stamp) {
        if let Some(stamps) = self.ids.get_mut(&id) {
            stamps.latest = stamp;
            return;
        }
        self.ids.insert(
            id,
            AckStamps {
                first: stamp,
                latest: stamp,
            },
        );
        self.order.push_back(id);
        if self.order.len() > self.capacity {
            if let Some(oldest) = self.order.pop_front() {
                self.ids.remove(&oldest);
            }
        }
    }

    /// Everything up to and including `upto` is acked.
    fn cumulative(&mut self, upto: MessageId, stamp: Stamp) {
        if self.floors.back().is_none_or(|(floor, _)| *floor < upto) {
            if self.floors.len() == MAX_FLOORS {
                self.floors.pop_front();
            }
            self.floors.push_back((upto, stamp));
        }
    }

    /// Forgets the cumulative acks before the last confirmed one.
    fn prune_floors(&mut self, confirmed: &Confirmed) {
        while self
            .floors
            .get(1)
            .is_some_and(|(_, s)| confirmed.contains(*s))
        {
            self.floors.pop_front();
        }
    }

    /// Whether the message `id`, which ends at `position` (its last chunk,
    /// if chunked), is known to be acked: the cumulative floor covers it
    /// only from its position on, since it is delivered there.
    fn covers(&self, id: MessageId, position: MessageId) -> bool {
        self.floors
            .back()
            .is_some_and(|(floor, _)| position <= *floor)
            || self.unconfirmed_floor.as_ref().is_some_and(|lost| {
                lost.after.is_none_or(|a| a < position) && position <= lost.upto
            })
            || (!self.ids.is_empty()
                && (self.ids.contains_key(&id)
                    || (id.is_batch_member() && self.ids.contains_key(&id.entry()))))
    }

    /// See [`AckMemory::may_be_lost`].
    fn may_be_lost(&self, id: MessageId, position: MessageId) -> bool {
        let lost = |s: &AckStamps| {
            s.first == UNCONFIRMED_AT_RECONNECT && s.latest == UNCONFIRMED_AT_RECONNECT
        };
        if self
            .floors
            .back()
            .is_some_and(|(floor, _)| position <= *floor)
        {
            return false;
        }
        if let Some(stamps) = self
            .ids
            .get(&id)
            .or_else(|| self.ids.get(&id.entry()).filter(|_| id.is_batch_member()))
        {
            return lost(stamps);
        }
        self.unconfirmed_floor
            .as_ref()
            .is_some_and(|floor| floor.stamps.iter().all(|s| *s == UNCONFIRMED_AT_RECONNECT))
    }

    /// Forgets the confirmed acks; the others keep the stamp `lost` gives
    /// them at a reconnect.
    fn keep_unconfirmed(&mut self, confirmed: &Confirmed, lost: impl Fn(Stamp) -> Stamp) {
        // A floor lost before, whose ACKs were sent again and answered.
        if self
            .unconfirmed_floor
            .as_ref()
            .is_some_and(|floor| floor.stamps.iter().all(|s| confirmed.contains(*s)))
        {
            self.unconfirmed_floor = None;
        }
        // The last confirmed cumulative ack bounds what may have been lost.
        let applied = self
            .floors
            .iter()
            .rev()
            .find(|(_, s)| confirmed.contains(*s))
            .map(|(upto, _)| *upto);
        if let Some(&(upto, stamp)) = self.floors.back() {
            if !confirmed.contains(stamp) {
                let floor = match self.unconfirmed_floor.take() {
                    // Lost again: both ranges, as one (at worst, a copy of
                    // a confirmed message between them is dropped).
                    Some(mut older) => {
                        older.after = older.after.min(applied);
                        older.upto = older.upto.max(upto);
                        older.stamps.push(lost(stamp));
                        older
                    }
                    None => LostFloor {
                        after: applied,
                        upto,
                        stamps: vec![lost(stamp)],
                    },
                };
                self.unconfirmed_floor = Some(floor);
            }
        }
        self.floors.clear();
        if self.ids.is_empty() {
            return;
        }
        self.ids.retain(|_, stamps| {
            !confirmed.contains(stamps.first) && !confirmed.contains(stamps.latest)
        });
        for stamps in self.ids.values_mut() {
            stamps.first = lost(stamps.first);
            stamps.latest = lost(stamps.latest);
        }
        let ids = &self.ids;
        self.order.retain(|id| ids.contains_key(id));
    }

    fn clear(&mut self) {
        self.floors.clear();
        self.unconfirmed_floor = None;
        self.order.clear();
        self.ids.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(entry: u64) -> MessageId {
        MessageId::new(1, entry)
    }

    fn acked(memory: &AckMemory, entry: u64) -> bool {
        memory.covers(id(entry), id(entry))
    }

    #[test]
    fn remembers_a_bounded_number_of_ids_oldest_forgotten_first() {
        let mut memory = AckMemory::new(2);
        memory.acked_unheld(id(1));
        memory.acked_unheld(id(2));
        memory.acked_unheld(id(2));
        assert!(acked(&memory, 1) && acked(&memory, 2));
        memory.acked_unheld(id(3));
        assert!(!acked(&memory, 1), "the oldest is forgotten");
        assert!(acked(&memory, 2) && acked(&memory, 3));
        assert_eq!(memory.settled.ids.len(), 2);
    }

    #[test]
    fn an_id_acked_twice_is_applied_once_either_ack_is_confirmed() {
        // The first ACK answered, the second (a copy's) lost.
        let mut memory = AckMemory::new(4);
        memory.acked_unheld(id(1));
        let first = memory.mark();
        memory.acked_unheld(id(1));
        memory.confirm_range(0, first);
        memory.on_reconnect(true);
        assert!(!acked(&memory, 1), "the first ack was applied");
        // The first lost, the second answered.
        let mut memory = AckMemory::new(4);
        memory.acked_unheld(id(1));
        let first = memory.mark();
        memory.acked_unheld(id(1));
        memory.confirm_range(first, memory.mark());
        memory.on_reconnect(true);
        assert!(!acked(&memory, 1), "the second ack was applied");
        // Neither answered: its copies are still dropped.
        let mut memory = AckMemory::new(4);
        memory.acked_unheld(id(1));
        memory.acked_unheld(id(1));
        memory.on_reconnect(false);
        assert!(acked(&memory, 1));
    }

    #[test]
    fn acks_marked_applied_count_as_confirmed_at_a_reconnect() {
        let mut memory = AckMemory::new(8);
        for n in 1..=4 {
            memory.acked_held(id(n));
        }
        memory.confirm(1);
        memory.mark_applied([id(3)]);
        memory.mark_applied([id(2), id(4)]);
        memory.on_reconnect(false);
        for n in 1..=4 {
            assert!(!acked(&memory, n), "{n} was applied");
        }
        // One not marked stays kept.
        let mut memory = AckMemory::new(8);
        memory.acked_held(id(1));
        memory.acked_held(id(2));
        memory.mark_applied([id(2)]);
        memory.on_reconnect(false);
        assert!(acked(&memory, 1) && !acked(&memory, 2));
    }

    #[test]
    fn acks_of_held_messages_drop_copies_only_after_a_reconnect() {
        let mut memory = AckMemory::new(2);
        for n in 1..=3 {
            memory.acked_held(id(n));
        }
        assert!(!acked(&memory, 3), "no copy comes on the same connection");
        memory.on_reconnect(false);
        assert!(!acked(&memory, 1), "only the last two are kept");
        assert!(acked(&memory, 2) && acked(&memory, 3));
        memory.on_reconnect(false);
        assert_eq!(memory.settled.ids.len(), 2);
    }

    #[test]
    fn a_cumulative_ack_settles_everything_before_it_and_never_moves_back() {
        let mut memory = AckMemory::new(1);
        memory.acked_cumulative(id(5).with_batch_index(1));
        assert!(acked(&memory, 4));
        assert!(memory.covers(id(5).with_batch_index(0), id(5).with_batch_index(0)));
        assert!(!memory.covers(id(5).with_batch_index(2), id(5).with_batch_index(2)));
        memory.acked_cumulative(id(2));
        assert!(acked(&memory, 4), "an older cumulative ack changes nothing");
        assert!(!acked(&memory, 6));
    }

    #[test]
    fn a_chunked_message_counts_from_its_last_chunk() {
        let mut memory = AckMemory::new(1);
        memory.acked_cumulative(id(5));
        assert!(!memory.covers(id(3), id(7)), "delivered at its last chunk");
        assert!(memory.covers(id(3), id(5)));
    }

    #[test]
    fn confirmed_acks_are_forgotten_at_a_reconnect_the_others_kept() {
        let mut memory = AckMemory::new(8);
        memory.acked_held(id(1));
        memory.acked_unheld(id(2));
        memory.acked_cumulative(id(3));
        memory.confirm(memory.mark());
        memory.acked_held(id(4));
        memory.acked_unheld(id(5));
        memory.on_reconnect(false);
        for n in 1..=3 {
            assert!(
                !acked(&memory, n),
                "{n} was confirmed: a copy is a rewind's"
            );
        }
        assert!(
            acked(&memory, 4) && acked(&memory, 5),
            "maybe lost with the connection"
        );
    }

    #[test]
    fn an_ack_unconfirmed_at_a_reconnect_is_confirmed_only_when_sent_again() {
        let mut memory = AckMemory::new(8);
        memory.acked_held(id(1));
        memory.acked_cumulative(id(0));
        memory.on_reconnect(false);
        // Answers on the new connection are for what was sent there.
        memory.acked_unheld(id(2));
        memory.confirm(memory.mark());
        memory.on_reconnect(false);
        assert!(acked(&memory, 1), "never sent on the second connection");
        assert!(acked(&memory, 0), "nor was the cumulative ack");
        assert!(!acked(&memory, 2));
        // Its copy came and was acked again: that ack is confirmed.
        memory.acked_unheld(id(1));
        memory.confirm(memory.mark());
        memory.on_reconnect(false);
        assert!(!acked(&memory, 1));
    }

    #[test]
    fn a_pass_confirmed_before_an_earlier_one_is_confirmed_alone() {
        let mut memory = AckMemory::new(8);
        memory.acked_held(id(1));
        let first = memory.mark();
        memory.acked_held(id(2));
        // The second pass's ACK is answered; the first one's never is.
        memory.confirm_range(first, memory.mark());
        memory.on_reconnect(false);
        assert!(acked(&memory, 1), "never confirmed");
        assert!(!acked(&memory, 2), "confirmed on its own");
    }

    #[test]
    fn confirmed_ranges_join_the_watermark_when_the_gap_fills() {
        let mut confirmed = Confirmed::default();
        confirmed.add(2, 3);
        confirmed.add(4, 6);
        assert!(!confirmed.contains(1) && confirmed.contains(3) && !confirmed.contains(4));
        confirmed.add(0, 2);
        assert_eq!((confirmed.upto, confirmed.ranges.len()), (3, 1));
        confirmed.add(3, 4);
        assert_eq!((confirmed.upto, confirmed.ranges.len()), (6, 0));
    }

    #[test]
    fn a_cumulative_ack_in_flight_at_a_reconnect_keeps_only_what_it_adds() {
        let mut memory = AckMemory::new(8);
        memory.acked_cumulative(id(5));
        memory.confirm(memory.mark());
        memory.acked_cumulative(id(9));
        memory.on_reconnect(false);
        assert!((1..=5).all(|n| !acked(&memory, n)), "confirmed up to 5");
        assert!((6..=9).all(|n| acked(&memory, n)), "maybe lost: 6 to 9");
        assert!(!acked(&memory, 10));
    }

    #[test]
    fn only_an_ack_lost_and_not_sent_again_may_be_lost() {
        let lost = |memory: &AckMemory, entry| memory.may_be_lost(id(entry), id(entry));
        let mut memory = AckMemory::new(8);
        memory.acked_unheld(id(1));
        memory.acked_cumulative(id(5));
        assert!(!lost(&memory, 1) && !lost(&memory, 3), "on their way");
        // Lost with the connection and not sent again: both may be lost.
        memory.on_reconnect(false);
        assert!(lost(&memory, 1) && lost(&memory, 3));
        // Acked again: that ack is on its way.
        memory.acked_unheld(id(1));
        assert!(!lost(&memory, 1));

        // Sent again under the next subscription: on their way.
        let mut resent = AckMemory::new(8);
        resent.acked_unheld(id(1));
        resent.on_reconnect(true);
        assert!(acked(&resent, 1) && !lost(&resent, 1));
    }

    #[test]
    fn acks_sent_and_unanswered_at_a_reconnect_may_be_lost_though_past_its_mark() {
        let mut memory = AckMemory::new(8);
        memory.acked_unheld(id(1));
        memory.acked_held(id(2));
        memory.acked_unheld(id(3));
        memory.confirm(1);
        // The ACKs of 2 and 3 went out, unanswered; the reconnect takes
        // every ack as unsent (a group waited since before them).
        memory.sent_unanswered([id(2), id(3)]);
        memory.on_reconnect_unsent_after(false, 0);
        assert!(!acked(&memory, 1), "confirmed");
        assert!(acked(&memory, 2) && memory.may_be_lost(id(2), id(2)));
        assert!(acked(&memory, 3) && memory.may_be_lost(id(3), id(3)));
    }

    #[test]
    fn a_seek_forgets_every_ack() {
        let mut memory = AckMemory::new(8);
        memory.acked_unheld(id(1));
        memory.acked_cumulative(id(2));
        memory.acked_held(id(3));
        memory.forget();
        memory.on_reconnect(false);
        assert!((1..=3).all(|n| !acked(&memory, n)));
    }
    #[test]
    fn acks_sent_again_keep_their_stamps_and_are_confirmed_by_the_answers_then() {
        let mut memory = AckMemory::new(8);
        memory.acked_held(id(1));
        memory.acked_cumulative(id(3));
        let (after, mark) = (0, memory.mark());
        memory.on_reconnect(true);
        assert!(
            acked(&memory, 1) && acked(&memory, 3),
            "maybe lost: dropped"
        );
        // The same ACKs, sent again on the new connection, are answered.
        memory.confirm_range(after, mark);
        memory.on_reconnect(true);
        for n in 1..=3 {
            assert!(
                !acked(&memory, n),
                "{n} was confirmed: a copy is a rewind's"
            );
        }
    }

    #[test]
    fn a_floor_lost_twice_is_applied_once_every_ack_that_carried_it_is_answered() {
        let mut memory = AckMemory::new(8);
        memory.acked_cumulative(id(2));
        let first = memory.mark();
        memory.on_reconnect(true);
        memory.acked_cumulative(id(4));
        let second = memory.mark();
        memory.on_reconnect(true);
        memory.confirm_range(first, second);
        memory.on_reconnect(true);
        assert!(
            acked(&memory, 2) && acked(&memory, 4),
            "the first is unanswered"
        );
        memory.confirm_range(0, first);
        memory.on_reconnect(true);
        assert!(!acked(&memory, 2) && !acked(&memory, 4));
    }
}
