//! Frames captured between the official client and real brokers
//! (`scripts/capture/`): pulsar-lite in `tests/data/captures/`, Apache
//! Pulsar 4.0.7 standalone in `tests/data/captures-apache/`. Our protocol
//! definitions must decode every frame, and re-encode it to the very same
//! bytes: a wrong field number or type, or a field we do not know, would
//! change the bytes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};
use pulsar_wire::MessageId;
use pulsar_wire::compression::Compression;
use pulsar_wire::proto::base_command::Type;
use pulsar_wire::proto::{CompressionType, KeyValue};
use pulsar_wire::wire::{self, Checksum, Frame, batch};
use serde_json::Value;

/// One set of captures: the official client against one broker.
#[derive(Clone, Copy, Debug)]
struct Captures {
    dir: &'static str,
    /// Whether the broker checksums MESSAGE frames (Apache does, pulsar-lite does not).
    broker_checksums: bool,
}

const LITE: Captures = Captures {
    dir: "tests/data/captures",
    broker_checksums: false,
};
const APACHE: Captures = Captures {
    dir: "tests/data/captures-apache",
    broker_checksums: true,
};
const BOTH: [Captures; 2] = [LITE, APACHE];

fn path(set: Captures) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(set.dir)
}

fn manifest_of(set: Captures) -> Value {
    let text = std::fs::read_to_string(path(set).join("manifest.json")).expect("manifest");
    serde_json::from_str(&text).expect("manifest is JSON")
}

/// Decodes a whole capture file into frames; nothing may be left over.
fn frames_in(set: Captures, file: &str) -> Vec<Frame> {
    let bytes = std::fs::read(path(set).join(file)).expect("capture file");
    let mut buf = BytesMut::from(&bytes[..]);
    let mut frames = Vec::new();
    while let Some(frame) = wire::decode(&mut buf, wire::DEFAULT_MAX_FRAME_SIZE)
        .unwrap_or_else(|e| panic!("{file}: frame {}: {e}", frames.len()))
    {
        frames.push(frame);
    }
    assert!(buf.is_empty(), "{file}: {} trailing bytes", buf.len());
    frames
}

/// Every file named in a manifest.
fn capture_files(set: Captures) -> Vec<String> {
    let mut files = Vec::new();
    for scenario in manifest_of(set)["scenarios"]
        .as_object()
        .expect("scenarios")
        .values()
    {
        for conn in scenario["connections"].as_array().expect("connections") {
            for dir in ["c2b", "b2c"] {
                files.push(conn[dir].as_str().expect("file name").to_owned());
            }
        }
    }
    files
}

#[test]
fn every_captured_frame_decodes_and_re_encodes_to_the_same_bytes() {
    for set in BOTH {
        let files = capture_files(set);
        assert!(
            files.len() >= 28,
            "{}: only {} capture files",
            set.dir,
            files.len()
        );
        for file in files {
            let original = std::fs::read(path(set).join(&file)).expect("capture file");
            let mut again = BytesMut::new();
            for frame in frames_in(set, &file) {
                wire::encode(&frame, &mut again).expect("encode");
            }
            assert!(
                again[..] == original[..],
                "{}/{file}: re-encoded bytes differ",
                set.dir
            );
        }
    }
}

/// Runs `check` on the pulsar-lite and on the Apache Pulsar captures.
fn for_both(check: impl Fn(Captures, &dyn Fn(&str) -> Vec<Frame>, &dyn Fn(&str) -> Value)) {
    for set in BOTH {
        let manifest = manifest_of(set);
        let frames = |file: &str| frames_in(set, file);
        let scenario = |name: &str| manifest["scenarios"][name].clone();
        check(set, &frames, &scenario);
    }
}

fn of_type(frames: &[Frame], kind: Type) -> Vec<&Frame> {
    frames
        .iter()
        .filter(|f| f.command.r#type() == kind)
        .collect()
}

fn properties(kvs: &[KeyValue]) -> BTreeMap<String, String> {
    kvs.iter()
        .map(|kv| (kv.key.clone(), kv.value.clone()))
        .collect()
}

fn expected_properties(message: &Value) -> BTreeMap<String, String> {
    message["properties"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

fn expected_id(v: &Value) -> MessageId {
    MessageId::new(
        v["ledger_id"].as_u64().unwrap(),
        v["entry_id"].as_u64().unwrap(),
    )
    .with_partition(v["partition"].as_i64().unwrap() as i32)
    .with_batch_index(v["batch_index"].as_i64().unwrap() as i32)
}

#[test]
fn official_client_connect_is_understood() {
    let frames = frames_in(LITE, "produce_plain.conn0.c2b.bin");
    let connect = frames[0].command.connect.as_ref().expect("CONNECT first");
    assert!(
        connect.client_version.starts_with("Pulsar-CPP"),
        "{}",
        connect.client_version
    );
    assert_eq!(connect.protocol_version, Some(20));
    let flags = connect.feature_flags.as_ref().expect("feature flags");
    assert_eq!(flags.supports_auth_refresh, Some(true));
}

#[test]
fn plain_sends_carry_what_the_application_gave() {
    for_both(|_, frames_of, scenario| plain_sends(frames_of, scenario));
}

fn plain_sends(frames_of: &dyn Fn(&str) -> Vec<Frame>, scenario: &dyn Fn(&str) -> Value) {
    let s = scenario("produce_plain");
    let sends = frames_of("produce_plain.conn0.c2b.bin");
    let sends = of_type(&sends, Type::Send);
    let messages = s["messages"].as_array().unwrap();
    assert_eq!(sends.len(), messages.len());
    for (frame, expected) in sends.iter().zip(messages) {
        let payload = frame.payload.as_ref().expect("payload");
        assert_eq!(
            payload.checksum,
            Checksum::Valid,
            "the official client always checksums"
        );
        let meta = &payload.metadata;
        assert_eq!(
            payload.data,
            Bytes::from(expected["payload"].as_str().unwrap().to_owned())
        );
        assert_eq!(meta.partition_key.as_deref(), expected["key"].as_str());
        assert_eq!(meta.event_time, expected["event_timestamp"].as_u64());
        assert_eq!(meta.sequence_id, expected["sequence_id"].as_u64().unwrap());
        assert_eq!(properties(&meta.properties), expected_properties(expected));
        assert_eq!(
            meta.producer_name,
            s["producer"]["producer_name"].as_str().unwrap()
        );
    }
    let receipts = frames_of("produce_plain.conn0.b2c.bin");
    for (frame, expected) in of_type(&receipts, Type::SendReceipt).iter().zip(messages) {
        let receipt = frame.command.send_receipt.as_ref().unwrap();
        let id = MessageId::from_proto(receipt.message_id.as_ref().unwrap());
        assert_eq!(id, expected_id(&expected["message_id"]));
    }
}

#[test]
fn batched_sends_split_into_the_application_messages_for_every_codec() {
    for_both(|_, frames_of, scenario| {
        for name in [
            "produce_batched",
            "produce_lz4",
            "produce_zlib",
            "produce_zstd",
            "produce_snappy",
        ] {
            batched_send(name, frames_of, scenario);
        }
    });
}

/// Decompresses (when the codec says so) and splits a batch payload.
fn unpack(payload: &wire::Payload) -> Vec<batch::Member> {
    let meta = &payload.metadata;
    let codec = Compression::from_proto(meta.compression.unwrap_or(0)).expect("known codec");
    let plain = codec
        .decompress(
            payload.data.clone(),
            meta.uncompressed_size(),
            wire::DEFAULT_MAX_MESSAGE_SIZE,
        )
        .expect("decompress");
    let count = meta.num_messages_in_batch.expect("a batch");
    batch::members(plain, count)
        .collect::<Result<_, _>>()
        .expect("members")
}

fn batched_send(
    name: &str,
    frames_of: &dyn Fn(&str) -> Vec<Frame>,
    scenario: &dyn Fn(&str) -> Value,
) {
    let s = scenario(name);
    let frames = frames_of(&format!("{name}.conn0.c2b.bin"));
    let sends = of_type(&frames, Type::Send);
    assert_eq!(sends.len(), 1, "{name}: one batch");
    let messages = s["messages"].as_array().unwrap();
    let payload = sends[0].payload.as_ref().unwrap();
    assert_eq!(
        sends[0].command.send.as_ref().unwrap().num_messages,
        Some(messages.len() as i32)
    );
    let members = unpack(payload);
    assert_eq!(members.len(), messages.len(), "{name}");
    for (member, expected) in members.iter().zip(messages) {
        assert_eq!(
            member.payload,
            Bytes::from(expected["payload"].as_str().unwrap().to_owned()),
            "{name}"
        );
        assert_eq!(
            member.metadata.partition_key.as_deref(),
            expected["key"].as_str()
        );
        assert_eq!(
            member.metadata.event_time,
            expected["event_timestamp"].as_u64()
        );
        assert_eq!(
            properties(&member.metadata.properties),
            expected_properties(expected)
        );
    }
}

#[test]
fn compressed_batches_name_their_codec_and_size() {
    let frames_of = |file: &str| frames_in(LITE, file);
    let manifest = manifest_of(LITE);
    let scenario = |name: &str| manifest["scenarios"][name].clone();
    for (name, codec) in [
        ("produce_lz4", CompressionType::Lz4),
        ("produce_zlib", CompressionType::Zlib),
        ("produce_zstd", CompressionType::Zstd),
        ("produce_snappy", CompressionType::Snappy),
    ] {
        let frames = frames_of(&format!("{name}.conn0.c2b.bin"));
        let send = of_type(&frames, Type::Send)[0];
        let meta = &send.payload.as_ref().unwrap().metadata;
        assert_eq!(meta.compression(), codec, "{name}");
        let raw_len: usize = scenario(name)["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["payload"].as_str().unwrap().len())
            .sum();
        assert!(
            meta.uncompressed_size.unwrap() as usize > raw_len,
            "{name}: sizes include member headers"
        );
    }
}

#[test]
fn broker_messages_and_a_redelivery_are_understood() {
    for_both(broker_messages);
}

fn broker_messages(
    set: Captures,
    frames_of: &dyn Fn(&str) -> Vec<Frame>,
    scenario: &dyn Fn(&str) -> Value,
) {
    let s = scenario("consume_shared");
    let frames = frames_of("consume_shared.conn0.b2c.bin");
    let messages = of_type(&frames, Type::Message);
    let received: Vec<&Value> = s["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["action"] == "receive")
        .collect();
    assert_eq!(messages.len(), received.len());
    for (frame, expected) in messages.iter().zip(received) {
        let command = frame.command.message.as_ref().unwrap();
        assert_eq!(
            MessageId::from_proto(&command.message_id),
            expected_id(&expected["message_id"])
        );
        assert_eq!(
            command.redelivery_count(),
            expected["redelivery_count"].as_u64().unwrap() as u32
        );
        let payload = frame.payload.as_ref().unwrap();
        // Apache checksums MESSAGE frames; pulsar-lite sends them without crc.
        let expected_checksum = if set.broker_checksums {
            Checksum::Valid
        } else {
            Checksum::Absent
        };
        assert_eq!(payload.checksum, expected_checksum, "{}", set.dir);
        assert_eq!(
            payload.data,
            Bytes::from(expected["payload"].as_str().unwrap().to_owned())
        );
        assert_eq!(
            payload.metadata.publish_time,
            expected["publish_timestamp"].as_u64().unwrap()
        );
    }
    // The client's nack became a REDELIVER naming exactly the nacked id.
    let sent = frames_of("consume_shared.conn0.c2b.bin");
    let redeliver = of_type(&sent, Type::RedeliverUnacknowledgedMessages);
    let ids = &redeliver[0]
        .command
        .redeliver_unacknowledged_messages
        .as_ref()
        .unwrap()
        .message_ids;
    assert_eq!(ids.len(), 1);
}

#[test]
fn keepalive_pings_from_the_broker_are_answered_by_the_official_client() {
    for_both(|_, frames_of, _| {
        let from_broker = frames_of("keepalive.conn0.b2c.bin");
        let from_client = frames_of("keepalive.conn0.c2b.bin");
        let pings = of_type(&from_broker, Type::Ping).len();
        assert!(pings >= 1);
        assert_eq!(of_type(&from_client, Type::Pong).len(), pings);
    });
}

#[test]
fn a_compressed_batch_from_the_broker_unpacks_into_its_messages() {
    for_both(|set, frames_of, scenario| {
        let s = scenario("consume_batched_lz4");
        let frames = frames_of("consume_batched_lz4.conn0.b2c.bin");
        let message = of_type(&frames, Type::Message)[0];
        let payload = message.payload.as_ref().unwrap();
        assert_eq!(
            payload.metadata.compression(),
            CompressionType::Lz4,
            "{}",
            set.dir
        );
        let texts: Vec<Bytes> = unpack(payload).into_iter().map(|m| m.payload).collect();
        let expected: Vec<Bytes> = s["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| Bytes::from(m["payload"].as_str().unwrap().to_owned()))
            .collect();
        assert_eq!(texts, expected, "{}", set.dir);
    });
}

#[test]
fn apache_broker_frames_carry_what_pulsar_lite_leaves_out() {
    let frames = frames_in(APACHE, "produce_plain.conn0.b2c.bin");
    let connected = frames[0]
        .command
        .connected
        .as_ref()
        .expect("CONNECTED first");
    assert_eq!(connected.max_message_size, Some(5 * 1024 * 1024));
    let flags = connected.feature_flags.as_ref().expect("feature flags");
    assert_eq!(
        flags.supports_get_partitioned_metadata_without_auto_creation,
        Some(true)
    );
    let failover = frames_in(APACHE, "consume_failover.conn0.b2c.bin");
    let change = of_type(&failover, Type::ActiveConsumerChange);
    assert_eq!(
        change[0]
            .command
            .active_consumer_change
            .as_ref()
            .unwrap()
            .is_active,
        Some(true)
    );
}
