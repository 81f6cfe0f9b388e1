//! A consumer's life on the broker, against the scripted broker (paused
//! clock): nothing left behind by a SUBSCRIBE that timed out, a failed
//! partitioned subscribe or a dropped `subscribe()`; a broker that closes
//! every new subscription at once meets a growing backoff; credentials
//! refused while subscribing again are retried; a partition given up is
//! reported once while the others go on.

use super::reconnect::{answer_lookup_here, close_consumer};
use super::*;

const OTHER: &str = "persistent://public/default/scripted-other";

/// Subscribes in a task of its own (a client of the scripted network,
/// the builder set up by `setup`), so the test can play the broker.
fn subscribing(
    net: &FakeNetwork,
    setup: impl FnOnce(ConsumerBuilder) -> ConsumerBuilder + Send + 'static,
) -> tokio::task::JoinHandle<Result<Consumer, ConsumerError>> {
    init_tracing();
    let net = net.clone();
    tokio::spawn(async move {
        let client = Client::builder()
            .service_url(format!("pulsar://{SERVICE}"))
            .connector(net)
            .build()
            .await
            .expect("client");
        setup(client.consumer(TOPIC, "sub")).subscribe().await
    })
}

/// Expects a CLOSE_CONSUMER, answers it; returns its consumer id.
async fn expect_close(broker: &mut FakeBroker) -> u64 {
    let close = broker.expect(Type::CloseConsumer).await;
    let body = close.command.close_consumer.as_ref().expect("body");
    broker.send(answer::success(body.request_id)).await;
    body.consumer_id
}

/// Answers PARTITIONED_METADATA with `partitions`.
async fn metadata(broker: &mut FakeBroker, partitions: u32) {
    let meta = broker.expect(Type::PartitionedMetadata).await;
    broker
        .send(answer::partitions(request_id(&meta), partitions))
        .await;
}

/// Answers LOOKUP here; returns the SUBSCRIBE's consumer and request ids.
async fn lookup_then_subscribe(broker: &mut FakeBroker) -> (u64, u64) {
    let lookup = broker.expect(Type::Lookup).await;
    answer_lookup_here(broker, &lookup).await;
    let subscribe = broker.expect(Type::Subscribe).await;
    let body = subscribe.command.subscribe.as_ref().expect("body");
    (body.consumer_id, body.request_id)
}

#[tokio::test(start_paused = true)]
async fn a_subscribe_that_times_out_is_closed_on_the_broker() {
    let net = FakeNetwork::new();
    let mut svc = net.listen(SERVICE);
    guard("subscribe timeout", async {
        let subscribing = subscribing(&net, |b| b);
        let mut broker = svc.accept().await;
        broker.handshake().await;
        metadata(&mut broker, 0).await;
        let (id, _) = lookup_then_subscribe(&mut broker).await;
        // No answer: the client times out, then closes what the broker may
        // still make of it.
        assert_eq!(expect_close(&mut broker).await, id);
        let result = subscribing.await.expect("task");
        assert!(
            matches!(
                result,
                Err(ConsumerError::Request {
                    op: "SUBSCRIBE",
                    ..
                })
            ),
            "{result:?}"
        );
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_subscribe_cut_off_by_a_lost_connection_is_made_on_a_new_one() {
    // As the Java client does: a passing failure while subscribing the
    // first time (here the connection dropped with SUBSCRIBE pending) is
    // tried again with backoff, until the operation timeout.
    let net = FakeNetwork::new();
    let mut svc = net.listen(SERVICE);
    guard("subscribe cut off", async {
        let subscribing = subscribing(&net, |b| b);
        let mut broker = svc.accept().await;
        broker.handshake().await;
        metadata(&mut broker, 0).await;
        lookup_then_subscribe(&mut broker).await;
        drop(broker);
        let mut fresh = svc.accept().await;
        fresh.handshake().await;
        let (_, request) = lookup_then_subscribe(&mut fresh).await;
        fresh.send(answer::success(request)).await;
        fresh.expect(Type::Flow).await;
        let result = subscribing.await.expect("task");
        assert!(result.is_ok(), "{result:?}");
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_subscribe_refused_for_lack_of_permission_fails_at_once() {
    let net = FakeNetwork::new();
    let mut svc = net.listen(SERVICE);
    guard("subscribe not authorized", async {
        let subscribing = subscribing(&net, |b| b);
        let mut broker = svc.accept().await;
        broker.handshake().await;
        metadata(&mut broker, 0).await;
        let (_, request) = lookup_then_subscribe(&mut broker).await;
        let refused = answer::error(request, ServerError::AuthorizationError, "not allowed");
        broker.send(refused).await;
        let result = subscribing.await.expect("task");
        assert!(
            matches!(
                &result,
                Err(ConsumerError::Request {
                    source: pulsar_wire::connection::ConnectionError::Server {
                        code: ServerError::AuthorizationError,
                        ..
                    },
                    ..
                })
            ),
            "{result:?}"
        );
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_dropped_subscribe_leaves_nothing_behind() {
    let net = FakeNetwork::new();
    let mut svc = net.listen(SERVICE);
    guard("dropped subscribe", async {
        let subscribing = subscribing(&net, |b| b);
        let mut broker = svc.accept().await;
        broker.handshake().await;
        metadata(&mut broker, 0).await;
        let (id, request) = lookup_then_subscribe(&mut broker).await;
        subscribing.abort();
        let _ = subscribing.await;
        // The broker makes the subscription after all: it is closed.
        broker.send(answer::success(request)).await;
        assert_eq!(expect_close(&mut broker).await, id);
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_partitioned_subscribe_with_one_refusal_closes_the_partitions_it_made() {
    let net = FakeNetwork::new();
    let mut svc = net.listen(SERVICE);
    guard("partial partitioned subscribe", async {
        let subscribing = subscribing(&net, |b| b);
        let mut broker = svc.accept().await;
        broker.handshake().await;
        metadata(&mut broker, 2).await;
        let (first, request) = lookup_then_subscribe(&mut broker).await;
        broker.send(answer::success(request)).await;
        broker.expect(Type::Flow).await;
        let (_, request) = lookup_then_subscribe(&mut broker).await;
        let busy = answer::error(request, ServerError::ConsumerBusy, "exclusive");
        broker.send(busy).await;
        assert_eq!(expect_close(&mut broker).await, first);
        let result = subscribing.await.expect("task");
        assert!(result.is_err(), "{result:?}");
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_broker_that_closes_every_new_subscription_meets_a_growing_backoff() {
    let net = FakeNetwork::new();
    guard("close ping-pong", async {
        let (_consumer, mut broker, mut id) = subscribed(&net, SubscriptionType::Shared).await;
        let start = tokio::time::Instant::now();
        for _ in 0..6 {
            broker.send(close_consumer(id)).await;
            let (again, request) = lookup_then_subscribe(&mut broker).await;
            broker.send(answer::success(request)).await;
            broker.expect(Type::Flow).await;
            id = again;
        }
        // 100 ms doubling (jittered), not 100 ms every time: 6 rounds take
        // several seconds (6.3 s without jitter), not 0.6 s.
        let took = start.elapsed();
        assert!(took > Duration::from_secs(3), "6 rounds in {took:?}");
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn credentials_refused_while_subscribing_again_are_retried() {
    let net = FakeNetwork::new();
    guard("auth refused on resubscribe", async {
        let (mut consumer, mut broker, id) = subscribed(&net, SubscriptionType::Shared).await;
        broker.send(close_consumer(id)).await;
        for code in [
            ServerError::AuthenticationError,
            ServerError::AuthorizationError,
        ] {
            let (_, request) = lookup_then_subscribe(&mut broker).await;
            broker.send(answer::error(request, code, "token")).await;
        }
        // The rotated token arrived: the third attempt succeeds.
        let (again, request) = lookup_then_subscribe(&mut broker).await;
        broker.send(answer::success(request)).await;
        broker.expect(Type::Flow).await;
        broker
            .send_frame(message(again, 5, "back", Checksum::Valid))
            .await;
        let m = consumer.receive().await.expect("receive");
        assert_eq!(m.id(), MessageId::new(1, 5));
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_topic_given_up_is_reported_once_and_the_others_go_on() {
    let net = FakeNetwork::new();
    let mut svc = net.listen(SERVICE);
    guard("one topic lost", async {
        let subscribing = subscribing(&net, |b| {
            b.topic(OTHER).subscription_type(SubscriptionType::Shared)
        });
        let mut broker = svc.accept().await;
        broker.handshake().await;
        metadata(&mut broker, 0).await;
        metadata(&mut broker, 0).await;
        let mut ids = Vec::new();
        for _ in 0..2 {
            let (id, request) = lookup_then_subscribe(&mut broker).await;
            broker.send(answer::success(request)).await;
            broker.expect(Type::Flow).await;
            ids.push(id);
        }
        let mut consumer = subscribing.await.expect("task").expect("subscribed");
        // The other topic is deleted: its consumer is closed and it is gone.
        broker.send(close_consumer(ids[1])).await;
        let lookup = broker.expect(Type::Lookup).await;
        let gone = answer::error(request_id(&lookup), ServerError::TopicNotFound, "gone");
        broker.send(gone).await;
        let lost = consumer.receive().await;
        assert!(
            matches!(&lost, Err(ConsumerError::Lost { topic, .. }) if topic == OTHER),
            "{lost:?}"
        );
        broker
            .send_frame(message(ids[0], 8, "still here", Checksum::Valid))
            .await;
        let m = consumer.receive().await.expect("the first topic goes on");
        assert_eq!(m.id(), MessageId::new(1, 8));
        // Nothing goes out under the lost topic's dead consumer id: an
        // unsubscribe asks for the first topic only.
        let script = async {
            let unsubscribe = broker.expect(Type::Unsubscribe).await;
            let body = unsubscribe.command.unsubscribe.as_ref().expect("body");
            assert_eq!(body.consumer_id, ids[0]);
            broker.send(answer::success(body.request_id)).await;
        };
        let (unsubscribed, ()) = tokio::join!(consumer.unsubscribe(), script);
        unsubscribed.expect("unsubscribed");
    })
    .await;
}

// A topic given up while its subscription stays on the broker (here it
// refuses the subscribe for good): an unsubscribe cannot remove that
// subscription, so it fails naming the topic, as the Java client's does,
// after unsubscribing the others.
#[tokio::test(start_paused = true)]
async fn an_unsubscribe_fails_naming_a_topic_given_up_whose_subscription_stays() {
    let net = FakeNetwork::new();
    let mut svc = net.listen(SERVICE);
    guard("unsubscribe with a topic given up", async {
        let subscribing = subscribing(&net, |b| {
            b.topic(OTHER).subscription_type(SubscriptionType::Shared)
        });
        let mut broker = svc.accept().await;
        broker.handshake().await;
        metadata(&mut broker, 0).await;
        metadata(&mut broker, 0).await;
        let mut ids = Vec::new();
        for _ in 0..2 {
            let (id, request) = lookup_then_subscribe(&mut broker).await;
            broker.send(answer::success(request)).await;
            broker.expect(Type::Flow).await;
            ids.push(id);
        }
        let mut consumer = subscribing.await.expect("task").expect("subscribed");
        broker.send(close_consumer(ids[1])).await;
        let (_, request) = lookup_then_subscribe(&mut broker).await;
        let refused = answer::error(request, ServerError::NotAllowedError, "not allowed");
        broker.send(refused).await;
        let lost = consumer.receive().await;
        assert!(
            matches!(&lost, Err(ConsumerError::Lost { topic, .. }) if topic == OTHER),
            "{lost:?}"
        );
        let script = async {
            let unsubscribe = broker.expect(Type::Unsubscribe).await;
            let body = unsubscribe.command.unsubscribe.as_ref().expect("body");
            assert_eq!(body.consumer_id, ids[0]);
            broker.send(answer::success(body.request_id)).await;
        };
        let (unsubscribed, ()) = tokio::join!(consumer.unsubscribe(), script);
        assert!(
            matches!(&unsubscribed, Err(ConsumerError::Lost { topic, .. }) if topic == OTHER),
            "{unsubscribed:?}"
        );
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_close_that_meets_a_lost_connection_is_done_and_closing_again_too() {
    let net = FakeNetwork::new();
    guard("consumer close during a connection loss", async {
        let (consumer, mut broker, id) = subscribed(&net, SubscriptionType::Shared).await;
        let script = async {
            assert_eq!(expect_close(&mut broker).await, id);
            drop(broker); // the connection is lost before the answer
        };
        let (closed, ()) = tokio::join!(consumer.close(), script);
        closed.expect("nothing of it is left on the broker: closed");
        consumer.close().await.expect("closing again is done too");
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn an_ack_made_while_the_consumer_closes_fails_rather_than_go_unsent() {
    let net = FakeNetwork::new();
    guard("ack during close", async {
        let (mut consumer, mut broker, id) = subscribed(&net, SubscriptionType::Shared).await;
        broker
            .send_frame(message(id, 1, "m", Checksum::Valid))
            .await;
        let m = consumer.receive().await.expect("receive");
        let other = consumer.clone();
        let closing = tokio::spawn(async move { consumer.close().await });
        // The broker holds its answer to CLOSE_CONSUMER: the close runs.
        let close = broker.expect(Type::CloseConsumer).await;
        let body = close.command.close_consumer.as_ref().expect("body");
        assert_eq!(body.consumer_id, id);
        let acked = other.ack(&m).await;
        assert!(
            matches!(acked, Err(ConsumerError::Closed)),
            "an ack the close will not send: {acked:?}"
        );
        broker.send(answer::success(body.request_id)).await;
        closing.await.expect("task").expect("closed");
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn the_grouped_acks_of_a_topic_given_up_never_go_out_under_its_dead_id() {
    let net = FakeNetwork::new();
    let mut svc = net.listen(SERVICE);
    guard("grouped acks of a lost topic", async {
        let subscribing = subscribing(&net, |b| {
            b.topic(OTHER)
                .subscription_type(SubscriptionType::Shared)
                .ack_group_time(Duration::MAX)
        });
        let mut broker = svc.accept().await;
        broker.handshake().await;
        metadata(&mut broker, 0).await;
        metadata(&mut broker, 0).await;
        let mut ids = Vec::new();
        for _ in 0..2 {
            let (id, request) = lookup_then_subscribe(&mut broker).await;
            broker.send(answer::success(request)).await;
            broker.expect(Type::Flow).await;
            ids.push(id);
        }
        let mut consumer = subscribing.await.expect("task").expect("subscribed");
        broker
            .send_frame(message(ids[1], 3, "other", Checksum::Valid))
            .await;
        let m = consumer.receive().await.expect("receive");
        consumer.ack(&m).await.expect("ack, grouped");
        // The other topic is deleted while its ack waits in the group.
        broker.send(close_consumer(ids[1])).await;
        let lookup = broker.expect(Type::Lookup).await;
        let gone = answer::error(request_id(&lookup), ServerError::TopicNotFound, "gone");
        broker.send(gone).await;
        let lost = consumer.receive().await;
        assert!(matches!(lost, Err(ConsumerError::Lost { .. })), "{lost:?}");
        let script = async {
            loop {
                let frame = broker.recv().await.expect("the client's frames");
                if let Some(ack) = &frame.command.ack {
                    assert_ne!(ack.consumer_id, ids[1], "an ACK under a dead consumer id");
                }
                if let Some(close) = &frame.command.close_consumer {
                    assert_eq!(close.consumer_id, ids[0]);
                    broker.send(answer::success(close.request_id)).await;
                    return;
                }
            }
        };
        let (closed, ()) = tokio::join!(consumer.close(), script);
        closed.expect("closed");
    })
    .await;
}

// A consumer of several partitions closes them together: against a broker
// that answers no CLOSE_CONSUMER, closing takes one operation timeout, not
// one per partition.
#[tokio::test(start_paused = true)]
async fn the_partitions_of_a_consumer_are_closed_together() {
    let net = FakeNetwork::new();
    let mut svc = net.listen(SERVICE);
    guard("partitions closed together", async {
        let subscribing = subscribing(&net, |b| b);
        let mut broker = svc.accept().await;
        broker.handshake().await;
        metadata(&mut broker, 3).await;
        for _ in 0..3 {
            let (_, request) = lookup_then_subscribe(&mut broker).await;
            broker.send(answer::success(request)).await;
            broker.expect(Type::Flow).await;
        }
        let consumer = subscribing.await.expect("task").expect("subscribed");
        let closing = tokio::spawn(async move { consumer.close().await });
        let mut at = Vec::new();
        while at.len() < 3 {
            let frame = broker.recv().await.expect("the client's frames");
            if frame.command.r#type() == Type::CloseConsumer {
                at.push(tokio::time::Instant::now());
            }
        }
        assert_eq!(at[0], at[2], "the third CLOSE_CONSUMER waited on the first");
        let _ = closing.await.expect("close task");
    })
    .await;
}

// An Exclusive consumer closed while it subscribes again: `close()`
// returns only once the subscription that attempt made is closed on the
// broker, so another consumer can subscribe right after it.
#[tokio::test(start_paused = true)]
async fn a_close_waits_for_the_subscription_made_by_an_attempt_under_way() {
    let net = FakeNetwork::new();
    guard("a close while subscribing again", async {
        let (consumer, mut broker, id) = subscribed(&net, SubscriptionType::Exclusive).await;
        broker.send(close_consumer(id)).await;
        let lookup = broker.expect(Type::Lookup).await;
        answer_lookup_here(&mut broker, &lookup).await;
        let subscribe = broker.expect(Type::Subscribe).await;
        let body = subscribe.command.subscribe.as_ref().expect("body");
        // The attempt waits for its answer when the application closes.
        let closing = tokio::spawn(async move { consumer.close().await });
        crate::common::until_idle().await;
        assert!(
            !closing.is_finished(),
            "close returned before the attempt ended"
        );
        broker.send(answer::success(body.request_id)).await;
        let orphan = expect_close(&mut broker).await;
        assert_eq!(
            orphan, body.consumer_id,
            "the attempt's subscription is closed"
        );
        closing.await.expect("task").expect("close");
    })
    .await;
}
