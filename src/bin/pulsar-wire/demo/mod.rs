//! `pulsar-wire demo`: the main job. It starts an embedded broker (unless
//! `--url` names one), produces a few hundred messages of six kinds, and
//! consumes them on a Shared subscription with [`Consumer::run`], whose
//! handler's outcomes are mixed on purpose: acked, nacked, left to the ack
//! timeout, a panic, retried later through the retry topic, and failing
//! until they reach the dead-letter topic. A second consumer reads the
//! dead-letter topic. It prints progress live and ends with a table that
//! accounts for every message.

mod tally;

use std::collections::BTreeMap;
use std::time::Duration;

use pulsar_wire::Client;
use pulsar_wire::consumer::{
    Consumer, DeadLetterPolicy, InitialPosition, Message, Outcome, RunOptions, SubscriptionType,
};
use pulsar_wire::producer::ProducerMessage;
use tokio::sync::mpsc;

use crate::BoxError;
use tally::{Did, Event, Kind, Tally};

/// Deliveries before a message goes to the dead-letter topic.
const MAX_REDELIVER: u32 = 3;

/// `pulsar-wire demo`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// How many messages to produce (a sixth of every ten fail in a
    /// different way).
    #[arg(short = 'n', long, default_value_t = 300, value_parser = clap::value_parser!(u32).range(10..=100_000))]
    messages: u32,
    /// The ack timeout of the demo's consumer, in milliseconds.
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(100..))]
    ack_timeout_ms: u64,
    /// The delay asked for retry letters, in milliseconds.
    #[arg(long, default_value_t = 1_000)]
    retry_later_ms: u64,
    /// Give up (exit code 1) if not every message is settled by then.
    #[arg(long, default_value_t = 120)]
    timeout_secs: u64,
}

/// Runs the demo on `client`'s cluster.
pub(crate) async fn run(client: &Client, args: Args) -> Result<(), BoxError> {
    demo(client, &args).await
}

async fn demo(client: &Client, args: &Args) -> Result<(), BoxError> {
    let topic = format!("persistent://public/default/demo-{}", unique_suffix());
    let subscription = "demo";
    let policy = DeadLetterPolicy::after_redeliveries(MAX_REDELIVER);
    let dlq_topic = policy.dead_letter_topic(&topic, subscription);
    eprintln!(
        "topic {topic}\nShared subscription {subscription:?}: ack timeout {} ms, dead letter after {MAX_REDELIVER} deliveries to {dlq_topic}, retry topic on",
        args.ack_timeout_ms
    );

    // The dead-letter reader subscribes first, so it sees every copy.
    let dead_letters = client
        .consumer(dlq_topic.as_str(), "demo-audit")
        .subscription_type(SubscriptionType::Shared)
        .initial_position(InitialPosition::Earliest)
        .subscribe()
        .await?;
    let consumer = client
        .consumer(topic.as_str(), subscription)
        .subscription_type(SubscriptionType::Shared)
        .ack_timeout(Duration::from_millis(args.ack_timeout_ms))
        .dead_letter_policy(policy)
        .enable_retry(true)
        .subscribe()
        .await?;

    produce(client, &topic, args.messages).await?;
    eprintln!(
        "produced {} messages: {}",
        args.messages,
        kinds_line(args.messages)
    );

    // The runner catches the handler's panics; say so in one line instead
    // of the default report.
    std::panic::set_hook(Box::new(|info| {
        let payload = info.payload();
        let text = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("a panic");
        eprintln!("  (panic caught by Consumer::run, which nacks the message: {text})");
    }));
    let (events, mut seen) = mpsc::unbounded_channel();
    let handler = handle(events.clone(), Duration::from_millis(args.retry_later_ms));
    let running = tokio::spawn({
        let consumer = consumer.clone();
        async move {
            consumer
                .run(handler, RunOptions::default().concurrency(16))
                .await
        }
    });
    let reading = tokio::spawn(read_dead_letters(dead_letters.clone(), events));

    let mut tally = Tally::new(args.messages);
    let mut progress = tokio::time::interval(Duration::from_secs(1));
    let deadline = tokio::time::sleep(Duration::from_secs(args.timeout_secs));
    tokio::pin!(deadline);
    let finished = loop {
        tokio::select! {
            Some(event) = seen.recv() => {
                tally.record(&event);
                if tally.done() {
                    break true;
                }
            }
            _ = progress.tick() => eprintln!("{}", tally.progress_line()),
            () = &mut deadline => break false,
            // Stop cleanly (and so stop the embedded broker) on Ctrl-C.
            _ = tokio::signal::ctrl_c() => break false,
        }
    };
    consumer.close().await?;
    dead_letters.close().await?;
    running.await??;
    reading.abort();

    println!("\n{}", tally.summary_table());
    if finished {
        println!(
            "every one of the {} messages is acked or in the dead-letter topic.",
            args.messages
        );
        Ok(())
    } else {
        Err(format!(
            "stopped (interrupted, or --timeout-secs {} passed) with {} of {} messages settled",
            args.timeout_secs,
            tally.settled(),
            tally.produced()
        )
        .into())
    }
}

async fn produce(client: &Client, topic: &str, count: u32) -> Result<(), BoxError> {
    // Unbatched: a batch is one entry to the broker, so a nack of one
    // member would bring back (and count) its siblings too.
    let producer = client.producer(topic).batching(false).create().await?;
    let mut receipts = Vec::with_capacity(count as usize);
    for n in 0..count {
        let kind = Kind::of(n);
        let msg = ProducerMessage::new(format!("message {n}: {}", kind.name()))
            .key(format!("key-{}", n % 7))
            .property("n", n.to_string())
            .property("kind", kind.name());
        receipts.push(producer.send(msg).await?);
    }
    for receipt in receipts {
        receipt.await?;
    }
    producer.close().await?;
    Ok(())
}

/// The handler: its outcome depends on the message's kind and how often it
/// was seen.
fn handle(
    events: mpsc::UnboundedSender<Event>,
    retry_delay: Duration,
) -> impl FnMut(
    Message,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Outcome, String>> + Send>> {
    move |msg: Message| {
        let events = events.clone();
        Box::pin(async move {
            let (n, kind) = identify(&msg)?;
            let count = msg.redelivery_count();
            let reconsume_times: u32 = prop(&msg, "RECONSUMETIMES").unwrap_or(0);
            let first = count == 0 && reconsume_times == 0;
            let (did, outcome) = match kind {
                Kind::NackOnce if first => (Did::Nacked, Ok(Outcome::Retry)),
                Kind::TimeoutOnce if first => (Did::LeftToTimeout, Ok(Outcome::Leave)),
                Kind::RetryLater if first => {
                    (Did::RetriedLater, Ok(Outcome::RetryLater(retry_delay)))
                }
                Kind::Poison => (Did::Nacked, Err(format!("message {n} is poison"))),
                Kind::PanicOnce if first => {
                    let _ = events.send(Event::Delivered {
                        n,
                        redelivery_count: count,
                        reconsume_times,
                        did: Did::Panicked,
                    });
                    panic!("message {n}: the handler panics on its first delivery");
                }
                _ => (Did::Acked, Ok(Outcome::Ack)),
            };
            let _ = events.send(Event::Delivered {
                n,
                redelivery_count: count,
                reconsume_times,
                did,
            });
            if kind != Kind::Ack {
                eprintln!(
                    "  {:<12} n={n:<4} redelivery_count={count} {}→ {did:?}",
                    kind.name(),
                    if reconsume_times > 0 {
                        format!("RECONSUMETIMES={reconsume_times} (from the retry topic) ")
                    } else {
                        String::new()
                    },
                );
            }
            outcome
        })
    }
}

/// Reads the dead-letter topic, printing where each copy came from.
async fn read_dead_letters(mut consumer: Consumer, events: mpsc::UnboundedSender<Event>) {
    while let Ok(msg) = consumer.receive().await {
        let props = msg.properties();
        let origin = props
            .get("ORIGIN_MESSAGE_ID")
            .map(String::as_str)
            .unwrap_or("?");
        let real_topic = props.get("REAL_TOPIC").map(String::as_str).unwrap_or("?");
        eprintln!(
            "  DLQ ← {:?} REAL_TOPIC={real_topic} ORIGIN_MESSAGE_ID={origin}",
            String::from_utf8_lossy(msg.payload())
        );
        if let Ok((n, _)) = identify(&msg) {
            let _ = events.send(Event::DeadLettered { n });
        }
        let _ = consumer.ack(&msg).await;
    }
}

fn identify(msg: &Message) -> Result<(u32, Kind), String> {
    let n = prop(msg, "n").ok_or_else(|| format!("message {} has no n property", msg.id()))?;
    let kind = msg
        .properties()
        .get("kind")
        .and_then(|k| Kind::parse(k))
        .ok_or_else(|| format!("message {} has no kind property", msg.id()))?;
    Ok((n, kind))
}

fn prop<T: std::str::FromStr>(msg: &Message, name: &str) -> Option<T> {
    msg.properties().get(name)?.parse().ok()
}

fn kinds_line(count: u32) -> String {
    let mut by_kind: BTreeMap<Kind, u32> = BTreeMap::new();
    for n in 0..count {
        *by_kind.entry(Kind::of(n)).or_default() += 1;
    }
    Kind::ALL
        .iter()
        .map(|k| format!("{} {}", by_kind.get(k).copied().unwrap_or(0), k.name()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A suffix that makes the demo's topic new on a broker that is not.
#[allow(clippy::disallowed_methods)] // a name, not a measurement of time
fn unique_suffix() -> String {
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!("{}-{millis}", std::process::id())
}
