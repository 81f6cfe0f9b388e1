//! Broker-side deduplication (Apache Pulsar, topic policy through the
//! admin API): a send the broker drops as a duplicate succeeds, with an id
//! that says so (`MessageId::is_duplicate`).

use pulsar_wire::producer::ProducerMessage;

use crate::common::broker::{BrokerKind, TestBroker, skip_unless};
use crate::common::{admin, guard, init_tracing, unique_topic};

#[tokio::test]
async fn a_send_dropped_as_a_duplicate_succeeds_with_a_duplicate_id() {
    if skip_unless(
        BrokerKind::Apache,
        "pulsar-lite has no deduplication and no admin API to turn it on",
    ) {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("deduplication", async {
        init_tracing();
        let client = crate::common::broker::client(&broker).await;
        let topic = unique_topic("dedup");
        let admin_url = std::env::var("PULSAR_ADMIN_URL").expect("PULSAR_ADMIN_URL");
        let producer = client
            .producer(&topic)
            .batching(false)
            .create()
            .await
            .expect("producer");
        admin::enable_deduplication(&admin_url, &topic).await;
        // The policy reaches the topic a moment later: send each sequence
        // id twice until the broker drops the second as a duplicate.
        for sequence_id in 1_000_u64.. {
            let send = |text: &'static str| {
                let message = ProducerMessage::new(text).sequence_id(sequence_id);
                producer.send(message)
            };
            let first = send("first").await.expect("queued").await;
            let stored = first.expect("the first of a sequence id is stored");
            assert!(!stored.is_duplicate(), "{stored}");
            let again = send("again").await.expect("queued").await;
            if again.expect("a duplicate is a success").is_duplicate() {
                break;
            }
        }
        producer.close().await.expect("close");
    })
    .await;
}
