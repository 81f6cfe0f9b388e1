//! Delivery policies the consumer's core drives, against the real broker:
//! a nack and an ack timeout bring a message back with its redelivery count
//! raised (Shared: the broker counts there); on Exclusive a nack rewinds to
//! the first unacked message, in order, counts staying 0.

use std::time::Duration;

use pulsar_wire::consumer::NackPolicy;

use super::*;

/// Receives until the message `text` arrives, acking everything else.
async fn receive_until(consumer: &mut Consumer, text_wanted: &str) -> pulsar_wire::Message {
    loop {
        let m = consumer.receive().await.expect("receive");
        if text(&m) == text_wanted {
            return m;
        }
        consumer.ack(&m).await.expect("ack");
    }
}

#[tokio::test]
async fn a_nacked_message_comes_back_with_its_count_raised() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("nack", async {
        let client = client(&broker).await;
        let topic = unique_topic("nack");
        let mut consumer = client
            .consumer(topic.clone(), "s")
            .subscription_type(SubscriptionType::Shared)
            .initial_position(InitialPosition::Earliest)
            .nack_policy(NackPolicy::Immediate)
            .subscribe()
            .await
            .expect("subscribe");
        let mut producer = RawProducer::create(&client, &topic).await;
        let id = producer.send("retry-me").await;
        producer.send("other").await;

        let first = receive_until(&mut consumer, "retry-me").await;
        assert_eq!((first.id(), first.redelivery_count()), (id, 0));
        consumer.nack(&first).expect("nack");
        let again = receive_until(&mut consumer, "retry-me").await;
        assert_eq!((again.id(), again.redelivery_count()), (id, 1));
        consumer.nack(&again).expect("nack");
        let third = receive_until(&mut consumer, "retry-me").await;
        assert_eq!(third.redelivery_count(), 2);
        consumer.ack(&third).await.expect("ack");
    })
    .await;
}

#[tokio::test]
async fn an_unacked_message_comes_back_after_the_ack_timeout() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("ack timeout", async {
        let client = client(&broker).await;
        let topic = unique_topic("ack-timeout");
        // A short real timeout: the test waits for the redelivery itself,
        // and asserts only what arrives, never how long it took.
        let mut consumer = client
            .consumer(topic.clone(), "s")
            .subscription_type(SubscriptionType::Shared)
            .initial_position(InitialPosition::Earliest)
            .ack_timeout(Duration::from_millis(300))
            .ack_timeout_tick(Duration::from_millis(100))
            .subscribe()
            .await
            .expect("subscribe");
        let mut producer = RawProducer::create(&client, &topic).await;
        let id = producer.send("forgotten").await;

        let held = consumer.receive().await.expect("receive");
        assert_eq!((held.id(), held.redelivery_count()), (id, 0));
        // Not acked: the timeout requests it again.
        let again = consumer.receive().await.expect("redelivery");
        assert_eq!(
            (again.id(), again.redelivery_count(), text(&again)),
            (id, 1, "forgotten".into())
        );
        consumer.ack(&again).await.expect("ack");
    })
    .await;
}

#[tokio::test]
async fn a_zero_ack_timeout_is_a_typed_error() {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let client = client(&broker).await;
    let result = client
        .consumer(unique_topic("bad-timeout"), "s")
        .ack_timeout(Duration::ZERO)
        .subscribe()
        .await;
    assert!(
        matches!(result, Err(ConsumerError::Config(_))),
        "{result:?}"
    );
}

#[tokio::test]
async fn an_exclusive_nack_rewinds_in_order_with_counts_at_zero() {
    if skip_on(
        BrokerKind::Lite,
        "pulsar-lite ignores REDELIVER_UNACKNOWLEDGED_MESSAGES on Exclusive",
    ) {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("exclusive rewind", async {
        let client = client(&broker).await;
        let topic = unique_topic("rewind");
        let mut consumer = client
            .consumer(topic.clone(), "s")
            .subscription_type(SubscriptionType::Exclusive)
            .initial_position(InitialPosition::Earliest)
            .subscribe()
            .await
            .expect("subscribe");
        let mut producer = RawProducer::create(&client, &topic).await;
        for t in ["a", "b", "c"] {
            producer.send(t).await;
        }
        let first: Vec<_> = take(&mut consumer, 3).await;
        assert_eq!(first.iter().map(text).collect::<Vec<_>>(), ["a", "b", "c"]);
        consumer.ack(&first[0]).await.expect("ack a");
        // Nack b: the broker rewinds to the first unacked message (b), so b
        // and c come back in order, their counts staying 0 on Exclusive.
        consumer.nack(&first[1]).expect("nack b");
        let again = take(&mut consumer, 2).await;
        assert_eq!(again.iter().map(text).collect::<Vec<_>>(), ["b", "c"]);
        assert!(again.iter().all(|m| m.redelivery_count() == 0));
    })
    .await;
}
