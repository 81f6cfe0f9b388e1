//! Stats intervals (pure): the totals at the start of the running
//! interval, and what the last complete one counted.
//!
//! No timer runs: an interval closes at the first read once it has lasted
//! the stats interval, so an idle producer or consumer costs nothing, and
//! the rates divide by the time the interval really lasted.

use std::time::{Duration, Instant};

/// Counters that can be subtracted: a total minus the total at an
/// interval's start is what the interval counted.
pub(crate) trait Counts: Copy + Default {
    /// `self - start`, field by field (saturating).
    fn since(&self, start: &Self) -> Self;
}

/// The running interval and the last complete one.
#[derive(Debug)]
pub(crate) struct Intervals<C> {
    length: Duration,
    started: Instant,
    base: C,
    last: Option<(Duration, C)>,
}

impl<C: Counts> Intervals<C> {
    /// Intervals of `length`, the first starting at `now`.
    pub(crate) fn new(length: Duration, now: Instant) -> Self {
        Self {
            length,
            started: now,
            base: C::default(),
            last: None,
        }
    }

    /// Closes the running interval if it has lasted `length` at `now`
    /// (`totals`: the counters now) and starts the next; true if it did.
    pub(crate) fn roll(&mut self, now: Instant, totals: C) -> bool {
        let elapsed = now.saturating_duration_since(self.started);
        if elapsed < self.length {
            return false;
        }
        self.last = Some((elapsed, totals.since(&self.base)));
        self.base = totals;
        self.started = now;
        true
    }

    /// How long the last complete interval lasted and what it counted.
    pub(crate) fn last(&self) -> Option<(Duration, C)> {
        self.last
    }
}

/// `count` per second over `elapsed` (0 for an empty interval).
pub(crate) fn rate(count: u64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 { count as f64 / secs } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy, Default, PartialEq)]
    struct N(u64);

    impl Counts for N {
        fn since(&self, start: &Self) -> Self {
            Self(self.0.saturating_sub(start.0))
        }
    }

    #[test]
    fn an_interval_closes_at_the_first_read_after_its_length() {
        let t0 = crate::clock::now();
        let s = Duration::from_secs;
        let mut iv = Intervals::new(s(60), t0);
        assert!(!iv.roll(t0 + s(59), N(10)));
        assert_eq!(iv.last(), None);
        assert!(iv.roll(t0 + s(61), N(12)));
        assert_eq!(iv.last(), Some((s(61), N(12))));
        // The next one starts at that read, and counts from its totals.
        assert!(!iv.roll(t0 + s(100), N(20)));
        assert_eq!(iv.last(), Some((s(61), N(12))));
        assert!(iv.roll(t0 + s(200), N(32)));
        assert_eq!(iv.last(), Some((s(139), N(20))));
        assert!((rate(20, s(139)) - 20.0 / 139.0).abs() < 1e-9);
        assert_eq!(rate(5, Duration::ZERO), 0.0);
    }

    #[test]
    fn a_zero_length_closes_one_per_read() {
        let t0 = crate::clock::now();
        let mut iv = Intervals::new(Duration::ZERO, t0);
        assert!(iv.roll(t0, N(3)));
        assert!(iv.roll(t0, N(5)));
        assert_eq!(iv.last(), Some((Duration::ZERO, N(2))));
    }
}
