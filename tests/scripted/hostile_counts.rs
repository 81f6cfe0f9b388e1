//! Hostile counts (paused clock): a batch whose members are empty, so one
//! entry would become a million messages, and the batches a consumer
//! must still take whole; empty messages counted against the memory limit;
//! chunks that lie about the size or the chunks of their message, and a
//! message over the bound on the bytes being assembled. Each hostile entry
//! is reported or given up with the heap bounded (measured with the probe
//! in `hostile.rs`), and the connection stays up; the permits it gives
//! back lift no flow control.

use bytes::{Bytes, BytesMut};
use pulsar_wire::consumer::{Consumer, ConsumerBuilder, MAX_BATCH_MEMBERS, SubscriptionType};
use pulsar_wire::proto::base_command::Type;
use pulsar_wire::proto::command_ack::ValidationError;
use pulsar_wire::proto::{self, SingleMessageMetadata};
use pulsar_wire::wire::{Checksum, Frame, batch};
use pulsar_wire::{ClientBuilder, ConsumerError, MessageId};

use super::consume::{TOPIC, message, subscribed, subscribed_client, subscribed_through};
use super::hostile::{MIB, peak_heap};
use super::hostile_entries::{entry, meta};
use crate::common::fake_broker::{FakeBroker, FakeNetwork};
use crate::common::guard;

/// The permits of the next frame, which must be a FLOW.
async fn flow(broker: &mut FakeBroker) -> u32 {
    let frame = broker.expect(Type::Flow).await;
    frame.command.flow.expect("body").message_permits
}

/// A message after the hostile input still arrives: the connection stayed.
async fn still_connected(consumer: &mut Consumer, broker: &mut FakeBroker, id: u64) {
    broker
        .send_frame(message(id, 99, "after", Checksum::Valid))
        .await;
    let m = consumer.receive().await.expect("the good one");
    assert_eq!(m.id(), MessageId::new(1, 99));
}

#[tokio::test(start_paused = true)]
async fn a_batch_of_a_million_empty_members_is_reported_with_the_heap_bounded() {
    const MEMBERS: i32 = 1_000_000;
    let net = FakeNetwork::new();
    guard("a million empty members", async {
        let (mut consumer, mut broker, id) = subscribed(&net, SubscriptionType::Shared).await;
        // 4 bytes a member (an empty metadata, no payload): 4 MiB in all,
        // within the 5 MiB frame limit.
        let data = Bytes::from(vec![0_u8; 4 * MEMBERS as usize]);
        let ((), peak) = peak_heap(async {
            broker
                .send_frame(entry(id, 7, meta(Some(MEMBERS), 0, None), data))
                .await;
            let ack = broker.expect(Type::Ack).await;
            let body = ack.command.ack.as_ref().expect("body");
            let error = ValidationError::BatchDeSerializeError as i32;
            assert_eq!(body.validation_error, Some(error));
            assert_eq!(body.message_id[0].entry_id, 7);
            assert_eq!(flow(&mut broker).await, MEMBERS as u32, "permits back");
        })
        .await;
        // The frame itself is 4 MiB, held by the broker's encoder and the
        // client's decoder; a million messages would be hundreds of MiB.
        assert!(peak < 16 * MIB, "{} MiB of heap at the peak", peak / MIB);
        still_connected(&mut consumer, &mut broker, id).await;
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_batch_lying_about_its_members_lifts_no_flow_control() {
    let net = FakeNetwork::new();
    guard("a lying batch, then a flood", async {
        let (_consumer, mut broker, id) = subscribed(&net, SubscriptionType::Shared).await;
        // A million members announced in four bytes: refused whole, and
        // the million permits the broker says it charged go back to it.
        let lie = entry(
            id,
            7,
            meta(Some(1_000_000), 0, None),
            Bytes::from_static(&[0; 4]),
        );
        broker.send_frame(lie).await;
        broker.expect(Type::Ack).await;
        assert_eq!(flow(&mut broker).await, 1_000_000, "permits back");
        // The entry took one permit of the 1000 granted, and the give-back
        // restores that one alone: with nothing received, entry 1001 is
        // past what the client granted, and the client drops the connection.
        for entry_id in 100..1101 {
            broker
                .send_frame(message(id, entry_id, "flood", Checksum::Valid))
                .await;
        }
        broker.until_closed().await;
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn empty_messages_count_against_the_memory_limit() {
    let net = FakeNetwork::new();
    guard("empty messages", async {
        // Each queued message counts a few hundred bytes of bookkeeping:
        // a thousand empty ones hold far more than the 100 kB limit.
        let limit = |c: ClientBuilder| c.memory_limit(100_000);
        let shared = |b: ConsumerBuilder| b.subscription_type(SubscriptionType::Shared);
        let (_client, mut consumer, mut broker, id) = subscribed_through(&net, limit, shared).await;
        for entry_id in 0..1000 {
            broker
                .send_frame(message(id, entry_id, "", Checksum::Valid))
                .await;
        }
        let mut taken = Vec::new();
        for _ in 0..500 {
            taken.push(consumer.receive().await.expect("message"));
        }
        // Half the queue taken: a FLOW is due, but the 500 still queued
        // keep the limit reached, so it waits. The next frame is the ACK.
        consumer.ack(&taken[0]).await.expect("ack");
        let ack = broker.expect(Type::Ack).await;
        assert_eq!(ack.command.ack.expect("body").message_id[0].entry_id, 0);
        for _ in 500..1000 {
            taken.push(consumer.receive().await.expect("message"));
        }
        // The queue emptied: the permits of all thousand go back.
        let mut granted = 0;
        while granted < 1000 {
            granted += flow(&mut broker).await;
        }
        assert_eq!(granted, 1000);
        let ids: Vec<_> = taken.iter().map(|m| m.id().entry_id).collect();
        assert_eq!(
            ids,
            (0..1000).collect::<Vec<_>>(),
            "nothing lost on the way"
        );
    })
    .await;
}

/// A batch of `n` members "m0", "m1", …
fn small_members(n: u32) -> Bytes {
    let mut data = BytesMut::new();
    for i in 0..n {
        let text = format!("m{i}");
        let meta = SingleMessageMetadata {
            payload_size: text.len() as i32,
            sequence_id: Some(u64::from(i)),
            ..SingleMessageMetadata::default()
        };
        batch::write_member(&meta, text.as_bytes(), &mut data);
    }
    data.freeze()
}

#[tokio::test(start_paused = true)]
async fn batches_of_ten_thousand_members_and_of_the_most_taken_arrive_whole() {
    let net = FakeNetwork::new();
    guard("big legitimate batches", async {
        let (mut consumer, mut broker, id) = subscribed(&net, SubscriptionType::Shared).await;
        for (entry_id, members) in [(5, 10_000), (6, MAX_BATCH_MEMBERS)] {
            let data = small_members(members);
            let metadata = meta(Some(members as i32), 0, None);
            broker.send_frame(entry(id, entry_id, metadata, data)).await;
            for i in 0..members {
                let m = consumer.receive().await.expect("member");
                let expected = MessageId::new(1, entry_id).with_batch_index(i as i32);
                assert_eq!(m.id(), expected);
                assert_eq!(&m.payload()[..], format!("m{i}").as_bytes());
            }
        }
        assert!(
            consumer.try_receive().await.expect("open").is_none(),
            "nothing more"
        );
    })
    .await;
}

/// 2100-01-01: no chunk here is older than the incomplete-message expiry,
/// so none is acked for being an orphan.
const PUBLISHED: u64 = 4_102_444_800_000;

/// Chunk `chunk_id` of `num` of message `uuid` at entry `at`, announcing
/// `total` bytes for the message and carrying `data`.
fn chunk(
    consumer: u64,
    at: u64,
    (uuid, chunk_id, num): (&str, i32, i32),
    total: Option<i32>,
    data: Bytes,
) -> Frame {
    let metadata = proto::MessageMetadata {
        uuid: Some(uuid.into()),
        chunk_id: Some(chunk_id),
        num_chunks_from_msg: Some(num),
        total_chunk_msg_size: total,
        publish_time: PUBLISHED,
        ..meta(None, 0, None)
    };
    entry(consumer, at, metadata, data)
}

#[tokio::test(start_paused = true)]
async fn chunks_that_lie_about_their_message_are_held_with_the_heap_bounded() {
    let net = FakeNetwork::new();
    guard("lying chunks", async {
        let (mut consumer, mut broker, id) = subscribed(&net, SubscriptionType::Shared).await;
        let part = Bytes::from(vec![7_u8; MIB]);
        let liars = [
            ("past its announced size", Some(10), 64),
            ("more chunks than the bound holds ids for", None, i32::MAX),
            ("more bytes than the bound", Some(i32::MAX), 1000),
        ];
        let mut at = 1000;
        for (what, total, num) in liars {
            let ((), peak) = peak_heap(async {
                // 48 MiB, none the last chunk: every byte would be held.
                for chunk_id in 0..48 {
                    let frame = chunk(id, at, (what, chunk_id, num), total, part.clone());
                    broker.send_frame(frame).await;
                    at += 1;
                    // Its permit comes back, and nothing is acked first.
                    assert_eq!(flow(&mut broker).await, 1, "{what}");
                }
            })
            .await;
            assert!(peak < 16 * MIB, "{what}: {} MiB of heap", peak / MIB);
        }
        still_connected(&mut consumer, &mut broker, id).await;
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_message_over_the_chunk_bound_is_held_and_a_smaller_one_arrives_whole() {
    let net = FakeNetwork::new();
    guard("chunk bound", async {
        let setup = |b: ConsumerBuilder| {
            b.subscription_type(SubscriptionType::Shared)
                .max_pending_chunked_bytes(3 * MIB)
        };
        let (client, mut consumer, mut broker, id) = subscribed_client(&net, setup).await;
        let part = Bytes::from(vec![1_u8; MIB]);
        let mib = MIB as i32;
        // x: 4 MiB in 4 chunks, over the bound; y: 2 MiB in 2.
        let chunks = [("x", 4, 1), ("y", 2, 10)]
            .map(|(uuid, n, first)| (0..n).map(move |k| (uuid, k, n, first + k as u64)));
        for (uuid, k, n, at) in chunks.into_iter().flatten() {
            let frame = chunk(id, at, (uuid, k, n), Some(n * mib), part.clone());
            broker.send_frame(frame).await;
        }
        let y = consumer.receive().await.expect("y");
        assert_eq!(
            (y.id(), y.id().first_chunk(), y.payload().len()),
            (MessageId::new(1, 11), Some(MessageId::new(1, 10)), 2 * MIB)
        );
        // x was refused at its first chunk: every chunk of it held, none
        // acked; each chunk but y's last gave its permit back.
        for _ in 0..5 {
            assert_eq!(flow(&mut broker).await, 1);
        }

        let refused = client
            .consumer(TOPIC, "other")
            .max_pending_chunked_bytes(0)
            .subscribe()
            .await;
        assert!(matches!(
            refused,
            Err(ConsumerError::ZeroPendingChunkedBytes)
        ));
    })
    .await;
}
