//! Chunked messages against a scripted broker (paused clock): interleaved
//! chunks of two messages, a missing chunk, the bound on messages being
//! assembled, and the expiry of an incomplete one; a producer splitting a
//! payload over the broker's max message size.

use std::time::Duration;

use bytes::Bytes;
use prost::Message as _;
use pulsar_wire::consumer::{ConsumerBuilder, Message, SubscriptionType};
use pulsar_wire::producer::{ProducerBuilder, ProducerError};
use pulsar_wire::proto::base_command::Type;
use pulsar_wire::proto::command_ack::AckType;
use pulsar_wire::proto::{self, BaseCommand};
use pulsar_wire::wire::{self, Frame};
use pulsar_wire::{Client, MessageId};

use super::consume::outside_rewind::closed_and_subscribed_again;
use super::consume::reconnect::{answer_lookup_here, close_consumer};
use super::consume::{SERVICE, attach, subscribed_with};
use super::hostile_entries::{entry, meta};
use super::produce::{producer_built, send_of};
use crate::common::fake_broker::{FakeBroker, FakeNetwork, answer};
use crate::common::{guard, guard_for};

/// Far in the future: no chunk is ever older than the expiry.
const PUBLISHED: u64 = 4_102_444_800_000;

/// Chunk `chunk_id` of `num` of message `uuid`, at entry `at`.
pub(super) fn chunk(consumer: u64, at: u64, uuid: &str, chunk_id: i32, num: i32) -> Frame {
    let metadata = proto::MessageMetadata {
        uuid: Some(uuid.into()),
        chunk_id: Some(chunk_id),
        num_chunks_from_msg: Some(num),
        total_chunk_msg_size: Some(num * 2),
        publish_time: PUBLISHED,
        ..meta(None, 0, None)
    };
    entry(
        consumer,
        at,
        metadata,
        Bytes::from(format!("{uuid}{chunk_id}")),
    )
}

fn shared(b: ConsumerBuilder) -> ConsumerBuilder {
    b.subscription_type(SubscriptionType::Shared)
}

/// The entry ids of the next frame, which must be `kind`.
async fn entries(broker: &mut FakeBroker, kind: Type) -> Vec<u64> {
    let frame = broker.expect(kind).await;
    let c = frame.command;
    let ids = match kind {
        Type::Ack => c.ack.map(|a| a.message_id),
        Type::RedeliverUnacknowledgedMessages => {
            c.redeliver_unacknowledged_messages.map(|r| r.message_ids)
        }
        other => panic!("no ids in {other:?}"),
    };
    ids.expect("body").iter().map(|i| i.entry_id).collect()
}

/// The entries of the next ACK frames, `n` of them (acks made together
/// may share a frame).
async fn acked(broker: &mut FakeBroker, n: usize) -> Vec<u64> {
    let mut all = Vec::new();
    while all.len() < n {
        all.extend(entries(broker, Type::Ack).await);
    }
    all
}

/// The permits of the next frame, which must be a FLOW.
async fn flow(broker: &mut FakeBroker) -> u32 {
    let frame = broker.expect(Type::Flow).await;
    frame.command.flow.expect("body").message_permits
}

#[tokio::test(start_paused = true)]
async fn interleaved_chunks_of_two_messages_arrive_whole_and_ack_every_chunk() {
    let net = FakeNetwork::new();
    guard("interleaved chunks", async {
        let (mut consumer, mut broker, id) = subscribed_with(&net, shared).await;
        for (at, uuid, chunk_id, num) in [
            (1, "x", 0, 2),
            (2, "y", 0, 3),
            (3, "x", 1, 2),
            (4, "y", 1, 3),
            (5, "y", 2, 3),
        ] {
            broker.send_frame(chunk(id, at, uuid, chunk_id, num)).await;
        }
        let x = consumer.receive().await.expect("x");
        assert_eq!((ends(&x), &x.payload()[..]), ((1, 3), &b"x0x1"[..]));
        let y = consumer.receive().await.expect("y");
        assert_eq!((ends(&y), &y.payload()[..]), ((2, 5), &b"y0y1y2"[..]));
        // Each chunk that completed nothing gave its permit back.
        for _ in 0..3 {
            assert_eq!(flow(&mut broker).await, 1);
        }
        consumer.ack(&x).await.expect("ack");
        consumer.ack(&y).await.expect("ack");
        assert_eq!(acked(&mut broker, 5).await, [1, 3, 2, 4, 5]);
    })
    .await;
}

/// The entries of a chunked message's first and last chunks, as its id
/// names them.
fn ends(m: &Message) -> (u64, u64) {
    let first = m.id().first_chunk().expect("a chunked message's id");
    (first.entry_id, m.id().entry_id)
}

fn exclusive(b: ConsumerBuilder) -> ConsumerBuilder {
    b.subscription_type(SubscriptionType::Exclusive)
}

/// A message of one entry, `body`, at entry `at`.
pub(super) fn plain(consumer: u64, at: u64, body: &'static str) -> Frame {
    entry(
        consumer,
        at,
        meta(None, 0, None),
        Bytes::from_static(body.as_bytes()),
    )
}

// A chunked message is delivered where its last chunk is, as the Java
// client delivers it: a cumulative ack of a message stored between its
// first and last chunk does not cover it.
#[tokio::test(start_paused = true)]
async fn a_cumulative_ack_of_a_message_between_the_chunks_leaves_the_chunked_message() {
    let net = FakeNetwork::new();
    guard("cumulative ack between chunks", async {
        let (mut consumer, mut broker, id) = subscribed_with(&net, exclusive).await;
        broker.send_frame(chunk(id, 1, "x", 0, 2)).await;
        broker.send_frame(plain(id, 2, "m")).await;
        let m = consumer.receive().await.expect("m");
        assert_eq!(m.id(), MessageId::new(1, 2));
        consumer.ack_cumulative(&m).await.expect("ack m");
        broker.send_frame(chunk(id, 3, "x", 1, 2)).await;
        let x = consumer.receive().await.expect("x, whole");
        assert_eq!(&x.payload()[..], b"x0x1");
        consumer.ack_cumulative(&x).await.expect("ack x");
        // Short of x's first chunk until x is acked, then up to x's last
        // chunk (FLOWs come in between).
        let mut upto = Vec::new();
        while upto.last() != Some(&3) {
            upto.push(next_cumulative(&mut broker).await);
        }
        assert_eq!(upto, [0, 3]);
    })
    .await;
}

/// The entry the next cumulative ACK names, past FLOWs and individual
/// ACKs (of copies of acked messages, which name their own entry only).
pub(super) async fn next_cumulative(broker: &mut FakeBroker) -> u64 {
    loop {
        let frame = broker.recv().await.expect("the client's frames");
        if let Some(ack) = frame.command.ack {
            if ack.ack_type() == AckType::Cumulative {
                return ack.message_id[0].entry_id;
            }
        }
    }
}

// Beyond the Java client: a cumulative ACK never covers the first chunk of
// a message not acked yet, so a subscription lost between the ack and the
// message's last chunk (or its ack) loses nothing (the broker sends the
// chunked message again from its first chunk).
#[tokio::test(start_paused = true)]
async fn a_cumulative_ack_stops_short_of_a_chunked_message_until_it_is_acked() {
    let net = FakeNetwork::new();
    guard("cumulative ack short of a first chunk", async {
        let (mut consumer, mut broker, id) = subscribed_with(&net, exclusive).await;
        broker.send_frame(chunk(id, 1, "x", 0, 2)).await;
        broker.send_frame(plain(id, 2, "m")).await;
        let m = consumer.receive().await.expect("m");
        consumer.ack_cumulative(&m).await.expect("ack m");
        assert_eq!(
            next_cumulative(&mut broker).await,
            0,
            "short of x's first chunk"
        );
        // Lost before x's last chunk came: the broker sends everything
        // after the acked entry 0 again.
        broker.send(close_consumer(id)).await;
        let again = loop {
            let frame = broker.recv().await.expect("the client's frames");
            if frame.command.r#type() == Type::Lookup {
                answer_lookup_here(&mut broker, &frame).await;
                let subscribe = broker.expect(Type::Subscribe).await;
                let body = subscribe.command.subscribe.as_ref().expect("body");
                broker.send(answer::success(body.request_id)).await;
                broker.expect(Type::Flow).await;
                break body.consumer_id;
            }
        };
        broker.send_frame(chunk(again, 1, "x", 0, 2)).await;
        broker.send_frame(plain(again, 2, "m")).await;
        broker.send_frame(chunk(again, 3, "x", 1, 2)).await;
        let x = consumer.receive().await.expect("x, whole");
        assert_eq!(&x.payload()[..], b"x0x1");
        // Until x is acked, nothing past its first chunk is acked (the
        // short ack goes again on the new connection); then x's own.
        consumer.ack_cumulative(&x).await.expect("ack x");
        let mut upto = next_cumulative(&mut broker).await;
        while upto == 0 {
            upto = next_cumulative(&mut broker).await;
        }
        assert_eq!(upto, 3);
    })
    .await;
}

// With ack receipts: a first chunk at the start of its ledger leaves no
// entry before it to ack, so the cumulative ack is held back whole; the call
// returns once recorded (it must not wait on the application's own next
// receive), and the ack goes with the chunked message's own.
#[tokio::test(start_paused = true)]
async fn a_cumulative_ack_held_back_whole_returns_and_goes_with_the_chunked_messages_ack() {
    let net = FakeNetwork::new();
    guard("cumulative ack held back whole", async {
        let receipts = |b| exclusive(b).ack_receipts(true);
        let (mut consumer, mut broker, id) = subscribed_with(&net, receipts).await;
        broker.send_frame(chunk(id, 0, "x", 0, 2)).await;
        broker.send_frame(plain(id, 1, "m")).await;
        let m = consumer.receive().await.expect("m");
        consumer.ack_cumulative(&m).await.expect("ack m, recorded");
        broker.send_frame(chunk(id, 2, "x", 1, 2)).await;
        let x = consumer.receive().await.expect("x, whole");
        assert_eq!(&x.payload()[..], b"x0x1");
        let acking = tokio::spawn({
            let consumer = consumer.clone();
            async move { consumer.ack_cumulative(&x).await }
        });
        assert_eq!(next_cumulative(&mut broker).await, 2, "up to x");
        drop(acking);
    })
    .await;
}

// A cumulative ack held back by a chunked message in its way, when the
// broker closes the consumer to rewind it (another consumer's seek, an
// operator's reset): the copies come from the reset point, and the held
// ack must not cover the chunked message's first chunk before the message
// comes whole and is acked, or the message can never be assembled.
#[tokio::test(start_paused = true)]
async fn an_ack_held_back_across_a_reset_waits_for_the_chunked_message_to_come_whole() {
    let net = FakeNetwork::new();
    guard("held cumulative ack across a reset", async {
        let receipts = |b| exclusive(b).ack_receipts(true);
        let (mut consumer, mut broker, id) = subscribed_with(&net, receipts).await;
        broker.send_frame(plain(id, 0, "a")).await;
        broker.send_frame(chunk(id, 1, "x", 0, 2)).await;
        broker.send_frame(plain(id, 2, "m")).await;
        let _a = consumer.receive().await.expect("a");
        let m = consumer.receive().await.expect("m");
        let acking = tokio::spawn({
            let consumer = consumer.clone();
            async move { consumer.ack_cumulative(&m).await }
        });
        let short = next_ack_answered(&mut broker).await;
        assert_eq!(short, 0, "short of x's first chunk");
        acking.await.expect("ack task").expect("ack m");
        // The cursor goes back to the start.
        let again = closed_and_subscribed_again(&mut broker, id).await;
        broker.send_frame(plain(again, 0, "a")).await;
        broker.send_frame(chunk(again, 1, "x", 0, 2)).await;
        broker.send_frame(plain(again, 2, "m")).await;
        crate::common::until_idle().await;
        broker.send_frame(chunk(again, 3, "x", 1, 2)).await;
        let x = loop {
            let next = consumer.receive().await.expect("x, whole");
            if next.id().first_chunk().is_some() {
                break next;
            }
        };
        assert_eq!(&x.payload()[..], b"x0x1");
        let acking = tokio::spawn({
            let consumer = consumer.clone();
            async move { consumer.ack_cumulative(&x).await }
        });
        // Nothing past x's first chunk is acked until x is.
        let mut upto = Vec::new();
        while upto.last() != Some(&3) {
            upto.push(next_ack_answered(&mut broker).await);
        }
        assert!(
            upto.iter().all(|&entry| entry == 0 || entry == 3),
            "cumulative ACKs after the reset: {upto:?}"
        );
        acking.await.expect("ack task").expect("ack x");
    })
    .await;
}

// As above, with two chunked messages in the ack's way at the reset: one
// being assembled whose later chunk the broker skipped (its copy came
// while an ack was on its way), and one queued. After the reset the first
// comes whole before the second's first chunk comes again; the held ack
// still waits for the second.
#[tokio::test(start_paused = true)]
async fn an_ack_held_back_across_a_reset_waits_for_every_chunked_message_in_its_way() {
    let net = FakeNetwork::new();
    guard(
        "held cumulative ack across a reset, two chunked messages",
        async {
            let (mut consumer, mut broker, id) = subscribed_with(&net, exclusive).await;
            broker.send_frame(chunk(id, 1, "x", 0, 2)).await;
            broker.send_frame(chunk(id, 3, "z", 0, 2)).await;
            broker.send_frame(plain(id, 4, "m")).await;
            broker.send_frame(chunk(id, 5, "z", 1, 2)).await;
            let m = consumer.receive().await.expect("m");
            assert_eq!(m.id().entry_id, 4);
            consumer.ack_cumulative(&m).await.expect("ack m");
            assert_eq!(next_ack_answered(&mut broker).await, 0, "short of x");
            let again = closed_and_subscribed_again(&mut broker, id).await;
            broker.send_frame(chunk(again, 1, "x", 0, 2)).await;
            broker.send_frame(chunk(again, 2, "x", 1, 2)).await;
            let x = consumer.receive().await.expect("x, whole");
            assert_eq!(&x.payload()[..], b"x0x1");
            crate::common::until_idle().await;
            broker.send_frame(chunk(again, 3, "z", 0, 2)).await;
            broker.send_frame(plain(again, 4, "m")).await;
            broker.send_frame(chunk(again, 5, "z", 1, 2)).await;
            let z = loop {
                let next = consumer.receive().await.expect("z, whole");
                if next.id().first_chunk().is_some() {
                    break next;
                }
            };
            assert_eq!(&z.payload()[..], b"z0z1");
            consumer.ack_cumulative(&z).await.expect("ack z");
            let mut upto = Vec::new();
            while upto.last() != Some(&5) {
                upto.push(next_ack_answered(&mut broker).await);
            }
            assert!(
                upto.iter().all(|&entry| entry < 3 || entry == 5),
                "cumulative ACKs after the reset: {upto:?}"
            );
        },
    )
    .await;
}

/// The entry the next cumulative ACK names, answered as Apache Pulsar
/// answers an ACK request.
async fn next_ack_answered(broker: &mut FakeBroker) -> u64 {
    loop {
        let frame = broker.recv().await.expect("the client's frames");
        let Some(ack) = frame.command.ack else {
            continue;
        };
        if let Some(request) = ack.request_id {
            broker
                .send(answer::ack_response(ack.consumer_id, request))
                .await;
        }
        if ack.ack_type() == AckType::Cumulative {
            return ack.message_id[0].entry_id;
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_cumulative_ack_of_a_message_between_the_chunks_leaves_the_queued_chunked_message() {
    let net = FakeNetwork::new();
    guard("cumulative ack before a queued chunked message", async {
        let (mut consumer, mut broker, id) = subscribed_with(&net, exclusive).await;
        broker.send_frame(chunk(id, 1, "x", 0, 2)).await;
        broker.send_frame(plain(id, 2, "m")).await;
        broker.send_frame(chunk(id, 3, "x", 1, 2)).await;
        let m = consumer.receive().await.expect("m");
        assert_eq!(m.id(), MessageId::new(1, 2));
        consumer.ack_cumulative(&m).await.expect("ack m");
        let x = consumer.receive().await.expect("x, whole");
        assert_eq!(&x.payload()[..], b"x0x1");
    })
    .await;
}

// A chunked message's id is its last chunk's, its first beside it (the Java
// client's `ChunkMessageId`): on an Exclusive subscription the ids handed
// out rise, also where a chunked message's chunks surround another
// message, and a seek to it starts the broker at its first chunk.
#[tokio::test(start_paused = true)]
async fn ids_handed_out_rise_and_a_seek_to_a_chunked_message_starts_at_its_first_chunk() {
    let net = FakeNetwork::new();
    guard("chunked ids", async {
        let (mut consumer, mut broker, id) = subscribed_with(&net, exclusive).await;
        broker.send_frame(chunk(id, 1, "x", 0, 2)).await;
        broker.send_frame(plain(id, 2, "m")).await;
        broker.send_frame(chunk(id, 3, "x", 1, 2)).await;
        broker.send_frame(plain(id, 4, "n")).await;
        let mut ids = Vec::new();
        for _ in 0..3 {
            ids.push(consumer.receive().await.expect("m, x, n").id());
        }
        assert!(ids.is_sorted(), "ids out of order: {ids:?}");
        let x = ids[1];
        assert_eq!(
            (x, x.first_chunk()),
            (MessageId::new(1, 3), Some(MessageId::new(1, 1)))
        );
        assert_eq!(
            x.to_string().parse::<MessageId>().map(|p| p.first_chunk()),
            Ok(x.first_chunk())
        );
        let asked = async {
            let seek = loop {
                let frame = broker.recv().await.expect("the client's frames");
                if frame.command.r#type() == Type::Seek {
                    break frame;
                }
            };
            let body = seek.command.seek.as_ref().expect("body");
            broker.send(answer::success(body.request_id)).await;
            body.message_id.as_ref().map(|m| m.entry_id)
        };
        let (done, sent) = tokio::join!(consumer.seek(x), asked);
        done.expect("seek");
        assert_eq!(sent, Some(1), "the SEEK names the first chunk");
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_message_with_a_missing_chunk_stays_unacked_and_comes_whole_once_redelivered() {
    let net = FakeNetwork::new();
    guard("missing chunk", async {
        let setup = |b| shared(b).ack_timeout(Duration::from_secs(5));
        let (mut consumer, mut broker, id) = subscribed_with(&net, setup).await;
        broker.send_frame(chunk(id, 1, "x", 0, 3)).await;
        broker.send_frame(chunk(id, 3, "x", 2, 3)).await; // chunk 1 lost
        broker.send_frame(chunk(id, 4, "y", 0, 2)).await;
        broker.send_frame(chunk(id, 5, "y", 1, 2)).await;
        let y = consumer.receive().await.expect("y");
        assert_eq!(ends(&y), (4, 5));
        consumer.ack(&y).await.expect("ack");
        for _ in 0..3 {
            assert_eq!(flow(&mut broker).await, 1);
        }
        assert_eq!(entries(&mut broker, Type::Ack).await, [4, 5]);
        // The ack timeout asks for x's chunks again, never acking them.
        let again = entries(&mut broker, Type::RedeliverUnacknowledgedMessages).await;
        assert_eq!(again, [1, 3]);
        for (at, chunk_id) in [(1, 0), (2, 1), (3, 2)] {
            broker.send_frame(chunk(id, at, "x", chunk_id, 3)).await;
        }
        let x = consumer.receive().await.expect("x");
        assert_eq!((ends(&x), &x.payload()[..]), ((1, 3), &b"x0x1x2"[..]));
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn beyond_the_pending_bound_the_oldest_message_is_dropped_unacked_or_acked() {
    for auto_ack in [false, true] {
        let net = FakeNetwork::new();
        guard("pending chunked messages", async {
            let setup = |b| {
                shared(b)
                    .max_pending_chunked_messages(2)
                    .auto_ack_oldest_chunked_message_on_queue_full(auto_ack)
                    .ack_timeout(Duration::from_secs(5))
            };
            let (mut consumer, mut broker, id) = subscribed_with(&net, setup).await;
            for (at, uuid) in [(1, "a"), (2, "b"), (3, "c")] {
                broker.send_frame(chunk(id, at, uuid, 0, 2)).await;
                if auto_ack && uuid == "c" {
                    // The oldest, a, is dropped and acked.
                    assert_eq!(entries(&mut broker, Type::Ack).await, [1]);
                }
                assert_eq!(flow(&mut broker).await, 1);
            }
            broker.send_frame(chunk(id, 4, "b", 1, 2)).await;
            broker.send_frame(chunk(id, 5, "c", 1, 2)).await;
            for first in [2, 3] {
                let m = consumer.receive().await.expect("b, c");
                assert_eq!(ends(&m), (first, first + 2));
                consumer.ack(&m).await.expect("ack");
            }
            assert_eq!(acked(&mut broker, 4).await, [2, 4, 3, 5]);
            if !auto_ack {
                // Held, never acked: the ack timeout asks for it again.
                let again = entries(&mut broker, Type::RedeliverUnacknowledgedMessages).await;
                assert_eq!(again, [1]);
            }
        })
        .await;
    }
}

#[tokio::test(start_paused = true)]
async fn an_incomplete_message_expires_and_its_chunks_are_acked() {
    let net = FakeNetwork::new();
    guard("chunk expiry", async {
        let setup =
            |b| shared(b).expire_time_of_incomplete_chunked_message(Duration::from_secs(10));
        let (mut consumer, mut broker, id) = subscribed_with(&net, setup).await;
        let start = tokio::time::Instant::now();
        broker.send_frame(chunk(id, 1, "x", 0, 3)).await;
        broker.send_frame(chunk(id, 2, "x", 1, 3)).await;
        for _ in 0..2 {
            assert_eq!(flow(&mut broker).await, 1);
        }
        assert_eq!(entries(&mut broker, Type::Ack).await, [1, 2]);
        assert!(
            start.elapsed() >= Duration::from_secs(10),
            "acked before the expiry"
        );
        assert!(consumer.try_receive().await.expect("open").is_none());
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_chunked_message_acked_after_a_reconnect_acks_every_chunk() {
    let net = FakeNetwork::new();
    guard("chunked ack after a reconnect", async {
        let (mut consumer, mut broker, id) = subscribed_with(&net, shared).await;
        for (at, chunk_id) in [(1, 0), (2, 1), (3, 2)] {
            broker.send_frame(chunk(id, at, "x", chunk_id, 3)).await;
        }
        let x = consumer.receive().await.expect("x");
        assert_eq!(ends(&x), (1, 3));
        for _ in 0..2 {
            assert_eq!(flow(&mut broker).await, 1);
        }
        // The subscription is lost and made again before the ack.
        broker.send(close_consumer(id)).await;
        let again = attach(&mut broker).await;
        consumer.ack(&x).await.expect("ack");
        let ack = broker.expect(Type::Ack).await;
        let body = ack.command.ack.expect("body");
        assert_eq!(body.consumer_id, again, "under the new consumer id");
        let acked: Vec<u64> = body.message_id.iter().map(|i| i.entry_id).collect();
        assert_eq!(acked, [1, 2, 3], "every chunk of the message");
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_chunked_message_acked_after_a_reconnect_and_its_redelivery_acks_every_chunk() {
    let net = FakeNetwork::new();
    guard("chunked ack after a redelivery", async {
        let (mut consumer, mut broker, id) = subscribed_with(&net, shared).await;
        for (at, chunk_id) in [(1, 0), (2, 1)] {
            broker.send_frame(chunk(id, at, "x", chunk_id, 2)).await;
        }
        let x = consumer.receive().await.expect("x");
        assert_eq!(flow(&mut broker).await, 1);
        broker.send(close_consumer(id)).await;
        let again = attach(&mut broker).await;
        // The broker sends the message again, in part, before the ack.
        broker.send_frame(chunk(again, 1, "x", 0, 2)).await;
        assert_eq!(flow(&mut broker).await, 1);
        consumer.ack(&x).await.expect("ack");
        assert_eq!(entries(&mut broker, Type::Ack).await, [1, 2]);
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn chunk_acks_go_out_as_application_acks_do_and_again_under_a_new_consumer() {
    let net = FakeNetwork::new();
    guard("chunk acks with receipts", async {
        let setup = |b| {
            shared(b)
                .ack_receipts(true)
                .expire_time_of_incomplete_chunked_message(Duration::from_secs(10))
        };
        let (_consumer, mut broker, id) = subscribed_with(&net, setup).await;
        broker.send_frame(chunk(id, 1, "x", 0, 3)).await;
        broker.send_frame(chunk(id, 2, "x", 1, 3)).await;
        for _ in 0..2 {
            assert_eq!(flow(&mut broker).await, 1);
        }
        // The incomplete message expires: its chunks are acked as a
        // request that waits for the broker's answer...
        let ack = broker.expect(Type::Ack).await.command.ack.expect("body");
        assert!(ack.request_id.is_some(), "an ACK request, as with receipts");
        assert_eq!((ack.consumer_id, ack.message_id.len()), (id, 2));
        // ...which never comes: the consumer is closed first, and the ACK
        // goes out again under the next consumer id.
        broker.send(close_consumer(id)).await;
        let again = attach(&mut broker).await;
        let ack = broker.expect(Type::Ack).await.command.ack.expect("body");
        assert_eq!(ack.consumer_id, again);
        let acked: Vec<u64> = ack.message_id.iter().map(|i| i.entry_id).collect();
        assert_eq!(acked, [1, 2]);
    })
    .await;
}

/// A SEND_RECEIPT for `sequence` naming entry `entry`.
fn receipt_at(producer: u64, sequence: u64, entry: u64) -> BaseCommand {
    BaseCommand {
        r#type: Type::SendReceipt as i32,
        send_receipt: Some(Box::new(proto::CommandSendReceipt {
            producer_id: producer,
            sequence_id: sequence,
            message_id: Some(MessageId::new(1, entry).to_proto()),
            highest_sequence_id: None,
        })),
        ..BaseCommand::default()
    }
}

/// Answers the chunks of one message (sequence 0) as they come, checking
/// each fits `limit` with its metadata; returns the joined payload and the
/// number of chunks.
async fn chunks_of_one_message(broker: &mut FakeBroker, limit: usize, size: u64) -> (Vec<u8>, u64) {
    let (mut joined, mut chunks) = (Vec::new(), 0u64);
    loop {
        let frame = broker.expect(Type::Send).await;
        assert!(wire::encoded_len(&frame) <= limit + wire::FRAME_OVERHEAD_ALLOWANCE);
        let (producer_id, sequence) = send_of(&frame);
        assert_eq!(sequence, 0, "every chunk has the message's sequence id");
        let p = frame.payload.expect("payload");
        let meta = &p.metadata;
        assert!(
            meta.encoded_len() + p.data.len() <= limit,
            "chunk {chunks} over the limit"
        );
        assert_eq!(meta.uuid.as_deref(), Some("p-1-0"));
        assert_eq!(meta.total_chunk_msg_size, Some(size as i32));
        assert_eq!(meta.chunk_id, Some(chunks as i32));
        joined.extend_from_slice(&p.data);
        broker.send(receipt_at(producer_id, 0, 10 + chunks)).await;
        chunks += 1;
        if meta.num_chunks_from_msg == Some(chunks as i32) {
            return (joined, chunks);
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_payload_over_the_max_message_size_goes_in_chunks_known_by_the_last_and_the_first() {
    let net = FakeNetwork::new();
    guard("chunked send", async {
        let chunking = |b: ProducerBuilder| b.chunking(true);
        let (producer, mut broker, _svc) =
            producer_built(&net, Some(1000), -1, 64 << 20, chunking).await;
        let payload: Vec<u8> = (0..2500u32).map(|i| i as u8).collect();
        let receipt = producer.send(payload.clone()).await.expect("queued");
        let (joined, chunks) = chunks_of_one_message(&mut broker, 1000, 2500).await;
        assert!(chunks >= 3, "{chunks} chunks");
        assert_eq!(joined, payload);
        let id = receipt.await.expect("stored");
        assert_eq!(
            (id, id.first_chunk()),
            (
                MessageId::new(1, 10 + chunks - 1),
                Some(MessageId::new(1, 10))
            )
        );
        assert_eq!(id.to_string(), format!("1:10:-1;1:{}:-1", 10 + chunks - 1));
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_chunk_size_below_the_brokers_limit_cuts_messages_over_it() {
    let net = FakeNetwork::new();
    guard("chunked send, own chunk size", async {
        let chunking = |b: ProducerBuilder| b.chunking(true).chunk_size(1500);
        let (producer, mut broker, _svc) =
            producer_built(&net, Some(5 << 20), -1, 64 << 20, chunking).await;
        let payload: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
        let receipt = producer.send(payload.clone()).await.expect("queued");
        let (joined, chunks) = chunks_of_one_message(&mut broker, 1500, 5000).await;
        assert!(chunks >= 4, "{chunks} chunks");
        assert_eq!(joined, payload);
        let id = receipt.await.expect("stored");
        assert_eq!(id.first_chunk(), Some(MessageId::new(1, 10)));
        assert_eq!(id, MessageId::new(1, 10 + chunks - 1));
        // A message under the chunk size goes whole.
        let small = producer.send(vec![1u8; 1000]).await.expect("queued");
        let frame = broker.expect(Type::Send).await;
        let (producer_id, sequence) = send_of(&frame);
        let meta = &frame.payload.expect("payload").metadata;
        assert_eq!(meta.num_chunks_from_msg, None, "not chunked");
        broker.send(receipt_at(producer_id, sequence, 20)).await;
        assert_eq!(small.await.expect("stored"), MessageId::new(1, 20));
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn chunking_with_batching_or_a_bad_chunk_size_is_refused_before_any_io() {
    let net = FakeNetwork::new();
    guard("chunking and batching", async {
        let mut svc = net.listen(SERVICE);
        let connect = async {
            Client::builder()
                .service_url(format!("pulsar://{SERVICE}"))
                .connector(net.clone())
                .build()
                .await
                .expect("client")
        };
        let script = async {
            let mut broker = svc.accept().await;
            broker.handshake().await;
            broker
        };
        let (client, _broker) = tokio::join!(connect, script);
        let refused = client
            .producer("t")
            .chunking(true)
            .batching(true)
            .create()
            .await;
        assert!(
            matches!(refused, Err(ProducerError::ChunkingWithBatching)),
            "{refused:?}"
        );
        for (builder, what) in [
            (client.producer("t").chunk_size(4096), "without chunking"),
            (
                client.producer("t").chunking(true).chunk_size(100),
                "too small",
            ),
        ] {
            let refused = builder.create().await;
            assert!(
                matches!(
                    refused,
                    Err(ProducerError::InvalidOption {
                        option: "chunk_size",
                        ..
                    })
                ),
                "{what}: {refused:?}"
            );
        }
    })
    .await;
}

// A message dropped from assembly for room keeps its first chunk unacked,
// so its later chunks must stay unacked too: acked, they would never come
// again and the message could never be assembled. As the Java client, they
// wait for the message to come whole again (here after a reconnect).
#[tokio::test(start_paused = true)]
async fn the_later_chunks_of_a_message_dropped_for_room_stay_unacked_until_it_comes_whole() {
    let net = FakeNetwork::new();
    guard_for(
        "evicted message's later chunks",
        Duration::from_secs(600),
        async {
            let setup = |b| exclusive(b).max_pending_chunked_messages(1);
            let (mut consumer, mut broker, id) = subscribed_with(&net, setup).await;
            broker.send_frame(chunk(id, 1, "a", 0, 2)).await;
            broker.send_frame(chunk(id, 2, "b", 0, 2)).await; // a is dropped
            broker.send_frame(chunk(id, 3, "a", 1, 2)).await;
            // Past the expiry of incomplete messages (60 s), then the broker
            // closes the consumer: whatever is acked by then, a's chunks never.
            let mut acked = Vec::new();
            let close_at = tokio::time::Instant::now() + Duration::from_secs(61);
            let mut closed = false;
            let lookup = loop {
                let frame = if closed {
                    Ok(broker.recv().await)
                } else {
                    tokio::time::timeout_at(close_at, broker.recv()).await
                };
                let Ok(frame) = frame else {
                    broker.send(close_consumer(id)).await;
                    closed = true;
                    continue;
                };
                let frame = frame.expect("the client's frames");
                match frame.command.r#type() {
                    Type::Ping => broker.send(wire::commands::pong()).await,
                    Type::Ack => {
                        let ack = frame.command.ack.expect("body");
                        acked.extend(ack.message_id.iter().map(|i| i.entry_id));
                    }
                    Type::Lookup => break frame,
                    _ => {}
                }
            };
            // b, incomplete for 60 s, expired: its chunk is acked.
            assert_eq!(acked, [2], "only b's chunk, never a's");
            super::consume::reconnect::answer_lookup_here(&mut broker, &lookup).await;
            let subscribe = broker.expect(Type::Subscribe).await;
            let body = subscribe.command.subscribe.as_ref().expect("body");
            broker.send(answer::success(body.request_id)).await;
            let again = body.consumer_id;
            flow(&mut broker).await;
            for (at, chunk_id) in [(1, 0), (3, 1)] {
                broker.send_frame(chunk(again, at, "a", chunk_id, 2)).await;
            }
            let a = consumer.receive().await.expect("a, whole");
            assert_eq!(&a.payload()[..], b"a0a1");
        },
    )
    .await;
}
