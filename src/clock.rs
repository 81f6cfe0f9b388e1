//! The one place this crate reads the clock.
//!
//! Pure modules never read time: they take `now` as an argument. Drivers get
//! it from [`now`], which follows tokio's clock, so tests with a paused clock
//! (`#[tokio::test(start_paused = true)]`) control every timer.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Monotonic now, as tokio sees it (paused and advanced in tests).
pub(crate) fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// Wall-clock milliseconds since the Unix epoch, for `publish_time` and
/// `deliver_at_time`, which the protocol defines in wall time.
#[allow(clippy::disallowed_methods)] // the single sanctioned wall-clock read
pub(crate) fn unix_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
