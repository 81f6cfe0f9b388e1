//! What a consumer remembers about the deliveries of a message that may
//! end in the dead-letter topic (pure): when it handed the message out
//! first and last, and the last error its handler returned. The
//! dead-letter copy carries them as properties.
//!
//! A record lives from the message's first hand-out until it is acked or
//! forwarded; at most [`CAPACITY`] records are kept, the oldest dropped
//! first (a message acked by another consumer of a Shared subscription
//! leaves its record here until then).

use std::collections::{HashMap, VecDeque};

use crate::message_id::MessageId;

/// How many messages' records are kept at most.
pub(crate) const CAPACITY: usize = 10_000;

/// The longest handler error kept, in bytes (cut at a character boundary,
/// with `…` appended).
pub(crate) const MAX_ERROR_BYTES: usize = 1024;

/// What this consumer saw of one message's deliveries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    /// When it was first handed out, ms since the Unix epoch.
    pub(crate) first_delivery_ms: u64,
    /// When it was last handed out, ms since the Unix epoch.
    pub(crate) last_delivery_ms: u64,
    /// The `Display` of the handler's last error, capped.
    pub(crate) last_error: Option<String>,
}

/// Records by message id, in order of first hand-out.
#[derive(Debug)]
pub(crate) struct DeliveryHistory {
    records: HashMap<MessageId, Record>,
    /// Ids in order of first hand-out; may name ids already removed
    /// (compacted when it grows to twice the records).
    order: VecDeque<MessageId>,
    capacity: usize,
}

impl Default for DeliveryHistory {
    fn default() -> Self {
        Self::with_capacity(CAPACITY)
    }
}

impl DeliveryHistory {
    /// A history of at most `capacity` records (at least 1).
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Self {
            records: HashMap::new(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    /// `id` was handed out at `now_ms`.
    pub(crate) fn delivered(&mut self, id: MessageId, now_ms: u64) {
        if let Some(record) = self.records.get_mut(&id) {
            record.last_delivery_ms = now_ms;
            return;
        }
        if self.records.len() >= self.capacity {
            while let Some(oldest) = self.order.pop_front() {
                if self.records.remove(&oldest).is_some() {
                    break;
                }
            }
        }
        self.records.insert(
            id,
            Record {
                first_delivery_ms: now_ms,
                last_delivery_ms: now_ms,
                last_error: None,
            },
        );
        self.order.push_back(id);
        if self.order.len() > 2 * self.capacity {
            let records = &self.records;
            self.order.retain(|id| records.contains_key(id));
        }
    }

    /// The handler failed on `id` with `error` (kept up to
    /// [`MAX_ERROR_BYTES`]).
    pub(crate) fn failed(&mut self, id: MessageId, error: &str) {
        if let Some(record) = self.records.get_mut(&id) {
            record.last_error = Some(capped(error, MAX_ERROR_BYTES));
        }
    }

    /// `id` is done with (acked): its record goes.
    pub(crate) fn settled(&mut self, id: MessageId) {
        if !self.records.is_empty() {
            self.records.remove(&id);
        }
    }

    /// Takes the record of `id` (it is being forwarded).
    pub(crate) fn take(&mut self, id: MessageId) -> Option<Record> {
        self.records.remove(&id)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.records.len()
    }
}

/// `text` cut to at most `max` bytes at a character boundary, with `…`
/// appended when cut.
pub(crate) fn capped(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let ellipsis = '…';
    let mut end = max.saturating_sub(ellipsis.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut cut = text[..end].to_owned();
    cut.push(ellipsis);
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(entry: u64) -> MessageId {
        MessageId::new(1, entry)
    }

    #[test]
    fn first_and_last_hand_out_and_the_last_error_are_kept_until_taken() {
        let mut history = DeliveryHistory::default();
        history.failed(id(1), "not handed out: ignored");
        history.delivered(id(1), 100);
        history.failed(id(1), "first");
        history.delivered(id(1), 250);
        history.failed(id(1), "second");
        let record = history.take(id(1)).expect("recorded");
        assert_eq!(
            record,
            Record {
                first_delivery_ms: 100,
                last_delivery_ms: 250,
                last_error: Some("second".into())
            }
        );
        assert_eq!(history.take(id(1)), None);
    }

    #[test]
    fn an_ack_forgets_and_the_oldest_go_first_past_the_capacity() {
        let mut history = DeliveryHistory::with_capacity(3);
        for n in 0..3 {
            history.delivered(id(n), n);
        }
        history.settled(id(1));
        history.delivered(id(3), 3);
        history.delivered(id(4), 4);
        assert_eq!(history.len(), 3);
        assert!(history.take(id(0)).is_none(), "the oldest was dropped");
        assert!(history.take(id(2)).is_some() && history.take(id(4)).is_some());
        for n in 10..100 {
            history.delivered(id(n), n);
            history.settled(id(n));
        }
        assert!(history.order.len() <= 6, "the order list stays bounded");
    }

    #[test]
    fn a_long_error_is_cut_at_a_character_boundary() {
        assert_eq!(capped("short", 10), "short");
        let long = "é".repeat(600); // 1200 bytes
        let cut = capped(&long, MAX_ERROR_BYTES);
        assert!(cut.len() <= MAX_ERROR_BYTES && cut.ends_with('…'));
        assert!(cut.starts_with("éé"));
    }
}
