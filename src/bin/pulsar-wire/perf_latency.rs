//! `pulsar-wire perf latency`: publish-to-receive latency at a fixed rate.
//!
//! A producer sends `--rate` messages per second on a schedule fixed at the
//! start (message n's slot is start + n / rate), from a thread of its own
//! that sleeps until the next slot and sends every message whose slot has
//! come. A late send does not move the later slots: a slow moment shows up
//! as latency and as late sends, not as a lower rate. A consumer in the
//! same process receives and acks each message (a Shared subscription:
//! pulsar-lite dispatches some entries twice on Exclusive ones). A message's latency is its
//! receive instant minus its slot (the payload's first 8 bytes carry its
//! sequence number, little-endian), so it includes the time the sender
//! fell behind. Messages of the warm-up are sent and received, not counted.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use futures::FutureExt;
use pulsar_wire::Client;
use pulsar_wire::consumer::{Consumer, InitialPosition};
use pulsar_wire::producer::{Producer, ProducerMessage, SendReceipt};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::BoxError;

/// Arguments of `perf latency`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The topic (a full name, or a short one in public/default); a new
    /// one for each run, since the consumer starts at its end.
    topic: String,

    /// Messages per second, on a fixed schedule.
    #[arg(short = 'r', long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    rate: u64,

    /// Payload size in bytes (at least 8: the sequence number).
    #[arg(short = 's', long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(8..=5_000_000))]
    size: u64,

    /// Seconds measured, after the warm-up.
    #[arg(long, value_name = "SECS", default_value_t = 20.0)]
    duration: f64,

    /// Seconds sent first and not counted.
    #[arg(long, value_name = "SECS", default_value_t = 2.0)]
    warmup: f64,

    /// Batch messages (off by default: each message is a SEND frame).
    #[arg(long)]
    batch: bool,

    /// With --batch: the longest a batch waits for more messages, in ms.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    batch_max_delay_ms: u64,

    /// The subscription name.
    #[arg(long, default_value = "pulsar-wire-perf-latency")]
    subscription: String,

    /// How many messages the broker may push ahead of the application.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    receiver_queue: u32,

    /// Send acks together, one ACK frame per this many milliseconds (0:
    /// each at once); 100 is the C++ client's default.
    #[arg(long, value_name = "MS", default_value_t = 100)]
    ack_group_ms: u64,

    /// Seconds to wait, after the last send, for the last messages.
    #[arg(long, value_name = "SECS", default_value_t = 30.0)]
    drain_timeout: f64,

    /// Print the summary as one JSON line on stdout.
    #[arg(long)]
    json: bool,
}

/// When each message is due.
#[derive(Debug, Clone, Copy)]
struct Schedule {
    origin: Instant,
    interval: Duration,
    /// Messages of the warm-up (sequence numbers below this).
    warmup: u64,
    /// Messages in all.
    total: u64,
}

impl Schedule {
    fn new(origin: Instant, rate: u64, warmup_s: f64, duration_s: f64) -> Result<Self, String> {
        for (name, secs) in [("--warmup", warmup_s), ("--duration", duration_s)] {
            if !(0.0..=86_400.0).contains(&secs) {
                return Err(format!(
                    "{name} {secs} is not a number of seconds up to a day"
                ));
            }
        }
        let warmup = (warmup_s * rate as f64).round() as u64;
        let measured = (duration_s * rate as f64).round() as u64;
        if measured == 0 {
            return Err(format!(
                "--duration {duration_s} at --rate {rate} measures no message"
            ));
        }
        Ok(Self {
            origin,
            interval: Duration::from_nanos(1_000_000_000 / rate),
            warmup,
            total: warmup + measured,
        })
    }

    /// Message `seq`'s slot.
    fn slot(&self, seq: u64) -> Instant {
        let nanos = u128::from(seq) * self.interval.as_nanos();
        self.origin + Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    fn measured(&self, seq: u64) -> bool {
        seq >= self.warmup && seq < self.total
    }
}

/// What the sending thread did.
#[derive(Debug, Default)]
struct Paced {
    sent: u64,
    /// Measured sends that started more than 1 ms after their slot.
    late: u64,
    /// The latest a measured send started after its slot.
    behind_max: Duration,
    /// When the last measured send started.
    last_measured: Option<Instant>,
}

/// What the consumer saw.
#[derive(Debug, Default)]
struct Received {
    distinct: u64,
    duplicates: u64,
    foreign: u64,
    /// Latencies of the measured messages, nanoseconds.
    latencies: Vec<u64>,
}

pub(crate) async fn run(client: &Client, args: Args) -> Result<(), BoxError> {
    if !args.drain_timeout.is_finite() || args.drain_timeout <= 0.0 {
        return Err(format!(
            "--drain-timeout {} is not a number of seconds",
            args.drain_timeout
        )
        .into());
    }
    // Checked before anything is opened: a bad duration is a usage error.
    Schedule::new(Instant::now(), args.rate, args.warmup, args.duration)?;
    let consumer = crate::perf::shared_consumer(
        client,
        &args.topic,
        &args.subscription,
        InitialPosition::Latest,
        args.receiver_queue,
        args.ack_group_ms,
    )
    .await?;
    let producer = client
        .producer(args.topic.as_str())
        .batching(args.batch)
        .batching_max_delay(Duration::from_millis(args.batch_max_delay_ms))
        .create()
        .await?;
    let size = usize::try_from(args.size)?;
    // The first slot leaves the threads a moment to start.
    let schedule = Schedule::new(
        Instant::now() + Duration::from_millis(20),
        args.rate,
        args.warmup,
        args.duration,
    )?;
    let interrupted = crate::perf_produce::interrupt_flag();
    let (total_tx, total_rx) = watch::channel(None);
    let receiver = tokio::spawn(receive(consumer, schedule, total_rx));
    let cpu0 = crate::perf::cpu_times();
    let handle = tokio::runtime::Handle::current();
    let sender = producer.clone();
    let paced =
        tokio::task::spawn_blocking(move || pace(&handle, &sender, schedule, size, &interrupted))
            .await?;
    let paced = paced?;
    let _ = total_tx.send(Some(paced.sent));
    let drain = Duration::from_secs_f64(args.drain_timeout);
    let received = match tokio::time::timeout(drain, receiver).await {
        Ok(joined) => joined??,
        Err(_) => {
            return Err(
                format!("not every message arrived within {drain:?} of the last send").into(),
            );
        }
    };
    let (user1, sys1) = crate::perf::cpu_times();
    let closed = producer.close().await;
    let summary = summarize(&args, &schedule, &paced, received, (cpu0, (user1, sys1)))?;
    eprintln!("{}", summary_text(&summary));
    if args.json {
        crate::print_json(&summary)?;
    }
    Ok(closed?)
}

/// Sends every message at its slot (or at once, when behind); runs on a
/// thread of its own so the slots are kept to the microsecond, not to the
/// runtime timer's millisecond.
fn pace(
    handle: &tokio::runtime::Handle,
    producer: &Producer,
    schedule: Schedule,
    size: usize,
    interrupted: &AtomicBool,
) -> Result<Paced, BoxError> {
    fine_timer_slack();
    let mut paced = Paced::default();
    // Receipts are checked here, as they come in, without waking a task.
    let mut receipts: VecDeque<SendReceipt> = VecDeque::new();
    let mut payload = BytesMut::with_capacity(size * 64);
    for seq in 0..schedule.total {
        if interrupted.load(Ordering::Relaxed) {
            break;
        }
        let slot = schedule.slot(seq);
        let now = Instant::now();
        if slot > now {
            std::thread::sleep(slot - now);
        }
        let started = Instant::now();
        if schedule.measured(seq) {
            let behind = started.saturating_duration_since(slot);
            paced.behind_max = paced.behind_max.max(behind);
            paced.late += u64::from(behind > Duration::from_millis(1));
            paced.last_measured = Some(started);
        }
        let receipt = handle.block_on(producer.send(ProducerMessage::new(numbered(
            &mut payload,
            seq,
            size,
        ))))?;
        receipts.push_back(receipt);
        paced.sent += 1;
        while let Some(done) = receipts.front_mut().and_then(FutureExt::now_or_never) {
            done?;
            receipts.pop_front();
        }
    }
    handle.block_on(async {
        for receipt in receipts {
            receipt.await?;
        }
        Ok::<_, BoxError>(())
    })?;
    Ok(paced)
}

/// A payload of `size` bytes whose first 8 are `seq`, cut from `buf`
/// (one allocation per 64 messages).
fn numbered(buf: &mut BytesMut, seq: u64, size: usize) -> Bytes {
    if buf.capacity() - buf.len() < size {
        *buf = BytesMut::with_capacity(size * 64);
    }
    buf.put_u64_le(seq);
    buf.put_bytes(b'x', size - 8);
    buf.split().freeze()
}

/// The sequence number a payload carries.
fn sequence(payload: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(payload.get(..8)?.try_into().ok()?))
}

/// Asks the kernel to wake the sending thread within a microsecond of its
/// slot rather than within its default 50 µs slack.
fn fine_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes one integer and touches no memory.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1_000 as libc::c_ulong);
    }
}

/// Receives and acks until every sent message is in (the total is known
/// once the sender is done).
async fn receive(
    mut consumer: Consumer,
    schedule: Schedule,
    mut total: watch::Receiver<Option<u64>>,
) -> Result<Received, BoxError> {
    let mut got = Received {
        latencies: Vec::with_capacity(usize::try_from(schedule.total - schedule.warmup)?),
        ..Received::default()
    };
    let mut seen = vec![false; usize::try_from(schedule.total)?];
    loop {
        if total.borrow().is_some_and(|t| got.distinct >= t) {
            break;
        }
        let msg = tokio::select! {
            msg = consumer.receive() => msg?,
            changed = total.changed() => {
                changed?;
                continue;
            }
        };
        let now = Instant::now();
        match sequence(msg.payload())
            .and_then(|s| Some((s, seen.get_mut(usize::try_from(s).ok()?)?)))
        {
            Some((_, true)) => got.duplicates += 1,
            Some((seq, flag)) => {
                *flag = true;
                got.distinct += 1;
                if schedule.measured(seq) {
                    let latency = now.saturating_duration_since(schedule.slot(seq));
                    got.latencies
                        .push(u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX));
                }
            }
            None => got.foreign += 1,
        }
        consumer.ack(&msg).await?;
    }
    consumer.close().await?;
    Ok(got)
}

/// The nearest-rank percentile `p` of `sorted`, in microseconds.
fn percentile_us(sorted: &[u64], p: f64) -> Option<f64> {
    let n = sorted.len();
    // The epsilon keeps 99.9% of 1000 at rank 999 despite rounding.
    let rank = (p * n as f64 / 100.0 - 1e-9).ceil() as usize;
    sorted
        .get(rank.clamp(1, n.max(1)) - 1)
        .map(|&ns| ns as f64 / 1000.0)
}

type Cpu = ((f64, f64), (f64, f64));

fn summarize(
    args: &Args,
    schedule: &Schedule,
    paced: &Paced,
    mut received: Received,
    ((user0, sys0), (user1, sys1)): Cpu,
) -> Result<serde_json::Value, BoxError> {
    if received.duplicates > 0 || received.foreign > 0 {
        return Err(format!(
            "{} duplicate and {} foreign messages among {} received on {}",
            received.duplicates, received.foreign, received.distinct, args.topic
        )
        .into());
    }
    received.latencies.sort_unstable();
    let lat = &received.latencies;
    let measured_sent = paced.sent.saturating_sub(schedule.warmup);
    // From the first measured slot (not the first measured send, which
    // may be late) to the last measured send.
    let first_slot = schedule.slot(schedule.warmup);
    let seconds = paced
        .last_measured
        .filter(|&last| last > first_slot)
        .map_or(0.0, |last| last.duration_since(first_slot).as_secs_f64());
    // n messages span n - 1 intervals.
    let achieved = if seconds > 0.0 {
        measured_sent.saturating_sub(1) as f64 / seconds
    } else {
        0.0
    };
    let cpu = (user1 - user0) + (sys1 - sys0);
    Ok(serde_json::json!({
        "client": "wire",
        "op": "latency",
        "topic": args.topic,
        "size": args.size,
        "batched": args.batch,
        "rate_target": args.rate,
        "warmup_s": args.warmup,
        "sent": paced.sent,
        "received": received.distinct,
        "count": lat.len(),
        "seconds": seconds,
        "msgs_per_sec": achieved,
        "latency": "scheduled_send_to_receive",
        "lat_p50_us": percentile_us(lat, 50.0),
        "lat_p99_us": percentile_us(lat, 99.0),
        "lat_p999_us": percentile_us(lat, 99.9),
        "lat_max_us": lat.last().map(|&ns| ns as f64 / 1000.0),
        "late_sends": paced.late,
        "behind_max_us": paced.behind_max.as_secs_f64() * 1e6,
        "cpu_user_s": user1 - user0,
        "cpu_sys_s": sys1 - sys0,
        "cpu_us_per_msg": if paced.sent > 0 { cpu / paced.sent as f64 * 1e6 } else { 0.0 },
    }))
}

fn summary_text(s: &serde_json::Value) -> String {
    let f = |k: &str| s[k].as_f64().unwrap_or(f64::NAN);
    format!(
        "perf latency summary: {} of {} msgs measured at {:.0} msg/s (target {}) | scheduled send to receive (ms) p50 {:.3} p99 {:.3} p99.9 {:.3} max {:.3} | {} sends over 1 ms late, at most {:.3} ms | CPU {:.3} s user + {:.3} s sys, {:.1} µs/msg",
        s["count"],
        s["sent"],
        f("msgs_per_sec"),
        s["rate_target"],
        f("lat_p50_us") / 1000.0,
        f("lat_p99_us") / 1000.0,
        f("lat_p999_us") / 1000.0,
        f("lat_max_us") / 1000.0,
        s["late_sends"],
        f("behind_max_us") / 1000.0,
        f("cpu_user_s"),
        f("cpu_sys_s"),
        f("cpu_us_per_msg"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_the_rate_from_the_origin() {
        let t0 = Instant::now();
        let s = Schedule::new(t0, 10_000, 0.5, 2.0).unwrap();
        assert_eq!((s.warmup, s.total), (5_000, 25_000));
        assert_eq!(s.slot(0), t0);
        assert_eq!(s.slot(10_000), t0 + Duration::from_secs(1));
        assert!(!s.measured(4_999) && s.measured(5_000) && !s.measured(25_000));
        assert!(
            Schedule::new(t0, 10, 0.0, 0.01).is_err(),
            "measures nothing"
        );
        assert!(Schedule::new(t0, 10, -1.0, 1.0).is_err());
        assert!(Schedule::new(t0, 10, 0.0, f64::NAN).is_err());
    }

    #[test]
    fn payloads_carry_their_sequence_number() {
        let mut buf = BytesMut::new();
        let payloads: Vec<Bytes> = (0..200).map(|i| numbered(&mut buf, i, 16)).collect();
        for (i, p) in payloads.iter().enumerate() {
            assert_eq!(p.len(), 16);
            assert_eq!(sequence(p), Some(i as u64));
        }
        assert_eq!(sequence(b"short"), None);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<u64> = (1..=1000).map(|i| i * 1000).collect();
        assert_eq!(percentile_us(&v, 50.0), Some(500.0));
        assert_eq!(percentile_us(&v, 99.9), Some(999.0));
        assert_eq!(percentile_us(&v, 100.0), Some(1000.0));
        assert_eq!(percentile_us(&[7_000], 50.0), Some(7.0));
        assert_eq!(percentile_us(&[], 50.0), None);
    }
}
