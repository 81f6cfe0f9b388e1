//! In-flight sends, in sequence order, and matching the broker's receipts.
//!
//! Pure: the driver records each SEND here and hands over every
//! SEND_RECEIPT and SEND_ERROR; this queue says whose send it answers. The
//! broker answers a producer's sends in order, so a receipt must name the
//! oldest in-flight entry. As in the Java client's `ackReceived`:
//! - a receipt for an *older* sequence id (the entry already timed out or
//!   was answered) is stale and ignored: [`ReceiptError::Stale`];
//! - a receipt for a *newer* one means the broker and we disagree about
//!   what was sent: [`ReceiptError::OutOfOrder`], and the driver must act
//!   (Java closes the connection and resends what is pending).
//!
//! Each entry keeps what its SEND carried (`S`, the driver's payload), and
//! the queue knows which entries went out on the current connection. After
//! a reconnect, [`Pending::rewind`] makes every entry unsent again, so
//! [`Pending::take_unsent`] hands them out once more in the original order
//! with their original sequence ids; entries queued while the producer was
//! reconnecting wait the same way.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::message_id::MessageId;

/// A receipt or send error that does not answer the oldest in-flight send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ReceiptError {
    /// For a send no longer in flight (timed out, or answered before).
    #[error("receipt for sequence id {got}, not in flight (oldest in flight: {oldest:?})")]
    Stale { got: u64, oldest: Option<u64> },
    /// For a send after the oldest: sends and receipts are out of step.
    #[error("receipt for sequence id {got} while {expected} is the oldest in flight")]
    OutOfOrder { expected: u64, got: u64 },
}

#[derive(Debug)]
struct InFlight<T, S> {
    first: u64,
    last: u64,
    batched: bool,
    bytes: usize,
    sent_at: Instant,
    tokens: Vec<T>,
    send: S,
}

/// The sends of one producer that await the broker's answer.
#[derive(Debug)]
pub(crate) struct Pending<T, S> {
    queue: VecDeque<InFlight<T, S>>,
    /// How many entries at the front went out on the current connection.
    written: usize,
    messages: usize,
    bytes: usize,
}

impl<T, S> Default for Pending<T, S> {
    fn default() -> Self {
        Self {
            queue: VecDeque::new(),
            written: 0,
            messages: 0,
            bytes: 0,
        }
    }
}

impl<T, S> Pending<T, S> {
    /// Records an entry of sequence ids `first..=last` carrying `tokens`
    /// (one per message, in order) and `bytes` of payload, queued at `now`
    /// (its send timeout runs from then, across reconnects); `send` is what
    /// to write for it. It is unsent until [`take_unsent`](Self::take_unsent)
    /// hands it out.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn push(
        &mut self,
        now: Instant,
        first: u64,
        last: u64,
        batched: bool,
        bytes: usize,
        tokens: Vec<T>,
        send: S,
    ) {
        self.messages += tokens.len();
        self.bytes += bytes;
        self.queue.push_back(InFlight {
            first,
            last,
            batched,
            bytes,
            sent_at: now,
            tokens,
            send,
        });
    }

    /// The oldest entry not yet written on the current connection, now
    /// counted as written: `(first sequence id, messages, what to send)`.
    pub(crate) fn take_unsent(&mut self) -> Option<(u64, usize, &S)> {
        let entry = self.queue.get(self.written)?;
        self.written += 1;
        Some((entry.first, entry.tokens.len(), &entry.send))
    }

    /// Takes back the entry [`take_unsent`](Self::take_unsent) handed out
    /// last, because it could not be written at all (too large for the
    /// broker): its tokens, to fail. Receipts then skip it, as the broker
    /// never saw it.
    pub(crate) fn remove_last_taken(&mut self) -> Option<Vec<T>> {
        let index = self.written.checked_sub(1)?;
        let entry = self.queue.remove(index)?;
        self.written = index;
        self.messages -= entry.tokens.len();
        self.bytes -= entry.bytes;
        Some(entry.tokens)
    }

    /// The connection changed: every entry is unsent again, to be written
    /// anew in its original order with its original sequence ids.
    pub(crate) fn rewind(&mut self) {
        self.written = 0;
    }

    /// Entries not yet written on the current connection.
    pub(crate) fn unsent(&self) -> usize {
        self.queue.len() - self.written
    }

    /// Matches a SEND_RECEIPT for `sequence_id` with entry id `id`: each
    /// message of the entry gets its own id (its `batch_index` for a batch).
    pub(crate) fn on_receipt(
        &mut self,
        sequence_id: u64,
        id: MessageId,
    ) -> Result<Vec<(T, MessageId)>, ReceiptError> {
        let entry = self.take_oldest(sequence_id)?;
        let batched = entry.batched;
        Ok(entry
            .tokens
            .into_iter()
            .enumerate()
            .map(|(i, token)| {
                let index = if batched {
                    i32::try_from(i).unwrap_or(i32::MAX)
                } else {
                    -1
                };
                (token, id.with_batch_index(index))
            })
            .collect())
    }

    /// What the oldest entry in flight carries.
    pub(crate) fn oldest(&self) -> Option<&S> {
        self.queue.front().map(|e| &e.send)
    }

    /// Matches a SEND_ERROR for `sequence_id`: the entry's tokens, to fail.
    pub(crate) fn on_send_error(&mut self, sequence_id: u64) -> Result<Vec<T>, ReceiptError> {
        self.take_oldest(sequence_id).map(|e| e.tokens)
    }

    fn take_oldest(&mut self, sequence_id: u64) -> Result<InFlight<T, S>, ReceiptError> {
        let oldest = self.queue.front().map(|e| e.first);
        match oldest {
            Some(expected) if sequence_id == expected => {}
            Some(expected) if sequence_id > expected => {
                return Err(ReceiptError::OutOfOrder {
                    expected,
                    got: sequence_id,
                });
            }
            _ => {
                return Err(ReceiptError::Stale {
                    got: sequence_id,
                    oldest,
                });
            }
        }
        let entry = self.queue.pop_front().expect("checked above");
        self.written = self.written.saturating_sub(1);
        self.messages -= entry.tokens.len();
        self.bytes -= entry.bytes;
        Ok(entry)
    }

    /// When the oldest send times out, given the send timeout.
    pub(crate) fn next_deadline(&self, timeout: Duration) -> Option<Instant> {
        self.queue
            .front()
            .map(|e| crate::clock::after(e.sent_at, timeout))
    }

    /// If the oldest send has waited `timeout` at `now`, fails *every* send
    /// in flight (as Java does: later receipts can no longer be trusted to
    /// come in order) and returns their tokens; otherwise nothing.
    pub(crate) fn expire(&mut self, now: Instant, timeout: Duration) -> Vec<T> {
        match self.next_deadline(timeout) {
            Some(deadline) if deadline <= now => self.drain(),
            _ => Vec::new(),
        }
    }

    /// Takes every in-flight token (the connection or producer is gone).
    pub(crate) fn drain(&mut self) -> Vec<T> {
        self.written = 0;
        self.messages = 0;
        self.bytes = 0;
        self.queue.drain(..).flat_map(|e| e.tokens).collect()
    }

    /// The sequence ids in flight, oldest first, as `(first, last)`.
    pub(crate) fn in_flight(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.queue.iter().map(|e| (e.first, e.last))
    }

    /// Messages in flight.
    #[cfg(test)]
    pub(crate) fn messages(&self) -> usize {
        self.messages
    }

    /// Payload bytes in flight.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Whether nothing is in flight.
    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(entry: u64) -> MessageId {
        MessageId::new(3, entry)
    }

    #[test]
    fn receipts_resolve_in_order_with_batch_indexes() {
        let t0 = crate::clock::now();
        let mut p = Pending::default();
        p.push(t0, 0, 2, true, 30, vec!["a", "b", "c"], ());
        p.push(t0, 3, 3, false, 5, vec!["d"], ());
        assert_eq!((p.messages(), p.bytes()), (4, 35));
        let first = p.on_receipt(0, id(7)).unwrap();
        assert_eq!(
            first,
            [
                ("a", id(7).with_batch_index(0)),
                ("b", id(7).with_batch_index(1)),
                ("c", id(7).with_batch_index(2)),
            ]
        );
        let second = p.on_receipt(3, id(8)).unwrap();
        assert_eq!(second, [("d", id(8))]);
        assert_eq!(second[0].1.batch_index, -1);
        assert!(p.is_empty());
        assert_eq!((p.messages(), p.bytes()), (0, 0));
    }

    #[test]
    fn stale_and_out_of_order_receipts_are_told_apart() {
        let t0 = crate::clock::now();
        let mut p = Pending::default();
        assert_eq!(
            p.on_receipt(5, id(1)),
            Err(ReceiptError::Stale {
                got: 5,
                oldest: None
            })
        );
        p.push(t0, 10, 10, false, 1, vec![1], ());
        p.push(t0, 11, 11, false, 1, vec![2], ());
        assert_eq!(
            p.on_receipt(9, id(1)),
            Err(ReceiptError::Stale {
                got: 9,
                oldest: Some(10)
            })
        );
        assert_eq!(
            p.on_receipt(11, id(1)),
            Err(ReceiptError::OutOfOrder {
                expected: 10,
                got: 11
            })
        );
        // Nothing was taken by the bad receipts.
        assert_eq!(p.in_flight().collect::<Vec<_>>(), [(10, 10), (11, 11)]);
        assert_eq!(p.on_receipt(10, id(1)).unwrap(), [(1, id(1))]);
    }

    #[test]
    fn send_error_fails_exactly_the_oldest_entry() {
        let t0 = crate::clock::now();
        let mut p = Pending::default();
        p.push(t0, 0, 1, true, 2, vec![1, 2], ());
        p.push(t0, 2, 2, false, 1, vec![3], ());
        assert_eq!(p.on_send_error(0).unwrap(), [1, 2]);
        assert_eq!(p.messages(), 1);
        assert!(matches!(
            p.on_send_error(0),
            Err(ReceiptError::Stale { .. })
        ));
    }

    #[test]
    fn a_send_timeout_of_duration_max_never_overflows() {
        let t0 = crate::clock::now();
        let mut p = Pending::default();
        p.push(t0, 0, 0, false, 1, vec![1], ());
        assert!(p.next_deadline(Duration::MAX).is_some_and(|d| d > t0));
        assert!(
            p.expire(t0 + Duration::from_secs(3600), Duration::MAX)
                .is_empty()
        );
    }

    #[test]
    fn the_send_timeout_fails_everything_in_flight() {
        let t0 = crate::clock::now();
        let timeout = Duration::from_secs(30);
        let mut p = Pending::default();
        assert_eq!(p.next_deadline(timeout), None);
        p.push(t0, 0, 0, false, 1, vec![1], ());
        p.push(t0 + Duration::from_secs(10), 1, 1, false, 1, vec![2], ());
        assert_eq!(p.next_deadline(timeout), Some(t0 + timeout));
        assert!(p.expire(t0 + Duration::from_secs(29), timeout).is_empty());
        assert_eq!(p.expire(t0 + timeout, timeout), [1, 2]);
        assert!(p.is_empty());
        assert_eq!(p.next_deadline(timeout), None);
    }

    #[test]
    fn after_a_reconnect_everything_unconfirmed_goes_out_again_in_order() {
        let t0 = crate::clock::now();
        let mut p = Pending::default();
        p.push(t0, 0, 1, true, 2, vec!["a", "b"], "batch 0-1");
        p.push(t0, 2, 2, false, 1, vec!["c"], "single 2");
        assert_eq!(p.take_unsent(), Some((0, 2, &"batch 0-1")));
        assert_eq!(p.take_unsent(), Some((2, 1, &"single 2")));
        assert_eq!(p.take_unsent(), None);
        // The first entry is confirmed, then the connection is lost; one more
        // is queued while reconnecting.
        assert_eq!(p.on_receipt(0, id(1)).unwrap().len(), 2);
        p.push(t0, 3, 3, false, 1, vec!["d"], "single 3");
        assert_eq!(p.unsent(), 1);
        p.rewind();
        assert_eq!(p.unsent(), 2);
        // The new connection gets the unconfirmed entries with their own ids, in order.
        assert_eq!(p.take_unsent(), Some((2, 1, &"single 2")));
        assert_eq!(p.take_unsent(), Some((3, 1, &"single 3")));
        assert_eq!(p.take_unsent(), None);
        assert_eq!(p.on_receipt(2, id(2)).unwrap(), [("c", id(2))]);
        assert_eq!(p.on_receipt(3, id(3)).unwrap(), [("d", id(3))]);
        assert!(p.is_empty());
    }

    #[test]
    fn entries_queued_while_disconnected_stay_unsent_and_a_receipt_keeps_the_cursor() {
        let t0 = crate::clock::now();
        let mut p = Pending::default();
        p.push(t0, 5, 5, false, 1, vec![5], 5);
        p.push(t0, 6, 6, false, 1, vec![6], 6);
        assert_eq!(p.take_unsent().map(|(first, ..)| first), Some(5));
        // A receipt for the written one leaves the unsent one unsent.
        p.on_receipt(5, id(5)).unwrap();
        assert_eq!(p.unsent(), 1);
        assert_eq!(p.take_unsent().map(|(first, ..)| first), Some(6));
        // A skipped-ahead receipt takes nothing: the driver reconnects and
        // the entry is written again after the rewind.
        p.push(t0, 7, 7, false, 1, vec![7], 7);
        p.take_unsent();
        assert!(matches!(
            p.on_receipt(7, id(7)),
            Err(ReceiptError::OutOfOrder {
                expected: 6,
                got: 7
            })
        ));
        p.rewind();
        let again: Vec<u64> = std::iter::from_fn(|| p.take_unsent().map(|(f, ..)| f)).collect();
        assert_eq!(again, [6, 7]);
        // Draining (the producer ends) forgets everything.
        assert_eq!(p.drain(), [6, 7]);
        assert_eq!((p.unsent(), p.take_unsent()), (0, None));
    }

    #[test]
    fn an_entry_that_cannot_be_written_is_taken_back_and_receipts_skip_it() {
        let t0 = crate::clock::now();
        let mut p = Pending::default();
        assert_eq!(p.remove_last_taken(), None);
        p.push(t0, 0, 0, false, 1, vec!["a"], ());
        p.push(t0, 1, 1, false, 9, vec!["huge"], ());
        p.push(t0, 2, 2, false, 1, vec!["c"], ());
        p.take_unsent();
        p.take_unsent();
        assert_eq!(p.remove_last_taken(), Some(vec!["huge"]));
        assert_eq!((p.messages(), p.bytes()), (2, 2));
        assert_eq!(p.take_unsent().map(|(first, ..)| first), Some(2));
        assert_eq!(p.on_receipt(0, id(0)).unwrap(), [("a", id(0))]);
        assert_eq!(p.on_receipt(2, id(2)).unwrap(), [("c", id(2))]);
        assert!(p.is_empty());
    }
}
