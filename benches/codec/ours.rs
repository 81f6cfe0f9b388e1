//! The cases of the codec benches and pulsar-wire's rows for each: encode
//! of SEND, decode of MESSAGE (single and batched, with the batch split),
//! the small commands, and crc32c alone over the same bytes (the floor).

use std::hint::black_box;

use bytes::{Bytes, BytesMut};
use criterion::{BenchmarkGroup, BenchmarkId};
use pulsar_wire::MessageId;
use pulsar_wire::ids::{ConsumerId, ProducerId, SequenceId};
use pulsar_wire::proto::base_command::Type;
use pulsar_wire::proto::command_ack::AckType;
use pulsar_wire::proto::{self, BaseCommand, MessageMetadata, SingleMessageMetadata};
use pulsar_wire::wire::{self, Checksum, Frame, Payload, batch, checksum, commands};

use crate::cpu::{ThreadCpu, chunk_for, time_decode};

const MAX: usize = wire::DEFAULT_MAX_FRAME_SIZE;

/// A SEND of one message of `label`'s size.
pub(crate) struct SendCase {
    pub(crate) label: &'static str,
    pub(crate) command: BaseCommand,
    pub(crate) metadata: MessageMetadata,
    pub(crate) data: Bytes,
    /// The whole frame as pulsar-wire encodes it.
    pub(crate) encoded: Bytes,
}

/// SENDs of 100 B, 1 KiB and 64 KiB.
pub(crate) fn send_cases() -> Vec<SendCase> {
    [("100B", 100), ("1KiB", 1024), ("64KiB", 64 * 1024)]
        .into_iter()
        .map(|(label, size)| {
            let data = Bytes::from(vec![b'p'; size]);
            let command = commands::send(ProducerId(1), SequenceId(9), 1);
            let metadata = metadata(9);
            let mut encoded = BytesMut::new();
            wire::encode_payload(&command, &metadata, &data, &mut encoded).expect("encode");
            SendCase {
                label,
                command,
                metadata,
                data,
                encoded: encoded.freeze(),
            }
        })
        .collect()
}

/// pulsar-wire's encode of `case`: into one buffer, zero-copy (the head
/// alone, as the connection's data lane writes it), and the crc32c floor.
pub(crate) fn send_rows(group: &mut BenchmarkGroup<'_, ThreadCpu>, case: &SendCase) {
    let SendCase {
        label,
        command,
        metadata,
        data,
        encoded,
    } = case;
    let mut dst = BytesMut::with_capacity(2 * encoded.len());
    group.bench_function(BenchmarkId::new("pulsar-wire", label), |b| {
        b.iter(|| {
            dst.clear();
            wire::encode_payload(black_box(command), metadata, data, &mut dst).expect("encode");
            black_box(&dst);
        })
    });

    // Zero-copy, what the connection's data lane does: the head goes in
    // `dst`, the payload stays where it is (the connection writes both
    // with one vectored write).
    let frame = Frame {
        command: command.clone(),
        payload: Some(Box::new(Payload {
            broker_entry_metadata: None,
            checksum: Checksum::Valid,
            metadata: metadata.clone(),
            data: data.clone(),
        })),
    };
    group.bench_function(BenchmarkId::new("pulsar-wire-zero-copy", label), |b| {
        b.iter(|| {
            dst.clear();
            wire::encode_head(black_box(&frame), &mut dst).expect("encode");
            black_box((&dst, &frame));
        })
    });

    let covered = &encoded[encoded.len() - covered_len(encoded)..];
    crc32c_floor(group, label, covered);
}

/// A MESSAGE frame of `label`'s kind, with its batch's member count.
pub(crate) struct DecodeCase {
    pub(crate) label: &'static str,
    pub(crate) bytes: Bytes,
    pub(crate) members: usize,
}

/// MESSAGEs of 1 KiB, 64 KiB, and a batch of 100 members of 100 B.
pub(crate) fn decode_cases() -> Vec<DecodeCase> {
    let single = |size: usize| message_frame(metadata(1), Bytes::from(vec![b'm'; size]));
    let (batch_meta, batch_data) = batch_of(100, 100);
    vec![
        DecodeCase {
            label: "1KiB",
            bytes: single(1024),
            members: 1,
        },
        DecodeCase {
            label: "64KiB",
            bytes: single(64 * 1024),
            members: 1,
        },
        DecodeCase {
            label: "batch100x100B",
            bytes: message_frame(batch_meta, batch_data),
            members: 100,
        },
    ]
}

/// pulsar-wire's decode of `case`, its split into members for a batch, and
/// the crc32c floor.
pub(crate) fn decode_rows(group: &mut BenchmarkGroup<'_, ThreadCpu>, case: &DecodeCase) {
    let DecodeCase {
        label,
        bytes,
        members,
    } = case;
    // Decode alone, the same work as another codec's decode.
    group.bench_function(BenchmarkId::new("pulsar-wire", label), |b| {
        time_decode(b, bytes, chunk_for(bytes), |buf| {
            wire::decode(buf, MAX).expect("decode").expect("whole")
        })
    });
    if *members > 1 {
        // Decode and split into members: what a consumer must do.
        group.bench_function(BenchmarkId::new("pulsar-wire-split", label), |b| {
            // Four batches at a time: their members' vectors stay in
            // memory the allocator keeps.
            time_decode(b, bytes, 4, |buf| {
                let frame = wire::decode(buf, MAX).expect("decode").expect("whole");
                let payload = frame.payload.expect("payload");
                // As the consumer does: room for the announced count.
                let mut split = Vec::with_capacity(*members);
                for member in batch::members(payload.data.clone(), *members as i32) {
                    split.push(member.expect("member"));
                }
                (payload, split) // dropped outside the timing
            })
        });
    }
    let covered = &bytes[bytes.len() - covered_len(bytes)..];
    crc32c_floor(group, label, covered);
}

/// A small command, encoded.
pub(crate) struct SmallCase {
    pub(crate) label: &'static str,
    pub(crate) command: BaseCommand,
    pub(crate) encoded: Bytes,
}

/// ACK, FLOW and PING.
pub(crate) fn small_cases() -> Vec<SmallCase> {
    let ack = commands::ack(
        ConsumerId(3),
        [MessageId::new(7, 42).to_proto()],
        AckType::Individual,
        None,
    );
    [
        ("ACK", ack),
        ("FLOW", commands::flow(ConsumerId(3), 500)),
        ("PING", commands::ping()),
    ]
    .into_iter()
    .map(|(label, command)| {
        let mut encoded = BytesMut::new();
        wire::encode_command(&command, &mut encoded).expect("encode");
        SmallCase {
            label,
            command,
            encoded: encoded.freeze(),
        }
    })
    .collect()
}

/// pulsar-wire's encode and decode of a small command.
pub(crate) fn small_rows(group: &mut BenchmarkGroup<'_, ThreadCpu>, case: &SmallCase) {
    let mut dst = BytesMut::with_capacity(256);
    group.bench_function(BenchmarkId::new("pulsar-wire/encode", case.label), |b| {
        b.iter(|| {
            dst.clear();
            wire::encode_command(black_box(&case.command), &mut dst).expect("encode");
        })
    });
    group.bench_function(BenchmarkId::new("pulsar-wire/decode", case.label), |b| {
        time_decode(b, &case.encoded, chunk_for(&case.encoded), |buf| {
            wire::decode(buf, MAX).expect("decode")
        })
    });
}

/// crc32c alone over the bytes a frame's checksum covers.
fn crc32c_floor(group: &mut BenchmarkGroup<'_, ThreadCpu>, label: &str, covered: &[u8]) {
    group.bench_function(BenchmarkId::new("crc32c-floor", label), |b| {
        b.iter(|| black_box(checksum::crc32c(&[black_box(covered)])))
    });
}

fn metadata(sequence_id: u64) -> MessageMetadata {
    MessageMetadata {
        producer_name: "bench-producer".into(),
        sequence_id,
        publish_time: 1_700_000_000_000,
        ..MessageMetadata::default()
    }
}

/// A MESSAGE frame as Apache Pulsar sends it (with magic and crc32c).
fn message_frame(metadata: MessageMetadata, data: Bytes) -> Bytes {
    let command = BaseCommand {
        r#type: Type::Message as i32,
        message: Some(Box::new(proto::CommandMessage {
            consumer_id: 1,
            message_id: MessageId::new(7, 42).to_proto(),
            ..proto::CommandMessage::default()
        })),
        ..BaseCommand::default()
    };
    let frame = Frame {
        command,
        payload: Some(Box::new(Payload {
            broker_entry_metadata: None,
            checksum: Checksum::Valid,
            metadata,
            data,
        })),
    };
    let mut buf = BytesMut::new();
    wire::encode(&frame, &mut buf).expect("encode");
    buf.freeze()
}

fn batch_of(count: usize, size: usize) -> (MessageMetadata, Bytes) {
    let mut payload = BytesMut::new();
    let body = vec![b'x'; size];
    for i in 0..count {
        let member = SingleMessageMetadata {
            payload_size: size as i32,
            sequence_id: Some(i as u64),
            ..SingleMessageMetadata::default()
        };
        batch::write_member(&member, &body, &mut payload);
    }
    let meta = MessageMetadata {
        num_messages_in_batch: Some(count as i32),
        ..metadata(0)
    };
    (meta, payload.freeze())
}

/// Bytes covered by the checksum of an encoded payload frame.
fn covered_len(frame: &Bytes) -> usize {
    let decoded = wire::decode(&mut BytesMut::from(&frame[..]), MAX)
        .expect("decode")
        .expect("whole");
    let payload = decoded.payload.expect("payload");
    4 + prost::Message::encoded_len(&payload.metadata) + payload.data.len()
}
