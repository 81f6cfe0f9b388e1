//! Splitting an entry too large for the broker into chunks (pure).
//!
//! As the Java client's `ProducerImpl` with chunking on: the payload, after
//! compression, is cut into pieces that fit `max_message_size` together
//! with their metadata. Every chunk carries the entry's metadata (same
//! sequence id, properties, compression) plus `uuid`
//! (`<producer name>-<sequence id>`), `num_chunks_from_msg`,
//! `total_chunk_msg_size` (the whole payload's size) and its `chunk_id`,
//! counting up from 0. Each chunk is its own SEND with the same sequence
//! id; the receipt of the last one completes the send, with the last
//! chunk's id, the first chunk's beside it, as the message's id.

use bytes::Bytes;
use prost::Message as _;

use crate::proto::MessageMetadata;

/// An entry's metadata leaves no room for any payload in a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the metadata alone takes {metadata} bytes of the {max} a message may have")]
pub(crate) struct NoRoomForChunks {
    pub(crate) metadata: usize,
    pub(crate) max: usize,
}

/// Where a chunk sits in its message: `(chunk_id, num_chunks)`, or `None`
/// for an entry that is no chunk.
pub(crate) fn position(metadata: &MessageMetadata) -> Option<(i32, i32)> {
    let num = metadata.num_chunks_from_msg.filter(|n| *n > 1)?;
    Some((metadata.chunk_id.unwrap_or(0), num))
}

/// The chunks of an entry with `metadata` and `payload` larger than
/// `max_message_size`, in order; a payload that fits stays one entry,
/// unchanged.
///
/// # Errors
/// [`NoRoomForChunks`] if the metadata alone fills `max_message_size`.
pub(crate) fn split(
    metadata: MessageMetadata,
    payload: Bytes,
    max_message_size: usize,
) -> Result<Vec<(MessageMetadata, Bytes)>, NoRoomForChunks> {
    if payload.len() <= max_message_size {
        return Ok(vec![(metadata, payload)]);
    }
    let total = payload.len();
    let mut chunked = MessageMetadata {
        uuid: Some(format!(
            "{}-{}",
            metadata.producer_name, metadata.sequence_id
        )),
        total_chunk_msg_size: Some(i32::try_from(total).unwrap_or(i32::MAX)),
        // The widest values, to size the metadata before the count is known.
        num_chunks_from_msg: Some(i32::MAX),
        chunk_id: Some(i32::MAX),
        ..metadata
    };
    let room = max_message_size.saturating_sub(chunked.encoded_len());
    if room == 0 {
        return Err(NoRoomForChunks {
            metadata: chunked.encoded_len(),
            max: max_message_size,
        });
    }
    let count = total.div_ceil(room);
    chunked.num_chunks_from_msg = Some(i32::try_from(count).unwrap_or(i32::MAX));
    Ok((0..count)
        .map(|i| {
            let mut meta = chunked.clone();
            meta.chunk_id = Some(i32::try_from(i).unwrap_or(i32::MAX));
            let end = total.min((i + 1) * room);
            (meta, payload.slice(i * room..end))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata() -> MessageMetadata {
        MessageMetadata {
            producer_name: "prod".into(),
            sequence_id: 42,
            publish_time: 1_000,
            ..MessageMetadata::default()
        }
    }

    #[test]
    fn a_payload_that_fits_stays_one_entry() {
        let payload = Bytes::from(vec![7u8; 100]);
        let out = split(metadata(), payload.clone(), 100).expect("fits");
        assert_eq!(out, [(metadata(), payload)]);
        assert_eq!(position(&out[0].0), None);
    }

    #[test]
    fn chunks_fit_the_limit_with_their_metadata_and_join_to_the_payload() {
        let payload: Bytes = (0..10_000u32).map(|i| i as u8).collect::<Vec<_>>().into();
        let max = 1_000;
        let chunks = split(metadata(), payload.clone(), max).expect("chunks");
        assert!(chunks.len() > 10);
        let mut joined = Vec::new();
        for (i, (meta, data)) in chunks.iter().enumerate() {
            assert!(
                meta.encoded_len() + data.len() <= max,
                "chunk {i} too large"
            );
            assert_eq!(meta.uuid.as_deref(), Some("prod-42"));
            assert_eq!(meta.sequence_id, 42);
            assert_eq!(meta.total_chunk_msg_size, Some(10_000));
            let num = i32::try_from(chunks.len()).unwrap();
            assert_eq!(position(meta), Some((i32::try_from(i).unwrap(), num)));
            joined.extend_from_slice(data);
        }
        assert_eq!(joined, payload);
    }

    #[test]
    fn no_room_for_a_payload_is_an_error() {
        let err = split(metadata(), Bytes::from(vec![0u8; 50]), 10).expect_err("no room");
        assert_eq!(err.max, 10);
    }
}
