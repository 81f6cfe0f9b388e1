//! Hostile input from the network: a scripted broker that lies about
//! lengths, writes bad magic, breaks checksums, batches and compression,
//! sends a decompression bomb, unknown commands, commands without their
//! body, and frames for ids nobody registered.
//!
//! The rule under test: each gives a typed error or a logged ignore, with
//! bounded memory and no panic; where the byte stream can no longer be
//! trusted the connection is closed (every waiter sees the typed error) and
//! a consumer subscribes again on a fresh one. Memory is checked with an
//! allocation probe: the largest single allocation made on this test's
//! thread (the runtime is current-thread, so the client's tasks run here
//! too) while the hostile input is handled.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::{BufMut, Bytes, BytesMut};
use prost::Message as _;
use pulsar_wire::MessageId;
use pulsar_wire::compression::Compression;
use pulsar_wire::connection::{Connection, ConnectionError, ConnectionOptions, Response};
use pulsar_wire::consumer::SubscriptionType;
use pulsar_wire::proto::base_command::Type;
use pulsar_wire::proto::command_ack::ValidationError;
use pulsar_wire::proto::{self, BaseCommand, SingleMessageMetadata};
use pulsar_wire::wire::{Checksum, Frame, FrameError, Payload, batch, commands};

use super::consume::{SERVICE, attach, message, subscribed, subscribed_with};
use super::produce::{producer, send_of};
use crate::common::fake_broker::{FakeBroker, FakeNetwork, answer};
use crate::common::{guard, init_tracing};

/// Counts nothing, remembers the largest allocation per thread.
struct Probe;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    let _ = LARGEST.try_with(|largest| largest.set(largest.get().max(size)));
}

// SAFETY: every call is passed on to the system allocator unchanged.
unsafe impl GlobalAlloc for Probe {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static PROBE: Probe = Probe;

/// Runs `f` and returns its output with the largest single allocation made
/// on this thread meanwhile.
async fn largest_allocation<F: std::future::Future>(f: F) -> (F::Output, usize) {
    LARGEST.with(|l| l.set(0));
    let out = f.await;
    (out, LARGEST.with(Cell::get))
}

const MIB: usize = 1 << 20;

async fn connected() -> (Connection, FakeBroker) {
    init_tracing();
    let (io, mut broker) = FakeBroker::pair();
    let options = ConnectionOptions::default();
    let (conn, ()) = tokio::join!(Connection::connect(io, options), broker.handshake());
    (conn.expect("handshake"), broker)
}

/// `[total][command_size][command][tail]` with honest sizes around `tail`.
fn raw_frame(command: &[u8], tail: &[u8]) -> Vec<u8> {
    let mut out = BytesMut::new();
    out.put_u32((4 + command.len() + tail.len()) as u32);
    out.put_u32(command.len() as u32);
    out.put_slice(command);
    out.put_slice(tail);
    out.to_vec()
}

fn message_command(consumer: u64, entry: u64) -> BaseCommand {
    BaseCommand {
        r#type: Type::Message as i32,
        message: Some(Box::new(proto::CommandMessage {
            consumer_id: consumer,
            message_id: MessageId::new(1, entry).to_proto(),
            ..proto::CommandMessage::default()
        })),
        ..BaseCommand::default()
    }
}

/// Hostile byte strings and what the client must make of each.
/// A hostile byte string, and whether an error is the one it must give.
type CorruptStream = (&'static str, Vec<u8>, fn(&FrameError) -> bool);

fn corrupt_streams() -> Vec<CorruptStream> {
    let message = message_command(0, 1).encode_to_vec();
    let mut metadata_past_end = vec![];
    metadata_past_end.put_u32(MIB as u32);
    metadata_past_end.put_slice(b"ab");
    let receipt_without_body = BaseCommand {
        r#type: Type::SendReceipt as i32,
        ..BaseCommand::default()
    };
    vec![
        ("4 GiB announced", u32::MAX.to_be_bytes().to_vec(), |e| {
            matches!(e, FrameError::TooLarge { .. })
        }),
        ("total size 2", 2u32.to_be_bytes().to_vec(), |e| {
            matches!(e, FrameError::TooShort { total: 2 })
        }),
        (
            "command size past the frame",
            [8u32.to_be_bytes(), 1000u32.to_be_bytes(), [0; 4]].concat(),
            |e| {
                matches!(
                    e,
                    FrameError::CommandSizeExceedsFrame {
                        command_size: 1000,
                        ..
                    }
                )
            },
        ),
        (
            "metadata size past the frame",
            raw_frame(&message, &metadata_past_end),
            |e| {
                matches!(
                    e,
                    FrameError::SectionExceedsFrame {
                        what: "message metadata",
                        ..
                    }
                )
            },
        ),
        (
            "bad magic",
            raw_frame(&message, &[0x0e, 0x07, 0, 0, 0, 0, 0, 0]),
            |e| matches!(e, FrameError::BadMagic { found: 0x0e07 }),
        ),
        ("command not protobuf", raw_frame(&[0xff; 12], &[]), |e| {
            matches!(
                e,
                FrameError::Protobuf {
                    what: "BaseCommand",
                    ..
                }
            )
        }),
        (
            "command without its sub-message",
            raw_frame(&receipt_without_body.encode_to_vec(), &[]),
            |e| {
                matches!(
                    e,
                    FrameError::MissingSubMessage {
                        command: Type::SendReceipt
                    }
                )
            },
        ),
        (
            "payload after a command that has none",
            raw_frame(&commands::ping().encode_to_vec(), b"junk"),
            |e| {
                matches!(
                    e,
                    FrameError::UnexpectedPayload {
                        command: Type::Ping
                    }
                )
            },
        ),
    ]
}

#[tokio::test(start_paused = true)]
async fn a_corrupt_stream_closes_the_connection_with_a_typed_error_and_bounded_memory() {
    for (what, bytes, expected) in corrupt_streams() {
        let (conn, mut broker) = connected().await;
        let pending = {
            let conn = conn.clone();
            tokio::spawn(async move {
                conn.request("LOOKUP", |id| commands::lookup("t", id, false))
                    .await
            })
        };
        broker.expect(Type::Lookup).await;
        let (err, largest) = largest_allocation(async {
            broker.send_raw(&bytes).await;
            guard(what, conn.closed()).await
        })
        .await;
        match &err {
            ConnectionError::Frame(e) => assert!(expected(e), "{what}: {e:?}"),
            other => panic!("{what}: {other:?}"),
        }
        assert!(largest < MIB, "{what}: an allocation of {largest} bytes");
        let waiter = guard(what, pending).await.expect("task");
        assert!(
            matches!(waiter, Err(ConnectionError::Frame(_))),
            "{what}: the waiter sees the same error: {waiter:?}"
        );
        guard(what, broker.until_closed()).await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_frame_cut_off_by_the_end_of_the_stream_is_an_error_not_a_hang() {
    let (conn, mut broker) = connected().await;
    broker.send_raw(&raw_frame(&[], &[])[..3]).await;
    drop(broker);
    let err = guard("cut off", conn.closed()).await;
    assert!(
        matches!(err, ConnectionError::Io(_) | ConnectionError::Disconnected),
        "{err:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn unknown_command_types_and_frames_for_unknown_ids_are_ignored() {
    let (conn, mut broker) = connected().await;
    let pending = {
        let conn = conn.clone();
        tokio::spawn(async move {
            conn.request("LOOKUP", |id| commands::lookup("t", id, false))
                .await
        })
    };
    let lookup = broker.expect(Type::Lookup).await;
    // A command type from a future protocol version, with a body field
    // this client does not know.
    let mut unknown = BaseCommand {
        r#type: 999,
        ..BaseCommand::default()
    }
    .encode_to_vec();
    unknown.extend_from_slice(&[0xba, 0x3e, 0x02, b'h', b'i']); // field 999, 2 bytes
    broker.send_raw(&raw_frame(&unknown, &[])).await;
    // A MESSAGE for a consumer, a receipt and an error for a producer, that
    // nobody registered.
    let stray = Frame {
        command: message_command(77, 1),
        payload: Some(Payload {
            broker_entry_metadata: None,
            checksum: Checksum::Valid,
            metadata: proto::MessageMetadata::default(),
            data: Bytes::from_static(b"stray"),
        }),
    };
    broker.send_frame(stray).await;
    broker.send(answer::receipt(78, 5)).await;
    let id = crate::common::fake_broker::request_id(&lookup);
    broker.send(answer::success(id + 1000)).await;
    // The connection is still up: the real answer arrives.
    broker
        .send(answer::lookup(
            id,
            proto::command_lookup_topic_response::LookupType::Connect,
            "pulsar://b:1",
            true,
        ))
        .await;
    let answer = guard("lookup", pending).await.expect("task");
    assert!(
        matches!(answer, Ok(Response::LookupResponse(_))),
        "{answer:?}"
    );
    assert!(!conn.is_closed());
}

/// A MESSAGE carrying `data` with `metadata` (checksum valid).
fn entry(consumer: u64, entry: u64, metadata: proto::MessageMetadata, data: Bytes) -> Frame {
    Frame {
        command: message_command(consumer, entry),
        payload: Some(Payload {
            broker_entry_metadata: None,
            checksum: Checksum::Valid,
            metadata,
            data,
        }),
    }
}

fn batch_of(texts: &[&str]) -> Bytes {
    let mut out = BytesMut::new();
    for text in texts {
        let meta = SingleMessageMetadata {
            payload_size: text.len() as i32,
            ..SingleMessageMetadata::default()
        };
        batch::write_member(&meta, text.as_bytes(), &mut out);
    }
    out.freeze()
}

fn meta(batch: Option<i32>, codec: i32, uncompressed: Option<u32>) -> proto::MessageMetadata {
    proto::MessageMetadata {
        producer_name: "p".into(),
        publish_time: 1,
        num_messages_in_batch: batch,
        compression: Some(codec),
        uncompressed_size: uncompressed,
        ..proto::MessageMetadata::default()
    }
}

/// An entry whose metadata lies, with the validation error the consumer
/// must report and the permits it gives back.
type LyingEntry = (
    &'static str,
    proto::MessageMetadata,
    Bytes,
    ValidationError,
    u32,
);

fn lying_entries() -> Vec<LyingEntry> {
    let lz4 = Compression::Lz4 as i32;
    let text = b"hello hello hello hello hello hello".to_vec();
    let packed = Compression::Lz4.compress(&text).expect("compress");
    let real = text.len() as u32;
    // 64 MiB of zeros, a few KiB compressed, announced as 1 KiB.
    let bomb = Compression::Zlib
        .compress(&vec![0u8; 64 * MIB])
        .expect("compress");
    assert!(bomb.len() < 128 * 1024, "bomb of {} bytes", bomb.len());
    use ValidationError::{BatchDeSerializeError, DecompressionError, UncompressedSizeCorruption};
    vec![
        (
            "batch count too high",
            meta(Some(5), 0, None),
            batch_of(&["a", "b"]),
            BatchDeSerializeError,
            5,
        ),
        (
            "batch count too low",
            meta(Some(1), 0, None),
            batch_of(&["a", "b"]),
            BatchDeSerializeError,
            1,
        ),
        (
            "size too small",
            meta(None, lz4, Some(real - 1)),
            packed.clone(),
            UncompressedSizeCorruption,
            1,
        ),
        (
            "size too large",
            meta(None, lz4, Some(real + 1)),
            packed.clone(),
            UncompressedSizeCorruption,
            1,
        ),
        (
            "size over the limit",
            meta(None, lz4, Some(u32::MAX)),
            packed,
            UncompressedSizeCorruption,
            1,
        ),
        (
            "bomb",
            meta(None, Compression::Zlib as i32, Some(1024)),
            bomb.clone(),
            UncompressedSizeCorruption,
            1,
        ),
        (
            "bomb, honest size",
            meta(None, Compression::Zlib as i32, Some(64 * MIB as u32)),
            bomb,
            UncompressedSizeCorruption,
            1,
        ),
        (
            "unknown codec",
            meta(None, 99, Some(4)),
            Bytes::from_static(b"abcd"),
            DecompressionError,
            1,
        ),
    ]
}

#[tokio::test(start_paused = true)]
async fn lying_batch_and_compression_metadata_is_reported_and_the_connection_stays() {
    let net = FakeNetwork::new();
    guard("lying entries", async {
        let (mut consumer, mut broker, id) = subscribed(&net, SubscriptionType::Shared).await;
        for (n, (what, metadata, data, error, permits)) in lying_entries().into_iter().enumerate() {
            let entry_id = 10 + n as u64;
            let ((), largest) = largest_allocation(async {
                broker.send_frame(entry(id, entry_id, metadata, data)).await;
                let ack = broker.expect(Type::Ack).await;
                let body = ack.command.ack.as_ref().expect("body");
                assert_eq!(body.validation_error, Some(error as i32), "{what}");
                assert_eq!(body.message_id[0].entry_id, entry_id, "{what}");
                let flow = broker.expect(Type::Flow).await;
                let granted = flow.command.flow.as_ref().map(|f| f.message_permits);
                assert_eq!(granted, Some(permits), "{what}: permits back");
            })
            .await;
            assert!(
                largest < 2 * MIB,
                "{what}: an allocation of {largest} bytes"
            );
        }
        broker
            .send_frame(message(id, 99, "after", Checksum::Valid))
            .await;
        let m = consumer.receive().await.expect("the good one");
        assert_eq!(m.id(), MessageId::new(1, 99));
        assert!(
            consumer.try_receive().await.expect("open").is_none(),
            "no lie got through"
        );
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_corrupt_frame_drops_the_connection_and_the_consumer_subscribes_again() {
    let net = FakeNetwork::new();
    guard("resubscribe after a corrupt frame", async {
        let (mut consumer, mut broker, id) = subscribed(&net, SubscriptionType::Shared).await;
        let mut svc = net.listen(SERVICE);
        let corrupt = message_command(id, 1).encode_to_vec();
        broker
            .send_raw(&raw_frame(&corrupt, &[0x0e, 0x09, 1, 2, 3, 4]))
            .await;
        broker.until_closed().await;

        let mut again = svc.accept().await;
        again.handshake().await;
        let fresh = attach(&mut again).await;
        again
            .send_frame(message(fresh, 2, "after", Checksum::Valid))
            .await;
        let m = consumer.receive().await.expect("after resubscribing");
        assert_eq!(m.id(), MessageId::new(1, 2));
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_receipt_for_a_sequence_id_never_sent_is_ignored() {
    guard("stray receipt", async {
        let (producer, mut broker) = producer(None, -1).await;
        // Nothing is in flight: receipts for sequence ids never used.
        for sequence in [0, 7, u64::MAX] {
            broker.send(answer::receipt(0, sequence)).await;
        }
        let receipt = producer.send("x").await.expect("queued");
        let (id, sequence) = send_of(&broker.expect(Type::Send).await);
        assert_eq!(sequence, 0, "the stray receipts did not move the sequence");
        broker.send(answer::receipt(id, sequence)).await;
        receipt.await.expect("confirmed");
    })
    .await;
}

/// Issue 5: a batch redelivered with the broker's `ack_set` (members acked
/// before are left out) is acked as an entry once the delivered members are.
#[tokio::test(start_paused = true)]
async fn a_batch_redelivered_with_an_ack_set_is_acked_once_its_delivered_members_are() {
    let net = FakeNetwork::new();
    guard("ack set", async {
        let (mut consumer, mut broker, id) =
            subscribed_with(&net, |b| b.subscription_type(SubscriptionType::Shared)).await;
        let mut frame = entry(
            id,
            5,
            meta(Some(4), 0, None),
            batch_of(&["a", "b", "c", "d"]),
        );
        let body = frame.command.message.as_mut().expect("body");
        body.redelivery_count = Some(1);
        body.ack_set = vec![0b1010]; // members 1 and 3 still unacked
        broker.send_frame(frame).await;

        let flow = broker.expect(Type::Flow).await;
        let granted = flow.command.flow.as_ref().map(|f| f.message_permits);
        assert_eq!(granted, Some(2), "the skipped members' permits");
        let first = consumer.receive().await.expect("member 1");
        let second = consumer.receive().await.expect("member 3");
        let indexes = [first.id().batch_index, second.id().batch_index];
        assert_eq!(indexes, [1, 3]);
        consumer.ack(&first).await.expect("ack");
        consumer.ack(&second).await.expect("ack");

        let ack = broker.expect(Type::Ack).await;
        let body = ack.command.ack.as_ref().expect("body");
        let acked: Vec<_> = body.message_id.iter().map(MessageId::from_proto).collect();
        assert_eq!(acked, [MessageId::new(1, 5)], "the whole entry, once");
        assert!(body.message_id[0].ack_set.is_empty(), "{body:?}");
        assert_eq!(body.validation_error, None);
    })
    .await;
}
