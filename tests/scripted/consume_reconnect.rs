//! The consumer subscribing again, against the scripted broker: after
//! CLOSE_CONSUMER or a lost connection with a fresh consumer id, at the
//! broker TOPIC_MIGRATED names, in the background (close returns at once,
//! a subscription made after close is closed on the broker), requests made
//! meanwhile wait for it (bounded), and only a final refusal gives up.

use super::*;

#[tokio::test(start_paused = true)]
async fn a_closed_consumer_subscribes_again_with_a_fresh_id() {
    let net = FakeNetwork::new();
    guard("resubscribe", async {
        let (mut consumer, mut broker, id) = subscribed(&net, SubscriptionType::Shared).await;
        broker.send(close_consumer(id)).await;
        let again = attach(&mut broker).await;
        assert_ne!(again, id, "a fresh consumer id per subscribe attempt");
        broker
            .send_frame(message(again, 7, "after", Checksum::Valid))
            .await;
        let m = consumer.receive().await.expect("receive");
        assert_eq!(m.id(), MessageId::new(1, 7));
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn receivers_fail_once_the_subscription_cannot_come_back() {
    let net = FakeNetwork::new();
    guard("lost", async {
        let (mut consumer, mut broker, id) = subscribed(&net, SubscriptionType::Shared).await;
        let waiting = tokio::spawn(async move {
            let result = consumer.receive().await;
            (consumer, result)
        });
        broker.send(close_consumer(id)).await;
        // Passing trouble is retried (with backoff, no limit): five
        // attempts find the broker not ready...
        for _ in 0..5 {
            let lookup = broker.expect(Type::Lookup).await;
            let busy = answer::error(request_id(&lookup), ServerError::ServiceNotReady, "busy");
            broker.send(busy).await;
        }
        // ...then the topic is gone for good: the consumer gives up.
        let lookup = broker.expect(Type::Lookup).await;
        let refused = answer::error(request_id(&lookup), ServerError::TopicNotFound, "gone");
        broker.send(refused).await;
        let (mut consumer, result) = waiting.await.expect("task");
        assert!(
            matches!(result, Err(ConsumerError::Lost { attempts: 6, .. })),
            "{result:?}"
        );
        assert!(matches!(
            consumer.try_receive().await,
            Err(ConsumerError::Lost { .. })
        ));
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn close_while_subscribing_again_returns_at_once() {
    let net = FakeNetwork::new();
    guard("close while resubscribing", async {
        let (consumer, broker, _) = subscribed(&net, SubscriptionType::Shared).await;
        drop(broker);
        // The service listener is gone too: every attempt is refused, and
        // the consumer keeps trying in the background until it is closed.
        consumer.close().await.expect("close");
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn topic_migrated_subscribes_again_straight_at_the_named_broker() {
    use pulsar_wire::proto::command_topic_migrated::ResourceType;
    let net = FakeNetwork::new();
    let mut other = net.listen("other:6650");
    guard("migrated", async {
        let (mut consumer, mut broker, id) = subscribed(&net, SubscriptionType::Shared).await;
        broker
            .send(BaseCommand {
                r#type: Type::TopicMigrated as i32,
                topic_migrated: Some(Box::new(proto::CommandTopicMigrated {
                    resource_id: id,
                    resource_type: ResourceType::Consumer as i32,
                    broker_service_url: Some("pulsar://other:6650".into()),
                    broker_service_url_tls: None,
                })),
                ..BaseCommand::default()
            })
            .await;
        let mut moved = other.accept().await;
        moved.handshake().await;
        // No lookup: SUBSCRIBE is the first request there, with a new epoch.
        let subscribe = moved.expect(Type::Subscribe).await;
        let body = subscribe.command.subscribe.as_ref().expect("body");
        assert_eq!(
            body.consumer_epoch,
            Some(1),
            "the core moved to a new epoch"
        );
        let again = body.consumer_id;
        moved.send(answer::success(body.request_id)).await;
        let flow = moved.expect(Type::Flow).await;
        assert_eq!(
            flow.command.flow.as_ref().map(|f| f.message_permits),
            Some(1000)
        );
        moved
            .send_frame(message(again, 9, "moved", Checksum::Valid))
            .await;
        let m = consumer.receive().await.expect("receive");
        assert_eq!(m.id(), MessageId::new(1, 9));
        assert_eq!(net.connects("other:6650"), 1);
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_subscription_made_after_close_is_closed_on_the_broker() {
    let net = FakeNetwork::new();
    guard("orphan subscription", async {
        let (consumer, mut broker, id) = subscribed(&net, SubscriptionType::Shared).await;
        broker.send(close_consumer(id)).await;
        let lookup = broker.expect(Type::Lookup).await;
        answer_lookup_here(&mut broker, &lookup).await;
        let subscribe = broker.expect(Type::Subscribe).await;
        let body = subscribe.command.subscribe.as_ref().expect("body");
        // Closed while its SUBSCRIBE is in flight: close does not wait...
        consumer.close().await.expect("closed");
        broker.send(answer::success(body.request_id)).await;
        // ...and the subscription made after all is closed on the broker.
        let close = broker.expect(Type::CloseConsumer).await;
        let closed = close.command.close_consumer.as_ref().map(|c| c.consumer_id);
        assert_eq!(closed, Some(body.consumer_id));
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_request_made_while_subscribing_again_waits_for_the_new_subscription() {
    let net = FakeNetwork::new();
    guard("request during a resubscribe", async {
        let (consumer, mut broker, id) = subscribed(&net, SubscriptionType::Shared).await;
        broker.send(close_consumer(id)).await;
        let lookup = broker.expect(Type::Lookup).await;
        // Subscribing again has started: ask now.
        let asking = tokio::spawn(async move { consumer.last_message_id().await });
        answer_lookup_here(&mut broker, &lookup).await;
        let again = attach_subscribe(&mut broker).await;
        let ask = broker.expect(Type::GetLastMessageId).await;
        let body = ask.command.get_last_message_id.as_ref().expect("body");
        assert_eq!(body.consumer_id, again, "asked as the new consumer");
        broker
            .send(BaseCommand {
                r#type: Type::GetLastMessageIdResponse as i32,
                get_last_message_id_response: Some(Box::new(
                    proto::CommandGetLastMessageIdResponse {
                        last_message_id: MessageId::new(4, 2).to_proto(),
                        request_id: body.request_id,
                        ..proto::CommandGetLastMessageIdResponse::default()
                    },
                )),
                ..BaseCommand::default()
            })
            .await;
        let last = asking.await.expect("task").expect("last message id");
        assert_eq!((last.ledger_id, last.entry_id), (4, 2));
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_request_made_while_subscribing_again_times_out_if_that_takes_too_long() {
    let net = FakeNetwork::new();
    guard("request while the lookup hangs", async {
        let (consumer, mut broker, id) = subscribed(&net, SubscriptionType::Shared).await;
        broker.send(close_consumer(id)).await;
        // Subscribing again has started, and its lookup is never answered.
        broker.expect(Type::Lookup).await;
        let err = consumer
            .seek(MessageId::new(1, 0))
            .await
            .expect_err("no answer");
        assert!(
            matches!(
                err,
                ConsumerError::Request {
                    op: "SEEK",
                    source: pulsar_wire::connection::ConnectionError::Timeout { .. },
                    ..
                }
            ),
            "{err:?}"
        );
    })
    .await;
}

/// Answers SUBSCRIBE and expects its FLOW; returns the consumer id.
async fn attach_subscribe(broker: &mut FakeBroker) -> u64 {
    let subscribe = broker.expect(Type::Subscribe).await;
    let body = subscribe.command.subscribe.as_ref().expect("body");
    broker.send(answer::success(body.request_id)).await;
    broker.expect(Type::Flow).await;
    body.consumer_id
}

/// The broker's CLOSE_CONSUMER for consumer `id`.
pub(crate) fn close_consumer(id: u64) -> BaseCommand {
    BaseCommand {
        r#type: Type::CloseConsumer as i32,
        close_consumer: Some(Box::new(proto::CommandCloseConsumer {
            consumer_id: id,
            ..proto::CommandCloseConsumer::default()
        })),
        ..BaseCommand::default()
    }
}

/// Answers `lookup` with this (the only) broker, authoritatively.
pub(crate) async fn answer_lookup_here(broker: &mut FakeBroker, lookup: &Frame) {
    let here = format!("pulsar://{SERVICE}");
    let answer = answer::lookup(request_id(lookup), LookupType::Connect, &here, true);
    broker.send(answer).await;
}
