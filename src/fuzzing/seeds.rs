//! The seed corpus, built with the crate's own encoder: one valid frame per
//! command type, payload frames (batched, each codec, broker entry
//! metadata), batches, compressed blocks, and consumer-core scripts.
//!
//! The files in `fuzz/corpus/<target>/` are these seeds (a test checks they
//! match; `PULSAR_WIRE_WRITE_SEEDS=1 cargo test --lib --features fuzzing
//! fuzzing` rewrites them) plus whatever inputs a fuzzing run found worth
//! keeping. `cargo test --lib --features fuzzing` replays every file
//! through its target.

use bytes::{BufMut, Bytes, BytesMut};
use prost::Message as _;

use crate::compression::{Compression, WINDOW_96_MIB, zstd_raw_frame};
use crate::ids::{ProducerId, SequenceId};
use crate::message_id::MessageId;
use crate::proto::{
    self, BaseCommand, BrokerEntryMetadata, MessageMetadata, SingleMessageMetadata,
    base_command::Type,
};
use crate::wire::{self, Checksum, Frame, Payload, batch, commands};

/// A MESSAGE command for `consumer` (what a broker sends; the client never
/// builds one, so `wire::commands` has no constructor for it).
pub(super) fn message_command(consumer: u64, id: MessageId) -> BaseCommand {
    BaseCommand {
        r#type: Type::Message as i32,
        message: Some(Box::new(proto::CommandMessage {
            consumer_id: consumer,
            message_id: id.to_proto(),
            ..proto::CommandMessage::default()
        })),
        ..BaseCommand::default()
    }
}

/// Every seed: `(target, file name, bytes)`.
pub fn seeds() -> Vec<(&'static str, String, Vec<u8>)> {
    let mut out = Vec::new();
    for (name, frame) in frames() {
        out.push((
            "frame_stream",
            format!("{name}.bin"),
            [&[0][..], &frame].concat(),
        ));
    }
    // Two frames fed in chunks of 1, 7 and 2 bytes.
    let ping = encoded(&Frame::simple(commands::ping()));
    let pair = [&[3, 1, 7, 2][..], &ping, &ping].concat();
    out.push(("frame_stream", "two_pings_chunked.bin".into(), pair));

    for (name, section) in payload_sections() {
        out.push((
            "payload",
            format!("{name}.bin"),
            [&[0][..], &section].concat(),
        ));
    }
    let (_, first) = payload_sections().swap_remove(0);
    let with_set = [&[1][..], &0b101_i64.to_be_bytes(), &first].concat();
    out.push(("payload", "batch_with_ack_set.bin".into(), with_set));

    out.push((
        "batch",
        "three_members.bin".into(),
        [&3_i32.to_be_bytes()[..], &members()].concat(),
    ));

    for (i, codec) in CODECS.iter().enumerate() {
        let packed = codec.compress(&sample()).expect("compresses");
        let len = (sample().len() as u32).to_be_bytes();
        let name = format!("{codec:?}.bin").to_lowercase();
        out.push(("decompress", name, [&[i as u8][..], &len, &packed].concat()));
    }

    for (name, payload) in hostile_compressed() {
        out.push(("decompress", format!("{name}.bin"), payload));
    }

    for (name, script) in super::consumer_core::scripts() {
        out.push(("consumer_core", format!("{name}.bin"), script));
    }
    out
}

/// Compressed payloads that must be refused before the decoder takes
/// memory on their word, as the `decompress` target reads them.
fn hostile_compressed() -> Vec<(&'static str, Vec<u8>)> {
    let zstd = CODECS
        .iter()
        .position(|c| *c == Compression::Zstd)
        .unwrap_or(2) as u8;
    let lz4 = CODECS
        .iter()
        .position(|c| *c == Compression::Lz4)
        .unwrap_or(0) as u8;
    let ten = 10u32.to_be_bytes();
    // One raw 10-byte block whose frame header asks for a 96 MiB window.
    let big_window = zstd_raw_frame(WINDOW_96_MIB, b"0123456789");
    let one = Compression::Zstd.compress(b"abcde").expect("compresses");
    let half_mib = (512u32 << 10).to_be_bytes();
    let tiny_lz4 = Compression::Lz4
        .compress(b"0123456789")
        .expect("compresses");
    vec![
        (
            "zstd_window_96_mib",
            [&[zstd][..], &ten, &big_window].concat(),
        ),
        ("zstd_two_frames", [&[zstd][..], &ten, &one, &one].concat()),
        (
            "lz4_announcing_512_kib",
            [&[lz4][..], &half_mib, &tiny_lz4].concat(),
        ),
    ]
}

const CODECS: [Compression; 4] = [
    Compression::Lz4,
    Compression::Zlib,
    Compression::Zstd,
    Compression::Snappy,
];

fn sample() -> Vec<u8> {
    b"pulsar-wire seed, pulsar-wire seed, pulsar-wire seed".to_vec()
}

fn encoded(frame: &Frame) -> Vec<u8> {
    let mut out = BytesMut::new();
    wire::encode(frame, &mut out).expect("encodes");
    out.to_vec()
}

/// One frame per command type (its sub-message present with default
/// fields), then payload frames.
fn frames() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for value in 0..=100 {
        let Ok(kind) = Type::try_from(value) else {
            continue;
        };
        // The sub-message field has the type's number: an empty one.
        let mut raw = BaseCommand {
            r#type: value,
            ..BaseCommand::default()
        }
        .encode_to_vec();
        prost::encoding::encode_key(
            value as u32,
            prost::encoding::WireType::LengthDelimited,
            &mut raw,
        );
        raw.push(0);
        let command = BaseCommand::decode(&raw[..]).expect("valid protobuf");
        let name = kind.as_str_name().to_lowercase();
        out.push((name, encoded(&Frame::simple(command))));
    }
    let send = commands::send(ProducerId(1), SequenceId(7), 1);
    let mut frame = BytesMut::new();
    wire::encode_payload(
        &send,
        &metadata(None, Compression::None),
        &sample(),
        &mut frame,
    )
    .expect("encodes");
    out.push(("send_with_payload".into(), frame.to_vec()));
    for (name, section) in payload_sections() {
        let head = encoded(&Frame::simple(message_command(3, MessageId::new(1, 2))));
        let mut frame = BytesMut::from(&head[..]);
        let total = (frame.len() - 4 + section.len()) as u32;
        frame[..4].copy_from_slice(&total.to_be_bytes());
        frame.put_slice(&section);
        out.push((format!("message_{name}"), frame.to_vec()));
    }
    out
}

fn metadata(batch: Option<i32>, codec: Compression) -> MessageMetadata {
    MessageMetadata {
        producer_name: "seed".into(),
        sequence_id: 7,
        publish_time: 1_700_000_000_000,
        num_messages_in_batch: batch,
        compression: (codec != Compression::None).then_some(codec.to_proto() as i32),
        ..MessageMetadata::default()
    }
}

/// A batch payload of three members with keys and properties.
fn members() -> Vec<u8> {
    let mut out = BytesMut::new();
    for (i, text) in ["one", "", "three"].iter().enumerate() {
        let meta = SingleMessageMetadata {
            payload_size: text.len() as i32,
            partition_key: Some(format!("k{i}")),
            properties: vec![proto::KeyValue {
                key: "i".into(),
                value: i.to_string(),
            }],
            event_time: Some(100 + i as u64),
            ..SingleMessageMetadata::default()
        };
        batch::write_member(&meta, text.as_bytes(), &mut out);
    }
    out.to_vec()
}

/// MESSAGE payload sections: a batch in each codec, a plain message with
/// broker entry metadata, one without checksum.
fn payload_sections() -> Vec<(String, Vec<u8>)> {
    let section = |payload: Payload| {
        let frame = encoded(&Frame {
            command: message_command(3, MessageId::new(1, 2)),
            payload: Some(Box::new(payload)),
        });
        let command = u32::from_be_bytes(frame[4..8].try_into().expect("4 bytes")) as usize;
        frame[8 + command..].to_vec()
    };
    let mut out = Vec::new();
    let batch = members();
    for codec in [Compression::None].iter().chain(&CODECS) {
        let mut meta = metadata(Some(3), *codec);
        if *codec != Compression::None {
            meta.uncompressed_size = Some(batch.len() as u32);
        }
        let data = codec.compress(&batch).expect("compresses");
        let name = format!("batch_{codec:?}").to_lowercase();
        out.push((name, section(plain(meta, data, Checksum::Valid))));
    }
    let mut entry = plain(
        metadata(None, Compression::None),
        sample().into(),
        Checksum::Valid,
    );
    entry.broker_entry_metadata = Some(BrokerEntryMetadata {
        broker_timestamp: Some(1_700_000_000_001),
        index: Some(41),
    });
    out.push(("plain_with_entry_metadata".into(), section(entry)));
    let bare = plain(
        metadata(None, Compression::None),
        sample().into(),
        Checksum::Absent,
    );
    out.push(("plain_without_checksum".into(), section(bare)));
    out
}

fn plain(metadata: MessageMetadata, data: Bytes, checksum: Checksum) -> Payload {
    Payload {
        broker_entry_metadata: None,
        checksum,
        metadata,
        data,
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    fn corpus() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus")
    }

    #[test]
    fn the_committed_seed_corpus_is_what_the_encoder_makes() {
        let write = std::env::var_os("PULSAR_WIRE_WRITE_SEEDS").is_some();
        for (target, name, bytes) in super::seeds() {
            let path = corpus().join(target).join(&name);
            if write {
                std::fs::create_dir_all(path.parent().expect("dir")).expect("mkdir");
                std::fs::write(&path, &bytes).expect("write");
            }
            let committed = std::fs::read(&path).unwrap_or_else(|e| {
                panic!(
                    "{}: {e} (PULSAR_WIRE_WRITE_SEEDS=1 writes the seeds)",
                    path.display()
                )
            });
            assert!(committed == bytes, "{} is stale", path.display());
        }
    }

    #[test]
    fn every_corpus_file_replays_through_its_target() {
        let mut replayed = 0;
        for dir in std::fs::read_dir(corpus()).expect("fuzz/corpus") {
            let dir = dir.expect("entry").path();
            if !dir.is_dir() {
                continue;
            }
            let target = dir
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .to_owned();
            let run: fn(&[u8]) = match target.as_str() {
                "frame_stream" => super::super::frame_stream,
                "payload" => super::super::payload,
                "batch" => super::super::batch,
                "decompress" => super::super::decompress,
                "consumer_core" => super::super::consumer_core,
                other => panic!("fuzz/corpus/{other}: no such target"),
            };
            for file in std::fs::read_dir(&dir).expect("target dir") {
                let bytes = std::fs::read(file.expect("entry").path()).expect("read");
                run(&bytes);
                replayed += 1;
            }
        }
        assert!(replayed >= 60, "only {replayed} corpus files");
    }
}
