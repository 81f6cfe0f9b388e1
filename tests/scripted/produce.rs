//! The producer against a scripted broker: sequence ids continue from the
//! broker's last one, SEND_ERROR reaches its sender as a typed error, an
//! unanswered send times out, the broker's max message size is enforced,
//! and a lost connection fails every send. Paused clock throughout.

use std::time::Duration;

use pulsar_wire::Client;
use pulsar_wire::producer::{LimitExceeded, Producer, ProducerError, ProducerMessage, WhenFull};
use pulsar_wire::proto::base_command::Type;
use pulsar_wire::proto::command_lookup_topic_response::LookupType;
use pulsar_wire::proto::{self, BaseCommand, ServerError};

use crate::common::fake_broker::{FakeBroker, FakeNetwork, answer, request_id};
use crate::common::{guard, init_tracing};

const SERVICE: &str = "svc:6650";

fn producer_success(request: u64, name: &str, last_sequence_id: i64) -> BaseCommand {
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

fn send_error(producer: u64, sequence: u64) -> BaseCommand {
    BaseCommand {
        r#type: Type::SendError as i32,
        send_error: Some(Box::new(proto::CommandSendError {
            producer_id: producer,
            sequence_id: sequence,
            error: ServerError::PersistenceError as i32,
            message: "bookies down".into(),
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
    producer_with(
        max_message_size,
        last_sequence_id,
        64 << 20,
        WhenFull::Block,
    )
    .await
}

/// As [`producer`], with the client's memory limit and the producer's `when_full`.
async fn producer_with(
    max_message_size: Option<i32>,
    last_sequence_id: i64,
    memory_limit: usize,
    when_full: WhenFull,
) -> (Producer, FakeBroker) {
    init_tracing();
    let net = FakeNetwork::new();
    let mut svc = net.listen(SERVICE);
    let create = async {
        let client = Client::builder()
            .service_url(format!("pulsar://{SERVICE}"))
            .connector(net.clone())
            .memory_limit(memory_limit)
            .build()
            .await
            .expect("client");
        client
            .producer("orders")
            .batching(false)
            .when_full(when_full)
            .create()
            .await
    };
    let script = async {
        let mut broker = svc.accept().await;
        broker.handshake_with(max_message_size).await;
        let meta = broker.expect(Type::PartitionedMetadata).await;
        broker.send(answer::partitions(request_id(&meta), 0)).await;
        let lookup = broker.expect(Type::Lookup).await;
        let url = format!("pulsar://{SERVICE}");
        broker
            .send(answer::lookup(
                request_id(&lookup),
                LookupType::Connect,
                &url,
                true,
            ))
            .await;
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
    (producer.expect("producer"), broker)
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
        broker.send(send_error(id, 42)).await;
        broker.send(answer::receipt(id, 43)).await;
        match first.await {
            Err(ProducerError::Send {
                sequence_id: 42,
                code: ServerError::PersistenceError,
                message,
                ..
            }) => assert_eq!(message, "bookies down"),
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
async fn a_lost_connection_fails_every_send_in_flight() {
    guard("lost", async {
        let (producer, mut broker) = producer(None, -1).await;
        let receipts = [
            producer.send("x").await.expect("queued"),
            producer.send("y").await.expect("queued"),
        ];
        broker.expect(Type::Send).await;
        broker.expect(Type::Send).await;
        drop(broker);
        for receipt in receipts {
            assert!(matches!(
                receipt.await,
                Err(ProducerError::ConnectionLost(_))
            ));
        }
        let late = producer.send("z").await.expect("queued");
        assert!(matches!(late.await, Err(ProducerError::ConnectionLost(_))));
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn the_client_memory_limit_fails_at_once_when_set_to_fail() {
    guard("memory", async {
        let (producer, mut broker) = producer_with(None, -1, 100, WhenFull::Fail).await;
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
async fn a_receipt_out_of_step_stops_the_producer_and_fails_its_sends() {
    guard("out of order", async {
        let (producer, mut broker) = producer(None, 9).await;
        let first = producer.send("a").await.expect("queued");
        let second = producer.send("b").await.expect("queued");
        let (id, _) = send_of(&broker.expect(Type::Send).await);
        broker.expect(Type::Send).await;
        // A stale receipt (before anything in flight) is ignored...
        broker.send(answer::receipt(id, 3)).await;
        // ...one for the second send while the first is oldest is not.
        broker.send(answer::receipt(id, 11)).await;
        for receipt in [first, second] {
            assert!(matches!(
                receipt.await,
                Err(ProducerError::OutOfOrderReceipt {
                    expected: 10,
                    got: 11
                })
            ));
        }
    })
    .await;
}
