//! The topic unloaded 10 times while a producer has 1,000 sends in flight
//! (Apache Pulsar only: pulsar-lite cannot unload a topic). Each unload
//! closes the producer with CLOSE_PRODUCER, and the broker then answers the
//! sends it was storing. Those receipts confirm the sends: they are not
//! sent again, so the topic holds every message once.

use super::*;
use crate::common::broker::{BrokerKind, skip_unless};
use crate::common::{admin, unique_topic};

const MESSAGES: u64 = 20_000;
const UNLOADS: u64 = 10;

#[tokio::test]
async fn unloads_under_a_producer_store_every_confirmed_message_once() {
    if skip_unless(BrokerKind::Apache, "pulsar-lite cannot unload a topic") {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    let admin_url = std::env::var("PULSAR_ADMIN_URL").expect("PULSAR_ADMIN_URL");
    let topic = unique_topic("unload-produce");
    let client = direct(&broker).await;
    let producer = roomy_producer(&client, &topic).await;
    let mut unloads = Vec::new();
    let confirmed = produce_through_faults(&producer, MESSAGES, UNLOADS, || {
        // Sends keep going while the broker closes the topic.
        let (admin_url, topic) = (admin_url.clone(), topic.clone());
        unloads.push(tokio::spawn(async move {
            admin::unload_topic(&admin_url, &topic).await;
        }));
    })
    .await;
    for unload in unloads {
        unload.await.expect("unload");
    }
    producer.close().await.expect("close");
    send_end_marker(&client, &topic).await;

    let read = read_back(&client, &topic).await;
    let duplicates = check_all_there_in_order(&confirmed, &read);
    assert_eq!(
        duplicates,
        0,
        "{duplicates} messages stored twice over {} confirmed",
        confirmed.len()
    );
    client.close().await;
}
