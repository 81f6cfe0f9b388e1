//! `--rate`: spacing sends or receives at most so many a second.

use std::time::Duration;

use tokio::time::Instant;

/// Parses a `--rate`: messages a second, 0 or more (0: no limit).
pub(crate) fn rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r.is_finite() && r >= 0.0 => Ok(r),
        _ => Err(format!(
            "expected messages a second, 0 (no limit) or more, got {s:?}"
        )),
    }
}

/// Spaces events at a rate: the n-th starts no sooner than n / rate
/// seconds after the first, so a late one is caught up and none is early.
#[derive(Debug)]
pub(crate) struct Pace {
    rate: f64,
    start: Option<Instant>,
    n: u32,
}

impl Pace {
    /// At most `rate` events a second; 0: no limit.
    pub(crate) fn new(rate: f64) -> Self {
        Self {
            rate,
            start: None,
            n: 0,
        }
    }

    /// Waits until the next event may start. Cancel-safe: dropped before
    /// it returns, it leaves the slot for the next call.
    pub(crate) async fn next(&mut self) {
        if self.rate <= 0.0 {
            return;
        }
        let start = *self.start.get_or_insert_with(Instant::now);
        let due = start + Duration::from_secs_f64(f64::from(self.n) / self.rate);
        tokio::time::sleep_until(due).await;
        self.n = self.n.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_is_zero_or_more_messages_a_second() {
        assert_eq!(rate("0"), Ok(0.0));
        assert_eq!(rate("2.5"), Ok(2.5));
        for bad in ["-1", "x", "inf", "NaN", ""] {
            assert!(rate(bad).is_err(), "{bad}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn events_are_spaced_by_the_rate_from_the_first() {
        let mut pace = Pace::new(10.0);
        let t0 = Instant::now();
        for _ in 0..3 {
            pace.next().await;
        }
        assert_eq!(t0.elapsed(), Duration::from_millis(200));
        let mut unlimited = Pace::new(0.0);
        let t1 = Instant::now();
        for _ in 0..1000 {
            unlimited.next().await;
        }
        assert_eq!(t1.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_given_up_keeps_its_slot() {
        let mut pace = Pace::new(10.0);
        let t0 = Instant::now();
        pace.next().await; // the first, at once
        let early = tokio::time::timeout(Duration::from_millis(50), pace.next()).await;
        assert!(early.is_err(), "the second is due at 100 ms");
        pace.next().await;
        assert_eq!(t0.elapsed(), Duration::from_millis(100), "the same slot");
    }
}
