//! Negative acks: how long to wait before asking the broker to redeliver a
//! message the application rejected (pure).
//!
//! [`NackPolicy::Immediate`] (the default, as in the Rust reference client)
//! asks at once. [`NackPolicy::FixedDelay`] and [`NackPolicy::Backoff`]
//! (Java's `negativeAckRedeliveryDelay` and `negativeAckRedeliveryBackoff`)
//! hold the request.

use std::time::Duration;

use super::error::ConfigError;

/// A delay that grows with the redelivery count:
/// `min(max, min * multiplier^redelivery_count)`.
///
/// Java's `MultiplierRedeliveryBackoff`. Used for delayed nacks and, added to
/// the ack timeout, for ack-timeout redeliveries.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use pulsar_wire::consumer::nack::RedeliveryBackoff;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
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
}
