//! Batch receive: [`BatchReceivePolicy`], what one
//! [`Consumer::receive_batch`](super::Consumer::receive_batch) waits for,
//! and [`Messages`], what it returns.

use std::time::Duration;

use super::error::ConsumerError;
use super::message::{MESSAGE_OVERHEAD, Message};

/// What one [`receive_batch`](super::Consumer::receive_batch) waits for:
/// it returns once `max_messages` are queued, or `max_bytes` of payload,
/// or `timeout` after it was called (with what is there then, maybe
/// nothing). `None` leaves that bound out; at least one must be set.
///
/// The default is 100 messages, 10 MiB, 100 ms. The byte and time bounds
/// are Java's `BatchReceivePolicy.DEFAULT_POLICY`; its message count is
/// not: Java's default sets no count (a batch takes what the queue holds,
/// up to 10 MiB), this client's default takes at most 100. `max_messages`
/// above the receiver queue is lowered to it (the queue could never hold
/// more), as Java does.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use pulsar_wire::consumer::BatchReceivePolicy;
/// let policy = BatchReceivePolicy::default();
/// assert_eq!(policy.max_messages, Some(100));
/// assert_eq!(policy.max_bytes, Some(10 * 1024 * 1024));
/// assert_eq!(policy.timeout, Some(Duration::from_millis(100)));
/// let big = BatchReceivePolicy { max_messages: Some(500), ..policy };
/// # drop(big);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchReceivePolicy {
    /// At most this many messages per batch.
    pub max_messages: Option<usize>,
    /// At most this many payload bytes per batch; a batch holds at least
    /// one message, however large.
    pub max_bytes: Option<usize>,
    /// How long a batch receive waits for the other bounds.
    pub timeout: Option<Duration>,
}

impl Default for BatchReceivePolicy {
    fn default() -> Self {
        Self {
            max_messages: Some(100),
            max_bytes: Some(10 * 1024 * 1024),
            timeout: Some(Duration::from_millis(100)),
        }
    }
}

impl BatchReceivePolicy {
    /// Refuses a policy without any bound (a receive that could wait
    /// forever for nothing in particular). A zero bound counts as none.
    pub(crate) fn validate(&self) -> Result<(), ConsumerError> {
        let bounded = self.max_messages.is_some_and(|n| n > 0)
            || self.max_bytes.is_some_and(|n| n > 0)
            || self.timeout.is_some_and(|t| !t.is_zero());
        if bounded {
            Ok(())
        } else {
            Err(ConsumerError::UnboundedBatchReceive)
        }
    }

    /// The policy as the driver applies it: zero bounds left out and the
    /// message bound lowered to `queue` (the messages the consumer can
    /// queue at once).
    pub(crate) fn effective(self, queue: usize) -> Self {
        let max_messages = self
            .max_messages
            .filter(|n| *n > 0)
            .map(|n| n.min(queue.max(1)));
        Self {
            max_messages,
            max_bytes: self.max_bytes.filter(|n| *n > 0),
            timeout: self.timeout.filter(|t| !t.is_zero()),
        }
    }

    /// Whether `queued` messages the receiver queue counts as `bytes` fill
    /// a batch.
    pub(crate) fn is_full(&self, queued: usize, bytes: usize) -> bool {
        let payload = payload_of(queued, bytes);
        self.max_messages.is_some_and(|n| queued >= n)
            || self.max_bytes.is_some_and(|n| payload >= n)
    }

    /// Whether a message the receiver queue counts as `bytes` may join a
    /// batch of `count` messages it counts as `total` (the first always
    /// may).
    pub(crate) fn fits(&self, count: usize, total: usize, bytes: usize) -> bool {
        let (total, bytes) = (payload_of(count, total), payload_of(1, bytes));
        count == 0
            || (self.max_messages.is_none_or(|n| count < n)
                && self
                    .max_bytes
                    .is_none_or(|n| total.saturating_add(bytes) <= n))
    }
}

/// The payload bytes of `count` messages the receiver queue counts as
/// `bytes`: it counts each with [`MESSAGE_OVERHEAD`], which a batch's byte
/// bound leaves out (it bounds payload, as Java's `maxNumBytes`).
fn payload_of(count: usize, bytes: usize) -> usize {
    bytes.saturating_sub(count.saturating_mul(MESSAGE_OVERHEAD))
}

/// The messages one [`receive_batch`](super::Consumer::receive_batch)
/// returned, oldest first per partition; acked together with
/// [`ack_all`](super::Consumer::ack_all). Derefs to a slice of
/// [`Message`]s.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Messages(pub(crate) Vec<Message>);

impl Messages {
    /// The messages, owned.
    pub fn into_vec(self) -> Vec<Message> {
        self.0
    }
}

impl std::ops::Deref for Messages {
    type Target = [Message];

    fn deref(&self) -> &[Message] {
        &self.0
    }
}

impl IntoIterator for Messages {
    type Item = Message;
    type IntoIter = std::vec::IntoIter<Message>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a Messages {
    type Item = &'a Message;
    type IntoIter = std::slice::Iter<'a, Message>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the receiver queue counts for `n` messages of `payload` bytes
    /// in all.
    fn counted(n: usize, payload: usize) -> usize {
        payload + n * MESSAGE_OVERHEAD
    }

    #[test]
    fn a_batch_is_full_at_either_bound_and_always_takes_one() {
        let policy = BatchReceivePolicy {
            max_messages: Some(3),
            max_bytes: Some(100),
            timeout: None,
        };
        assert!(!policy.is_full(2, counted(2, 99)), "payload bytes only");
        assert!(policy.is_full(3, counted(3, 0)));
        assert!(policy.is_full(1, counted(1, 100)));
        let first = counted(1, 1_000);
        assert!(policy.fits(0, 0, first), "the first message always fits");
        assert!(policy.fits(1, counted(1, 50), counted(1, 50)));
        let past = counted(1, 51);
        assert!(!policy.fits(1, counted(1, 50), past), "past the byte bound");
        assert!(
            !policy.fits(3, counted(3, 0), counted(1, 0)),
            "past the message bound"
        );
    }

    #[test]
    fn the_message_bound_is_lowered_to_the_queue_and_zero_bounds_are_none() {
        let policy = BatchReceivePolicy::default().effective(10);
        assert_eq!(policy.max_messages, Some(10));
        let policy = BatchReceivePolicy {
            max_messages: Some(0),
            max_bytes: Some(0),
            timeout: Some(Duration::from_secs(1)),
        };
        assert!(policy.validate().is_ok());
        let effective = policy.effective(10);
        assert_eq!((effective.max_messages, effective.max_bytes), (None, None));
        assert!(
            !effective.is_full(1_000, 1 << 30),
            "only the timeout ends it"
        );
        let unbounded = BatchReceivePolicy {
            max_messages: None,
            max_bytes: Some(0),
            timeout: Some(Duration::ZERO),
        };
        assert!(matches!(
            unbounded.validate(),
            Err(ConsumerError::UnboundedBatchReceive)
        ));
    }
}
