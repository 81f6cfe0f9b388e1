//! Nacks on Exclusive and Failover: one poison message among ten; the nine
//! others are handed out and acked, and the nacked one comes back after
//! them (the rewind waits until the received messages are handed out).

use super::*;

/// Why these run on Apache Pulsar only.
const LITE_IGNORES_REWINDS: &str = "pulsar-lite ignores REDELIVER_UNACKNOWLEDGED_MESSAGES on \
     Exclusive and Failover (the nacked message never comes back before a reconnect)";

async fn poison_among_ten(kind: SubscriptionType) {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("poison among ten", async {
        let client = client(&broker).await;
        let topic = unique_topic("consume-poison");
        let mut producer = RawProducer::create(&client, &topic).await;
        for i in 0..10 {
            producer.send(&format!("p{i}")).await;
        }
        let mut consumer = client
            .consumer(&topic, "s")
            .subscription_type(kind)
            .initial_position(InitialPosition::Earliest)
            .subscribe()
            .await
            .expect("subscribe");
        let mut acked = BTreeSet::new();
        let mut poison_seen = 0;
        let mut deliveries = 0;
        while acked.len() < 9 || poison_seen < 2 {
            let m = consumer.receive().await.expect("receive");
            deliveries += 1;
            if text(&m) == "p3" {
                poison_seen += 1;
                consumer.nack(&m).expect("nack");
            } else {
                acked.insert(text(&m));
                consumer.ack(&m).await.expect("ack");
            }
        }
        let nine: BTreeSet<String> = (0..10)
            .filter(|i| *i != 3)
            .map(|i| format!("p{i}"))
            .collect();
        assert_eq!(acked, nine, "{kind:?}: every other message was acked");
        eprintln!("{kind:?}: {deliveries} deliveries, poison seen {poison_seen} times");
        consumer.close().await.expect("close");
    })
    .await;
}

#[tokio::test]
async fn a_poison_message_on_exclusive_does_not_starve_the_others() {
    if skip_on(BrokerKind::Lite, LITE_IGNORES_REWINDS) {
        return;
    }
    poison_among_ten(SubscriptionType::Exclusive).await;
}

#[tokio::test]
async fn a_poison_message_on_failover_does_not_starve_the_others() {
    if skip_on(BrokerKind::Lite, LITE_IGNORES_REWINDS) {
        return;
    }
    poison_among_ten(SubscriptionType::Failover).await;
}

/// A message nacked on Exclusive comes back to an application that takes
/// its messages in batches: a batch receive waiting on an empty queue lets
/// the rewind go out as a single receive does.
#[tokio::test]
async fn a_message_nacked_on_exclusive_comes_back_to_batch_receives() {
    if skip_on(BrokerKind::Lite, LITE_IGNORES_REWINDS) {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("nack under batch receives", async {
        let client = client(&broker).await;
        let topic = unique_topic("consume-batch-nack");
        let mut producer = RawProducer::create(&client, &topic).await;
        for i in 0..5 {
            producer.send(&format!("p{i}")).await;
        }
        let mut consumer = client
            .consumer(&topic, "s")
            .subscription_type(SubscriptionType::Exclusive)
            .initial_position(InitialPosition::Earliest)
            .batch_receive_policy(pulsar_wire::consumer::BatchReceivePolicy {
                max_messages: Some(10),
                max_bytes: None,
                timeout: Some(std::time::Duration::from_millis(100)),
            })
            .subscribe()
            .await
            .expect("subscribe");
        let (mut acked, mut nacked) = (BTreeSet::new(), 0);
        while acked.len() < 5 {
            for m in consumer.receive_batch().await.expect("receive a batch") {
                if text(&m) == "p2" && nacked == 0 {
                    nacked += 1;
                    consumer.nack(&m).expect("nack");
                } else {
                    acked.insert(text(&m));
                    consumer.ack(&m).await.expect("ack");
                }
            }
        }
        assert_eq!(nacked, 1, "p2 was nacked once, and came back");
        consumer.close().await.expect("close");
    })
    .await;
}
