//! Negative acks: how long to wait before asking the broker to redeliver a
//! message the application rejected (pure).
//!
//! [`NackPolicy::Immediate`] (the default, as in the Rust reference client)
//! asks at once. [`NackPolicy::FixedDelay`] and [`NackPolicy::Backoff`]
//! (Java's `negativeAckRedeliveryDelay` and `negativeAckRedeliveryBackoff`)
//! hold the request; requests due on the same tick leave together, in one
//! `CommandRedeliverUnacknowledgedMessages`.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use crate::message_id::MessageId;

use super::tick::TickGrid;
use crate::consumer::error::ConfigError;

/// A delay that grows with the redelivery count:
/// `min(max, min * multiplier^redelivery_count)`.
///
/// Java's `MultiplierRedeliveryBackoff`. Used for delayed nacks and, added to
/// the ack timeout, for ack-timeout redeliveries.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use pulsar_wire::consumer::RedeliveryBackoff;
/// let backoff = RedeliveryBackoff::new(Duration::from_secs(1), Duration::from_secs(60), 2.0)?;
/// assert_eq!(backoff.delay(0), Duration::from_secs(1));
/// assert_eq!(backoff.delay(3), Duration::from_secs(8));
/// assert_eq!(backoff.delay(10), Duration::from_secs(60));
/// # Ok::<(), pulsar_wire::consumer::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RedeliveryBackoff {
    /// The delay of a message delivered for the first time (count 0).
    pub min: Duration,
    /// The longest delay.
    pub max: Duration,
    /// The factor applied per redelivery (at least 1).
    pub multiplier: f64,
}

impl Default for RedeliveryBackoff {
    /// Java's defaults: 1 s, doubling, at most 60 s.
    fn default() -> Self {
        Self {
            min: Duration::from_secs(1),
            max: Duration::from_secs(60),
            multiplier: 2.0,
        }
    }
}

impl RedeliveryBackoff {
    /// A validated backoff.
    ///
    /// # Errors
    /// [`ConfigError::InvalidBackoff`] when `min > max`, or `multiplier` is
    /// below 1 or not finite.
    pub fn new(min: Duration, max: Duration, multiplier: f64) -> Result<Self, ConfigError> {
        let backoff = Self {
            min,
            max,
            multiplier,
        };
        backoff.validate()?;
        Ok(backoff)
    }

    /// Checks the fields (for a backoff built field by field).
    ///
    /// # Errors
    /// As [`RedeliveryBackoff::new`].
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.min > self.max || !self.multiplier.is_finite() || self.multiplier < 1.0 {
            return Err(ConfigError::InvalidBackoff {
                min: self.min,
                max: self.max,
                multiplier: self.multiplier,
            });
        }
        Ok(())
    }

    /// The delay for a message delivered `redelivery_count` times before:
    /// `min(max, min * multiplier^redelivery_count)`. Never panics, even on
    /// an unvalidated backoff (a result that is not a duration becomes `max`).
    pub fn delay(&self, redelivery_count: u32) -> Duration {
        let factor = self.multiplier.powf(f64::from(redelivery_count));
        Duration::try_from_secs_f64(self.min.as_secs_f64() * factor)
            .map_or(self.max, |d| d.min(self.max))
    }
}

/// When a nacked message is requested again.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum NackPolicy {
    /// At once (the default).
    #[default]
    Immediate,
    /// After a fixed delay (Java's `negativeAckRedeliveryDelay`).
    FixedDelay(Duration),
    /// After a delay growing with the redelivery count.
    Backoff(RedeliveryBackoff),
}

impl NackPolicy {
    /// How long to hold the redelivery request of a message nacked after
    /// `redelivery_count` earlier redeliveries.
    pub fn delay(&self, redelivery_count: u32) -> Duration {
        match self {
            Self::Immediate => Duration::ZERO,
            Self::FixedDelay(delay) => *delay,
            Self::Backoff(backoff) => backoff.delay(redelivery_count),
        }
    }

    /// Checks the backoff, if any.
    ///
    /// # Errors
    /// [`ConfigError::InvalidBackoff`], see [`RedeliveryBackoff::new`].
    pub fn validate(&self) -> Result<(), ConfigError> {
        match self {
            Self::Backoff(backoff) => backoff.validate(),
            Self::Immediate | Self::FixedDelay(_) => Ok(()),
        }
    }
}

/// What [`NackTracker::nack`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Nacked {
    /// Ask the broker now.
    Now,
    /// Held until a later tick (or it already was).
    Held,
}

/// Nacks held until their tick: a tick-keyed map of ids, plus each held id's
/// tick so an ack can withdraw it in O(ids due on that tick).
#[derive(Debug)]
pub(crate) struct NackTracker {
    policy: NackPolicy,
    grid: TickGrid,
    due: BTreeMap<u64, Vec<MessageId>>,
    held: HashMap<MessageId, u64>,
}

impl NackTracker {
    /// A tracker applying `policy`, rounding delays up to `tick`.
    pub(crate) fn new(policy: NackPolicy, tick: Duration) -> Self {
        Self {
            policy,
            grid: TickGrid::new(tick),
            due: BTreeMap::new(),
            held: HashMap::new(),
        }
    }

    /// Puts tick 0 of this tracker's grid at `origin` (if not yet anchored).
    pub(crate) fn anchor(&mut self, origin: Instant) {
        self.grid.anchor(origin);
    }

    /// Records a nack of `id` at `now`.
    pub(crate) fn nack(&mut self, now: Instant, id: MessageId, redelivery_count: u32) -> Nacked {
        if self.held.contains_key(&id) {
            return Nacked::Held;
        }
        let delay = self.policy.delay(redelivery_count);
        if delay.is_zero() {
            return Nacked::Now;
        }
        // Too far away to represent: hold it until a rewind or an ack.
        let tick = self.grid.due_tick(now, delay).unwrap_or(u64::MAX);
        self.due.entry(tick).or_default().push(id);
        self.held.insert(id, tick);
        Nacked::Held
    }

    /// Withdraws a held nack (the message was acked); whether one was held.
    pub(crate) fn cancel(&mut self, id: MessageId) -> bool {
        let Some(tick) = self.held.remove(&id) else {
            return false;
        };
        if let Some(ids) = self.due.get_mut(&tick) {
            ids.retain(|held| *held != id);
            if ids.is_empty() {
                self.due.remove(&tick);
            }
        }
        true
    }

    /// Withdraws every held nack of an id at or before `upto` (a cumulative
    /// ack); returns the withdrawn ids.
    pub(crate) fn cancel_up_to(&mut self, upto: MessageId) -> Vec<MessageId> {
        if self.held.is_empty() {
            return Vec::new();
        }
        self.held.retain(|id, _| *id > upto);
        let mut cancelled = Vec::new();
        self.due.retain(|_, ids| {
            ids.retain(|id| {
                *id > upto || {
                    cancelled.push(*id);
                    false
                }
            });
            !ids.is_empty()
        });
        cancelled
    }

    /// Whether a nack of `id` is held.
    pub(crate) fn contains(&self, id: MessageId) -> bool {
        self.held.contains_key(&id)
    }

    /// Takes every nack due at or before `now`, oldest tick first.
    pub(crate) fn expire(&mut self, now: Instant) -> Vec<MessageId> {
        let Some(current) = self.grid.current_tick(now) else {
            return Vec::new();
        };
        let later = self.due.split_off(&current.saturating_add(1));
        let due = std::mem::replace(&mut self.due, later);
        let ids: Vec<MessageId> = due.into_values().flatten().collect();
        for id in &ids {
            self.held.remove(id);
        }
        ids
    }

    /// The tick of the earliest held nack.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        let (&tick, _) = self.due.first_key_value()?;
        self.grid.instant(tick)
    }

    /// Forgets every held nack (a rewind or reconnect redelivers them anyway).
    pub(crate) fn clear(&mut self) {
        self.due.clear();
        self.held.clear();
    }

    /// How many nacks are held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.held.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn id(entry: u64) -> MessageId {
        MessageId::new(1, entry)
    }

    #[test]
    fn backoff_follows_the_formula_and_clamps() {
        let b = RedeliveryBackoff::new(ms(100), ms(1000), 3.0).unwrap();
        let delays: Vec<u64> = (0..5).map(|n| b.delay(n).as_millis() as u64).collect();
        assert_eq!(delays, [100, 300, 900, 1000, 1000]);
        assert_eq!(b.delay(u32::MAX), ms(1000), "overflow clamps to max");
    }

    #[test]
    fn invalid_backoffs_are_typed_errors() {
        for (min, max, mult) in [
            (ms(2), ms(1), 2.0),
            (ms(1), ms(2), 0.5),
            (ms(1), ms(2), f64::NAN),
        ] {
            let err = RedeliveryBackoff::new(min, max, mult).unwrap_err();
            assert!(matches!(err, ConfigError::InvalidBackoff { .. }), "{err}");
        }
        let unvalidated = RedeliveryBackoff {
            min: ms(5),
            max: ms(1),
            multiplier: f64::INFINITY,
        };
        assert_eq!(unvalidated.delay(1), ms(1), "no panic on a bad backoff");
    }

    #[test]
    fn immediate_policy_never_holds() {
        let mut nacks = NackTracker::new(NackPolicy::Immediate, ms(500));
        assert_eq!(nacks.nack(crate::clock::now(), id(1), 7), Nacked::Now);
        assert_eq!(nacks.len(), 0);
        assert_eq!(nacks.next_deadline(), None);
    }

    #[test]
    fn nacks_due_on_one_tick_leave_together() {
        let t0 = crate::clock::now();
        let mut nacks = NackTracker::new(NackPolicy::FixedDelay(ms(1000)), ms(500));
        assert_eq!(nacks.nack(t0, id(1), 0), Nacked::Held);
        assert_eq!(nacks.nack(t0 + ms(200), id(2), 0), Nacked::Held);
        assert_eq!(nacks.nack(t0 + ms(400), id(3), 0), Nacked::Held);
        assert_eq!(nacks.next_deadline(), Some(t0 + ms(1000)));
        assert!(nacks.expire(t0 + ms(999)).is_empty());
        assert_eq!(nacks.expire(t0 + ms(1000)), [id(1)]);
        // Due at 1200 and 1400: both on the 1500 tick.
        assert_eq!(nacks.next_deadline(), Some(t0 + ms(1500)));
        assert_eq!(nacks.expire(t0 + ms(1700)), [id(2), id(3)]);
        assert_eq!((nacks.len(), nacks.next_deadline()), (0, None));
    }

    #[test]
    fn backoff_policy_delays_by_redelivery_count() {
        let t0 = crate::clock::now();
        let backoff = RedeliveryBackoff::new(ms(1000), ms(8000), 2.0).unwrap();
        let mut nacks = NackTracker::new(NackPolicy::Backoff(backoff), ms(500));
        nacks.nack(t0, id(1), 2);
        assert_eq!(nacks.next_deadline(), Some(t0 + ms(4000)));
    }

    #[test]
    fn an_ack_withdraws_a_held_nack_and_frees_its_tick() {
        let t0 = crate::clock::now();
        let mut nacks = NackTracker::new(NackPolicy::FixedDelay(ms(1000)), ms(500));
        nacks.nack(t0, id(1), 0);
        nacks.nack(t0, id(2), 0);
        assert_eq!(nacks.nack(t0, id(2), 0), Nacked::Held, "held once");
        assert!(nacks.cancel(id(1)));
        assert!(!nacks.cancel(id(1)));
        assert!(nacks.contains(id(2)));
        assert_eq!(nacks.cancel_up_to(id(5)), [id(2)]);
        assert_eq!((nacks.len(), nacks.due.len()), (0, 0));
        assert!(nacks.expire(t0 + ms(5000)).is_empty());
    }
}
