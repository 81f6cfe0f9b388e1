//! Readers against a scripted broker that plays Apache Pulsar's part: a
//! non-durable subscription starts at the entry its SUBSCRIBE names, and
//! the broker sends the topic's entries from there. Chunked messages whose
//! chunks interleave with other messages, across reconnects: each message
//! is read once, whole.

use pulsar_wire::consumer::Reader;
use pulsar_wire::proto::base_command::Type;
use pulsar_wire::wire::{Checksum, Frame};
use pulsar_wire::{Client, MessageId};

use super::chunks::chunk;
use super::consume::reconnect::{answer_lookup_here, close_consumer};
use super::consume::{SERVICE, TOPIC, message, scripted_client};
use crate::common::fake_broker::{FakeBroker, FakeNetwork, answer, request_id};
use crate::common::{guard, init_tracing};

/// What the topic holds, entry by entry (ledger 1): chunk 0 of `x`, a
/// plain message, chunk 1 (the last) of `x`, another plain message.
fn topic_entry(consumer: u64, at: u64) -> Frame {
    match at {
        1 => chunk(consumer, 1, "x", 0, 2),
        2 => message(consumer, 2, "m", Checksum::Valid),
        3 => chunk(consumer, 3, "x", 1, 2),
        4 => message(consumer, 4, "n", Checksum::Valid),
        other => panic!("no entry {other}"),
    }
}

/// Answers a SUBSCRIBE (after its LOOKUP) and the first FLOW; returns the
/// consumer id and the entry the subscription starts at (`None` for
/// earliest, which is entry 1 here).
async fn subscription(broker: &mut FakeBroker) -> (u64, Option<u64>) {
    let lookup = past_flows(broker).await;
    assert_eq!(lookup.command.r#type(), Type::Lookup);
    answer_lookup_here(broker, &lookup).await;
    let subscribe = broker.expect(Type::Subscribe).await;
    let body = subscribe.command.subscribe.as_ref().expect("body");
    let start = body
        .start_message_id
        .as_ref()
        .map(MessageId::from_proto)
        .filter(|id| *id != MessageId::EARLIEST)
        .map(|id| id.entry_id);
    let id = body.consumer_id;
    broker.send(answer::success(body.request_id)).await;
    broker.expect(Type::Flow).await;
    (id, start)
}

/// The next frame that is no FLOW (the permits of chunks and of copies
/// the reader drops go back as they come).
async fn past_flows(broker: &mut FakeBroker) -> Frame {
    loop {
        let frame = broker.recv().await.expect("a frame");
        if frame.command.r#type() != Type::Flow {
            return frame;
        }
    }
}

/// A reader of `TOPIC` from the earliest message, with its client and the
/// scripted broker; returns the consumer id it subscribed with.
async fn reader(net: &FakeNetwork) -> (Client, Reader, FakeBroker, u64) {
    let (client, reader, broker, id, start) = reader_at(net, MessageId::EARLIEST, false).await;
    assert_eq!(start, None, "from the earliest");
    (client, reader, broker, id)
}

/// A reader of `TOPIC` from `from`, with its client and the scripted
/// broker; returns the consumer id it subscribed with and the entry its
/// SUBSCRIBE named (`None` for earliest).
async fn reader_at(
    net: &FakeNetwork,
    from: MessageId,
    inclusive: bool,
) -> (Client, Reader, FakeBroker, u64, Option<u64>) {
    init_tracing();
    let mut svc = net.listen(SERVICE);
    let connect = async {
        let client = scripted_client(net).await;
        let reader = client
            .reader(TOPIC)
            .start_message_id(from)
            .start_inclusive(inclusive)
            .create()
            .await
            .expect("reader");
        (client, reader)
    };
    let script = async {
        let mut broker = svc.accept().await;
        broker.handshake().await;
        let meta = broker.expect(Type::PartitionedMetadata).await;
        broker.send(answer::partitions(request_id(&meta), 0)).await;
        let (id, start) = subscription(&mut broker).await;
        (broker, id, start)
    };
    let ((client, reader), (broker, id, start)) = tokio::join!(connect, script);
    (client, reader, broker, id, start)
}

/// What `reader` reads next: its id's entry and its payload.
async fn next(reader: &mut Reader) -> (u64, String) {
    let m = reader.read_next().await.expect("read");
    (
        m.id().entry_id,
        String::from_utf8_lossy(m.payload()).into_owned(),
    )
}

#[tokio::test(start_paused = true)]
async fn a_reader_reads_a_chunked_message_whose_chunks_surround_a_message_it_read() {
    let net = FakeNetwork::new();
    guard("reader, interleaved chunks", async {
        let (_client, mut reader, mut broker, id) = reader(&net).await;
        for at in [1, 2] {
            broker.send_frame(topic_entry(id, at)).await;
        }
        assert_eq!(next(&mut reader).await, (2, "m".into()));
        for at in [3, 4] {
            broker.send_frame(topic_entry(id, at)).await;
        }
        assert_eq!(
            next(&mut reader).await,
            (3, "x0x1".into()),
            "the chunked message, under its last chunk's id"
        );
        assert_eq!(next(&mut reader).await, (4, "n".into()));
    })
    .await;
}

// A start at a chunked message's id (its last chunk's, its first beside
// it) starts the broker at its first chunk: the message is read whole when
// the start is inclusive, and what lies between its chunks is before it.
#[tokio::test(start_paused = true)]
async fn a_reader_started_at_a_chunked_message_reads_from_its_first_chunk() {
    let x = MessageId::new(1, 3).with_first_chunk(MessageId::new(1, 1));
    for (inclusive, expected) in [(true, "x0x1"), (false, "n")] {
        let net = FakeNetwork::new();
        guard("reader from a chunked message", async {
            let (_client, mut reader, mut broker, id, start) = reader_at(&net, x, inclusive).await;
            assert_eq!(start, Some(1), "the SUBSCRIBE names the first chunk");
            for at in 1..=4 {
                broker.send_frame(topic_entry(id, at)).await;
            }
            let (_, first) = next(&mut reader).await;
            assert_eq!(first, expected, "inclusive: {inclusive}");
        })
        .await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_reader_across_reconnects_reads_a_half_assembled_message_once_and_nothing_twice() {
    let net = FakeNetwork::new();
    guard("reader, chunks across reconnects", async {
        let (_client, mut reader, mut broker, id) = reader(&net).await;
        for at in [1, 2] {
            broker.send_frame(topic_entry(id, at)).await;
        }
        assert_eq!(next(&mut reader).await, (2, "m".into()));

        // Lost while `x` is half assembled: the reader must start again
        // at its first chunk to read it whole.
        broker.send(close_consumer(id)).await;
        let (id, start) = subscription(&mut broker).await;
        assert_eq!(
            start,
            Some(1),
            "at the first chunk of the message in assembly"
        );
        for at in 1..=3 {
            broker.send_frame(topic_entry(id, at)).await;
        }
        assert_eq!(next(&mut reader).await, (3, "x0x1".into()));

        // Lost again once `x` is read: the reader resumes after its last
        // chunk, and reads neither `m` nor `x` again.
        broker.send(close_consumer(id)).await;
        let (id, start) = subscription(&mut broker).await;
        let start = start.expect("a position");
        for at in start..=4 {
            broker.send_frame(topic_entry(id, at)).await;
        }
        assert_eq!(next(&mut reader).await, (4, "n".into()), "read once each");
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_reader_lost_with_a_chunked_message_queued_behind_a_later_one_reads_it_whole() {
    let net = FakeNetwork::new();
    guard("reader, chunked message queued behind m", async {
        let (_client, mut reader, mut broker, id) = reader(&net).await;
        // Nothing read yet: `m`, then `x` (completed at entry 3), queued.
        for at in 1..=3 {
            broker.send_frame(topic_entry(id, at)).await;
        }
        broker.send(close_consumer(id)).await;
        let (id, start) = subscription(&mut broker).await;
        assert_eq!(start, Some(1), "at the first chunk of the queued `x`");
        for at in 1..=4 {
            broker.send_frame(topic_entry(id, at)).await;
        }
        assert_eq!(next(&mut reader).await, (2, "m".into()));
        assert_eq!(next(&mut reader).await, (3, "x0x1".into()));
        assert_eq!(next(&mut reader).await, (4, "n".into()));
    })
    .await;
}
