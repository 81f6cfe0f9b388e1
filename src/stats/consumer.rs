//! A consumer's statistics: what [`Consumer::stats`](crate::Consumer::stats)
//! returns, and the recorder its task counts into (relaxed atomics, one
//! `fetch_add` per event; a read takes one lock for the interval).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use super::interval::{Counts, Intervals, rate};

/// What a consumer counted, over its life or over one interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsumerCounts {
    /// Messages handed to the application (Java: `getNumMsgsReceived`/`getTotalMsgsReceived`).
    pub messages_received: u64,
    /// Their payload bytes (Java: `getNumBytesReceived`/`getTotalBytesReceived`).
    pub bytes_received: u64,
    /// Acks by the application, individual and cumulative (Java: `getNumAcksSent`/`getTotalAcksSent`).
    pub acks: u64,
    /// Nacks by the application.
    pub nacks: u64,
    /// Messages whose ack timeout expired (asked for again).
    pub ack_timeouts: u64,
    /// Copies the broker stored on the dead-letter topic (Java's
    /// `pulsar.client.consumer.message.dlq`).
    pub dead_letters: u64,
    /// Copies the broker stored on the retry-letter topic
    /// ([`reconsume_later`](crate::Consumer::reconsume_later)).
    pub retries: u64,
}

impl Counts for ConsumerCounts {
    fn since(&self, start: &Self) -> Self {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        Self {
            messages_received: d(self.messages_received, start.messages_received),
            bytes_received: d(self.bytes_received, start.bytes_received),
            acks: d(self.acks, start.acks),
            nacks: d(self.nacks, start.nacks),
            ack_timeouts: d(self.ack_timeouts, start.ack_timeouts),
            dead_letters: d(self.dead_letters, start.dead_letters),
            retries: d(self.retries, start.retries),
        }
    }
}

/// What a consumer counted over the last complete stats interval.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct ConsumerInterval {
    /// How long the interval lasted (at least the client's
    /// [`stats_interval`](crate::ClientBuilder::stats_interval)).
    pub elapsed: Duration,
    /// What it counted.
    pub counts: ConsumerCounts,
}

impl ConsumerInterval {
    /// Messages received per second (Java: `getRateMsgsReceived`).
    pub fn messages_per_second(&self) -> f64 {
        rate(self.counts.messages_received, self.elapsed)
    }

    /// Payload bytes received per second (Java: `getRateBytesReceived`).
    pub fn bytes_per_second(&self) -> f64 {
        rate(self.counts.bytes_received, self.elapsed)
    }
}

/// A consumer's statistics (over all its topics and partitions), read with
/// [`Consumer::stats`](crate::Consumer::stats).
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct ConsumerStats {
    /// Counted since the consumer subscribed.
    pub total: ConsumerCounts,
    /// The last complete stats interval; `None` until one has passed.
    pub interval: Option<ConsumerInterval>,
}

/// Where a consumer's task (and its handles, for retries) count.
#[derive(Debug)]
pub(crate) struct ConsumerRecorder {
    received: AtomicU64,
    received_bytes: AtomicU64,
    acks: AtomicU64,
    nacks: AtomicU64,
    ack_timeouts: AtomicU64,
    dead_letters: AtomicU64,
    retries: AtomicU64,
    intervals: Mutex<Intervals<ConsumerCounts>>,
    #[cfg(feature = "otel")]
    pub(crate) otel: Option<super::otel::ConsumerInstruments>,
}

impl ConsumerRecorder {
    /// A recorder whose intervals last `interval`, starting at `now`.
    pub(crate) fn new(interval: Duration, now: Instant) -> Self {
        let zero = || AtomicU64::new(0);
        Self {
            received: zero(),
            received_bytes: zero(),
            acks: zero(),
            nacks: zero(),
            ack_timeouts: zero(),
            dead_letters: zero(),
            retries: zero(),
            intervals: Mutex::new(Intervals::new(interval, now)),
            #[cfg(feature = "otel")]
            otel: None,
        }
    }

    /// A message of `bytes` was handed to the application.
    pub(crate) fn received(&self, bytes: usize) {
        self.received.fetch_add(1, Relaxed);
        self.received_bytes.fetch_add(bytes as u64, Relaxed);
        #[cfg(feature = "otel")]
        if let Some(otel) = &self.otel {
            otel.received(bytes as u64);
        }
    }

    /// The application acked a message.
    pub(crate) fn acked(&self) {
        self.acks.fetch_add(1, Relaxed);
        #[cfg(feature = "otel")]
        if let Some(otel) = &self.otel {
            otel.acked();
        }
    }

    /// The application nacked a message.
    pub(crate) fn nacked(&self) {
        self.nacks.fetch_add(1, Relaxed);
        #[cfg(feature = "otel")]
        if let Some(otel) = &self.otel {
            otel.nacked();
        }
    }

    /// The ack timeout of `n` messages expired.
    pub(crate) fn timed_out(&self, n: usize) {
        self.ack_timeouts.fetch_add(n as u64, Relaxed);
    }

    /// A copy was stored on the dead-letter (`dead_letter`) or retry topic.
    pub(crate) fn lettered(&self, dead_letter: bool) {
        let counter = if dead_letter {
            &self.dead_letters
        } else {
            &self.retries
        };
        counter.fetch_add(1, Relaxed);
        #[cfg(feature = "otel")]
        if let (true, Some(otel)) = (dead_letter, &self.otel) {
            otel.dead_lettered();
        }
    }

    /// The counters now.
    pub(crate) fn totals(&self) -> ConsumerCounts {
        ConsumerCounts {
            messages_received: self.received.load(Relaxed),
            bytes_received: self.received_bytes.load(Relaxed),
            acks: self.acks.load(Relaxed),
            nacks: self.nacks.load(Relaxed),
            ack_timeouts: self.ack_timeouts.load(Relaxed),
            dead_letters: self.dead_letters.load(Relaxed),
            retries: self.retries.load(Relaxed),
        }
    }

    /// The statistics at `now` (closing the running interval if it is due).
    pub(crate) fn snapshot(&self, now: Instant) -> ConsumerStats {
        let mut intervals = self
            .intervals
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let total = self.totals();
        intervals.roll(now, total);
        ConsumerStats {
            total,
            interval: intervals
                .last()
                .map(|(elapsed, counts)| ConsumerInterval { elapsed, counts }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_counter_and_its_interval() {
        let t0 = crate::clock::now();
        let r = ConsumerRecorder::new(Duration::from_secs(1), t0);
        r.received(10);
        r.received(30);
        r.acked();
        r.nacked();
        r.timed_out(3);
        r.lettered(true);
        r.lettered(false);
        let want = ConsumerCounts {
            messages_received: 2,
            bytes_received: 40,
            acks: 1,
            nacks: 1,
            ack_timeouts: 3,
            dead_letters: 1,
            retries: 1,
        };
        let s = r.snapshot(t0);
        assert_eq!((s.total, s.interval), (want, None));
        r.received(20);
        let s = r.snapshot(t0 + Duration::from_secs(2));
        let iv = s.interval.expect("an interval passed");
        assert_eq!(iv.counts.messages_received, 3);
        assert_eq!(iv.counts.bytes_received, 60);
        assert!((iv.messages_per_second() - 1.5).abs() < 1e-9);
        assert!((iv.bytes_per_second() - 30.0).abs() < 1e-9);
    }
}
