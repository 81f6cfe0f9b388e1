//! The test kit (`pulsar_wire::testing`) against the client: the
//! behaviours users test their handlers with, and the injected faults.

use std::time::Duration;

use pulsar_wire::consumer::dead_letter::{DLQ_DELIVERY_COUNT, DLQ_LAST_ERROR, REAL_TOPIC};
use pulsar_wire::consumer::{DeadLetterPolicy, Outcome, RunOptions, SubscriptionType};
use pulsar_wire::producer::ProducerMessage;
use pulsar_wire::proto::ServerError;
use pulsar_wire::testing::{EventKind, TestBroker};
use pulsar_wire::{Client, Consumer, ConsumerError, Message, MessageId};

use crate::common::guard;

const TOPIC: &str = "persistent://public/default/orders";

/// Publishes `messages` to `topic`, each confirmed before the next.
async fn publish(
    client: &Client,
    topic: &str,
    messages: impl IntoIterator<Item = ProducerMessage>,
) -> Vec<MessageId> {
    let producer = client.producer(topic).create().await.expect("producer");
    let mut ids = Vec::new();
    for msg in messages {
        ids.push(
            producer
                .send(msg)
                .await
                .expect("queued")
                .await
                .expect("stored"),
        );
    }
    ids
}

/// Runs `handler` on `consumer` in a task of its own.
fn spawn_run<F, Fut, E>(
    consumer: &Consumer,
    handler: F,
    options: RunOptions,
) -> tokio::task::JoinHandle<Result<(), ConsumerError>>
where
    F: FnMut(Message) -> Fut + Send + 'static,
    Fut: Future<Output = Result<Outcome, E>> + Send + 'static,
    E: std::fmt::Display + Send + 'static,
{
    let runner = consumer.clone();
    tokio::spawn(async move { runner.run(handler, options).await })
}

#[tokio::test(start_paused = true)]
async fn a_message_failed_three_times_ends_in_the_dead_letter_topic() {
    let broker = TestBroker::start();
    let client = broker.client().await.expect("client");
    let consumer = client
        .consumer(TOPIC, "billing")
        .subscription_type(SubscriptionType::Shared)
        .dead_letter_policy(DeadLetterPolicy::after_redeliveries(3))
        .subscribe()
        .await
        .expect("subscribe");
    publish(&client, TOPIC, [ProducerMessage::new("poison").key("k")]).await;
    let handler = |_msg| async { Err::<Outcome, _>("cannot parse") };
    let run = spawn_run(&consumer, handler, RunOptions::default());
    guard(
        "the dead letter",
        broker.wait_until(|b| !b.dead_letters(TOPIC, "billing").is_empty()),
    )
    .await;
    guard(
        "the original acked",
        broker.wait_until(|b| b.backlog(TOPIC, "billing") == Some(0)),
    )
    .await;
    let dead = broker.dead_letters(TOPIC, "billing");
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].text(), "poison");
    assert_eq!(dead[0].key.as_deref(), Some("k"));
    assert_eq!(dead[0].property(REAL_TOPIC), Some(TOPIC));
    assert_eq!(dead[0].property(DLQ_DELIVERY_COUNT), Some("3"));
    assert_eq!(dead[0].property(DLQ_LAST_ERROR), Some("cannot parse"));
    let counts: Vec<u32> = broker
        .deliveries(TOPIC, "billing")
        .iter()
        .map(|(_, _, count)| *count)
        .collect();
    assert_eq!(counts, [0, 1, 2, 3]);
    assert_eq!(broker.redelivery_requests(TOPIC, "billing").len(), 3);
    consumer.close().await.expect("close");
    run.await.expect("join").expect("run");
}

/// Runs a handler that holds its first delivery for 1.5 s of the paused
/// clock under a 1 s ack timeout: the test steps the clock while the
/// handler waits, then lets it finish. Returns the redelivery requests'
/// times.
async fn slow_first_delivery(options: RunOptions) -> Vec<Duration> {
    let broker = TestBroker::start();
    let client = broker.client().await.expect("client");
    let consumer = client
        .consumer(TOPIC, "s")
        .subscription_type(SubscriptionType::Shared)
        .ack_timeout(Duration::from_secs(1))
        .subscribe()
        .await
        .expect("subscribe");
    let id = publish(&client, TOPIC, [ProducerMessage::new("slow")]).await[0];
    let (finish, finished) = tokio::sync::watch::channel(false);
    let handler = move |msg: Message| {
        let mut finished = finished.clone();
        async move {
            if msg.redelivery_count() == 0 {
                let _ = finished.wait_for(|done| *done).await;
            }
            Ok::<_, std::convert::Infallible>(Outcome::Ack)
        }
    };
    let run = spawn_run(&consumer, handler, options);
    guard(
        "the first delivery",
        broker.wait_until(|b| !b.deliveries(TOPIC, "s").is_empty()),
    )
    .await;
    // The handler's 1.5 s of work, in steps the consumer's timers see.
    for _ in 0..15 {
        tokio::time::advance(Duration::from_millis(100)).await;
    }
    finish.send(true).expect("the handler waits");
    guard(
        "the ack",
        broker.wait_until(|b| b.acked(TOPIC, "s") == [id.entry()]),
    )
    .await;
    consumer.close().await.expect("close");
    run.await.expect("join").expect("run");
    broker
        .redelivery_requests(TOPIC, "s")
        .into_iter()
        .map(|(at, _)| at)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_slow_handler_triggers_the_ack_timeout_once_and_a_lease_prevents_it() {
    let requests = slow_first_delivery(RunOptions::default()).await;
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert!(requests[0] >= Duration::from_secs(1), "{requests:?}");
    let leased = slow_first_delivery(RunOptions::default().lease(Duration::from_secs(30))).await;
    assert_eq!(leased, [] as [Duration; 0]);
}

#[tokio::test(start_paused = true)]
async fn a_dead_letter_topic_that_refuses_writes_loses_nothing() {
    let broker = TestBroker::start();
    let dlq = format!("{TOPIC}-s-DLQ");
    broker.fail_sends(&dlq, 2, ServerError::PersistenceError);
    broker.slow_sends(&dlq, Duration::from_secs(5));
    let client = broker.client().await.expect("client");
    let consumer = client
        .consumer(TOPIC, "s")
        .subscription_type(SubscriptionType::Shared)
        .dead_letter_policy(DeadLetterPolicy::after_redeliveries(1))
        .subscribe()
        .await
        .expect("subscribe");
    publish(&client, TOPIC, [ProducerMessage::new("poison")]).await;
    let handler = |_msg| async { Ok::<_, std::convert::Infallible>(Outcome::Retry) };
    let run = spawn_run(&consumer, handler, RunOptions::default());
    guard(
        "acked after the dead letter",
        broker.wait_until(|b| b.backlog(TOPIC, "s") == Some(0)),
    )
    .await;
    let dead = broker.dead_letters(TOPIC, "s");
    assert_eq!(dead.len(), 1, "stored once, after the refusals");
    assert!(
        dead[0].stored_at >= Duration::from_secs(5),
        "slow: {:?}",
        dead[0].stored_at
    );
    let failed = broker
        .events()
        .iter()
        .filter(|e| e.topic == dlq && matches!(e.kind, EventKind::SendFailed { .. }))
        .count();
    assert_eq!(failed, 2);
    consumer.close().await.expect("close");
    run.await.expect("join").expect("run");
}

#[tokio::test(start_paused = true)]
async fn every_message_of_a_partitioned_topic_is_processed_across_a_disconnect() {
    let broker = TestBroker::start();
    broker.create_partitioned_topic(TOPIC, 3);
    let client = broker.client().await.expect("client");
    let consumer = client
        .consumer(TOPIC, "s")
        .subscription_type(SubscriptionType::KeyShared)
        .subscribe()
        .await
        .expect("subscribe");
    let messages =
        (0..30).map(|n| ProducerMessage::new(format!("m{n}")).key(format!("k{}", n % 7)));
    publish(&client, TOPIC, messages).await;
    let (done_tx, mut done) = tokio::sync::mpsc::unbounded_channel();
    let handler = move |msg: Message| {
        let done = done_tx.clone();
        async move {
            let _ = done.send(String::from_utf8_lossy(msg.payload()).into_owned());
            Ok::<_, std::convert::Infallible>(Outcome::Ack)
        }
    };
    let run = spawn_run(&consumer, handler, RunOptions::default());
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..10 {
        seen.insert(guard("processed", done.recv()).await.expect("a message"));
    }
    broker.disconnect_all();
    let partitions: Vec<String> = (0..3).map(|i| format!("{TOPIC}-partition-{i}")).collect();
    guard(
        "all acked",
        broker.wait_until(|b| partitions.iter().all(|p| b.backlog(p, "s") == Some(0))),
    )
    .await;
    consumer.close().await.expect("close");
    run.await.expect("join").expect("run");
    while let Ok(text) = done.try_recv() {
        seen.insert(text);
    }
    let all: std::collections::BTreeSet<String> = (0..30).map(|n| format!("m{n}")).collect();
    assert_eq!(
        seen, all,
        "every message handled (some twice, after the disconnect)"
    );
    let stored: usize = partitions.iter().map(|p| broker.messages(p).len()).sum();
    assert_eq!(stored, 30);
}

#[tokio::test(start_paused = true)]
async fn a_retry_later_comes_back_after_its_delay_through_the_retry_topic() {
    let broker = TestBroker::start();
    let client = broker.client().await.expect("client");
    let consumer = client
        .consumer(TOPIC, "s")
        .subscription_type(SubscriptionType::Shared)
        .enable_retry(true)
        .subscribe()
        .await
        .expect("subscribe");
    publish(&client, TOPIC, [ProducerMessage::new("later")]).await;
    let handler = |msg: Message| async move {
        Ok::<_, std::convert::Infallible>(match msg.properties().contains_key("RECONSUMETIMES") {
            false => Outcome::RetryLater(Duration::from_secs(10)),
            true => Outcome::Ack,
        })
    };
    let run = spawn_run(&consumer, handler, RunOptions::default());
    let retry = format!("{TOPIC}-s-RETRY");
    guard(
        "the retry acked",
        broker.wait_until(|b| !b.acked(&retry, "s").is_empty()),
    )
    .await;
    let delivered = broker.deliveries(&retry, "s");
    let stored = broker.messages(&retry);
    assert_eq!(stored[0].deliver_after, Some(Duration::from_secs(10)));
    assert!(
        delivered[0].0 >= stored[0].stored_at + Duration::from_secs(10),
        "{delivered:?}"
    );
    assert_eq!(broker.backlog(TOPIC, "s"), Some(0));
    consumer.close().await.expect("close");
    run.await.expect("join").expect("run");
}
