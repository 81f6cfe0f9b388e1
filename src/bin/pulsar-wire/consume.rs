//! `pulsar-wire consume`: receive messages, apply an outcome to each (ack,
//! nack or nothing) and print one JSON line per message, with the value
//! decoded in its writer's schema when it has one.

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use base64::Engine as _;
use pulsar_wire::consumer::{DeadLetterPolicy, InitialPosition, SubscriptionType};
use pulsar_wire::schema::{AutoConsume, SchemaInfo, SchemaVersion};
use pulsar_wire::{Client, Consumer, Message};

use crate::BoxError;

/// Arguments of `consume`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The topic (a full name, or a short one in public/default).
    topic: String,

    /// The subscription name.
    #[arg(short = 's', long, alias = "subscription-name")]
    subscription: String,

    /// The subscription type (any case; `Key_Shared` as the official tools
    /// spell it).
    #[arg(
        short = 't',
        long = "type",
        alias = "subscription-type",
        value_enum,
        ignore_case = true,
        default_value_t = SubType::Exclusive
    )]
    sub_type: SubType,

    /// Exit after this many messages (default: run until idle or Ctrl-C).
    #[arg(
        short = 'n',
        long,
        alias = "num-messages",
        value_name = "COUNT",
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    count: Option<u64>,

    /// Where a new subscription starts (any case).
    #[arg(
        short = 'p',
        long,
        alias = "subscription-position",
        value_enum,
        ignore_case = true,
        default_value_t = Position::Latest
    )]
    position: Position,

    /// Whether the subscription outlives the command (durable) or is
    /// forgotten when it exits (non-durable); any case.
    #[arg(
        short = 'm',
        long = "subscription-mode",
        value_enum,
        ignore_case = true,
        default_value_t = Mode::Durable
    )]
    mode: Mode,

    /// What to do with each message.
    #[arg(long, value_enum, default_value_t = Outcome::Ack)]
    outcome: Outcome,

    /// Redeliver messages held this long without an ack or nack.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    ack_timeout_ms: Option<u64>,

    /// TOPIC is a regular expression: read every topic of its namespace
    /// whose name matches, as they come and go (e.g.
    /// `persistent://public/default/orders-.*`).
    #[arg(long)]
    regex: bool,

    /// Receive at most this many messages a second (0, the default: as
    /// fast as they come), to play a slow consumer.
    #[arg(short = 'r', long, value_name = "MSG_PER_S", default_value_t = 0.0, value_parser = crate::rate)]
    rate: f64,

    /// Print no payload (nor its decoded value), only its size, as
    /// `payload_size` (the official tools' `--hide-content`).
    #[arg(long)]
    hide_content: bool,

    /// Exit after this many milliseconds without a message.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    idle_exit_ms: Option<u64>,

    /// How many messages the broker may push ahead of the application.
    #[arg(
        short = 'q',
        long,
        alias = "queue-size",
        default_value_t = 1000,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    receiver_queue: u32,

    /// Forward a message to the dead-letter topic instead of delivering it
    /// once it was redelivered N times (Shared and Key_Shared).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_redeliver: Option<u32>,

    /// The dead-letter topic (default `<topic>-<subscription>-DLQ`).
    #[arg(long, value_name = "TOPIC", requires = "max_redeliver")]
    dlq_topic: Option<String>,

    /// Instead of an outcome, send each message to the retry-letter topic
    /// (`<topic>-<subscription>-RETRY`), to come back after MS
    /// milliseconds; after --max-redeliver (default 16) rounds it goes to
    /// the dead-letter topic.
    #[arg(long, value_name = "MS", conflicts_with = "outcome")]
    retry_later_ms: Option<u64>,
}

/// A subscription type, as named on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum SubType {
    Exclusive,
    Shared,
    Failover,
    #[value(alias = "key_shared")]
    KeyShared,
}

impl From<SubType> for SubscriptionType {
    fn from(t: SubType) -> Self {
        match t {
            SubType::Exclusive => Self::Exclusive,
            SubType::Shared => Self::Shared,
            SubType::Failover => Self::Failover,
            SubType::KeyShared => Self::KeyShared,
        }
    }
}

/// Whether the subscription outlives its consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Mode {
    Durable,
    #[value(alias = "nondurable")]
    NonDurable,
}

/// Where a new subscription starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Position {
    Earliest,
    Latest,
}

impl From<Position> for InitialPosition {
    fn from(p: Position) -> Self {
        match p {
            Position::Earliest => Self::Earliest,
            Position::Latest => Self::Latest,
        }
    }
}

/// What `consume` does with each message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Outcome {
    /// Acknowledge it.
    Ack,
    /// Negatively acknowledge it (it comes back).
    Nack,
    /// Neither (it comes back after the ack timeout, or on reconnect).
    None,
}

pub(crate) async fn run(client: &Client, args: Args) -> Result<(), BoxError> {
    let builder = if args.regex {
        client.consumer_pattern(args.topic.as_str(), args.subscription.as_str())
    } else {
        client.consumer(args.topic.as_str(), args.subscription.as_str())
    };
    let mut builder = builder
        .subscription_type(args.sub_type.into())
        .initial_position(args.position.into())
        .durable(args.mode == Mode::Durable)
        .receiver_queue_size(args.receiver_queue);
    if let Some(ms) = args.ack_timeout_ms {
        builder = builder.ack_timeout(Duration::from_millis(ms));
    }
    if let Some(n) = args.max_redeliver {
        builder = builder.dead_letter_policy(DeadLetterPolicy {
            dead_letter_topic: args.dlq_topic.clone(),
            ..DeadLetterPolicy::after_redeliveries(n)
        });
    }
    if args.retry_later_ms.is_some() {
        builder = builder.enable_retry(true);
    }
    let mut consumer = builder.subscribe().await?;
    let mut writers = Writers::new(client);
    let outcome = consume(&mut consumer, &mut writers, &args).await;
    let closed = consumer.close().await;
    outcome?;
    Ok(closed?)
}

/// Receives until COUNT, idle time or Ctrl-C.
async fn consume(
    consumer: &mut Consumer,
    writers: &mut Writers<'_>,
    args: &Args,
) -> Result<(), BoxError> {
    let idle = args.idle_exit_ms.map(Duration::from_millis);
    let mut seen = 0u64;
    let mut pace = crate::Pace::new(args.rate);
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    while args.count.is_none_or(|n| seen < n) {
        let next = async {
            pace.next().await;
            match idle {
                Some(idle) => tokio::time::timeout(idle, consumer.receive()).await.ok(),
                None => Some(consumer.receive().await),
            }
        };
        let msg = tokio::select! {
            next = next => match next {
                Some(msg) => msg?,
                None => break, // idle
            },
            _ = &mut ctrl_c => break,
        };
        let applied = match (args.retry_later_ms, args.outcome) {
            (Some(_), _) => "retry_later",
            (None, Outcome::Ack) => "ack",
            (None, Outcome::Nack) => "nack",
            (None, Outcome::None) => "none",
        };
        let apply = async {
            match (args.retry_later_ms, args.outcome) {
                (Some(ms), _) => {
                    consumer
                        .reconsume_later(&msg, Duration::from_millis(ms))
                        .await?;
                }
                (None, Outcome::Ack) => consumer.ack(&msg).await?,
                (None, Outcome::Nack) => consumer.nack(&msg)?,
                (None, Outcome::None) => {}
            }
            Ok(())
        };
        let mut line = message_line(&msg, applied);
        if args.hide_content {
            hide_content(&mut line, msg.payload().len());
        } else {
            writers.add_value(&msg, &mut line).await;
        }
        print_then(|| crate::print_json(&line), apply).await?;
        seen += 1;
    }
    Ok(())
}

/// The writers' schemas of the messages met, by topic and version, each
/// fetched once (a failed fetch is kept too: its error goes on every line
/// of that version).
struct Writers<'a> {
    client: &'a Client,
    known: HashMap<(String, SchemaVersion), Result<SchemaInfo, String>>,
}

impl<'a> Writers<'a> {
    fn new(client: &'a Client) -> Self {
        Self {
            client,
            known: HashMap::new(),
        }
    }

    /// Adds `value` (the message decoded in its writer's schema, as JSON)
    /// or `value_error` to `line`, for a message with a schema version.
    async fn add_value(&mut self, msg: &Message, line: &mut serde_json::Value) {
        let Some(version) = msg.schema_version() else {
            return;
        };
        let key = (msg.topic().to_owned(), version);
        if !self.known.contains_key(&key) {
            let fetched = match self.client.schema(&key.0, Some(&key.1)).await {
                Ok(Some((info, _))) => Ok(info),
                Ok(None) => Err(format!("{} has no schema version {}", key.0, key.1)),
                Err(e) => Err(e.to_string()),
            };
            self.known.insert(key.clone(), fetched);
        }
        match self.known.get(&key).map(|w| decode(msg, w.as_ref())) {
            Some(Ok(value)) => line["value"] = value,
            Some(Err(e)) => line["value_error"] = e.into(),
            None => {}
        }
    }
}

/// `msg`'s value in `writer`'s schema, as JSON.
fn decode(
    msg: &Message,
    writer: Result<&SchemaInfo, &String>,
) -> Result<serde_json::Value, String> {
    let writer = writer.map_err(Clone::clone)?;
    let value = AutoConsume
        .decode_message(msg, writer)
        .map_err(|e| e.to_string())?;
    Ok(value.to_json())
}

/// Prints a message's line, then applies its outcome: the output is where
/// the message goes, so a line is never lost to a crash (or a failed ack)
/// between the two; at worst a message is printed and comes again.
async fn print_then(
    print: impl FnOnce() -> Result<(), BoxError>,
    apply: impl Future<Output = Result<(), BoxError>>,
) -> Result<(), BoxError> {
    print()?;
    apply.await
}

/// Takes the payload out of a message's line (`--hide-content`): its size
/// stays, as `payload_size`.
fn hide_content(line: &mut serde_json::Value, size: usize) {
    let Some(fields) = line.as_object_mut() else {
        return;
    };
    fields.remove("payload_base64");
    fields.remove("payload");
    fields.insert("payload_size".into(), size.into());
}

/// One message as a JSON line: the payload as text when it is UTF-8,
/// otherwise base64 with `"payload_base64": true`.
pub(crate) fn message_line(msg: &Message, outcome: &str) -> serde_json::Value {
    let mut line = serde_json::json!({
        "topic": msg.topic(),
        "message_id": msg.id().to_string(),
        "redelivery_count": msg.redelivery_count(),
        "key": msg.key(),
        "properties": msg.properties(),
        "publish_time": msg.publish_time(),
        "producer_name": msg.producer_name(),
    });
    match std::str::from_utf8(msg.payload()) {
        Ok(text) => line["payload"] = text.into(),
        Err(_) => {
            line["payload"] = base64::engine::general_purpose::STANDARD
                .encode(msg.payload())
                .into();
            line["payload_base64"] = true.into();
        }
    }
    line["outcome"] = outcome.into();
    line
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;

    #[tokio::test]
    async fn the_line_is_printed_before_the_outcome_is_applied() {
        let events = RefCell::new(Vec::new());
        let failed = print_then(
            || {
                events.borrow_mut().push("printed");
                Ok(())
            },
            async {
                events.borrow_mut().push("acked");
                Err("the ack failed".into())
            },
        )
        .await;
        assert!(failed.is_err());
        assert_eq!(*events.borrow(), ["printed", "acked"]);
        let not_printed = print_then(|| Err("stdout closed".into()), async {
            events.borrow_mut().push("acked without a line");
            Ok(())
        })
        .await;
        assert!(not_printed.is_err());
        assert_eq!(events.borrow().len(), 2, "no ack for a line not printed");
    }
}
