//! The last chunks of the chunked messages the application holds (pure).
//!
//! The core keeps a handed-out chunked message under its first chunk, where
//! its acks and redelivery requests start, while the application holds it
//! under its last chunk with the first beside it (`Message::id`). Under an
//! ack timeout the core names the messages whose timeout expired; these
//! ends turn those names into the application's ids. Kept only under an
//! ack timeout, and pruned of messages no longer held whenever the map has
//! doubled since the last pruning, so it never holds more than twice what
//! the application holds.

use std::collections::HashMap;

use crate::message_id::MessageId;

/// First chunk → last chunk, for chunked messages handed out.
#[derive(Debug, Default)]
pub(crate) struct ChunkEnds {
    ends: HashMap<MessageId, MessageId>,
    /// The map's size after the last pruning.
    pruned_at: usize,
}

impl ChunkEnds {
    /// A chunked message starting at `first` and ending at `last` was
    /// handed out; `held` says which ids the application still holds, for
    /// the pruning this may bring.
    pub(crate) fn handed_out(
        &mut self,
        first: MessageId,
        last: MessageId,
        held: impl Fn(MessageId) -> bool,
    ) {
        self.ends.insert(first, last);
        if self.ends.len() > 2 * self.pruned_at.max(8) {
            self.ends.retain(|first, _| held(*first));
            self.pruned_at = self.ends.len();
        }
    }

    /// The id the application holds for the message the core keeps at
    /// `id`: a chunked message's last chunk with its first beside it, or
    /// `id` itself.
    pub(crate) fn shown(&self, id: MessageId) -> MessageId {
        match self.ends.get(&id) {
            Some(last) => last.with_first_chunk(id),
            None => id,
        }
    }

    /// The application holds none of them any more (a reconnect).
    pub(crate) fn clear(&mut self) {
        self.ends.clear();
        self.pruned_at = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunked_message_reads_as_its_last_chunk_with_the_first_beside() {
        let mut ends = ChunkEnds::default();
        let (first, last) = (MessageId::new(1, 1), MessageId::new(1, 3));
        ends.handed_out(first, last, |_| true);
        let shown = ends.shown(first);
        assert_eq!((shown, shown.first_chunk()), (last, Some(first)));
        assert_eq!(ends.shown(MessageId::new(1, 2)), MessageId::new(1, 2));
        ends.clear();
        assert_eq!(ends.shown(first).first_chunk(), None);
    }

    #[test]
    fn messages_no_longer_held_are_pruned_once_the_map_doubled() {
        let mut ends = ChunkEnds::default();
        for entry in 0..1000 {
            let first = MessageId::new(1, 2 * entry);
            // Only the latest two are still held.
            ends.handed_out(first, MessageId::new(1, 2 * entry + 1), |id| {
                id.entry_id + 4 >= 2 * entry
            });
        }
        assert!(ends.ends.len() <= 17, "{} kept", ends.ends.len());
        let latest = MessageId::new(1, 1998);
        assert_eq!(ends.shown(latest).first_chunk(), Some(latest));
    }
}
