//! Longer deadlines for messages a handler still works on (pure): an
//! extension pushes one message's ack-timeout deadline later; a lease
//! keeps pushing it, one ack timeout at a time, until the message is
//! answered or the lease's end is reached. Nothing is sent to the broker:
//! the ack timeout is the client's own timer.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::message_id::MessageId;

use super::ConsumerCore;

/// Leased messages and the instant each lease ends. Holds only messages
/// the application holds: an ack, a nack, a release or a reconnect ends a
/// lease.
#[derive(Debug, Default)]
pub(crate) struct Leases {
    until: HashMap<MessageId, Instant>,
}

impl Leases {
    /// Ends the lease of `id`, if any.
    pub(crate) fn end(&mut self, id: MessageId) {
        // Hashing the id for an empty map would cost every ack.
        if !self.until.is_empty() {
            self.until.remove(&id);
        }
    }

    /// Ends the leases of every id up to `upto` (a cumulative ack).
    pub(crate) fn end_up_to(&mut self, upto: MessageId) {
        if !self.until.is_empty() {
            self.until.retain(|id, _| *id > upto);
        }
    }

    /// Ends every lease.
    pub(crate) fn clear(&mut self) {
        self.until.clear();
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.until.len()
    }
}

impl<M: Clone + super::receiver_queue::QueuedBytes> ConsumerCore<M> {
    /// The application needs longer for `id`: its ack-timeout deadline
    /// moves to `by` from `now`, unless it already lies later. Returns
    /// whether the application holds `id`. O(1).
    pub(crate) fn extend(&mut self, now: Instant, id: MessageId, by: Duration) -> bool {
        self.anchor(now);
        self.held.extend(now, id, by)
    }

    /// Leases `id` until `max_total` from `now`: each time its ack timeout
    /// expires before then, the deadline moves one ack timeout on (at most
    /// to the lease's end) instead of the message being requested again.
    /// Ignored without an ack timeout, or for an id the application does
    /// not hold.
    pub(crate) fn lease(&mut self, now: Instant, id: MessageId, max_total: Duration) {
        self.anchor(now);
        if self.config.ack_timeout.is_some() && self.held.contains(id) {
            let until = crate::clock::after(now, max_total);
            self.leases.until.insert(id, until);
        }
    }

    /// Ends the lease of `id`: its current deadline stays, the next expiry
    /// requests it again.
    pub(crate) fn release(&mut self, id: MessageId) {
        self.leases.end(id);
    }

    /// Of the ids whose ack timeout expired at `now`, puts the leased ones
    /// back under a later deadline and returns the rest.
    pub(super) fn renew_leases(&mut self, now: Instant, expired: Vec<MessageId>) -> Vec<MessageId> {
        let Some(timeout) = self.config.ack_timeout else {
            return expired;
        };
        if self.leases.until.is_empty() {
            return expired;
        }
        let mut due = Vec::with_capacity(expired.len());
        for id in expired {
            match self.leases.until.get(&id) {
                Some(&until) if until > now => {
                    self.held.renew(now, id, timeout.min(until - now));
                }
                Some(_) => {
                    self.leases.until.remove(&id);
                    due.push(id);
                }
                None => due.push(id),
            }
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::consumer::core::ConsumerCore;
    use crate::consumer::core::actions::{Action, Incoming};
    use crate::consumer::core::config::{CoreConfig, SubscriptionType};
    use crate::message_id::MessageId;

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    fn core() -> ConsumerCore<()> {
        ConsumerCore::new(CoreConfig {
            subscription_type: SubscriptionType::Shared,
            ack_timeout: Some(secs(1)),
            ..CoreConfig::default()
        })
        .expect("valid config")
    }

    fn handed_out(core: &mut ConsumerCore<()>, now: std::time::Instant, id: MessageId) {
        core.on_subscribed(now);
        let incoming = Incoming {
            id,
            position: id,
            redelivery_count: 0,
            consumer_epoch: None,
            batch_size: None,
            message: (),
        };
        core.on_message(now, incoming).expect("accepted");
        assert!(core.pop_for_application(now).is_some());
        while core.poll_action().is_some() {}
    }

    /// Every redelivery the core asks for from `from` to `to`, in steps of
    /// the 500 ms tick.
    fn redeliveries(core: &mut ConsumerCore<()>, t0: std::time::Instant, to: u64) -> Vec<u64> {
        let mut at = Vec::new();
        for half in 1..=to * 2 {
            let now = t0 + Duration::from_millis(half * 500);
            core.on_tick(now);
            while let Some(action) = core.poll_action() {
                if matches!(action, Action::Redeliver(_)) {
                    at.push(half * 500);
                }
            }
        }
        at
    }

    #[test]
    fn a_leased_message_is_not_requested_again_until_its_lease_ends() {
        let t0 = crate::clock::now();
        let id = MessageId::new(1, 1);
        let mut leased = core();
        handed_out(&mut leased, t0, id);
        leased.lease(t0, id, secs(10));
        assert_eq!(redeliveries(&mut leased, t0, 12), [10_000]);
        let mut plain = core();
        handed_out(&mut plain, t0, id);
        assert_eq!(redeliveries(&mut plain, t0, 2), [1_000]);
    }

    #[test]
    fn an_ack_or_a_release_ends_a_lease() {
        let t0 = crate::clock::now();
        let (a, b) = (MessageId::new(1, 1), MessageId::new(1, 2));
        let mut core = core();
        handed_out(&mut core, t0, a);
        handed_out(&mut core, t0, b);
        core.lease(t0, a, secs(60));
        core.lease(t0, b, secs(60));
        core.ack(t0, a);
        assert!(matches!(core.poll_action(), Some(Action::Ack { .. })));
        assert_eq!(core.leases.len(), 1);
        core.on_tick(t0 + secs(1));
        assert!(core.poll_action().is_none(), "b is leased");
        core.release(b);
        assert_eq!(
            redeliveries(&mut core, t0, 3),
            [2_000],
            "b at its last deadline"
        );
        assert_eq!(core.leases.len(), 0);
    }

    #[test]
    fn an_extension_moves_one_deadline_once() {
        let t0 = crate::clock::now();
        let id = MessageId::new(1, 1);
        let mut core = core();
        handed_out(&mut core, t0, id);
        assert!(core.extend(t0 + Duration::from_millis(500), id, secs(3)));
        assert_eq!(redeliveries(&mut core, t0, 5), [3_500]);
        assert!(!core.extend(t0, id, secs(3)), "no longer held");
    }

    #[test]
    fn without_an_ack_timeout_nothing_is_leased() {
        let t0 = crate::clock::now();
        let id = MessageId::new(1, 1);
        let mut core = ConsumerCore::<()>::new(CoreConfig::default()).expect("valid");
        handed_out(&mut core, t0, id);
        core.lease(t0, id, secs(10));
        assert_eq!(core.leases.len(), 0);
        assert!(core.extend(t0, id, secs(10)), "held, nothing to move");
    }
}
