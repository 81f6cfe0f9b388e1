//! The chunk ids of assembled chunked messages, kept until each message is
//! acked, and the acks and redeliveries of such a message turned into
//! acks and redeliveries of all its chunks (pure).

use std::collections::{BTreeMap, HashMap};

use super::super::actions::Action;
use super::ChunkAssembler;
use crate::message_id::MessageId;

/// At most this many assembled messages have their chunk ids remembered
/// for an ack: handed out or queued and not acked yet, or asked for again
/// and gone to another consumer. Past it the oldest assembled is forgotten;
/// an ack of that one names its first chunk only, and its other chunks
/// come back as chunks of no message, acked once the message is older than
/// the incomplete-message expiry (held for the ack timeout without one).
pub(crate) const MAX_REMEMBERED_CHUNKED_MESSAGES: usize = 10_000;

/// At most this many chunk ids are remembered in all (24 MiB of ids), so
/// messages of very many chunks are forgotten as above, oldest first.
pub(crate) const MAX_REMEMBERED_CHUNK_IDS: usize = 1_000_000;

/// Every chunk id of each assembled message, by its first chunk's id.
#[derive(Debug)]
pub(super) struct RememberedChunks {
    /// The chunk ids, with the message's place in `order`.
    by_first: HashMap<MessageId, (u64, Vec<MessageId>)>,
    /// The first chunk ids, in the order of assembly.
    order: BTreeMap<u64, MessageId>,
    next: u64,
    /// Chunk ids remembered in all.
    ids: usize,
    max_messages: usize,
    max_ids: usize,
}

impl RememberedChunks {
    pub(super) fn new() -> Self {
        Self {
            by_first: HashMap::new(),
            order: BTreeMap::new(),
            next: 0,
            ids: 0,
            max_messages: MAX_REMEMBERED_CHUNKED_MESSAGES,
            max_ids: MAX_REMEMBERED_CHUNK_IDS,
        }
    }

    /// Keeps the chunk ids of the message `first` names (as the newest),
    /// forgetting the oldest assembled past the bounds.
    pub(super) fn remember(&mut self, first: MessageId, ids: Vec<MessageId>) {
        self.forget(first);
        let place = self.next;
        self.next += 1;
        self.ids += ids.len();
        self.by_first.insert(first, (place, ids));
        self.order.insert(place, first);
        while self.by_first.len() > self.max_messages || self.ids > self.max_ids {
            let Some((_, oldest)) = self.order.first_key_value() else {
                break;
            };
            let oldest = *oldest;
            self.forget(oldest);
        }
    }

    /// Forgets the chunk ids of the message `first` names; returns them.
    pub(super) fn forget(&mut self, first: MessageId) -> Option<Vec<MessageId>> {
        let (place, ids) = self.by_first.remove(&first)?;
        self.order.remove(&place);
        self.ids -= ids.len();
        Some(ids)
    }

    /// Forgets every message whose first chunk is at or before `upto`.
    pub(super) fn forget_upto(&mut self, upto: MessageId) {
        let covered: Vec<_> = self
            .by_first
            .keys()
            .filter(|first| **first <= upto)
            .copied()
            .collect();
        for first in covered {
            self.forget(first);
        }
    }

    /// The chunk ids of the message `first` names.
    pub(super) fn get(&self, first: MessageId) -> Option<&[MessageId]> {
        self.by_first.get(&first).map(|(_, ids)| ids.as_slice())
    }

    pub(super) fn is_empty(&self) -> bool {
        self.by_first.is_empty()
    }

    /// Messages remembered.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        debug_assert_eq!(self.by_first.len(), self.order.len());
        self.by_first.len()
    }

    /// Chunk ids remembered in all.
    #[cfg(test)]
    pub(super) fn ids(&self) -> usize {
        self.ids
    }

    /// The same, remembering at most `max_messages` messages and
    /// `max_ids` chunk ids.
    #[cfg(test)]
    pub(super) fn at_most(mut self, max_messages: usize, max_ids: usize) -> Self {
        self.max_messages = max_messages;
        self.max_ids = max_ids;
        self
    }
}

impl ChunkAssembler {
    /// The core's action in terms of chunks: an ack or redelivery naming
    /// an assembled message names all its chunks; a cumulative ack of one
    /// goes up to its last chunk. A rewind restarts the assembly. An acked
    /// message's chunk ids are forgotten.
    pub(crate) fn expand<M>(&mut self, action: Action<M>) -> Action<M> {
        if self.assembled.is_empty() {
            if matches!(action, Action::RedeliverAll { .. }) {
                self.restart();
            }
            return action;
        }
        match action {
            Action::Ack {
                ids,
                cumulative: false,
                ack_set,
            } => Action::Ack {
                ids: self.chunks_of(ids, true),
                cumulative: false,
                ack_set,
            },
            Action::Ack {
                ids,
                cumulative: true,
                ack_set,
            } => {
                let upto = ids.iter().copied().max();
                let last = upto.and_then(|u| self.assembled.get(u)?.last().copied());
                if let Some(upto) = upto {
                    self.assembled.forget_upto(upto);
                }
                let ids = match last {
                    Some(last) => vec![last],
                    None => ids,
                };
                Action::Ack {
                    ids,
                    cumulative: true,
                    ack_set,
                }
            }
            Action::Redeliver(ids) => Action::Redeliver(self.chunks_of(ids, false)),
            Action::RedeliverAll { consumer_epoch } => {
                self.restart();
                Action::RedeliverAll { consumer_epoch }
            }
            other => other,
        }
    }

    /// `ids` with each assembled message's id replaced by its chunks' ids
    /// (forgotten if `forget`).
    fn chunks_of(&mut self, ids: Vec<MessageId>, forget: bool) -> Vec<MessageId> {
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let chunks = if forget {
                self.assembled.forget(id)
            } else {
                self.assembled.get(id).map(<[MessageId]>::to_vec)
            };
            match chunks {
                Some(chunks) => out.extend(chunks),
                None => out.push(id),
            }
        }
        out
    }

    /// Assembled messages whose chunk ids are remembered.
    #[cfg(test)]
    pub(crate) fn assembled(&self) -> usize {
        self.assembled.len()
    }

    /// Chunk ids remembered in all.
    #[cfg(test)]
    pub(crate) fn remembered_ids(&self) -> usize {
        self.assembled.ids()
    }

    /// The same, remembering at most `max` assembled messages and
    /// `max_ids` chunk ids.
    #[cfg(test)]
    pub(crate) fn remembering_at_most(mut self, max: usize, max_ids: usize) -> Self {
        self.assembled = self.assembled.at_most(max, max_ids);
        self
    }
}
