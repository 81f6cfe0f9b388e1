//! Topics that leave a consumer (deleted, or no longer matched by its
//! pattern): their subs are closed at once, and freed with their shelf
//! slots at the end of the loop's turn, so what a consumer keeps and what
//! each turn walks follow the topics it reads now, however many came and
//! went.
//!
//! Freeing moves the subs after a freed one down the driver's list. Two
//! kinds of things name a sub, and each is kept right:
//! - what the driver holds between turns names it by index (the shelf's
//!   slots, its touched list, round-robin start and memory shares, the
//!   resubscribe backoffs and attempts running, the FLOWs withheld for the
//!   memory limit and for the forwards bound): each is remapped in the
//!   same step (the shelf's under its lock, so a handle never sees a
//!   slot moved without its entries), and a freed sub's entries go (its
//!   bytes back to the budget);
//! - what comes back to the loop later (mailbox events, subscribe
//!   attempts, ACK requests with receipts, dead-letter forwards) names it
//!   by its [`SubKey`], never reused: it finds the sub wherever it moved,
//!   and nothing once it is freed (a subscription made meanwhile is
//!   closed on the broker).
//!
//! The handles keep the names of the last [`TopicsRead::LEFT_REMEMBERED`]
//! topics left, so a late ack of a message from one is answered `Ok`.

use super::resubscribe::close_orphan;
use super::*;

/// A sub's name for what comes back to the loop after its turn: unique
/// in the consumer's life, given in increasing order, so the driver's
/// list of subs is sorted by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct SubKey(pub(super) u64);

/// Moves the FLOWs of `withheld` to the new index of their sub
/// (`moved(old)`), dropping those of subs freed (`None`).
pub(super) fn remap_flows(withheld: &mut WithheldFlows, moved: impl Fn(usize) -> Option<usize>) {
    withheld.retain_mut(|(index, _, _)| match moved(*index) {
        Some(new) => {
            *index = new;
            true
        }
        None => false,
    });
}

/// Gives back the room of `list` once it uses less than half of it (so
/// a topic joining after one left finds room, without a copy each time).
pub(super) fn shrink_if_mostly_empty<T>(list: &mut Vec<T>) {
    if list.capacity() > 2 * list.len().max(4) {
        list.shrink_to_fit();
    }
}

impl Driver {
    /// The index of the sub `key` names; `None` once it is freed.
    pub(super) fn index_of(&self, key: SubKey) -> Option<usize> {
        self.subs.binary_search_by_key(&key, |s| s.key).ok()
    }

    /// Stops reading `gone` (topics deleted, or no longer matched): their
    /// subs are closed on the broker in the background, and freed at the
    /// end of this turn of the loop; whether the consumer was active on
    /// them (Failover) no longer counts.
    pub(super) fn remove_topics(&mut self, gone: &[TopicName]) {
        if gone.is_empty() {
            return;
        }
        // A topic deleted under the consumer may have been given up already
        // (its subscription could not be made again): that is no loss.
        self.lost_reports.retain(|e| {
            !matches!(e, ConsumerError::Lost { topic, .. }
                if TopicName::parse(topic).is_ok_and(|t| gone.contains(&t.base())))
        });
        let mut left = Vec::new();
        for index in 0..self.subs.len() {
            let sub = &mut self.subs[index];
            if sub.removed || !gone.contains(&sub.topic.base()) {
                continue;
            }
            info!(topic = %sub.name, "topic gone from the pattern; leaving it");
            sub.removed = true;
            sub.generation += 1;
            {
                let mut shelved = self.shelf.lock();
                let slot = &mut shelved.slots[index];
                slot.removed = true;
                slot.core.on_reconnect();
            }
            sub.grouped.clear();
            sub.flush_at = None;
            let topic = sub.name.to_string();
            sub.acks.fail_all(|| ConsumerError::Lost {
                topic: topic.clone(),
                attempts: 0,
            });
            let attached = !self.resubscribes.running.remove(&index) && !sub.lost;
            if attached {
                let (conn, id) = (sub.conn.clone(), sub.id);
                tokio::spawn(async move { close_orphan(&conn, id).await });
            }
            left.push(sub.name.clone());
        }
        if left.is_empty() {
            return;
        }
        self.activity.send_if_modified(|all| {
            let before = all.len();
            all.retain(|(topic, _)| !left.contains(topic));
            all.len() != before
        });
        self.removed_to_free = true;
        self.publish_topics_left(left);
    }

    /// Tells the handles which topics are read now.
    pub(super) fn publish_topics(&self) {
        self.publish_topics_left(Vec::new());
    }

    /// Tells the handles which topics are read now, and that `left` were
    /// left (remembered with the last ones left before).
    fn publish_topics_left(&self, left: Vec<Arc<str>>) {
        let read = self.subs.iter().filter(|s| !s.removed);
        let mut topics = TopicsRead {
            read: read.map(|s| s.name.to_string()).collect(),
            left: self.topics.borrow().left.clone(),
        };
        for name in left {
            topics.remember_left(name);
        }
        self.topics.send_replace(Arc::new(topics));
    }

    /// Frees the subs removed this turn, with their slots, and moves every
    /// index the driver holds to where its sub went (see the module
    /// documentation). Called between turns of the loop, when no index is
    /// held on the way.
    pub(super) fn free_removed(&mut self) {
        if !std::mem::take(&mut self.removed_to_free) {
            return;
        }
        let mut kept = 0;
        let moved: Vec<Option<usize>> = self
            .subs
            .iter()
            .map(|s| {
                (!s.removed).then(|| {
                    kept += 1;
                    kept - 1
                })
            })
            .collect();
        let moved = |old: usize| moved.get(old).copied().flatten();
        debug!(
            freed = self.subs.len() - kept,
            kept, "freeing the subs of topics left"
        );
        {
            let mut shelved = self.shelf.lock();
            shelved.free(moved);
            self.subs.retain(|s| !s.removed);
        }
        shrink_if_mostly_empty(&mut self.subs);
        self.resubscribes.remap(moved);
        self.memory.remap(moved);
        self.settings.forwards.remap(moved);
    }
}

#[cfg(test)]
mod tests {
    use tokio::sync::Semaphore;

    use super::*;
    use crate::consumer::task::shelf::{HeldBytes, Slot};

    /// Sub 1 of three freed: sub 2 moves to 1.
    fn middle_freed(old: usize) -> Option<usize> {
        [Some(0), None, Some(1)].get(old).copied().flatten()
    }

    fn slot(name: &str) -> Slot {
        Slot {
            name: name.into(),
            core: ConsumerCore::new(CoreConfig::default()).expect("a valid config"),
            position: Position::new(None, false, false),
            removed: false,
        }
    }

    #[test]
    fn withheld_flows_follow_their_sub_and_those_of_freed_subs_go() {
        let (a, b, c) = (ConsumerId(7), ConsumerId(8), ConsumerId(9));
        let mut withheld = vec![(0, a, 5), (1, b, 3), (2, c, 4)];
        remap_flows(&mut withheld, middle_freed);
        assert_eq!(withheld, [(0, a, 5), (1, c, 4)]);
    }

    #[test]
    fn freeing_a_slot_moves_the_work_left_and_the_turn_to_the_slots_that_stay() {
        let shelf = shelf::Shelf::for_tests(&CoreConfig::default());
        let mut shelved = shelf.lock();
        shelved.slots.extend([slot("a"), slot("b"), slot("c")]);
        shelved.slots[1].removed = true;
        shelved.touched = vec![2, 1];
        shelved.next_sub = 1;
        shelved.free(middle_freed);
        let names: Vec<&str> = shelved.slots.iter().map(|s| &*s.name).collect();
        assert_eq!(names, ["a", "c"]);
        assert_eq!(shelved.touched, [1], "c's work stays, b's goes");
        assert_eq!(shelved.next_sub, 1, "b's turn passes to c");
        assert_eq!(shelved.find("c"), Some(1));
        assert_eq!(shelved.find("b"), None);
    }

    #[test]
    fn a_freed_subs_bytes_go_back_to_the_budget_and_the_others_follow_their_sub() {
        let budget = Arc::new(Semaphore::new(100));
        let queues = crate::client::memory::QueueBudget::with_share(budget.clone(), 100);
        let mut held = HeldBytes::new(Arc::new(queues));
        held.sync(0, 10);
        held.sync(1, 20);
        held.sync(2, 30);
        held.remap(middle_freed);
        assert_eq!((held.total(), budget.available_permits()), (40, 60));
        // c's 30 bytes are at its new index: emptying it gives them back.
        held.sync(1, 0);
        assert_eq!((held.total(), budget.available_permits()), (10, 90));
    }

    #[test]
    fn backoffs_and_attempts_running_follow_their_sub() {
        let mut resubscribes = resubscribe::Resubscribes::default();
        for index in [0, 1, 2] {
            resubscribes.backoff.entry(index).or_default().next_delay();
        }
        resubscribes.backoff.entry(2).or_default().next_delay();
        resubscribes.running.extend([1, 2]);
        resubscribes.remap(middle_freed);
        assert_eq!(resubscribes.attempts(0), 1);
        assert_eq!(resubscribes.attempts(1), 2, "c's backoff");
        assert_eq!(resubscribes.backoff.len(), 2);
        assert!(resubscribes.is_running(1) && !resubscribes.is_running(2));
        assert_eq!(resubscribes.running.len(), 1);
    }
}
