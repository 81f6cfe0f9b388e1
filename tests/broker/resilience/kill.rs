//! The broker is killed with SIGKILL and restarted on the same port and
//! data directory while a producer sends, a consumer acks, or a consumer
//! forwards to its dead-letter topic: no confirmed message is lost, every
//! ack holds, and the handles carry on by themselves. pulsar-lite
//! only: on Apache the broker process is not the test's to kill.

use std::collections::HashSet;

use pulsar_wire::consumer::DeadLetterPolicy;
use tokio::sync::oneshot;

use super::*;
use crate::common::acks::{AckBook, Fault, Faults, assert_nothing_left_before};
use crate::common::broker::{BrokerKind, skip_unless};
use crate::common::{Progress, guard_progress, unique_topic};

const REASON: &str = "kills and restarts the broker process, which only a per-test pulsar-lite is";

#[tokio::test]
async fn kill_9_during_produce_loses_no_confirmed_message() {
    const TOTAL: u64 = 5_000;
    if skip_unless(BrokerKind::Lite, REASON) {
        return;
    }
    let Some(mut broker) = TestBroker::start().await else {
        return;
    };
    let topic = unique_topic("kill-produce");
    let client = direct(&broker).await;
    let producer = client.producer(&topic).create().await.expect("producer");
    let (halfway_tx, halfway) = oneshot::channel();
    let progress = Progress::default();
    let confirming = progress.clone();
    let sending = tokio::spawn(async move {
        let mut halfway = Some(halfway_tx);
        let mut pending = std::collections::VecDeque::new();
        let mut confirmed = Vec::new();
        for i in 0..TOTAL {
            pending.push_back((i, producer.send(body(i)).await.expect("queued")));
            while pending.len() > 500 {
                let (n, receipt) = pending.pop_front().expect("non-empty");
                receipt.await.unwrap_or_else(|e| panic!("send {n}: {e}"));
                confirmed.push(n);
                confirming.tick();
            }
            if confirmed.len() >= 1_000 {
                if let Some(tx) = halfway.take() {
                    let _ = tx.send(());
                }
            }
        }
        for (n, receipt) in pending {
            receipt.await.unwrap_or_else(|e| panic!("send {n}: {e}"));
            confirmed.push(n);
            confirming.tick();
        }
        producer.close().await.expect("close");
        confirmed
    });
    guard_progress("kill during produce", &progress, async {
        halfway.await.expect("1,000 confirmed");
        broker.kill9_and_restart().await;
    })
    .await;
    let confirmed = guard_progress("producer carries on", &progress, sending)
        .await
        .expect("task");
    assert_eq!(confirmed.len() as u64, TOTAL);

    let check = direct(&broker).await;
    let end = check.producer(&topic).create().await.expect("end producer");
    end.send(END)
        .await
        .expect("queued")
        .await
        .expect("end marker");
    let read = read_back(&check, &topic).await;
    let duplicates = check_all_there_in_order(&confirmed, &read);
    eprintln!(
        "kill-produce: {} confirmed, {} read back after kill -9, {duplicates} duplicates",
        confirmed.len(),
        read.len()
    );
}

/// Consumes 3,000 messages with individual acks (the default: `ack()`
/// hands the ack to the consumer's task) and kills the broker after 1,000
/// deliveries. Asserts that every message is delivered, and that every ack
/// held:
/// - no message reaches the application twice. The loop acks each message
///   before it takes the next, so at the kill it holds no unacked message.
///   The broker may lose acks at the kill (pulsar-lite: those of the last
///   ~50 ms, in about one run in six); every ack made before it is among
///   the 1,000 the consumer remembers, and it drops the copies the broker
///   sends of those (docs/consumer-acks.md), so none reaches the application;
/// - after the run a new consumer on the subscription finds nothing before
///   a marker sent then: every ack took effect on the broker.
#[tokio::test]
async fn kill_9_during_consume_loses_nothing_and_keeps_every_ack() {
    const TOTAL: u64 = 3_000;
    /// Deliveries before the kill: at most the 1,000 acks the consumer remembers.
    const KILL_AT: u64 = 1_000;
    if skip_unless(BrokerKind::Lite, REASON) {
        return;
    }
    let Some(mut broker) = TestBroker::start().await else {
        return;
    };
    let topic = unique_topic("kill-consume");
    let client = direct(&broker).await;
    let producer = client.producer(&topic).create().await.expect("producer");
    let mut consumer = fresh_consumer(&client, &topic, "kill").await;
    produce_bodies(&producer, TOTAL).await;

    let faults = Faults::default();
    let mut book = AckBook::new(faults.clone());
    let mut seen = HashSet::new();
    let progress = Progress::default();
    guard_progress("consume, kill -9, consume", &progress, async {
        while (seen.len() as u64) < TOTAL {
            if book.deliveries() == KILL_AT && faults.count() == 0 {
                faults.begin(Fault::Kill);
                broker.kill9_and_restart().await;
            }
            let m = consumer.receive().await.expect("receive");
            progress.tick();
            let n = number(m.payload()).expect("a test payload");
            book.delivered(n, m.id());
            seen.insert(n);
            book.acked(m.id(), consumer.ack(&m).await);
        }
    })
    .await;
    assert_eq!(
        seen.len() as u64,
        TOTAL,
        "every message delivered at least once"
    );
    assert_eq!(faults.kills(), 1, "the broker was killed mid-run");
    assert!(
        book.failed_acks().is_empty(),
        "acks failed: {:?}",
        book.failed_acks()
    );
    book.assert_acks_held("kill-consume");
    assert!(
        book.returned_after_kill().is_empty(),
        "messages acked before the kill handed out again (first 10): {:?}",
        &book.returned_after_kill()[..book.returned_after_kill().len().min(10)]
    );
    assert_eq!(book.redeliveries(), 0, "messages handed out twice");
    consumer.close().await.expect("close");
    assert_nothing_left_before(&client, &topic, "kill", END).await;
    eprintln!(
        "kill-consume: {TOTAL} messages, {} deliveries, 0 handed out twice, every ack kept",
        book.deliveries()
    );
}

#[tokio::test]
async fn kill_9_while_forwarding_to_the_dead_letter_topic_loses_no_message() {
    const TOTAL: u64 = 300;
    if skip_unless(BrokerKind::Lite, REASON) {
        return;
    }
    let Some(mut broker) = TestBroker::start().await else {
        return;
    };
    let topic = unique_topic("kill-dlq");
    let client = direct(&broker).await;
    let producer = client.producer(&topic).create().await.expect("producer");
    produce_bodies(&producer, TOTAL).await;
    let mut consumer = client
        .consumer(&topic, "dlq")
        .subscription_type(SubscriptionType::Shared)
        .initial_position(InitialPosition::Earliest)
        .dead_letter_policy(DeadLetterPolicy::after_redeliveries(1))
        .subscribe()
        .await
        .expect("subscribe");
    let checker = direct(&broker).await;
    let mut letters = fresh_consumer(&checker, &format!("{topic}-dlq-DLQ"), "check").await;
    // The application nacks everything: each message comes back once and
    // is then published to the DLQ, and the original acked after that.
    let nacking = tokio::spawn(async move {
        while let Ok(m) = consumer.receive().await {
            let _ = consumer.nack(&m);
        }
    });
    let mut seen = HashSet::new();
    let mut copies = 0u64;
    let mut killed = false;
    let progress = Progress::default();
    guard_progress("forward to the DLQ, kill -9, forward", &progress, async {
        while (seen.len() as u64) < TOTAL {
            if !killed && seen.len() as u64 >= TOTAL / 3 {
                // Forwards are in flight: some are published and not acked yet.
                broker.kill9_and_restart().await;
                killed = true;
            }
            let m = letters.receive().await.expect("receive from the DLQ");
            progress.tick();
            copies += 1;
            seen.insert(number(m.payload()).expect("a test payload"));
            let _ = letters.ack(&m).await;
        }
    })
    .await;
    nacking.abort();
    assert!(killed);
    eprintln!("kill-dlq: {TOTAL} messages, all in the DLQ, {copies} copies read there");
}
