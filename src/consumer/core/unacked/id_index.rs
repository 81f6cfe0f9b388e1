//! A compact hash index from [`MessageId`] to a `u32` handle (pure).
//!
//! The ids themselves live in the caller's storage (the ack-timeout
//! tracker's slab); each index slot holds a handle and the id's 32-bit
//! *place*, 8 bytes in all, in an open-addressing table at most half full.
//! Probing is linear, kept in Robin Hood order (a cluster's entries sorted
//! by home slot), and deletion shifts the rest of a cluster back (no
//! tombstones, so lookups stay short however many ids come and go). The
//! order lets a lookup stop at the first entry closer to its home than the
//! probe is, and a deletion stop at the first entry sitting at its home.
//!
//! The place is chosen for the caches: ids of 16 consecutive entries of a
//! ledger (same partition and batch index) share one hashed block of 16
//! slots, each at its own offset. A consumer handing out and acking
//! messages in order so touches the same two or three cache lines for 16
//! messages in a row instead of a random line per message. The stored
//! place also rejects almost every non-matching slot, finds an entry's
//! home during deletion and growth, and so spares those reads of the slab;
//! only a matching place is confirmed against the id (`key_of`).

use super::id_hash::process_key;
use crate::message_id::MessageId;

/// An empty slot (no handle is `u32::MAX`).
const EMPTY: u64 = u64::MAX;

/// Handles keyed by the [`MessageId`] stored behind them.
#[derive(Debug, Default)]
pub(crate) struct IdIndex {
    /// `place << 32 | handle`, or [`EMPTY`].
    slots: Vec<u64>,
    len: usize,
}

/// Where [`IdIndex::find_or_slot`] found `id`, or where it would go.
pub(crate) enum Probe {
    /// Already present.
    Found,
    /// Absent; [`IdIndex::fill`] this vacancy to add it.
    Vacant(Vacancy),
}

/// Where an absent id goes: its slot, and its place (hashed once).
pub(crate) struct Vacancy {
    slot: usize,
    place: u32,
}

/// The hashed block of the id's 16-entry run, then its offset in the block.
///
/// Each field goes through MurmurHash3's finalizer on its own, starting from
/// a per-process key: the ids come from the broker, and fields combined
/// before a non-linear step (`entry ^ ledger`, say) let it choose ids that
/// share a block whatever the key, piling them into one probe cluster.
fn place(id: &MessageId) -> u32 {
    let lane = (u64::from(id.batch_index as u32) << 32) | u64::from(id.partition as u32);
    let mut block = fmix(process_key() ^ id.ledger_id);
    block = fmix(block ^ (id.entry_id >> 4));
    block = fmix(block ^ lane);
    ((block >> 36) as u32) << 4 | (id.entry_id & 15) as u32
}

/// MurmurHash3's 64-bit finalizer: a bijection in which every input bit
/// reaches every output bit.
const fn fmix(mut x: u64) -> u64 {
    x = (x ^ (x >> 33)).wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    x = (x ^ (x >> 33)).wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    x ^ (x >> 33)
}

fn handle(slot: u64) -> u32 {
    slot as u32
}

impl IdIndex {
    /// The handle stored for `id`, if any.
    pub(crate) fn find(&self, id: &MessageId, key_of: impl Fn(u32) -> MessageId) -> Option<u32> {
        if self.len == 0 {
            return None;
        }
        self.probe(id, place(id), &key_of)
            .ok()
            .map(|slot| handle(self.slots[slot]))
    }

    /// Finds `id`, or reserves room and tells the slot where it would go.
    pub(crate) fn find_or_slot(
        &mut self,
        id: &MessageId,
        key_of: impl Fn(u32) -> MessageId,
    ) -> Probe {
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let place = place(id);
        match self.probe(id, place, &key_of) {
            Ok(_) => Probe::Found,
            Err(slot) => Probe::Vacant(Vacancy { slot, place }),
        }
    }

    /// Stores `handle` for the id at the vacancy [`IdIndex::find_or_slot`]
    /// returned, moving the rest of its cluster one slot on.
    pub(crate) fn fill(&mut self, vacancy: Vacancy, handle: u32) {
        let Vacancy { slot, place } = vacancy;
        self.place_at(slot, u64::from(place) << 32 | u64::from(handle));
        self.len += 1;
    }

    /// Removes `id`; returns its handle if it was present.
    pub(crate) fn remove(
        &mut self,
        id: &MessageId,
        key_of: impl Fn(u32) -> MessageId,
    ) -> Option<u32> {
        if self.len == 0 {
            return None;
        }
        let mut hole = self.probe(id, place(id), &key_of).ok()?;
        let removed = handle(self.slots[hole]);
        self.len -= 1;
        // Shift the cluster back until an empty slot or an entry at home.
        let mask = self.slots.len() - 1;
        loop {
            let next = (hole + 1) & mask;
            let moving = self.slots[next];
            if moving == EMPTY || self.distance(next, moving) == 0 {
                break;
            }
            self.slots[hole] = moving;
            hole = next;
        }
        self.slots[hole] = EMPTY;
        Some(removed)
    }

    /// Forgets every handle, keeping the table's memory.
    pub(crate) fn clear(&mut self) {
        self.slots.fill(EMPTY);
        self.len = 0;
    }

    #[cfg(any(test, feature = "unstable"))]
    /// Bytes held by the table.
    pub(crate) fn allocated_bytes(&self) -> usize {
        self.slots.capacity() * size_of::<u64>()
    }

    /// `Ok(slot)` holding `id`, or `Err(slot)`: where it would go.
    fn probe(
        &self,
        id: &MessageId,
        place: u32,
        key_of: &impl Fn(u32) -> MessageId,
    ) -> Result<usize, usize> {
        let mask = self.slots.len() - 1;
        let mut slot = self.home(place);
        let mut distance = 0;
        loop {
            match self.slots[slot] {
                EMPTY => return Err(slot),
                s if self.distance(slot, s) < distance => return Err(slot),
                s if (s >> 32) as u32 == place && key_of(handle(s)) == *id => return Ok(slot),
                _ => {
                    slot = (slot + 1) & mask;
                    distance += 1;
                }
            }
        }
    }

    /// Puts `entry` at `slot`, moving what is there (to the next empty
    /// slot) one slot on; the cluster stays in home order.
    fn place_at(&mut self, mut slot: usize, mut entry: u64) {
        let mask = self.slots.len() - 1;
        while entry != EMPTY {
            entry = std::mem::replace(&mut self.slots[slot], entry);
            slot = (slot + 1) & mask;
        }
    }

    /// How far the entry at `slot` sits from its home.
    fn distance(&self, slot: usize, entry: u64) -> usize {
        slot.wrapping_sub(self.home((entry >> 32) as u32)) & (self.slots.len() - 1)
    }

    /// The slot a place belongs in (tables have 16 to 2^32 slots).
    fn home(&self, place: u32) -> usize {
        place as usize & (self.slots.len() - 1)
    }

    fn grow(&mut self) {
        let size = (self.slots.len() * 2).max(16);
        let old = std::mem::replace(&mut self.slots, vec![EMPTY; size]);
        let mask = size - 1;
        for entry in old.into_iter().filter(|&s| s != EMPTY) {
            let mut slot = self.home((entry >> 32) as u32);
            let mut distance = 0;
            while self.slots[slot] != EMPTY && self.distance(slot, self.slots[slot]) >= distance {
                slot = (slot + 1) & mask;
                distance += 1;
            }
            self.place_at(slot, entry);
        }
    }

    /// Mean and longest distance from home over the stored ids.
    #[cfg(test)]
    fn displacement(&self) -> (f64, usize) {
        let mask = self.slots.len() - 1;
        let distances: Vec<usize> = (0..self.slots.len())
            .filter(|&i| self.slots[i] != EMPTY)
            .map(|i| (i.wrapping_sub(self.home((self.slots[i] >> 32) as u32))) & mask)
            .collect();
        let mean = distances.iter().sum::<usize>() as f64 / distances.len().max(1) as f64;
        (mean, distances.into_iter().max().unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An index over a plain vector of ids (handle = position).
    fn insert(index: &mut IdIndex, ids: &mut Vec<MessageId>, id: MessageId) -> bool {
        let handle = ids.len() as u32;
        match index.find_or_slot(&id, |h| ids[h as usize]) {
            Probe::Found => false,
            Probe::Vacant(vacancy) => {
                ids.push(id);
                index.fill(vacancy, handle);
                true
            }
        }
    }

    fn member(e: u64) -> MessageId {
        MessageId::new(3, e).with_batch_index((e % 4) as i32)
    }

    #[test]
    fn ids_a_broker_could_pick_to_share_a_block_spread_out() {
        // Ledger i with entry run `i.rotate_left(32)`: XORed together before
        // any mixing, every one of these lands in one block whatever the key.
        let ids: Vec<MessageId> = (1..=256u64)
            .map(|i| MessageId::new(i, i.rotate_left(32) << 4))
            .collect();
        let blocks: std::collections::HashSet<u32> = ids.iter().map(|id| place(id) >> 4).collect();
        assert!(blocks.len() > 200, "{} blocks for 256 runs", blocks.len());
        let mut index = IdIndex::default();
        let mut stored = Vec::new();
        for id in ids {
            assert!(insert(&mut index, &mut stored, id));
        }
        let (mean, longest) = index.displacement();
        // One shared block would make a single cluster of 256.
        assert!(mean < 8.0 && longest < 64, "mean {mean}, longest {longest}");
    }

    #[test]
    fn finds_what_was_inserted_and_forgets_what_was_removed() {
        let mut index = IdIndex::default();
        let mut ids = Vec::new();
        for e in 0..1000 {
            assert!(insert(&mut index, &mut ids, member(e)));
        }
        assert!(!insert(&mut index, &mut ids, member(10)));
        assert_eq!(index.len, 1000);
        // Remove every third, then check every one.
        for e in (0..1000).step_by(3) {
            assert_eq!(
                index.remove(&member(e), |h| ids[h as usize]),
                Some(e as u32)
            );
            assert_eq!(index.remove(&member(e), |h| ids[h as usize]), None);
        }
        for e in 0..1000_u64 {
            let expected = (e % 3 != 0).then_some(e as u32);
            assert_eq!(
                index.find(&member(e), |h| ids[h as usize]),
                expected,
                "{}",
                member(e)
            );
        }
        index.clear();
        assert_eq!(index.find(&ids[1], |h| ids[h as usize]), None);
    }

    #[test]
    fn stays_at_most_half_full() {
        let mut index = IdIndex::default();
        let mut ids = Vec::new();
        for e in 0..5000 {
            insert(&mut index, &mut ids, MessageId::new(e % 7, e));
            assert!(index.len * 2 <= index.slots.len());
        }
        assert_eq!(index.allocated_bytes(), 16384 * 8);
    }

    #[test]
    fn probes_stay_short_for_runs_strides_batches_and_scattered_ids() {
        let xorshift = |mut x: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^ (x << 17)
        };
        type Pattern = (&'static str, fn(u64) -> MessageId);
        let patterns: [Pattern; 4] = [
            ("consecutive entries over ledgers", |n| {
                MessageId::new(n / 5000, n % 5000)
            }),
            ("every 7th entry", |n| MessageId::new(9, n * 7)),
            ("batches of 10", |n| {
                MessageId::new(9, n / 10).with_batch_index((n % 10) as i32)
            }),
            ("scattered", |n| {
                MessageId::new(n % 3, n.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 20)
            }),
        ];
        for (name, id) in patterns {
            let mut index = IdIndex::default();
            let mut ids = Vec::new();
            // Fill, then churn: drop the oldest or a pseudo-random one.
            let mut rng = 7_u64;
            for n in 0..100_000 {
                insert(&mut index, &mut ids, id(n));
                if n >= 50_000 {
                    rng = xorshift(rng);
                    let victim = if rng % 2 == 0 { n - 50_000 } else { rng % n };
                    index.remove(&id(victim), |h| ids[h as usize]);
                }
            }
            let (mean, max) = index.displacement();
            assert!(mean < 8.0 && max < 200, "{name}: mean {mean:.1}, max {max}");
        }
    }
}
