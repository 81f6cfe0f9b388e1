//! The one place this crate reads the clock.
//!
//! Pure modules never read time: they take `now` as an argument. Drivers get
//! it from [`now`], which follows tokio's clock, so tests with a paused clock
//! (`#[tokio::test(start_paused = true)]`) control every timer.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How far ahead a deadline can lie: a user's `Duration::MAX` (or any
/// timeout past this) means "never" in practice, and is capped here
/// instead of overflowing `Instant`.
const FAR_FUTURE: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// `at + delay`, saturating at about a century ahead: user-set timeouts
/// and intervals (`Duration::MAX` included) never overflow an `Instant`.
pub(crate) fn after(at: Instant, delay: Duration) -> Instant {
    at.checked_add(delay.min(FAR_FUTURE))
        .or_else(|| at.checked_add(Duration::from_secs(365 * 24 * 3600)))
        .unwrap_or(at)
}

/// Monotonic now, as tokio sees it (paused and advanced in tests).
pub(crate) fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// Wall-clock milliseconds since the Unix epoch, for `publish_time` and
/// `deliver_at_time`, which the protocol defines in wall time.
///
/// It moves with tokio's clock: the system's wall time plus how far
/// tokio's clock is ahead of the real one. That is nothing in a running
/// service, and the time advanced under a paused clock in a test, so the
/// expiry of incomplete chunked messages and delayed deliveries follow
/// virtual time there as every timer does.
#[allow(clippy::disallowed_methods)] // the single sanctioned wall-clock read
pub(crate) fn unix_millis() -> u64 {
    let (virtual_now, real_now) = (now(), Instant::now());
    let system = SystemTime::now();
    let wall = match virtual_now.checked_duration_since(real_now) {
        Some(ahead) => system.checked_add(ahead),
        None => system.checked_sub(real_now.saturating_duration_since(virtual_now)),
    };
    wall.unwrap_or(system)
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn wall_time_moves_with_a_paused_clock() {
        let before = unix_millis();
        tokio::time::advance(Duration::from_secs(3600)).await;
        let after = unix_millis();
        // Only the advance moves it (the real time between the two reads
        // is not virtual time), up to rounding to whole milliseconds.
        assert!(
            (after - before).abs_diff(3_600_000) <= 1,
            "{before} then {after}"
        );
    }

    #[test]
    fn after_saturates_far_ahead() {
        let t0 = now();
        let second = Duration::from_secs(1);
        assert_eq!(after(t0, second), t0 + second);
        assert!(after(t0, Duration::MAX) > t0 + Duration::from_secs(99 * 365 * 24 * 3600));
    }
}
