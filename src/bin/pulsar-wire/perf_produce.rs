//! `pulsar-wire perf produce`: send at a rate (or as fast as the producer
//! takes them), measure send → receipt latency and throughput.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use pulsar_wire::Client;
use pulsar_wire::producer::{ProducerMessage, SendReceipt};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::BoxError;
use crate::perf::{self, Limits, SharedStats, Stats};
use crate::perf_stats::{self, HookCounts};
use crate::produce::Codec;

/// Arguments of `perf produce`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The topic (a full name, or a short one in public/default).
    topic: String,

    #[command(flatten)]
    limits: Limits,

    /// Messages per second (0: as fast as possible).
    #[arg(short = 'r', long, default_value_t = 0)]
    rate: u64,

    /// Payload size in bytes.
    #[arg(short = 's', long, default_value_t = 1024)]
    size: usize,

    /// Batch messages (off by default).
    #[arg(long)]
    batch: bool,

    /// Most messages in one batch.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    batch_max_messages: u32,

    /// Most payload bytes in one batch.
    #[arg(long, default_value_t = 128 * 1024, value_parser = clap::value_parser!(u32).range(1..))]
    batch_max_bytes: u32,

    /// Longest a batch waits for more messages, in milliseconds.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    batch_max_delay_ms: u64,

    /// Payload compression.
    #[arg(long, value_enum, default_value_t = Codec::None)]
    compression: Codec,

    /// Most messages sent and not yet confirmed (sending waits beyond it).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    max_pending: u32,

    /// Wait for each receipt before the next send (latency, not throughput).
    #[arg(long, conflicts_with = "batch")]
    sync: bool,

    /// Install an interceptor that counts its calls (to measure what
    /// interceptors cost); the summary shows the count.
    #[arg(long)]
    count_hooks: bool,

    /// The producer's name (default: one the broker gives).
    #[arg(long, value_name = "NAME")]
    producer_name: Option<String>,

    /// Fail a send not confirmed within this many seconds (default: the
    /// producer's own, 30 s).
    #[arg(long, alias = "st", value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    send_timeout: Option<u64>,

    /// Ask the broker to deliver each message this many seconds after it
    /// is sent (Shared and Key_Shared subscriptions; `pulsar-perf -d`).
    #[arg(short = 'd', long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    delay: Option<u64>,

    /// Which producers the topic takes besides this one (any case).
    #[arg(long, value_enum, ignore_case = true, default_value_t = Access::Shared)]
    access_mode: Access,

    /// Send payloads taken from this UTF-8 text file, cut at each
    /// `--payload-delimiter`, one after another in turn (pulsar-perf picks
    /// them at random); `--size` is then unused.
    #[arg(long, alias = "pf", value_name = "PATH")]
    payload_file: Option<std::path::PathBuf>,

    /// What separates the payloads of `--payload-file`.
    #[arg(
        long,
        alias = "pd",
        value_name = "TEXT",
        default_value = "\n",
        requires = "payload_file"
    )]
    payload_delimiter: String,
}

/// The payloads of `--payload-file`: the file's text cut at `delimiter`
/// (a `\n` typed as two characters is a newline), empty pieces left out.
fn payloads_of(path: &std::path::Path, delimiter: &str) -> Result<Vec<Bytes>, BoxError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--payload-file {}: {e}", path.display()))?;
    let delimiter = delimiter.replace("\\n", "\n");
    let payloads: Vec<Bytes> = text
        .split(delimiter.as_str())
        .filter(|piece| !piece.is_empty())
        .map(|piece| Bytes::copy_from_slice(piece.as_bytes()))
        .collect();
    if payloads.is_empty() {
        return Err(format!("--payload-file {}: no payload in it", path.display()).into());
    }
    Ok(payloads)
}

/// A producer access mode, as the official tools spell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Access {
    /// Any number of producers.
    Shared,
    /// Only this one; fails if another is there.
    Exclusive,
    /// Only this one; the others are fenced off.
    #[value(name = "ExclusiveWithFencing")]
    ExclusiveWithFencing,
    /// Only this one; waits until the others are gone.
    #[value(name = "WaitForExclusive")]
    WaitForExclusive,
}

impl From<Access> for pulsar_wire::producer::AccessMode {
    fn from(a: Access) -> Self {
        match a {
            Access::Shared => Self::Shared,
            Access::Exclusive => Self::Exclusive,
            Access::ExclusiveWithFencing => Self::ExclusiveWithFencing,
            Access::WaitForExclusive => Self::WaitForExclusive,
        }
    }
}

pub(crate) async fn run(client: &Client, args: Args) -> Result<(), BoxError> {
    let hooks = args.count_hooks.then(|| Arc::new(HookCounts::default()));
    let mut builder = client.producer(args.topic.as_str());
    if let Some(hooks) = &hooks {
        builder = builder.interceptor(hooks.clone());
    }
    if let Some(name) = &args.producer_name {
        builder = builder.name(name.as_str());
    }
    if let Some(seconds) = args.send_timeout {
        builder = builder.send_timeout(Duration::from_secs(seconds));
    }
    builder = builder.access_mode(args.access_mode.into());
    let producer = builder
        .batching(args.batch)
        .batching_max_messages(args.batch_max_messages as usize)
        .batching_max_bytes(args.batch_max_bytes as usize)
        .batching_max_delay(Duration::from_millis(args.batch_max_delay_ms))
        .compression(args.compression.into())
        .max_pending_messages(args.max_pending as usize)
        .create()
        .await?;
    let stats: SharedStats = Arc::new(std::sync::Mutex::new(Stats::new(
        "produce",
        "send_to_receipt",
    )));
    let (stop_tx, stop_rx) = watch::channel(false);
    let interrupted = interrupt_flag();
    let start = Instant::now();
    let deadline = args.limits.deadline(start)?;
    perf::lock(&stats).start(start);
    let reporter = tokio::spawn(perf::report_every_second(stats.clone(), stop_rx));

    // One payload for every message (the producer never copies it), or
    // the file's in turn.
    let payloads = match &args.payload_file {
        Some(path) => payloads_of(path, &args.payload_delimiter)?,
        None => vec![Bytes::from(vec![b'x'; args.size])],
    };
    let delay = args.delay.map(Duration::from_secs);
    let message = |n: u64| {
        let payload = payloads[(n % payloads.len() as u64) as usize].clone();
        let size = payload.len();
        let message = ProducerMessage::new(payload);
        let message = match delay {
            Some(delay) => message.deliver_after(delay),
            None => message,
        };
        (message, size)
    };
    let pace = (args.rate > 0).then(|| Duration::from_secs_f64(1.0 / args.rate as f64));

    let outcome = if args.sync {
        let mut sent = 0u64;
        let mut result = Ok(());
        while keep_going(&args.limits, sent, deadline, &interrupted) {
            wait_turn(pace, start, sent).await;
            let t = Instant::now();
            let (message, size) = message(sent);
            match async { producer.send(message).await?.await }.await {
                Ok(_) => perf::lock(&stats).record(Instant::now(), size, t.elapsed()),
                Err(e) => {
                    result = Err(e.into());
                    break;
                }
            }
            sent += 1;
        }
        result
    } else {
        let (receipts, pending) = mpsc::channel(args.max_pending as usize);
        let collector = tokio::spawn(collect(pending, stats.clone()));
        let mut sent = 0u64;
        let mut result: Result<(), BoxError> = Ok(());
        while keep_going(&args.limits, sent, deadline, &interrupted) {
            wait_turn(pace, start, sent).await;
            let t = Instant::now();
            let (message, size) = message(sent);
            match producer.send(message).await {
                Ok(receipt) => {
                    if receipts.send((receipt, t, size)).await.is_err() {
                        break; // the collector stopped on an error
                    }
                }
                Err(e) => {
                    result = Err(e.into());
                    break;
                }
            }
            sent += 1;
        }
        let flushed = producer.flush().await;
        drop(receipts);
        let collected = collector.await?;
        result.and(flushed.map_err(Into::into)).and(collected)
    };
    let _ = stop_tx.send(true);
    let _ = reporter.await;
    let figures = perf_stats::producer(&producer.stats(), hooks.map(|h| h.calls()));
    perf::finish(&stats, &args.topic, args.limits.json, figures)?;
    let closed = producer.close().await;
    outcome?;
    Ok(closed?)
}

/// Awaits receipts in order and records each one's latency, with its
/// message's payload size.
async fn collect(
    mut pending: mpsc::Receiver<(SendReceipt, Instant, usize)>,
    stats: SharedStats,
) -> Result<(), BoxError> {
    while let Some((receipt, sent_at, size)) = pending.recv().await {
        receipt.await?;
        let now = Instant::now();
        perf::lock(&stats).record(now, size, now.duration_since(sent_at));
    }
    Ok(())
}

/// Whether to send message number `sent`.
fn keep_going(limits: &Limits, sent: u64, deadline: Option<Instant>, stop: &AtomicBool) -> bool {
    !limits.reached(sent)
        && deadline.is_none_or(|d| Instant::now() < d)
        && !stop.load(Ordering::Relaxed)
}

/// With a rate, waits until message `n`'s slot.
async fn wait_turn(pace: Option<Duration>, start: Instant, n: u64) {
    if let Some(pace) = pace {
        let slot = start + pace.mul_f64(n as f64);
        if slot > Instant::now() {
            tokio::time::sleep_until(slot).await;
        }
    }
}

/// A flag that Ctrl-C sets, so a run ends with its summary.
pub(crate) fn interrupt_flag() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    let set = flag.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            set.store(true, Ordering::Relaxed);
        }
    });
    flag
}
