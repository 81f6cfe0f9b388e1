//! Hostile input from the network: a scripted broker that lies about
//! lengths, writes bad magic, breaks checksums, batches and compression,
//! sends a decompression bomb, unknown commands, commands without their
//! body, and frames for ids nobody registered. This file: the stream
//! itself; `hostile_entries.rs`: bad entries, a resubscribe after a corrupt
//! frame, stray receipts, a redelivery with an `ack_set`.
//!
//! The rule under test: each gives a typed error or a logged ignore, with
//! bounded memory and no panic; where the byte stream can no longer be
//! trusted the connection is closed (every waiter sees the typed error) and
//! a consumer subscribes again on a fresh one. Memory is checked with an
//! allocation probe on this test's thread (the runtime is current-thread,
//! so the client's tasks run here too) while the hostile input is handled:
//! the largest single allocation, or the most heap held at once.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::{BufMut, Bytes, BytesMut};
use prost::Message as _;
use pulsar_wire::MessageId;
use pulsar_wire::connection::{Connection, ConnectionError, ConnectionOptions, Response};
use pulsar_wire::proto::base_command::Type;
use pulsar_wire::proto::{self, BaseCommand};
use pulsar_wire::wire::{Checksum, Frame, FrameError, Payload, commands};

use crate::common::fake_broker::{FakeBroker, answer};
use crate::common::{guard, init_tracing};

/// Remembers, per thread, the largest allocation and the most heap held
/// at once (what the thread allocated less what it freed).
struct Probe;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

/// An allocation of `size` bytes that took `grown` more bytes of heap
/// (negative: gave some back).
fn note(size: usize, grown: isize) {
    let _ = LARGEST.try_with(|largest| largest.set(largest.get().max(size)));
    let live = LIVE.try_with(|live| {
        live.set(live.get().saturating_add(grown));
        live.get()
    });
    if let Ok(live) = live {
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(live)));
    }
}

/// The bytes allocated on this thread and not freed since (freed on
/// another thread, they count on neither; a current-thread runtime runs
/// the client's tasks on the test's thread, so their memory counts).
pub(super) fn live_bytes() -> isize {
    LIVE.with(Cell::get)
}

fn signed(size: usize) -> isize {
    isize::try_from(size).unwrap_or(isize::MAX)
}

// SAFETY: every call is passed on to the system allocator unchanged.
unsafe impl GlobalAlloc for Probe {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size(), signed(layout.size()));
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size(), signed(layout.size()));
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size, signed(new_size) - signed(layout.size()));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note(0, -signed(layout.size()));
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static PROBE: Probe = Probe;

/// Runs `f` and returns its output with the largest single allocation made
/// on this thread meanwhile.
pub(super) async fn largest_allocation<F: std::future::Future>(f: F) -> (F::Output, usize) {
    LARGEST.with(|l| l.set(0));
    let out = f.await;
    (out, LARGEST.with(Cell::get))
}

/// Runs `f` and returns its output with the most heap this thread held at
/// once meanwhile, above what it held when `f` started.
pub(super) async fn peak_heap<F: std::future::Future>(f: F) -> (F::Output, usize) {
    let start = LIVE.with(Cell::get);
    PEAK.with(|peak| peak.set(start));
    let out = f.await;
    let peak = PEAK.with(Cell::get);
    (out, usize::try_from(peak - start).unwrap_or(0))
}

pub(super) const MIB: usize = 1 << 20;

async fn connected() -> (Connection, FakeBroker) {
    init_tracing();
    let (io, mut broker) = FakeBroker::pair();
    let options = ConnectionOptions::default();
    let (conn, ()) = tokio::join!(Connection::connect(io, options), broker.handshake());
    (conn.expect("handshake"), broker)
}

/// A LOOKUP for `t` waiting for its answer in a task of its own.
fn spawn_lookup(conn: &Connection) -> tokio::task::JoinHandle<Result<Response, ConnectionError>> {
    let conn = conn.clone();
    tokio::spawn(async move {
        conn.request("LOOKUP", |id| commands::lookup("t", id, false))
            .await
    })
}

/// `[total][command_size][command][tail]` with honest sizes around `tail`.
pub(super) fn raw_frame(command: &[u8], tail: &[u8]) -> Vec<u8> {
    let mut out = BytesMut::new();
    out.put_u32((4 + command.len() + tail.len()) as u32);
    out.put_u32(command.len() as u32);
    out.put_slice(command);
    out.put_slice(tail);
    out.to_vec()
}

pub(super) fn message_command(consumer: u64, entry: u64) -> BaseCommand {
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
        let pending = spawn_lookup(&conn);
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
async fn a_huge_frame_within_a_raised_limit_reserves_nothing_before_its_bytes_come() {
    init_tracing();
    let (io, mut broker) = FakeBroker::pair();
    // The client takes messages up to 2 GiB and the broker raises its limit to that...
    let options = ConnectionOptions::default().max_message_size(2048 * MIB);
    let (conn, ()) = tokio::join!(
        Connection::connect(io, options),
        broker.handshake_with(Some(i32::MAX))
    );
    let conn = conn.expect("handshake");
    let (err, largest) = largest_allocation(async {
        // ...announces a 1.5 GiB frame, sends 1 KiB of it and goes away.
        broker.send_raw(&(1536 * MIB as u32).to_be_bytes()).await;
        broker.send_raw(&[0; 1024]).await;
        drop(broker);
        guard("cut off", conn.closed()).await
    })
    .await;
    assert!(
        matches!(err, ConnectionError::Io(_) | ConnectionError::Disconnected),
        "{err:?}"
    );
    assert!(largest < 16 * MIB, "an allocation of {largest} bytes");
}

#[tokio::test(start_paused = true)]
async fn a_broker_cannot_raise_the_clients_frame_limit() {
    init_tracing();
    let (io, mut broker) = FakeBroker::pair();
    // The broker says it takes 2 GiB messages; the client keeps its 5 MiB.
    let (conn, ()) = tokio::join!(
        Connection::connect(io, ConnectionOptions::default()),
        broker.handshake_with(Some(i32::MAX))
    );
    let conn = conn.expect("handshake");
    assert_eq!(
        conn.max_message_size(),
        i32::MAX as usize,
        "what it may be sent"
    );
    assert_eq!(conn.max_receive_size(), 5 * MIB, "what it accepts");
    let (err, largest) = largest_allocation(async {
        broker.send_raw(&(64 * MIB as u32).to_be_bytes()).await;
        guard("over the limit", conn.closed()).await
    })
    .await;
    match &err {
        ConnectionError::Frame(e) => assert!(
            matches!(**e, FrameError::TooLarge { max, .. } if max == 5 * MIB + 10 * 1024),
            "{e:?}"
        ),
        other => panic!("{other:?}"),
    }
    assert!(largest < MIB, "an allocation of {largest} bytes");
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
async fn a_thousand_frames_for_unknown_ids_log_a_handful_of_warnings() {
    let (conn, mut broker) = connected().await;
    let ((), logs) = crate::common::capture_logs(async {
        for sequence in 0..1000 {
            broker.send(answer::receipt(78, sequence)).await;
        }
        // A request answered after them: all were handled by then.
        let pending = spawn_lookup(&conn);
        let lookup = broker.expect(Type::Lookup).await;
        let id = crate::common::fake_broker::request_id(&lookup);
        let found = answer::lookup(
            id,
            proto::command_lookup_topic_response::LookupType::Connect,
            "pulsar://b:1",
            true,
        );
        broker.send(found).await;
        guard("answer", pending)
            .await
            .expect("task")
            .expect("answer");
    })
    .await;
    let warnings = logs
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("unknown id"))
        .count();
    // At the 1st, 2nd, 4th, … 512th: ten.
    assert_eq!(warnings, 10, "{warnings} warnings");
}

#[tokio::test(start_paused = true)]
async fn unknown_command_types_and_frames_for_unknown_ids_are_ignored() {
    let (conn, mut broker) = connected().await;
    let pending = spawn_lookup(&conn);
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
        payload: Some(Box::new(Payload {
            broker_entry_metadata: None,
            checksum: Checksum::Valid,
            metadata: proto::MessageMetadata::default(),
            data: Bytes::from_static(b"stray"),
        })),
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
