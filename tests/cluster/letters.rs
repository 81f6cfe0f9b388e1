//! Dead-letter and retry topics owned by the other broker than their source
//! topic: the consumer's forwards cross brokers (their own lookups and
//! producers), and every message ends up in the dead-letter topic exactly
//! where the policy sends it, the originals acked.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use pulsar_wire::Client;
use pulsar_wire::consumer::{Consumer, DeadLetterPolicy, InitialPosition, SubscriptionType};
use pulsar_wire::producer::Producer;

use super::traffic::{body, client, number, producer, shared};
use crate::common::cluster::Cluster;
use crate::common::{admin, guard, unique_topic};

const TOTAL: u64 = 100;

/// A source topic on broker 1 whose `-s-DLQ` and `-s-RETRY` topics are on
/// broker 2 (names tried until the letter topics hash into other bundles).
async fn topics_on_two_brokers(cluster: &Cluster, prefix: &str) -> (String, String, String) {
    for _ in 0..64 {
        let topic = unique_topic(prefix);
        let (dlq, retry) = (format!("{topic}-s-DLQ"), format!("{topic}-s-RETRY"));
        let bundle = admin::topic_bundle(cluster.admin(), &topic).await;
        if admin::topic_bundle(cluster.admin(), &dlq).await == bundle
            || admin::topic_bundle(cluster.admin(), &retry).await == bundle
        {
            continue;
        }
        cluster.place(&topic, 1).await;
        cluster.place(&dlq, 2).await;
        cluster.place(&retry, 2).await;
        return (topic, dlq, retry);
    }
    panic!("no name whose letter topics hash into other bundles in 64 tries");
}

/// The consumer with a dead-letter policy of `max` whose DLQ keeps copies
/// in subscription "keep".
async fn with_policy(client: &Client, topic: &str, max: u32, retry: bool) -> Consumer {
    client
        .consumer(topic, "s")
        .subscription_type(SubscriptionType::Shared)
        .initial_position(InitialPosition::Earliest)
        .dead_letter_policy(DeadLetterPolicy {
            initial_subscription_name: Some("keep".into()),
            ..DeadLetterPolicy::after_redeliveries(max)
        })
        .enable_retry(retry)
        .subscribe()
        .await
        .expect("subscribe")
}

async fn send_all(producer: &Producer) {
    let mut receipts = Vec::new();
    for i in 0..TOTAL {
        receipts.push(producer.send(body(i)).await.expect("queued"));
    }
    for receipt in receipts {
        receipt.await.expect("stored");
    }
}

/// Reads the DLQ's "keep" subscription until every message is there.
async fn all_dead_lettered(client: &Client, dlq: &str) {
    let mut letters = shared(client, dlq, "keep").await;
    let mut seen = HashSet::new();
    while (seen.len() as u64) < TOTAL {
        let m = letters.receive().await.expect("a dead letter");
        seen.insert(number(m.payload()));
        letters.ack(&m).await.expect("ack");
    }
    letters.close().await.expect("close");
}

#[tokio::test]
async fn nacked_messages_go_to_a_dead_letter_topic_on_the_other_broker() {
    let Some(cluster) = Cluster::attach().await else {
        return;
    };
    guard("dead letters across brokers", async {
        let (topic, dlq, _) = topics_on_two_brokers(&cluster, "dlq-across").await;
        let client = client(&cluster.broker(1).service_url).await;
        let mut consumer = with_policy(&client, &topic, 1, false).await;
        send_all(&producer(&client, &topic).await).await;
        // The application nacks everything: after one redelivery each
        // message is published to the DLQ on broker 2, then acked.
        let nacking = tokio::spawn(async move {
            while let Ok(m) = consumer.receive().await {
                let _ = consumer.nack(&m);
            }
        });
        all_dead_lettered(&client, &dlq).await;
        nacking.abort();
        assert_eq!(cluster.owner(&topic).await, 1);
        assert_eq!(cluster.owner(&dlq).await, 2);
        client.close().await;
    })
    .await;
}

#[tokio::test]
async fn retry_letters_cross_to_the_other_broker_and_end_in_its_dead_letter_topic() {
    let Some(cluster) = Cluster::attach().await else {
        return;
    };
    guard("retry letters across brokers", async {
        let (topic, dlq, retry) = topics_on_two_brokers(&cluster, "retry-across").await;
        let client = client(&cluster.broker(1).service_url).await;
        let mut consumer = with_policy(&client, &topic, 2, true).await;
        assert!(
            consumer.topics().contains(&retry),
            "{:?}",
            consumer.topics()
        );
        send_all(&producer(&client, &topic).await).await;
        // Every delivery is put off: two retry letters on broker 2, then
        // the dead-letter topic there.
        let from_retry = Arc::new(AtomicU64::new(0));
        let counter = from_retry.clone();
        let retry_topic = retry.clone();
        let retrying = tokio::spawn(async move {
            while let Ok(m) = consumer.receive().await {
                if m.topic() == retry_topic {
                    counter.fetch_add(1, Ordering::Relaxed);
                }
                let _ = consumer
                    .reconsume_later(&m, Duration::from_millis(10))
                    .await;
            }
        });
        all_dead_lettered(&client, &dlq).await;
        retrying.abort();
        let from_retry = from_retry.load(Ordering::Relaxed);
        assert!(from_retry >= 2 * TOTAL, "{from_retry} retry deliveries");
        assert_eq!(cluster.owner(&topic).await, 1);
        assert_eq!(cluster.owner(&retry).await, 2);
        assert_eq!(cluster.owner(&dlq).await, 2);
        client.close().await;
    })
    .await;
}
