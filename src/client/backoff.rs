//! Pure reconnect backoff: exponential from 100 ms to 60 s, with jitter.
//!
//! Producers and consumers ask it how long to wait before their next
//! reconnect attempt, and reset it once an attempt succeeds. It never reads
//! the clock and never sleeps; the jitter source is injected so tests see
//! exact numbers, while the default one spreads clients that lost the same
//! broker at the same moment (no thundering herd on its restart).

use std::fmt;
use std::time::Duration;

/// The first delay after a success.
pub(crate) const INITIAL: Duration = Duration::from_millis(100);
/// The longest delay.
pub(crate) const MAX: Duration = Duration::from_secs(60);
/// How much of a delay the jitter may take off (a tenth, as the Java client).
const JITTER_SHARE: f64 = 0.1;

/// A source of jitter: each call returns a fraction in `[0, 1)`.
pub(crate) type Jitter = Box<dyn FnMut() -> f64 + Send + Sync>;

/// Exponential backoff state of one handle (producer or consumer partition).
pub(crate) struct Backoff {
    initial: Duration,
    max: Duration,
    next: Duration,
    attempts: u32,
    jitter: Jitter,
}

impl fmt::Debug for Backoff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Backoff")
            .field("next", &self.next)
            .field("attempts", &self.attempts)
            .finish_non_exhaustive()
    }
}

impl Default for Backoff {
    /// 100 ms → 60 s, jitter from a per-instance pseudo-random sequence.
    fn default() -> Self {
        Self::new(INITIAL, MAX, random_jitter())
    }
}

impl Backoff {
    /// Delays start at `initial`, double per attempt, and stop growing at
    /// `max`; each is shortened by up to a tenth, as `jitter` says.
    pub(crate) fn new(initial: Duration, max: Duration, jitter: Jitter) -> Self {
        Self {
            initial,
            max: max.max(initial),
            next: initial,
            attempts: 0,
            jitter,
        }
    }

    /// The delay before the next attempt (never below `initial`, never above
    /// `max`); the one after it doubles.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let base = self.next;
        self.next = self.next.saturating_mul(2).min(self.max);
        self.attempts = self.attempts.saturating_add(1);
        let fraction = (self.jitter)().clamp(0.0, 1.0);
        let cut = base.mul_f64(JITTER_SHARE * fraction);
        base.saturating_sub(cut).max(self.initial)
    }

    /// How many delays were handed out since the last reset.
    pub(crate) const fn attempts(&self) -> u32 {
        self.attempts
    }

    /// An attempt succeeded: the next delay is `initial` again.
    pub(crate) fn reset(&mut self) {
        self.next = self.initial;
        self.attempts = 0;
    }
}

/// A jitter source seeded from the process's random hasher keys (no clock,
/// no extra dependency): splitmix64, one sequence per backoff.
fn random_jitter() -> Jitter {
    use std::hash::{BuildHasher, Hasher};
    let mut state = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    Box::new(move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        // 53 random bits → [0, 1).
        (z >> 11) as f64 / (1u64 << 53) as f64
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn no_jitter() -> Jitter {
        Box::new(|| 0.0)
    }

    #[test]
    fn doubles_from_100ms_and_stops_at_60s() {
        let mut b = Backoff::new(INITIAL, MAX, no_jitter());
        let delays: Vec<_> = (0..12).map(|_| b.next_delay()).collect();
        assert_eq!(
            delays,
            [
                ms(100),
                ms(200),
                ms(400),
                ms(800),
                ms(1600),
                ms(3200),
                ms(6400),
                ms(12_800),
                ms(25_600),
                ms(51_200),
                ms(60_000),
                ms(60_000),
            ]
        );
        assert_eq!(b.attempts(), 12);
    }

    #[test]
    fn a_max_of_duration_max_never_overflows() {
        let mut b = Backoff::new(Duration::MAX / 3, Duration::MAX, no_jitter());
        for _ in 0..4 {
            b.next_delay();
        }
        assert_eq!(b.next_delay(), Duration::MAX);
    }

    #[test]
    fn reset_after_success_starts_over() {
        let mut b = Backoff::new(INITIAL, MAX, no_jitter());
        for _ in 0..5 {
            b.next_delay();
        }
        b.reset();
        assert_eq!(b.attempts(), 0);
        assert_eq!(b.next_delay(), ms(100));
        assert_eq!(b.next_delay(), ms(200));
    }

    #[test]
    fn jitter_takes_off_at_most_a_tenth_and_never_goes_below_initial() {
        let mut values = [0.5, 0.999_999, 1.5, -3.0].into_iter();
        let mut b = Backoff::new(INITIAL, MAX, Box::new(move || values.next().unwrap_or(0.0)));
        // 100 ms minus 5 ms would be below the initial delay: clamped.
        assert_eq!(b.next_delay(), ms(100));
        // 200 ms minus (almost) 20 ms.
        let second = b.next_delay();
        assert!(second > ms(180) && second < ms(181), "{second:?}");
        // Out-of-range fractions are clamped to [0, 1].
        assert_eq!(b.next_delay(), ms(360));
        assert_eq!(b.next_delay(), ms(800));
    }

    #[test]
    fn the_default_jitter_stays_in_range_and_varies() {
        let mut jitter = random_jitter();
        let values: Vec<f64> = (0..1000).map(|_| jitter()).collect();
        assert!(values.iter().all(|v| (0.0..1.0).contains(v)));
        let first = values[0];
        assert!(values.iter().any(|v| *v != first));
        let mut b = Backoff::default();
        for _ in 0..20 {
            let d = b.next_delay();
            assert!(d >= INITIAL && d <= MAX, "{d:?}");
        }
    }
}
