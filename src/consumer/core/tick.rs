//! A grid of timer ticks shared by the consumer's timers (pure).
//!
//! Tick `k` happens at `origin + k * tick`. A deadline is rounded *up* to
//! the grid, so something due at `d` fires at the first tick at or after
//! `d`; a check at `now` fires every tick at or before `now`. The origin is
//! set by the first caller that passes an instant (or explicitly with
//! [`TickGrid::anchor`]), so two timers anchored at the same instant fire on
//! the same ticks and their work can go out together.

use std::time::{Duration, Instant};

/// Tick arithmetic in whole nanoseconds (`u64`: 584 years).
#[derive(Debug, Clone, Copy)]
pub(crate) struct TickGrid {
    origin: Option<Instant>,
    tick_nanos: u64,
}

impl TickGrid {
    /// A grid of `tick`-long steps, not yet anchored. A zero tick is
    /// treated as one nanosecond.
    pub(crate) fn new(tick: Duration) -> Self {
        Self {
            origin: None,
            tick_nanos: nanos(tick).max(1),
        }
    }

    /// Puts tick 0 at `origin`, unless the grid is already anchored.
    pub(crate) fn anchor(&mut self, origin: Instant) {
        self.origin.get_or_insert(origin);
    }

    /// The first tick at or after `now + delay`, anchoring at `now` if
    /// needed; `None` when that is too far away to represent (never).
    pub(crate) fn due_tick(&mut self, now: Instant, delay: Duration) -> Option<u64> {
        let origin = *self.origin.get_or_insert(now);
        let delay = u64::try_from(delay.as_nanos()).ok()?;
        let at = nanos(now.saturating_duration_since(origin)).checked_add(delay)?;
        let tick = at.div_ceil(self.tick_nanos);
        // The top two values stay free as sentinels for callers.
        tick.checked_mul(self.tick_nanos)?;
        (tick < u64::MAX - 1).then_some(tick)
    }

    /// The last tick at or before `now`: everything due at or before it is
    /// due now. `None` before the grid is anchored.
    pub(crate) fn current_tick(&self, now: Instant) -> Option<u64> {
        let origin = self.origin?;
        Some(nanos(now.saturating_duration_since(origin)) / self.tick_nanos)
    }

    /// When tick `tick` happens, if that is representable.
    pub(crate) fn instant(&self, tick: u64) -> Option<Instant> {
        let offset = tick.checked_mul(self.tick_nanos)?;
        self.origin?.checked_add(Duration::from_nanos(offset))
    }
}

/// A duration in nanoseconds, saturating at `u64::MAX`.
pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn deadlines_round_up_and_checks_round_down() {
        let t0 = crate::clock::now();
        let mut grid = TickGrid::new(ms(500));
        assert_eq!(grid.current_tick(t0), None, "not anchored yet");
        assert_eq!(grid.due_tick(t0, ms(10_000)), Some(20), "exactly on a tick");
        assert_eq!(grid.due_tick(t0 + ms(300), ms(10_000)), Some(21));
        assert_eq!(grid.current_tick(t0 + ms(10_499)), Some(20));
        assert_eq!(grid.current_tick(t0 + ms(10_500)), Some(21));
        assert_eq!(grid.instant(21), Some(t0 + ms(10_500)));
    }

    #[test]
    fn first_anchor_wins_and_earlier_instants_clamp_to_origin() {
        let t0 = crate::clock::now();
        let mut grid = TickGrid::new(ms(100));
        grid.anchor(t0 + ms(50));
        grid.anchor(t0 + ms(999));
        assert_eq!(grid.due_tick(t0, ms(100)), Some(1));
        assert_eq!(grid.current_tick(t0), Some(0));
    }

    #[test]
    fn unrepresentable_deadlines_are_never() {
        let t0 = crate::clock::now();
        let mut grid = TickGrid::new(Duration::ZERO);
        assert_eq!(grid.due_tick(t0, Duration::MAX), None);
        assert_eq!(
            grid.due_tick(t0, ms(1)),
            Some(1_000_000),
            "zero tick = 1 ns"
        );
    }
}
