//! `Consumer::run`: each handler outcome sends what it says (ack, nack,
//! reconsume later), an error or a panic nacks and the loop goes on, the
//! concurrency limit holds, and closing the consumer ends the run with Ok.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use pulsar_wire::consumer::dead_letter::RECONSUMETIMES;
use pulsar_wire::consumer::{DeadLetterPolicy, Outcome, RunOptions};
use pulsar_wire::producer::ProducerMessage;
use tokio::sync::{Semaphore, mpsc};

use super::dead_letter::{producer, send};
use super::*;

/// One handler call, as the handler saw it.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    text: String,
    count: u32,
    retry_topic: bool,
    reconsumed: Option<String>,
}

#[tokio::test]
async fn each_outcome_sends_its_command_and_failures_nack() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("outcomes", async {
        let client = client(&broker).await;
        let topic = unique_topic("outcomes");
        let consumer = client
            .consumer(&topic, "s")
            .subscription_type(SubscriptionType::Shared)
            .initial_position(InitialPosition::Earliest)
            .dead_letter_policy(DeadLetterPolicy::after_redeliveries(3))
            .enable_retry(true)
            .subscribe()
            .await
            .expect("subscribe");
        let producer = producer(&client, &topic).await;
        let texts = ["ack", "retry", "later", "fail", "panic"];
        for t in texts {
            send(&producer, ProducerMessage::new(t)).await;
        }

        let (seen_tx, mut seen) = mpsc::unbounded_channel();
        let runner = consumer.clone();
        let run = tokio::spawn(async move {
            runner
                .run(
                    move |msg| {
                        let seen_tx = seen_tx.clone();
                        async move {
                            let s = Seen {
                                text: text(&msg),
                                count: msg.redelivery_count(),
                                retry_topic: msg.topic().ends_with("-s-RETRY"),
                                reconsumed: msg.properties().get(RECONSUMETIMES).cloned(),
                            };
                            let first = s.count == 0 && !s.retry_topic;
                            let _ = seen_tx.send(s.clone());
                            match (s.text.as_str(), first) {
                                ("retry", true) => Ok(Outcome::Retry),
                                ("later", true) => Ok(Outcome::RetryLater(Duration::ZERO)),
                                ("fail", true) => Err("handler failed"),
                                ("panic", true) => panic!("handler panicked (on purpose)"),
                                _ => Ok(Outcome::Ack),
                            }
                        }
                    },
                    RunOptions::default(),
                )
                .await
        });

        // Each message's second call acks it; "ack" needs one.
        let mut calls: HashMap<String, Vec<Seen>> = HashMap::new();
        let done = |calls: &HashMap<String, Vec<Seen>>| {
            texts
                .iter()
                .all(|t| calls.get(*t).map_or(0, Vec::len) >= if *t == "ack" { 1 } else { 2 })
        };
        while !done(&calls) {
            let s = seen.recv().await.expect("a handler call");
            calls.entry(s.text.clone()).or_default().push(s);
        }
        consumer.close().await.expect("close");
        let ended = run.await.expect("run task");
        assert!(ended.is_ok(), "closing ends the run with Ok: {ended:?}");

        let view = |t: &str| -> Vec<(u32, bool, Option<String>)> {
            calls[t]
                .iter()
                .map(|s| (s.count, s.retry_topic, s.reconsumed.clone()))
                .collect()
        };
        assert_eq!(view("ack"), [(0, false, None)]);
        for nacked in ["retry", "fail", "panic"] {
            assert_eq!(
                view(nacked),
                [(0, false, None), (1, false, None)],
                "{nacked}: nacked, back with its count raised"
            );
        }
        assert_eq!(
            view("later"),
            [(0, false, None), (0, true, Some("1".into()))],
            "later: through the retry topic"
        );

        // Everything was acked in the end, on both topics.
        send(&producer, ProducerMessage::new("after")).await;
        let mut again = shared(&client, &topic, "s", 10).await;
        assert_eq!(text(&again.receive().await.expect("receive")), "after");
    })
    .await;
}

#[tokio::test]
async fn the_concurrency_limit_holds() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("concurrency", async {
        let client = client(&broker).await;
        let topic = unique_topic("concurrency");
        let consumer = shared(&client, &topic, "s", 100).await;
        let producer = producer(&client, &topic).await;
        for i in 0..12 {
            send(&producer, ProducerMessage::new(format!("m{i}"))).await;
        }
        let gate = Arc::new(Semaphore::new(0));
        let (in_flight, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (started_tx, mut started) = mpsc::unbounded_channel();
        let runner = consumer.clone();
        let handler = {
            let (gate, in_flight, most) = (gate.clone(), in_flight.clone(), most.clone());
            move |msg: pulsar_wire::Message| {
                let (gate, in_flight, most) = (gate.clone(), in_flight.clone(), most.clone());
                let started_tx = started_tx.clone();
                async move {
                    let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    let _ = started_tx.send(text(&msg));
                    gate.acquire().await.expect("gate").forget();
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    Ok::<_, std::convert::Infallible>(Outcome::Ack)
                }
            }
        };
        let run = tokio::spawn(async move {
            runner
                .run(handler, RunOptions::default().concurrency(3))
                .await
        });
        // Three calls start and wait at the gate; no fourth may start.
        for _ in 0..3 {
            started.recv().await.expect("started");
        }
        assert_eq!(most.load(Ordering::SeqCst), 3);
        gate.add_permits(12);
        for _ in 3..12 {
            started.recv().await.expect("started");
        }
        assert_eq!(most.load(Ordering::SeqCst), 3, "never more than 3 at once");
        consumer.close().await.expect("close");
        run.await.expect("run task").expect("run ends Ok");
    })
    .await;
}

#[tokio::test]
async fn a_zero_concurrency_is_a_typed_error() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let client = client(&broker).await;
    let consumer = shared(&client, &unique_topic("zero-concurrency"), "s", 10).await;
    let result = consumer
        .run(
            |_| async { Ok::<_, std::convert::Infallible>(Outcome::Ack) },
            RunOptions::default().concurrency(0),
        )
        .await;
    assert!(
        matches!(result, Err(ConsumerError::ZeroConcurrency)),
        "{result:?}"
    );
}
