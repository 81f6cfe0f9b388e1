//! Pure reconnect backoff: exponential from 100 ms to 60 s, with jitter.
//!
//! Producers and consumers ask it how long to wait before their next
//! reconnect attempt. A success does not start the delays over by itself:
//! only a link that then does some work (a receipt, a message) or stays up
//! for [`STABLE`] does, so a broker that closes every re-created producer or
//! consumer at once (a CLOSE_* ping-pong) meets growing delays instead of a
//! reconnect every 100 ms. It never reads
//! the clock and never sleeps; the jitter source is injected so tests see
//! exact numbers, while the default one spreads clients that lost the same
//! broker at the same moment (no thundering herd on its restart).

use std::fmt;
use std::time::{Duration, Instant};

/// The first delay after a success.
pub(crate) const INITIAL: Duration = Duration::from_millis(100);
/// The longest delay.
pub(crate) const MAX: Duration = Duration::from_secs(60);
/// How long a link must stay up before losing it starts the delays over.
pub(crate) const STABLE: Duration = Duration::from_secs(10);
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
    /// When the link last came up, while it is up.
    up_since: Option<Instant>,
    /// Whether the link did some work since it came up.
    worked: bool,
}

impl fmt::Debug for Backoff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Backoff")
            .field("next", &self.next)
            .field("attempts", &self.attempts)
            .field("up_since", &self.up_since)
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
            up_since: None,
            worked: false,
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

    /// The link came up at `now` (an attempt succeeded). The delays start
    /// over only if it stays up for [`STABLE`] (see [`down`](Self::down)).
    pub(crate) const fn up(&mut self, now: Instant) {
        self.up_since = Some(now);
        self.worked = false;
    }

    /// The link did some work (the broker answered a send, say): losing it
    /// starts the delays over.
    pub(crate) const fn worked(&mut self) {
        self.worked = true;
    }

    /// The link went down at `now`: see [`lost`](Self::lost).
    pub(crate) fn down(&mut self, now: Instant) {
        if let Some(since) = self.up_since.take() {
            self.lost(since, self.worked, now);
        }
    }

    /// A link that came up at `up_since` (and did some work, if `worked`)
    /// went down at `now`. The rule for starting over, for producers and
    /// consumers alike: after some work (a receipt, a message delivered) or
    /// [`STABLE`] up, the next delay is `initial` again; after neither, the
    /// delays keep growing, so a broker that closes every new link at once
    /// meets attempts ever further apart.
    pub(crate) fn lost(&mut self, up_since: Instant, worked: bool, now: Instant) {
        self.up_since = None;
        if worked || now.saturating_duration_since(up_since) >= STABLE {
            self.reset();
        }
    }
}

/// A jitter source seeded from the process's random hasher keys (no clock,
/// no extra dependency): splitmix64, one sequence per backoff. Under a
/// simulation ([`seed_jitter`]) the sequences follow its seed instead.
fn random_jitter() -> Jitter {
    use std::hash::{BuildHasher, Hasher};
    #[cfg(feature = "testing")]
    let seeded = JITTER_SEED.with(|seed| {
        let next = seed.get()?;
        seed.set(Some(next.wrapping_add(1)));
        Some(splitmix64(next))
    });
    #[cfg(not(feature = "testing"))]
    let seeded = None;
    let mut state = seeded.unwrap_or_else(|| {
        std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish()
    });
    Box::new(move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        // 53 random bits → [0, 1).
        (splitmix64(state) >> 11) as f64 / (1u64 << 53) as f64
    })
}

#[cfg(feature = "testing")]
thread_local! {
    /// The seed of the next backoff's jitter made on this thread, while a
    /// simulation runs here.
    static JITTER_SEED: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

/// Makes the jitter of every backoff created on this thread follow `seed`
/// (`None`: random again), so a simulation replays exactly.
#[cfg(feature = "testing")]
pub(crate) fn seed_jitter(seed: Option<u64>) {
    JITTER_SEED.with(|s| s.set(seed));
}

/// splitmix64's output function: a well-mixed 64-bit value of `z` (the
/// generator adds the golden-ratio constant to its state and mixes it).
pub(crate) const fn splitmix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
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
    fn a_link_that_drops_at_once_keeps_the_delays_growing() {
        let t0 = crate::clock::now();
        let mut b = Backoff::new(INITIAL, MAX, no_jitter());
        let mut now = t0;
        let mut delays = Vec::new();
        for _ in 0..5 {
            let delay = b.next_delay();
            delays.push(delay);
            now += delay;
            b.up(now);
            // Closed by the broker right after the re-create.
            now += ms(5);
            b.down(now);
        }
        assert_eq!(delays, [ms(100), ms(200), ms(400), ms(800), ms(1600)]);
    }

    #[test]
    fn a_link_that_stayed_up_starts_the_delays_over() {
        let t0 = crate::clock::now();
        let mut b = Backoff::new(INITIAL, MAX, no_jitter());
        for _ in 0..4 {
            b.next_delay();
        }
        b.up(t0);
        b.down(t0 + STABLE - ms(1));
        assert_eq!(b.next_delay(), ms(1600), "up too briefly: still growing");
        b.up(t0 + STABLE);
        b.down(t0 + STABLE * 2);
        assert_eq!(b.next_delay(), ms(100));
        // Down twice without an up in between changes nothing more.
        b.down(t0 + STABLE * 3);
        assert_eq!(b.next_delay(), ms(200));
        // Up briefly, but it did some work: starts over too.
        b.up(t0 + STABLE * 4);
        b.worked();
        b.down(t0 + STABLE * 4 + ms(1));
        assert_eq!(b.next_delay(), ms(100));
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

    #[test]
    fn a_lost_link_starts_over_after_work_or_a_stable_while_up() {
        let t0 = crate::clock::now();
        let mut b = Backoff::new(ms(100), ms(60_000), no_jitter());
        for _ in 0..3 {
            b.next_delay();
        }
        b.lost(t0, false, t0 + STABLE - ms(1));
        assert_eq!(
            b.next_delay(),
            ms(800),
            "short-lived, no work: still growing"
        );
        b.lost(t0, true, t0 + ms(1));
        assert_eq!(b.next_delay(), ms(100), "it did some work");
        b.next_delay();
        b.lost(t0, false, t0 + STABLE);
        assert_eq!(b.next_delay(), ms(100), "it stayed up long enough");
    }
}
