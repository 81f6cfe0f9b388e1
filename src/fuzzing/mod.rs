//! Entry points for the `fuzz/` targets (cargo-fuzz), kept in the library
//! so that `cargo test` replays the committed corpus through exactly the
//! code the fuzzer runs. Not part of the API: hidden, and free to change.
//!
//! Each function takes the fuzzer's bytes, must never panic, and panics
//! (a finding) when an invariant breaks. Memory is the fuzzer's to watch:
//! it runs with `-malloc_limit_mb=16`, so one allocation over 16 MiB is a
//! finding too.
//!
//! # Examples
//! ```
//! pulsar_wire::fuzzing::frame_stream(b"\x00\x00\x00\x06\x00\x00\x00\x02\x08\x12");
//! ```

mod consumer_core;
mod seeds;

use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use crate::compression::{Compression, CompressionError};
use crate::connection::Router;
use crate::consumer::unpack::{self, Delivery};
use crate::message_id::MessageId;
use crate::wire::{self, Frame, FrameError, batch};

pub use consumer_core::consumer_core;
pub use seeds::seeds;

/// The frame limit the targets decode with: 1 GiB, as high as a broker's
/// `max_message_size` may raise it, so that a decoder reserving an
/// announced frame before its bytes arrive trips `-malloc_limit_mb=16`.
const MAX_FRAME: usize = 1 << 30;

/// The decompression limit of the `decompress` target: a size over it must
/// be refused before anything is allocated.
pub const DECOMPRESS_CAP: usize = 1 << 20;

/// Streaming frame decoder with arbitrary chunk splits.
///
/// Input: `[n u8][n chunk lengths u8...][stream...]`. The stream is fed in
/// chunks of those lengths (cycled; 0 counts as 1) and decoded after each;
/// the frames and the error must be exactly those of decoding the whole
/// stream at once. Every frame re-encodes to bytes that decode to the same
/// frame, and is routed through a connection's router (which has nothing
/// registered: everything is answered, dropped or logged).
pub fn frame_stream(data: &[u8]) {
    let (&n, rest) = data.split_first().unwrap_or((&0, &[]));
    let (cuts, stream) = rest.split_at((n as usize).min(rest.len()));
    let whole = decode_all(stream, &[]);
    let chunked = decode_all(stream, cuts);
    assert_eq!(whole.0, chunked.0, "frames depend on the chunking");
    assert_eq!(
        whole.1.as_ref().map(ToString::to_string),
        chunked.1.as_ref().map(ToString::to_string),
        "the error depends on the chunking"
    );
    let mut router = Router::new(std::time::Duration::from_secs(30));
    for frame in whole.0 {
        let mut again = BytesMut::new();
        wire::encode(&frame, &mut again).expect("a decoded frame encodes");
        let mut back = wire::decode(&mut again, MAX_FRAME)
            .expect("an encoded frame decodes")
            .expect("whole");
        // A mismatch's computed checksum is over the bytes as they came;
        // protobuf re-encoding drops unknown fields, so those may differ.
        if let (Some(a), Some(b)) = (&mut back.payload, &frame.payload) {
            if let (
                wire::Checksum::Mismatch { computed, .. },
                wire::Checksum::Mismatch { computed: was, .. },
            ) = (&mut a.checksum, b.checksum)
            {
                *computed = was;
            }
        }
        assert_eq!(back, frame, "decode(encode(frame)) differs");
        assert!(again.is_empty(), "bytes left after one re-encoded frame");
        router.on_inbound(frame);
    }
}

/// Decodes `stream` fed in chunks of `cuts` (all at once when empty).
fn decode_all(stream: &[u8], cuts: &[u8]) -> (Vec<Frame>, Option<FrameError>) {
    let mut buf = BytesMut::new();
    let mut frames = Vec::new();
    let mut fed = 0;
    let mut cut = cuts.iter().cycle();
    while fed < stream.len() {
        let size = match cut.next() {
            Some(&c) => (c as usize).max(1),
            None => stream.len(),
        };
        let end = (fed + size).min(stream.len());
        buf.extend_from_slice(&stream[fed..end]);
        fed = end;
        loop {
            match wire::decode(&mut buf, MAX_FRAME) {
                Ok(Some(frame)) => frames.push(frame),
                Ok(None) => break,
                Err(e) => return (frames, Some(e)),
            }
        }
    }
    (frames, None)
}

/// Payload and metadata parsing, then the consumer's unpacking of the
/// entry: checksum, decompression (capped at 1 MiB), batch split, the
/// broker's `ack_set`.
///
/// Input: `[n u8][n % 3 ack_set words, 8 bytes each][payload section...]`,
/// the payload section being what follows the command in a MESSAGE frame.
pub fn payload(data: &[u8]) {
    let (&n, rest) = data.split_first().unwrap_or((&0, &[]));
    let words = ((n % 3) as usize).min(rest.len() / 8);
    let (set, section) = rest.split_at(words * 8);
    let ack_set: Vec<i64> = set
        .chunks_exact(8)
        .map(|w| i64::from_be_bytes(w.try_into().expect("8 bytes")))
        .collect();
    let mut frame = BytesMut::new();
    let message = seeds::message_command(3, MessageId::new(1, 2));
    wire::encode_command(&message, &mut frame).expect("encodes");
    let total = frame.len() - 4 + section.len();
    let Ok(total) = u32::try_from(total) else {
        return;
    };
    frame[..4].copy_from_slice(&total.to_be_bytes());
    frame.extend_from_slice(section);
    let Ok(Some(decoded)) = wire::decode(&mut frame, MAX_FRAME) else {
        return;
    };
    let Some(payload) = decoded.payload else {
        return;
    };
    let count = payload.metadata.num_messages_in_batch;
    let topic: Arc<str> = Arc::from("persistent://public/default/fuzz");
    let delivery = Delivery {
        topic: &topic,
        partition: 4,
        message_id: MessageId::new(1, 2),
        last_chunk: None,
        redelivery_count: 0,
        ack_set: &ack_set,
        payload,
        max_size: DECOMPRESS_CAP,
        crypto: crate::consumer::CryptoFailureAction::Fail,
    };
    let Ok(unpacked) = unpack::unpack(delivery) else {
        return;
    };
    let entry = MessageId::new(1, 2).with_partition(4);
    assert_eq!(unpacked.entry, entry);
    // An entry that is not decoded (encrypted, unknown codec) is one message.
    let undecoded = unpacked.messages.iter().any(|m| m.0.undecoded.is_some());
    match count.filter(|_| !undecoded) {
        None => assert_eq!(unpacked.messages.len(), 1, "a plain entry is one message"),
        Some(count) => {
            let members = unpacked.messages.len() + unpacked.skipped.len();
            assert_eq!(members, count.max(0) as usize, "members lost or invented");
            for m in &unpacked.messages {
                assert_eq!(m.id().entry(), entry);
                assert!((0..count).contains(&m.id().batch_index));
            }
        }
    }
}

/// The batch splitter. Input: `[count i32 BE][batch payload...]`.
///
/// It yields at most `count` members with indexes 0, 1, …, whose
/// payloads fit in the input, then stops after its first error.
pub fn batch(data: &[u8]) {
    let Some((count, rest)) = data.split_first_chunk::<4>() else {
        return;
    };
    let count = i32::from_be_bytes(*count);
    let mut total = 0;
    let mut seen = 0;
    let mut failed = false;
    for (i, member) in batch::members(Bytes::copy_from_slice(rest), count).enumerate() {
        assert!(!failed, "a member after an error");
        match member {
            Ok(m) => {
                assert_eq!(m.index as usize, i);
                total += m.payload.len();
            }
            Err(_) => failed = true,
        }
        seen += 1;
    }
    assert!(
        seen <= count.max(0) as usize + 1,
        "more members than announced"
    );
    assert!(total <= rest.len(), "payloads larger than the batch");
}

/// Each decompressor with its size cap. Input: `[codec u8][size u32 BE][compressed...]`.
///
/// A size over [`DECOMPRESS_CAP`] is refused; anything that decompresses
/// comes out exactly `size` long. Then the input is compressed with the
/// same codec and must come back unchanged.
pub fn decompress(data: &[u8]) {
    let Some((&codec, rest)) = data.split_first() else {
        return;
    };
    let Some((size, input)) = rest.split_first_chunk::<4>() else {
        return;
    };
    let codec = [
        Compression::Lz4,
        Compression::Zlib,
        Compression::Zstd,
        Compression::Snappy,
    ][(codec % 4) as usize];
    let size = u32::from_be_bytes(*size);
    match codec.decompress(Bytes::copy_from_slice(input), size, DECOMPRESS_CAP) {
        Ok(out) => assert_eq!(out.len(), size as usize, "{codec:?}: wrong length"),
        Err(CompressionError::TooLarge { .. }) => {
            assert!(size as usize > DECOMPRESS_CAP, "{codec:?}: refused {size}");
        }
        Err(_) => assert!(size as usize <= DECOMPRESS_CAP),
    }
    let packed = codec.compress(input).expect("compresses");
    let back = codec
        .decompress(packed, input.len() as u32, DECOMPRESS_CAP)
        .expect("round trip");
    assert_eq!(&back[..], input, "{codec:?}: round trip changed the data");
}
