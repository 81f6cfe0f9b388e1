//! `pulsar-wire perf backlog`: the memory of a slow consumer on a topic
//! with a large backlog, which the receiver queue should bound, not the
//! backlog.
//!
//! Subscribes from the earliest message, first holds still for `--hold`
//! seconds (the broker pushes as much as the permits allow), then
//! receives and acks `--count` messages, pausing `--pause-ms` after each
//! (a slow application). The heap and resident memory are sampled ten
//! times a second throughout; the figures are the peaks over the
//! baseline taken before subscribing.

use std::time::Duration;

use pulsar_wire::Client;
use pulsar_wire::consumer::{InitialPosition, SubscriptionType};

use crate::BoxError;
use crate::perf_memory::Reading;

/// Arguments of `perf backlog`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The topic, with its backlog already in it (a full name, or a short
    /// one in public/default).
    topic: String,

    /// The subscription name (a new one reads from the earliest message).
    #[arg(short = 's', long, default_value = "pulsar-wire-perf-backlog")]
    subscription: String,

    /// How many messages the broker may push ahead of the application.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    receiver_queue: u32,

    /// Seconds to hold still after subscribing, before the first receive.
    #[arg(long, value_name = "SECS", default_value_t = 2.0)]
    hold: f64,

    /// Messages to receive (and ack) slowly after that.
    #[arg(short = 'n', long, default_value_t = 2000)]
    count: u64,

    /// Milliseconds to pause after each message.
    #[arg(long, value_name = "MS", default_value_t = 1)]
    pause_ms: u64,

    /// Print the figures as one JSON line on stdout.
    #[arg(long)]
    json: bool,
}

/// The highest heap and resident memory seen.
#[derive(Debug, Default, Clone, Copy)]
struct Peaks {
    heap: i64,
    rss: u64,
}

impl Peaks {
    fn see(&mut self, r: &Reading) {
        self.heap = self.heap.max(r.heap);
        self.rss = self.rss.max(r.rss);
    }
}

pub(crate) async fn run(client: &Client, args: Args) -> Result<(), BoxError> {
    if !args.hold.is_finite() || args.hold < 0.0 {
        return Err(format!("--hold {} is not a number of seconds", args.hold).into());
    }
    let before = Reading::now();
    let mut consumer = client
        .consumer(args.topic.as_str(), args.subscription.as_str())
        .subscription_type(SubscriptionType::Shared)
        .initial_position(InitialPosition::Earliest)
        .receiver_queue_size(args.receiver_queue)
        .subscribe()
        .await?;

    let mut peaks = Peaks::default();
    let mut sample = tokio::time::interval(Duration::from_millis(100));
    sample.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let held = tokio::time::sleep(Duration::from_secs_f64(args.hold));
    tokio::pin!(held);
    loop {
        tokio::select! {
            _ = sample.tick() => peaks.see(&Reading::now()),
            () = &mut held => break,
        }
    }
    peaks.see(&Reading::now());
    let holding = peaks;

    let mut received = 0u64;
    let mut bytes = 0u64;
    while received < args.count {
        let msg = tokio::select! {
            biased;
            msg = consumer.receive() => msg?,
            _ = sample.tick() => {
                peaks.see(&Reading::now());
                continue;
            }
        };
        bytes += msg.payload().len() as u64;
        received += 1;
        consumer.ack(&msg).await?;
        drop(msg);
        if args.pause_ms > 0 {
            tokio::time::sleep(Duration::from_millis(args.pause_ms)).await;
        }
    }
    let end = Reading::now();
    peaks.see(&end);
    consumer.close().await?;

    let size = bytes.checked_div(received).unwrap_or(0);
    let figures = serde_json::json!({
        "client": "wire",
        "op": "backlog",
        "topic": args.topic,
        "receiver_queue": args.receiver_queue,
        "received": received,
        "payload_bytes": size,
        "pause_ms": args.pause_ms,
        "hold_s": args.hold,
        "heap_peak_holding_bytes": holding.heap - before.heap,
        "heap_peak_bytes": peaks.heap - before.heap,
        "heap_end_bytes": end.heap - before.heap,
        "rss_peak_bytes": i64::try_from(peaks.rss).unwrap_or(i64::MAX)
            - i64::try_from(before.rss).unwrap_or(i64::MAX),
        "rss_peak_total_bytes": peaks.rss,
        "queue_payload_bytes": u64::from(args.receiver_queue) * size,
    });
    eprintln!(
        "perf backlog: receiver queue {} | {} msgs of {} B received | heap peak {:.2} MiB over the baseline (holding still: {:.2} MiB; the queue's payloads: {:.2} MiB) | RSS peak +{:.2} MiB",
        args.receiver_queue,
        received,
        size,
        mib(figures["heap_peak_bytes"].as_f64()),
        mib(figures["heap_peak_holding_bytes"].as_f64()),
        mib(figures["queue_payload_bytes"].as_f64()),
        mib(figures["rss_peak_bytes"].as_f64()),
    );
    if args.json {
        crate::print_json(&figures)?;
    }
    Ok(())
}

fn mib(bytes: Option<f64>) -> f64 {
    bytes.unwrap_or(f64::NAN) / (1024.0 * 1024.0)
}
