//! The producer against a scripted broker: sequence ids continue from the
//! broker's last one, SEND_ERROR reaches its sender as a typed error, an
//! unanswered send times out, the broker's max message size is enforced.
//! Reconnection: a lost connection, a receipt that skips ahead and
//! CLOSE_PRODUCER re-create the producer (under its name, at the broker
//! named if one is) and resend every unconfirmed message in order with its
//! sequence id; close during a reconnect ends at once; sends made while
//! reconnecting are bounded by the send timeout. Paused clock throughout.

use std::time::Duration;

use pulsar_wire::Client;
use pulsar_wire::producer::{
    LimitExceeded, Producer, ProducerBuilder, ProducerError, ProducerMessage, WhenFull,
};
use pulsar_wire::proto::base_command::Type;
use pulsar_wire::proto::command_lookup_topic_response::LookupType;
use pulsar_wire::proto::{self, BaseCommand, ServerError};

use crate::common::fake_broker::{FakeBroker, FakeListener, FakeNetwork, answer, request_id};
use crate::common::{guard, init_tracing};

#[path = "produce_edges.rs"]
mod edges;
#[path = "produce_reconnect.rs"]
mod reconnect;

#[path = "produce_lifecycle.rs"]
mod lifecycle;

const SERVICE: &str = "svc:6650";

pub(super) fn producer_success(request: u64, name: &str, last_sequence_id: i64) -> BaseCommand {
    BaseCommand {
        r#type: Type::ProducerSuccess as i32,
        producer_success: Some(Box::new(proto::CommandProducerSuccess {
            request_id: request,
            producer_name: name.into(),
            last_sequence_id: Some(last_sequence_id),
            ..proto::CommandProducerSuccess::default()
        })),
        ..BaseCommand::default()
    }
}

pub(super) fn send_error(
    producer: u64,
    sequence: u64,
    code: ServerError,
    message: &str,
) -> BaseCommand {
    BaseCommand {
        r#type: Type::SendError as i32,
        send_error: Some(Box::new(proto::CommandSendError {
            producer_id: producer,
            sequence_id: sequence,
            error: code as i32,
            message: message.into(),
        })),
        ..BaseCommand::default()
    }
}

/// A producer (batching off, send timeout 30 s) on a one-broker fake
/// cluster whose CONNECTED says `max_message_size`; returns the broker's end.
pub(super) async fn producer(
    max_message_size: Option<i32>,
    last_sequence_id: i64,
) -> (Producer, FakeBroker) {
    let (producer, broker, _) = producer_with(
        max_message_size,
        last_sequence_id,
        64 << 20,
        WhenFull::Block,
    )
    .await;
    // The listener is dropped: reconnect attempts are refused.
    (producer, broker)
}

/// As [`producer`], with the client's memory limit and the producer's `when_full`.
async fn producer_with(
    max_message_size: Option<i32>,
    last_sequence_id: i64,
    memory_limit: usize,
    when_full: WhenFull,
) -> (Producer, FakeBroker, FakeListener) {
    let net = FakeNetwork::new();
    producer_on(
        &net,
        max_message_size,
        last_sequence_id,
        memory_limit,
        when_full,
    )
    .await
}

/// As [`producer_with`], on the made-up network `net`.
async fn producer_on(
    net: &FakeNetwork,
    max_message_size: Option<i32>,
    last_sequence_id: i64,
    memory_limit: usize,
    when_full: WhenFull,
) -> (Producer, FakeBroker, FakeListener) {
    let setup = |b: ProducerBuilder| b.batching(false).when_full(when_full);
    producer_built(net, max_message_size, last_sequence_id, memory_limit, setup).await
}

/// A producer of `orders` set up by `setup`, created through the scripted
/// broker on `net`, which names it `p-1`.
pub(super) async fn producer_built(
    net: &FakeNetwork,
    max_message_size: Option<i32>,
    last_sequence_id: i64,
    memory_limit: usize,
    setup: impl FnOnce(ProducerBuilder) -> ProducerBuilder,
) -> (Producer, FakeBroker, FakeListener) {
    init_tracing();
    let mut svc = net.listen(SERVICE);
    let create = async {
        let client = Client::builder()
            .service_url(format!("pulsar://{SERVICE}"))
            .connector(net.clone())
            .memory_limit(memory_limit)
            .build()
            .await
            .expect("client");
        setup(client.producer("orders")).create().await
    };
    let script = async {
        let mut broker = svc.accept().await;
        broker.handshake_with(max_message_size).await;
        let meta = broker.expect(Type::PartitionedMetadata).await;
        broker.send(answer::partitions(request_id(&meta), 0)).await;
        answer_lookup(&mut broker).await;
        let create = broker.expect(Type::Producer).await;
        broker
            .send(producer_success(
                request_id(&create),
                "p-1",
                last_sequence_id,
            ))
            .await;
        broker
    };
    let (producer, broker) = tokio::join!(create, script);
    (producer.expect("producer"), broker, svc)
}

/// Answers one LOOKUP with "here, at the service address".
pub(super) async fn answer_lookup(broker: &mut FakeBroker) {
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
}

pub(super) fn send_of(frame: &pulsar_wire::wire::Frame) -> (u64, u64) {
    let send = frame.command.send.as_ref().expect("SEND");
    (send.producer_id, send.sequence_id)
}

#[tokio::test(start_paused = true)]
async fn sequence_ids_continue_and_send_errors_reach_their_sender() {
    guard("send error", async {
        let (producer, mut broker) = producer(None, 41).await;
        assert_eq!(producer.name(), "p-1");
        let first = producer.send("a").await.expect("queued");
        let second = producer.send("b").await.expect("queued");
        let (id, seq) = send_of(&broker.expect(Type::Send).await);
        assert_eq!(seq, 42, "continues from last_sequence_id + 1");
        assert_eq!(send_of(&broker.expect(Type::Send).await).1, 43);
        let refused = send_error(id, 42, ServerError::NotAllowedError, "not allowed");
        broker.send(refused).await;
        broker.send(answer::receipt(id, 43)).await;
        match first.await {
            Err(ProducerError::Send {
                sequence_id: 42,
                code: ServerError::NotAllowedError,
                message,
                ..
            }) => assert_eq!(message, "not allowed"),
            other => panic!("expected a send error, got {other:?}"),
        }
        assert_eq!(second.await.expect("receipt").entry_id, 43);
        // An explicit sequence id is used as given.
        let third = producer
            .send(ProducerMessage::new("c").sequence_id(100))
            .await
            .expect("queued");
        assert_eq!(send_of(&broker.expect(Type::Send).await).1, 100);
        broker.send(answer::receipt(id, 100)).await;
        third.await.expect("receipt");
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn an_unanswered_send_times_out_and_a_too_large_one_is_never_sent() {
    guard("timeout", async {
        let (producer, mut broker) = producer(Some(1024), -1).await;
        let big = producer.send(vec![0u8; 2048]).await.expect("queued");
        assert!(matches!(
            big.await,
            Err(ProducerError::MessageTooLarge {
                size: 2048,
                max: 1024
            })
        ));
        let silent = producer.send("never answered").await.expect("queued");
        let (_, seq) = send_of(&broker.expect(Type::Send).await);
        assert_eq!(
            seq, 0,
            "the refused message took no sequence id on the wire"
        );
        assert!(matches!(
            silent.await,
            Err(ProducerError::Timeout { after }) if after == Duration::from_secs(30)
        ));
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn the_client_memory_limit_fails_at_once_when_set_to_fail() {
    guard("memory", async {
        let (producer, mut broker, _svc) = producer_with(None, -1, 100, WhenFull::Fail).await;
        let first = producer.send(vec![1u8; 80]).await.expect("queued");
        let refused = producer.send(vec![2u8; 80]).await.expect_err("memory full");
        assert!(
            matches!(
                refused,
                ProducerError::Full(LimitExceeded::Memory {
                    used: 80,
                    limit: 100,
                    wanted: 80
                })
            ),
            "{refused}"
        );
        let (id, seq) = send_of(&broker.expect(Type::Send).await);
        broker.send(answer::receipt(id, seq)).await;
        first.await.expect("receipt");
        // The receipt gave the memory back.
        let third = producer.send(vec![3u8; 80]).await.expect("queued");
        let (id, seq) = send_of(&broker.expect(Type::Send).await);
        broker.send(answer::receipt(id, seq)).await;
        third.await.expect("receipt");
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn an_entry_too_large_for_a_frame_fails_alone_and_the_link_stays() {
    guard("too large a frame", async {
        let (producer, mut broker) = producer(Some(1024), -1).await;
        // A small payload with 20 KiB of properties: the SEND frame exceeds
        // what the broker takes although the payload does not.
        let heavy = ProducerMessage::new("tiny").property("blob", "x".repeat(20 * 1024));
        let refused = producer.send(heavy).await.expect("queued");
        let fine = producer.send("fine").await.expect("queued");
        assert!(matches!(
            refused.await,
            Err(ProducerError::MessageTooLarge { .. })
        ));
        let (id, seq) = send_of(&broker.expect(Type::Send).await);
        assert_eq!(seq, 1, "only the second message went out");
        broker.send(answer::receipt(id, 1)).await;
        assert_eq!(fine.await.expect("stored").entry_id, 1);
    })
    .await;
}
