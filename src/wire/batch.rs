//! Batched entries: many messages in one payload.
//!
//! A batch payload (after decompression) is a sequence of members, each
//! `[size u32][SingleMessageMetadata][payload_size bytes]`. The entry's
//! `MessageMetadata.num_messages_in_batch` says how many there are; it comes
//! from the network, so it is never trusted for an allocation.
//!
//! # Examples
//! ```
//! use bytes::{Bytes, BytesMut};
//! use pulsar_wire::proto::SingleMessageMetadata;
//! use pulsar_wire::wire::batch;
//!
//! let mut payload = BytesMut::new();
//! for text in ["a", "bc"] {
//!     let meta = SingleMessageMetadata { payload_size: text.len() as i32, ..Default::default() };
//!     batch::write_member(&meta, text.as_bytes(), &mut payload);
//! }
//! let members: Vec<_> = batch::members(payload.freeze(), 2).collect::<Result<_, _>>()?;
//! assert_eq!(members[1].payload, Bytes::from_static(b"bc"));
//! # Ok::<(), pulsar_wire::wire::batch::BatchError>(())
//! ```

use bytes::{Buf, BufMut, Bytes, BytesMut};
use prost::Message as _;

use super::checksum::read_u32;
use crate::proto::SingleMessageMetadata;

/// One member of a batch: its own metadata and a view of its payload.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    /// Position in the batch (the message id's `batch_index`).
    pub index: i32,
    /// Key, properties, event time, … of this member.
    pub metadata: SingleMessageMetadata,
    /// The member's bytes, a view into the batch payload.
    pub payload: Bytes,
}

/// A batch payload that does not hold what its metadata says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BatchError {
    /// The payload ends before member `index` is complete.
    #[error("batch member {index}: needs {needed} bytes, {available} left")]
    Truncated {
        /// The member being read.
        index: i32,
        /// Bytes the member announced.
        needed: usize,
        /// Bytes left in the payload.
        available: usize,
    },
    /// A member's metadata is not valid protobuf.
    #[error("batch member {index}: bad SingleMessageMetadata: {reason}")]
    Metadata {
        /// The member being read.
        index: i32,
        /// prost's reason.
        reason: String,
    },
    /// A member announces a negative payload size.
    #[error("batch member {index}: invalid payload size {size}")]
    PayloadSize {
        /// The member being read.
        index: i32,
        /// The announced size.
        size: i32,
    },
    /// The batch announces more members than a consumer takes from one
    /// entry (each becomes a message of its own, so the count, not the
    /// bytes, decides what unpacking the entry holds at once).
    #[error("batch announces {count} members, more than the {max} taken from one entry")]
    TooManyMembers {
        /// Members announced.
        count: i32,
        /// The most taken from one entry.
        max: u32,
    },
    /// Bytes are left over after the last announced member.
    #[error("{left} bytes left after the {count} announced batch members")]
    TrailingBytes {
        /// Members announced.
        count: i32,
        /// Bytes not accounted for.
        left: usize,
    },
}

/// Iterates over the `count` members of a batch payload, each a view of
/// `payload` (no copy, no allocation beyond the metadata).
///
/// Yields an error and then stops if the payload does not hold `count`
/// well-formed members or has bytes left after them.
pub fn members(payload: Bytes, count: i32) -> Members {
    Members {
        rest: payload,
        next: 0,
        count: count.max(0),
        failed: false,
    }
}

/// The iterator returned by [`members`].
#[derive(Debug)]
pub struct Members {
    rest: Bytes,
    next: i32,
    count: i32,
    failed: bool,
}

impl Members {
    #[inline]
    fn read_one(&mut self) -> Result<Member, BatchError> {
        let index = self.next;
        let truncated = |needed, available| BatchError::Truncated {
            index,
            needed,
            available,
        };
        let meta_size = read_u32(&self.rest, 0).ok_or(truncated(4, self.rest.len()))? as usize;
        let available = self.rest.len() - 4;
        if meta_size > available {
            return Err(truncated(meta_size, available));
        }
        // Decoded from the bytes as they lie: no shared view taken and
        // dropped per member (the few bytes of an ordering key are copied).
        let metadata =
            member_metadata(&self.rest[4..4 + meta_size]).map_err(|e| BatchError::Metadata {
                index,
                reason: e.to_string(),
            })?;
        self.rest.advance(4 + meta_size);
        let size = usize::try_from(metadata.payload_size).map_err(|_| BatchError::PayloadSize {
            index,
            size: metadata.payload_size,
        })?;
        if size > self.rest.len() {
            return Err(truncated(size, self.rest.len()));
        }
        let payload = self.rest.split_to(size);
        Ok(Member {
            index,
            metadata,
            payload,
        })
    }
}

impl Iterator for Members {
    type Item = Result<Member, BatchError>;

    // Inlined into the caller's loop, a member is built where the caller
    // keeps it instead of being moved out of this function.
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        if self.next == self.count {
            if self.rest.is_empty() {
                return None;
            }
            self.failed = true;
            return Some(Err(BatchError::TrailingBytes {
                count: self.count,
                left: self.rest.len(),
            }));
        }
        let item = self.read_one();
        self.next += 1;
        self.failed = item.is_err();
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.failed {
            return (0, Some(0));
        }
        // Bounded by what the bytes can hold (a member is 4 bytes at least:
        // its metadata size, with empty metadata and payload), not by the
        // untrusted count alone; one more item may be the error that ends
        // them (a member cut short, or bytes past the last).
        let announced = usize::try_from(self.count - self.next).unwrap_or(0);
        let left = announced.min(self.rest.len() / 4);
        let error = usize::from(announced > 0 || !self.rest.is_empty());
        (0, Some(left + error))
    }
}

/// Decodes a member's metadata exactly as prost does.
///
/// What producers write per member is varint fields only (size, sequence
/// id, event time, flags): those are read here directly, without prost's
/// generic field dispatch. Anything else (properties, keys, a field this
/// client does not know, a malformed varint) goes to prost, over the
/// whole metadata.
pub(super) fn member_metadata(bytes: &[u8]) -> Result<SingleMessageMetadata, prost::DecodeError> {
    // Fields gathered in locals and the struct built once at the end: no
    // partial writes into it that a later full-width copy would stall on.
    let mut payload_size = 0;
    let (mut event_time, mut sequence_id) = (None, None);
    let mut flags: [Option<bool>; 4] = [None; 4];
    let mut rest = bytes;
    while let Some((&key, after_key)) = rest.split_first() {
        // One-byte keys of the varint fields (field number << 3, wire type 0).
        if !matches!(key, 0x18 | 0x20 | 0x28 | 0x30 | 0x40 | 0x48 | 0x50) {
            return SingleMessageMetadata::decode(bytes);
        }
        rest = after_key;
        let Ok(value) = prost::encoding::decode_varint(&mut rest) else {
            return SingleMessageMetadata::decode(bytes);
        };
        match key {
            0x18 => payload_size = value as i32,
            0x28 => event_time = Some(value),
            0x40 => sequence_id = Some(value),
            0x20 => flags[0] = Some(value != 0),
            0x30 => flags[1] = Some(value != 0),
            0x48 => flags[2] = Some(value != 0),
            _ => flags[3] = Some(value != 0),
        }
    }
    let [
        compacted_out,
        partition_key_b64_encoded,
        null_value,
        null_partition_key,
    ] = flags;
    Ok(SingleMessageMetadata {
        properties: Vec::new(),
        partition_key: None,
        payload_size,
        compacted_out,
        event_time,
        partition_key_b64_encoded,
        ordering_key: None,
        sequence_id,
        null_value,
        null_partition_key,
    })
}

/// Appends one member to a batch payload being built.
///
/// `metadata.payload_size` must equal `payload.len()`; the producer's batch
/// container sets it.
pub fn write_member(metadata: &SingleMessageMetadata, payload: &[u8], dst: &mut BytesMut) {
    let meta_len = metadata.encoded_len();
    dst.reserve(4 + meta_len + payload.len());
    dst.put_u32(meta_len as u32);
    metadata.encode_raw(dst);
    dst.put_slice(payload);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(text: &str) -> (SingleMessageMetadata, &[u8]) {
        let meta = SingleMessageMetadata {
            payload_size: text.len() as i32,
            partition_key: Some(format!("key-{text}")),
            ..SingleMessageMetadata::default()
        };
        (meta, text.as_bytes())
    }

    fn batch(texts: &[&str]) -> Bytes {
        let mut buf = BytesMut::new();
        for text in texts {
            let (meta, payload) = member(text);
            write_member(&meta, payload, &mut buf);
        }
        buf.freeze()
    }

    #[test]
    fn splits_members_with_their_own_metadata_and_index() {
        let all: Vec<_> = members(batch(&["one", "", "three"]), 3)
            .collect::<Result<_, _>>()
            .unwrap();
        let texts: Vec<_> = all.iter().map(|m| m.payload.clone()).collect();
        assert_eq!(
            texts,
            ["one", "", "three"].map(|t| Bytes::copy_from_slice(t.as_bytes()))
        );
        assert_eq!(all[2].index, 2);
        assert_eq!(all[2].metadata.partition_key.as_deref(), Some("key-three"));
    }

    #[test]
    fn a_count_larger_than_the_bytes_is_an_error_not_an_allocation() {
        let mut it = members(batch(&["a"]), i32::MAX);
        assert!(it.size_hint().1.unwrap() < 10);
        assert!(it.next().unwrap().is_ok());
        assert!(matches!(
            it.next(),
            Some(Err(BatchError::Truncated { index: 1, .. }))
        ));
        assert!(it.next().is_none());
    }

    /// `n` members of 4 bytes each: a metadata size of 0 and nothing else.
    fn empty_members(n: usize) -> Bytes {
        Bytes::from(vec![0_u8; 4 * n])
    }

    #[test]
    fn the_size_hint_bounds_what_the_iterator_yields() {
        let cases = [
            (empty_members(10), 10),
            (empty_members(10), 3),
            (empty_members(2), 5),
            (empty_members(0), 1),
            (batch(&["a", "bc"]), 2),
            (batch(&["a", "bc"]), 1),
        ];
        for (payload, count) in cases {
            let total = members(payload.clone(), count).count();
            let mut it = members(payload.clone(), count);
            for taken in 0..=total {
                let (_, upper) = it.size_hint();
                let left = total - taken;
                assert!(
                    upper.is_some_and(|upper| left <= upper),
                    "{left} items left, hint {upper:?} ({} bytes, count {count})",
                    payload.len()
                );
                it.next();
            }
        }
    }

    #[test]
    fn leftover_bytes_are_reported() {
        let mut it = members(batch(&["a", "b"]), 1);
        assert!(it.next().unwrap().is_ok());
        assert!(matches!(
            it.next(),
            Some(Err(BatchError::TrailingBytes { count: 1, .. }))
        ));
    }

    #[test]
    fn member_metadata_reads_what_prost_reads() {
        let full = SingleMessageMetadata {
            properties: vec![crate::proto::KeyValue {
                key: "k".into(),
                value: "v".into(),
            }],
            partition_key: Some("key".into()),
            payload_size: -3,
            compacted_out: Some(true),
            event_time: Some(u64::MAX),
            partition_key_b64_encoded: Some(false),
            ordering_key: Some(Bytes::from_static(b"ok")),
            sequence_id: Some(1 << 40),
            null_value: Some(true),
            null_partition_key: Some(false),
        };
        let varints_only = SingleMessageMetadata {
            properties: Vec::new(),
            partition_key: None,
            ordering_key: None,
            ..full.clone()
        };
        for meta in [full, varints_only, SingleMessageMetadata::default()] {
            let bytes = meta.encode_to_vec();
            assert_eq!(member_metadata(&bytes).unwrap(), meta);
        }
        // A varint cut short, a repeated field (the last one wins), a
        // wire type that does not fit the field.
        for bytes in [&[0x18, 0x80][..], &[0x40, 1, 0x40, 2], &[0x1a, 0], &[0x18]] {
            assert_eq!(
                member_metadata(bytes).ok(),
                SingleMessageMetadata::decode(bytes).ok(),
                "{bytes:?}"
            );
        }
    }

    #[test]
    fn lying_payload_size_is_an_error() {
        let mut buf = BytesMut::new();
        let meta = SingleMessageMetadata {
            payload_size: 100,
            ..SingleMessageMetadata::default()
        };
        write_member(&meta, b"short", &mut buf);
        let err = members(buf.freeze(), 1).next().unwrap().unwrap_err();
        assert_eq!(
            err,
            BatchError::Truncated {
                index: 0,
                needed: 100,
                available: 5
            }
        );
        let meta = SingleMessageMetadata {
            payload_size: -1,
            ..SingleMessageMetadata::default()
        };
        let mut buf = BytesMut::new();
        write_member(&meta, b"", &mut buf);
        let err = members(buf.freeze(), 1).next().unwrap().unwrap_err();
        assert_eq!(err, BatchError::PayloadSize { index: 0, size: -1 });
    }
}
