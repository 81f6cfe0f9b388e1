//! Message ids in one list per due tick (pure): the storage under the
//! ack-timeout tracker.
//!
//! Ids live in a slab of 40-byte nodes, reused through a free list; each
//! node is linked into the doubly-linked list of its due tick, and a
//! [`BTreeMap`] maps each tick to its list's ends. Adding and removing a
//! node is O(1) plus, at a list's end, a lookup among the few distinct due
//! ticks; taking the due lists visits only their nodes. A node handle is a
//! `u32`, which the tracker's [`IdIndex`](super::id_index::IdIndex) stores.

use std::collections::BTreeMap;

use crate::message_id::{BareId, MessageId};

const NIL: u32 = u32::MAX;
/// The due tick of a node that never expires (it is in no list).
pub(crate) const NEVER: u64 = u64::MAX;
/// `due` of a vacant slab slot (its `next` links the free list).
const VACANT: u64 = u64::MAX - 1;

#[derive(Debug, Clone, Copy)]
struct Node {
    id: BareId,
    prev: u32,
    next: u32,
    due: u64,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    head: u32,
    tail: u32,
}

/// Ids bucketed by due tick, addressed by `u32` handles.
#[derive(Debug)]
pub(crate) struct TickLists {
    nodes: Vec<Node>,
    free: u32,
    len: usize,
    buckets: BTreeMap<u64, Bucket>,
}

impl Default for TickLists {
    fn default() -> Self {
        Self {
            nodes: Vec::new(),
            free: NIL,
            len: 0,
            buckets: BTreeMap::new(),
        }
    }
}

impl TickLists {
    /// Stores `id`, due on tick `due` (or [`NEVER`]); returns its handle.
    ///
    /// # Panics
    /// Past `u32::MAX - 1` stored ids (160 GiB of nodes).
    pub(crate) fn insert(&mut self, id: MessageId, due: u64) -> u32 {
        let node = Node {
            id: id.into(),
            prev: NIL,
            next: NIL,
            due,
        };
        let handle = if self.free == NIL {
            self.nodes.push(node);
            u32::try_from(self.nodes.len() - 1)
                .ok()
                .filter(|&h| h != NIL)
                .expect("fewer than 2^32 - 1 tracked messages")
        } else {
            let handle = self.free;
            self.free = self.nodes[handle as usize].next;
            self.nodes[handle as usize] = node;
            handle
        };
        self.len += 1;
        if due != NEVER {
            self.link(handle);
        }
        handle
    }

    /// The id behind a handle (a vacant node keeps its last id until reused).
    pub(crate) fn id(&self, handle: u32) -> MessageId {
        self.nodes[handle as usize].id.into()
    }

    /// Removes the node `handle`.
    pub(crate) fn remove(&mut self, handle: u32) {
        self.unlink(handle);
        self.release(handle);
    }

    /// The due tick of the node `handle`.
    pub(crate) fn due_of(&self, handle: u32) -> u64 {
        self.nodes[handle as usize].due
    }

    /// Moves the node `handle` to the list of tick `due` (or out of every
    /// list, for [`NEVER`]): an unlink and a link, O(1) plus the lookup of
    /// the tick among the few distinct due ticks.
    pub(crate) fn reschedule(&mut self, handle: u32, due: u64) {
        self.unlink(handle);
        let node = &mut self.nodes[handle as usize];
        node.prev = NIL;
        node.next = NIL;
        node.due = due;
        if due != NEVER {
            self.link(handle);
        }
    }

    /// The ids due on ticks up to `tick`, earliest tick first.
    pub(crate) fn due(&self, tick: u64) -> Vec<MessageId> {
        let mut ids = Vec::new();
        for bucket in self.buckets.range(..=tick).map(|(_, b)| b) {
            let mut handle = bucket.head;
            while handle != NIL {
                let node = &self.nodes[handle as usize];
                ids.push(node.id.into());
                handle = node.next;
            }
        }
        ids
    }

    /// Removes every node due on ticks up to `tick`.
    pub(crate) fn remove_due(&mut self, tick: u64) {
        while let Some(entry) = self.buckets.first_entry() {
            if *entry.key() > tick {
                break;
            }
            let mut handle = entry.remove().head;
            while handle != NIL {
                let next = self.nodes[handle as usize].next;
                self.release(handle);
                handle = next;
            }
        }
    }

    /// Every stored id, in slab order.
    pub(crate) fn ids(&self) -> impl Iterator<Item = MessageId> + '_ {
        self.nodes
            .iter()
            .filter(|n| n.due != VACANT)
            .map(|n| n.id.into())
    }

    /// The earliest tick with a list.
    pub(crate) fn first_tick(&self) -> Option<u64> {
        self.buckets.first_key_value().map(|(&tick, _)| tick)
    }

    /// Removes every node, keeping the slab's memory.
    pub(crate) fn clear(&mut self) {
        self.nodes.clear();
        self.free = NIL;
        self.len = 0;
        self.buckets.clear();
    }

    /// How many ids are stored.
    #[cfg(any(test, feature = "unstable"))]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[cfg(any(test, feature = "unstable"))]
    /// Heap bytes: the slab, and an estimate of 64 bytes per due tick.
    pub(crate) fn allocated_bytes(&self) -> usize {
        self.nodes.capacity() * size_of::<Node>() + self.buckets.len() * 64
    }

    /// Appends `handle` to the list of its due tick.
    fn link(&mut self, handle: u32) {
        let due = self.nodes[handle as usize].due;
        match self.buckets.get_mut(&due) {
            Some(bucket) => {
                self.nodes[bucket.tail as usize].next = handle;
                self.nodes[handle as usize].prev = bucket.tail;
                bucket.tail = handle;
            }
            None => {
                let bucket = Bucket {
                    head: handle,
                    tail: handle,
                };
                self.buckets.insert(due, bucket);
            }
        }
    }

    /// Takes `handle` out of its tick's list, dropping an emptied tick.
    fn unlink(&mut self, handle: u32) {
        let Node {
            prev, next, due, ..
        } = self.nodes[handle as usize];
        if due == NEVER {
            return;
        }
        if prev != NIL {
            self.nodes[prev as usize].next = next;
        }
        if next != NIL {
            self.nodes[next as usize].prev = prev;
        }
        if prev == NIL || next == NIL {
            if let Some(bucket) = self.buckets.get_mut(&due) {
                if prev == NIL {
                    bucket.head = next;
                }
                if next == NIL {
                    bucket.tail = prev;
                }
                if bucket.head == NIL {
                    self.buckets.remove(&due);
                }
            }
        }
    }

    /// Returns a node to the free list.
    fn release(&mut self, handle: u32) {
        let node = &mut self.nodes[handle as usize];
        node.due = VACANT;
        node.next = self.free;
        self.free = handle;
        self.len -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(entry: u64) -> MessageId {
        MessageId::new(1, entry)
    }

    #[test]
    fn a_node_is_40_bytes() {
        assert_eq!(size_of::<Node>(), 40);
    }

    #[test]
    fn removal_from_any_position_keeps_the_lists_whole() {
        let mut lists = TickLists::default();
        let handles: Vec<u32> = (0..6).map(|n| lists.insert(id(n), 3)).collect();
        for h in [handles[0], handles[5], handles[3]] {
            lists.remove(h);
        }
        let reused = lists.insert(id(9), 3);
        assert_eq!(reused, handles[3], "the last freed node is reused first");
        assert_eq!(lists.due(3), [id(1), id(2), id(4), id(9)]);
        lists.remove_due(3);
        assert_eq!((lists.len(), lists.first_tick()), (0, None));
    }

    #[test]
    fn lists_come_out_by_tick_and_never_nodes_stay() {
        let mut lists = TickLists::default();
        lists.insert(id(1), 7);
        lists.insert(id(2), 5);
        lists.insert(id(3), NEVER);
        lists.insert(id(4), 9);
        assert_eq!(lists.first_tick(), Some(5));
        assert_eq!(lists.due(7), [id(2), id(1)]);
        lists.remove_due(7);
        assert_eq!(lists.ids().collect::<Vec<_>>(), [id(3), id(4)]);
        assert_eq!(lists.first_tick(), Some(9));
    }

    #[test]
    fn a_rescheduled_node_leaves_its_list_and_joins_the_new_tail() {
        let mut lists = TickLists::default();
        let a = lists.insert(id(1), 2);
        lists.insert(id(2), 2);
        lists.insert(id(3), 5);
        lists.reschedule(a, 5);
        assert_eq!(lists.due_of(a), 5);
        assert_eq!(lists.due(2), [id(2)]);
        assert_eq!(lists.due(5), [id(2), id(3), id(1)]);
        lists.reschedule(a, NEVER);
        assert_eq!(lists.due(9), [id(2), id(3)]);
        assert_eq!(lists.len(), 3, "a node that never expires stays stored");
    }

    #[test]
    fn an_emptied_tick_is_dropped_at_once() {
        let mut lists = TickLists::default();
        let a = lists.insert(id(1), 2);
        let b = lists.insert(id(2), 2);
        lists.insert(id(3), 4);
        lists.remove(b);
        lists.remove(a);
        assert_eq!(lists.first_tick(), Some(4));
        lists.clear();
        assert_eq!((lists.len(), lists.first_tick()), (0, None));
    }
}
