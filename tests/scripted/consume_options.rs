//! Consumer options against the scripted broker (paused clock), frame by
//! frame: a zero receiver queue grants one permit per receive; the
//! client's memory limit holds FLOWs back while the receiver queue is
//! full of big messages; partitions share a total receiver queue; a batch
//! receive starts ack timeouts when it returns and acks in one frame.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::BytesMut;
use pulsar_wire::consumer::{BatchReceivePolicy, Outcome};
use pulsar_wire::proto::SingleMessageMetadata;
use pulsar_wire::wire::batch;

use super::reconnect::answer_lookup_here;
use super::*;
use crate::common::fake_broker::FakeListener;

/// Subscribes in a task of its own, with a client whose memory limit is
/// `memory_limit` (the default if `None`) and the builder set up by `setup`.
fn subscribing(
    net: &FakeNetwork,
    memory_limit: Option<usize>,
    setup: impl FnOnce(ConsumerBuilder) -> ConsumerBuilder + Send + 'static,
) -> tokio::task::JoinHandle<Result<Consumer, ConsumerError>> {
    init_tracing();
    let net = net.clone();
    tokio::spawn(async move {
        let mut client = Client::builder()
            .service_url(format!("pulsar://{SERVICE}"))
            .connector(net);
        if let Some(limit) = memory_limit {
            client = client.memory_limit(limit);
        }
        let client = client.build().await.expect("client");
        setup(client.consumer(TOPIC, "sub")).subscribe().await
    })
}

/// A Shared consumer of the non-partitioned `TOPIC` with receiver queue
/// `queue` (and the client's `memory_limit`), attached: the broker's side,
/// its consumer id, and the consumer.
async fn shared_consumer(
    net: &FakeNetwork,
    svc: &mut FakeListener,
    memory_limit: Option<usize>,
    queue: u32,
) -> (FakeBroker, u64, Consumer) {
    let subscribing = subscribing(net, memory_limit, move |b| {
        b.subscription_type(SubscriptionType::Shared)
            .receiver_queue_size(queue)
    });
    let mut broker = svc.accept().await;
    broker.handshake().await;
    metadata(&mut broker, 0).await;
    let (id, _) = attach_any(&mut broker).await;
    let consumer = subscribing.await.expect("task").expect("subscribe");
    (broker, id, consumer)
}

/// Answers PARTITIONED_METADATA with `partitions`.
async fn metadata(broker: &mut FakeBroker, partitions: u32) {
    let meta = broker.expect(Type::PartitionedMetadata).await;
    broker
        .send(answer::partitions(request_id(&meta), partitions))
        .await;
}

/// Answers LOOKUP here and the SUBSCRIBE with success; returns the
/// consumer id and the topic subscribed.
async fn attach_any(broker: &mut FakeBroker) -> (u64, String) {
    let lookup = broker.expect(Type::Lookup).await;
    answer_lookup_here(broker, &lookup).await;
    let subscribe = broker.expect(Type::Subscribe).await;
    let body = subscribe.command.subscribe.as_ref().expect("body");
    broker.send(answer::success(body.request_id)).await;
    (body.consumer_id, body.topic.clone())
}

/// The next FLOW: its consumer id and permits.
async fn expect_flow(broker: &mut FakeBroker) -> (u64, u32) {
    let flow = broker.expect(Type::Flow).await;
    let body = flow.command.flow.as_ref().expect("body");
    (body.consumer_id, body.message_permits)
}

/// The next frame of type `kind`: the entries it names.
async fn entries(broker: &mut FakeBroker, kind: Type) -> Vec<u64> {
    let frame = broker.expect(kind).await;
    let ids = match kind {
        Type::Ack => &frame.command.ack.as_ref().expect("body").message_id,
        _ => {
            &frame
                .command
                .redeliver_unacknowledged_messages
                .as_ref()
                .expect("body")
                .message_ids
        }
    };
    ids.iter().map(|m| m.entry_id).collect()
}

/// A MESSAGE of `size` payload bytes.
fn sized_message(consumer: u64, entry: u64, size: usize) -> Frame {
    let mut frame = message(consumer, entry, "", Checksum::Valid);
    if let Some(payload) = &mut frame.payload {
        payload.data = Bytes::from(vec![1_u8; size]);
    }
    frame
}

/// A MESSAGE holding a batch of two members.
fn batch_message(consumer: u64, entry: u64) -> Frame {
    sized_batch(consumer, entry, &[b"b0", b"b1"])
}

/// A MESSAGE holding a batch of `members`.
fn sized_batch(consumer: u64, entry: u64, members: &[&[u8]]) -> Frame {
    let mut data = BytesMut::new();
    for member in members {
        let meta = SingleMessageMetadata {
            payload_size: member.len() as i32,
            ..SingleMessageMetadata::default()
        };
        batch::write_member(&meta, member, &mut data);
    }
    let mut frame = message(consumer, entry, "", Checksum::Valid);
    if let Some(payload) = &mut frame.payload {
        payload.metadata.num_messages_in_batch = Some(members.len() as i32);
        payload.data = data.freeze();
    }
    frame
}

#[tokio::test(start_paused = true)]
async fn a_zero_queue_grants_one_permit_per_receive_and_refuses_a_batch() {
    let net = FakeNetwork::new();
    let mut svc = net.listen(SERVICE);
    guard("zero queue", async {
        let (mut broker, id, mut consumer) = shared_consumer(&net, &mut svc, None, 0).await;

        // Nothing granted ahead: the first FLOW is the first receive's.
        let receiving = tokio::spawn(async move {
            let m = consumer.receive().await;
            (consumer, m)
        });
        assert_eq!(expect_flow(&mut broker).await, (id, 1));
        broker
            .send_frame(message(id, 1, "one", Checksum::Valid))
            .await;
        let (mut consumer, m) = receiving.await.expect("task");
        let m = m.expect("receive");
        assert_eq!(m.payload(), &Bytes::from_static(b"one"));
        // Taking it asks for nothing more: the next frame is the ACK.
        consumer.ack(&m).await.expect("ack");
        assert_eq!(entries(&mut broker, Type::Ack).await, [1]);

        let receiving = tokio::spawn(async move {
            let m = consumer.receive().await;
            (consumer, m)
        });
        assert_eq!(expect_flow(&mut broker).await, (id, 1));
        broker.send_frame(batch_message(id, 2)).await;
        // The consumer closes itself; the batch is not acked.
        let close = broker.expect(Type::CloseConsumer).await;
        let body = close.command.close_consumer.as_ref().expect("body");
        assert_eq!(body.consumer_id, id);
        broker.send(answer::success(body.request_id)).await;
        let (mut consumer, result) = receiving.await.expect("task");
        for result in [result, consumer.receive().await] {
            match result {
                Err(ConsumerError::BatchOnZeroQueue { id: batch, .. }) => {
                    assert_eq!(batch.entry_id, 2);
                }
                other => panic!("expected BatchOnZeroQueue, got {other:?}"),
            }
        }
        assert!(matches!(
            consumer.receive_batch().await,
            Err(ConsumerError::BatchReceiveOnZeroQueue)
        ));
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn run_on_a_zero_queue_asks_for_the_next_message_once_the_handler_is_done() {
    let net = FakeNetwork::new();
    let mut svc = net.listen(SERVICE);
    guard("zero queue run", async {
        let (mut broker, id, consumer) = shared_consumer(&net, &mut svc, None, 0).await;
        let probe = consumer.clone();
        // The handler hands each message to the test and finishes when told.
        let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel();
        let running = tokio::spawn(async move {
            consumer
                .run(
                    move |m| {
                        let (done_tx, done) = tokio::sync::oneshot::channel::<()>();
                        let _ = started_tx.send((m, done_tx));
                        async move {
                            let _ = done.await;
                            Ok::<_, ConsumerError>(Outcome::Leave)
                        }
                    },
                    Default::default(),
                )
                .await
        });
        for entry in 1..=3 {
            assert_eq!(expect_flow(&mut broker).await, (id, 1));
            broker
                .send_frame(message(id, entry, "m", Checksum::Valid))
                .await;
            let (m, done) = started.recv().await.expect("handler called");
            // While the handler runs, nothing more is asked for: the next
            // frame is this ACK, not a FLOW.
            probe.ack(&m).await.expect("ack");
            assert_eq!(entries(&mut broker, Type::Ack).await, [entry]);
            done.send(()).expect("handler waiting");
        }
        running.abort();
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn flows_wait_while_big_messages_fill_the_memory_limit() {
    let net = FakeNetwork::new();
    let mut svc = net.listen(SERVICE);
    guard("memory limit", async {
        let (mut broker, id, mut consumer) =
            shared_consumer(&net, &mut svc, Some(200_000), 4).await;
        assert_eq!(expect_flow(&mut broker).await, (id, 4));
        // A small message, then three of 60 kB in one entry: they are
        // queued together, 180 kB against the receiver queues' 100 kB of a
        // limit of 200 kB.
        broker.send_frame(sized_message(id, 1, 10)).await;
        let big = vec![1_u8; 60_000];
        broker
            .send_frame(sized_batch(id, 2, &[&big, &big, &big]))
            .await;
        let small = consumer.receive().await.expect("receive");
        let mut members = vec![consumer.receive().await.expect("receive")];
        // Half the queue taken: a FLOW is due, but 120 kB still queued
        // keep the limit reached, so it waits. The next frame is the ACK.
        consumer.ack(&small).await.expect("ack");
        assert_eq!(entries(&mut broker, Type::Ack).await, [1]);
        // Down to 60 kB: the FLOW goes out.
        members.push(consumer.receive().await.expect("receive"));
        assert_eq!(expect_flow(&mut broker).await, (id, 2));
        // Below the limit, refills go out as usual.
        members.push(consumer.receive().await.expect("receive"));
        broker.send_frame(sized_message(id, 3, 10)).await;
        let last = consumer.receive().await.expect("receive");
        assert_eq!(expect_flow(&mut broker).await, (id, 2));
        let taken: Vec<_> = members.iter().chain([&last]).map(|m| m.id()).collect();
        let entry = MessageId::new(1, 2);
        assert_eq!(
            taken,
            [
                entry.with_batch_index(0),
                entry.with_batch_index(1),
                entry.with_batch_index(2),
                MessageId::new(1, 3)
            ],
            "nothing lost on the way"
        );
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn partitions_share_the_total_receiver_queue() {
    let net = FakeNetwork::new();
    let mut svc = net.listen(SERVICE);
    guard("total queue", async {
        let subscribing = subscribing(&net, None, |b| {
            b.max_total_receiver_queue_size_across_partitions(10)
        });
        let mut broker = svc.accept().await;
        broker.handshake().await;
        metadata(&mut broker, 4).await;
        for partition in 0..4 {
            let (id, topic) = attach_any(&mut broker).await;
            assert_eq!(topic, format!("{TOPIC}-partition-{partition}"));
            assert_eq!(expect_flow(&mut broker).await, (id, 2), "10 / 4 each");
        }
        subscribing.await.expect("task").expect("subscribe");
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_zero_queue_on_a_partitioned_topic_is_refused_as_java_does() {
    let net = FakeNetwork::new();
    let mut svc = net.listen(SERVICE);
    guard("zero queue partitioned", async {
        let subscribing = subscribing(&net, None, |b| b.receiver_queue_size(0));
        let mut broker = svc.accept().await;
        broker.handshake().await;
        metadata(&mut broker, 2).await;
        let result = subscribing.await.expect("task");
        assert!(
            matches!(
                result,
                Err(ConsumerError::ZeroQueueNeedsOneTopic { topics: 2 })
            ),
            "{result:?}"
        );
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_batch_receive_starts_ack_timeouts_when_it_returns_and_acks_in_one_frame() {
    let net = FakeNetwork::new();
    guard("batch receive", async {
        let (mut consumer, mut broker, id) = subscribed_with(&net, |b| {
            b.subscription_type(SubscriptionType::Shared)
                .ack_timeout(Duration::from_secs(10))
                .batch_receive_policy(BatchReceivePolicy {
                    max_messages: Some(3),
                    max_bytes: None,
                    timeout: None,
                })
        })
        .await;
        for entry in 1..=2 {
            broker
                .send_frame(message(id, entry, "m", Checksum::Valid))
                .await;
        }
        let receiving = tokio::spawn(async move {
            let batch = consumer.receive_batch().await;
            (consumer, batch)
        });
        // Two messages wait in the queue far longer than the ack timeout.
        tokio::time::advance(Duration::from_secs(30)).await;
        broker
            .send_frame(message(id, 3, "m", Checksum::Valid))
            .await;
        let (consumer, batch) = receiving.await.expect("task");
        let batch = batch.expect("batch");
        let taken = tokio::time::Instant::now();
        let ids: Vec<u64> = batch.iter().map(|m| m.id().entry_id).collect();
        assert_eq!(ids, [1, 2, 3]);
        consumer.ack_all(&batch[..2]).await.expect("ack all");
        assert_eq!(entries(&mut broker, Type::Ack).await, [1, 2], "one frame");
        // The third is requested again an ack timeout after the batch
        // returned, not after it arrived.
        assert_eq!(
            entries(&mut broker, Type::RedeliverUnacknowledgedMessages).await,
            [3]
        );
        assert!(
            taken.elapsed() >= Duration::from_secs(10),
            "{:?}",
            taken.elapsed()
        );
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_batch_receive_returns_what_is_queued_at_its_timeout() {
    let net = FakeNetwork::new();
    guard("batch receive timeout", async {
        let (mut consumer, mut broker, id) = subscribed_with(&net, |b| {
            b.batch_receive_policy(BatchReceivePolicy {
                timeout: Some(Duration::from_secs(1)),
                ..BatchReceivePolicy::default()
            })
        })
        .await;
        let empty = consumer.receive_batch().await.expect("batch");
        assert!(empty.is_empty(), "nothing arrived within the timeout");
        broker
            .send_frame(message(id, 1, "m", Checksum::Valid))
            .await;
        let one = consumer.receive_batch().await.expect("batch");
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].id().entry_id, 1);
    })
    .await;
}

// Cancel-safe: a batch answered for a `receive_batch()` dropped before it
// read the answer (under `select!` or a timeout) goes to the next call;
// its messages are held by the consumer and were otherwise never handed out.
#[tokio::test(start_paused = true)]
async fn a_batch_answered_for_a_dropped_batch_receive_goes_to_the_next_one() {
    let net = FakeNetwork::new();
    guard("dropped batch receive", async {
        let (mut consumer, mut broker, id) = subscribed_with(&net, |b| {
            b.batch_receive_policy(BatchReceivePolicy {
                max_messages: Some(2),
                max_bytes: None,
                timeout: Some(Duration::from_secs(1)),
            })
        })
        .await;
        for entry in [1, 2] {
            broker
                .send_frame(message(id, entry, "m", Checksum::Valid))
                .await;
        }
        {
            let mut dropped = Box::pin(consumer.receive_batch());
            assert!(futures::poll!(&mut dropped).is_pending(), "asked the task");
            // Every task runs until idle: the task answers the full batch.
            crate::common::until_idle().await;
        }
        let batch = consumer.receive_batch().await.expect("batch");
        let entries: Vec<u64> = batch.iter().map(|m| m.id().entry_id).collect();
        assert_eq!(entries, [1, 2]);
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn ack_all_with_batch_index_ack_sends_one_frame_with_each_entrys_ack_set() {
    let net = FakeNetwork::new();
    guard("ack all batch index", async {
        let (mut consumer, mut broker, id) = subscribed_with(&net, |b| {
            b.subscription_type(SubscriptionType::Shared)
                .batch_index_ack(true)
                .batch_receive_policy(BatchReceivePolicy {
                    max_messages: Some(4),
                    max_bytes: None,
                    timeout: None,
                })
        })
        .await;
        broker.send_frame(batch_message(id, 1)).await;
        broker.send_frame(batch_message(id, 2)).await;
        let batch = consumer.receive_batch().await.expect("batch");
        let ids: Vec<(u64, i32)> = batch
            .iter()
            .map(|m| (m.id().entry_id, m.id().batch_index))
            .collect();
        assert_eq!(ids, [(1, 0), (1, 1), (2, 0), (2, 1)]);
        // Member 0 of entry 1, and all of entry 2.
        let acked = [batch[0].clone(), batch[2].clone(), batch[3].clone()];
        consumer.ack_all(&acked).await.expect("ack all");
        let frame = broker.expect(Type::Ack).await;
        let body = frame.command.ack.as_ref().expect("body");
        let sent: Vec<(u64, Vec<i64>)> = body
            .message_id
            .iter()
            .map(|m| (m.entry_id, m.ack_set.clone()))
            .collect();
        assert_eq!(
            sent,
            [(1, vec![0b10]), (2, vec![])],
            "member 1 of entry 1 left unacked; entry 2 whole"
        );
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_receive_loop_over_a_full_queue_lets_other_tasks_run() {
    let net = FakeNetwork::new();
    let mut svc = net.listen(SERVICE);
    guard("receive loop yields", async {
        let (mut broker, id, mut consumer) = shared_consumer(&net, &mut svc, None, 1000).await;
        assert_eq!(expect_flow(&mut broker).await, (id, 1000));
        // One entry of 500 members: queued at once, taken without waiting.
        let members: Vec<&[u8]> = vec![b"m"; 500];
        broker.send_frame(sized_batch(id, 1, &members)).await;
        consumer.receive().await.expect("the first member");
        // On this one-thread runtime the task below runs only if the loop
        // gives the thread up.
        let ran = Arc::new(AtomicBool::new(false));
        let flag = ran.clone();
        let _other = tokio::spawn(async move { flag.store(true, Ordering::SeqCst) });
        for _ in 1..500 {
            consumer.receive().await.expect("a queued member");
        }
        assert!(
            ran.load(Ordering::SeqCst),
            "499 receives from the queue never yielded"
        );
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_flow_held_back_for_memory_never_goes_out_under_a_lost_consumer_id() {
    let net = FakeNetwork::new();
    let mut svc = net.listen(SERVICE);
    guard("withheld flow across a reconnect", async {
        let (mut broker, id, mut consumer) =
            shared_consumer(&net, &mut svc, Some(200_000), 4).await;
        assert_eq!(expect_flow(&mut broker).await, (id, 4));
        let big = vec![1_u8; 60_000];
        broker
            .send_frame(sized_batch(id, 2, &[&big, &big, &big, &big]))
            .await;
        // Half the queue taken, 120 kB still queued past the queues' 100 kB
        // share: the FLOW due waits.
        for _ in 0..2 {
            consumer.receive().await.expect("receive");
        }
        // The subscription is lost; its queue is dropped, which frees the
        // memory, while the new SUBSCRIBE waits for its LOOKUP's answer.
        broker.send(super::reconnect::close_consumer(id)).await;
        let lookup = broker.expect(Type::Lookup).await;
        let quiet = tokio::time::timeout(Duration::from_secs(5), broker.recv()).await;
        assert!(
            quiet.is_err(),
            "nothing may go out under the lost consumer id: {quiet:?}"
        );
        super::reconnect::answer_lookup_here(&mut broker, &lookup).await;
        let subscribe = broker.expect(Type::Subscribe).await;
        let body = subscribe.command.subscribe.as_ref().expect("body");
        broker.send(answer::success(body.request_id)).await;
        assert_eq!(expect_flow(&mut broker).await, (body.consumer_id, 4));
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_nack_with_a_delay_asks_for_the_message_again_once_the_delay_passed() {
    const DELAY: Duration = Duration::from_secs(5);
    let net = FakeNetwork::new();
    guard("a delayed nack", async {
        let (mut consumer, mut broker, id) = subscribed_with(&net, |b| {
            b.subscription_type(SubscriptionType::Shared)
                .nack_policy(pulsar_wire::consumer::NackPolicy::FixedDelay(DELAY))
        })
        .await;
        broker
            .send_frame(message(id, 1, "m", Checksum::Valid))
            .await;
        let msg = consumer.receive().await.expect("receive");
        let nacked = tokio::time::Instant::now();
        consumer.nack(&msg).expect("nack");
        // Nothing else happens: the consumer's own timer must send it.
        let redeliver = broker.expect(Type::RedeliverUnacknowledgedMessages).await;
        assert!(nacked.elapsed() >= DELAY, "asked again before the delay");
        assert_eq!(super::redelivered_entries(redeliver), [1]);
    })
    .await;
}
