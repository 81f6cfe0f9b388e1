//! The ack-timeout tracker: which messages the application holds, and when
//! each must be requested again (pure).
//!
//! A message's clock starts when it is handed to the application. When the
//! consumer has an ack timeout, each tick (500 ms by default) requests again
//! every message held `ack_timeout` or longer; Java's
//! `ackTimeoutRedeliveryBackoff` adds `backoff.delay(redelivery_count)` to
//! the timeout. Deadlines are rounded up to the tick grid: a message is
//! requested at the first tick at or after its deadline.
//!
//! # Structure
//!
//! Messages sit in a slab of 40-byte nodes (id, due tick, and links of a
//! doubly-linked list per tick); a `BTreeMap` maps each due tick to its
//! list's ends (there are at most `timeout / tick` distinct ticks, 60 for
//! 30 s), and a compact open-addressing index maps an id to its node
//! (8 bytes per slot, at most half full, consecutive ids sharing cache
//! lines). So:
//! - `insert` and `remove` are O(1): a hash probe, a slab slot, a list link;
//! - `expire` walks only the lists of due ticks: it never scans every
//!   tracked message;
//! - memory is about 40 B (node) + 16 B (index) per tracked message, reused
//!   after removal through the slab's free list.
//!
//! The tracker can also run without a timeout ([`UnackedTracker::untimed`]):
//! it then only answers "does the application hold this id?", which the
//! consumer needs either way.

use std::time::{Duration, Instant};

use crate::message_id::MessageId;

use super::id_index::{IdIndex, Probe};
use super::tick_lists::{NEVER, TickLists};
use crate::consumer::core::nack::RedeliveryBackoff;
use crate::consumer::core::tick::TickGrid;

/// Messages held by the application, bucketed by the tick on which their
/// ack timeout expires.
#[derive(Debug)]
pub struct UnackedTracker {
    timeout: Option<Duration>,
    backoff: Option<RedeliveryBackoff>,
    grid: TickGrid,
    lists: TickLists,
    index: IdIndex,
}

impl UnackedTracker {
    /// A tracker expiring messages held `timeout` or longer, checked every
    /// `tick` (a zero tick counts as one nanosecond).
    pub fn new(timeout: Duration, tick: Duration) -> Self {
        Self::build(Some(timeout), tick)
    }

    /// A tracker without a timeout: it records which messages are held and
    /// never expires any.
    pub fn untimed() -> Self {
        Self::build(None, Duration::from_millis(500))
    }

    fn build(timeout: Option<Duration>, tick: Duration) -> Self {
        Self {
            timeout,
            backoff: None,
            grid: TickGrid::new(tick),
            lists: TickLists::default(),
            index: IdIndex::default(),
        }
    }

    /// Adds `backoff.delay(redelivery_count)` to the timeout of each message
    /// (Java's `ackTimeoutRedeliveryBackoff`).
    #[must_use]
    pub fn with_backoff(mut self, backoff: RedeliveryBackoff) -> Self {
        self.backoff = Some(backoff);
        self
    }

    /// Puts tick 0 at `origin` unless a tick grid is already anchored (by
    /// this or the first [`insert`](Self::insert)); lets other timers share
    /// this tracker's ticks.
    pub fn anchor(&mut self, origin: Instant) {
        self.grid.anchor(origin);
    }

    /// Starts the clock of `id`, handed to the application at `now`.
    /// Returns `false`, keeping the first deadline, if `id` is already
    /// tracked.
    pub fn insert(&mut self, now: Instant, id: MessageId) -> bool {
        self.insert_redelivered(now, id, 0)
    }

    /// As [`insert`](Self::insert), for a message delivered
    /// `redelivery_count` times before (it matters with a backoff).
    ///
    /// # Panics
    /// Past `u32::MAX - 1` tracked messages (160 GiB of nodes).
    pub fn insert_redelivered(
        &mut self,
        now: Instant,
        id: MessageId,
        redelivery_count: u32,
    ) -> bool {
        let timeout = self.timeout.map(|timeout| {
            let extra = self
                .backoff
                .map_or(Duration::ZERO, |b| b.delay(redelivery_count));
            timeout.saturating_add(extra)
        });
        self.insert_for(now, id, timeout)
    }

    /// Starts the clock of `id` at `now` with a deadline `after` from now
    /// (`None`: never); `false` if `id` is already tracked.
    fn insert_for(&mut self, now: Instant, id: MessageId, after: Option<Duration>) -> bool {
        let lists = &self.lists;
        let vacancy = match self.index.find_or_slot(&id, |h| lists.id(h)) {
            Probe::Found => return false,
            Probe::Vacant(vacancy) => vacancy,
        };
        let due = match (self.timeout, after) {
            (Some(_), Some(after)) => self.grid.due_tick(now, after).unwrap_or(NEVER),
            _ => NEVER,
        };
        let handle = self.lists.insert(id, due);
        self.index.fill(vacancy, handle);
        true
    }

    /// Tracks `id` again (taken by [`expire`](Self::expire)), due `after`
    /// from `now`: a lease renewed at its expiry. `false` if `id` is
    /// already tracked.
    pub fn renew(&mut self, now: Instant, id: MessageId, after: Duration) -> bool {
        self.insert_for(now, id, Some(after))
    }

    /// Pushes the deadline of `id` to `by` from `now` when that is later
    /// than its deadline (it never moves earlier). O(1), as
    /// [`remove`](Self::remove): a hash probe and a move between tick
    /// lists. Returns whether `id` is tracked. Without a timeout there is
    /// no deadline to move.
    pub fn extend(&mut self, now: Instant, id: MessageId, by: Duration) -> bool {
        let Some(handle) = self.index.find(&id, |h| self.lists.id(h)) else {
            return false;
        };
        if self.timeout.is_none() {
            return true;
        }
        let due = self.grid.due_tick(now, by).unwrap_or(NEVER);
        if due > self.lists.due_of(handle) {
            self.lists.reschedule(handle, due);
        }
        true
    }

    /// Stops the clock of `id` (acked, nacked or redelivered); whether it
    /// was tracked.
    pub fn remove(&mut self, id: MessageId) -> bool {
        let lists = &self.lists;
        match self.index.remove(&id, |h| lists.id(h)) {
            Some(handle) => {
                self.lists.remove(handle);
                true
            }
            None => false,
        }
    }

    /// Whether `id` is tracked.
    pub fn contains(&self, id: MessageId) -> bool {
        self.index.find(&id, |h| self.lists.id(h)).is_some()
    }

    /// Removes and returns every id whose deadline tick is at or before
    /// `now`, earliest deadline first. Visits only the due ticks' lists.
    pub fn expire(&mut self, now: Instant) -> Vec<MessageId> {
        let Some(current) = self.grid.current_tick(now) else {
            return Vec::new();
        };
        let expired = self.lists.due(current);
        for id in &expired {
            let lists = &self.lists;
            self.index.remove(id, |h| lists.id(h));
        }
        self.lists.remove_due(current);
        expired
    }

    /// Removes and returns every tracked id at or before `upto` (a
    /// cumulative ack). O(slab size): it looks at every node.
    pub fn remove_up_to(&mut self, upto: MessageId) -> Vec<MessageId> {
        let covered: Vec<MessageId> = self.lists.ids().filter(|id| *id <= upto).collect();
        for id in &covered {
            self.remove(*id);
        }
        covered
    }

    /// The first tick on which something expires.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.grid.instant(self.lists.first_tick()?)
    }

    /// Forgets every tracked message, keeping the allocated memory.
    pub fn clear(&mut self) {
        self.lists.clear();
        self.index.clear();
    }

    #[cfg(any(test, feature = "unstable"))]
    /// How many messages are tracked.
    pub fn len(&self) -> usize {
        self.lists.len()
    }

    #[cfg(any(test, feature = "unstable"))]
    /// Whether no message is tracked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[cfg(any(test, feature = "unstable"))]
    /// Heap bytes held, computed from capacities: slab nodes, index slots,
    /// and an estimate of 64 bytes per due tick for the tick map.
    pub fn allocated_bytes(&self) -> usize {
        self.lists.allocated_bytes() + self.index.allocated_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn id(entry: u64) -> MessageId {
        MessageId::new(1, entry)
    }

    fn tracker() -> UnackedTracker {
        UnackedTracker::new(ms(10_000), ms(500))
    }

    #[test]
    fn expires_at_the_first_tick_at_or_after_the_deadline() {
        let t0 = crate::clock::now();
        let mut t = tracker();
        t.insert(t0, id(1)); // due 10.0 s, on a tick
        t.insert(t0 + ms(1), id(2)); // due 10.001 s → 10.5 s
        assert!(t.expire(t0 + ms(9_999)).is_empty());
        assert_eq!(t.expire(t0 + ms(10_000)), [id(1)]);
        assert_eq!(t.next_deadline(), Some(t0 + ms(10_500)));
        assert!(t.expire(t0 + ms(10_499)).is_empty());
        assert_eq!(t.expire(t0 + ms(10_500)), [id(2)]);
        assert_eq!((t.len(), t.next_deadline()), (0, None));
    }

    #[test]
    fn a_late_check_expires_every_due_tick_in_deadline_order() {
        let t0 = crate::clock::now();
        let mut t = tracker();
        for n in 0..10 {
            t.insert(t0 + ms(n * 400), id(n));
        }
        let expired = t.expire(t0 + ms(60_000));
        assert_eq!(expired, (0..10).map(id).collect::<Vec<_>>());
    }

    #[test]
    fn removal_from_any_position_leaves_the_rest_due() {
        let t0 = crate::clock::now();
        let mut t = tracker();
        for n in 0..6 {
            t.insert(t0, id(n));
        }
        assert!(t.remove(id(0)) && t.remove(id(5)) && t.remove(id(3)));
        assert!(!t.remove(id(3)), "already gone");
        assert!(!t.contains(id(3)) && t.contains(id(4)));
        t.insert(t0, id(9));
        assert_eq!(t.expire(t0 + ms(10_000)), [id(1), id(2), id(4), id(9)]);
        assert!(t.is_empty() && !t.contains(id(1)));
    }

    #[test]
    fn an_extension_moves_the_deadline_later_and_never_earlier() {
        let t0 = crate::clock::now();
        let mut t = tracker();
        t.insert(t0, id(1)); // due 10 s
        t.insert(t0, id(2));
        assert!(t.extend(t0 + ms(8_000), id(1), ms(5_000)), "due 13 s");
        assert!(
            t.extend(t0 + ms(8_000), id(2), ms(1_000)),
            "9 s is earlier: kept at 10 s"
        );
        assert!(!t.extend(t0, id(3), ms(1_000)), "not tracked");
        assert_eq!(t.expire(t0 + ms(10_000)), [id(2)]);
        assert_eq!(t.next_deadline(), Some(t0 + ms(13_000)));
        assert_eq!(t.expire(t0 + ms(13_000)), [id(1)]);
        assert!(t.renew(t0 + ms(13_000), id(1), ms(2_000)));
        assert_eq!(t.expire(t0 + ms(15_000)), [id(1)]);
    }

    #[test]
    fn extending_without_a_timeout_changes_nothing() {
        let t0 = crate::clock::now();
        let mut t = UnackedTracker::untimed();
        t.insert(t0, id(1));
        assert!(t.extend(t0, id(1), ms(1)));
        assert!(t.renew(t0, id(2), ms(1)));
        assert_eq!(t.next_deadline(), None);
    }

    #[test]
    fn a_duplicate_keeps_its_first_deadline_and_counts_once() {
        let t0 = crate::clock::now();
        let mut t = tracker();
        assert!(t.insert(t0, id(1)));
        assert!(!t.insert(t0 + ms(5_000), id(1)));
        assert_eq!(t.len(), 1);
        assert_eq!(t.expire(t0 + ms(10_000)), [id(1)]);
    }

    #[test]
    fn backoff_lengthens_the_timeout_by_redelivery_count() {
        let t0 = crate::clock::now();
        let backoff = RedeliveryBackoff::new(ms(1_000), ms(4_000), 2.0).unwrap();
        let mut t = tracker().with_backoff(backoff);
        t.insert_redelivered(t0, id(1), 0); // 10 + 1 s
        t.insert_redelivered(t0, id(2), 1); // 10 + 2 s
        t.insert_redelivered(t0, id(3), 9); // 10 + 4 s (max)
        assert_eq!(t.expire(t0 + ms(11_000)), [id(1)]);
        assert_eq!(t.expire(t0 + ms(13_999)), [id(2)]);
        assert_eq!(t.expire(t0 + ms(14_000)), [id(3)]);
    }

    #[test]
    fn cumulative_removal_takes_everything_up_to_the_id() {
        let t0 = crate::clock::now();
        let mut t = tracker();
        for n in [4, 1, 7, 2] {
            t.insert(t0, id(n));
        }
        let mut covered = t.remove_up_to(id(4));
        covered.sort();
        assert_eq!(covered, [id(1), id(2), id(4)]);
        assert_eq!(t.expire(t0 + ms(10_000)), [id(7)]);
    }

    #[test]
    fn untimed_tracks_membership_only() {
        let t0 = crate::clock::now();
        let mut t = UnackedTracker::untimed();
        t.insert(t0, id(1));
        assert!(t.contains(id(1)));
        assert!(t.expire(t0 + Duration::from_secs(1 << 40)).is_empty());
        assert_eq!(t.next_deadline(), None);
        assert!(t.remove(id(1)) && t.is_empty());
    }

    #[test]
    fn clear_and_removal_return_state_but_keep_memory() {
        let t0 = crate::clock::now();
        let mut t = tracker();
        for n in 0..100 {
            t.insert(t0 + ms(n * 100), id(n));
        }
        let bytes = t.allocated_bytes();
        for n in 0..100 {
            t.remove(id(n));
        }
        assert_eq!((t.len(), t.next_deadline()), (0, None));
        for n in 0..100 {
            t.insert(t0, id(n + 100));
        }
        assert!(t.allocated_bytes() <= bytes, "freed nodes are reused");
        t.clear();
        assert_eq!((t.len(), t.next_deadline()), (0, None));
    }

    proptest::proptest! {
        /// The tracker agrees with a plain map of deadlines under any mix of
        /// inserts, removals and checks (ids from a small range, to collide).
        #[test]
        fn agrees_with_a_map_of_deadlines(ops in proptest::collection::vec((0..4_u8, 0..300_u64, 0..900_u64), 0..600)) {
            let t0 = crate::clock::now();
            let (mut now, mut t) = (t0, UnackedTracker::new(ms(1_000), ms(100)));
            t.anchor(t0);
            let mut model = std::collections::HashMap::new();
            for (op, n, dt) in ops {
                let id = MessageId::new(n % 3, n).with_batch_index((n % 5) as i32 - 1);
                match op {
                    0 => {
                        let fresh = !model.contains_key(&id);
                        if fresh {
                            // Due at the first 100 ms tick at or after now + 1 s.
                            let due = (now - t0 + ms(1_000)).as_nanos().div_ceil(100_000_000);
                            model.insert(id, due);
                        }
                        proptest::prop_assert_eq!(t.insert(now, id), fresh);
                    }
                    1 => proptest::prop_assert_eq!(t.remove(id), model.remove(&id).is_some()),
                    2 => {
                        now += ms(dt);
                        let current = (now - t0).as_nanos() / 100_000_000;
                        let mut expected: Vec<_> = model.iter().filter(|(_, d)| **d <= current).map(|(id, _)| *id).collect();
                        model.retain(|_, d| *d > current);
                        let mut expired = t.expire(now);
                        expected.sort();
                        expired.sort();
                        proptest::prop_assert_eq!(expired, expected);
                    }
                    _ => proptest::prop_assert_eq!(t.contains(id), model.contains_key(&id)),
                }
                proptest::prop_assert_eq!(t.len(), model.len());
                let next = model.values().min().map(|d| t0 + Duration::from_nanos(*d as u64 * 100_000_000));
                proptest::prop_assert_eq!(t.next_deadline(), next);
            }
        }
    }

    #[test]
    fn an_id_acked_in_time_is_never_expired_and_a_late_one_at_its_tick()
    -> Result<(), Box<dyn std::error::Error>> {
        use super::UnackedTracker;
        use crate::message_id::MessageId;
        use std::time::Duration;

        let t0 = crate::clock::now();
        let mut tracker = UnackedTracker::new(Duration::from_secs(10), Duration::from_millis(500));
        tracker.insert(t0, MessageId::new(7, 0));
        tracker.insert(t0 + Duration::from_millis(300), MessageId::new(7, 1));
        assert!(tracker.remove(MessageId::new(7, 0)), "acked in time");
        // 7:1 is due at 10.3 s, so it is requested at the 10.5 s tick.
        assert_eq!(
            tracker.next_deadline(),
            Some(t0 + Duration::from_millis(10_500))
        );
        assert!(
            tracker
                .expire(t0 + Duration::from_millis(10_499))
                .is_empty()
        );
        assert_eq!(
            tracker.expire(t0 + Duration::from_millis(10_500)),
            [MessageId::new(7, 1)]
        );
        assert!(tracker.is_empty());
        Ok(())
    }
}
