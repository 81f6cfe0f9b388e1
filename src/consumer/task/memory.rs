//! The consumer's share of the client's memory limit: the bytes
//! its receiver queues hold count against the limit the producers use
//! (Java's `memoryLimit`, shared by producers and consumers), and the
//! receiver queues of all the client's consumers together take at most
//! half of it (see `client/memory.rs`: a relay that waits for a send's
//! memory while its queue is full must still get it).
//!
//! The bytes of each partition's queue are taken when messages are queued
//! and given back when the application takes them (or a rewind, a
//! reconnect or the consumer's end drops them). A message is queued
//! whatever the budget holds (the broker sent it); what the queues' part
//! cannot cover is taken as soon as it has room again. While that part is
//! used up, a partition whose queue holds messages grants the broker no
//! more permits: its FLOWs wait here until bytes are released. A
//! partition whose queue is empty still asks, so one consumer's slow
//! application never stalls another's (the limit is then passed by at most
//! what the permits of one refill bring).

use std::future::Future;
use std::pin::Pin;

use crate::client::memory::QueueBudget;

use super::*;

/// A wait for room in the budget (one permit free), then nothing.
type Waiter = Pin<Box<dyn Future<Output = ()> + Send + Sync>>;

/// FLOWs held back while this consumer's queues use up the client's
/// memory budget (the bytes they hold are counted on the shelf, see
/// shelf.rs, where the application takes them).
pub(crate) struct MemoryShare {
    budget: Arc<QueueBudget>,
    /// FLOWs held back while at the limit: (sub index, the consumer id
    /// they are for, permits).
    withheld: WithheldFlows,
    /// Armed while FLOWs are held back and the budget is used up.
    waiter: Option<Waiter>,
}

impl std::fmt::Debug for MemoryShare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryShare")
            .field("withheld", &self.withheld)
            .finish_non_exhaustive()
    }
}

impl MemoryShare {
    /// A share of `budget` (the client's memory limit), holding nothing.
    pub(crate) fn new(budget: Arc<QueueBudget>) -> Self {
        Self {
            budget,
            withheld: Vec::new(),
            waiter: None,
        }
    }

    /// Whether FLOWs are held back.
    pub(crate) fn withholds(&self) -> bool {
        !self.withheld.is_empty()
    }

    /// Whether the budget is used up.
    pub(crate) fn reached(&self) -> bool {
        self.budget.used_up()
    }

    /// Holds back a FLOW of `permits` for `consumer` (of sub `index`)
    /// while the budget is used up and the sub's queue holds messages;
    /// false if it may go out now.
    pub(crate) fn withhold(
        &mut self,
        index: usize,
        consumer: ConsumerId,
        permits: u32,
        queue_empty: bool,
    ) -> bool {
        if queue_empty || !self.reached() {
            return false;
        }
        withhold_flow(&mut self.withheld, index, consumer, permits);
        true
    }

    /// Moves the FLOWs held back to their sub's new index (`moved(old)`),
    /// dropping those of subs freed (`None`).
    pub(crate) fn remap(&mut self, moved: impl Fn(usize) -> Option<usize>) {
        super::leave::remap_flows(&mut self.withheld, moved);
    }

    /// The FLOWs held back that may go out now: all of them once the
    /// budget has room, else those of subs whose queue is empty
    /// (`queue_empty(index)`). Arms the wait for room for what stays.
    pub(crate) fn release(&mut self, queue_empty: impl Fn(usize) -> bool) -> WithheldFlows {
        if self.withheld.is_empty() {
            self.waiter = None;
            return Vec::new();
        }
        let released = if self.reached() {
            let (go, stay) = std::mem::take(&mut self.withheld)
                .into_iter()
                .partition(|(index, _, _)| queue_empty(*index));
            self.withheld = stay;
            go
        } else {
            std::mem::take(&mut self.withheld)
        };
        if self.withheld.is_empty() {
            self.waiter = None;
        } else if self.waiter.is_none() {
            self.waiter = Some(Box::pin(self.budget.room()));
        }
        released
    }

    /// Waits until the budget has room while FLOWs are held back (pending
    /// forever otherwise); then [`release`](Self::release) lets them go.
    pub(crate) async fn room(&mut self) {
        match &mut self.waiter {
            Some(waiter) => {
                waiter.await;
                self.waiter = None;
            }
            None => std::future::pending().await,
        }
    }
}

impl Driver {
    /// Brings sub `index`'s share of the memory budget in line with what
    /// its queue holds.
    pub(super) fn sync_memory(&mut self, index: usize) {
        self.shelf.lock().sync_memory(index);
    }

    /// Brings every sub's share in line, then sends the FLOWs held back
    /// that may go out now (to subs still on the consumer id they were for).
    pub(super) async fn balance_memory(&mut self) {
        let released = {
            let mut shelved = self.shelf.lock();
            for index in 0..shelved.slots.len() {
                shelved.sync_memory(index);
            }
            let slots = &shelved.slots;
            let released = self
                .memory
                .release(|index| slots.get(index).is_none_or(|s| s.core.queued() == 0));
            shelved.flows_withheld = self.memory.withholds();
            released
        };
        self.send_withheld(released).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::Semaphore;

    /// A client memory limit of `limit` bytes whose receiver queues may
    /// take `share`: the whole limit's semaphore, and the queues' part.
    fn budget(limit: usize, share: usize) -> (Arc<Semaphore>, Arc<QueueBudget>) {
        let total = Arc::new(Semaphore::new(limit));
        let queues = Arc::new(QueueBudget::with_share(total.clone(), share));
        (total, queues)
    }

    #[test]
    fn queued_bytes_are_taken_and_given_back() {
        let (total, queues) = budget(200, 100);
        let mut share = shelf::HeldBytes::new(queues.clone());
        share.sync(0, 30);
        share.sync(2, 50);
        assert_eq!((share.total(), total.available_permits()), (80, 120));
        share.sync(0, 10);
        assert_eq!((share.total(), total.available_permits()), (60, 140));
        // Past the queues' share: they hold 130, the share covers 100.
        share.sync(2, 120);
        assert_eq!((share.total(), total.available_permits()), (100, 100));
        // What could not be covered is taken once there is room.
        share.sync(0, 0);
        share.sync(2, 120);
        assert_eq!((share.total(), total.available_permits()), (100, 100));
        assert_eq!(queues.share_free(), 0);
        share.sync(2, 30);
        assert_eq!((share.total(), total.available_permits()), (30, 170));
        drop(share);
        assert_eq!(
            total.available_permits(),
            200,
            "a dropped share gives all back"
        );
    }

    #[test]
    fn bytes_go_back_in_steps_of_an_eighth_or_all_at_once() {
        let (total, queues) = budget(1000, 1000);
        let mut share = shelf::HeldBytes::new(queues);
        share.sync(0, 800);
        share.sync(0, 750);
        assert_eq!(share.total(), 800, "50 is less than an eighth of 800");
        share.sync(0, 700);
        assert_eq!((share.total(), total.available_permits()), (700, 300));
        share.sync(0, 690);
        share.sync(0, 0);
        assert_eq!((share.total(), total.available_permits()), (0, 1000));
    }

    #[test]
    fn flows_wait_while_the_budget_is_used_up_and_the_queue_holds_messages() {
        let (_, queues) = budget(20, 10);
        let mut share = MemoryShare::new(queues.clone());
        let mut held = shelf::HeldBytes::new(queues.clone());
        let (a, b) = (ConsumerId(1), ConsumerId(2));
        assert!(!share.withhold(0, a, 5, false), "room left");
        held.sync(0, 10);
        assert!(
            share.withhold(0, a, 5, false),
            "the queues' share is used up"
        );
        assert!(share.withhold(0, a, 3, false));
        assert!(!share.withhold(1, b, 4, true), "an empty queue still asks");
        assert!(share.withhold(1, b, 4, false));
        assert_eq!(share.release(|_| false), []);
        assert!(share.waiter.is_some(), "waits for room");
        assert_eq!(share.release(|i| i == 1), [(1, b, 4)], "its queue emptied");
        held.sync(0, 8);
        assert_eq!(share.release(|_| false), [(0, a, 8)], "room again");
        assert!(share.waiter.is_none());
    }

    #[test]
    fn flows_wait_too_while_producers_hold_the_whole_limit() {
        let (total, queues) = budget(20, 10);
        let mut share = MemoryShare::new(queues.clone());
        let mut held = shelf::HeldBytes::new(queues);
        held.sync(0, 4);
        total.forget_permits(16);
        assert!(share.withhold(0, ConsumerId(1), 1, false));
    }

    #[tokio::test]
    async fn room_waits_for_a_release() {
        use futures::FutureExt;
        let (_, queues) = budget(2, 1);
        let mut share = MemoryShare::new(queues.clone());
        let mut held = shelf::HeldBytes::new(queues);
        held.sync(0, 1);
        assert!(share.withhold(0, ConsumerId(1), 1, false));
        assert!(share.release(|_| false).is_empty());
        assert!(share.room().now_or_never().is_none(), "no room yet");
        held.sync(0, 0);
        share.room().await;
        assert_eq!(share.release(|_| false).len(), 1);
    }
}
