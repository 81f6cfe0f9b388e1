//! Coalesced rewinds on Exclusive and Failover (pure).
//!
//! There the broker cannot redeliver one message: a redelivery request
//! rewinds the consumer to the first unacked message. Sent at every nack, it
//! would empty the local queue each time and hand the nacked message out
//! again before anything behind it, so one poison message starves the
//! subscription. Instead a nack asks for a rewind that waits:
//! - until the application has taken every message received before it and
//!   asks for more (the local queue is empty when it does); permits are
//!   withheld meanwhile, so the broker stops pushing new messages and the
//!   queue drains;
//! - and at least `min_delay` after the nack that asked for it, so a lone
//!   nacked message loops at most once per `min_delay`.
//!
//! Nacks while a rewind waits join it. The rewind then clears the queue and
//! moves to a new epoch as an immediate one does, and the withheld permits
//! go out with it.

use std::time::{Duration, Instant};

/// A rewind asked for and not sent yet, and what it waits for.
#[derive(Debug, Default)]
pub(crate) struct PendingRewind {
    /// Not before this instant; `None`: no rewind waits.
    due: Option<Instant>,
    /// The application asked for a message and none was queued.
    starved: bool,
    /// Permits given back since the rewind was asked for, not sent yet.
    withheld: u32,
}

impl PendingRewind {
    /// A nack asks for a rewind at `now`; one already waiting keeps its time.
    pub(crate) fn request(&mut self, now: Instant, min_delay: Duration) {
        if self.due.is_none() {
            self.due = Some(now.checked_add(min_delay).unwrap_or(now));
        }
    }

    /// Whether a rewind waits, for tests.
    #[cfg(test)]
    pub(crate) fn is_pending(&self) -> bool {
        self.due.is_some()
    }

    /// Withholds `permits` while a rewind waits; returns those to send now.
    pub(crate) fn withhold(&mut self, permits: u32) -> Option<u32> {
        if self.due.is_none() {
            return Some(permits);
        }
        self.withheld = self.withheld.saturating_add(permits);
        None
    }

    /// The application asked for a message: `found` says whether one was
    /// queued.
    pub(crate) fn on_take(&mut self, found: bool) {
        self.starved = !found;
    }

    /// Whether the rewind is due at `now` with `queued` messages queued.
    pub(crate) fn is_due(&self, now: Instant, queued: usize) -> bool {
        self.starved && queued == 0 && self.due.is_some_and(|due| now >= due)
    }

    /// When the rewind becomes due if nothing else happens: only while the
    /// application waits on an empty queue (otherwise its next take decides).
    pub(crate) fn deadline(&self, queued: usize) -> Option<Instant> {
        self.due.filter(|_| self.starved && queued == 0)
    }

    /// The rewind went out (or a reconnect made it moot): forgets it and
    /// returns the withheld permits. Whether the application waits stays.
    pub(crate) fn take(&mut self) -> u32 {
        self.due = None;
        std::mem::take(&mut self.withheld)
    }

    /// Permits withheld, for tests.
    #[cfg(test)]
    pub(crate) fn withheld(&self) -> u32 {
        self.withheld
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_once_starved_on_an_empty_queue_and_past_the_minimum_delay() {
        let t0 = crate::clock::now();
        let ms = Duration::from_millis;
        let mut rewind = PendingRewind::default();
        rewind.request(t0, ms(100));
        rewind.request(t0 + ms(50), ms(100));
        assert_eq!(rewind.withhold(3), None);
        assert!(
            !rewind.is_due(t0 + ms(200), 0),
            "the application did not ask"
        );
        assert_eq!(rewind.deadline(0), None);
        rewind.on_take(false);
        assert!(!rewind.is_due(t0 + ms(200), 1), "a message is queued");
        assert_eq!(rewind.deadline(1), None);
        assert!(!rewind.is_due(t0 + ms(99), 0), "too soon");
        assert_eq!(
            rewind.deadline(0),
            Some(t0 + ms(100)),
            "the first request's time"
        );
        assert!(rewind.is_due(t0 + ms(100), 0));
        assert_eq!(rewind.take(), 3);
        assert!(!rewind.is_pending());
        assert_eq!(
            rewind.withhold(2),
            Some(2),
            "nothing withheld without a rewind"
        );
    }
}
