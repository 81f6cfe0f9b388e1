//! Ack receipts over batches: the plainest loop (receive, then await the
//! ack) goes through a topic of batches, and every ack takes effect.

use super::*;

/// Receives and acks, one by one with receipts, 10 batches of 10; then a
/// new consumer of the subscription gets nothing but the next message.
async fn receive_then_ack_over_batches(batch_index_ack: bool) {
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("receive then ack, with receipts, over batches", async {
        let client = client(&broker).await;
        let topic = unique_topic("consume-receipts-batches");
        let consumer = |client: &Client| {
            client
                .consumer(&topic, "s")
                .subscription_type(SubscriptionType::Shared)
                .initial_position(InitialPosition::Earliest)
                .ack_receipts(true)
                .batch_index_ack(batch_index_ack)
                .subscribe()
        };
        let mut c = consumer(&client).await.expect("subscribe");
        let mut producer = RawProducer::create(&client, &topic).await;
        for b in 0..10 {
            let texts: Vec<String> = (0..10).map(|i| format!("m{:02}", b * 10 + i)).collect();
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            producer.send_batch(&refs).await;
        }
        for i in 0..100 {
            let m = c.receive().await.expect("receive");
            assert_eq!(text(&m), format!("m{i:02}"));
            c.ack(&m).await.expect("ack");
        }
        c.close().await.expect("close");
        let mut next = consumer(&client).await.expect("subscribe again");
        producer.send("end").await;
        let m = next.receive().await.expect("receive");
        assert_eq!(text(&m), "end", "an acked message came back");
        next.close().await.expect("close");
    })
    .await;
}

#[tokio::test]
async fn receive_then_ack_with_receipts_goes_through_batches() {
    receive_then_ack_over_batches(false).await;
}

#[tokio::test]
async fn receive_then_ack_with_receipts_and_batch_index_ack_goes_through_batches() {
    if skip_unless(
        BrokerKind::Apache,
        "pulsar-lite acks a whole entry for a batch index ack",
    ) {
        return;
    }
    receive_then_ack_over_batches(true).await;
}
