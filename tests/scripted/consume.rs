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

const SERVICE: &str = "svc:6650";
const TOPIC: &str = "persistent://public/default/scripted";

/// A consumer of `TOPIC`, subscribed through the scripted broker; returns
/// it with the broker and the consumer id it subscribed with.
async fn subscribed(net: &FakeNetwork, kind: SubscriptionType) -> (Consumer, FakeBroker, u64) {
    subscribed_with(net, |b| b.subscription_type(kind)).await
}

/// As [`subscribed`], with the builder set up by `setup`.
async fn subscribed_with(
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
async fn attach(broker: &mut FakeBroker) -> u64 {
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

fn message(consumer: u64, entry: u64, text: &'static str, checksum: Checksum) -> Frame {
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
        // Every attempt to subscribe again is refused at the lookup.
        for _ in 0..10 {
            let lookup = broker.expect(Type::Lookup).await;
            let refused = answer::error(request_id(&lookup), ServerError::TopicNotFound, "gone");
            broker.send(refused).await;
        }
        let (mut consumer, result) = waiting.await.expect("task");
        assert!(
            matches!(result, Err(ConsumerError::Lost { attempts: 10, .. })),
            "{result:?}"
        );
        assert!(matches!(
            consumer.try_receive().await,
            Err(ConsumerError::Lost { .. })
        ));
    })
    .await;
}

/// A MESSAGE for `consumer` of entry `(1, entry)` delivered `count` times before.
fn redelivered(consumer: u64, entry: u64, text: &'static str, count: u32) -> Frame {
    let mut frame = message(consumer, entry, text, Checksum::Valid);
    if let Some(m) = frame.command.message.as_mut() {
        m.redelivery_count = Some(count);
    }
    frame
}

/// A dead-letter forward acks the original only after the copy's receipt:
/// a failed publish redelivers it (no ack, after a 100 ms backoff), the next delivery is forwarded
/// again and acked once the broker confirms. The application never sees it.
#[tokio::test(start_paused = true)]
async fn a_dead_letter_original_is_acked_only_after_the_copy_is_confirmed() {
    use pulsar_wire::consumer::DeadLetterPolicy;
    use pulsar_wire::consumer::dead_letter::{ORIGIN_MESSAGE_ID, REAL_TOPIC};

    guard("dead letter receipt", async {
        let net = FakeNetwork::default();
        let (mut consumer, mut broker, id) = subscribed_with(&net, |b| {
            b.subscription_type(SubscriptionType::Shared)
                .dead_letter_policy(DeadLetterPolicy::after_redeliveries(2))
        })
        .await;
        broker.send_frame(redelivered(id, 5, "poison", 2)).await;

        // The dead-letter producer is created on first use.
        let meta = broker.expect(Type::PartitionedMetadata).await;
        let dlq = format!("{TOPIC}-sub-DLQ");
        assert_eq!(crate::common::fake_broker::topic_of(&meta), dlq);
        broker.send(answer::partitions(request_id(&meta), 0)).await;
        let lookup = broker.expect(Type::Lookup).await;
        let here = format!("pulsar://{SERVICE}");
        let found = answer::lookup(request_id(&lookup), LookupType::Connect, &here, true);
        broker.send(found).await;
        let create = broker.expect(Type::Producer).await;
        let body = create.command.producer.as_ref().expect("body");
        assert_eq!(body.topic, dlq);
        let producer = body.producer_id;
        broker
            .send(BaseCommand {
                r#type: Type::ProducerSuccess as i32,
                producer_success: Some(Box::new(proto::CommandProducerSuccess {
                    request_id: body.request_id,
                    producer_name: "dlq".into(),
                    last_sequence_id: Some(-1),
                    ..proto::CommandProducerSuccess::default()
                })),
                ..BaseCommand::default()
            })
            .await;

        // First copy: the broker fails it. The original is redelivered, and
        // the frame right after the SEND is that request, not an ACK.
        let send = broker.expect(Type::Send).await;
        let props: Vec<(String, String)> = send
            .payload
            .as_ref()
            .expect("payload")
            .metadata
            .properties
            .iter()
            .map(|kv| (kv.key.clone(), kv.value.clone()))
            .collect();
        assert!(
            props.contains(&(REAL_TOPIC.into(), TOPIC.into())),
            "{props:?}"
        );
        assert!(
            props.contains(&(ORIGIN_MESSAGE_ID.into(), "1:5:-1".into())),
            "{props:?}"
        );
        let sequence = send.command.send.as_ref().expect("send").sequence_id;
        // Paused clock: the backoff before the redelivery is exact.
        let failed_at = tokio::time::Instant::now();
        broker
            .send(BaseCommand {
                r#type: Type::SendError as i32,
                send_error: Some(Box::new(proto::CommandSendError {
                    producer_id: producer,
                    sequence_id: sequence,
                    error: ServerError::PersistenceError as i32,
                    message: "bookies down".into(),
                })),
                ..BaseCommand::default()
            })
            .await;
        let redeliver = broker.expect(Type::RedeliverUnacknowledgedMessages).await;
        let ids = &redeliver
            .command
            .redeliver_unacknowledged_messages
            .as_ref()
            .expect("body")
            .message_ids;
        assert_eq!(ids, &[MessageId::new(1, 5).to_proto()]);
        assert_eq!(
            failed_at.elapsed(),
            Duration::from_millis(100),
            "the first failure backs off 100 ms"
        );

        // Back with count 3: forwarded again; this time the broker confirms
        // and only then the original is acked.
        broker.send_frame(redelivered(id, 5, "poison", 3)).await;
        let send = broker.expect(Type::Send).await;
        let sequence = send.command.send.as_ref().expect("send").sequence_id;
        broker.send(answer::receipt(producer, sequence)).await;
        let ack = broker.expect(Type::Ack).await;
        let body = ack.command.ack.as_ref().expect("body");
        assert_eq!(body.message_id, [MessageId::new(1, 5).to_proto()]);
        assert!(matches!(consumer.try_receive().await, Ok(None)));
    })
    .await;
}

/// A dead-letter publish that hangs does not hold up the consumer: while
/// the broker leaves the DLQ's metadata request unanswered, another
/// message is delivered and its ACK goes out.
#[tokio::test(start_paused = true)]
async fn a_hanging_dead_letter_publish_does_not_stall_the_consumer() {
    use pulsar_wire::consumer::DeadLetterPolicy;

    guard("dead letter off the loop", async {
        let net = FakeNetwork::default();
        let (mut consumer, mut broker, id) = subscribed_with(&net, |b| {
            b.subscription_type(SubscriptionType::Shared)
                .dead_letter_policy(DeadLetterPolicy::after_redeliveries(1))
        })
        .await;
        broker.send_frame(redelivered(id, 5, "poison", 1)).await;
        let meta = broker.expect(Type::PartitionedMetadata).await;
        assert_eq!(
            crate::common::fake_broker::topic_of(&meta),
            format!("{TOPIC}-sub-DLQ")
        );
        // Never answered. Meanwhile:
        broker.send_frame(redelivered(id, 6, "fine", 0)).await;
        let m = consumer.receive().await.expect("receive");
        assert_eq!(m.payload().as_ref(), b"fine");
        consumer.ack(&m).await.expect("ack");
        let ack = broker.expect(Type::Ack).await;
        let body = ack.command.ack.as_ref().expect("body");
        assert_eq!(body.message_id, [MessageId::new(1, 6).to_proto()]);
    })
    .await;
}
