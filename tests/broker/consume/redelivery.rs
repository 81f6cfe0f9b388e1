//! Redelivery on the subscription types pulsar-lite gets wrong, so these
//! run on Apache Pulsar only: on Key_Shared a nack and an ack timeout bring
//! a message back with its count raised (pulsar-lite stalls the key after
//! a nack); on Failover a nack rewinds to the first unacked message, in
//! order, counts staying 0 (pulsar-lite ignores the request there).

use std::time::Duration;

use pulsar_wire::consumer::NackPolicy;

use super::*;

const KEY_SHARED_STALLS: &str = "pulsar-lite stalls a Key_Shared key after a redelivery request (one message back, then nothing)";

async fn key_shared(client: &Client, topic: &str, ack_timeout: Option<Duration>) -> Consumer {
    let mut builder = client
        .consumer(topic, "s")
        .subscription_type(SubscriptionType::KeyShared)
        .initial_position(InitialPosition::Earliest)
        .nack_policy(NackPolicy::Immediate);
    if let Some(timeout) = ack_timeout {
        builder = builder
            .ack_timeout(timeout)
            .ack_timeout_tick(Duration::from_millis(100));
    }
    builder.subscribe().await.expect("subscribe")
}

#[tokio::test]
async fn key_shared_a_nacked_message_comes_back_with_its_count_raised() {
    if skip_on(BrokerKind::Lite, KEY_SHARED_STALLS) {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("key_shared nack", async {
        let client = client(&broker).await;
        let topic = unique_topic("ks-nack");
        let mut consumer = key_shared(&client, &topic, None).await;
        let mut producer = RawProducer::create(&client, &topic).await;
        let id = producer.send("again").await;
        for count in 0..3 {
            let m = consumer.receive().await.expect("receive");
            assert_eq!((m.id(), m.redelivery_count()), (id, count));
            if count < 2 {
                consumer.nack(&m).expect("nack");
            } else {
                consumer.ack(&m).await.expect("ack");
            }
        }
        // The key is not stalled: the next message with it arrives.
        producer.send("again").await;
        let next = consumer.receive().await.expect("next on the same key");
        assert_eq!((text(&next), next.redelivery_count()), ("again".into(), 0));
    })
    .await;
}

#[tokio::test]
async fn key_shared_an_unacked_message_comes_back_after_the_ack_timeout() {
    if skip_on(BrokerKind::Lite, KEY_SHARED_STALLS) {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("key_shared ack timeout", async {
        let client = client(&broker).await;
        let topic = unique_topic("ks-timeout");
        // A short real timeout; the test waits on the redelivery itself.
        let mut consumer = key_shared(&client, &topic, Some(Duration::from_millis(300))).await;
        let mut producer = RawProducer::create(&client, &topic).await;
        let id = producer.send("forgotten").await;
        let held = consumer.receive().await.expect("receive");
        assert_eq!((held.id(), held.redelivery_count()), (id, 0));
        let again = consumer.receive().await.expect("redelivery");
        assert_eq!((again.id(), again.redelivery_count()), (id, 1));
        consumer.ack(&again).await.expect("ack");
    })
    .await;
}

#[tokio::test]
async fn failover_a_nack_rewinds_in_order_with_counts_at_zero() {
    if skip_on(
        BrokerKind::Lite,
        "pulsar-lite ignores REDELIVER_UNACKNOWLEDGED_MESSAGES on Failover",
    ) {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("failover rewind", async {
        let client = client(&broker).await;
        let topic = unique_topic("failover-rewind");
        let mut consumer = client
            .consumer(topic.clone(), "s")
            .subscription_type(SubscriptionType::Failover)
            .initial_position(InitialPosition::Earliest)
            .subscribe()
            .await
            .expect("subscribe");
        let mut producer = RawProducer::create(&client, &topic).await;
        for t in ["a", "b", "c", "d"] {
            producer.send(t).await;
        }
        let first = take(&mut consumer, 4).await;
        assert_eq!(
            first.iter().map(text).collect::<Vec<_>>(),
            ["a", "b", "c", "d"]
        );
        consumer.ack(&first[0]).await.expect("ack a");
        consumer.ack(&first[2]).await.expect("ack c");
        // Nack d: the broker rewinds to the first unacked message; b and d
        // come back, in order, once each, counts staying 0.
        consumer.nack(&first[3]).expect("nack d");
        let again = take(&mut consumer, 2).await;
        assert_eq!(again.iter().map(text).collect::<Vec<_>>(), ["b", "d"]);
        assert!(again.iter().all(|m| m.redelivery_count() == 0));
        consumer.ack(&again[0]).await.expect("ack b");
        consumer.ack(&again[1]).await.expect("ack d");
        producer.send("e").await;
        let next = consumer.receive().await.expect("next");
        assert_eq!(text(&next), "e", "no second rewind, no duplicate");
    })
    .await;
}
