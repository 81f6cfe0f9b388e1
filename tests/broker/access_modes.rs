//! Producer access modes end to end (Apache Pulsar only: pulsar-lite has
//! none): a WaitForExclusive producer waits past the operation timeout and
//! gets the topic once the exclusive one closes, a dropped waiting
//! `create()` leaves no waiter behind on the broker, and
//! ExclusiveWithFencing takes the topic from the producer that held it.

use std::time::Duration;

use pulsar_wire::Client;
use pulsar_wire::producer::{AccessMode, Producer, ProducerError};

use crate::common::broker::{BrokerKind, TestBroker, skip_unless};
use crate::common::{guard, init_tracing, unique_topic};
use crate::raw_reader::read;

const NO_ACCESS_MODES: &str = "pulsar-lite has no producer access modes";

/// The operation timeout of the client that waits for exclusive access:
/// short, so waiting past it shows.
const SHORT: Duration = Duration::from_secs(2);

/// A client with the default operation timeout (a busy broker may take
/// seconds to create a topic), or with `timeout`.
async fn client(broker: &TestBroker, timeout: Option<Duration>) -> Client {
    init_tracing();
    let builder = Client::builder().service_url(broker.service_url());
    match timeout {
        Some(timeout) => builder.operation_timeout(timeout),
        None => builder,
    }
    .build()
    .await
    .expect("client")
}

async fn producer(
    client: &Client,
    topic: &str,
    mode: AccessMode,
) -> Result<Producer, ProducerError> {
    client.producer(topic).access_mode(mode).create().await
}

async fn send(producer: &Producer, body: &str) -> Result<pulsar_wire::MessageId, ProducerError> {
    producer.send(body.to_owned()).await?.await
}

#[tokio::test]
async fn wait_for_exclusive_gets_the_topic_when_the_exclusive_producer_closes() {
    if skip_unless(BrokerKind::Apache, NO_ACCESS_MODES) {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("wait for exclusive", async {
        let client = client(&broker, None).await;
        let short = self::client(&broker, Some(SHORT)).await;
        let topic = unique_topic("wait-exclusive");
        let first = producer(&client, &topic, AccessMode::Exclusive)
            .await
            .expect("exclusive");
        let mut waiting = Box::pin(producer(&short, &topic, AccessMode::WaitForExclusive));
        // Past two operation timeouts it still waits (it neither timed out
        // nor was granted while the first producer holds the topic).
        let early = tokio::time::timeout(SHORT * 5 / 2, &mut waiting).await;
        assert!(
            early.is_err(),
            "finished while the topic was held: {early:?}"
        );
        send(&first, "from the first").await.expect("stored");
        first.close().await.expect("close");
        let second = waiting.await.expect("granted once the first closed");
        send(&second, "from the second").await.expect("stored");
        let bodies: Vec<_> = read(&client, &topic, 2)
            .await
            .into_iter()
            .map(|r| r.payload)
            .collect();
        assert_eq!(bodies, ["from the first", "from the second"]);
        second.close().await.expect("close");
    })
    .await;
}

#[tokio::test]
async fn a_dropped_waiting_create_leaves_no_waiter_on_the_broker() {
    if skip_unless(BrokerKind::Apache, NO_ACCESS_MODES) {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("dropped waiter", async {
        let client = client(&broker, None).await;
        let short = self::client(&broker, Some(SHORT)).await;
        let topic = unique_topic("dropped-waiter");
        let first = producer(&client, &topic, AccessMode::Exclusive)
            .await
            .expect("exclusive");
        let waiting = producer(&short, &topic, AccessMode::WaitForExclusive);
        let gave_up = tokio::time::timeout(SHORT * 5 / 2, waiting).await;
        assert!(
            gave_up.is_err(),
            "finished while the topic was held: {gave_up:?}"
        );
        first.close().await.expect("close");
        // Had the waiter stayed queued, it would hold the topic now.
        let next = producer(&client, &topic, AccessMode::Exclusive)
            .await
            .expect("the topic is free: the dropped waiter was withdrawn");
        next.close().await.expect("close");
    })
    .await;
}

#[tokio::test]
async fn exclusive_with_fencing_takes_the_topic_from_the_exclusive_producer() {
    if skip_unless(BrokerKind::Apache, NO_ACCESS_MODES) {
        return;
    }
    let Some(broker) = TestBroker::start().await else {
        return;
    };
    guard("fencing", async {
        let client = client(&broker, None).await;
        let topic = unique_topic("fencing");
        let old = producer(&client, &topic, AccessMode::Exclusive)
            .await
            .expect("exclusive");
        send(&old, "before").await.expect("stored");
        let new = producer(&client, &topic, AccessMode::ExclusiveWithFencing)
            .await
            .expect("fencing takes the topic");
        send(&new, "after").await.expect("stored");
        let refused = send(&old, "fenced off").await;
        assert!(
            refused.is_err(),
            "the fenced producer still wrote: {refused:?}"
        );
        let bodies: Vec<_> = read(&client, &topic, 2)
            .await
            .into_iter()
            .map(|r| r.payload)
            .collect();
        assert_eq!(bodies, ["before", "after"]);
        new.close().await.expect("close");
    })
    .await;
}
