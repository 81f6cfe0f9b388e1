//! Hostile entries (see `hostile.rs` for the stream): lying batch counts
//! and uncompressed sizes, a decompression bomb (an unknown codec is in
//! `unreadable.rs`: never acked); a
//! corrupt frame that makes the consumer subscribe again; receipts for
//! sequence ids never sent; and a batch redelivered with an `ack_set`.

use bytes::{Bytes, BytesMut};
use prost::Message as _;
use pulsar_wire::MessageId;
use pulsar_wire::compression::Compression;
use pulsar_wire::consumer::SubscriptionType;
use pulsar_wire::proto::base_command::Type;
use pulsar_wire::proto::command_ack::ValidationError;
use pulsar_wire::proto::{self, SingleMessageMetadata};
use pulsar_wire::wire::{Checksum, Frame, Payload, batch};

use super::consume::{SERVICE, attach, message, subscribed, subscribed_with};
use super::hostile::{MIB, largest_allocation, message_command, raw_frame};
use super::produce::{producer, send_of};
use crate::common::fake_broker::{FakeNetwork, answer};
use crate::common::guard;

/// A MESSAGE carrying `data` with `metadata` (checksum valid).
pub(super) fn entry(
    consumer: u64,
    entry: u64,
    metadata: proto::MessageMetadata,
    data: Bytes,
) -> Frame {
    Frame {
        command: message_command(consumer, entry),
        payload: Some(Box::new(Payload {
            broker_entry_metadata: None,
            checksum: Checksum::Valid,
            metadata,
            data,
        })),
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

pub(super) fn meta(
    batch: Option<i32>,
    codec: i32,
    uncompressed: Option<u32>,
) -> proto::MessageMetadata {
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
    // 65 MiB of zeros (over the default memory limit, the most a message
    // may take decompressed), a few KiB compressed, announced as 1 KiB.
    let bomb = Compression::Zlib
        .compress(&vec![0u8; 65 * MIB])
        .expect("compress");
    assert!(bomb.len() < 128 * 1024, "bomb of {} bytes", bomb.len());
    // A zstd frame of one raw 10-byte block whose header asks for a 96 MiB
    // window (19 bytes in all), and two honest frames back to back.
    let big_window = zstd_raw_frame(WINDOW_96_MIB, b"0123456789");
    let zstd = Compression::Zstd as i32;
    let one = Compression::Zstd.compress(b"abcde").expect("compress");
    let tiny = Compression::Lz4.compress(b"0123456789").expect("compress");
    use ValidationError::{BatchDeSerializeError, DecompressionError, UncompressedSizeCorruption};
    vec![
        (
            "4 MiB announced by 30 bytes",
            meta(None, lz4, Some(4 * MIB as u32)),
            tiny,
            UncompressedSizeCorruption,
            1,
        ),
        (
            "zstd window of 96 MiB",
            meta(None, zstd, Some(10)),
            big_window.into(),
            DecompressionError,
            1,
        ),
        (
            "two zstd frames",
            meta(None, zstd, Some(10)),
            [&one[..], &one[..]].concat().into(),
            DecompressionError,
            1,
        ),
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
            meta(None, Compression::Zlib as i32, Some(65 * MIB as u32)),
            bomb,
            UncompressedSizeCorruption,
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

/// The zstd window descriptor of 96 MiB: 2^(10 + 16) + 4 * 2^23.
const WINDOW_96_MIB: u8 = (16 << 3) | 4;

/// A zstd frame of one raw (uncompressed) block holding `data` (under
/// 2 MiB), whose header asks for the window `window_descriptor` encodes
/// (RFC 8878, 3.1.1.1.2): a 19-byte frame can ask for 96 MiB.
fn zstd_raw_frame(window_descriptor: u8, data: &[u8]) -> Vec<u8> {
    let block = ((data.len() as u32) << 3) | 1; // last block, raw
    [
        &0xFD2F_B528_u32.to_le_bytes()[..],
        &[0x00, window_descriptor],
        &block.to_le_bytes()[..3],
        data,
    ]
    .concat()
}
