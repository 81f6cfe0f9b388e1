//! The transaction coordinator's link against scripted brokers: found
//! through the assign topic, attached again after a lost connection with
//! the shared backoff, and its refusals reported typed; an operation
//! timeout of `Duration::MAX` means "no timeout".

use std::time::Duration;

use pulsar_wire::Client;
use pulsar_wire::proto::ServerError;
use pulsar_wire::proto::base_command::Type;
use pulsar_wire::transaction::TransactionError;
use pulsar_wire::wire::Frame;

use crate::common::fake_broker::{
    FakeBroker, FakeListener, FakeNetwork, answer, request_id, topic_of,
};
use crate::common::{guard, init_tracing};
use crate::consume::reconnect::answer_lookup_here;

pub(super) const SERVICE: &str = "svc:6650";
const ASSIGN: &str = "persistent://pulsar/system/transaction_coordinator_assign";

/// A client with transactions on, over `pulsar://svc:6650`, with the
/// broker's end of its first connection.
pub(super) async fn client(net: &FakeNetwork, svc: &mut FakeListener) -> (Client, FakeBroker) {
    client_timing_out_after(net, svc, Duration::from_secs(10)).await
}

/// As [`client`], with an operation timeout of `timeout`.
async fn client_timing_out_after(
    net: &FakeNetwork,
    svc: &mut FakeListener,
    timeout: Duration,
) -> (Client, FakeBroker) {
    init_tracing();
    let build = Client::builder()
        .service_url(format!("pulsar://{SERVICE}"))
        .connector(net.clone())
        .operation_timeout(timeout)
        .enable_transaction(true)
        .build();
    let accept = async {
        let mut broker = svc.accept().await;
        broker.handshake().await;
        broker
    };
    let (client, broker) = tokio::join!(build, accept);
    (client.expect("client"), broker)
}

/// Answers the lookup of coordinator 0's partition: served here.
async fn answer_lookup(broker: &mut FakeBroker) {
    let lookup = broker.expect(Type::Lookup).await;
    assert_eq!(topic_of(&lookup), format!("{ASSIGN}-partition-0"));
    answer_lookup_here(broker, &lookup).await;
}

/// Answers what a first `begin()` asks (the assign topic's partitions,
/// coordinator 0's lookup and TC_CLIENT_CONNECT, the NEW_TXN): the
/// transaction (0, 9).
pub(super) async fn begin_txn_0_9(broker: &mut FakeBroker) {
    let metadata = broker.expect(Type::PartitionedMetadata).await;
    broker
        .send(answer::partitions(request_id(&metadata), 1))
        .await;
    let new_txn = attach_coordinator(broker).await;
    broker
        .send(answer::new_txn(request_id(&new_txn), 0, 9))
        .await;
}

/// Answers coordinator 0's lookup and TC_CLIENT_CONNECT; returns the
/// NEW_TXN that follows, unanswered.
async fn attach_coordinator(broker: &mut FakeBroker) -> Frame {
    answer_lookup(broker).await;
    let connect = broker.expect(Type::TcClientConnectRequest).await;
    broker
        .send(answer::tc_connected(request_id(&connect), None))
        .await;
    broker.expect(Type::NewTxn).await
}

#[tokio::test(start_paused = true)]
async fn a_lost_coordinator_connection_is_attached_again_after_the_backoff_delay() {
    let net = FakeNetwork::new();
    let mut svc = net.listen(SERVICE);
    let (client, mut broker) = client(&net, &mut svc).await;
    let begin = tokio::spawn({
        let client = client.clone();
        async move { client.transaction().begin().await }
    });

    let metadata = broker.expect(Type::PartitionedMetadata).await;
    assert_eq!(topic_of(&metadata), ASSIGN);
    broker
        .send(answer::partitions(request_id(&metadata), 1))
        .await;
    let new_txn = attach_coordinator(&mut broker).await;
    let asked = new_txn.command.new_txn.as_ref().expect("body");
    assert_eq!(asked.tc_id, Some(0));
    assert_eq!(
        asked.txn_ttl_seconds,
        Some(60_000),
        "the timeout in milliseconds"
    );
    // The connection is lost before the answer.
    drop(broker);
    let lost = tokio::time::Instant::now();

    let mut broker = guard("the coordinator attached again", svc.accept()).await;
    assert!(
        lost.elapsed() >= Duration::from_millis(100),
        "attached again after the backoff's first delay, not at once: {:?}",
        lost.elapsed()
    );
    broker.handshake().await;
    let new_txn = attach_coordinator(&mut broker).await;
    broker
        .send(answer::new_txn(request_id(&new_txn), 0, 42))
        .await;

    let txn = guard("begin", begin).await.expect("task").expect("begin");
    assert_eq!((txn.id().most_bits, txn.id().least_bits), (0, 42));
}

#[tokio::test(start_paused = true)]
async fn a_coordinator_that_stays_missing_is_tried_again_then_reported_typed() {
    let net = FakeNetwork::new();
    let mut svc = net.listen(SERVICE);
    let (client, mut broker) = client(&net, &mut svc).await;
    let mut begin = tokio::spawn({
        let client = client.clone();
        async move { client.transaction().begin().await }
    });

    let metadata = broker.expect(Type::PartitionedMetadata).await;
    broker
        .send(answer::partitions(request_id(&metadata), 1))
        .await;
    let mut attempts = 0;
    let refused = Some((ServerError::TransactionCoordinatorNotFound, "not loaded"));
    let err = guard("begin gives up", async {
        loop {
            tokio::select! {
                outcome = &mut begin => break outcome.expect("task").expect_err("never attached"),
                frame = broker.recv() => {
                    let frame = frame.expect("connection open");
                    match frame.command.r#type() {
                        Type::Lookup => answer_lookup_here(&mut broker, &frame).await,
                        Type::TcClientConnectRequest => {
                            attempts += 1;
                            broker.send(answer::tc_connected(request_id(&frame), refused)).await;
                        }
                        other => panic!("unexpected {other:?}"),
                    }
                }
            }
        }
    })
    .await;
    assert!(attempts >= 2, "tried again: {attempts} attempts");
    assert!(
        matches!(
            &err,
            TransactionError::CoordinatorNotFound {
                op: "TC_CLIENT_CONNECT",
                tc: 0,
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_commit_the_coordinator_answers_after_it_timed_the_transaction_out_is_timed_out() {
    let net = FakeNetwork::new();
    let mut svc = net.listen(SERVICE);
    let (client, mut broker) = client(&net, &mut svc).await;
    let timeout = Duration::from_secs(5);
    let begin = tokio::spawn({
        let client = client.clone();
        async move { client.transaction().timeout(timeout).begin().await }
    });
    let metadata = broker.expect(Type::PartitionedMetadata).await;
    broker
        .send(answer::partitions(request_id(&metadata), 1))
        .await;
    let new_txn = attach_coordinator(&mut broker).await;
    broker
        .send(answer::new_txn(request_id(&new_txn), 0, 7))
        .await;
    let txn = guard("begin", begin).await.expect("task").expect("begin");

    // Commit just inside the timeout; the coordinator's answer comes after
    // it: it aborted the transaction meanwhile and no longer knows it.
    tokio::time::advance(timeout - Duration::from_millis(100)).await;
    let commit = tokio::spawn({
        let txn = txn.clone();
        async move { txn.commit().await }
    });
    let end = broker.expect(Type::EndTxn).await;
    let body = end.command.end_txn.as_ref().expect("body");
    assert_eq!(
        body.txn_action,
        Some(pulsar_wire::proto::TxnAction::Commit as i32)
    );
    tokio::time::advance(Duration::from_millis(200)).await;
    broker
        .send(answer::end_txn_refused(
            body.request_id,
            ServerError::TransactionNotFound,
            "transaction (0,7) not found",
        ))
        .await;

    let err = guard("commit", commit)
        .await
        .expect("task")
        .expect_err("timed out");
    assert!(
        matches!(err, TransactionError::TimedOut { timeout: t, .. } if t == timeout),
        "{err:?}"
    );
    assert_eq!(
        txn.state(),
        pulsar_wire::transaction::TransactionState::TimedOut
    );
}

#[tokio::test(start_paused = true)]
async fn an_operation_timeout_of_duration_max_begins_and_commits() {
    let net = FakeNetwork::new();
    let mut svc = net.listen(SERVICE);
    let (client, mut broker) = client_timing_out_after(&net, &mut svc, Duration::MAX).await;
    let begin = tokio::spawn({
        let client = client.clone();
        async move { client.transaction().begin().await }
    });
    guard("begin and commit", async {
        begin_txn_0_9(&mut broker).await;
        let txn = begin.await.expect("task").expect("begin");

        let commit = tokio::spawn(async move { txn.commit().await });
        let end = broker.expect(Type::EndTxn).await;
        let request = end.command.end_txn.as_ref().expect("body").request_id;
        broker.send(answer::end_txn(request)).await;
        commit.await.expect("task").expect("committed");
    })
    .await;
}

/// Answers a LOOKUP (the next frame) and the SUBSCRIBE and FLOW after it;
/// returns the consumer id.
pub(super) async fn subscription(broker: &mut FakeBroker) -> u64 {
    let lookup = broker.expect(Type::Lookup).await;
    answer_lookup_here(broker, &lookup).await;
    subscribed(broker).await
}

/// Answers the SUBSCRIBE (the next frame) and the FLOW after it; returns
/// the consumer id.
async fn subscribed(broker: &mut FakeBroker) -> u64 {
    let subscribe = broker.expect(Type::Subscribe).await;
    let body = subscribe.command.subscribe.as_ref().expect("body");
    broker.send(answer::success(body.request_id)).await;
    broker.expect(Type::Flow).await;
    body.consumer_id
}

#[tokio::test(start_paused = true)]
async fn an_ack_in_a_transaction_while_its_partition_subscribes_again_goes_under_the_new_id() {
    let net = FakeNetwork::new();
    let mut svc = net.listen(SERVICE);
    let (client, mut broker) = client(&net, &mut svc).await;
    guard("transactional ack across a resubscribe", async {
        let topic = "persistent://public/default/txn-acked";
        let subscribing = tokio::spawn({
            let client = client.clone();
            async move {
                client
                    .consumer(topic, "s")
                    .subscription_type(pulsar_wire::consumer::SubscriptionType::Shared)
                    .subscribe()
                    .await
            }
        });
        let metadata = broker.expect(Type::PartitionedMetadata).await;
        broker
            .send(answer::partitions(request_id(&metadata), 0))
            .await;
        let old = subscription(&mut broker).await;
        let mut consumer = subscribing.await.expect("task").expect("subscribe");

        let begin = tokio::spawn({
            let client = client.clone();
            async move { client.transaction().begin().await }
        });
        begin_txn_0_9(&mut broker).await;
        let txn = begin.await.expect("task").expect("begin");

        let mut message = crate::consume::message(old, 1, "m", pulsar_wire::wire::Checksum::Valid);
        if let Some(m) = message.command.message.as_mut() {
            m.consumer_id = old;
        }
        broker.send_frame(message).await;
        let m = consumer.receive().await.expect("receive");
        // The partition is lost and subscribes again; the application acks
        // in the transaction meanwhile.
        broker
            .send(crate::consume::reconnect::close_consumer(old))
            .await;
        let lookup = broker.expect(Type::Lookup).await;
        let acking = tokio::spawn({
            let (consumer, txn) = (consumer.clone(), txn.clone());
            async move { consumer.ack_in(&txn, &m).await }
        });
        let quiet = tokio::time::timeout(Duration::from_secs(1), broker.recv()).await;
        assert!(
            quiet.is_err(),
            "nothing under the old consumer id: {quiet:?}"
        );
        answer_lookup_here(&mut broker, &lookup).await;
        let new = subscribed(&mut broker).await;
        let add = broker.expect(Type::AddSubscriptionToTxn).await;
        let request = add
            .command
            .add_subscription_to_txn
            .as_ref()
            .expect("body")
            .request_id;
        broker.send(answer::subscription_added(request)).await;
        let ack = broker.expect(Type::Ack).await;
        let body = ack.command.ack.as_ref().expect("body");
        assert_eq!(body.consumer_id, new, "under the new consumer id");
        broker
            .send(answer::ack_response(
                new,
                body.request_id.expect("a request"),
            ))
            .await;
        acking
            .await
            .expect("task")
            .expect("acked in the transaction");

        let commit = tokio::spawn(async move { txn.commit().await });
        let end = broker.expect(Type::EndTxn).await;
        let body = end.command.end_txn.as_ref().expect("body");
        assert_eq!(body.txn_action, Some(0), "a commit, not an abort");
        broker.send(answer::end_txn(body.request_id)).await;
        commit.await.expect("task").expect("committed");
    })
    .await;
}
