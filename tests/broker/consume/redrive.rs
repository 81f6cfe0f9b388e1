//! Dead-letter redrive end to end: poison messages are dead-lettered with
//! the handler's error, the handler is fixed, the redrive moves them back
//! (with key, event time and their own properties, the letter properties
//! stripped), and every message is processed exactly once.

use std::collections::HashMap;
use std::time::Duration;

use pulsar_wire::consumer::dead_letter::{
    DLQ_DELIVERY_COUNT, DLQ_LAST_ERROR, DLQ_SUBSCRIPTION, ORIGIN_MESSAGE_ID, REAL_TOPIC,
};
use pulsar_wire::consumer::{DeadLetterPolicy, Outcome, RunOptions};
use pulsar_wire::producer::ProducerMessage;

use super::dead_letter::{producer, send};
use super::*;

/// Where the handler reports each message it processed.
type Seen = tokio::sync::mpsc::UnboundedSender<String>;

/// Everything reported so far, sorted.
fn drain(rx: &mut tokio::sync::mpsc::UnboundedReceiver<String>) -> Vec<String> {
    let mut all = Vec::new();
    while let Ok(text) = rx.try_recv() {
        all.push(text);
    }
    all.sort();
    all
}

/// Runs `handler_fails` as a `Consumer::run` handler on subscription "s"
/// of `topic` (dead letters after 2 deliveries, kept by "keep"); every
/// message it does not fail is recorded in `seen`. Returns the consumer
/// (close it to stop the run) and the run's task.
async fn run_handler(
    client: &Client,
    topic: &str,
    seen: Seen,
    fails: fn(&str) -> bool,
) -> (Consumer, tokio::task::JoinHandle<Result<(), ConsumerError>>) {
    let consumer = client
        .consumer(topic, "s")
        .subscription_type(SubscriptionType::Shared)
        .initial_position(InitialPosition::Earliest)
        .dead_letter_policy(DeadLetterPolicy {
            initial_subscription_name: Some("keep".into()),
            ..DeadLetterPolicy::after_redeliveries(2)
        })
        .subscribe()
        .await
        .expect("subscribe");
    let runner = consumer.clone();
    let run = tokio::spawn(async move {
        let handler = move |msg: pulsar_wire::Message| {
            let seen = seen.clone();
            async move {
                let text = text(&msg);
                if fails(&text) {
                    return Err(format!("cannot parse {text:?}"));
                }
                let _ = seen.send(text);
                Ok(Outcome::Ack)
            }
        };
        runner.run(handler, RunOptions::default()).await
    });
    (consumer, run)
}

#[tokio::test]
async fn poison_messages_are_dead_lettered_redriven_and_processed_once() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("redrive", async {
        let client = client(&broker).await;
        let topic = unique_topic("redrive");
        let dlq = format!("{topic}-s-DLQ");
        let producer = producer(&client, &topic).await;
        let (seen, mut processed) = tokio::sync::mpsc::unbounded_channel();
        let (consumer, run) =
            run_handler(&client, &topic, seen.clone(), |t| t.starts_with("poison")).await;
        let mut ids = HashMap::new();
        for text in ["a", "poison-1", "b", "poison-2", "c"] {
            let msg = ProducerMessage::new(text)
                .key(format!("key-{text}"))
                .property("text", text)
                .event_time(1_700_000_000_000);
            ids.insert(text, send(&producer, msg).await);
        }
        // Both poison messages reach the dead-letter topic.
        let mut reader = client
            .reader(dlq.clone())
            .start_message_id(MessageId::EARLIEST)
            .create()
            .await
            .expect("reader");
        let mut copies = Vec::new();
        for _ in 0..2 {
            copies.push(reader.read_next().await.expect("a dead letter"));
        }
        reader.close().await.expect("close reader");
        consumer.close().await.expect("close");
        run.await.expect("join").expect("run");
        for copy in &copies {
            let p = copy.properties();
            let text = text(copy);
            assert_eq!(p[REAL_TOPIC], topic);
            assert_eq!(p[ORIGIN_MESSAGE_ID], ids[text.as_str()].to_string());
            assert_eq!(p[DLQ_SUBSCRIPTION], "s");
            assert_eq!(p[DLQ_DELIVERY_COUNT], "2");
            assert_eq!(p[DLQ_LAST_ERROR], format!("cannot parse {text:?}"));
        }
        assert_eq!(drain(&mut processed), ["a", "b", "c"]);

        // A dry run lists, a filter narrows, and neither moves anything.
        let redrive = client
            .redrive(dlq.clone())
            .subscription("keep")
            .idle(Duration::from_millis(500));
        let planned = redrive.clone().dry_run().await.expect("dry run");
        assert!(planned.skipped.is_empty(), "{planned:?}");
        let planned = planned.moved;
        assert_eq!(planned.len(), 2);
        assert!(planned.iter().all(|r| r.target == topic));
        assert!(planned.iter().all(|r| r.published.is_none()));
        let one = redrive
            .clone()
            .filter_property("text", "poison-2")
            .dry_run()
            .await
            .expect("filtered dry run")
            .moved;
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].key.as_deref(), Some("key-poison-2"));
        assert_eq!(
            one[0].properties,
            [("text".to_owned(), "poison-2".to_owned())],
            "the letter properties are stripped"
        );

        let first = redrive.clone().limit(1).dry_run().await.expect("limited");
        let first = first.moved;
        assert_eq!(first.len(), 1, "a limit of 1 lists one: {first:?}");

        // The handler is fixed; the redrive moves both back.
        let (consumer, run) = run_handler(&client, &topic, seen.clone(), |_| false).await;
        let moved = redrive.clone().run().await.expect("redrive").moved;
        assert_eq!(moved.len(), 2);
        assert!(moved.iter().all(|r| r.published.is_some()));
        send(&producer, ProducerMessage::new("end")).await;
        // "end" was published after the redriven copies were confirmed, so
        // it is handled after them.
        let mut second = Vec::new();
        while second.last().map(String::as_str) != Some("end") {
            second.push(processed.recv().await.expect("processed"));
        }
        consumer.close().await.expect("close");
        run.await.expect("join").expect("run");
        second.extend(drain(&mut processed));
        second.sort();
        assert_eq!(second, ["end", "poison-1", "poison-2"], "each once");

        // The copies keep their key and event time.
        let mut reader = client
            .reader(topic.clone())
            .start_message_id(MessageId::EARLIEST)
            .create()
            .await
            .expect("reader");
        let mut again = Vec::new();
        while again.len() < 2 {
            let msg = reader.read_next().await.expect("a message");
            if text(&msg).starts_with("poison") && !ids.values().any(|id| *id == msg.id()) {
                again.push(msg);
            }
        }
        reader.close().await.expect("close reader");
        for msg in &again {
            let text = text(msg);
            assert_eq!(msg.key(), Some(format!("key-{text}").as_str()));
            assert_eq!(msg.event_time(), Some(1_700_000_000_000));
            assert_eq!(msg.properties()["text"], text);
        }

        // The dead-letter copies were acked: nothing left to move.
        let left = redrive.dry_run().await.expect("dry run after");
        assert!(left.moved.is_empty() && left.skipped.is_empty(), "{left:?}");
    })
    .await;
}
