//! A fast hasher for the per-message sets and maps keyed by [`MessageId`]
//! (the receiver queue's ids, batch member bookkeeping) (pure).
//!
//! The standard SipHash costs ~20 ns per id, and the consume path hashes
//! each message's id several times; profiling the end-to-end consume bench
//! showed ~8% of the client's CPU in SipHash. This is a multiply-rotate mix
//! (as rustc's FxHash) over the id's four fields, started from a key drawn
//! once per process from the standard library's random source, so the
//! layout of a table is not predictable from the ids alone. Every table
//! using it is bounded by what the application holds unacked.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

/// Builds [`IdHasher`]s; the `S` of `HashMap<MessageId, _, S>`.
///
/// [`MessageId`]: crate::MessageId
#[derive(Debug, Clone, Copy)]
pub(crate) struct IdBuildHasher {
    key: u64,
}

impl Default for IdBuildHasher {
    fn default() -> Self {
        static KEY: OnceLock<u64> = OnceLock::new();
        let key = *KEY.get_or_init(|| RandomState::new().hash_one(0x5eed_u64));
        Self { key }
    }
}

impl BuildHasher for IdBuildHasher {
    type Hasher = IdHasher;

    fn build_hasher(&self) -> IdHasher {
        IdHasher { state: self.key }
    }
}

/// The hasher [`IdBuildHasher`] builds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IdHasher {
    state: u64,
}

const K: u64 = 0xf135_7aea_2e62_a9c5;

impl IdHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.state = (self.state.rotate_left(26) ^ word).wrapping_mul(K);
    }
}

impl Hasher for IdHasher {
    #[inline]
    fn finish(&self) -> u64 {
        // hashbrown takes the top 7 bits as the tag and the low bits as the
        // index: spread the last word into both.
        self.state.rotate_left(26)
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    #[inline]
    fn write_i32(&mut self, n: i32) {
        self.add(u64::from(n as u32));
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::MessageId;

    #[test]
    fn ids_that_differ_in_any_field_hash_apart() {
        let h = IdBuildHasher::default();
        let base = MessageId::new(7, 100).with_batch_index(3);
        let variants = [
            MessageId::new(8, 100).with_batch_index(3),
            MessageId::new(7, 101).with_batch_index(3),
            MessageId::new(7, 100).with_batch_index(4),
            MessageId::new(7, 100).with_batch_index(3).with_partition(2),
        ];
        for v in variants {
            assert_ne!(h.hash_one(base), h.hash_one(v), "{v}");
        }
        assert_eq!(h.hash_one(base), IdBuildHasher::default().hash_one(base));
    }

    #[test]
    fn a_set_of_consecutive_ids_works_like_the_standard_one() {
        let mut ours: HashSet<MessageId, IdBuildHasher> = HashSet::default();
        let mut std_set = HashSet::new();
        for ledger in 0..4 {
            for entry in 0..500 {
                for batch in [-1, 0, 1, 99] {
                    let id = MessageId::new(ledger, entry).with_batch_index(batch);
                    assert_eq!(ours.insert(id), std_set.insert(id));
                }
            }
        }
        assert_eq!(ours.len(), std_set.len());
        assert!(std_set.iter().all(|id| ours.contains(id)));
    }
}
