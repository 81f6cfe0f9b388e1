//! What consumers see of produced messages: nothing of an open or aborted
//! transaction, everything of a committed one.

use std::time::Duration;

use pulsar_wire::MessageId;
use pulsar_wire::consumer::{InitialPosition, SubscriptionType};
use pulsar_wire::producer::ProducerError;
use pulsar_wire::producer::ProducerMessage;
use pulsar_wire::transaction::{TransactionError, TransactionState};

use super::{receive_until, set, text};
use crate::common::broker::{BrokerKind, skip_unless};
use crate::common::txn::TxnBroker;
use crate::common::{FIRING_TIMEOUT, guard, unique_topic};

#[tokio::test]
async fn a_hundred_sent_in_a_transaction_are_invisible_until_commit_then_all_visible() {
    let Some(broker) = TxnBroker::get() else {
        return;
    };
    let client = broker.client().await;
    let topic = unique_topic("txn-commit");
    let mut consumer = crate::common::shared_from_start(&client, &topic, "sub").await;
    let producer = client.producer(&topic).create().await.expect("producer");
    // A plain message first: the consumer is live and this is all it can read.
    let before = producer
        .send("before")
        .await
        .expect("queue")
        .await
        .expect("stored");
    assert_eq!(receive_until_first(&mut consumer).await, "before");

    let txn = client
        .transaction()
        .timeout(Duration::from_secs(60))
        .begin()
        .await
        .expect("begin");
    let mut receipts = Vec::new();
    for i in 0..100 {
        receipts.push(
            producer
                .send_in(&txn, format!("txn-{i}"))
                .await
                .expect("queue"),
        );
    }
    let mut last = MessageId::EARLIEST;
    for receipt in receipts {
        last = receipt.await.expect("stored");
    }
    // Stored, but not readable: the broker's last readable message is
    // still the plain one, and nothing is handed out.
    assert_eq!(consumer.last_message_id().await.expect("last id"), before);
    assert!(consumer.try_receive().await.expect("try").is_none());

    txn.commit().await.expect("commit");
    assert_eq!(txn.state(), TransactionState::Committed);
    producer
        .send("after")
        .await
        .expect("queue")
        .await
        .expect("stored");
    let seen = receive_until(&mut consumer, "after").await;
    assert_eq!(seen.len(), 100, "every message once: {seen:?}");
    assert_eq!(set(seen), set((0..100).map(|i| format!("txn-{i}"))));
    assert!(consumer.last_message_id().await.expect("last id") > last);
}

async fn receive_until_first(consumer: &mut pulsar_wire::Consumer) -> String {
    let msg = guard("first message", consumer.receive())
        .await
        .expect("receive");
    consumer.ack(&msg).await.expect("ack");
    text(&msg)
}

#[tokio::test]
async fn messages_of_an_aborted_transaction_are_never_delivered() {
    let Some(broker) = TxnBroker::get() else {
        return;
    };
    let client = broker.client().await;
    let topic = unique_topic("txn-abort");
    let mut consumer = crate::common::shared_from_start(&client, &topic, "sub").await;
    let producer = client.producer(&topic).create().await.expect("producer");
    let txn = client.transaction().begin().await.expect("begin");
    for i in 0..50 {
        let receipt = producer
            .send_in(&txn, ProducerMessage::new(format!("aborted-{i}")).key("k"))
            .await
            .expect("queue");
        receipt.await.expect("stored");
    }
    txn.abort().await.expect("abort");
    assert_eq!(txn.state(), TransactionState::Aborted);
    // A send into the ended transaction is refused, typed.
    let refused = producer.send_in(&txn, "late").await.expect_err("ended");
    assert!(
        matches!(
            refused,
            ProducerError::Transaction(TransactionError::NotOpen {
                state: TransactionState::Aborted,
                ..
            })
        ),
        "{refused:?}"
    );
    producer
        .send("marker")
        .await
        .expect("queue")
        .await
        .expect("stored");
    let seen = receive_until(&mut consumer, "marker").await;
    assert!(seen.is_empty(), "aborted messages were delivered: {seen:?}");

    // A late subscriber from the start sees only the marker too.
    let mut late = client
        .consumer(&topic, "late")
        .subscription_type(SubscriptionType::Exclusive)
        .initial_position(InitialPosition::Earliest)
        .subscribe()
        .await
        .expect("subscribe");
    assert!(receive_until(&mut late, "marker").await.is_empty());
}

#[tokio::test]
async fn commit_after_the_coordinator_timed_the_transaction_out_is_a_typed_error() {
    let Some(broker) = TxnBroker::get() else {
        return;
    };
    let client = broker.client().await;
    let topic = unique_topic("txn-timeout");
    let producer = client.producer(&topic).create().await.expect("producer");
    // Long enough for a loaded broker to store the send in it.
    let txn = client
        .transaction()
        .timeout(FIRING_TIMEOUT)
        .begin()
        .await
        .expect("begin");
    producer
        .send_in(&txn, "x")
        .await
        .expect("queue")
        .await
        .expect("stored");
    // Wait until the coordinator itself has aborted the transaction.
    let id = txn.id();
    let url = format!(
        "{}/admin/v3/transactions/transactionMetadata/{}/{}",
        broker.admin_url, id.most_bits, id.least_bits
    );
    guard(
        "the coordinator times the transaction out",
        crate::common::admin::poll_until(&url, |answer| {
            !answer.is_ok_and(|a| a.status == 200 && a.json()["status"] == "OPEN")
        }),
    )
    .await;
    let err = txn.commit().await.expect_err("timed out");
    assert!(matches!(err, TransactionError::TimedOut { .. }), "{err:?}");
    assert_eq!(txn.state(), TransactionState::TimedOut);
}

#[tokio::test]
async fn without_a_coordinator_begin_fails_naming_the_request() {
    if skip_unless(
        BrokerKind::Lite,
        "a broker without transactions that leaves TC_CLIENT_CONNECT unanswered is pulsar-lite; \
         Apache's coordinator is tested under scripts/apache-pulsar-txn",
    ) {
        return;
    }
    let Some(broker) = crate::common::broker::TestBroker::start().await else {
        return;
    };
    let client = pulsar_wire::Client::builder()
        .service_url(broker.service_url())
        .operation_timeout(FIRING_TIMEOUT)
        .enable_transaction(true)
        .build()
        .await
        .expect("client");
    let err = guard("begin", client.transaction().begin())
        .await
        .expect_err("no coordinator");
    assert!(
        matches!(
            &err,
            TransactionError::Request {
                op: "TC_CLIENT_CONNECT",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("TC_CLIENT_CONNECT"), "{err}");
}

#[tokio::test]
async fn a_client_without_transactions_enabled_says_so() {
    if skip_unless(BrokerKind::Lite, "needs no broker feature; once is enough") {
        return;
    }
    let Some(broker) = crate::common::broker::TestBroker::start().await else {
        return;
    };
    let client = crate::common::broker::client(&broker).await;
    let err = client.transaction().begin().await.expect_err("not enabled");
    assert!(matches!(err, TransactionError::NotEnabled), "{err:?}");
}

async fn commit_on_partitioned(partitions: u32) {
    let Some(broker) = TxnBroker::get() else {
        return;
    };
    let client = broker.client().await;
    let topic = unique_topic("txn-partitioned");
    crate::common::admin::create_partitioned_topic(&broker.admin_url, &topic, partitions).await;
    let mut consumer = crate::common::shared_from_start(&client, &topic, "sub").await;
    let producer = client
        .producer(&topic)
        .routing_mode(pulsar_wire::producer::RoutingMode::RoundRobin)
        .create()
        .await
        .expect("producer");
    let txn = client
        .transaction()
        // Longer than any loaded broker takes for the sends and the commit.
        .timeout(Duration::from_secs(60))
        .begin()
        .await
        .expect("begin");
    for i in 0..20 {
        let receipt = producer
            .send_in(&txn, format!("txn-{i}"))
            .await
            .expect("queue");
        receipt.await.expect("stored");
    }
    txn.commit().await.expect("commit");
    // One marker per partition: every partition's messages before it.
    let mut seen = Vec::new();
    for p in 0..partitions {
        let marker = format!("after-{p}");
        let lane = client
            .producer(format!("{topic}-partition-{p}"))
            .create()
            .await
            .expect("partition producer");
        let receipt = lane.send(marker).await.expect("queue");
        receipt.await.expect("stored");
    }
    let mut markers = 0;
    guard("every partition's marker", async {
        while markers < partitions {
            let msg = consumer.receive().await.expect("receive");
            consumer.ack(&msg).await.expect("ack");
            match text(&msg) {
                t if t.starts_with("after-") => markers += 1,
                t => seen.push(t),
            }
        }
    })
    .await;
    assert_eq!(set(seen), set((0..20).map(|i| format!("txn-{i}"))));
}

#[tokio::test]
async fn a_transaction_on_a_partitioned_topic_commits_on_every_partition() {
    commit_on_partitioned(3).await;
}

#[tokio::test]
async fn a_transaction_on_a_topic_of_one_partition_commits_on_that_partition() {
    commit_on_partitioned(1).await;
}
