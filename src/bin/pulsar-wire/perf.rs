//! `pulsar-wire perf`: the subcommands, and the statistics both share (an
//! HDR latency histogram per second and over the run, the live progress
//! line, the summary).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use hdrhistogram::Histogram;
use tokio::time::Instant;

/// `perf produce`, `perf consume`, `perf latency`, `perf multiplex`, `perf
/// idle` or `perf backlog`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum PerfCommand {
    /// Produce as fast as allowed; latency is send to broker receipt.
    Produce(crate::perf_produce::Args),
    /// Consume and ack each message; latency is publish time to receive.
    Consume(crate::perf_consume::Args),
    /// Publish-to-receive latency at a fixed rate: a producer on a fixed
    /// schedule and a consumer in the same process.
    Latency(crate::perf_latency::Args),
    /// Throughput of many producers or consumers on one connection, or on
    /// one connection each.
    Multiplex(crate::perf_multiplex::Args),
    /// Memory per idle producer or consumer on one connection, and the CPU
    /// time and wake-ups of holding them idle.
    Idle(crate::perf_idle::Args),
    /// Memory of a slow consumer on a topic with a large backlog.
    Backlog(crate::perf_backlog::Args),
}

impl PerfCommand {
    /// Whether the command reads the heap counters (then the allocator
    /// counts from the start).
    pub(crate) const fn counts_allocations(&self) -> bool {
        matches!(self, Self::Idle(_) | Self::Backlog(_))
    }

    /// How many connections per broker the client should open (1 unless
    /// the command spreads its handles over several).
    pub(crate) fn connections_per_broker(&self) -> usize {
        match self {
            Self::Multiplex(args) => args.connections_per_broker(),
            _ => 1,
        }
    }
}

/// How long a run lasts: a message count, a duration, or both (whichever
/// comes first); neither runs until Ctrl-C.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Limits {
    /// Stop after this many messages (0: no limit).
    #[arg(short = 'n', long = "count", default_value_t = 0)]
    pub(crate) count: u64,

    /// Stop after this many seconds (0: no limit).
    #[arg(long, value_name = "SECS", default_value_t = 0.0)]
    pub(crate) duration: f64,

    /// Print a machine-readable summary as one JSON line on stdout.
    #[arg(long)]
    pub(crate) json: bool,
}

impl Limits {
    /// The duration limit, if any (a negative or non-finite one is refused).
    pub(crate) fn deadline(&self, start: Instant) -> Result<Option<Instant>, String> {
        if !self.duration.is_finite() || self.duration < 0.0 {
            return Err(format!(
                "--duration {} is not a number of seconds",
                self.duration
            ));
        }
        Ok((self.duration > 0.0).then(|| start + Duration::from_secs_f64(self.duration)))
    }

    /// Whether `done` messages reach the count limit.
    pub(crate) fn reached(&self, done: u64) -> bool {
        self.count > 0 && done >= self.count
    }
}

/// Counts, bytes and latencies (µs) of a run and of the current second.
#[derive(Debug)]
pub(crate) struct Stats {
    op: &'static str,
    measure: &'static str,
    started: Option<Instant>,
    last: Option<Instant>,
    cpu_start: (f64, f64),
    count: u64,
    bytes: u64,
    total: Histogram<u64>,
    window: Histogram<u64>,
    window_start: Instant,
    window_count: u64,
    window_bytes: u64,
}

/// Stats shared by the task that records and the one that prints.
pub(crate) type SharedStats = Arc<Mutex<Stats>>;

/// Locks `stats`; a panicked holder cannot leave them half-written.
pub(crate) fn lock(stats: &SharedStats) -> std::sync::MutexGuard<'_, Stats> {
    stats.lock().unwrap_or_else(PoisonError::into_inner)
}

fn histogram() -> Histogram<u64> {
    // 1 µs to 1 hour at 3 significant digits; larger values are clamped.
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("constant bounds are valid")
}

impl Stats {
    /// Empty stats; `measure` says what the latency is.
    pub(crate) fn new(op: &'static str, measure: &'static str) -> Self {
        Self {
            op,
            measure,
            started: None,
            last: None,
            cpu_start: cpu_times(),
            count: 0,
            bytes: 0,
            total: histogram(),
            window: histogram(),
            window_start: Instant::now(),
            window_count: 0,
            window_bytes: 0,
        }
    }

    /// Starts the measured interval (wall and CPU time) now.
    pub(crate) fn start(&mut self, now: Instant) {
        self.started = Some(now);
        self.window_start = now;
        self.cpu_start = cpu_times();
    }

    /// Counts one message of `bytes` with `latency`.
    pub(crate) fn record(&mut self, now: Instant, bytes: usize, latency: Duration) {
        let us = u64::try_from(latency.as_micros())
            .unwrap_or(u64::MAX)
            .max(1);
        self.total.saturating_record(us);
        self.window.saturating_record(us);
        self.count += 1;
        self.window_count += 1;
        self.bytes += bytes as u64;
        self.window_bytes += bytes as u64;
        self.last = Some(now);
    }

    /// Messages counted so far.
    pub(crate) fn count(&self) -> u64 {
        self.count
    }

    /// The progress line for the time since the previous one; starts a new window.
    pub(crate) fn progress(&mut self, now: Instant) -> String {
        let secs = now
            .duration_since(self.window_start)
            .as_secs_f64()
            .max(1e-9);
        let elapsed = self
            .started
            .map_or(0.0, |s| now.duration_since(s).as_secs_f64());
        let line = format!(
            "perf {}: {elapsed:7.1} s | {:>10} msgs | {:>10.0} msg/s | {:>7.2} MB/s | {} (ms) p50 {} p99 {} p99.9 {} max {}",
            self.op,
            self.count,
            self.window_count as f64 / secs,
            self.window_bytes as f64 / secs / 1e6,
            self.measure,
            ms(&self.window, 50.0),
            ms(&self.window, 99.0),
            ms(&self.window, 99.9),
            ms(&self.window, 100.0),
        );
        self.window.reset();
        self.window_count = 0;
        self.window_bytes = 0;
        self.window_start = now;
        line
    }

    /// The run's summary: wall time from start to the last message, CPU
    /// time of the whole process over that interval (every thread).
    pub(crate) fn summary(&self, topic: &str, now: Instant) -> serde_json::Value {
        let (user0, sys0) = self.cpu_start;
        let (user1, sys1) = cpu_times();
        let start = self.started.unwrap_or(now);
        let seconds = self
            .last
            .unwrap_or(now)
            .duration_since(start)
            .as_secs_f64()
            .max(1e-9);
        let q = |p: f64| {
            if self.total.is_empty() {
                serde_json::Value::Null
            } else {
                self.total.value_at_quantile(p / 100.0).into()
            }
        };
        serde_json::json!({
            "client": "wire",
            "op": self.op,
            "topic": topic,
            "count": self.count,
            "bytes": self.bytes,
            "seconds": seconds,
            "msgs_per_sec": self.count as f64 / seconds,
            "mb_per_sec": self.bytes as f64 / seconds / 1e6,
            "latency": self.measure,
            "lat_mean_us": if self.total.is_empty() {
                serde_json::Value::Null
            } else {
                self.total.mean().into()
            },
            "lat_p50_us": q(50.0),
            "lat_p95_us": q(95.0),
            "lat_p99_us": q(99.0),
            "lat_p999_us": q(99.9),
            "lat_p9999_us": q(99.99),
            "lat_max_us": q(100.0),
            "cpu_user_s": user1 - user0,
            "cpu_sys_s": sys1 - sys0,
        })
    }

    /// The summary as text for a person (stderr).
    pub(crate) fn summary_text(summary: &serde_json::Value) -> String {
        let f = |k: &str| summary[k].as_f64().unwrap_or(0.0);
        let lat = |k: &str| {
            summary[k]
                .as_f64()
                .map_or_else(|| "-".to_owned(), |us| format!("{:.3}", us / 1000.0))
        };
        format!(
            "perf {} summary: {} msgs in {:.3} s | {:.0} msg/s | {:.2} MB/s | {} (ms) mean {} p50 {} p95 {} p99 {} p99.9 {} p99.99 {} max {} | CPU {:.3} s user + {:.3} s sys",
            summary["op"].as_str().unwrap_or("?"),
            summary["count"],
            f("seconds"),
            f("msgs_per_sec"),
            f("mb_per_sec"),
            summary["latency"].as_str().unwrap_or("latency"),
            lat("lat_mean_us"),
            lat("lat_p50_us"),
            lat("lat_p95_us"),
            lat("lat_p99_us"),
            lat("lat_p999_us"),
            lat("lat_p9999_us"),
            lat("lat_max_us"),
            f("cpu_user_s"),
            f("cpu_sys_s"),
        )
    }
}

/// A percentile of `h` in milliseconds, or `-` when it is empty.
fn ms(h: &Histogram<u64>, percentile: f64) -> String {
    if h.is_empty() {
        "-".into()
    } else {
        format!("{:.3}", h.value_at_percentile(percentile) as f64 / 1000.0)
    }
}

/// Prints a progress line to stderr every second until `stop` resolves.
pub(crate) async fn report_every_second(
    stats: SharedStats,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut stop = stop;
    let mut tick = tokio::time::interval_at(
        Instant::now() + Duration::from_secs(1),
        Duration::from_secs(1),
    );
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let line = lock(&stats).progress(Instant::now());
                eprintln!("{line}");
            }
            _ = stop.changed() => return,
        }
    }
}

/// Prints the summary, with the library's own `figures` (see
/// `perf_stats.rs`): text to stderr, and with `--json` one line to stdout.
pub(crate) fn finish(
    stats: &SharedStats,
    topic: &str,
    json: bool,
    figures: serde_json::Value,
) -> Result<(), crate::BoxError> {
    let mut summary = lock(stats).summary(topic, Instant::now());
    eprintln!("{}", Stats::summary_text(&summary));
    eprintln!("{}", crate::perf_stats::text(&figures));
    summary["stats"] = figures;
    if json {
        crate::print_json(&summary)?;
    }
    Ok(())
}

/// Subscribes a Shared consumer to `topic` that starts at `position`, with
/// a receiver queue of `queue` and acks grouped for `ack_group_ms` (0: each
/// at once).
pub(crate) async fn shared_consumer(
    client: &pulsar_wire::Client,
    topic: &str,
    subscription: &str,
    position: pulsar_wire::consumer::InitialPosition,
    queue: u32,
    ack_group_ms: u64,
) -> Result<pulsar_wire::consumer::Consumer, crate::BoxError> {
    let mut builder = client
        .consumer(topic, subscription)
        .subscription_type(pulsar_wire::consumer::SubscriptionType::Shared)
        .initial_position(position)
        .receiver_queue_size(queue);
    if ack_group_ms > 0 {
        builder = builder.ack_group_time(Duration::from_millis(ack_group_ms));
    }
    Ok(builder.subscribe().await?)
}

/// This process's user and system CPU seconds so far (every thread).
pub(crate) fn cpu_times() -> (f64, f64) {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `usage` is a valid, writable `rusage`; getrusage only writes it.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    if rc != 0 {
        return (0.0, 0.0);
    }
    // SAFETY: zero-initialised, and filled in by the successful call.
    let usage = unsafe { usage.assume_init() };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(usage.ru_utime), secs(usage.ru_stime))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_counts_bytes_and_percentiles() {
        let mut s = Stats::new("produce", "send_to_receipt");
        let t0 = Instant::now();
        s.start(t0);
        for i in 1..=100u64 {
            s.record(
                t0 + Duration::from_millis(i),
                10,
                Duration::from_micros(i * 10),
            );
        }
        let line = s.progress(t0 + Duration::from_secs(1));
        assert!(line.contains("100 msgs"), "{line}");
        let sum = s.summary("t", t0 + Duration::from_secs(5));
        assert_eq!(sum["count"], 100);
        assert_eq!(sum["bytes"], 1000);
        // Wall time runs to the last message, not to when the summary is made.
        assert!((sum["seconds"].as_f64().unwrap() - 0.1).abs() < 1e-6);
        let p50 = sum["lat_p50_us"].as_u64().unwrap();
        assert!((495..=505).contains(&p50), "{p50}");
        assert!(Stats::summary_text(&sum).contains("100 msgs"));
    }

    #[test]
    fn limits_refuse_a_negative_duration() {
        let l = Limits {
            count: 3,
            duration: -1.0,
            json: false,
        };
        assert!(l.deadline(Instant::now()).is_err());
        assert!(!l.reached(2) && l.reached(3));
        let unlimited = Limits {
            count: 0,
            duration: 0.0,
            json: false,
        };
        assert_eq!(unlimited.deadline(Instant::now()), Ok(None));
        assert!(!unlimited.reached(u64::MAX));
    }
}
