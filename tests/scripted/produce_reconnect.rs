//! Producer reconnection against the scripted broker: a lost connection, a
//! receipt that skips ahead and CLOSE_PRODUCER re-create the producer
//! (under its name, at the broker named if one is) and resend every
//! unconfirmed message in order with its sequence id; so does a
//! SEND_ERROR the broker can get over (a fenced ledger while the topic
//! moves), as in the Java client; close during a
//! reconnect ends at once; sends made while reconnecting are bounded by the
//! send timeout.

use super::*;

/// Answers the LOOKUP and PRODUCER of a re-created producer on `broker`;
/// checks it asked under the name the broker gave; returns its new id.
async fn recreate(broker: &mut FakeBroker) -> u64 {
    answer_lookup(broker).await;
    answer_producer(broker).await
}

/// Expects the client to close producer `old` and create it again on the
/// same connection; returns the new producer id.
async fn closed_and_recreated(broker: &mut FakeBroker, old: u64) -> u64 {
    let close = broker.expect(Type::CloseProducer).await;
    let body = close
        .command
        .close_producer
        .as_ref()
        .expect("CLOSE_PRODUCER");
    assert_eq!(body.producer_id, old);
    broker.send(answer::success(body.request_id)).await;
    let fresh = recreate(broker).await;
    assert_ne!(fresh, old, "a fresh producer id");
    fresh
}

async fn answer_producer(broker: &mut FakeBroker) -> u64 {
    let create = broker.expect(Type::Producer).await;
    let body = create.command.producer.as_ref().expect("PRODUCER");
    assert_eq!(body.producer_name.as_deref(), Some("p-1"), "the same name");
    let id = body.producer_id;
    broker
        .send(producer_success(request_id(&create), "p-1", -1))
        .await;
    id
}

/// Sends "x", "y" and "z" and sees their SENDs arrive (sequence ids 0 to
/// 2); returns the producer id they went under and their receipts.
async fn three_in_flight(
    producer: &Producer,
    broker: &mut FakeBroker,
) -> (u64, Vec<pulsar_wire::producer::SendReceipt>) {
    let mut receipts = Vec::new();
    for body in ["x", "y", "z"] {
        receipts.push(producer.send(body).await.expect("queued"));
    }
    let (id, _) = send_of(&broker.expect(Type::Send).await);
    broker.expect(Type::Send).await;
    broker.expect(Type::Send).await;
    (id, receipts)
}

pub(super) fn close_producer(producer: u64, broker_url: Option<&str>) -> BaseCommand {
    BaseCommand {
        r#type: Type::CloseProducer as i32,
        close_producer: Some(Box::new(proto::CommandCloseProducer {
            producer_id: producer,
            request_id: 0,
            assigned_broker_service_url: broker_url.map(str::to_owned),
            ..proto::CommandCloseProducer::default()
        })),
        ..BaseCommand::default()
    }
}

#[tokio::test(start_paused = true)]
async fn a_lost_connection_resends_every_unconfirmed_message_in_order() {
    guard("reconnect", async {
        let (producer, mut broker, mut svc) =
            producer_with(None, -1, 64 << 20, WhenFull::Block).await;
        let (id, mut receipts) = three_in_flight(&producer, &mut broker).await;
        broker.send(answer::receipt(id, 0)).await;
        drop(broker);
        // Queued while the producer is re-created: it waits for it.
        receipts.push(producer.send("w").await.expect("queued"));
        let mut broker = svc.accept().await;
        broker.handshake().await;
        let fresh = recreate(&mut broker).await;
        let mut resent = Vec::new();
        for _ in 0..3 {
            let frame = broker.expect(Type::Send).await;
            let (producer_id, seq) = send_of(&frame);
            assert_eq!(producer_id, fresh, "sent as the new producer");
            let payload = frame.payload.as_ref().expect("payload");
            resent.push((seq, payload.data.clone()));
        }
        let expected = [(1, "y"), (2, "z"), (3, "w")].map(|(s, b)| (s, bytes::Bytes::from(b)));
        assert_eq!(
            resent, expected,
            "unconfirmed ones first, in order, same sequence ids"
        );
        for seq in 1..=3 {
            broker.send(answer::receipt(fresh, seq)).await;
        }
        let ids: Vec<u64> = futures::future::join_all(receipts)
            .await
            .into_iter()
            .map(|r| r.expect("stored").entry_id)
            .collect();
        assert_eq!(ids, [0, 1, 2, 3]);
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_resend_the_broker_already_stored_is_a_success() {
    guard("deduplicated resend", async {
        let (producer, mut broker, mut svc) =
            producer_with(None, -1, 64 << 20, WhenFull::Block).await;
        let receipt = producer.send("x").await.expect("queued");
        // The broker stores the SEND, but the connection dies before its
        // receipt goes out.
        let (_, seq) = send_of(&broker.expect(Type::Send).await);
        drop(broker);
        let mut broker = svc.accept().await;
        broker.handshake().await;
        let fresh = recreate(&mut broker).await;
        assert_eq!(send_of(&broker.expect(Type::Send).await), (fresh, seq));
        // Deduplication on: it has this sequence id and stores nothing new.
        broker.send(answer::duplicate_receipt(fresh, seq)).await;
        let id = receipt
            .await
            .expect("the message is in the topic: a success");
        assert!(id.is_duplicate(), "{id}");
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_receipt_that_skips_ahead_re_creates_the_producer_and_resends() {
    guard("out of order", async {
        let (producer, mut broker, _svc) = producer_with(None, 9, 64 << 20, WhenFull::Block).await;
        let first = producer.send("a").await.expect("queued");
        let second = producer.send("b").await.expect("queued");
        let (id, _) = send_of(&broker.expect(Type::Send).await);
        broker.expect(Type::Send).await;
        // A stale receipt (before anything in flight) is ignored...
        broker.send(answer::receipt(id, 3)).await;
        // ...one for the second send while the first is oldest is not: the
        // producer is closed and created again on the same connection.
        broker.send(answer::receipt(id, 11)).await;
        let fresh = closed_and_recreated(&mut broker, id).await;
        assert_eq!(send_of(&broker.expect(Type::Send).await), (fresh, 10));
        assert_eq!(send_of(&broker.expect(Type::Send).await), (fresh, 11));
        broker.send(answer::receipt(fresh, 10)).await;
        broker.send(answer::receipt(fresh, 11)).await;
        assert_eq!(first.await.expect("stored").entry_id, 10);
        assert_eq!(second.await.expect("stored").entry_id, 11);
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn receipts_after_close_producer_confirm_their_sends_which_are_not_sent_again() {
    guard("receipts after the close", async {
        let (producer, mut broker, _svc) = producer_with(None, -1, 64 << 20, WhenFull::Block).await;
        let (id, receipts) = three_in_flight(&producer, &mut broker).await;
        // Apache Pulsar closes the producer as the topic unloads, then
        // answers the sends it was storing: "x" and "y" are in the topic.
        broker.send(close_producer(id, None)).await;
        broker.send(answer::receipt(id, 0)).await;
        broker.send(answer::receipt(id, 1)).await;
        let fresh = recreate(&mut broker).await;
        assert_eq!(
            send_of(&broker.expect(Type::Send).await),
            (fresh, 2),
            "only the send without a receipt goes again"
        );
        broker.send(answer::receipt(fresh, 2)).await;
        let ids: Vec<u64> = futures::future::join_all(receipts)
            .await
            .into_iter()
            .map(|r| r.expect("stored").entry_id)
            .collect();
        assert_eq!(ids, [0, 1, 2]);
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn close_producer_naming_a_broker_goes_straight_there() {
    guard("assigned broker", async {
        let net = FakeNetwork::new();
        let mut other = net.listen("other:6650");
        let (producer, mut broker, _svc) =
            producer_on(&net, None, -1, 64 << 20, WhenFull::Block).await;
        let receipt = producer.send("m").await.expect("queued");
        let (id, seq) = send_of(&broker.expect(Type::Send).await);
        assert_eq!(seq, 0);
        broker
            .send(close_producer(id, Some("pulsar://other:6650")))
            .await;
        let mut moved = other.accept().await;
        moved.handshake().await;
        // No lookup: PRODUCER is the first request there.
        let fresh = answer_producer(&mut moved).await;
        assert_eq!(send_of(&moved.expect(Type::Send).await), (fresh, 0));
        moved.send(answer::receipt(fresh, 0)).await;
        assert_eq!(receipt.await.expect("stored").entry_id, 0);
        assert_eq!(net.connects("other:6650"), 1);
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn close_during_a_reconnect_ends_closed_and_fails_what_is_pending() {
    guard("close while reconnecting", async {
        // The listener is gone: every reconnect attempt is refused.
        let (producer, mut broker) = producer(None, -1).await;
        let receipt = producer.send("x").await.expect("queued");
        broker.expect(Type::Send).await;
        drop(broker);
        producer
            .close()
            .await
            .expect("closed without waiting for a broker");
        assert!(matches!(receipt.await, Err(ProducerError::Closed)));
        assert!(matches!(
            producer.send("late").await,
            Err(ProducerError::Closed)
        ));
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn sends_made_while_reconnecting_wait_until_the_send_timeout() {
    guard("send timeout while reconnecting", async {
        let (producer, broker) = producer(None, -1).await;
        drop(broker);
        let waiting = producer.send("x").await.expect("queued while reconnecting");
        assert!(matches!(
            waiting.await,
            Err(ProducerError::Timeout { after }) if after == Duration::from_secs(30)
        ));
        // Still trying: the producer is not dead, a later send is queued.
        let _later = producer.send("y").await.expect("queued");
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_producer_re_created_after_close_is_closed_on_the_broker() {
    guard("orphan producer", async {
        let (producer, broker, mut svc) = producer_with(None, -1, 64 << 20, WhenFull::Block).await;
        drop(broker);
        let mut broker = svc.accept().await;
        broker.handshake().await;
        answer_lookup(&mut broker).await;
        let create = broker.expect(Type::Producer).await;
        // Closed while its PRODUCER is in flight: close does not wait for it...
        producer.close().await.expect("closed");
        let id = create
            .command
            .producer
            .as_ref()
            .expect("PRODUCER")
            .producer_id;
        broker
            .send(producer_success(request_id(&create), "p-1", -1))
            .await;
        // ...and the producer made after all is closed, not left on the broker.
        let close = broker.expect(Type::CloseProducer).await;
        assert_eq!(
            close.command.close_producer.as_ref().map(|c| c.producer_id),
            Some(id)
        );
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn behind_a_proxy_close_producer_naming_a_broker_reconnects_through_the_proxy() {
    guard("assigned broker behind a proxy", async {
        init_tracing();
        // SERVICE is a Pulsar proxy: its lookups answer
        // proxy_through_service_url, and the brokers are reached through it.
        let net = FakeNetwork::new();
        let mut proxy = net.listen(SERVICE);
        let create = async {
            let client = Client::builder()
                .service_url(format!("pulsar://{SERVICE}"))
                .connector(net.clone())
                .build()
                .await
                .expect("client");
            client.producer("orders").batching(false).create().await
        };
        let script = async {
            let mut lookups = proxy.accept().await;
            lookups.handshake().await;
            let meta = lookups.expect(Type::PartitionedMetadata).await;
            lookups.send(answer::partitions(request_id(&meta), 0)).await;
            let lookup = lookups.expect(Type::Lookup).await;
            let url = "pulsar://hidden:6650";
            lookups
                .send(answer::lookup_via_proxy(request_id(&lookup), url))
                .await;
            let mut hidden = proxy.accept().await;
            hidden.handshake_via_proxy("hidden:6650").await;
            let create = hidden.expect(Type::Producer).await;
            hidden
                .send(producer_success(request_id(&create), "p-1", -1))
                .await;
            (lookups, hidden)
        };
        let (producer, (_lookups, mut hidden)) = tokio::join!(create, script);
        let producer = producer.expect("producer");
        let receipt = producer.send("m").await.expect("queued");
        let (id, _) = send_of(&hidden.expect(Type::Send).await);
        // The broker behind the proxy hands the topic to "other" (as the
        // extensible load manager does on unload): the producer goes there
        // through the proxy, the only address it can reach.
        hidden
            .send(close_producer(id, Some("pulsar://other:6650")))
            .await;
        let mut moved = proxy.accept().await;
        moved.handshake_via_proxy("other:6650").await;
        let fresh = answer_producer(&mut moved).await;
        assert_eq!(send_of(&moved.expect(Type::Send).await), (fresh, 0));
        moved.send(answer::receipt(fresh, 0)).await;
        assert_eq!(receipt.await.expect("stored").entry_id, 0);
        assert_eq!(net.connects("other:6650"), 0, "never dialled directly");
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_persistence_error_re_creates_the_producer_and_resends() {
    guard("transient send error", async {
        let (producer, mut broker) = producer(None, -1).await;
        let first = producer.send("a").await.expect("queued");
        let second = producer.send("b").await.expect("queued");
        let (id, _) = send_of(&broker.expect(Type::Send).await);
        broker.expect(Type::Send).await;
        // The topic's ledger was fenced by its next owner: the broker did
        // not store "a" and will close the topic. Not the application's
        // error: the producer starts over and sends both again.
        let fenced = send_error(id, 0, ServerError::PersistenceError, "fenced");
        broker.send(fenced).await;
        let fresh = closed_and_recreated(&mut broker, id).await;
        assert_eq!(send_of(&broker.expect(Type::Send).await), (fresh, 0));
        assert_eq!(send_of(&broker.expect(Type::Send).await), (fresh, 1));
        broker.send(answer::receipt(fresh, 0)).await;
        broker.send(answer::receipt(fresh, 1)).await;
        assert_eq!(first.await.expect("stored").entry_id, 0);
        assert_eq!(second.await.expect("stored").entry_id, 1);
    })
    .await;
}
