use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use super::*;
use crate::proto::{CompressionType, KeyValue, SingleMessageMetadata};

fn topic() -> Arc<str> {
    "persistent://public/default/t".into()
}

fn metadata() -> MessageMetadata {
    MessageMetadata {
        producer_name: "prod".into(),
        sequence_id: 10,
        publish_time: 1_000,
        ..MessageMetadata::default()
    }
}

fn payload(metadata: MessageMetadata, data: Bytes) -> Payload {
    Payload {
        broker_entry_metadata: None,
        checksum: Checksum::Absent,
        metadata,
        data,
    }
}

fn run(topic: &Arc<str>, ack_set: &[i64], p: Payload) -> Result<Unpacked, UnpackError> {
    run_with(CryptoFailureAction::Fail, topic, ack_set, p)
}

fn run_with(
    crypto: CryptoFailureAction,
    topic: &Arc<str>,
    ack_set: &[i64],
    p: Payload,
) -> Result<Unpacked, UnpackError> {
    unpack(Delivery {
        topic,
        partition: 2,
        message_id: MessageId::new(5, 6),
        last_chunk: None,
        redelivery_count: 1,
        ack_set,
        payload: Box::new(p),
        max_size: 1024,
        crypto,
    })
}

/// A batch of members "m0", "m1", … with key `k<i>` and property `i=<i>`.
fn batch(n: i32) -> (MessageMetadata, Bytes) {
    let mut data = BytesMut::new();
    for i in 0..n {
        let text = format!("m{i}");
        let meta = SingleMessageMetadata {
            payload_size: text.len() as i32,
            partition_key: Some(format!("k{i}")),
            properties: vec![KeyValue {
                key: "i".into(),
                value: i.to_string(),
            }],
            event_time: Some(100 + i as u64),
            ..SingleMessageMetadata::default()
        };
        batch::write_member(&meta, text.as_bytes(), &mut data);
    }
    let metadata = MessageMetadata {
        num_messages_in_batch: Some(n),
        ..metadata()
    };
    (metadata, data.freeze())
}

#[test]
fn a_plain_message_keeps_its_metadata_and_gets_the_partition() {
    let t = topic();
    let meta = MessageMetadata {
        partition_key: Some("key".into()),
        ordering_key: Some(Bytes::from_static(b"ord")),
        event_time: Some(42),
        properties: vec![KeyValue {
            key: "a".into(),
            value: "b".into(),
        }],
        ..metadata()
    };
    let data = Bytes::from_static(b"hello");
    let out = run(&t, &[], payload(meta, data.clone())).expect("valid");
    assert_eq!(out.batch_size, None);
    let [m] = &out.messages[..] else {
        panic!("one message: {out:?}")
    };
    assert_eq!(m.id(), MessageId::new(5, 6).with_partition(2));
    assert_eq!(m.payload().as_ptr(), data.as_ptr(), "no copy");
    assert_eq!(m.key(), Some("key"));
    assert_eq!(m.ordering_key().map(|b| &b[..]), Some(&b"ord"[..]));
    assert_eq!(m.properties()["a"], "b");
    assert_eq!((m.event_time(), m.publish_time()), (Some(42), 1_000));
    assert_eq!((m.sequence_id(), m.redelivery_count()), (10, 1));
    assert_eq!((m.producer_name(), m.topic()), ("prod", &*t));
}

#[test]
fn a_batch_splits_into_members_with_their_own_ids_and_metadata() {
    let (meta, data) = batch(3);
    let out = run(&topic(), &[], payload(meta, data)).expect("valid");
    assert_eq!(out.batch_size, Some(3));
    assert!(out.skipped.is_empty());
    for (i, m) in out.messages.iter().enumerate() {
        assert_eq!(
            m.id(),
            MessageId::new(5, 6)
                .with_partition(2)
                .with_batch_index(i as i32)
        );
        assert_eq!(m.payload(), &Bytes::from(format!("m{i}")));
        assert_eq!(m.key(), Some(&*format!("k{i}")));
        assert_eq!(m.properties()["i"], i.to_string());
        assert_eq!(m.event_time(), Some(100 + i as u64));
        assert_eq!(m.sequence_id(), 10 + i as u64, "batch sequence id + index");
    }
}

#[test]
fn members_acked_per_the_ack_set_are_skipped() {
    let (meta, data) = batch(4);
    // Bit set = still unacked: members 1 and 3 remain.
    let out = run(&topic(), &[0b1010], payload(meta, data)).expect("valid");
    let indexes: Vec<i32> = out.messages.iter().map(|m| m.id().batch_index).collect();
    assert_eq!(indexes, [1, 3]);
    assert_eq!(out.skipped, [0, 2]);
    assert_eq!(out.batch_size, Some(4));
}

#[test]
fn an_ack_set_bit_in_the_second_word_is_found() {
    assert!(still_unacked(&[0, 1], 64));
    assert!(!still_unacked(&[0, 1], 65));
    assert!(!still_unacked(&[-1], 64), "past the set: acked");
    assert!(still_unacked(&[-1], 63), "sign bit");
}

#[test]
fn a_checksum_mismatch_is_never_handed_out_and_is_reported_as_such() {
    let mut p = payload(metadata(), Bytes::from_static(b"x"));
    p.checksum = Checksum::Mismatch {
        carried: 1,
        computed: 2,
    };
    let err = run(&topic(), &[], p).expect_err("refused");
    assert!(matches!(err, UnpackError::Checksum { .. }), "{err}");
    assert_eq!(err.validation_error(), ValidationError::ChecksumMismatch);
    assert_eq!(err.id(), MessageId::new(5, 6).with_partition(2));
}

#[test]
fn every_codec_decompresses_a_batch() {
    let (meta, raw) = batch(2);
    for codec in [
        Compression::Lz4,
        Compression::Zlib,
        Compression::Zstd,
        Compression::Snappy,
    ] {
        let compressed = codec.compress(&raw).expect("compress");
        let meta = MessageMetadata {
            compression: Some(codec.to_proto() as i32),
            uncompressed_size: Some(raw.len() as u32),
            ..meta.clone()
        };
        let out = run(&topic(), &[], payload(meta, compressed)).expect("valid");
        assert_eq!(out.messages.len(), 2, "{codec:?}");
        assert_eq!(out.messages[1].payload(), &Bytes::from_static(b"m1"));
    }
}

#[test]
fn an_oversized_announcement_is_refused_before_allocating() {
    let meta = MessageMetadata {
        compression: Some(CompressionType::Lz4 as i32),
        uncompressed_size: Some(u32::MAX),
        ..metadata()
    };
    let err = run(&topic(), &[], payload(meta, Bytes::from_static(b"x"))).expect_err("refused");
    assert_eq!(
        err.validation_error(),
        ValidationError::UncompressedSizeCorruption
    );
}

#[test]
fn corrupt_compressed_bytes_are_a_decompression_error() {
    let meta = MessageMetadata {
        compression: Some(CompressionType::Zlib as i32),
        uncompressed_size: Some(10),
        ..metadata()
    };
    let err = run(
        &topic(),
        &[],
        payload(meta, Bytes::from_static(b"not zlib")),
    )
    .expect_err("bad");
    assert_eq!(err.validation_error(), ValidationError::DecompressionError);
}

#[test]
fn a_batch_announcing_more_members_than_it_holds_is_refused() {
    let (mut meta, data) = batch(2);
    meta.num_messages_in_batch = Some(3);
    let err = run(&topic(), &[], payload(meta, data)).expect_err("bad");
    assert_eq!(
        err.validation_error(),
        ValidationError::BatchDeSerializeError
    );
}

/// A batch of `n` members of 4 bytes each: an empty metadata (payload
/// size 0) and nothing else.
fn empty_members(n: i32) -> Payload {
    let meta = MessageMetadata {
        num_messages_in_batch: Some(n),
        ..metadata()
    };
    payload(meta, Bytes::from(vec![0_u8; 4 * n as usize]))
}

#[test]
fn a_batch_of_more_members_than_a_consumer_takes_is_refused_before_any_is_made() {
    let err = run(&topic(), &[], empty_members(1_000_000)).expect_err("refused");
    assert!(
        matches!(
            err,
            UnpackError::Batch {
                source: BatchError::TooManyMembers {
                    count: 1_000_000,
                    max: MAX_BATCH_MEMBERS,
                },
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.validation_error(),
        ValidationError::BatchDeSerializeError
    );
    let at_the_bound = run(&topic(), &[], empty_members(MAX_BATCH_MEMBERS as i32)).expect("taken");
    assert_eq!(at_the_bound.messages.len(), MAX_BATCH_MEMBERS as usize);
}

#[test]
fn garbage_batches_never_panic() {
    let (meta, data) = batch(3);
    for cut in 0..data.len() {
        let mut bytes = data.slice(..cut).to_vec();
        if let Some(b) = bytes.get_mut(cut / 2) {
            *b ^= 0xff;
        }
        let _ = run(&topic(), &[], payload(meta.clone(), bytes.into()));
    }
    let mut negative = meta;
    negative.num_messages_in_batch = Some(-1);
    let _ = run(&topic(), &[], payload(negative, data));
}

fn encrypted_batch() -> MessageMetadata {
    MessageMetadata {
        encryption_keys: vec![crate::proto::EncryptionKeys {
            key: "k1".into(),
            ..Default::default()
        }],
        encryption_param: Some(Bytes::from_static(b"iv")),
        compression: Some(CompressionType::Lz4 as i32),
        uncompressed_size: Some(99),
        num_messages_in_batch: Some(3),
        ..metadata()
    }
}

#[test]
fn an_encrypted_entry_is_discarded_only_when_configured() {
    let p = payload(encrypted_batch(), Bytes::from_static(b"ciphertext"));
    let err = run_with(CryptoFailureAction::Discard, &topic(), &[], p).expect_err("refused");
    assert_eq!(err.validation_error(), ValidationError::DecryptionError);
}

#[test]
fn an_encrypted_batch_is_one_unreadable_message_by_default() {
    let p = payload(encrypted_batch(), Bytes::from_static(b"ciphertext"));
    let unpacked = run(&topic(), &[], p).expect("kept");
    assert_eq!(unpacked.batch_size, None);
    let [m] = &unpacked.messages[..] else {
        panic!("one message for the whole entry: {unpacked:?}")
    };
    assert_eq!(m.id(), MessageId::new(5, 6).with_partition(2));
    assert_eq!(m.unreadable(), Some(Unreadable::Encrypted));
    assert_eq!(m.payload(), &Bytes::from_static(b"ciphertext"));
}

#[test]
fn consume_hands_out_the_ciphertext_with_its_context() {
    let p = payload(encrypted_batch(), Bytes::from_static(b"ciphertext"));
    let unpacked = run_with(CryptoFailureAction::Consume, &topic(), &[], p).expect("kept");
    let m = &unpacked.messages[0];
    assert_eq!(m.unreadable(), None);
    let context = m.encryption_context().expect("context");
    assert_eq!(context.keys()[0].name, "k1");
    assert_eq!(context.param(), Some(&Bytes::from_static(b"iv")));
    assert_eq!(context.compression(), Ok(Compression::Lz4));
    assert_eq!(
        (context.uncompressed_size(), context.batch_size()),
        (99, Some(3))
    );
    assert_eq!(m.payload(), &Bytes::from_static(b"ciphertext"));
}

#[test]
fn an_unknown_codec_is_unreadable_whatever_the_crypto_action() {
    let meta = MessageMetadata {
        compression: Some(17),
        ..metadata()
    };
    for crypto in [CryptoFailureAction::Consume, CryptoFailureAction::Discard] {
        let p = payload(meta.clone(), Bytes::from_static(b"?"));
        let unpacked = run_with(crypto, &topic(), &[], p).expect("kept");
        let m = &unpacked.messages[0];
        assert_eq!(m.unreadable(), Some(Unreadable::UnknownCompression(17)));
        assert_eq!(m.encryption_context(), None);
    }
}

#[test]
fn a_batch_at_the_last_sequence_id_saturates_instead_of_panicking() {
    let t = topic();
    let (meta, data) = batch(3);
    let meta = MessageMetadata {
        sequence_id: u64::MAX - 1,
        ..meta
    };
    let unpacked = run(&t, &[], payload(meta, data)).expect("unpacks");
    let ids: Vec<u64> = unpacked.messages.iter().map(|m| m.0.sequence_id).collect();
    assert_eq!(ids, [u64::MAX - 1, u64::MAX, u64::MAX]);
}
