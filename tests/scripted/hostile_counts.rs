//! Hostile counts (paused clock): a batch whose members are empty, so one
//! entry would become a million messages, and the batches a consumer
//! must still take whole; empty messages counted against the memory limit. Each hostile entry is reported or given up with
//! the heap bounded (measured with the probe in `hostile.rs`), and the
//! connection stays up.

use bytes::{Bytes, BytesMut};
use pulsar_wire::ClientBuilder;
use pulsar_wire::MessageId;
use pulsar_wire::consumer::{Consumer, ConsumerBuilder, MAX_BATCH_MEMBERS, SubscriptionType};
use pulsar_wire::proto::SingleMessageMetadata;
use pulsar_wire::proto::base_command::Type;
use pulsar_wire::proto::command_ack::ValidationError;
use pulsar_wire::wire::{Checksum, batch};

use super::consume::{message, subscribed, subscribed_through};
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
