//! Frame vectors checked by hand, malformed input, and stream splitting.
//! Property tests over every command type live in `proptests.rs`.

use bytes::{BufMut, Bytes, BytesMut};

use super::*;
use crate::ids::{ProducerId, SequenceId};
use crate::proto::base_command::Type;
use crate::proto::{BaseCommand, BrokerEntryMetadata, MessageMetadata};

fn decode_all(bytes: &[u8]) -> Result<Vec<Frame>, FrameError> {
    let mut buf = BytesMut::from(bytes);
    let mut frames = Vec::new();
    while let Some(frame) = decode(&mut buf, DEFAULT_MAX_FRAME_SIZE)? {
        frames.push(frame);
    }
    assert!(buf.is_empty(), "{} bytes left undecoded", buf.len());
    Ok(frames)
}

/// PING, by hand: BaseCommand { type (field 1, varint) = 18, ping (field 18,
/// length-delimited) = {} } is `08 12` + `92 01 00` (tag 18<<3|2 = 146 as a
/// varint), 5 bytes; total size = 4 + 5.
const PING_FRAME: [u8; 13] = [0, 0, 0, 9, 0, 0, 0, 5, 0x08, 0x12, 0x92, 0x01, 0x00];

#[test]
fn ping_frame_matches_the_hand_encoded_vector() {
    let mut buf = BytesMut::new();
    encode_command(&commands::ping(), &mut buf).unwrap();
    assert_eq!(&buf[..], &PING_FRAME);
    let frames = decode_all(&PING_FRAME).unwrap();
    assert_eq!(frames[0].command.r#type(), Type::Ping);
    assert!(frames[0].payload.is_none());
}

/// SEND { producer_id 1, sequence_id 2 } with metadata { producer_name "p",
/// sequence_id 2, publish_time 3 } and payload "hi", by hand:
/// command  `08 06 | 32 04 | 08 01 10 02` (type 6; field 6 = 4 bytes)
/// metadata `0a 01 70 | 10 02 | 18 03` (7 bytes)
/// crc32c over `00 00 00 07` + metadata + `68 69` = 0x41955213 (computed with
/// an independent bitwise CRC-32C, polynomial 0x82F63B78).
const SEND_FRAME: [u8; 35] = [
    0, 0, 0, 31, // total: 4 + 8 + 2 + 4 + 4 + 7 + 2
    0, 0, 0, 8, // command size
    0x08, 0x06, 0x32, 0x04, 0x08, 0x01, 0x10, 0x02, // BaseCommand
    0x0e, 0x01, // magic
    0x41, 0x95, 0x52, 0x13, // crc32c
    0, 0, 0, 7, // metadata size
    0x0a, 0x01, 0x70, 0x10, 0x02, 0x18, 0x03, // MessageMetadata
    0x68, 0x69, // payload
];

fn send_metadata() -> MessageMetadata {
    MessageMetadata {
        producer_name: "p".into(),
        sequence_id: 2,
        publish_time: 3,
        ..MessageMetadata::default()
    }
}

#[test]
fn send_frame_matches_the_hand_encoded_vector() {
    let command = commands::send(ProducerId(1), SequenceId(2), 1);
    let mut buf = BytesMut::new();
    encode_payload(&command, &send_metadata(), b"hi", &mut buf).unwrap();
    assert_eq!(&buf[..], &SEND_FRAME);

    let frame = decode_all(&SEND_FRAME).unwrap().remove(0);
    let payload = frame.payload.expect("payload");
    assert_eq!(payload.checksum, Checksum::Valid);
    assert_eq!(payload.metadata, send_metadata());
    assert_eq!(payload.data, Bytes::from_static(b"hi"));
}

#[test]
fn zero_copy_head_plus_payload_is_the_same_send_vector() {
    let command = commands::send(ProducerId(1), SequenceId(2), 1);
    let mut head = BytesMut::new();
    encode_payload_head(&command, &send_metadata(), b"hi", &mut head).unwrap();
    assert_eq!([&head[..], b"hi"].concat(), SEND_FRAME);
}

#[test]
fn a_flipped_payload_bit_is_reported_per_message_not_as_an_error() {
    let mut bytes = SEND_FRAME;
    bytes[34] ^= 0x01;
    let frame = decode_all(&bytes).unwrap().remove(0);
    let payload = frame.payload.unwrap();
    assert_eq!(
        payload.checksum,
        Checksum::Mismatch {
            carried: 0x4195_5213,
            computed: crate::wire::checksum::crc32c(&[&bytes[22..]]),
        }
    );
    assert_eq!(payload.data, Bytes::from_static(b"hh"));
}

/// The same SEND without the `0x0e01` section, as pulsar-lite sends MESSAGE frames.
fn without_checksum() -> Vec<u8> {
    let mut bytes = SEND_FRAME.to_vec();
    bytes.drain(16..22);
    bytes[3] -= 6;
    bytes
}

#[test]
fn payload_without_magic_and_checksum_is_accepted() {
    let frame = decode_all(&without_checksum()).unwrap().remove(0);
    let payload = frame.payload.unwrap();
    assert_eq!(payload.checksum, Checksum::Absent);
    assert_eq!(payload.metadata, send_metadata());
    assert_eq!(payload.data, Bytes::from_static(b"hi"));
}

#[test]
fn broker_entry_metadata_prefix_is_parsed_and_round_trips() {
    let entry = BrokerEntryMetadata {
        broker_timestamp: Some(1_700_000_000_000),
        index: Some(41),
    };
    let frame = Frame {
        command: commands::send(ProducerId(1), SequenceId(2), 1),
        payload: Some(Box::new(Payload {
            broker_entry_metadata: Some(entry),
            checksum: Checksum::Valid,
            metadata: send_metadata(),
            data: Bytes::from_static(b"hi"),
        })),
    };
    let mut buf = BytesMut::new();
    encode(&frame, &mut buf).unwrap();
    assert_eq!(buf.len(), encoded_len(&frame));
    assert_eq!(&buf[16..18], &[0x0e, 0x02]);
    assert_eq!(decode_all(&buf).unwrap(), vec![frame]);
}

#[test]
fn every_split_of_a_stream_yields_the_same_frames() {
    let stream: Vec<u8> = [
        &PING_FRAME[..],
        &SEND_FRAME,
        &without_checksum(),
        &PING_FRAME,
    ]
    .concat();
    let whole = decode_all(&stream).unwrap();
    assert_eq!(whole.len(), 4);
    for cut in 0..stream.len() {
        let mut buf = BytesMut::new();
        let mut frames = Vec::new();
        for chunk in [&stream[..cut], &stream[cut..]] {
            buf.extend_from_slice(chunk);
            while let Some(f) = decode(&mut buf, DEFAULT_MAX_FRAME_SIZE).unwrap() {
                frames.push(f);
            }
        }
        assert_eq!(frames, whole, "split at {cut}");
    }
}

fn decode_err(bytes: &[u8], max: usize) -> FrameError {
    decode(&mut BytesMut::from(bytes), max).expect_err("should be rejected")
}

#[test]
fn oversized_frame_is_refused_before_buffering_it() {
    let mut buf = BytesMut::from(&[0x7f, 0xff, 0xff, 0xff][..]);
    let err = decode(&mut buf, DEFAULT_MAX_FRAME_SIZE).unwrap_err();
    assert!(matches!(err, FrameError::TooLarge { size, max }
        if size == 0x7fff_ffff + 4 && max == DEFAULT_MAX_FRAME_SIZE));
    assert!(buf.capacity() < 64, "allocated {} bytes", buf.capacity());
    // The limit counts the size field: a frame of exactly `max` bytes passes.
    assert!(
        decode(&mut BytesMut::from(&PING_FRAME[..]), 13)
            .unwrap()
            .is_some()
    );
    assert!(matches!(
        decode_err(&PING_FRAME, 12),
        FrameError::TooLarge { size: 13, max: 12 }
    ));
}

#[test]
fn sizes_that_contradict_each_other_are_typed_errors() {
    assert!(matches!(
        decode_err(&[0, 0, 0, 3, 0, 0, 0], 100),
        FrameError::TooShort { total: 3 }
    ));
    let lying_command = [0, 0, 0, 6, 0, 0, 0, 9, 0x08, 0x12];
    assert!(matches!(
        decode_err(&lying_command, 100),
        FrameError::CommandSizeExceedsFrame {
            command_size: 9,
            available: 2
        }
    ));
    let mut lying_metadata = SEND_FRAME;
    lying_metadata[25] = 200; // metadata size
    assert!(matches!(
        decode_err(&lying_metadata, 100),
        FrameError::SectionExceedsFrame {
            what: "message metadata",
            size: 200,
            ..
        }
    ));
}

#[test]
fn unknown_magic_is_a_typed_error() {
    let mut bytes = SEND_FRAME;
    bytes[17] = 0x07;
    assert!(matches!(
        decode_err(&bytes, 100),
        FrameError::BadMagic { found: 0x0e07 }
    ));
}

#[test]
fn truncated_protobuf_is_a_typed_error() {
    // BaseCommand whose `send` field announces 4 bytes but holds 2.
    let bytes = [0, 0, 0, 10, 0, 0, 0, 6, 0x08, 0x06, 0x32, 0x04, 0x08, 0x01];
    assert!(matches!(
        decode_err(&bytes, 100),
        FrameError::Protobuf {
            what: "BaseCommand",
            ..
        }
    ));
    let mut bad_metadata = SEND_FRAME;
    bad_metadata[27] = 0x7f; // producer_name length past the metadata's end
    assert!(matches!(
        decode_err(&bad_metadata, 100),
        FrameError::Protobuf {
            what: "MessageMetadata",
            ..
        }
    ));
}

#[test]
fn missing_sub_message_is_a_typed_error() {
    // type = SEND (6) and nothing else.
    let bytes = [0, 0, 0, 6, 0, 0, 0, 2, 0x08, 0x06];
    assert!(matches!(
        decode_err(&bytes, 100),
        FrameError::MissingSubMessage {
            command: Type::Send
        }
    ));
}

#[test]
fn an_unknown_command_type_decodes_and_keeps_its_number() {
    // type = 999 (varint 0xe7 0x07), from a protocol newer than ours.
    let bytes = [0, 0, 0, 7, 0, 0, 0, 3, 0x08, 0xe7, 0x07];
    let frame = decode(&mut BytesMut::from(&bytes[..]), 100)
        .unwrap()
        .expect("a whole frame");
    assert_eq!(frame.command.r#type, 999);
}

#[test]
fn payload_after_a_command_that_never_has_one_is_refused() {
    let mut bytes = BytesMut::new();
    encode_command(&commands::ping(), &mut bytes).unwrap();
    bytes.put_slice(&[0, 0, 0, 0]);
    bytes[3] += 4;
    assert!(matches!(
        decode_err(&bytes, 100),
        FrameError::UnexpectedPayload {
            command: Type::Ping
        }
    ));
}

#[test]
fn base_command_stays_small() {
    // Boxed sub-commands (build.rs): the envelope must not be KiB-sized.
    assert!(
        std::mem::size_of::<BaseCommand>() <= 512,
        "{}",
        std::mem::size_of::<BaseCommand>()
    );
}
