//! `pulsar-wire perf consume`: receive and ack each message individually,
//! measure throughput and publish → receive latency.
//!
//! The latency is the wall clock at receive minus the broker's publish time
//! (milliseconds since the epoch), so it has millisecond resolution and is
//! only meaningful with the broker on the same clock (the same machine).
//! The measured interval starts when the first message arrives.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use pulsar_wire::Client;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::BoxError;
use crate::consume::{Position, SubType};
use crate::perf::{self, Limits, SharedStats, Stats};
use crate::perf_stats::{self, HookCounts};

/// Arguments of `perf consume`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The topic (a full name, or a short one in public/default).
    topic: String,

    #[command(flatten)]
    limits: Limits,

    /// The subscription name.
    #[arg(short = 's', long, default_value = "pulsar-wire-perf")]
    subscription: String,

    /// The subscription type.
    #[arg(
        short = 't',
        long = "type",
        alias = "subscription-type",
        value_enum,
        ignore_case = true,
        default_value_t = SubType::Exclusive
    )]
    sub_type: SubType,

    /// Where a new subscription starts.
    #[arg(long, value_enum, default_value_t = Position::Latest)]
    position: Position,

    /// How many messages the broker may push ahead of the application.
    #[arg(
        short = 'q',
        long,
        alias = "receiver-queue-size",
        default_value_t = 1000,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    receiver_queue: u32,

    /// Most messages queued across every partition of a partitioned
    /// topic (default: the Java client's 50,000).
    #[arg(long, value_name = "COUNT", value_parser = clap::value_parser!(u32).range(1..))]
    receiver_queue_size_across_partitions: Option<u32>,

    /// Ack the members of a batch one by one on the broker.
    #[arg(long)]
    batch_index_ack: bool,

    /// Do not acknowledge (the subscription keeps its backlog).
    #[arg(long)]
    no_ack: bool,

    /// Send acks together, one ACK frame per this many milliseconds (0:
    /// each ack at once, the library's default; the C++ client groups for
    /// 100 ms by default).
    #[arg(long, value_name = "MS", default_value_t = 0)]
    ack_group_ms: u64,

    /// Install an interceptor that counts its calls (to measure what
    /// interceptors cost); the summary shows the count.
    #[arg(long)]
    count_hooks: bool,

    /// Receive through `Consumer::run` with this many handler calls at
    /// once (each acks its message) instead of a receive and ack loop;
    /// needs `--count`.
    #[arg(long, value_name = "CONCURRENCY", value_parser = clap::value_parser!(u32).range(1..))]
    run: Option<u32>,

    /// Receive at most this many messages a second (0: as fast as they
    /// come), as pulsar-perf's `--rate`; not with `--run`.
    #[arg(
        short = 'r',
        long,
        value_name = "MSG_PER_S",
        default_value_t = 0.0,
        value_parser = crate::rate,
        conflicts_with = "run"
    )]
    rate: f64,
}

pub(crate) async fn run(client: &Client, args: Args) -> Result<(), BoxError> {
    let mut builder = client
        .consumer(args.topic.as_str(), args.subscription.as_str())
        .subscription_type(args.sub_type.into())
        .initial_position(args.position.into())
        .receiver_queue_size(args.receiver_queue)
        .batch_index_ack(args.batch_index_ack);
    if let Some(total) = args.receiver_queue_size_across_partitions {
        builder = builder.max_total_receiver_queue_size_across_partitions(total);
    }
    if args.ack_group_ms > 0 {
        builder = builder.ack_group_time(Duration::from_millis(args.ack_group_ms));
    }
    let hooks = args.count_hooks.then(|| Arc::new(HookCounts::default()));
    if let Some(hooks) = &hooks {
        builder = builder.interceptor(hooks.clone());
    }
    if args.run.is_some() && args.limits.count == 0 {
        return Err("--run needs --count".into());
    }
    let mut consumer = builder.subscribe().await?;
    let stats: SharedStats = Arc::new(std::sync::Mutex::new(Stats::new(
        "consume",
        "publish_to_receive",
    )));
    let (stop_tx, stop_rx) = watch::channel(false);
    let interrupted = crate::perf_produce::interrupt_flag();
    let mut deadline = args.limits.deadline(Instant::now())?;
    let reporter = tokio::spawn(perf::report_every_second(stats.clone(), stop_rx));

    let (start, wall_at_start) = (Instant::now(), wall_millis());
    let mut received = 0u64;
    let mut first = true;
    let mut outcome: Result<(), BoxError> = Ok(());
    if let Some(concurrency) = args.run {
        let done = Arc::new(tokio::sync::Notify::new());
        let counted = (stats.clone(), done.clone(), args.limits.count);
        let handler = move |msg: pulsar_wire::consumer::Message| {
            let (stats, done, count) = &counted;
            let now = Instant::now();
            let mut stats = perf::lock(stats);
            if stats.count() == 0 {
                stats.start(now);
            }
            let wall_ms =
                wall_at_start + u64::try_from(now.duration_since(start).as_millis()).unwrap_or(0);
            let latency = Duration::from_millis(wall_ms.saturating_sub(msg.publish_time()));
            stats.record(now, msg.payload().len(), latency);
            if stats.count() == *count {
                done.notify_one();
            }
            async { Ok::<_, std::convert::Infallible>(pulsar_wire::consumer::Outcome::Ack) }
        };
        let options =
            pulsar_wire::consumer::RunOptions::default().concurrency(concurrency as usize);
        tokio::select! {
            ran = consumer.run(handler, options) => ran?,
            () = done.notified() => {}
        }
        received = perf::lock(&stats).count();
    }
    // Checks the deadline and the Ctrl-C flag at least twice a second.
    let check = tokio::time::sleep(Duration::from_millis(500));
    tokio::pin!(check);
    let mut pace = crate::Pace::new(args.rate);
    while !args.limits.reached(received) {
        let msg = tokio::select! {
            biased;
            // Both cancel-safe: a turn the check takes while the pace
            // waits keeps its slot, and one that takes it while the
            // receive waits loses no message.
            msg = async {
                pace.next().await;
                consumer.receive().await
            } => match msg {
                Ok(msg) => msg,
                Err(e) => {
                    outcome = Err(e.into());
                    break;
                }
            },
            () = &mut check => {
                let now = Instant::now();
                if deadline.is_some_and(|d| now >= d) || interrupted.load(Ordering::Relaxed) {
                    break;
                }
                let next = deadline.map_or(Duration::from_millis(500), |d| {
                    d.duration_since(now).min(Duration::from_millis(500))
                });
                check.as_mut().reset(now + next);
                continue;
            }
        };
        let now = Instant::now();
        if first {
            first = false;
            perf::lock(&stats).start(now);
            // The duration counts from the first message too.
            deadline = args.limits.deadline(now)?;
        }
        // Wall time from the monotonic clock read above: one clock read per message.
        let wall_ms =
            wall_at_start + u64::try_from(now.duration_since(start).as_millis()).unwrap_or(0);
        let latency = Duration::from_millis(wall_ms.saturating_sub(msg.publish_time()));
        perf::lock(&stats).record(now, msg.payload().len(), latency);
        received += 1;
        if !args.no_ack {
            if let Err(e) = consumer.ack(&msg).await {
                outcome = Err(e.into());
                break;
            }
        }
    }
    let _ = stop_tx.send(true);
    let _ = reporter.await;
    debug_assert_eq!(perf::lock(&stats).count(), received);
    let figures = perf_stats::consumer(&consumer.stats(), hooks.map(|h| h.calls()));
    perf::finish(&stats, &args.topic, args.limits.json, figures)?;
    let closed = consumer.close().await;
    outcome?;
    Ok(closed?)
}

/// Wall-clock milliseconds since the Unix epoch, to compare with the
/// broker's publish time.
#[allow(clippy::disallowed_methods)] // wall time is the point: publish_time is wall time
fn wall_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
