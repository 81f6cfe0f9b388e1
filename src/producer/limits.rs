//! Bounds on what a producer holds: pending messages and bytes per
//! producer, and the client-wide memory limit.
//!
//! Pure counters: a send takes its share before it is queued and gives it
//! back when its receipt, error or timeout resolves it. When a bound is hit
//! the caller either waits (the driver parks the send until a release) or
//! fails at once with [`LimitExceeded`], as [`WhenFull`] says.

/// What `send` does when a bound is reached.
///
/// # Examples
/// ```no_run
/// use pulsar_wire::producer::{LimitExceeded, ProducerError, WhenFull};
/// # async fn demo(client: pulsar_wire::Client) -> Result<(), pulsar_wire::Error> {
/// let producer = client.producer("t").when_full(WhenFull::Fail).create().await?;
/// match producer.send("x").await {
///     Err(ProducerError::Full(LimitExceeded::Memory { used, limit, .. })) => {
///         println!("shedding load: {used} of {limit} bytes pending");
///     }
///     other => { other?.await?; }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum WhenFull {
    /// Wait until enough pending sends are resolved (the default); for the
    /// memory limit, at most the send timeout, then fail with a typed error.
    #[default]
    Block,
    /// Fail at once with a typed error.
    Fail,
}

/// The client-wide memory limit by default: 64 MiB of pending payload.
///
/// # Examples
/// ```
/// assert_eq!(pulsar_wire::producer::DEFAULT_MEMORY_LIMIT, 64 << 20);
/// ```
pub const DEFAULT_MEMORY_LIMIT: usize = 64 * 1024 * 1024;

/// Which bound a send would exceed.
///
/// # Examples
/// ```
/// use pulsar_wire::producer::LimitExceeded;
/// let e = LimitExceeded::PendingMessages { max: 1000 };
/// assert_eq!(e.to_string(), "producer queue is full: 1000 messages pending");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LimitExceeded {
    /// The producer already has `max` messages pending.
    #[error("producer queue is full: {max} messages pending")]
    PendingMessages {
        /// The bound.
        max: usize,
    },
    /// The client's pending payload would pass its memory limit.
    #[error("client memory limit reached: {used} of {limit} bytes in use, {wanted} more wanted")]
    Memory {
        /// Bytes in use.
        used: usize,
        /// The limit.
        limit: usize,
        /// Bytes the refused send needs.
        wanted: usize,
    },
}

/// A message and byte budget: the per-producer pending bound, or (with no
/// message bound) the client-wide memory limit.
#[derive(Debug, Clone)]
pub(crate) struct Budget {
    max_messages: Option<usize>,
    max_bytes: Option<usize>,
    messages: usize,
    bytes: usize,
}

impl Budget {
    /// A budget of at most `max_messages` messages and `max_bytes` bytes
    /// (`None`: unbounded).
    pub(crate) fn new(max_messages: Option<usize>, max_bytes: Option<usize>) -> Self {
        Self {
            max_messages,
            max_bytes,
            messages: 0,
            bytes: 0,
        }
    }

    /// Takes one message of `bytes`, or says which bound it would pass.
    ///
    /// A single message larger than the whole byte budget is let through
    /// when nothing else is held, so it can never wait forever (Java's
    /// `MemoryLimitController` does the same for one oversized send).
    pub(crate) fn try_acquire(&mut self, bytes: usize) -> Result<(), LimitExceeded> {
        if let Some(max) = self.max_messages {
            if self.messages >= max {
                return Err(LimitExceeded::PendingMessages { max });
            }
        }
        if let Some(limit) = self.max_bytes {
            if self.bytes > 0 && self.bytes.saturating_add(bytes) > limit {
                return Err(LimitExceeded::Memory {
                    used: self.bytes,
                    limit,
                    wanted: bytes,
                });
            }
        }
        self.messages += 1;
        self.bytes += bytes;
        Ok(())
    }

    /// Takes one message of `bytes` regardless of the bounds (the caller
    /// checked for room before taking the message; one may overshoot).
    pub(crate) fn force_acquire(&mut self, bytes: usize) {
        self.messages += 1;
        self.bytes += bytes;
    }

    /// Gives back `messages` messages holding `bytes` bytes.
    pub(crate) fn release(&mut self, messages: usize, bytes: usize) {
        self.messages = self.messages.saturating_sub(messages);
        self.bytes = self.bytes.saturating_sub(bytes);
    }

    /// Messages held.
    pub(crate) fn messages(&self) -> usize {
        self.messages
    }

    /// Bytes held.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_bound_refuses_then_frees() {
        let mut b = Budget::new(Some(2), None);
        b.try_acquire(10).unwrap();
        b.try_acquire(10).unwrap();
        assert_eq!(
            b.try_acquire(1),
            Err(LimitExceeded::PendingMessages { max: 2 })
        );
        b.release(1, 10);
        b.try_acquire(1).unwrap();
        assert_eq!((b.messages(), b.bytes()), (2, 11));
    }

    #[test]
    fn byte_bound_refuses_but_lets_one_oversized_message_through_alone() {
        let mut b = Budget::new(None, Some(100));
        b.try_acquire(500).unwrap();
        assert_eq!(
            b.try_acquire(1),
            Err(LimitExceeded::Memory {
                used: 500,
                limit: 100,
                wanted: 1
            })
        );
        b.release(1, 500);
        b.try_acquire(60).unwrap();
        b.try_acquire(40).unwrap();
        assert!(b.try_acquire(1).is_err());
        b.release(5, 1_000);
        assert_eq!((b.messages(), b.bytes()), (0, 0));
    }

    #[test]
    fn errors_name_the_bound() {
        let e = LimitExceeded::Memory {
            used: 1,
            limit: 2,
            wanted: 3,
        };
        assert!(e.to_string().contains("memory limit"));
        assert_eq!(WhenFull::default(), WhenFull::Block);
    }
}
