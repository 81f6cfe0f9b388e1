//! Cumulative acks in a transaction meet chunked messages (paused clock):
//! the ack of a chunked message reaches its last chunk, and one of a
//! message stored between another's chunks stops short of that message's
//! first chunk, as a plain cumulative ack does; the rest goes once the
//! transaction commits and the chunked message is handed out.

use pulsar_wire::consumer::{Consumer, SubscriptionType};
use pulsar_wire::proto::base_command::Type;
use pulsar_wire::proto::command_ack::AckType;
use pulsar_wire::transaction::Transaction;
use pulsar_wire::wire::Frame;
use pulsar_wire::{Client, MessageId};

use super::chunks::{chunk, next_cumulative, plain};
use super::transactions::{begin_txn_0_9, client, subscription};
use crate::common::fake_broker::{FakeBroker, FakeNetwork, answer, request_id};
use crate::common::guard;

const TOPIC: &str = "persistent://public/default/txn-chunks";

/// An Exclusive consumer of `TOPIC` and transaction (0, 9), on a client
/// with transactions on; returns the consumer id on the broker too.
async fn exclusive_in_txn(net: &FakeNetwork) -> (Client, Consumer, Transaction, FakeBroker, u64) {
    let mut svc = net.listen(super::transactions::SERVICE);
    let (client, mut broker) = client(net, &mut svc).await;
    let subscribing = tokio::spawn({
        let client = client.clone();
        async move {
            client
                .consumer(TOPIC, "s")
                .subscription_type(SubscriptionType::Exclusive)
                .subscribe()
                .await
        }
    });
    let metadata = broker.expect(Type::PartitionedMetadata).await;
    broker
        .send(answer::partitions(request_id(&metadata), 0))
        .await;
    let id = subscription(&mut broker).await;
    let consumer = subscribing.await.expect("task").expect("subscribe");
    let begin = tokio::spawn({
        let client = client.clone();
        async move { client.transaction().begin().await }
    });
    begin_txn_0_9(&mut broker).await;
    let txn = begin.await.expect("task").expect("begin");
    (client, consumer, txn, broker, id)
}

/// The next frame that is not a FLOW (a chunk gives its permit back).
async fn next_past_flows(broker: &mut FakeBroker) -> Frame {
    loop {
        let frame = broker.recv().await.expect("the client's frames");
        if frame.command.r#type() != Type::Flow {
            return frame;
        }
    }
}

/// Answers the ADD_SUBSCRIPTION_TO_TXN and the transactional ACK after
/// it; returns the entry the ACK names, which must be cumulative.
async fn txn_ack(broker: &mut FakeBroker) -> u64 {
    let add = next_past_flows(broker).await;
    let body = add
        .command
        .add_subscription_to_txn
        .expect("ADD_SUBSCRIPTION_TO_TXN");
    broker
        .send(answer::subscription_added(body.request_id))
        .await;
    let ack = next_past_flows(broker).await;
    let body = ack.command.ack.expect("ACK");
    assert_eq!(body.ack_type(), AckType::Cumulative);
    assert_eq!(
        (body.txnid_most_bits, body.txnid_least_bits),
        (Some(0), Some(9))
    );
    let request = body.request_id.expect("a request");
    broker
        .send(answer::ack_response(body.consumer_id, request))
        .await;
    body.message_id[0].entry_id
}

/// Commits `txn`, answering its END_TXN.
async fn commit(txn: Transaction, broker: &mut FakeBroker) {
    let committing = tokio::spawn(async move { txn.commit().await });
    let end = next_past_flows(broker).await;
    let body = end.command.end_txn.expect("END_TXN");
    assert_eq!(body.txn_action, Some(0), "a commit");
    broker.send(answer::end_txn(body.request_id)).await;
    committing.await.expect("task").expect("committed");
}

// As a plain cumulative ack: up to where the message ends. Up to its first
// chunk would leave the others unacked once the transaction commits.
#[tokio::test(start_paused = true)]
async fn a_cumulative_ack_in_a_transaction_of_a_chunked_message_reaches_its_last_chunk() {
    let net = FakeNetwork::new();
    guard("transactional cumulative ack of a chunked message", async {
        let (_client, mut consumer, txn, mut broker, id) = exclusive_in_txn(&net).await;
        broker.send_frame(chunk(id, 1, "x", 0, 2)).await;
        broker.send_frame(chunk(id, 2, "x", 1, 2)).await;
        let x = consumer.receive().await.expect("x, whole");
        assert_eq!(x.id(), MessageId::new(1, 2));
        let acking = tokio::spawn({
            let (consumer, txn) = (consumer.clone(), txn.clone());
            async move { consumer.ack_cumulative_in(&txn, &x).await }
        });
        assert_eq!(txn_ack(&mut broker).await, 2, "x's last chunk");
        acking
            .await
            .expect("task")
            .expect("acked in the transaction");
        commit(txn, &mut broker).await;
    })
    .await;
}

// Beyond the Java client, as for a plain cumulative ack: the transaction's
// ACK never covers the first chunk of a message not handed out yet, so a
// subscription lost before its last chunk loses nothing. Once the
// transaction commits, the rest goes as the chunk gate lets it.
#[tokio::test(start_paused = true)]
async fn a_cumulative_ack_in_a_transaction_stops_short_of_a_chunked_message_not_handed_out() {
    let net = FakeNetwork::new();
    guard("transactional cumulative ack between chunks", async {
        let (_client, mut consumer, txn, mut broker, id) = exclusive_in_txn(&net).await;
        broker.send_frame(chunk(id, 1, "x", 0, 2)).await;
        broker.send_frame(plain(id, 2, "m")).await;
        let m = consumer.receive().await.expect("m");
        let acking = tokio::spawn({
            let (consumer, txn) = (consumer.clone(), txn.clone());
            async move { consumer.ack_cumulative_in(&txn, &m).await }
        });
        assert_eq!(txn_ack(&mut broker).await, 0, "short of x's first chunk");
        acking
            .await
            .expect("task")
            .expect("acked in the transaction");
        commit(txn, &mut broker).await;
        broker.send_frame(chunk(id, 3, "x", 1, 2)).await;
        let x = consumer.receive().await.expect("x, whole");
        assert_eq!(&x.payload()[..], b"x0x1");
        // The commit settles the ack here too: short again until x is
        // acked.
        consumer.ack_cumulative(&x).await.expect("ack x");
        let mut upto = next_cumulative(&mut broker).await;
        while upto == 0 {
            upto = next_cumulative(&mut broker).await;
        }
        assert_eq!(upto, 3, "up to x, once acked");
    })
    .await;
}

// A first chunk that starts its ledger leaves no entry to ack in the
// transaction: the call returns, nothing is added to the transaction, and
// the commit's ack goes with the chunked message's own.
#[tokio::test(start_paused = true)]
async fn a_cumulative_ack_in_a_transaction_before_a_ledgers_first_chunk_waits_for_the_commit() {
    let net = FakeNetwork::new();
    guard("transactional cumulative ack held back whole", async {
        let (_client, mut consumer, txn, mut broker, id) = exclusive_in_txn(&net).await;
        broker.send_frame(chunk(id, 0, "x", 0, 2)).await;
        broker.send_frame(plain(id, 1, "m")).await;
        let m = consumer.receive().await.expect("m");
        consumer
            .ack_cumulative_in(&txn, &m)
            .await
            .expect("recorded for the commit");
        commit(txn, &mut broker).await;
        broker.send_frame(chunk(id, 2, "x", 1, 2)).await;
        let x = consumer.receive().await.expect("x, whole");
        assert_eq!(&x.payload()[..], b"x0x1");
        consumer.ack_cumulative(&x).await.expect("ack x");
        assert_eq!(next_cumulative(&mut broker).await, 2, "up to x, once acked");
    })
    .await;
}
