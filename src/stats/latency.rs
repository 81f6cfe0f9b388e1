//! Send latencies: an HDR histogram of the current interval, one of the
//! whole life, and the percentiles read from them (pure).

use std::time::Duration;

use hdrhistogram::Histogram;

/// Latencies are kept in microseconds with two significant digits (within
/// 1%); longer than an hour counts as an hour.
const MAX_MICROS: u64 = 3_600_000_000;

/// Percentiles of the send latencies (from `send` to the broker's receipt)
/// of the messages the broker stored, as the Java client's
/// `getSendLatencyMillis50pct` … `getSendLatencyMillisMax`. Within 1%.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LatencyPercentiles {
    /// How many latencies were recorded.
    pub count: u64,
    /// The median.
    pub p50: Duration,
    /// The 75th percentile.
    pub p75: Duration,
    /// The 95th percentile.
    pub p95: Duration,
    /// The 99th percentile.
    pub p99: Duration,
    /// The 99.9th percentile.
    pub p999: Duration,
    /// The largest.
    pub max: Duration,
}

/// A growing histogram of microseconds; empty ones take no memory to speak of.
#[derive(Debug, Clone)]
pub(crate) struct Latencies(Histogram<u64>);

impl Default for Latencies {
    fn default() -> Self {
        // Auto-resizing: it grows with the largest latency seen (about
        // 14 KiB for latencies up to a second), never past an hour.
        Self(Histogram::new(2).expect("2 significant digits are valid"))
    }
}

impl Latencies {
    /// Records `latency` (at least 1 µs, at most an hour).
    pub(crate) fn record(&mut self, latency: Duration) {
        let micros = u64::try_from(latency.as_micros())
            .unwrap_or(u64::MAX)
            .clamp(1, MAX_MICROS);
        // Cannot fail: the histogram resizes, and the value is bounded.
        let _ = self.0.record(micros);
    }

    /// Adds every latency of `other`.
    pub(crate) fn add(&mut self, other: &Self) {
        // Cannot fail: this histogram resizes to take `other`'s range.
        let _ = self.0.add(&other.0);
    }

    /// Forgets every latency.
    pub(crate) fn reset(&mut self) {
        self.0.reset();
    }

    /// The percentiles; all zero when nothing was recorded.
    pub(crate) fn percentiles(&self) -> LatencyPercentiles {
        if self.0.is_empty() {
            return LatencyPercentiles::default();
        }
        let at = |q: f64| Duration::from_micros(self.0.value_at_quantile(q));
        LatencyPercentiles {
            count: self.0.len(),
            p50: at(0.50),
            p75: at(0.75),
            p95: at(0.95),
            p99: at(0.99),
            p999: at(0.999),
            max: Duration::from_micros(self.0.max()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_within_one_percent() {
        let mut l = Latencies::default();
        for ms in 1..=1000 {
            l.record(Duration::from_millis(ms));
        }
        let p = l.percentiles();
        assert_eq!(p.count, 1000);
        let close = |got: Duration, want_ms: u64| {
            let want = want_ms as f64 * 1000.0;
            let got = got.as_micros() as f64;
            assert!((got - want).abs() <= want * 0.01, "{got} vs {want}");
        };
        close(p.p50, 500);
        close(p.p95, 950);
        close(p.p99, 990);
        close(p.max, 1000);
    }

    #[test]
    fn empty_is_zero_and_huge_values_are_an_hour() {
        let mut l = Latencies::default();
        assert_eq!(l.percentiles(), LatencyPercentiles::default());
        l.record(Duration::MAX);
        l.record(Duration::ZERO);
        let p = l.percentiles();
        assert_eq!(p.count, 2);
        assert!(p.max >= Duration::from_secs(3590) && p.max <= Duration::from_secs(3640));
        let mut sum = Latencies::default();
        sum.add(&l);
        sum.add(&l);
        assert_eq!(sum.percentiles().count, 4);
        sum.reset();
        assert_eq!(sum.percentiles().count, 0);
    }
}
