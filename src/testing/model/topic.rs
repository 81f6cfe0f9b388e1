//! A topic of the model broker and its subscriptions (pure): entries in
//! publish order, and per subscription what is acked, what is out with
//! which consumer, what waits to be delivered again and how often each
//! entry was delivered again.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Instant;

use bytes::Bytes;

use crate::message_id::MessageId;
use crate::proto::MessageMetadata;
use crate::proto::command_subscribe::SubType;

/// Which connection a frame comes from or goes to.
pub(crate) type ConnId = u64;

/// One stored entry (a message, or a batch of them).
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) id: MessageId,
    pub(crate) metadata: MessageMetadata,
    pub(crate) data: Bytes,
    pub(crate) stored_at: Instant,
    /// Delayed delivery: not dispatched on Shared and Key_Shared before this.
    pub(crate) deliver_at: Option<Instant>,
}

impl Entry {
    /// Permits the entry takes (its messages).
    pub(crate) fn permits(&self) -> u32 {
        self.metadata.num_messages_in_batch.unwrap_or(1).max(1) as u32
    }
}

/// A consumer attached to a subscription.
#[derive(Debug, Clone)]
pub(crate) struct Attached {
    pub(crate) conn: ConnId,
    pub(crate) id: u64,
    pub(crate) permits: u32,
    pub(crate) epoch: Option<u64>,
}

/// One subscription of a topic.
#[derive(Debug)]
pub(crate) struct Subscription {
    pub(crate) kind: SubType,
    pub(crate) durable: bool,
    pub(crate) consumers: Vec<Attached>,
    /// The next entry to read for the first time.
    pub(crate) read: u64,
    /// Every entry below this is acked.
    pub(crate) mark: u64,
    /// Acked entries at or above `mark`.
    pub(crate) acked: BTreeSet<u64>,
    /// Batches acked in part (batch index acks): entry → the members
    /// still unacked, bit `i` set while member `i` is (as the broker's
    /// `ack_set`).
    pub(crate) members_left: HashMap<u64, Vec<i64>>,
    /// Delivered and not acked: entry → (connection, consumer id).
    pub(crate) pending: BTreeMap<u64, (ConnId, u64)>,
    /// To deliver again, oldest first.
    pub(crate) replay: BTreeSet<u64>,
    /// Delayed entries read but not yet due.
    pub(crate) delayed: BTreeSet<(Instant, u64)>,
    /// Redelivery counts (Shared and Key_Shared).
    pub(crate) counts: HashMap<u64, u32>,
    /// Round-robin start for Shared.
    pub(crate) next: usize,
    /// A non-durable subscription moved by a seek: kept when its consumer
    /// leaves, for the consumer that subscribes again at the new position.
    pub(crate) kept_for_seek: bool,
}

/// A message to send out: to whom, which entry, with which count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Dispatch {
    pub(crate) conn: ConnId,
    pub(crate) consumer: u64,
    pub(crate) entry: u64,
    pub(crate) redelivery_count: u32,
    pub(crate) epoch: Option<u64>,
    /// The members still unacked when the batch was acked in part (empty:
    /// all of them).
    pub(crate) ack_set: Vec<i64>,
}

impl Subscription {
    /// A subscription reading from entry `start`.
    pub(crate) fn new(kind: SubType, durable: bool, start: u64) -> Self {
        Self {
            kind,
            durable,
            consumers: Vec::new(),
            read: start,
            mark: start,
            acked: BTreeSet::new(),
            members_left: HashMap::new(),
            pending: BTreeMap::new(),
            replay: BTreeSet::new(),
            delayed: BTreeSet::new(),
            counts: HashMap::new(),
            next: 0,
            kept_for_seek: false,
        }
    }

    fn counts_redeliveries(&self) -> bool {
        matches!(self.kind, SubType::Shared | SubType::KeyShared)
    }

    pub(crate) fn is_acked(&self, entry: u64) -> bool {
        entry < self.mark || self.acked.contains(&entry)
    }

    /// Acks `entry`; whether it was not acked before.
    pub(crate) fn ack(&mut self, entry: u64) -> bool {
        if self.is_acked(entry) {
            return false;
        }
        self.pending.remove(&entry);
        self.replay.remove(&entry);
        self.members_left.remove(&entry);
        self.acked.insert(entry);
        while self.acked.remove(&self.mark) {
            self.mark += 1;
        }
        true
    }

    /// Acks the members of `entry` (a batch of `members`) that `ack_set`
    /// leaves out (bit set: still unacked), as a broker with batch index
    /// acks on does; whether that acked the whole entry now.
    pub(crate) fn ack_members(&mut self, entry: u64, members: u32, ack_set: &[i64]) -> bool {
        if self.is_acked(entry) {
            return false;
        }
        let left = self
            .members_left
            .entry(entry)
            .or_insert_with(|| all_members(members));
        for (i, word) in left.iter_mut().enumerate() {
            *word &= ack_set.get(i).copied().unwrap_or(0);
        }
        if left.iter().all(|w| *w == 0) {
            self.ack(entry)
        } else {
            false
        }
    }

    /// Entries delivered and not acked, and those waiting (the backlog).
    pub(crate) fn unacked(&self, entries: u64) -> u64 {
        (self.mark..entries)
            .filter(|e| !self.acked.contains(e))
            .count() as u64
    }

    /// The consumer `(conn, id)` asks for `entries` again (all it holds
    /// when `entries` is `None`); returns the entries moved to the replay.
    pub(crate) fn redeliver(&mut self, conn: ConnId, id: u64, entries: Option<&[u64]>) -> Vec<u64> {
        let held: Vec<u64> = self
            .pending
            .iter()
            .filter(|(e, owner)| **owner == (conn, id) && entries.is_none_or(|l| l.contains(e)))
            .map(|(e, _)| *e)
            .collect();
        let counted = self.counts_redeliveries();
        for entry in &held {
            self.pending.remove(entry);
            self.replay.insert(*entry);
            if counted {
                *self.counts.entry(*entry).or_default() += 1;
            }
        }
        held
    }

    /// The consumer `(conn, id)` left: what it held is delivered again.
    pub(crate) fn detach(&mut self, conn: ConnId, id: u64) {
        self.redeliver_uncounted(conn, id);
        self.consumers.retain(|c| (c.conn, c.id) != (conn, id));
    }

    fn redeliver_uncounted(&mut self, conn: ConnId, id: u64) {
        let held: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, owner)| **owner == (conn, id))
            .map(|(e, _)| *e)
            .collect();
        for entry in held {
            self.pending.remove(&entry);
            self.replay.insert(entry);
        }
    }

    /// Moves the subscription: entries before `entry` count as acked,
    /// everything from it on is unacked and read again.
    pub(crate) fn reset(&mut self, entry: u64) {
        self.mark = entry;
        self.read = entry;
        self.acked.clear();
        self.members_left.clear();
        self.pending.clear();
        self.replay.clear();
        self.delayed.clear();
        self.counts.clear();
    }

    /// Delayed entries due at `now` join the replay.
    pub(crate) fn release_due(&mut self, now: Instant) {
        while let Some(&(at, entry)) = self.delayed.first() {
            if at > now {
                break;
            }
            self.delayed.pop_first();
            self.replay.insert(entry);
        }
    }

    /// The earliest delayed entry's time.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.delayed.first().map(|(at, _)| *at)
    }

    /// Hands entries to consumers with permits, as the broker's
    /// dispatcher does for the subscription type.
    pub(crate) fn dispatch(&mut self, now: Instant, entries: &[Entry]) -> Vec<Dispatch> {
        let mut out = Vec::new();
        while let Some(entry) = self.next_entry(now, entries) {
            let Some(index) = self.choose(&entries[entry as usize]) else {
                break;
            };
            if self.kind == SubType::KeyShared && self.held_elsewhere(entry, index, entries) {
                // As Apache Pulsar does for a key whose consumer changed (a
                // consumer joined or left): its new consumer waits until
                // the earlier messages of the key are acked, which keeps
                // the order per key.
                break;
            }
            let ack_set = self.members_left.get(&entry).cloned().unwrap_or_default();
            let permits = if ack_set.is_empty() {
                entries[entry as usize].permits()
            } else {
                ack_set.iter().map(|w| w.count_ones()).sum()
            };
            let consumer = &mut self.consumers[index];
            consumer.permits = consumer.permits.saturating_sub(permits);
            let (conn, id, epoch) = (consumer.conn, consumer.id, consumer.epoch);
            if !self.replay.remove(&entry) {
                self.read = entry + 1;
            }
            self.pending.insert(entry, (conn, id));
            let redelivery_count = if self.counts_redeliveries() {
                self.counts.get(&entry).copied().unwrap_or(0)
            } else {
                0
            };
            out.push(Dispatch {
                conn,
                consumer: id,
                entry,
                redelivery_count,
                epoch,
                ack_set,
            });
        }
        out
    }

    /// The next entry to deliver: the oldest to deliver again, else the
    /// next unread one (delayed ones set aside on Shared and Key_Shared).
    fn next_entry(&mut self, now: Instant, entries: &[Entry]) -> Option<u64> {
        while let Some(&entry) = self.replay.first() {
            if self.is_acked(entry) {
                self.replay.pop_first();
                continue;
            }
            return Some(entry);
        }
        while (self.read as usize) < entries.len() {
            let entry = self.read;
            let delayed = entries[entry as usize]
                .deliver_at
                .filter(|at| *at > now && self.counts_redeliveries());
            if self.is_acked(entry) || self.pending.contains_key(&entry) {
                self.read += 1;
            } else if let Some(at) = delayed {
                self.delayed.insert((at, entry));
                self.read += 1;
            } else {
                return Some(entry);
            }
        }
        None
    }

    /// Whether an earlier entry with the key of `entry` waits for its ack
    /// at a consumer other than consumer `index`.
    fn held_elsewhere(&self, entry: u64, index: usize, entries: &[Entry]) -> bool {
        let to = &self.consumers[index];
        let key = key_of(&entries[entry as usize]);
        self.pending.range(..entry).any(|(&earlier, &holder)| {
            holder != (to.conn, to.id) && key_of(&entries[earlier as usize]) == key
        })
    }

    /// Which consumer gets `entry`, if one has permits.
    fn choose(&mut self, entry: &Entry) -> Option<usize> {
        let n = self.consumers.len();
        if n == 0 {
            return None;
        }
        match self.kind {
            SubType::Exclusive | SubType::Failover => (self.consumers[0].permits > 0).then_some(0),
            SubType::KeyShared => {
                let index = (stable_hash(key_of(entry)) % n as u64) as usize;
                (self.consumers[index].permits > 0).then_some(index)
            }
            SubType::Shared => {
                for k in 0..n {
                    let index = (self.next + k) % n;
                    if self.consumers[index].permits > 0 {
                        self.next = (index + 1) % n;
                        return Some(index);
                    }
                }
                None
            }
        }
    }
}

/// The `ack_set` of a batch of `members` none of which is acked.
fn all_members(members: u32) -> Vec<i64> {
    let mut words = vec![0i64; members.div_ceil(64) as usize];
    for i in 0..members as usize {
        words[i / 64] |= 1 << (i % 64);
    }
    words
}

/// FNV-1a: the same key goes to the same Key_Shared consumer in every run.
/// The key a Key_Shared subscription hands `entry` out by: its ordering
/// key, else its partition key.
fn key_of(entry: &Entry) -> &[u8] {
    entry
        .metadata
        .ordering_key
        .as_deref()
        .or(entry.metadata.partition_key.as_deref().map(str::as_bytes))
        .unwrap_or_default()
}

fn stable_hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A topic: its entries, subscriptions, and the ledger id of its ids.
#[derive(Debug)]
pub(crate) struct Topic {
    pub(crate) ledger: u64,
    pub(crate) partition: i32,
    pub(crate) entries: Vec<Entry>,
    pub(crate) subscriptions: BTreeMap<String, Subscription>,
}

impl Topic {
    pub(crate) fn new(ledger: u64, partition: i32) -> Self {
        Self {
            ledger,
            partition,
            entries: Vec::new(),
            subscriptions: BTreeMap::new(),
        }
    }

    /// The id of entry `entry`.
    pub(crate) fn id(&self, entry: u64) -> MessageId {
        MessageId::new(self.ledger, entry).with_partition(self.partition)
    }

    /// The entry an id names, if it is one of this topic's.
    pub(crate) fn entry_of(&self, id: &MessageId) -> Option<u64> {
        (id.ledger_id == self.ledger && (id.entry_id as usize) < self.entries.len())
            .then_some(id.entry_id)
    }

    /// The entry to start reading at for `id` (a reader's start, a seek):
    /// earliest, latest, or the id's own entry.
    pub(crate) fn start_at(&self, id: &MessageId) -> u64 {
        let end = self.entries.len() as u64;
        if *id == MessageId::EARLIEST || id.ledger_id < self.ledger {
            0
        } else if *id == MessageId::LATEST || id.ledger_id > self.ledger {
            end
        } else {
            id.entry_id.min(end)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(now: Instant, n: u64) -> Vec<Entry> {
        (0..n)
            .map(|e| Entry {
                id: MessageId::new(1, e),
                metadata: MessageMetadata::default(),
                data: Bytes::new(),
                stored_at: now,
                deliver_at: None,
            })
            .collect()
    }

    fn attach(sub: &mut Subscription, conn: ConnId, permits: u32) {
        sub.consumers.push(Attached {
            conn,
            id: 0,
            permits,
            epoch: None,
        });
    }

    #[test]
    fn shared_spreads_in_turn_and_counts_redeliveries() {
        let now = crate::clock::now();
        let all = entries(now, 4);
        let mut sub = Subscription::new(SubType::Shared, true, 0);
        attach(&mut sub, 1, 10);
        attach(&mut sub, 2, 10);
        let out = sub.dispatch(now, &all);
        let to: Vec<ConnId> = out.iter().map(|d| d.conn).collect();
        assert_eq!(to, [1, 2, 1, 2]);
        assert_eq!(sub.redeliver(1, 0, Some(&[2])), [2]);
        let again = sub.dispatch(now, &all);
        assert_eq!((again[0].entry, again[0].redelivery_count), (2, 1));
        assert!(sub.ack(0) && !sub.ack(0));
        assert_eq!(sub.unacked(4), 3);
    }

    #[test]
    fn exclusive_rewinds_without_counting_and_permits_bound_dispatch() {
        let now = crate::clock::now();
        let all = entries(now, 3);
        let mut sub = Subscription::new(SubType::Exclusive, true, 0);
        attach(&mut sub, 1, 2);
        assert_eq!(sub.dispatch(now, &all).len(), 2, "two permits");
        sub.redeliver(1, 0, None);
        sub.consumers[0].permits = 5;
        let out: Vec<(u64, u32)> = sub
            .dispatch(now, &all)
            .iter()
            .map(|d| (d.entry, d.redelivery_count))
            .collect();
        assert_eq!(out, [(0, 0), (1, 0), (2, 0)]);
    }

    #[test]
    fn key_shared_keeps_a_key_from_its_new_consumer_until_the_old_one_acks() {
        let now = crate::clock::now();
        let mut all = entries(now, 2);
        for e in &mut all {
            e.metadata.partition_key = Some("k".into());
        }
        let mut sub = Subscription::new(SubType::KeyShared, true, 0);
        attach(&mut sub, 1, 1);
        let first = sub.dispatch(now, &all);
        assert_eq!((first.len(), first[0].conn), (1, 1));
        // A consumer joins in front: the key may hash to it now.
        sub.consumers.insert(
            0,
            Attached {
                conn: 2,
                id: 0,
                permits: 10,
                epoch: None,
            },
        );
        sub.consumers[1].permits = 10;
        assert_eq!(stable_hash(b"k") % 2, 0, "the key hashes to the new one");
        let to = sub.dispatch(now, &all);
        assert!(to.is_empty(), "held while entry 0 waits at the old one");
        assert!(sub.ack(0));
        let to = sub.dispatch(now, &all);
        assert_eq!((to.len(), to[0].conn, to[0].entry), (1, 2, 1));
    }

    #[test]
    fn a_batch_acked_member_by_member_is_acked_once_none_is_left() {
        let now = crate::clock::now();
        let mut all = entries(now, 1);
        all[0].metadata.num_messages_in_batch = Some(3);
        let mut sub = Subscription::new(SubType::Shared, true, 0);
        attach(&mut sub, 1, 10);
        sub.dispatch(now, &all);
        assert!(!sub.ack_members(0, 3, &[0b110]), "member 0 acked");
        sub.redeliver(1, 0, None);
        let again = sub.dispatch(now, &all);
        assert_eq!(again[0].ack_set, [0b110], "the copy names what is left");
        assert_eq!(sub.consumers[0].permits, 10 - 3 - 2);
        assert!(!sub.ack_members(0, 3, &[0b100]));
        assert!(
            sub.ack_members(0, 3, &[0b011]),
            "the last member acks the entry"
        );
        assert!(sub.is_acked(0) && sub.members_left.is_empty());
    }

    #[test]
    fn delayed_entries_wait_on_shared_only() {
        let now = crate::clock::now();
        let mut all = entries(now, 2);
        all[0].deliver_at = Some(now + std::time::Duration::from_secs(5));
        let mut shared = Subscription::new(SubType::Shared, true, 0);
        attach(&mut shared, 1, 10);
        let first: Vec<u64> = shared.dispatch(now, &all).iter().map(|d| d.entry).collect();
        assert_eq!(first, [1]);
        assert_eq!(
            shared.next_due(),
            Some(now + std::time::Duration::from_secs(5))
        );
        shared.release_due(now + std::time::Duration::from_secs(5));
        assert_eq!(shared.dispatch(now, &all)[0].entry, 0);
        let mut exclusive = Subscription::new(SubType::Exclusive, true, 0);
        attach(&mut exclusive, 1, 10);
        assert_eq!(exclusive.dispatch(now, &all).len(), 2);
    }
}
