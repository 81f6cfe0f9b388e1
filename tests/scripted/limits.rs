//! Bounds the consumer keeps whatever the broker or the application does:
//! acks that pile up go out in frames of at most 1000 ids; a broker that
//! sends past the permits it was granted loses the connection. Paused clock.

use std::time::Duration;

use pulsar_wire::consumer::{DeadLetterPolicy, SubscriptionType};
use pulsar_wire::proto::base_command::Type;
use pulsar_wire::proto::{self, BaseCommand, ServerError};
use pulsar_wire::wire::Checksum;

use pulsar_wire::wire::Frame;

use super::consume::{message, subscribed, subscribed_with};
use super::hostile::{MIB, peak_heap};
use super::produce::{answer_lookup, producer_success};
use crate::common::fake_broker::{FakeBroker, FakeNetwork, answer, request_id};
use crate::common::guard;

#[tokio::test(start_paused = true)]
async fn acks_grouped_by_the_thousand_go_out_in_frames_of_at_most_1000_ids() {
    const TOTAL: u64 = 2500;
    let net = FakeNetwork::new();
    // Its own hang guard: the common one is shorter than the group time.
    let test = tokio::time::timeout(Duration::from_secs(7200), async {
        // One group for everything: it flushes after an hour of paused time.
        let (mut consumer, mut broker, id) = subscribed_with(&net, |b| {
            b.subscription_type(SubscriptionType::Shared)
                .ack_group_time(Duration::from_secs(3600))
        })
        .await;
        // In waves within the 1000 permits the consumer grants.
        for wave in (0..TOTAL).collect::<Vec<_>>().chunks(1000) {
            for &entry in wave {
                broker
                    .send_frame(message(id, entry, "m", Checksum::Valid))
                    .await;
            }
            for _ in wave {
                let m = consumer.receive().await.expect("message");
                consumer.ack(&m).await.expect("ack");
            }
        }
        let mut frames = Vec::new();
        let mut acked = 0;
        while acked < TOTAL as usize {
            let frame = broker.recv().await.expect("open");
            if frame.command.r#type() == Type::Ack {
                let ids = frame.command.ack.as_ref().expect("ACK").message_id.len();
                frames.push(ids);
                acked += ids;
            }
        }
        assert!(
            frames.iter().all(|&ids| ids <= 1000),
            "ACK frames of {frames:?} ids"
        );
        assert_eq!(acked, TOTAL as usize);
    });
    test.await
        .expect("no outcome within two hours (hang guard)");
}

#[tokio::test(start_paused = true)]
async fn a_broker_that_sends_past_its_permits_loses_the_connection() {
    let net = FakeNetwork::new();
    guard("flood", async {
        // The consumer granted 1000 permits and the application reads nothing.
        let (_consumer, mut broker, id) = subscribed(&net, SubscriptionType::Shared).await;
        for entry in 0..1000 {
            broker
                .send_frame(message(id, entry, "m", Checksum::Valid))
                .await;
        }
        // The 1001st is one nobody asked for: the client hangs up.
        broker
            .send_frame(message(id, 1000, "m", Checksum::Valid))
            .await;
        broker.until_closed().await;
    })
    .await;
}

/// While 100 dead-letter forwards wait for a slow dead-letter topic, the
/// consumer grants no more permits; they go out once the forwards finish.
#[tokio::test(start_paused = true)]
async fn forwards_at_their_bound_hold_back_the_permits() {
    const POISON: u64 = 600;
    let net = FakeNetwork::new();
    guard("forwards bound", async {
        let (_consumer, mut broker, id) = subscribed_with(&net, |b| {
            b.subscription_type(SubscriptionType::Shared)
                .dead_letter_policy(DeadLetterPolicy::after_redeliveries(1))
        })
        .await;
        for entry in 0..POISON {
            broker.send_frame(poison(id, entry, 1)).await;
        }
        // Every copy waits for the dead-letter producer, whose metadata
        // request the broker leaves unanswered for 25 s. 500 permits are
        // due back (the forwarded messages left the queue), but 600
        // forwards are in flight: no FLOW.
        let meta = broker.expect(Type::PartitionedMetadata).await;
        let early = tokio::time::timeout(Duration::from_secs(25), broker.recv()).await;
        assert!(early.is_err(), "sent while 600 forwards wait: {early:?}");
        // The dead-letter topic answers; the copies are stored, the
        // originals acked, and the permits held back go out.
        broker.send(answer::partitions(request_id(&meta), 0)).await;
        let create = created(&mut broker).await;
        let producer = create
            .command
            .producer
            .as_ref()
            .expect("PRODUCER")
            .producer_id;
        loop {
            let frame = broker.recv().await.expect("open");
            match frame.command.r#type() {
                Type::Send => {
                    let sequence = frame.command.send.as_ref().expect("SEND").sequence_id;
                    broker.send(answer::receipt(producer, sequence)).await;
                }
                Type::Flow => break,
                _ => {}
            }
        }
    })
    .await;
}

/// A poison message: delivered `count` times before, past the dead-letter policy.
fn poison(consumer: u64, entry: u64, count: u32) -> Frame {
    let mut frame = message(consumer, entry, "poison", Checksum::Valid);
    if let Some(m) = frame.command.message.as_mut() {
        m.redelivery_count = Some(count);
    }
    frame
}

/// Answers the dead-letter producer's metadata and lookup; returns the
/// request id of its PRODUCER.
async fn dead_letter_producer_asked(broker: &mut FakeBroker) -> u64 {
    let meta = broker.expect(Type::PartitionedMetadata).await;
    broker.send(answer::partitions(request_id(&meta), 0)).await;
    answer_lookup(broker).await;
    let create = broker.expect(Type::Producer).await;
    request_id(&create)
}

/// Answers a lookup and the PRODUCER after it with success; returns the PRODUCER.
async fn created(broker: &mut FakeBroker) -> Frame {
    answer_lookup(broker).await;
    let create = broker.expect(Type::Producer).await;
    broker
        .send(producer_success(request_id(&create), "dlq", -1))
        .await;
    create
}

/// A consumer closes within the operation timeout even while a
/// dead-letter forward cannot finish (its producer waits on the broker).
#[tokio::test(start_paused = true)]
async fn close_does_not_wait_past_the_operation_timeout_for_forwards() {
    let net = FakeNetwork::new();
    guard("close with a forward in flight", async {
        let (consumer, mut broker, id) = subscribed_with(&net, |b| {
            b.subscription_type(SubscriptionType::Shared)
                .dead_letter_policy(DeadLetterPolicy::after_redeliveries(1))
        })
        .await;
        broker.send_frame(poison(id, 1, 1)).await;
        let request = dead_letter_producer_asked(&mut broker).await;
        let mut queued = producer_success(request, "dlq", -1);
        if let Some(body) = queued.producer_success.as_mut() {
            body.producer_ready = Some(false);
        }
        broker.send(queued).await;
        let started = tokio::time::Instant::now();
        let closing = tokio::spawn(async move { consumer.close().await });
        let close = broker.expect(Type::CloseConsumer).await;
        let body = close
            .command
            .close_consumer
            .as_ref()
            .expect("CLOSE_CONSUMER");
        broker.send(answer::success(body.request_id)).await;
        closing.await.expect("task").expect("closed");
        assert!(
            started.elapsed() <= Duration::from_secs(30),
            "closed after {:?}",
            started.elapsed()
        );
    })
    .await;
}

/// A dead-letter producer that failed for good is not reused: the next
/// forward creates a new one.
#[tokio::test(start_paused = true)]
async fn a_dead_letter_producer_that_died_is_replaced() {
    let net = FakeNetwork::new();
    guard("dead producer replaced", async {
        let (_consumer, mut broker, id) = subscribed_with(&net, |b| {
            b.subscription_type(SubscriptionType::Shared)
                .dead_letter_policy(DeadLetterPolicy::after_redeliveries(1))
        })
        .await;
        broker.send_frame(poison(id, 1, 1)).await;
        let request = dead_letter_producer_asked(&mut broker).await;
        broker.send(producer_success(request, "dlq", -1)).await;
        let send = broker.expect(Type::Send).await;
        let producer = send.command.send.as_ref().expect("SEND").producer_id;
        // The broker closes it, and refuses it back for good.
        broker
            .send(BaseCommand {
                r#type: Type::CloseProducer as i32,
                close_producer: Some(Box::new(proto::CommandCloseProducer {
                    producer_id: producer,
                    ..proto::CommandCloseProducer::default()
                })),
                ..BaseCommand::default()
            })
            .await;
        answer_lookup(&mut broker).await;
        let again = broker.expect(Type::Producer).await;
        broker
            .send(answer::error(
                request_id(&again),
                ServerError::TopicTerminatedError,
                "terminated",
            ))
            .await;
        // The copy failed: the dead producer is let go (closed), the
        // original comes back, and is forwarded again through a new producer.
        loop {
            let frame = broker.recv().await.expect("open");
            match frame.command.r#type() {
                Type::CloseProducer => {
                    let body = frame.command.close_producer.as_ref().expect("body");
                    broker.send(answer::success(body.request_id)).await;
                }
                Type::RedeliverUnacknowledgedMessages => break,
                other => panic!("unexpected {other:?}"),
            }
        }
        broker.send_frame(poison(id, 1, 2)).await;
        let request = dead_letter_producer_asked(&mut broker).await;
        broker.send(producer_success(request, "dlq-2", -1)).await;
        broker.expect(Type::Send).await;
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn nacks_and_extensions_in_a_loop_that_never_yields_take_no_memory_per_call() {
    const CALLS: usize = 100_000;
    let net = FakeNetwork::new();
    guard(
        "the same message nacked and extended over and over",
        async {
            let (mut consumer, mut broker, id) = subscribed_with(&net, |b| {
                b.subscription_type(SubscriptionType::Shared)
                    .ack_timeout(Duration::from_secs(30))
            })
            .await;
            broker
                .send_frame(message(id, 1, "held", Checksum::Valid))
                .await;
            let msg = consumer.receive().await.expect("message");
            // Neither call waits, and nothing here yields to the consumer's
            // task: what a call leaves for it must not pile up per call.
            let ((), extended) = peak_heap(async {
                for _ in 0..CALLS {
                    consumer
                        .extend(&msg, Duration::from_secs(60))
                        .expect("extend");
                }
            })
            .await;
            let ((), nacked) = peak_heap(async {
                for _ in 0..CALLS {
                    consumer.nack(&msg).expect("nack");
                }
            })
            .await;
            assert!(
                extended < MIB,
                "{extended} bytes held by {CALLS} extensions"
            );
            assert!(nacked < MIB, "{nacked} bytes held by {CALLS} nacks");
            // The first nack still asks for the message again, once.
            let redeliver = loop {
                let frame = broker.recv().await.expect("open");
                if frame.command.r#type() == Type::RedeliverUnacknowledgedMessages {
                    break frame;
                }
            };
            assert_eq!(super::consume::redelivered_entries(redeliver), [1]);
        },
    )
    .await;
}
