//! A fast hasher for the per-message sets and maps keyed by [`MessageId`]
//! (the receiver queue's ids, batch member bookkeeping) (pure).
//!
//! The standard SipHash costs ~20 ns per id, and the consume path hashes
//! each message's id several times; profiling the end-to-end consume bench
//! showed ~8% of the client's CPU in SipHash. This is a folded multiply (the
//! 128-bit product's halves XORed, as foldhash) over the id's four fields,
//! started from a key drawn once per process from the standard library's
//! random source. The ids come from the broker, so the mix must not let it
//! pick colliding ids without the key: a plain multiply-rotate (FxHash)
//! does, since flipping an input's top bit flips only the product's top bit
//! whatever the key. Every table using it is bounded by what the
//! application holds unacked.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

/// Builds [`IdHasher`]s; the `S` of `HashMap<MessageId, _, S>`.
///
/// [`MessageId`]: crate::message_id::MessageId
#[derive(Debug, Clone, Copy)]
pub(crate) struct IdBuildHasher {
    key: u64,
}

/// A random key drawn once per process, unknown to the broker: the seed of
/// every table keyed by broker-chosen ids.
pub(crate) fn process_key() -> u64 {
    *PROCESS_KEY.get_or_init(|| RandomState::new().hash_one(0x5eed_u64))
}

static PROCESS_KEY: OnceLock<u64> = OnceLock::new();

/// Fixes the process key, unless a table drew it already: a simulation
/// process replays a seed exactly, its tables iterating in the same order
/// on every run.
#[cfg(feature = "testing")]
pub(crate) fn fix_process_key() {
    PROCESS_KEY.get_or_init(|| 0x5eed);
}

impl Default for IdBuildHasher {
    fn default() -> Self {
        Self { key: process_key() }
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
        let product = u128::from(self.state ^ word) * u128::from(K);
        self.state = (product as u64) ^ ((product >> 64) as u64);
    }
}

impl Hasher for IdHasher {
    #[inline]
    fn finish(&self) -> u64 {
        // The fold already spreads every input bit over the whole word
        // (hashbrown takes the top 7 bits as the tag, the low bits as the index).
        self.state
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
    use crate::message_id::MessageId;

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
    fn ids_a_broker_could_pick_to_collide_without_the_key_hash_apart() {
        // Under a multiply-rotate mix these collide for every key: the top
        // bit of the ledger flips only the product's top bit, which the
        // rotation moves to bit 25 where the entry's bit 25 cancels it.
        let h = IdBuildHasher::default();
        for (ledger, entry) in [(7, 100), (0, 0), (u64::MAX >> 1, 12_345)] {
            let a = MessageId::new(ledger, entry);
            let b = MessageId::new(ledger ^ (1 << 63), entry ^ (1 << 25));
            assert_ne!(h.hash_one(a), h.hash_one(b), "{a} and {b}");
        }
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
