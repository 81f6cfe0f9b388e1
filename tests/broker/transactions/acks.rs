//! Acks in a transaction: applied on commit, undone on abort (the
//! messages come back).

use pulsar_wire::ConsumerError;
use pulsar_wire::consumer::{InitialPosition, SubscriptionType};
use pulsar_wire::transaction::{TransactionError, TransactionState};

use super::{set, text};
use crate::common::txn::TxnBroker;
use crate::common::{admin, guard, unique_topic};

async fn produce(client: &pulsar_wire::Client, topic: &str, n: usize) -> Vec<String> {
    let producer = client
        .producer(topic)
        .batching(false)
        .create()
        .await
        .expect("producer");
    let payloads: Vec<String> = (0..n).map(|i| format!("m-{i}")).collect();
    for p in &payloads {
        let receipt = producer.send(p.clone()).await.expect("queue");
        receipt.await.expect("stored");
    }
    payloads
}

async fn acks_in_an_aborted_transaction_come_back(kind: SubscriptionType) {
    let Some(broker) = TxnBroker::get() else {
        return;
    };
    let client = broker.client().await;
    let topic = unique_topic("txn-ack-abort");
    let mut consumer = client
        .consumer(&topic, "sub")
        .subscription_type(kind)
        .initial_position(InitialPosition::Earliest)
        .subscribe()
        .await
        .expect("subscribe");
    let payloads = produce(&client, &topic, 10).await;
    let txn = client.transaction().begin().await.expect("begin");
    let mut first = Vec::new();
    for _ in 0..10 {
        let msg = guard("receive", consumer.receive()).await.expect("receive");
        consumer.ack_in(&txn, &msg).await.expect("ack in txn");
        first.push(msg);
    }
    txn.abort().await.expect("abort");
    assert_eq!(txn.state(), TransactionState::Aborted);
    // Every message comes back, and this time plain acks settle them.
    let mut again = Vec::new();
    for _ in 0..10 {
        let msg = guard("redelivery after abort", consumer.receive())
            .await
            .expect("receive");
        consumer.ack(&msg).await.expect("ack");
        again.push(text(&msg));
    }
    assert_eq!(set(again), set(payloads.clone()));
    assert_eq!(set(first.iter().map(text)), set(payloads));
}

#[tokio::test]
async fn individual_acks_of_an_aborted_transaction_redeliver_on_shared() {
    acks_in_an_aborted_transaction_come_back(SubscriptionType::Shared).await;
}

#[tokio::test]
async fn individual_acks_of_an_aborted_transaction_redeliver_on_exclusive() {
    acks_in_an_aborted_transaction_come_back(SubscriptionType::Exclusive).await;
}

#[tokio::test]
async fn a_cumulative_ack_of_an_aborted_transaction_redelivers_every_message_it_covered() {
    let Some(broker) = TxnBroker::get() else {
        return;
    };
    let client = broker.client().await;
    let topic = unique_topic("txn-ack-cumulative");
    let mut consumer = client
        .consumer(&topic, "sub")
        .subscription_type(SubscriptionType::Failover)
        .initial_position(InitialPosition::Earliest)
        .subscribe()
        .await
        .expect("subscribe");
    let payloads = produce(&client, &topic, 10).await;
    let mut received = Vec::new();
    for _ in 0..10 {
        received.push(guard("receive", consumer.receive()).await.expect("receive"));
    }
    assert_eq!(set(received.iter().map(text)), set(payloads.clone()));
    let last = received.last().expect("ten");
    let txn = client.transaction().begin().await.expect("begin");
    consumer
        .ack_cumulative_in(&txn, last)
        .await
        .expect("ack in txn");
    txn.abort().await.expect("abort");
    assert_eq!(
        admin::subscription_backlog(&broker.admin_url, &topic, "sub").await,
        10
    );
    // The subscription rewinds: all ten come back, in order.
    let mut again = Vec::new();
    for _ in 0..10 {
        again.push(
            guard("redelivery after abort", consumer.receive())
                .await
                .expect("receive"),
        );
    }
    let ids = |msgs: &[pulsar_wire::Message]| msgs.iter().map(|m| m.id()).collect::<Vec<_>>();
    assert_eq!(ids(&again), ids(&received));
    // Acked cumulatively in a committed transaction, all ten are gone.
    let txn = client.transaction().begin().await.expect("begin");
    consumer
        .ack_cumulative_in(&txn, again.last().expect("ten"))
        .await
        .expect("ack in txn");
    txn.commit().await.expect("commit");
    assert_eq!(
        admin::subscription_backlog(&broker.admin_url, &topic, "sub").await,
        0
    );
}

#[tokio::test]
async fn acks_of_a_committed_transaction_are_applied() {
    let Some(broker) = TxnBroker::get() else {
        return;
    };
    let client = broker.client().await;
    let topic = unique_topic("txn-ack-commit");
    let mut consumer = crate::common::shared_from_start(&client, &topic, "sub").await;
    produce(&client, &topic, 10).await;
    let txn = client.transaction().begin().await.expect("begin");
    for _ in 0..10 {
        let msg = guard("receive", consumer.receive()).await.expect("receive");
        consumer.ack_in(&txn, &msg).await.expect("ack in txn");
    }
    assert_eq!(
        admin::subscription_backlog(&broker.admin_url, &topic, "sub").await,
        10
    );
    txn.commit().await.expect("commit");
    assert_eq!(
        admin::subscription_backlog(&broker.admin_url, &topic, "sub").await,
        0
    );
}

#[tokio::test]
async fn an_ack_of_a_message_another_open_transaction_acked_is_a_conflict_and_its_commit_aborts() {
    let Some(broker) = TxnBroker::get() else {
        return;
    };
    let client = broker.client().await;
    let topic = unique_topic("txn-ack-conflict");
    let mut consumer = crate::common::shared_from_start(&client, &topic, "sub").await;
    produce(&client, &topic, 1).await;
    let msg = guard("receive", consumer.receive()).await.expect("receive");
    let first = client.transaction().begin().await.expect("begin");
    let second = client.transaction().begin().await.expect("begin");
    consumer
        .ack_in(&first, &msg)
        .await
        .expect("ack in the first");
    let err = consumer
        .ack_in(&second, &msg)
        .await
        .expect_err("acked in the first");
    assert!(
        matches!(
            err,
            ConsumerError::Transaction(TransactionError::Conflict { op: "ACK", .. })
        ),
        "{err:?}"
    );
    // The second's commit finds its failed ack and aborts instead.
    let err = second.commit().await.expect_err("a failed ack");
    assert!(
        matches!(err, TransactionError::OperationFailed { failed: 1, .. }),
        "{err:?}"
    );
    assert_eq!(second.state(), TransactionState::Aborted);
    first.commit().await.expect("commit the first");
    assert_eq!(
        admin::subscription_backlog(&broker.admin_url, &topic, "sub").await,
        0
    );
}

#[tokio::test]
async fn acks_of_a_committed_transaction_are_applied_on_every_partition() {
    let Some(broker) = TxnBroker::get() else {
        return;
    };
    let client = broker.client().await;
    let topic = unique_topic("txn-ack-partitioned");
    admin::create_partitioned_topic(&broker.admin_url, &topic, 2).await;
    let mut consumer = crate::common::shared_from_start(&client, &topic, "sub").await;
    produce(&client, &topic, 10).await;
    let txn = client.transaction().begin().await.expect("begin");
    let mut partitions = std::collections::BTreeSet::new();
    for _ in 0..10 {
        let msg = guard("receive", consumer.receive()).await.expect("receive");
        partitions.insert(msg.topic().to_owned());
        consumer.ack_in(&txn, &msg).await.expect("ack in txn");
    }
    assert_eq!(
        partitions.len(),
        2,
        "both partitions delivered: {partitions:?}"
    );
    txn.commit().await.expect("commit");
    for partition in &partitions {
        assert_eq!(
            admin::subscription_backlog(&broker.admin_url, partition, "sub").await,
            0,
            "{partition}"
        );
    }
}

// A chunked message acked cumulatively in a transaction: an abort brings
// it back whole, a commit leaves none of its chunks in the backlog.
#[tokio::test]
async fn a_chunked_message_acked_cumulatively_in_a_transaction_comes_back_on_abort_and_goes_on_commit()
 {
    let Some(broker) = TxnBroker::get() else {
        return;
    };
    let client = broker.client().await;
    let topic = unique_topic("txn-ack-chunks");
    let mut consumer = client
        .consumer(&topic, "sub")
        .subscription_type(SubscriptionType::Exclusive)
        .initial_position(InitialPosition::Earliest)
        .subscribe()
        .await
        .expect("subscribe");
    let producer = client
        .producer(&topic)
        .batching(false)
        .chunking(true)
        .chunk_size(1024)
        .create()
        .await
        .expect("producer");
    let payload = vec![7_u8; 5000];
    let receipt = producer.send(payload.clone()).await.expect("queue");
    let stored = receipt.await.expect("stored");
    assert!(stored.first_chunk().is_some(), "sent in chunks");
    let msg = guard("receive", consumer.receive()).await.expect("receive");
    assert_eq!(&msg.payload()[..], &payload[..]);
    let aborted = client.transaction().begin().await.expect("begin");
    consumer
        .ack_cumulative_in(&aborted, &msg)
        .await
        .expect("ack in txn");
    aborted.abort().await.expect("abort");
    let msg = guard("after the abort", consumer.receive())
        .await
        .expect("receive");
    assert_eq!(
        (&msg.payload()[..], msg.id()),
        (&payload[..], stored),
        "whole again"
    );
    let txn = client.transaction().begin().await.expect("begin");
    consumer
        .ack_cumulative_in(&txn, &msg)
        .await
        .expect("ack in txn");
    txn.commit().await.expect("commit");
    assert_eq!(
        admin::subscription_backlog(&broker.admin_url, &topic, "sub").await,
        0,
        "every chunk acked"
    );
}
