//! Where one partition's messages start, and the last one handed out
//! (pure, a few ids per partition whatever the number of messages).
//!
//! A reader's start id or a seek target is a boundary: the broker starts at
//! the boundary's entry (Apache Pulsar always includes it for a start id,
//! and a seek to a batch member resets to its entry), so the client drops
//! what arrives before the boundary, and the boundary itself unless it is
//! inclusive, as the Java client does with `startMessageId` and
//! `startMessageIdInclusive`. Members dropped this way count as acked
//! (skipped), so an entry ack still goes out once the rest are acked.
//!
//! On a durable subscription a seek's target filters only its own entry,
//! and only until the subscription is lost again (as the Java client, which
//! filters only the target's entry too): the members before a target
//! member, and the target itself unless inclusive. The members a seek
//! skips count as acked, as those before it do on the broker (the SEEK's
//! `ack_set` says so when the batch's size is known); a plain target
//! skipped stays unacked, and comes again after the next reconnect.
//! Whatever else comes from before the target comes from a rewind made
//! elsewhere (an admin's cursor reset, another consumer's seek) and
//! reaches the application.
//!
//! A non-durable subscription lives only as long as its consumer: after a
//! reconnect it is made anew, at the first message still queued (the queue
//! is dropped), or right after the last message handed to the application,
//! as Java's `clearReceiverQueue` does; never back at its original start.
//! A chunked message being assembled then would lose the chunks that came
//! before that point, so the broker is asked to start at its first chunk
//! instead, and the boundary still drops what comes again before it.
//!
//! A chunked message is where its last chunk is, as its id says (the Java
//! client's `ChunkMessageId`): a reader that read messages lying between
//! its chunks has not read it, and once it has, resumes after its last
//! chunk. A boundary at a chunked message starts the broker at its first
//! chunk.

use std::cmp::Ordering;

use super::unpack::Unpacked;
use crate::message_id::MessageId;

/// A boundary: messages before `id` (and at it, unless `inclusive`) are
/// dropped on arrival. Messages are measured by their position, a chunked
/// one's last chunk, as its id names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Start {
    pub(crate) id: MessageId,
    pub(crate) inclusive: bool,
    /// Only `id`'s own entry is filtered: a durable subscription's seek
    /// target, where the broker's cursor now is. What comes from before
    /// it comes from a rewind made elsewhere (an admin's reset, another
    /// consumer's seek) and is delivered, as the Java client does.
    entry_only: bool,
}

impl Start {
    /// Whether `id` is at or after the boundary (after it only, unless
    /// inclusive). A whole-entry boundary covers the entry's members.
    pub(crate) fn admits(&self, id: MessageId) -> bool {
        if self.entry_only && id.entry() != self.id.entry() {
            return true;
        }
        let ord = if self.id.is_batch_member() {
            order(id).cmp(&order(self.id))
        } else {
            (id.ledger_id, id.entry_id).cmp(&(self.id.ledger_id, self.id.entry_id))
        };
        ord == Ordering::Greater || (self.inclusive && ord == Ordering::Equal)
    }
}

/// Orders ids of one partition by ledger, entry, batch index.
fn order(id: MessageId) -> (u64, u64, i32) {
    (id.ledger_id, id.entry_id, id.batch_index)
}

/// Whether `id` names a message position (not earliest or latest, which
/// are positions the broker resolves itself).
fn is_message(id: MessageId) -> bool {
    id != MessageId::EARLIEST && id != MessageId::LATEST
}

/// One partition's boundary and the last message it handed out.
#[derive(Debug, Clone, Default)]
pub(crate) struct Position {
    start: Option<Start>,
    /// Earliest or latest, when that is where it started or sought to.
    origin: Option<MessageId>,
    /// A seek set the position: the reconnect it causes keeps it.
    seeking: bool,
    /// Where the broker is asked to start, when that comes before the
    /// boundary (the first chunk of a message being assembled when the
    /// subscription was lost).
    resume: Option<MessageId>,
    /// The last message handed to the application, and its batch's size.
    last: Option<(MessageId, Option<u32>)>,
    /// Drop every id at or before `last`: for a reader, which never
    /// rewinds, such an id is a copy (a broker may dispatch an entry twice).
    drop_seen: bool,
}

impl Position {
    /// Starting at `start` (earliest and latest set no boundary).
    pub(crate) fn new(start: Option<MessageId>, inclusive: bool, drop_seen: bool) -> Self {
        Self {
            start: start.filter(|id| is_message(*id)).map(|id| Start {
                id,
                inclusive,
                entry_only: false,
            }),
            origin: start.filter(|id| !is_message(*id)),
            seeking: false,
            resume: None,
            last: None,
            drop_seen,
        }
    }

    /// Whether a message that ends at `position` (its last chunk, for a
    /// chunked message) may reach the application.
    pub(crate) fn admits(&self, position: MessageId) -> bool {
        if self.drop_seen
            && self
                .last
                .is_some_and(|(last, _)| order(position) <= order(last))
        {
            return false;
        }
        self.start.is_none_or(|start| start.admits(position))
    }

    /// Drops from `unpacked` the messages not admitted; a batch's members
    /// join its skipped ones (they count as acked).
    pub(crate) fn retain(&self, unpacked: &mut Unpacked) {
        let skipped = &mut unpacked.skipped;
        unpacked.messages.retain(|m| {
            let position = m.position();
            let admitted = self.admits(position);
            if !admitted && position.is_batch_member() {
                skipped.push(position.batch_index);
            }
            admitted
        });
    }

    /// The application took the message at `id` (its position: see
    /// `Message::position`), of a batch of `batch_size`, if batched.
    pub(crate) fn handed_out(&mut self, id: MessageId, batch_size: Option<u32>) {
        self.last = Some((id, batch_size));
        // Read from the resume point on: a later reconnect starts after it.
        if self.resume.is_some_and(|r| order(id) >= order(r)) {
            self.resume = None;
        }
    }

    /// The id to subscribe at: the boundary (or before it, to assemble a
    /// chunked message again), or earliest or latest.
    pub(crate) fn start_id(&self) -> Option<MessageId> {
        self.resume
            .or(self.start.map(|s| s.id.start()))
            .or(self.origin)
    }

    /// Whether a message is left to read when `last_in_broker` is the
    /// partition's last message: it is after the last one handed out, or
    /// before any was, admitted by the start (earliest: any message;
    /// latest: none, as Java's reader says until it has read one).
    pub(crate) fn has_more(&self, last_in_broker: MessageId) -> bool {
        let empty = last_in_broker.entry_id == u64::MAX || last_in_broker.ledger_id == u64::MAX;
        if empty {
            return false;
        }
        match (self.last, self.start) {
            (Some((last, _)), _) => order(last_in_broker) > order(last),
            (None, Some(start)) => start.admits(last_in_broker),
            (None, None) => self.origin != Some(MessageId::LATEST),
        }
    }

    /// The subscription moved to `target`: nothing handed out counts any
    /// more, and `target` is the new boundary (none for earliest, latest,
    /// or a publish time). On a `durable` subscription it filters only the
    /// target's own entry (the members before a target member, and the
    /// target unless inclusive), until the next reconnect that is not the
    /// seek's own.
    pub(crate) fn seek(&mut self, target: Option<MessageId>, inclusive: bool, durable: bool) {
        let mut sought = Self::new(target, inclusive, self.drop_seen);
        if let Some(start) = &mut sought.start {
            start.entry_only = durable;
        }
        *self = Self {
            seeking: true,
            ..sought
        };
    }

    /// The SEEK's `ack_set` for `target`: for a batch member whose batch
    /// size is known (the batch last handed out), the members before it
    /// marked acked (bit clear), as Java's `seekAsync` sends; else empty.
    pub(crate) fn seek_ack_set(&self, target: MessageId) -> Vec<i64> {
        let size = match self.last {
            Some((last, Some(size)))
                if target.is_batch_member() && last.entry() == target.entry() =>
            {
                size
            }
            _ => return Vec::new(),
        };
        let from = target.batch_index.max(0) as u32;
        let mut words = vec![0_u64; size.div_ceil(64) as usize];
        for i in from..size {
            words[(i / 64) as usize] |= 1 << (i % 64);
        }
        words.into_iter().map(|w| w as i64).collect()
    }

    /// The subscription was lost. A durable one resumes where the broker
    /// kept its cursor. A non-durable one resumes at the oldest message
    /// still queued (dropped with the queue), `first_queued` (the earliest
    /// id queued, a chunked message's first chunk included, and the queue
    /// front's position), or else right after the last message handed out; and
    /// the broker is asked to start at `first_chunk`, the first chunk of
    /// the oldest chunked message being assembled (dropped too), or at the
    /// resume point of the reconnect before if nothing has been read from
    /// it yet, whichever comes first.
    pub(crate) fn on_reconnect(
        &mut self,
        first_queued: Option<(MessageId, MessageId)>,
        first_chunk: Option<MessageId>,
        durable: bool,
    ) {
        if std::mem::take(&mut self.seeking) {
            return;
        }
        if durable {
            // The broker redelivers what is unacked from its cursor; a
            // seek's target filters nothing any more.
            self.start = None;
            return;
        }
        let at = |id, inclusive| Start {
            id,
            inclusive,
            entry_only: false,
        };
        if let Some((_, position)) = first_queued {
            self.start = Some(at(position, true));
        } else if let Some((position, _)) = self.last {
            self.start = Some(at(position, false));
        }
        // The broker starts at the earliest of: the boundary, the first
        // queued message's id (a chunked one's first chunk), the first
        // chunk being assembled. Nothing before that is lost: what came
        // before it was handed out or is queued.
        // A resume point not reached yet (lost again before the broker
        // sent it) stays one.
        self.resume = [first_queued.map(|(id, _)| id), first_chunk, self.resume]
            .into_iter()
            .flatten()
            .chain(self.start.map(|s| s.id.start()))
            .min_by_key(|id| order(*id))
            .filter(|id| self.start.is_none_or(|s| order(*id) < order(s.id)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admits(start: MessageId, inclusive: bool, id: MessageId) -> bool {
        Position::new(Some(start), inclusive, false).admits(id)
    }

    #[test]
    fn the_start_is_kept_only_when_inclusive() {
        let e = MessageId::new(1, 5);
        assert!(admits(e, true, e));
        assert!(!admits(e, false, e));
        assert!(
            !admits(e, false, e.with_batch_index(2)),
            "an entry start covers its members"
        );
        assert!(admits(e, false, MessageId::new(1, 6)));
        assert!(!admits(e, true, MessageId::new(1, 4)));
        let m = e.with_batch_index(1);
        assert!(!admits(m, true, e.with_batch_index(0)));
        assert!(admits(m, true, m));
        assert!(!admits(m, false, m));
        assert!(admits(m, false, e.with_batch_index(2)));
    }

    #[test]
    fn earliest_and_latest_set_no_boundary() {
        for start in [MessageId::EARLIEST, MessageId::LATEST] {
            let p = Position::new(Some(start), false, false);
            assert_eq!(p.start_id(), Some(start));
            assert!(p.admits(MessageId::new(0, 0)));
        }
    }

    #[test]
    fn a_reader_drops_copies_of_what_it_handed_out() {
        let mut p = Position::new(None, false, true);
        p.handed_out(MessageId::new(3, 7), None);
        assert!(!p.admits(MessageId::new(3, 7)));
        assert!(!p.admits(MessageId::new(3, 6)));
        assert!(p.admits(MessageId::new(3, 8)));
        let mut consumer = Position::new(None, false, false);
        consumer.handed_out(MessageId::new(3, 7), None);
        assert!(consumer.admits(MessageId::new(3, 7)), "a rewind resends it");
    }

    #[test]
    fn non_durable_resumes_at_the_queue_or_after_the_last_handed_out() {
        let start = MessageId::new(1, 0);
        let mut p = Position::new(Some(start), true, false);
        p.on_reconnect(None, None, false);
        assert_eq!(p.start_id(), Some(start), "nothing handed out: the start");
        p.handed_out(MessageId::new(1, 4), None);
        p.on_reconnect(
            Some((MessageId::new(1, 5), MessageId::new(1, 5))),
            None,
            false,
        );
        assert_eq!(p.start_id(), Some(MessageId::new(1, 5)));
        assert!(p.admits(MessageId::new(1, 5)), "the queued one comes again");
        p.on_reconnect(None, None, false);
        assert_eq!(p.start_id(), Some(MessageId::new(1, 4)));
        assert!(!p.admits(MessageId::new(1, 4)));
        assert!(p.admits(MessageId::new(1, 5)));
        let mut durable = Position::new(None, false, false);
        durable.handed_out(MessageId::new(1, 4), None);
        durable.on_reconnect(None, None, true);
        assert_eq!(durable.start_id(), None);
        assert!(durable.admits(MessageId::new(1, 4)), "redelivered unacked");
    }

    #[test]
    fn more_is_there_after_the_last_read_or_from_the_start() {
        let at = |e| MessageId::new(4, e);
        let empty = MessageId::new(4, u64::MAX);
        let mut p = Position::new(Some(MessageId::EARLIEST), false, true);
        assert!(!p.has_more(empty));
        assert!(p.has_more(at(0)));
        p.handed_out(at(3), None);
        assert!(!p.has_more(at(3)));
        assert!(p.has_more(at(4)));
        let latest = Position::new(Some(MessageId::LATEST), false, true);
        assert!(!latest.has_more(at(9)));
        let from = Position::new(Some(at(5)), false, true);
        assert!(!from.has_more(at(5)));
        assert!(Position::new(Some(at(5)), true, true).has_more(at(5)));
        let member = at(5).with_batch_index(2);
        p.handed_out(member, Some(4));
        assert!(p.has_more(at(5).with_batch_index(3)));
        assert!(!p.has_more(member));
    }

    #[test]
    fn a_seek_ack_set_marks_the_members_before_the_target() {
        let entry = MessageId::new(2, 9);
        let mut p = Position::default();
        assert!(p.seek_ack_set(entry.with_batch_index(5)).is_empty());
        p.handed_out(entry.with_batch_index(9), Some(10));
        assert_eq!(p.seek_ack_set(entry.with_batch_index(5)), [0b11_1110_0000]);
        assert_eq!(p.seek_ack_set(entry.with_batch_index(0)), [0b11_1111_1111]);
        assert!(p.seek_ack_set(entry).is_empty(), "a whole entry");
        assert!(
            p.seek_ack_set(MessageId::new(2, 8).with_batch_index(1))
                .is_empty(),
            "another batch: size unknown"
        );
        p.handed_out(entry.with_batch_index(0), Some(70));
        let words = p.seek_ack_set(entry.with_batch_index(64));
        assert_eq!(words, [0, 0b11_1111]);
        p.seek(Some(entry.with_batch_index(5)), false, false);
        p.on_reconnect(
            Some((MessageId::new(1, 1), MessageId::new(1, 1))),
            None,
            false,
        );
        assert_eq!(
            p.start_id(),
            Some(entry.with_batch_index(5)),
            "the reconnect of a seek keeps its target"
        );
        assert!(!p.admits(entry.with_batch_index(5)));
        assert!(p.admits(entry.with_batch_index(6)));
    }

    #[test]
    fn a_chunked_message_is_where_its_last_chunk_is() {
        let at = |e| MessageId::new(1, e);
        let mut reader = Position::new(Some(MessageId::EARLIEST), false, true);
        reader.handed_out(at(2), None);
        assert!(reader.admits(at(3)), "its chunks surround one read");
        assert!(!reader.admits(at(2)), "a copy of what was read");
        reader.handed_out(at(3), None);
        assert!(!reader.admits(at(2)), "read before the chunked message");
        let chunked = at(3).with_first_chunk(at(1));
        let from = Position::new(Some(chunked), false, true);
        assert_eq!(
            from.start_id(),
            Some(at(1)),
            "the broker starts at its first chunk"
        );
        assert!(
            !from.admits(at(3)) && !from.admits(at(2)),
            "a start after a chunked message is after its last chunk"
        );
        assert!(from.admits(at(4)));
        let inclusive = Position::new(Some(chunked), true, true);
        assert!(inclusive.admits(at(3)) && !inclusive.admits(at(2)));
    }

    #[test]
    fn a_second_reconnect_before_anything_came_again_keeps_the_first_ones_start() {
        // A reader held an assembled chunked message (chunks at 1 and 3)
        // and had read 2; the connection is lost twice before the broker
        // sends anything again: the second subscribe must still start at
        // the message's first chunk, or its first chunk never comes back.
        let at = |e| MessageId::new(1, e);
        let mut p = Position::new(Some(MessageId::EARLIEST), false, true);
        p.handed_out(at(2), None);
        p.on_reconnect(Some((at(1), at(3))), None, false);
        assert_eq!(p.start_id(), Some(at(1)));
        p.on_reconnect(None, None, false);
        assert_eq!(p.start_id(), Some(at(1)), "the first chunk still");
        assert!(p.admits(at(3)), "the message comes again");
        assert!(!p.admits(at(2)), "what was read does not");
        p.handed_out(at(3), None);
        p.on_reconnect(None, None, false);
        assert_eq!(p.start_id(), Some(at(3)), "once read, after it");
    }

    #[test]
    fn a_reconnect_starts_at_the_first_chunk_of_a_message_in_assembly() {
        let at = |e| MessageId::new(1, e);
        let mut p = Position::new(Some(MessageId::EARLIEST), false, true);
        p.on_reconnect(None, Some(at(1)), false);
        assert_eq!(p.start_id(), Some(at(1)), "nothing read yet");
        p.handed_out(at(2), None);
        p.on_reconnect(None, Some(at(1)), false);
        assert_eq!(p.start_id(), Some(at(1)));
        assert!(!p.admits(at(2)), "read before the reconnect");
        assert!(p.admits(at(3)), "the message assembled again");
        p.handed_out(at(3), None);
        p.on_reconnect(None, None, false);
        assert_eq!(p.start_id(), Some(at(3)), "after its last chunk");
        assert!(!p.admits(at(3)) && p.admits(at(4)));

        // A consumer's queued chunked message comes again whole, and what
        // was handed out before it does not.
        let mut c = Position::new(None, false, false);
        c.handed_out(at(2), None);
        c.on_reconnect(Some((at(1), at(3))), Some(at(5)), false);
        assert_eq!(
            c.start_id(),
            Some(at(1)),
            "at the queued message's first chunk"
        );
        assert!(!c.admits(at(2)), "handed out before the queued message");
        assert!(c.admits(at(3)) && c.admits(at(4)));
        let mut later = Position::new(None, false, false);
        later.handed_out(at(2), None);
        later.on_reconnect(None, Some(at(7)), false);
        assert_eq!(
            later.start_id(),
            Some(at(2)),
            "the chunk comes after the resume"
        );
    }

    #[test]
    fn a_durable_seek_filters_its_own_entry_until_the_next_reconnect() {
        let target = MessageId::new(1, 10).with_batch_index(3);
        let mut p = Position::default();
        p.seek(Some(target), false, true);
        p.on_reconnect(None, None, true);
        assert!(!p.admits(target.entry().with_batch_index(2)));
        assert!(!p.admits(target), "not inclusive");
        assert!(p.admits(target.entry().with_batch_index(4)));
        assert!(
            p.admits(MessageId::new(1, 5)) && p.admits(MessageId::new(1, 5).with_batch_index(0)),
            "from before the target: a rewind made elsewhere"
        );
        p.on_reconnect(None, None, true);
        assert!(
            p.admits(target),
            "a reconnect not the seek's own ends the filter"
        );
        assert_eq!(p.start_id(), None);
        let mut reader = Position::default();
        reader.seek(Some(target), false, false);
        assert!(
            !reader.admits(MessageId::new(1, 5)),
            "non-durable: the whole boundary"
        );
    }
}
