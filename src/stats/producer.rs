//! A producer's statistics: what [`Producer::stats`](crate::producer::Producer::stats)
//! returns, and the recorder its partitions' tasks count into.
//!
//! Counters are relaxed atomics (one `fetch_add` each per send and per
//! receipt, no lock); the latencies of one receipt's messages go into the
//! histogram under one uncontended lock, taken once per receipt.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use super::interval::{Counts, Intervals, rate};
use super::latency::{Latencies, LatencyPercentiles};

/// What a producer counted, over its life or over one interval. Sends
/// count once answered: stored (`messages_sent`) or failed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProducerCounts {
    /// Messages the broker stored (Java: `getNumMsgsSent`/`getTotalMsgsSent`).
    pub messages_sent: u64,
    /// Their payload bytes (Java: `getNumBytesSent`/`getTotalBytesSent`).
    pub bytes_sent: u64,
    /// Messages whose send failed (Java: `getNumSendFailed`/`getTotalSendFailed`).
    pub send_failures: u64,
    /// Receipts from the broker: one per entry (a batch is one entry; Java:
    /// `getNumAcksReceived`/`getTotalAcksReceived`).
    pub receipts: u64,
}

impl Counts for ProducerCounts {
    fn since(&self, start: &Self) -> Self {
        Self {
            messages_sent: self.messages_sent.saturating_sub(start.messages_sent),
            bytes_sent: self.bytes_sent.saturating_sub(start.bytes_sent),
            send_failures: self.send_failures.saturating_sub(start.send_failures),
            receipts: self.receipts.saturating_sub(start.receipts),
        }
    }
}

/// What a producer counted over the last complete stats interval.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct ProducerInterval {
    /// How long the interval lasted (at least the client's
    /// [`stats_interval`](crate::ClientBuilder::stats_interval)).
    pub elapsed: Duration,
    /// What it counted.
    pub counts: ProducerCounts,
    /// The send latencies of the messages stored in it.
    pub send_latency: LatencyPercentiles,
}

impl ProducerInterval {
    /// Messages stored per second (Java: `getSendMsgsRate`).
    pub fn messages_per_second(&self) -> f64 {
        rate(self.counts.messages_sent, self.elapsed)
    }

    /// Payload bytes stored per second (Java: `getSendBytesRate`).
    pub fn bytes_per_second(&self) -> f64 {
        rate(self.counts.bytes_sent, self.elapsed)
    }
}

/// A producer's statistics (every partition's), read with
/// [`Producer::stats`](crate::producer::Producer::stats).
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct ProducerStats {
    /// Counted since the producer was created.
    pub total: ProducerCounts,
    /// The send latencies since the producer was created.
    pub send_latency: LatencyPercentiles,
    /// Messages queued or in flight, not answered yet (Java: `getPendingQueueSize`).
    pub pending_messages: u64,
    /// Their payload bytes.
    pub pending_bytes: u64,
    /// The last complete stats interval; `None` until one has passed.
    pub interval: Option<ProducerInterval>,
}

/// Where a producer's tasks count; shared with its handle.
#[derive(Debug)]
pub(crate) struct ProducerRecorder {
    queued: AtomicU64,
    queued_bytes: AtomicU64,
    sent: AtomicU64,
    sent_bytes: AtomicU64,
    failed: AtomicU64,
    failed_bytes: AtomicU64,
    receipts: AtomicU64,
    window: Mutex<Window>,
    #[cfg(feature = "otel")]
    pub(crate) otel: Option<super::otel::ProducerInstruments>,
}

#[derive(Debug)]
struct Window {
    intervals: Intervals<ProducerCounts>,
    running: Latencies,
    total: Latencies,
    last: LatencyPercentiles,
}

impl ProducerRecorder {
    /// A recorder whose intervals last `interval`, starting at `now`.
    pub(crate) fn new(interval: Duration, now: Instant) -> Self {
        Self {
            queued: AtomicU64::new(0),
            queued_bytes: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            sent_bytes: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            failed_bytes: AtomicU64::new(0),
            receipts: AtomicU64::new(0),
            window: Mutex::new(Window {
                intervals: Intervals::new(interval, now),
                running: Latencies::default(),
                total: Latencies::default(),
                last: LatencyPercentiles::default(),
            }),
            #[cfg(feature = "otel")]
            otel: None,
        }
    }

    /// A send of `bytes` was taken by a partition's task.
    pub(crate) fn queued(&self, bytes: usize) {
        self.queued.fetch_add(1, Relaxed);
        self.queued_bytes.fetch_add(bytes as u64, Relaxed);
        #[cfg(feature = "otel")]
        if let Some(otel) = &self.otel {
            otel.queued(bytes as u64);
        }
    }

    /// One receipt stored `sends` (when each was queued, its bytes), at `now`.
    pub(crate) fn stored(&self, now: Instant, sends: impl Iterator<Item = (Instant, usize)>) {
        let (mut n, mut bytes) = (0u64, 0u64);
        {
            let mut window = lock(&self.window);
            for (queued_at, size) in sends {
                let latency = now.saturating_duration_since(queued_at);
                window.running.record(latency);
                #[cfg(feature = "otel")]
                if let Some(otel) = &self.otel {
                    otel.answered(latency, size as u64, true);
                }
                n += 1;
                bytes += size as u64;
            }
        }
        self.receipts.fetch_add(1, Relaxed);
        self.sent.fetch_add(n, Relaxed);
        self.sent_bytes.fetch_add(bytes, Relaxed);
    }

    /// `sends` (when each was queued, its bytes) failed at `now`.
    pub(crate) fn failed(&self, now: Instant, sends: impl Iterator<Item = (Instant, usize)>) {
        let (mut n, mut bytes) = (0u64, 0u64);
        for (_queued_at, size) in sends {
            #[cfg(feature = "otel")]
            if let Some(otel) = &self.otel {
                let latency = now.saturating_duration_since(_queued_at);
                otel.answered(latency, size as u64, false);
            }
            n += 1;
            bytes += size as u64;
        }
        let _ = now;
        self.failed.fetch_add(n, Relaxed);
        self.failed_bytes.fetch_add(bytes, Relaxed);
    }

    /// The counters now, without the latencies.
    pub(crate) fn totals(&self) -> ProducerCounts {
        ProducerCounts {
            messages_sent: self.sent.load(Relaxed),
            bytes_sent: self.sent_bytes.load(Relaxed),
            send_failures: self.failed.load(Relaxed),
            receipts: self.receipts.load(Relaxed),
        }
    }

    /// Messages and bytes not answered yet.
    pub(crate) fn pending(&self) -> (u64, u64) {
        // Answers are loaded first: a send is queued before it is
        // answered, so this never goes below zero for long.
        let answered = self.sent.load(Relaxed) + self.failed.load(Relaxed);
        let answered_bytes = self.sent_bytes.load(Relaxed) + self.failed_bytes.load(Relaxed);
        let queued = self.queued.load(Relaxed);
        let queued_bytes = self.queued_bytes.load(Relaxed);
        (
            queued.saturating_sub(answered),
            queued_bytes.saturating_sub(answered_bytes),
        )
    }

    /// The statistics at `now` (closing the running interval if it is due).
    pub(crate) fn snapshot(&self, now: Instant) -> ProducerStats {
        let mut window = lock(&self.window);
        let total = self.totals();
        let w = &mut *window;
        if w.intervals.roll(now, total) {
            w.last = w.running.percentiles();
            w.total.add(&w.running);
            w.running.reset();
        }
        let mut life = w.total.clone();
        life.add(&w.running);
        let (pending_messages, pending_bytes) = self.pending();
        ProducerStats {
            total,
            send_latency: life.percentiles(),
            pending_messages,
            pending_bytes,
            interval: w
                .intervals
                .last()
                .map(|(elapsed, counts)| ProducerInterval {
                    elapsed,
                    counts,
                    send_latency: w.last,
                }),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_pending_latency_and_intervals() {
        let t0 = crate::clock::now();
        let ms = Duration::from_millis;
        let r = ProducerRecorder::new(Duration::from_secs(10), t0);
        for _ in 0..3 {
            r.queued(100);
        }
        r.stored(t0 + ms(4), [(t0, 100), (t0 + ms(2), 100)].into_iter());
        let s = r.snapshot(t0 + ms(5));
        assert_eq!(s.total.messages_sent, 2);
        assert_eq!(s.total.bytes_sent, 200);
        assert_eq!(s.total.receipts, 1);
        assert_eq!((s.pending_messages, s.pending_bytes), (1, 100));
        assert_eq!(s.send_latency.count, 2);
        let max = s.send_latency.max;
        assert!(
            max >= ms(4) && max <= ms(4) * 101 / 100,
            "4 ms within 1%: {max:?}"
        );
        assert_eq!(s.interval, None);

        r.failed(t0 + ms(6), [(t0, 100)].into_iter());
        let s = r.snapshot(t0 + Duration::from_secs(10));
        assert_eq!((s.pending_messages, s.pending_bytes), (0, 0));
        let iv = s.interval.expect("one interval passed");
        assert_eq!(iv.counts.messages_sent, 2);
        assert_eq!(iv.counts.send_failures, 1);
        assert_eq!(iv.send_latency.count, 2);
        assert!((iv.messages_per_second() - 0.2).abs() < 1e-9);
        assert!((iv.bytes_per_second() - 20.0).abs() < 1e-9);

        // The next interval counts only what came after.
        r.queued(50);
        r.stored(
            t0 + Duration::from_secs(11),
            [(t0 + Duration::from_secs(10), 50)].into_iter(),
        );
        let s = r.snapshot(t0 + Duration::from_secs(21));
        let iv = s.interval.expect("a second interval passed");
        assert_eq!(iv.counts.messages_sent, 1);
        assert_eq!(iv.counts.bytes_sent, 50);
        assert_eq!(iv.send_latency.count, 1);
        assert_eq!(s.total.messages_sent, 3);
        assert_eq!(s.send_latency.count, 3);
    }
}
