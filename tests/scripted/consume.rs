//! The consumer against a scripted broker: what no real broker here shows
//! on demand — a MESSAGE whose checksum does not match, the broker closing
//! the consumer, ACTIVE_CONSUMER_CHANGE (pulsar-lite sends none).

use bytes::Bytes;
use std::time::Duration;

use pulsar_wire::consumer::{Consumer, ConsumerBuilder, SubscriptionType};
use pulsar_wire::proto::ServerError;
use pulsar_wire::proto::base_command::Type;
use pulsar_wire::proto::command_ack::ValidationError;
use pulsar_wire::proto::command_lookup_topic_response::LookupType;
use pulsar_wire::proto::{self, BaseCommand};
use pulsar_wire::wire::{Checksum, Frame, Payload};
use pulsar_wire::{Client, ConsumerError, MessageId};

use crate::common::fake_broker::{FakeBroker, FakeNetwork, answer, request_id};
use crate::common::{guard, init_tracing};

pub(super) const SERVICE: &str = "svc:6650";
pub(super) const TOPIC: &str = "persistent://public/default/scripted";

/// A consumer of `TOPIC`, subscribed through the scripted broker; returns
/// it with the broker and the consumer id it subscribed with.
pub(super) async fn subscribed(
    net: &FakeNetwork,
    kind: SubscriptionType,
) -> (Consumer, FakeBroker, u64) {
    subscribed_with(net, |b| b.subscription_type(kind)).await
}

/// As [`subscribed`], with the builder set up by `setup`.
pub(super) async fn subscribed_with(
    net: &FakeNetwork,
    setup: impl FnOnce(ConsumerBuilder) -> ConsumerBuilder,
) -> (Consumer, FakeBroker, u64) {
    init_tracing();
    let mut svc = net.listen(SERVICE);
    let connect = async {
        let client = Client::builder()
            .service_url(format!("pulsar://{SERVICE}"))
            .connector(net.clone())
            .build()
            .await
            .expect("client");
        setup(client.consumer(TOPIC, "sub"))
            .subscribe()
            .await
            .expect("subscribe")
    };
    let script = async {
        let mut broker = svc.accept().await;
        broker.handshake().await;
        let meta = broker.expect(Type::PartitionedMetadata).await;
        broker.send(answer::partitions(request_id(&meta), 0)).await;
        let id = attach(&mut broker).await;
        (broker, id)
    };
    let (consumer, (broker, id)) = tokio::join!(connect, script);
    (consumer, broker, id)
}

/// Answers LOOKUP and SUBSCRIBE, expects the first FLOW; returns the consumer id.
pub(super) async fn attach(broker: &mut FakeBroker) -> u64 {
    let lookup = broker.expect(Type::Lookup).await;
    let here = format!("pulsar://{SERVICE}");
    broker
        .send(answer::lookup(
            request_id(&lookup),
            LookupType::Connect,
            &here,
            true,
        ))
        .await;
    let subscribe = broker.expect(Type::Subscribe).await;
    let body = subscribe.command.subscribe.as_ref().expect("body");
    let id = body.consumer_id;
    broker.send(answer::success(body.request_id)).await;
    let flow = broker.expect(Type::Flow).await;
    assert_eq!(
        flow.command.flow.as_ref().map(|f| f.message_permits),
        Some(1000)
    );
    id
}

pub(super) fn message(consumer: u64, entry: u64, text: &'static str, checksum: Checksum) -> Frame {
    Frame {
        command: BaseCommand {
            r#type: Type::Message as i32,
            message: Some(Box::new(proto::CommandMessage {
                consumer_id: consumer,
                message_id: MessageId::new(1, entry).to_proto(),
                ..proto::CommandMessage::default()
            })),
            ..BaseCommand::default()
        },
        payload: Some(Payload {
            broker_entry_metadata: None,
            checksum,
            metadata: proto::MessageMetadata {
                producer_name: "p".into(),
                sequence_id: entry,
                publish_time: 1,
                ..proto::MessageMetadata::default()
            },
            data: Bytes::from_static(text.as_bytes()),
        }),
    }
}

#[tokio::test(start_paused = true)]
async fn a_checksum_mismatch_is_reported_never_delivered_and_the_connection_stays() {
    let net = FakeNetwork::new();
    guard("checksum mismatch", async {
        let (mut consumer, mut broker, id) = subscribed(&net, SubscriptionType::Shared).await;
        let corrupt = Checksum::Mismatch {
            carried: 0xdead_beef,
            computed: 0,
        };
        broker.send_frame(message(id, 1, "corrupt", corrupt)).await;
        broker
            .send_frame(message(id, 2, "good", Checksum::Valid))
            .await;

        let ack = broker.expect(Type::Ack).await;
        let body = ack.command.ack.as_ref().expect("body");
        assert_eq!(
            body.validation_error,
            Some(ValidationError::ChecksumMismatch as i32)
        );
        assert_eq!(body.message_id[0].entry_id, 1);
        let flow = broker.expect(Type::Flow).await;
        assert_eq!(
            flow.command.flow.as_ref().map(|f| f.message_permits),
            Some(1),
            "the dropped message's permit goes back"
        );

        let m = consumer.receive().await.expect("the good one");
        assert_eq!(m.payload(), &Bytes::from_static(b"good"));
        consumer.ack(&m).await.expect("ack");
        let ack = broker.expect(Type::Ack).await;
        let body = ack.command.ack.as_ref().expect("body");
        assert_eq!(body.validation_error, None);
        assert_eq!(body.message_id[0].entry_id, 2);
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_closed_consumer_subscribes_again_with_a_fresh_id() {
    let net = FakeNetwork::new();
    guard("resubscribe", async {
        let (mut consumer, mut broker, id) = subscribed(&net, SubscriptionType::Shared).await;
        broker
            .send(BaseCommand {
                r#type: Type::CloseConsumer as i32,
                close_consumer: Some(Box::new(proto::CommandCloseConsumer {
                    consumer_id: id,
                    request_id: 0,
                    ..proto::CommandCloseConsumer::default()
                })),
                ..BaseCommand::default()
            })
            .await;
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

fn active_change(consumer: u64, is_active: bool) -> BaseCommand {
    BaseCommand {
        r#type: Type::ActiveConsumerChange as i32,
        active_consumer_change: Some(Box::new(proto::CommandActiveConsumerChange {
            consumer_id: consumer,
            is_active: Some(is_active),
        })),
        ..BaseCommand::default()
    }
}

#[tokio::test(start_paused = true)]
async fn failover_activity_is_surfaced() {
    let net = FakeNetwork::new();
    guard("active consumer change", async {
        let (mut consumer, mut broker, id) = subscribed(&net, SubscriptionType::Failover).await;
        assert_eq!(consumer.is_active(), None, "not told yet");
        broker.send(active_change(id, false)).await;
        assert!(!consumer.active_changed().await.expect("told"));
        assert_eq!(consumer.is_active(), Some(false));
        broker.send(active_change(id, true)).await;
        assert!(consumer.active_changed().await.expect("told"));
        assert_eq!(consumer.is_active(), Some(true));
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn grouped_acks_leave_in_one_frame() {
    let net = FakeNetwork::new();
    guard("grouped acks", async {
        let (mut consumer, mut broker, id) = subscribed_with(&net, |b| {
            b.subscription_type(SubscriptionType::Shared)
                .ack_group_time(Duration::from_millis(100))
        })
        .await;
        for entry in 1..=3 {
            broker
                .send_frame(message(id, entry, "m", Checksum::Valid))
                .await;
        }
        for _ in 0..3 {
            let m = consumer.receive().await.expect("receive");
            consumer.ack(&m).await.expect("ack");
        }
        // The only frame: one ACK naming all three (no FLOW: less than half
        // of the queue was taken).
        let ack = broker.expect(Type::Ack).await;
        let entries: Vec<u64> = ack
            .command
            .ack
            .as_ref()
            .expect("body")
            .message_id
            .iter()
            .map(|m| m.entry_id)
            .collect();
        assert_eq!(entries, [1, 2, 3]);
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
        broker
            .send(BaseCommand {
                r#type: Type::CloseConsumer as i32,
                close_consumer: Some(Box::new(proto::CommandCloseConsumer {
                    consumer_id: id,
                    ..proto::CommandCloseConsumer::default()
                })),
                ..BaseCommand::default()
            })
            .await;
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
        broker
            .send(BaseCommand {
                r#type: Type::CloseConsumer as i32,
                close_consumer: Some(Box::new(proto::CommandCloseConsumer {
                    consumer_id: id,
                    ..proto::CommandCloseConsumer::default()
                })),
                ..BaseCommand::default()
            })
            .await;
        let lookup = broker.expect(Type::Lookup).await;
        let here = format!("pulsar://{SERVICE}");
        broker
            .send(answer::lookup(
                request_id(&lookup),
                LookupType::Connect,
                &here,
                true,
            ))
            .await;
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
