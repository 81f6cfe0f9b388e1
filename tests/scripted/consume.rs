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
use pulsar_wire::{Client, ClientBuilder, ConsumerError, MessageId};

use crate::common::fake_broker::{FakeBroker, FakeNetwork, answer, request_id};
use crate::common::{guard, init_tracing};

#[path = "consume_acks.rs"]
mod acks;
#[path = "consume_edges.rs"]
mod edges;
#[path = "consume_lifecycle.rs"]
mod lifecycle;
#[path = "consume_options.rs"]
mod options;
#[path = "consume_outside_rewind.rs"]
pub(crate) mod outside_rewind;
#[path = "consume_reconnect.rs"]
pub(crate) mod reconnect;
#[path = "consume_rewind.rs"]
mod rewind;
#[path = "consume_run.rs"]
mod run;
#[path = "consume_seek.rs"]
mod seek;

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
    let (_, consumer, broker, id) = subscribed_client(net, setup).await;
    (consumer, broker, id)
}

/// A client of the scripted broker at `SERVICE` (which must be answering).
pub(super) async fn scripted_client(net: &FakeNetwork) -> Client {
    scripted_client_with(net, |b| b).await
}

/// As [`scripted_client`], with the builder set up by `setup`.
pub(super) async fn scripted_client_with(
    net: &FakeNetwork,
    setup: impl FnOnce(ClientBuilder) -> ClientBuilder,
) -> Client {
    let builder = Client::builder()
        .service_url(format!("pulsar://{SERVICE}"))
        .connector(net.clone());
    setup(builder).build().await.expect("client")
}

/// As [`subscribed_with`], also returning the consumer's client.
pub(super) async fn subscribed_client(
    net: &FakeNetwork,
    setup: impl FnOnce(ConsumerBuilder) -> ConsumerBuilder,
) -> (Client, Consumer, FakeBroker, u64) {
    subscribed_through(net, |b| b, setup).await
}

/// As [`subscribed_client`], the client's builder set up by `client`.
pub(super) async fn subscribed_through(
    net: &FakeNetwork,
    client: impl FnOnce(ClientBuilder) -> ClientBuilder,
    setup: impl FnOnce(ConsumerBuilder) -> ConsumerBuilder,
) -> (Client, Consumer, FakeBroker, u64) {
    init_tracing();
    let mut svc = net.listen(SERVICE);
    let connect = async {
        let client = scripted_client_with(net, client).await;
        let consumer = setup(client.consumer(TOPIC, "sub"))
            .subscribe()
            .await
            .expect("subscribe");
        (client, consumer)
    };
    let script = async {
        let mut broker = svc.accept().await;
        broker.handshake().await;
        let meta = broker.expect(Type::PartitionedMetadata).await;
        broker.send(answer::partitions(request_id(&meta), 0)).await;
        let id = attach(&mut broker).await;
        (broker, id)
    };
    let ((client, consumer), (broker, id)) = tokio::join!(connect, script);
    (client, consumer, broker, id)
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
        payload: Some(Box::new(Payload {
            broker_entry_metadata: None,
            checksum,
            metadata: proto::MessageMetadata {
                producer_name: "p".into(),
                sequence_id: entry,
                publish_time: 1,
                ..proto::MessageMetadata::default()
            },
            data: Bytes::from_static(text.as_bytes()),
        })),
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

/// The entries a REDELIVER_UNACKNOWLEDGED_MESSAGES frame names.
pub(super) fn redelivered_entries(frame: Frame) -> Vec<u64> {
    let body = frame
        .command
        .redeliver_unacknowledged_messages
        .expect("a REDELIVER body");
    body.message_ids.iter().map(|i| i.entry_id).collect()
}
