//! `pulsar-wire perf idle`: what idle producers or consumers cost on one
//! connection: memory per handle (live heap bytes and resident memory),
//! and CPU time and wake-ups over a window in which nothing is sent.
//!
//! One handle of the kind is opened first, so the connection and the
//! lookup are paid before the baseline; then `--topics` handles, one per
//! topic, are opened (a few at a time) and held for `--window` seconds;
//! then all are closed and the heap is read again (what a closed handle
//! leaves behind).

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use pulsar_wire::Client;
use pulsar_wire::consumer::{Consumer, SubscriptionType};
use pulsar_wire::producer::Producer;

use crate::BoxError;
use crate::perf_memory::{Reading, per};

/// Arguments of `perf idle`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Topic names are PREFIX-0, PREFIX-1, ... (a full name, or a short
    /// one in public/default).
    prefix: String,

    /// What to open: consumers or producers.
    #[arg(long, value_enum, default_value_t = Kind::Consumer)]
    kind: Kind,

    /// How many topics, one handle each.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    topics: u64,

    /// Seconds to hold them idle while CPU time and wake-ups are counted.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    window: f64,

    /// Handles being opened at the same time.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..))]
    concurrency: u16,

    /// Consumers: the receiver queue size.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    receiver_queue: u32,

    /// Consumers: an ack timeout in milliseconds (0: none, the default);
    /// its tracker must not wake an idle consumer either.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    ack_timeout_ms: u64,

    /// Consumers: group acks for this many milliseconds (0: none).
    #[arg(long, value_name = "MS", default_value_t = 0)]
    ack_group_ms: u64,

    /// Producers: batch messages (the library's default is on).
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    batching: OnOff,

    /// Print the figures as one JSON line on stdout.
    #[arg(long)]
    json: bool,
}

/// Which handles `perf idle` opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Kind {
    Consumer,
    Producer,
}

/// A switch on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum OnOff {
    On,
    Off,
}

enum Handle {
    Consumer(Consumer),
    Producer(Producer),
}

impl Handle {
    async fn close(self) -> Result<(), BoxError> {
        match self {
            Self::Consumer(c) => c.close().await?,
            Self::Producer(p) => p.close().await?,
        }
        Ok(())
    }
}

async fn open(client: &Client, args: &Args, topic: String) -> Result<Handle, BoxError> {
    Ok(match args.kind {
        Kind::Consumer => {
            let mut builder = client
                .consumer(topic.as_str(), "pulsar-wire-perf-idle")
                .subscription_type(SubscriptionType::Shared)
                .receiver_queue_size(args.receiver_queue);
            if args.ack_timeout_ms > 0 {
                builder = builder.ack_timeout(Duration::from_millis(args.ack_timeout_ms));
            }
            if args.ack_group_ms > 0 {
                builder = builder.ack_group_time(Duration::from_millis(args.ack_group_ms));
            }
            Handle::Consumer(builder.subscribe().await?)
        }
        Kind::Producer => Handle::Producer(
            client
                .producer(topic.as_str())
                .batching(args.batching == OnOff::On)
                .create()
                .await?,
        ),
    })
}

pub(crate) async fn run(client: &Client, args: Args) -> Result<(), BoxError> {
    if !args.window.is_finite() || args.window < 0.0 {
        return Err(format!("--window {} is not a number of seconds", args.window).into());
    }
    // The connection, its lookup and the first handle's one-off costs
    // (the runtime's timer wheel, the task pool) come before the baseline.
    let first = open(client, &args, format!("{}-warm", args.prefix)).await?;
    tokio::task::yield_now().await;
    let before = Reading::now();

    let opened_at = tokio::time::Instant::now();
    let handles: Vec<Handle> = futures::stream::iter(0..args.topics)
        .map(|i| open(client, &args, format!("{}-{i}", args.prefix)))
        .buffer_unordered(usize::from(args.concurrency))
        .try_collect()
        .await?;
    let open_seconds = opened_at.elapsed().as_secs_f64();
    // Let the subscriptions' first FLOW and the brokers' answers settle.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let open = Reading::now();

    tokio::time::sleep(Duration::from_secs_f64(args.window)).await;
    let idle = Reading::now();

    futures::stream::iter(handles)
        .map(Handle::close)
        .buffer_unordered(usize::from(args.concurrency))
        .try_collect::<()>()
        .await?;
    let closed = Reading::now();
    first.close().await?;

    let n = args.topics;
    let window = args.window.max(1e-9);
    let figures = serde_json::json!({
        "client": "wire",
        "op": "idle",
        "kind": match args.kind { Kind::Consumer => "consumer", Kind::Producer => "producer" },
        "topics": n,
        "handles": n,
        "connections": 1,
        "receiver_queue": args.receiver_queue,
        "ack_timeout_ms": args.ack_timeout_ms,
        "batching": args.batching == OnOff::On,
        "open_seconds": open_seconds,
        "heap_bytes_per_handle": per(open.heap - before.heap, n),
        "rss_bytes_per_handle": per(rss_delta(before.rss, open.rss), n),
        "allocations_per_handle": per(
            i64::try_from(open.allocations - before.allocations).unwrap_or(i64::MAX),
            n,
        ),
        "heap_bytes_left_per_closed_handle": per(closed.heap - before.heap, n),
        "heap_bytes_open": open.heap,
        "rss_bytes_open": open.rss,
        "idle_window_s": args.window,
        "idle_cpu_s": idle.cpu_since(&open),
        "idle_cpu_us_per_s": idle.cpu_since(&open) / window * 1e6,
        "idle_wakeups": idle.woke - open.woke,
        "idle_wakeups_per_s": (idle.woke - open.woke) as f64 / window,
        "idle_preempted": idle.preempted - open.preempted,
    });
    eprintln!("{}", text(&figures));
    if args.json {
        crate::print_json(&figures)?;
    }
    Ok(())
}

/// `after - before` as a signed byte count.
fn rss_delta(before: u64, after: u64) -> i64 {
    i64::try_from(after).unwrap_or(i64::MAX) - i64::try_from(before).unwrap_or(i64::MAX)
}

/// The figures as one line for a person.
fn text(f: &serde_json::Value) -> String {
    let n = |k: &str| f[k].as_f64().unwrap_or(f64::NAN);
    format!(
        "perf idle: {} {}s on one connection (opened in {:.2} s) | per {}: heap {:.0} B, RSS {:.0} B, {:.1} allocations | left after close: {:.0} B each | idle {:.1} s: CPU {:.1} µs/s, {:.2} wake-ups/s",
        f["handles"],
        f["kind"].as_str().unwrap_or("handle"),
        n("open_seconds"),
        f["kind"].as_str().unwrap_or("handle"),
        n("heap_bytes_per_handle"),
        n("rss_bytes_per_handle"),
        n("allocations_per_handle"),
        n("heap_bytes_left_per_closed_handle"),
        n("idle_window_s"),
        n("idle_cpu_us_per_s"),
        n("idle_wakeups_per_s"),
    )
}
